//! Benchmark: N simulated nodes (default 1 000) heartbeating for 10 virtual minutes against the
//! in-process API server, on one paused current-thread runtime. Prints wall time and peak RSS.
//! Run with `cargo bench -p klab-kubelet --bench nodes` (release); `KLAB_BENCH_NODES` and
//! `KLAB_BENCH_MINUTES` override the size.
#![allow(clippy::disallowed_methods)] // measuring the wall time of the run is the point here

use std::time::{Duration, Instant};

use klab_api::{Clock, DetRng};
use klab_apiserver::identity::Identity;
use klab_apiserver::testing::memory_server_with;
use klab_kubelet::config::{KubeletConfig, NodeSpecConfig, RuntimeModel};
use klab_kubelet::node::SimNode;

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let nodes: usize = std::env::var("KLAB_BENCH_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let minutes: u64 = std::env::var("KLAB_BENCH_MINUTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    let wall = Instant::now();
    rt.block_on(async move {
        let clock = Clock::virtual_default();
        let api = memory_server_with(clock.clone(), DetRng::seeded(1), Default::default()).await;
        let rng = DetRng::seeded(2);
        let mut sims = Vec::with_capacity(nodes);
        for i in 0..nodes {
            let name = format!("node-{i:04}");
            let router = api.router_as(Identity::node(&name));
            let spec = NodeSpecConfig {
                node_ip: format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256 + 1),
                ..Default::default()
            };
            let mut n = SimNode::new(
                &name,
                spec,
                KubeletConfig::default(),
                RuntimeModel::default(),
                clock.clone(),
                rng.clone(),
                move |_| router.clone(),
            );
            n.start();
            sims.push(n);
        }
        tokio::time::sleep(Duration::from_secs(minutes * 60)).await;
        let running = sims.iter().filter(|n| n.state().kubelet_running).count();
        println!("nodes={nodes} virtual_minutes={minutes} kubelets_running={running}");
    });
    println!(
        "wall_time={:.3}s peak_rss={} MiB",
        wall.elapsed().as_secs_f64(),
        peak_rss_kib() / 1024
    );
}
