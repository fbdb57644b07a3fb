//! What a namespace must hold (pure): the `default` ServiceAccount (upstream's
//! serviceaccounts-controller) and, when the cluster has a CA, the `kube-root-ca.crt` ConfigMap
//! (upstream's root-ca-cert-publisher). Both are put back when deleted; neither is created in a
//! namespace that is going away.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

/// The ServiceAccount every namespace gets.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// The ConfigMap that carries the cluster CA into every namespace.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// Its annotation (upstream's `DescriptionAnnotation` / `Description`).
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// Whether the namespace may get new content: it exists and is not being deleted (upstream
/// skips namespaces whose phase is not Active).
pub fn accepts_content(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_none()
        && ns.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Terminating")
}

/// What to do about the root CA ConfigMap of one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCa {
    Nothing,
    Create(BTreeMap<String, String>),
    /// Data (and the description) put back on the existing object.
    Update(BTreeMap<String, String>),
}

/// The root CA ConfigMap's wanted data against what exists.
pub fn root_ca(ca_pem: Option<&str>, existing: Option<&ConfigMap>) -> RootCa {
    let Some(pem) = ca_pem else {
        return RootCa::Nothing;
    };
    let want: BTreeMap<String, String> = [("ca.crt".to_string(), pem.to_string())].into();
    match existing {
        None => RootCa::Create(want),
        Some(cm) => {
            let described = cm
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
                .is_some_and(|d| d == DESCRIPTION);
            if cm.data.as_ref() == Some(&want) && described && cm.binary_data.is_none() {
                RootCa::Nothing
            } else {
                RootCa::Update(want)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NamespaceStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn ns(phase: &str, deleting: bool) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some("x".into()),
                deletion_timestamp: deleting.then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            status: Some(NamespaceStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn only_active_namespaces_get_content() {
        assert!(accepts_content(&ns("Active", false)));
        assert!(!accepts_content(&ns("Terminating", false)));
        assert!(!accepts_content(&ns("Active", true)));
    }

    #[test]
    fn the_root_ca_is_created_repaired_or_left() {
        assert_eq!(root_ca(None, None), RootCa::Nothing);
        let RootCa::Create(d) = root_ca(Some("PEM"), None) else {
            panic!("created")
        };
        assert_eq!(d["ca.crt"], "PEM");
        let mut cm = ConfigMap {
            data: Some(d.clone()),
            ..Default::default()
        };
        // The description is missing: put back.
        assert_eq!(root_ca(Some("PEM"), Some(&cm)), RootCa::Update(d.clone()));
        cm.metadata.annotations =
            Some([(DESCRIPTION_ANNOTATION.to_string(), DESCRIPTION.to_string())].into());
        assert_eq!(root_ca(Some("PEM"), Some(&cm)), RootCa::Nothing);
        // Edited data is put back.
        cm.data = Some([("ca.crt".to_string(), "other".to_string())].into());
        assert!(matches!(root_ca(Some("PEM"), Some(&cm)), RootCa::Update(_)));
    }
}
