//! Release benchmark of `klab sim` (harness = false): wall time of the seed-000 ">5 min" power-off
//! scenario, and of a 100 nodes × 30 pods × 30 virtual minutes run with one node failing.
//!
//! `cargo bench -p klab-sim` (add `-- quick` to run the small scenario only; `-- large10` for
//! 100 nodes × 3000 pods × 10 virtual minutes; `-- idle1000` for 1000 nodes without pods × 10
//! virtual minutes — run one case per process to read its peak RSS with `/usr/bin/time -v`).
#![allow(clippy::disallowed_methods)] // measuring wall-clock time is the point of a benchmark

use std::path::Path;
use std::time::Instant;

use klab_sim::{RunOptions, run_blocking, scenario};

fn bench(name: &str, sc: &scenario::Scenario, rounds: usize) {
    let mut best = f64::MAX;
    let mut lines = 0;
    let mut records = 0;
    for _ in 0..rounds {
        let t0 = Instant::now();
        let o = run_blocking(sc, &RunOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        best = best.min(t0.elapsed().as_secs_f64());
        lines = o.lines.len();
        records = o.records.len();
        if !o.verdict.failures.is_empty() {
            eprintln!("{name}: {} expectation(s) failed", o.verdict.failures.len());
        }
    }
    let virt = sc.run_for.as_secs_f64();
    println!(
        "{name:<40} {virt:>7.0} virtual s  best {:>8.1} ms wall  ({:>7.0}x)  {records} observations, {lines} trace lines",
        best * 1e3,
        virt / best
    );
}

/// 100 nodes, a 3000-replica Deployment (30 pods per node: 100m cpu each on 4-cpu nodes), node
/// n1 powered off after one minute, 30 virtual minutes.
fn large(run_for: &str) -> scenario::Scenario {
    let text = r#"name: large-100x30
run-for: RUN_FOR
cluster:
  nodes:
    - {name-prefix: n, count: 100, cpu: 4, memory: 16Gi}
manifests:
  - inline: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: app}
      spec:
        replicas: 3000
        selector: {matchLabels: {app: app}}
        template:
          metadata: {labels: {app: app}}
          spec:
            containers:
              - name: app
                image: app
                resources: {requests: {cpu: 100m, memory: 64Mi}}
faults:
  - {at: 60s, fault: power-off, node: n1}
"#;
    scenario::parse(
        &text.replace("RUN_FOR", run_for),
        Path::new("large-100x30.yaml"),
    )
    .expect("valid benchmark scenario")
}

/// 1000 nodes without pods for 10 virtual minutes: the cost of heartbeats alone.
fn idle() -> scenario::Scenario {
    let text = r#"name: idle-1000
run-for: 10m
cluster:
  nodes:
    - {name-prefix: n, count: 1000, cpu: 4, memory: 16Gi}
"#;
    scenario::parse(text, Path::new("idle-1000.yaml")).expect("valid benchmark scenario")
}

fn main() {
    let arg = |name: &str| std::env::args().any(|a| a == name);
    if arg("large10") {
        bench("100 nodes x 30 pods, 10 min, 1 failure", &large("10m"), 1);
        return;
    }
    if arg("idle1000") {
        bench("1000 idle nodes, 10 min", &idle(), 1);
        return;
    }
    let quick = arg("quick");
    let root =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/node/power-off-over-5m.yaml");
    let sc = scenario::load(&root).unwrap_or_else(|e| panic!("{e}"));
    bench("seed-000 power-off > 5 min (3 nodes)", &sc, 5);
    if !quick {
        bench("100 nodes x 30 pods, 30 min, 1 failure", &large("30m"), 1);
    }
}
