//! The Node authorizer (upstream's `plugin/pkg/auth/authorizer/node`): a kubelet
//! (`system:node:<name>` in `system:nodes`) may read only the secrets, configmaps, claims,
//! volumes and attachments its pods reference, its own Node and Lease and CSINode, the pods
//! bound to it; everything else it gets from the static `system:node` rules. Pure: the caller
//! builds a [`NodeGraph`] from the stored pods, claims and attachments.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::authz::{Attributes, Decision};
use crate::object::Pointer;
use crate::rbac::{Rule, rule_allows};

/// The group every kubelet identity carries.
pub const NODES_GROUP: &str = "system:nodes";

/// The node name of a kubelet identity (upstream's `NodeIdentity`): a `system:node:` user in
/// `system:nodes`. `Some("")` for a node-group user whose name carries no node.
pub fn node_identity(user: &str, groups: &[String]) -> Option<String> {
    if !groups.iter().any(|g| g == NODES_GROUP) {
        return None;
    }
    Some(user.strip_prefix("system:node:").unwrap_or("").to_string())
}

type NsName = (String, String);

/// What is reachable from one node: upstream's graph, reduced to the sets its paths reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeGraph {
    pub pods: BTreeSet<NsName>,
    pub secrets: BTreeSet<NsName>,
    pub configmaps: BTreeSet<NsName>,
    pub claims: BTreeSet<NsName>,
    pub service_accounts: BTreeSet<NsName>,
    pub volumes: BTreeSet<String>,
    pub attachments: BTreeSet<String>,
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn arr<'a>(v: &'a Value, ptr: &str) -> &'a [Value] {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

impl NodeGraph {
    /// The graph of `node` from every pod, claim and VolumeAttachment in the store.
    pub fn build(node: &str, pods: &[Value], claims: &[Value], attachments: &[Value]) -> NodeGraph {
        let mut g = NodeGraph::default();
        for pod in pods.iter().filter(|p| s(p, "/spec/nodeName") == node) {
            let ns = s(pod, "/metadata/namespace").to_string();
            let name = s(pod, "/metadata/name");
            g.pods.insert((ns.clone(), name.to_string()));
            let add = |set: &mut BTreeSet<NsName>, n: &str| {
                if !n.is_empty() {
                    set.insert((ns.clone(), n.to_string()));
                }
            };
            let sa = s(pod, "/spec/serviceAccountName");
            add(
                &mut g.service_accounts,
                if sa.is_empty() { "default" } else { sa },
            );
            for r in arr(pod, "/spec/imagePullSecrets") {
                add(&mut g.secrets, s(r, "/name"));
            }
            for list in [
                "/spec/containers",
                "/spec/initContainers",
                "/spec/ephemeralContainers",
            ] {
                for c in arr(pod, list) {
                    for e in arr(c, "/env") {
                        add(&mut g.secrets, s(e, "/valueFrom/secretKeyRef/name"));
                        add(&mut g.configmaps, s(e, "/valueFrom/configMapKeyRef/name"));
                    }
                    for e in arr(c, "/envFrom") {
                        add(&mut g.secrets, s(e, "/secretRef/name"));
                        add(&mut g.configmaps, s(e, "/configMapRef/name"));
                    }
                }
            }
            for v in arr(pod, "/spec/volumes") {
                add(&mut g.secrets, s(v, "/secret/secretName"));
                add(&mut g.configmaps, s(v, "/configMap/name"));
                add(&mut g.secrets, s(v, "/csi/nodePublishSecretRef/name"));
                for src in arr(v, "/projected/sources") {
                    add(&mut g.secrets, s(src, "/secret/name"));
                    add(&mut g.configmaps, s(src, "/configMap/name"));
                }
                add(&mut g.claims, s(v, "/persistentVolumeClaim/claimName"));
                if v.at("/ephemeral").is_some_and(|e| !e.is_null()) {
                    // A generic ephemeral volume's claim is named <pod>-<volume>.
                    add(&mut g.claims, &format!("{name}-{}", s(v, "/name")));
                }
            }
        }
        for c in claims {
            let key = (
                s(c, "/metadata/namespace").to_string(),
                s(c, "/metadata/name").to_string(),
            );
            let pv = s(c, "/spec/volumeName");
            if g.claims.contains(&key) && !pv.is_empty() {
                g.volumes.insert(pv.to_string());
            }
        }
        for va in attachments
            .iter()
            .filter(|a| s(a, "/spec/nodeName") == node)
        {
            g.attachments.insert(s(va, "/metadata/name").to_string());
        }
        g
    }
}

/// Which kinds the graph answers for (the caller builds the graph only for these).
pub fn needs_graph(attrs: &Attributes) -> bool {
    if !attrs.resource_request {
        return false;
    }
    match (attrs.group.as_str(), attrs.resource.as_str()) {
        // Only a read of one pod asks the graph; a kubelet's status writes, creates, deletes,
        // evictions and its spec.nodeName watch do not, so they skip building it (every pod
        // decoded) on the path each kubelet takes most often.
        ("", "pods") => {
            attrs.subresource.is_empty()
                && (attrs.verb == "get"
                    || (matches!(attrs.verb.as_str(), "list" | "watch") && !attrs.name.is_empty()))
        }
        (
            "",
            "secrets"
            | "configmaps"
            | "persistentvolumeclaims"
            | "persistentvolumes"
            | "serviceaccounts",
        )
        | ("storage.k8s.io", "volumeattachments") => true,
        _ => false,
    }
}

fn no_opinion(reason: impl Into<String>) -> Decision {
    Decision {
        allowed: false,
        denied: false,
        reason: reason.into(),
    }
}

fn allow() -> Decision {
    Decision {
        allowed: true,
        denied: false,
        reason: String::new(),
    }
}

#[derive(Clone, Copy)]
enum Vertex {
    Secret,
    ConfigMap,
    Claim,
    Volume,
    Attachment,
    ServiceAccount,
    Pod,
}

fn related(g: &NodeGraph, v: Vertex, ns: &str, name: &str) -> bool {
    let key = (ns.to_string(), name.to_string());
    match v {
        Vertex::Secret => g.secrets.contains(&key),
        Vertex::ConfigMap => g.configmaps.contains(&key),
        Vertex::Claim => g.claims.contains(&key),
        Vertex::ServiceAccount => g.service_accounts.contains(&key),
        Vertex::Pod => g.pods.contains(&key),
        Vertex::Volume => g.volumes.contains(name),
        Vertex::Attachment => g.attachments.contains(name),
    }
}

fn path(node: &str, g: &NodeGraph, v: Vertex, a: &Attributes) -> Decision {
    if a.name.is_empty() {
        return no_opinion("No Object name found");
    }
    if related(g, v, &a.namespace, &a.name) {
        allow()
    } else {
        no_opinion(format!(
            "no relationship found between node '{node}' and this object"
        ))
    }
}

fn get_only(node: &str, g: &NodeGraph, v: Vertex, a: &Attributes) -> Decision {
    if a.verb != "get" {
        return no_opinion("can only get individual resources of this type");
    }
    if !a.subresource.is_empty() {
        return no_opinion("cannot get subresource");
    }
    path(node, g, v, a)
}

fn read_namespaced(node: &str, g: &NodeGraph, v: Vertex, a: &Attributes) -> Decision {
    if !matches!(a.verb.as_str(), "get" | "list" | "watch") {
        return no_opinion("can only read resources of this type");
    }
    if !a.subresource.is_empty() {
        return no_opinion("cannot read subresource");
    }
    if a.namespace.is_empty() {
        return no_opinion("can only read namespaced object of this type");
    }
    path(node, g, v, a)
}

/// Whether the request's field selector holds `field=value` (`=` or `==`).
fn selects(a: &Attributes, field: &str, value: &str) -> bool {
    a.field_selector.split(',').any(|t| {
        t.split_once("==")
            .or_else(|| t.split_once('='))
            .is_some_and(|(f, v)| f.trim() == field && v.trim() == value)
    })
}

/// The Node authorizer's decision for a request by node `node` (`node_rules` are the static
/// `system:node` rules). Never an explicit deny: others may still allow.
pub fn authorize(node: &str, a: &Attributes, g: &NodeGraph, node_rules: &[Rule]) -> Decision {
    if node.is_empty() {
        return no_opinion(format!("unknown node for user {:?}", a.user));
    }
    if a.resource_request {
        let verbs = |allowed: &[&str]| allowed.contains(&a.verb.as_str());
        match (a.group.as_str(), a.resource.as_str()) {
            ("", "secrets") => return read_namespaced(node, g, Vertex::Secret, a),
            ("", "configmaps") => return read_namespaced(node, g, Vertex::ConfigMap, a),
            ("", "persistentvolumeclaims") if a.subresource == "status" => {
                if !verbs(&["update", "patch"]) {
                    return no_opinion("can only get/update/patch this type");
                }
                return path(node, g, Vertex::Claim, a);
            }
            ("", "persistentvolumeclaims") => return get_only(node, g, Vertex::Claim, a),
            ("", "persistentvolumes") => return get_only(node, g, Vertex::Volume, a),
            ("storage.k8s.io", "volumeattachments") => {
                return get_only(node, g, Vertex::Attachment, a);
            }
            ("", "serviceaccounts") => {
                if a.verb != "create" || a.name.is_empty() {
                    return no_opinion("can only create tokens for individual service accounts");
                }
                if a.subresource != "token" {
                    return no_opinion("can only create token subresource of serviceaccount");
                }
                return path(node, g, Vertex::ServiceAccount, a);
            }
            ("coordination.k8s.io", "leases") => {
                if !verbs(&["get", "create", "update", "patch", "delete"]) {
                    return no_opinion(
                        "can only get, create, update, patch, or delete a node lease",
                    );
                }
                if a.namespace != "kube-node-lease" {
                    return no_opinion(
                        "can only access leases in the \"kube-node-lease\" system namespace",
                    );
                }
                if a.verb != "create" && a.name != node {
                    return no_opinion(
                        "can only access node lease with the same name as the requesting node",
                    );
                }
                return allow();
            }
            ("storage.k8s.io", "csinodes") => {
                if !verbs(&["get", "create", "update", "patch", "delete"]) {
                    return no_opinion("can only get, create, update, patch, or delete a CSINode");
                }
                if !a.subresource.is_empty() {
                    return no_opinion("cannot authorize CSINode subresources");
                }
                if a.verb != "create" && a.name != node {
                    return no_opinion(
                        "can only access CSINode with the same name as the requesting node",
                    );
                }
                return allow();
            }
            ("", "nodes") => {
                return match (a.subresource.as_str(), a.verb.as_str()) {
                    ("", "create" | "update" | "patch") | ("status", "update" | "patch") => allow(),
                    ("", "get" | "list" | "watch") if a.name == node => allow(),
                    ("", "get" | "list" | "watch") if a.name.is_empty() => no_opinion(format!(
                        "node '{node}' cannot read all nodes, only its own Node object"
                    )),
                    ("", "get" | "list" | "watch") => no_opinion(format!(
                        "node '{node}' cannot read '{}', only its own Node object",
                        a.name
                    )),
                    _ => no_opinion(""),
                };
            }
            ("", "pods") => {
                return match (a.subresource.as_str(), a.verb.as_str()) {
                    ("", "get") => get_only(node, g, Vertex::Pod, a),
                    ("", "list" | "watch") if selects(a, "spec.nodeName", node) => allow(),
                    ("", "list" | "watch") if !a.name.is_empty() => path(node, g, Vertex::Pod, a),
                    ("", "list" | "watch") => {
                        no_opinion("can only list/watch pods with spec.nodeName field selector")
                    }
                    ("", "create" | "delete")
                    | ("status", "update" | "patch")
                    | ("eviction", "create") => allow(),
                    _ => no_opinion(""),
                };
            }
            _ => {}
        }
    }
    if node_rules.iter().any(|r| rule_allows(a, r)) {
        allow()
    } else {
        no_opinion("")
    }
}

#[cfg(test)]
mod tests;
