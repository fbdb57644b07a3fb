//! The index functions controllers share, named as upstream names them (client-go indexers in
//! `pkg/controller`): objects by their controller's UID (orphans filed per namespace, so that an
//! owner can find adoption candidates without scanning), and pods by node.

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;

/// Index of objects by the UID of their controllerRef (`controllerUID` upstream).
pub const CONTROLLER_UID: &str = "controllerUID";

/// Index of pods by `spec.nodeName` (upstream's `spec.nodeName` trigger/indexer).
pub const POD_NODE_NAME: &str = "spec.nodeName";

/// The index value under which objects without a controller are filed, per namespace (upstream
/// `OrphanPodIndexKeyForNamespace`).
pub fn orphan_key(namespace: &str) -> String {
    format!("_ORPHAN_POD/{namespace}")
}

/// `controllerUID`: the controller's UID, or the namespace's orphan key for an object without one.
pub fn controller_uid<K: Resource>(obj: &K) -> Vec<String> {
    let meta = obj.meta();
    match meta
        .owner_references
        .as_ref()
        .and_then(|refs| refs.iter().find(|r| r.controller == Some(true)))
    {
        Some(r) => vec![r.uid.clone()],
        None => vec![orphan_key(meta.namespace.as_deref().unwrap_or_default())],
    }
}

/// `spec.nodeName`: the node a pod is bound to (unbound pods are not filed).
pub fn pod_node_name(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())
        .into_iter()
        .collect()
}
