//! Node-pressure eviction (spec node.md §7) on a live `klab up` with real kubectl:
//! `klab node memory-pressure NAME --available 80Mi` — the pod evicted with its upstream status,
//! MemoryPressure in `kubectl describe node`, new BestEffort pods rejected — `relieve`, and bad
//! input refused with nothing changed; the node's images in `node.status.images` and a local
//! ephemeral-storage limit eviction.

use std::time::Duration;

use crate::harness::Klab;

const BOUND: Duration = Duration::from_secs(60);
const NODE: &str = "klab-worker2";

fn pod(name: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: {name}, annotations: {{{annotations}}}}}
spec:
  nodeName: {NODE}
  containers:
    - name: app
      image: busybox
      command: [sleep, \"3600\"]
"
    )
}

#[test]
fn memory_pressure_evicts_on_a_live_cluster() {
    let k = Klab::start(&["--speed", "5"]);
    let spec = pod("hog", "usage.klab.dev/app: memory=1536Mi");
    let out = k.kubectl_stdin(33, &["create", "-f", "-"], Some(&spec));
    assert!(out.status.success(), "{out:?}");
    k.wait_for("hog Running", BOUND, || {
        let s = k.ok(33, &["get", "pod", "hog", "--no-headers"]);
        (s.split_whitespace().nth(2) == Some("Running")).then_some(())
    });

    // Bad input changes nothing.
    let err = k.klab_fails(&["node", "memory-pressure", NODE, "--available", "lots"]);
    assert!(
        err.contains("quantities must match the regular expression"),
        "{err}"
    );
    let err = k.klab_fails(&[
        "node",
        "memory-pressure",
        "no-such-node",
        "--available",
        "80Mi",
    ]);
    assert!(err.contains("no-such-node"), "{err}");

    let out = k.klab(&["node", "memory-pressure", NODE, "--available", "80Mi"]);
    assert!(
        out.starts_with(&format!("node/{NODE}: memory-pressure done")),
        "{out}"
    );
    let msg = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. \
               Container app was using 1536Mi, request is 0, has larger consumption of memory. ";
    k.wait_for("hog Evicted", BOUND, || {
        let s = k.ok(
            33,
            &[
                "get",
                "pod",
                "hog",
                "-o",
                "jsonpath={.status.phase}|{.status.reason}|{.status.message}",
            ],
        );
        (s == format!("Failed|Evicted|{msg}")).then_some(())
    });
    k.wait_for("MemoryPressure True", BOUND, || {
        let d = k.ok(33, &["describe", "node", NODE]);
        let flat: String = d.split_whitespace().collect::<Vec<_>>().join(" ");
        (flat.contains("MemoryPressure True")
            && flat
                .contains("KubeletHasInsufficientMemory kubelet has insufficient memory available")
            && flat.contains("EvictionThresholdMet")
            && flat.contains("Attempting to reclaim memory")
            && flat.contains(&format!(
                "kubelet Node {NODE} status is now: NodeHasInsufficientMemory"
            )))
        .then_some(())
    });
    // The condition taint the node lifecycle controller sets from the condition.
    k.wait_for("memory-pressure taint", BOUND, || {
        let d = k.ok(33, &["describe", "node", NODE]);
        d.contains("node.kubernetes.io/memory-pressure:NoSchedule")
            .then_some(())
    });
    // kubectl get pods: the container's own reason wins over the pod's (the evicted container
    // was killed: `Error`), as kubectl's printer does with the kubelet's final status.
    k.wait_for("hog STATUS column", BOUND, || {
        let row = k.ok(33, &["get", "pod", "hog", "--no-headers"]);
        (row.split_whitespace().nth(2) == Some("Error")).then_some(())
    });
    // A BestEffort pod that does not tolerate the memory-pressure taint is rejected (created
    // with nodeName, so the scheduler's taint check does not apply).
    let out = k.kubectl_stdin(27, &["create", "-f", "-"], Some(&pod("late", "")));
    assert!(out.status.success(), "{out:?}");
    k.wait_for("late rejected", BOUND, || {
        let s = k.ok(
            27,
            &[
                "get",
                "pod",
                "late",
                "-o",
                "jsonpath={.status.reason}|{.status.message}",
            ],
        );
        (s == "Evicted|Pod was rejected: The node had condition: [MemoryPressure]. ").then_some(())
    });
    // A rejected pod never ran a container: kubectl prints the pod's reason.
    let row = k.ok(33, &["get", "pod", "late", "--no-headers"]);
    assert_eq!(
        row.split_whitespace().take(3).collect::<Vec<_>>(),
        ["late", "0/1", "Evicted"],
        "{row}"
    );
    let out = k.klab(&["node", "relieve", NODE]);
    assert!(
        out.starts_with(&format!("node/{NODE}: relieve done")),
        "{out}"
    );
}

/// Images on the node and a local ephemeral-storage limit eviction: the pulled image is listed
/// in `node.status.images` with the size its pod's usage annotation gives it, and a container
/// writing past its own `ephemeral-storage` limit (the pod's total staying within the sum of
/// its containers' limits) is Evicted with upstream's message and no DisruptionTarget.
#[test]
fn images_and_ephemeral_storage_limits_on_a_live_cluster() {
    let k = Klab::start(&["--speed", "5"]);
    let spec = format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: writer
  annotations:
    usage.klab.dev/app: image-size=300Mi,ephemeral-storage=100Mi,ephemeral-storage-growth=600Mi/min
    usage.klab.dev/side: ephemeral-storage=10Mi
spec:
  nodeName: {NODE}
  containers:
    - name: app
      image: registry.example/tools/writer:v2
      command: [sleep, \"3600\"]
      resources: {{limits: {{ephemeral-storage: 200Mi}}}}
    - name: side
      image: busybox
      command: [sleep, \"3600\"]
      resources: {{limits: {{ephemeral-storage: 1Gi}}}}
"
    );
    let out = k.kubectl_stdin(33, &["create", "-f", "-"], Some(&spec));
    assert!(out.status.success(), "{out:?}");
    let msg = "Container app exceeded its local ephemeral storage limit \"200Mi\". ";
    k.wait_for("writer Evicted", BOUND, || {
        let s = k.ok(
            33,
            &[
                "get",
                "pod",
                "writer",
                "-o",
                "jsonpath={.status.phase}|{.status.reason}|{.status.message}",
            ],
        );
        (s == format!("Failed|Evicted|{msg}")).then_some(())
    });
    // No DisruptionTarget: upstream sets it only for node-pressure evictions.
    let conds = k.ok(
        33,
        &[
            "get",
            "pod",
            "writer",
            "-o",
            "jsonpath={.status.conditions[*].type}",
        ],
    );
    assert!(!conds.contains("DisruptionTarget"), "{conds}");
    let d = k.ok(33, &["describe", "pod", "writer"]);
    let flat: String = d.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("Status: Failed"), "{d}");
    assert!(flat.contains("Reason: Evicted"), "{d}");
    assert!(
        flat.contains(&format!("Message: {}", msg.trim_end())),
        "{d}"
    );
    // The Warning Evicted event (Type, Reason, Age, From, Message).
    assert!(
        flat.contains("Warning Evicted") && flat.contains(&format!("kubelet {}", msg.trim_end())),
        "{d}"
    );
    for v in [33, 27] {
        let row = k.ok(v, &["get", "pod", "writer", "--no-headers"]);
        let status = row
            .split_whitespace()
            .nth(2)
            .unwrap_or_default()
            .to_string();
        assert!(
            status == "Error" || status == "Evicted",
            "kubectl 1.{v}: {row}"
        );
    }

    // The image stays on the node after its pod is gone, listed with its size, largest first.
    k.wait_for("writer image in node status", BOUND, || {
        let s = k.ok(
            33,
            &["get", "node", NODE, "-o", "jsonpath={.status.images}"],
        );
        let images: serde_json::Value = serde_json::from_str(&s).ok()?;
        let first = images.get(0)?;
        let names: Vec<&str> = first["names"]
            .as_array()?
            .iter()
            .filter_map(|n| n.as_str())
            .collect();
        (names.len() == 2
            && names[0].starts_with("registry.example/tools/writer@sha256:")
            && names[1] == "registry.example/tools/writer:v2"
            && first["sizeBytes"] == 314_572_800)
            .then_some(())
    });
}

/// OOM kills as kubectl 1.33 prints them: a container whose working set grows past its memory
/// limit is killed by the memory cgroup (`OOMKilled`, exit 137). With `restartPolicy: Never` the
/// pod ends there and `kubectl get pods` shows `OOMKilled`; with `Always` it is restarted and
/// `kubectl describe pod` shows the kill as the last state, with the restart counted, and
/// `kubectl logs --previous` (1.27 and 1.33) what the killed instance printed — or upstream's
/// error when there is no previous instance.
#[test]
fn oom_killed_pods_as_kubectl_prints_them() {
    let k = Klab::start(&["--speed", "5"]);
    let spec = |name: &str, restart: &str| {
        format!(
            "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{usage.klab.dev/app: \"memory=20Mi,memory-growth=30Mi/min\"}}
spec:
  nodeName: {NODE}
  restartPolicy: {restart}
  containers:
    - name: app
      image: busybox
      command: [sh, -c, \"echo started; while true; do echo tick; sleep 5; done\"]
      resources: {{limits: {{memory: 32Mi}}}}
"
        )
    };
    for (name, restart) in [("once", "Never"), ("again", "Always")] {
        let out = k.kubectl_stdin(33, &["create", "-f", "-"], Some(&spec(name, restart)));
        assert!(out.status.success(), "{out:?}");
    }
    // 20Mi + 30Mi/min reaches 32Mi after 24 s of running.
    k.wait_for("once OOMKilled", BOUND, || {
        let row = k.ok(33, &["get", "pod", "once", "--no-headers"]);
        let cols: Vec<&str> = row.split_whitespace().collect();
        (cols.get(1..4) == Some(&["0/1", "OOMKilled", "0"][..])).then_some(())
    });
    let s = k.ok(
        33,
        &[
            "get",
            "pod",
            "once",
            "-o",
            "jsonpath={.status.phase}|{.status.containerStatuses[0].state.terminated.reason}|{.status.containerStatuses[0].state.terminated.exitCode}",
        ],
    );
    assert_eq!(s, "Failed|OOMKilled|137");
    k.wait_for("again restarted after its OOM kill", BOUND, || {
        let d = k.ok(33, &["describe", "pod", "again"]);
        let flat: String = d.split_whitespace().collect::<Vec<_>>().join(" ");
        (flat.contains("Last State: Terminated Reason: OOMKilled Exit Code: 137")
            && flat.contains("Restart Count: 1"))
        .then_some(())
    });
    // Each instance lives 24 s: `started` and a tick at once, then a tick every 5 s until the
    // kill. The previous instance's log is kept; the current one starts over.
    for minor in [27, 33] {
        assert_eq!(
            k.ok(minor, &["logs", "again", "--previous"]),
            "started\ntick\ntick\ntick\ntick\ntick\n",
            "1.{minor}"
        );
        assert!(
            k.ok(minor, &["logs", "again"])
                .starts_with("started\ntick\n"),
            "1.{minor}"
        );
        // `once` was never restarted: its only instance is the current one (terminated).
        assert_eq!(
            k.ok(minor, &["logs", "once"]),
            "started\ntick\ntick\ntick\ntick\ntick\n",
            "1.{minor}"
        );
        let o = k.kubectl(minor, &["logs", "once", "--previous"]);
        assert!(!o.status.success());
        assert_eq!(
            String::from_utf8_lossy(&o.stderr).trim(),
            "Error from server (BadRequest): previous terminated container \"app\" in pod \"once\" not found",
            "1.{minor}"
        );
    }
}

/// Container logs in the kubelet's Summary API, as kubectl reads it through the node proxy:
/// `containers[].logs.usedBytes` beside `rootfs.usedBytes`, both in the pod's
/// `ephemeral-storage` and in the node filesystem's used bytes.
#[test]
fn container_logs_in_the_summary_api() {
    let k = Klab::start(&["--speed", "5"]);
    let spec = pod(
        "chatty",
        "usage.klab.dev/app: \"ephemeral-storage=5Mi,log-growth=1Mi/s\"",
    );
    let out = k.kubectl_stdin(33, &["create", "-f", "-"], Some(&spec));
    assert!(out.status.success(), "{out:?}");
    let path = format!("/api/v1/nodes/{NODE}/proxy/stats/summary");
    let (pod, node_fs) = k.wait_for("chatty's logs in the summary", BOUND, || {
        let s: serde_json::Value =
            serde_json::from_str(&k.ok(33, &["get", "--raw", &path])).ok()?;
        let pod = s["pods"]
            .as_array()?
            .iter()
            .find(|p| p["podRef"]["name"] == "chatty")?
            .clone();
        let logs = pod["containers"][0]["logs"]["usedBytes"].as_u64()?;
        (logs > 0).then(|| (pod, s["node"]["fs"]["usedBytes"].as_u64().unwrap_or(0)))
    });
    let c = &pod["containers"][0];
    assert_eq!(c["name"], "app");
    assert_eq!(c["rootfs"]["usedBytes"], 5 << 20);
    let logs = c["logs"]["usedBytes"].as_u64().unwrap();
    // Rotation keeps at most 5 files of about 10Mi (the pass is every 10 s).
    assert!(logs <= 60 << 20, "{logs}");
    assert_eq!(
        pod["ephemeral-storage"]["usedBytes"].as_u64().unwrap(),
        (5 << 20) + logs
    );
    assert!(node_fs >= (5 << 20) + logs, "{node_fs}");
}
