//! `certificates.k8s.io/v1` CertificateSigningRequests as upstream's registry keeps them: the
//! requester's identity written into `spec.username`/`uid`/`groups`/`extra` on create (whatever
//! the client sent), upstream's create validation (a PEM `CERTIFICATE REQUEST` that parses,
//! usages, signer name, `expirationSeconds`, conditions) and kubectl's `CONDITION` column. No
//! approver or signer runs: a request stays `Pending` until someone writes its status.

use serde_json::{Value, json};

use crate::identity::Identity;
use crate::object::Pointer;
use crate::validation::FieldError;

/// Upstream's `certificates.KeyUsage` values, sorted as its `sets.String.List()` prints them.
pub const USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// What upstream's strategy does before a create: the requester is recorded from the request's
/// authenticated user, never from the body.
pub fn prepare_create(obj: &mut Value, who: &Identity) {
    if !obj.is_object() {
        return; // refused by validation
    }
    if !obj["spec"].is_object() {
        obj["spec"] = json!({});
    }
    let spec = &mut obj["spec"];
    spec["username"] = json!(who.user);
    if let Some(m) = spec.as_object_mut() {
        // klab's identities carry no uid or extra attributes.
        m.remove("uid");
        m.remove("extra");
        if who.groups.is_empty() {
            m.remove("groups");
        } else {
            m.insert("groups".into(), json!(who.groups));
        }
    }
}

/// Go's `%#v` of a `[]byte`, as upstream's field errors print `spec.request`.
fn go_bytes(b: &[u8]) -> Value {
    let items: Vec<String> = b.iter().map(|x| format!("0x{x:x}")).collect();
    json!({crate::validation::GO_VALUE: format!("[]byte{{{}}}", items.join(", "))})
}

/// Upstream's `ParseCSR`: the first PEM block must be a `CERTIFICATE REQUEST` holding a PKCS#10
/// request. (The request's signature is not checked.)
fn check_request(pem: &[u8]) -> Result<(), String> {
    let block = x509_parser::pem::parse_x509_pem(pem).ok().map(|(_, p)| p);
    let Some(block) = block.filter(|b| b.label == "CERTIFICATE REQUEST") else {
        return Err("PEM block type must be CERTIFICATE REQUEST".into());
    };
    use x509_parser::prelude::FromDer as _;
    x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents)
        .map(|_| ())
        .map_err(|e| format!("asn1: structure error: {e}"))
}

/// Upstream's `ValidateSignerName`.
fn check_signer_name(name: &str, errs: &mut Vec<FieldError>) {
    const F: &str = "spec.signerName";
    if name.is_empty() {
        errs.push(FieldError::required(F, ""));
        return;
    }
    let segments: Vec<&str> = name.split('/').collect();
    if segments.len() != 2 {
        errs.push(FieldError::invalid(
            F,
            json!(name),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return;
    }
    let (domain, path) = (segments[0], segments[1]);
    if domain.is_empty() {
        errs.push(FieldError::required(
            F,
            "should be a domain with at least two segments separated by dots",
        ));
    } else if !domain.contains('.') {
        errs.push(FieldError::invalid(
            F,
            json!(name),
            "should be a domain with at least two segments separated by dots",
        ));
    } else {
        for e in klab_api::selector::is_dns1123_subdomain(domain) {
            errs.push(FieldError::invalid(F, json!(name), e));
        }
    }
    if path.is_empty() {
        errs.push(FieldError::required(
            F,
            "validating path: must not be empty",
        ));
    }
}

/// Upstream's create validation of a CertificateSigningRequest's spec and status, in its order.
pub fn validate(obj: &Value, errs: &mut Vec<FieldError>) {
    use base64::Engine as _;
    let spec = &obj["spec"];
    let request = spec["request"]
        .as_str()
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        .unwrap_or_default();
    if let Err(e) = check_request(&request) {
        errs.push(FieldError::invalid("spec.request", go_bytes(&request), e));
    }
    let usages: Vec<&str> = spec["usages"]
        .as_array()
        .map(|a| a.iter().map(|u| u.as_str().unwrap_or("")).collect())
        .unwrap_or_default();
    if usages.is_empty() {
        errs.push(FieldError::required("spec.usages", ""));
    }
    for (i, u) in usages.iter().enumerate() {
        if !USAGES.contains(u) {
            errs.push(FieldError::not_supported(
                format!("spec.usages[{i}]"),
                json!(u),
                USAGES,
            ));
        }
    }
    for (i, u) in usages.iter().enumerate() {
        if usages[..i].contains(u) {
            errs.push(FieldError::duplicate(format!("spec.usages[{i}]"), json!(u)));
        }
    }
    let signer = spec["signerName"].as_str().unwrap_or("");
    if signer == "kubernetes.io/legacy-unknown" {
        errs.push(FieldError::invalid(
            "spec.signerName",
            json!(signer),
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        check_signer_name(signer, errs);
    }
    if let Some(secs) = spec["expirationSeconds"].as_i64()
        && secs < 600
    {
        errs.push(FieldError::invalid(
            "spec.expirationSeconds",
            json!(secs),
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    let conditions = obj
        .at("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let (mut approved, mut denied) = (false, false);
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in conditions.iter().enumerate() {
        let t = c["type"].as_str().unwrap_or("");
        let status = c["status"].as_str().unwrap_or("");
        if t.is_empty() {
            errs.push(FieldError::required(
                format!("status.conditions[{i}].type"),
                "",
            ));
        }
        let allowed: &[&str] = if matches!(t, "Approved" | "Denied" | "Failed") {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        if status.is_empty() {
            errs.push(FieldError::required(
                format!("status.conditions[{i}].status"),
                "",
            ));
        } else if !allowed.contains(&status) {
            errs.push(FieldError::not_supported(
                format!("status.conditions[{i}].status"),
                json!(status),
                allowed,
            ));
        }
        let both = match t {
            "Approved" => {
                approved = true;
                denied
            }
            "Denied" => {
                denied = true;
                approved
            }
            _ => false,
        };
        if both {
            errs.push(FieldError::invalid(
                format!("status.conditions[{i}].type"),
                json!(t),
                "Approved and Denied conditions are mutually exclusive",
            ));
        }
        if seen.contains(&t) {
            errs.push(FieldError::duplicate(
                format!("status.conditions[{i}].type"),
                json!(t),
            ));
        }
        seen.push(t);
    }
}

/// kubectl's `CONDITION` column (upstream's `extractCSRStatus`).
pub fn condition(obj: &Value) -> String {
    let types: Vec<&str> = obj
        .at("/status/conditions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|c| c["type"].as_str()).collect())
        .unwrap_or_default();
    let mut s = if types.contains(&"Denied") {
        "Denied".to_string()
    } else if types.contains(&"Approved") {
        "Approved".to_string()
    } else {
        "Pending".to_string()
    };
    if types.contains(&"Failed") {
        s.push_str(",Failed");
    }
    if obj
        .at("/status/certificate")
        .and_then(Value::as_str)
        .is_some_and(|c| !c.is_empty())
    {
        s.push_str(",Issued");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    /// A real PKCS#10 request (rcgen-made, for `system:node:n9` in `system:nodes`).
    fn pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "system:node:n9");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:nodes");
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    fn csr(request: &str, usages: Value, signer: &str) -> Value {
        json!({
            "metadata": {"name": "node-csr-1"},
            "spec": {
                "request": base64::engine::general_purpose::STANDARD.encode(request),
                "usages": usages,
                "signerName": signer,
            }
        })
    }

    fn messages(obj: &Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate(obj, &mut errs);
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn a_node_client_request_is_valid() {
        let ok = csr(
            &pem(),
            json!(["digital signature", "client auth"]),
            "kubernetes.io/kube-apiserver-client-kubelet",
        );
        assert_eq!(messages(&ok), Vec::<String>::new());
    }

    #[test]
    fn upstream_refusals() {
        let good = pem();
        let signer = "kubernetes.io/kube-apiserver-client";
        let cases: Vec<(Value, &str)> = vec![
            (
                csr("hi", json!(["client auth"]), signer),
                "spec.request: Invalid value: []byte{0x68, 0x69}: PEM block type must be CERTIFICATE REQUEST",
            ),
            (
                csr(
                    &good.replace("CERTIFICATE REQUEST", "CERTIFICATE"),
                    json!(["client auth"]),
                    signer,
                ),
                "PEM block type must be CERTIFICATE REQUEST",
            ),
            (
                csr(
                    "-----BEGIN CERTIFICATE REQUEST-----\naGk=\n-----END CERTIFICATE REQUEST-----\n",
                    json!(["client auth"]),
                    signer,
                ),
                "spec.request: Invalid value: []byte{0x2d, ",
            ),
            (csr(&good, json!([]), signer), "spec.usages: Required value"),
            (
                csr(&good, json!(["client auth", "flying"]), signer),
                "spec.usages[1]: Unsupported value: \"flying\": supported values: \"any\", \"cert sign\", ",
            ),
            (
                csr(&good, json!(["client auth", "client auth"]), signer),
                "spec.usages[1]: Duplicate value: \"client auth\"",
            ),
            (
                csr(&good, json!(["client auth"]), ""),
                "spec.signerName: Required value",
            ),
            (
                csr(&good, json!(["client auth"]), "kubernetes.io"),
                "spec.signerName: Invalid value: \"kubernetes.io\": must be a fully qualified domain and path of the form 'example.com/signer-name'",
            ),
            (
                csr(
                    &good,
                    json!(["client auth"]),
                    "kubernetes.io/legacy-unknown",
                ),
                "the legacy signerName is not allowed via this API version",
            ),
            (
                {
                    let mut o = csr(&good, json!(["client auth"]), signer);
                    o["spec"]["expirationSeconds"] = json!(599);
                    o
                },
                "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)",
            ),
            (
                {
                    let mut o = csr(&good, json!(["client auth"]), signer);
                    o["status"] = json!({"conditions": [
                        {"type": "Approved", "status": "True"},
                        {"type": "Denied", "status": "True"}
                    ]});
                    o
                },
                "status.conditions[1].type: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive",
            ),
            (
                {
                    let mut o = csr(&good, json!(["client auth"]), signer);
                    o["status"] = json!({"conditions": [{"type": "Approved", "status": "False"}]});
                    o
                },
                "status.conditions[0].status: Unsupported value: \"False\": supported values: \"True\"",
            ),
        ];
        for (obj, want) in cases {
            let got = messages(&obj);
            assert!(
                got.iter().any(|m| m.contains(want)),
                "want {want:?} in {got:?}"
            );
        }
        // No body at all: each required field named, nothing panics.
        let got = messages(&json!({}));
        assert!(
            got.iter()
                .any(|m| m.contains("spec.usages: Required value")),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|m| m.contains("spec.signerName: Required value")),
            "{got:?}"
        );
    }

    #[test]
    fn the_requester_comes_from_the_request_not_the_body() {
        let mut obj = json!({"spec": {"username": "system:admin", "uid": "x", "groups": ["system:masters"], "extra": {"a": ["b"]}}});
        let who = Identity::new(
            "system:bootstrap:abcdef",
            &["system:bootstrappers", "system:authenticated"],
        );
        prepare_create(&mut obj, &who);
        assert_eq!(
            obj["spec"],
            json!({"username": "system:bootstrap:abcdef", "groups": ["system:bootstrappers", "system:authenticated"]})
        );
        let mut obj = json!({});
        prepare_create(&mut obj, &who);
        assert_eq!(obj["spec"]["username"], "system:bootstrap:abcdef");
    }

    #[test]
    fn the_condition_column() {
        let with = |conds: Value, cert: &str| json!({"status": {"conditions": conds, "certificate": cert}});
        assert_eq!(condition(&json!({})), "Pending");
        assert_eq!(
            condition(&with(json!([{"type": "Approved"}]), "")),
            "Approved"
        );
        assert_eq!(
            condition(&with(json!([{"type": "Approved"}]), "Y2VydA==")),
            "Approved,Issued"
        );
        assert_eq!(
            condition(&with(json!([{"type": "Denied"}, {"type": "Approved"}]), "")),
            "Denied"
        );
        assert_eq!(
            condition(&with(json!([{"type": "Approved"}, {"type": "Failed"}]), "")),
            "Approved,Failed"
        );
    }
}
