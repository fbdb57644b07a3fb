//! `kubectl top` on a live `klab up` with real kubectl 1.27, 1.30 and 1.33: metrics-server's
//! pipeline (two scrapes before a rate, a node that stops answering drops out) and the
//! `metrics.k8s.io/v1beta1` API, with numbers checked against the usage model (working sets
//! exactly, CPU at the modelled rate).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::harness::Klab;

const BOUND: Duration = Duration::from_secs(90);

const MANIFESTS: &str = "
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations:
        usage.klab.dev/app: memory=100Mi,cpu=250m
        usage.klab.dev/sidecar: memory=20Mi,cpu=50m
    spec:
      containers:
        - {name: app, image: nginx}
        - {name: sidecar, image: busybox, command: [sleep, '3600']}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata:
      labels: {app: agent}
      annotations:
        usage.klab.dev/agent: memory=30Mi,cpu=10m
    spec:
      containers:
        - {name: agent, image: busybox, command: [sleep, '3600']}
---
apiVersion: v1
kind: Pod
metadata: {name: idle, labels: {app: idle}}
spec:
  containers:
    - {name: app, image: busybox, command: [sleep, '3600']}
---
apiVersion: v1
kind: Pod
metadata: {name: pending, labels: {app: pending}}
spec:
  nodeSelector: {no-such: label}
  containers:
    - {name: app, image: busybox, command: [sleep, '3600']}
";

/// What the usage model gives each pod: (CPU millicores, memory MiB) by pod-name prefix; the
/// idle BestEffort pod uses the model's idle baseline (1m, 1Mi); the pending pod runs nowhere.
fn model(pod: &str) -> Option<(u64, u64)> {
    if pod.starts_with("web-") {
        Some((300, 120))
    } else if pod.starts_with("agent-") {
        Some((10, 30))
    } else if pod == "idle" {
        Some((1, 1))
    } else {
        None
    }
}

/// Rows of a kubectl table, split on whitespace, header first.
fn rows(s: &str) -> Vec<Vec<String>> {
    s.lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Running pods by name → node.
fn placements(k: &Klab) -> BTreeMap<String, String> {
    k.ok(
        33,
        &[
            "get",
            "pods",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{\"\\n\"}{end}",
        ],
    )
    .lines()
    .filter_map(|l| l.split_once(' '))
    .map(|(p, n)| (p.to_string(), n.to_string()))
    .collect()
}

fn milli(cpu: &str) -> u64 {
    cpu.trim_end_matches('m').parse().expect("millicores")
}

fn mib(mem: &str) -> u64 {
    mem.trim_end_matches("Mi").parse().expect("MiB")
}

#[test]
fn kubectl_top_on_a_live_cluster() {
    let k = Klab::start(&["--speed", "20"]);
    // Before any pod: every Ready node has usage, its system daemons' (50m and 256Mi by
    // default, docs/usage.md), as a real node has from its OS, kubelet and runtime.
    let idle = k.wait_for("every idle node with metrics", BOUND, || {
        // `error: metrics not available yet` until the first nodes have two scrapes.
        let o = k.kubectl(33, &["top", "nodes", "--no-headers"]);
        let t = rows(&String::from_utf8_lossy(&o.stdout));
        (o.status.success() && t.len() == 3 && !t.iter().flatten().any(|c| c == "<unknown>"))
            .then_some(t)
    });
    for r in &idle {
        assert_eq!((milli(&r[1]), mib(&r[3])), (50, 256), "{r:?}");
    }
    let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(MANIFESTS));
    assert!(out.status.success(), "{}", stderr(&out));

    // Pods get metrics after two scrapes: wait for every modelled pod.
    let pods = k.wait_for("pod metrics", BOUND, || {
        let all = placements(&k);
        if all.len() < 7 {
            return None;
        }
        let o = k.kubectl(33, &["top", "pods", "--no-headers"]);
        let listed = String::from_utf8_lossy(&o.stdout).lines().count();
        (o.status.success() && listed == 6).then_some(all)
    });
    let nodes: Vec<String> = k
        .ok(33, &["get", "nodes", "-o", "name"])
        .lines()
        .map(|l| l.trim_start_matches("node/").to_string())
        .collect();
    assert_eq!(nodes.len(), 3);
    // A node's usage is its system daemons' (50m, 256Mi) and the sum of its pods'.
    let mut expected: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (pod, node) in &pods {
        if let Some((c, m)) = model(pod) {
            let e = expected.entry(node.as_str()).or_insert((50, 256));
            e.0 += c;
            e.1 += m;
        }
    }
    // 8Gi less the 100Mi hard eviction threshold; 4 CPUs.
    let alloc_mib = 8192 - 100;

    for minor in [27u32, 30, 33] {
        // top nodes: every node with its pods' sums and percentages of allocatable.
        // A scrape that misses its deadline on a loaded machine forgets the node until it has
        // answered twice again (`<unknown>`), as metrics-server does: wait for every node. A
        // node's window that began before one of its pods' containers started averages in less
        // than that pod's rate (pods are listed after their own two points, which can both fall
        // inside the node's window): wait for a window that lies wholly after the starts too.
        let t = k.wait_for(
            "every node with metrics over a window after its pods started",
            Duration::from_secs(90),
            || {
                let t = rows(&k.ok(minor, &["top", "nodes"]));
                // `<unknown>` first: it is no number of millicores.
                let settled = !t.iter().flatten().any(|c| c == "<unknown>")
                    && t.len() == 4
                    && t[1..]
                        .iter()
                        .all(|r| expected.get(r[0].as_str()).map(|e| e.0) == Some(milli(&r[1])));
                settled.then_some(t)
            },
        );
        let cpu_pct = if minor >= 33 { "CPU(%)" } else { "CPU%" };
        let mem_pct = if minor >= 33 { "MEMORY(%)" } else { "MEMORY%" };
        assert_eq!(
            t[0],
            ["NAME", "CPU(cores)", cpu_pct, "MEMORY(bytes)", mem_pct],
            "1.{minor}"
        );
        assert_eq!(t.len(), 4, "1.{minor}: {t:?}");
        for r in &t[1..] {
            let (c, m) = expected[r[0].as_str()];
            assert_eq!(milli(&r[1]), c, "1.{minor} {r:?}");
            assert_eq!(r[2], format!("{}%", c * 100 / 4000), "1.{minor} {r:?}");
            assert_eq!(mib(&r[3]), m, "1.{minor} {r:?}");
            assert_eq!(r[4], format!("{}%", m * 100 / alloc_mib), "1.{minor} {r:?}");
        }
        // top node NAME: that node only.
        let one = rows(&k.ok(minor, &["top", "node", &nodes[0], "--no-headers"]));
        assert_eq!(one.len(), 1);
        assert_eq!(one[0][0], nodes[0]);

        // top pods -A: every running pod, exactly — the idle one too (the idle baseline); the
        // pending one has no metrics.
        let t = rows(&k.ok(minor, &["top", "pods", "-A"]));
        assert_eq!(
            t[0],
            ["NAMESPACE", "NAME", "CPU(cores)", "MEMORY(bytes)"],
            "1.{minor}"
        );
        assert_eq!(t.len(), 7, "1.{minor}: {t:?}");
        for r in &t[1..] {
            let (c, m) = model(&r[1]).expect("a modelled pod");
            assert_eq!(r[0], "default");
            assert_eq!((milli(&r[2]), mib(&r[3])), (c, m), "1.{minor} {r:?}");
        }
        // --sort-by=memory: the web pods (120Mi), the agents (30Mi), the idle pod (1Mi).
        let t = rows(&k.ok(minor, &["top", "pods", "--sort-by=memory", "--no-headers"]));
        let order: Vec<u64> = t.iter().map(|r| model(&r[0]).unwrap().1).collect();
        assert_eq!(order, [120, 120, 30, 30, 30, 1], "1.{minor}: {t:?}");
        // --containers: one row per container.
        let web = pods.keys().find(|p| p.starts_with("web-")).unwrap();
        let t = rows(&k.ok(minor, &["top", "pod", web, "--containers"]));
        assert_eq!(t[0], ["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]);
        assert_eq!(
            t[1..],
            [
                vec![web.clone(), "app".into(), "250m".into(), "100Mi".into()],
                vec![web.clone(), "sidecar".into(), "50m".into(), "20Mi".into()],
            ],
            "1.{minor}"
        );

        // No metrics: metrics-server's 404 for a pod it has none of, and kubectl's own message
        // when a selector finds pods without metrics or no node metrics at all.
        let o = k.kubectl(minor, &["top", "pod", "pending"]);
        assert!(!o.status.success());
        assert_eq!(
            stderr(&o).trim(),
            "Error from server (NotFound): podmetrics.metrics.k8s.io \"default/pending\" not found"
        );
        let o = k.kubectl(minor, &["top", "pod", "-l", "app=pending"]);
        assert_eq!(stderr(&o).trim(), "error: metrics not available yet");
        let o = k.kubectl(minor, &["top", "node", "-l", "no-such=label"]);
        assert_eq!(stderr(&o).trim(), "error: metrics not available yet");
        let o = k.kubectl(minor, &["top", "node", "no-such-node"]);
        assert_eq!(
            stderr(&o).trim(),
            "Error from server (NotFound): node \"no-such-node\" not found"
        );
    }

    // The API's own shape.
    let raw: serde_json::Value =
        serde_json::from_str(&k.ok(33, &["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"]))
            .expect("json");
    assert_eq!(raw["kind"], "NodeMetricsList");
    assert_eq!(raw["apiVersion"], "metrics.k8s.io/v1beta1");
    let items = raw["items"].as_array().expect("items");
    assert_eq!(items.len(), 3);
    for item in items {
        let name = item["metadata"]["name"].as_str().unwrap();
        assert!(item["metadata"]["creationTimestamp"].is_string());
        assert!(item["metadata"]["labels"]["kubernetes.io/hostname"] == name);
        assert!(item["timestamp"].as_str().unwrap().ends_with('Z'));
        let window = item["window"].as_str().unwrap();
        let secs: f64 = window.trim_end_matches('s').parse().expect(window);
        assert!((14.0..=16.0).contains(&secs), "{window}");
        let mem = item["usage"]["memory"].as_str().unwrap();
        assert_eq!(mem, format!("{}Mi", expected[name].1), "{item}");
        assert!(item["usage"]["cpu"].is_string());
    }
    let o = k.kubectl(
        33,
        &[
            "get",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb",
        ],
    );
    let pods_raw: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(pods_raw["kind"], "PodMetricsList");
    assert_eq!(pods_raw["items"].as_array().unwrap().len(), 2);
    let app = &pods_raw["items"][0]["containers"][0];
    assert_eq!(app["name"], "app", "{app}");
    assert_eq!(app["usage"]["memory"], "100Mi", "{app}");
    // metrics-server reads the kubelet's cumulative CPU seconds (a float) as `uint64(v * 1e9)`,
    // which can truncate a counter by 1 ns: an exact 250m then reads 249999999n, as it would
    // upstream. kubectl rounds that up to 250m (above).
    let cpu = app["usage"]["cpu"].as_str().expect("cpu");
    assert!(
        cpu == "250m" || cpu == "249999999n",
        "{app}: 250m, or 1 ns less"
    );
    let disco = k.ok(
        33,
        &["api-resources", "--api-group=metrics.k8s.io", "-o", "wide"],
    );
    let disco = rows(&disco);
    assert_eq!(
        disco[1..],
        [
            vec![
                "nodes",
                "metrics.k8s.io/v1beta1",
                "false",
                "NodeMetrics",
                "get,list"
            ],
            vec![
                "pods",
                "metrics.k8s.io/v1beta1",
                "true",
                "PodMetrics",
                "get,list"
            ],
        ]
    );
    let o = k.kubectl(
        33,
        &[
            "get",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1/nodes?watch=true",
        ],
    );
    assert!(
        stderr(&o).contains("watch is not supported on resources of kind \"nodes.metrics.k8s.io\""),
        "{}",
        stderr(&o)
    );

    // A stopped kubelet answers no scrape: its node drops out at the next one and kubectl
    // prints it as <unknown>.
    let victim = nodes[2].clone();
    k.klab(&["node", "stop-kubelet", &victim]);
    k.wait_for("<unknown> node", BOUND, || {
        let t = rows(&k.ok(33, &["top", "nodes", "--no-headers"]));
        t.iter()
            .any(|r| r[0] == victim && r[1..] == ["<unknown>"; 4])
            .then_some(())
    });
    let o = k.kubectl(33, &["top", "node", &victim]);
    assert_eq!(
        stderr(&o).trim(),
        format!("Error from server (NotFound): nodemetrics.metrics.k8s.io \"{victim}\" not found")
    );
    // The others still have metrics.
    let t = rows(&k.ok(27, &["top", "nodes", "--no-headers"]));
    assert_eq!(t.iter().filter(|r| r[1] != "<unknown>").count(), 2, "{t:?}");
}

/// Under `--authorization-mode Node,RBAC` metrics-server scrapes as its own service account
/// (system:metrics-server), and a user may run `kubectl top` once bound to `view` (which
/// aggregates metrics-server's reader), as on a cluster with metrics-server installed.
#[test]
fn kubectl_top_under_rbac() {
    let k = Klab::start(&["--speed", "20", "--authorization-mode", "Node,RBAC"]);
    let pod = "
apiVersion: v1
kind: Pod
metadata: {name: busy, annotations: {usage.klab.dev/app: 'cpu=100m,memory=64Mi'}}
spec:
  containers: [{name: app, image: nginx}]
";
    let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(pod));
    assert!(out.status.success(), "{}", stderr(&out));
    k.wait_for("busy's metrics", BOUND, || {
        let o = k.kubectl(33, &["top", "pod", "busy", "--no-headers"]);
        (o.status.success() && String::from_utf8_lossy(&o.stdout).contains("100m")).then_some(())
    });
    let o = k.kubectl(
        33,
        &[
            "auth",
            "can-i",
            "delete",
            "pods",
            "--as=system:serviceaccount:kube-system:metrics-server",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "no");

    let add = std::process::Command::new(env!("CARGO_BIN_EXE_klab"))
        .args(["user", "add", "bob", "--data-dir"])
        .arg(k.dir.path().join("data"))
        .output()
        .expect("klab runs");
    assert!(add.status.success(), "{add:?}");
    let bob = String::from_utf8_lossy(&add.stdout)
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_string();
    let as_bob = || {
        std::process::Command::new(crate::harness::kubectl_binary(33))
            .args(["--kubeconfig", &bob, "top", "pods"])
            .output()
            .expect("kubectl runs")
    };
    let o = as_bob();
    assert_eq!(
        stderr(&o).trim(),
        "Error from server (Forbidden): pods.metrics.k8s.io is forbidden: User \"bob\" cannot list resource \"pods\" in API group \"metrics.k8s.io\" in the namespace \"default\""
    );
    k.ok(
        33,
        &[
            "create",
            "clusterrolebinding",
            "bob-view",
            "--clusterrole=view",
            "--user=bob",
        ],
    );
    k.wait_for("bob reads metrics", BOUND, || {
        let o = as_bob();
        (o.status.success() && String::from_utf8_lossy(&o.stdout).contains("busy")).then_some(())
    });
}
