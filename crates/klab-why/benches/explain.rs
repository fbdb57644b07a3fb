//! Release benchmark (harness = false) of explaining every stuck pod of a zone outage at the
//! issue's scale: 5 000 nodes in 3 zones, 150 000 pods in ten ReplicaSets, zone a's nodes
//! unreachable and 5 000 of their pods Terminating there with replacements elsewhere, three
//! Events per pod. This is what `klab sim` does at the end of a run (its summary's `stuck at
//! the end`) and `klab why` for each pod.
//!
//! `cargo bench -p klab-why --bench explain`
#![allow(clippy::disallowed_methods)] // measuring wall-clock time is the point of a benchmark
#![allow(clippy::arithmetic_side_effects)] // fixed sizes far from any bound

use std::time::Instant;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use klab_why::{Snapshot, TimeStyle, explain_stuck_pods};
use serde_json::json;

const NODES: usize = 5_000;
const SETS: usize = 10;
const PODS_PER_SET: usize = 15_000;
const STUCK: usize = 5_000;

fn at(secs: i64) -> String {
    let t: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("epoch");
    klab_api::clock::format_time(klab_api::clock::saturating_add_secs(t, secs))
}

fn zone(i: usize) -> &'static str {
    ["a", "b", "c"][i % 3]
}

fn snapshot() -> Snapshot {
    let unreachable = json!([
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": at(600)},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": at(600)}
    ]);
    let nodes: Vec<Node> = (0..NODES)
        .map(|i| {
            let dead = zone(i) == "a";
            serde_json::from_value(json!({
                "metadata": {"name": format!("n{i}"), "labels": {"topology.kubernetes.io/zone": zone(i)}},
                "spec": {"taints": if dead { unreachable.clone() } else { json!([]) }},
                "status": {"conditions": [{"type": "Ready", "status": if dead { "Unknown" } else { "True" },
                    "lastTransitionTime": at(if dead { 590 } else { 0 }), "lastHeartbeatTime": at(if dead { 550 } else { 1790 })}]}
            }))
            .expect("node")
        })
        .collect();
    let leases: Vec<Lease> = (0..NODES)
        .map(|i| {
            serde_json::from_value(json!({
                "metadata": {"name": format!("n{i}"), "namespace": "kube-node-lease"},
                "spec": {"renewTime": format!("{}.000000Z", at(if zone(i) == "a" { 540 } else { 1795 }).trim_end_matches('Z'))}
            }))
            .expect("lease")
        })
        .collect();
    let mut pods = Vec::new();
    let mut events = Vec::new();
    let mut stuck = 0;
    for set in 0..SETS {
        for k in 0..PODS_PER_SET {
            let i = set * PODS_PER_SET + k;
            let node = i % NODES;
            let terminating = zone(node) == "a" && stuck < STUCK && k % 3 == 0;
            // Terminating pods' replacements were created after the deletion was asked for.
            let created = if terminating || zone(node) != "a" && k % 7 == 0 {
                1000
            } else {
                0
            };
            stuck += usize::from(terminating);
            let name = format!("set{set}-{k:05}");
            let mut meta = json!({"name": name, "namespace": "default", "uid": format!("uid-{i}"),
                "creationTimestamp": at(if terminating { 0 } else { created }),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("set{set}"),
                    "uid": format!("uid-set{set}"), "controller": true}]});
            if terminating {
                meta["deletionTimestamp"] = json!(at(930));
                meta["deletionGracePeriodSeconds"] = json!(30);
            }
            pods.push(
                serde_json::from_value::<Pod>(json!({
                    "metadata": meta,
                    "spec": {"nodeName": format!("n{node}"), "containers": [{"name": "c", "image": "app"}],
                        "tolerations": [
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
                    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                        "containerStatuses": [{"name": "c", "image": "app", "imageID": "", "ready": true,
                            "restartCount": 0, "state": {"running": {}}}]}
                }))
                .expect("pod"),
            );
            for reason in ["Scheduled", "Pulled", "Started"] {
                events.push(
                    serde_json::from_value::<Event>(json!({
                        "metadata": {"name": format!("{name}.{reason}"), "namespace": "default"},
                        "involvedObject": {"kind": "Pod", "namespace": "default", "name": name, "uid": format!("uid-{i}")},
                        "reason": reason, "message": "m", "lastTimestamp": at(1)
                    }))
                    .expect("event"),
                );
            }
        }
    }
    Snapshot {
        now: "2026-01-01T00:30:00Z".parse().expect("now"),
        pods,
        nodes,
        leases: Some(leases),
        events,
        replica_sets: vec![],
        deployments: vec![],
        stateful_sets: vec![],
        daemon_sets: vec![],
        jobs: vec![],
        pdbs: vec![],
        pvcs: vec![],
        volume_attachments: vec![],
        settings: Default::default(),
        unreadable: vec![],
    }
}

fn main() {
    let built = Instant::now();
    let snap = snapshot();
    println!(
        "snapshot: {} nodes, {} pods, {} events (built in {:.1} s)",
        snap.nodes.len(),
        snap.pods.len(),
        snap.events.len(),
        built.elapsed().as_secs_f64()
    );
    let start = Instant::now();
    let explained = explain_stuck_pods(&snap, TimeStyle::Wall);
    let took = start.elapsed();
    // The text's hash, so that two versions can be compared for the same explanations.
    let (mut lines, mut hasher) = (0, std::hash::DefaultHasher::new());
    for e in &explained {
        let text = klab_why::render_text(e);
        lines += text.lines().count();
        std::hash::Hash::hash(&text, &mut hasher);
    }
    println!(
        "explain_stuck_pods: {} stuck pods explained in {:.3} s ({:.1} µs each), {lines} lines of text, hash {:016x}",
        explained.len(),
        took.as_secs_f64(),
        took.as_secs_f64() * 1e6 / explained.len().max(1) as f64,
        std::hash::Hasher::finish(&hasher)
    );
}
