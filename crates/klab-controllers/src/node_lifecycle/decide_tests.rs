//! Table tests of the node lifecycle decisions, each naming the CP vector it covers.

use super::*;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::api::core::v1::{NodeSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

/// The upstream tests' fakeNow: 2015-01-01T12:00:00Z.
fn fake_now() -> Timestamp {
    "2015-01-01T12:00:00Z".parse().unwrap()
}

fn long_ago() -> Timestamp {
    "2012-01-01T00:00:00Z".parse().unwrap()
}

fn secs(s: i64) -> SignedDuration {
    SignedDuration::from_secs(s)
}

fn cond(type_: &str, status: &str, heartbeat: Timestamp, transition: Timestamp) -> NodeCondition {
    NodeCondition {
        type_: type_.into(),
        status: status.into(),
        last_heartbeat_time: Some(Time(heartbeat)),
        last_transition_time: Some(Time(transition)),
        ..Default::default()
    }
}

fn node(created: Timestamp, conditions: Vec<NodeCondition>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("node0".into()),
            uid: Some("uid0".into()),
            creation_timestamp: Some(Time(created)),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            conditions: (!conditions.is_empty()).then_some(conditions),
            ..Default::default()
        }),
    }
}

fn lease(renew: Timestamp) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some("node0".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            renew_time: Some(MicroTime(renew)),
            ..Default::default()
        }),
    }
}

fn healthy(hb: Timestamp) -> Vec<NodeCondition> {
    vec![
        cond("Ready", "True", hb, hb),
        cond("DiskPressure", "False", hb, hb),
    ]
}

#[test]
fn cp04_lease_renewal_alone_keeps_node_healthy() {
    let cfg = NodeLifecycleConfig::default();
    let n = node(long_ago(), healthy(fake_now()));
    let e1 = evaluate_health(None, &n, Some(&lease(fake_now())), fake_now(), &cfg);
    assert!(e1.write.is_none());
    let later = fake_now() + secs(3600);
    let e2 = evaluate_health(Some(&e1.record), &n, Some(&lease(later)), later, &cfg);
    assert!(e2.write.is_none(), "a renewed lease refreshes the probe");
    assert_eq!(e2.record.probe_timestamp, later);
    assert_eq!(e2.current.as_ref().map(|c| c.status.as_str()), Some("True"));
}

#[test]
fn cp05_status_heartbeat_alone_keeps_node_healthy() {
    let cfg = NodeLifecycleConfig::default();
    let n1 = node(long_ago(), healthy(fake_now()));
    let e1 = evaluate_health(None, &n1, Some(&lease(fake_now())), fake_now(), &cfg);
    let later = fake_now() + secs(3600);
    let n2 = node(long_ago(), healthy(later));
    let e2 = evaluate_health(Some(&e1.record), &n2, Some(&lease(fake_now())), later, &cfg);
    assert!(e2.write.is_none());
    assert_eq!(e2.record.probe_timestamp, later);
}

#[test]
fn stale_lease_and_status_write_unknown_cp01_at_55() {
    let cfg = NodeLifecycleConfig::default();
    let t0 = fake_now();
    let mut conds = healthy(t0);
    conds.push(cond("MemoryPressure", "False", t0, t0));
    conds.push(cond("PIDPressure", "False", t0, t0));
    conds.push(cond("NetworkUnavailable", "False", t0, t0));
    let n = node(long_ago(), conds);
    let l = lease(t0);
    // Passes at 0, 5, …, 50: nothing; 55: Unknown.
    let mut rec = None::<HealthRecord>;
    for s in (0..=50).step_by(5) {
        let e = evaluate_health(rec.as_ref(), &n, Some(&l), t0 + secs(s), &cfg);
        assert!(e.write.is_none(), "no write at {s}");
        rec = Some(e.record);
    }
    let now = t0 + secs(55);
    let e = evaluate_health(rec.as_ref(), &n, Some(&l), now, &cfg);
    let written = e.write.clone().expect("write at 55");
    assert_eq!(e.observed.status, "True");
    assert_eq!(
        e.current.as_ref().map(|c| c.status.as_str()),
        Some("Unknown")
    );
    for type_ in ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"] {
        let c = node_condition(Some(&written), type_).unwrap();
        assert_eq!(c.status, "Unknown", "{type_}");
        assert_eq!(c.reason.as_deref(), Some("NodeStatusUnknown"));
        assert_eq!(
            c.message.as_deref(),
            Some("Kubelet stopped posting node status.")
        );
        assert_eq!(c.last_transition_time, Some(Time(now)));
        assert_eq!(c.last_heartbeat_time, Some(Time(t0)), "heartbeat unchanged");
    }
    assert_eq!(
        node_condition(Some(&written), "NetworkUnavailable")
            .unwrap()
            .status,
        "False"
    );
    let rec2 = record_after_write(&e.record, written, Some(&l), now);
    assert_eq!(rec2.probe_timestamp, t0);
    assert_eq!(rec2.ready_transition_timestamp, now);
}

#[test]
fn cp02_grace_40s_gives_unknown_at_45() {
    let cfg = NodeLifecycleConfig {
        node_monitor_grace_period: Duration::from_secs(40),
        ..Default::default()
    };
    let t0 = fake_now();
    let n = node(long_ago(), healthy(t0));
    let l = lease(t0);
    let e = evaluate_health(None, &n, Some(&l), t0, &cfg);
    let e40 = evaluate_health(Some(&e.record), &n, Some(&l), t0 + secs(40), &cfg);
    assert!(e40.write.is_none(), "40 > 0 + 40 is false");
    let e45 = evaluate_health(Some(&e40.record), &n, Some(&l), t0 + secs(45), &cfg);
    assert!(e45.write.is_some());
}

#[test]
fn cp07_never_posted_status_created_long_ago() {
    let cfg = NodeLifecycleConfig::default();
    let n = node(long_ago(), vec![]);
    let e = evaluate_health(None, &n, None, fake_now(), &cfg);
    let written = e.write.expect("conditions appended");
    let conds = written.conditions.unwrap();
    let types: Vec<&str> = conds.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(
        types,
        ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"]
    );
    for c in &conds {
        assert_eq!(c.status, "Unknown");
        assert_eq!(c.reason.as_deref(), Some("NodeStatusNeverUpdated"));
        assert_eq!(
            c.message.as_deref(),
            Some("Kubelet never posted node status.")
        );
        assert_eq!(c.last_heartbeat_time, Some(Time(long_ago())));
        assert_eq!(c.last_transition_time, Some(Time(fake_now())));
    }
    // The observed Ready was the synthetic Unknown: no NodeNotReady, no MarkPodsNotReady.
    assert_eq!(e.observed.status, "Unknown");
    assert_eq!(
        pod_readiness_action(&e.observed.status, Some("Unknown"), false),
        (false, false)
    );
}

#[test]
fn cp08_new_node_without_status_protected_by_startup_grace() {
    let cfg = NodeLifecycleConfig::default();
    let t0 = fake_now();
    let n = node(t0, vec![]);
    let mut rec = None::<HealthRecord>;
    for s in (0..=60).step_by(5) {
        let e = evaluate_health(rec.as_ref(), &n, None, t0 + secs(s), &cfg);
        assert!(e.write.is_none(), "no write at {s}");
        assert_eq!(e.grace, Duration::from_secs(60));
        assert_eq!(e.record.probe_timestamp, t0, "probe stays at creation");
        rec = Some(e.record);
    }
    let e = evaluate_health(rec.as_ref(), &n, None, t0 + secs(65), &cfg);
    assert!(e.write.is_some(), "written at 65");
}

#[test]
fn cp09_lease_renewing_without_status_is_healthy() {
    let cfg = NodeLifecycleConfig::default();
    let n = node(long_ago(), vec![]);
    let e1 = evaluate_health(None, &n, Some(&lease(fake_now())), fake_now(), &cfg);
    assert!(e1.write.is_none());
    assert!(e1.current.is_none());
    let later = fake_now() + secs(3600);
    let e2 = evaluate_health(Some(&e1.record), &n, Some(&lease(later)), later, &cfg);
    assert!(e2.write.is_none());
    assert!(e2.current.is_none());
}

#[test]
fn first_observation_counts_any_lease_even_stale() {
    let cfg = NodeLifecycleConfig::default();
    let n = node(long_ago(), healthy(long_ago()));
    let e = evaluate_health(None, &n, Some(&lease(long_ago())), fake_now(), &cfg);
    assert_eq!(e.record.probe_timestamp, fake_now());
    assert!(e.write.is_none());
}

#[test]
fn heartbeat_change_refreshes_probe_on_that_pass_and_the_next() {
    // §1.4 step 4 quirk: the rebuilt record has no lease snapshot, so the unchanged lease is "new"
    // on the following pass.
    let cfg = NodeLifecycleConfig::default();
    let t0 = fake_now();
    let l = lease(t0);
    let e0 = evaluate_health(None, &node(long_ago(), healthy(t0)), Some(&l), t0, &cfg);
    let e1 = evaluate_health(
        Some(&e0.record),
        &node(long_ago(), healthy(t0 + secs(3))),
        Some(&l),
        t0 + secs(5),
        &cfg,
    );
    assert_eq!(e1.record.probe_timestamp, t0 + secs(5));
    assert!(e1.record.lease.is_none());
    let e2 = evaluate_health(
        Some(&e1.record),
        &node(long_ago(), healthy(t0 + secs(3))),
        Some(&l),
        t0 + secs(10),
        &cfg,
    );
    assert_eq!(e2.record.probe_timestamp, t0 + secs(10));
    let e3 = evaluate_health(
        Some(&e2.record),
        &node(long_ago(), healthy(t0 + secs(3))),
        Some(&l),
        t0 + secs(15),
        &cfg,
    );
    assert_eq!(
        e3.record.probe_timestamp,
        t0 + secs(10),
        "no refresh once the lease is remembered"
    );
}

#[test]
fn already_unknown_ready_means_no_write_even_if_other_conditions_change() {
    let cfg = NodeLifecycleConfig::default();
    let t0 = fake_now();
    let n = node(
        long_ago(),
        vec![
            cond("Ready", "Unknown", t0, t0),
            cond("MemoryPressure", "True", t0, t0),
        ],
    );
    let e = evaluate_health(None, &n, None, t0 + secs(100), &cfg);
    let e = evaluate_health(Some(&e.record), &n, None, t0 + secs(200), &cfg);
    assert!(
        e.write.is_none(),
        "Ready already Unknown: upstream writes nothing"
    );
}

#[test]
fn cp12_cp13_cp15_pod_readiness_actions() {
    // (observed, current, in retry set) -> (NodeNotReady event, MarkPodsNotReady)
    let cases = [
        ("True", Some("Unknown"), false, (true, true)), // CP-01: this pass flipped Ready
        ("True", None, false, (true, true)),
        ("False", Some("False"), false, (false, false)), // CP-13: kubelet-reported NotReady
        ("False", Some("Unknown"), false, (false, false)), // CP-15: observed False
        ("False", Some("False"), true, (false, true)),   // CP-12: retry although now False
        ("True", Some("True"), true, (false, false)),
        ("Unknown", Some("Unknown"), true, (false, true)),
    ];
    for (obs, cur, retry, want) in cases {
        assert_eq!(
            pod_readiness_action(obs, cur, retry),
            want,
            "{obs} {cur:?} {retry}"
        );
    }
}

fn t(key: &str, effect: &str) -> Taint {
    taint(key, effect)
}

#[test]
fn cp13_cp15_no_execute_actions() {
    use names::*;
    let ne_unreach = [t(TAINT_UNREACHABLE, EFFECT_NO_EXECUTE)];
    let ne_not_ready = [t(TAINT_NOT_READY, EFFECT_NO_EXECUTE)];
    let cases: [(&str, &[Taint], NoExecuteAction); 7] = [
        (
            "False",
            &[],
            NoExecuteAction::MarkForTainting {
                status: ReadyStatus::False,
            },
        ),
        (
            "False",
            &ne_unreach,
            NoExecuteAction::Swap {
                add: TAINT_NOT_READY,
                remove: TAINT_UNREACHABLE,
            },
        ),
        (
            "Unknown",
            &[],
            NoExecuteAction::MarkForTainting {
                status: ReadyStatus::Unknown,
            },
        ),
        (
            "Unknown",
            &ne_not_ready,
            NoExecuteAction::Swap {
                add: TAINT_UNREACHABLE,
                remove: TAINT_NOT_READY,
            },
        ),
        ("True", &ne_unreach, NoExecuteAction::MarkReachable),
        ("True", &[], NoExecuteAction::MarkReachable),
        ("Weird", &[], NoExecuteAction::Nothing),
    ];
    for (obs, taints, want) in cases {
        assert_eq!(no_execute_action(obs, taints), want, "{obs} {taints:?}");
    }
    assert!(requeue_before_tainting(ReadyStatus::Unknown, &[]));
    assert!(!requeue_before_tainting(ReadyStatus::Unknown, &ne_unreach));
    assert!(requeue_before_tainting(ReadyStatus::False, &ne_unreach));
}

#[test]
fn cp40_tainting_step_reads_current_ready() {
    use names::*;
    let t0 = fake_now();
    assert_eq!(tainting_step(None), TaintingStep::Done);
    let only_memory = node(long_ago(), vec![cond("MemoryPressure", "Unknown", t0, t0)]);
    assert_eq!(tainting_step(Some(&only_memory)), TaintingStep::Retry);
    let not_ready = node(long_ago(), vec![cond("Ready", "False", t0, t0)]);
    assert_eq!(
        tainting_step(Some(&not_ready)),
        TaintingStep::Swap {
            add: TAINT_NOT_READY,
            remove: TAINT_UNREACHABLE
        }
    );
    let unknown = node(long_ago(), vec![cond("Ready", "Unknown", t0, t0)]);
    assert_eq!(
        tainting_step(Some(&unknown)),
        TaintingStep::Swap {
            add: TAINT_UNREACHABLE,
            remove: TAINT_NOT_READY
        }
    );
    let healthy_again = node(long_ago(), healthy(t0));
    assert_eq!(tainting_step(Some(&healthy_again)), TaintingStep::Done);
}

fn with_taints(mut n: Node, taints: Vec<Taint>, unschedulable: bool) -> Node {
    n.spec = Some(NodeSpec {
        taints: Some(taints),
        unschedulable: Some(unschedulable),
        ..Default::default()
    });
    n
}

fn keys(ts: &[Taint]) -> Vec<String> {
    ts.iter().map(klab_api::taints::taint_to_string).collect()
}

#[test]
fn cp41_condition_to_no_schedule_taint() {
    let t0 = fake_now();
    let cases = [
        (
            vec![
                cond("Ready", "True", t0, t0),
                cond("NetworkUnavailable", "True", t0, t0),
            ],
            "node.kubernetes.io/network-unavailable:NoSchedule",
        ),
        (
            vec![cond("Ready", "False", t0, t0)],
            "node.kubernetes.io/not-ready:NoSchedule",
        ),
        (
            vec![cond("Ready", "Unknown", t0, t0)],
            "node.kubernetes.io/unreachable:NoSchedule",
        ),
    ];
    for (conds, want) in cases {
        let (add, remove) = no_schedule_taint_diff(&node(long_ago(), conds));
        assert_eq!(keys(&add), [want]);
        assert!(remove.is_empty());
    }
    // No Ready condition at all: neither not-ready nor unreachable.
    let (add, _) = no_schedule_taint_diff(&node(long_ago(), vec![]));
    assert!(add.is_empty());
}

#[test]
fn cp42_cordon_pressure_and_user_taints() {
    use names::*;
    let t0 = fake_now();
    // (a) cordon adds unschedulable with timeAdded = now; uncordon removes it.
    let n = with_taints(node(long_ago(), healthy(t0)), vec![], true);
    let (add, remove) = no_schedule_taint_diff(&n);
    assert_eq!(keys(&add), ["node.kubernetes.io/unschedulable:NoSchedule"]);
    let new = swap_taints(node_taints(&n), &add, &remove, t0 + secs(7)).unwrap();
    assert_eq!(new[0].time_added, Some(Time(t0 + secs(7))));
    let n = with_taints(node(long_ago(), healthy(t0)), new, false);
    let (add, remove) = no_schedule_taint_diff(&n);
    assert!(add.is_empty());
    assert_eq!(
        keys(&remove),
        ["node.kubernetes.io/unschedulable:NoSchedule"]
    );
    // (b) memory pressure then Unknown: memory-pressure removed, unreachable added.
    let n = with_taints(
        node(
            long_ago(),
            vec![
                cond("Ready", "Unknown", t0, t0),
                cond("MemoryPressure", "Unknown", t0, t0),
            ],
        ),
        vec![t(TAINT_MEMORY_PRESSURE, EFFECT_NO_SCHEDULE)],
        false,
    );
    let (add, remove) = no_schedule_taint_diff(&n);
    assert_eq!(keys(&add), ["node.kubernetes.io/unreachable:NoSchedule"]);
    assert_eq!(
        keys(&remove),
        ["node.kubernetes.io/memory-pressure:NoSchedule"]
    );
    // (c) a user NoExecute taint with a managed key and any other taints are untouched.
    let n = with_taints(
        node(long_ago(), healthy(t0)),
        vec![
            t(TAINT_NOT_READY, EFFECT_NO_EXECUTE),
            t("dedicated", EFFECT_NO_SCHEDULE),
        ],
        false,
    );
    assert_eq!(no_schedule_taint_diff(&n), (vec![], vec![]));
    assert_eq!(
        no_execute_action("True", node_taints(&n)),
        NoExecuteAction::MarkReachable
    );
}

#[test]
fn swap_taints_replaces_in_place_appends_and_removes() {
    use names::*;
    let t0 = fake_now();
    let existing = vec![
        t("a", EFFECT_NO_SCHEDULE),
        t(TAINT_NOT_READY, EFFECT_NO_EXECUTE),
        t("b", EFFECT_NO_EXECUTE),
    ];
    let new = swap_taints(
        &existing,
        &[t(TAINT_UNREACHABLE, EFFECT_NO_EXECUTE)],
        &[t(TAINT_NOT_READY, EFFECT_NO_EXECUTE)],
        t0,
    )
    .unwrap();
    assert_eq!(
        keys(&new),
        [
            "a:NoSchedule",
            "b:NoExecute",
            "node.kubernetes.io/unreachable:NoExecute"
        ]
    );
    // Re-adding an existing key+effect refreshes its timeAdded in place.
    let new2 = swap_taints(
        &new,
        &[t(TAINT_UNREACHABLE, EFFECT_NO_EXECUTE)],
        &[],
        t0 + secs(1),
    )
    .unwrap();
    assert_eq!(new2[2].time_added, Some(Time(t0 + secs(1))));
    // Nothing to do: no write.
    assert_eq!(
        swap_taints(&new, &[], &[t("zzz", EFFECT_NO_EXECUTE)], t0),
        None
    );
}

fn pod_with_conditions(conds: Vec<PodCondition>) -> Pod {
    Pod {
        status: Some(PodStatus {
            conditions: Some(conds),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn cp01_mark_pods_not_ready_updates_only_ready() {
    let t0 = fake_now();
    let ready = PodCondition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: Some("r".into()),
        last_transition_time: Some(Time(t0)),
        ..Default::default()
    };
    let cready = PodCondition {
        type_: "ContainersReady".into(),
        ..ready.clone()
    };
    let pod = pod_with_conditions(vec![cready.clone(), ready]);
    let now = t0 + secs(55);
    let conds = mark_pod_not_ready(&pod, now).expect("changed");
    assert_eq!(conds[0], cready, "ContainersReady untouched");
    assert_eq!(conds[1].status, "False");
    assert_eq!(conds[1].reason.as_deref(), Some("r"), "reason kept");
    assert_eq!(conds[1].last_transition_time, Some(Time(now)));
    // Already False: nothing to do. No Ready condition: untouched.
    assert_eq!(
        mark_pod_not_ready(&pod_with_conditions(conds), now + secs(5)),
        None
    );
    assert_eq!(
        mark_pod_not_ready(&pod_with_conditions(vec![cready]), now),
        None
    );
}

#[test]
fn os_arch_beta_labels_follow_ga_labels() {
    let with = |labels: &[(&str, &str)]| {
        let mut n = node(long_ago(), vec![]);
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        labels_to_reconcile(&n)
    };
    let got = with(&[
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
    ]);
    assert_eq!(
        got.get("beta.kubernetes.io/os").map(String::as_str),
        Some("linux")
    );
    assert_eq!(
        got.get("beta.kubernetes.io/arch").map(String::as_str),
        Some("amd64")
    );
    let got = with(&[
        ("kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/os", "windows"),
    ]);
    assert_eq!(got.len(), 1);
    assert_eq!(got["beta.kubernetes.io/os"], "linux");
    assert!(
        with(&[
            ("kubernetes.io/os", "linux"),
            ("beta.kubernetes.io/os", "linux")
        ])
        .is_empty()
    );
    assert!(
        with(&[("beta.kubernetes.io/arch", "arm64")]).is_empty(),
        "no GA label: ignored"
    );
    assert!(labels_to_reconcile(&node(long_ago(), vec![])).is_empty());
}
