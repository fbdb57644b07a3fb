//! The scheduler's async shell: watches Nodes and Pods, keeps the cache (with "assumed" pods so that
//! consecutive decisions see each other before the watch catches up), feeds the queue, runs
//! [`schedule_one`](crate::framework::schedule_one), binds through `pods/{name}/binding`, records
//! `Scheduled` / `FailedScheduling` events and sets `PodScheduled=False` (reason `Unschedulable`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{
    Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use tokio::task::{JoinError, JoinSet};

use klab_api::clock::format_time;
use klab_api::shared::Shared;
use klab_api::{Clock, DetRng, names};

use crate::events::{EventRecorder, EventSpec};
use crate::framework::{self, AlgorithmState, ScheduleOutcome};
use crate::nodeinfo::{NodeInfo, ZoneSpread, pod_requests};
use crate::plugins::{self, Plugin};
use crate::queue::{PodKey, SchedulingQueue};
use crate::volume_filters;
use crate::volumes::{self, VolumeCheck};
use crate::{SchedulerConfig, SchedulerError};

fn key_of(pod: &Pod) -> PodKey {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// Whether a given rejecting plugin would accept the pod on this node.
pub fn plugin_passes(plugin: Plugin, pod: &Pod, ni: &NodeInfo) -> bool {
    match plugin {
        Plugin::NodeUnschedulable => plugins::filter_node_unschedulable(pod, ni).is_none(),
        Plugin::NodeName => plugins::filter_node_name(pod, ni).is_none(),
        Plugin::TaintToleration => plugins::filter_taint_toleration(pod, ni).is_none(),
        Plugin::NodeAffinity => plugins::filter_node_affinity(pod, ni).is_none(),
        Plugin::NodePorts => plugins::filter_node_ports(pod, ni).is_none(),
        Plugin::NodeResourcesFit => {
            plugins::filter_node_resources_fit(pod_requests(pod, false), ni).is_none()
        }
        // A node change does not bind a claim: claim changes requeue these pods.
        Plugin::VolumeBinding => false,
        // Only the other pod's removal frees an RWOP claim.
        Plugin::VolumeRestrictions => false,
        // The attach limit lives in the CSINode: a new node may have room (known at the retry).
        Plugin::NodeVolumeLimits => true,
    }
}

/// Whether a Node update is a cluster event at all (upstream `NodeSchedulingPropertiesChange`):
/// a change of `spec.unschedulable`, allocatable, labels, taints, annotations, or a condition's
/// status. A status update that only renews heartbeat times, or reports images, is none: it moves
/// no pod and counts for no pod in flight.
pub fn node_scheduling_properties_changed(old: &Node, new: &Node) -> bool {
    let unschedulable = |n: &Node| n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    let taints = |n: &Node| {
        n.spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
    };
    let allocatable = |n: &Node| n.status.as_ref().and_then(|s| s.allocatable.clone());
    let conditions = |n: &Node| -> BTreeMap<String, String> {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect()
    };
    let labels = |n: &Node| n.metadata.labels.clone().unwrap_or_default();
    let annotations = |n: &Node| n.metadata.annotations.clone().unwrap_or_default();
    unschedulable(old) != unschedulable(new)
        || allocatable(old) != allocatable(new)
        || labels(old) != labels(new)
        || taints(old) != taints(new)
        || conditions(old) != conditions(new)
        || annotations(old) != annotations(new)
}

/// Queueing hint for a node add (`old = None`) or update: the event may help when some plugin that
/// rejected the pod rejected it on the old node (or the node is new) and accepts it on the new one.
pub fn node_event_may_help(
    pod: &Pod,
    rejectors: &BTreeSet<Plugin>,
    old: Option<&NodeInfo>,
    new: &NodeInfo,
) -> bool {
    // VolumeBinding registers node adds and label changes without a queueing hint (a new node, or
    // new labels, may match a volume's node affinity or a class's allowedTopologies): they always
    // requeue its pods, as upstream's do. Heartbeats (no label change) do not.
    let volume_binding = rejectors.contains(&Plugin::VolumeBinding)
        && old.is_none_or(|o| o.node.metadata.labels != new.node.metadata.labels);
    volume_binding
        || rejectors
            .iter()
            .any(|&p| plugin_passes(p, pod, new) && old.is_none_or(|o| !plugin_passes(p, pod, o)))
}

/// Queueing hint for an assigned pod leaving a node (deleted or terminal): frees resources/ports.
pub fn pod_removal_may_help(rejectors: &BTreeSet<Plugin>) -> bool {
    rejectors.contains(&Plugin::NodeResourcesFit)
        || rejectors.contains(&Plugin::NodePorts)
        || rejectors.contains(&Plugin::VolumeRestrictions)
        || rejectors.contains(&Plugin::NodeVolumeLimits)
}

/// The scheduler's view of the cluster. Node infos are kept up to date incrementally (only nodes
/// whose Node object or pods changed are recomputed), so a scheduling cycle costs no full copy.
#[derive(Debug, Default)]
pub struct Cache {
    nodes: BTreeMap<String, Arc<Node>>,
    /// Non-terminal pods with a node (bound, or assumed by us), with that node, shared with the
    /// node infos: a binding recomputes its node's info, which must not copy every pod there.
    /// An assumed pod is the unbound version the watch delivered, its node kept beside it
    /// rather than written into a copy (upstream assumes a deep copy with `spec.nodeName` set):
    /// nothing that reads a node info's pods reads their `nodeName`, and a copy cost a
    /// pod's whole size (14 KB) for every pod waiting for its Binding, 425 MB when 30 000
    /// Bindings were queued behind the scheduler's client rate.
    assigned: BTreeMap<PodKey, (String, Arc<Pod>)>,
    by_node: BTreeMap<String, BTreeMap<PodKey, Arc<Pod>>>,
    /// Unbound pods this scheduler is responsible for.
    pub pending: BTreeMap<PodKey, Arc<Pod>>,
    infos: Vec<NodeInfo>,
    /// The infos' pods by spreading owner and zone, changed with each info replaced.
    spread: ZoneSpread,
    index: BTreeMap<String, usize>,
    dirty: BTreeSet<String>,
    structure_dirty: bool,
}

impl Cache {
    fn pods_on(&self, node: &str) -> Vec<Arc<Pod>> {
        self.by_node
            .get(node)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// A fresh NodeInfo of one node (None if the node is unknown).
    pub fn node_info(&self, name: &str) -> Option<NodeInfo> {
        self.nodes
            .get(name)
            .map(|n| NodeInfo::shared(n.clone(), self.pods_on(name)))
    }

    pub fn set_node(&mut self, node: impl Into<Arc<Node>>) {
        let node = node.into();
        let name = node.metadata.name.clone().unwrap_or_default();
        if self.nodes.insert(name.clone(), node).is_none() {
            self.structure_dirty = true;
        }
        self.dirty.insert(name);
    }

    pub fn remove_node(&mut self, name: &str) {
        if self.nodes.remove(name).is_some() {
            self.structure_dirty = true;
        }
    }

    pub fn node_names(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    pub fn is_assigned(&self, key: &str) -> bool {
        self.assigned.contains_key(key)
    }

    pub fn assigned_keys(&self) -> Vec<PodKey> {
        self.assigned.keys().cloned().collect()
    }

    /// Records a pod bound to its `spec.nodeName`.
    pub fn set_assigned(&mut self, key: PodKey, pod: impl Into<Arc<Pod>>) {
        let pod = pod.into();
        let node = node_name(&pod).unwrap_or("").to_string();
        self.assign(key, node, pod);
    }

    /// A pod assumed on `node` before its Binding is confirmed: the unbound version itself.
    pub fn assume(&mut self, key: PodKey, node: &str, pod: Arc<Pod>) {
        self.assign(key, node.to_string(), pod);
    }

    fn assign(&mut self, key: PodKey, node: String, pod: Arc<Pod>) {
        let mut in_place = false;
        if let Some((old_node, old)) = self
            .assigned
            .insert(key.clone(), (node.clone(), pod.clone()))
        {
            if old_node != node {
                if let Some(m) = self.by_node.get_mut(&old_node) {
                    m.remove(&key);
                    self.dirty.insert(old_node);
                }
            } else {
                in_place = self.replace_in_info(&node, &old, &pod);
            }
        }
        self.by_node
            .entry(node.clone())
            .or_default()
            .insert(key, pod);
        if !in_place {
            self.dirty.insert(node);
        }
    }

    /// Puts a new version of a pod in its node's current info in place of the old one when
    /// nothing the info counts changed (a kubelet's status update, the bound version of a pod
    /// assumed here): the info stays exact without being rebuilt, and lets go of the old
    /// version at once. False when the info must be rebuilt instead.
    fn replace_in_info(&mut self, node: &str, old: &Arc<Pod>, new: &Arc<Pod>) -> bool {
        if self.structure_dirty || self.dirty.contains(node) || !same_accounting(old, new) {
            return false;
        }
        let Some(info) = self.index.get(node).and_then(|&i| self.infos.get_mut(i)) else {
            return false;
        };
        match info.pods.iter_mut().find(|p| Arc::ptr_eq(p, old)) {
            Some(slot) => {
                *slot = new.clone();
                true
            }
            None => false,
        }
    }

    pub fn remove_assigned(&mut self, key: &str) -> Option<Arc<Pod>> {
        let (node, old) = self.assigned.remove(key)?;
        if let Some(m) = self.by_node.get_mut(&node) {
            m.remove(key);
        }
        self.dirty.insert(node);
        Some(old)
    }

    /// Every node with its pods, sorted by node name.
    pub fn snapshot(&mut self) -> &[NodeInfo] {
        self.snapshot_with_spread().0
    }

    /// Rebuilds the node infos of the nodes changed since the last snapshot, dropping the pods
    /// they held that the cache no longer does.
    pub fn refresh(&mut self) {
        if self.structure_dirty || !self.dirty.is_empty() {
            self.snapshot_with_spread();
        }
    }

    /// The snapshot and its pods summed by spreading owner and zone
    /// ([`ZoneSpread::of`] the snapshot, kept up to date rather than counted again).
    pub fn snapshot_with_spread(&mut self) -> (&[NodeInfo], &ZoneSpread) {
        if self.structure_dirty {
            self.infos = self
                .nodes
                .iter()
                .map(|(n, node)| NodeInfo::shared(node.clone(), self.pods_on(n)))
                .collect();
            self.spread = ZoneSpread::of(&self.infos);
            self.index = self
                .nodes
                .keys()
                .enumerate()
                .map(|(i, n)| (n.clone(), i))
                .collect();
            self.structure_dirty = false;
            self.dirty.clear();
        } else {
            for name in std::mem::take(&mut self.dirty) {
                if let (Some(&i), Some(node)) = (self.index.get(&name), self.nodes.get(&name)) {
                    let info = NodeInfo::shared(node.clone(), self.pods_on(&name));
                    self.spread.remove(&self.infos[i]);
                    self.spread.add(&info);
                    self.infos[i] = info;
                }
            }
        }
        (&self.infos, &self.spread)
    }
}

/// Whether two versions of a pod on one node count the same in its node info (requests, host
/// ports, spreading owner, being deleted, and the name it is sorted by).
fn same_accounting(old: &Pod, new: &Pod) -> bool {
    old.metadata.name == new.metadata.name
        && old.metadata.namespace == new.metadata.namespace
        && old.metadata.deletion_timestamp.is_some() == new.metadata.deletion_timestamp.is_some()
        && crate::nodeinfo::spread_key(old) == crate::nodeinfo::spread_key(new)
        && pod_requests(old, false) == pod_requests(new, false)
        && pod_requests(old, true) == pod_requests(new, true)
        && crate::nodeinfo::host_ports(old) == crate::nodeinfo::host_ports(new)
}

fn spec_changed(old: &Pod, new: &Pod) -> bool {
    old.spec != new.spec
        || old.metadata.labels != new.metadata.labels
        || old.metadata.annotations != new.metadata.annotations
}

struct Scheduler {
    client: kube::Client,
    clock: Clock,
    rng: DetRng,
    config: SchedulerConfig,
    cache: Cache,
    queue: SchedulingQueue,
    algo: AlgorithmState,
    recorder: EventRecorder,
    nodes_synced: bool,
    pods_synced: bool,
    /// Pods we bound whose assigned state the watch has not delivered yet (key → uid): older
    /// unassigned versions of them still in flight must not requeue them.
    bound: BTreeMap<PodKey, String>,
    relist_nodes: Option<BTreeMap<String, Arc<Node>>>,
    relist_pods: Option<Vec<Arc<Pod>>>,
    /// Every claim by (namespace, name), for VolumeBinding.
    claims: BTreeMap<(String, String), PersistentVolumeClaim>,
    relist_claims: Option<BTreeMap<(String, String), PersistentVolumeClaim>>,
    claims_synced: bool,
    /// Pods whose node is chosen and whose WaitForFirstConsumer claims were given it
    /// (`volume.kubernetes.io/selected-node`): bound once every claim is bound (PreBind).
    waiting_volumes: BTreeMap<PodKey, (Arc<Pod>, String)>,
    /// Writes in flight beside the scheduling loop (Bindings and events), each a task of its
    /// own as upstream's binding goroutines are, taken in as they answer; aborted with the loop.
    /// They must not be futures that this loop polls between two pods: a kube client queues at
    /// most 1 024 requests, and once more Bindings than that waited for a place, the places
    /// freed while the loop awaited a write of its own (a failure's event and status PATCH)
    /// went to Bindings that nothing polled. The loop then waited for ever, and a 5 000-node
    /// cluster bound no pod (`it_tests::more_bindings_in_flight_than_a_client_queues`).
    background: JoinSet<Background>,
}

/// A background write that answered.
enum Background {
    /// A pod's Binding, with the API server's answer.
    Bound {
        key: PodKey,
        pod: Arc<Pod>,
        node: String,
        result: kube::Result<()>,
    },
    /// An event (its failures are logged where they happen).
    Written,
}

impl Scheduler {
    fn responsible(&self, pod: &Pod) -> bool {
        let name = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or(names::DEFAULT_SCHEDULER_NAME);
        let gated = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .is_some_and(|g| !g.is_empty());
        name == self.config.scheduler_name && !gated
    }

    fn now(&self) -> Duration {
        self.clock.elapsed()
    }

    fn apply_pod(&mut self, pod: Arc<Pod>) {
        let key = key_of(&pod);
        let now = self.now();
        if is_terminal(&pod)
            || (node_name(&pod).is_none() && pod.metadata.deletion_timestamp.is_some())
        {
            self.remove_pod(&key);
            return;
        }
        if node_name(&pod).is_some() {
            self.bound.remove(&key);
            self.cache.pending.remove(&key);
            self.queue.delete(&key);
            self.cache.set_assigned(key, pod);
            return;
        }
        if self
            .bound
            .get(&key)
            .is_some_and(|u| pod.metadata.uid.as_ref() == Some(u))
        {
            // A stale, pre-binding version of a pod we already bound.
            return;
        }
        if !self.responsible(&pod) {
            self.cache.pending.remove(&key);
            self.queue.delete(&key);
            return;
        }
        match self.cache.pending.insert(key.clone(), pod.clone()) {
            None => self.queue.add(&key, priority(&pod), now),
            Some(old) if spec_changed(&old, &pod) => self.queue.update(&key, priority(&pod), now),
            Some(_) => {}
        }
    }

    fn remove_pod(&mut self, key: &str) {
        self.bound.remove(key);
        self.cache.pending.remove(key);
        self.queue.delete(key);
        if self.cache.remove_assigned(key).is_some() {
            let now = self.now();
            self.queue
                .on_cluster_event(now, |_, r| pod_removal_may_help(r));
        }
    }

    fn apply_node(&mut self, node: Arc<Node>) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let old = self.cache.node_info(&name);
        self.cache.set_node(node);
        let Some(new) = self.cache.node_info(&name) else {
            return;
        };
        if let Some(old) = &old
            && !node_scheduling_properties_changed(&old.node, &new.node)
        {
            return;
        }
        let now = self.now();
        let pending = &self.cache.pending;
        self.queue.on_cluster_event(now, |k, r| {
            pending
                .get(k)
                .is_some_and(|p| node_event_may_help(p, r, old.as_ref(), &new))
        });
    }

    fn on_node_event(&mut self, ev: watcher::Event<Shared<Node>>) {
        match ev {
            watcher::Event::Apply(Shared(n)) => self.apply_node(n),
            watcher::Event::Delete(Shared(n)) => {
                self.cache
                    .remove_node(n.metadata.name.as_deref().unwrap_or(""));
            }
            watcher::Event::Init => self.relist_nodes = Some(BTreeMap::new()),
            watcher::Event::InitApply(Shared(n)) => {
                if let Some(m) = self.relist_nodes.as_mut() {
                    m.insert(n.metadata.name.clone().unwrap_or_default(), n);
                }
            }
            watcher::Event::InitDone => {
                let fresh = self.relist_nodes.take().unwrap_or_default();
                let gone: Vec<String> = self
                    .cache
                    .node_names()
                    .into_iter()
                    .filter(|k| !fresh.contains_key(k))
                    .collect();
                for g in gone {
                    self.cache.remove_node(&g);
                }
                for (_, n) in fresh {
                    self.apply_node(n);
                }
                self.nodes_synced = true;
            }
        }
    }

    fn on_pod_event(&mut self, ev: watcher::Event<Shared<Pod>>) {
        match ev {
            watcher::Event::Apply(Shared(p)) => self.apply_pod(p),
            watcher::Event::Delete(Shared(p)) => self.remove_pod(&key_of(&p)),
            watcher::Event::Init => self.relist_pods = Some(Vec::new()),
            watcher::Event::InitApply(Shared(p)) => {
                if let Some(v) = self.relist_pods.as_mut() {
                    v.push(p);
                }
            }
            watcher::Event::InitDone => {
                let mut fresh = self.relist_pods.take().unwrap_or_default();
                fresh.sort_by_key(|p| key_of(p));
                let keys: BTreeSet<PodKey> = fresh.iter().map(|p| key_of(p)).collect();
                let gone: Vec<PodKey> = self
                    .cache
                    .assigned
                    .keys()
                    .chain(self.cache.pending.keys())
                    .filter(|k| !keys.contains(*k))
                    .cloned()
                    .collect();
                for g in gone {
                    self.remove_pod(&g);
                }
                for p in fresh {
                    self.apply_pod(p);
                }
                self.pods_synced = true;
            }
        }
    }

    fn pod_ref(pod: &Pod) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            resource_version: pod.metadata.resource_version.clone(),
            field_path: None,
        }
    }

    async fn schedule(&mut self, key: PodKey) {
        let Some(pod) = self.cache.pending.get(&key).cloned() else {
            self.queue.delete(&key);
            return;
        };
        // With no nodes at all upstream answers ErrNoNodesAvailable before any PreFilter runs.
        let no_nodes = self.cache.snapshot().is_empty();
        let check = if no_nodes {
            VolumeCheck::Ok { delayed: vec![] }
        } else {
            self.volume_prefilter(&pod).await
        };
        let delayed = match check {
            VolumeCheck::Ok { delayed } => delayed,
            VolumeCheck::Reject(msg) => {
                let snapshot = self.cache.snapshot();
                let fe = framework::volume_binding_fit_error(&pod, snapshot, &msg);
                self.report_failure(&pod, names::POD_REASON_UNSCHEDULABLE, &fe.message())
                    .await;
                let now = self.now();
                self.queue
                    .failed(&key, BTreeSet::from([Plugin::VolumeBinding]), now);
                return;
            }
        };
        let facts = self.volume_facts(&pod).await;
        let (snapshot, spread) = self.cache.snapshot_with_spread();
        let (algo, rng) = (&mut self.algo, &self.rng);
        let outcome = match &facts {
            None => framework::schedule_one_with(&pod, snapshot, spread, algo, rng, &|_| None),
            Some(f) => {
                let conflicts = volume_filters::rwop_conflicts(&pod, snapshot, f);
                let extra = |ni: &NodeInfo| volume_filters::filter(&pod, ni, f, conflicts);
                framework::schedule_one_with(&pod, snapshot, spread, algo, rng, &extra)
            }
        };
        match outcome {
            ScheduleOutcome::Feasible { node, .. } if !delayed.is_empty() => {
                self.prebind_volumes(key, pod, node, &delayed).await
            }
            ScheduleOutcome::Feasible { node, .. } => self.bind(key, pod, node).await,
            ScheduleOutcome::Unschedulable(ref fe) => {
                let msg = fe.message();
                self.report_failure(&pod, names::POD_REASON_UNSCHEDULABLE, &msg)
                    .await;
                let now = self.now();
                self.queue.failed(&key, fe.rejector_plugins(), now);
            }
            ScheduleOutcome::NoNodes => {
                let msg = outcome.failure_message().unwrap_or_default();
                self.report_failure(&pod, names::POD_REASON_UNSCHEDULABLE, &msg)
                    .await;
                let now = self.now();
                // No rejecting plugin: retried after backoff (a node add also helps).
                self.queue
                    .failed(&key, BTreeSet::from([Plugin::NodeUnschedulable]), now);
            }
        }
    }

    /// The volume filters' input for a pod with claims (None: nothing to check): its claims and
    /// those of the pods on the nodes (RWOP, CSI driver and volume from the bound PV or the
    /// class's provisioner), and each node's CSINode limits, read for this cycle.
    async fn volume_facts(&mut self, pod: &Pod) -> Option<volume_filters::VolumeFacts> {
        let mine = volume_filters::pod_claims(pod);
        if mine.is_empty() {
            return None;
        }
        let mut keys: BTreeSet<volume_filters::ClaimKey> = mine.into_iter().collect();
        for ni in self.cache.snapshot() {
            keys.extend(ni.pods.iter().flat_map(|p| volume_filters::pod_claims(p)));
        }
        let pvs: BTreeMap<String, PersistentVolume> =
            Api::<PersistentVolume>::all(self.client.clone())
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
                .into_iter()
                .map(|pv| (pv.metadata.name.clone().unwrap_or_default(), pv))
                .collect();
        let classes: BTreeMap<String, StorageClass> = Api::<StorageClass>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .map(|sc| (sc.metadata.name.clone().unwrap_or_default(), sc))
            .collect();
        let limits = Api::<CSINode>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .map(|c| {
                let per_driver = c
                    .spec
                    .drivers
                    .iter()
                    .filter_map(|d| {
                        let n = d.allocatable.as_ref()?.count?;
                        Some((d.name.clone(), i64::from(n)))
                    })
                    .collect();
                (c.metadata.name.clone().unwrap_or_default(), per_driver)
            })
            .collect();
        let mut facts = volume_filters::VolumeFacts {
            claims: BTreeMap::new(),
            limits,
        };
        for k in keys {
            let Some(c) = self.claims.get(&k) else {
                continue;
            };
            let spec = c.spec.as_ref();
            let rwop = spec
                .and_then(|s| s.access_modes.as_ref())
                .is_some_and(|m| m.iter().any(|m| m == "ReadWriteOncePod"));
            let mut f = volume_filters::ClaimFacts {
                rwop,
                ..Default::default()
            };
            match spec
                .and_then(|s| s.volume_name.as_deref())
                .filter(|v| !v.is_empty())
            {
                Some(v) => {
                    let pv = pvs.get(v).and_then(|pv| pv.spec.as_ref());
                    f.csi = pv.and_then(|s| s.csi.as_ref()).map(|s| {
                        (
                            s.driver.clone(),
                            format!("{}/{}", s.driver, s.volume_handle),
                        )
                    });
                    f.node_affinity = pv
                        .and_then(|s| s.node_affinity.as_ref())
                        .and_then(|a| a.required.clone());
                }
                None => {
                    if let Some(sc) = classes.get(&volumes::claim_class(c)) {
                        let p = &sc.provisioner;
                        f.csi = Some((p.clone(), format!("{p}/{}-{}", k.0, k.1)));
                        f.allowed_topologies = sc.allowed_topologies.clone();
                    }
                }
            }
            facts.claims.insert(k, f);
        }
        Some(facts)
    }

    /// VolumeBinding's Filter input: the pod's claims from the watch, classes read on demand.
    async fn volume_prefilter(&mut self, pod: &Pod) -> VolumeCheck {
        let names_ = volumes::claim_names(pod);
        if names_.is_empty() {
            return VolumeCheck::Ok { delayed: vec![] };
        }
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let claims: BTreeMap<String, PersistentVolumeClaim> = names_
            .iter()
            .filter_map(|n| {
                self.claims
                    .get(&(ns.clone(), n.clone()))
                    .map(|c| (n.clone(), c.clone()))
            })
            .collect();
        let mut modes: BTreeMap<String, Option<String>> = BTreeMap::new();
        for c in claims.values().filter(|c| !volumes::is_bound(c)) {
            let class = volumes::claim_class(c);
            if class.is_empty() || modes.contains_key(&class) {
                continue;
            }
            let api: Api<StorageClass> = Api::all(self.client.clone());
            let mode = match api.get_opt(&class).await {
                Ok(Some(sc)) => Some(
                    sc.volume_binding_mode
                        .unwrap_or_else(|| "Immediate".to_string()),
                ),
                Ok(None) => None,
                // Unknown for now: treat as Immediate-unbound, retried on the next claim change.
                Err(_) => Some("Immediate".to_string()),
            };
            modes.insert(class, mode);
        }
        let mode = |c: &str| modes.get(c).cloned().flatten();
        volumes::prefilter(pod, &claims, &mode)
    }

    /// PreBind for WaitForFirstConsumer claims: each unbound claim is given the chosen node
    /// (`volume.kubernetes.io/selected-node`), then the pod waits, accounted on the node, until
    /// the claims are bound and is bound then (`bind_waiting_volumes`).
    async fn prebind_volumes(
        &mut self,
        key: PodKey,
        pod: Arc<Pod>,
        node: String,
        delayed: &[String],
    ) {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &ns);
        for claim in delayed {
            let patch = json!({"metadata": {"annotations": {names::ANN_SELECTED_NODE: node}}});
            if let Err(e) = api
                .patch(claim, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                let msg = match &e {
                    kube::Error::Api(s) => s.message.clone(),
                    other => other.to_string(),
                };
                self.report_failure(&pod, names::POD_REASON_SCHEDULER_ERROR, &msg)
                    .await;
                let now = self.now();
                self.queue.failed(&key, BTreeSet::new(), now);
                return;
            }
        }
        self.cache.pending.remove(&key);
        self.cache.assume(key.clone(), &node, pod.clone());
        self.waiting_volumes.insert(key, (pod, node));
    }

    /// Binds the pods waiting at PreBind whose claims are all bound now.
    async fn bind_waiting_volumes(&mut self) {
        let ready: Vec<PodKey> = self
            .waiting_volumes
            .iter()
            .filter(|(_, (pod, _))| {
                let ns = pod.metadata.namespace.clone().unwrap_or_default();
                volumes::claim_names(pod).iter().all(|n| {
                    self.claims
                        .get(&(ns.clone(), n.clone()))
                        .is_some_and(volumes::is_bound)
                })
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in ready {
            if let Some((pod, node)) = self.waiting_volumes.remove(&key) {
                self.cache.remove_assigned(&key);
                self.bind(key, pod, node).await;
            }
        }
    }

    fn on_claim_event(&mut self, ev: watcher::Event<PersistentVolumeClaim>) {
        let ck = |c: &PersistentVolumeClaim| {
            (
                c.metadata.namespace.clone().unwrap_or_default(),
                c.metadata.name.clone().unwrap_or_default(),
            )
        };
        // The claim that changed (None: a relist, which may change any).
        let changed: Option<(String, String)> = match &ev {
            watcher::Event::Apply(c) | watcher::Event::Delete(c) => Some(ck(c)),
            _ => None,
        };
        match ev {
            watcher::Event::Apply(c) => {
                self.claims.insert(ck(&c), c);
            }
            watcher::Event::Delete(c) => {
                self.claims.remove(&ck(&c));
            }
            watcher::Event::Init => self.relist_claims = Some(BTreeMap::new()),
            watcher::Event::InitApply(c) => {
                if let Some(m) = self.relist_claims.as_mut() {
                    m.insert(ck(&c), c);
                }
            }
            watcher::Event::InitDone => {
                self.claims = self.relist_claims.take().unwrap_or_default();
                self.claims_synced = true;
            }
        }
        // A claim change may unblock the pods VolumeBinding rejected that use that claim
        // (upstream's queueing hint for PersistentVolumeClaim events).
        let now = self.now();
        let pending = &self.cache.pending;
        self.queue.on_cluster_event(now, |k, r| {
            r.contains(&Plugin::VolumeBinding)
                && match (&changed, pending.get(k)) {
                    (None, _) => true,
                    (Some((ns, name)), Some(p)) => {
                        p.metadata.namespace.as_deref() == Some(ns.as_str())
                            && volumes::claim_names(p).contains(name)
                    }
                    (Some(_), None) => false,
                }
        });
    }

    /// Upstream's binding cycle, started: the pod is assumed on the node at once and its
    /// Binding is POSTed in the background (`Background::Bound` comes back when it answers), so
    /// the next pod is scheduled without waiting for the API server, as upstream's binding
    /// goroutine allows.
    async fn bind(&mut self, key: PodKey, pod: Arc<Pod>, node: String) {
        // Assume: account the pod on the node before the API confirms it.
        self.cache.pending.remove(&key);
        self.cache.assume(key.clone(), &node, pod.clone());
        // Until the bound version arrives, older unbound versions are stale (upstream skips
        // updates of an assumed pod).
        self.bound
            .insert(key.clone(), pod.metadata.uid.clone().unwrap_or_default());
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": ns, "uid": pod.metadata.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        self.background.spawn(async move {
            let result = api
                .create_subresource::<_, serde_json::Value>(
                    "binding",
                    &name,
                    &PostParams::default(),
                    &binding,
                )
                .await
                .map(|_| ());
            Background::Bound {
                key,
                pod,
                node,
                result,
            }
        });
    }

    /// What a background write's answer changes: a Binding's success is recorded (the
    /// `Scheduled` event, itself written in the background), its failure undoes the assumption.
    async fn finish(&mut self, done: Result<Background, JoinError>) {
        let done = match done {
            Ok(done) => done,
            // A write's panic is the scheduler's own, as it was when the loop polled the writes:
            // its supervisor logs it and restarts it, and the restart rebuilds every assumption.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Tasks are aborted only with the set.
            Err(_) => return,
        };
        let Background::Bound {
            key,
            pod,
            node,
            result,
        } = done
        else {
            return;
        };
        match result {
            Ok(()) => {
                self.queue.done(&key);
                let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                let note = format!("Successfully assigned {ns}/{name} to {node}");
                let r = Self::pod_ref(&pod);
                let write = self.recorder.prepare(EventSpec {
                    regarding: &r,
                    type_: names::EVENT_NORMAL,
                    reason: names::EVENT_SCHEDULED,
                    action: "Binding",
                    note: &note,
                });
                if let Some(write) = write {
                    self.background.spawn(write.map(|()| Background::Written));
                }
            }
            Err(e) => {
                // The pod was deleted (or its bound version arrived) while the Binding was in
                // flight: nothing of ours is left to undo.
                if self.bound.get(&key) != pod.metadata.uid.as_ref() {
                    self.queue.delete(&key);
                    return;
                }
                self.bound.remove(&key);
                // Forget the assumption and retry after backoff, as upstream's binding-cycle error path.
                self.cache.remove_assigned(&key);
                let msg = match &e {
                    kube::Error::Api(s) => s.message.clone(),
                    other => other.to_string(),
                };
                tracing::info!(pod = %key, error = %msg, "binding failed");
                if matches!(&e, kube::Error::Api(s) if s.code == 404) {
                    self.queue.delete(&key);
                    return;
                }
                self.cache.pending.insert(key.clone(), pod.clone());
                self.report_failure(&pod, names::POD_REASON_SCHEDULER_ERROR, &msg)
                    .await;
                let now = self.now();
                self.queue.failed(&key, BTreeSet::new(), now);
            }
        }
    }

    /// `FailedScheduling` event, then `PodScheduled=False` (only when it changes, as upstream's
    /// `UpdatePodCondition`; lastTransitionTime kept while the status stays False).
    async fn report_failure(&mut self, pod: &Pod, reason: &str, msg: &str) {
        let r = Self::pod_ref(pod);
        self.recorder
            .record(EventSpec {
                regarding: &r,
                type_: names::EVENT_WARNING,
                reason: names::EVENT_FAILED_SCHEDULING,
                action: "Scheduling",
                note: msg,
            })
            .await;
        let conds = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let old = conds.iter().find(|c| c.type_ == names::POD_COND_SCHEDULED);
        let now = format_time(self.clock.now_time().0);
        let ltt = match old {
            Some(c) if c.status == "False" => c
                .last_transition_time
                .as_ref()
                .map(|t| format_time(t.0))
                .unwrap_or(now),
            _ => now,
        };
        if let Some(c) = old
            && c.status == "False"
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(msg)
            && c.last_probe_time.is_none()
        {
            return;
        }
        let mut list: Vec<serde_json::Value> = conds
            .iter()
            .filter(|c| c.type_ != names::POD_COND_SCHEDULED)
            .map(|c| serde_json::to_value(c).unwrap_or(serde_json::Value::Null))
            .collect();
        list.push(
            json!({"type": names::POD_COND_SCHEDULED, "status": "False", "lastProbeTime": null,
                         "lastTransitionTime": ltt, "reason": reason, "message": msg}),
        );
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let patch = json!({"status": {"conditions": list}});
        if let Err(e) = api
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            tracing::info!(pod = %format!("{ns}/{name}"), error = %e, "updating PodScheduled condition");
        }
    }
}

enum Ev {
    Node(Box<Result<watcher::Event<Shared<Node>>, watcher::Error>>),
    Pod(Box<Result<watcher::Event<Shared<Pod>>, watcher::Error>>),
    Claim(Box<Result<watcher::Event<PersistentVolumeClaim>, watcher::Error>>),
}

/// Runs the scheduler until its watch streams end. Build the clients inside the runtime that runs
/// this future; on a paused runtime everything happens in virtual time. Events are written
/// through `event_client`, as kube-scheduler writes them through a clientset of their own (its
/// own client-side rate limiter, so that a wave of events does not slow the bindings).
pub async fn run(
    client: kube::Client,
    event_client: kube::Client,
    clock: Clock,
    rng: DetRng,
    config: SchedulerConfig,
) -> Result<(), SchedulerError> {
    // Nodes and pods are decoded without their managed fields, as kube-scheduler's pod informer
    // drops them: the scheduler never reads them, and they are a large part of a pod. They are
    // decoded once per process (`Shared`): the controllers' and kubelets' copies are the same.
    let nodes = watcher(
        Api::<Shared<Node>>::all(client.clone()),
        watcher::Config::default(),
    )
    .map(|e| Ev::Node(Box::new(e)))
    .boxed();
    let pods = watcher(
        Api::<Shared<Pod>>::all(client.clone()),
        watcher::Config::default(),
    )
    .map(|e| Ev::Pod(Box::new(e)))
    .boxed();
    let claims = watcher(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default(),
    )
    .map(|e| Ev::Claim(Box::new(e)))
    .boxed();
    let mut events = futures::stream::select(futures::stream::select(nodes, pods), claims);
    let recorder = EventRecorder::new(
        event_client,
        clock.clone(),
        config.events_api,
        &config.scheduler_name,
        &config.reporting_instance,
    );
    let mut s = Scheduler {
        client,
        clock: clock.clone(),
        rng,
        queue: SchedulingQueue::new(config.queue.clone()),
        config,
        cache: Cache::default(),
        algo: AlgorithmState::default(),
        recorder,
        nodes_synced: false,
        pods_synced: false,
        bound: BTreeMap::new(),
        relist_nodes: None,
        relist_pods: None,
        claims: BTreeMap::new(),
        relist_claims: None,
        claims_synced: false,
        waiting_volumes: BTreeMap::new(),
        background: JoinSet::new(),
    };
    loop {
        // Take in everything already delivered before deciding, so decisions see the latest state.
        while let Some(ev) = events.next().now_or_never() {
            match ev {
                Some(ev) => s.handle(ev).await,
                None => return Err(SchedulerError::WatchEnded("nodes/pods")),
            }
        }
        // Take in the writes that answered.
        while let Some(done) = s.background.try_join_next() {
            s.finish(done).await;
        }
        s.recorder.maintain().await;
        if s.nodes_synced && s.pods_synced && s.claims_synced {
            s.bind_waiting_volumes().await;
            let now = s.now();
            if let Some(key) = s.queue.pop(now) {
                s.schedule(key).await;
                continue;
            }
        }
        // Idle: bring the node infos up to date now rather than at the next scheduling cycle.
        // They hold the pods they were built from — the assumed copies of pods just bound, the
        // versions before their kubelets' status updates — and with nothing left to schedule
        // that next cycle may be far off, while every one of those copies stays in memory.
        s.cache.refresh();
        let wake = s.queue.next_wakeup().map(|t| t.saturating_sub(s.now()));
        let sleep = async {
            match wake {
                Some(d) => clock.sleep(d).await,
                None => futures::future::pending::<()>().await,
            }
        };
        tokio::select! {
            biased;
            ev = events.next() => match ev {
                Some(ev) => s.handle(ev).await,
                None => return Err(SchedulerError::WatchEnded("nodes/pods")),
            },
            Some(done) = s.background.join_next(), if !s.background.is_empty() => s.finish(done).await,
            _ = sleep => {}
        }
    }
}

impl Scheduler {
    async fn handle(&mut self, ev: Ev) {
        let err = match ev {
            Ev::Node(e) => match *e {
                Ok(e) => return self.on_node_event(e),
                Err(e) => e,
            },
            Ev::Pod(e) => match *e {
                Ok(e) => return self.on_pod_event(e),
                Err(e) => e,
            },
            Ev::Claim(e) => match *e {
                Ok(e) => return self.on_claim_event(e),
                Err(e) => e,
            },
        };
        // The watcher retries by itself; pace it in virtual time instead of spinning.
        tracing::warn!(error = %err, "scheduler watch error");
        self.clock.sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn ni(v: serde_json::Value) -> NodeInfo {
        NodeInfo::new(serde_json::from_value(v).unwrap(), vec![])
    }

    #[test]
    fn node_infos_let_go_of_the_pods_the_cache_replaced() {
        let node: Node = serde_json::from_value(
            json!({"metadata": {"name": "a"}, "status": {"allocatable": {"pods": "10"}}}),
        )
        .unwrap();
        let on = |node: Option<&str>, phase: &str, cpu: &str| -> Arc<Pod> {
            Arc::new(
                serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "d"},
                    "spec": {"nodeName": node, "containers": [{"name": "c",
                        "resources": {"requests": {"cpu": cpu}}}]},
                    "status": {"phase": phase}}))
                .unwrap(),
            )
        };
        let pod = |phase: &str, cpu: &str| on(Some("a"), phase, cpu);
        let mut c = Cache::default();
        c.set_node(node);
        // The unbound version, assumed on the node (not copied), and taken into a snapshot by a
        // scheduling cycle.
        let assumed = on(None, "Pending", "1");
        c.assume("d/p".into(), "a", assumed.clone());
        assert!(Arc::ptr_eq(&c.snapshot()[0].pods[0], &assumed));
        assert_eq!(c.snapshot()[0].requested.milli_cpu, 1000);
        assert_eq!(
            Arc::strong_count(&assumed),
            4,
            "test, assigned, by node, info"
        );
        // The watch delivers the bound pod, then its status: nothing the info counts changed,
        // so the info takes each version in place and the old one is let go of at once.
        let bound = pod("Pending", "1");
        c.set_assigned("d/p".into(), bound.clone());
        assert_eq!(
            Arc::strong_count(&assumed),
            1,
            "nothing but this test holds it"
        );
        let running = pod("Running", "1");
        c.set_assigned("d/p".into(), running.clone());
        assert_eq!(Arc::strong_count(&bound), 1);
        assert!(Arc::ptr_eq(&c.snapshot()[0].pods[0], &running));
        // A version that counts differently is left for a rebuild, which a refresh makes.
        let resized = pod("Running", "2");
        c.set_assigned("d/p".into(), resized.clone());
        assert_eq!(
            Arc::strong_count(&running),
            2,
            "the info still holds the old version"
        );
        c.refresh();
        assert_eq!(Arc::strong_count(&running), 1);
        assert_eq!(c.snapshot()[0].requested.milli_cpu, 2000);
        // Nothing changed since: a refresh rebuilds nothing.
        let held = c.snapshot()[0].pods[0].clone();
        c.refresh();
        assert!(Arc::ptr_eq(&c.snapshot()[0].pods[0], &held));
    }

    #[test]
    fn cache_snapshot_is_incremental_and_exact() {
        let node = |n: &str| -> Node {
            serde_json::from_value(json!({"metadata": {"name": n}, "status": {"allocatable": {"cpu": "2", "memory": "1Gi", "pods": "10"}}})).unwrap()
        };
        let pod = |name: &str, on: &str| -> Pod {
            serde_json::from_value(
                json!({"metadata": {"name": name, "namespace": "d"}, "spec": {"nodeName": on,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}),
            )
            .unwrap()
        };
        let mut c = Cache::default();
        c.set_node(node("b"));
        c.set_node(node("a"));
        c.set_assigned("d/p1".into(), pod("p1", "a"));
        let snap: Vec<(String, i64)> = c
            .snapshot()
            .iter()
            .map(|ni| (ni.name().to_string(), ni.requested.milli_cpu))
            .collect();
        assert_eq!(snap, vec![("a".to_string(), 500), ("b".to_string(), 0)]);
        // the pod moves (a re-created pod with the same name), then another is added and removed
        c.set_assigned("d/p1".into(), pod("p1", "b"));
        c.set_assigned("d/p2".into(), pod("p2", "b"));
        c.remove_assigned("d/p2");
        let snap: Vec<(String, i64)> = c
            .snapshot()
            .iter()
            .map(|ni| (ni.name().to_string(), ni.requested.milli_cpu))
            .collect();
        assert_eq!(snap, vec![("a".to_string(), 0), ("b".to_string(), 500)]);
        c.remove_node("a");
        assert_eq!(c.snapshot().len(), 1);
        assert_eq!(c.node_info("b").unwrap().pods.len(), 1);
    }

    /// The zone sums the cache keeps beside its snapshot equal the sums counted from scratch,
    /// whatever nodes (zones relabelled, removed) and pods (owned or not, being deleted, moved)
    /// came and went between snapshots.
    #[test]
    fn kept_node_infos_and_zone_spread_are_the_ones_counted_from_scratch() {
        use proptest::prelude::*;
        #[derive(Clone, Debug)]
        enum Op {
            Node(u8, Option<u8>),
            RemoveNode(u8),
            Assign(u8, u8, Option<u8>, bool),
            /// The unbound version of a pod, assumed on a node.
            Assume(u8, u8, Option<u8>),
            Unassign(u8),
            /// A new version of an assigned pod on the same node (its owner and deletion as given).
            Update(u8, Option<u8>, bool),
            Snapshot,
        }
        let op = prop_oneof![
            (0u8..6, proptest::option::of(0u8..3)).prop_map(|(n, z)| Op::Node(n, z)),
            (0u8..6).prop_map(Op::RemoveNode),
            (0u8..20, 0u8..7, proptest::option::of(0u8..3), any::<bool>())
                .prop_map(|(p, n, o, d)| Op::Assign(p, n, o, d)),
            (0u8..20, 0u8..7, proptest::option::of(0u8..3))
                .prop_map(|(p, n, o)| Op::Assume(p, n, o)),
            (0u8..20).prop_map(Op::Unassign),
            (0u8..20, proptest::option::of(0u8..3), any::<bool>())
                .prop_map(|(p, o, d)| Op::Update(p, o, d)),
            Just(Op::Snapshot),
        ];
        let node = |n: u8, zone: Option<u8>| -> Node {
            let mut labels = json!({"kubernetes.io/hostname": format!("n{n}")});
            if let Some(z) = zone {
                labels["topology.kubernetes.io/zone"] = json!(format!("z{z}"));
            }
            serde_json::from_value(
                json!({"metadata": {"name": format!("n{n}"), "labels": labels},
                "status": {"allocatable": {"cpu": "2", "memory": "1Gi", "pods": "10"}}}),
            )
            .unwrap()
        };
        let pod = |p: u8, n: u8, owner: Option<u8>, deleting: bool| -> Pod {
            let mut v = json!({"metadata": {"name": format!("p{p}"), "namespace": "d"},
                "spec": {"nodeName": format!("n{n}"), "containers": [{"name": "c"}]}});
            if let Some(o) = owner {
                v["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
                    "kind": "ReplicaSet", "name": format!("rs{o}"), "uid": format!("u{o}"),
                    "controller": true}]);
            }
            if deleting {
                v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            serde_json::from_value(v).unwrap()
        };
        let check = |c: &mut Cache| {
            let (infos, spread) = c.snapshot_with_spread();
            assert_eq!(spread, &ZoneSpread::of(infos));
            // Every info, however it was kept up to date, is the one built from scratch.
            let infos: Vec<NodeInfo> = infos.to_vec();
            for info in &infos {
                let fresh = c.node_info(info.name()).unwrap();
                assert_eq!(info.requested, fresh.requested);
                assert_eq!(info.non_zero_requested, fresh.non_zero_requested);
                assert_eq!(info.used_ports, fresh.used_ports);
                assert_eq!(info.spread_counts, fresh.spread_counts);
                assert_eq!(info.pods.len(), fresh.pods.len());
                for (a, b) in info.pods.iter().zip(&fresh.pods) {
                    assert!(
                        Arc::ptr_eq(a, b),
                        "the info holds the cache's version of each pod"
                    );
                }
            }
        };
        proptest!(ProptestConfig::with_cases(300), |(ops in proptest::collection::vec(op, 0..60))| {
            let mut c = Cache::default();
            for op in ops {
                match op {
                    Op::Node(n, z) => c.set_node(node(n, z)),
                    Op::RemoveNode(n) => c.remove_node(&format!("n{n}")),
                    Op::Assign(p, n, o, d) => c.set_assigned(format!("d/p{p}"), pod(p, n, o, d)),
                    Op::Assume(p, n, o) => {
                        let mut unbound = pod(p, n, o, false);
                        if let Some(spec) = unbound.spec.as_mut() {
                            spec.node_name = None;
                        }
                        c.assume(format!("d/p{p}"), &format!("n{n}"), Arc::new(unbound));
                    }
                    Op::Unassign(p) => {
                        c.remove_assigned(&format!("d/p{p}"));
                    }
                    Op::Update(p, o, d) => {
                        let at = c.assigned.get(&format!("d/p{p}")).map(|(n, _)| n.as_str());
                        if let Some(n) = at.and_then(|n| n.strip_prefix('n')?.parse::<u8>().ok()) {
                            c.set_assigned(format!("d/p{p}"), pod(p, n, o, d));
                        }
                    }
                    Op::Snapshot => check(&mut c),
                }
            }
            check(&mut c);
        });
    }

    /// Which Node updates are cluster events (upstream `NodeSchedulingPropertiesChange`): each
    /// scheduling property counts; heartbeat times, images and other status fields do not.
    #[test]
    fn node_updates_that_are_cluster_events() {
        let base = json!({
            "metadata": {"name": "n1", "labels": {"zone": "a"}, "annotations": {"x": "1"}},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "1", "pods": "10"},
                "conditions": [{"type": "Ready", "status": "True",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z"}],
                "images": [{"names": ["nginx"], "sizeBytes": 1}],
            },
        });
        let node = |v: &Value| -> Node { serde_json::from_value(v.clone()).unwrap() };
        let with = |path: &[&str], value: Value| {
            let mut v = base.clone();
            let (last, parents) = path.split_last().unwrap();
            let mut at = &mut v;
            for p in parents {
                at = if let Ok(i) = p.parse::<usize>() {
                    &mut at[i]
                } else {
                    &mut at[*p]
                };
            }
            at[*last] = value;
            v
        };
        let cases: Vec<(&str, Value, bool)> = vec![
            ("nothing", base.clone(), false),
            (
                "heartbeat",
                with(
                    &["status", "conditions", "0", "lastHeartbeatTime"],
                    json!("2026-01-01T00:00:10Z"),
                ),
                false,
            ),
            ("images", with(&["status", "images"], json!([])), false),
            (
                "addresses",
                with(
                    &["status", "addresses"],
                    json!([{"type": "InternalIP", "address": "10.0.0.1"}]),
                ),
                false,
            ),
            (
                "condition status",
                with(&["status", "conditions", "0", "status"], json!("Unknown")),
                true,
            ),
            (
                "unschedulable",
                with(&["spec", "unschedulable"], json!(true)),
                true,
            ),
            ("taints", with(&["spec", "taints"], json!([])), true),
            (
                "labels",
                with(&["metadata", "labels"], json!({"zone": "b"})),
                true,
            ),
            (
                "annotations",
                with(&["metadata", "annotations"], json!({})),
                true,
            ),
            (
                "allocatable",
                with(
                    &["status", "allocatable"],
                    json!({"cpu": "2", "pods": "10"}),
                ),
                true,
            ),
        ];
        for (what, new, want) in cases {
            assert_eq!(
                node_scheduling_properties_changed(&node(&base), &node(&new)),
                want,
                "{what}"
            );
        }
    }

    #[test]
    fn node_event_hints() {
        let pod: Pod =
            serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": []}}))
                .unwrap();
        let tainted = ni(
            json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}}),
        );
        let healed = ni(
            json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}}),
        );
        let taint = BTreeSet::from([Plugin::TaintToleration]);
        assert!(node_event_may_help(&pod, &taint, Some(&tainted), &healed));
        // a heartbeat on a still-tainted node does not help
        assert!(!node_event_may_help(&pod, &taint, Some(&tainted), &tainted));
        assert!(node_event_may_help(&pod, &taint, None, &healed));
        assert!(!node_event_may_help(
            &pod,
            &BTreeSet::from([Plugin::NodeAffinity]),
            Some(&healed),
            &healed
        ));
        // A pod refused by VolumeBinding (a zonal volume) retries when a node joins or a node's
        // labels change (it may now be in the volume's zone), not on a heartbeat.
        let volume = BTreeSet::from([Plugin::VolumeBinding]);
        let zoned = ni(
            json!({"metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "a"}},
            "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}}),
        );
        assert!(node_event_may_help(&pod, &volume, None, &healed));
        assert!(node_event_may_help(&pod, &volume, Some(&healed), &zoned));
        assert!(!node_event_may_help(&pod, &volume, Some(&zoned), &zoned));
        assert!(!node_event_may_help(&pod, &volume, Some(&tainted), &healed));
        assert!(pod_removal_may_help(&BTreeSet::from([
            Plugin::NodeResourcesFit
        ])));
        assert!(!pod_removal_may_help(&taint));
    }
}
