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

/// Normalises `obj` through the typed model of its kind. Returns the normalised object and the
/// paths of the fields the model does not know (upstream's "unknown field" list).
pub fn prune(ri: &ResourceInfo, obj: &Value) -> Result<(Value, Vec<String>), String> {
    let mut out = visit_kind(ri, RoundTrip(obj)).unwrap_or_else(|| Ok(obj.clone()))?;
    let mut unknown = Vec::new();
    unknown_fields(obj, &out, &mut String::new(), &mut unknown);
    drop_empty_metadata_collections(&mut out);
    Ok((out, unknown))
}

/// [`prune`] of an object whose every part but `status` is already normalised (a status patch's
/// result: the stored object with the patch's status): only `status` goes through its typed
/// model, which gives the same object as the whole model would, without copying the spec twice.
/// `None` (and `obj` untouched) when the kind has no status model here or `status` is not an
/// object; the caller then prunes the whole object. Unknown fields are not listed: the caller
/// uses this only when they would not be reported.
pub fn prune_status(ri: &ResourceInfo, obj: &mut Value) -> Option<Result<(), String>> {
    let status = obj.get_mut("status").filter(|s| s.is_object())?;
    let normalized = visit_status(ri, RoundTrip(status))?;
    Some(normalized.map(|s| *status = s))
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
    }
}
