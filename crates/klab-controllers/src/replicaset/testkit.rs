//! Test harness for the workload controllers' virtual-time tests: an in-memory API server, a
//! virtual clock, admin clients, and helpers that play the kubelet/scheduler parts (binding,
//! Running/Ready status, force deletion) through the API.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use klab_api::{Clock, DetRng};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::events::EventRecorder;

pub struct Harness {
    pub clock: Clock,
    pub client: kube::Client,
    pub rng: DetRng,
    /// The shared informers every controller a test starts reads from (one per process).
    pub informers: klab_runtime::Informers,
    _api: klab_apiserver::ApiServer,
}

/// Builds the server inside the current (paused) runtime.
pub async fn harness() -> Harness {
    let clock = Clock::virtual_default();
    let rng = DetRng::seeded(7);
    let api =
        klab_apiserver::testing::memory_server_with(clock.clone(), rng.clone(), Default::default())
            .await;
    let client = kube::Client::new(api.router(), "default");
    Harness {
        informers: klab_runtime::Informers::new(client.clone(), clock.clone()),
        clock,
        client,
        rng,
        _api: api,
    }
}

impl Harness {
    pub fn recorder(&self, component: &str) -> EventRecorder {
        EventRecorder::new(
            self.client.clone(),
            self.clock.clone(),
            self.rng.clone(),
            component,
        )
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// All pods of the namespace, sorted by name: (name, terminating).
    pub async fn pod_names(&self) -> Vec<(String, bool)> {
        let mut v: Vec<(String, bool)> = self
            .pods()
            .list(&ListParams::default())
            .await
            .expect("list pods")
            .items
            .into_iter()
            .map(|p| {
                (
                    p.metadata.name.unwrap_or_default(),
                    p.metadata.deletion_timestamp.is_some(),
                )
            })
            .collect();
        v.sort();
        v
    }

    pub async fn active_pods(&self) -> Vec<String> {
        self.pod_names()
            .await
            .into_iter()
            .filter(|(_, t)| !t)
            .map(|(n, _)| n)
            .collect()
    }

    /// Polls `cond` every 10 ms of virtual time, up to `limit`; returns the virtual time elapsed
    /// since the harness started when it first held. Panics if it never does.
    pub async fn wait_until<F, Fut>(&self, limit: Duration, what: &str, mut cond: F) -> Duration
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = self.clock.elapsed() + limit;
        loop {
            if cond().await {
                return self.clock.elapsed();
            }
            assert!(
                self.clock.elapsed() < deadline,
                "timed out waiting for {what}"
            );
            self.clock.sleep(Duration::from_millis(10)).await;
        }
    }

    /// Binds a pod to a node (what the scheduler does).
    pub async fn bind(&self, pod: &str, node: &str) {
        let body = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod, "namespace": "default"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        let _: serde_json::Value = self
            .pods()
            .create_subresource("binding", pod, &PostParams::default(), &body)
            .await
            .expect("bind");
    }

    /// Marks a pod Running and Ready now (what the kubelet reports).
    pub async fn make_ready(&self, pod: &str) {
        let now = self.clock.now_time();
        let st = json!({"status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
            ],
        }});
        self.pods()
            .patch_status(pod, &PatchParams::default(), &Patch::Merge(&st))
            .await
            .expect("pod status");
    }

    /// `kubectl delete pod --grace-period=0 --force`.
    pub async fn force_delete(&self, pod: &str) {
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        self.pods().delete(pod, &dp).await.expect("force delete");
    }

    /// A plain (graceful) delete.
    pub async fn delete(&self, pod: &str) {
        self.pods()
            .delete(pod, &DeleteParams::default())
            .await
            .expect("delete");
    }

    /// Event messages in the namespace, sorted.
    pub async fn event_messages(&self) -> Vec<String> {
        let api: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(self.client.clone(), "default");
        let mut v: Vec<String> = api
            .list(&ListParams::default())
            .await
            .map(|l| l.items.into_iter().filter_map(|e| e.message).collect())
            .unwrap_or_default();
        v.sort();
        v
    }
}

/// A minimal pod template labelled `app=<app>`.
pub fn template(app: &str, image: &str) -> serde_json::Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": image}]},
    })
}
