//! The seed-000 story on a live `klab up --speed 30` with the real kubectl 1.33: a kubelet stops,
//! its node goes NotReady, its pods go Terminating after the (scaled) toleration, the Deployment
//! replaces its pod on another node, the StatefulSet cannot; the kubelet comes back and the
//! Terminating pods are finally removed. Waits are for conditions, with bounds.

use std::time::Duration;

use crate::harness::Klab;

/// The manifests the README tells users to apply.
const MANIFESTS: &str = include_str!("../../../../examples/seed-000.yaml");

/// `get pods -o wide` rows as (name, status, node).
fn pods(k: &Klab) -> Vec<(String, String, String)> {
    let out = k.ok(33, &["get", "pods", "-o", "wide", "--no-headers"]);
    out.lines()
        .map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            (c[0].to_string(), c[2].to_string(), c[6].to_string())
        })
        .collect()
}

/// The story under the default `Node,RBAC`, every component under its upstream identity and
/// bootstrap role as a kubeadm cluster runs them: no component is ever refused.
#[test]
fn kubelet_stop_on_live_cluster_matches_seed_000() {
    let k = Klab::start(&["--speed", "30"]);
    story(&k);
    k.assert_no_component_denials();
}

/// The same story with everything allowed: nothing changes (no component's behaviour hangs on
/// an authorization decision).
#[test]
fn seed_000_under_always_allow() {
    story(&Klab::start(&[
        "--speed",
        "30",
        "--authorization-mode",
        "AlwaysAllow",
    ]));
}

fn story(k: &Klab) {
    let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(MANIFESTS));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bound = Duration::from_secs(90);
    k.wait_for("6 pods Running", bound, || {
        let p = pods(k);
        (p.len() == 6 && p.iter().all(|(_, s, _)| s == "Running")).then_some(())
    });
    // The node that runs mysql-0 fails.
    let node = pods(k)
        .into_iter()
        .find(|(n, _, _)| n == "mysql-0")
        .unwrap()
        .2;
    let before: Vec<String> = pods(k)
        .into_iter()
        .filter(|(_, _, n)| *n == node)
        .map(|(p, _, _)| p)
        .collect();
    let run = |args: &[&str]| k.klab(args);
    assert_eq!(
        run(&["node", "stop-kubelet", &node]).trim(),
        format!("node/{node}: stop-kubelet done (power on, kubelet stopped, network connected)")
    );
    k.wait_for("node NotReady", bound, || {
        let out = k.ok(33, &["get", "node", &node, "--no-headers"]);
        (out.split_whitespace().nth(1) == Some("NotReady")).then_some(())
    });
    // After the toleration (300 s, 10 s of wall time at --speed 30) every pod there is Terminating.
    k.wait_for("pods on the dead node Terminating", bound, || {
        let p = pods(k);
        before
            .iter()
            .all(|b| p.iter().any(|(n, s, _)| n == b && s == "Terminating"))
            .then_some(())
    });
    // The Deployment replaces its pod elsewhere; the StatefulSet cannot (mysql-0 still exists).
    k.wait_for("nginx replacement Running on another node", bound, || {
        let p = pods(k);
        let running = p
            .iter()
            .filter(|(n, s, nd)| {
                n.starts_with("nginx-deployment-") && s == "Running" && *nd != node
            })
            .count();
        (running == 3).then_some(())
    });
    let p = pods(k);
    let mysql0: Vec<_> = p.iter().filter(|(n, _, _)| n == "mysql-0").collect();
    assert_eq!(mysql0.len(), 1);
    assert_eq!(
        (mysql0[0].1.as_str(), mysql0[0].2.as_str()),
        ("Terminating", node.as_str()),
        "mysql-0 is stuck on the dead node"
    );
    // The kubelet comes back: it finishes the deletions, and the StatefulSet recreates mysql-0.
    run(&["node", "start-kubelet", &node]);
    k.wait_for(
        "Terminating pods gone and mysql-0 Running again",
        bound,
        || {
            let p = pods(k);
            let terminating = p.iter().any(|(_, s, _)| s == "Terminating");
            let mysql0_running = p.iter().any(|(n, s, _)| n == "mysql-0" && s == "Running");
            (!terminating && mysql0_running && p.len() == 6).then_some(())
        },
    );
}
