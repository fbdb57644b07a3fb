//! Seed 001's maintenance on a live `klab up` with real kubectl 1.27, 1.30 and 1.33: `kubectl
//! drain` of a node that runs two of a Deployment's three pods under a PodDisruptionBudget with
//! `minAvailable: 2`. The first eviction is allowed, the second is refused with upstream's 429
//! until the first pod's replacement is Ready elsewhere, then allowed; the drain ends with
//! `node/<n> drained`. Waits are for conditions, with bounds.

use std::time::Duration;

use crate::harness::Klab;

fn manifests(ns: &str) -> String {
    // Pods may only run on the first two nodes, so that three replicas put two on one of them
    // and the replacements of a drained node's pods land on the other.
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {ns}}}
spec:
  replicas: 3
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - {{key: kubernetes.io/hostname, operator: In, values: [klab-worker, klab-worker2]}}
      containers: [{{name: nginx, image: nginx}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web-pdb, namespace: {ns}}}
spec:
  minAvailable: 2
  selector: {{matchLabels: {{app: web}}}}
"#
    )
}

/// `get pods -o wide` rows of a namespace as (name, ready, status, node).
fn pods(k: &Klab, ns: &str) -> Vec<(String, String, String, String)> {
    let out = k.ok(33, &["get", "pods", "-n", ns, "-o", "wide", "--no-headers"]);
    out.lines()
        .map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            (
                c[0].to_string(),
                c[1].to_string(),
                c[2].to_string(),
                c[6].to_string(),
            )
        })
        .collect()
}

#[test]
fn drain_waits_for_the_disruption_budget_with_real_kubectl() {
    let k = Klab::start(&["--speed", "20"]);
    let bound = Duration::from_secs(90);
    for minor in [27, 30, 33] {
        let ns = format!("drain-{minor}");
        let out = k.kubectl_stdin(minor, &["apply", "-f", "-"], Some(&manifests(&ns)));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        k.wait_for("3 pods Ready", bound, || {
            let p = pods(&k, &ns);
            (p.len() == 3 && p.iter().all(|(_, r, s, _)| r == "1/1" && s == "Running"))
                .then_some(())
        });
        // The budget's status, as the disruption controller computes it.
        k.wait_for("the budget allows one disruption", bound, || {
            let out = k.ok(minor, &["get", "pdb", "-n", &ns, "--no-headers"]);
            let cells: Vec<&str> = out.split_whitespace().collect();
            (cells.get(1..4) == Some(&["2", "N/A", "1"][..])).then_some(())
        });
        let p = pods(&k, &ns);
        let node = ["klab-worker", "klab-worker2"]
            .into_iter()
            .find(|n| p.iter().filter(|(_, _, _, pn)| pn == n).count() == 2)
            .unwrap_or_else(|| panic!("no node runs two pods: {p:?}"));
        let on_node: Vec<String> = p
            .iter()
            .filter(|(_, _, _, pn)| pn == node)
            .map(|(n, _, _, _)| n.clone())
            .collect();

        let out = k.kubectl(
            minor,
            &["drain", node, "--ignore-daemonsets", "--timeout=60s"],
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "1.{minor}: {stdout}\n{stderr}");
        let all = format!("{stdout}{stderr}");
        assert!(
            stdout.starts_with(&format!("node/{node} cordoned\n")),
            "1.{minor}: {all}"
        );
        assert!(
            stdout.ends_with(&format!("node/{node} drained\n")),
            "1.{minor}: {all}"
        );
        for pod in &on_node {
            assert!(
                all.contains(&format!("evicting pod {ns}/{pod}\n")),
                "1.{minor}: {all}"
            );
            assert!(
                stdout.contains(&format!("pod/{pod} evicted\n")),
                "1.{minor}: {all}"
            );
        }
        // One of the two waited for the budget, with upstream's line.
        let refused = on_node.iter().any(|pod| {
            stderr.contains(&format!(
                "error when evicting pods/\"{pod}\" -n \"{ns}\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.\n"
            ))
        });
        assert!(refused, "1.{minor}: no eviction was refused: {all}");
        // Every line is one of the forms above.
        for line in all.lines() {
            assert!(
                line.starts_with("node/")
                    || line.starts_with("evicting pod ")
                    || line.starts_with("pod/")
                    || line.starts_with("error when evicting pods/"),
                "1.{minor}: unexpected line {line:?}"
            );
        }
        // The budget is whole again, all three pods on the other node.
        k.wait_for("3 pods Ready on the other node", bound, || {
            let p = pods(&k, &ns);
            (p.len() == 3
                && p.iter()
                    .all(|(_, r, s, n)| r == "1/1" && s == "Running" && n != node))
            .then_some(())
        });
        k.ok(minor, &["uncordon", node]);
        k.ok(minor, &["delete", "namespace", &ns, "--wait=true"]);
    }
}
