//! The pod_gc controller (shell); decisions live in decide.rs.
//!
//! One task watches Nodes and Pods into deterministic caches and runs a GC pass at start and then
//! every 20 s (sliding): terminated-pod threshold, out-of-service terminating pods, orphans of
//! deleted nodes (40 s quarantine, then an API GET confirming NotFound), unscheduled terminating
//! pods. A force deletion first PATCHes `pods/{name}/status` (phase Failed, plus the
//! DisruptionTarget condition for orphans) unless the pod is terminal, then DELETEs with grace 0.

pub mod decide;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use klab_api::Clock;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::node_lifecycle::decide::add;
use crate::node_lifecycle::informer::{
    Cache, SETTLE, WatchStream, is_not_found, next_after, ok_event, pass_time, shared_watch,
};
pub use decide::PodGcConfig;
use decide::{
    ForceDelete, OrphanQuarantine, gc_orphaned, gc_terminated, gc_terminating,
    gc_unscheduled_terminating,
};

/// Errors that stop the controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the {0} watch stream ended")]
    StreamEnded(&'static str),
}

/// `pod_gc_collector_force_delete_pods_total{namespace,reason}` and `..._errors_total`.
#[derive(Clone, Debug, Default)]
pub struct PodGcMetrics {
    inner: Arc<Mutex<PodGcCounts>>,
}

/// Counter values by (namespace, reason label).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodGcCounts {
    pub force_delete_pods_total: BTreeMap<(String, String), u64>,
    pub force_delete_pod_errors_total: BTreeMap<(String, String), u64>,
}

impl PodGcMetrics {
    pub fn snapshot(&self) -> PodGcCounts {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn inc(&self, ok: bool, ns: &str, reason: &str) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let map = if ok {
            &mut g.force_delete_pods_total
        } else {
            &mut g.force_delete_pod_errors_total
        };
        let n = map.entry((ns.to_string(), reason.to_string())).or_insert(0);
        *n = n.saturating_add(1);
    }
}

/// Runs PodGC until a watch stream ends (never, in practice).
pub async fn run(
    client: kube::Client,
    informers: klab_runtime::Informers,
    clock: Clock,
    config: PodGcConfig,
    metrics: PodGcMetrics,
) -> Result<(), Error> {
    let mut c = Controller {
        client: client.clone(),
        clock: clock.clone(),
        cfg: config,
        metrics,
        nodes: Cache::default(),
        pods: Cache::default(),
        quarantine: OrphanQuarantine::default(),
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
    let mut next = clock.now();
    loop {
        let at = clock.runtime_instant_at(add(next, SETTLE));
        tokio::select! {
            biased;
            ev = node_w.next() => {
                if ev.is_none() { return Err(Error::StreamEnded("nodes")) }
                if let Some(ev) = ok_event("nodes", ev) { c.nodes.apply(ev); }
            }
            ev = pod_w.next() => {
                if ev.is_none() { return Err(Error::StreamEnded("pods")) }
                if let Some(ev) = ok_event("pods", ev) { c.pods.apply(ev); }
            }
            _ = tokio::time::sleep_until(at) => {
                c.gc().await;
                next = next_after(clock.now(), c.cfg.gc_check_period);
            }
        }
    }
}

struct Controller {
    client: kube::Client,
    clock: Clock,
    cfg: PodGcConfig,
    metrics: PodGcMetrics,
    nodes: Cache<Node>,
    pods: Cache<Pod>,
    quarantine: OrphanQuarantine,
}

impl Controller {
    /// One pass, in upstream order, over one snapshot of the caches.
    async fn gc(&mut self) {
        let now = pass_time(&self.clock);
        // Shared with the cache (no copy of any object): a pass at 5 000 nodes and 150 000 pods
        // must not clone them all every 20 s.
        let pods: Vec<Arc<Pod>> = self.pods.arcs().cloned().collect();
        let nodes: BTreeMap<String, Arc<Node>> = self
            .nodes
            .arcs()
            .map(|n| (n.metadata.name.clone().unwrap_or_default(), n.clone()))
            .collect();
        let existing: BTreeSet<String> = nodes.keys().cloned().collect();
        let mut done: BTreeSet<(String, String)> = BTreeSet::new();

        let terminated = gc_terminated(&pods, self.cfg.terminated_pod_gc_threshold, now);
        self.execute(terminated, &mut done).await;
        let terminating = gc_terminating(&pods, &nodes, now);
        self.execute(terminating, &mut done).await;

        self.quarantine
            .observe(&pods, &existing, now, self.cfg.quarantine_time);
        let mut deleted_nodes = BTreeSet::new();
        let api: Api<Node> = Api::all(self.client.clone());
        for name in self.quarantine.take_ready(&existing, now) {
            match api.get(&name).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {
                    deleted_nodes.insert(name);
                }
                Err(e) => {
                    tracing::warn!(node = name.as_str(), error = %e, "Error while getting node")
                }
            }
        }
        let orphaned = gc_orphaned(&pods, &deleted_nodes, pass_time(&self.clock));
        self.execute(orphaned, &mut done).await;
        let unscheduled = gc_unscheduled_terminating(&pods, pass_time(&self.clock));
        self.execute(unscheduled, &mut done).await;
    }

    async fn execute(&self, deletes: Vec<ForceDelete>, done: &mut BTreeSet<(String, String)>) {
        for d in deletes {
            if !done.insert((d.namespace.clone(), d.name.clone())) {
                continue;
            }
            let ok = self.force_delete(&d).await;
            self.metrics.inc(ok, &d.namespace, d.reason.label());
        }
    }

    /// `markFailedAndDeletePod[WithCondition]`.
    async fn force_delete(&self, d: &ForceDelete) -> bool {
        tracing::info!(pod = %format!("{}/{}", d.namespace, d.name), "PodGC is force deleting Pod");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &d.namespace);
        if let Some(st) = &d.status_patch {
            let mut status = json!({ "phase": st.phase });
            if let Some(conds) = &st.conditions {
                status["conditions"] = json!(conds);
            }
            if let Err(e) = api
                .patch_status(
                    &d.name,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({ "status": status })),
                )
                .await
            {
                tracing::warn!(pod = d.name.as_str(), error = %e, "failed to mark pod Failed before deletion");
                return false;
            }
        }
        match api
            .delete(
                &d.name,
                &DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                },
            )
            .await
        {
            Ok(_) => true,
            Err(e) if is_not_found(&e) => true,
            Err(e) => {
                tracing::warn!(pod = d.name.as_str(), error = %e, "failed to delete pod");
                false
            }
        }
    }
}
