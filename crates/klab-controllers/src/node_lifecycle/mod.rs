//! The node lifecycle controller (shell); decisions live in decide.rs, zones.rs and queue.rs.
//!
//! One task owns all state: it drives the Node, Lease (kube-node-lease) and Pod watches into
//! deterministic caches, runs the health-monitor pass every `--node-monitor-period` (sliding: next
//! start = end + period), the NoExecute tainting pass every 100 ms (sliding too), the NoSchedule
//! condition-taint pass on every node add/update, and the pod assignment path on pod add/rebind.
//! Writes are PATCHes: node conditions via `nodes/{name}/status`, taints via `spec.taints` (the
//! full list, with a resourceVersion precondition), pod Ready=False via `pods/{name}/status`.

pub mod config;
pub mod decide;
pub mod informer;
pub mod metrics;
pub mod queue;
pub mod zones;

#[cfg(test)]
pub(crate) mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeStatus, Pod, Taint};
use klab_api::{Clock, DetRng, names};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::events::{EventRecorder, node_ref, object_ref_for_node, object_ref_for_pod};
pub use config::NodeLifecycleConfig;
use decide::{
    HealthEvaluation, HealthRecord, NoExecuteAction, ReadyStatus, TaintingStep, add,
    evaluate_health, mark_pod_not_ready, no_execute_action, no_schedule_taint_diff, node_taints,
    pod_readiness_action, record_after_write, requeue_before_tainting, swap_taints, taint,
    tainting_step,
};
use informer::{
    Cache, Change, SETTLE, WatchStream, is_conflict, is_not_found, next_after, ok_event,
    shared_watch,
};
pub use metrics::NodeLifecycleMetrics;
use queue::Outcome;
use zones::{DisruptionOutcome, Zones, excluded_from_disruption, zone_key};

/// Errors that stop the controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the {0} watch stream ended")]
    StreamEnded(&'static str),
}

/// Attempts of a taint write on conflict (upstream `UpdateTaintBackoff` has 5 steps).
const TAINT_WRITE_ATTEMPTS: usize = 5;

/// Runs the node lifecycle controller until a watch stream ends (never, in practice).
pub async fn run(
    client: kube::Client,
    informers: klab_runtime::Informers,
    clock: Clock,
    rng: DetRng,
    config: NodeLifecycleConfig,
    metrics: NodeLifecycleMetrics,
) -> Result<(), Error> {
    let recorder = EventRecorder::new(
        client.clone(),
        clock.clone(),
        rng,
        names::EVENT_SOURCE_NODE_CONTROLLER,
    );
    let mut c = Controller::new(client.clone(), clock.clone(), config, recorder, metrics);
    let mut node_w: WatchStream<Node> = shared_watch(&informers.get());
    let mut lease_w: WatchStream<Lease> = shared_watch(&informers.get());
    let mut pod_w: WatchStream<Pod> = shared_watch(&informers.get());

    // Start-up waits for the informers to sync; the handlers' work queued meanwhile runs after.
    while !(c.nodes.synced() && c.leases.synced() && c.pods.synced()) {
        tokio::select! {
            biased;
            ev = node_w.next() => { if ev.is_none() { return Err(Error::StreamEnded("nodes")) }; if let Some(ev) = ok_event("nodes", ev) { c.nodes.apply(ev); } }
            ev = lease_w.next() => { if ev.is_none() { return Err(Error::StreamEnded("leases")) }; if let Some(ev) = ok_event("leases", ev) { c.leases.apply(ev); } }
            ev = pod_w.next() => { if ev.is_none() { return Err(Error::StreamEnded("pods")) }; if let Some(ev) = ok_event("pods", ev) { c.pods.apply(ev); } }
        }
    }
    let names: Vec<String> = c.nodes.keys().cloned().collect();
    for n in names {
        c.node_update_worker(&n).await;
    }

    let mut next_monitor = clock.now();
    let mut next_taint = clock.now();
    loop {
        let monitor_at = clock.runtime_instant_at(add(next_monitor, SETTLE));
        let taint_at = clock.runtime_instant_at(add(next_taint, SETTLE));
        tokio::select! {
            biased;
            ev = node_w.next() => {
                if ev.is_none() { return Err(Error::StreamEnded("nodes")) }
                if let Some(ev) = ok_event("nodes", ev) {
                    for ch in c.nodes.apply(ev) { c.on_node_change(ch).await; }
                }
            }
            ev = lease_w.next() => {
                if ev.is_none() { return Err(Error::StreamEnded("leases")) }
                if let Some(ev) = ok_event("leases", ev) { c.leases.apply(ev); }
            }
            ev = pod_w.next() => {
                if ev.is_none() { return Err(Error::StreamEnded("pods")) }
                if let Some(ev) = ok_event("pods", ev) {
                    for ch in c.pods.apply(ev) { c.on_pod_change(ch).await; }
                }
            }
            _ = tokio::time::sleep_until(monitor_at) => {
                c.monitor_pass().await;
                next_monitor = next_after(clock.now(), c.cfg.node_monitor_period);
            }
            _ = tokio::time::sleep_until(taint_at) => {
                c.tainting_pass().await;
                next_taint = next_after(clock.now(), c.cfg.node_eviction_period);
            }
        }
    }
}

struct Controller {
    clock: Clock,
    cfg: NodeLifecycleConfig,
    recorder: EventRecorder,
    metrics: NodeLifecycleMetrics,
    nodes_api: Api<Node>,
    client: kube::Client,
    nodes: Cache<Node>,
    leases: Cache<Lease>,
    pods: Cache<Pod>,
    /// Per-node health records; entries are never deleted.
    health: BTreeMap<String, HealthRecord>,
    /// `knownNodeSet`.
    known: BTreeMap<String, Arc<Node>>,
    zones: Zones,
    /// `nodesToRetry`: nodes whose MarkPodsNotReady must be retried.
    retry: BTreeSet<String>,
}

impl Controller {
    fn new(
        client: kube::Client,
        clock: Clock,
        cfg: NodeLifecycleConfig,
        recorder: EventRecorder,
        metrics: NodeLifecycleMetrics,
    ) -> Self {
        Controller {
            nodes_api: Api::all(client.clone()),
            client,
            clock,
            cfg,
            recorder,
            metrics,
            nodes: Cache::default(),
            leases: Cache::default(),
            pods: Cache::indexed_by(informer::pod_node),
            health: BTreeMap::new(),
            known: BTreeMap::new(),
            zones: Zones::default(),
            retry: BTreeSet::new(),
        }
    }

    /// "Now" inside a periodic pass: the pass's nominal instant (passes run `SETTLE` late so that
    /// they observe every write made at that instant, but decide as if they ran at it; strict
    /// comparisons against object timestamps such as `creationTimestamp + 60 s` depend on it).
    fn pass_time(&self) -> Timestamp {
        informer::pass_time(&self.clock)
    }

    // ---- event handlers ----

    async fn on_node_change(&mut self, ch: Change<Node>) {
        match ch {
            Change::Applied { new, .. } => {
                let name = new.metadata.name.clone().unwrap_or_default();
                self.node_update_worker(&name).await;
            }
            Change::Deleted(old) => {
                if let Some(name) = old.metadata.name.as_deref() {
                    self.retry.remove(name);
                }
            }
        }
    }

    async fn on_pod_change(&mut self, ch: Change<Pod>) {
        // `podUpdated`: a new pod, or a pod whose nodeName changed to a non-empty value.
        if let Change::Applied { old, new } = ch {
            let node = new
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            let old_node = old
                .as_ref()
                .and_then(|o| o.spec.as_ref())
                .and_then(|s| s.node_name.clone());
            if !node.is_empty() && old_node.as_deref() != Some(node.as_str()) {
                self.process_pod(&informer::key_of(new.as_ref()), &node)
                    .await;
            }
        }
    }

    /// `processPod` (§1.9).
    async fn process_pod(&mut self, key: &str, node_name: &str) {
        let Some(pod) = self.pods.get(key).cloned() else {
            return;
        };
        let Some(rec) = self.health.get(node_name) else {
            return;
        };
        if self.nodes.get(node_name).is_none() {
            // Upstream re-queues with rate limiting until the node shows up in the cache; the next
            // pod or node event brings it back here.
            return;
        }
        let Some(ready) = rec.ready.as_ref() else {
            return;
        };
        if ready.status != "True" {
            let _ = self
                .mark_pods_not_ready(std::slice::from_ref(&pod), node_name, self.clock.now())
                .await;
        }
    }

    // ---- NoSchedule condition taints (§1.6) ----

    /// The node update worker: the NoSchedule pass, then the os/arch label reconciliation.
    async fn node_update_worker(&mut self, name: &str) {
        self.no_schedule_pass(name).await;
        let Some(node) = self.nodes.get(name).cloned() else {
            return;
        };
        let labels = decide::labels_to_reconcile(&node);
        if labels.is_empty() {
            return;
        }
        let patch = json!({ "metadata": { "labels": labels } });
        if let Err(e) = self
            .nodes_api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(node = name, error = %e, "failed to reconcile node labels");
        }
    }

    async fn no_schedule_pass(&mut self, name: &str) {
        let Some(node) = self.nodes.get(name).cloned() else {
            return;
        };
        let (to_add, to_remove) = no_schedule_taint_diff(&node);
        if to_add.is_empty() && to_remove.is_empty() {
            return;
        }
        if let Err(e) = self
            .edit_taints(&node, &to_add, &to_remove, self.clock.now())
            .await
        {
            tracing::warn!(node = name, error = %e, "failed to swap NoSchedule taints of node");
        }
    }

    /// Adds then removes taints (`SwapNodeControllerTaint`): computed against the cached copy first
    /// and against a fresh GET after a conflict. Returns whether the node now has the wanted taints
    /// (true without an API call when nothing changes).
    async fn edit_taints(
        &self,
        hint: &Node,
        to_add: &[Taint],
        to_remove: &[Taint],
        now: Timestamp,
    ) -> Result<bool, kube::Error> {
        // The hint is read in place: a pass visits every node every 5 s and finds nothing to
        // change on most of them, so nothing is copied. Only a conflict reads a fresh copy.
        let mut fresh: Option<Node> = None;
        for attempt in 0..TAINT_WRITE_ATTEMPTS {
            let node = fresh.as_ref().unwrap_or(hint);
            let Some(taints) = swap_taints(node_taints(node), to_add, to_remove, now) else {
                return Ok(true);
            };
            let name = node.metadata.name.clone().unwrap_or_default();
            let patch = json!({
                "metadata": { "resourceVersion": node.metadata.resource_version },
                "spec": { "taints": taints },
            });
            match self
                .nodes_api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(true),
                Err(e) if is_conflict(&e) && attempt.saturating_add(1) < TAINT_WRITE_ATTEMPTS => {
                    fresh = Some(self.nodes_api.get(&name).await?);
                }
                Err(e) if is_not_found(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    /// `markNodeAsReachable`: removes both NLC NoExecute taints (API call only if the given copy has
    /// one), then drops the node from its zone queue.
    async fn mark_node_as_reachable(&mut self, node: &Node, now: Timestamp) -> bool {
        let remove = [
            taint(names::TAINT_UNREACHABLE, names::EFFECT_NO_EXECUTE),
            taint(names::TAINT_NOT_READY, names::EFFECT_NO_EXECUTE),
        ];
        let ok = match self.edit_taints(node, &[], &remove, now).await {
            Ok(ok) => ok,
            Err(e) => {
                tracing::warn!(node = ?node.metadata.name, error = %e, "failed to remove NoExecute taints from node");
                false
            }
        };
        let name = node.metadata.name.clone().unwrap_or_default();
        let zone = zone_key(node);
        self.zones.tainter(&zone, &self.cfg).remove(&name);
        ok
    }

    // ---- health monitor pass (§1.4, §1.5, §1.8, §1.10) ----

    async fn monitor_pass(&mut self) {
        let now = self.pass_time();
        // The cache's own objects: a pass visits every node every 5 s, and copies one only to
        // record a write of its own.
        let nodes: Vec<Arc<Node>> = self.nodes.arcs().cloned().collect();
        let present: BTreeSet<String> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();

        // classifyNodes: added, deleted, and known nodes whose zone lost its state entry.
        let mut added = Vec::new();
        for n in &nodes {
            let name = n.metadata.name.clone().unwrap_or_default();
            if !self.known.contains_key(&name) {
                added.push(n.clone());
            } else if !self.zones.states.contains_key(&zone_key(n)) {
                let zone = zone_key(n);
                if self.zones.ensure_zone(&zone, &self.cfg) {
                    self.metrics.init_zone(&zone);
                }
            }
        }
        let deleted: Vec<(String, Arc<Node>)> = self
            .known
            .iter()
            .filter(|(k, _)| !present.contains(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for n in &added {
            let name = n.metadata.name.clone().unwrap_or_default();
            self.recorder
                .record(
                    &object_ref_for_node(n),
                    names::EVENT_NORMAL,
                    names::EVENT_REGISTERED_NODE,
                    format!("Node {name} event: Registered Node {name} in Controller"),
                )
                .await;
            self.known.insert(name, n.clone());
            let zone = zone_key(n);
            if self.zones.ensure_zone(&zone, &self.cfg) {
                self.metrics.init_zone(&zone);
            }
            self.mark_node_as_reachable(n, now).await;
        }
        for (name, n) in &deleted {
            self.recorder
                .record(
                    &node_ref(name, n.metadata.uid.as_deref().unwrap_or_default()),
                    names::EVENT_NORMAL,
                    names::EVENT_REMOVING_NODE,
                    format!("Node {name} event: Removing Node {name} from Controller"),
                )
                .await;
            self.known.remove(name);
        }

        let mut zone_statuses: BTreeMap<String, Vec<Option<String>>> = BTreeMap::new();
        for n in &nodes {
            let Some((node, eval)) = self.update_health(n.clone()).await else {
                continue;
            };
            let now = self.pass_time();
            let name = node.metadata.name.clone().unwrap_or_default();
            if !excluded_from_disruption(&node) {
                zone_statuses
                    .entry(zone_key(&node))
                    .or_default()
                    .push(eval.current.as_ref().map(|c| c.status.clone()));
            }
            let Some(current) = eval.current.as_ref() else {
                self.retry.remove(&name);
                continue;
            };
            self.process_taint_based_eviction(&node, &eval.observed.status, now)
                .await;

            let (event, mark) = pod_readiness_action(
                &eval.observed.status,
                Some(current.status.as_str()),
                self.retry.contains(&name),
            );
            if event {
                self.recorder
                    .record(
                        &object_ref_for_node(&node),
                        names::EVENT_NORMAL,
                        names::EVENT_NODE_NOT_READY,
                        format!(
                            "Node {name} status is now: {}",
                            names::STATUS_NODE_NOT_READY
                        ),
                    )
                    .await;
            }
            // The node's pods are gathered only when they are to be marked: a pass over every
            // node must not copy every pod.
            if mark
                && self
                    .mark_pods_not_ready(&self.pods_on(&name), &name, now)
                    .await
                    .is_err()
            {
                self.retry.insert(name);
                continue;
            }
            self.retry.remove(&name);
        }

        for (zone, statuses) in &zone_statuses {
            let unhealthy = statuses
                .iter()
                .filter(|s| s.as_deref() != Some("True"))
                .count();
            self.metrics.set_zone(zone, statuses.len(), unhealthy);
        }
        let before: BTreeSet<String> = self.zones.states.keys().cloned().collect();
        let now = self.pass_time();
        let outcome = self.zones.handle_disruption(&zone_statuses, now, &self.cfg);
        for gone in before
            .iter()
            .filter(|z| !self.zones.states.contains_key(*z))
        {
            self.metrics.reset_zone(gone);
        }
        match outcome {
            DisruptionOutcome::Changed(_) => {}
            DisruptionOutcome::EnteredMasterDisruption => {
                for n in &nodes {
                    self.mark_node_as_reachable(n, now).await;
                }
            }
            DisruptionOutcome::ExitedMasterDisruption => {
                for n in &nodes {
                    if let Some(rec) = n
                        .metadata
                        .name
                        .as_ref()
                        .and_then(|k| self.health.get_mut(k))
                    {
                        rec.probe_timestamp = now;
                        rec.ready_transition_timestamp = now;
                    }
                }
            }
        }
    }

    /// Pods whose `spec.nodeName` is `node`, in namespace/name order.
    fn pods_on(&self, node: &str) -> Vec<Pod> {
        self.pods.indexed(node).cloned().collect()
    }

    /// `tryUpdateNodeHealth` with the caller's retry loop: up to `node_health_update_retry` attempts,
    /// re-reading the node from the API after a failure. None = skip this node for the pass.
    async fn update_health(
        &mut self,
        mut node: Arc<Node>,
    ) -> Option<(Arc<Node>, HealthEvaluation)> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let attempts = self.cfg.node_health_update_retry.max(1);
        for attempt in 0..attempts {
            let now = self.pass_time();
            let lease = self
                .leases
                .get(&format!("{}/{name}", names::NS_NODE_LEASE))
                .cloned();
            let eval = evaluate_health(
                self.health.get(&name),
                &node,
                lease.as_ref(),
                now,
                &self.cfg,
            );
            self.health.insert(name.clone(), eval.record.clone());
            let Some(status) = eval.write.clone() else {
                return Some((node, eval));
            };
            match self.write_status(&node, &status).await {
                Ok(()) => {
                    let rec = record_after_write(&eval.record, status.clone(), lease.as_ref(), now);
                    self.health.insert(name.clone(), rec);
                    Arc::make_mut(&mut node).status = Some(status);
                    // Upstream's tainting pass reads the Node informer, which has this write
                    // milliseconds later — before its next 100 ms pass. Here the pass can run in
                    // the same virtual instant, before the watch event: without this it would
                    // find no Ready condition on a node that never posted status, spend the
                    // zone's eviction token on a retry and taint one token (10 s) late.
                    if let Some(cached) = self.nodes.get_mut(&name) {
                        cached.status = node.status.clone();
                    }
                    return Some((node, eval));
                }
                Err(e) => {
                    tracing::warn!(node = name.as_str(), error = %e, "error updating node status");
                }
            }
            if attempt.saturating_add(1) == attempts {
                break;
            }
            match self.nodes_api.get(&name).await {
                Ok(n) => node = Arc::new(n),
                Err(e) => {
                    tracing::warn!(node = name.as_str(), error = %e, "Failed while getting a Node to retry updating node health. Probably Node was deleted");
                    break;
                }
            }
            self.clock.sleep(self.cfg.retry_sleep_time).await;
        }
        tracing::error!(
            node = name.as_str(),
            "Update health of Node from Controller error, Skipping - no pods will be evicted"
        );
        None
    }

    /// Writes the node's conditions (the fields NLC owns) with the cached resourceVersion as
    /// precondition, so a concurrent kubelet write makes this attempt fail as upstream's PUT would.
    async fn write_status(&self, node: &Node, status: &NodeStatus) -> Result<(), kube::Error> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let patch = json!({
            "metadata": { "resourceVersion": node.metadata.resource_version },
            "status": { "conditions": status.conditions },
        });
        self.nodes_api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }

    /// `processTaintBaseEviction(node, observed)` (§1.5 step 4).
    async fn process_taint_based_eviction(&mut self, node: &Node, observed: &str, now: Timestamp) {
        let name = node.metadata.name.clone().unwrap_or_default();
        match no_execute_action(observed, node_taints(node)) {
            NoExecuteAction::Swap { add: key, remove } => {
                let to_add = [taint(key, names::EFFECT_NO_EXECUTE)];
                let to_remove = [taint(remove, names::EFFECT_NO_EXECUTE)];
                match self.edit_taints(node, &to_add, &to_remove, now).await {
                    Ok(true) => {}
                    Ok(false) | Err(_) => {
                        tracing::warn!(
                            node = name.as_str(),
                            "Failed to instantly swap NoExecute taints. Will try again in the next cycle"
                        );
                    }
                }
            }
            NoExecuteAction::MarkForTainting { status } => {
                self.mark_node_for_tainting(node, status, now)
            }
            NoExecuteAction::MarkReachable => {
                self.mark_node_as_reachable(node, now).await;
            }
            NoExecuteAction::Nothing => {}
        }
    }

    /// `markNodeForTainting`: re-enqueue (remove then add) while the node lacks the taint.
    fn mark_node_for_tainting(&mut self, node: &Node, status: ReadyStatus, now: Timestamp) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let uid = node.metadata.uid.clone().unwrap_or_default();
        let q = self.zones.tainter(&zone_key(node), &self.cfg);
        if requeue_before_tainting(status, node_taints(node)) {
            q.remove(&name);
        }
        q.add(&name, &uid, now);
    }

    /// `MarkPodsNotReady`: Ready=False on each pod of `node` that has a Ready condition; NotFound is
    /// ignored; other errors are returned after all pods were tried.
    async fn mark_pods_not_ready(
        &self,
        pods: &[Pod],
        node: &str,
        now: Timestamp,
    ) -> Result<(), ()> {
        let mut failed = false;
        for pod in pods {
            if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(node) {
                continue;
            }
            let Some(conditions) = mark_pod_not_ready(pod, now) else {
                continue;
            };
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
            let patch = json!({
                "metadata": { "resourceVersion": pod.metadata.resource_version },
                "status": { "conditions": conditions },
            });
            match api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => continue,
                Err(e) => {
                    tracing::warn!(pod = %format!("{ns}/{name}"), error = %e, "Failed to update status for pod");
                    failed = true;
                }
            }
            // Recorded after the status update so that the pod still exists.
            self.recorder
                .record(
                    &object_ref_for_pod(pod),
                    names::EVENT_WARNING,
                    names::EVENT_NODE_NOT_READY,
                    names::MSG_POD_NODE_NOT_READY.into(),
                )
                .await;
        }
        if failed { Err(()) } else { Ok(()) }
    }

    // ---- NoExecute tainting pass (§1.7) ----

    async fn tainting_pass(&mut self) {
        let zones: Vec<String> = self.zones.tainters.keys().cloned().collect();
        for zone in zones {
            loop {
                let now = self.pass_time();
                let Some(item) = self.zones.tainter(&zone, &self.cfg).next_due(now) else {
                    break;
                };
                let node = self.nodes.get(&item.value).cloned();
                let outcome = match tainting_step(node.as_ref()) {
                    TaintingStep::Done => Outcome::Done,
                    TaintingStep::Retry => Outcome::RetryAfter(config::TAINT_RETRY_DELAY),
                    TaintingStep::Swap { add: key, remove } => {
                        let Some(node) = node else { break };
                        let to_add = [taint(key, names::EFFECT_NO_EXECUTE)];
                        let to_remove = [taint(remove, names::EFFECT_NO_EXECUTE)];
                        match self.edit_taints(&node, &to_add, &to_remove, now).await {
                            Ok(true) => {
                                self.metrics.inc_evictions(&zone_key(&node));
                                Outcome::Done
                            }
                            Ok(false) | Err(_) => Outcome::RetryAfter(std::time::Duration::ZERO),
                        }
                    }
                };
                let now = self.pass_time();
                self.zones
                    .tainter(&zone, &self.cfg)
                    .complete(&item, outcome, now);
            }
        }
    }
}
