//! Virtual-time tests of the ReplicaSet controller against the in-process API server.

use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::testkit::{Harness, harness, template};
use super::{ReplicaSetControllerConfig, run};

async fn create_rs(h: &Harness, name: &str, replicas: i32) {
    let rs: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template(name, "nginx:1.25")},
    }))
    .expect("rs");
    Api::<ReplicaSet>::namespaced(h.client.clone(), "default")
        .create(&PostParams::default(), &rs)
        .await
        .expect("create rs");
}

fn start(h: &Harness, config: ReplicaSetControllerConfig) {
    tokio::spawn(run(
        h.client.clone(),
        h.informers.clone(),
        h.clock.clone(),
        config,
        h.recorder(klab_api::names::CONTROLLER_REPLICASET),
    ));
}

async fn rs_status(h: &Harness, name: &str) -> (i32, i32, i64) {
    let rs = Api::<ReplicaSet>::namespaced(h.client.clone(), "default")
        .get(name)
        .await
        .expect("get rs");
    let s = rs.status.unwrap_or_default();
    (
        s.replicas,
        s.ready_replicas.unwrap_or(0),
        s.observed_generation.unwrap_or(0),
    )
}

#[tokio::test(start_paused = true)]
async fn creates_pods_and_replaces_deleted_and_terminating_ones_at_once() {
    let h = harness().await;
    create_rs(&h, "web", 3).await;
    start(&h, ReplicaSetControllerConfig::default());

    // Work takes no virtual time: the pods exist in the instant the controller starts.
    let t = h
        .wait_until(Duration::from_secs(5), "3 pods", || async {
            h.active_pods().await.len() == 3
        })
        .await;
    assert_eq!(t, Duration::ZERO);
    let pods = h.active_pods().await;
    assert!(
        pods.iter()
            .all(|p| p.starts_with("web-") && p.len() == "web-".len() + 5),
        "{pods:?}"
    );
    let events = h.event_messages().await;
    assert_eq!(
        events
            .iter()
            .filter(|m| m.starts_with("Created pod: web-"))
            .count(),
        3,
        "{events:?}"
    );

    // An unscheduled pod is deleted at once (grace 0): a replacement follows.
    h.delete(&pods[0]).await;
    h.wait_until(Duration::from_secs(5), "replacement", || async {
        let a = h.active_pods().await;
        a.len() == 3 && !a.contains(&pods[0])
    })
    .await;

    // A bound pod deleted gracefully stays Terminating (no kubelet here) and is not counted.
    let pods = h.active_pods().await;
    h.bind(&pods[1], "n1").await;
    h.make_ready(&pods[1]).await;
    h.clock.sleep(Duration::from_secs(1)).await;
    let before = h.clock.elapsed();
    h.delete(&pods[1]).await;
    let t = h
        .wait_until(
            Duration::from_secs(5),
            "replacement of the terminating pod",
            || async {
                h.active_pods().await.len() == 3
                    && h.pod_names().await.iter().any(|(n, t)| n == &pods[1] && *t)
            },
        )
        .await;
    assert_eq!(
        t - before,
        Duration::ZERO,
        "replaced in the same instant, not after the grace period"
    );
    h.wait_until(Duration::from_secs(5), "status", || async {
        rs_status(&h, "web").await == (3, 0, 1)
    })
    .await;
    assert_eq!(
        h.pod_names().await.len(),
        4,
        "the Terminating pod object still exists"
    );
}

#[tokio::test(start_paused = true)]
async fn scale_subresource_scales_up_and_down_unassigned_first() {
    let h = harness().await;
    create_rs(&h, "web", 2).await;
    start(&h, ReplicaSetControllerConfig::default());
    h.wait_until(Duration::from_secs(5), "2 pods", || async {
        h.active_pods().await.len() == 2
    })
    .await;
    let first = h.active_pods().await;
    for p in &first {
        h.bind(p, "n1").await;
        h.make_ready(p).await;
    }
    let api = Api::<ReplicaSet>::namespaced(h.client.clone(), "default");
    // `kubectl scale rs web --replicas=4`
    api.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .expect("scale");
    h.wait_until(Duration::from_secs(5), "4 pods", || async {
        h.active_pods().await.len() == 4
    })
    .await;
    h.wait_until(Duration::from_secs(5), "status 4/2", || async {
        rs_status(&h, "web").await == (4, 2, 2)
    })
    .await;
    // Scale down to 2: the two new, unassigned, Pending pods go first.
    api.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .expect("scale");
    h.wait_until(Duration::from_secs(5), "back to 2", || async {
        h.active_pods().await == first
    })
    .await;
    let events = h.event_messages().await;
    assert_eq!(
        events
            .iter()
            .filter(|m| m.starts_with("Deleted pod: "))
            .count(),
        2,
        "{events:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn available_replicas_follow_min_ready_seconds_to_the_millisecond() {
    let h = harness().await;
    let rs: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 1, "minReadySeconds": 10, "selector": {"matchLabels": {"app": "web"}}, "template": template("web", "nginx")},
    }))
    .expect("rs");
    let api = Api::<ReplicaSet>::namespaced(h.client.clone(), "default");
    api.create(&PostParams::default(), &rs)
        .await
        .expect("create");
    start(&h, ReplicaSetControllerConfig::default());
    h.wait_until(Duration::from_secs(5), "pod", || async {
        h.active_pods().await.len() == 1
    })
    .await;
    h.clock.sleep(Duration::from_secs(5)).await;
    let pod = h.active_pods().await.remove(0);
    h.bind(&pod, "n1").await;
    h.make_ready(&pod).await; // Ready since t=5s
    let available = || async {
        api.get("web")
            .await
            .ok()
            .and_then(|r| r.status)
            .and_then(|s| s.available_replicas)
            .unwrap_or(0)
            == 1
    };
    let ready = || async {
        api.get("web")
            .await
            .ok()
            .and_then(|r| r.status)
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0)
            == 1
    };
    let t = h.wait_until(Duration::from_secs(1), "ready", ready).await;
    assert_eq!(t, Duration::from_secs(5));
    assert!(!available().await);
    // Available strictly after Ready + minReadySeconds: the controller wakes at 15.001s.
    let t = h
        .wait_until(Duration::from_secs(20), "available", available)
        .await;
    assert_eq!(
        t,
        Duration::from_millis(15_010),
        "first 10ms poll after 15.001s"
    );
}

#[tokio::test(start_paused = true)]
async fn cp57_terminating_replicas_with_the_v1_35_gate() {
    let h = harness().await;
    create_rs(&h, "web", 3).await;
    let config = ReplicaSetControllerConfig {
        deployment_replica_set_terminating_replicas: true,
        ..Default::default()
    };
    start(&h, config);
    h.wait_until(Duration::from_secs(5), "3 pods", || async {
        h.active_pods().await.len() == 3
    })
    .await;
    let p1 = h.active_pods().await.remove(0);
    for p in h.active_pods().await {
        h.bind(&p, "n1").await;
        h.make_ready(&p).await;
    }
    // TEC evicts p1 (graceful delete; its node is dead so it stays Terminating).
    h.delete(&p1).await;
    let api = Api::<ReplicaSet>::namespaced(h.client.clone(), "default");
    h.wait_until(Duration::from_secs(5), "status", || async {
        let s = api.get("web").await.unwrap().status.unwrap_or_default();
        (s.replicas, s.ready_replicas, s.terminating_replicas) == (3, Some(2), Some(1))
    })
    .await;
    assert_eq!(h.pod_names().await.len(), 4);
}

#[tokio::test(start_paused = true)]
async fn adopts_a_matching_orphan_and_releases_a_relabelled_pod() {
    let h = harness().await;
    let orphan: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "stray", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
    }))
    .unwrap();
    h.pods()
        .create(&PostParams::default(), &orphan)
        .await
        .expect("orphan");
    create_rs(&h, "web", 2).await;
    start(&h, ReplicaSetControllerConfig::default());
    h.wait_until(Duration::from_secs(5), "2 pods", || async {
        h.active_pods().await.len() == 2
    })
    .await;
    let owner = |p: k8s_openapi::api::core::v1::Pod| {
        super::util::controller_ref(&p.metadata).map(|r| (r.kind.clone(), r.name.clone()))
    };
    assert_eq!(
        owner(h.pods().get("stray").await.unwrap()),
        Some(("ReplicaSet".into(), "web".into())),
        "adopted, not duplicated"
    );
    // Relabel it: released, and replaced.
    h.pods()
        .patch(
            "stray",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
        )
        .await
        .expect("relabel");
    h.wait_until(Duration::from_secs(5), "released and replaced", || async {
        h.active_pods().await.len() == 3
            && h.pods().get("stray").await.ok().and_then(owner).is_none()
    })
    .await;
}

/// Scale-down of pods whose grace period is i64::MAX seconds (the API accepts it): the pods are
/// marked at the end of time and the controller goes on working — it used to die on the delete.
#[tokio::test(start_paused = true)]
async fn scale_down_with_the_longest_grace_period_keeps_the_controller_alive() {
    let h = harness().await;
    let mut tmpl = template("web", "nginx");
    tmpl["spec"]["terminationGracePeriodSeconds"] = json!(i64::MAX);
    let rs: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": tmpl},
    }))
    .unwrap();
    let api = Api::<ReplicaSet>::namespaced(h.client.clone(), "default");
    api.create(&PostParams::default(), &rs).await.unwrap();
    start(&h, ReplicaSetControllerConfig::default());
    h.wait_until(Duration::from_secs(5), "3 pods", || async {
        h.active_pods().await.len() == 3
    })
    .await;
    for p in h.active_pods().await {
        h.bind(&p, "n1").await;
        h.make_ready(&p).await;
    }
    let scale = |n: i32| {
        let api = api.clone();
        async move {
            api.patch_scale(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": n}})),
            )
            .await
            .expect("scale");
        }
    };
    scale(1).await;
    h.wait_until(Duration::from_secs(5), "2 terminating", || async {
        h.pod_names().await.iter().filter(|(_, t)| *t).count() == 2
    })
    .await;
    let pods = h.pods().list(&Default::default()).await.unwrap();
    for p in pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some())
    {
        assert_eq!(p.metadata.deletion_grace_period_seconds, Some(i64::MAX));
    }
    // Still alive: a scale-up is served.
    scale(2).await;
    h.wait_until(Duration::from_secs(5), "2 active pods", || async {
        h.active_pods().await.len() == 2
    })
    .await;
}

/// A ReplicaSet's sync reads its own pods (and its namespace's orphans) through the controllerUID
/// index, never the rest of the namespace: scaling a 2-pod set next to a 40-pod one reads none of
/// the 40 and scans nothing.
#[tokio::test(start_paused = true)]
async fn a_sync_reads_only_its_own_pods() {
    let h = harness().await;
    create_rs(&h, "small", 2).await;
    create_rs(&h, "big", 40).await;
    start(&h, ReplicaSetControllerConfig::default());
    h.wait_until(Duration::from_secs(5), "42 pods", || async {
        h.active_pods().await.len() == 42
    })
    .await;
    h.clock.sleep(Duration::from_secs(2)).await;
    let pods = h.informers.get::<k8s_openapi::api::core::v1::Pod>();
    let before = pods.stats();
    Api::<ReplicaSet>::namespaced(h.client.clone(), "default")
        .patch_scale(
            "small",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("scale");
    h.wait_until(Duration::from_secs(5), "43 pods", || async {
        h.active_pods().await.len() == 43
    })
    .await;
    h.clock.sleep(Duration::from_secs(2)).await;
    let read = pods.stats().since(&before);
    assert_eq!((read.scanned, read.namespace_scanned), (0, 0), "{read:?}");
    assert!(read.indexed > 0, "the syncs read the set's pods: {read:?}");
    assert!(
        read.total() < 40,
        "no sync read the other set's 40 pods: {read:?}"
    );
}

/// Updates of a set's pods that change nothing a sync reads (here: binding them to a node) do not
/// sync the set; a change of readiness does. Each sync reads all the set's pods, so syncing on
/// every update cost a big set the square of its size.
#[tokio::test(start_paused = true)]
async fn pod_updates_that_concern_no_sync_skip_it() {
    let h = harness().await;
    create_rs(&h, "web", 20).await;
    start(&h, ReplicaSetControllerConfig::default());
    h.wait_until(Duration::from_secs(5), "20 pods", || async {
        h.active_pods().await.len() == 20
    })
    .await;
    h.clock.sleep(Duration::from_secs(2)).await;
    let pods = h.informers.get::<k8s_openapi::api::core::v1::Pod>();
    let before = pods.stats();
    let all = h.active_pods().await;
    for p in &all {
        h.bind(p, "n1").await;
    }
    h.clock.sleep(Duration::from_secs(2)).await;
    let read = pods.stats().since(&before);
    assert_eq!(read.total(), 0, "binding synced the set: {read:?}");
    let before = pods.stats();
    h.make_ready(&all[0]).await;
    h.wait_until(Duration::from_secs(5), "readyReplicas 1", || async {
        Api::<ReplicaSet>::namespaced(h.client.clone(), "default")
            .get("web")
            .await
            .ok()
            .and_then(|rs| rs.status)
            .and_then(|s| s.ready_replicas)
            == Some(1)
    })
    .await;
    let read = pods.stats().since(&before);
    assert!(read.indexed >= 20, "the sync read the set's pods: {read:?}");
}

/// The tally of a set re-derives only the pod versions it has not seen, and starts afresh when
/// the set's selector changes.
#[test]
fn a_tally_derives_only_the_pods_that_changed() {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Pod;

    use super::Tally;
    use super::decide::Claim;

    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "rs-uid"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}
    }))
    .unwrap();
    let pod = |name: &str, app: &str, ready: bool| -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default", "labels": {"app": app},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "name": "web", "uid": "rs-uid", "controller": true}]},
                "status": {"phase": "Running", "conditions": [
                    {"type": "Ready", "status": if ready { "True" } else { "False" }}]}
            }))
            .unwrap(),
        )
    };
    let informer: klab_runtime::SharedInformer<Pod> = Default::default();
    informer.add_index(
        klab_runtime::index::CONTROLLER_UID,
        klab_runtime::index::controller_uid::<Pod>,
    );
    let put = |p: Arc<Pod>| informer.apply(kube::runtime::watcher::Event::Apply((*p).clone()));
    for p in [
        pod("a", "web", true),
        pod("b", "web", false),
        pod("c", "web", true),
    ] {
        put(p);
    }
    let mut t = Tally::for_set(None, &rs);
    assert_eq!(t.refresh(&informer, "default"), 3);
    assert_eq!(t.refresh(&informer, "default"), 0);

    // `a` goes, `b` becomes Ready, `c` is relabelled out of the selector, `d` comes.
    informer.apply(kube::runtime::watcher::Event::Delete(
        (*pod("a", "web", true)).clone(),
    ));
    put(pod("b", "web", true));
    put(pod("c", "other", true));
    put(pod("d", "web", false));
    assert_eq!(t.refresh(&informer, "default"), 3);
    let facts: Vec<(String, Claim, bool)> = t
        .pods
        .iter()
        .map(|(name, (_, f))| (name.clone(), f.claim, f.ready))
        .collect();
    assert_eq!(
        facts,
        vec![
            ("b".to_string(), Claim::Owned, true),
            ("c".to_string(), Claim::Release, true),
            ("d".to_string(), Claim::Owned, false),
        ]
    );
    assert_eq!(t.refresh(&informer, "default"), 0);

    // The same set keeps its tally; a new selector starts afresh.
    let mut t = Tally::for_set(Some(t), &rs);
    assert_eq!(t.refresh(&informer, "default"), 0);
    let mut wider = rs.clone();
    wider.spec.as_mut().unwrap().selector.match_labels = None;
    wider.spec.as_mut().unwrap().selector.match_expressions = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
            key: "app".into(),
            operator: "Exists".into(),
            values: None,
        },
    ]);
    let mut t = Tally::for_set(Some(t), &wider);
    assert_eq!(t.refresh(&informer, "default"), 3);
    assert!(t.pods.values().all(|(_, f)| f.claim == Claim::Owned));
}
