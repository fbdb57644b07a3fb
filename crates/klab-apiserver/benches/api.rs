//! API server throughput through unmodified kube-rs clients on the in-process transport:
//! pod creates/s on the memory store and on the durable redb store (group commit), sequential and
//! with 16 concurrent clients. Run: `cargo bench -p klab-apiserver --bench api`.
#![allow(clippy::disallowed_methods)] // a benchmark measures wall time on purpose

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use klab_api::{Clock, DetRng};
use klab_apiserver::{ApiServer, ApiServerConfig, Identity};
use kube::api::{Api, PostParams};

fn pod(name: String) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx:1.27"}]}
    }))
    .unwrap()
}

async fn run(store: klab_store::DynStorage, n: usize, concurrency: usize) -> f64 {
    let api = ApiServer::new(
        store,
        Clock::scaled(1.0),
        DetRng::seeded(1),
        ApiServerConfig::default(),
    )
    .await
    .unwrap();
    let client = kube::Client::new(api.router_as(Identity::admin()), "default");
    let start = Instant::now();
    let per = n / concurrency;
    let mut tasks = Vec::new();
    for t in 0..concurrency {
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..per {
                pods.create(&PostParams::default(), &pod(format!("p-{t}-{i}")))
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (per * concurrency) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!("{:<44} {:>12}", "path", "creates/s");
    for (label, conc, n) in [
        ("memory, sequential", 1, 5_000),
        ("memory, 16 concurrent", 16, 5_000),
    ] {
        let r = rt.block_on(run(klab_store::memory::MemoryStore::new(), n, conc));
        println!("{label:<44} {r:>12.0}");
    }
    for (label, conc, n) in [
        ("redb (fsync per group commit), sequential", 1, 1_000),
        ("redb (fsync per group commit), 16 concurrent", 16, 5_000),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store: klab_store::DynStorage =
            klab_store::redb_store::RedbStore::open(dir.path().join("bench.redb")).unwrap();
        let r = rt.block_on(run(Arc::clone(&store), n, conc));
        println!("{label:<44} {r:>12.0}");
    }
}
