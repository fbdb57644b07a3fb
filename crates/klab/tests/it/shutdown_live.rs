//! Graceful node shutdown (spec node.md §6) on a live `klab up` with real kubectl:
//! `klab node shutdown` with the kubelet's `shutdownGracePeriod` set — the NodeShutdown event,
//! Ready=False `node is shutting down`, the pod marked `Terminated` with its upstream reason and
//! message as kubectl prints them, the machine off afterwards — and refused transitions.

use std::time::Duration;

use crate::harness::Klab;

const BOUND: Duration = Duration::from_secs(60);
const NODE: &str = "klab-worker2";

const POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  nodeName: klab-worker2
  containers:
    - name: web
      image: busybox
      command: [sleep, \"3600\"]
";

#[test]
fn graceful_shutdown_on_a_live_cluster() {
    let k = Klab::start(&[
        "--speed",
        "5",
        "--shutdown-grace-period=30s",
        "--shutdown-grace-period-critical-pods=10s",
    ]);
    let out = k.kubectl_stdin(33, &["create", "-f", "-"], Some(POD));
    assert!(out.status.success(), "{out:?}");
    k.wait_for("web Running", BOUND, || {
        let s = k.ok(33, &["get", "pod", "web", "--no-headers"]);
        (s.split_whitespace().nth(2) == Some("Running")).then_some(())
    });

    let out = k.klab(&["node", "shutdown", NODE]);
    assert!(
        out.starts_with(&format!("node/{NODE}: shutdown done")),
        "{out}"
    );

    // The pod is Failed with the shutdown's reason and message; kubectl's STATUS column shows
    // the reason (`Terminated`) until the container's own reason (`Error`, SIGKILL at +20 s)
    // replaces it.
    k.wait_for("web Terminated", BOUND, || {
        let s = k.ok(
            33,
            &[
                "get",
                "pod",
                "web",
                "-o",
                "jsonpath={.status.phase}|{.status.reason}|{.status.message}",
            ],
        );
        (s == "Failed|Terminated|Pod was terminated in response to imminent node shutdown.")
            .then_some(())
    });
    let status = k.ok(33, &["get", "pod", "web", "--no-headers"]);
    let col = status
        .split_whitespace()
        .nth(2)
        .unwrap_or_default()
        .to_string();
    assert!(col == "Terminated" || col == "Error", "{status}");
    let cond = k.ok(
        27,
        &[
            "get",
            "pod",
            "web",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"DisruptionTarget\")].reason}",
        ],
    );
    assert_eq!(cond, "TerminationByKubelet");

    // Node events and the Ready condition as `kubectl describe node` shows them.
    let describe = k.ok(33, &["describe", "node", NODE]);
    let flat: String = describe.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("NodeShutdown") && flat.contains("Shutdown manager detected shutdown event"),
        "{describe}"
    );
    assert!(
        flat.contains("KubeletNotReady node is shutting down")
            || flat.contains("NodeStatusUnknown Kubelet stopped posting node status."),
        "{describe}"
    );

    // After the groups (20 s + 10 s of cluster time) the machine is off.
    k.wait_for("klab-worker2 powered off", BOUND, || {
        let list = k.klab(&["node", "list"]);
        list.lines()
            .any(|l| l.starts_with(NODE) && l.split_whitespace().nth(1) == Some("off"))
            .then_some(())
    });
    let err = k.klab_fails(&["node", "shutdown-cancel", NODE]);
    assert!(
        err.contains(&format!("node {NODE} is powered off")),
        "{err}"
    );
    let err = k.klab_fails(&["node", "shutdown", "no-such-node"]);
    assert!(err.contains("no-such-node"), "{err}");
}
