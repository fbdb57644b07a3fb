//! Writes as upstream's controllers make them. Their bootstrap roles grant `update` (PUT) on the
//! objects and `/status` subresources they change, rarely `patch`, so a controller running under
//! its `system:controller:*` role must PUT: [`update_merged`] reads the object as stored, applies
//! the change (a JSON merge patch, the shape the decisions produce) and writes the whole object
//! back at that resourceVersion, reading again after a conflict. The stored result is the one the
//! merge patch would have given.

use std::fmt::Debug;

use kube::Api;
use kube::api::PostParams;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Which endpoint the write goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The object itself (metadata and spec; the server keeps the stored status).
    Object,
    /// The `/status` subresource (the server keeps the stored spec).
    Status,
}

/// Conflicts retried before the error is returned (the caller's queue retries after that).
const CONFLICT_RETRIES: u32 = 5;

/// The object `current` with `patch` merged in (RFC 7386: `null` removes a field).
pub fn merged<K: Serialize + DeserializeOwned>(
    current: &K,
    patch: &Value,
) -> serde_json::Result<K> {
    let mut v = serde_json::to_value(current)?;
    json_patch::merge(&mut v, patch);
    serde_json::from_value(v)
}

/// Applies the merge `patch` to `name` as stored and writes it with an update of `target`.
pub async fn update_merged<K>(
    api: &Api<K>,
    name: &str,
    target: Target,
    patch: &Value,
) -> kube::Result<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let mut conflicts = 0u32;
    loop {
        let current = api.get(name).await?;
        let next = merged(&current, patch).map_err(kube::Error::SerdeError)?;
        let pp = PostParams::default();
        let written = match target {
            Target::Object => api.replace(name, &pp, &next).await,
            Target::Status => api.replace_status(name, &pp, &next).await,
        };
        match written {
            Err(kube::Error::Api(s)) if s.code == 409 && conflicts < CONFLICT_RETRIES => {
                conflicts = conflicts.saturating_add(1);
            }
            other => return other,
        }
    }
}

/// Replaces the ownerReferences of the object `meta` describes with an update, as upstream's
/// StatefulSet controller updates a claim for its retention policy (its role grants `update`,
/// not `patch`, on claims): only if the stored object is still the same one with the owners the
/// caller saw (the JSON patch's `test` operations elsewhere). False when it changed or failed.
pub async fn set_owner_refs_by_update<K>(
    api: &Api<K>,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    refs: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
) -> bool
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = meta.name.clone().unwrap_or_default();
    let Ok(mut current) = api.get(&name).await else {
        return false;
    };
    let m = current.meta_mut();
    if m.uid != meta.uid || m.owner_references != meta.owner_references {
        return false;
    }
    m.owner_references = (!refs.is_empty()).then_some(refs);
    match api.replace(&name, &PostParams::default(), &current).await {
        Ok(_) => true,
        Err(e) => {
            tracing::debug!(object = %name, error = %e, "ownerReferences update failed");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
    use serde_json::json;

    #[test]
    fn merged_sets_removes_and_keeps_fields_as_a_merge_patch_does() {
        let rs = ReplicaSet {
            metadata: kube::api::ObjectMeta {
                name: Some("web".into()),
                resource_version: Some("7".into()),
                annotations: Some([("a".to_string(), "1".to_string())].into()),
                ..Default::default()
            },
            status: Some(ReplicaSetStatus {
                replicas: 3,
                ready_replicas: Some(2),
                ..Default::default()
            }),
            ..Default::default()
        };
        let cases: Vec<(Value, Value)> = vec![
            (json!({}), serde_json::to_value(&rs).unwrap()),
            (
                json!({"status": {"readyReplicas": null, "availableReplicas": 1}}),
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                       "metadata": {"name": "web", "resourceVersion": "7", "annotations": {"a": "1"}},
                       "status": {"replicas": 3, "availableReplicas": 1}}),
            ),
            (
                json!({"metadata": {"annotations": {"b": "2", "a": null}}}),
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                       "metadata": {"name": "web", "resourceVersion": "7", "annotations": {"b": "2"}},
                       "status": {"replicas": 3, "readyReplicas": 2}}),
            ),
        ];
        for (patch, want) in cases {
            let got = serde_json::to_value(merged(&rs, &patch).unwrap()).unwrap();
            assert_eq!(got, want, "{patch}");
        }
        // A patch that breaks the type is an error, not a panic.
        assert!(merged(&rs, &json!({"status": {"replicas": "three"}})).is_err());
    }
}
