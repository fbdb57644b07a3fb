//! The namespace controller: empties a namespace being deleted and then finalizes it.
//!
//! `kubectl delete namespace x` only marks the namespace (`deletionTimestamp`, phase
//! `Terminating`); as upstream, this controller deletes every namespaced object in it (pods
//! gracefully, so a pod on a dead node keeps the namespace Terminating just as it would on a real
//! cluster) and, once nothing is left, clears the `kubernetes` finalizer through
//! `namespaces/<name>/finalize`, which removes the namespace.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::discovery::{ApiResource, Discovery, Scope};
use serde_json::json;

use klab_api::Clock;

/// How often a terminating namespace is checked again while content remains.
pub const RESYNC: Duration = Duration::from_secs(5);

/// What one pass over a terminating namespace found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContentReport {
    /// `(resource, count)` of objects still present, sorted by resource.
    pub remaining: Vec<(String, usize)>,
}

impl ContentReport {
    pub fn is_empty(&self) -> bool {
        self.remaining.iter().all(|(_, n)| *n == 0)
    }
}

/// Whether a namespace is waiting for this controller: being deleted and still holding the
/// `kubernetes` finalizer.
pub fn needs_finalizing(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_some()
        && ns
            .spec
            .as_ref()
            .and_then(|s| s.finalizers.as_ref())
            .is_some_and(|f| f.iter().any(|x| x == "kubernetes"))
}

async fn namespaced_resources(client: &kube::Client) -> Result<Vec<ApiResource>, kube::Error> {
    let discovery = Discovery::new(client.clone()).run().await?;
    let mut out = Vec::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if caps.scope == Scope::Namespaced
                && caps.supports_operation(kube::discovery::verbs::DELETE)
                && caps.supports_operation(kube::discovery::verbs::LIST)
            {
                out.push(ar);
            }
        }
    }
    out.sort_by(|a, b| {
        (a.group.as_str(), a.plural.as_str()).cmp(&(b.group.as_str(), b.plural.as_str()))
    });
    // The same objects can be served under two groups (core and events.k8s.io events): keep one.
    out.dedup_by(|a, b| a.plural == b.plural && a.kind == b.kind);
    Ok(out)
}

/// Deletes what is left in `ns` and reports what remains.
async fn delete_content(
    client: &kube::Client,
    resources: &[ApiResource],
    ns: &str,
) -> Result<ContentReport, kube::Error> {
    let mut report = ContentReport::default();
    for ar in resources {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
        let list = api.list(&ListParams::default()).await?;
        let mut remaining = 0usize;
        for obj in list.items {
            let name = obj.metadata.name.clone().unwrap_or_default();
            if obj.metadata.deletion_timestamp.is_none() {
                match api.delete(&name, &DeleteParams::background()).await {
                    Ok(either) => {
                        if either.is_left() {
                            remaining = remaining.saturating_add(1);
                        }
                    }
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e),
                }
            } else {
                remaining = remaining.saturating_add(1);
            }
        }
        if remaining > 0 {
            report.remaining.push((ar.plural.clone(), remaining));
        }
    }
    Ok(report)
}

/// Runs the namespace controller forever.
pub async fn run(
    client: kube::Client,
    informers: klab_runtime::Informers,
    clock: Clock,
) -> Result<(), kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    // Woken by any namespace change seen by the shared informer; the pass itself lists afresh.
    let mut changes = informers.get::<Namespace>().subscribe();
    let mut resources: Option<Vec<ApiResource>> = None;
    loop {
        let list = match namespaces.list(&ListParams::default()).await {
            Ok(l) => l.items,
            Err(e) => {
                tracing::warn!("namespace controller: list failed: {e}");
                clock.sleep(RESYNC).await;
                continue;
            }
        };
        let mut pending = false;
        for ns in list.iter().filter(|n| needs_finalizing(n)) {
            let name = ns.metadata.name.clone().unwrap_or_default();
            if resources.is_none() {
                resources = namespaced_resources(&client).await.ok();
            }
            let Some(res) = &resources else {
                pending = true;
                continue;
            };
            match delete_content(&client, res, &name).await {
                Ok(report) if report.is_empty() => {
                    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "spec": {"finalizers": []}});
                    if let Err(e) = namespaces
                        .replace_subresource("finalize", &name, &PostParams::default(), &body)
                        .await
                    {
                        tracing::warn!("namespace controller: finalize {name}: {e}");
                        pending = true;
                    }
                }
                Ok(_) => pending = true,
                Err(e) => {
                    tracing::warn!("namespace controller: deleting content of {name}: {e}");
                    pending = true;
                }
            }
        }
        // Wait for a namespace change, or re-check soon while content is still going away.
        tokio::select! {
            biased;
            ev = changes.recv() => if ev.is_none() { return Ok(()) },
            _ = clock.sleep(RESYNC), if pending => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalizing_needs_deletion_and_the_kubernetes_finalizer() {
        let ns = |deleting: bool, fin: &[&str]| -> Namespace {
            serde_json::from_value(json!({
                "metadata": {"name": "x", "deletionTimestamp": if deleting { json!("2026-01-01T00:00:00Z") } else { json!(null) }},
                "spec": {"finalizers": fin}
            }))
            .unwrap()
        };
        assert!(needs_finalizing(&ns(true, &["kubernetes"])));
        assert!(!needs_finalizing(&ns(false, &["kubernetes"])));
        assert!(!needs_finalizing(&ns(true, &[])));
    }

    #[tokio::test(start_paused = true)]
    async fn deleting_a_namespace_removes_its_content_then_itself() {
        let api = klab_apiserver::testing::memory_server().await;
        let client = kube::Client::new(api.router(), "default");
        let clock = api.clock().clone();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "demo"}})).unwrap(),
            )
            .await
            .unwrap();
        let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
            Api::namespaced(client.clone(), "demo");
        cms.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "c"}})).unwrap(),
        )
        .await
        .unwrap();
        let informers = klab_runtime::Informers::new(client.clone(), clock.clone());
        let task = tokio::spawn(run(client.clone(), informers, clock));
        namespaces
            .delete("demo", &DeleteParams::default())
            .await
            .unwrap();
        let start = tokio::time::Instant::now();
        while namespaces.get_opt("demo").await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "namespace not removed"
            );
        }
        assert!(cms.get_opt("c").await.unwrap().is_none());
        task.abort();
    }

    /// `kubectl delete ns` with a pod whose grace period is i64::MAX seconds: the pod is marked
    /// Terminating at the end of time, the namespace waits for it, and the controller lives on
    /// (it used to die on the delete): once the pod is force-deleted the namespace goes.
    #[tokio::test(start_paused = true)]
    async fn namespace_with_the_longest_grace_period_pod() {
        let api = klab_apiserver::testing::memory_server().await;
        let client = kube::Client::new(api.router(), "default");
        let clock = api.clock().clone();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "demo"}})).unwrap(),
            )
            .await
            .unwrap();
        // The service-account controller's part: the namespace's default account.
        let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(client.clone(), "demo");
        sas.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap(),
        )
        .await
        .unwrap();
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "demo");
        pods.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {
                "nodeName": "n1", "terminationGracePeriodSeconds": i64::MAX,
                "containers": [{"name": "c", "image": "nginx"}]}}))
            .unwrap(),
        )
        .await
        .unwrap();
        let informers = klab_runtime::Informers::new(client.clone(), clock.clone());
        let task = tokio::spawn(run(client.clone(), informers, clock));
        namespaces
            .delete("demo", &DeleteParams::default())
            .await
            .unwrap();
        let start = tokio::time::Instant::now();
        loop {
            let p = pods.get("p").await.unwrap();
            if p.metadata.deletion_timestamp.is_some() {
                assert_eq!(p.metadata.deletion_grace_period_seconds, Some(i64::MAX));
                break;
            }
            assert!(!task.is_finished(), "namespace controller died");
            assert!(start.elapsed() < Duration::from_secs(30), "pod not marked");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(!task.is_finished(), "namespace controller died");
        assert!(namespaces.get_opt("demo").await.unwrap().is_some());
        pods.delete("p", &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
        while namespaces.get_opt("demo").await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "namespace not removed"
            );
        }
        task.abort();
    }
}
