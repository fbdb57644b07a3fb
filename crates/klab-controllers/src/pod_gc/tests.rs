//! Virtual-time tests of PodGC against the in-process API server.

use k8s_openapi::api::core::v1::Node;
use klab_api::names;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::PodGcConfig;
use crate::node_lifecycle::NodeLifecycleConfig;
use crate::node_lifecycle::tests::{Cluster, cp01_setup, deletion_secs, pod_cond};

#[tokio::test(start_paused = true)]
async fn cp54_out_of_service_taint_force_deletes_terminating_pods() {
    let c = Cluster::new().await;
    cp01_setup(&c).await;
    c.spawn_kubelet("n1", 0.0);
    c.spawn_kubelet("n2", 1000.0);
    c.spawn_kubelet("n3", 1000.0);
    let _nlc = c.spawn_nlc(NodeLifecycleConfig::default());
    let _tec = c.spawn_tec();
    let (gc_metrics, _gc) = c.spawn_pod_gc(PodGcConfig::default());
    c.at(599.0).await;
    for p in ["a", "c", "e"] {
        assert!(
            deletion_secs(&c, p).await.is_some(),
            "{p} Terminating before the taint"
        );
    }
    assert!(
        gc_metrics.snapshot().force_delete_pods_total.is_empty(),
        "no PodGC action without the taint"
    );
    c.at(600.0).await;
    let node: Node = c.node("n1").await;
    let mut taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    taints.push(k8s_openapi::api::core::v1::Taint {
        key: names::TAINT_OUT_OF_SERVICE.into(),
        value: Some("nodeshutdown".into()),
        effect: "NoExecute".into(),
        time_added: Some(c.clock.now_time()),
    });
    c.nodes()
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": { "taints": taints } })),
        )
        .await
        .unwrap();
    c.at(600.5).await;
    // TEC deleted b (DaemonSet tolerations do not cover out-of-service); PodGC's pass at 600 saw
    // every terminating pod on the NotReady, out-of-service node and force-deleted it.
    for p in ["a", "b", "c", "e"] {
        assert!(c.pod(p).await.is_none(), "{p} force-deleted at 600");
    }
    let d = c.pod("d").await.expect("wildcard toleration: untouched");
    assert!(d.metadata.deletion_timestamp.is_none());
    assert!(pod_cond(&d, "DisruptionTarget").is_none());
    let counts = gc_metrics.snapshot().force_delete_pods_total;
    assert_eq!(
        counts.get(&("default".into(), "terminating_out_of_service".into())),
        Some(&4)
    );
}

#[tokio::test(start_paused = true)]
async fn orphaned_pods_of_a_deleted_node_after_quarantine() {
    let c = Cluster::new().await;
    c.add_node("n1", &[]).await;
    c.add_node("n2", &[]).await;
    c.add_pod("orphan", "n1", None).await;
    c.add_pod("kept", "n2", None).await;
    let (metrics, _gc) = c.spawn_pod_gc(PodGcConfig::default());
    c.at(5.0).await;
    c.nodes().delete("n1", &Default::default()).await.unwrap();
    // Pass 20 sees n1 missing (ready at 60); pass 40 not yet; pass 60 GETs NotFound and deletes.
    c.at(59.5).await;
    let p = c.pod("orphan").await.expect("quarantine");
    assert!(p.metadata.deletion_timestamp.is_none());
    c.at(60.5).await;
    assert!(
        c.pod("orphan").await.is_none(),
        "force-deleted at the pass at 60"
    );
    assert!(c.pod("kept").await.is_some());
    let counts = metrics.snapshot().force_delete_pods_total;
    assert_eq!(counts.get(&("default".into(), "orphaned".into())), Some(&1));
}

#[tokio::test(start_paused = true)]
async fn orphan_node_recreated_before_the_check_keeps_pods() {
    let c = Cluster::new().await;
    c.add_node("n1", &[]).await;
    c.add_pod("p", "n1", None).await;
    let _gc = c.spawn_pod_gc(PodGcConfig::default());
    c.at(5.0).await;
    c.nodes().delete("n1", &Default::default()).await.unwrap();
    c.at(30.0).await;
    c.add_node("n1", &[]).await;
    c.at(100.0).await;
    assert!(
        c.pod("p").await.is_some(),
        "CP-64: node back in the cache before the check"
    );
}
