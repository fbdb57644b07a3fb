//! The authorizer: who may do what. klab serves every authenticated request (upstream's
//! `--authorization-mode=AlwaysAllow`); this module is the one place that says so, and the access
//! reviews (`kubectl auth can-i`) ask it, so their answers are the server's real decisions and
//! stay true when RBAC replaces the rule here.

use serde_json::{Value, json};

use crate::identity::Identity;

/// What a request (or an access review) asks to do: upstream's `authorizer.Attributes`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    pub user: String,
    pub groups: Vec<String>,
    pub verb: String,
    /// A resource request (`namespace`, `group`, `resource`, …) or a non-resource one (`path`).
    pub resource_request: bool,
    pub namespace: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    pub path: String,
}

/// An authorizer's answer: upstream's `Decision` with its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// An explicit deny (no other authorizer may allow).
    pub denied: bool,
    pub reason: String,
}

/// Decides one request. Every authenticated user is allowed; anonymous users reach only what the
/// TLS server lets through without credentials (health and version), so they are allowed too.
pub fn authorize(_attrs: &Attributes) -> Decision {
    Decision {
        allowed: true,
        denied: false,
        reason: String::new(),
    }
}

/// What `identity` may do in `namespace`, as a SelfSubjectRulesReview status (`kubectl auth can-i
/// --list`): under AlwaysAllow, everything.
pub fn rules_review_status(_identity: &Identity, _namespace: &str) -> Value {
    json!({
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        "incomplete": false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_is_allowed_without_a_reason() {
        let d = authorize(&Attributes {
            user: "alice".into(),
            verb: "delete".into(),
            resource_request: true,
            resource: "nodes".into(),
            ..Default::default()
        });
        assert!(d.allowed && !d.denied);
        assert_eq!(d.reason, "");
        let r = rules_review_status(&Identity::admin(), "default");
        assert_eq!(r["resourceRules"][0]["verbs"], json!(["*"]));
        assert_eq!(r["incomplete"], json!(false));
    }
}
