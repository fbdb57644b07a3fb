//! Job decisions as pure functions (upstream `pkg/controller/job`, v1.33 defaults: finalizer
//! tracking, `podReplacementPolicy`, `terminating`, delayed terminal conditions with the interim
//! `FailureTarget` / `SuccessCriteriaMet`, `suspend`). NonIndexed jobs only; Indexed completion,
//! `backoffLimitPerIndex`, `successPolicy` and `managedBy` are not modelled.
//!
//! One sync ([`sync_job`]) is planned in three writes, as upstream's
//! `trackJobStatusAndRemoveFinalizers`: (1) a status with the finished pods' UIDs in
//! `uncountedTerminatedPods` (and the interim condition), (2) removal of the
//! `batch.kubernetes.io/job-tracking` finalizers, (3) a status with the UIDs moved into the
//! `succeeded`/`failed` counters and, once nothing is uncounted or terminating, the final
//! `Complete`/`Failed` condition.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{
    Job, JobCondition, JobStatus, PodFailurePolicy, UncountedTerminatedPods,
};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use klab_api::names;

use super::config::JobControllerConfig;
use crate::replicaset::util;

/// The finalizer on every Job pod until the controller has counted it.
pub const FINALIZER_JOB_TRACKING: &str = names::FINALIZER_JOB_TRACKING;
/// Labels the API server puts on the pod template (copied onto pods).
pub const LABEL_CONTROLLER_UID: &str = names::LABEL_JOB_CONTROLLER_UID;
pub const LABEL_JOB_NAME: &str = names::LABEL_JOB_NAME;
pub const LABEL_LEGACY_CONTROLLER_UID: &str = names::LABEL_JOB_CONTROLLER_UID_LEGACY;
pub const LABEL_LEGACY_JOB_NAME: &str = names::LABEL_JOB_NAME_LEGACY;
/// Job condition types.
pub const COND_COMPLETE: &str = names::JOB_COND_COMPLETE;
pub const COND_FAILED: &str = names::JOB_COND_FAILED;
pub const COND_FAILURE_TARGET: &str = names::JOB_COND_FAILURE_TARGET;
pub const COND_SUCCESS_CRITERIA_MET: &str = names::JOB_COND_SUCCESS_CRITERIA_MET;
pub const COND_SUSPENDED: &str = "Suspended";
/// Condition reasons and messages.
pub const REASON_BACKOFF_LIMIT_EXCEEDED: &str = names::JOB_REASON_BACKOFF_LIMIT_EXCEEDED;
pub const MSG_BACKOFF_LIMIT_EXCEEDED: &str = names::JOB_MSG_BACKOFF_LIMIT_EXCEEDED;
pub const REASON_DEADLINE_EXCEEDED: &str = names::JOB_REASON_DEADLINE_EXCEEDED;
pub const MSG_DEADLINE_EXCEEDED: &str = names::JOB_MSG_DEADLINE_EXCEEDED;
pub const REASON_POD_FAILURE_POLICY: &str = names::JOB_REASON_POD_FAILURE_POLICY;
pub const REASON_COMPLETIONS_REACHED: &str = names::JOB_REASON_COMPLETIONS_REACHED;
pub const MSG_COMPLETIONS_REACHED: &str = names::JOB_MSG_COMPLETIONS_REACHED;
/// Default `spec.backoffLimit`.
pub const DEFAULT_BACKOFF_LIMIT: i32 = 6;

/// Upstream `onlyReplaceFailedPods`: `podReplacementPolicy: Failed`, which is also the default
/// when a `podFailurePolicy` is set.
pub fn only_replace_failed_pods(job: &Job) -> bool {
    let spec = job.spec.as_ref();
    spec.and_then(|s| s.pod_replacement_policy.as_deref()) == Some("Failed")
        || spec.is_some_and(|s| s.pod_failure_policy.is_some())
}

/// Upstream `isPodFailed`: phase Failed; or, unless only failed pods are replaced, being deleted
/// without having succeeded (an evicted pod on a dead node counts at once).
pub fn is_pod_failed(pod: &Pod, job: &Job) -> bool {
    let phase = util::phase(pod);
    if phase == util::PHASE_FAILED {
        return true;
    }
    if only_replace_failed_pods(job) {
        return false;
    }
    pod.metadata.deletion_timestamp.is_some() && phase != util::PHASE_SUCCEEDED
}

fn has_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER_JOB_TRACKING)
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// A podFailurePolicy action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyAction {
    Ignore,
    FailJob,
    Count,
}

fn statuses(pod: &Pod) -> (Vec<&ContainerStatus>, Vec<&ContainerStatus>) {
    let s = pod.status.as_ref();
    (
        s.and_then(|s| s.container_statuses.as_ref())
            .map(|v| v.iter().collect())
            .unwrap_or_default(),
        s.and_then(|s| s.init_container_statuses.as_ref())
            .map(|v| v.iter().collect())
            .unwrap_or_default(),
    )
}

/// Upstream `matchPodFailurePolicy` → `(FailJob message, count the failure?, action)`. Rules are
/// tried in order; `onExitCodes` looks at app containers, then init containers, with a non-zero
/// terminated exit code; `onPodConditions` matches a pod condition's type and status.
pub fn match_pod_failure_policy(
    policy: &PodFailurePolicy,
    pod: &Pod,
) -> (Option<String>, bool, Option<PolicyAction>) {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    for (index, rule) in policy.rules.iter().enumerate() {
        let action = match rule.action.as_str() {
            "Ignore" => PolicyAction::Ignore,
            "FailJob" => PolicyAction::FailJob,
            "Count" => PolicyAction::Count,
            _ => continue, // FailIndex needs backoffLimitPerIndex (not modelled)
        };
        let mut matched: Option<String> = None;
        if let Some(req) = &rule.on_exit_codes {
            let (app, init) = statuses(pod);
            let hit = app.into_iter().chain(init).find(|cs| {
                if req.container_name.as_deref().is_some_and(|c| c != cs.name) {
                    return false;
                }
                let Some(t) = cs.state.as_ref().and_then(|s| s.terminated.as_ref()) else {
                    return false;
                };
                if t.exit_code == 0 {
                    return false;
                }
                let inside = req.values.contains(&t.exit_code);
                match req.operator.as_str() {
                    "In" => inside,
                    "NotIn" => !inside,
                    _ => false,
                }
            });
            if let Some(cs) = hit {
                let code = cs
                    .state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .map(|t| t.exit_code)
                    .unwrap_or(0);
                matched = Some(format!(
                    "Container {} for pod {ns}/{name} failed with exit code {code} matching {} rule at index {index}",
                    cs.name, rule.action
                ));
            }
        } else if let Some(patterns) = &rule.on_pod_conditions {
            let conds = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_deref())
                .unwrap_or(&[]);
            let hit = patterns.iter().find_map(|p| {
                let want = if p.status.is_empty() {
                    "True"
                } else {
                    p.status.as_str()
                };
                conds
                    .iter()
                    .find(|c| c.type_ == p.type_ && c.status == want)
            });
            if let Some(c) = hit {
                matched = Some(format!(
                    "Pod {ns}/{name} has condition {} matching {} rule at index {index}",
                    c.type_, rule.action
                ));
            }
        }
        if let Some(msg) = matched {
            return match action {
                PolicyAction::Ignore => (None, false, Some(action)),
                PolicyAction::Count => (None, true, Some(action)),
                PolicyAction::FailJob => (Some(msg), true, Some(action)),
            };
        }
    }
    (None, true, None)
}

fn counts_as_failure(job: &Job, pod: &Pod) -> bool {
    match job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref())
    {
        Some(p) => match_pod_failure_policy(p, pod).1,
        None => true,
    }
}

/// Upstream `getFinishedTime`: the latest container `finishedAt` (all terminated), else the
/// `Ready=False` condition's transition, else `deletionTimestamp − grace`, else creation time.
pub fn finished_time(pod: &Pod) -> Timestamp {
    let (app, _) = statuses(pod);
    let mut latest: Option<Timestamp> = None;
    let mut all_done = !app.is_empty();
    for cs in &app {
        match cs
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.finished_at.as_ref())
        {
            Some(t) => latest = Some(latest.map_or(t.0, |l| l.max(t.0))),
            None => all_done = false,
        }
    }
    if all_done && let Some(t) = latest {
        return t;
    }
    let conds = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[]);
    if let Some(c) = conds
        .iter()
        .find(|c| c.type_ == names::POD_COND_READY && c.status == "False")
        && let Some(t) = &c.last_transition_time
    {
        return t.0;
    }
    if let Some(d) = &pod.metadata.deletion_timestamp {
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        return d
            .0
            .checked_sub(jiff::SignedDuration::from_secs(grace))
            .unwrap_or(d.0);
    }
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Upstream `backoffRecord`: failures since the last success and when the last one finished.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackoffRecord {
    pub failures_after_last_success: u32,
    pub last_failure_time: Option<Timestamp>,
}

/// Upstream `newBackoffRecord` from the pods finished since the last sync.
pub fn new_backoff_record(
    prev: &BackoffRecord,
    new_succeeded: &[&Pod],
    new_failed: &[&Pod],
) -> BackoffRecord {
    let mut failed: Vec<Timestamp> = new_failed.iter().map(|p| finished_time(p)).collect();
    failed.sort();
    if new_succeeded.is_empty() {
        let Some(last) = failed.last() else {
            return prev.clone();
        };
        return BackoffRecord {
            failures_after_last_success: prev
                .failures_after_last_success
                .saturating_add(u32::try_from(failed.len()).unwrap_or(u32::MAX)),
            last_failure_time: Some(*last),
        };
    }
    let last_success = new_succeeded
        .iter()
        .map(|p| finished_time(p))
        .max()
        .unwrap_or(Timestamp::UNIX_EPOCH);
    let mut rec = BackoffRecord::default();
    for t in failed.iter().rev() {
        if *t <= last_success {
            break;
        }
        if rec.last_failure_time.is_none() {
            rec.last_failure_time = Some(*t);
        }
        rec.failures_after_last_success = rec.failures_after_last_success.saturating_add(1);
    }
    rec
}

/// Upstream `getRemainingTimeForFailuresCount`: `base × 2^(failures−1)` capped at `max`, minus the
/// time since the last failure.
pub fn remaining_backoff(
    rec: &BackoffRecord,
    now: Timestamp,
    base: Duration,
    max: Duration,
) -> Duration {
    if rec.failures_after_last_success == 0 {
        return Duration::ZERO;
    }
    let mut d = base;
    for _ in 1..rec.failures_after_last_success {
        d = d.saturating_mul(2);
        if d >= max {
            d = max;
            break;
        }
    }
    let Some(last) = rec.last_failure_time else {
        return Duration::ZERO;
    };
    let elapsed = Duration::try_from(now.duration_since(last)).unwrap_or_default();
    d.saturating_sub(elapsed)
}

fn condition(type_: &str, reason: &str, message: &str, now: Timestamp) -> JobCondition {
    JobCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

fn find_condition<'a>(status: Option<&'a JobStatus>, type_: &str) -> Option<&'a JobCondition> {
    status?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// Whether the Job has a true `Complete` or `Failed` condition.
pub fn is_job_finished(job: &Job) -> bool {
    let st = job.status.as_ref();
    find_condition(st, COND_COMPLETE).is_some() || find_condition(st, COND_FAILED).is_some()
}

/// Upstream `ensureJobConditionStatus` for `Suspended`: the condition to write (if it changes)
/// with the event reason and message. A missing condition is not added as False.
fn suspend_condition(
    old: &JobStatus,
    suspended: bool,
    now: Timestamp,
) -> Option<(JobCondition, &'static str, &'static str)> {
    let (status, reason, message, ev) = if suspended {
        ("True", "JobSuspended", "Job suspended", "Suspended")
    } else {
        ("False", "JobResumed", "Job resumed", "Resumed")
    };
    let existing = old
        .conditions
        .as_ref()
        .and_then(|l| l.iter().find(|c| c.type_ == COND_SUSPENDED));
    match existing {
        Some(c)
            if c.status == status
                && c.reason.as_deref() == Some(reason)
                && c.message.as_deref() == Some(message) =>
        {
            None
        }
        None if !suspended => None,
        _ => {
            let mut c = condition(COND_SUSPENDED, reason, message, now);
            c.status = status.into();
            Some((c, ev, message))
        }
    }
}

/// An event about the Job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobEvent {
    pub type_: &'static str,
    pub reason: String,
    pub message: String,
}

/// The plan of one sync.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SyncPlan {
    /// Pods to create.
    pub create: usize,
    /// Active pods to delete (names).
    pub delete: Vec<String>,
    /// Pods whose tracking finalizer is removed (names), after `status_before` is written.
    pub remove_finalizers: Vec<String>,
    /// Status to write before removing finalizers (only when something becomes uncounted or an
    /// interim condition is added).
    pub status_before: Option<JobStatus>,
    /// Status after the finalizers are removed.
    pub status_after: JobStatus,
    pub events: Vec<JobEvent>,
    pub requeue_after: Option<Duration>,
    /// Back-off record to keep once the finalizers are removed.
    pub backoff: BackoffRecord,
}

/// Pods to delete when there are too many active ones, first to delete first (upstream
/// `activePodsForRemoval` sorts by `controller.ActivePods`).
fn removal_order(pods: &mut [&Pod]) {
    pods.sort_by_cached_key(|p| removal_key(p));
}

/// Upstream `controller.ActivePods.Less` as a sort key (`Less` = delete first): (1) unassigned
/// before assigned; (2) Pending < Unknown < Running; (3) not Ready before Ready; (4) both Ready:
/// Ready for less time first (a missing time first); (5) more container restarts first; (6) no
/// creation time, then newer first; then the name, for a deterministic order where upstream's
/// unstable sort leaves ties in any order. Every rule compares one value per pod, so the key
/// order is the same as upstream's pairwise rules, and total.
pub fn removal_key(p: &Pod) -> RemovalKey {
    use std::cmp::Reverse;
    let ready = util::is_pod_ready(p);
    let assigned = p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let phase = match util::phase(p) {
        util::PHASE_UNKNOWN => 1,
        util::PHASE_RUNNING => 2,
        // Pending, and any other phase (upstream's map lookup yields 0)
        _ => 0,
    };
    (
        assigned,
        phase,
        ready,
        // afterOrZero: a zero time first, then the later time first
        if ready {
            util::ready_since(p).map(Reverse)
        } else {
            None
        },
        Reverse(util::max_container_restarts(p)),
        p.metadata.creation_timestamp.as_ref().map(|t| Reverse(t.0)),
        p.metadata.name.clone().unwrap_or_default(),
    )
}

/// See [`removal_key`].
pub type RemovalKey = (
    bool,
    u8,
    bool,
    Option<std::cmp::Reverse<Timestamp>>,
    std::cmp::Reverse<i32>,
    Option<std::cmp::Reverse<Timestamp>>,
    String,
);

/// The order in which a sync looks at a Job's pods: oldest first (no creation time first), then
/// by name.
pub fn creation_order(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    let key = |p: &Pod| {
        (
            p.metadata.creation_timestamp.as_ref().map(|t| t.0),
            p.metadata.name.clone(),
        )
    };
    key(a).cmp(&key(b))
}

/// A count of pods as a status counter (saturating at `i32::MAX`).
fn count_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Upstream `pastBackoffLimitOnFailure`: with `restartPolicy: OnFailure`, the container restarts
/// of running/pending pods reach the backoff limit.
fn past_backoff_limit_on_failure(job: &Job, pods: &[&Pod], limit: i32) -> bool {
    let rp = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.restart_policy.as_deref());
    if rp != Some("OnFailure") {
        return false;
    }
    let mut restarts = 0i64;
    for p in pods {
        if matches!(util::phase(p), util::PHASE_RUNNING | util::PHASE_PENDING) {
            let (app, init) = statuses(p);
            restarts = restarts.saturating_add(
                app.iter()
                    .chain(init.iter())
                    .map(|c| i64::from(c.restart_count))
                    .sum::<i64>(),
            );
        }
    }
    if limit == 0 {
        restarts > 0
    } else {
        restarts >= i64::from(limit)
    }
}

/// One sync of a Job. `pods` are the Job's pods (any state); `pending_finalizer_removals` are UIDs
/// whose finalizer removal the cache has not shown yet; `backoff` is the stored record.
pub fn sync_job(
    job: &Job,
    pods: &[&Pod],
    pending_finalizer_removals: &BTreeSet<String>,
    backoff: &BackoffRecord,
    now: Timestamp,
    config: &JobControllerConfig,
) -> SyncPlan {
    let old = job.status.clone().unwrap_or_default();
    let mut plan = SyncPlan {
        status_after: old.clone(),
        backoff: backoff.clone(),
        ..Default::default()
    };
    let Some(spec) = job.spec.as_ref() else {
        return plan;
    };
    let mut pods: Vec<&Pod> = pods.to_vec();
    pods.sort_by(|a, b| creation_order(a, b));

    if is_job_finished(job) {
        // Finished: only release pods that still carry our finalizer.
        plan.remove_finalizers = pods
            .iter()
            .filter(|p| has_finalizer(p) && !pending_finalizer_removals.contains(&uid(p)))
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        return plan;
    }

    let uncounted = old.uncounted_terminated_pods.clone().unwrap_or_default();
    let unc_succ: BTreeSet<String> = uncounted.succeeded.iter().flatten().cloned().collect();
    let unc_fail: BTreeSet<String> = uncounted.failed.iter().flatten().cloned().collect();
    let fresh = |p: &&Pod| {
        has_finalizer(p)
            && !unc_succ.contains(&uid(p))
            && !unc_fail.contains(&uid(p))
            && !pending_finalizer_removals.contains(&uid(p))
    };
    let new_succeeded: Vec<&Pod> = pods
        .iter()
        .copied()
        .filter(|p| fresh(p) && util::phase(p) == util::PHASE_SUCCEEDED)
        .collect();
    let new_failed: Vec<&Pod> = pods
        .iter()
        .copied()
        .filter(|p| fresh(p) && is_pod_failed(p, job))
        .collect();
    let active_pods: Vec<&Pod> = pods
        .iter()
        .copied()
        .filter(|p| util::is_pod_active(p))
        .collect();
    let mut terminating = pods
        .iter()
        .filter(|p| util::is_pod_terminating_nonterminal(p))
        .count() as i32;
    // Saturating: the counters come from a status that users may write.
    let succeeded = old
        .succeeded
        .unwrap_or(0)
        .saturating_add(count_i32(new_succeeded.len()))
        .saturating_add(count_i32(unc_succ.len()));
    let failed = old
        .failed
        .unwrap_or(0)
        .saturating_add(count_i32(
            new_failed
                .iter()
                .filter(|p| counts_as_failure(job, p))
                .count(),
        ))
        .saturating_add(count_i32(unc_fail.len()));
    let mut ready = active_pods.iter().filter(|p| util::is_pod_ready(p)).count() as i32;
    let suspended = spec.suspend == Some(true);
    // startTime is set on the first sync of a job that is not suspended.
    let mut start_time: Option<Time> = old
        .start_time
        .clone()
        .or_else(|| (!suspended).then_some(Time(now)));
    plan.backoff = new_backoff_record(backoff, &new_succeeded, &new_failed);
    let backoff_limit = spec.backoff_limit.unwrap_or(DEFAULT_BACKOFF_LIMIT);

    // The condition the Job is heading to (upstream `finishedCondition`).
    // An earlier sync already met the success criteria: finish that way (failure rules are no
    // longer evaluated).
    let mut finished: Option<JobCondition> =
        find_condition(Some(&old), COND_SUCCESS_CRITERIA_MET).cloned();
    if finished.is_some() {
        // Success criteria already met.
    } else if let Some(ft) = find_condition(Some(&old), COND_FAILURE_TARGET) {
        finished = Some(condition(
            COND_FAILED,
            ft.reason.as_deref().unwrap_or(""),
            ft.message.as_deref().unwrap_or(""),
            now,
        ));
    } else if let Some(policy) = spec.pod_failure_policy.as_ref()
        && let Some(msg) = pods
            .iter()
            .filter(|p| is_pod_failed(p, job))
            .find_map(|p| match_pod_failure_policy(policy, p).0)
    {
        finished = Some(condition(
            COND_FAILURE_TARGET,
            REASON_POD_FAILURE_POLICY,
            &msg,
            now,
        ));
    }
    if finished.is_none() {
        if failed > backoff_limit || past_backoff_limit_on_failure(job, &pods, backoff_limit) {
            finished = Some(condition(
                COND_FAILURE_TARGET,
                REASON_BACKOFF_LIMIT_EXCEEDED,
                MSG_BACKOFF_LIMIT_EXCEEDED,
                now,
            ));
        } else if let Some(secs) = spec.active_deadline_seconds
            && !suspended
            && let Some(st) = start_time.as_ref()
        {
            let deadline =
                st.0.checked_add(jiff::SignedDuration::from_secs(secs))
                    .unwrap_or(st.0);
            if now >= deadline {
                finished = Some(condition(
                    COND_FAILURE_TARGET,
                    REASON_DEADLINE_EXCEEDED,
                    MSG_DEADLINE_EXCEEDED,
                    now,
                ));
            } else {
                plan.requeue_after = Duration::try_from(deadline.duration_since(now)).ok();
            }
        }
    }

    let mut active = active_pods.len() as i32;
    let mut suspend_change: Option<(JobCondition, &str, &str)> = None;
    if finished.is_some() {
        // Deleted pods count as terminating at once (upstream adds them to `terminating`), so
        // the terminal condition waits for them to go.
        plan.delete = active_pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        terminating = terminating.saturating_add(active);
        ready = 0;
        active = 0;
    } else {
        let parallelism = spec.parallelism.unwrap_or(1).max(0);
        // A suspended job wants no pods: the active ones are deleted.
        let want = match spec.completions {
            _ if suspended => 0,
            None => {
                if succeeded > 0 {
                    active
                } else {
                    parallelism
                }
            }
            Some(c) => c.saturating_sub(succeeded).clamp(0, parallelism),
        };
        if active > want {
            let mut victims = active_pods.clone();
            removal_order(&mut victims);
            let doomed: Vec<&Pod> = victims
                .iter()
                .copied()
                .take(
                    (active.saturating_sub(want).max(0) as usize)
                        .min(config.max_pod_create_delete_per_sync),
                )
                .collect();
            plan.delete = doomed
                .iter()
                .map(|p| p.metadata.name.clone().unwrap_or_default())
                .collect();
            active = active.saturating_sub(count_i32(doomed.len()));
            terminating = terminating.saturating_add(count_i32(doomed.len()));
            ready = ready.saturating_sub(count_i32(
                doomed.iter().filter(|p| util::is_pod_ready(p)).count(),
            ));
        } else {
            let counted_terminating = if only_replace_failed_pods(job) {
                terminating
            } else {
                0
            };
            if active.saturating_add(counted_terminating) < want {
                let wait = remaining_backoff(
                    &plan.backoff,
                    now,
                    config.pod_failure_backoff,
                    config.max_pod_failure_backoff,
                );
                if !wait.is_zero() {
                    plan.requeue_after = Some(plan.requeue_after.map_or(wait, |r| r.min(wait)));
                } else {
                    plan.create = (want
                        .saturating_sub(active)
                        .saturating_sub(counted_terminating)
                        .max(0) as usize)
                        .min(config.max_pod_create_delete_per_sync);
                    active = active.saturating_add(count_i32(plan.create));
                }
            }
        }
        let complete = match spec.completions {
            None => succeeded > 0 && active == 0,
            Some(c) => succeeded >= c && active == 0,
        };
        if complete {
            finished = Some(condition(
                COND_SUCCESS_CRITERIA_MET,
                REASON_COMPLETIONS_REACHED,
                MSG_COMPLETIONS_REACHED,
                now,
            ));
        } else {
            suspend_change = suspend_condition(&old, suspended, now);
            if let Some((_, ev_reason, ev_msg)) = &suspend_change {
                plan.events.push(JobEvent {
                    type_: names::EVENT_NORMAL,
                    reason: (*ev_reason).into(),
                    message: (*ev_msg).into(),
                });
                if !suspended {
                    // Resuming resets startTime (activeDeadlineSeconds counts continuous activity).
                    start_time = Some(Time(now));
                }
            }
        }
    }

    // Finalizer tracking: which finished pods become uncounted, whose finalizers go.
    let mut new_unc_succ = unc_succ.clone();
    let mut new_unc_fail = unc_fail.clone();
    let failing_job = finished
        .as_ref()
        .is_some_and(|c| c.type_ != COND_SUCCESS_CRITERIA_MET);
    let mut needs_flush = false;
    for p in &pods {
        let u = uid(p);
        if !has_finalizer(p) || pending_finalizer_removals.contains(&u) {
            continue;
        }
        let consider_failed = is_pod_failed(p, job);
        let can_remove = job.metadata.deletion_timestamp.is_some()
            || finished.is_some()
            || util::phase(p) == util::PHASE_SUCCEEDED
            || consider_failed;
        if !can_remove {
            continue;
        }
        plan.remove_finalizers
            .push(p.metadata.name.clone().unwrap_or_default());
        if util::phase(p) == util::PHASE_SUCCEEDED && !new_unc_fail.contains(&u) {
            if new_unc_succ.insert(u) {
                needs_flush = true;
            }
        } else if (consider_failed || failing_job)
            && !new_unc_fail.contains(&u)
            && counts_as_failure(job, p)
        {
            new_unc_fail.insert(u);
            needs_flush = true;
        }
    }
    let mut conditions = old.conditions.clone().unwrap_or_default();
    if let Some((c, _, _)) = suspend_change {
        match conditions.iter_mut().find(|x| x.type_ == COND_SUSPENDED) {
            Some(x) => *x = c,
            None => conditions.push(c),
        }
    }
    if let Some(c) = finished.take() {
        finished = Some(match c.type_.as_str() {
            COND_FAILURE_TARGET => {
                conditions.push(c.clone());
                needs_flush = true;
                condition(
                    COND_FAILED,
                    c.reason.as_deref().unwrap_or(""),
                    c.message.as_deref().unwrap_or(""),
                    now,
                )
            }
            COND_SUCCESS_CRITERIA_MET => {
                if find_condition(Some(&old), COND_SUCCESS_CRITERIA_MET).is_none() {
                    conditions.push(c.clone());
                    needs_flush = true;
                }
                condition(
                    COND_COMPLETE,
                    c.reason.as_deref().unwrap_or(""),
                    c.message.as_deref().unwrap_or(""),
                    now,
                )
            }
            _ => c,
        });
    }
    // `active`, `succeeded` and `failed` are omitempty integers upstream; `ready` and
    // `terminating` are pointers (always written).
    let nz = |n: i32| (n > 0).then_some(n);
    let base = JobStatus {
        active: nz(active),
        ready: Some(ready),
        terminating: Some(terminating),
        start_time,
        conditions: (!conditions.is_empty()).then(|| conditions.clone()),
        ..old.clone()
    };
    if needs_flush {
        plan.status_before = Some(JobStatus {
            uncounted_terminated_pods: Some(UncountedTerminatedPods {
                succeeded: Some(new_unc_succ.iter().cloned().collect()),
                failed: Some(new_unc_fail.iter().cloned().collect()),
            }),
            ..base.clone()
        });
    }
    // After the finalizers are gone the uncounted pods move into the counters.
    let mut after = JobStatus {
        succeeded: nz(old
            .succeeded
            .unwrap_or(0)
            .saturating_add(count_i32(new_unc_succ.len()))),
        failed: nz(old
            .failed
            .unwrap_or(0)
            .saturating_add(count_i32(new_unc_fail.len()))),
        uncounted_terminated_pods: Some(UncountedTerminatedPods::default()),
        ..base
    };
    if let Some(fc) = finished
        && terminating == 0
    {
        // v1.33 delays the terminal condition until no pod is terminating.
        after
            .conditions
            .get_or_insert_with(Vec::new)
            .push(fc.clone());
        if fc.type_ == COND_COMPLETE {
            after.completion_time = fc.last_transition_time.clone();
            plan.events.push(JobEvent {
                type_: names::EVENT_NORMAL,
                reason: "Completed".into(),
                message: "Job completed".into(),
            });
        } else {
            plan.events.push(JobEvent {
                type_: names::EVENT_WARNING,
                reason: fc.reason.clone().unwrap_or_default(),
                message: fc.message.clone().unwrap_or_default(),
            });
        }
    }
    plan.status_after = after;
    plan
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
