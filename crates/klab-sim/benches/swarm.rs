//! Release swarm run (harness = false): random operations and faults over many seeds, each played
//! as a scenario in virtual time (`klab_sim::swarm`); reports failures with their scenario files,
//! and the wall time per case.
//!
//! `cargo bench -p klab-sim --bench swarm -- [--seeds N] [--from S] [--threads T] [--print SEED]`
//! (defaults: 1000 seeds from 1, 2 threads). Failing cases are written to
//! `target/swarm-failures/swarm-SEED.yaml`, ready for `klab sim`.
#![allow(clippy::disallowed_methods)] // measuring wall-clock time is the point of a benchmark

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use klab_sim::swarm::{SwarmConfig, SwarmFailure, generate, run_case};

fn arg(args: &[String], name: &str) -> Option<u64> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let cfg = SwarmConfig::default();
    if let Some(seed) = arg(&args, "--print") {
        print!("{}", generate(seed, &cfg));
        return;
    }
    let seeds = arg(&args, "--seeds").unwrap_or(1000);
    let from = arg(&args, "--from").unwrap_or(1);
    let threads = arg(&args, "--threads").unwrap_or(2).max(1);
    let next = AtomicU64::new(from);
    let last = from.saturating_add(seeds);
    let failures: Mutex<Vec<SwarmFailure>> = Mutex::new(Vec::new());
    let slowest = Mutex::new((0.0f64, 0u64));
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::SeqCst);
                    if seed >= last {
                        break;
                    }
                    let t = Instant::now();
                    let r = run_case(seed, &cfg);
                    let took = t.elapsed().as_secs_f64();
                    {
                        let mut sl = slowest.lock().unwrap();
                        if took > sl.0 {
                            *sl = (took, seed);
                        }
                    }
                    if let Err(f) = r {
                        eprintln!("FAILED seed {seed}: {}", f.problem);
                        failures.lock().unwrap().push(f);
                    }
                }
            });
        }
    });
    let wall = t0.elapsed().as_secs_f64();
    let failures = failures.into_inner().unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/swarm-failures");
    for f in &failures {
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join(format!("swarm-{}.yaml", f.seed)), &f.scenario);
    }
    let (slow, slow_seed) = slowest.into_inner().unwrap();
    let virt = (cfg.chaos_for + cfg.settle_for).as_secs();
    println!(
        "swarm: {seeds} seeds from {from} ({} ops, {virt} virtual s each) on {threads} threads in {wall:.1} s wall: {:.0} ms per case (slowest {:.0} ms, seed {slow_seed})",
        cfg.operations,
        wall * 1e3 * threads as f64 / seeds.max(1) as f64,
        slow * 1e3
    );
    let mut failed: Vec<u64> = failures.iter().map(|f| f.seed).collect();
    failed.sort_unstable();
    println!(
        "swarm: {} passed, {} failed {failed:?}",
        seeds as usize - failed.len(),
        failed.len()
    );
    if !failed.is_empty() {
        println!("swarm: failing scenarios written to {}", dir.display());
        std::process::exit(1);
    }
}
