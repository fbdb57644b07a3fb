//! The cost of each request a cluster sends most, through unmodified kube-rs clients on the
//! in-process transport, with watches open as a running cluster has them: a kubelet's Lease
//! renewal (PUT), its Node GET and status PATCH, an Event POST, a pod status PATCH and a pod
//! create. Prints microseconds per request (client and server together), the numbers to compare
//! before and after a change of a write or read path. Run:
//! `cargo bench -p klab-apiserver --bench requests` (add a name to run one row only).
#![allow(clippy::disallowed_methods)] // a benchmark measures wall time on purpose

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use klab_api::{Clock, DetRng};
use klab_apiserver::{ApiServer, ApiServerConfig, Identity};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Nodes whose requests rotate (so that a request does not always hit the same object).
const NODES: usize = 100;

fn node(i: usize) -> Node {
    let cond = |t: &str, status: &str, reason: &str, message: &str| {
        json!({"type": t, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"})
    };
    serde_json::from_value(json!({
        "metadata": {"name": format!("n{i}"), "labels": {
            "kubernetes.io/hostname": format!("n{i}"), "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64", "topology.kubernetes.io/zone": "za"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": {"podCIDR": format!("10.244.{i}.0/24"), "podCIDRs": [format!("10.244.{i}.0/24")]},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [{"type": "InternalIP", "address": format!("10.0.0.{i}")},
                          {"type": "Hostname", "address": format!("n{i}")}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "m", "systemUUID": "u", "bootID": "b",
                "kernelVersion": "6.1.0", "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.0", "kubeletVersion": "v1.33.0",
                "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
            "images": [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 320000}]
        }
    }))
    .expect("a valid node")
}

fn lease(i: usize, micros: u64) -> Lease {
    serde_json::from_value(json!({
        "metadata": {"name": format!("n{i}"), "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": format!("n{i}"), "leaseDurationSeconds": 40,
                 "renewTime": format!("2026-01-01T00:00:{:02}.{:06}Z", micros / 1_000_000 % 60, micros % 1_000_000)}
    }))
    .expect("a valid lease")
}

fn pod(name: &str, node: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"nodeName": format!("n{node}"), "containers": [{"name": "c", "image": "nginx:1.27",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    }))
    .expect("a valid pod")
}

fn event(i: usize) -> Event {
    serde_json::from_value(json!({
        "metadata": {"name": format!("p{i}.18a2b3c4d5e6f{i:03}"), "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": format!("p{i}"),
                           "uid": "0b6c5a43-8b0e-4b8e-9d0a-1f0d3f1f2e3d", "apiVersion": "v1",
                           "fieldPath": "spec.containers{c}"},
        "reason": "Pulled", "message": "Container image \"nginx:1.27\" already present on machine",
        "source": {"component": "kubelet", "host": "n1"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
        "count": 1, "type": "Normal", "reportingComponent": "kubelet", "reportingInstance": "n1"
    }))
    .expect("a valid event")
}

/// Keeps a watch of `api` open and drained, as a controller's informer would.
fn drain<K>(api: Api<K>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    tokio::spawn(async move {
        let mut s = watcher(api, watcher::Config::default()).boxed();
        while s.next().await.is_some() {}
    });
}

fn report(name: &str, n: usize, took: Duration) {
    println!(
        "{name:<36} {:>9.1} µs/request  ({n} requests)",
        took.as_secs_f64() * 1e6 / n as f64
    );
}

async fn run(only: Option<&str>) {
    let api = ApiServer::new(
        klab_store::memory::MemoryStore::new(),
        Clock::scaled(1.0),
        DetRng::seeded(1),
        ApiServerConfig::default(),
    )
    .await
    .expect("the API server starts");
    let client = kube::Client::new(api.router_as(Identity::admin()), "default");
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let events: Api<Event> = Api::default_namespaced(client.clone());
    // Two watchers of each kind, as a cluster has (a controller's and the trace's): with more
    // than one, the watch window keeps each change decoded.
    for _ in 0..2 {
        drain(nodes.clone());
        drain(leases.clone());
        drain(pods.clone());
        drain(events.clone());
    }
    let pp = PostParams::default();
    let mut held = Vec::with_capacity(NODES);
    for i in 0..NODES {
        nodes.create(&pp, &node(i)).await.expect("node create");
        held.push(
            leases
                .create(&pp, &lease(i, 0))
                .await
                .expect("lease create"),
        );
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let want = |name: &str| only.is_none_or(|o| o == name);
    let n = 20_000;

    if want("lease") {
        let t0 = Instant::now();
        for k in 0..n {
            let i = k % NODES;
            let mut l = held[i].clone();
            l.spec = lease(i, k as u64 * 1000).spec;
            held[i] = leases
                .replace(&format!("n{i}"), &pp, &l)
                .await
                .expect("lease update");
        }
        report("Lease PUT (renewal)", n, t0.elapsed());
    }
    if want("node-get") {
        let t0 = Instant::now();
        for k in 0..n {
            nodes
                .get(&format!("n{}", k % NODES))
                .await
                .expect("node get");
        }
        report("Node GET", n, t0.elapsed());
    }
    if want("node-status") {
        let t0 = Instant::now();
        for k in 0..n {
            let i = k % NODES;
            let t = format!("2026-01-01T01:{:02}:{:02}Z", k / 60 % 60, k % 60);
            let conds: Vec<_> = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
                .iter()
                .map(|c| json!({"type": c, "lastHeartbeatTime": t}))
                .collect();
            let patch = json!({"status": {"conditions": conds}});
            nodes
                .patch_status(
                    &format!("n{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .expect("node status patch");
        }
        report("Node status PATCH (merge)", n, t0.elapsed());
    }
    if want("event") {
        let t0 = Instant::now();
        for k in 0..n {
            events.create(&pp, &event(k)).await.expect("event create");
        }
        report("Event POST", n, t0.elapsed());
    }
    if want("pod-create") || want("pod-status") {
        let m = n / 4;
        let t0 = Instant::now();
        for k in 0..m {
            pods.create(&pp, &pod(&format!("p{k}"), k % NODES))
                .await
                .expect("pod create");
        }
        report("Pod POST", m, t0.elapsed());
        let t0 = Instant::now();
        for k in 0..m {
            let patch = json!({"status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}],
                "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "nginx:1.27",
                    "imageID": "docker.io/library/nginx@sha256:0", "containerID": "containerd://0",
                    "started": true, "state": {"running": {"startedAt": "2026-01-01T00:00:04Z"}}}]}});
            pods.patch_status(
                &format!("p{k}"),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .expect("pod status patch");
        }
        report("Pod status PATCH (merge)", m, t0.elapsed());
    }
}

fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(run(only.as_deref()));
}
