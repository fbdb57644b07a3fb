//! Who made a request. The in-process transport attaches it as a request extension per component
//! (`system:node:<name>`, `system:kube-controller-manager`, …); the TLS server derives it from the
//! client certificate. Admission (NodeRestriction, later) reads it.

/// An authenticated user: name and groups, as in a Kubernetes `UserInfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
}

impl Identity {
    pub fn new(user: impl Into<String>, groups: &[&str]) -> Self {
        Identity {
            user: user.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    /// The cluster administrator (`system:masters`).
    pub fn admin() -> Self {
        Identity::new(
            "kubernetes-admin",
            &["system:masters", "system:authenticated"],
        )
    }

    /// A kubelet's identity, as its client certificate would carry it.
    pub fn node(name: &str) -> Self {
        Identity::new(
            format!("system:node:{name}"),
            &["system:nodes", "system:authenticated"],
        )
    }

    /// A control-plane component (`system:kube-controller-manager`, `system:kube-scheduler`).
    pub fn component(name: &str) -> Self {
        Identity::new(format!("system:{name}"), &["system:authenticated"])
    }

    /// The node name if this is a kubelet identity.
    pub fn node_name(&self) -> Option<&str> {
        self.user.strip_prefix("system:node:")
    }
}
