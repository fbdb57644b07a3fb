//! The index functions controllers share, named as upstream names them (client-go indexers in
//! `pkg/controller`): objects by their controller's UID (orphans filed per namespace, so that an
//! owner can find adoption candidates without scanning), and pods by node.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;

use crate::informer::SharedInformer;

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

/// Objects of `ns` filed under any of `values` of the controllerUID index, in name order:
/// an owner's own objects (and, with its namespace's orphan key, its adoption candidates).
pub fn owned_in_namespace<K>(
    informer: &SharedInformer<K>,
    ns: &str,
    values: &[String],
) -> Vec<Arc<K>>
where
    K: kube::Resource + Send + Sync + 'static,
{
    let in_ns = |o: &Arc<K>| o.meta().namespace.as_deref().unwrap_or_default() == ns;
    let mut lists: Vec<Vec<Arc<K>>> = values
        .iter()
        .map(|v| {
            let mut l = informer.by_index(CONTROLLER_UID, v);
            l.retain(in_ns);
            l
        })
        .filter(|l| !l.is_empty())
        .collect();
    // Each list is in name order already; only objects under several values need merging (an
    // owner's pods plus orphans waiting for adoption: rare).
    match lists.len() {
        0 => Vec::new(),
        1 => lists.pop().unwrap_or_default(),
        _ => {
            let mut out: Vec<Arc<K>> = lists.into_iter().flatten().collect();
            out.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
            out.dedup_by(|a, b| a.meta().name == b.meta().name);
            out
        }
    }
}
