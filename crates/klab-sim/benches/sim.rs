//! Release benchmark of `klab sim` (harness = false): wall time of the seed-000 ">5 min" power-off
//! scenario, and of a 100 nodes × 30 pods × 30 virtual minutes run with one node failing.
//!
//! `cargo bench -p klab-sim` (add `-- quick` to run the small scenario only; `-- large10` for
//! 100 nodes × 3000 pods × 10 virtual minutes; `-- idle1000` for 1000 nodes without pods × 10
//! virtual minutes — run one case per process to read its peak RSS with `/usr/bin/time -v`).
//!
//! The issue's scale targets: `-- k1000` (1 000 nodes × 30 000 pods × 10 virtual minutes) and
//! `-- zones5000` (5 000 nodes in 3 zones, 150 000 pods in Deployments of mixed sizes, StatefulSets
//! and DaemonSets, zone `za` powered off at 5 min, 30 virtual minutes). Both raise the controller
//! manager's client rate (`kube-api-qps`) and the scheduler's (`clientConnection.qps`), as large
//! clusters are configured, so that neither pod creation nor binding is what the run measures: at
//! the scheduler's default 50 per second, 30 000 Bindings take the whole 10 minutes.
//!
//! `KLAB_BENCH_WALL_CAP=<seconds>` stops a case after that much wall time and prints how far it
//! got in virtual time. Every case prints its progress every 10 s (with the versions and bytes of
//! values the store holds, history included, and how many of the decodes the shared table names
//! some component still holds, pods among them: a lower bound, since objects decoded outside the
//! table are not counted; more pods than exist means old versions held) and its trace hash (the
//! same for the same seed; `KLAB_BENCH_TRACE=<file>` also writes the trace's lines there, to
//! compare two builds). `KLAB_BENCH_REQUESTS=1` also prints the API server's request counts
//! (`apiserver_request_total`) at the end of each round: where the work is.
//! `KLAB_BENCH_RUN_FOR=<seconds>` ends a case after that many virtual seconds instead of its
//! own run-for: the same work on every run, so two builds compare by instruction counts
//! (`perf stat -e instructions:u`), which vary far less than wall times.
#![allow(clippy::disallowed_methods)] // measuring wall-clock time is the point of a benchmark

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use klab_apiserver::metrics::SharedMetrics;
use klab_cluster::Cluster;
use klab_sim::runner::{Progress, StartHook};
use klab_sim::{RunOptions, run_blocking, scenario};

/// The allocator of the `klab` binary (see its `main.rs`), so that the numbers are the binary's
/// (feature `system-alloc`: the system's, for a heap profiler).
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The run's store, once the cluster has started (for its memory figures).
type HeldStore = Arc<Mutex<Option<klab_store::DynStorage>>>;

/// Prints the run's virtual time (and what the store holds of its values, history included)
/// every 10 s of wall time; past `cap` seconds, prints how far the run got and ends the process
/// (a case too slow to finish still reports its pace).
fn watch_progress(name: &str, t0: Instant, p: Arc<Progress>, cap: Option<f64>, store: HeldStore) {
    let name = name.to_string();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_secs(10));
            let wall = t0.elapsed().as_secs_f64();
            let virt = p.virtual_ms.load(Ordering::Relaxed) as f64 / 1e3;
            let held = store
                .lock()
                .expect("not poisoned")
                .as_ref()
                .and_then(|s| s.memory_held())
                .map(|(n, b)| format!(", store {n} versions, {:.0} MB", b as f64 / 1e6))
                .unwrap_or_default();
            let (live, pods) = klab_api::shared::live();
            eprintln!(
                "{name}: {wall:>7.0} s wall, {virt:>7.1} virtual s{held}, {live} shared decodes held ({pods} pods)"
            );
            if cap.is_some_and(|c| wall >= c) {
                println!(
                    "{name:<40} stopped at the wall-time cap: {virt:.1} virtual s in {wall:.0} s wall ({:.2}x)",
                    virt / wall
                );
                std::process::exit(0);
            }
        }
    });
}

fn bench(name: &str, sc: &scenario::Scenario, rounds: usize) {
    let mut sc = sc.clone();
    if let Some(secs) = std::env::var("KLAB_BENCH_RUN_FOR")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        sc.run_for = sc.run_for.min(Duration::from_secs(secs));
    }
    let sc = &sc;
    let mut best = f64::MAX;
    let mut lines = 0;
    let mut records = 0;
    let cap = std::env::var("KLAB_BENCH_WALL_CAP")
        .ok()
        .and_then(|s| s.parse::<f64>().ok());
    for _ in 0..rounds {
        let t0 = Instant::now();
        let progress = Arc::new(Progress::default());
        let store: HeldStore = Arc::default();
        let store_at_end = store.clone();
        watch_progress(name, t0, progress.clone(), cap, store.clone());
        let metrics: Arc<Mutex<Option<SharedMetrics>>> = Arc::default();
        let keep = metrics.clone();
        let requests = std::env::var_os("KLAB_BENCH_REQUESTS").is_some();
        let api: Arc<Mutex<Option<klab_apiserver::ApiServer>>> = Arc::default();
        let keep_api = api.clone();
        let hook: StartHook = Arc::new(move |c: &Cluster| {
            *store.lock().expect("not poisoned") = Some(c.api().store().clone());
            *keep_api.lock().expect("not poisoned") = Some(c.api().clone());
            if requests {
                *keep.lock().expect("not poisoned") = Some(c.api().metrics().clone());
            }
        });
        let opts = RunOptions {
            progress: Some(progress),
            on_start: Some(hook),
            ..RunOptions::default()
        };
        let o = run_blocking(sc, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Some(m) = metrics.lock().expect("not poisoned").as_ref() {
            print_requests(name, &m.render(&[]));
        }
        best = best.min(t0.elapsed().as_secs_f64());
        lines = o.lines.len();
        records = o.records.len();
        eprintln!("{name}: trace hash {:016x}", o.trace_hash());
        let (hits, misses) = klab_api::shared::stats();
        eprintln!("{name}: shared decodes (process total): {hits} reused, {misses} decoded");
        if let Some(api) = api.lock().expect("not poisoned").take() {
            let w = api.watch_decodes();
            eprintln!(
                "{name}: watch changes: {} examined, {} read from stored bytes ({} of resources with one watch), {} from a change's memo, {} memos left empty (too many held), {} objects decoded from stored bytes",
                w.examined,
                w.from_bytes,
                w.from_bytes_alone,
                w.from_memo,
                w.memo_refused,
                w.objects_decoded
            );
        }
        if let Some((n, b)) = store_at_end
            .lock()
            .expect("not poisoned")
            .as_ref()
            .and_then(|s| s.memory_held())
        {
            eprintln!(
                "{name}: store at the end: {n} versions, {b} bytes of values (history, dictionaries and their indexes included)"
            );
        }
        if let Some(path) = std::env::var_os("KLAB_BENCH_TRACE") {
            let mut text = o
                .lines
                .iter()
                .map(|l| l.plain())
                .collect::<Vec<_>>()
                .join("\n");
            text.push('\n');
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing the trace: {e}"));
        }
        if !o.verdict.failures.is_empty() {
            eprintln!("{name}: {} expectation(s) failed", o.verdict.failures.len());
        }
        let pods = PodCount::of(&o.snapshot);
        eprintln!(
            "{name}: pods at the end: {} ({} bound, {} Running)",
            pods.total, pods.bound, pods.running
        );
        if pods.stalled > 0 {
            // A run whose pods were never placed did not do the work it is timed for.
            eprintln!(
                "{name}: {} pod(s) created more than {} s before the end were never bound: the run's time measures a stall, not this case",
                pods.stalled,
                STALL.as_secs()
            );
            std::process::exit(1);
        }
    }
    let virt = sc.run_for.as_secs_f64();
    println!(
        "{name:<40} {virt:>7.0} virtual s  best {:>8.1} ms wall  ({:>7.0}x)  {records} observations, {lines} trace lines",
        best * 1e3,
        virt / best
    );
}

/// How long a pod may wait for its node before the run counts as stalled: far beyond a
/// scheduling cycle and the client rate limits of the scale cases.
const STALL: Duration = Duration::from_secs(60);

/// The pods a run ended with.
struct PodCount {
    total: usize,
    bound: usize,
    running: usize,
    /// Pods created more than [`STALL`] before the end and still without a node.
    stalled: usize,
}

impl PodCount {
    fn of(snapshot: &klab_why::Snapshot) -> PodCount {
        let before = snapshot
            .now
            .checked_sub(jiff::SignedDuration::try_from(STALL).expect("a minute fits"))
            .unwrap_or(snapshot.now);
        let mut c = PodCount {
            total: snapshot.pods.len(),
            bound: 0,
            running: 0,
            stalled: 0,
        };
        for p in &snapshot.pods {
            let bound = p.spec.as_ref().is_some_and(|s| s.node_name.is_some());
            c.bound += usize::from(bound);
            c.running += usize::from(
                p.status
                    .as_ref()
                    .is_some_and(|s| s.phase.as_deref() == Some("Running")),
            );
            let created = p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            c.stalled += usize::from(!bound && created.is_some_and(|t| t < before));
        }
        c
    }
}

/// Prints the `apiserver_request_total` lines of a metrics text, largest first, and their sum.
fn print_requests(name: &str, text: &str) {
    let mut rows: Vec<(u64, &str)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("apiserver_request_total{"))
        .filter_map(|l| {
            let (labels, n) = l.rsplit_once("} ")?;
            Some((n.parse().ok()?, labels))
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    let total: u64 = rows.iter().map(|r| r.0).sum();
    eprintln!("{name}: {total} API requests");
    for (n, labels) in rows {
        eprintln!("{n:>9} {labels}");
    }
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

/// A Deployment manifest of `replicas` pods asking 100m CPU and 64Mi each.
fn deployment(name: &str, replicas: u32) -> String {
    format!(
        r#"  - inline: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {{name: {name}}}
      spec:
        replicas: {replicas}
        selector: {{matchLabels: {{app: {name}}}}}
        template:
          metadata: {{labels: {{app: {name}}}}}
          spec:
            containers:
              - name: app
                image: app
                resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}
"#
    )
}

/// 1 000 nodes, 30 000 pods in Deployments of mixed sizes (10 × 2 000 and 20 × 500), node n1
/// powered off after one minute, 10 virtual minutes.
fn k1000() -> scenario::Scenario {
    let mut text = String::from(
        "name: scale-1000x30000\nrun-for: 10m\nflags: {kube-api-qps: 1000, kube-api-burst: 2000, clientConnection.qps: 1000, clientConnection.burst: 2000}\ncluster:\n  nodes:\n    - {name-prefix: n, count: 1000, cpu: 8, memory: 32Gi}\nmanifests:\n",
    );
    for i in 0..10 {
        text.push_str(&deployment(&format!("big{i}"), 2000));
    }
    for i in 0..20 {
        text.push_str(&deployment(&format!("small{i}"), 500));
    }
    text.push_str("faults:\n  - {at: 60s, fault: power-off, node: n1}\n");
    scenario::parse(&text, Path::new("scale-1000x30000.yaml")).expect("valid benchmark scenario")
}

/// 5 000 nodes in zones za/zb/zc, 150 000 pods: Deployments (10 × 10 000 and 70 × 500), five
/// 1 000-replica StatefulSets (Parallel) and two DaemonSets (one pod per node each); every node of
/// zone za powered off at 5 min (the zone-disruption path), 30 virtual minutes.
fn zones5000() -> scenario::Scenario {
    let mut text = String::from(
        "name: scale-5000x150000\nrun-for: 30m\nflags: {kube-api-qps: 1000, kube-api-burst: 2000, clientConnection.qps: 1000, clientConnection.burst: 2000}\ncluster:\n  nodes:\n",
    );
    for (zone, count) in [("za", 1667), ("zb", 1667), ("zc", 1666)] {
        text.push_str(&format!(
            "    - {{name-prefix: {zone}-n, count: {count}, zone: {zone}, cpu: 8, memory: 32Gi}}\n"
        ));
    }
    text.push_str("manifests:\n");
    for i in 0..10 {
        text.push_str(&deployment(&format!("big{i}"), 10_000));
    }
    for i in 0..70 {
        text.push_str(&deployment(&format!("small{i}"), 500));
    }
    for i in 0..5 {
        text.push_str(&format!(
            r#"  - inline: |
      apiVersion: apps/v1
      kind: StatefulSet
      metadata: {{name: db{i}}}
      spec:
        serviceName: db{i}
        replicas: 1000
        podManagementPolicy: Parallel
        selector: {{matchLabels: {{app: db{i}}}}}
        template:
          metadata: {{labels: {{app: db{i}}}}}
          spec:
            containers:
              - name: db
                image: db
                resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}
"#
        ));
    }
    for name in ["logs", "metrics"] {
        text.push_str(&format!(
            r#"  - inline: |
      apiVersion: apps/v1
      kind: DaemonSet
      metadata: {{name: {name}}}
      spec:
        selector: {{matchLabels: {{app: {name}}}}}
        template:
          metadata: {{labels: {{app: {name}}}}}
          spec:
            containers:
              - name: agent
                image: {name}
                resources: {{requests: {{cpu: 50m, memory: 32Mi}}}}
"#
        ));
    }
    text.push_str("faults:\n");
    for n in 1..=1667 {
        text.push_str(&format!(
            "  - {{at: 5m, fault: power-off, node: za-n{n}}}\n"
        ));
    }
    scenario::parse(&text, Path::new("scale-5000x150000.yaml")).expect("valid benchmark scenario")
}

fn main() {
    klab_api::heap::tune_mimalloc();
    let arg = |name: &str| std::env::args().any(|a| a == name);
    if arg("k1000") {
        bench("1000 nodes x 30000 pods, 10 min", &k1000(), 1);
        return;
    }
    if arg("zones5000") {
        bench("5000 nodes/3 zones x 150000 pods, 30 min", &zones5000(), 1);
        return;
    }
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
