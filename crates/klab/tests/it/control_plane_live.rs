//! Control-plane faults on a live `klab up --speed 20`, with the real kubectl 1.33 and 1.27:
//! the scheduler stopped (a new pod stays Pending with no node, `/readyz` says the scheduler is
//! stopped and when, `klab component list` shows it stopped) and started again (the pod runs);
//! the node lifecycle controller restarted by its `--controllers` alias; an unknown component and
//! an impossible transition refused with the admin endpoint's Status; a machine's clock skewed by
//! two minutes, seen in its Lease's renewTime next to another node's.

use std::time::Duration;

use crate::harness::Klab;

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: waiting}\nspec:\n  containers: [{name: c, image: nginx}]\n";

/// A node's Lease renewTime, in seconds since the epoch.
fn renew_time(k: &Klab, node: &str) -> i64 {
    let t = k.ok(
        33,
        &[
            "get",
            "lease",
            "-n",
            "kube-node-lease",
            node,
            "-o",
            "jsonpath={.spec.renewTime}",
        ],
    );
    let t: k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime =
        serde_json::from_value(serde_json::Value::String(t.trim().to_string()))
            .unwrap_or_else(|e| panic!("{t:?}: {e}"));
    t.0.as_second()
}

#[test]
fn stopped_scheduler_restarted_controller_and_skewed_clock_on_a_live_cluster() {
    let k = Klab::start(&["--speed", "20", "--nodes", "2"]);
    let bound = Duration::from_secs(90);
    k.wait_for("two nodes Ready", bound, || {
        let out = k.ok(33, &["get", "nodes", "--no-headers"]);
        (out.lines().filter(|l| l.contains(" Ready ")).count() == 2).then_some(())
    });

    // The scheduler stopped: a new pod is created but never bound.
    assert_eq!(
        k.klab(&["component", "stop", "scheduler"]),
        "component/kube-scheduler: stopped\n"
    );
    let list = k.klab(&["component", "list"]);
    let line = list
        .lines()
        .find(|l| l.starts_with("kube-scheduler "))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(line.contains(" stopped "), "{line}");
    let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(POD));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let readyz = k.kubectl(27, &["get", "--raw", "/readyz/kube-scheduler"]);
    assert!(!readyz.status.success());
    let err = String::from_utf8_lossy(&readyz.stderr);
    assert!(
        err.contains("kube-scheduler stopped at ") && err.contains("(klab component stop)"),
        "{err}"
    );
    // Several seconds of cluster time later it is still Pending on no node.
    std::thread::sleep(Duration::from_millis(1500));
    let pod = k.ok(
        33,
        &[
            "get",
            "pod",
            "waiting",
            "-o",
            "jsonpath={.status.phase}/{.spec.nodeName}",
        ],
    );
    assert_eq!(pod, "Pending/");
    let stopped_again = k.klab_fails(&["component", "stop", "kube-scheduler"]);
    assert!(
        stopped_again.contains("component kube-scheduler is already stopped"),
        "{stopped_again}"
    );
    assert_eq!(
        k.klab(&["component", "start", "kube-scheduler"]),
        "component/kube-scheduler: started\n"
    );
    k.wait_for("the pod runs once the scheduler is back", bound, || {
        let out = k.ok(33, &["get", "pod", "waiting", "--no-headers"]);
        out.contains(" Running ").then_some(())
    });
    k.wait_for("readyz ok again", bound, || {
        k.kubectl(33, &["get", "--raw", "/readyz"])
            .status
            .success()
            .then_some(())
    });

    // One controller by its alias; unknown names are refused with the list of components.
    assert_eq!(
        k.klab(&["component", "restart", "nodelifecycle"]),
        "component/kube-controller-manager/node-lifecycle-controller: restarted\n"
    );
    let unknown = k.klab_fails(&["component", "stop", "etcd"]);
    assert!(
        unknown.contains("unknown component \"etcd\": one of kube-apiserver, kube-controller-manager, kube-scheduler"),
        "{unknown}"
    );

    // A clock two minutes ahead: the node's Lease is renewed in its own timeline.
    let nodes = k.ok(
        33,
        &["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"],
    );
    let names: Vec<&str> = nodes.split_whitespace().collect();
    assert_eq!(names.len(), 2, "{nodes}");
    let out = k.klab(&["node", "clock-skew", names[1], "--offset", "2m"]);
    assert!(
        out.starts_with(&format!("node/{}: clock skewed by 2m", names[1])),
        "{out}"
    );
    let skewed = k.wait_for("a renewal in the skewed timeline", bound, || {
        let (a, b) = (renew_time(&k, names[0]), renew_time(&k, names[1]));
        let ahead = b.saturating_sub(a);
        (100..=140).contains(&ahead).then_some(ahead)
    });
    assert!(skewed >= 100, "{skewed}");
    let bad = k.klab_fails(&["node", "clock-skew", names[1], "--offset", "soon"]);
    assert!(bad.contains("invalid duration"), "{bad}");
    // The skewed node stays Ready: its heartbeats are seen when they arrive.
    std::thread::sleep(Duration::from_secs(4));
    let node = k.ok(33, &["get", "node", names[1], "--no-headers"]);
    assert!(node.contains(" Ready "), "{node}");
    k.assert_no_component_denials();
}
