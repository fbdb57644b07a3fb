//! Writes as upstream's controllers make them. Their bootstrap roles grant `update` (PUT) on the
//! objects and `/status` subresources they change, rarely `patch`, so a controller running under
//! its `system:controller:*` role must PUT: [`update_merged`] reads the object as stored, applies
//! the change (a JSON merge patch, the shape the decisions produce) and writes the whole object
//! back at that resourceVersion, reading again after a conflict ([`update_merged_from`] starts
//! from the controller's cached copy instead of a read). The stored result is the one the merge
//! patch would have given.

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
    K: kube::Resource + Clone + DeserializeOwned + Serialize + Debug + PartialEq,
{
    write_merged(api, name, None, target, patch).await
}

/// [`update_merged`] starting from the controller's cached copy of the object, as upstream's
/// workload controllers call `UpdateStatus` with their informer's copy: the first update is
/// sent at that copy's resourceVersion without reading the object, and only a conflict (the
/// cache was behind) makes it read the stored object and try again.
pub async fn update_merged_from<K>(
    api: &Api<K>,
    cached: &K,
    target: Target,
    patch: &Value,
) -> kube::Result<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + Debug + PartialEq,
{
    let name = cached.meta().name.clone().unwrap_or_default();
    write_merged(api, &name, Some(cached), target, patch).await
}

async fn write_merged<K>(
    api: &Api<K>,
    name: &str,
    mut first: Option<&K>,
    target: Target,
    patch: &Value,
) -> kube::Result<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + Debug + PartialEq,
{
    let mut conflicts = 0u32;
    loop {
        let next = match first.take() {
            Some(cached) => merged(cached, patch).map_err(kube::Error::SerdeError)?,
            None => {
                let current = api.get(name).await?;
                let next = merged(&current, patch).map_err(kube::Error::SerdeError)?;
                // After a conflict the stored object may already carry the change (the cache
                // was behind the controller's own last write): upstream's status loops compare
                // the object they read again and write nothing then.
                if conflicts > 0 && current == next {
                    return Ok(current);
                }
                next
            }
        };
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

    /// The requests a client sends, as "METHOD path".
    type Seen = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

    fn counting_client(api: &klab_apiserver::server::ApiServer) -> (kube::Client, Seen) {
        let seen = Seen::default();
        let log = seen.clone();
        let router = api.router().layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let log = log.clone();
                async move {
                    let line = format!("{} {}", req.method(), req.uri().path());
                    log.lock().unwrap().push(line);
                    next.run(req).await
                }
            },
        ));
        (kube::Client::new(router, "default"), seen)
    }

    #[tokio::test(start_paused = true)]
    async fn an_update_from_the_cache_reads_the_object_only_after_a_conflict() {
        let api = klab_apiserver::testing::memory_server().await;
        let (client, seen) = counting_client(&api);
        let rss: Api<ReplicaSet> = Api::namespaced(client, "default");
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
        }))
        .unwrap();
        let created = rss.create(&PostParams::default(), &rs).await.unwrap();
        // An informer's copy: no managed fields (they are dropped on decode).
        let mut cached = created.clone();
        cached.metadata.managed_fields = None;
        seen.lock().unwrap().clear();

        let patch = json!({"status": {"replicas": 2, "readyReplicas": 1}});
        let written = update_merged_from(&rss, &cached, Target::Status, &patch)
            .await
            .unwrap();
        let path = "/apis/apps/v1/namespaces/default/replicasets/web/status";
        assert_eq!(*seen.lock().unwrap(), vec![format!("PUT {path}")]);
        let status = written.status.clone().unwrap();
        assert_eq!((status.replicas, status.ready_replicas), (2, Some(1)));
        // The creator's entry is kept although the update sent none, and the status writer's
        // entry is added beside it.
        let managers: Vec<_> = written
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .map(|m| (m.operation.clone(), m.subresource.clone()))
            .collect();
        assert_eq!(managers.len(), 2, "{managers:?}");
        assert!(managers.contains(&(Some("Update".into()), Some("status".into()))));

        // The cache is now behind: the first update conflicts, then the object is read and
        // the change applied to what is stored (the label written meanwhile stays).
        let mut labelled = written.clone();
        labelled
            .metadata
            .labels
            .get_or_insert_default()
            .insert("tier".into(), "front".into());
        rss.replace("web", &PostParams::default(), &labelled)
            .await
            .unwrap();
        seen.lock().unwrap().clear();
        let patch = json!({"status": {"availableReplicas": 1}});
        let written = update_merged_from(&rss, &cached, Target::Status, &patch)
            .await
            .unwrap();
        let get = "/apis/apps/v1/namespaces/default/replicasets/web";
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                format!("PUT {path}"),
                format!("GET {get}"),
                format!("PUT {path}")
            ]
        );
        let status = written.status.clone().unwrap();
        assert_eq!(
            (status.ready_replicas, status.available_replicas),
            (Some(1), Some(1))
        );
        assert_eq!(
            written
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("tier"))
                .map(String::as_str),
            Some("front")
        );

        // Behind again, but what is stored already says what the update would: read after the
        // conflict, it is not written a second time.
        seen.lock().unwrap().clear();
        let again = update_merged_from(&rss, &cached, Target::Status, &patch)
            .await
            .unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            vec![format!("PUT {path}"), format!("GET {get}")]
        );
        assert_eq!(
            again.metadata.resource_version,
            written.metadata.resource_version
        );
    }
}
