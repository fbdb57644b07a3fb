//! Pure ReplicaSet decisions: how many pods to create or which to delete (upstream
//! `manageReplicas` + `ActivePodsWithRanks`), slow-start batches, expectations, ownership claims and
//! the status the controller writes (`calculateStatus`).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::util::{
    self, PHASE_PENDING, PHASE_RUNNING, PHASE_UNKNOWN, is_pod_active, is_pod_available,
    is_pod_ready, is_pod_terminating_nonterminal,
};

/// Annotation that lets users pick scale-down victims (feature PodDeletionCost, beta, on).
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Upstream `controller.ExpectationsTimeout`: expectations older than this are ignored.
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Upstream `controller.SlowStartInitialBatchSize`.
pub const SLOW_START_INITIAL_BATCH_SIZE: usize = 1;

/// What `manageReplicas` does in one sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Manage {
    /// Enough pods exist (or the diff is zero).
    Nothing,
    /// Create this many pods (already capped at burstReplicas).
    Create(usize),
    /// Delete these pods (namespace-local names), in this order.
    Delete(Vec<String>),
}

/// Upstream `manageReplicas`: compares the active owned pods with `spec.replicas`.
/// `related` are the active-or-not pods of all ReplicaSets of the same owner (for the
/// co-location rank); `now` feeds the logarithmic age comparison.
pub fn manage_replicas(
    desired: i32,
    active: &[&Pod],
    related: &[&Pod],
    burst_replicas: usize,
    now: Timestamp,
) -> Manage {
    let desired = desired.max(0) as usize;
    match active.len().cmp(&desired) {
        Ordering::Equal => Manage::Nothing,
        Ordering::Less => Manage::Create(desired.saturating_sub(active.len()).min(burst_replicas)),
        Ordering::Greater => {
            let diff = active.len().saturating_sub(desired).min(burst_replicas);
            let victims = pods_to_delete(active, related, diff, now);
            Manage::Delete(
                victims
                    .iter()
                    .map(|p| p.metadata.name.clone().unwrap_or_default())
                    .collect(),
            )
        }
    }
}

/// Upstream `getPodsToDelete`: ranks the candidates and returns the first `diff`.
pub fn pods_to_delete<'a>(
    active: &[&'a Pod],
    related: &[&Pod],
    diff: usize,
    now: Timestamp,
) -> Vec<&'a Pod> {
    let mut on_node: BTreeMap<&str, usize> = BTreeMap::new();
    for p in related.iter().filter(|p| is_pod_active(p)) {
        let n = on_node.entry(node_name(p)).or_default();
        *n = n.saturating_add(1);
    }
    let ranked: Vec<(&Pod, usize)> = active
        .iter()
        .map(|p| (*p, on_node.get(node_name(p)).copied().unwrap_or(0)))
        .collect();
    let keys = deletion_keys(&ranked, now);
    let mut order: Vec<usize> = (0..ranked.len()).collect();
    order.sort_by(|&i, &j| keys[i].cmp(&keys[j]));
    order.into_iter().take(diff).map(|i| ranked[i].0).collect()
}

fn node_name(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

fn phase_ordinal(p: &Pod) -> u8 {
    match util::phase(p) {
        PHASE_PENDING => 0,
        PHASE_UNKNOWN => 1,
        PHASE_RUNNING => 2,
        // upstream's map lookup yields 0 for any other phase (e.g. an empty one)
        _ => 0,
    }
}

fn deletion_cost(p: &Pod) -> i32 {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST))
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(0)
}

/// Upstream `logarithmicRankDiff`'s rank of one time: log2 of its age in nanoseconds, `-1` for a
/// time not in the past.
fn log_rank(t: Timestamp, now: Timestamp) -> i64 {
    let d = now.duration_since(t).as_nanos();
    if d > 0 { (d as f64).log2() as i64 } else { -1 }
}

/// The position of one time in upstream's "zero first, then by log-scale age, UID within a
/// bucket" comparison: `None` for a zero time (it sorts first), else the bucket and the smallest
/// UID of the candidates with exactly this time. Equal times share a key, so the comparison falls
/// through to the next rule as upstream's `!t1.Equal(t2)` guard does.
type TimeKey = Option<(i64, String)>;

fn time_keys(times: &[(Option<Timestamp>, &str)], now: Timestamp) -> Vec<TimeKey> {
    let mut group_uid: BTreeMap<Timestamp, &str> = BTreeMap::new();
    for (t, uid) in times {
        if let Some(t) = t {
            let e = group_uid.entry(*t).or_insert(uid);
            if *uid < *e {
                *e = uid;
            }
        }
    }
    times
        .iter()
        .map(|(t, _)| t.map(|t| (log_rank(t, now), group_uid[&t].to_string())))
        .collect()
}

/// The deletion rank of one candidate as a sort key: comparing keys is upstream's
/// `ActivePodsWithRanks.Less` (LogarithmicScaleDown and PodDeletionCost on) made a total order.
/// The rules, in order: (1) unassigned < assigned; (2) Pending < Unknown < Running; (3) not Ready
/// < Ready; (4) lower deletion cost first; (5) more co-located related pods first; (6) both Ready:
/// Ready for less time first (log scale); (7) more restarts first; (8) newer first (log scale);
/// then UID and name.
///
/// Why keys: upstream's `Less` is not transitive — two pods with different times in one log2
/// bucket are ordered by UID, while equal times fall through to the later rules, so three pods
/// can form a cycle. Go's sort tolerates that; Rust's sort may panic on it ("user-provided
/// comparison function does not correctly implement a total order"). Within one bucket, klab
/// orders groups of equal times by their smallest UID: the same as upstream for every pair except
/// inside such a cycle, where upstream's own result depends on its sort's internals.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeletionKey {
    assigned: bool,
    phase: u8,
    ready: bool,
    cost: i32,
    colocated: std::cmp::Reverse<usize>,
    ready_time: TimeKey,
    restarts: std::cmp::Reverse<i32>,
    created: TimeKey,
    uid: String,
    name: String,
}

/// Sort keys of the candidates `(pod, related pods on its node)`, computed once for the set.
pub fn deletion_keys(pods: &[(&Pod, usize)], now: Timestamp) -> Vec<DeletionKey> {
    let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
    let uids: Vec<String> = pods.iter().map(|(p, _)| uid(p)).collect();
    // Rule 6 applies only when both are Ready; not-Ready pods never reach it (rule 3).
    let ready_times: Vec<(Option<Timestamp>, &str)> = pods
        .iter()
        .zip(&uids)
        .map(|((p, _), u)| {
            let t = if is_pod_ready(p) {
                util::ready_since(p)
            } else {
                None
            };
            (t, u.as_str())
        })
        .collect();
    let created: Vec<(Option<Timestamp>, &str)> = pods
        .iter()
        .zip(&uids)
        .map(|((p, _), u)| {
            (
                p.metadata.creation_timestamp.as_ref().map(|t| t.0),
                u.as_str(),
            )
        })
        .collect();
    let ready_keys = time_keys(&ready_times, now);
    let created_keys = time_keys(&created, now);
    pods.iter()
        .enumerate()
        .map(|(i, (p, rank))| DeletionKey {
            assigned: !node_name(p).is_empty(),
            phase: phase_ordinal(p),
            ready: is_pod_ready(p),
            cost: deletion_cost(p),
            colocated: std::cmp::Reverse(*rank),
            ready_time: ready_keys[i].clone(),
            restarts: std::cmp::Reverse(util::max_container_restarts(p)),
            created: created_keys[i].clone(),
            uid: uids[i].clone(),
            name: p.metadata.name.clone().unwrap_or_default(),
        })
        .collect()
}

/// Compares two candidates as [`deletion_keys`] ranks them (`Less` = delete first).
pub fn compare_for_deletion(
    a: &Pod,
    rank_a: usize,
    b: &Pod,
    rank_b: usize,
    now: Timestamp,
) -> Ordering {
    let k = deletion_keys(&[(a, rank_a), (b, rank_b)], now);
    k[0].cmp(&k[1])
}

/// Upstream `slowStartBatch` sizes: 1, 2, 4, … until `n` is covered. Creation stops at the first
/// batch with an error (the remaining pods are not attempted and expectations are lowered).
pub fn slow_start_batches(n: usize, initial: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut remaining = n;
    let mut size = remaining.min(initial.max(1));
    while size > 0 {
        out.push(size);
        remaining = remaining.saturating_sub(size);
        size = size.saturating_mul(2).min(remaining);
    }
    out
}

/// Upstream `ControllerExpectations` + `UIDTrackingControllerExpectations` for one ReplicaSet:
/// pods this controller created/deleted whose watch events have not been seen yet. While they are
/// pending the controller does not trust its cache and does not create or delete more.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expectations {
    /// Creations not yet observed.
    pub adds: i64,
    /// Pods (namespace-local names) whose deletion has not been observed.
    pub deletes: BTreeSet<String>,
    /// When the expectations were set; after [`EXPECTATIONS_TIMEOUT`] they are ignored.
    pub set_at: Option<Timestamp>,
}

impl Expectations {
    pub fn expect_creations(n: usize, now: Timestamp) -> Self {
        Expectations {
            adds: n as i64,
            deletes: BTreeSet::new(),
            set_at: Some(now),
        }
    }
    pub fn expect_deletions(names: &[String], now: Timestamp) -> Self {
        Expectations {
            adds: 0,
            deletes: names.iter().cloned().collect(),
            set_at: Some(now),
        }
    }
    pub fn creation_observed(&mut self) {
        self.adds = self.adds.saturating_sub(1);
    }
    pub fn deletion_observed(&mut self, name: &str) {
        self.deletes.remove(name);
    }
    /// When these expectations stop mattering (set time + [`EXPECTATIONS_TIMEOUT`]).
    pub fn expires_at(&self) -> Option<Timestamp> {
        let d = jiff::SignedDuration::try_from(EXPECTATIONS_TIMEOUT).ok()?;
        self.set_at?.checked_add(d).ok()
    }

    /// Upstream `SatisfiedExpectations`: fulfilled, or expired.
    pub fn satisfied(&self, now: Timestamp) -> bool {
        if self.adds <= 0 && self.deletes.is_empty() {
            return true;
        }
        match self.set_at {
            Some(t) => now.duration_since(t).as_secs() >= EXPECTATIONS_TIMEOUT.as_secs() as i64,
            None => true,
        }
    }
}

/// What a controller does with an object it might own (upstream `ControllerRefManager.ClaimObject`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Owned by us and matching: ours.
    Owned,
    /// Orphan matching our selector: adopt (add our controllerRef), then ours.
    Adopt,
    /// Owned by us but no longer matching: release (remove our controllerRef).
    Release,
    /// Not ours.
    Ignore,
}

/// The claim rule. `owner_deleting`: the owner has a deletionTimestamp (no adoption/release then).
pub fn claim(
    owner_uid: &str,
    owner_deleting: bool,
    selector: &LabelSelector,
    obj: &ObjectMeta,
) -> Claim {
    let matches = util::selector_matches(selector, util::labels(obj));
    match util::controller_ref(obj) {
        Some(r) if r.uid == owner_uid => {
            if matches {
                Claim::Owned
            } else if owner_deleting {
                Claim::Ignore
            } else {
                Claim::Release
            }
        }
        Some(_) => Claim::Ignore,
        None => {
            if owner_deleting || !matches || obj.deletion_timestamp.is_some() {
                Claim::Ignore
            } else {
                Claim::Adopt
            }
        }
    }
}

/// Feature gates that change the ReplicaSet status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatusGates {
    /// `DeploymentReplicaSetTerminatingReplicas` (alpha/off in v1.33, beta/on in v1.35).
    pub terminating_replicas: bool,
}

/// What a sync derives from one version of one candidate pod: its claim and what the status
/// counts of it. A function of the pod and of the set's UID, deletion, selector and template
/// labels only (not of time), so a sync may keep it for as long as the pod version and those
/// stay the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodFacts {
    pub claim: Claim,
    /// Not terminal and not being deleted (`controller.IsPodActive`).
    pub active: bool,
    /// Being deleted in a non-terminal phase (`controller.IsPodTerminating`).
    pub terminating: bool,
    /// Carries every label of the set's pod template.
    pub fully_labeled: bool,
    pub ready: bool,
}

/// The [`PodFacts`] of `pod` for a set with UID `owner_uid`.
pub fn pod_facts(
    owner_uid: &str,
    owner_deleting: bool,
    selector: &LabelSelector,
    template_labels: &BTreeMap<String, String>,
    pod: &Pod,
) -> PodFacts {
    let l = util::labels(&pod.metadata);
    PodFacts {
        claim: claim(owner_uid, owner_deleting, selector, &pod.metadata),
        active: is_pod_active(pod),
        terminating: is_pod_terminating_nonterminal(pod),
        fully_labeled: template_labels.iter().all(|(k, v)| l.get(k) == Some(v)),
        ready: is_pod_ready(pod),
    }
}

/// The labels of a set's pod template (what `fullyLabeledReplicas` counts against).
pub fn template_labels(rs: &ReplicaSet) -> BTreeMap<String, String> {
    rs.spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}

/// Upstream `calculateStatus` over the pods the set claimed, each with its [`PodFacts`]: the
/// active ones are counted (available: Ready for `minReadySeconds` by `now`), the ones being
/// deleted in a non-terminal phase are reported as `terminatingReplicas` (only with the gate).
pub fn calculate_status(
    rs: &ReplicaSet,
    claimed: &[(&Pod, PodFacts)],
    now: Timestamp,
    gates: StatusGates,
) -> ReplicaSetStatus {
    let min_ready = min_ready(rs);
    let mut replicas = 0i32;
    let mut fully_labeled = 0i32;
    let mut ready = 0i32;
    let mut available = 0i32;
    let mut terminating = 0i32;
    for (pod, facts) in claimed {
        if facts.terminating {
            terminating = terminating.saturating_add(1);
        }
        if !facts.active {
            continue;
        }
        replicas = replicas.saturating_add(1);
        if facts.fully_labeled {
            fully_labeled = fully_labeled.saturating_add(1);
        }
        if facts.ready {
            ready = ready.saturating_add(1);
            // A Ready pod is available at once without minReadySeconds.
            if min_ready.is_zero() || is_pod_available(pod, min_ready, now) {
                available = available.saturating_add(1);
            }
        }
    }
    let old = rs.status.clone().unwrap_or_default();
    ReplicaSetStatus {
        replicas,
        fully_labeled_replicas: util::omit_zero(fully_labeled),
        ready_replicas: util::omit_zero(ready),
        available_replicas: util::omit_zero(available),
        observed_generation: rs.metadata.generation,
        terminating_replicas: gates.terminating_replicas.then_some(terminating),
        conditions: old.conditions,
    }
}

/// The set's `minReadySeconds` (negative as zero).
pub fn min_ready(rs: &ReplicaSet) -> Duration {
    util::min_ready(rs.spec.as_ref().and_then(|s| s.min_ready_seconds))
}

/// When the controller must look again for pods becoming available (minReadySeconds): the
/// earliest instant a Ready-but-not-yet-available pod turns available.
pub fn next_availability_check(
    active: &[&Pod],
    min_ready: Duration,
    now: Timestamp,
) -> Option<Timestamp> {
    if min_ready.is_zero() {
        return None;
    }
    active
        .iter()
        .filter(|p| is_pod_ready(p) && !is_pod_available(p, min_ready, now))
        .filter_map(|p| util::available_at(p, min_ready))
        .min()
}

/// Status values that differ from what is stored (upstream skips the write when equal and
/// `observedGeneration` is current).
pub fn status_changed(old: Option<&ReplicaSetStatus>, new: &ReplicaSetStatus) -> bool {
    let norm = |s: &ReplicaSetStatus| {
        (
            s.replicas,
            s.fully_labeled_replicas.unwrap_or(0),
            s.ready_replicas.unwrap_or(0),
            s.available_replicas.unwrap_or(0),
            s.observed_generation.unwrap_or(0),
            s.terminating_replicas,
        )
    };
    match old {
        None => true,
        Some(o) => norm(o) != norm(new),
    }
}

/// Whether a sync could come out differently after an update of one of the set's own pods:
/// whether the update touched anything a sync reads from a pod that is neither created nor
/// deleted — its labels and owners (claiming), its deletion and phase (active, terminating), and
/// its Ready condition with its transition time (ready, available, the next availability check).
/// The ranking of victims reads more (node, restarts, deletion cost), but only in a sync that
/// deletes, and what makes a sync delete (a scale-down, a surplus pod observed) is never such an
/// update. Upstream enqueues the set on every update and the sync finds nothing to do; klab
/// skips the sync instead: a 2 000-pod set read all its pods for each of the three status
/// updates of each of its pods.
pub fn update_concerns_owner(old: &Pod, new: &Pod) -> bool {
    old.metadata.labels != new.metadata.labels
        || old.metadata.owner_references != new.metadata.owner_references
        || old.metadata.deletion_timestamp != new.metadata.deletion_timestamp
        || util::phase(old) != util::phase(new)
        || util::ready_condition(old) != util::ready_condition(new)
}

#[cfg(test)]
mod tests {
    use super::super::util::testutil::*;
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSetSpec;
    use k8s_openapi::api::core::v1::PodTemplateSpec;

    fn names(v: &[&Pod]) -> Vec<String> {
        v.iter().map(|p| p.metadata.name.clone().unwrap()).collect()
    }

    #[test]
    fn which_pod_updates_concern_the_owner() {
        let base = pod("a")
            .label("app", "x")
            .owned_by("ReplicaSet", "rs", "u1");
        let pending = base.clone().build();
        let cases: Vec<(&str, Pod, bool)> = vec![
            ("nothing", base.clone().build(), false),
            ("bound", base.clone().node("n1").build(), false),
            ("restarted", base.clone().restarts(2).build(), false),
            ("deletion cost", base.clone().cost("5").build(), false),
            ("running", base.clone().phase("Running").build(), true),
            ("ready", base.clone().running_ready(10).build(), true),
            ("label", base.clone().label("app", "y").build(), true),
            (
                "extra label",
                base.clone().label("tier", "web").build(),
                true,
            ),
            (
                "owner",
                base.clone().owned_by("ReplicaSet", "rs", "u2").build(),
                true,
            ),
            ("deleting", base.clone().deleting(5).build(), true),
        ];
        for (what, new, want) in cases {
            assert_eq!(update_concerns_owner(&pending, &new), want, "{what}");
        }
        // The Ready condition's transition time alone (availability with minReadySeconds).
        let r1 = base.clone().running_ready(10).build();
        let r2 = base.clone().running_ready(20).build();
        assert!(update_concerns_owner(&r1, &r2));
        assert!(!update_concerns_owner(&r1, &r1.clone()));
    }

    #[test]
    fn manage_replicas_table() {
        let now = ts(1000);
        let a = pod("a").node("n1").running_ready(10).build();
        let b = pod("b").node("n2").running_ready(10).build();
        let c = pod("c")
            .node("n1")
            .running_ready(10)
            .ready(false, 500)
            .build();
        let active = [&a, &b, &c];
        let cases: Vec<(i32, usize, Manage)> = vec![
            (3, 500, Manage::Nothing),
            (5, 500, Manage::Create(2)),
            (700, 500, Manage::Create(500)),
            (2, 500, Manage::Delete(vec!["c".into()])),
            (
                0,
                500,
                Manage::Delete(vec!["c".into(), "a".into(), "b".into()]),
            ),
            (0, 1, Manage::Delete(vec!["c".into()])),
            (
                -1,
                500,
                Manage::Delete(vec!["c".into(), "a".into(), "b".into()]),
            ),
        ];
        for (desired, burst, want) in cases {
            assert_eq!(
                manage_replicas(desired, &active, &active, burst, now),
                want,
                "desired {desired}"
            );
        }
    }

    /// One row per ranking rule: `first` must be deleted before `second`.
    #[test]
    fn ranking_rules() {
        let now = ts(100_000);
        let cases: Vec<(&str, Pod, Pod)> = vec![
            (
                "unassigned first",
                pod("x").build(),
                pod("y").node("n1").build(),
            ),
            (
                "pending before unknown",
                pod("x").node("n").build(),
                pod("y").node("n").phase(PHASE_UNKNOWN).build(),
            ),
            (
                "unknown before running",
                pod("x").node("n").phase(PHASE_UNKNOWN).build(),
                pod("y").node("n").phase(PHASE_RUNNING).build(),
            ),
            (
                "not ready before ready",
                pod("x")
                    .node("n")
                    .phase(PHASE_RUNNING)
                    .ready(false, 5)
                    .build(),
                pod("y").node("n").running_ready(5).build(),
            ),
            (
                "lower cost first",
                pod("x").node("n").running_ready(5).cost("-5").build(),
                pod("y").node("n").running_ready(5).build(),
            ),
            (
                "invalid cost is 0",
                pod("x").node("n").running_ready(5).cost("zz").build(),
                pod("y").node("n").running_ready(5).cost("1").build(),
            ),
            (
                "ready shorter first",
                pod("x").node("n").running_ready(99_000).build(),
                pod("y").node("n").running_ready(10).build(),
            ),
            (
                "more restarts first",
                pod("x").node("n").running_ready(5).restarts(3).build(),
                pod("y").node("n").running_ready(5).build(),
            ),
            (
                "newer first",
                pod("x").node("n").running_ready(5).created(90_000).build(),
                pod("y").node("n").running_ready(5).created(10).build(),
            ),
            // same log2 bucket of age: UID order decides
            (
                "same bucket uid",
                pod("a").node("n").created(99_000).build(),
                pod("b").node("n").created(99_001).build(),
            ),
        ];
        for (name, first, second) in cases {
            assert_eq!(
                compare_for_deletion(&first, 0, &second, 0, now),
                Ordering::Less,
                "{name}"
            );
            assert_eq!(
                compare_for_deletion(&second, 0, &first, 0, now),
                Ordering::Greater,
                "{name} (reversed)"
            );
        }
        // co-location: the pod on the crowded node goes first
        let x = pod("x").node("n1").running_ready(5).build();
        let y = pod("y").node("n2").running_ready(5).build();
        assert_eq!(compare_for_deletion(&x, 2, &y, 1, now), Ordering::Less);
    }

    /// The three pods of upstream's comparison cycle (x and y Ready at the same time, z in the same
    /// log2 bucket at another time): a < c < b < a by upstream's `Less`. Sorting them (and a
    /// scale-down from 300 such pods to 100) must not panic, and the order is total.
    #[test]
    fn ranking_is_a_total_order_even_where_upstream_cycles() {
        let now = ts(100_000);
        let a = pod("a").node("n").running_ready(50_000).build();
        let b = pod("c").node("n").running_ready(50_000).restarts(5).build();
        let c = pod("b").node("n").running_ready(50_001).build();
        let got = pods_to_delete(&[&a, &b, &c], &[], 3, now);
        assert_eq!(names(&got), vec!["c", "a", "b"]);
        let many: Vec<Pod> = (0..300)
            .map(|i| {
                pod(&format!("p{i:03}"))
                    .node(&format!("n{}", i % 7))
                    .running_ready(50_000 + (i % 3) as i64)
                    .restarts(i % 4)
                    .created((i % 5) as i64)
                    .build()
            })
            .collect();
        let refs: Vec<&Pod> = many.iter().collect();
        assert_eq!(pods_to_delete(&refs, &refs, 200, now).len(), 200);
    }

    mod total_order {
        use super::*;
        use proptest::prelude::*;

        /// Pods drawn from small value sets, so that equal timestamps, equal UIDs and equal
        /// everything else are common.
        fn arb_pod() -> impl Strategy<Value = (Pod, usize)> {
            (
                0..3usize,
                0..4u8,
                prop::option::of((any::<bool>(), 0..4i64)),
                0..3i32,
                0..4i64,
                0..3u8,
                0..3usize,
                prop::option::of(-1..2i32),
            )
                .prop_map(
                    |(node, phase, ready, restarts, created, uid, rank, cost)| {
                        let mut p = pod(&format!("p{uid}{node}{phase}{restarts}"));
                        if node > 0 {
                            p = p.node(&format!("n{node}"));
                        }
                        p = p.phase(["Pending", "Unknown", "Running", "Succeeded"][phase as usize]);
                        if let Some((r, t)) = ready {
                            // times in two log2 buckets of age, several equal
                            p = p.ready(r, 60_000 + [0, 1, 40_000, 40_001][t as usize]);
                        }
                        if let Some(c) = cost {
                            p = p.cost(&c.to_string());
                        }
                        let mut p = p.restarts(restarts).created(created * 9_000).build();
                        p.metadata.uid = Some(format!("uid-{uid}"));
                        (p, rank)
                    },
                )
        }

        proptest! {
            #[test]
            fn compare_for_deletion_is_a_total_order(
                pods in prop::collection::vec(arb_pod(), 1..12)
            ) {
                let now = ts(100_000);
                let keyed: Vec<(&Pod, usize)> = pods.iter().map(|(p, r)| (p, *r)).collect();
                let keys = deletion_keys(&keyed, now);
                for i in 0..keys.len() {
                    for j in 0..keys.len() {
                        // antisymmetric, and equal only for identical candidates
                        prop_assert_eq!(keys[i].cmp(&keys[j]), keys[j].cmp(&keys[i]).reverse());
                        if keys[i] == keys[j] {
                            prop_assert_eq!(&pods[i].0.metadata.name, &pods[j].0.metadata.name);
                        }
                        for k in 0..keys.len() {
                            if keys[i] < keys[j] && keys[j] < keys[k] {
                                prop_assert!(keys[i] < keys[k]);
                            }
                        }
                    }
                }
                // Sorting never panics, and any input order gives the same ranking.
                let refs: Vec<&Pod> = pods.iter().map(|(p, _)| p).collect();
                let mut reversed = refs.clone();
                reversed.reverse();
                let names = |v: Vec<&Pod>| -> Vec<String> {
                    v.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect()
                };
                prop_assert_eq!(
                    names(pods_to_delete(&refs, &refs, refs.len(), now)),
                    names(pods_to_delete(&reversed, &reversed, refs.len(), now))
                );
            }
        }
    }

    #[test]
    fn pods_to_delete_counts_related_pods_on_the_same_node() {
        let now = ts(1000);
        let a = pod("a").node("n1").running_ready(10).build();
        let b = pod("b").node("n2").running_ready(10).build();
        // another ReplicaSet of the same Deployment has a pod on n2
        let other = pod("o").node("n2").running_ready(10).build();
        let dead = pod("d").node("n2").running_ready(10).deleting(20).build();
        let got = pods_to_delete(&[&a, &b], &[&a, &b, &other, &dead], 1, now);
        assert_eq!(names(&got), vec!["b"]);
    }

    #[test]
    fn cp57_not_ready_pod_on_dead_node_is_deleted_first() {
        // p1 on the failed node is Running but Ready=False since t=55; p2/p3 healthy.
        let now = ts(120);
        let p1 = pod("p1")
            .node("n1")
            .running_ready(0)
            .ready(false, 55)
            .build();
        let p2 = pod("p2").node("n2").running_ready(0).build();
        let p3 = pod("p3").node("n3").running_ready(0).build();
        let all = [&p2, &p1, &p3];
        assert_eq!(
            manage_replicas(2, &all, &all, 500, now),
            Manage::Delete(vec!["p1".into()])
        );
    }

    #[test]
    fn slow_start() {
        assert_eq!(slow_start_batches(0, 1), Vec::<usize>::new());
        assert_eq!(slow_start_batches(1, 1), vec![1]);
        assert_eq!(slow_start_batches(10, 1), vec![1, 2, 4, 3]);
        assert_eq!(
            slow_start_batches(500, 1),
            vec![1, 2, 4, 8, 16, 32, 64, 128, 245]
        );
    }

    #[test]
    fn expectations() {
        let t0 = ts(0);
        let mut e = Expectations::expect_creations(2, t0);
        assert!(!e.satisfied(t0));
        e.creation_observed();
        assert!(!e.satisfied(ts(10)));
        e.creation_observed();
        assert!(e.satisfied(ts(10)));
        let mut d = Expectations::expect_deletions(&["a".into()], t0);
        assert!(!d.satisfied(ts(299)));
        assert!(d.satisfied(ts(300)), "expired after 5 minutes");
        assert_eq!(d.expires_at(), Some(ts(300)));
        d.deletion_observed("a");
        assert!(d.satisfied(ts(1)));
        assert!(Expectations::default().satisfied(t0));
    }

    #[test]
    fn claim_table() {
        let sel = LabelSelector {
            match_labels: Some([("app".into(), "web".into())].into()),
            ..Default::default()
        };
        let mine = pod("a").owned_by("ReplicaSet", "rs", "u1").build().metadata;
        let theirs = pod("a")
            .owned_by("ReplicaSet", "rs2", "u2")
            .build()
            .metadata;
        let orphan = pod("a").build().metadata;
        let orphan_other = pod("a").label("app", "db").build().metadata;
        let mine_other = pod("a")
            .label("app", "db")
            .owned_by("ReplicaSet", "rs", "u1")
            .build()
            .metadata;
        let orphan_deleting = pod("a").deleting(1).build().metadata;
        let cases = [
            (&mine, false, Claim::Owned),
            (&theirs, false, Claim::Ignore),
            (&orphan, false, Claim::Adopt),
            (&orphan, true, Claim::Ignore),
            (&orphan_other, false, Claim::Ignore),
            (&mine_other, false, Claim::Release),
            (&mine_other, true, Claim::Ignore),
            (&orphan_deleting, false, Claim::Ignore),
        ];
        for (i, (m, deleting, want)) in cases.iter().enumerate() {
            assert_eq!(claim("u1", *deleting, &sel, m), *want, "case {i}");
        }
    }

    fn rs(replicas: i32, min_ready: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some("rs".into()),
                generation: Some(3),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                min_ready_seconds: Some(min_ready),
                selector: LabelSelector::default(),
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(
                            [("app".into(), "web".into()), ("tier".into(), "fe".into())].into(),
                        ),
                        ..Default::default()
                    }),
                    spec: None,
                }),
            }),
            status: None,
        }
    }

    /// The pods with their facts for `set`, as a sync claims them.
    fn claimed<'a>(set: &ReplicaSet, pods: &[&'a Pod]) -> Vec<(&'a Pod, PodFacts)> {
        let template = template_labels(set);
        let selector = set.spec.as_ref().unwrap().selector.clone();
        pods.iter()
            .map(|p| (*p, pod_facts("uid", false, &selector, &template, p)))
            .collect()
    }

    #[test]
    fn status_counts() {
        let now = ts(100);
        let set = rs(3, 10);
        let a = pod("a").label("tier", "fe").running_ready(50).build();
        let b = pod("b").running_ready(95).build();
        let c = pod("c").phase(PHASE_RUNNING).ready(false, 55).build();
        let s = calculate_status(
            &set,
            &claimed(&set, &[&a, &b, &c]),
            now,
            StatusGates::default(),
        );
        assert_eq!(s.replicas, 3);
        assert_eq!(s.fully_labeled_replicas, Some(1));
        assert_eq!(s.ready_replicas, Some(2));
        assert_eq!(
            s.available_replicas,
            Some(1),
            "b is Ready for only 5s of minReadySeconds 10"
        );
        assert_eq!(s.observed_generation, Some(3));
        assert_eq!(s.terminating_replicas, None, "gate off in v1.33");
        // Without minReadySeconds every Ready pod is available.
        let s = calculate_status(
            &rs(3, 0),
            &claimed(&set, &[&a, &b, &c]),
            now,
            StatusGates::default(),
        );
        assert_eq!(s.available_replicas, Some(2));
        assert_eq!(
            next_availability_check(&[&a, &b, &c], Duration::from_secs(10), now),
            Some(ts(105) + jiff::SignedDuration::from_millis(1))
        );
        assert_eq!(next_availability_check(&[&a], Duration::ZERO, now), None);
    }

    #[test]
    fn terminating_count() {
        // Being deleted: counted as terminating (with the gate), not as a replica; a failed pod
        // being deleted is neither.
        let set = rs(3, 10);
        let a = pod("a").running_ready(1).deleting(5).build();
        let b = pod("b").phase(util::PHASE_FAILED).deleting(5).build();
        let c = pod("c").running_ready(1).build();
        let gates = StatusGates {
            terminating_replicas: true,
        };
        let s = calculate_status(&set, &claimed(&set, &[&a, &b, &c]), ts(100), gates);
        assert_eq!(
            (s.replicas, s.ready_replicas, s.terminating_replicas),
            (1, Some(1), Some(1))
        );
        let s = calculate_status(&set, &[], ts(100), gates);
        assert_eq!((s.replicas, s.terminating_replicas), (0, Some(0)));
    }
}

#[cfg(test)]
mod extreme_tests {
    use super::*;

    /// Replica counts at the ends of i32 and batch sizes at the end of usize: no overflow.
    #[test]
    fn extreme_counts_saturate() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(
            manage_replicas(i32::MAX, &[], &[], 500, now),
            Manage::Create(500)
        );
        assert_eq!(
            manage_replicas(i32::MIN, &[], &[], 500, now),
            Manage::Nothing
        );
        assert_eq!(slow_start_batches(usize::MAX, usize::MAX), vec![usize::MAX]);
        let b = slow_start_batches(usize::MAX, 1);
        assert_eq!(
            b.iter().fold(0usize, |a, x| a.saturating_add(*x)),
            usize::MAX
        );
        assert_eq!(b.len(), 64);
        let mut x = Expectations {
            adds: i64::MIN,
            ..Default::default()
        };
        x.creation_observed();
        assert_eq!(x.adds, i64::MIN);
    }
}
