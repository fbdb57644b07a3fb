//! Schema pruning: objects are normalised through their k8s-openapi (v1.33) type before they are
//! stored, exactly as a v1.33 API server decodes into its Go structs — unknown fields are dropped
//! (or refused with `fieldValidation=Strict`), fields come out in the upstream order, and what a
//! typed client reads back is what was stored.
//!
//! Validation runs before this step because k8s-openapi silently defaults missing required fields
//! (a container without a name would come out with `name: ""`).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::registry::ResourceInfo;

/// Something done with the typed model of a kind: decoding through it (`prune`), describing it
/// (`openapi`'s component schemas).
pub trait KindVisitor {
    type Out;
    fn visit<T: DeserializeOwned + Serialize + schemars::JsonSchema>(self) -> Self::Out;
}

/// Runs `v` with the k8s-openapi type of `ri`'s kind, `None` for a kind with no typed model.
/// This is the one table from served kinds to Rust types.
pub fn visit_kind<V: KindVisitor>(ri: &ResourceInfo, v: V) -> Option<V::Out> {
    use k8s_openapi::api::{
        apps, authentication, authorization, batch, certificates, coordination, core, discovery,
        events, policy, rbac, scheduling, storage,
    };
    Some(match (ri.group, ri.kind) {
        ("", "Namespace") => v.visit::<core::v1::Namespace>(),
        ("", "Node") => v.visit::<core::v1::Node>(),
        ("", "Pod") => v.visit::<core::v1::Pod>(),
        ("", "Event") => v.visit::<core::v1::Event>(),
        ("", "ConfigMap") => v.visit::<core::v1::ConfigMap>(),
        ("", "Secret") => v.visit::<core::v1::Secret>(),
        ("", "Service") => v.visit::<core::v1::Service>(),
        ("", "Endpoints") => v.visit::<core::v1::Endpoints>(),
        ("", "ServiceAccount") => v.visit::<core::v1::ServiceAccount>(),
        ("", "PersistentVolume") => v.visit::<core::v1::PersistentVolume>(),
        ("", "PersistentVolumeClaim") => v.visit::<core::v1::PersistentVolumeClaim>(),
        ("", "ResourceQuota") => v.visit::<core::v1::ResourceQuota>(),
        ("", "LimitRange") => v.visit::<core::v1::LimitRange>(),
        ("apps", "Deployment") => v.visit::<apps::v1::Deployment>(),
        ("apps", "ReplicaSet") => v.visit::<apps::v1::ReplicaSet>(),
        ("apps", "StatefulSet") => v.visit::<apps::v1::StatefulSet>(),
        ("apps", "DaemonSet") => v.visit::<apps::v1::DaemonSet>(),
        ("apps", "ControllerRevision") => v.visit::<apps::v1::ControllerRevision>(),
        ("authentication.k8s.io", "SelfSubjectReview") => {
            v.visit::<authentication::v1::SelfSubjectReview>()
        }
        ("authentication.k8s.io", "TokenReview") => v.visit::<authentication::v1::TokenReview>(),
        ("authentication.k8s.io", "TokenRequest") => v.visit::<authentication::v1::TokenRequest>(),
        ("authorization.k8s.io", "LocalSubjectAccessReview") => {
            v.visit::<authorization::v1::LocalSubjectAccessReview>()
        }
        ("authorization.k8s.io", "SelfSubjectAccessReview") => {
            v.visit::<authorization::v1::SelfSubjectAccessReview>()
        }
        ("authorization.k8s.io", "SelfSubjectRulesReview") => {
            v.visit::<authorization::v1::SelfSubjectRulesReview>()
        }
        ("authorization.k8s.io", "SubjectAccessReview") => {
            v.visit::<authorization::v1::SubjectAccessReview>()
        }
        ("batch", "Job") => v.visit::<batch::v1::Job>(),
        ("batch", "CronJob") => v.visit::<batch::v1::CronJob>(),
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            v.visit::<certificates::v1::CertificateSigningRequest>()
        }
        ("coordination.k8s.io", "Lease") => v.visit::<coordination::v1::Lease>(),
        ("discovery.k8s.io", "EndpointSlice") => v.visit::<discovery::v1::EndpointSlice>(),
        ("events.k8s.io", "Event") => v.visit::<events::v1::Event>(),
        ("policy", "PodDisruptionBudget") => v.visit::<policy::v1::PodDisruptionBudget>(),
        ("rbac.authorization.k8s.io", "ClusterRole") => v.visit::<rbac::v1::ClusterRole>(),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            v.visit::<rbac::v1::ClusterRoleBinding>()
        }
        ("rbac.authorization.k8s.io", "Role") => v.visit::<rbac::v1::Role>(),
        ("rbac.authorization.k8s.io", "RoleBinding") => v.visit::<rbac::v1::RoleBinding>(),
        ("scheduling.k8s.io", "PriorityClass") => v.visit::<scheduling::v1::PriorityClass>(),
        ("storage.k8s.io", "CSIDriver") => v.visit::<storage::v1::CSIDriver>(),
        ("storage.k8s.io", "CSINode") => v.visit::<storage::v1::CSINode>(),
        ("storage.k8s.io", "StorageClass") => v.visit::<storage::v1::StorageClass>(),
        ("storage.k8s.io", "VolumeAttachment") => v.visit::<storage::v1::VolumeAttachment>(),
        _ => return None,
    })
}

/// The typed model of `status` alone, for the kinds whose status is written most (every kubelet
/// patches its pods' and its node's).
fn visit_status<V: KindVisitor>(ri: &ResourceInfo, v: V) -> Option<V::Out> {
    use k8s_openapi::api::core;
    Some(match (ri.group, ri.kind) {
        ("", "Pod") => v.visit::<core::v1::PodStatus>(),
        ("", "Node") => v.visit::<core::v1::NodeStatus>(),
        _ => return None,
    })
}

struct RoundTrip<'a>(&'a Value);

impl KindVisitor for RoundTrip<'_> {
    type Out = Result<Value, String>;
    fn visit<T: DeserializeOwned + Serialize + schemars::JsonSchema>(self) -> Self::Out {
        // Read from the borrowed value: the same decoding (and errors) as from a copy of it.
        let typed = T::deserialize(self.0).map_err(|e| e.to_string())?;
        serde_json::to_value(&typed).map_err(|e| e.to_string())
    }
}

/// The typed model's decoding of a value, encoded again only when that differs from it: `None`
/// when the value is already exactly its model's encoding (`same_value::same`: the same keys in
/// the same order, the same numbers), as nearly every written object is (a client sends back
/// what it read with a field or two changed), so it need not be built again.
struct Normalized<'a>(&'a Value);

impl KindVisitor for Normalized<'_> {
    type Out = Result<Option<Value>, String>;
    fn visit<T: DeserializeOwned + Serialize + schemars::JsonSchema>(self) -> Self::Out {
        let typed = T::deserialize(self.0).map_err(|e| e.to_string())?;
        if crate::same_value::same(&typed, self.0) {
            #[cfg(debug_assertions)]
            assert_eq!(
                serde_json::to_string(&typed).ok(),
                serde_json::to_string(self.0).ok(),
                "a value found the same as its model's encoding is not"
            );
            return Ok(None);
        }
        serde_json::to_value(&typed)
            .map(Some)
            .map_err(|e| e.to_string())
    }
}

/// Normalises `obj` through the typed model of its kind. Returns the normalised object and the
/// paths of the fields the model does not know (upstream's "unknown field" list).
pub fn prune(ri: &ResourceInfo, obj: &Value) -> Result<(Value, Vec<String>), String> {
    let mut out = visit_kind(ri, RoundTrip(obj)).unwrap_or_else(|| Ok(obj.clone()))?;
    let mut unknown = Vec::new();
    unknown_fields(obj, &out, &mut String::new(), &mut unknown);
    drop_empty_metadata_collections(&mut out);
    Ok((out, unknown))
}

/// [`prune`] of an object the caller gives up: the same result, with the object itself kept
/// (not copied, not rebuilt) when it is already its model's encoding.
pub fn prune_owned(ri: &ResourceInfo, obj: Value) -> Result<(Value, Vec<String>), String> {
    let (mut out, unknown) = match visit_kind(ri, Normalized(&obj)).transpose()? {
        Some(Some(out)) => {
            let mut unknown = Vec::new();
            unknown_fields(&obj, &out, &mut String::new(), &mut unknown);
            (out, unknown)
        }
        // Its own encoding (so no field is unknown), or a kind without a model here.
        Some(None) | None => (obj, Vec::new()),
    };
    drop_empty_metadata_collections(&mut out);
    Ok((out, unknown))
}

/// [`prune`] of an object whose every part but `status` is already normalised (a status patch's
/// result: the stored object with the patch's status): only `status` goes through its typed
/// model, which gives the same object as the whole model would, without copying the spec twice.
/// Gives the unknown fields (all under `status`). `None` (and `obj` untouched) when the kind has
/// no status model here or `status` is not an object; the caller then prunes the whole object.
pub fn prune_status(ri: &ResourceInfo, obj: &mut Value) -> Option<Result<Vec<String>, String>> {
    let status = obj.get_mut("status").filter(|s| s.is_object())?;
    let normalized = visit_status(ri, Normalized(status))?;
    Some(normalized.map(|s| {
        let mut unknown = Vec::new();
        if let Some(s) = s {
            unknown_fields(status, &s, &mut String::from("status"), &mut unknown);
            *status = s;
        }
        unknown
    }))
}

/// The fields PodSpec's typed model writes before `nodeName` (k8s-openapi writes a struct's
/// fields in the order of their Rust names, which is not the order of their JSON names:
/// `hostUsers` comes before `hostname`). A test holds it to the model.
const POD_SPEC_BEFORE_NODE_NAME: [&str; 16] = [
    "activeDeadlineSeconds",
    "affinity",
    "automountServiceAccountToken",
    "containers",
    "dnsConfig",
    "dnsPolicy",
    "enableServiceLinks",
    "ephemeralContainers",
    "hostAliases",
    "hostIPC",
    "hostNetwork",
    "hostPID",
    "hostUsers",
    "hostname",
    "imagePullSecrets",
    "initContainers",
];

/// Sets a normalised pod's `spec.nodeName` without going through the typed model again (a
/// Binding's write; see `crud::Changes::Binding`): after the fields the model writes before it,
/// which is where the model puts it when the spec is in the model's order (a created pod's
/// defaults follow its client's fields, so its spec may not be; the object is the same).
pub fn set_node_name(pod: &mut Value, node: &str) {
    let Some(obj) = pod.as_object_mut() else {
        return;
    };
    let spec = obj
        .entry("spec")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    if let Some(v) = spec.get_mut("nodeName") {
        *v = Value::String(node.to_string());
        return;
    }
    let at = spec
        .keys()
        .position(|k| !POD_SPEC_BEFORE_NODE_NAME.contains(&k.as_str()))
        .unwrap_or(spec.len());
    spec.shift_insert(at, "nodeName".into(), Value::String(node.to_string()));
}

/// ObjectMeta's maps and lists are `omitempty` in Go, so an empty one (`kubectl diff` and
/// `kubectl apply` send `"annotations": {}` once they strip their own annotation) is absent
/// from what upstream stores and returns.
fn drop_empty_metadata_collections(obj: &mut Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    for key in [
        "labels",
        "annotations",
        "finalizers",
        "ownerReferences",
        "managedFields",
    ] {
        let empty = match meta.get(key) {
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        if empty {
            meta.remove(key);
        }
    }
}

/// Collects paths present (and non-null) in `before` but absent from `after`. The path is
/// built in one buffer and copied out only for an unknown field (nearly every write has none).
fn unknown_fields(before: &Value, after: &Value, path: &mut String, out: &mut Vec<String>) {
    use std::fmt::Write;
    let len = path.len();
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, bv) in b {
                if bv.is_null() {
                    continue;
                }
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                match a.get(k) {
                    Some(av) => unknown_fields(bv, av, path, out),
                    None => out.push(path.clone()),
                }
                path.truncate(len);
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            for (i, (bv, av)) in b.iter().zip(a.iter()).enumerate() {
                let _ = write!(path, "[{i}]");
                unknown_fields(bv, av, path, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::lookup;
    use serde_json::json;

    #[test]
    fn drops_and_reports_unknown_fields() {
        let pods = lookup("", "v1", "pods").unwrap();
        let obj = json!({"apiVersion": "v1", "kind": "Pod", "bogus": 1,
            "metadata": {"name": "x", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicy": "Always", "colour": "red"}], "foo": null}});
        let (out, unknown) = prune(pods, &obj).unwrap();
        assert_eq!(
            unknown,
            vec!["bogus".to_string(), "spec.containers[0].colour".to_string()]
        );
        assert!(out.get("bogus").is_none());
        assert_eq!(out["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(out["metadata"]["labels"]["a"], "b");
    }

    #[test]
    fn keeps_int_or_string_and_quantities() {
        let deps = lookup("apps", "v1", "deployments").unwrap();
        let obj = json!({"metadata": {"name": "d"}, "spec": {"selector": {}, "template": {},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}}}});
        let (out, unknown) = prune(deps, &obj).unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(
            out["spec"]["strategy"]["rollingUpdate"],
            json!({"maxSurge": "25%", "maxUnavailable": 1})
        );
    }

    #[test]
    fn empty_metadata_maps_and_lists_are_omitted_as_go_omits_them() {
        let cms = lookup("", "v1", "configmaps").unwrap();
        let obj = json!({"metadata": {"name": "c", "annotations": {}, "labels": {}, "finalizers": []},
            "data": {}});
        let (out, unknown) = prune(cms, &obj).unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(out["metadata"], json!({"name": "c"}));
        assert_eq!(out["data"], json!({}), "only ObjectMeta's collections");
    }

    #[test]
    fn type_errors_are_reported() {
        let pods = lookup("", "v1", "pods").unwrap();
        assert!(prune(pods, &json!({"metadata": {"name": 5}})).is_err());
        assert!(prune_owned(pods, json!({"metadata": {"name": 5}})).is_err());
    }

    /// The owned normalisation gives what the borrowing one gives, byte for byte, for objects
    /// already in their model's form (kept as they are) and for every way of not being in it:
    /// unknown fields, nulls, key order, a float where the model has an integer, empty metadata
    /// collections, a kind without a model.
    #[test]
    fn owned_normalisation_is_the_borrowed_one() {
        let pods = lookup("", "v1", "pods").unwrap();
        let leases = lookup("coordination.k8s.io", "v1", "leases").unwrap();
        let cms = lookup("", "v1", "configmaps").unwrap();
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "x", "labels": {"a": "b"}, "generation": 2},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"}});
        let (model, _) = prune(pods, &pod).unwrap();
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "n1", "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40,
                     "renewTime": "2026-01-01T00:00:00.000000Z"}});
        let (lease_model, _) = prune(leases, &lease).unwrap();
        // The model's own encodings are recognised as such (kept, not rebuilt).
        for (ri, v) in [(pods, &model), (leases, &lease_model)] {
            assert_eq!(visit_kind(ri, Normalized(v)), Some(Ok(None)), "{v}");
        }
        assert_ne!(visit_kind(pods, Normalized(&pod)), Some(Ok(None)));
        let mut cases = vec![
            (pods, pod.clone()),
            (pods, model.clone()),
            (leases, lease.clone()),
            (leases, lease_model),
            (
                pods,
                json!({"bogus": 1, "metadata": {"name": "x"}, "spec": {"foo": null}}),
            ),
            (pods, json!({"metadata": {"name": "x", "generation": 2.0}})),
            (
                leases,
                json!({"spec": {"renewTime": "2026-01-01T00:00:00Z"}}),
            ),
            (
                pods,
                json!({"metadata": {"name": "x", "labels": {}, "finalizers": []}}),
            ),
            (
                cms,
                json!({"metadata": {"name": "c", "annotations": {}}, "data": {}}),
            ),
        ];
        let mut reordered = serde_json::Map::new();
        for (k, v) in model.as_object().unwrap().iter().rev() {
            reordered.insert(k.clone(), v.clone());
        }
        cases.push((pods, Value::Object(reordered)));
        let unmodelled =
            crate::registry::lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions");
        if let Some(ri) = unmodelled.filter(|ri| visit_kind(ri, RoundTrip(&json!({}))).is_none()) {
            cases.push((
                ri,
                json!({"metadata": {"name": "c", "labels": {}}, "x": null}),
            ));
        }
        for (ri, obj) in cases {
            let text = |(v, unknown): (Value, Vec<String>)| (v.to_string(), unknown);
            let want = prune(ri, &obj).map(text);
            assert_eq!(prune_owned(ri, obj.clone()).map(text), want, "{obj}");
        }
    }

    #[test]
    fn the_fields_before_node_name_are_those_the_pod_spec_model_writes_first() {
        // Every PodSpec field, in JSON name order; the model writes them in its own.
        let all = json!({
            "activeDeadlineSeconds": 1, "affinity": {}, "automountServiceAccountToken": true,
            "containers": [], "dnsConfig": {}, "dnsPolicy": "x", "enableServiceLinks": true,
            "ephemeralContainers": [], "hostAliases": [], "hostIPC": true, "hostNetwork": true,
            "hostPID": true, "hostUsers": true, "hostname": "x", "imagePullSecrets": [],
            "initContainers": [], "nodeName": "x", "nodeSelector": {}, "os": {"name": "linux"},
            "overhead": {}, "preemptionPolicy": "x", "priority": 1, "priorityClassName": "x",
            "readinessGates": [], "resourceClaims": [], "resources": {}, "restartPolicy": "x",
            "runtimeClassName": "x", "schedulerName": "x", "schedulingGates": [],
            "securityContext": {}, "serviceAccount": "x", "serviceAccountName": "x",
            "setHostnameAsFQDN": true, "shareProcessNamespace": true, "subdomain": "x",
            "terminationGracePeriodSeconds": 1, "tolerations": [],
            "topologySpreadConstraints": [], "volumes": []
        });
        let spec: k8s_openapi::api::core::v1::PodSpec =
            serde_json::from_value(all.clone()).unwrap();
        let written = serde_json::to_value(&spec).unwrap();
        let keys: Vec<&str> = written
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys.len(), all.as_object().unwrap().len(), "{keys:?}");
        let at = keys.iter().position(|k| *k == "nodeName").unwrap();
        assert_eq!(keys[..at], POD_SPEC_BEFORE_NODE_NAME);
    }

    #[test]
    fn a_node_name_set_in_place_leaves_the_pod_as_the_model_writes_it() {
        let pods = lookup("", "v1", "pods").unwrap();
        let specs = [
            json!({"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Always"}),
            json!({"activeDeadlineSeconds": 5, "affinity": {}, "dnsPolicy": "ClusterFirst",
                "hostname": "h", "initContainers": [], "nodeSelector": {"a": "b"},
                "containers": [{"name": "c", "image": "i"}], "volumes": []}),
            json!({"containers": [{"name": "c", "image": "i"}], "nodeName": ""}),
            json!({"tolerations": [], "containers": [{"name": "c", "image": "i"}]}),
        ];
        for spec in specs {
            let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": spec});
            let (mut stored, _) = prune(pods, &pod).unwrap();
            set_node_name(&mut stored, "n1");
            let (whole, _) = prune(pods, &stored).unwrap();
            assert_eq!(stored.to_string(), whole.to_string());
            assert_eq!(stored["spec"]["nodeName"], "n1");
        }
    }
}
