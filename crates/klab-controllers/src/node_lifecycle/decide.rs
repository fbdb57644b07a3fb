//! Pure decisions of the node lifecycle controller: health evaluation of one node
//! (`tryUpdateNodeHealth`, spec §1.4), the NoSchedule condition taints (§1.6), the NoExecute
//! reaction of a pass (§1.5, §1.7), taint-list edits and the pod Ready=False update
//! (`MarkPodsNotReady`). Everything takes `now` and returns a decision; the shell does the I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus, Pod, PodCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use klab_api::clock::truncate_to_second;
use klab_api::names;

use super::config::NodeLifecycleConfig;

/// `ts + d`, saturating at the end of representable time.
pub fn add(ts: Timestamp, d: Duration) -> Timestamp {
    let d = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
    ts.checked_add(d).unwrap_or(Timestamp::MAX)
}

/// What the controller remembers of a Lease: only its renewTime is ever compared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseSnapshot {
    pub renew_time: Option<Timestamp>,
}

impl LeaseSnapshot {
    pub fn of(lease: &Lease) -> Self {
        LeaseSnapshot {
            renew_time: lease
                .spec
                .as_ref()
                .and_then(|s| s.renew_time.as_ref())
                .map(|t| t.0),
        }
    }
}

/// The per-node health record (§1.3). Timestamps come from the controller's clock.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthRecord {
    pub probe_timestamp: Timestamp,
    pub ready_transition_timestamp: Timestamp,
    /// The Ready condition of the status last saved (upstream keeps the whole status, and reads
    /// only this condition of it).
    pub ready: Option<NodeCondition>,
    pub lease: Option<LeaseSnapshot>,
}

/// The outcome of evaluating one node.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthEvaluation {
    /// The grace period that applied (startup grace without a Ready condition).
    pub grace: Duration,
    /// The Ready condition as observed before any write of this pass (synthetic Unknown when absent).
    pub observed: NodeCondition,
    /// The Ready condition after this pass (None when the node has none and is not stale).
    pub current: Option<NodeCondition>,
    /// The whole node status to write, when the node is stale and its Ready condition changed.
    pub write: Option<NodeStatus>,
    /// The record to store now (also when the write then fails).
    pub record: HealthRecord,
}

/// The node condition of the given type.
pub fn node_condition<'a>(
    status: Option<&'a NodeStatus>,
    type_: &str,
) -> Option<&'a NodeCondition> {
    status?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The node's Ready condition.
pub fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    node_condition(node.status.as_ref(), names::COND_READY)
}

fn creation(node: &Node) -> Timestamp {
    // A node without creationTimestamp behaves like Go's zero time: always long ago.
    node.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(Timestamp::MIN)
}

/// The condition types NLC forces to Unknown, in upstream order. NetworkUnavailable and custom
/// conditions are never touched.
pub const CONDITIONS_FORCED_UNKNOWN: [&str; 4] = [
    names::COND_READY,
    names::COND_MEMORY_PRESSURE,
    names::COND_DISK_PRESSURE,
    names::COND_PID_PRESSURE,
];

/// `tryUpdateNodeHealth` (§1.4) without the I/O: evaluates `node` against its record `rec`, the
/// node's Lease from the cache, and `now` on the controller's clock.
pub fn evaluate_health(
    rec: Option<&HealthRecord>,
    node: &Node,
    lease: Option<&Lease>,
    now: Timestamp,
    cfg: &NodeLifecycleConfig,
) -> HealthEvaluation {
    let current = ready_condition(node).cloned();
    let created = creation(node);

    // Step 2: observed condition, grace, and the record as it stands before the branches.
    let (observed, grace, mut record) = match &current {
        None => {
            let observed = NodeCondition {
                type_: names::COND_READY.into(),
                status: "Unknown".into(),
                last_heartbeat_time: node.metadata.creation_timestamp.clone(),
                last_transition_time: node.metadata.creation_timestamp.clone(),
                ..Default::default()
            };
            let record = match rec {
                Some(r) => HealthRecord {
                    ready: None,
                    ..r.clone()
                },
                None => HealthRecord {
                    probe_timestamp: created,
                    ready_transition_timestamp: created,
                    ready: None,
                    lease: None,
                },
            };
            (observed, cfg.node_startup_grace_period, Some(record))
        }
        Some(c) => (c.clone(), cfg.node_monitor_grace_period, rec.cloned()),
    };

    // Step 3: what the record says about Ready and the Lease.
    let saved = record.as_ref().and_then(|r| r.ready.clone());
    let saved_lease = record.as_ref().and_then(|r| r.lease.clone());
    let fresh = |transition: Timestamp| HealthRecord {
        probe_timestamp: now,
        ready_transition_timestamp: transition,
        ready: current.clone(),
        lease: None,
    };

    // Step 4: branches (the rebuilt records carry no lease snapshot: upstream quirk).
    let mut record = match (record.take(), &saved, &current) {
        (None, _, _) => fresh(now),
        (Some(_), None, Some(_)) | (Some(_), Some(_), None) => fresh(now),
        (Some(r), Some(s), Some(c)) if s.last_heartbeat_time != c.last_heartbeat_time => {
            let transition = if s.last_transition_time != c.last_transition_time {
                now
            } else {
                r.ready_transition_timestamp
            };
            fresh(transition)
        }
        (Some(r), _, _) => r,
    };

    // Step 5: a Lease renewal (or the first sight of any Lease) refreshes the probe.
    let observed_lease = lease.map(LeaseSnapshot::of);
    if let Some(obs) = &observed_lease {
        let renewed = match &saved_lease {
            None => true,
            Some(saved) => match (saved.renew_time, obs.renew_time) {
                (Some(a), Some(b)) => a < b,
                _ => false,
            },
        };
        if renewed {
            record.lease = Some(obs.clone());
            record.probe_timestamp = now;
        }
    }

    // Step 6: staleness.
    let mut current = current;
    let mut write = None;
    if now > add(record.probe_timestamp, grace) {
        let mut new_status = node.status.clone().unwrap_or_default();
        let conditions = new_status.conditions.get_or_insert_with(Vec::new);
        let stamp = Time(truncate_to_second(now));
        for type_ in CONDITIONS_FORCED_UNKNOWN {
            match conditions.iter_mut().find(|c| c.type_ == type_) {
                None => conditions.push(NodeCondition {
                    type_: type_.into(),
                    status: "Unknown".into(),
                    reason: Some(names::REASON_NODE_STATUS_NEVER_UPDATED.into()),
                    message: Some(names::MSG_KUBELET_NEVER_POSTED.into()),
                    last_heartbeat_time: node.metadata.creation_timestamp.clone(),
                    last_transition_time: Some(stamp.clone()),
                }),
                Some(c) if c.status != "Unknown" => {
                    c.status = "Unknown".into();
                    c.reason = Some(names::REASON_NODE_STATUS_UNKNOWN.into());
                    c.message = Some(names::MSG_KUBELET_STOPPED_POSTING.into());
                    c.last_transition_time = Some(stamp.clone());
                }
                Some(_) => {}
            }
        }
        let new_ready = node_condition(Some(&new_status), names::COND_READY).cloned();
        if new_ready.as_ref() != Some(&observed) {
            current = new_ready;
            write = Some(new_status);
        }
    }
    HealthEvaluation {
        grace,
        observed,
        current,
        write,
        record,
    }
}

/// The record after a successful status write (§1.4 step 6): probe unchanged, transition = now,
/// lease = the Lease observed in this pass.
pub fn record_after_write(
    rec: &HealthRecord,
    written: NodeStatus,
    lease: Option<&Lease>,
    now: Timestamp,
) -> HealthRecord {
    HealthRecord {
        probe_timestamp: rec.probe_timestamp,
        ready_transition_timestamp: now,
        ready: node_condition(Some(&written), names::COND_READY).cloned(),
        lease: lease.map(LeaseSnapshot::of),
    }
}

// ---- taints ----

/// A taint template (key + effect, no value).
pub fn taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        effect: effect.into(),
        value: None,
        time_added: None,
    }
}

/// Whether `taints` has a taint with this key and effect (`TaintExists`).
pub fn has_taint(taints: &[Taint], key: &str, effect: &str) -> bool {
    taints.iter().any(|t| t.key == key && t.effect == effect)
}

/// The node's taints.
pub fn node_taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[])
}

/// Adds `add` (each with `timeAdded = now`, replacing a same key+effect taint in place, or appended)
/// and then removes `remove` (by key+effect): upstream `SwapNodeControllerTaint`. Returns the new
/// list, or None when nothing changed (no API call is then made).
pub fn swap_taints(
    existing: &[Taint],
    add: &[Taint],
    remove: &[Taint],
    now: Timestamp,
) -> Option<Vec<Taint>> {
    let mut out: Vec<Taint> = existing.to_vec();
    let stamp = Time(truncate_to_second(now));
    for a in add {
        let a = Taint {
            time_added: Some(stamp.clone()),
            ..a.clone()
        };
        match out
            .iter_mut()
            .find(|t| t.key == a.key && t.effect == a.effect)
        {
            Some(t) => {
                if *t != a {
                    *t = a;
                }
            }
            None => out.push(a),
        }
    }
    out.retain(|t| {
        !remove
            .iter()
            .any(|r| r.key == t.key && r.effect == t.effect)
    });
    (out != existing).then_some(out)
}

/// The NoSchedule taint key for a node condition (type, status), §1.6.
fn condition_taint_key(type_: &str, status: &str) -> Option<&'static str> {
    match (type_, status) {
        ("Ready", "False") => Some(names::TAINT_NOT_READY),
        ("Ready", "Unknown") => Some(names::TAINT_UNREACHABLE),
        ("MemoryPressure", "True") => Some(names::TAINT_MEMORY_PRESSURE),
        ("DiskPressure", "True") => Some(names::TAINT_DISK_PRESSURE),
        ("NetworkUnavailable", "True") => Some(names::TAINT_NETWORK_UNAVAILABLE),
        ("PIDPressure", "True") => Some(names::TAINT_PID_PRESSURE),
        _ => None,
    }
}

/// Keys whose NoSchedule taints this controller manages.
const MANAGED_NO_SCHEDULE_KEYS: [&str; 7] = [
    names::TAINT_NOT_READY,
    names::TAINT_UNREACHABLE,
    names::TAINT_MEMORY_PRESSURE,
    names::TAINT_DISK_PRESSURE,
    names::TAINT_NETWORK_UNAVAILABLE,
    names::TAINT_PID_PRESSURE,
    names::TAINT_UNSCHEDULABLE,
];

/// The NoSchedule pass (`doNoScheduleTaintingPass`, §1.6) for one node: the taints to add and to
/// remove (empty when in sync).
pub fn no_schedule_taint_diff(node: &Node) -> (Vec<Taint>, Vec<Taint>) {
    let mut desired: Vec<Taint> = Vec::new();
    for c in node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[])
    {
        if let Some(key) = condition_taint_key(&c.type_, &c.status) {
            desired.push(taint(key, names::EFFECT_NO_SCHEDULE));
        }
    }
    if node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
    {
        desired.push(taint(names::TAINT_UNSCHEDULABLE, names::EFFECT_NO_SCHEDULE));
    }
    let managed: Vec<&Taint> = node_taints(node)
        .iter()
        .filter(|t| {
            t.effect == names::EFFECT_NO_SCHEDULE
                && MANAGED_NO_SCHEDULE_KEYS.contains(&t.key.as_str())
        })
        .collect();
    let mut seen = BTreeSet::new();
    let to_add: Vec<Taint> = desired
        .iter()
        .filter(|d| !managed.iter().any(|m| m.key == d.key))
        .filter(|d| seen.insert(d.key.clone()))
        .cloned()
        .collect();
    let to_remove: Vec<Taint> = managed
        .iter()
        .filter(|m| !desired.iter().any(|d| d.key == m.key))
        .map(|m| (*m).clone())
        .collect();
    (to_add, to_remove)
}

/// NLC's reaction to a node's observed Ready status in a monitor pass (§1.5 step 4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoExecuteAction {
    /// Immediately (bypassing the limiter) add `add:NoExecute` and remove `remove:NoExecute`.
    Swap {
        add: &'static str,
        remove: &'static str,
    },
    /// `markNodeForTainting(node, status)`: (re-)enqueue in the zone queue.
    MarkForTainting { status: ReadyStatus },
    /// `markNodeAsReachable`: remove both NoExecute taints and drop the node from its zone queue.
    MarkReachable,
    /// Any other status string: nothing.
    Nothing,
}

/// A Ready status NLC reacts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadyStatus {
    False,
    Unknown,
}

/// `processTaintBaseEviction` decided from the **observed** Ready status (before this pass's write).
pub fn no_execute_action(observed_status: &str, taints: &[Taint]) -> NoExecuteAction {
    match observed_status {
        "False" => {
            if has_taint(taints, names::TAINT_UNREACHABLE, names::EFFECT_NO_EXECUTE) {
                NoExecuteAction::Swap {
                    add: names::TAINT_NOT_READY,
                    remove: names::TAINT_UNREACHABLE,
                }
            } else {
                NoExecuteAction::MarkForTainting {
                    status: ReadyStatus::False,
                }
            }
        }
        "Unknown" => {
            if has_taint(taints, names::TAINT_NOT_READY, names::EFFECT_NO_EXECUTE) {
                NoExecuteAction::Swap {
                    add: names::TAINT_UNREACHABLE,
                    remove: names::TAINT_NOT_READY,
                }
            } else {
                NoExecuteAction::MarkForTainting {
                    status: ReadyStatus::Unknown,
                }
            }
        }
        "True" => NoExecuteAction::MarkReachable,
        _ => NoExecuteAction::Nothing,
    }
}

/// `markNodeForTainting`: whether the node must first be removed from its zone queue (so that it
/// is re-added with a fresh `processAt`) — true while the node lacks the matching NoExecute taint.
pub fn requeue_before_tainting(status: ReadyStatus, taints: &[Taint]) -> bool {
    match status {
        ReadyStatus::False => !has_taint(taints, names::TAINT_NOT_READY, names::EFFECT_NO_EXECUTE),
        ReadyStatus::Unknown => {
            !has_taint(taints, names::TAINT_UNREACHABLE, names::EFFECT_NO_EXECUTE)
        }
    }
}

/// What the tainting pass does with a dequeued node, from its **current** cached state (§1.7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaintingStep {
    /// Node gone: done.
    Done,
    /// No Ready condition: retry in 50 ms.
    Retry,
    /// Swap to this NoExecute taint (add, remove).
    Swap {
        add: &'static str,
        remove: &'static str,
    },
}

/// The processing function of the NoExecute tainting pass for one node.
pub fn tainting_step(node: Option<&Node>) -> TaintingStep {
    let Some(node) = node else {
        return TaintingStep::Done;
    };
    match ready_condition(node).map(|c| c.status.as_str()) {
        None => TaintingStep::Retry,
        Some("False") => TaintingStep::Swap {
            add: names::TAINT_NOT_READY,
            remove: names::TAINT_UNREACHABLE,
        },
        Some("Unknown") => TaintingStep::Swap {
            add: names::TAINT_UNREACHABLE,
            remove: names::TAINT_NOT_READY,
        },
        Some(_) => TaintingStep::Done,
    }
}

/// Pod readiness decisions of §1.5 step 5: `(record NodeNotReady event, run MarkPodsNotReady)`.
pub fn pod_readiness_action(
    observed: &str,
    current: Option<&str>,
    in_retry_set: bool,
) -> (bool, bool) {
    let current_true = current == Some("True");
    if !current_true && observed == "True" {
        (true, true)
    } else if in_retry_set && observed != "True" {
        (false, true)
    } else {
        (false, false)
    }
}

// ---- label reconciliation ----

/// `reconcileNodeLabels` (node update worker, after the NoSchedule pass): the beta os/arch labels
/// follow the GA ones — set when missing, corrected when different; nothing when the GA label is
/// absent. Returns the labels to write (empty = in sync).
pub fn labels_to_reconcile(node: &Node) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(labels) = node.metadata.labels.as_ref() else {
        return out;
    };
    for (primary, secondary) in [
        (names::LABEL_OS, names::LABEL_OS_BETA),
        (names::LABEL_ARCH, names::LABEL_ARCH_BETA),
    ] {
        let Some(value) = labels.get(primary) else {
            continue;
        };
        if labels.get(secondary) != Some(value) {
            out.insert(secondary.to_string(), value.clone());
        }
    }
    out
}

// ---- pod conditions ----

/// The pod condition of the given type.
pub fn pod_condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Upstream `UpdatePodCondition`: sets `cond` into `conditions` (lastTransitionTime = now unless
/// the status is unchanged) and tells whether anything changed.
pub fn update_pod_condition(
    conditions: &mut Vec<PodCondition>,
    mut cond: PodCondition,
    now: Timestamp,
) -> bool {
    cond.last_transition_time = Some(Time(truncate_to_second(now)));
    match conditions.iter_mut().find(|c| c.type_ == cond.type_) {
        None => {
            conditions.push(cond);
            true
        }
        Some(old) => {
            if cond.status == old.status {
                cond.last_transition_time = old.last_transition_time.clone();
            }
            let equal = cond.status == old.status
                && cond.reason == old.reason
                && cond.message == old.message
                && cond.last_probe_time == old.last_probe_time
                && cond.last_transition_time == old.last_transition_time;
            *old = cond;
            !equal
        }
    }
}

/// `MarkPodsNotReady` for one pod: the new conditions list when the pod has a Ready condition that
/// is not already False (reason, message and lastProbeTime kept).
pub fn mark_pod_not_ready(pod: &Pod, now: Timestamp) -> Option<Vec<PodCondition>> {
    let ready = pod_condition(pod, names::POD_COND_READY)?;
    let mut conditions = pod.status.as_ref()?.conditions.clone()?;
    let cond = PodCondition {
        status: "False".into(),
        ..ready.clone()
    };
    update_pod_condition(&mut conditions, cond, now).then_some(conditions)
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
