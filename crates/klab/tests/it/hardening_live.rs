//! The crash recipes that once killed controllers for good, against a live `klab up --speed 30`
//! with the real kubectl 1.33: a big scale-down, a DaemonSet pod rejected by a kubelet that still
//! sees the out-of-service taint, pods with a grace period of i64::MAX deleted by scale-down and
//! by deleting their namespace. Afterwards every controller still works (a new Deployment and a
//! new DaemonSet get their pods), `/readyz?verbose` lists every component as ok, and a panic
//! injected into a controller shows in `/readyz` and heals.

use std::time::Duration;

use crate::harness::Klab;

const DAEMONSET: &str = r#"apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: "fluent-bit:3.2"}]
"#;

/// A Deployment manifest, so the test controls every field.
fn deployment(name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: c, image: nginx}}]}}\n"
    )
}

fn namespace(name: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}}}\n")
}

fn forever_pod(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  terminationGracePeriodSeconds: 9223372036854775807\n  containers: [{{name: c, image: nginx}}]\n"
    )
}

fn count(k: &Klab, args: &[&str], status: &str) -> usize {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.push("--no-headers");
    k.ok(33, &a)
        .lines()
        .filter(|l| l.split_whitespace().any(|c| c == status))
        .count()
}

#[test]
fn crash_recipes_leave_every_controller_working() {
    let k = Klab::start(&["--speed", "30", "--nodes", "3"]);
    let klab = |args: &[&str]| k.klab(args);
    let bound = Duration::from_secs(120);

    // 1. Scale up, then down hard, twice.
    let apply = |manifest: &str| {
        let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(manifest));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    apply(&deployment("web", 60));
    k.wait_for("60 web pods Running", bound, || {
        (count(&k, &["pods", "-l", "app=web"], "Running") == 60).then_some(())
    });
    for (down, up) in [(10, 45), (5, 0)] {
        k.ok(
            33,
            &["scale", "deployment", "web", &format!("--replicas={down}")],
        );
        k.wait_for("scaled down", bound, || {
            (k.ok(33, &["get", "pods", "-l", "app=web", "--no-headers"])
                .lines()
                .count()
                == down)
                .then_some(())
        });
        k.ok(
            33,
            &["scale", "deployment", "web", &format!("--replicas={up}")],
        );
    }

    // 2. A DaemonSet pod on a node powered off, out-of-service taint, power on, untaint.
    apply(DAEMONSET);
    k.wait_for("3 agents Running", bound, || {
        (count(&k, &["pods", "-l", "app=agent"], "Running") == 3).then_some(())
    });
    klab(&["node", "power-off", "klab-worker2"]);
    k.wait_for("node NotReady", bound, || {
        let out = k.ok(33, &["get", "node", "klab-worker2", "--no-headers"]);
        (out.split_whitespace().nth(1) == Some("NotReady")).then_some(())
    });
    k.ok(
        33,
        &[
            "taint",
            "node",
            "klab-worker2",
            "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
        ],
    );
    klab(&["node", "power-on", "klab-worker2"]);
    k.ok(
        33,
        &[
            "taint",
            "node",
            "klab-worker2",
            "node.kubernetes.io/out-of-service:NoExecute-",
        ],
    );

    // 3. Pods that would wait for ever: deleted by scale-down and by their namespace's deletion.
    apply(&namespace("forever"));
    apply(&forever_pod("forever", "p"));
    k.ok(33, &["delete", "pod", "p", "-n", "forever", "--wait=false"]);
    k.ok(33, &["delete", "namespace", "forever", "--wait=false"]);

    // Every controller still works: a new Deployment and a new DaemonSet get their pods.
    apply(&deployment("after", 2));
    apply(&namespace("late"));
    let out = k.kubectl_stdin(33, &["apply", "-n", "late", "-f", "-"], Some(DAEMONSET));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    k.wait_for("new Deployment and DaemonSet Running", bound, || {
        let d = count(&k, &["pods", "-l", "app=after"], "Running");
        let ds = count(&k, &["pods", "-n", "late", "-l", "app=agent"], "Running");
        (d == 2 && ds == 3).then_some(())
    });
    k.wait_for("the DaemonSet is back on the recovered node", bound, || {
        (count(&k, &["pods", "-l", "app=agent"], "Running") == 3).then_some(())
    });
    let readyz = k.ok(33, &["get", "--raw", "/readyz?verbose"]);
    assert!(readyz.ends_with("readyz check passed\n"), "{readyz}");
    for c in [
        "kube-controller-manager/replicaset-controller",
        "kube-controller-manager/daemonset-controller",
        "kube-controller-manager/namespace-controller",
        "kube-scheduler",
        "kubelets",
    ] {
        assert!(readyz.contains(&format!("[+]{c} ok\n")), "{c}: {readyz}");
    }
    let components = klab(&["component", "list"]);
    assert!(
        components
            .lines()
            .skip(1)
            .all(|l| l.contains(" running ") && l.ends_with("<none>")),
        "no component failed:\n{components}"
    );

    // An injected panic: visible in /readyz while the controller backs off, then healed.
    klab(&[
        "component",
        "panic",
        "kube-controller-manager/replicaset-controller",
    ]);
    let failing = k.wait_for("readyz reports the panic", bound, || {
        let out = k.kubectl(33, &["get", "--raw", "/readyz?verbose"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        text.contains("[-]kube-controller-manager/replicaset-controller failed: reason withheld")
            .then_some(text)
    });
    // The request failed (500); kubectl cuts a long error body, so with every component listed
    // the closing "readyz check failed" line may be cut off.
    assert!(
        failing.contains("readyz check failed")
            || failing.contains("Error from server (InternalError)"),
        "{failing}"
    );
    k.wait_for("readyz ok again", bound, || {
        let out = k.kubectl(33, &["get", "--raw", "/readyz"]);
        out.status.success().then_some(())
    });
    k.ok(33, &["scale", "deployment", "after", "--replicas=4"]);
    k.wait_for("the restarted controller scales", bound, || {
        (count(&k, &["pods", "-l", "app=after"], "Running") == 4).then_some(())
    });
    let components = klab(&["component", "list"]);
    let rs = components
        .lines()
        .find(|l| l.starts_with("kube-controller-manager/replicaset-controller "))
        .unwrap();
    assert!(
        rs.contains("panic injected into kube-controller-manager/replicaset-controller"),
        "{rs}"
    );
    let metrics = k.ok(33, &["get", "--raw", "/metrics"]);
    assert!(
        metrics.contains("klab_component_panics_total{component=\"kube-controller-manager/replicaset-controller\"} 1"),
        "{metrics}"
    );
}
