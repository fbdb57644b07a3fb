//! Table tests of the Job decisions (CP-60 and upstream `job_controller_test.go` shapes).

use super::*;
use serde_json::json;

const T0: &str = "2026-01-01T00:00:00Z";

fn at(s: i64) -> Timestamp {
    T0.parse::<Timestamp>().unwrap() + jiff::SignedDuration::from_secs(s)
}
fn ts(s: i64) -> String {
    klab_api::clock::format_time(at(s))
}

fn job(spec: serde_json::Value, status: serde_json::Value) -> Job {
    let mut sp = json!({"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}});
    for (k, v) in spec.as_object().unwrap() {
        sp[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": "j", "namespace": "default", "uid": "job-uid"}, "spec": sp, "status": status})).unwrap()
}

/// A job pod: name, phase, created at second `c`, extra metadata/status merged in.
fn pod(name: &str, phase: &str, c: i64, meta: serde_json::Value, status: serde_json::Value) -> Pod {
    let mut v = json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "creationTimestamp": ts(c),
        "finalizers": [FINALIZER_JOB_TRACKING]}, "spec": {"containers": [{"name": "c"}]}, "status": {"phase": phase}});
    for (k, val) in meta.as_object().unwrap() {
        v["metadata"][k] = val.clone();
    }
    for (k, val) in status.as_object().unwrap() {
        v["status"][k] = val.clone();
    }
    serde_json::from_value(v).unwrap()
}

fn sync(j: &Job, pods: &[&Pod], now: i64) -> SyncPlan {
    sync_job(
        j,
        pods,
        &BTreeSet::new(),
        &BackoffRecord::default(),
        at(now),
        &JobControllerConfig::default(),
    )
}

fn cond_types(st: &JobStatus) -> Vec<String> {
    st.conditions
        .iter()
        .flatten()
        .map(|c| format!("{}:{}", c.type_, c.reason.clone().unwrap_or_default()))
        .collect()
}

#[test]
fn new_job_starts_parallelism_pods() {
    let j = job(json!({"completions": 5, "parallelism": 2}), json!({}));
    let p = sync(&j, &[], 0);
    assert_eq!(p.create, 2);
    assert_eq!(p.status_after.active, Some(2));
    assert_eq!(p.status_after.start_time, Some(Time(at(0))));
    assert!(p.status_before.is_none());
    // completions nil, parallelism 3
    let j = job(json!({"parallelism": 3}), json!({}));
    assert_eq!(sync(&j, &[], 0).create, 3);
    // one completion left, parallelism 2 → one pod
    let j = job(
        json!({"completions": 5, "parallelism": 2}),
        json!({"succeeded": 4, "startTime": ts(0)}),
    );
    assert_eq!(sync(&j, &[], 9).create, 1);
}

#[test]
fn cp60a_evicted_pod_counts_as_failed_and_is_replaced_at_once() {
    // Pod on a dead node: Ready=False since ~55 s (node lifecycle), evicted at 360 s.
    let j = job(json!({}), json!({"active": 1, "startTime": ts(0)}));
    let evicted = pod(
        "j-a",
        "Running",
        0,
        json!({"deletionTimestamp": ts(390), "deletionGracePeriodSeconds": 30}),
        json!({"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": ts(55)}]}),
    );
    let p = sync(&j, &[&evicted], 360);
    assert_eq!(
        p.create, 1,
        "replacement created immediately (finish time 55 s is long past the 10 s back-off)"
    );
    assert_eq!(p.remove_finalizers, vec!["j-a"]);
    let before = p.status_before.as_ref().expect("uncounted flush");
    assert_eq!(
        before.uncounted_terminated_pods.as_ref().unwrap().failed,
        Some(vec!["uid-j-a".to_string()])
    );
    assert_eq!(p.status_after.failed, Some(1));
    assert_eq!(p.status_after.active, Some(1));
    assert_eq!(p.status_after.terminating, Some(1));
    assert_eq!(
        p.backoff,
        BackoffRecord {
            failures_after_last_success: 1,
            last_failure_time: Some(at(55))
        }
    );
}

#[test]
fn cp60b_pod_failure_policy_waits_for_failed_phase_and_ignores_disruption() {
    let spec = json!({"podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}});
    let j = job(spec.clone(), json!({"active": 1, "startTime": ts(0)}));
    let disruption = json!([{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"},
                            {"type": "Ready", "status": "False", "lastTransitionTime": ts(55)}]);
    let evicted = pod(
        "j-a",
        "Running",
        0,
        json!({"deletionTimestamp": ts(390), "deletionGracePeriodSeconds": 30}),
        json!({"conditions": disruption}),
    );
    let p = sync(&j, &[&evicted], 360);
    assert_eq!(
        p.create, 0,
        "podReplacementPolicy Failed: wait for the terminating pod"
    );
    assert!(p.remove_finalizers.is_empty());
    assert_eq!(p.status_after.terminating, Some(1));
    assert_eq!(p.status_after.active, None);
    assert_eq!(p.status_after.failed, None);
    // PodGC marks it Failed: the Ignore rule matches, not counted, replaced.
    let failed = pod(
        "j-a",
        "Failed",
        0,
        json!({"deletionTimestamp": ts(390), "deletionGracePeriodSeconds": 30}),
        json!({"conditions": disruption}),
    );
    let p = sync(&j, &[&failed], 600);
    assert_eq!(p.create, 1);
    assert_eq!(p.remove_finalizers, vec!["j-a"]);
    assert_eq!(p.status_after.failed, None);
    assert!(
        p.status_before.is_none(),
        "an ignored failure is never uncounted"
    );
    assert_eq!(p.status_after.terminating, Some(0));
}

#[test]
fn backoff_limit_exceeded() {
    // backoffLimit 1: the second counted failure fails the job; active pods are deleted.
    let j = job(
        json!({"backoffLimit": 1, "parallelism": 2, "completions": 4}),
        json!({"failed": 1, "active": 2, "startTime": ts(0)}),
    );
    let f = pod("j-f", "Failed", 0, json!({}), json!({}));
    let r = pod("j-r", "Running", 1, json!({}), json!({}));
    let p = sync(&j, &[&f, &r], 100);
    assert_eq!(p.delete, vec!["j-r"]);
    assert_eq!(p.create, 0);
    let before = p.status_before.as_ref().unwrap();
    assert_eq!(
        cond_types(before),
        vec!["FailureTarget:BackoffLimitExceeded"]
    );
    // the running pod is being deleted: the Failed condition waits (v1.33 delayed terminal condition)
    assert_eq!(
        cond_types(&p.status_after),
        vec!["FailureTarget:BackoffLimitExceeded"]
    );
    assert_eq!(p.status_after.failed, Some(3));
    assert_eq!(p.status_after.terminating, Some(1));
    // next sync: FailureTarget present, the deleted pod is gone → Failed added, event
    let j2 = job(
        json!({"backoffLimit": 1, "parallelism": 2, "completions": 4}),
        serde_json::to_value(&p.status_after).unwrap(),
    );
    let p2 = sync(&j2, &[], 101);
    assert_eq!(
        cond_types(&p2.status_after),
        vec![
            "FailureTarget:BackoffLimitExceeded",
            "Failed:BackoffLimitExceeded"
        ]
    );
    assert_eq!(
        p2.events,
        vec![JobEvent {
            type_: "Warning",
            reason: "BackoffLimitExceeded".into(),
            message: "Job has reached the specified backoff limit".into()
        }]
    );
    assert!(p2.status_after.completion_time.is_none());
}

#[test]
fn restart_never_replaces_failures_with_backoff() {
    let j = job(json!({}), json!({"active": 1, "startTime": ts(0)}));
    let f = pod(
        "j-a",
        "Failed",
        0,
        json!({}),
        json!({"containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 1, "finishedAt": ts(100)}}}]}),
    );
    // finished at 100 s, now 105 s: 10 s back-off leaves 5 s
    let p = sync(&j, &[&f], 105);
    assert_eq!(p.create, 0);
    assert_eq!(p.requeue_after, Some(Duration::from_secs(5)));
    assert_eq!(p.status_after.failed, Some(1));
    // the record is kept by the shell; at 110 s the replacement is created
    let j2 = job(json!({}), serde_json::to_value(&p.status_after).unwrap());
    let mut done = f.clone();
    done.metadata.finalizers = None;
    let p2 = sync_job(
        &j2,
        &[&done],
        &BTreeSet::new(),
        &p.backoff,
        at(110),
        &JobControllerConfig::default(),
    );
    assert_eq!(p2.create, 1);
}

#[test]
fn on_failure_restarts_count_toward_backoff_limit() {
    let j = job(
        json!({"backoffLimit": 2, "template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c"}]}}}),
        json!({"active": 1, "startTime": ts(0)}),
    );
    let r = pod(
        "j-a",
        "Running",
        0,
        json!({}),
        json!({"containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 2}]}),
    );
    let p = sync(&j, &[&r], 50);
    assert_eq!(p.delete, vec!["j-a"]);
    assert_eq!(
        cond_types(p.status_before.as_ref().unwrap()),
        vec!["FailureTarget:BackoffLimitExceeded"]
    );
}

#[test]
fn completion_sets_success_criteria_then_complete() {
    let j = job(
        json!({"completions": 1}),
        json!({"active": 1, "startTime": ts(0)}),
    );
    let s = pod("j-a", "Succeeded", 0, json!({}), json!({}));
    let p = sync(&j, &[&s], 30);
    assert_eq!(p.create, 0);
    let before = p.status_before.as_ref().unwrap();
    assert_eq!(
        cond_types(before),
        vec!["SuccessCriteriaMet:CompletionsReached"]
    );
    assert_eq!(
        before.uncounted_terminated_pods.as_ref().unwrap().succeeded,
        Some(vec!["uid-j-a".to_string()])
    );
    assert_eq!(
        cond_types(&p.status_after),
        vec![
            "SuccessCriteriaMet:CompletionsReached",
            "Complete:CompletionsReached"
        ]
    );
    assert_eq!(p.status_after.succeeded, Some(1));
    assert_eq!(p.status_after.completion_time, Some(Time(at(30))));
    assert_eq!(p.status_after.active, None);
    assert_eq!(p.events[0].reason, "Completed");
    // a finished job only releases leftover finalizers
    let done = job(
        json!({"completions": 1}),
        serde_json::to_value(&p.status_after).unwrap(),
    );
    let p2 = sync(&done, &[&s], 31);
    assert_eq!(p2.remove_finalizers, vec!["j-a"]);
    assert_eq!(p2.create, 0);
}

#[test]
fn pod_failure_policy_fail_job_and_count() {
    let spec = json!({"podFailurePolicy": {"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": "c", "operator": "In", "values": [42]}},
        {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0]}}]}});
    let j = job(spec, json!({"active": 1, "startTime": ts(0)}));
    let term = |code: i32| {
        json!({"containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": code, "finishedAt": ts(10)}}}]})
    };
    let f42 = pod("j-a", "Failed", 0, json!({}), term(42));
    let p = sync(&j, &[&f42], 20);
    let before = p.status_before.as_ref().unwrap();
    assert_eq!(
        before.conditions.as_ref().unwrap()[0].message.as_deref(),
        Some(
            "Container c for pod default/j-a failed with exit code 42 matching FailJob rule at index 0"
        )
    );
    assert_eq!(
        cond_types(&p.status_after),
        vec!["FailureTarget:PodFailurePolicy", "Failed:PodFailurePolicy"]
    );
    let f1 = pod("j-b", "Failed", 0, json!({}), term(1));
    let p = sync(&j, &[&f1], 20);
    assert_eq!(p.status_after.failed, Some(1));
    assert!(cond_types(&p.status_after).is_empty());
    let (msg, count, action) = match_pod_failure_policy(
        j.spec
            .as_ref()
            .unwrap()
            .pod_failure_policy
            .as_ref()
            .unwrap(),
        &f1,
    );
    assert_eq!(
        (msg, count, action),
        (None, true, Some(PolicyAction::Count))
    );
}

#[test]
fn replacement_policy_and_failed_predicate() {
    let default = job(json!({}), json!({}));
    let failed_only = job(json!({"podReplacementPolicy": "Failed"}), json!({}));
    let terminating = pod(
        "p",
        "Running",
        0,
        json!({"deletionTimestamp": ts(30), "deletionGracePeriodSeconds": 30}),
        json!({}),
    );
    let succeeded_deleting = pod(
        "p",
        "Succeeded",
        0,
        json!({"deletionTimestamp": ts(30)}),
        json!({}),
    );
    assert!(is_pod_failed(&terminating, &default));
    assert!(!is_pod_failed(&terminating, &failed_only));
    assert!(!is_pod_failed(&succeeded_deleting, &default));
    assert!(only_replace_failed_pods(&job(
        json!({"podFailurePolicy": {"rules": []}}),
        json!({})
    )));
    assert!(!only_replace_failed_pods(&default));
    // with podReplacementPolicy Failed a terminating pod blocks its replacement
    let j = job(
        json!({"podReplacementPolicy": "Failed"}),
        json!({"active": 1, "startTime": ts(0)}),
    );
    assert_eq!(sync(&j, &[&terminating], 10).create, 0);
    assert_eq!(sync(&default, &[&terminating], 10).create, 1);
}

#[test]
fn backoff_records_and_delays() {
    let f = |name: &str, t: i64| {
        pod(
            name,
            "Failed",
            0,
            json!({}),
            json!({"containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 1, "finishedAt": ts(t)}}}]}),
        )
    };
    let s = |name: &str, t: i64| {
        pod(
            name,
            "Succeeded",
            0,
            json!({}),
            json!({"containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "finishedAt": ts(t)}}}]}),
        )
    };
    let (f1, f2, s1) = (f("a", 10), f("b", 30), s("c", 20));
    let r = new_backoff_record(&BackoffRecord::default(), &[], &[&f1, &f2]);
    assert_eq!(
        r,
        BackoffRecord {
            failures_after_last_success: 2,
            last_failure_time: Some(at(30))
        }
    );
    let r2 = new_backoff_record(&r, &[&s1], &[&f1, &f2]);
    assert_eq!(
        r2,
        BackoffRecord {
            failures_after_last_success: 1,
            last_failure_time: Some(at(30))
        }
    );
    let base = Duration::from_secs(10);
    let max = Duration::from_secs(360);
    let rec = |n: u32| BackoffRecord {
        failures_after_last_success: n,
        last_failure_time: Some(at(0)),
    };
    assert_eq!(remaining_backoff(&rec(0), at(0), base, max), Duration::ZERO);
    assert_eq!(
        remaining_backoff(&rec(1), at(3), base, max),
        Duration::from_secs(7)
    );
    assert_eq!(
        remaining_backoff(&rec(3), at(0), base, max),
        Duration::from_secs(40)
    );
    assert_eq!(
        remaining_backoff(&rec(10), at(0), base, max),
        Duration::from_secs(360)
    );
    // finish time sources
    let deleted = pod(
        "d",
        "Running",
        5,
        json!({"deletionTimestamp": ts(100), "deletionGracePeriodSeconds": 30}),
        json!({}),
    );
    assert_eq!(finished_time(&deleted), at(70));
    assert_eq!(
        finished_time(&pod("e", "Failed", 5, json!({}), json!({}))),
        at(5)
    );
}

#[test]
fn too_many_active_pods_are_trimmed() {
    let j = job(
        json!({"parallelism": 1}),
        json!({"active": 2, "startTime": ts(0)}),
    );
    let old = pod(
        "j-old",
        "Running",
        0,
        json!({}),
        json!({"conditions": [{"type": "Ready", "status": "True"}]}),
    );
    let young = pod(
        "j-young",
        "Running",
        5,
        json!({}),
        json!({"conditions": [{"type": "Ready", "status": "True"}]}),
    );
    let p = sync(&j, &[&old, &young], 10);
    assert_eq!(p.delete, vec!["j-young"]);
    assert_eq!(p.status_after.active, Some(1));
    assert_eq!(p.status_after.ready, Some(1));
}

#[test]
fn active_deadline() {
    let j = job(
        json!({"activeDeadlineSeconds": 60}),
        json!({"active": 1, "startTime": ts(0)}),
    );
    let r = pod("j-a", "Running", 0, json!({}), json!({}));
    let p = sync(&j, &[&r], 20);
    assert_eq!(p.requeue_after, Some(Duration::from_secs(40)));
    let p = sync(&j, &[&r], 60);
    assert_eq!(p.delete, vec!["j-a"]);
    assert_eq!(
        cond_types(p.status_before.as_ref().unwrap()),
        vec!["FailureTarget:DeadlineExceeded"]
    );
}

#[test]
fn suspend_and_resume() {
    let j = job(json!({"suspend": true}), json!({}));
    let p = sync(&j, &[], 0);
    assert_eq!(p.create, 0);
    assert_eq!(p.status_after.start_time, None);
    assert_eq!(cond_types(&p.status_after), vec!["Suspended:JobSuspended"]);
    assert_eq!(p.events[0].reason, "Suspended");
    // suspending a running job deletes its pods
    let running = pod("j-a", "Running", 0, json!({}), json!({}));
    let j = job(
        json!({"suspend": true}),
        json!({"active": 1, "startTime": ts(0)}),
    );
    let p = sync(&j, &[&running], 5);
    assert_eq!(p.delete, vec!["j-a"]);
    assert_eq!(p.status_after.terminating, Some(1));
    // resume: Suspended=False, startTime reset, pods created
    let j = job(
        json!({"suspend": false}),
        serde_json::to_value(&p.status_after).unwrap(),
    );
    let p = sync(&j, &[], 50);
    assert_eq!(p.create, 1);
    assert_eq!(cond_types(&p.status_after), vec!["Suspended:JobResumed"]);
    assert_eq!(
        p.status_after.conditions.as_ref().unwrap()[0].status,
        "False"
    );
    assert_eq!(p.status_after.start_time, Some(Time(at(50))));
    assert_eq!(p.events[0].reason, "Resumed");
}

#[test]
fn success_criteria_met_is_carried_forward() {
    // SuccessCriteriaMet already set while a lingering pod terminates; a failure now does not
    // fail the job, the lingering active pod is deleted, Complete waits for termination.
    let status = json!({"succeeded": 1, "startTime": ts(0), "active": 1,
        "conditions": [{"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods"}]});
    let j = job(
        json!({"completions": 1, "parallelism": 2, "backoffLimit": 0}),
        status,
    );
    let lingering = pod("j-b", "Running", 0, json!({}), json!({}));
    let failed = pod("j-c", "Failed", 0, json!({}), json!({}));
    let p = sync(&j, &[&lingering, &failed], 40);
    assert_eq!(p.delete, vec!["j-b"]);
    assert_eq!(
        cond_types(&p.status_after),
        vec!["SuccessCriteriaMet:CompletionsReached"]
    );
    assert_eq!(p.status_after.terminating, Some(1));
}

/// Counters and limits at the ends of i32 (a status users may write through the status
/// subresource, completions/parallelism/backoffLimit/activeDeadlineSeconds at their maxima):
/// the sync saturates instead of overflowing.
#[test]
fn extreme_counts_and_limits_saturate() {
    let j = job(
        json!({"completions": i32::MAX, "parallelism": i32::MAX, "backoffLimit": i32::MAX,
               "activeDeadlineSeconds": i64::MAX}),
        json!({"succeeded": i32::MAX, "failed": i32::MAX, "active": i32::MAX, "startTime": ts(0),
               "uncountedTerminatedPods": {}}),
    );
    let done = pod("j-done", "Succeeded", 0, json!({}), json!({}));
    let bad = pod("j-bad", "Failed", 0, json!({}), json!({}));
    let run = pod("j-run", "Running", 1, json!({}), json!({}));
    let p = sync(&j, &[&done, &bad, &run], 10);
    let after = &p.status_after;
    assert!(
        after.succeeded.unwrap_or(0) >= 0 && after.failed.unwrap_or(0) >= 0,
        "{after:?}"
    );
    // Negative counters (never written by klab) count as what they say, without overflow.
    let j = job(
        json!({"completions": i32::MAX, "parallelism": 3}),
        json!({"succeeded": i32::MIN, "failed": i32::MIN, "startTime": ts(0)}),
    );
    let p = sync(&j, &[&done, &run], 10);
    assert!(p.create <= 2, "{}", p.create);
    // Back-off with a huge base and many failures saturates at the maximum.
    let rec = BackoffRecord {
        failures_after_last_success: u32::MAX,
        last_failure_time: Some(at(0)),
    };
    assert_eq!(
        remaining_backoff(&rec, at(0), Duration::MAX, Duration::MAX),
        Duration::MAX
    );
    assert_eq!(
        remaining_backoff(
            &rec,
            at(1),
            Duration::from_secs(u64::MAX / 2 + 1),
            Duration::MAX
        ),
        Duration::MAX - Duration::from_secs(1)
    );
    let rec = new_backoff_record(&rec, &[], &[&bad]);
    assert_eq!(rec.failures_after_last_success, u32::MAX);
}
