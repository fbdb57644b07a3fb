//! Benchmark: one DaemonSet sync's reads and decisions at N nodes (default 5 000), one daemon pod
//! per node, one pod changed since the last sync (the common case while thousands of daemon pods
//! start: each pod event syncs the DaemonSet again). Reads what changed of the pods and nodes
//! through [`Tracked`] into the kept [`Table`] as the controller does, then manages, rolls and counts.
//! Prints the time per sync and its parts. Run with `cargo bench -p klab-controllers --bench daemonset`
//! (release); `KLAB_BENCH_NODES` overrides the size.
#![allow(clippy::disallowed_methods)] // measuring wall time is the point here
#![allow(clippy::arithmetic_side_effects)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use klab_controllers::daemonset::decide::{
    self, DaemonPod, FailedPodsBackoff, Member, Placed, Table, replace_node_name_affinity,
};
use klab_runtime::{SharedInformer, Tracked, index};
use kube::runtime::watcher;
use serde_json::json;

fn main() {
    let n: usize = std::env::var("KLAB_BENCH_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "logs", "namespace": "default", "uid": "ds-uid", "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": "logs"}},
            "template": {"metadata": {"labels": {"app": "logs"}},
                "spec": {"containers": [{"name": "agent", "image": "logs"}]}}}}))
    .expect("daemonset");
    let hash = decide::template_hash(&ds.spec.as_ref().expect("spec").template, None);
    let pods: SharedInformer<Pod> = SharedInformer::default();
    pods.add_index(index::CONTROLLER_UID, index::controller_uid::<Pod>);
    let nodes: SharedInformer<Node> = SharedInformer::default();
    for i in 0..n {
        let node = format!("zone-a-n{i}");
        nodes.apply(watcher::Event::Apply(
            serde_json::from_value(json!({"metadata": {"name": node,
                "labels": {"kubernetes.io/hostname": node, "topology.kubernetes.io/zone": "a"}},
                "spec": {}}))
            .expect("node"),
        ));
        let aff = replace_node_name_affinity(None, &node);
        pods.apply(watcher::Event::Apply(
            serde_json::from_value(json!({"metadata": {"name": format!("logs-{i:05}"),
                "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app": "logs", "controller-revision-hash": hash, "pod-template-generation": "1"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "logs", "uid": "ds-uid", "controller": true}]},
                "spec": {"containers": [{"name": "agent", "image": "logs"}], "nodeName": node, "affinity": aff},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:05Z"}]}}))
            .expect("pod"),
        ));
    }
    let now: Timestamp = "2026-01-01T00:10:00Z".parse().expect("time");
    let mut members: Tracked<Option<Member>> = Tracked::default();
    let mut placed: Tracked<Placed> = Tracked::default();
    let daemon = DaemonPod::of(&ds);
    let config = Default::default();
    let mut backoff = FailedPodsBackoff::default();
    let mut table = Table::default();
    let rounds = 200;
    let (mut read, mut decide_t) = (Duration::ZERO, Duration::ZERO);
    // Round 0 reads everything (not timed); each later round first changes one pod's status.
    for round in 0..=rounds {
        if round > 0 {
            let key = ("default".to_string(), format!("logs-{:05}", round % n));
            let mut p = pods.get(&key).expect("pod").as_ref().clone();
            if let Some(st) = p.status.as_mut() {
                st.pod_ip = Some(format!("10.0.0.{}", round % 250));
            }
            pods.apply(watcher::Event::Apply(p));
        }
        // As the controller keeps its table: changed pods and nodes out, then in.
        let t0 = Instant::now();
        let (added, dropped) = members.update(
            &pods,
            Some((index::CONTROLLER_UID, "ds-uid")),
            |p: &Arc<Pod>| Some(Member::of(p)),
        );
        for m in dropped.iter().flatten() {
            table.remove_pod(m);
        }
        for m in added.into_iter().flatten() {
            table.add_pod(m.clone());
        }
        let (added, dropped) = placed.update(&nodes, None, |nd: &Arc<Node>| daemon.place(nd));
        for p in &dropped {
            table.set_node(p.name.as_deref().unwrap_or_default(), None);
        }
        for p in added {
            let name = p.name.as_deref().unwrap_or_default();
            table.set_node(name, Some((p.should_run, p.should_continue)));
        }
        let t1 = Instant::now();
        let plan = decide::manage(&ds, &table, now, &mut backoff, &config);
        let del = decide::rolling_update_deletions(&ds, &table, &hash, now);
        let st = decide::compute_status(&ds, &table, &hash, now);
        let t2 = Instant::now();
        assert!(plan.create_on.is_empty() && plan.delete.is_empty() && del.is_empty());
        assert_eq!(st.number_available, Some(n as i32));
        black_box((plan, del, st));
        if round == 0 {
            continue;
        }
        read += t1 - t0;
        decide_t += t2 - t1;
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / rounds as f64;
    println!(
        "daemonset sync at {n} nodes: {:.0} µs (reads {:.0}, decisions {:.0})",
        per(read + decide_t),
        per(read),
        per(decide_t)
    );
}
