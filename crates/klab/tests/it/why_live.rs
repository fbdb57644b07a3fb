//! `klab why` on a live `klab up --speed 30` during the seed-000 story, at each phase: healthy,
//! node NotReady with the eviction countdown, pods Terminating on the dead node (what ends it,
//! the StatefulSet that cannot replace its pod), and recovered. Also unknown objects and bad
//! input (exit code 2 and kubectl's texts).

use std::process::{Command, Output};
use std::time::Duration;

use crate::harness::Klab;

const MANIFESTS: &str = include_str!("../../../../examples/seed-000.yaml");

fn why(k: &Klab, args: &[&str]) -> (i32, String, String) {
    let o: Output = Command::new(env!("CARGO_BIN_EXE_klab"))
        .arg("why")
        .args(args)
        .arg("--kubeconfig")
        .arg(&k.kubeconfig)
        .output()
        .expect("run klab why");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn pod_row(k: &Klab, name: &str) -> Option<(String, String)> {
    let out = k.ok(33, &["get", "pods", "-o", "wide", "--no-headers"]);
    out.lines().find_map(|l| {
        let c: Vec<&str> = l.split_whitespace().collect();
        (c[0] == name).then(|| (c[2].to_string(), c[6].to_string()))
    })
}

#[test]
fn why_explains_each_phase_of_the_seed_000_story() {
    let k = Klab::start(&["--speed", "30"]);
    let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(MANIFESTS));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bound = Duration::from_secs(90);
    k.wait_for("mysql-0 Running", bound, || {
        pod_row(&k, "mysql-0").filter(|(s, _)| s == "Running")
    });
    k.wait_for("the StatefulSet complete", bound, || {
        let (code, out, _) = why(&k, &["sts/mysql"]);
        (code == 0 && out.starts_with("StatefulSet default/mysql: 3/3 ready\n")).then_some(())
    });

    // Healthy: exit 0, one line saying so.
    let (code, out, _) = why(&k, &["pod/mysql-0"]);
    let node = pod_row(&k, "mysql-0").unwrap().1;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with(&format!(
            "Pod default/mysql-0: Running on {node}\n  - Running and Ready on {node}\n"
        )),
        "{out}"
    );

    // The node loses power: NotReady, the unreachable taint, the eviction countdown.
    k.klab(&["node", "power-off", &node]);
    let out = k.wait_for("the eviction countdown", bound, || {
        let (code, out, _) = why(&k, &["pod/mysql-0"]);
        (code == 1 && out.contains("evicted by the taint eviction controller at")).then_some(out)
    });
    assert!(
        out.contains(&format!("  - node {node} NotReady since ")),
        "{out}"
    );
    assert!(out.contains("Ready=Unknown (NodeStatusUnknown: Kubelet stopped posting node status.); Lease last renewed "), "{out}");
    assert!(out.contains(", grace 50s\n"), "{out}");
    assert!(
        out.contains("  - taint node.kubernetes.io/unreachable:NoExecute added at "),
        "{out}"
    );
    assert!(out.contains("  → this pod tolerates node.kubernetes.io/unreachable:NoExecute for 300s → evicted by the taint eviction controller at "), "{out}");
    let (code, out, _) = why(&k, &[&format!("node/{node}")]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with(&format!("Node {node}: NotReady (stuck)\n")),
        "{out}"
    );
    assert!(
        out.contains("is Normal (2 of 3 nodes Ready): NoExecute taints are added at 0.1 nodes/s"),
        "{out}"
    );
    assert!(out.contains("  Pod default/mysql-0: Running on "), "{out}");
    // JSON carries the same countdown, with its due instant.
    let (_, json, _) = why(&k, &["pod/mysql-0", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(v["stuck"], true);
    let next = v["causes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["about"] == "next")
        .expect("a next step");
    assert!(
        next["due"].as_str().is_some_and(|d| d.ends_with('Z')),
        "{json}"
    );

    // After the toleration: Terminating, and nobody can confirm it.
    let out = k.wait_for("mysql-0 Terminating", bound, || {
        let (code, out, _) = why(&k, &["pod/mysql-0"]);
        (code == 1 && out.starts_with("Pod default/mysql-0: Terminating")).then_some(out)
    });
    assert!(out.contains("(DeletionByTaintManager: Taint manager: deleting due to NoExecute taint), grace period 30s"), "{out}");
    assert!(out.contains(&format!("no kubelet confirms the termination because node {node} is NotReady; it ends when the node returns, the node is deleted (pod GC after 40s), the out-of-service taint is added (kubectl taint node {node} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute), or with kubectl delete pod mysql-0 -n default --force --grace-period=0")), "{out}");
    assert!(
        out.contains(
            "  - StatefulSet mysql cannot create mysql-0 elsewhere: the old mysql-0 still exists\n"
        ),
        "{out}"
    );
    let (code, out, _) = why(&k, &["statefulset/mysql"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "StatefulSet mysql cannot create mysql-0: the old mysql-0 still exists (Terminating)"
        ),
        "{out}"
    );
    // The Deployment's evicted pod names its replacement.
    let (_, out, _) = why(&k, &["deploy/nginx-deployment", "-o", "yaml"]);
    assert!(out.contains("kind: Deployment"), "{out}");

    // Power back on: the kubelet finishes the deletion, mysql-0 comes back.
    k.klab(&["node", "power-on", &node]);
    k.wait_for("mysql-0 Running and Ready again", bound, || {
        let (code, out, _) = why(&k, &["pod/mysql-0"]);
        (code == 0 && out.contains("Running and Ready on")).then_some(())
    });
}

#[test]
fn why_refuses_unknown_objects_and_bad_input() {
    let k = Klab::start(&[]);
    let (code, out, err) = why(&k, &["pod/nope"]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(
        err.trim(),
        "Error from server (NotFound): pods \"nope\" not found"
    );
    let (code, _, err) = why(&k, &["node/nope"]);
    assert_eq!(code, 2);
    assert_eq!(
        err.trim(),
        "Error from server (NotFound): nodes \"nope\" not found"
    );
    let (code, _, err) = why(&k, &["svc/kubernetes"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot explain \"svc\""), "{err}");
    let (code, _, err) = why(&k, &["kubernetes"]);
    assert_eq!(code, 2);
    assert!(err.contains("expected KIND/NAME"), "{err}");
    let (code, _, err) = why(
        &k,
        &[
            "node/klab-worker",
            "--controller-flag",
            "node-monitor-grace-period=soon",
        ],
    );
    assert_eq!(code, 2);
    assert!(err.contains("node-monitor-grace-period"), "{err}");
    // A kubeconfig that does not exist.
    let o = Command::new(env!("CARGO_BIN_EXE_klab"))
        .args([
            "why",
            "node/klab-worker",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/kubeconfig"));
    // A known flag changes the quoted grace period (once the kubelet has created its Lease).
    k.wait_for(
        "the grace period of the flag",
        Duration::from_secs(30),
        || {
            let (code, out, _) = why(
                &k,
                &[
                    "node/klab-worker",
                    "--controller-flag",
                    "node-monitor-grace-period=40s",
                ],
            );
            (code == 0 && out.contains("grace 40s")).then_some(())
        },
    );
}

/// `klab sim --report`: the page is written beside the usual output; with stderr not a terminal
/// no progress bar is drawn; an unwritable report path is an error (exit 2).
#[test]
fn sim_writes_the_html_report_and_no_progress_bar_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("run.html");
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/kubelet/stop-under-toleration.yaml"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_klab"))
        .args(["sim", scenario, "--report"])
        .arg(&report)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("expectations: "), "{stdout}");
    assert!(
        !stderr.contains("events/s") && !stderr.contains('\r'),
        "{stderr}"
    );
    let page = std::fs::read_to_string(&report).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains(r#"<g class="lane node" data-object="Node n2">"#));
    assert!(page.contains(r#"<pre id="summary">"#));
    let o = Command::new(env!("CARGO_BIN_EXE_klab"))
        .args([
            "sim",
            scenario,
            "--quiet",
            "--report",
            "/nonexistent/dir/run.html",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("error: --report /nonexistent/dir/run.html")
    );
}
