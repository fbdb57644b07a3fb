//! Reads of a 5 000-node / 150 000-pod cluster as kubectl makes them, through the Router with
//! kubectl's Table `Accept` header: `get nodes`, `get pods -A --field-selector spec.nodeName=X`,
//! every page of a paginated `get pods -A` (limit 500), and one page of it. The store is filled
//! directly with copies of a pod and a node that went through the API (a Running pod with its
//! status, a Ready node), so decoding costs what a real cluster's objects cost. A Lease is
//! renewed before every continued page, so that, as in a live cluster, continued pages read the
//! store at a past revision.
//! Run: `cargo bench -p klab-apiserver --bench list` (memory store, as in sim), or with
//! `KLAB_BENCH_STORE=redb` on the durable store of `klab up` (a file in a temporary directory).
#![allow(clippy::disallowed_methods)] // a benchmark measures wall time on purpose

use std::time::Instant;

use axum::body::Body;
use bytes::Bytes;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use klab_api::{Clock, DetRng};
use klab_apiserver::{ApiServer, ApiServerConfig, Identity};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tower::ServiceExt;

/// The allocator of the `klab` binary (see its `main.rs`), so that the numbers are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const NODES: usize = 5_000;
const PODS_PER_NODE: usize = 30;
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

/// The stored bytes of `key`.
async fn stored(api: &ApiServer, key: &str) -> String {
    let kv = api.store().get(key).await.unwrap().unwrap();
    String::from_utf8(kv.value.to_vec()).unwrap()
}

async fn fill(api: &ApiServer) {
    let client = kube::Client::new(api.router_as(Identity::admin()), "default");
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "nodetemplate", "labels": {"kubernetes.io/hostname": "nodetemplate",
            "topology.kubernetes.io/zone": "za"}},
        "spec": {"podCIDR": "10.244.1.0/24"}
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let conditions: Vec<Value> = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        .iter()
        .map(|t| {
            let ready = *t == "Ready";
            json!({"type": t, "status": if ready { "True" } else { "False" },
                "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z",
                "reason": if ready { "KubeletReady" } else { "KubeletHasSufficientMemory" },
                "message": "kubelet is posting ready status"})
        })
        .collect();
    let status = json!({"status": {
        "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        "conditions": conditions,
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "nodetemplate"}],
        "nodeInfo": {"kubeletVersion": "v1.33.0", "containerRuntimeVersion": "containerd://1.7.0",
            "osImage": "Debian", "kernelVersion": "6.1", "operatingSystem": "linux", "architecture": "amd64",
            "machineID": "m", "systemUUID": "s", "bootID": "b", "kubeProxyVersion": "v1.33.0"}}});
    nodes
        .patch_status(
            "nodetemplate",
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "podtemplate", "labels": {"app": "app", "pod-template-hash": "5d8f7b6c9"}},
        "spec": {"nodeName": "nodetemplate", "containers": [{"name": "app", "image": "app",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let conditions: Vec<Value> = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .map(|t| json!({"type": t, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}))
    .collect();
    let status = json!({"status": {"phase": "Running", "podIP": "10.244.1.7", "hostIP": "10.0.0.1",
        "startTime": "2026-01-01T00:00:00Z", "qosClass": "Burstable",
        "conditions": conditions,
        "containerStatuses": [{"name": "app", "ready": true, "started": true, "restartCount": 0,
            "image": "docker.io/library/app:latest", "imageID": "docker.io/library/app@sha256:0123",
            "containerID": "containerd://0123456789abcdef",
            "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}}}]}});
    pods.patch_status(
        "podtemplate",
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await
    .unwrap();
    let node_bytes = stored(api, "/registry/core/nodes/nodetemplate").await;
    let pod_bytes = stored(api, "/registry/core/pods/default/podtemplate").await;
    api.store()
        .delete("/registry/core/pods/default/podtemplate", None)
        .await
        .unwrap();
    // Many writes in flight at once, so that a durable store commits them in groups.
    let store = api.store();
    let mut writes = Vec::new();
    for n in 0..NODES {
        let name = format!("node-{n:04}");
        let bytes = Bytes::from(node_bytes.replace("nodetemplate", &name));
        writes.push((format!("/registry/core/nodes/{name}"), bytes));
        for p in 0..PODS_PER_NODE {
            let pod = format!("app-{n:04}-{p:02}");
            let bytes = pod_bytes
                .replace("podtemplate", &pod)
                .replace("nodetemplate", &name);
            writes.push((
                format!("/registry/core/pods/default/{pod}"),
                Bytes::from(bytes),
            ));
        }
    }
    for chunk in writes.chunks(512) {
        futures::future::join_all(chunk.iter().map(|(k, v)| store.create(k, v.clone())))
            .await
            .into_iter()
            .for_each(|r| {
                r.unwrap();
            });
    }
    api.store()
        .delete("/registry/core/nodes/nodetemplate", None)
        .await
        .unwrap();
}

/// GET `uri` as kubectl does (Table); the body as JSON and the seconds it took to receive it.
async fn get(api: &ApiServer, uri: &str) -> (Value, f64) {
    let t0 = Instant::now();
    let req = axum::http::Request::builder()
        .uri(uri)
        .header("accept", TABLE)
        .body(Body::empty())
        .unwrap();
    let resp = api.router().oneshot(req).await.unwrap();
    assert!(resp.status().is_success(), "{uri}: {}", resp.status());
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let secs = t0.elapsed().as_secs_f64();
    (serde_json::from_slice(&body).unwrap(), secs)
}

/// A Lease renewed before every continued page, as a live cluster's kubelets renew theirs.
struct Lease {
    key: &'static str,
    rev: u64,
}

impl Lease {
    async fn new(api: &ApiServer) -> Lease {
        let key = "/registry/coordination.k8s.io/leases/kube-node-lease/node-0000";
        let rev = api
            .store()
            .create(key, Bytes::from_static(b"{}"))
            .await
            .unwrap();
        Lease { key, rev }
    }

    async fn renew(&mut self, api: &ApiServer) {
        self.rev = api
            .store()
            .update(self.key, Bytes::from_static(b"{}"), self.rev)
            .await
            .unwrap();
    }
}

/// Every page of `path` with `limit=500`, as kubectl reads it: the first page's seconds, the
/// other pages' seconds, the rows and the number of pages.
async fn paged(api: &ApiServer, path: &str, lease: &mut Lease) -> (f64, f64, usize, usize) {
    let (t, first) = get(api, &format!("{path}?limit=500")).await;
    let mut token = t["metadata"]["continue"].as_str().map(str::to_string);
    let (mut total, mut pages, mut rest) = (rows(&t), 1, 0.0);
    while let Some(c) = token.filter(|c| !c.is_empty()) {
        lease.renew(api).await;
        let (t, s) = get(api, &format!("{path}?limit=500&continue={c}")).await;
        total += rows(&t);
        pages += 1;
        rest += s;
        token = t["metadata"]["continue"].as_str().map(str::to_string);
    }
    (first, rest, total, pages)
}

fn rows(t: &Value) -> usize {
    t["rows"].as_array().map_or(0, Vec::len)
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let redb = std::env::var("KLAB_BENCH_STORE").is_ok_and(|s| s == "redb");
        let store: klab_store::DynStorage = if redb {
            klab_store::RedbStore::open(dir.path().join("klab.redb")).unwrap()
        } else {
            klab_store::memory::MemoryStore::new()
        };
        println!("store: {}", if redb { "redb" } else { "memory" });
        let api = ApiServer::new(
            store,
            Clock::scaled(1.0),
            DetRng::seeded(1),
            ApiServerConfig::default(),
        )
        .await
        .unwrap();
        let t0 = Instant::now();
        fill(&api).await;
        println!(
            "filled {NODES} nodes and {} pods in {:.1} s",
            NODES * PODS_PER_NODE,
            t0.elapsed().as_secs_f64()
        );
        let (t, s) = get(&api, "/api/v1/nodes?limit=500").await;
        println!(
            "{:<58} {:>8.1} ms, {} rows",
            "get nodes (first page of 500)",
            s * 1e3,
            rows(&t)
        );
        let (t, s) = get(&api, "/api/v1/nodes").await;
        println!(
            "{:<58} {:>8.1} ms, {} rows",
            "get nodes (all, one request)",
            s * 1e3,
            rows(&t)
        );
        // The first such list may build the store's index of pods by node; the next ones read it.
        for (what, node) in [("first", "node-2500"), ("next", "node-1234")] {
            let (t, s) = get(
                &api,
                &format!("/api/v1/pods?limit=500&fieldSelector=spec.nodeName%3D{node}"),
            )
            .await;
            println!(
                "{:<58} {:>8.1} ms, {} rows",
                format!("get pods -A --field-selector spec.nodeName=X ({what})"),
                s * 1e3,
                rows(&t)
            );
            assert_eq!(rows(&t), PODS_PER_NODE);
        }
        let mut lease = Lease::new(&api).await;
        let (first, rest, total, pages) = paged(&api, "/api/v1/nodes", &mut lease).await;
        println!(
            "{:<58} {:>8.1} ms, then {:.1} ms for the other {} pages, {total} rows",
            "get nodes as kubectl (pages of 500): first page",
            first * 1e3,
            rest * 1e3,
            pages - 1
        );
        assert_eq!(total, NODES);
        let (first, rest, total, pages) = paged(&api, "/api/v1/pods", &mut lease).await;
        println!(
            "{:<58} {:>8.1} ms, then {:.1} ms for the other {} pages, {total} rows",
            "get pods -A as kubectl (pages of 500): first page",
            first * 1e3,
            rest * 1e3,
            pages - 1
        );
        assert_eq!(total, NODES * PODS_PER_NODE);
    });
}
