//! Service-account tokens: TokenRequest (`kubectl create token`), their verification as bearer
//! credentials and TokenReview. Tokens are JWTs shaped as upstream's (issuer, audiences, the
//! `kubernetes.io` claim with the namespace, service account and bound object, `jti`), signed
//! with Ed25519 (`alg: EdDSA`): its signatures are deterministic, so a sim run stays a function of
//! its seed. The signing key is drawn once from the run's random source and kept in the store
//! (`/registry/klab/serviceaccount-signing-key`), so tokens stay valid across restarts of a
//! durable cluster.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{self, Ed25519KeyPair, KeyPair};
use serde_json::{Value, json};

use klab_api::DetRng;
use klab_store::DynStorage;

use crate::identity::Identity;
use crate::{ApiError, ApiResult};

/// Where the signing key's seed is kept (outside every resource prefix, so no list or watch
/// sees it).
pub const KEY_PATH: &str = "/registry/klab/serviceaccount-signing-key";

/// The issuer and default audience (`--service-account-issuer`, `--api-audiences`).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// TokenRequest's bounds (`ValidateTokenRequest`).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// `expirationSeconds` when the request leaves it out (v1 defaulting).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// The key tokens are signed and checked with.
pub struct Signer {
    key: Ed25519KeyPair,
    kid: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("kid", &self.kid).finish()
    }
}

impl Signer {
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let key = Ed25519KeyPair::from_seed_unchecked(seed)
            .unwrap_or_else(|_| unreachable!("any 32 bytes are an Ed25519 seed"));
        // Upstream's key id: the base64url SHA-256 of the public key's SubjectPublicKeyInfo.
        let mut spki = vec![
            0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
        ];
        spki.extend_from_slice(key.public_key().as_ref());
        let kid = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, &spki));
        Signer { key, kid }
    }

    /// The cluster's key: read from the store, or drawn from `rng` and stored on first start.
    pub async fn load_or_create(store: &DynStorage, rng: &DetRng) -> ApiResult<Self> {
        if let Some(kv) = store.get(KEY_PATH).await?
            && let Ok(seed) = <[u8; 32]>::try_from(kv.value.as_ref())
        {
            return Ok(Signer::from_seed(&seed));
        }
        let mut seed = [0u8; 32];
        for chunk in seed.chunks_mut(8) {
            chunk.copy_from_slice(&rng.range(0, u64::MAX).to_le_bytes());
        }
        match store
            .create(KEY_PATH, bytes::Bytes::copy_from_slice(&seed))
            .await
        {
            Ok(_) => Ok(Signer::from_seed(&seed)),
            // Another server over the same store made one first: use that.
            Err(klab_store::StoreError::AlreadyExists(_)) => {
                let kv = store
                    .get(KEY_PATH)
                    .await?
                    .ok_or_else(|| ApiError::internal("signing key vanished"))?;
                let seed = <[u8; 32]>::try_from(kv.value.as_ref())
                    .map_err(|_| ApiError::internal("malformed signing key"))?;
                Ok(Signer::from_seed(&seed))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A signed JWT carrying `claims`.
    pub fn sign(&self, claims: &Value) -> String {
        let header = json!({"alg": "EdDSA", "kid": self.kid});
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let sig = self.key.sign(signing_input.as_bytes());
        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
    }

    /// The claims of a token this key signed, if its signature holds and it is current at
    /// `now_unix` (seconds). Any malformation is simply "not ours".
    pub fn verify(&self, token: &str, now_unix: i64) -> Option<Value> {
        let mut parts = token.split('.');
        let (h, p, s) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(h).ok()?).ok()?;
        if header.get("alg")? != "EdDSA" || header.get("kid")? != self.kid.as_str() {
            return None;
        }
        let sig = URL_SAFE_NO_PAD.decode(s).ok()?;
        signature::UnparsedPublicKey::new(&signature::ED25519, self.key.public_key().as_ref())
            .verify(format!("{h}.{p}").as_bytes(), &sig)
            .ok()?;
        let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).ok()?).ok()?;
        if claims.get("iss")? != ISSUER {
            return None;
        }
        let exp = claims.get("exp")?.as_i64()?;
        let nbf = claims
            .get("nbf")
            .and_then(Value::as_i64)
            .unwrap_or(i64::MIN);
        if now_unix >= exp || now_unix < nbf {
            return None;
        }
        Some(claims)
    }
}

/// What a service-account token says about its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSubject {
    pub namespace: String,
    pub service_account: String,
    pub service_account_uid: String,
    /// The object the token is bound to: (kind, name, uid).
    pub bound: Option<(String, String, String)>,
    pub audiences: Vec<String>,
}

impl TokenSubject {
    pub fn from_claims(claims: &Value) -> Option<Self> {
        let k = claims.get("kubernetes.io")?;
        let sa = k.get("serviceaccount")?;
        let bound = ["pod", "secret", "node"].iter().find_map(|kind| {
            let o = k.get(*kind)?;
            Some((
                match *kind {
                    "pod" => "Pod",
                    "secret" => "Secret",
                    _ => "Node",
                }
                .to_string(),
                o.get("name")?.as_str()?.to_string(),
                o.get("uid")?.as_str()?.to_string(),
            ))
        });
        let audiences = match claims.get("aud") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect(),
            _ => Vec::new(),
        };
        Some(TokenSubject {
            namespace: k.get("namespace")?.as_str()?.to_string(),
            service_account: sa.get("name")?.as_str()?.to_string(),
            service_account_uid: sa.get("uid")?.as_str()?.to_string(),
            bound,
            audiences,
        })
    }

    /// The user a valid token authenticates as (upstream's service-account authenticator).
    pub fn identity(&self) -> Identity {
        let ns_group = format!("system:serviceaccounts:{}", self.namespace);
        Identity::new(
            format!(
                "system:serviceaccount:{}:{}",
                self.namespace, self.service_account
            ),
            &["system:serviceaccounts", &ns_group, "system:authenticated"],
        )
    }
}

/// The claims of a new token (upstream's `serviceaccount.Claims` + `jti`).
#[allow(clippy::too_many_arguments)]
pub fn claims(
    namespace: &str,
    sa_name: &str,
    sa_uid: &str,
    bound: Option<(&str, &str, &str)>,
    node: Option<(&str, &str)>,
    audiences: &[String],
    now_unix: i64,
    expiration_seconds: i64,
    jti: &str,
) -> Value {
    let mut k = json!({
        "namespace": namespace,
        "serviceaccount": {"name": sa_name, "uid": sa_uid},
    });
    if let Some((kind, name, uid)) = bound {
        let key = kind.to_ascii_lowercase();
        k[key] = json!({"name": name, "uid": uid});
    }
    if let Some((name, uid)) = node {
        k["node"] = json!({"name": name, "uid": uid});
    }
    json!({
        "aud": audiences,
        "exp": now_unix.saturating_add(expiration_seconds),
        "iat": now_unix,
        "iss": ISSUER,
        "jti": jti,
        "kubernetes.io": k,
        "nbf": now_unix,
        "sub": format!("system:serviceaccount:{namespace}:{sa_name}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> Signer {
        Signer::from_seed(&[7u8; 32])
    }

    #[test]
    fn a_signed_token_verifies_until_it_expires() {
        let s = signer();
        let c = claims(
            "default",
            "robot",
            "u-1",
            None,
            None,
            &[ISSUER.to_string()],
            1000,
            600,
            "j",
        );
        let t = s.sign(&c);
        assert_eq!(t.split('.').count(), 3);
        let got = s.verify(&t, 1000).expect("valid now");
        let subj = TokenSubject::from_claims(&got).unwrap();
        assert_eq!(subj.service_account, "robot");
        assert_eq!(subj.identity().user, "system:serviceaccount:default:robot");
        assert_eq!(
            subj.identity().groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:default",
                "system:authenticated"
            ]
        );
        assert!(s.verify(&t, 1599).is_some());
        assert!(s.verify(&t, 1600).is_none(), "expired at exp");
        assert!(s.verify(&t, 999).is_none(), "not before nbf");
    }

    #[test]
    fn tampered_or_foreign_tokens_are_refused() {
        let s = signer();
        let c = claims("a", "b", "u", None, None, &[], 0, 600, "j");
        let t = s.sign(&c);
        // Another key's token.
        let other = Signer::from_seed(&[8u8; 32]).sign(&c);
        assert!(s.verify(&other, 1).is_none());
        // Claims swapped under the same signature.
        let forged = claims("kube-system", "b", "u", None, None, &[], 0, 600, "j");
        let mut parts: Vec<&str> = t.split('.').collect();
        let p = URL_SAFE_NO_PAD.encode(forged.to_string());
        parts[1] = &p;
        assert!(s.verify(&parts.join("."), 1).is_none());
        for junk in ["", "a.b", "a.b.c.d", "....", "x.y.z"] {
            assert!(s.verify(junk, 1).is_none(), "{junk}");
        }
    }

    #[test]
    fn bound_tokens_name_their_object() {
        let c = claims(
            "default",
            "sa",
            "u",
            Some(("Pod", "web-0", "p-1")),
            Some(("n1", "n-1")),
            &["api".into()],
            0,
            3600,
            "j",
        );
        assert_eq!(c["kubernetes.io"]["pod"]["name"], "web-0");
        assert_eq!(c["kubernetes.io"]["node"]["uid"], "n-1");
        let s = TokenSubject::from_claims(&c).unwrap();
        assert_eq!(s.bound, Some(("Pod".into(), "web-0".into(), "p-1".into())));
        assert_eq!(s.audiences, ["api"]);
    }
}
