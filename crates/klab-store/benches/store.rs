//! Store benchmark (not a test): durable redb writes/s at concurrency 1, 16 and 128 with ~1 KiB
//! values, memory-store writes/s, and point-get latency. Prints a table.
//!
//! Run in release: `cargo bench -p klab-store` (or `cargo run --release --bench store`). The redb
//! file lives in a temporary directory on the default temp filesystem (`TMPDIR` to change it).
// Wall-clock timing is the whole point of a benchmark; nothing here feeds simulated behaviour.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use klab_store::{DynStorage, ListOptions, MemoryStore, RedbStore};

/// ~1 KiB of pseudo-random hex, like a serialized object (no free ride for any compression).
fn value(seed: u64) -> Bytes {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(1024);
    while out.len() < 1024 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend(format!("{x:016x}").bytes());
    }
    out.truncate(1024);
    Bytes::from(out)
}

/// `concurrency` tasks write `total` new keys under `prefix`; returns writes per second.
async fn write_rate(store: &DynStorage, prefix: &str, concurrency: usize, total: usize) -> f64 {
    let per_task = total / concurrency;
    let values: Arc<Vec<Bytes>> = Arc::new((0..64).map(value).collect());
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|t| {
            let (store, values, prefix) = (store.clone(), values.clone(), prefix.to_owned());
            tokio::spawn(async move {
                for i in 0..per_task {
                    let key = format!("{prefix}{t:03}/{i:07}");
                    store
                        .create(&key, values[i % values.len()].clone())
                        .await
                        .expect("create");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("writer task");
    }
    (per_task * concurrency) as f64 / start.elapsed().as_secs_f64()
}

/// Mean latency of sequential point gets of existing keys (pseudo-random order).
async fn get_latency(store: &DynStorage, keys: &[String], n: usize) -> Duration {
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let start = Instant::now();
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = &keys[(x % keys.len() as u64) as usize];
        assert!(store.get(key).await.expect("get").is_some());
    }
    start.elapsed() / n as u32
}

async fn scan_time(store: &DynStorage, prefix: &str) -> (usize, Duration) {
    let start = Instant::now();
    let n = store
        .list(prefix, ListOptions::default())
        .await
        .expect("list")
        .kvs
        .len();
    (n, start.elapsed())
}

/// The disk's own cost of durability here: 4 KiB write + fdatasync, sequentially.
fn fsync_baseline(dir: &std::path::Path, n: u32) -> f64 {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("fsync-baseline")).expect("baseline file");
    let block = [0x5au8; 4096];
    let start = Instant::now();
    for _ in 0..n {
        f.write_all(&block).expect("write");
        f.sync_data().expect("fdatasync");
    }
    f64::from(n) / start.elapsed().as_secs_f64()
}

fn row(what: &str, result: String) {
    println!("| {what:<52} | {result:>18} |");
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        println!("| {:<52} | {:>18} |", "measurement", "result");
        println!("|{}|{}|", "-".repeat(54), "-".repeat(20));

        let dir = tempfile::tempdir().expect("tempdir");
        let baseline = fsync_baseline(dir.path(), 300);
        row(
            "disk: 4 KiB append + fdatasync (baseline)",
            format!("{baseline:.0} /s"),
        );
        let redb = RedbStore::open(dir.path().join("bench.redb")).expect("open redb");
        let store: DynStorage = redb.clone();
        for (concurrency, total) in [(1, 3_000), (16, 40_000), (128, 100_000)] {
            let commits = redb.commit_count();
            let rate = write_rate(
                &store,
                &format!("/bench/c{concurrency}/"),
                concurrency,
                total,
            )
            .await;
            let batches = redb.commit_count() - commits;
            row(
                &format!(
                    "redb durable creates, concurrency {concurrency} ({} per commit)",
                    total / batches.max(1) as usize
                ),
                format!("{rate:.0} /s"),
            );
        }
        let keys: Vec<String> = store
            .list(
                "/bench/c128/",
                ListOptions {
                    limit: Some(20_000),
                    ..Default::default()
                },
            )
            .await
            .expect("list")
            .kvs
            .into_iter()
            .map(|kv| kv.key)
            .collect();
        let lat = get_latency(&store, &keys, 100_000).await;
        row(
            "redb point get (143k keys, sequential)",
            format!("{:.1} µs", lat.as_secs_f64() * 1e6),
        );
        for pass in ["first", "second"] {
            let (n, t) = scan_time(&store, "/bench/c128/").await;
            row(
                &format!("redb list of {n} keys ({pass} pass)"),
                format!("{:.1} ms", t.as_secs_f64() * 1e3),
            );
        }
        drop(store);
        drop(redb);

        let mem: DynStorage = MemoryStore::new();
        for (concurrency, total) in [(1, 200_000), (16, 200_000)] {
            let rate =
                write_rate(&mem, &format!("/bench/c{concurrency}/"), concurrency, total).await;
            row(
                &format!("memory creates, concurrency {concurrency}"),
                format!("{rate:.0} /s"),
            );
        }
        let keys: Vec<String> = (0..20_000)
            .map(|i| format!("/bench/c1/000/{i:07}"))
            .collect();
        let lat = get_latency(&mem, &keys, 200_000).await;
        row(
            "memory point get (400k keys, sequential)",
            format!("{:.2} µs", lat.as_secs_f64() * 1e6),
        );
    });
}
