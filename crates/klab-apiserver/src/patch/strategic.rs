//! Strategic merge patch over serde_json::Value, driven by a table of merge keys (api-surface §b.13).
//!
//! Semantics follow upstream `k8s.io/apimachinery/pkg/util/strategicpatch` as the API server runs
//! it (`IgnoreUnmatchedNulls`): a JSON merge patch (maps merge, `null` deletes) in which lists
//! whose field carries `patchStrategy:"merge"` merge element-wise on their `patchMergeKey`
//! (primitive ones as a set union) and every other list is replaced; plus the directives
//! `$patch` (replace/delete/merge, in maps and in list elements), `$deleteFromPrimitiveList/<f>`,
//! `$retainKeys` and `$setElementOrder/<f>`. No key starting with `$` survives into the result.
//! The per-path strategies come from the k8s.io/api struct tags of the kinds klab serves
//! (`list_strategy` / `map_replaces`); pod specs are recognised both at `spec` of a Pod and at
//! `spec.template.spec` of the workload kinds.

use serde_json::{Map, Value};

use crate::registry::ResourceInfo;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// How a list field is patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListStrategy {
    /// No patch strategy: the patch list replaces the live one.
    Replace,
    /// Maps merged on this key.
    MergeKey(&'static str),
    /// Primitive set union (`metadata.finalizers`, `spec.podCIDRs`).
    Primitive,
}

/// Kinds whose `spec.template.spec` is a PodSpec.
fn has_pod_template(ri: &ResourceInfo) -> bool {
    matches!(
        (ri.group, ri.kind),
        (
            "apps",
            "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
        ) | ("batch", "Job")
    )
}

/// The path relative to a PodSpec, when `path` lies inside one.
fn pod_spec_rel<'a>(ri: &ResourceInfo, path: &'a [String]) -> Option<&'a [String]> {
    if ri.group.is_empty() && ri.kind == "Pod" && path.first().map(String::as_str) == Some("spec") {
        return Some(&path[1..]);
    }
    if has_pod_template(ri)
        && path.len() >= 3
        && path[0] == "spec"
        && path[1] == "template"
        && path[2] == "spec"
    {
        return Some(&path[3..]);
    }
    None
}

fn pod_spec_list(rel: &[&str]) -> ListStrategy {
    use ListStrategy::*;
    const CONTAINERS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];
    match rel {
        [c] if CONTAINERS.contains(c) => MergeKey("name"),
        ["volumes"] | ["imagePullSecrets"] | ["schedulingGates"] | ["resourceClaims"] => {
            MergeKey("name")
        }
        ["hostAliases"] => MergeKey("ip"),
        ["topologySpreadConstraints"] => MergeKey("topologyKey"),
        [c, "ports"] if CONTAINERS.contains(c) => MergeKey("containerPort"),
        [c, "env"] if CONTAINERS.contains(c) => MergeKey("name"),
        [c, "volumeMounts"] if CONTAINERS.contains(c) => MergeKey("mountPath"),
        [c, "volumeDevices"] if CONTAINERS.contains(c) => MergeKey("devicePath"),
        // tolerations, command, args, nodeSelectorTerms, …: no strategy.
        _ => Replace,
    }
}

/// Strategy of the list at `path` (field names from the object root; list elements add no segment).
fn list_strategy(ri: &ResourceInfo, path: &[String]) -> ListStrategy {
    use ListStrategy::*;
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    // ObjectMeta, at the root and in pod templates.
    match p.as_slice() {
        [.., "metadata", "ownerReferences"] => return MergeKey("uid"),
        [.., "metadata", "finalizers"] => return Primitive,
        _ => {}
    }
    if let Some(rel) = pod_spec_rel(ri, path) {
        let rel: Vec<&str> = rel.iter().map(String::as_str).collect();
        return pod_spec_list(&rel);
    }
    match (ri.group, ri.kind, p.as_slice()) {
        ("", "Pod", ["status", "conditions"]) => MergeKey("type"),
        ("", "Pod", ["status", "podIPs" | "hostIPs"]) => MergeKey("ip"),
        ("", "Node", ["spec", "podCIDRs"]) => Primitive,
        ("", "Node", ["status", "conditions" | "addresses"]) => MergeKey("type"),
        ("", "Namespace" | "PersistentVolumeClaim" | "Service", ["status", "conditions"]) => {
            MergeKey("type")
        }
        ("", "Service", ["spec", "ports"]) => MergeKey("port"),
        ("apps", _, ["status", "conditions"]) => MergeKey("type"),
        ("batch", "Job", ["status", "conditions"]) => MergeKey("type"),
        ("policy", "PodDisruptionBudget", ["status", "conditions"]) => MergeKey("type"),
        _ => Replace,
    }
}

/// Maps with `patchStrategy:"replace"` (replaced wholesale instead of merged).
fn map_replaces(ri: &ResourceInfo, path: &[String]) -> bool {
    ri.group == "policy"
        && ri.kind == "PodDisruptionBudget"
        && path.len() == 2
        && path[0] == "spec"
        && path[1] == "selector"
}

/// The result of merging a patch map into a live map.
enum MapOutcome {
    Map(Map<String, Value>),
    /// `$patch: delete`: upstream empties the live map (`{}`); a list element is removed.
    Delete,
}

struct Patcher<'a> {
    ri: &'a ResourceInfo,
}

/// Applies a strategic merge patch to `original` (a stored object of kind `ri`).
pub fn strategic_merge_patch(
    ri: &ResourceInfo,
    original: &Value,
    patch: &Value,
) -> Result<Value, String> {
    let Some(patch) = patch.as_object() else {
        return Err("strategic merge patch body must be a JSON object".to_string());
    };
    let orig = match original {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        _ => return Err("the object to patch is not a JSON object".to_string()),
    };
    let p = Patcher { ri };
    let mut path = Vec::new();
    match p.merge_map(&mut path, orig, patch)? {
        MapOutcome::Map(m) => Ok(Value::Object(m)),
        MapOutcome::Delete => {
            Err("a $patch: delete directive cannot delete the whole object".to_string())
        }
    }
}

fn directive_of(m: &Map<String, Value>) -> Result<Option<&str>, String> {
    match m.get(DIRECTIVE) {
        None => Ok(None),
        Some(Value::String(s)) if matches!(s.as_str(), "replace" | "delete" | "merge") => {
            Ok(Some(s.as_str()))
        }
        Some(other) => Err(format!("Unknown patch type: {other}")),
    }
}

/// The identity of a list element for merging/ordering: its merge-key value, or the element
/// itself for primitive lists.
fn identity<'v>(v: &'v Value, key: Option<&str>) -> Option<&'v Value> {
    match key {
        Some(k) => v.get(k),
        None => Some(v),
    }
}

impl Patcher<'_> {
    fn merge_map(
        &self,
        path: &mut Vec<String>,
        mut orig: Map<String, Value>,
        patch: &Map<String, Value>,
    ) -> Result<MapOutcome, String> {
        match directive_of(patch)? {
            Some("delete") => return Ok(MapOutcome::Delete),
            Some("replace") => {
                // Replace the whole map with the patch contents (directives and nulls dropped).
                return self.merge_map(path, Map::new(), &without_key(patch, DIRECTIVE));
            }
            _ => {}
        }

        if let Some(rk) = patch.get(RETAIN_KEYS) {
            let Some(keys) = rk.as_array() else {
                return Err(format!("invalid retainKeys directive: {rk}"));
            };
            // Drop every live key not listed; the patch's own keys then merge as usual (kubectl
            // sends `rollingUpdate: null` beside the directive, which must not be an error).
            let keys: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
            orig.retain(|k, _| keys.contains(&k.as_str()));
        }

        for (k, v) in patch {
            let Some(field) = k.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) else {
                continue;
            };
            let Some(remove) = v.as_array() else {
                return Err(format!("{k} must be a list, got {v}"));
            };
            if let Some(Value::Array(list)) = orig.get_mut(field) {
                list.retain(|x| !remove.contains(x));
                // An emptied list is dropped, as Go's `omitempty` would on the next write.
                if list.is_empty() {
                    orig.shift_remove(field);
                }
            }
        }

        let mut ordered_here: Vec<&str> = Vec::new();
        for (k, pv) in patch {
            if k.starts_with('$') {
                continue;
            }
            // Take the live value out in place (not `remove`) so that key order is preserved:
            // the API server's no-op detection compares serialized objects.
            let live = orig.get_mut(k).map(std::mem::take);
            path.push(k.clone());
            let result = self.merge_field(
                path,
                live,
                pv,
                patch.get(&format!("{SET_ELEMENT_ORDER}{k}")),
            );
            path.pop();
            match result? {
                Some(v) => match orig.get_mut(k) {
                    Some(slot) => *slot = v,
                    None => {
                        orig.insert(k.clone(), v);
                    }
                },
                None => {
                    orig.shift_remove(k);
                }
            }
            ordered_here.push(k);
        }

        // `$setElementOrder` for lists the patch does not otherwise touch.
        for (k, order) in patch {
            let Some(field) = k.strip_prefix(SET_ELEMENT_ORDER) else {
                continue;
            };
            if ordered_here.contains(&field) {
                continue;
            }
            let Some(order) = order.as_array() else {
                return Err(format!("{k} must be a list, got {order}"));
            };
            path.push(field.to_string());
            let key = match list_strategy(self.ri, path) {
                ListStrategy::MergeKey(key) => Some(key),
                _ => None,
            };
            path.pop();
            if let Some(Value::Array(list)) = orig.get_mut(field) {
                let server = list.clone();
                *list = apply_order(std::mem::take(list), order, &server, key);
            }
        }
        Ok(MapOutcome::Map(orig))
    }

    /// Merges one field; `None` means the field is absent from the result.
    fn merge_field(
        &self,
        path: &mut Vec<String>,
        live: Option<Value>,
        pv: &Value,
        order: Option<&Value>,
    ) -> Result<Option<Value>, String> {
        match (live, pv) {
            (_, Value::Null) => Ok(None),
            (Some(Value::Object(lm)), Value::Object(pm)) if !map_replaces(self.ri, path) => {
                match self.merge_map(path, lm, pm)? {
                    MapOutcome::Map(m) => Ok(Some(Value::Object(m))),
                    // Upstream (`handleDirectiveInMergeMap`) turns the live map into `{}`.
                    MapOutcome::Delete => Ok(Some(Value::Object(Map::new()))),
                }
            }
            (live, Value::Array(pl)) => {
                let live_list = match live {
                    Some(Value::Array(l)) => l,
                    _ => Vec::new(),
                };
                let strategy = list_strategy(self.ri, path);
                let merged = self.merge_list(path, live_list.clone(), pl, strategy)?;
                let merged = match order {
                    Some(Value::Array(order)) => {
                        let key = match strategy {
                            ListStrategy::MergeKey(k) => Some(k),
                            _ => None,
                        };
                        apply_order(merged, order, &live_list, key)
                    }
                    Some(other) => {
                        return Err(format!("$setElementOrder must be a list, got {other}"));
                    }
                    None => merged,
                };
                Ok(Some(Value::Array(merged)))
            }
            (_, Value::Object(pm)) => {
                // Absent, or a different type, or a replace-strategy map: the cleaned patch value.
                match self.merge_map(path, Map::new(), pm)? {
                    MapOutcome::Map(m) => Ok(Some(Value::Object(m))),
                    MapOutcome::Delete => Ok(None),
                }
            }
            (_, scalar) => Ok(Some(scalar.clone())),
        }
    }

    fn merge_list(
        &self,
        path: &mut Vec<String>,
        live: Vec<Value>,
        patch: &[Value],
        strategy: ListStrategy,
    ) -> Result<Vec<Value>, String> {
        let is_replace_marker =
            |v: &Value| v.get(DIRECTIVE).and_then(Value::as_str) == Some("replace");
        if strategy == ListStrategy::Replace || patch.iter().any(is_replace_marker) {
            // Replace wholesale; map elements are cleaned of nulls/directives.
            let mut out = Vec::new();
            for v in patch.iter().filter(|v| !is_replace_marker(v)) {
                match v {
                    Value::Object(m) => {
                        if let MapOutcome::Map(m) = self.merge_map(path, Map::new(), m)? {
                            out.push(Value::Object(m));
                        }
                    }
                    other => out.push(other.clone()),
                }
            }
            return Ok(out);
        }
        let mut out = live;
        match strategy {
            ListStrategy::Primitive => {
                for v in patch {
                    if v.is_object() || v.is_array() {
                        return Err(format!(
                            "list of primitives contains a non-primitive element: {v}"
                        ));
                    }
                    if !out.contains(v) {
                        out.push(v.clone());
                    }
                }
            }
            ListStrategy::MergeKey(key) => {
                for pe in patch {
                    let Some(pm) = pe.as_object() else {
                        return Err(format!(
                            "element {pe} of a list merged on {key:?} is not a map"
                        ));
                    };
                    let directive = directive_of(pm)?;
                    let Some(kv) = pm.get(key) else {
                        return Err(format!(
                            "map: {pe} does not contain declared merge key: {key}"
                        ));
                    };
                    if directive == Some("delete") {
                        out.retain(|e| e.get(key) != Some(kv));
                        continue;
                    }
                    match out.iter().position(|e| e.get(key) == Some(kv)) {
                        Some(i) => {
                            let live_el = match std::mem::take(&mut out[i]) {
                                Value::Object(m) => m,
                                _ => Map::new(),
                            };
                            match self.merge_map(path, live_el, pm)? {
                                MapOutcome::Map(m) => out[i] = Value::Object(m),
                                MapOutcome::Delete => {
                                    out.remove(i);
                                }
                            }
                        }
                        None => {
                            if let MapOutcome::Map(m) = self.merge_map(path, Map::new(), pm)? {
                                out.push(Value::Object(m));
                            }
                        }
                    }
                }
            }
            // Handled (returned) above.
            ListStrategy::Replace => {}
        }
        Ok(out)
    }
}

fn without_key(m: &Map<String, Value>, key: &str) -> Map<String, Value> {
    let mut m = m.clone();
    m.remove(key);
    m
}

/// Orders `merged` by a `$setElementOrder` list (upstream `normalizeElementOrder` +
/// `mergeSortedSlice`): elements named in `order` are sorted by it; the others ("server-only")
/// keep their relative order; the two runs are interleaved so that a server-only element goes
/// before a patch element only when both are in the live list and it was before it there.
fn apply_order(
    merged: Vec<Value>,
    order: &[Value],
    server: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let order_ids: Vec<&Value> = order.iter().filter_map(|o| identity(o, key)).collect();
    let pos_in = |list: &[&Value], v: &Value| {
        identity(v, key).and_then(|id| list.iter().position(|x| *x == id))
    };
    let server_ids: Vec<&Value> = server.iter().filter_map(|s| identity(s, key)).collect();

    let (mut left, right): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|v| pos_in(&order_ids, v).is_some());
    left.sort_by_key(|v| pos_in(&order_ids, v).unwrap_or(usize::MAX));

    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut li, mut ri) = (left.into_iter().peekable(), right.into_iter().peekable());
    loop {
        match (li.peek(), ri.peek()) {
            (None, None) => break,
            (Some(_), None) => out.extend(li.by_ref()),
            (None, Some(_)) => out.extend(ri.by_ref()),
            (Some(l), Some(r)) => {
                // A server-only element goes first only when both are in the live list and it
                // was before the patch element there; otherwise the patch element goes first.
                let server_first = match (pos_in(&server_ids, r), pos_in(&server_ids, l)) {
                    (Some(a), Some(b)) => a < b,
                    _ => false,
                };
                let next = if server_first { ri.next() } else { li.next() };
                out.extend(next);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::lookup_kind;
    use serde_json::json;

    fn ri(api_version: &str, kind: &str) -> &'static ResourceInfo {
        lookup_kind(api_version, kind).unwrap()
    }

    fn pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                         "finalizers": ["a.io/x", "b.io/y"]},
            "spec": {
                "containers": [
                    {"name": "app", "image": "nginx:1.25", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                     "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                    {"name": "sidecar", "image": "busybox", "command": ["sh", "-c", "sleep 1"]}
                ],
                "tolerations": [{"key": "k1", "operator": "Exists", "effect": "NoSchedule"}],
                "nodeName": "n1"
            },
            "status": {"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}
            ]}
        })
    }

    /// Table: (name, kind, original, patch, expected).
    #[test]
    fn patch_table() {
        let pods = ri("v1", "Pod");
        let cases: Vec<(&str, &ResourceInfo, Value, Value, Value)> = vec![
            (
                "update image of one container by name",
                pods,
                json!({"spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]}}),
                json!({"spec": {"containers": [{"name": "b", "image": "y:2"}]}}),
                json!({"spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:2"}]}}),
            ),
            (
                "add a container",
                pods,
                json!({"spec": {"containers": [{"name": "a", "image": "x:1"}]}}),
                json!({"spec": {"containers": [{"name": "c", "image": "z:1", "args": null}]}}),
                json!({"spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "c", "image": "z:1"}]}}),
            ),
            (
                "delete a container with $patch: delete",
                pods,
                json!({"spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]}}),
                json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
                json!({"spec": {"containers": [{"name": "b", "image": "y:1"}]}}),
            ),
            (
                "env merged by name, null removes a field",
                pods,
                json!({"spec": {"containers": [{"name": "a", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}),
                json!({"spec": {"containers": [{"name": "a", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}, {"name": "A", "value": null}]}]}}),
                json!({"spec": {"containers": [{"name": "a", "env": [{"name": "A"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}]}}),
            ),
            (
                "container command (no strategy) replaced",
                pods,
                json!({"spec": {"containers": [{"name": "a", "command": ["a", "b"]}]}}),
                json!({"spec": {"containers": [{"name": "a", "command": ["c"]}]}}),
                json!({"spec": {"containers": [{"name": "a", "command": ["c"]}]}}),
            ),
            (
                "tolerations replaced wholesale",
                pods,
                json!({"spec": {"tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}}),
                json!({"spec": {"tolerations": [{"key": "c", "operator": "Exists"}]}}),
                json!({"spec": {"tolerations": [{"key": "c", "operator": "Exists"}]}}),
            ),
            (
                "taint: full list replaces node taints",
                ri("v1", "Node"),
                json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}),
                json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoExecute"}]}}),
                json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoExecute"}]}}),
            ),
            (
                "untaint last taint: empty list",
                ri("v1", "Node"),
                json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}),
                json!({"spec": {"taints": []}}),
                json!({"spec": {"taints": []}}),
            ),
            (
                "cordon",
                ri("v1", "Node"),
                json!({"metadata": {"name": "n1"}, "spec": {"podCIDR": "10.0.0.0/24"}}),
                json!({"spec": {"unschedulable": true}}),
                json!({"metadata": {"name": "n1"}, "spec": {"podCIDR": "10.0.0.0/24", "unschedulable": true}}),
            ),
            (
                "uncordon",
                ri("v1", "Node"),
                json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": true}}),
                json!({"spec": {"unschedulable": null}}),
                json!({"metadata": {"name": "n1"}, "spec": {}}),
            ),
            (
                "node conditions merged by type, addresses by type",
                ri("v1", "Node"),
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}],
                                  "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}}),
                json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}],
                                  "addresses": [{"type": "Hostname", "address": "n1"}]}}),
                json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}, {"type": "MemoryPressure", "status": "False"}],
                                  "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}]}}),
            ),
            (
                "pod status conditions by type",
                pods,
                json!({"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}),
                json!({"status": {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}]}}),
                json!({"status": {"conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}]}}),
            ),
            (
                "deployment status conditions by type",
                ri("apps/v1", "Deployment"),
                json!({"status": {"conditions": [{"type": "Available", "status": "False"}, {"type": "Progressing", "status": "True"}]}}),
                json!({"status": {"conditions": [{"type": "Available", "status": "True"}]}}),
                json!({"status": {"conditions": [{"type": "Available", "status": "True"}, {"type": "Progressing", "status": "True"}]}}),
            ),
            (
                "unknown path: list replaced",
                ri("v1", "ConfigMap"),
                json!({"data": {"a": "1"}, "x": [{"name": "a"}, {"name": "b"}]}),
                json!({"x": [{"name": "c"}]}),
                json!({"data": {"a": "1"}, "x": [{"name": "c"}]}),
            ),
            (
                "finalizers: set union",
                pods,
                json!({"metadata": {"finalizers": ["a", "b"]}}),
                json!({"metadata": {"finalizers": ["b", "c"]}}),
                json!({"metadata": {"finalizers": ["a", "b", "c"]}}),
            ),
            (
                "finalizers: $deleteFromPrimitiveList",
                pods,
                json!({"metadata": {"finalizers": ["a", "b", "c"]}}),
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}),
                json!({"metadata": {"finalizers": ["a", "c"]}}),
            ),
            (
                "finalizers: deleting the last one drops the field",
                pods,
                json!({"metadata": {"name": "p", "finalizers": ["a"]}}),
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
                json!({"metadata": {"name": "p"}}),
            ),
            (
                "ownerReferences merged by uid",
                ri("apps/v1", "ReplicaSet"),
                json!({"metadata": {"ownerReferences": [{"uid": "u1", "name": "d1", "controller": true}]}}),
                json!({"metadata": {"ownerReferences": [{"uid": "u1", "controller": null}, {"uid": "u2", "name": "d2"}]}}),
                json!({"metadata": {"ownerReferences": [{"uid": "u1", "name": "d1"}, {"uid": "u2", "name": "d2"}]}}),
            ),
            (
                "retainKeys: RollingUpdate -> Recreate",
                ri("apps/v1", "Deployment"),
                json!({"spec": {"replicas": 2, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}}}),
                json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
                json!({"spec": {"replicas": 2, "strategy": {"type": "Recreate"}}}),
            ),
            (
                "retainKeys as kubectl apply sends it (rollingUpdate: null beside the directive)",
                ri("apps/v1", "Deployment"),
                json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}}}),
                json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": null, "type": "Recreate"}}}),
                json!({"spec": {"strategy": {"type": "Recreate"}}}),
            ),
            (
                "retainKeys without the directive is an ordinary merge",
                ri("apps/v1", "Deployment"),
                json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}),
                json!({"spec": {"strategy": {"type": "Recreate"}}}),
                json!({"spec": {"strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}}}),
            ),
            (
                "$patch: replace in a map",
                pods,
                json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
                json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}),
                json!({"metadata": {"labels": {"c": "3"}}}),
            ),
            (
                "$patch: delete in a map empties it, as upstream",
                pods,
                json!({"metadata": {"name": "p", "labels": {"a": "1"}}}),
                json!({"metadata": {"labels": {"$patch": "delete"}}}),
                json!({"metadata": {"name": "p", "labels": {}}}),
            ),
            (
                "$patch: replace as a list element",
                pods,
                json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}),
                json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "c", "image": "z"}]}}),
                json!({"spec": {"containers": [{"name": "c", "image": "z"}]}}),
            ),
            (
                "$patch: merge is the default",
                pods,
                json!({"metadata": {"labels": {"a": "1"}}}),
                json!({"metadata": {"labels": {"$patch": "merge", "b": "2"}}}),
                json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
            ),
            (
                "pod template containers in a deployment merge by name",
                ri("apps/v1", "Deployment"),
                json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]}}}}),
                json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x:2"}]}}}}),
                json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x:2"}, {"name": "b", "image": "y:1"}]}}}}),
            ),
            (
                "job template volumes merge by name",
                ri("batch/v1", "Job"),
                json!({"spec": {"template": {"spec": {"volumes": [{"name": "v1", "emptyDir": {}}]}}}}),
                json!({"spec": {"template": {"spec": {"volumes": [{"name": "v2", "configMap": {"name": "c"}}]}}}}),
                json!({"spec": {"template": {"spec": {"volumes": [{"name": "v1", "emptyDir": {}}, {"name": "v2", "configMap": {"name": "c"}}]}}}}),
            ),
            (
                "volume source switch with $retainKeys inside a list element",
                pods,
                json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}),
                json!({"spec": {"volumes": [{"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/x"}}]}}),
                json!({"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/x"}}]}}),
            ),
            (
                "PDB selector replaced, not merged",
                ri("policy/v1", "PodDisruptionBudget"),
                json!({"spec": {"selector": {"matchLabels": {"a": "1"}}}}),
                json!({"spec": {"selector": {"matchLabels": {"b": "2"}}}}),
                json!({"spec": {"selector": {"matchLabels": {"b": "2"}}}}),
            ),
            (
                "annotation (rollout restart)",
                ri("apps/v1", "Deployment"),
                json!({"spec": {"template": {"metadata": {"labels": {"app": "w"}}}}}),
                json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-22T08:00:00Z"}}}}}),
                json!({"spec": {"template": {"metadata": {"labels": {"app": "w"}, "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-22T08:00:00Z"}}}}}),
            ),
            (
                "null values inside new content are dropped",
                pods,
                json!({}),
                json!({"metadata": {"labels": {"a": "1", "b": null}}}),
                json!({"metadata": {"labels": {"a": "1"}}}),
            ),
            (
                "$patch: delete of a non-existent element is a no-op",
                pods,
                json!({"spec": {"containers": [{"name": "a"}]}}),
                json!({"spec": {"containers": [{"name": "zz", "$patch": "delete"}]}}),
                json!({"spec": {"containers": [{"name": "a"}]}}),
            ),
            (
                "node podCIDRs primitive union",
                ri("v1", "Node"),
                json!({"spec": {"podCIDRs": ["10.0.0.0/24"]}}),
                json!({"spec": {"podCIDRs": ["10.0.0.0/24", "fd00::/64"]}}),
                json!({"spec": {"podCIDRs": ["10.0.0.0/24", "fd00::/64"]}}),
            ),
        ];
        for (name, ri, original, patch, want) in cases {
            let got = strategic_merge_patch(ri, &original, &patch)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got, want, "{name}");
            assert!(!has_dollar_key(&got), "{name}: directive stored");
        }
    }

    fn has_dollar_key(v: &Value) -> bool {
        match v {
            Value::Object(m) => m
                .iter()
                .any(|(k, v)| k.starts_with('$') || has_dollar_key(v)),
            Value::Array(a) => a.iter().any(has_dollar_key),
            _ => false,
        }
    }

    #[test]
    fn kubectl_apply_body_with_set_element_order() {
        // Live: containers [app, sidecar]; live-only env var LIVE set by someone else.
        // The new manifest reorders env to [C, A] (B removed from the config, so kubectl sends
        // a delete for it) and adds container "init-like" before "app".
        let deploy = ri("apps/v1", "Deployment");
        let live = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "nginx:1.25", "env": [
                {"name": "A", "value": "1"}, {"name": "LIVE", "value": "x"}, {"name": "B", "value": "2"}]},
            {"name": "sidecar", "image": "busybox"}
        ]}}}});
        let patch = json!({
            "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}\n"}},
            "spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "first"}, {"name": "app"}, {"name": "sidecar"}],
                "containers": [
                    {"name": "first", "image": "alpine"},
                    {"name": "app", "image": "nginx:1.26",
                     "$setElementOrder/env": [{"name": "C"}, {"name": "A"}],
                     "env": [{"name": "C", "value": "3"}, {"name": "B", "$patch": "delete"}]}
                ]
            }}}
        });
        let got = strategic_merge_patch(deploy, &live, &patch).unwrap();
        let want = json!({
            "spec": {"template": {"spec": {"containers": [
                {"name": "first", "image": "alpine"},
                {"name": "app", "image": "nginx:1.26", "env": [
                    {"name": "C", "value": "3"}, {"name": "A", "value": "1"}, {"name": "LIVE", "value": "x"}]},
                {"name": "sidecar", "image": "busybox"}
            ]}}},
            "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}\n"}}
        });
        assert_eq!(got, want);
        assert!(!has_dollar_key(&got));
    }

    #[test]
    fn set_element_order_alone_reorders_live_list() {
        let pods = ri("v1", "Pod");
        let live = json!({"metadata": {"finalizers": ["a", "b", "c"]}});
        let patch = json!({"metadata": {"$setElementOrder/finalizers": ["c", "b", "a"]}});
        let got = strategic_merge_patch(pods, &live, &patch).unwrap();
        assert_eq!(got, json!({"metadata": {"finalizers": ["c", "b", "a"]}}));
    }

    #[test]
    fn server_only_elements_keep_their_place() {
        // Live [x, s1, y]; order [y, x]: server-only s1 stays between them as upstream's
        // merge of the sorted runs does (s1 goes before y since y is not before s1 live).
        let order = [json!({"name": "y"}), json!({"name": "x"})];
        let live = vec![
            json!({"name": "x"}),
            json!({"name": "s1"}),
            json!({"name": "y"}),
        ];
        let got = apply_order(live.clone(), &order, &live, Some("name"));
        let names: Vec<&str> = got.iter().map(|v| v["name"].as_str().unwrap()).collect();
        assert_eq!(names, vec!["s1", "y", "x"]);
        let live = vec![
            json!({"name": "s0"}),
            json!({"name": "x"}),
            json!({"name": "y"}),
        ];
        let got = apply_order(
            live.clone(),
            &[json!({"name": "x"}), json!({"name": "y"})],
            &live,
            Some("name"),
        );
        let names: Vec<&str> = got.iter().map(|v| v["name"].as_str().unwrap()).collect();
        assert_eq!(names, vec!["s0", "x", "y"]);
        // A new element (not live) goes before the server-only one that follows.
        let live = vec![json!({"name": "x"}), json!({"name": "s1"})];
        let merged = vec![
            json!({"name": "x"}),
            json!({"name": "s1"}),
            json!({"name": "new"}),
        ];
        let got = apply_order(
            merged,
            &[json!({"name": "x"}), json!({"name": "new"})],
            &live,
            Some("name"),
        );
        let names: Vec<&str> = got.iter().map(|v| v["name"].as_str().unwrap()).collect();
        assert_eq!(names, vec!["x", "new", "s1"]);
    }

    #[test]
    fn full_pod_patch_keeps_unrelated_fields() {
        let pods = ri("v1", "Pod");
        let patch = json!({"spec": {"containers": [{"name": "app", "image": "nginx:1.26"}]}});
        let got = strategic_merge_patch(pods, &pod(), &patch).unwrap();
        let mut want = pod();
        want["spec"]["containers"][0]["image"] = json!("nginx:1.26");
        assert_eq!(got, want);
    }

    #[test]
    fn errors() {
        let pods = ri("v1", "Pod");
        let cases = [
            (json!([1]), "must be a JSON object"),
            (
                json!({"spec": {"containers": [{"image": "x"}]}}),
                "does not contain declared merge key: name",
            ),
            (json!({"spec": {"containers": ["x"]}}), "is not a map"),
            (
                json!({"metadata": {"labels": {"$patch": "explode"}}}),
                "Unknown patch type",
            ),
            (
                json!({"spec": {"strategy": {"$retainKeys": "type"}}}),
                "invalid retainKeys directive",
            ),
            (
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}),
                "must be a list",
            ),
        ];
        for (patch, want) in cases {
            let err = strategic_merge_patch(pods, &pod(), &patch).unwrap_err();
            assert!(err.contains(want), "{patch}: {err}");
        }
    }
}
