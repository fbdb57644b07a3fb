//! Virtual-time tests of the taint eviction controller against the in-process API server (no NLC:
//! taints are set by the test, as an admin would).

use klab_api::names;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::node_lifecycle::tests::{Cluster, deletion_secs, toleration};

async fn set_taints(c: &Cluster, node: &str, taints: &[(&str, &str)]) {
    let now = c.clock.now_time();
    let list: Vec<serde_json::Value> = taints
        .iter()
        .map(|(k, v)| json!({ "key": k, "value": v, "effect": "NoExecute", "timeAdded": now }))
        .collect();
    c.nodes()
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": { "taints": list } })),
        )
        .await
        .unwrap();
}

fn tol(key: &str, secs: Option<i64>) -> k8s_openapi::api::core::v1::Toleration {
    toleration(key, "Exists", "", "NoExecute", secs)
}

#[tokio::test(start_paused = true)]
async fn cp18_several_pods_different_tolerations() {
    let c = Cluster::new().await;
    c.add_node("node1", &[]).await;
    // Explicit tolerations suppress the admission defaults only for not-ready/unreachable keys,
    // which these pods do not tolerate anyway (their taint is T1).
    c.add_pod("pod1", "node1", Some(vec![])).await;
    c.add_pod("pod2", "node1", Some(vec![tol("T1", Some(1))]))
        .await;
    c.add_pod("pod3", "node1", Some(vec![tol("T1", None)]))
        .await;
    let (metrics, _tec) = c.spawn_tec();
    c.at(10.0).await;
    set_taints(&c, "node1", &[("T1", "")]).await;
    c.at(10.5).await;
    assert_eq!(deletion_secs(&c, "pod1").await, Some(40.0), "pod1 at once");
    assert_eq!(deletion_secs(&c, "pod2").await, None);
    c.at(11.5).await;
    assert_eq!(
        deletion_secs(&c, "pod2").await,
        Some(41.0),
        "pod2 after 1 s"
    );
    c.at(100.0).await;
    assert_eq!(deletion_secs(&c, "pod3").await, None, "pod3 never");
    assert_eq!(metrics.pod_deletions_total(), 2);
    assert!(
        c.has_event(
            "default",
            names::EVENT_TAINT_MANAGER_EVICTION,
            "Marking for deletion Pod default/pod1"
        )
        .await
    );
}

#[tokio::test(start_paused = true)]
async fn cp19d_taint_removed_before_deadline_cancels() {
    let c = Cluster::new().await;
    c.add_node("node1", &[]).await;
    c.add_pod("p", "node1", Some(vec![tol("T1", Some(100))]))
        .await;
    let _tec = c.spawn_tec();
    c.at(10.0).await;
    set_taints(&c, "node1", &[("T1", "")]).await;
    c.at(50.0).await;
    set_taints(&c, "node1", &[]).await;
    c.at(50.5).await;
    assert!(
        c.has_event(
            "default",
            names::EVENT_TAINT_MANAGER_EVICTION,
            "Cancelling deletion of Pod default/p"
        )
        .await
    );
    c.at(200.0).await;
    assert_eq!(deletion_secs(&c, "p").await, None);
}

#[tokio::test(start_paused = true)]
async fn cp20_toleration_removed_evicts_at_once_lengthened_keeps_deadline() {
    let c = Cluster::new().await;
    c.add_node("node1", &[]).await;
    set_taints(&c, "node1", &[("T1", "")]).await;
    let _tec = c.spawn_tec();
    c.at(1.0).await;
    // (a)/(d): scheduled onto a tainted node with a 10 s toleration, lengthened at 5 s.
    c.add_pod("d", "node1", Some(vec![tol("T1", Some(10))]))
        .await;
    // (c): 100 s toleration removed at 5 s (tolerations are mutable only by adding in real
    // clusters; klab's API server accepts the update, which is what the vector exercises).
    c.add_pod("cc", "node1", Some(vec![tol("T1", Some(100))]))
        .await;
    c.at(5.0).await;
    let patch = |secs: i64| json!({ "spec": { "tolerations": [ { "key": "T1", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": secs } ] } });
    let lengthen = c
        .pods()
        .patch("d", &PatchParams::default(), &Patch::Merge(&patch(100)))
        .await;
    let remove = c
        .pods()
        .patch(
            "cc",
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": { "tolerations": [] } })),
        )
        .await;
    c.at(5.5).await;
    if remove.is_ok() {
        assert_eq!(
            deletion_secs(&c, "cc").await,
            Some(35.0),
            "toleration removed ⇒ immediate"
        );
        assert!(
            c.has_event(
                "default",
                names::EVENT_TAINT_MANAGER_EVICTION,
                "Cancelling deletion of Pod default/cc"
            )
            .await
        );
    }
    c.at(10.5).await;
    assert_eq!(deletion_secs(&c, "d").await, None);
    c.at(11.5).await;
    if lengthen.is_ok() {
        assert_eq!(
            deletion_secs(&c, "d").await,
            Some(41.0),
            "lengthening does not postpone"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn cp25_first_matching_toleration_counts() {
    let c = Cluster::new().await;
    c.add_node("n1", &[]).await;
    c.add_pod(
        "first600",
        "n1",
        Some(vec![
            tol(names::TAINT_UNREACHABLE, Some(600)),
            tol(names::TAINT_UNREACHABLE, Some(10)),
        ]),
    )
    .await;
    c.add_pod(
        "wildcard",
        "n1",
        Some(vec![
            toleration("", "Exists", "", "", None),
            tol(names::TAINT_UNREACHABLE, Some(10)),
        ]),
    )
    .await;
    let _tec = c.spawn_tec();
    c.at(60.0).await;
    set_taints(&c, "n1", &[(names::TAINT_UNREACHABLE, "")]).await;
    c.at(70.5).await;
    assert_eq!(deletion_secs(&c, "first600").await, None);
    c.at(659.5).await;
    assert_eq!(deletion_secs(&c, "first600").await, None);
    c.at(660.5).await;
    assert_eq!(deletion_secs(&c, "first600").await, Some(690.0));
    assert_eq!(deletion_secs(&c, "wildcard").await, None);
}
