//! The metrics pipeline in virtual time: metrics-server scrapes at start and every 15 s, so a
//! node's metrics appear at the second scrape that finds it Ready with something running, a
//! pod's at its second scrape (or its first, for a container started 10–15 s before it), and a
//! node whose kubelet stops is gone at the next scrape. The same run twice gives the same answers
//! at the same instants.

use crate::one_node_cluster;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use klab_api::resource_metrics::MetricsReader;
use klab_api::{Clock, DetRng};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::{Cluster, ClusterConfig, NodeFault, NodeSpec};

async fn get_raw(cluster: &Cluster, path: &str) -> Result<Value, String> {
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    cluster
        .admin_client()
        .request_text(req)
        .await
        .map_err(|e| e.to_string())
        .map(|t| serde_json::from_str(&t).unwrap())
}

/// (virtual second, what changed) for the first 80 s of a one-node cluster with one pod; the
/// kubelet is stopped at 50 s.
async fn timeline() -> Vec<(u64, String)> {
    let config = ClusterConfig {
        nodes: vec![NodeSpec::new("n1")],
        ..Default::default()
    };
    let clock = Clock::virtual_default();
    let cluster = Cluster::start(
        klab_store::memory::MemoryStore::new(),
        clock.clone(),
        DetRng::seeded(7),
        config,
    )
    .await
    .unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default",
                     "annotations": {"usage.klab.dev/app": "cpu=200m,memory=50Mi"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "nginx"}]},
    }))
    .unwrap();
    Api::<Pod>::namespaced(cluster.admin_client(), "default")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let store = cluster.metrics_store().clone();
    let mut seen = Vec::new();
    let (mut node, mut pod) = (None, None);
    for step in 0..160u64 {
        // Every half second of virtual time.
        let now_node = store.node("n1").map(|u| u.usage);
        let now_pod = store.pod("default", "web").map(|u| u.containers);
        let t = clock.elapsed().as_secs();
        if now_node != node {
            seen.push((t, format!("node {now_node:?}")));
            node = now_node;
        }
        if now_pod != pod {
            seen.push((t, format!("pod {now_pod:?}")));
            pod = now_pod;
        }
        if step == 100 {
            cluster
                .apply_fault("n1", NodeFault::StopKubelet)
                .await
                .unwrap();
            seen.push((t, "kubelet stopped".into()));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    seen
}

#[tokio::test(start_paused = true)]
async fn node_metrics_appear_after_two_scrapes_in_virtual_time() {
    let a = timeline().await;
    // The node: the pod's 200m and 50Mi beside its system daemons' 50m and 256Mi.
    let usage = "Some(Usage { cpu_nanocores: 250000000, memory_bytes: 320864256 })";
    let containers =
        "Some([(\"app\", Usage { cpu_nanocores: 200000000, memory_bytes: 52428800 })])";
    assert_eq!(
        a,
        vec![
            // The container started at 3 s: 12 s old at the scrape at 15 s, so its start is a
            // first point and the pod has metrics at once; the node needs the scrape at 30 s.
            (15, format!("pod {containers}")),
            (30, format!("node {usage}")),
            (50, "kubelet stopped".to_string()),
            // The scrape at 60 s is refused: everything from that node is forgotten.
            (60, "node None".to_string()),
            (60, "pod None".to_string()),
        ]
    );
    // Deterministic: the same run gives the same timeline.
    assert_eq!(timeline().await, a);
}

#[tokio::test(start_paused = true)]
async fn metrics_api_serves_the_store() {
    let cluster = one_node_cluster(7).await;
    // Nothing yet: metrics-server's 404 for a node that exists, the lister's for one that does
    // not, and an empty list.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let err = get_raw(&cluster, "/apis/metrics.k8s.io/v1beta1/nodes/n1")
        .await
        .unwrap_err();
    assert!(
        err.contains("nodemetrics.metrics.k8s.io \"n1\" not found"),
        "{err}"
    );
    let err = get_raw(&cluster, "/apis/metrics.k8s.io/v1beta1/nodes/n9")
        .await
        .unwrap_err();
    assert!(err.contains("node \"n9\" not found"), "{err}");
    let err = get_raw(
        &cluster,
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/nope",
    )
    .await
    .unwrap_err();
    assert!(err.contains("pods \"nope\" not found"), "{err}");
    let list = get_raw(&cluster, "/apis/metrics.k8s.io/v1beta1/nodes")
        .await
        .unwrap();
    assert_eq!(
        list,
        json!({"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1",
               "metadata": {}, "items": []})
    );
    // A bad field selector is refused as the generic API server refuses it.
    let err = get_raw(
        &cluster,
        "/apis/metrics.k8s.io/v1beta1/nodes?fieldSelector=spec.unschedulable%3Dfalse",
    )
    .await
    .unwrap_err();
    assert!(
        err.contains("\"spec.unschedulable\" is not a known field selector"),
        "{err}"
    );
    // Writes are not served.
    let req = http::Request::delete("/apis/metrics.k8s.io/v1beta1/nodes/n1")
        .body(Vec::new())
        .unwrap();
    let err = cluster
        .admin_client()
        .request_text(req)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("405") || err.contains("not supported"),
        "{err}"
    );
}

/// metrics-server reads the Nodes from its node informer, as upstream's lister: scrapes every
/// 15 s add no node LIST (a LIST per scrape decoded every node of the cluster each time), and
/// they still find the node.
#[tokio::test(start_paused = true)]
async fn scrapes_read_nodes_from_an_informer_not_a_list_each() {
    let cluster = one_node_cluster(3).await;
    let node_lists = || {
        let text = cluster.api().metrics().render(&[]);
        text.lines()
            .filter(|l| {
                l.starts_with("apiserver_request_total{")
                    && l.contains("resource=\"nodes\"")
                    && l.contains("subresource=\"\"")
                    && l.contains("verb=\"LIST\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum::<u64>()
    };
    tokio::time::sleep(Duration::from_secs(20)).await;
    let before = node_lists();
    assert!(before > 0, "the informers listed the nodes");
    // Four more scrapes (at 30, 45, 60 and 75 s).
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(node_lists(), before);
    assert!(
        cluster.metrics_store().node("n1").is_some(),
        "the node is scraped"
    );
}

/// metrics-server scrapes the kubelets directly, as upstream's does, not through the API
/// server's node proxy; and through the same network, so a partitioned node's kubelet never
/// answers: the scrape gives up at its deadline (90 % of the resolution) and the node's metrics
/// are forgotten then, not at once.
#[tokio::test(start_paused = true)]
async fn scrapes_dial_the_kubelets_and_a_partitioned_node_times_out() {
    let cluster = one_node_cluster(5).await;
    let t0 = tokio::time::Instant::now();
    let until = |s: u64| tokio::time::sleep_until(t0 + Duration::from_secs(s));
    let proxied = || {
        let text = cluster.api().metrics().render(&[]);
        text.lines()
            .filter(|l| {
                l.starts_with("apiserver_request_total{") && l.contains("subresource=\"proxy\"")
            })
            .count()
    };
    until(40).await;
    assert!(
        cluster.metrics_store().node("n1").is_some(),
        "the node is scraped"
    );
    cluster
        .apply_fault("n1", NodeFault::Partition)
        .await
        .unwrap();
    // The scrape at 45 s dials a node that answers nothing; it gives up at 58.5 s.
    until(58).await;
    assert!(cluster.metrics_store().node("n1").is_some());
    until(59).await;
    assert!(cluster.metrics_store().node("n1").is_none());
    assert_eq!(proxied(), 0, "no scrape went through the node proxy");
}

/// Every node the informer holds is scraped, Ready or not, as upstream's scraper: a kubelet
/// whose API requests all fail (its node goes Unknown) still answers metrics-server, so
/// `kubectl top node` keeps showing it.
#[tokio::test(start_paused = true)]
async fn a_node_gone_unknown_whose_kubelet_answers_is_still_scraped() {
    use k8s_openapi::api::core::v1::Node;
    let cluster = one_node_cluster(11).await;
    tokio::time::sleep(Duration::from_secs(35)).await;
    assert!(cluster.metrics_store().node("n1").is_some());
    let failing = crate::control::Brownout {
        latency: Duration::ZERO,
        error_rate: 1.0,
        error: crate::control::BrownoutError::Unavailable,
    };
    cluster
        .plane
        .set_brownout("kubelet/n1", Some(failing))
        .unwrap();
    // The Lease stops being renewed: Unknown after the 40 s grace period.
    tokio::time::sleep(Duration::from_secs(70)).await;
    let node = Api::<Node>::all(cluster.admin_client())
        .get("n1")
        .await
        .unwrap();
    let ready = node
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status);
    assert_eq!(ready.as_deref(), Some("Unknown"));
    assert!(
        cluster.metrics_store().node("n1").is_some(),
        "its kubelet still answers the scrapes"
    );
}
