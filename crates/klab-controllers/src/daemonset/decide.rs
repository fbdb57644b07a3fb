//! DaemonSet decisions as pure functions (upstream `pkg/controller/daemon`): which nodes should run
//! a daemon pod (`node_should_run_daemon_pod`), the tolerations every daemon pod gets, the pod
//! template with its node pin, what to create and delete on each node (`manage`), the rolling
//! update step, and the status that `kubectl get ds` / `rollout status` read — all over a
//! [`Table`] of the nodes (as [`Placed`]) and the DaemonSet's pods (as [`Member`]s) joined by node.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodSpec, PodTemplateSpec, Toleration,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use klab_api::names;
use klab_api::taints::untolerated;
use smallvec::SmallVec;

use crate::replicaset::util;
use klab_api::nodeaffinity::required_node_affinity_matches;

/// Label with the DaemonSet's template hash (upstream `apps.DefaultDaemonSetUniqueLabelKey`).
pub const LABEL_CONTROLLER_REVISION_HASH: &str = names::LABEL_CONTROLLER_REVISION_HASH;
/// Label with the template generation (upstream `extensions.DaemonSetTemplateGenerationKey`).
pub const LABEL_POD_TEMPLATE_GENERATION: &str = names::LABEL_POD_TEMPLATE_GENERATION;
/// Annotation the API server keeps the template generation in.
pub const ANNOTATION_TEMPLATE_GENERATION: &str = names::ANN_DS_TEMPLATE_GENERATION;
/// Event reasons (upstream `daemon_controller.go`).
pub const REASON_FAILED_DAEMON_POD: &str = names::EVENT_FAILED_DAEMON_POD;
pub const REASON_SUCCEEDED_DAEMON_POD: &str = names::EVENT_SUCCEEDED_DAEMON_POD;

fn exists_toleration(key: &str, effect: &str) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some(names::OP_EXISTS.into()),
        effect: Some(effect.into()),
        value: None,
        toleration_seconds: None,
    }
}

/// Upstream `Toleration.MatchToleration`: same key, effect, operator and value.
fn same_toleration(a: &Toleration, b: &Toleration) -> bool {
    let s = |o: &Option<String>| o.clone().unwrap_or_default();
    s(&a.key) == s(&b.key)
        && s(&a.effect) == s(&b.effect)
        && s(&a.operator) == s(&b.operator)
        && s(&a.value) == s(&b.value)
}

/// Upstream `AddOrUpdateTolerationInPodSpec`: replace a matching toleration in place (dropping its
/// `tolerationSeconds`), or append.
fn add_or_update_toleration(spec: &mut PodSpec, t: Toleration) {
    let list = spec.tolerations.get_or_insert_with(Vec::new);
    let mut updated = false;
    for existing in list.iter_mut() {
        if same_toleration(existing, &t) {
            *existing = t.clone();
            updated = true;
        }
    }
    if !updated {
        list.push(t);
    }
}

/// Upstream `AddOrUpdateDaemonPodTolerations`: infinite not-ready/unreachable NoExecute, and
/// disk-pressure, memory-pressure, pid-pressure, unschedulable (and network-unavailable with
/// `hostNetwork`) NoSchedule, all `Exists` without seconds, in this order.
pub fn add_or_update_daemon_pod_tolerations(spec: &mut PodSpec) {
    add_or_update_toleration(
        spec,
        exists_toleration(names::TAINT_NOT_READY, names::EFFECT_NO_EXECUTE),
    );
    add_or_update_toleration(
        spec,
        exists_toleration(names::TAINT_UNREACHABLE, names::EFFECT_NO_EXECUTE),
    );
    add_or_update_toleration(
        spec,
        exists_toleration(names::TAINT_DISK_PRESSURE, names::EFFECT_NO_SCHEDULE),
    );
    add_or_update_toleration(
        spec,
        exists_toleration(names::TAINT_MEMORY_PRESSURE, names::EFFECT_NO_SCHEDULE),
    );
    add_or_update_toleration(
        spec,
        exists_toleration(names::TAINT_PID_PRESSURE, names::EFFECT_NO_SCHEDULE),
    );
    add_or_update_toleration(
        spec,
        exists_toleration(names::TAINT_UNSCHEDULABLE, names::EFFECT_NO_SCHEDULE),
    );
    if spec.host_network == Some(true) {
        add_or_update_toleration(
            spec,
            exists_toleration(names::TAINT_NETWORK_UNAVAILABLE, names::EFFECT_NO_SCHEDULE),
        );
    }
}

/// Upstream `NodeShouldRunDaemonPod(node, ds)` → `(shouldRun, shouldContinueRunning)`:
/// - template `nodeName` set to another node, or nodeSelector/required affinity not matching →
///   `(false, false)`;
/// - some NoSchedule/NoExecute taint not tolerated (with the daemon tolerations added) →
///   `(false, true)` unless an untolerated taint is NoExecute (`(false, false)`);
/// - otherwise `(true, true)`.
pub fn node_should_run_daemon_pod(node: &Node, ds: &DaemonSet) -> (bool, bool) {
    DaemonPod::of(ds).should_run(node)
}

/// A DaemonSet's pod as the placement checks see it: the template's spec with the daemon
/// tolerations added. Built once per pass over the nodes, not once per node (a copy of the
/// template per node was most of a sync at thousands of nodes).
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonPod {
    pod: Pod,
}

impl DaemonPod {
    pub fn of(ds: &DaemonSet) -> Self {
        let mut spec = ds
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.clone())
            .unwrap_or_default();
        add_or_update_daemon_pod_tolerations(&mut spec);
        DaemonPod {
            pod: Pod {
                spec: Some(spec),
                ..Default::default()
            },
        }
    }

    /// [`node_should_run_daemon_pod`] for this DaemonSet's pod.
    pub fn should_run(&self, node: &Node) -> (bool, bool) {
        let node_name = node.metadata.name.as_deref().unwrap_or("");
        let spec = self.pod.spec.as_ref();
        if let Some(n) = spec.and_then(|s| s.node_name.as_deref())
            && !n.is_empty()
            && n != node_name
        {
            return (false, false);
        }
        if !required_node_affinity_matches(&self.pod, node) {
            return (false, false);
        }
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or(&[]);
        let tolerations = spec.and_then(|s| s.tolerations.as_deref()).unwrap_or(&[]);
        if untolerated(
            taints,
            tolerations,
            &[names::EFFECT_NO_SCHEDULE, names::EFFECT_NO_EXECUTE],
        )
        .is_empty()
        {
            return (true, true);
        }
        let no_execute = untolerated(taints, tolerations, &[names::EFFECT_NO_EXECUTE]);
        (false, no_execute.is_empty())
    }
}

/// A node as a DaemonSet's decisions see it: its name and whether the daemon pod should run
/// and continue running there ([`DaemonPod::should_run`]). The shell keeps one per node across
/// syncs, placed again when the node or the DaemonSet's pod template changes: at thousands of
/// nodes, reading every Node (labels, taints) on every sync was a large part of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    pub name: Option<String>,
    pub should_run: bool,
    pub should_continue: bool,
}

impl Placed {
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
}

impl DaemonPod {
    /// `node` as this DaemonSet's decisions see it.
    pub fn place(&self, node: &Node) -> Placed {
        let (should_run, should_continue) = self.should_run(node);
        Placed {
            name: node.metadata.name.clone(),
            should_run,
            should_continue,
        }
    }
}

/// Every node of `nodes` as `ds`'s decisions see it.
pub fn place(ds: &DaemonSet, nodes: &[&Node]) -> Vec<Placed> {
    let daemon = DaemonPod::of(ds);
    nodes.iter().map(|n| daemon.place(n)).collect()
}

/// Upstream `ReplaceDaemonSetPodNodeNameNodeAffinity`: pin the pod to `node` with a single required
/// term `matchFields metadata.name In [node]`, keeping preferred terms and other affinities.
pub fn replace_node_name_affinity(affinity: Option<Affinity>, node: &str) -> Affinity {
    let term = NodeSelectorTerm {
        match_expressions: None,
        match_fields: Some(vec![NodeSelectorRequirement {
            key: "metadata.name".into(),
            operator: "In".into(),
            values: Some(vec![node.into()]),
        }]),
    };
    let mut a = affinity.unwrap_or_default();
    let na = a.node_affinity.get_or_insert_with(NodeAffinity::default);
    na.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![term],
    });
    a
}

/// Upstream `GetTargetNodeName`: `spec.nodeName`, else the node pinned by the required affinity.
pub fn target_node_name(pod: &Pod) -> Option<String> {
    target_node(pod).map(str::to_string)
}

/// [`target_node_name`], borrowed from the pod.
fn target_node(pod: &Pod) -> Option<&str> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(n);
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    for t in terms {
        for r in t.match_fields.iter().flatten() {
            if r.key == "metadata.name"
                && r.operator == "In"
                && let Some([v]) = r.values.as_deref()
            {
                return Some(v);
            }
        }
    }
    None
}

/// The template generation (annotation kept by the API server, else `metadata.generation`).
pub fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_TEMPLATE_GENERATION))
        .and_then(|v| v.parse().ok())
        .or(ds.metadata.generation)
}

/// Upstream `rand.SafeEncodeString` alphabet.
const SAFE_ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// The template hash stored in `controller-revision-hash`: FNV-32a over the template's JSON (plus
/// the collision count), encoded like upstream. Upstream hashes Go's object dump, so the value
/// differs from a real cluster's; its shape (a short safe string) is the same.
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut h: u32 = 0x811c_9dc5;
    let json = serde_json::to_vec(template).unwrap_or_default();
    let extra = collision_count
        .map(|c| c.to_le_bytes().to_vec())
        .unwrap_or_default();
    for b in json.iter().chain(extra.iter()) {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h.to_string()
        .bytes()
        .map(|c| SAFE_ALPHABET[usize::from(c) % 27] as char)
        .collect()
}

/// Upstream `IsPodUpdated`: the hash label matches, or the template-generation label does.
pub fn is_pod_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let labels = pod.metadata.labels.as_ref();
    let get = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
    // The hash first: it decides nearly every pod, and the generation's text is formatted only
    // when it does not.
    (!hash.is_empty() && get(LABEL_CONTROLLER_REVISION_HASH) == Some(hash))
        || generation
            .is_some_and(|g| get(LABEL_POD_TEMPLATE_GENERATION) == Some(g.to_string().as_str()))
}

/// The template new daemon pods are made from (upstream `CreatePodTemplate`): the DaemonSet's
/// template with the generation and hash labels and the daemon tolerations. The node pin is added
/// per node with [`replace_node_name_affinity`].
pub fn daemon_pod_template(ds: &DaemonSet, hash: &str) -> PodTemplateSpec {
    let mut t = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let labels = t
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(BTreeMap::new);
    if let Some(g) = template_generation(ds) {
        labels.insert(LABEL_POD_TEMPLATE_GENERATION.into(), g.to_string());
    }
    if !hash.is_empty() {
        labels.insert(LABEL_CONTROLLER_REVISION_HASH.into(), hash.into());
    }
    add_or_update_daemon_pod_tolerations(t.spec.get_or_insert_with(PodSpec::default));
    t
}

/// A pod's phase as the DaemonSet decisions tell phases apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Succeeded,
    Failed,
    /// Pending, Running, Unknown or none.
    Other,
}

/// A daemon pod as the decisions read it, taken out of the Pod once per version of the pod: a
/// sync reads every pod of the DaemonSet, and at thousands of nodes reading these fields out of
/// the Pods themselves (their node pin, labels and conditions, scattered in memory) was most of
/// a sync. The shell keeps one per pod across syncs, taken again when the pod changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    /// Upstream `GetTargetNodeName`: `spec.nodeName`, else the node pinned by the affinity.
    pub node: Option<String>,
    /// `spec.nodeName` is set (the pod was scheduled).
    pub bound: bool,
    pub created: Option<Timestamp>,
    /// `deletionTimestamp` is set.
    pub deleting: bool,
    pub phase: Phase,
    /// The Ready condition (status is True, lastTransitionTime), as [`util::ready_condition`].
    pub ready: Option<(bool, Option<Timestamp>)>,
    /// The `controller-revision-hash` label.
    pub hash: Option<String>,
    /// The `pod-template-generation` label.
    pub generation: Option<String>,
}

impl Member {
    pub fn of(pod: &Pod) -> Member {
        let label = |k: &str| pod.metadata.labels.as_ref().and_then(|l| l.get(k)).cloned();
        Member {
            name: pod.metadata.name.clone().unwrap_or_default(),
            node: target_node_name(pod),
            bound: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| !n.is_empty()),
            created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
            deleting: pod.metadata.deletion_timestamp.is_some(),
            phase: match util::phase(pod) {
                util::PHASE_SUCCEEDED => Phase::Succeeded,
                util::PHASE_FAILED => Phase::Failed,
                _ => Phase::Other,
            },
            ready: util::ready_condition(pod),
            hash: label(LABEL_CONTROLLER_REVISION_HASH),
            generation: label(LABEL_POD_TEMPLATE_GENERATION),
        }
    }

    /// Upstream `IsPodReady`.
    pub fn is_ready(&self) -> bool {
        matches!(self.ready, Some((true, _)))
    }

    /// Upstream `IsPodAvailable` ([`util::is_pod_available`]).
    pub fn is_available(&self, min_ready: Duration, now: Timestamp) -> bool {
        util::available(self.ready, min_ready, now)
    }

    /// [`is_pod_updated`] with the generation already formatted (`generation_text`).
    pub fn is_updated(&self, hash: &str, generation_text: Option<&str>) -> bool {
        (!hash.is_empty() && self.hash.as_deref() == Some(hash))
            || generation_text.is_some_and(|g| self.generation.as_deref() == Some(g))
    }
}

/// Whether a daemon pod is filed on its node (upstream `getNodesToDaemonPods`): it has a target
/// node, and is not both terminal and being deleted.
fn filed(m: &Member) -> Option<&str> {
    if m.phase != Phase::Other && m.deleting {
        return None;
    }
    m.node.as_deref()
}

/// One node's row of a DaemonSet's [`Table`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    /// `(should_run, should_continue)` of a node that exists; `None`: daemon pods are pinned to
    /// a node that does not.
    pub placed: Option<(bool, bool)>,
    /// Its daemon pods, oldest first. Inline: nearly every node has one.
    pub pods: SmallVec<[Member; 1]>,
}

/// A DaemonSet's nodes and its pods joined by node name, in node-name order: what every decision
/// reads. The shell keeps it across syncs and changes only the rows of the pods and nodes that
/// changed; the decisions then walk rows in one pass each, without looking anything up (at
/// thousands of nodes, grouping the pods and looking every node up in the groups on every sync
/// was most of a sync).
///
/// Rows in the steady state of a rolled-out DaemonSet (see [`Settling`]) are set apart once
/// they are seen so: every decision would read the same of each of them (nothing to create,
/// delete or replace; desired, current, ready, available and updated), so the decisions count
/// them instead of walking them, and a sync of a DaemonSet on thousands of nodes walks only
/// the few rows that are changing.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// The rows not set apart, in node-name order: what the decisions walk.
    rows: BTreeMap<String, Slot>,
    /// The rows set apart as settled under `settled_by`, at or before `settled_at`.
    settled: BTreeMap<String, Slot>,
    settled_by: Option<Settling>,
    settled_at: Option<Timestamp>,
    /// The rows changed since the last settling: the only ones it need look at again, as a row
    /// that did not settle stays so until it changes or time makes its pod available ...
    dirty: BTreeSet<String>,
    /// ... which happens first after this instant (a Ready pod's `minReadySeconds` running out).
    recheck_after: Option<Timestamp>,
    /// Every row must be looked at again (all nodes were dropped).
    all_dirty: bool,
}

/// What makes a row settled: the template hash and generation that count a pod as updated, and
/// the `minReadySeconds` that count it as available. A row is settled when its node exists and
/// should run and keep running the daemon, and it holds exactly one pod, neither terminal nor
/// being deleted, updated and available. A settled row stays so as time passes (availability
/// only comes with time) until the row changes or these do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settling {
    hash: String,
    generation: Option<String>,
    min_ready: Duration,
}

impl Settling {
    /// What `ds`'s decisions with template hash `hash` count as updated and available.
    pub fn of(ds: &DaemonSet, hash: &str) -> Settling {
        Settling {
            hash: hash.to_string(),
            generation: template_generation(ds).map(|g| g.to_string()),
            min_ready: util::min_ready(ds.spec.as_ref().and_then(|s| s.min_ready_seconds)),
        }
    }

    /// For a row that would hold but for its pod's availability: the instant after which that
    /// pod is available.
    fn available_after(&self, slot: &Slot, now: Timestamp) -> Option<Timestamp> {
        if self.min_ready.is_zero() || self.holds(slot, now) {
            return None;
        }
        let [p] = slot.pods.as_slice() else {
            return None;
        };
        let Some((true, Some(ready))) = p.ready else {
            return None;
        };
        ready
            .checked_add(jiff::SignedDuration::try_from(self.min_ready).ok()?)
            .ok()
            .filter(|t| *t >= now)
    }

    fn holds(&self, slot: &Slot, now: Timestamp) -> bool {
        match (slot.placed, slot.pods.as_slice()) {
            (Some((true, true)), [p]) => {
                !p.deleting
                    && p.phase == Phase::Other
                    && p.is_updated(&self.hash, self.generation.as_deref())
                    && p.is_available(self.min_ready, now)
            }
            _ => false,
        }
    }
}

/// Two tables are equal when they hold the same rows, whichever are set apart.
impl PartialEq for Table {
    fn eq(&self, other: &Table) -> bool {
        self.all_rows().eq(other.all_rows())
    }
}

impl Eq for Table {}

impl Table {
    /// The table of these nodes and pods.
    pub fn build<'a>(
        nodes: &[impl Borrow<Placed>],
        pods: impl IntoIterator<Item = &'a Member>,
    ) -> Table {
        let mut t = Table::default();
        for n in nodes {
            let n: &Placed = n.borrow();
            t.set_node(n.name(), Some((n.should_run, n.should_continue)));
        }
        for p in pods {
            t.add_pod(p.clone());
        }
        t
    }

    /// A row about to change, out of the settled ones if it was there.
    fn unsettled_mut(&mut self, name: &str) -> Option<&mut Slot> {
        if !self.dirty.contains(name) {
            self.dirty.insert(name.to_string());
        }
        if let Some(slot) = self.settled.remove(name) {
            self.rows.insert(name.to_string(), slot);
        }
        self.rows.get_mut(name)
    }

    /// Sets a node's placement (`None`: the node is gone).
    pub fn set_node(&mut self, name: &str, placed: Option<(bool, bool)>) {
        // A settled row stays settled when its node's placement is what made it so.
        if placed == Some((true, true)) && self.settled.contains_key(name) {
            return;
        }
        match self.unsettled_mut(name) {
            Some(row) => {
                row.placed = placed;
                if row.placed.is_none() && row.pods.is_empty() {
                    self.rows.remove(name);
                }
            }
            None if placed.is_some() => {
                self.dirty.insert(name.to_string());
                self.rows.insert(
                    name.to_string(),
                    Slot {
                        placed,
                        pods: SmallVec::new(),
                    },
                );
            }
            None => {}
        }
    }

    /// Every node gone (their pods stay, on nodes that do not exist).
    pub fn clear_nodes(&mut self) {
        self.all_dirty = true;
        self.rows.append(&mut self.settled);
        self.rows.retain(|_, row| {
            row.placed = None;
            !row.pods.is_empty()
        });
    }

    /// Files a pod (a pod not filed on a node is not kept).
    pub fn add_pod(&mut self, m: Member) {
        let Some(node) = filed(&m) else { return };
        let row = match self.unsettled_mut(node) {
            Some(row) => row,
            None => self.rows.entry(node.to_string()).or_default(),
        };
        // (`unsettled_mut` marked the row changed, new or not.)
        let at = row
            .pods
            .iter()
            .position(|p| oldest_first(p, &m).is_gt())
            .unwrap_or(row.pods.len());
        row.pods.insert(at, m);
    }

    /// Takes a pod (as it was filed) out.
    pub fn remove_pod(&mut self, m: &Member) {
        let Some(node) = filed(m) else { return };
        let Some(row) = self.unsettled_mut(node) else {
            return;
        };
        if let Some(at) = row.pods.iter().position(|p| p.name == m.name) {
            row.pods.remove(at);
        }
        if row.placed.is_none() && row.pods.is_empty() {
            self.rows.remove(node);
        }
    }

    /// Sets apart the rows settled under `by` at `now` (every row set apart under something
    /// else first comes back). Decisions that read the table under `by` at `now` or later
    /// count those rows instead of walking them; under anything else they walk every row.
    ///
    /// Only the rows changed since the last settling are looked at, unless `by` is another
    /// `Settling` or a Ready pod may have become available since: a row that did not hold then
    /// holds now only if it changed or time made its pod available (with thousands of daemon
    /// pods starting, every pod event syncs the DaemonSet, and each sync walked every row).
    pub fn settle(&mut self, by: &Settling, now: Timestamp) {
        let mut all = std::mem::take(&mut self.all_dirty)
            || self.settled_at.is_none()
            || self.recheck_after.is_some_and(|t| now > t);
        if self.settled_by.as_ref() != Some(by) {
            self.rows.append(&mut self.settled);
            self.settled_by = Some(by.clone());
            all = true;
        }
        let dirty = std::mem::take(&mut self.dirty);
        let holds = |(_, slot): &(&String, &Slot)| by.holds(slot, now);
        let settled: Vec<String> = if all {
            self.recheck_after = None;
            self.rows
                .iter()
                .filter(holds)
                .map(|(n, _)| n.clone())
                .collect()
        } else {
            dirty
                .iter()
                .filter_map(|n| self.rows.get_key_value(n))
                .filter(holds)
                .map(|(n, _)| n.clone())
                .collect()
        };
        for name in settled {
            if let Some(slot) = self.rows.remove(&name) {
                self.settled.insert(name, slot);
            }
        }
        // When the rows looked at that stay unsettled may settle by time alone.
        let looked_at: Box<dyn Iterator<Item = &Slot>> = if all {
            Box::new(self.rows.values())
        } else {
            Box::new(dirty.iter().filter_map(|n| self.rows.get(n)))
        };
        let next = looked_at
            .filter_map(|slot| by.available_after(slot, now))
            .min();
        self.recheck_after = match (self.recheck_after, next) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.settled_at = Some(self.settled_at.map_or(now, |t| t.max(now)));
    }

    /// Every row in node-name order, settled or not.
    pub fn all_rows(&self) -> impl Iterator<Item = (&str, &Slot)> {
        merged(&self.rows, &self.settled)
    }

    /// The rows a decision reading the table at `now` walks, and how many settled rows it counts
    /// instead: the rows not set apart and the settled count when the table was settled at or
    /// before `now` under a [`Settling`] that `counts` accepts, else every row and none.
    fn walk(
        &self,
        counts: impl Fn(&Settling) -> bool,
        now: Timestamp,
    ) -> (Box<dyn Iterator<Item = (&str, &Slot)> + '_>, usize) {
        let current = self.settled_by.as_ref().is_some_and(counts)
            && self.settled_at.is_some_and(|at| at <= now);
        if current || self.settled.is_empty() {
            (
                Box::new(self.unsettled()),
                if current { self.settled.len() } else { 0 },
            )
        } else {
            (Box::new(self.all_rows()), 0)
        }
    }

    /// The rows not set apart, in node-name order.
    fn unsettled(&self) -> impl Iterator<Item = (&str, &Slot)> {
        self.rows.iter().map(|(n, r)| (n.as_str(), r))
    }
}

/// Two ordered maps' entries as one, in key order (their keys are disjoint).
fn merged<'a>(
    a: &'a BTreeMap<String, Slot>,
    b: &'a BTreeMap<String, Slot>,
) -> impl Iterator<Item = (&'a str, &'a Slot)> {
    let (mut a, mut b) = (a.iter().peekable(), b.iter().peekable());
    std::iter::from_fn(move || {
        let take_a = match (a.peek(), b.peek()) {
            (Some((ka, _)), Some((kb, _))) => ka <= kb,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        let (k, v) = if take_a { a.next()? } else { b.next()? };
        Some((k.as_str(), v))
    })
}

/// The order of one node's daemon pods: creation time (none first), then name.
pub fn oldest_first(a: &Member, b: &Member) -> std::cmp::Ordering {
    (a.created, &a.name).cmp(&(b.created, &b.name))
}

/// Per-(DaemonSet, node) back-off for replacing failed daemon pods (client-go `flowcontrol.Backoff`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FailedPodsBackoff {
    /// node name → (current delay, last update)
    entries: BTreeMap<String, (Duration, Timestamp)>,
}

impl FailedPodsBackoff {
    /// `IsInBackOffSinceUpdate`: still within the current delay since the last `next`.
    pub fn in_backoff(&self, node: &str, now: Timestamp) -> Option<Duration> {
        let (d, at) = self.entries.get(node)?;
        let elapsed = Duration::try_from(now.duration_since(*at)).unwrap_or_default();
        // Once the delay has passed there is nothing left (not a negative remainder).
        d.checked_sub(elapsed).filter(|left| !left.is_zero())
    }

    /// `Next`: start at `initial` or double up to `max` (reset after 2 × max of quiet).
    pub fn next(&mut self, node: &str, now: Timestamp, initial: Duration, max: Duration) {
        let e = self
            .entries
            .entry(node.to_string())
            .or_insert((Duration::ZERO, now));
        let quiet = Duration::try_from(now.duration_since(e.1)).unwrap_or_default();
        e.0 = if e.0.is_zero() || quiet > max.saturating_mul(2) {
            initial
        } else {
            e.0.saturating_mul(2).min(max)
        };
        e.1 = now;
    }
}

/// An event the controller emits about the DaemonSet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DsEvent {
    pub type_: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// What one sync should do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManagePlan {
    /// Nodes that need a daemon pod, in name order.
    pub create_on: Vec<String>,
    /// Pods to delete (names), in decision order.
    pub delete: Vec<String>,
    pub events: Vec<DsEvent>,
    /// Sync again after this long (failed-pod back-off).
    pub requeue_after: Option<Duration>,
}

/// Upstream `manage` → `podsShouldBeOnNode` over every node, plus the daemon pods pinned to nodes
/// that no longer exist. On a NotReady/unreachable node (NoSchedule taint not tolerated, NoExecute
/// tolerated) nothing is created and the existing pod is kept.
pub fn manage(
    ds: &DaemonSet,
    table: &Table,
    now: Timestamp,
    backoff: &mut FailedPodsBackoff,
    config: &super::config::DaemonSetControllerConfig,
) -> ManagePlan {
    let mut plan = ManagePlan::default();
    let surge = max_surge(ds) > 0;
    // A DaemonSet's pods are in its namespace.
    let ns = ds.metadata.namespace.as_deref().unwrap_or_default();
    // Daemon pods bound by affinity to nodes that do not exist and never scheduled, in node
    // name order (a node's oldest first): deleted after the nodes' deletions.
    let mut ghosts: Vec<String> = Vec::new();
    // A settled row has nothing to create or delete, whatever it was settled under.
    for (name, row) in table.unsettled() {
        let pods = row.pods.as_slice();
        let Some((should_run, should_continue)) = row.placed else {
            ghosts.extend(
                pods.iter()
                    .filter(|p| !p.bound && !p.deleting)
                    .map(|p| p.name.clone()),
            );
            continue;
        };
        let exists = !pods.is_empty();
        if should_run && !exists {
            plan.create_on.push(name.to_string());
        } else if should_continue {
            // The running pods after the oldest (nothing is copied for a node's usual one pod).
            let mut oldest_running = false;
            let mut extra_running: Vec<&Member> = Vec::new();
            for p in pods {
                if p.deleting {
                    continue;
                }
                let pname = p.name.as_str();
                match p.phase {
                    Phase::Failed => {
                        if let Some(left) = backoff.in_backoff(name, now) {
                            plan.requeue_after =
                                Some(plan.requeue_after.map_or(left, |r| r.min(left)));
                            continue;
                        }
                        backoff.next(
                            name,
                            now,
                            config.failed_pods_backoff_initial,
                            config.failed_pods_backoff_max,
                        );
                        plan.events.push(DsEvent {
                            type_: names::EVENT_WARNING,
                            reason: REASON_FAILED_DAEMON_POD,
                            message: format!("Found failed daemon pod {ns}/{pname} on node {name}, will try to kill it"),
                        });
                        plan.delete.push(pname.to_string());
                    }
                    Phase::Succeeded => {
                        plan.events.push(DsEvent {
                            type_: names::EVENT_NORMAL,
                            reason: REASON_SUCCEEDED_DAEMON_POD,
                            message: format!("Found succeeded daemon pod {ns}/{pname} on node {name}, will try to delete it"),
                        });
                        plan.delete.push(pname.to_string());
                    }
                    _ if oldest_running => extra_running.push(p),
                    _ => oldest_running = true,
                }
            }
            // Without surge, keep only the oldest running pod on a node.
            if !surge {
                plan.delete
                    .extend(extra_running.iter().map(|p| p.name.clone()));
            }
        } else if exists {
            for p in pods {
                if !p.deleting {
                    plan.delete.push(p.name.clone());
                }
            }
        }
    }
    plan.delete.extend(ghosts);
    plan.create_on.truncate(config.burst_replicas);
    plan.delete.truncate(config.burst_replicas);
    plan
}

fn scaled(v: Option<&IntOrString>, total: i64, default: i64) -> i64 {
    match v {
        None => default,
        Some(IntOrString::Int(i)) => i64::from(*i),
        Some(IntOrString::String(s)) => {
            match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
                // Upstream rounds up for the DaemonSet's maxUnavailable/maxSurge.
                // i128: a percentage the size of i64 must not overflow.
                Some(p) => {
                    let v = i128::from(p)
                        .saturating_mul(i128::from(total))
                        .saturating_add(99)
                        .div_euclid(100);
                    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
                }
                None => default,
            }
        }
    }
}

fn max_surge(ds: &DaemonSet) -> i64 {
    let ru = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.as_ref());
    scaled(ru.and_then(|r| r.max_surge.as_ref()), 0, 0)
}

/// Whether the update strategy is RollingUpdate (the default).
pub fn is_rolling_update(ds: &DaemonSet) -> bool {
    ds.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        .unwrap_or("RollingUpdate")
        == "RollingUpdate"
}

/// Upstream `rollingUpdate` without surge: delete just enough old pods to stay within
/// `maxUnavailable` (default 1, percentages of desiredNumberScheduled rounded up); unavailable old
/// pods are always replaced. The manage step recreates them from the new template.
pub fn rolling_update_deletions(
    ds: &DaemonSet,
    table: &Table,
    hash: &str,
    now: Timestamp,
) -> Vec<String> {
    let ru = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.as_ref());
    let limit = ru.and_then(|r| r.max_unavailable.as_ref());
    let by = Settling::of(ds, hash);
    // A settled row has one pod, updated and available: it counts as desired, adds nothing
    // unavailable and has nothing to replace.
    let (rows, settled) = table.walk(|s| *s == by, now);
    let rows: Vec<(&str, &Slot)> = rows.collect();
    // Only a percentage reads the desired count.
    let desired = match limit {
        Some(IntOrString::String(_)) => rows
            .iter()
            .filter(|(_, r)| matches!(r.placed, Some((true, _))))
            .count()
            .saturating_add(settled) as i64,
        _ => 0,
    };
    let mut max_unavailable = scaled(limit, desired, 1);
    if max_unavailable == 0 && max_surge(ds) == 0 {
        max_unavailable = 1;
    }
    let (min_ready, generation) = (by.min_ready, by.generation.as_deref());
    let mut unavailable = 0i64;
    // Rows are in node-name order, so both lists are.
    let mut replace: Vec<String> = Vec::new();
    let mut candidates: Vec<String> = Vec::new();
    // Every node with daemon pods, whether it exists or not.
    for pods in rows.iter().map(|(_, r)| &r.pods).filter(|p| !p.is_empty()) {
        // The node's live pods, new and old: counted, and the first of each kept (no lists
        // built per node).
        let (mut new, mut old) = ((0usize, None), (0usize, None));
        for p in pods.iter().filter(|p| !p.deleting) {
            let side = if p.is_updated(hash, generation) {
                &mut new
            } else {
                &mut old
            };
            side.0 = side.0.saturating_add(1);
            side.1 = side.1.or(Some(p));
        }
        if new.0 > 1 || old.0 > 1 {
            unavailable = unavailable.saturating_add(1);
            continue;
        }
        match (new.1, old.1) {
            (None, None) | (Some(_), Some(_)) => unavailable = unavailable.saturating_add(1),
            (Some(n), None) => {
                if !n.is_available(min_ready, now) {
                    unavailable = unavailable.saturating_add(1);
                }
            }
            (None, Some(o)) => {
                let name = o.name.clone();
                if !o.is_available(min_ready, now) {
                    replace.push(name);
                } else {
                    candidates.push(name);
                }
            }
        }
    }
    // In node-name order, this is upstream's walk that skips a candidate once the
    // unavailable count reaches the limit: with `unavailable` below it at the end, it was
    // below it at every node (every candidate kept); at or above it, no room is left.
    let room = max_unavailable
        .saturating_sub(unavailable)
        .clamp(0, candidates.len() as i64) as usize;
    replace.extend(candidates.into_iter().take(room));
    replace
}

/// Upstream `updateDaemonSetStatus`: counts over the nodes (a node that should not run the daemon
/// but has a pod counts as misscheduled), `observedGeneration` = generation.
pub fn compute_status(
    ds: &DaemonSet,
    table: &Table,
    hash: &str,
    now: Timestamp,
) -> DaemonSetStatus {
    let by = Settling::of(ds, hash);
    let (min_ready, generation) = (by.min_ready, by.generation.as_deref());
    let mut st = DaemonSetStatus {
        observed_generation: ds.metadata.generation,
        ..Default::default()
    };
    // A settled row's node should run the daemon and its one pod is current, ready, available
    // and updated.
    let (rows, settled) = table.walk(|s| *s == by, now);
    let settled = i32::try_from(settled).unwrap_or(i32::MAX);
    let (mut desired, mut current, mut misscheduled, mut ready, mut available, mut updated) =
        (settled, settled, 0i32, settled, settled, settled);
    for (should_run, pods) in rows.filter_map(|(_, r)| Some((r.placed?.0, r.pods.as_slice()))) {
        let oldest = pods.first();
        if should_run {
            desired = desired.saturating_add(1);
            // Oldest first; upstream also prefers the better phase among equally old pods.
            let Some(pod) = oldest else { continue };
            current = current.saturating_add(1);
            if pod.is_ready() {
                ready = ready.saturating_add(1);
                if pod.is_available(min_ready, now) {
                    available = available.saturating_add(1);
                }
            }
            if pod.is_updated(hash, generation) {
                updated = updated.saturating_add(1);
            }
        } else if oldest.is_some() {
            misscheduled = misscheduled.saturating_add(1);
        }
    }
    st.desired_number_scheduled = desired;
    st.current_number_scheduled = current;
    st.number_misscheduled = misscheduled;
    st.number_ready = ready;
    st.number_available = Some(available);
    st.number_unavailable = Some(desired.saturating_sub(available));
    st.updated_number_scheduled = Some(updated);
    st.collision_count = ds.status.as_ref().and_then(|s| s.collision_count);
    st.conditions = ds.status.as_ref().and_then(|s| s.conditions.clone());
    st
}

/// When a Ready-but-not-yet-available daemon pod becomes available (re-sync then, as upstream's
/// `enqueueDaemonSetAfter(minReadySeconds)`).
pub fn next_availability_check(ds: &DaemonSet, table: &Table, now: Timestamp) -> Option<Timestamp> {
    let secs = ds
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    if secs <= 0 {
        return None;
    }
    let min_ready = Duration::from_secs(secs as u64);
    // A settled row's pod is available under the same minReadySeconds.
    let (rows, _) = table.walk(|s| s.min_ready == min_ready, now);
    rows.filter_map(|(_, r)| r.pods.first())
        .filter(|p| p.is_ready() && !p.is_available(min_ready, now))
        .filter_map(|p| util::available_at_of(p.ready, min_ready))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, spec: serde_json::Value, labels: serde_json::Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": spec}))
            .unwrap()
    }
    fn ds(tmpl_spec: serde_json::Value) -> DaemonSet {
        serde_json::from_value(json!({"metadata": {"name": "ds", "namespace": "kube-system", "uid": "ds-uid", "generation": 1},
            "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": tmpl_spec}}})).unwrap()
    }
    fn taint(key: &str, effect: &str) -> serde_json::Value {
        json!({"key": key, "effect": effect})
    }
    fn tol_keys(spec: &PodSpec) -> Vec<String> {
        spec.tolerations
            .iter()
            .flatten()
            .map(|t| {
                format!(
                    "{}:{}:{}",
                    t.key.clone().unwrap_or_default(),
                    t.effect.clone().unwrap_or_default(),
                    t.toleration_seconds
                        .map(|s| s.to_string())
                        .unwrap_or_default()
                )
            })
            .collect()
    }

    /// maxUnavailable/maxSurge percentages as large as i64 and minReadySeconds at the ends of
    /// i32: no overflow (the percentage arithmetic panicked), availability saturates.
    #[test]
    fn extreme_percentages_and_min_ready() {
        let pct = |p: &str| IntOrString::String(p.into());
        assert_eq!(
            scaled(Some(&pct("9223372036854775807%")), 1000, 1),
            i64::MAX
        );
        assert_eq!(
            scaled(Some(&pct("-9223372036854775808%")), 1000, 1),
            i64::MIN
        );
        assert_eq!(scaled(Some(&pct("50%")), i64::MAX, 1), i64::MAX / 2 + 1);
        assert_eq!(
            scaled(Some(&IntOrString::Int(i32::MAX)), 3, 1),
            i64::from(i32::MAX)
        );
        for min_ready in [i32::MAX, i32::MIN, -1] {
            let mut d = ds(json!({"containers": []}));
            d.spec.as_mut().unwrap().min_ready_seconds = Some(min_ready);
            d.spec.as_mut().unwrap().update_strategy = Some(serde_json::from_value(json!(
                {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "9223372036854775807%", "maxSurge": 0}}
            )).unwrap());
            let n = node("n1", json!({}), json!({}));
            let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
            let p: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app": "d", "controller-revision-hash": "old"}},
                "spec": {"nodeName": "n1"},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}))
                .unwrap();
            let ms = members(&[&p]);
            let st = compute_status(&d, &Table::build(&place(&d, &[&n]), &ms), "new", t0);
            assert_eq!(st.desired_number_scheduled, 1);
            assert_eq!(
                st.number_unavailable,
                Some(if min_ready > 0 { 1 } else { 0 })
            );
            let _ = rolling_update_deletions(&d, &Table::build(&place(&d, &[&n]), &ms), "new", t0);
            let _ = next_availability_check(&d, &Table::build(&place(&d, &[&n]), &ms), t0);
        }
    }

    #[test]
    fn daemon_tolerations_cp46() {
        // CP-46: the user's 30 s not-ready toleration is replaced by the infinite one; no
        // network-unavailable toleration without hostNetwork.
        let mut spec: PodSpec = serde_json::from_value(json!({"containers": [], "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
            {"key": "CriticalAddonsOnly", "operator": "Exists"}]})).unwrap();
        add_or_update_daemon_pod_tolerations(&mut spec);
        assert_eq!(
            tol_keys(&spec),
            vec![
                "node.kubernetes.io/not-ready:NoExecute:",
                "CriticalAddonsOnly::",
                "node.kubernetes.io/unreachable:NoExecute:",
                "node.kubernetes.io/disk-pressure:NoSchedule:",
                "node.kubernetes.io/memory-pressure:NoSchedule:",
                "node.kubernetes.io/pid-pressure:NoSchedule:",
                "node.kubernetes.io/unschedulable:NoSchedule:",
            ]
        );
        let mut host: PodSpec =
            serde_json::from_value(json!({"containers": [], "hostNetwork": true})).unwrap();
        add_or_update_daemon_pod_tolerations(&mut host);
        assert_eq!(
            tol_keys(&host).last().map(String::as_str),
            Some("node.kubernetes.io/network-unavailable:NoSchedule:")
        );
        // idempotent
        let before = tol_keys(&host);
        add_or_update_daemon_pod_tolerations(&mut host);
        assert_eq!(tol_keys(&host), before);
    }

    #[test]
    fn node_should_run_daemon_pod_table() {
        let plain = ds(json!({"containers": []}));
        let cases = [
            (
                "ready node",
                node("n1", json!({}), json!({})),
                plain.clone(),
                (true, true),
            ),
            // NotReady / unreachable: NoSchedule not tolerated, NoExecute tolerated → keep, don't create
            (
                "unreachable",
                node(
                    "n1",
                    json!({"taints": [taint("node.kubernetes.io/unreachable", "NoSchedule"), taint("node.kubernetes.io/unreachable", "NoExecute")]}),
                    json!({}),
                ),
                plain.clone(),
                (false, true),
            ),
            (
                "not-ready",
                node(
                    "n1",
                    json!({"taints": [taint("node.kubernetes.io/not-ready", "NoSchedule")]}),
                    json!({}),
                ),
                plain.clone(),
                (false, true),
            ),
            (
                "cordoned",
                node(
                    "n1",
                    json!({"unschedulable": true, "taints": [taint("node.kubernetes.io/unschedulable", "NoSchedule")]}),
                    json!({}),
                ),
                plain.clone(),
                (true, true),
            ),
            (
                "memory pressure",
                node(
                    "n1",
                    json!({"taints": [taint("node.kubernetes.io/memory-pressure", "NoSchedule")]}),
                    json!({}),
                ),
                plain.clone(),
                (true, true),
            ),
            (
                "network unavailable, no hostNetwork",
                node(
                    "n1",
                    json!({"taints": [taint("node.kubernetes.io/network-unavailable", "NoSchedule")]}),
                    json!({}),
                ),
                plain.clone(),
                (false, true),
            ),
            (
                "network unavailable, hostNetwork",
                node(
                    "n1",
                    json!({"taints": [taint("node.kubernetes.io/network-unavailable", "NoSchedule")]}),
                    json!({}),
                ),
                ds(json!({"containers": [], "hostNetwork": true})),
                (true, true),
            ),
            (
                "out-of-service NoExecute",
                node(
                    "n1",
                    json!({"taints": [taint("node.kubernetes.io/out-of-service", "NoExecute")]}),
                    json!({}),
                ),
                plain.clone(),
                (false, false),
            ),
            (
                "custom NoSchedule",
                node(
                    "n1",
                    json!({"taints": [taint("dedicated", "NoSchedule")]}),
                    json!({}),
                ),
                plain.clone(),
                (false, true),
            ),
            (
                "custom PreferNoSchedule",
                node(
                    "n1",
                    json!({"taints": [taint("dedicated", "PreferNoSchedule")]}),
                    json!({}),
                ),
                plain.clone(),
                (true, true),
            ),
            (
                "nodeSelector mismatch",
                node("n1", json!({}), json!({"role": "db"})),
                ds(json!({"containers": [], "nodeSelector": {"role": "web"}})),
                (false, false),
            ),
            (
                "nodeSelector match",
                node("n1", json!({}), json!({"role": "web"})),
                ds(json!({"containers": [], "nodeSelector": {"role": "web"}})),
                (true, true),
            ),
            (
                "template nodeName other",
                node("n1", json!({}), json!({})),
                ds(json!({"containers": [], "nodeName": "n2"})),
                (false, false),
            ),
            (
                "template nodeName same",
                node("n1", json!({}), json!({})),
                ds(json!({"containers": [], "nodeName": "n1"})),
                (true, true),
            ),
            (
                "affinity mismatch",
                node("n1", json!({}), json!({"zone": "a"})),
                ds(
                    json!({"containers": [], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}}),
                ),
                (false, false),
            ),
            (
                "tolerated custom taint",
                node(
                    "n1",
                    json!({"taints": [taint("dedicated", "NoExecute")]}),
                    json!({}),
                ),
                ds(
                    json!({"containers": [], "tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
                ),
                (true, true),
            ),
        ];
        for (what, n, d, want) in cases {
            assert_eq!(node_should_run_daemon_pod(&n, &d), want, "{what}");
        }
    }

    fn members(pods: &[&Pod]) -> Vec<Member> {
        pods.iter().map(|p| Member::of(p)).collect()
    }

    fn dpod(
        name: &str,
        node: &str,
        phase: &str,
        ready: bool,
        labels: serde_json::Value,
        created: &str,
    ) -> Pod {
        let aff = replace_node_name_affinity(None, node);
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "kube-system", "labels": labels, "creationTimestamp": created,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds-uid", "controller": true}]},
            "spec": {"containers": [], "nodeName": node, "affinity": aff},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}})).unwrap()
    }

    #[test]
    fn manage_and_status_with_a_dead_node() {
        let d = ds(json!({"containers": []}));
        let hash = template_hash(&d.spec.as_ref().unwrap().template, None);
        let lbl =
            json!({"app": "d", "controller-revision-hash": hash, "pod-template-generation": "1"});
        let n1 = node("n1", json!({}), json!({}));
        let n2 = node(
            "n2",
            json!({"taints": [taint("node.kubernetes.io/unreachable", "NoSchedule"), taint("node.kubernetes.io/unreachable", "NoExecute")]}),
            json!({}),
        );
        let n3 = node("n3", json!({}), json!({}));
        let n4 = node(
            "n4",
            json!({"taints": [taint("node.kubernetes.io/not-ready", "NoSchedule")]}),
            json!({}),
        );
        let p1 = dpod(
            "ds-a",
            "n1",
            "Running",
            true,
            lbl.clone(),
            "2026-01-01T00:00:00Z",
        );
        let p2 = dpod(
            "ds-b",
            "n2",
            "Running",
            false,
            lbl.clone(),
            "2026-01-01T00:00:00Z",
        );
        let ms = members(&[&p1, &p2]);
        let nodes = [&n1, &n2, &n3, &n4];
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let mut backoff = FailedPodsBackoff::default();
        let plan = manage(
            &d,
            &Table::build(&place(&d, &nodes), &ms),
            now,
            &mut backoff,
            &Default::default(),
        );
        // n3 gets a pod; the dead n2 keeps its pod; n4 (NotReady, no pod) gets none.
        assert_eq!(plan.create_on, vec!["n3"]);
        assert!(plan.delete.is_empty());
        let st = compute_status(&d, &Table::build(&place(&d, &nodes), &ms), &hash, now);
        assert_eq!(st.desired_number_scheduled, 2); // n1, n3
        assert_eq!(st.current_number_scheduled, 1);
        assert_eq!(st.number_misscheduled, 1); // n2
        assert_eq!(st.number_ready, 1);
        assert_eq!(st.number_available, Some(1));
        assert_eq!(st.updated_number_scheduled, Some(1));
        assert_eq!(st.observed_generation, Some(1));
    }

    /// A failed daemon pod found again after its back-off expired (the kubelet rejected the
    /// replacement too): no remainder, no overflow, a doubled delay — the controller once
    /// panicked here with "overflow when subtracting durations".
    #[test]
    fn failed_pod_backoff_after_expiry() {
        let mut b = FailedPodsBackoff::default();
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let (one, max) = (Duration::from_secs(1), Duration::from_secs(900));
        b.next("n1", t0, one, max);
        assert_eq!(b.in_backoff("n1", t0), Some(one));
        let later = |s: i64| t0 + jiff::SignedDuration::from_millis(s);
        assert_eq!(
            b.in_backoff("n1", later(400)),
            Some(Duration::from_millis(600))
        );
        assert_eq!(b.in_backoff("n1", later(1_000)), None);
        assert_eq!(b.in_backoff("n1", later(5_000)), None);
        b.next("n1", later(5_000), one, max);
        assert_eq!(
            b.in_backoff("n1", later(5_000)),
            Some(Duration::from_secs(2))
        );
        // A huge maximum neither overflows nor resets early.
        let mut h = FailedPodsBackoff::default();
        h.next("n1", t0, Duration::from_secs(u64::MAX / 2), Duration::MAX);
        h.next("n1", later(1), Duration::from_secs(1), Duration::MAX);
        assert_eq!(
            h.in_backoff("n1", later(1)),
            Some(Duration::from_secs(u64::MAX - 1))
        );
        assert_eq!(b.in_backoff("n2", t0), None);
    }

    #[test]
    fn failed_and_duplicate_pods() {
        let d = ds(json!({"containers": []}));
        let n1 = node("n1", json!({}), json!({}));
        let failed = dpod(
            "ds-f",
            "n1",
            "Failed",
            false,
            json!({}),
            "2026-01-01T00:00:00Z",
        );
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let mut backoff = FailedPodsBackoff::default();
        let cfg = super::super::config::DaemonSetControllerConfig::default();
        let on_n1 = |pods: &[&Pod], backoff: &mut FailedPodsBackoff| {
            manage(
                &d,
                &Table::build(&place(&d, &[&n1]), &members(pods)),
                now,
                backoff,
                &cfg,
            )
        };
        let pods = [&failed];
        let plan = on_n1(&pods, &mut backoff);
        assert_eq!(plan.delete, vec!["ds-f"]);
        assert_eq!(
            plan.events[0].message,
            "Found failed daemon pod kube-system/ds-f on node n1, will try to kill it"
        );
        // immediately again: in back-off, requeued for the rest of the 1 s
        let plan = on_n1(&pods, &mut backoff);
        assert!(plan.delete.is_empty());
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(1)));
        // two running pods on one node: the younger is deleted
        let old = dpod(
            "ds-old",
            "n1",
            "Running",
            true,
            json!({}),
            "2026-01-01T00:00:00Z",
        );
        let young = dpod(
            "ds-young",
            "n1",
            "Running",
            true,
            json!({}),
            "2026-01-01T00:05:00Z",
        );
        let pods = [&young, &old];
        let plan = on_n1(&pods, &mut backoff);
        assert_eq!(plan.delete, vec!["ds-young"]);
        // a pod pinned to a node that no longer exists and never scheduled is deleted
        let mut ghost = dpod(
            "ds-ghost",
            "gone",
            "Pending",
            false,
            json!({}),
            "2026-01-01T00:00:00Z",
        );
        ghost.spec.as_mut().unwrap().node_name = None;
        let pods = [&ghost];
        let plan = on_n1(&pods, &mut backoff);
        assert_eq!(plan.create_on, vec!["n1"]);
        assert_eq!(plan.delete, vec!["ds-ghost"]);
    }

    /// The rolling update's deletions and manage's ghost deletions, from the hashed pods by
    /// node, are the ones of upstream's walk over the nodes in name order that stops taking
    /// candidates once the unavailable count reaches the limit.
    #[test]
    fn deletions_are_those_of_the_walk_in_node_name_order() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};

        // The walk as written for an ordered map (the reference).
        fn walk(
            ds: &DaemonSet,
            desired: i64,
            by_node: &BTreeMap<&str, Vec<&Pod>>,
            hash: &str,
            now: Timestamp,
        ) -> Vec<String> {
            let ru = ds
                .spec
                .as_ref()
                .and_then(|s| s.update_strategy.as_ref())
                .and_then(|u| u.rolling_update.as_ref());
            let mut max = scaled(ru.and_then(|r| r.max_unavailable.as_ref()), desired, 1);
            if max == 0 {
                max = 1;
            }
            let generation = template_generation(ds);
            let (mut unavailable, mut replace, mut candidates) = (0i64, vec![], vec![]);
            for pods in by_node.values() {
                let live: Vec<&&Pod> = pods
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .collect();
                let (new, old): (Vec<&&Pod>, Vec<&&Pod>) = live
                    .into_iter()
                    .partition(|p| is_pod_updated(p, hash, generation));
                if new.len() > 1 || old.len() > 1 {
                    unavailable += 1;
                    continue;
                }
                match (new.first(), old.first()) {
                    (None, None) | (Some(_), Some(_)) => unavailable += 1,
                    (Some(n), None) => {
                        if !util::is_pod_available(n, Duration::ZERO, now) {
                            unavailable += 1;
                        }
                    }
                    (None, Some(o)) => {
                        let name = o.metadata.name.clone().unwrap_or_default();
                        if !util::is_pod_available(o, Duration::ZERO, now) {
                            replace.push(name);
                        } else if unavailable < max {
                            candidates.push(name);
                        }
                    }
                }
            }
            let room = (max - unavailable).clamp(0, candidates.len() as i64) as usize;
            replace.extend(candidates.into_iter().take(room));
            replace
        }

        // Per node: which pods it has (none, old available, old unavailable, new available,
        // new unavailable, two of them, one being deleted); some nodes are gone. The limit is a
        // count or a percentage of the nodes that should run the daemon.
        let case = (
            proptest::collection::vec((0u8..8, any::<bool>(), 0u8..3), 1..14),
            prop_oneof![
                (0i32..5).prop_map(|n| json!(n)),
                (0i32..60).prop_map(|p| json!(format!("{p}%"))),
            ],
        );
        TestRunner::new(Config {
            cases: 300,
            ..Config::default()
        })
        .run(&case, |(kinds, max_unavailable)| {
            let mut d = ds(json!({"containers": [{"name": "c", "image": "v2"}]}));
            d.metadata.generation = Some(2);
            d.spec.as_mut().unwrap().update_strategy = Some(
                serde_json::from_value(json!({"type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": max_unavailable}}))
                .unwrap(),
            );
            let hash = template_hash(&d.spec.as_ref().unwrap().template, None);
            let new_lbl = json!({"controller-revision-hash": hash, "pod-template-generation": "2"});
            let old_lbl =
                json!({"controller-revision-hash": "old", "pod-template-generation": "1"});
            let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
            let mut nodes = Vec::new();
            let mut pods = Vec::new();
            // Node names out of order, so that name order is not insertion order.
            for (i, (kind, gone, extra)) in kinds.iter().enumerate() {
                let n = format!("n{}", (i * 7) % 13);
                if nodes
                    .iter()
                    .any(|x: &Node| x.metadata.name.as_deref() == Some(&n))
                {
                    continue;
                }
                if !gone {
                    nodes.push(node(&n, json!({}), json!({})));
                }
                let mut add = |suffix: &str, new: bool, ready: bool| {
                    let lbl = if new { &new_lbl } else { &old_lbl };
                    let mut p = dpod(
                        &format!("ds-{n}-{suffix}"),
                        &n,
                        "Running",
                        ready,
                        lbl.clone(),
                        "2026-01-01T00:00:00Z",
                    );
                    if *gone {
                        p.spec.as_mut().unwrap().node_name = None;
                    }
                    pods.push(p);
                };
                match kind {
                    0 => {}
                    1 => add("a", false, true),
                    2 => add("a", false, false),
                    3 => add("a", true, true),
                    4 => add("a", true, false),
                    5 => {
                        add("a", false, true);
                        add("b", true, true);
                    }
                    6 => {
                        add("a", false, true);
                        add("b", false, *extra > 0);
                    }
                    _ => {
                        add("a", false, true);
                        pods.last_mut().unwrap().metadata.deletion_timestamp =
                            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
                    }
                }
            }
            let nrefs: Vec<&Node> = nodes.iter().collect();
            let prefs: Vec<&Pod> = pods.iter().collect();
            let ms = members(&prefs);
            // The reference reads the Pods themselves.
            let mut ordered: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
            for p in &prefs {
                if let Some(n) = target_node(p) {
                    ordered.entry(n).or_default().push(p);
                }
            }
            for v in ordered.values_mut() {
                v.sort_by_key(|p| p.metadata.name.clone());
            }
            let daemon = DaemonPod::of(&d);
            let desired = nrefs.iter().filter(|n| daemon.should_run(n).0).count() as i64;
            prop_assert_eq!(
                rolling_update_deletions(&d, &Table::build(&place(&d, &nrefs), &ms), &hash, now),
                walk(&d, desired, &ordered, &hash, now)
            );
            // Ghost deletions: the pods pinned to gone nodes, in node-name order.
            let known: std::collections::BTreeSet<&str> = nrefs
                .iter()
                .filter_map(|n| n.metadata.name.as_deref())
                .collect();
            let ghosts: Vec<String> = ordered
                .iter()
                .filter(|(n, _)| !known.contains(*n))
                .flat_map(|(_, ps)| ps.iter())
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .map(|p| p.metadata.name.clone().unwrap_or_default())
                .collect();
            let plan = manage(
                &d,
                &Table::build(&place(&d, &nrefs), &ms),
                now,
                &mut FailedPodsBackoff::default(),
                &Default::default(),
            );
            let deleted_ghosts: Vec<String> = plan
                .delete
                .iter()
                .filter(|name| ghosts.contains(name))
                .cloned()
                .collect();
            prop_assert_eq!(deleted_ghosts, ghosts);
            Ok(())
        })
        .unwrap();
    }

    /// A Member answers every question the decisions ask as the Pod it was taken from does:
    /// target node, phase, deletion, readiness, availability and its instant, updatedness.
    #[test]
    fn a_member_answers_as_its_pod() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};

        let opt = |v: Vec<&'static str>| proptest::sample::select(v);
        let case = (
            (
                opt(vec!["", "h1", "h2"]),
                opt(vec!["", "1", "2", "x"]),
                opt(crate::replicaset::util::testutil::PHASES.to_vec()),
            ),
            (opt(vec!["-", "", "n1"]), any::<bool>(), any::<bool>()),
            (
                opt(vec!["-", "True", "False"]),
                proptest::option::of(0i64..20),
            ),
        );
        TestRunner::new(Config {
            cases: 300,
            ..Config::default()
        })
        .run(
            &case,
            |((hash, gen_, phase), (node_name, pinned, deleting), (ready, since))| {
                let t = |s: i64| Timestamp::from_second(1_767_225_600 + s).unwrap();
                let mut labels = serde_json::Map::new();
                if !hash.is_empty() {
                    labels.insert(LABEL_CONTROLLER_REVISION_HASH.into(), json!(hash));
                }
                if !gen_.is_empty() {
                    labels.insert(LABEL_POD_TEMPLATE_GENERATION.into(), json!(gen_));
                }
                let mut spec = json!({"containers": []});
                if node_name != "-" {
                    spec["nodeName"] = json!(node_name);
                }
                if pinned {
                    spec["affinity"] =
                        serde_json::to_value(replace_node_name_affinity(None, "n2")).unwrap();
                }
                let status = crate::replicaset::util::testutil::status_json(phase, ready, since);
                let mut meta =
                    json!({"name": "p", "labels": labels, "creationTimestamp": t(0).to_string()});
                if deleting {
                    meta["deletionTimestamp"] = json!(t(1).to_string());
                }
                let pod: Pod = serde_json::from_value(
                    json!({"metadata": meta, "spec": spec, "status": status}),
                )
                .unwrap();
                let m = Member::of(&pod);
                prop_assert_eq!(&m.node, &target_node_name(&pod));
                prop_assert_eq!(m.deleting, pod.metadata.deletion_timestamp.is_some());
                prop_assert_eq!(m.created, Some(t(0)));
                prop_assert_eq!(m.is_ready(), util::is_pod_ready(&pod));
                let terminal = matches!(
                    util::phase(&pod),
                    util::PHASE_SUCCEEDED | util::PHASE_FAILED
                );
                prop_assert_eq!(m.phase != Phase::Other, terminal);
                prop_assert_eq!(
                    {
                        let mut t = Table::default();
                        t.add_pod(m.clone());
                        t.all_rows().next().is_none()
                    },
                    target_node_name(&pod).is_none() || (terminal && deleting)
                );
                for mr in [0u64, 5, 100] {
                    let mr = Duration::from_secs(mr);
                    prop_assert_eq!(
                        util::available_at_of(m.ready, mr),
                        util::available_at(&pod, mr)
                    );
                    for now in [0, 5, 10, 30, 200] {
                        prop_assert_eq!(
                            m.is_available(mr, t(now)),
                            util::is_pod_available(&pod, mr, t(now))
                        );
                    }
                }
                for h in ["", "h1"] {
                    for g in [None, Some(1i64), Some(2)] {
                        let text = g.map(|g| g.to_string());
                        prop_assert_eq!(
                            m.is_updated(h, text.as_deref()),
                            is_pod_updated(&pod, h, g)
                        );
                    }
                }
                Ok(())
            },
        )
        .unwrap();
    }

    #[test]
    fn rolling_update_respects_max_unavailable() {
        let d = ds(json!({"containers": [{"name": "c", "image": "v2"}]}));
        let hash = template_hash(&d.spec.as_ref().unwrap().template, None);
        let mut d2 = d.clone();
        d2.metadata.generation = Some(2);
        let old_lbl = json!({"controller-revision-hash": "old", "pod-template-generation": "1"});
        let nodes: Vec<Node> = ["n1", "n2", "n3"]
            .iter()
            .map(|n| node(n, json!({}), json!({})))
            .collect();
        let nrefs: Vec<&Node> = nodes.iter().collect();
        let pods: Vec<Pod> = ["n1", "n2", "n3"]
            .iter()
            .map(|n| {
                dpod(
                    &format!("ds-{n}"),
                    n,
                    "Running",
                    true,
                    old_lbl.clone(),
                    "2026-01-01T00:00:00Z",
                )
            })
            .collect();
        let prefs: Vec<&Pod> = pods.iter().collect();
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        assert_eq!(
            rolling_update_deletions(
                &d2,
                &Table::build(&place(&d2, &nrefs), &members(&prefs)),
                &hash,
                now
            ),
            vec!["ds-n1"]
        );
        // one new pod not yet ready: no further deletions
        let new_lbl = json!({"controller-revision-hash": hash});
        let mut pods2 = pods.clone();
        pods2[0] = dpod(
            "ds-new",
            "n1",
            "Running",
            false,
            new_lbl,
            "2026-01-01T00:09:00Z",
        );
        let prefs2: Vec<&Pod> = pods2.iter().collect();
        assert!(
            rolling_update_deletions(
                &d2,
                &Table::build(&place(&d2, &nrefs), &members(&prefs2)),
                &hash,
                now
            )
            .is_empty()
        );
    }

    /// A settling looks only at the rows that changed since the last one, and at every row
    /// again once a Ready pod may have become available: a pod that becomes available by time
    /// alone is set apart at the first settling after its `minReadySeconds`, one that changes is
    /// set apart at the next.
    #[test]
    fn settling_looks_again_at_changed_rows_and_at_pods_made_available_by_time() {
        let t = |s: i64| Timestamp::from_second(1_767_225_600 + s).unwrap();
        let mut d = ds(json!({"containers": [{"name": "c", "image": "v1"}]}));
        d.spec.as_mut().unwrap().min_ready_seconds = Some(5);
        let hash = template_hash(&d.spec.as_ref().unwrap().template, None);
        let by = Settling::of(&d, &hash);
        let member = |name: &str, node: &str, ready: Option<(bool, Option<Timestamp>)>| Member {
            name: name.into(),
            node: Some(node.into()),
            bound: true,
            created: Some(t(0)),
            deleting: false,
            phase: Phase::Other,
            ready,
            hash: Some(hash.clone()),
            generation: Some("1".into()),
        };
        let mut table = Table::default();
        for n in ["n1", "n2", "n3"] {
            table.set_node(n, Some((true, true)));
        }
        table.add_pod(member("a", "n1", Some((true, Some(t(0))))));
        table.add_pod(member("b", "n2", Some((false, Some(t(0))))));
        table.settle(&by, t(0));
        assert!(table.settled.is_empty(), "nothing available yet");
        table.settle(&by, t(4));
        assert!(table.settled.is_empty());
        // n1's pod is available after 5 s with nothing changed.
        table.settle(&by, t(6));
        assert_eq!(table.settled.keys().collect::<Vec<_>>(), ["n1"]);
        // n2's pod turns Ready at 6 s: available after 11 s.
        let old = member("b", "n2", Some((false, Some(t(0)))));
        table.remove_pod(&old);
        table.add_pod(member("b", "n2", Some((true, Some(t(6))))));
        table.settle(&by, t(7));
        assert_eq!(table.settled.len(), 1);
        table.settle(&by, t(12));
        assert_eq!(table.settled.keys().collect::<Vec<_>>(), ["n1", "n2"]);
        // n3 gets a pod available long ago: set apart at the next settling.
        table.add_pod(member("c", "n3", Some((true, Some(t(-60))))));
        table.settle(&by, t(12));
        assert_eq!(table.settled.len(), 3);
        assert!(table.rows.is_empty() && table.dirty.is_empty());
    }

    /// Setting settled rows apart changes no decision: under any sequence of node and pod
    /// changes and settlings (under the DaemonSet's own hash and minReadySeconds or others, at
    /// instants before and after the one decided at), every decision over the kept table is the
    /// decision over the same rows built from scratch.
    #[test]
    fn settled_rows_change_no_decision() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};

        #[derive(Clone, Debug)]
        enum Op {
            Node(u8, u8),
            Pod {
                i: u8,
                node: u8,
                phase: u8,
                deleting: bool,
                ready: u8,
                hash: u8,
            },
            RemovePod(u8),
            ClearNodes,
            Settle {
                own: u8,
                at: u8,
            },
            Decide(u8),
        }
        let op = prop_oneof![
            2 => (0u8..6, 0u8..4).prop_map(|(j, p)| Op::Node(j, p)),
            4 => (0u8..8, 0u8..6, 0u8..3, proptest::bool::weighted(0.2), 0u8..4, 0u8..3)
                .prop_map(|(i, node, phase, deleting, ready, hash)| Op::Pod { i, node, phase, deleting, ready, hash }),
            1 => (0u8..8).prop_map(Op::RemovePod),
            1 => Just(Op::ClearNodes),
            3 => (0u8..4, 0u8..4).prop_map(|(own, at)| Op::Settle { own, at }),
            3 => (0u8..4).prop_map(Op::Decide),
        ];
        let case = (
            proptest::collection::vec(op, 1..40),
            prop_oneof![Just(json!(1)), Just(json!(2)), Just(json!("50%"))],
            prop_oneof![Just(0), Just(5)],
        );
        TestRunner::new(Config {
            cases: 400,
            ..Config::default()
        })
        .run(&case, |(ops, max_unavailable, min_ready)| {
            let t = |s: i64| Timestamp::from_second(1_767_225_600 + s).unwrap();
            let mut d = ds(json!({"containers": [{"name": "c", "image": "v2"}]}));
            d.metadata.generation = Some(2);
            let spec = d.spec.as_mut().unwrap();
            spec.min_ready_seconds = Some(min_ready);
            spec.update_strategy = Some(
                serde_json::from_value(json!({"type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": max_unavailable}}))
                .unwrap(),
            );
            let hash = template_hash(&d.spec.as_ref().unwrap().template, None);
            let mut other = d.clone();
            other.spec.as_mut().unwrap().min_ready_seconds = Some(5 - min_ready);
            let mut kept = Table::default();
            let mut nodes: BTreeMap<String, (bool, bool)> = BTreeMap::new();
            let mut pods: BTreeMap<String, Member> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Node(j, p) => {
                        let name = format!("n{j}");
                        let placed = [
                            None,
                            Some((true, true)),
                            Some((false, true)),
                            Some((false, false)),
                        ][usize::from(p)];
                        match placed {
                            Some(pl) => nodes.insert(name.clone(), pl),
                            None => nodes.remove(&name),
                        };
                        kept.set_node(&name, placed);
                    }
                    Op::Pod {
                        i,
                        node,
                        phase,
                        deleting,
                        ready,
                        hash: h,
                    } => {
                        let name = format!("p{i}");
                        if let Some(old) = pods.remove(&name) {
                            kept.remove_pod(&old);
                        }
                        let m = Member {
                            name: name.clone(),
                            node: Some(format!("n{node}")),
                            bound: true,
                            created: Some(t(i64::from(i % 3))),
                            deleting,
                            phase: [Phase::Other, Phase::Failed, Phase::Succeeded]
                                [usize::from(phase)],
                            ready: [
                                None,
                                Some((false, Some(t(0)))),
                                Some((true, Some(t(0)))),
                                Some((true, Some(t(8)))),
                            ][usize::from(ready)],
                            hash: [Some(hash.as_str()), Some("old"), None][usize::from(h)]
                                .map(str::to_string),
                            generation: Some(if h == 2 { "2" } else { "1" }.to_string()),
                        };
                        kept.add_pod(m.clone());
                        pods.insert(name, m);
                    }
                    Op::RemovePod(i) => {
                        if let Some(old) = pods.remove(&format!("p{i}")) {
                            kept.remove_pod(&old);
                        }
                    }
                    Op::ClearNodes => {
                        nodes.clear();
                        kept.clear_nodes();
                    }
                    Op::Settle { own, at } => {
                        let by = match own {
                            0 | 1 => Settling::of(&d, &hash),
                            2 => Settling::of(&d, "other"),
                            _ => Settling::of(&other, &hash),
                        };
                        let now = t(i64::from(at) * 5);
                        kept.settle(&by, now);
                        // Settling looks again only at the rows that changed or may have
                        // become available: none that holds is left behind.
                        prop_assert!(
                            kept.rows.values().all(|slot| !by.holds(slot, now)),
                            "a row that holds was left unsettled"
                        );
                    }
                    Op::Decide(at) => {
                        let now = t(i64::from(at) * 5);
                        let placed: Vec<Placed> = nodes
                            .iter()
                            .map(|(n, (run, cont))| Placed {
                                name: Some(n.clone()),
                                should_run: *run,
                                should_continue: *cont,
                            })
                            .collect();
                        let fresh = Table::build(&placed, pods.values());
                        prop_assert_eq!(&kept, &fresh);
                        let plan = |table: &Table| {
                            manage(
                                &d,
                                table,
                                now,
                                &mut FailedPodsBackoff::default(),
                                &Default::default(),
                            )
                        };
                        prop_assert_eq!(plan(&kept), plan(&fresh));
                        prop_assert_eq!(
                            rolling_update_deletions(&d, &kept, &hash, now),
                            rolling_update_deletions(&d, &fresh, &hash, now)
                        );
                        prop_assert_eq!(
                            compute_status(&d, &kept, &hash, now),
                            compute_status(&d, &fresh, &hash, now)
                        );
                        prop_assert_eq!(
                            next_availability_check(&d, &kept, now),
                            next_availability_check(&d, &fresh, now)
                        );
                    }
                }
            }
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn target_node_and_hash() {
        let p = dpod(
            "x",
            "n7",
            "Pending",
            false,
            json!({}),
            "2026-01-01T00:00:00Z",
        );
        let mut unbound = p.clone();
        unbound.spec.as_mut().unwrap().node_name = None;
        assert_eq!(target_node_name(&unbound).as_deref(), Some("n7"));
        let d = ds(json!({"containers": []}));
        let h = template_hash(&d.spec.as_ref().unwrap().template, None);
        assert!(!h.is_empty() && h.bytes().all(|c| SAFE_ALPHABET.contains(&c)));
        assert_eq!(h, template_hash(&d.spec.as_ref().unwrap().template, None));
        assert_ne!(
            h,
            template_hash(&d.spec.as_ref().unwrap().template, Some(1))
        );
        let t = daemon_pod_template(&d, &h);
        let labels = t.metadata.unwrap().labels.unwrap();
        assert_eq!(labels.get("controller-revision-hash"), Some(&h));
        assert_eq!(
            labels.get("pod-template-generation").map(String::as_str),
            Some("1")
        );
    }
}
