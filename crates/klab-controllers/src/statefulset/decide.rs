//! Pure StatefulSet decisions, after upstream `stateful_set_control.go`: which pod to create,
//! delete or wait for next (`updateStatefulSet` with `processReplica` / `processCondemned`), the
//! pods and claims a replica gets (`newVersionedStatefulSetPod`), revision names, and the status.
//!
//! The invariant that matters on node failure: there are never two pods of one identity. A pod
//! object that still exists — Terminating on a dead node — occupies its ordinal until it is gone;
//! under `OrderedReady` it also stops all further processing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use klab_api::names;

use super::retention::{self, Claims};
use crate::deployment::hash;
use crate::replicaset::util::{self, PHASE_FAILED, PHASE_PENDING, PHASE_RUNNING, PHASE_SUCCEEDED};

/// One thing the controller does (or waits for) in a sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Create the claims and the pod of this ordinal, at the current (`at_current`) or update revision.
    Create { ordinal: i32, at_current: bool },
    /// Delete this pod (graceful).
    Delete { name: String, why: DeleteWhy },
    /// Blocked on this pod; `message` is upstream's log line.
    Wait { pod: String, message: &'static str },
    /// Rewrite the owner references of this pod's claims to match the retention policy
    /// (`retention::claim_owner_refs`); `update_event`: a living replica, which upstream then
    /// updates and records as `SuccessfulUpdate`.
    FixClaims { pod: String, update_event: bool },
}

/// Why a pod is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteWhy {
    /// Failed or Succeeded: recreated once the object is gone.
    Terminal,
    /// Ordinal beyond `replicas` (scale down).
    Condemned,
    /// Not at the update revision (rolling update).
    Update,
}

pub const WAIT_TERMINATE: &str = "StatefulSet is waiting for Pod to Terminate";
pub const WAIT_RUNNING_READY: &str = "StatefulSet is waiting for Pod to be Running and Ready";
pub const WAIT_AVAILABLE: &str = "StatefulSet is waiting for Pod to be Available";
pub const WAIT_TERMINATE_SCALE_DOWN: &str =
    "StatefulSet is waiting for Pod to Terminate prior to scale down";
pub const WAIT_READY_SCALE_DOWN: &str =
    "StatefulSet is waiting for Pod to be Running and Ready prior to scale down";
pub const WAIT_AVAILABLE_SCALE_DOWN: &str =
    "StatefulSet is waiting for Pod to be Available prior to scale down";
pub const WAIT_UPDATE: &str = "StatefulSet is waiting for Pod to update";
pub const WAIT_FAILED_REMOVAL: &str = "StatefulSet is waiting for failed Pod to be removed";
/// klab's log line for upstream's silent exit when a claim still names the previous pod.
pub const WAIT_STALE_CLAIM: &str =
    "StatefulSet is waiting for a stale PersistentVolumeClaim to be garbage-collected";

/// The result of one sync: steps in order, and the status to write.
#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    pub steps: Vec<Step>,
    pub status: StatefulSetStatus,
}

/// `<parent>-<ordinal>` of a pod name (upstream `getParentNameAndOrdinal`).
pub fn parent_and_ordinal(name: &str) -> Option<(&str, i32)> {
    let (parent, ord) = name.rsplit_once('-')?;
    if ord.is_empty() || !ord.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((parent, ord.parse().ok()?))
}

/// Upstream `isMemberOf`.
pub fn is_member_of(set: &StatefulSet, pod: &Pod) -> bool {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    parent_and_ordinal(name).is_some_and(|(p, _)| Some(p) == set.metadata.name.as_deref())
}

pub fn ordinal(pod: &Pod) -> Option<i32> {
    parent_and_ordinal(pod.metadata.name.as_deref().unwrap_or("")).map(|(_, o)| o)
}

pub fn replicas(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1)
        .max(0)
}

pub fn start_ordinal(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0)
        .max(0)
}

fn min_ready(set: &StatefulSet) -> Duration {
    crate::replicaset::util::min_ready(set.spec.as_ref().and_then(|s| s.min_ready_seconds))
}

/// `podManagementPolicy: Parallel` (upstream `allowsBurst`).
pub fn allows_burst(set: &StatefulSet) -> bool {
    set.spec
        .as_ref()
        .and_then(|s| s.pod_management_policy.as_deref())
        == Some("Parallel")
}

fn strategy(set: &StatefulSet) -> (&str, Option<Option<i32>>) {
    let us = set.spec.as_ref().and_then(|s| s.update_strategy.as_ref());
    let t = us
        .and_then(|u| u.type_.as_deref())
        .unwrap_or("RollingUpdate");
    let ru = us
        .and_then(|u| u.rolling_update.as_ref())
        .map(|r| r.partition);
    (t, ru)
}

/// The `controller-revision-hash` label of a pod.
pub fn pod_revision(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(names::LABEL_CONTROLLER_REVISION_HASH)
        .map(|s| s.as_str())
}

/// A pod's phase, as the decisions tell them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
    /// Unknown, or no phase at all.
    Other,
}

/// A pod of the set as the decisions read it, taken out of the Pod once per version of the pod
/// (with the pod itself, for the claims' owner references): a sync reads every pod of the set,
/// and at a thousand replicas reading the phase, the Ready condition and the revision label out
/// of each Pod on every sync was most of a sync. The shell keeps one per pod across syncs.
#[derive(Clone, Debug)]
pub struct Replica {
    pub pod: Arc<Pod>,
    /// The ordinal of its name (`None`: not `<parent>-<ordinal>`).
    pub ordinal: Option<i32>,
    pub phase: Phase,
    /// `deletionTimestamp` is set.
    pub deleting: bool,
    /// The Ready condition (status is True, lastTransitionTime), as [`util::ready_condition`].
    pub ready: Option<(bool, Option<Timestamp>)>,
    /// The `controller-revision-hash` label.
    pub revision: Option<String>,
}

impl Replica {
    pub fn of(pod: Arc<Pod>) -> Replica {
        Replica {
            ordinal: ordinal(&pod),
            phase: match util::phase(&pod) {
                PHASE_PENDING => Phase::Pending,
                PHASE_RUNNING => Phase::Running,
                PHASE_SUCCEEDED => Phase::Succeeded,
                PHASE_FAILED => Phase::Failed,
                _ => Phase::Other,
            },
            deleting: util::is_terminating(&pod.metadata),
            ready: util::ready_condition(&pod),
            revision: pod_revision(&pod).map(String::from),
            pod,
        }
    }

    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or("")
    }

    /// Upstream `isRunningAndReady`.
    pub fn is_running_and_ready(&self) -> bool {
        self.phase == Phase::Running && matches!(self.ready, Some((true, _)))
    }

    /// Upstream `isRunningAndAvailable`.
    pub fn is_running_and_available(&self, min_ready: Duration, now: Timestamp) -> bool {
        self.phase == Phase::Running && util::available(self.ready, min_ready, now)
    }

    fn is_terminal(&self) -> bool {
        matches!(self.phase, Phase::Failed | Phase::Succeeded)
    }
}

/// Upstream `isUnavailable`: not running-and-available, or terminating.
fn is_unavailable(pod: Option<&Replica>, min_ready: Duration, now: Timestamp) -> bool {
    match pod {
        None => true,
        Some(p) => !p.is_running_and_available(min_ready, now) || p.deleting,
    }
}

fn name_of(p: &Replica) -> String {
    p.name().to_string()
}

/// The name a replica of `ordinal` gets.
/// The ordinal of slot `i` (slots never reach past `i32::MAX`).
fn slot_ordinal(start: i32, i: usize) -> i32 {
    start.saturating_add(i32::try_from(i).unwrap_or(i32::MAX))
}

pub fn pod_name(set: &StatefulSet, ordinal: i32) -> String {
    format!("{}-{}", set.metadata.name.as_deref().unwrap_or(""), ordinal)
}

/// The names of the claims of one replica (`<template>-<pod>`).
fn claim_names(set: &StatefulSet, pod: &str) -> Vec<String> {
    set.spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.as_ref())
        .into_iter()
        .flatten()
        .map(|t| claim_name(t, pod))
        .collect()
}

/// Upstream `updateStatefulSet` (MaxUnavailableStatefulSet off, as in v1.33) as a plan.
/// `pods` are the pods claimed by the set, in any order; `claims` the
/// namespace's claims by name (for the retention policy: owner references and stale claims);
/// `current`/`update` the revision names.
pub fn next_action(
    set: &StatefulSet,
    pods: &[&Replica],
    claims: &Claims,
    current: &str,
    update: &str,
    now: Timestamp,
) -> Action {
    // ClaimsMatchRetentionPolicy: a claim that is missing is picked up later
    let needs_fix = |p: &Replica| {
        !claims.is_empty()
            && claim_names(set, p.name()).iter().any(|c| {
                claims
                    .get(c.as_str())
                    .is_some_and(|m| !retention::claim_owner_up_to_date(m, set, &p.pod))
            })
    };
    let stale = |pod: &str| {
        !claims.is_empty()
            && claim_names(set, pod).iter().any(|c| {
                claims
                    .get(c.as_str())
                    .is_some_and(|m| retention::claim_is_stale(set, m, pod))
            })
    };
    let mr = min_ready(set);
    let mut status = StatefulSetStatus {
        observed_generation: set.metadata.generation,
        current_revision: Some(current.to_string()),
        update_revision: Some(update.to_string()),
        collision_count: Some(
            set.status
                .as_ref()
                .and_then(|s| s.collision_count)
                .unwrap_or(0),
        ),
        ..Default::default()
    };
    compute_status(&mut status, pods, mr, current, update, now);

    let start = start_ordinal(set);
    // Ordinals are int32 (upstream parses them so): replicas past ordinal i32::MAX are not made,
    // where upstream would create pods it can never recognise as members again.
    let count = replicas(set).min(i32::MAX.saturating_sub(start).saturating_add(1));
    let end = start.saturating_add(count).saturating_sub(1);
    // slots [start, end] and condemned (valid ordinal outside the range), descending ordinal
    let mut slots: Vec<Option<&Replica>> = vec![None; count as usize];
    let mut condemned: Vec<&Replica> = Vec::new();
    for &p in pods {
        match p.ordinal {
            Some(o) if o >= start && o <= end => {
                // Two names of one ordinal ("web-1", "web-01"): the later name takes the slot,
                // whatever the order they came in.
                let slot = &mut slots[o.abs_diff(start) as usize];
                if slot.is_none_or(|q| q.name() < p.name()) {
                    *slot = Some(p);
                }
            }
            Some(_) => condemned.push(p),
            None => {}
        }
    }
    condemned.sort_by(|a, b| {
        b.ordinal
            .cmp(&a.ordinal)
            .then_with(|| a.name().cmp(b.name()))
    });

    let first_unavailable: Option<String> = slots
        .iter()
        .enumerate()
        .find(|(_, p)| is_unavailable(**p, mr, now))
        .map(|(i, p)| {
            (*p).map(name_of)
                .unwrap_or_else(|| pod_name(set, slot_ordinal(start, i)))
        })
        .or_else(|| {
            condemned
                .iter()
                .rev()
                .find(|p| is_unavailable(Some(p), mr, now))
                .map(|p| name_of(p))
        });

    let mut steps = Vec::new();
    if set.metadata.deletion_timestamp.is_some() {
        return Action { steps, status };
    }
    let monotonic = !allows_burst(set);

    // 1. living replicas, in ordinal order
    for (i, slot) in slots.iter().enumerate() {
        let ord = slot_ordinal(start, i);
        let stop = match slot {
            Some(p) if p.is_terminal() => {
                if !p.deleting {
                    steps.push(Step::Delete {
                        name: name_of(p),
                        why: DeleteWhy::Terminal,
                    });
                } else {
                    steps.push(Step::Wait {
                        pod: name_of(p),
                        message: WAIT_FAILED_REMOVAL,
                    });
                }
                true
            }
            None => {
                let name = pod_name(set, ord);
                if stale(&name) {
                    // PodClaimIsStale: the scaled-down pod's claim awaits the garbage collector
                    steps.push(Step::Wait {
                        pod: name,
                        message: WAIT_STALE_CLAIM,
                    });
                } else {
                    steps.push(Step::Create {
                        ordinal: ord,
                        at_current: created_at_current(set, ord),
                    });
                }
                // the new pod is neither running nor ready: monotonic stops here
                true
            }
            Some(p) => {
                // a Pending pod's claims are put right first (createMissingPersistentVolumeClaims),
                // without the update event; the others once the monotonic waits are passed
                let mut fix = needs_fix(p);
                if fix && p.phase == Phase::Pending {
                    steps.push(Step::FixClaims {
                        pod: name_of(p),
                        update_event: false,
                    });
                    fix = false;
                }
                let wait = if p.deleting {
                    Some(WAIT_TERMINATE)
                } else if !p.is_running_and_ready() {
                    Some(WAIT_RUNNING_READY)
                } else if !p.is_running_and_available(mr, now) {
                    Some(WAIT_AVAILABLE)
                } else {
                    None
                };
                match wait {
                    Some(message) if monotonic => {
                        steps.push(Step::Wait {
                            pod: name_of(p),
                            message,
                        });
                    }
                    _ if fix => steps.push(Step::FixClaims {
                        pod: name_of(p),
                        update_event: true,
                    }),
                    _ => {}
                }
                wait.is_some()
            }
        };
        if stop && monotonic {
            finish_status(
                set,
                &mut status,
                &slots,
                &condemned,
                mr,
                current,
                update,
                now,
            );
            return Action { steps, status };
        }
    }

    // 2. condemned pods: every one's claims made to match the policy first (with whenScaled
    // Delete, owned by the pod before it is deleted), then deletion, highest ordinal first
    for p in &condemned {
        if needs_fix(p) {
            steps.push(Step::FixClaims {
                pod: name_of(p),
                update_event: false,
            });
        }
    }
    for p in &condemned {
        let n = name_of(p);
        if p.deleting {
            if monotonic {
                steps.push(Step::Wait {
                    pod: n,
                    message: WAIT_TERMINATE_SCALE_DOWN,
                });
                finish_status(
                    set,
                    &mut status,
                    &slots,
                    &condemned,
                    mr,
                    current,
                    update,
                    now,
                );
                return Action { steps, status };
            }
            continue;
        }
        let is_first = first_unavailable.as_deref() == Some(n.as_str());
        if monotonic && !p.is_running_and_ready() && !is_first {
            steps.push(Step::Wait {
                pod: first_unavailable.clone().unwrap_or_default(),
                message: WAIT_READY_SCALE_DOWN,
            });
            finish_status(
                set,
                &mut status,
                &slots,
                &condemned,
                mr,
                current,
                update,
                now,
            );
            return Action { steps, status };
        }
        if monotonic && !p.is_running_and_available(mr, now) && !is_first {
            steps.push(Step::Wait {
                pod: first_unavailable.clone().unwrap_or_default(),
                message: WAIT_AVAILABLE_SCALE_DOWN,
            });
            finish_status(
                set,
                &mut status,
                &slots,
                &condemned,
                mr,
                current,
                update,
                now,
            );
            return Action { steps, status };
        }
        steps.push(Step::Delete {
            name: n,
            why: DeleteWhy::Condemned,
        });
        if monotonic {
            finish_status(
                set,
                &mut status,
                &slots,
                &condemned,
                mr,
                current,
                update,
                now,
            );
            return Action { steps, status };
        }
    }
    finish_status(
        set,
        &mut status,
        &slots,
        &condemned,
        mr,
        current,
        update,
        now,
    );

    // 3. rolling update, highest ordinal first, down to the partition
    let (ty, ru) = strategy(set);
    if ty == "OnDelete" {
        return Action { steps, status };
    }
    let partition = ru.flatten().unwrap_or(0).max(0) as usize;
    for target in (partition..slots.len()).rev() {
        let Some(p) = slots[target] else {
            // just created at the update revision (ordinal >= partition): not available yet
            steps.push(Step::Wait {
                pod: pod_name(set, slot_ordinal(start, target)),
                message: WAIT_UPDATE,
            });
            return Action { steps, status };
        };
        if p.revision.as_deref() != Some(update) && !p.deleting {
            steps.push(Step::Delete {
                name: name_of(p),
                why: DeleteWhy::Update,
            });
            let cur = status.current_replicas.unwrap_or(0).saturating_sub(1);
            status.current_replicas = Some(cur);
            return Action { steps, status };
        }
        if is_unavailable(Some(p), mr, now) {
            steps.push(Step::Wait {
                pod: name_of(p),
                message: WAIT_UPDATE,
            });
            return Action { steps, status };
        }
    }
    Action { steps, status }
}

/// Upstream `newVersionedStatefulSetPod`: which revision a newly created replica gets (note Go's
/// `A && B || C` precedence: a set partition applies whatever the strategy type).
fn created_at_current(set: &StatefulSet, ord: i32) -> bool {
    let (ty, ru) = strategy(set);
    let start = start_ordinal(set);
    let current_replicas = set
        .status
        .as_ref()
        .and_then(|s| s.current_replicas)
        .unwrap_or(0);
    match ru {
        None => ty == "RollingUpdate" && ord < start.saturating_add(current_replicas),
        Some(partition) => ord < start.saturating_add(partition.unwrap_or(0)),
    }
}

#[allow(clippy::too_many_arguments)]
fn finish_status(
    set: &StatefulSet,
    status: &mut StatefulSetStatus,
    slots: &[Option<&Replica>],
    condemned: &[&Replica],
    mr: Duration,
    current: &str,
    update: &str,
    now: Timestamp,
) {
    let _ = set;
    let pods: Vec<&Replica> = slots
        .iter()
        .flatten()
        .copied()
        .chain(condemned.iter().copied())
        .collect();
    compute_status(status, &pods, mr, current, update, now);
}

/// Upstream `computeReplicaStatus` over existing pods: `replicas` counts every pod object
/// (Terminating ones too), current/updated only those not being deleted.
fn compute_status(
    status: &mut StatefulSetStatus,
    pods: &[&Replica],
    mr: Duration,
    current: &str,
    update: &str,
    now: Timestamp,
) {
    let (mut replicas, mut ready, mut available, mut cur, mut upd) = (0i32, 0i32, 0i32, 0i32, 0i32);
    for p in pods {
        replicas = replicas.saturating_add(1);
        if p.is_running_and_ready() {
            ready = ready.saturating_add(1);
            if p.is_running_and_available(mr, now) {
                available = available.saturating_add(1);
            }
        }
        if !p.deleting {
            let rev = p.revision.as_deref();
            if rev == Some(current) {
                cur = cur.saturating_add(1);
            }
            if rev == Some(update) {
                upd = upd.saturating_add(1);
            }
        }
    }
    status.replicas = replicas;
    status.ready_replicas = Some(ready);
    status.available_replicas = Some(available);
    status.current_replicas = Some(cur);
    status.updated_replicas = Some(upd);
}

/// Upstream `completeRollingUpdate`: once every replica is updated and ready, the update revision
/// becomes the current one.
pub fn complete_rolling_update(set: &StatefulSet, status: &mut StatefulSetStatus) {
    let (ty, _) = strategy(set);
    let upd = status.updated_replicas.unwrap_or(0);
    if ty == "RollingUpdate"
        && upd == status.replicas
        && status.ready_replicas.unwrap_or(0) == status.replicas
    {
        status.current_revision = status.update_revision.clone();
        status.current_replicas = Some(upd);
    }
}

/// The ControllerRevision data upstream stores for a set (`getPatch`): the template with
/// `$patch: replace`, under `spec.template`.
pub fn revision_data(set: &StatefulSet) -> serde_json::Value {
    let template = set
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let mut t = util::normalized_template(&template);
    if let serde_json::Value::Object(m) = &mut t {
        m.insert("$patch".into(), "replace".into());
    }
    serde_json::json!({"spec": {"template": t}})
}

/// `<set>-<hash>` of a revision (upstream `ControllerRevisionName` — the set name cut to 223
/// bytes — over `HashControllerRevision` of the data in Go's canonical JSON form).
pub fn revision_name(set: &StatefulSet, collision_count: Option<i32>) -> String {
    let data = hash::canonical_json(&revision_data(set));
    let mut prefix = set.metadata.name.clone().unwrap_or_default();
    if prefix.len() > 223 {
        let mut cut = 223;
        while !prefix.is_char_boundary(cut) {
            cut = cut.saturating_sub(1);
        }
        prefix.truncate(cut);
    }
    format!("{}-{}", prefix, revision_hash(set, collision_count, &data))
}

/// The hash part of [`revision_name`] (also the ControllerRevision's `controller.kubernetes.io/hash` label).
pub fn revision_hash(set: &StatefulSet, collision_count: Option<i32>, data: &[u8]) -> String {
    let _ = set;
    hash::controller_revision_hash(data, collision_count.unwrap_or(0))
}

/// The template stored in a ControllerRevision's data (the inverse of [`revision_data`]).
pub fn template_from_revision(data: &serde_json::Value) -> Option<PodTemplateSpec> {
    let mut t = data.get("spec")?.get("template")?.clone();
    if let serde_json::Value::Object(m) = &mut t {
        m.remove("$patch");
    }
    serde_json::from_value(t).ok()
}

/// The PVC name of a claim template for one replica: `<claim>-<set>-<ordinal>`.
pub fn claim_name(claim: &PersistentVolumeClaim, pod_name: &str) -> String {
    format!(
        "{}-{}",
        claim.metadata.name.as_deref().unwrap_or(""),
        pod_name
    )
}

/// Upstream `newStatefulSetPod` + `setPodRevision`: the pod of `ordinal` built from `template`,
/// with its identity (name, hostname, subdomain, pod-name and pod-index labels), its claims'
/// volumes, and the revision label.
pub fn new_pod(set: &StatefulSet, template: &PodTemplateSpec, ordinal: i32, revision: &str) -> Pod {
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let owner = util::new_controller_ref("apps/v1", "StatefulSet", &set.metadata);
    let mut pod = util::pod_from_template(template, &ns, owner);
    let name = pod_name(set, ordinal);
    pod.metadata.name = Some(name.clone());
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(names::LABEL_STS_POD_NAME.into(), name.clone());
    labels.insert(names::LABEL_POD_INDEX.into(), ordinal.to_string());
    labels.insert(
        names::LABEL_CONTROLLER_REVISION_HASH.into(),
        revision.into(),
    );
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = Some(name.clone());
    spec.subdomain = set
        .spec
        .as_ref()
        .and_then(|s| s.service_name.clone())
        .filter(|s| !s.is_empty());
    for claim in set
        .spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.clone())
        .unwrap_or_default()
    {
        let vol_name = claim.metadata.name.clone().unwrap_or_default();
        let vols = spec.volumes.get_or_insert_with(Vec::new);
        vols.retain(|v| v.name != vol_name);
        vols.push(Volume {
            name: vol_name,
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(&claim, &name),
                read_only: None,
            }),
            ..Default::default()
        });
    }
    pod
}

/// Upstream `getPersistentVolumeClaims`: the claims of one replica (labels: the set's
/// matchLabels over the template's labels). `persistentVolumeClaimRetentionPolicy.whenDeleted:
/// Delete` makes the StatefulSet their owner, so the garbage collector deletes them with it;
/// Retain (the default) leaves them unowned. (`whenScaled: Delete` — claims owned by the pod once
/// it is scaled away — is not modelled.)
pub fn claims_for(set: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let delete_with_set = set
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref())
        .and_then(|p| p.when_deleted.as_deref())
        == Some("Delete");
    let owner = delete_with_set.then(|| {
        vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "apps/v1".into(),
                kind: "StatefulSet".into(),
                name: set.metadata.name.clone().unwrap_or_default(),
                uid: set.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
        ]
    });
    let pod = pod_name(set, ordinal);
    let sel = set
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default();
    set.spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            let mut labels = t.metadata.labels.clone().unwrap_or_default();
            labels.extend(sel.clone());
            PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(&t, &pod)),
                    namespace: set.metadata.namespace.clone(),
                    labels: Some(labels),
                    annotations: t.metadata.annotations.clone(),
                    owner_references: owner.clone(),
                    ..Default::default()
                },
                spec: t.spec.clone(),
                status: None,
            }
        })
        .collect()
}

/// Upstream `truncateHistory`: the ControllerRevisions to delete so that at most
/// `revisionHistoryLimit` non-live ones remain, oldest revision first. `revisions` are
/// (name, revision number); `live` are the current/update revisions and those pods still carry.
pub fn revisions_to_prune(limit: i32, revisions: &[(String, i64)], live: &[String]) -> Vec<String> {
    let mut history: Vec<&(String, i64)> = revisions
        .iter()
        .filter(|(n, _)| !live.contains(n))
        .collect();
    history.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    let excess = history.len().saturating_sub(limit.max(0) as usize);
    history
        .into_iter()
        .take(excess)
        .map(|(n, _)| n.clone())
        .collect()
}

/// When a Ready pod becomes available (minReadySeconds): the next instant to look again.
pub fn next_availability_check(
    set: &StatefulSet,
    pods: &[&Replica],
    now: Timestamp,
) -> Option<Timestamp> {
    let mr = min_ready(set);
    if mr.is_zero() {
        return None;
    }
    pods.iter()
        .filter(|p| p.is_running_and_ready() && !p.is_running_and_available(mr, now))
        .filter_map(|p| util::available_at_of(p.ready, mr))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicaset::util::testutil::{pod, ts};
    use k8s_openapi::api::apps::v1::{
        RollingUpdateStatefulSetStrategy, StatefulSetSpec, StatefulSetUpdateStrategy,
    };
    use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;

    const R1: &str = "web-r1";
    const R2: &str = "web-r2";

    fn sts(replicas: i32, parallel: bool) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("sts-uid".into()),
                generation: Some(1),
                ..Default::default()
            },
            spec: Some(StatefulSetSpec {
                replicas: Some(replicas),
                service_name: Some("web".into()),
                pod_management_policy: Some(
                    if parallel { "Parallel" } else { "OrderedReady" }.into(),
                ),
                update_strategy: Some(StatefulSetUpdateStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateStatefulSetStrategy {
                        partition: Some(0),
                        max_unavailable: None,
                    }),
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn ready(name: &str, rev: &str) -> Pod {
        pod(name)
            .node("n")
            .running_ready(0)
            .label(names::LABEL_CONTROLLER_REVISION_HASH, rev)
            .build()
    }

    /// The decisions over these pods as the shell reads them (each pod taken as a [`Replica`]).
    fn next_action_with_claims(
        set: &StatefulSet,
        pods: &[&Pod],
        claims: &Claims,
        current: &str,
        update: &str,
        now: Timestamp,
    ) -> Action {
        let replicas: Vec<Replica> = pods
            .iter()
            .map(|p| Replica::of(Arc::new((*p).clone())))
            .collect();
        let refs: Vec<&Replica> = replicas.iter().collect();
        super::next_action(set, &refs, claims, current, update, now)
    }

    fn next_action(
        set: &StatefulSet,
        pods: &[&Pod],
        current: &str,
        update: &str,
        now: Timestamp,
    ) -> Action {
        next_action_with_claims(set, pods, &Claims::new(), current, update, now)
    }

    /// A Replica answers every question the decisions ask as the Pod it was taken from does:
    /// ordinal, phase, deletion, running-and-ready, running-and-available and when it becomes
    /// so, revision.
    #[test]
    fn a_replica_answers_as_its_pod() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};

        let opt = |v: Vec<&'static str>| proptest::sample::select(v);
        let case = (
            (
                opt(vec!["web-0", "web-12", "web-01", "web", "web-x", "web-"]),
                opt(vec!["", R1, R2]),
                opt(crate::replicaset::util::testutil::PHASES.to_vec()),
            ),
            any::<bool>(),
            (
                opt(vec!["-", "True", "False"]),
                proptest::option::of(0i64..20),
            ),
        );
        TestRunner::new(Config {
            cases: 300,
            ..Config::default()
        })
        .run(&case, |((name, rev, phase), deleting, (ready, since))| {
            let mut b = pod(name);
            if !rev.is_empty() {
                b = b.label(names::LABEL_CONTROLLER_REVISION_HASH, rev);
            }
            let mut p = b.build();
            let status = crate::replicaset::util::testutil::status_json(phase, ready, since);
            p.status = Some(serde_json::from_value(status).unwrap());
            if deleting {
                p.metadata.deletion_timestamp =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts(1)));
            }
            let r = Replica::of(Arc::new(p.clone()));
            prop_assert_eq!(r.name(), name);
            prop_assert_eq!(r.ordinal, ordinal(&p));
            prop_assert_eq!(r.deleting, util::is_terminating(&p.metadata));
            prop_assert_eq!(r.revision.as_deref(), pod_revision(&p));
            prop_assert_eq!(r.is_running_and_ready(), util::is_running_and_ready(&p));
            prop_assert_eq!(r.phase == Phase::Pending, util::phase(&p) == PHASE_PENDING);
            prop_assert_eq!(
                r.is_terminal(),
                matches!(util::phase(&p), PHASE_FAILED | PHASE_SUCCEEDED)
            );
            for mr in [0u64, 5, 10] {
                let mr = Duration::from_secs(mr);
                for now in [0i64, 5, 10, 15, 30] {
                    prop_assert_eq!(
                        r.is_running_and_available(mr, ts(now)),
                        util::phase(&p) == PHASE_RUNNING && util::is_pod_available(&p, mr, ts(now))
                    );
                }
                prop_assert_eq!(
                    util::available_at_of(r.ready, mr),
                    util::available_at(&p, mr)
                );
            }
            Ok(())
        })
        .unwrap();
    }

    /// The decisions do not depend on the order the pods come in: two names of one ordinal
    /// ("web-1", "web-01") resolve to the later name, condemned pods go highest ordinal first.
    #[test]
    fn the_order_of_the_pods_does_not_matter() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};

        let names = [
            "web-0", "web-1", "web-01", "web-2", "web-3", "web-03", "web-4", "web-5",
        ];
        let one = (0usize..names.len(), 0u8..5, any::<bool>(), any::<bool>());
        let case = (
            proptest::collection::vec(one, 0..8),
            1i32..5,
            any::<bool>(),
            any::<u64>(),
        );
        TestRunner::new(Config {
            cases: 300,
            ..Config::default()
        })
        .run(&case, |(pods, replicas, parallel, seed)| {
            let set = sts(replicas, parallel);
            let mut seen = std::collections::BTreeSet::new();
            let pods: Vec<Pod> = pods
                .into_iter()
                .filter(|(i, ..)| seen.insert(*i))
                .map(|(i, state, updated, deleting)| {
                    let rev = if updated { R2 } else { R1 };
                    let mut p = match state {
                        0 => ready(names[i], rev),
                        1 => pod(names[i]).phase(PHASE_PENDING).build(),
                        2 => pod(names[i]).phase(PHASE_FAILED).build(),
                        3 => pod(names[i]).phase(PHASE_RUNNING).ready(false, 0).build(),
                        _ => pod(names[i]).phase(PHASE_RUNNING).ready(true, 95).build(),
                    };
                    if deleting {
                        p.metadata.deletion_timestamp =
                            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts(1)));
                    }
                    p
                })
                .collect();
            let refs: Vec<&Pod> = pods.iter().collect();
            let mut shuffled = refs.clone();
            // a permutation drawn from the seed
            let mut x = seed;
            for i in (1..shuffled.len()).rev() {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                shuffled.swap(i, (x >> 33) as usize % (i + 1));
            }
            prop_assert_eq!(
                next_action(&set, &refs, R1, R2, ts(100)),
                next_action(&set, &shuffled, R1, R2, ts(100))
            );
            let mut sorted = refs.clone();
            sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            prop_assert_eq!(
                next_action(&set, &refs, R1, R2, ts(100)),
                next_action(&set, &sorted, R1, R2, ts(100))
            );
            Ok(())
        })
        .unwrap();
    }

    fn check(set: &StatefulSet, pods: &[&Pod], want: Vec<Step>) {
        let a = next_action(set, pods, R1, R1, ts(100));
        assert_eq!(a.steps, want);
    }

    /// `ordinals.start: 2147483647` with more than one replica: the controller panicked on
    /// `start + replicas - 1`. Ordinals are int32, so only the replicas that have one are made.
    #[test]
    fn start_ordinal_at_i32_max() {
        let mut set = sts(3, true);
        set.spec.as_mut().unwrap().ordinals =
            Some(k8s_openapi::api::apps::v1::StatefulSetOrdinals {
                start: Some(i32::MAX),
            });
        check(
            &set,
            &[],
            vec![
                Step::Create {
                    ordinal: i32::MAX,
                    at_current: false,
                },
                Step::Wait {
                    pod: "web-2147483647".into(),
                    message: WAIT_UPDATE,
                },
            ],
        );
        let last = ready("web-2147483647", R1);
        let a = next_action(&set, &[&last], R1, R1, ts(100));
        assert_eq!(a.status.replicas, 1);
        // A status users may write: current replicas at the ends of i32.
        for cur in [i32::MIN, i32::MAX] {
            let mut set = sts(3, false);
            set.status = Some(StatefulSetStatus {
                current_replicas: Some(cur),
                ..Default::default()
            });
            let w0 = ready("web-0", R2);
            let a = next_action(&set, &[&w0], R1, R2, ts(100));
            assert!(!a.steps.is_empty());
        }
        assert_eq!(slot_ordinal(i32::MAX, usize::MAX), i32::MAX);
    }

    #[test]
    fn ordered_ready_table() {
        let set = sts(3, false);
        let w0 = ready("web-0", R1);
        let w1 = ready("web-1", R1);
        let w2 = ready("web-2", R1);
        let w1_pending = pod("web-1")
            .node("n")
            .label(names::LABEL_CONTROLLER_REVISION_HASH, R1)
            .build();
        let w1_terminating = pod("web-1")
            .node("n")
            .running_ready(0)
            .ready(false, 55)
            .deleting(360)
            .label(names::LABEL_CONTROLLER_REVISION_HASH, R1)
            .build();
        let w1_failed = pod("web-1")
            .node("n")
            .phase(PHASE_FAILED)
            .label(names::LABEL_CONTROLLER_REVISION_HASH, R1)
            .build();
        let w3 = ready("web-3", R1);
        let other = ready("webx-0", R1);
        check(
            &set,
            &[],
            vec![Step::Create {
                ordinal: 0,
                at_current: false,
            }],
        );
        check(
            &set,
            &[&w0],
            vec![Step::Create {
                ordinal: 1,
                at_current: false,
            }],
        );
        check(
            &set,
            &[&w0, &w1_pending],
            vec![Step::Wait {
                pod: "web-1".into(),
                message: WAIT_RUNNING_READY,
            }],
        );
        check(&set, &[&w0, &w1, &w2], vec![]);
        // CP-59: web-1 Terminating on a dead node blocks web-1 and everything after it
        check(
            &set,
            &[&w0, &w1_terminating, &w2],
            vec![Step::Wait {
                pod: "web-1".into(),
                message: WAIT_TERMINATE,
            }],
        );
        check(
            &set,
            &[&w0, &w1_terminating],
            vec![Step::Wait {
                pod: "web-1".into(),
                message: WAIT_TERMINATE,
            }],
        );
        // once the object is gone (force delete), it is recreated with the same name
        check(
            &set,
            &[&w0, &w2],
            vec![Step::Create {
                ordinal: 1,
                at_current: false,
            }],
        );
        check(
            &set,
            &[&w0, &w1_failed, &w2],
            vec![Step::Delete {
                name: "web-1".into(),
                why: DeleteWhy::Terminal,
            }],
        );
        // scale down: highest ordinal first, one at a time
        check(
            &set,
            &[&w0, &w1, &w2, &w3],
            vec![Step::Delete {
                name: "web-3".into(),
                why: DeleteWhy::Condemned,
            }],
        );
        let set1 = sts(1, false);
        check(
            &set1,
            &[&w0, &w1, &w2],
            vec![Step::Delete {
                name: "web-2".into(),
                why: DeleteWhy::Condemned,
            }],
        );
        // scale down blocked by a terminating replica below
        check(
            &set1,
            &[&w0, &w1_terminating, &w2],
            vec![Step::Delete {
                name: "web-2".into(),
                why: DeleteWhy::Condemned,
            }],
        );
        let w2_term = pod("web-2")
            .node("n")
            .running_ready(0)
            .deleting(10)
            .label(names::LABEL_CONTROLLER_REVISION_HASH, R1)
            .build();
        check(
            &set1,
            &[&w0, &w1, &w2_term],
            vec![Step::Wait {
                pod: "web-2".into(),
                message: WAIT_TERMINATE_SCALE_DOWN,
            }],
        );
        // pods of another set are not members
        assert!(!is_member_of(&set, &other));
    }

    #[test]
    fn parallel_table() {
        let set = sts(3, true);
        let w0 = ready("web-0", R1);
        let w1_terminating = pod("web-1")
            .node("n")
            .running_ready(0)
            .deleting(360)
            .label(names::LABEL_CONTROLLER_REVISION_HASH, R1)
            .build();
        check(
            &set,
            &[],
            vec![
                Step::Create {
                    ordinal: 0,
                    at_current: false,
                },
                Step::Create {
                    ordinal: 1,
                    at_current: false,
                },
                Step::Create {
                    ordinal: 2,
                    at_current: false,
                },
                Step::Wait {
                    pod: "web-2".into(),
                    message: WAIT_UPDATE,
                },
            ],
        );
        // web-1 Terminating: not recreated, but web-2 is processed
        check(
            &set,
            &[&w0, &w1_terminating],
            vec![
                Step::Create {
                    ordinal: 2,
                    at_current: false,
                },
                Step::Wait {
                    pod: "web-2".into(),
                    message: WAIT_UPDATE,
                },
            ],
        );
        let set1 = sts(1, true);
        let w2 = ready("web-2", R1);
        check(
            &set1,
            &[&w0, &w1_terminating, &w2],
            vec![Step::Delete {
                name: "web-2".into(),
                why: DeleteWhy::Condemned,
            }],
        );
    }

    #[test]
    fn rolling_update_from_the_top() {
        let set = sts(3, false);
        let (a, b, c) = (ready("web-0", R1), ready("web-1", R1), ready("web-2", R2));
        let act = next_action(&set, &[&a, &b, &c], R1, R2, ts(100));
        assert_eq!(
            act.steps,
            vec![Step::Delete {
                name: "web-1".into(),
                why: DeleteWhy::Update
            }]
        );
        assert_eq!(act.status.current_replicas, Some(1));
        assert_eq!(act.status.updated_replicas, Some(1));
        let mut part = set.clone();
        part.spec
            .as_mut()
            .unwrap()
            .update_strategy
            .as_mut()
            .unwrap()
            .rolling_update
            .as_mut()
            .unwrap()
            .partition = Some(2);
        assert_eq!(
            next_action(&part, &[&a, &b, &c], R1, R2, ts(100)).steps,
            vec![]
        );
        assert!(created_at_current(&part, 1));
        assert!(!created_at_current(&part, 2));
    }

    #[test]
    fn status_counts_terminating_pods_as_replicas() {
        let set = sts(3, false);
        let w0 = ready("web-0", R1);
        let w1 = pod("web-1")
            .node("n")
            .running_ready(0)
            .ready(false, 55)
            .deleting(360)
            .label(names::LABEL_CONTROLLER_REVISION_HASH, R1)
            .build();
        let w2 = ready("web-2", R1);
        let mut s = next_action(&set, &[&w0, &w1, &w2], R1, R1, ts(400)).status;
        assert_eq!(
            (s.replicas, s.ready_replicas, s.available_replicas),
            (3, Some(2), Some(2))
        );
        assert_eq!((s.current_replicas, s.updated_replicas), (Some(2), Some(2)));
        assert_eq!(
            (s.current_revision.as_deref(), s.update_revision.as_deref()),
            (Some(R1), Some(R1))
        );
        assert_eq!(s.observed_generation, Some(1));
        complete_rolling_update(&set, &mut s);
        assert_eq!(s.current_revision.as_deref(), Some(R1));
    }

    #[test]
    fn history_truncation_keeps_live_revisions() {
        let revs: Vec<(String, i64)> = (1..=5).map(|i| (format!("web-r{i}"), i)).collect();
        let live = vec!["web-r1".to_string(), "web-r5".to_string()];
        assert_eq!(
            revisions_to_prune(1, &revs, &live),
            vec!["web-r2".to_string(), "web-r3".to_string()]
        );
        assert_eq!(revisions_to_prune(10, &revs, &live), Vec::<String>::new());
        assert_eq!(revisions_to_prune(0, &revs, &live).len(), 3);
    }

    #[test]
    fn identity_claims_and_revisions() {
        let mut set = sts(3, false);
        set.spec.as_mut().unwrap().template = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".into(), "mysql".into())].into()),
                ..Default::default()
            }),
            spec: None,
        };
        set.spec.as_mut().unwrap().selector.match_labels =
            Some([("app".into(), "mysql".into())].into());
        set.spec.as_mut().unwrap().volume_claim_templates = Some(vec![PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec::default()),
            status: None,
        }]);
        let rev = revision_name(&set, None);
        assert!(rev.starts_with("web-"));
        assert_ne!(rev, revision_name(&set, Some(1)));
        let t = template_from_revision(&revision_data(&set)).unwrap();
        assert_eq!(
            util::normalized_template(&t),
            util::normalized_template(&set.spec.as_ref().unwrap().template)
        );
        let p = new_pod(&set, &t, 2, &rev);
        assert_eq!(p.metadata.name.as_deref(), Some("web-2"));
        let l = p.metadata.labels.as_ref().unwrap();
        assert_eq!(l[names::LABEL_STS_POD_NAME], "web-2");
        assert_eq!(l[names::LABEL_POD_INDEX], "2");
        assert_eq!(l[names::LABEL_CONTROLLER_REVISION_HASH], rev);
        assert_eq!(l["app"], "mysql");
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(
            (spec.hostname.as_deref(), spec.subdomain.as_deref()),
            (Some("web-2"), Some("web"))
        );
        let v = &spec.volumes.as_ref().unwrap()[0];
        assert_eq!(
            v.persistent_volume_claim.as_ref().unwrap().claim_name,
            "data-web-2"
        );
        let claims = claims_for(&set, 2);
        assert_eq!(claims[0].metadata.name.as_deref(), Some("data-web-2"));
        assert_eq!(claims[0].metadata.labels.as_ref().unwrap()["app"], "mysql");
        assert_eq!(
            claims[0].metadata.owner_references, None,
            "Retain by default"
        );
        let mut deleting = set.clone();
        deleting
            .spec
            .as_mut()
            .unwrap()
            .persistent_volume_claim_retention_policy = Some(
            k8s_openapi::api::apps::v1::StatefulSetPersistentVolumeClaimRetentionPolicy {
                when_deleted: Some("Delete".into()),
                when_scaled: Some("Retain".into()),
            },
        );
        let owned = claims_for(&deleting, 2);
        let refs = owned[0].metadata.owner_references.as_ref().unwrap();
        assert_eq!(
            (refs[0].kind.as_str(), refs[0].controller),
            ("StatefulSet", Some(true))
        );
        assert_eq!(
            util::controller_ref(&p.metadata).unwrap().kind,
            "StatefulSet"
        );
        assert_eq!(parent_and_ordinal("my-db-12"), Some(("my-db", 12)));
        assert_eq!(parent_and_ordinal("web-x"), None);
    }

    /// whenScaled Delete as upstream orders it: living replicas first (a monotonic wait still
    /// stops everything), then every condemned pod's claims handed to the pod, then deletion of
    /// the highest ordinal; a living replica whose claim is wrong is fixed with the update event;
    /// a missing replica whose claim still names its previous pod is not created.
    #[test]
    fn when_scaled_delete_steps() {
        use k8s_openapi::api::apps::v1::StatefulSetPersistentVolumeClaimRetentionPolicy;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let with = |replicas: i32, parallel: bool, scaled: &str| {
            let mut s = sts(replicas, parallel);
            let spec = s.spec.as_mut().unwrap();
            spec.volume_claim_templates = Some(vec![PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some("data".into()),
                    ..Default::default()
                },
                ..Default::default()
            }]);
            spec.persistent_volume_claim_retention_policy =
                Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
                    when_deleted: Some("Retain".into()),
                    when_scaled: Some(scaled.into()),
                });
            s
        };
        let with_uid = |mut p: Pod, uid: &str| {
            p.metadata.uid = Some(uid.into());
            p
        };
        let pod_ref = |name: &str, uid: &str| OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: name.into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let claim = |name: &str, refs: Vec<OwnerReference>| ObjectMeta {
            name: Some(name.into()),
            owner_references: Some(refs),
            ..Default::default()
        };
        let p0 = with_uid(ready("web-0", R1), "u0");
        let p1 = with_uid(ready("web-1", R1), "u1");
        let p2 = with_uid(ready("web-2", R1), "u2");
        let c0 = claim("data-web-0", vec![]);
        let c1 = claim("data-web-1", vec![]);
        let c2 = claim("data-web-2", vec![]);
        let run = |set: &StatefulSet, pods: &[&Pod], cs: &[&ObjectMeta]| {
            let claims: Claims = cs
                .iter()
                .map(|c| (c.name.as_deref().unwrap(), *c))
                .collect();
            next_action_with_claims(set, pods, &claims, R1, R1, ts(100)).steps
        };
        let fix = |pod: &str, update_event: bool| Step::FixClaims {
            pod: pod.into(),
            update_event,
        };
        let del = |name: &str| Step::Delete {
            name: name.into(),
            why: DeleteWhy::Condemned,
        };

        // 3 -> 1, OrderedReady: both condemned claims change hands, then web-2 alone is deleted
        let set = with(1, false, "Delete");
        assert_eq!(
            run(&set, &[&p0, &p1, &p2], &[&c0, &c1, &c2]),
            vec![fix("web-2", false), fix("web-1", false), del("web-2")]
        );
        // once handed over, nothing more to fix
        let c1o = claim("data-web-1", vec![pod_ref("web-1", "u1")]);
        let c2o = claim("data-web-2", vec![pod_ref("web-2", "u2")]);
        assert_eq!(
            run(&set, &[&p0, &p1, &p2], &[&c0, &c1o, &c2o]),
            vec![del("web-2")]
        );
        // Retain: the same scale-down touches no claim
        assert_eq!(
            run(
                &with(1, false, "Retain"),
                &[&p0, &p1, &p2],
                &[&c0, &c1, &c2]
            ),
            vec![del("web-2")]
        );
        // a living replica that is not Running and Ready blocks everything, claims included
        let p0_pending = with_uid(pod("web-0").node("n").build(), "u0");
        assert_eq!(
            run(&set, &[&p0_pending, &p1, &p2], &[&c0, &c1, &c2]),
            vec![Step::Wait {
                pod: "web-0".into(),
                message: WAIT_RUNNING_READY
            }]
        );
        // scaled back to 3 before deletion: web-1's claim returns to no owner, with the update
        // event; web-2 is still Terminating and waited for
        let p2_term = with_uid(
            pod("web-2")
                .node("n")
                .running_ready(0)
                .label(names::LABEL_CONTROLLER_REVISION_HASH, R1)
                .deleting(30)
                .build(),
            "u2",
        );
        let up = with(3, false, "Delete");
        assert_eq!(
            run(&up, &[&p0, &p1, &p2_term], &[&c0, &c1o, &c2o]),
            vec![
                fix("web-1", true),
                Step::Wait {
                    pod: "web-2".into(),
                    message: WAIT_TERMINATE
                }
            ]
        );
        // web-2's object is gone but its claim still names it: not created until collected
        assert_eq!(
            run(&up, &[&p0, &p1], &[&c0, &c1, &c2o]),
            vec![Step::Wait {
                pod: "web-2".into(),
                message: WAIT_STALE_CLAIM
            }]
        );
        assert_eq!(
            run(&up, &[&p0, &p1], &[&c0, &c1]),
            vec![Step::Create {
                ordinal: 2,
                at_current: false
            }]
        );
        // Parallel: the stale claim holds back only its own ordinal
        let par = with(4, true, "Delete");
        assert_eq!(
            run(&par, &[&p0, &p1], &[&c0, &c1, &c2o])[..2],
            [
                Step::Wait {
                    pod: "web-2".into(),
                    message: WAIT_STALE_CLAIM
                },
                Step::Create {
                    ordinal: 3,
                    at_current: false
                }
            ]
        );
    }
}
