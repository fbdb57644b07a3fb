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

fn round_trip<T: DeserializeOwned + Serialize>(v: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

/// Normalises `obj` through the typed model of its kind. Returns the normalised object and the
/// paths of the fields the model does not know (upstream's "unknown field" list).
pub fn prune(ri: &ResourceInfo, obj: &Value) -> Result<(Value, Vec<String>), String> {
    use k8s_openapi::api::{
        apps, batch, coordination, core, discovery, events, policy, scheduling, storage,
    };
    let out = match (ri.group, ri.kind) {
        ("", "Namespace") => round_trip::<core::v1::Namespace>(obj),
        ("", "Node") => round_trip::<core::v1::Node>(obj),
        ("", "Pod") => round_trip::<core::v1::Pod>(obj),
        ("", "Event") => round_trip::<core::v1::Event>(obj),
        ("", "ConfigMap") => round_trip::<core::v1::ConfigMap>(obj),
        ("", "Secret") => round_trip::<core::v1::Secret>(obj),
        ("", "Service") => round_trip::<core::v1::Service>(obj),
        ("", "Endpoints") => round_trip::<core::v1::Endpoints>(obj),
        ("", "ServiceAccount") => round_trip::<core::v1::ServiceAccount>(obj),
        ("", "PersistentVolume") => round_trip::<core::v1::PersistentVolume>(obj),
        ("", "PersistentVolumeClaim") => round_trip::<core::v1::PersistentVolumeClaim>(obj),
        ("", "ResourceQuota") => round_trip::<core::v1::ResourceQuota>(obj),
        ("", "LimitRange") => round_trip::<core::v1::LimitRange>(obj),
        ("apps", "Deployment") => round_trip::<apps::v1::Deployment>(obj),
        ("apps", "ReplicaSet") => round_trip::<apps::v1::ReplicaSet>(obj),
        ("apps", "StatefulSet") => round_trip::<apps::v1::StatefulSet>(obj),
        ("apps", "DaemonSet") => round_trip::<apps::v1::DaemonSet>(obj),
        ("apps", "ControllerRevision") => round_trip::<apps::v1::ControllerRevision>(obj),
        ("batch", "Job") => round_trip::<batch::v1::Job>(obj),
        ("coordination.k8s.io", "Lease") => round_trip::<coordination::v1::Lease>(obj),
        ("discovery.k8s.io", "EndpointSlice") => round_trip::<discovery::v1::EndpointSlice>(obj),
        ("events.k8s.io", "Event") => round_trip::<events::v1::Event>(obj),
        ("policy", "PodDisruptionBudget") => round_trip::<policy::v1::PodDisruptionBudget>(obj),
        ("scheduling.k8s.io", "PriorityClass") => round_trip::<scheduling::v1::PriorityClass>(obj),
        ("storage.k8s.io", "CSIDriver") => round_trip::<storage::v1::CSIDriver>(obj),
        ("storage.k8s.io", "CSINode") => round_trip::<storage::v1::CSINode>(obj),
        ("storage.k8s.io", "StorageClass") => round_trip::<storage::v1::StorageClass>(obj),
        ("storage.k8s.io", "VolumeAttachment") => round_trip::<storage::v1::VolumeAttachment>(obj),
        _ => Ok(obj.clone()),
    }?;
    let mut unknown = Vec::new();
    unknown_fields(obj, &out, String::new(), &mut unknown);
    Ok((out, unknown))
}

/// Collects paths present (and non-null) in `before` but absent from `after`.
fn unknown_fields(before: &Value, after: &Value, path: String, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, bv) in b {
                if bv.is_null() {
                    continue;
                }
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match a.get(k) {
                    Some(av) => unknown_fields(bv, av, p, out),
                    None => out.push(p),
                }
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            for (i, (bv, av)) in b.iter().zip(a.iter()).enumerate() {
                unknown_fields(bv, av, format!("{path}[{i}]"), out);
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
    fn type_errors_are_reported() {
        let pods = lookup("", "v1", "pods").unwrap();
        assert!(prune(pods, &json!({"metadata": {"name": 5}})).is_err());
    }
}
