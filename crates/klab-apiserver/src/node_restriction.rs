//! The NodeRestriction admission plugin (spec node.md §9.2, upstream's
//! `plugin/pkg/admission/noderestriction`): what a kubelet may write once the Node authorizer let
//! the request through — only its own Node (no taint changes, labels only from the kubelet set),
//! only mirror pods bound to itself, only the status of its own pods, only evictions and
//! deletions of its own pods, only its own Lease and CSINode, only claim status. Pure: the caller
//! passes the stored objects it read.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::object::Pointer;

/// The admission operation, as upstream prints it (`UPDATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Create,
    Update,
    Delete,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Create => "CREATE",
            Op::Update => "UPDATE",
            Op::Delete => "DELETE",
        }
    }
}

/// One write by a kubelet, as admission sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub op: Op,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    /// The name in the URL (empty on create).
    pub name: &'a str,
    /// The proposed object (create, update; the Eviction on an eviction).
    pub object: Option<&'a Value>,
    /// The stored object (update, delete; the pod on an eviction).
    pub old: Option<&'a Value>,
    /// The UID of the requesting node's Node object, when it exists (mirror-pod owner check).
    pub node_uid: Option<&'a str>,
}

fn s<'a>(v: Option<&'a Value>, ptr: &str) -> &'a str {
    v.and_then(|v| v.pointer(ptr))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn labels(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(|v| v.at("/metadata/labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn label_namespace(key: &str) -> &str {
    key.split_once('/').map(|(ns, _)| ns).unwrap_or("")
}

fn in_namespace(ns: &str, base: &str) -> bool {
    ns == base || ns.strip_suffix(base).is_some_and(|p| p.ends_with('.'))
}

/// Upstream's `kubeletapis.IsKubeletLabel`: the labels a kubelet sets on its own Node.
pub fn is_kubelet_label(key: &str) -> bool {
    const LABELS: [&str; 11] = [
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "kubernetes.io/os",
        "kubernetes.io/arch",
    ];
    if LABELS.contains(&key) {
        return true;
    }
    let ns = label_namespace(key);
    in_namespace(ns, "kubelet.kubernetes.io") || in_namespace(ns, "node.kubernetes.io")
}

/// Upstream's `getForbiddenLabels` over the keys whose presence or value changed.
fn forbidden_labels(new: &BTreeMap<String, String>, old: &BTreeMap<String, String>) -> Vec<String> {
    let modified: BTreeSet<&String> = new
        .keys()
        .chain(old.keys())
        .filter(|k| new.get(*k) != old.get(*k))
        .collect();
    modified
        .into_iter()
        .filter(|k| {
            let ns = label_namespace(k);
            let restriction = in_namespace(ns, "node-restriction.kubernetes.io");
            let kubernetes = in_namespace(ns, "kubernetes.io") || in_namespace(ns, "k8s.io");
            restriction || (kubernetes && !is_kubelet_label(k))
        })
        .cloned()
        .collect()
}

fn present(v: Option<&Value>, ptr: &str) -> bool {
    v.and_then(|v| v.pointer(ptr)).is_some_and(|x| !x.is_null())
}

fn admit_node(node: &str, r: &Request) -> Result<(), String> {
    let requested = if r.op == Op::Create {
        s(r.object, "/metadata/name")
    } else {
        r.name
    };
    if requested != node {
        return Err(format!(
            "node {node:?} is not allowed to modify node {requested:?}"
        ));
    }
    match r.op {
        Op::Create => {
            if present(r.object, "/spec/configSource") {
                return Err(format!(
                    "node {node:?} is not allowed to create pods with a non-nil configSource"
                ));
            }
            let bad = forbidden_labels(&labels(r.object), &BTreeMap::new());
            if !bad.is_empty() {
                return Err(format!(
                    "node {node:?} is not allowed to set the following labels: {}",
                    bad.join(", ")
                ));
            }
        }
        Op::Update => {
            let new_cs = r.object.and_then(|o| o.at("/spec/configSource"));
            let old_cs = r.old.and_then(|o| o.at("/spec/configSource"));
            if new_cs.is_some_and(|c| !c.is_null()) && new_cs != old_cs {
                return Err(format!(
                    "node {node:?} is not allowed to update configSource to a new non-nil configSource"
                ));
            }
            let taints = |v: Option<&Value>| {
                v.and_then(|o| o.at("/spec/taints"))
                    .filter(|t| t.as_array().is_some_and(|a| !a.is_empty()))
                    .cloned()
            };
            if taints(r.object) != taints(r.old) {
                return Err(format!("node {node:?} is not allowed to modify taints"));
            }
            let bad = forbidden_labels(&labels(r.object), &labels(r.old));
            if !bad.is_empty() {
                return Err(format!(
                    "is not allowed to modify labels: {}",
                    bad.join(", ")
                ));
            }
        }
        Op::Delete => {}
    }
    Ok(())
}

/// Whether a pod references a secret or a configmap (upstream's `VisitPodSecretNames` and
/// `VisitPodConfigmapNames`, through the Node authorizer's graph walk).
fn pod_references(pod: &Value) -> (bool, bool) {
    let mut pod = pod.clone();
    if let Some(m) = pod.at_mut("/spec").and_then(Value::as_object_mut) {
        m.insert("nodeName".into(), Value::from("\u{0}"));
    }
    if let Some(m) = pod.at_mut("/metadata").and_then(Value::as_object_mut) {
        m.entry("namespace").or_insert(Value::from("x"));
    }
    let mut no_sa = pod.clone();
    if let Some(m) = no_sa.at_mut("/spec").and_then(Value::as_object_mut) {
        m.insert("serviceAccountName".into(), Value::from("\u{0}"));
    }
    let g = crate::node_authz::NodeGraph::build("\u{0}", &[no_sa], &[], &[]);
    (!g.secrets.is_empty(), !g.configmaps.is_empty())
}

fn admit_mirror_pod(node: &str, r: &Request) -> Result<(), String> {
    let pod = r.object;
    let mirror = pod
        .and_then(|p| p.at("/metadata/annotations"))
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    if !mirror {
        return Err(format!(
            "pod does not have \"kubernetes.io/config.mirror\" annotation, node {node:?} can only create mirror pods"
        ));
    }
    if s(pod, "/spec/nodeName") != node {
        return Err(format!(
            "node {node:?} can only create pods with spec.nodeName set to itself"
        ));
    }
    let owners = pod
        .and_then(|p| p.at("/metadata/ownerReferences"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    match owners {
        [] => {
            return Err(format!(
                "node {node:?} can only create pods with an owner reference set to itself"
            ));
        }
        [owner] => {
            let o = Some(owner);
            if s(o, "/apiVersion") != "v1" || s(o, "/kind") != "Node" || s(o, "/name") != node {
                return Err(format!(
                    "node {node:?} can only create pods with an owner reference set to itself"
                ));
            }
            if owner.get("controller").and_then(Value::as_bool) != Some(true) {
                return Err(format!(
                    "node {node:?} can only create pods with a controller owner reference set to itself"
                ));
            }
            if owner.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true) {
                return Err(format!(
                    "node {node:?} must not set blockOwnerDeletion on an owner reference"
                ));
            }
            let uid = s(o, "/uid");
            let expected = r.node_uid.unwrap_or("");
            if uid != expected {
                return Err(format!(
                    "node {node} UID mismatch: expected {uid} got {expected}"
                ));
            }
        }
        _ => {
            return Err(format!(
                "node {node:?} can only create pods with a single owner reference set to itself"
            ));
        }
    }
    if !s(pod, "/spec/serviceAccountName").is_empty() {
        return Err(format!(
            "node {node:?} can not create pods that reference a service account"
        ));
    }
    let (secrets, configmaps) = pod.map(pod_references).unwrap_or_default();
    if secrets {
        return Err(format!(
            "node {node:?} can not create pods that reference secrets"
        ));
    }
    if configmaps {
        return Err(format!(
            "node {node:?} can not create pods that reference configmaps"
        ));
    }
    let volumes = pod
        .and_then(|p| p.at("/spec/volumes"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let trust_bundle = volumes.iter().any(|v| {
        v.at("/projected/sources")
            .and_then(Value::as_array)
            .is_some_and(|s| {
                s.iter()
                    .any(|src| present(Some(src), "/clusterTrustBundle"))
            })
    });
    if trust_bundle {
        return Err(format!(
            "node {node:?} can not create pods that reference clustertrustbundles"
        ));
    }
    if volumes
        .iter()
        .any(|v| present(Some(v), "/persistentVolumeClaim"))
    {
        return Err(format!(
            "node {node:?} can not create pods that reference persistentvolumeclaims"
        ));
    }
    Ok(())
}

fn admit_pod(node: &str, r: &Request) -> Result<(), String> {
    match (r.subresource, r.op) {
        ("", Op::Create) => admit_mirror_pod(node, r),
        ("", Op::Delete) => {
            if s(r.old, "/spec/nodeName") != node {
                return Err(format!(
                    "node {node:?} can only delete pods with spec.nodeName set to itself"
                ));
            }
            Ok(())
        }
        ("", op) => Err(format!(
            "unexpected operation {:?}, node {node:?} can only create and delete mirror pods",
            op.as_str()
        )),
        ("status", Op::Update) => {
            if s(r.old, "/spec/nodeName") != node {
                return Err(format!(
                    "node {node:?} can only update pod status for pods with spec.nodeName set to itself"
                ));
            }
            if labels(r.object) != labels(r.old) {
                return Err(format!(
                    "node {node:?} cannot update labels through pod status"
                ));
            }
            let claims = |v: Option<&Value>| {
                v.and_then(|p| p.at("/status/resourceClaimStatuses"))
                    .cloned()
                    .filter(|c| c.as_array().is_some_and(|a| !a.is_empty()))
            };
            if claims(r.object) != claims(r.old) {
                return Err(format!(
                    "node {node:?} cannot update resource claim statues"
                ));
            }
            Ok(())
        }
        ("status", op) => Err(format!("unexpected operation {:?}", op.as_str())),
        ("eviction", Op::Create) => {
            if s(r.old, "/spec/nodeName") != node {
                return Err(format!(
                    "node {node} can only evict pods with spec.nodeName set to itself"
                ));
            }
            Ok(())
        }
        ("eviction", op) => Err(format!("unexpected operation {}", op.as_str())),
        (sub, _) => Err(format!(
            "unexpected pod subresource {sub:?}, only 'status' and 'eviction' are allowed"
        )),
    }
}

fn same_name(node: &str, r: &Request, what: &str) -> Result<(), String> {
    let name = if r.op == Op::Create {
        s(r.object, "/metadata/name")
    } else {
        r.name
    };
    if name != node {
        return Err(format!(
            "can only access {what} with the same name as the requesting node"
        ));
    }
    Ok(())
}

/// NodeRestriction's decision on one write by node `node`: `Err(reason)` is a 403 whose message
/// is `<resource> "<name>" is forbidden: <reason>`.
pub fn admit(node: &str, r: &Request) -> Result<(), String> {
    match (r.group, r.resource) {
        ("", "pods") => admit_pod(node, r),
        ("", "nodes") => admit_node(node, r),
        ("", "persistentvolumeclaims") => {
            if r.subresource != "status" {
                return Err("may only update PVC status".into());
            }
            if r.op != Op::Update {
                return Err(format!("unexpected operation {:?}", r.op.as_str()));
            }
            // Only status.capacity, status.conditions (and the allocation fields) may change.
            let strip = |v: Option<&Value>| {
                let mut v = v.cloned().unwrap_or(Value::Null);
                if let Some(m) = v.at_mut("/metadata").and_then(Value::as_object_mut) {
                    for k in ["resourceVersion", "managedFields"] {
                        m.remove(k);
                    }
                }
                if let Some(m) = v.at_mut("/status").and_then(Value::as_object_mut) {
                    for k in [
                        "capacity",
                        "conditions",
                        "allocatedResourceStatuses",
                        "allocatedResources",
                    ] {
                        m.remove(k);
                    }
                }
                v
            };
            if strip(r.object) != strip(r.old) {
                return Err(format!(
                    "node {node:?} is not allowed to update fields other than status.quantity and status.conditions"
                ));
            }
            Ok(())
        }
        ("coordination.k8s.io", "leases") => {
            if r.namespace != "kube-node-lease" {
                return Err(
                    "can only access leases in the \"kube-node-lease\" system namespace".into(),
                );
            }
            same_name(node, r, "node lease")
        }
        ("storage.k8s.io", "csinodes") => same_name(node, r, "CSINode"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
