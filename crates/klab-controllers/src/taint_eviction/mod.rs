//! The taint eviction controller (shell); decisions live in decide.rs.
//!
//! One task owns all state: it watches Nodes and Pods into deterministic caches, keeps the NoExecute
//! taints of tainted nodes, reacts to node/pod changes with `processPodOnNode` (§2.4–2.6), and fires
//! the timed evictions on the controller's clock. An eviction (§2.8) emits `TaintManagerEviction`,
//! adds the `DisruptionTarget` condition through `pods/{name}/status` and then DELETEs the pod with
//! empty options (the pod's own grace period applies). Evictions run inline, in key order; the
//! upstream 8-worker routing only affects real-time interleaving.

pub mod decide;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, Taint};
use klab_api::{Clock, DetRng, names};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::events::EventRecorder;
use crate::node_lifecycle::informer::{Cache, Change, WatchStream, ok_event, shared_watch};
use decide::{
    Added, EvictionQueue, no_execute_taints, pod_key, pod_node_name, pod_tolerations,
    with_disruption_target,
};

/// Errors that stop the controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the {0} watch stream ended")]
    StreamEnded(&'static str),
}

/// Knobs of the taint eviction controller (upstream constants; it has no flags of its own).
#[derive(Clone, Debug, PartialEq)]
pub struct TaintEvictionConfig {
    /// Attempts of GET + condition + DELETE per eviction (`retries`, 5).
    pub delete_attempts: u32,
    /// Sleep between attempts (10 ms).
    pub retry_sleep: Duration,
}

impl Default for TaintEvictionConfig {
    fn default() -> Self {
        TaintEvictionConfig {
            delete_attempts: 5,
            retry_sleep: Duration::from_millis(10),
        }
    }
}

/// `taint_eviction_controller_pod_deletions_total`, shared.
#[derive(Clone, Debug, Default)]
pub struct TaintEvictionMetrics {
    deletions: Arc<Mutex<u64>>,
}

impl TaintEvictionMetrics {
    pub fn pod_deletions_total(&self) -> u64 {
        *self.deletions.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn inc(&self) {
        let mut n = self.deletions.lock().unwrap_or_else(|p| p.into_inner());
        *n = n.saturating_add(1);
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        format!(
            "# HELP taint_eviction_controller_pod_deletions_total [ALPHA] Total number of Pods deleted by TaintEvictionController since its start.\n# TYPE taint_eviction_controller_pod_deletions_total counter\ntaint_eviction_controller_pod_deletions_total {}\n",
            self.pod_deletions_total()
        )
    }
}

/// Runs the taint eviction controller until a watch stream ends (never, in practice).
pub async fn run(
    client: kube::Client,
    informers: klab_runtime::Informers,
    clock: Clock,
    rng: DetRng,
    config: TaintEvictionConfig,
    metrics: TaintEvictionMetrics,
) -> Result<(), Error> {
    let recorder = EventRecorder::new(
        client.clone(),
        clock.clone(),
        rng,
        names::CONTROLLER_TAINT_EVICTION,
    );
    let mut c = Controller {
        client: client.clone(),
        clock: clock.clone(),
        cfg: config,
        recorder,
        metrics,
        nodes: Cache::default(),
        pods: Cache::indexed_by(crate::node_lifecycle::informer::pod_node),
        tainted: BTreeMap::new(),
        queue: EvictionQueue::default(),
        run_now: VecDeque::new(),
    };
    let mut node_w: WatchStream<Node> = shared_watch(&informers.get());
    let mut pod_w: WatchStream<Pod> = shared_watch(&informers.get());

    while !(c.nodes.synced() && c.pods.synced()) {
        tokio::select! {
            biased;
            ev = node_w.next() => { if ev.is_none() { return Err(Error::StreamEnded("nodes")) }; if let Some(ev) = ok_event("nodes", ev) { c.nodes.apply(ev); } }
            ev = pod_w.next() => { if ev.is_none() { return Err(Error::StreamEnded("pods")) }; if let Some(ev) = ok_event("pods", ev) { c.pods.apply(ev); } }
        }
    }
    // Every node and pod was "added": the node items cover every pod on a tainted node.
    let names: Vec<String> = c.nodes.keys().cloned().collect();
    for n in names {
        c.handle_node_update(&n).await;
    }

    loop {
        while let Some(key) = c.run_now.pop_front() {
            c.evict(&key).await;
            c.queue.finish(&key);
        }
        let next = c.queue.next_fire();
        let deadline = next
            .map(|t| clock.runtime_instant_at(t))
            .unwrap_or_else(tokio::time::Instant::now);
        tokio::select! {
            biased;
            ev = node_w.next() => {
                if ev.is_none() { return Err(Error::StreamEnded("nodes")) }
                if let Some(ev) = ok_event("nodes", ev) {
                    for ch in c.nodes.apply(ev) { c.on_node_change(ch).await; }
                }
            }
            ev = pod_w.next() => {
                if ev.is_none() { return Err(Error::StreamEnded("pods")) }
                if let Some(ev) = ok_event("pods", ev) {
                    for ch in c.pods.apply(ev) { c.on_pod_change(ch).await; }
                }
            }
            _ = tokio::time::sleep_until(deadline), if next.is_some() => {
                for key in c.queue.due(clock.now()) {
                    c.evict(&key).await;
                    c.queue.finish(&key);
                }
            }
        }
    }
}

struct Controller {
    client: kube::Client,
    clock: Clock,
    cfg: TaintEvictionConfig,
    recorder: EventRecorder,
    metrics: TaintEvictionMetrics,
    nodes: Cache<Node>,
    pods: Cache<Pod>,
    /// `taintedNodes`: node name → its NoExecute taints (only nodes with at least one).
    tainted: BTreeMap<String, Vec<Taint>>,
    queue: EvictionQueue,
    /// Immediate evictions to run once the current handler finishes.
    run_now: VecDeque<String>,
}

/// The reference upstream uses for TEC events: no UID.
fn pod_ref_from_key(key: &str) -> ObjectReference {
    let (ns, name) = key.split_once('/').unwrap_or(("", key));
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(ns.to_string()),
        name: Some(name.to_string()),
        ..Default::default()
    }
}

impl Controller {
    async fn on_node_change(&mut self, ch: Change<Node>) {
        match ch {
            Change::Applied { old, new } => {
                // Ignore updates that leave the NoExecute taints (order, values, timeAdded) unchanged.
                if let Some(old) = old
                    && no_execute_taints(&old) == no_execute_taints(&new)
                {
                    return;
                }
                let name = new.metadata.name.clone().unwrap_or_default();
                self.handle_node_update(&name).await;
            }
            Change::Deleted(old) => {
                let name = old.metadata.name.clone().unwrap_or_default();
                self.handle_node_update(&name).await;
            }
        }
    }

    async fn on_pod_change(&mut self, ch: Change<Pod>) {
        match ch {
            Change::Applied { old, new } => {
                if let Some(old) = old
                    && pod_tolerations(&old) == pod_tolerations(&new)
                    && pod_node_name(&old) == pod_node_name(&new)
                {
                    return;
                }
                let node = pod_node_name(&new).to_string();
                self.handle_pod_update(&pod_key(&new), &node).await;
            }
            Change::Deleted(old) => {
                let node = pod_node_name(&old).to_string();
                self.handle_pod_update(&pod_key(&old), &node).await;
            }
        }
    }

    /// §2.4.
    async fn handle_node_update(&mut self, name: &str) {
        let Some(node) = self.nodes.get(name).cloned() else {
            // Deleted node: forget its taints; scheduled evictions are not cancelled.
            self.tainted.remove(name);
            return;
        };
        let taints = no_execute_taints(&node);
        if taints.is_empty() {
            self.tainted.remove(name);
        } else {
            self.tainted.insert(name.to_string(), taints.clone());
        }
        let pods: Vec<Pod> = self.pods.indexed(name).cloned().collect();
        if pods.is_empty() {
            return;
        }
        if taints.is_empty() {
            for p in &pods {
                self.cancel_with_event(&pod_key(p)).await;
            }
            return;
        }
        let now = self.clock.now();
        for p in &pods {
            self.process_pod_on_node(&pod_key(p), &taints, p, now).await;
        }
    }

    /// §2.5.
    async fn handle_pod_update(&mut self, key: &str, node_name: &str) {
        let Some(pod) = self.pods.get(key).cloned() else {
            self.cancel_with_event(key).await;
            return;
        };
        if node_name.is_empty() || pod_node_name(&pod) != node_name {
            return;
        }
        let Some(taints) = self.tainted.get(node_name).cloned() else {
            return;
        };
        let now = self.clock.now();
        self.process_pod_on_node(key, &taints, &pod, now).await;
    }

    async fn process_pod_on_node(
        &mut self,
        key: &str,
        taints: &[Taint],
        pod: &Pod,
        now: jiff::Timestamp,
    ) {
        let out = self
            .queue
            .process_pod_on_node(key, taints, pod_tolerations(pod), now);
        if out.cancelled {
            self.emit_cancel(key).await;
        }
        if out.added == Some(Added::RunNow) {
            self.run_now.push_back(key.to_string());
        }
    }

    async fn cancel_with_event(&mut self, key: &str) {
        if self.queue.cancel_work(key) {
            self.emit_cancel(key).await;
        }
    }

    async fn emit_cancel(&self, key: &str) {
        self.recorder
            .record(
                &pod_ref_from_key(key),
                names::EVENT_NORMAL,
                names::EVENT_TAINT_MANAGER_EVICTION,
                format!("Cancelling deletion of Pod {key}"),
            )
            .await;
    }

    /// §2.8: event, then up to `delete_attempts` of GET, DisruptionTarget condition, DELETE.
    async fn evict(&mut self, key: &str) {
        self.recorder
            .record(
                &pod_ref_from_key(key),
                names::EVENT_NORMAL,
                names::EVENT_TAINT_MANAGER_EVICTION,
                format!("Marking for deletion Pod {key}"),
            )
            .await;
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let attempts = self.cfg.delete_attempts.max(1);
        for attempt in 0..attempts {
            match self.add_condition_and_delete(&api, name).await {
                Ok(()) => {
                    self.metrics.inc();
                    return;
                }
                Err(e) => {
                    if attempt.saturating_add(1) == attempts {
                        tracing::error!(pod = key, error = %e, "TaintEvictionController: timed worker failed");
                        return;
                    }
                    self.clock.sleep(self.cfg.retry_sleep).await;
                }
            }
        }
    }

    async fn add_condition_and_delete(
        &self,
        api: &Api<Pod>,
        name: &str,
    ) -> Result<(), kube::Error> {
        let pod = api.get(name).await?;
        if let Some(conditions) = with_disruption_target(
            &pod,
            names::REASON_DELETION_BY_TAINT_MANAGER,
            names::MSG_DELETION_BY_TAINT_MANAGER,
            self.clock.now(),
        ) {
            let patch = json!({ "status": { "conditions": conditions } });
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        api.delete(name, &DeleteParams::default()).await?;
        Ok(())
    }
}
