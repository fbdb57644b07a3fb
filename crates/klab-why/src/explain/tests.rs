//! Table tests of the explanations on hand-written snapshots: one object changed per case.

use super::*;
use crate::{Settings, render_text};
use serde_json::json;

const EPOCH: &str = "2026-01-01T00:00:00Z";

fn at(secs: i64) -> String {
    rfc(saturating_add_secs(EPOCH.parse().unwrap(), secs))
}

fn node(
    name: &str,
    ready: &str,
    transition: i64,
    heartbeat: i64,
    taints: serde_json::Value,
) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": "a"}},
        "spec": {"taints": taints},
        "status": {"conditions": [{
            "type": "Ready", "status": ready,
            "reason": if ready == "True" {"KubeletReady"} else {"NodeStatusUnknown"},
            "message": if ready == "True" {"kubelet is posting ready status"} else {"Kubelet stopped posting node status."},
            "lastHeartbeatTime": at(heartbeat), "lastTransitionTime": at(transition)
        }]}
    }))
    .unwrap()
}

fn lease(name: &str, renewed: i64) -> k8s_openapi::api::coordination::v1::Lease {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": name, "renewTime": format!("{}.000000Z", at(renewed).trim_end_matches('Z'))}
    }))
    .unwrap()
}

fn default_tolerations() -> serde_json::Value {
    json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    ])
}

fn pod(name: &str, node: &str, owner: Option<(&str, &str, &str)>, extra: serde_json::Value) -> Pod {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                     "labels": {"app": "web"}, "creationTimestamp": at(0)},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}],
                 "tolerations": default_tolerations()},
        "status": {"phase": "Running",
                   "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": "c", "image": "nginx", "imageID": "", "ready": true,
                                          "restartCount": 0, "state": {"running": {}}}]}
    });
    if let Some((kind, oname, uid)) = owner {
        v["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "apps/v1", "kind": kind, "name": oname, "uid": uid, "controller": true
        }]);
    }
    merge(&mut v, extra);
    serde_json::from_value(v).unwrap()
}

fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
    match (a, b) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn unreachable_taints(added: i64) -> serde_json::Value {
    json!([
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": at(added)},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": at(added)}
    ])
}

/// Three nodes in one zone; n2 lost at 30 s, NotReady at 85 s, tainted at 90 s.
fn story(now: i64, n2_ready: bool) -> Snapshot {
    let n2 = if n2_ready {
        node("n2", "True", 0, 30, json!([]))
    } else {
        node("n2", "Unknown", 85, 30, unreachable_taints(90))
    };
    Snapshot {
        now: EPOCH.parse::<Timestamp>().unwrap() + SignedDuration::from_secs(now),
        nodes: vec![
            node("n1", "True", 0, now, json!([])),
            n2,
            node("n3", "True", 0, now, json!([])),
        ],
        leases: Some(vec![lease("n1", now), lease("n2", 30), lease("n3", now)]),
        settings: Settings::default(),
        ..Default::default()
    }
}

fn text(snap: &Snapshot, kind: Kind, name: &str) -> String {
    let t = Target {
        kind,
        namespace: if kind == Kind::Node { "" } else { "default" }.into(),
        name: name.into(),
    };
    render_text(&explain(snap, &t, TimeStyle::Elapsed(EPOCH.parse().unwrap())).unwrap())
}

#[test]
fn pod_on_a_silent_node_counts_down_to_not_ready() {
    let mut s = story(70, true);
    s.pods = vec![pod("web-1", "n2", None, json!({}))];
    assert_eq!(
        text(&s, Kind::Pod, "web-1"),
        "Pod default/web-1: Running on n2 (stuck)
  - node n2 is Ready but silent: Lease last renewed 30.000s (40s ago), grace 50s; after the grace period the node lifecycle controller marks it NotReady (Ready=Unknown) at ≈80.000s (in 10s, at its next pass every 5s)
  - Running and Ready on n2
"
    );
}

#[test]
fn pod_on_a_tainted_node_counts_down_to_eviction() {
    let mut s = story(120, false);
    s.pods = vec![pod("web-1", "n2", None, json!({}))];
    assert_eq!(
        text(&s, Kind::Pod, "web-1"),
        "Pod default/web-1: Running on n2 (stuck)
  - node n2 NotReady since 85.000s, Ready=Unknown (NodeStatusUnknown: Kubelet stopped posting node status.); Lease last renewed 30.000s (1m30s ago), grace 50s
  - taint node.kubernetes.io/unreachable:NoExecute added at 90.000s
  → this pod tolerates node.kubernetes.io/unreachable:NoExecute for 300s → evicted by the taint eviction controller at 390.000s (in 4m30s)
"
    );
}

#[test]
fn toleration_variants() {
    let cases: Vec<(serde_json::Value, &str)> = vec![
        (
            json!([]),
            "this pod does not tolerate node.kubernetes.io/unreachable:NoExecute: the taint eviction controller deletes it at once",
        ),
        (
            json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]),
            "this pod tolerates node.kubernetes.io/unreachable:NoExecute without a limit: never evicted; it stays bound to n2 until the node returns",
        ),
        (
            json!([{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
                   {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600}]),
            "this pod tolerates node.kubernetes.io/unreachable:NoExecute for 60s → evicted by the taint eviction controller at 150.000s (in 30s)",
        ),
        (
            json!([{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": i64::MAX}]),
            "this pod tolerates node.kubernetes.io/unreachable:NoExecute for 9223372036854775807s → evicted by the taint eviction controller at",
        ),
    ];
    for (tolerations, want) in cases {
        let mut s = story(120, false);
        s.pods = vec![pod(
            "web-1",
            "n2",
            None,
            json!({"spec": {"tolerations": tolerations}}),
        )];
        let got = text(&s, Kind::Pod, "web-1");
        assert!(got.contains(want), "{got}");
    }
}

#[test]
fn terminating_on_a_dead_node_says_what_ends_it() {
    let mut s = story(400, false);
    s.pods = vec![pod(
        "web-1",
        "n2",
        Some(("StatefulSet", "web", "uid-sts")),
        json!({
            "metadata": {"deletionTimestamp": at(420), "deletionGracePeriodSeconds": 30},
            "status": {"conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                 "message": "Taint manager: deleting due to NoExecute taint"}]}
        }),
    )];
    let got = text(&s, Kind::Pod, "web-1");
    assert_eq!(
        got,
        "Pod default/web-1: Terminating on n2 (stuck)
  - node n2 NotReady since 85.000s, Ready=Unknown (NodeStatusUnknown: Kubelet stopped posting node status.); Lease last renewed 30.000s (6m10s ago), grace 50s
  - taint node.kubernetes.io/unreachable:NoExecute added at 90.000s
  - Terminating since 390.000s (DeletionByTaintManager: Taint manager: deleting due to NoExecute taint), grace period 30s
  → no kubelet confirms the termination because node n2 is NotReady; it ends when the node returns, the node is deleted (pod GC after 40s), the out-of-service taint is added (kubectl taint node n2 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute), or with kubectl delete pod web-1 -n default --force --grace-period=0
  - StatefulSet web cannot create web-1 elsewhere: the old web-1 still exists
"
    );
    // With the out-of-service taint, pod GC takes it at its next pass.
    s.nodes[1]
        .spec
        .as_mut()
        .unwrap()
        .taints
        .as_mut()
        .unwrap()
        .push(Taint {
            key: names::TAINT_OUT_OF_SERVICE.into(),
            value: Some("nodeshutdown".into()),
            effect: "NoExecute".into(),
            time_added: None,
        });
    assert!(
        text(&s, Kind::Pod, "web-1").contains("has the node.kubernetes.io/out-of-service taint: the pod garbage collector force-deletes the pod at its next pass (every 20s)")
    );
    // The node deleted: pod GC after its quarantine.
    s.nodes.remove(1);
    let got = text(&s, Kind::Pod, "web-1");
    assert!(got.contains("node n2 no longer exists: the pod garbage collector force-deletes the pod 40s after it first sees it orphaned"), "{got}");
}

#[test]
fn terminating_on_a_ready_node_counts_down_the_grace_period() {
    let mut s = story(10, true);
    s.pods = vec![pod(
        "web-1",
        "n2",
        None,
        json!({"metadata": {"deletionTimestamp": at(35), "deletionGracePeriodSeconds": 30}}),
    )];
    let e = explain(
        &s,
        &Target::parse("pod/web-1", "default").unwrap(),
        TimeStyle::Wall,
    )
    .unwrap();
    assert!(!e.stuck);
    assert_eq!(
        e.causes.last().unwrap().text,
        "the kubelet on n2 is stopping the containers: the grace period ends at 00:00:35 (in 25s)"
    );
    assert_eq!(
        e.causes.last().unwrap().due.as_deref(),
        Some("2026-01-01T00:00:35Z")
    );
}

#[test]
fn replicaset_replacement_and_recreate() {
    let mut s = story(400, false);
    let deleting = json!({
        "metadata": {"deletionTimestamp": at(420), "deletionGracePeriodSeconds": 30}
    });
    s.pods = vec![
        pod(
            "nginx-a",
            "n2",
            Some(("ReplicaSet", "nginx-1", "uid-rs")),
            deleting.clone(),
        ),
        pod(
            "nginx-b",
            "n3",
            Some(("ReplicaSet", "nginx-1", "uid-rs")),
            json!({"metadata": {"creationTimestamp": at(390)}}),
        ),
    ];
    let got = text(&s, Kind::Pod, "nginx-a");
    assert!(
        got.contains(
            "  - ReplicaSet nginx-1 created replacement nginx-b at 390.000s (Running on n3)\n"
        ),
        "{got}"
    );
    // Owned by a Recreate Deployment: no replacement until the old pod is gone.
    s.replica_sets = vec![serde_json::from_value(json!({
        "metadata": {"name": "nginx-1", "namespace": "default", "uid": "uid-rs",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx", "uid": "uid-d", "controller": true}]},
        "spec": {"replicas": 2, "selector": {}}
    }))
    .unwrap()];
    s.deployments = vec![serde_json::from_value(json!({
        "metadata": {"name": "nginx", "namespace": "default", "uid": "uid-d"},
        "spec": {"replicas": 2, "selector": {}, "template": {}, "strategy": {"type": "Recreate"}}
    }))
    .unwrap()];
    s.pods.truncate(1);
    let got = text(&s, Kind::Pod, "nginx-a");
    assert!(
        got.contains("Deployment nginx uses the Recreate strategy: it creates new pods only once every old pod is gone"),
        "{got}"
    );
    let d = text(&s, Kind::Deployment, "nginx");
    assert!(d.starts_with("Deployment default/nginx: 0/2 ready (stuck)\n  - 2 of 2 replicas are not Ready\n  - 1 pod(s) Terminating"), "{d}");
    assert!(d.contains("strategy Recreate"), "{d}");
    assert!(
        d.contains("  Pod default/nginx-a: Terminating on n2 (stuck)"),
        "{d}"
    );
}

#[test]
fn many_replacements_name_the_first_three_and_count_the_rest() {
    let mut s = story(400, false);
    s.pods = vec![pod(
        "nginx-a",
        "n2",
        Some(("ReplicaSet", "nginx-1", "uid-rs")),
        json!({"metadata": {"deletionTimestamp": at(330), "deletionGracePeriodSeconds": 30}}),
    )];
    // Six replacements, named against their creation order; one of them is still Pending.
    for (name, created) in [
        ("r-f", 305),
        ("r-e", 310),
        ("r-d", 315),
        ("r-c", 320),
        ("r-b", 325),
        ("r-a", 330),
    ] {
        let pending =
            json!({"status": {"phase": "Pending", "conditions": [], "containerStatuses": []}});
        s.pods.push(pod(
            name,
            "n3",
            Some(("ReplicaSet", "nginx-1", "uid-rs")),
            merged(
                json!({"metadata": {"creationTimestamp": at(created)}}),
                if name == "r-b" { pending } else { json!({}) },
            ),
        ));
    }
    // Created before the deletion was asked for: not a replacement.
    s.pods.push(pod(
        "older",
        "n3",
        Some(("ReplicaSet", "nginx-1", "uid-rs")),
        json!({"metadata": {"creationTimestamp": at(299)}}),
    ));
    let got = text(&s, Kind::Pod, "nginx-a");
    assert!(
        got.ends_with(
            "  - ReplicaSet nginx-1 created replacement r-f at 305.000s (Running on n3)
  - ReplicaSet nginx-1 created replacement r-e at 310.000s (Running on n3)
  - ReplicaSet nginx-1 created replacement r-d at 315.000s (Running on n3)
  - ReplicaSet nginx-1 created 3 more replacements (2 Running)
"
        ),
        "{got}"
    );
    // One more than shown is said in the singular.
    s.pods
        .retain(|p| !["r-a", "r-b"].contains(&p.metadata.name.as_deref().unwrap_or_default()));
    let got = text(&s, Kind::Pod, "nginx-a");
    assert!(
        got.ends_with("  - ReplicaSet nginx-1 created 1 more replacement (1 Running)\n"),
        "{got}"
    );
}

fn merged(mut a: serde_json::Value, b: serde_json::Value) -> serde_json::Value {
    merge(&mut a, b);
    a
}

#[test]
fn pending_quotes_the_scheduler() {
    let mut s = story(10, true);
    s.pods = vec![pod(
        "big",
        "",
        None,
        json!({"spec": {"nodeName": null}, "status": {"phase": "Pending", "containerStatuses": null, "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": at(5),
             "message": "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."}
        ]}}),
    )];
    assert_eq!(
        text(&s, Kind::Pod, "big"),
        "Pod default/big: Pending (stuck)
  - Pending since 5.000s: 0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.
"
    );
}

#[test]
fn container_creating_quotes_multi_attach() {
    let mut s = story(10, true);
    s.pods = vec![pod(
        "web-0",
        "n3",
        None,
        json!({"status": {"phase": "Pending", "conditions": [], "containerStatuses": [
            {"name": "c", "image": "nginx", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"waiting": {"reason": "ContainerCreating"}}}]}}),
    )];
    s.events = vec![serde_json::from_value(json!({
        "metadata": {"name": "web-0.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": "default", "uid": "uid-web-0"},
        "reason": "FailedAttachVolume", "type": "Warning", "lastTimestamp": at(8),
        "message": "Multi-Attach error for volume \"pvc-1\" Volume is already exclusively attached to one node and can't be attached to another"
    }))
    .unwrap()];
    assert_eq!(
        text(&s, Kind::Pod, "web-0"),
        "Pod default/web-0: ContainerCreating on n3 (stuck)
  - ContainerCreating: FailedAttachVolume at 8.000s: Multi-Attach error for volume \"pvc-1\" Volume is already exclusively attached to one node and can't be attached to another
"
    );
}

#[test]
fn evicted_by_the_kubelet() {
    let mut s = story(10, true);
    s.pods = vec![pod(
        "hog",
        "n1",
        None,
        json!({"status": {"phase": "Failed", "reason": "Evicted",
            "message": "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. "}}),
    )];
    let e = explain(
        &s,
        &Target::parse("po/hog", "default").unwrap(),
        TimeStyle::Wall,
    )
    .unwrap();
    assert!(!e.stuck);
    assert_eq!(e.state, "Evicted on n1");
    assert_eq!(
        e.causes[0].text,
        "Evicted by the kubelet on n1: The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. "
    );
}

#[test]
fn node_lists_its_pods_fates_and_its_zone() {
    let mut s = story(120, false);
    s.pods = vec![
        pod("web-1", "n2", None, json!({})),
        pod("web-2", "n1", None, json!({})),
    ];
    assert_eq!(
        text(&s, Kind::Node, "n2"),
        "Node n2: NotReady (stuck)
  - node n2 NotReady since 85.000s, Ready=Unknown (NodeStatusUnknown: Kubelet stopped posting node status.); Lease last renewed 30.000s (1m30s ago), grace 50s
  - taint node.kubernetes.io/unreachable:NoExecute added at 90.000s
  - taint node.kubernetes.io/unreachable:NoSchedule added at 90.000s
  - zone a is Normal (2 of 3 nodes Ready): NoExecute taints are added at 0.1 nodes/s
  Pod default/web-1: Running on n2 (stuck)
    → this pod tolerates node.kubernetes.io/unreachable:NoExecute for 300s → evicted by the taint eviction controller at 390.000s (in 4m30s)
"
    );
    let healthy = text(&s, Kind::Node, "n1");
    assert!(healthy.starts_with("Node n1: Ready\n"), "{healthy}");
    assert!(
        healthy.contains("  Pod default/web-2: Running on n1\n    - Running and Ready on n1\n"),
        "{healthy}"
    );
}

#[test]
fn zone_states_decide_whether_taints_come() {
    // Every node of the only zone is down: master disruption mode, no NoExecute taints.
    let mut s = story(120, false);
    for n in &mut s.nodes {
        *n = node(
            n.metadata.name.as_deref().unwrap(),
            "Unknown",
            85,
            30,
            json!([]),
        );
    }
    s.pods = vec![pod("web-1", "n2", None, json!({}))];
    let got = text(&s, Kind::Pod, "web-1");
    assert!(
        got.contains(
            "zone a is FullDisruption (0 of 3 nodes Ready): every zone is fully disrupted"
        ),
        "{got}"
    );
    assert!(
        got.contains("no eviction while the zone stays disrupted"),
        "{got}"
    );
    // One node down, not tainted yet: the taint comes at the next pass.
    let mut s = story(86, false);
    s.nodes[1] = node("n2", "Unknown", 85, 30, json!([]));
    s.pods = vec![pod("web-1", "n2", None, json!({}))];
    let got = text(&s, Kind::Pod, "web-1");
    assert!(got.contains("→ the node lifecycle controller adds node.kubernetes.io/unreachable:NoExecute to n2 at its next pass (every 5s, rate-limited per zone); this pod tolerates it for 300s, then it is evicted"), "{got}");
}

#[test]
fn statefulset_names_missing_ordinals() {
    let mut s = story(400, false);
    s.stateful_sets = vec![
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "uid-sts"},
            "spec": {"replicas": 3, "selector": {}, "template": {}, "serviceName": "web"}
        }))
        .unwrap(),
    ];
    let owner = Some(("StatefulSet", "web", "uid-sts"));
    s.pods = vec![
        pod("web-0", "n1", owner, json!({})),
        pod(
            "web-1",
            "n2",
            owner,
            json!({"metadata": {"deletionTimestamp": at(420), "deletionGracePeriodSeconds": 30}}),
        ),
    ];
    let got = text(&s, Kind::StatefulSet, "web");
    assert!(got.starts_with("StatefulSet default/web: 1/3 ready (stuck)\n  - 2 of 3 replicas are not Ready\n  - StatefulSet web cannot create web-1: the old web-1 still exists (Terminating)\n  - web-2 does not exist: with podManagementPolicy OrderedReady it waits for web-1 to be Running and Ready\n"), "{got}");
}

#[test]
fn unknown_objects_and_targets() {
    let s = story(10, true);
    let e = explain(
        &s,
        &Target::parse("pod/nope", "default").unwrap(),
        TimeStyle::Wall,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "pods \"nope\" not found");
    let e = explain(
        &s,
        &Target::parse("deploy/x", "default").unwrap(),
        TimeStyle::Wall,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "deployments.apps \"x\" not found");
    assert!(
        Target::parse("web-1", "default")
            .unwrap_err()
            .contains("expected KIND/NAME")
    );
    assert!(
        Target::parse("svc/web", "default")
            .unwrap_err()
            .contains("cannot explain \"svc\"")
    );
    assert!(Target::parse("pod/", "default").is_err());
    assert_eq!(Target::parse("no/n2", "ignored").unwrap().namespace, "");
}

#[test]
fn unreadable_lists_are_named() {
    let mut s = story(120, false);
    s.leases = None;
    s.unreadable = vec!["leases.coordination.k8s.io: forbidden".into()];
    s.pods = vec![pod("web-1", "n2", None, json!({}))];
    let got = text(&s, Kind::Pod, "web-1");
    assert!(got.contains("Leases could not be read"), "{got}");
    assert!(
        got.ends_with("  ! could not read leases.coordination.k8s.io: forbidden\n"),
        "{got}"
    );
}

#[test]
fn settings_flags() {
    let mut st = Settings::default();
    assert_eq!(st.set_flag("node-monitor-grace-period", "40s"), Ok(true));
    assert_eq!(st.node_monitor_grace_period.as_secs(), 40);
    assert!(st.known);
    assert_eq!(st.set_flag("concurrent-deployment-syncs", "5"), Ok(false));
    assert!(st.set_flag("node-eviction-rate", "fast").is_err());
    assert!(st.set_flag("node-eviction-rate", "NaN").is_err());
}

#[test]
fn json_and_yaml_carry_the_same_causes() {
    let mut s = story(120, false);
    s.pods = vec![pod("web-1", "n2", None, json!({}))];
    let e = explain(
        &s,
        &Target::parse("pod/web-1", "default").unwrap(),
        TimeStyle::Wall,
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&crate::render_json(&e)).unwrap();
    assert_eq!(v["kind"], "Pod");
    assert_eq!(v["stuck"], true);
    assert_eq!(v["causes"][2]["about"], "next");
    assert_eq!(v["causes"][2]["due"], "2026-01-01T00:06:30Z");
    let y = crate::render_yaml(&e);
    assert!(
        y.contains("due: 2026-01-01T00:06:30Z") || y.contains("due: \"2026-01-01T00:06:30Z\""),
        "{y}"
    );
}

#[test]
fn controller_manager_command_lines() {
    let mut st = Settings::default();
    st.apply_args([
        "kube-controller-manager",
        "--node-monitor-grace-period=40s",
        "--node-eviction-rate",
        "0.2",
        "--node-monitor-period=bogus",
        "--leader-elect=true",
    ]);
    assert_eq!(st.node_monitor_grace_period.as_secs(), 40);
    assert_eq!(st.node_eviction_rate, 0.2);
    assert_eq!(st.node_monitor_period.as_secs(), 5);
    assert!(st.known);
}

#[test]
fn a_finished_pod_on_a_dead_node_is_not_stuck() {
    let mut s = story(200, false);
    s.pods = vec![pod(
        "w",
        "n2",
        None,
        json!({"status": {"phase": "Failed", "reason": "Terminated",
            "message": "Pod was terminated in response to imminent node shutdown."}}),
    )];
    let e = explain(
        &s,
        &Target::parse("pod/w", "default").unwrap(),
        TimeStyle::Wall,
    )
    .unwrap();
    assert!(!e.stuck, "{e:?}");
    assert_eq!(
        e.causes.last().unwrap().text,
        "Failed (Terminated): Pod was terminated in response to imminent node shutdown."
    );
}

#[test]
fn a_pod_bound_after_the_taint_counts_from_its_binding() {
    let mut s = story(200, false);
    s.pods = vec![pod(
        "late",
        "n2",
        None,
        json!({"metadata": {"creationTimestamp": at(118)},
               "status": {"conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at(120)}]}}),
    )];
    let got = text(&s, Kind::Pod, "late");
    assert!(
        got.contains("for 300s → evicted by the taint eviction controller at 420.000s (in 3m40s)"),
        "{got}"
    );
}
