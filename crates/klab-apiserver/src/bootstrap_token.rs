//! Bootstrap tokens, as upstream's bootstrap token authenticator (kube-apiserver
//! `--enable-bootstrap-token-auth`, which kubeadm turns on): a bearer token `<id>.<secret>` is
//! checked against the Secret `kube-system/bootstrap-token-<id>` of type
//! `bootstrap.kubernetes.io/token`, and names the user `system:bootstrap:<id>` in
//! `system:bootstrappers` plus the token's `auth-extra-groups`. The decision is pure
//! ([`decide`]); the server's bearer layer loads the Secret.

use jiff::Timestamp;
use serde_json::Value;

use crate::identity::Identity;
use crate::object::Pointer;

/// The Secret type a bootstrap token lives in.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// The Secret's name is this prefix and the token's id.
pub const SECRET_PREFIX: &str = "bootstrap-token-";
/// The namespace the Secrets are looked up in.
pub const NAMESPACE: &str = "kube-system";
/// Every bootstrap token's user is in this group.
pub const DEFAULT_GROUP: &str = "system:bootstrappers";
/// The user is this prefix and the token's id.
pub const USER_PREFIX: &str = "system:bootstrap:";

/// Splits `<id>.<secret>` as upstream's `[a-z0-9]{6}\.[a-z0-9]{16}`; anything else is not a
/// bootstrap token (and is left to the other authenticators).
pub fn parse(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

/// The name of the Secret holding the token with this id.
pub fn secret_name(id: &str) -> String {
    format!("{SECRET_PREFIX}{id}")
}

/// A key of the Secret's `data`, decoded (absent or not base64: empty, as upstream's `GetData`
/// finds nothing).
fn data(secret: &Value, key: &str) -> String {
    use base64::Engine as _;
    secret
        .at(&format!("/data/{key}"))
        .and_then(Value::as_str)
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default()
}

/// Whether the token has expired at `now`: an `expiration` that does not parse as RFC 3339
/// counts as expired, as upstream's `GetExpiration`; none never expires.
pub fn expired(secret: &Value, now: Timestamp) -> bool {
    let exp = data(secret, "expiration");
    if exp.is_empty() {
        return false;
    }
    match exp.parse::<Timestamp>() {
        Ok(t) => t <= now,
        Err(_) => true,
    }
}

/// `auth-extra-groups`: each must be `system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]`; the
/// result is `system:bootstrappers` and the extras, deduplicated and sorted.
fn groups(secret: &Value) -> Result<Vec<String>, String> {
    let mut groups = std::collections::BTreeSet::from([DEFAULT_GROUP.to_string()]);
    let extra = data(secret, "auth-extra-groups");
    if extra.is_empty() {
        return Ok(groups.into_iter().collect());
    }
    for g in extra.split(',') {
        let rest = g.strip_prefix("system:bootstrappers:").unwrap_or("");
        let valid = !rest.is_empty()
            && rest.len() <= 256
            && rest
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b':' || b == b'-')
            && rest
                .bytes()
                .last()
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !valid {
            return Err(format!(
                "bootstrap group {g:?} is invalid (must match \\Asystem:bootstrappers:[a-z0-9:-]{{0,255}}[a-z0-9]\\z)"
            ));
        }
        groups.insert(g.to_string());
    }
    Ok(groups.into_iter().collect())
}

/// Compares without stopping at the first difference, as upstream's `ConstantTimeCompare`.
fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Upstream's checks, in its order, of a token `<id>.<secret>` against the Secret named after
/// its id: the user, or why the token is refused (upstream logs it; the client sees a 401).
pub fn decide(
    id: &str,
    token_secret: &str,
    secret: &Value,
    now: Timestamp,
) -> Result<Identity, String> {
    let name = secret_name(id);
    let refuse = |why: &str| Err(format!("bootstrap secret {NAMESPACE}/{name} {why}"));
    if secret.at("/metadata/deletionTimestamp").is_some() {
        return refuse("is deleted and awaiting removal");
    }
    if secret["type"].as_str() != Some(SECRET_TYPE) || !secret["data"].is_object() {
        return refuse(&format!("has invalid type, expected {SECRET_TYPE}."));
    }
    if !equal(
        data(secret, "token-secret").as_bytes(),
        token_secret.as_bytes(),
    ) {
        return refuse("has invalid value for key token-secret.");
    }
    if data(secret, "token-id") != id {
        return refuse("has invalid value for key token-id.");
    }
    if expired(secret, now) {
        return refuse("has expired.");
    }
    if data(secret, "usage-bootstrap-authentication") != "true" {
        return refuse("not marked usage-bootstrap-authentication=true.");
    }
    let mut groups = match groups(secret) {
        Ok(g) => g,
        Err(e) => {
            return refuse(&format!(
                "has invalid value for key auth-extra-groups: {e}."
            ));
        }
    };
    // The authenticator chain adds everyone authenticated to this group.
    groups.push("system:authenticated".to_string());
    Ok(Identity {
        user: format!("{USER_PREFIX}{id}"),
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use serde_json::json;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn now() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    /// A valid Secret for `abcdef.0123456789abcdef` with the given extra data entries.
    fn secret(extra: &[(&str, &str)]) -> Value {
        let mut data = serde_json::Map::new();
        for (k, v) in [
            ("token-id", "abcdef"),
            ("token-secret", "0123456789abcdef"),
            ("usage-bootstrap-authentication", "true"),
        ]
        .iter()
        .chain(extra)
        {
            data.insert(k.to_string(), json!(b64(v)));
        }
        json!({
            "metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
            "type": SECRET_TYPE,
            "data": data,
        })
    }

    #[test]
    fn tokens_parse_only_in_upstream_shape() {
        assert_eq!(
            parse("abcdef.0123456789abcdef"),
            Some(("abcdef", "0123456789abcdef"))
        );
        for bad in [
            "",
            ".",
            "abcdef",
            "abcdef.",
            "ABCDEF.0123456789abcdef",
            "abcde.0123456789abcdef",
            "abcdefg.0123456789abcdef",
            "abcdef.0123456789abcde",
            "abcdef.0123456789abcdef0",
            "abcdef.0123456789abcdeF",
            "abcdef:0123456789abcdef",
            "abcdef.0123456789abcd.f",
            "abc_ef.0123456789abcdef",
            "abcdéf.0123456789abcdef",
            "eyJhbGciOiJFZERTQSJ9.e30.c2ln",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        assert_eq!(secret_name("abcdef"), "bootstrap-token-abcdef");
    }

    #[test]
    fn a_valid_token_names_its_bootstrap_user() {
        let id = decide("abcdef", "0123456789abcdef", &secret(&[]), now()).unwrap();
        assert_eq!(id.user, "system:bootstrap:abcdef");
        assert_eq!(id.groups, ["system:bootstrappers", "system:authenticated"]);
        // Extra groups: validated, deduplicated and sorted with the default group.
        let s = secret(&[(
            "auth-extra-groups",
            "system:bootstrappers:worker,system:bootstrappers:kubeadm:default-node-token,system:bootstrappers:worker",
        )]);
        let id = decide("abcdef", "0123456789abcdef", &s, now()).unwrap();
        assert_eq!(
            id.groups,
            [
                "system:bootstrappers",
                "system:bootstrappers:kubeadm:default-node-token",
                "system:bootstrappers:worker",
                "system:authenticated"
            ]
        );
        // An expiration still ahead is fine.
        let s = secret(&[("expiration", "2026-01-01T00:00:01Z")]);
        assert!(decide("abcdef", "0123456789abcdef", &s, now()).is_ok());
    }

    #[test]
    fn refusals_in_upstream_order_with_their_reasons() {
        let deleted = {
            let mut s = secret(&[]);
            s["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            s
        };
        let wrong_type = {
            let mut s = secret(&[]);
            s["type"] = json!("Opaque");
            s
        };
        let no_data = {
            let mut s = secret(&[]);
            s.as_object_mut().unwrap().remove("data");
            s
        };
        let wrong_id = secret(&[("token-id", "zzzzzz")]);
        let cases: Vec<(&str, Value, &str, &str)> = vec![
            (
                "deleted",
                deleted,
                "0123456789abcdef",
                "is deleted and awaiting removal",
            ),
            (
                "type",
                wrong_type,
                "0123456789abcdef",
                "has invalid type, expected bootstrap.kubernetes.io/token.",
            ),
            (
                "no data",
                no_data,
                "0123456789abcdef",
                "has invalid type, expected bootstrap.kubernetes.io/token.",
            ),
            (
                "secret",
                secret(&[]),
                "0123456789abcdee",
                "has invalid value for key token-secret.",
            ),
            (
                "id",
                wrong_id,
                "0123456789abcdef",
                "has invalid value for key token-id.",
            ),
            (
                "expired now",
                secret(&[("expiration", "2026-01-01T00:00:00Z")]),
                "0123456789abcdef",
                "has expired.",
            ),
            (
                "expired",
                secret(&[("expiration", "2025-12-31T23:59:59Z")]),
                "0123456789abcdef",
                "has expired.",
            ),
            (
                "unparseable expiration",
                secret(&[("expiration", "tomorrow")]),
                "0123456789abcdef",
                "has expired.",
            ),
            (
                "usage false",
                secret(&[("usage-bootstrap-authentication", "false")]),
                "0123456789abcdef",
                "not marked usage-bootstrap-authentication=true.",
            ),
            (
                "usage TRUE",
                secret(&[("usage-bootstrap-authentication", "TRUE")]),
                "0123456789abcdef",
                "not marked usage-bootstrap-authentication=true.",
            ),
            (
                "group",
                secret(&[("auth-extra-groups", "system:masters")]),
                "0123456789abcdef",
                "has invalid value for key auth-extra-groups",
            ),
            (
                "group end",
                secret(&[("auth-extra-groups", "system:bootstrappers:a-")]),
                "0123456789abcdef",
                "has invalid value for key auth-extra-groups",
            ),
            (
                "group empty",
                secret(&[("auth-extra-groups", "system:bootstrappers:")]),
                "0123456789abcdef",
                "has invalid value for key auth-extra-groups",
            ),
            (
                "group space",
                secret(&[(
                    "auth-extra-groups",
                    "system:bootstrappers:a, system:bootstrappers:b",
                )]),
                "0123456789abcdef",
                "has invalid value for key auth-extra-groups",
            ),
        ];
        for (what, s, token_secret, want) in cases {
            let got = decide("abcdef", token_secret, &s, now()).unwrap_err();
            assert!(
                got.starts_with("bootstrap secret kube-system/bootstrap-token-abcdef ")
                    && got.contains(want),
                "{what}: {got}"
            );
        }
        // A secret value that is not base64 reads as empty, so it matches no token.
        let mut s = secret(&[]);
        s["data"]["token-secret"] = json!("!!!");
        assert!(decide("abcdef", "0123456789abcdef", &s, now()).is_err());
    }
}
