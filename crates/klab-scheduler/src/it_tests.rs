//! Virtual-time tests of the scheduler against klab's in-process API server: spreading a
//! 3-replica set, refusing a tainted node with the exact upstream message, binding once the
//! taint goes, undoing and retrying a Binding the API server refused, and binding more pods at
//! once than a client queues requests.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use klab_api::DetRng;
use klab_apiserver::identity::Identity;

use crate::{SchedulerConfig, run};

async fn add_node(admin: &kube::Client, name: &str, cpu: &str, taints: serde_json::Value) {
    let nodes: Api<Node> = Api::all(admin.clone());
    let n: Node = serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": taints}}),
    )
    .unwrap();
    nodes.create(&PostParams::default(), &n).await.unwrap();
    let status = json!({"status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
        "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}]}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

fn replica(name: &str, cpu: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-uid", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}}))
    .unwrap()
}

fn node_of(p: &Pod) -> Option<String> {
    p.spec.as_ref().and_then(|s| s.node_name.clone())
}

#[tokio::test(start_paused = true)]
async fn spreads_three_replicas_over_three_nodes() {
    let server = klab_apiserver::testing::memory_server().await;
    let clock = server.clock().clone();
    let admin = kube::Client::new(server.router_as(Identity::admin()), "default");
    for n in ["n1", "n2", "n3"] {
        add_node(&admin, n, "4", json!([])).await;
    }
    let sched = kube::Client::new(server.router_as(Identity::admin()), "default");
    spawn_scheduler(sched, &clock, 7);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    for i in 0..3 {
        pods.create(
            &PostParams::default(),
            &replica(&format!("web-{i}"), "100m"),
        )
        .await
        .unwrap();
    }
    // Pods for another scheduler, and gated pods, are left alone.
    let mut other = replica("other", "100m");
    other.spec.as_mut().unwrap().scheduler_name = Some("my-scheduler".into());
    pods.create(&PostParams::default(), &other).await.unwrap();
    let start = clock.elapsed();
    clock.sleep(Duration::from_secs(1)).await;
    assert_eq!(
        clock.elapsed() - start,
        Duration::from_secs(1),
        "virtual time advanced"
    );
    assert_eq!(node_of(&pods.get("other").await.unwrap()), None);
    pods.delete("other", &Default::default()).await.unwrap();
    let list = pods.list(&ListParams::default()).await.unwrap();
    let nodes: BTreeSet<String> = list.items.iter().filter_map(node_of).collect();
    assert_eq!(
        nodes,
        BTreeSet::from(["n1".to_string(), "n2".to_string(), "n3".to_string()])
    );
    for p in &list.items {
        let conds = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        assert!(
            conds
                .iter()
                .any(|c| c.type_ == "PodScheduled" && c.status == "True"),
            "{:?}",
            p.metadata.name
        );
    }
    // events.k8s.io/v1 Scheduled events, as upstream kube-scheduler writes them
    let ar = kube::api::ApiResource {
        group: "events.k8s.io".into(),
        version: "v1".into(),
        api_version: "events.k8s.io/v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
    };
    let events: Api<DynamicObject> = Api::namespaced_with(admin.clone(), "default", &ar);
    let evs = events.list(&ListParams::default()).await.unwrap();
    let notes: BTreeSet<String> = evs
        .items
        .iter()
        .filter(|e| e.data["reason"] == "Scheduled")
        .map(|e| e.data["note"].as_str().unwrap_or("").to_string())
        .collect();
    // The same events seen through core/v1 (what `kubectl describe pod` reads).
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(admin.clone(), "default");
    let core_events = core.list(&ListParams::default()).await.unwrap().items;
    let scheduled: Vec<_> = core_events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Scheduled"))
        .collect();
    assert_eq!(scheduled.len(), 3);
    assert!(scheduled.iter().all(|e| e.reporting_component.as_deref()
        == Some("default-scheduler")
        && e.type_.as_deref() == Some("Normal")));
    for p in &list.items {
        let want = format!(
            "Successfully assigned default/{} to {}",
            p.metadata.name.as_deref().unwrap(),
            node_of(p).unwrap()
        );
        assert!(notes.contains(&want), "missing event {want:?} in {notes:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn refuses_tainted_and_full_nodes_then_binds_when_the_taint_goes() {
    let server = klab_apiserver::testing::memory_server().await;
    let clock = server.clock().clone();
    let admin = kube::Client::new(server.router_as(Identity::admin()), "default");
    add_node(
        &admin,
        "n1",
        "4",
        json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]),
    )
    .await;
    add_node(&admin, "n2", "1", json!([])).await;
    add_node(&admin, "n3", "1", json!([])).await;
    let sched = kube::Client::new(server.router_as(Identity::admin()), "default");
    spawn_scheduler(sched, &clock, 7);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    pods.create(&PostParams::default(), &replica("big", "1500m"))
        .await
        .unwrap();
    clock.sleep(Duration::from_secs(5)).await;
    let p = pods.get("big").await.unwrap();
    assert_eq!(node_of(&p), None);
    let cond = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap();
    assert_eq!(cond.status, "False");
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(
        cond.message.as_deref(),
        Some(
            "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 2 Insufficient cpu. \
             preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod."
        )
    );
    let ar = kube::api::ApiResource {
        group: "events.k8s.io".into(),
        version: "v1".into(),
        api_version: "events.k8s.io/v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
    };
    let events: Api<DynamicObject> = Api::namespaced_with(admin.clone(), "default", &ar);
    let failed: Vec<DynamicObject> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.data["reason"] == "FailedScheduling")
        .collect();
    // One attempt, no retry loop: nothing changed in the cluster for 5 s.
    assert_eq!(failed.len(), 1);
    let e = &failed[0].data;
    assert_eq!(e["type"], "Warning");
    assert_eq!(e["action"], "Scheduling");
    assert_eq!(e["reportingController"], "default-scheduler");
    assert_eq!(e["note"].as_str(), cond.message.as_deref());
    assert!(e.get("series").is_none_or(|s| s.is_null()));
    let t_fail = clock.elapsed();
    // Heal n1 (taint removed): the queueing hint moves the pod and it binds without waiting.
    let nodes: Api<Node> = Api::all(admin.clone());
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"taints": null}})),
        )
        .await
        .unwrap();
    let healed_at = clock.elapsed();
    clock.sleep(Duration::from_millis(10)).await;
    let p = pods.get("big").await.unwrap();
    assert_eq!(node_of(&p).as_deref(), Some("n1"));
    assert!(healed_at >= t_fail);
}

/// Places six identical replicas on three identical nodes (ties everywhere) and returns where
/// each went.
async fn placements(seed: u64) -> Vec<(String, String)> {
    let server = klab_apiserver::testing::memory_server().await;
    let clock = server.clock().clone();
    let admin = kube::Client::new(server.router_as(Identity::admin()), "default");
    for n in ["n1", "n2", "n3"] {
        add_node(&admin, n, "4", json!([])).await;
    }
    let sched = kube::Client::new(server.router_as(Identity::admin()), "default");
    let handle = spawn_scheduler(sched, &clock, seed);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    for i in 0..6 {
        pods.create(
            &PostParams::default(),
            &replica(&format!("web-{i}"), "100m"),
        )
        .await
        .unwrap();
    }
    clock.sleep(Duration::from_secs(1)).await;
    handle.abort();
    let mut out: Vec<(String, String)> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| {
            (
                p.metadata.name.clone().unwrap(),
                node_of(p).unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(start_paused = true)]
async fn same_seed_same_placements() {
    let a = placements(11).await;
    assert_eq!(a, placements(11).await);
    // two per node: default spreading
    for n in ["n1", "n2", "n3"] {
        assert_eq!(a.iter().filter(|(_, node)| node == n).count(), 2, "{a:?}");
    }
}

/// Runs the scheduler on `client` (for its writes and its events alike) with the default
/// configuration and the generator seeded with `seed`.
fn spawn_scheduler(
    client: kube::Client,
    clock: &klab_api::clock::Clock,
    seed: u64,
) -> tokio::task::JoinHandle<Result<(), crate::SchedulerError>> {
    tokio::spawn(run(
        client.clone(),
        client,
        clock.clone(),
        DetRng::seeded(seed),
        SchedulerConfig::default(),
    ))
}

fn scheduled_message(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")?
        .message
        .clone()
}

fn with_claims(name: &str, claims: &[&str]) -> Pod {
    let mut p = replica(name, "100m");
    let vols: Vec<_> = claims
        .iter()
        .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    p.spec.as_mut().unwrap().volumes = serde_json::from_value(json!(vols)).unwrap();
    p
}

/// A second pod on a ReadWriteOncePod claim is refused on every node with VolumeRestrictions'
/// message (no preemption), and scheduled once the first pod is gone; a node whose CSINode allows
/// one csi.klab.dev volume refuses a pod bringing a second one (NodeVolumeLimits).
#[tokio::test(start_paused = true)]
async fn read_write_once_pod_and_node_volume_limits() {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::CSINode;
    let server = klab_apiserver::testing::memory_server().await;
    let clock = server.clock().clone();
    let admin = kube::Client::new(server.router_as(Identity::admin()), "default");
    add_node(&admin, "n1", "4", json!([])).await;
    let pvs: Api<PersistentVolume> = Api::all(admin.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), "default");
    for (claim, mode) in [
        ("solo", "ReadWriteOncePod"),
        ("a", "ReadWriteOnce"),
        ("b", "ReadWriteOnce"),
    ] {
        let pv: PersistentVolume =
            serde_json::from_value(json!({"metadata": {"name": format!("pv-{claim}")},
            "spec": {"accessModes": [mode], "capacity": {"storage": "1Gi"}, "storageClassName": "",
                "csi": {"driver": "csi.klab.dev", "volumeHandle": format!("h-{claim}")},
                "claimRef": {"namespace": "default", "name": claim}}}))
            .unwrap();
        pvs.create(&PostParams::default(), &pv).await.unwrap();
        let c: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": claim},
            "spec": {"accessModes": [mode], "storageClassName": "", "volumeName": format!("pv-{claim}"),
                "resources": {"requests": {"storage": "1Gi"}}}}))
        .unwrap();
        claims.create(&PostParams::default(), &c).await.unwrap();
    }
    let csinode: CSINode = serde_json::from_value(json!({"metadata": {"name": "n1"},
        "spec": {"drivers": [{"name": "csi.klab.dev", "nodeID": "n1", "allocatable": {"count": 2}}]}}))
    .unwrap();
    Api::<CSINode>::all(admin.clone())
        .create(&PostParams::default(), &csinode)
        .await
        .unwrap();
    let sched = kube::Client::new(server.router_as(Identity::admin()), "default");
    spawn_scheduler(sched, &clock, 7);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    pods.create(&PostParams::default(), &with_claims("first", &["solo"]))
        .await
        .unwrap();
    clock.sleep(Duration::from_secs(1)).await;
    assert_eq!(
        node_of(&pods.get("first").await.unwrap()).as_deref(),
        Some("n1")
    );
    pods.create(&PostParams::default(), &with_claims("second", &["solo"]))
        .await
        .unwrap();
    clock.sleep(Duration::from_secs(1)).await;
    let second = pods.get("second").await.unwrap();
    assert_eq!(node_of(&second), None);
    assert_eq!(
        scheduled_message(&second).as_deref(),
        Some(
            "0/1 nodes are available: 1 node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode. \
             preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        )
    );
    // the limit: "solo" is attached for first; two more would make three
    pods.create(&PostParams::default(), &with_claims("many", &["a", "b"]))
        .await
        .unwrap();
    clock.sleep(Duration::from_secs(1)).await;
    let many = pods.get("many").await.unwrap();
    assert_eq!(node_of(&many), None);
    assert_eq!(
        scheduled_message(&many).as_deref(),
        Some(
            "0/1 nodes are available: 1 node(s) exceed max volume count. \
             preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        )
    );
    // first goes: both waiting pods are retried; "many" (two volumes) comes first and takes the
    // node's two attachments, so the RWOP claim is free but "second" now exceeds the limit
    pods.delete("first", &kube::api::DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    clock.sleep(Duration::from_secs(1)).await;
    assert_eq!(
        node_of(&pods.get("many").await.unwrap()).as_deref(),
        Some("n1")
    );
    let second = pods.get("second").await.unwrap();
    assert_eq!(node_of(&second), None);
    assert_eq!(
        scheduled_message(&second).as_deref(),
        Some(
            "0/1 nodes are available: 1 node(s) exceed max volume count. \
             preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        )
    );
    pods.delete("many", &kube::api::DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    clock.sleep(Duration::from_secs(5)).await;
    let second = pods.get("second").await.unwrap();
    assert_eq!(
        node_of(&second).as_deref(),
        Some("n1"),
        "{:?}",
        scheduled_message(&second)
    );
}

/// A Binding the API server refuses (here: the scheduler's role lost `pods/binding`) is
/// upstream's binding-cycle error: the assumption on the node is undone, `FailedScheduling`
/// carries the API's message, and the pod is retried after backoff — so it binds once the
/// permission is back, to the node it had been assumed on, which still has room for it.
#[tokio::test(start_paused = true)]
async fn a_refused_binding_is_undone_and_retried() {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let server = klab_apiserver::testing::memory_server().await;
    let clock = server.clock().clone();
    let admin = kube::Client::new(server.router_as(Identity::admin()), "default");
    // Room for one 1-CPU pod only: a leaked assumption would leave none for the retry.
    add_node(&admin, "n1", "1", json!([])).await;
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    let role = roles.get("system:kube-scheduler").await.unwrap();
    let mut refused = role.clone();
    if let Some(rules) = &mut refused.rules {
        rules.retain(|rule| !rule.resources.iter().flatten().any(|r| r == "pods/binding"));
    }
    roles
        .replace("system:kube-scheduler", &PostParams::default(), &refused)
        .await
        .unwrap();
    let sched = kube::Client::new(
        server.router_as(Identity::component("kube-scheduler")),
        "default",
    );
    spawn_scheduler(sched, &clock, 7);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    pods.create(&PostParams::default(), &replica("a", "1"))
        .await
        .unwrap();
    clock.sleep(Duration::from_secs(1)).await;
    let p = pods.get("a").await.unwrap();
    assert_eq!(node_of(&p), None);
    let msg = scheduled_message(&p).unwrap();
    assert!(
        msg.contains("cannot create resource \"pods/binding\""),
        "{msg}"
    );
    // Permission back: the retry after backoff binds the pod to n1.
    let mut restored = role;
    restored.metadata.resource_version = None;
    roles
        .replace("system:kube-scheduler", &PostParams::default(), &restored)
        .await
        .unwrap();
    clock.sleep(Duration::from_secs(30)).await;
    let p = pods.get("a").await.unwrap();
    assert_eq!(node_of(&p).as_deref(), Some("n1"));
}

/// A kube client queues at most 1 024 requests. With more Bindings than that in flight, a
/// failure's writes (the FailedScheduling event, the PodScheduled PATCH), which the scheduling
/// loop awaits, must still go out, and every Binding must answer. They once did not: the
/// Bindings were futures that the loop polled only between two pods, the places freed while it
/// awaited the failure's write went to Bindings that nothing polled, and the scheduler stopped
/// for good (a 5 000-node cluster bound no pod). With 1 300 pods, that code bound none.
#[tokio::test(start_paused = true)]
async fn more_bindings_in_flight_than_a_client_queues() {
    const PODS: usize = 1_300;
    let server = klab_apiserver::testing::memory_server().await;
    let clock = server.clock().clone();
    let admin = kube::Client::new(server.router_as(Identity::admin()), "default");
    for i in 0..13 {
        add_node(&admin, &format!("n{i:02}"), "4", json!([])).await;
    }
    // Created before the scheduler starts, so that it binds them in one run without waiting for
    // anything; `z-big` (last in the initial list) fits no node and is reported inline.
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    for i in 0..PODS {
        pods.create(&PostParams::default(), &replica(&format!("a-{i:04}"), "1m"))
            .await
            .unwrap();
    }
    pods.create(&PostParams::default(), &replica("z-big", "100"))
        .await
        .unwrap();
    // Wired as in a cluster: two clients, each with kube-scheduler's client-side rate limit.
    let throttled = || {
        kube::Client::new(
            klab_runtime::throttle::Throttled::new(
                server.router_as(Identity::admin()),
                klab_runtime::throttle::Rate::SCHEDULER,
                clock.clone(),
                "kube-scheduler",
            ),
            "default",
        )
    };
    let handle = tokio::spawn(run(
        throttled(),
        throttled(),
        clock.clone(),
        DetRng::seeded(3),
        SchedulerConfig::default(),
    ));
    clock.sleep(Duration::from_secs(60)).await;
    assert!(!handle.is_finished(), "the scheduler is still running");
    let list = pods.list(&ListParams::default()).await.unwrap().items;
    let bound = list.iter().filter(|p| node_of(p).is_some()).count();
    assert_eq!(bound, PODS, "every pod that fits is bound");
    let big = list
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("z-big"))
        .unwrap();
    assert!(
        scheduled_message(big).is_some_and(|m| m.contains("Insufficient cpu")),
        "{big:?}"
    );
}
