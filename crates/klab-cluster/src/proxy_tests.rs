//! `pods/log` through the API server, the simulated network and a kubelet's server, in virtual
//! time: content, options, the kubelet's own errors, and what node faults do to the dial.

use std::time::Duration;

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams, PostParams};

use super::*;

async fn cluster() -> Cluster {
    one_node_cluster(7).await
}

fn pod(name: &str, script: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": [
            {"name": "c", "image": "busybox:1.36", "command": ["sh", "-c", script]}]}
    }))
    .unwrap()
}

async fn wait_running(pods: &Api<Pod>, name: &str) {
    for _ in 0..120 {
        if let Ok(p) = pods.get(name).await
            && p.status.and_then(|s| s.phase).as_deref() == Some("Running")
        {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("pod {name} never ran");
}

fn api_err(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        e => panic!("not an API error: {e}"),
    }
}

#[tokio::test(start_paused = true)]
async fn logs_options_and_errors() {
    let c = cluster().await;
    let pods: Api<Pod> = Api::namespaced(c.admin_client(), "default");
    pods.create(
        &PostParams::default(),
        &pod("ticker", "while true; do echo tick; sleep 10; done"),
    )
    .await
    .unwrap();
    wait_running(&pods, "ticker").await;
    tokio::time::sleep(Duration::from_secs(35)).await;
    let all = pods.logs("ticker", &LogParams::default()).await.unwrap();
    assert_eq!(all, "tick\ntick\ntick\ntick\n");
    let tail = LogParams {
        tail_lines: Some(1),
        timestamps: true,
        ..Default::default()
    };
    let one = pods.logs("ticker", &tail).await.unwrap();
    assert_eq!(one.lines().count(), 1);
    // RFC3339NanoFixed: nine digits of fraction, always.
    assert!(one.ends_with("Z tick\n"), "{one}");
    assert_eq!(
        one.len(),
        "2026-01-01T00:00:33.500000000Z tick\n".len(),
        "{one}"
    );
    let limited = LogParams {
        limit_bytes: Some(7),
        ..Default::default()
    };
    assert_eq!(pods.logs("ticker", &limited).await.unwrap(), "tick\nti");

    // Bad input: upstream's errors.
    let bad = LogParams {
        tail_lines: Some(-1),
        ..Default::default()
    };
    assert_eq!(
        api_err(pods.logs("ticker", &bad).await.unwrap_err()),
        (
            422,
            "Invalid".into(),
            "PodLogOptions \"ticker\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0".into()
        )
    );
    let wrong = LogParams {
        container: Some("nope".into()),
        ..Default::default()
    };
    assert_eq!(
        api_err(pods.logs("ticker", &wrong).await.unwrap_err()),
        (
            400,
            "BadRequest".into(),
            "container nope is not valid for pod ticker".into()
        )
    );
    let prev = LogParams {
        previous: true,
        ..Default::default()
    };
    assert_eq!(
        api_err(pods.logs("ticker", &prev).await.unwrap_err()),
        (
            400,
            "BadRequest".into(),
            "previous terminated container \"c\" in pod \"ticker\" not found".into()
        )
    );
    assert_eq!(
        api_err(pods.logs("ghost", &LogParams::default()).await.unwrap_err()).0,
        404
    );
}

#[tokio::test(start_paused = true)]
async fn follow_streams_in_virtual_time_and_a_dropped_client_leaves_nothing() {
    let c = cluster().await;
    let pods: Api<Pod> = Api::namespaced(c.admin_client(), "default");
    pods.create(
        &PostParams::default(),
        &pod("ticker", "while true; do echo tick; sleep 1; done"),
    )
    .await
    .unwrap();
    wait_running(&pods, "ticker").await;
    let endpoint = c.nodes()["n1"].lock().unwrap().endpoint();
    let follow = LogParams {
        follow: true,
        tail_lines: Some(0),
        ..Default::default()
    };
    let start = tokio::time::Instant::now();
    let mut lines = pods.log_stream("ticker", &follow).await.unwrap().lines();
    for _ in 0..3 {
        assert_eq!(lines.next().await.unwrap().unwrap(), "tick");
    }
    // Three lines, one a second.
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(endpoint.open_streams(), 1);
    drop(lines);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        endpoint.open_streams(),
        0,
        "the kubelet still serves a dropped follow"
    );

    // A follow ends when the kubelet stops (its connections break).
    let mut lines = pods.log_stream("ticker", &follow).await.unwrap().lines();
    assert_eq!(lines.next().await.unwrap().unwrap(), "tick");
    c.apply_fault("n1", NodeFault::StopKubelet).await.unwrap();
    let rest = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(_)) = lines.next().await {}
    })
    .await;
    assert!(rest.is_ok(), "the follow outlived the kubelet");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(endpoint.open_streams(), 0);
}

#[tokio::test(start_paused = true)]
async fn node_faults_decide_what_the_dial_meets() {
    let c = cluster().await;
    let pods: Api<Pod> = Api::namespaced(c.admin_client(), "default");
    pods.create(&PostParams::default(), &pod("p", "echo hi; sleep 3600"))
        .await
        .unwrap();
    wait_running(&pods, "p").await;
    assert_eq!(pods.logs("p", &LogParams::default()).await.unwrap(), "hi\n");
    let url = "https://10.0.0.10:10250/containerLogs/default/p/c";

    c.apply_fault("n1", NodeFault::StopKubelet).await.unwrap();
    let start = tokio::time::Instant::now();
    let e = api_err(pods.logs("p", &LogParams::default()).await.unwrap_err());
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "a refused dial fails at once"
    );
    assert_eq!(
        e,
        (
            500,
            String::new(),
            format!("Get \"{url}\": dial tcp 10.0.0.10:10250: connect: connection refused")
        )
    );
    c.apply_fault("n1", NodeFault::StartKubelet).await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(pods.logs("p", &LogParams::default()).await.unwrap(), "hi\n");

    for (down, up) in [
        (NodeFault::PowerOff, NodeFault::PowerOn),
        (NodeFault::Partition, NodeFault::Heal),
        (NodeFault::Freeze, NodeFault::Thaw),
    ] {
        c.apply_fault("n1", down).await.unwrap();
        let start = tokio::time::Instant::now();
        let follow = LogParams {
            follow: true,
            ..Default::default()
        };
        let e = api_err(pods.logs("p", &follow).await.unwrap_err());
        assert_eq!(start.elapsed(), Duration::from_secs(30), "{down:?}");
        assert_eq!(
            e.2,
            format!("Get \"{url}?follow=true\": dial tcp 10.0.0.10:10250: i/o timeout"),
            "{down:?}"
        );
        c.apply_fault("n1", up).await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn nodes_proxy_reaches_the_kubelet() {
    let c = cluster().await;
    let pods: Api<Pod> = Api::namespaced(c.admin_client(), "default");
    pods.create(&PostParams::default(), &pod("p", "echo hi; sleep 3600"))
        .await
        .unwrap();
    wait_running(&pods, "p").await;
    let client = c.admin_client();
    let get = |path: &str| {
        let client = client.clone();
        let req = http::Request::get(path.to_string())
            .body(Vec::new())
            .unwrap();
        async move { client.request_text(req).await }
    };
    assert_eq!(get("/api/v1/nodes/n1/proxy/healthz").await.unwrap(), "ok");
    assert_eq!(
        get("/api/v1/nodes/n1/proxy/containerLogs/default/p/c")
            .await
            .unwrap(),
        "hi\n"
    );
    let list: serde_json::Value =
        serde_json::from_str(&get("/api/v1/nodes/n1/proxy/pods").await.unwrap()).unwrap();
    assert_eq!(list["items"][0]["metadata"]["name"], "p");
    let metrics = get("/api/v1/nodes/n1/proxy/metrics/resource")
        .await
        .unwrap();
    assert!(
        metrics.contains(
            "container_start_time_seconds{container=\"c\",namespace=\"default\",pod=\"p\"}"
        )
    );
    c.apply_fault("n1", NodeFault::StopKubelet).await.unwrap();
    let e = api_err(get("/api/v1/nodes/n1/proxy/healthz").await.unwrap_err());
    assert_eq!(
        e.2,
        "error trying to reach service: dial tcp 10.0.0.10:10250: connect: connection refused"
    );
}

#[tokio::test(start_paused = true)]
async fn a_machine_added_to_the_running_cluster_serves_logs() {
    let c = cluster().await;
    c.add_node(&NodeSpec::new("n9")).unwrap();
    // The new kubelet registers before its pods can be bound to it.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(c.admin_client());
    for _ in 0..30 {
        if nodes.get_opt("n9").await.unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let pods: Api<Pod> = Api::namespaced(c.admin_client(), "default");
    let mut p = pod("late", "echo hello from n9; sleep 3600");
    p.spec.as_mut().unwrap().node_name = Some("n9".into());
    pods.create(&PostParams::default(), &p).await.unwrap();
    wait_running(&pods, "late").await;
    let text = pods.logs("late", &LogParams::default()).await.unwrap();
    assert_eq!(text, "hello from n9\n");
}
