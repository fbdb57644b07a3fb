//! What server-side apply needs to know of each served kind's schema: which lists are maps (and
//! their keys), sets or atomic; which structs are atomic; the Go zero value's shape; the fields
//! field management ignores. One table, from the k8s.io/api v1.33 markers (`+listType`,
//! `+listMapKey`, `+structType=atomic`, `patchMergeKey`); a list no entry names is atomic, as
//! upstream treats lists without a list type.
//!
//! Paths are field names from the object root (list elements add no segment), as in
//! `patch::strategic`; pod specs are recognised at a Pod's `spec` and at `spec.template.spec` of
//! the workload kinds.

use serde_json::{Value, json};

use crate::registry::ResourceInfo;

/// How a list's elements are identified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    /// The list is one value, owned and replaced whole.
    Atomic,
    /// Elements are scalars identified by their value.
    Set,
    /// Elements are objects identified by these key fields.
    Map(&'static [&'static str]),
}

/// A key field's default when an element omits it (upstream schemas default `protocol`).
pub fn key_default(key: &str) -> Option<Value> {
    match key {
        "protocol" => Some(json!("TCP")),
        _ => None,
    }
}

/// Where a table row applies.
#[derive(Debug, Clone, Copy)]
enum Scope {
    /// Relative to any PodSpec.
    PodSpec,
    /// Relative to any ObjectMeta (the root's and pod templates').
    Meta,
    /// At the root of this kind (group, kind).
    Kind(&'static str, &'static str),
    /// At the root of every kind of this group.
    Group(&'static str),
}

use ListType::{Map, Set};
use Scope::{Group, Kind, Meta, PodSpec};

/// The list table (api-surface §b.13 merge keys; list-map keys where SSA's differ).
const LISTS: &[(Scope, &str, ListType)] = &[
    (Meta, "ownerReferences", Map(&["uid"])),
    (Meta, "finalizers", Set),
    (Meta, "managedFields", ListType::Atomic),
    (PodSpec, "containers", Map(&["name"])),
    (PodSpec, "initContainers", Map(&["name"])),
    (PodSpec, "ephemeralContainers", Map(&["name"])),
    (PodSpec, "volumes", Map(&["name"])),
    (PodSpec, "imagePullSecrets", Map(&["name"])),
    (PodSpec, "schedulingGates", Map(&["name"])),
    (PodSpec, "resourceClaims", Map(&["name"])),
    (PodSpec, "hostAliases", Map(&["ip"])),
    (
        PodSpec,
        "topologySpreadConstraints",
        Map(&["topologyKey", "whenUnsatisfiable"]),
    ),
    (PodSpec, "*.ports", Map(&["containerPort", "protocol"])),
    (PodSpec, "*.env", Map(&["name"])),
    (PodSpec, "*.volumeMounts", Map(&["mountPath"])),
    (PodSpec, "*.volumeDevices", Map(&["devicePath"])),
    (PodSpec, "*.resizePolicy", ListType::Atomic),
    (Kind("", "Pod"), "status.conditions", Map(&["type"])),
    (Kind("", "Pod"), "status.podIPs", Map(&["ip"])),
    (Kind("", "Pod"), "status.hostIPs", Map(&["ip"])),
    (Kind("", "Node"), "spec.podCIDRs", Set),
    (Kind("", "Node"), "status.conditions", Map(&["type"])),
    (Kind("", "Node"), "status.addresses", Map(&["type"])),
    (Kind("", "Namespace"), "status.conditions", Map(&["type"])),
    (
        Kind("", "PersistentVolumeClaim"),
        "status.conditions",
        Map(&["type"]),
    ),
    (
        Kind("", "Service"),
        "spec.ports",
        Map(&["port", "protocol"]),
    ),
    (Kind("", "Service"), "status.conditions", Map(&["type"])),
    (Group("apps"), "status.conditions", Map(&["type"])),
    (Kind("batch", "Job"), "status.conditions", Map(&["type"])),
    (
        Kind("policy", "PodDisruptionBudget"),
        "status.conditions",
        Map(&["type"]),
    ),
];

/// Structs marked `+structType=atomic` (and maps marked `+mapType=atomic`), by the field that
/// holds them. Matched on the path's last field name inside the scopes that use these types.
const ATOMIC_STRUCTS: &[(Scope, &str)] = &[
    // metav1.LabelSelector
    (Group("apps"), "spec.selector"),
    (Kind("batch", "Job"), "spec.selector"),
    (Kind("policy", "PodDisruptionBudget"), "spec.selector"),
    (PodSpec, "*.labelSelector"),
    (PodSpec, "*.*.labelSelector"),
    (PodSpec, "*.*.*.labelSelector"),
    (PodSpec, "*.*.*.*.labelSelector"),
    (PodSpec, "*.*.*.*.namespaceSelector"),
    // NodeSelector / NodeSelectorTerm
    (
        PodSpec,
        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
    ),
    // LocalObjectReference and the key selectors
    (PodSpec, "*.env.valueFrom.configMapKeyRef"),
    (PodSpec, "*.env.valueFrom.secretKeyRef"),
    (PodSpec, "*.env.valueFrom.fieldRef"),
    (PodSpec, "*.env.valueFrom.resourceFieldRef"),
    (PodSpec, "*.envFrom.configMapRef"),
    (PodSpec, "*.envFrom.secretRef"),
    (Kind("", "PersistentVolume"), "spec.claimRef"),
    (Kind("", "PersistentVolume"), "spec.nodeAffinity.required"),
];

/// Kinds whose `spec.template.spec` is a PodSpec.
fn has_pod_template(ri: &ResourceInfo) -> bool {
    matches!(
        (ri.group, ri.kind),
        (
            "apps",
            "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
        ) | ("batch", "Job" | "CronJob")
    )
}

/// The path relative to a PodSpec, when `path` lies inside one.
fn pod_spec_rel<'a>(ri: &ResourceInfo, path: &'a [&'a str]) -> Option<&'a [&'a str]> {
    match path {
        ["spec", rest @ ..] if ri.group.is_empty() && ri.kind == "Pod" => Some(rest),
        ["spec", "template", "spec", rest @ ..] if has_pod_template(ri) => Some(rest),
        ["spec", "jobTemplate", "spec", "template", "spec", rest @ ..]
            if ri.group == "batch" && ri.kind == "CronJob" =>
        {
            Some(rest)
        }
        _ => None,
    }
}

/// The path relative to an ObjectMeta, when `path` lies inside one.
fn meta_rel<'a>(ri: &ResourceInfo, path: &'a [&'a str]) -> Option<&'a [&'a str]> {
    match path {
        ["metadata", rest @ ..] => Some(rest),
        ["spec", "template", "metadata", rest @ ..] if has_pod_template(ri) => Some(rest),
        _ => None,
    }
}

/// Whether a pattern (`*` matches any one field) names `path`.
fn pattern_matches(pattern: &str, path: &[&str]) -> bool {
    // Without collecting the pattern's parts: every field of every compared object asks.
    let mut parts = pattern.split('.');
    path.iter()
        .all(|s| parts.next().is_some_and(|p| p == "*" || p == *s))
        && parts.next().is_none()
}

fn scope_rel<'a>(ri: &ResourceInfo, scope: Scope, path: &'a [&'a str]) -> Option<&'a [&'a str]> {
    match scope {
        PodSpec => pod_spec_rel(ri, path),
        Meta => meta_rel(ri, path),
        Kind(g, k) if ri.group == g && ri.kind == k => Some(path),
        Group(g) if ri.group == g => Some(path),
        _ => None,
    }
}

/// The list type of the list at `path`.
pub fn list_type(ri: &ResourceInfo, path: &[&str]) -> ListType {
    for (scope, pattern, lt) in LISTS {
        if let Some(rel) = scope_rel(ri, *scope, path)
            && pattern_matches(pattern, rel)
        {
            return *lt;
        }
    }
    ListType::Atomic
}

/// Whether the object at `path` is an atomic struct or map.
pub fn is_atomic_struct(ri: &ResourceInfo, path: &[&str]) -> bool {
    ATOMIC_STRUCTS.iter().any(|(scope, pattern)| {
        scope_rel(ri, *scope, path).is_some_and(|rel| pattern_matches(pattern, rel))
    })
}

/// The shape of the kind's Go zero value: the structs that are never nil there, so that an
/// update creating one of them does not own it as a whole (upstream compares against the zero
/// object on create). Built once per kind: every write's field management compares against it.
pub fn zero_object(ri: &ResourceInfo) -> &'static Value {
    type Zeros = std::collections::HashMap<(&'static str, &'static str), &'static Value>;
    static ZEROS: std::sync::LazyLock<std::sync::Mutex<Zeros>> =
        std::sync::LazyLock::new(Default::default);
    let mut zeros = ZEROS.lock().unwrap_or_else(|p| p.into_inner());
    // One leaked value per kind the process serves, a bounded set.
    zeros
        .entry((ri.group, ri.kind))
        .or_insert_with(|| Box::leak(Box::new(build_zero_object(ri))))
}

/// [`zero_object`], built.
fn build_zero_object(ri: &ResourceInfo) -> Value {
    let mut z = json!({"metadata": {}});
    let no_spec = matches!(
        (ri.group, ri.kind),
        (
            "",
            "ConfigMap" | "Secret" | "ServiceAccount" | "Endpoints" | "Event"
        ) | ("events.k8s.io", "Event")
            | ("discovery.k8s.io", "EndpointSlice")
            | ("scheduling.k8s.io", "PriorityClass")
            | ("rbac.authorization.k8s.io", _)
            | ("apps", "ControllerRevision")
    );
    if !no_spec {
        z["spec"] = json!({});
        z["status"] = json!({});
    }
    // PodSpec.containers has no omitempty: the zero PodSpec holds `containers: null`.
    if has_pod_template(ri) {
        z["spec"]["template"] = json!({"metadata": {}, "spec": {"containers": null}});
    }
    if ri.group.is_empty() && ri.kind == "Pod" {
        z["spec"]["containers"] = Value::Null;
    }
    match (ri.group, ri.kind) {
        ("apps", "Deployment") => z["spec"]["strategy"] = json!({}),
        ("apps", "StatefulSet" | "DaemonSet") => z["spec"]["updateStrategy"] = json!({}),
        ("", "Event") => {
            z["involvedObject"] = json!({});
            z["source"] = json!({});
        }
        ("coordination.k8s.io", "Lease") => {
            if let Some(m) = z.as_object_mut() {
                m.remove("status");
            }
        }
        _ => {}
    }
    z
}

/// The paths every kind's field management ignores (upstream `stripmeta`).
const STRIPPED: [&[&str]; 12] = [
    &["apiVersion"],
    &["kind"],
    &["metadata", "name"],
    &["metadata", "namespace"],
    &["metadata", "creationTimestamp"],
    &["metadata", "selfLink"],
    &["metadata", "uid"],
    &["metadata", "generation"],
    &["metadata", "managedFields"],
    &["metadata", "resourceVersion"],
    &["metadata", "deletionTimestamp"],
    &["metadata", "deletionGracePeriodSeconds"],
];

/// The number of [`reset_case`]s.
pub const RESET_CASES: usize = 3;

/// Which part of the object a write cannot change besides [`STRIPPED`] (upstream's reset
/// fields): nothing, `spec` (a status write) or `status` (a main-resource write of a kind with
/// a status subresource), as an index into tables built once.
pub fn reset_case(ri: &ResourceInfo, subresource: Option<&str>) -> usize {
    match subresource {
        Some("status") => 1,
        None if ri.has_subresource("status") => 2,
        _ => 0,
    }
}

/// Paths field management never records (upstream `stripmeta`), plus the part of the object a
/// write through `subresource` cannot change (upstream's reset fields).
pub fn ignored_paths(
    ri: &ResourceInfo,
    subresource: Option<&str>,
) -> &'static [&'static [&'static str]] {
    ignored_paths_of_case(reset_case(ri, subresource))
}

/// [`ignored_paths`] by [`reset_case`] (built once: every write asks).
pub fn ignored_paths_of_case(case: usize) -> &'static [&'static [&'static str]] {
    static CASES: std::sync::LazyLock<[Vec<&'static [&'static str]>; RESET_CASES]> =
        std::sync::LazyLock::new(|| {
            let with = |extra: Option<&'static [&'static str]>| {
                STRIPPED.iter().copied().chain(extra).collect::<Vec<_>>()
            };
            [with(None), with(Some(&["spec"])), with(Some(&["status"]))]
        });
    CASES.get(case).map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;

    fn ri(group: &str, plural: &str) -> &'static ResourceInfo {
        registry::lookup(group, "v1", plural).expect("served")
    }

    #[test]
    fn a_write_ignores_the_part_its_subresource_cannot_change() {
        let top = |g, p, sub| -> Vec<&str> {
            ignored_paths(ri(g, p), sub)
                .iter()
                .filter(|p| p.len() == 1)
                .map(|p| p[0])
                .collect()
        };
        assert_eq!(top("", "pods", None), ["apiVersion", "kind", "status"]);
        assert_eq!(
            top("", "pods", Some("status")),
            ["apiVersion", "kind", "spec"]
        );
        assert_eq!(top("", "configmaps", None), ["apiVersion", "kind"]);
        assert_eq!(
            top("apps", "deployments", Some("scale")),
            ["apiVersion", "kind"]
        );
        assert!(ignored_paths(ri("", "configmaps"), None).contains(&&["metadata", "uid"][..]));
        assert!(ignored_paths_of_case(RESET_CASES).is_empty());
    }

    #[test]
    fn patterns_match_paths_of_their_own_length() {
        assert!(pattern_matches("a.b", &["a", "b"]));
        assert!(pattern_matches("*.b", &["x", "b"]));
        assert!(!pattern_matches("a.b", &["a"]));
        assert!(!pattern_matches("a", &["a", "b"]));
        assert!(!pattern_matches("*.b", &["x", "c"]));
        assert!(!pattern_matches("a", &[]));
    }

    #[test]
    fn list_types_follow_the_upstream_markers() {
        let pods = ri("", "pods");
        let deps = ri("apps", "deployments");
        let nodes = ri("", "nodes");
        let svcs = ri("", "services");
        let cases: Vec<(&ResourceInfo, &[&str], ListType)> = vec![
            (pods, &["spec", "containers"], Map(&["name"])),
            (
                deps,
                &["spec", "template", "spec", "containers"],
                Map(&["name"]),
            ),
            (
                deps,
                &["spec", "template", "spec", "containers", "ports"],
                Map(&["containerPort", "protocol"]),
            ),
            (pods, &["spec", "initContainers", "env"], Map(&["name"])),
            (pods, &["spec", "tolerations"], ListType::Atomic),
            (pods, &["spec", "containers", "command"], ListType::Atomic),
            (nodes, &["spec", "taints"], ListType::Atomic),
            (nodes, &["spec", "podCIDRs"], Set),
            (pods, &["metadata", "finalizers"], Set),
            (deps, &["spec", "template", "metadata", "finalizers"], Set),
            (deps, &["metadata", "ownerReferences"], Map(&["uid"])),
            (svcs, &["spec", "ports"], Map(&["port", "protocol"])),
            (deps, &["status", "conditions"], Map(&["type"])),
            (pods, &["status", "containerStatuses"], ListType::Atomic),
        ];
        for (ri, path, want) in cases {
            assert_eq!(list_type(ri, path), want, "{} {path:?}", ri.kind);
        }
    }

    #[test]
    fn label_selectors_are_atomic() {
        let deps = ri("apps", "deployments");
        assert!(is_atomic_struct(deps, &["spec", "selector"]));
        assert!(!is_atomic_struct(deps, &["spec", "template"]));
        assert!(!is_atomic_struct(ri("", "services"), &["spec", "selector"]));
        assert!(is_atomic_struct(
            ri("", "pods"),
            &["spec", "containers", "env", "valueFrom", "fieldRef"]
        ));
    }

    #[test]
    fn zero_objects_hold_the_value_structs() {
        let z = zero_object(ri("apps", "deployments"));
        assert_eq!(z["spec"]["strategy"], json!({}));
        assert_eq!(z["spec"]["template"]["spec"], json!({"containers": null}));
        assert_eq!(*zero_object(ri("", "configmaps")), json!({"metadata": {}}));
    }
}
