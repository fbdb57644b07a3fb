//! Release benchmark (harness = false) of the kubelet streams on a wall-clock cluster (the
//! components of `klab up`, in process, without TLS): 100 concurrent `logs -f` streams, then
//! exec round-trips at a target rate of 100 per second, with latency percentiles.
//!
//! `cargo bench -p klab-sim --bench streams`
#![allow(clippy::disallowed_methods)] // measuring wall-clock time is the point of a benchmark

use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use klab_cluster::{Cluster, ClusterConfig, NodeSpec};
use kube::api::{Api, LogParams, PostParams};

const STREAMS: usize = 100;
const EXEC_RATE: u64 = 100;
const SECONDS: u64 = 5;

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

async fn bench() {
    let config = ClusterConfig {
        nodes: (1..=3).map(|i| NodeSpec::new(format!("n{i}"))).collect(),
        ..Default::default()
    };
    let cluster = Cluster::start(
        klab_store::memory::MemoryStore::new(),
        klab_api::Clock::scaled(1.0),
        klab_api::DetRng::seeded(1),
        config,
    )
    .await
    .expect("cluster");
    let pods: Api<Pod> = Api::namespaced(cluster.admin_client(), "default");
    for i in 1..=3 {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("tick{i}")},
            "spec": {"nodeName": format!("n{i}"), "containers": [{"name": "c", "image": "busybox",
                "command": ["sh", "-c", "while true; do echo tick; sleep 0.1; done"]}]}
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &p)
            .await
            .expect("create");
    }
    loop {
        let running = pods
            .list(&Default::default())
            .await
            .expect("list")
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if running == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // 100 concurrent follows: time to the first line, and lines delivered per second.
    let follow = LogParams {
        follow: true,
        tail_lines: Some(0),
        ..Default::default()
    };
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..STREAMS {
        let pods = pods.clone();
        let lp = follow.clone();
        tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let name = format!("tick{}", i % 3 + 1);
            let mut lines = pods.log_stream(&name, &lp).await.expect("follow").lines();
            let mut first = None;
            let mut n = 0u64;
            let end = t0 + Duration::from_secs(SECONDS);
            while let Ok(Some(Ok(_))) = tokio::time::timeout_at(end.into(), lines.next()).await {
                first.get_or_insert(start.elapsed().as_secs_f64() * 1e3);
                n += 1;
            }
            (first.unwrap_or(f64::NAN), n)
        }));
    }
    let mut firsts = Vec::new();
    let mut total = 0;
    for t in tasks {
        let (f, n) = t.await.expect("stream task");
        firsts.push(f);
        total += n;
    }
    let expected = STREAMS as f64 * SECONDS as f64 * 10.0;
    println!(
        "{STREAMS} concurrent logs -f over {SECONDS} s: {total} lines ({:.0}% of the {expected:.0} written), first line p50 {:.1} ms p99 {:.1} ms",
        total as f64 / expected * 100.0,
        pct(&mut firsts.clone(), 0.5),
        pct(&mut firsts, 0.99)
    );
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Exec round-trips started at a fixed rate, each `hostname` over the WebSocket protocol.
    let router = cluster.api().router_as(klab_apiserver::Identity::admin());
    let argv = vec!["hostname".to_string()];
    let mut tasks = Vec::new();
    let t0 = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / EXEC_RATE));
    for i in 0..(EXEC_RATE * SECONDS) {
        tick.tick().await;
        let (router, argv) = (router.clone(), argv.clone());
        tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let name = format!("tick{}", i % 3 + 1);
            let out = klab_sim::kubectl::exec(router, "default", &name, None, &argv).await;
            assert_eq!(out, vec![name], "exec output");
            start.elapsed().as_secs_f64() * 1e3
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.push(t.await.expect("exec task"));
    }
    let wall = t0.elapsed().as_secs_f64();
    println!(
        "{} exec round-trips at {EXEC_RATE}/s target: {:.0}/s achieved, latency p50 {:.1} ms p99 {:.1} ms max {:.1} ms",
        lat.len(),
        lat.len() as f64 / wall,
        pct(&mut lat.clone(), 0.5),
        pct(&mut lat.clone(), 0.99),
        pct(&mut lat, 1.0)
    );
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(bench());
}
