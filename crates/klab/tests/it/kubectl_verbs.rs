//! The kubectl verbs users run in the seed experiments, against a real `klab up`, with kubectl
//! 1.27, 1.30 and 1.33: outputs compared with what a real cluster prints (api-surface §d.5, §d.6).

use std::time::Duration;

use crate::harness::{Klab, mask_ages};

/// One step: kubectl arguments, optional stdin, expected exit status and the exact stdout (or a
/// substring of stderr when the status is non-zero).
struct Step {
    args: Vec<String>,
    stdin: Option<String>,
    ok: bool,
    expect: String,
}

fn step(args: &str, expect: &str) -> Step {
    Step {
        args: args.split_whitespace().map(String::from).collect(),
        stdin: None,
        ok: true,
        expect: expect.into(),
    }
}

fn step_in(args: &str, stdin: &str, expect: &str) -> Step {
    Step {
        stdin: Some(stdin.into()),
        ..step(args, expect)
    }
}

fn fails(args: &str, stderr: &str) -> Step {
    Step {
        ok: false,
        ..step(args, stderr)
    }
}

fn fails_in(args: &str, stdin: &str, stderr: &str) -> Step {
    Step {
        ok: false,
        ..step_in(args, stdin, stderr)
    }
}

pub fn manifests(ns: &str) -> (String, String, String) {
    let namespace =
        format!(r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{ns}"}}}}"#);
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bare\n  namespace: {ns}\nspec:\n  nodeName: klab-worker\n  containers:\n  - name: c\n    image: busybox:1.36\n    command: [\"sleep\", \"3600\"]\n"
    );
    let deploy = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: nginx\n        image: nginx:1.27\n"
    );
    (namespace, pod, deploy)
}

fn run_steps(k: &Klab, minor: u32, steps: &[Step]) {
    for s in steps {
        let args: Vec<&str> = s.args.iter().map(String::as_str).collect();
        let out = k.kubectl_stdin(minor, &args, s.stdin.as_deref());
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.success(),
            s.ok,
            "kubectl 1.{minor} {args:?}\nstdout: {stdout}\nstderr: {stderr}"
        );
        if s.ok {
            assert_eq!(
                stdout.trim_end(),
                s.expect,
                "kubectl 1.{minor} {args:?}\nstderr: {stderr}"
            );
        } else {
            assert!(
                stderr.contains(&s.expect),
                "kubectl 1.{minor} {args:?}: stderr {stderr:?} lacks {:?}",
                s.expect
            );
        }
    }
}

#[test]
fn mutating_verbs_print_what_a_real_cluster_prints() {
    let k = Klab::start(&[]);
    for minor in [27, 30, 33] {
        let ns = format!("v{minor}");
        let (namespace, pod, deploy) = manifests(&ns);
        let n = format!("-n {ns}");
        let steps = vec![
            step_in(
                "create -f -",
                &namespace,
                &format!("namespace/{ns} created"),
            ),
            step_in(&format!("create -f - {n}"), &pod, "pod/bare created"),
            fails_in(
                &format!("create -f - {n}"),
                &pod,
                "Error from server (AlreadyExists): error when creating \"STDIN\": pods \"bare\" already exists",
            ),
        ];
        run_steps(&k, minor, &steps);
        // Let the kubelet finish starting the pod, so that its status writes do not race the
        // no-op checks below (kubectl compares the object before and after its patch).
        k.wait_for("pod bare Running", Duration::from_secs(60), || {
            let s = k.ok(
                minor,
                &[
                    "get",
                    "pod",
                    "bare",
                    "-n",
                    &ns,
                    "-o",
                    "jsonpath={.status.phase}",
                ],
            );
            (s == "Running").then_some(())
        });
        let steps = vec![
            step_in(
                &format!("apply -f - {n}"),
                &deploy,
                "deployment.apps/web created",
            ),
            step_in(
                &format!("apply -f - {n}"),
                &deploy,
                "deployment.apps/web unchanged",
            ),
            step_in(
                &format!("apply -f - {n}"),
                &deploy.replace("nginx:1.27", "nginx:1.28"),
                "deployment.apps/web configured",
            ),
            step(
                &format!(
                    "patch pod bare {n} -p {{\"metadata\":{{\"labels\":{{\"tier\":\"x\"}}}}}}"
                ),
                "pod/bare patched",
            ),
            step(
                &format!(
                    "patch pod bare {n} -p {{\"metadata\":{{\"labels\":{{\"tier\":\"x\"}}}}}}"
                ),
                "pod/bare patched (no change)",
            ),
            step(
                &format!(
                    "patch pod bare {n} --type=merge -p {{\"metadata\":{{\"annotations\":{{\"m\":\"1\"}}}}}}"
                ),
                "pod/bare patched",
            ),
            step(
                &format!(
                    "patch pod bare {n} --type=json -p [{{\"op\":\"add\",\"path\":\"/metadata/labels/j\",\"value\":\"1\"}}]"
                ),
                "pod/bare patched",
            ),
            step(
                &format!("label pod bare tier=x --overwrite {n}"),
                "pod/bare not labeled",
            ),
            step(&format!("label pod bare extra=y {n}"), "pod/bare labeled"),
            // kubectl 1.27 itself prints "annotate" (its own text, not the server's).
            step(
                &format!("annotate pod bare a=b {n}"),
                if minor == 27 {
                    "pod/bare annotate"
                } else {
                    "pod/bare annotated"
                },
            ),
            step(
                &format!("scale deployment web --replicas=3 {n}"),
                "deployment.apps/web scaled",
            ),
            fails(
                &format!("get pod nope {n}"),
                "Error from server (NotFound): pods \"nope\" not found",
            ),
            fails(
                "get foos",
                "error: the server doesn't have a resource type \"foos\"",
            ),
            step("get pods -n kube-public", ""),
        ];
        run_steps(&k, minor, &steps);
        // Node verbs on a real (simulated) node.
        let node = "klab-worker2";
        let steps = vec![
            step(
                &format!("taint nodes {node} key{minor}=value:NoExecute"),
                &format!("node/{node} tainted"),
            ),
            fails(
                &format!("taint nodes {node} nope:NoSchedule-"),
                "error: taint \"nope:NoSchedule\" not found",
            ),
            step(
                &format!("taint nodes {node} key{minor}-"),
                &format!("node/{node} untainted"),
            ),
            step(&format!("cordon {node}"), &format!("node/{node} cordoned")),
            step(
                &format!("cordon {node}"),
                &format!("node/{node} already cordoned"),
            ),
            step(
                &format!("uncordon {node}"),
                &format!("node/{node} uncordoned"),
            ),
            step(
                &format!("label node {node} l{minor}=b"),
                &format!("node/{node} labeled"),
            ),
        ];
        run_steps(&k, minor, &steps);
        // Graceful deletion completes through the kubelet; wait --for=delete sees it.
        let out = k.ok(
            minor,
            &[
                "delete",
                "pod",
                "bare",
                "-n",
                &ns,
                "--wait=false",
                "--grace-period=2",
            ],
        );
        assert_eq!(out.trim_end(), "pod \"bare\" deleted");
        let out = k.ok(
            minor,
            &[
                "wait",
                "--for=delete",
                "pod/bare",
                "-n",
                &ns,
                "--timeout=60s",
            ],
        );
        assert_eq!(out.trim_end(), "pod/bare condition met");
        let out = k.kubectl(minor, &["delete", "deployment", "web", "-n", &ns]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim_end(),
            "deployment.apps \"web\" deleted"
        );
    }
}

#[test]
fn get_and_describe_show_kubelet_state() {
    let k = Klab::start(&[]);
    let (_, pod, _) = manifests("default");
    k.kubectl_stdin(33, &["create", "-f", "-"], Some(&pod));
    // The kubelet runs the pod: wait for Running (bounded), then compare listings.
    k.wait_for("pod bare Running", Duration::from_secs(60), || {
        let s = k.ok(
            33,
            &["get", "pod", "bare", "-o", "jsonpath={.status.phase}"],
        );
        (s == "Running").then_some(())
    });
    for minor in [27, 30, 33] {
        let nodes = mask_ages(&k.ok(minor, &["get", "nodes"]));
        assert_eq!(
            nodes,
            "NAME STATUS ROLES AGE VERSION\n\
             klab-worker Ready <none> AGE v1.33.1\n\
             klab-worker2 Ready <none> AGE v1.33.1\n\
             klab-worker3 Ready <none> AGE v1.33.1",
            "kubectl 1.{minor}"
        );
        let pods = k.ok(minor, &["get", "pods", "-A", "-o", "wide"]);
        let mut lines = pods.lines();
        assert_eq!(
            lines
                .next()
                .unwrap()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            "NAMESPACE NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES"
        );
        let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(row[..5], ["default", "bare", "1/1", "Running", "0"]);
        assert_eq!(row[7..], ["klab-worker", "<none>", "<none>"]);
        // The first Lease is written once the Node exists (one renew interval after start).
        let leases = k.wait_for("node leases", Duration::from_secs(60), || {
            let l = k.ok(minor, &["get", "lease", "-n", "kube-node-lease"]);
            (l.lines().count() == 4).then_some(l)
        });
        assert!(
            leases.starts_with("NAME           HOLDER         AGE\nklab-worker    klab-worker    "),
            "{leases}"
        );
        let yaml = k.ok(minor, &["get", "node", "klab-worker", "-o", "yaml"]);
        assert!(
            yaml.contains("kind: Node") && yaml.contains("type: Ready"),
            "{yaml}"
        );
        let json = k.ok(minor, &["get", "pod", "bare", "-o", "json"]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["status"]["phase"], "Running");
        let labels = k.ok(minor, &["get", "nodes", "--show-labels"]);
        assert!(
            labels.contains("kubernetes.io/hostname=klab-worker"),
            "{labels}"
        );
    }
    let describe = k.ok(33, &["describe", "node", "klab-worker"]);
    for needle in [
        "Conditions:",
        "KubeletReady",
        "Taints:             <none>",
        "Lease:",
        "HolderIdentity:  klab-worker",
        "Events:",
        "Starting kubelet.",
    ] {
        assert!(
            describe.contains(needle),
            "describe node lacks {needle:?}:\n{describe}"
        );
    }
    let describe = k.ok(33, &["describe", "pod", "bare"]);
    for needle in [
        "Status:           Running",
        "node.kubernetes.io/not-ready:NoExecute op=Exists for 300s",
        "Started",
    ] {
        assert!(
            describe.contains(needle),
            "describe pod lacks {needle:?}:\n{describe}"
        );
    }
    let events = k.ok(33, &["get", "events"]);
    assert!(
        events.starts_with("LAST SEEN   TYPE     REASON"),
        "{events}"
    );
}

#[test]
fn watch_prints_added_modified_deleted() {
    let k = Klab::start(&[]);
    let cm = |name: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"a":"1"}}}}"#
        )
    };
    k.kubectl_stdin(33, &["create", "-f", "-"], Some(&cm("w0")));
    let mut child = std::process::Command::new(crate::harness::kubectl_binary(33))
        .args([
            "--kubeconfig",
            k.kubeconfig.to_str().unwrap(),
            "--cache-dir",
            k.dir.path().join("cw").to_str().unwrap(),
        ])
        .args([
            "get",
            "configmaps",
            "-w",
            "--output-watch-events",
            "--request-timeout=60s",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for l in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    // Every namespace also holds the root CA ConfigMap (kube-root-ca.crt), as upstream's do.
    let next = |what: &str| loop {
        let l = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no line for {what}"));
        if !l.contains("kube-root-ca.crt") {
            break l;
        }
    };
    // The watch is established once the initial state (w0) is printed.
    assert!(next("header").starts_with("EVENT"));
    let w0 = next("w0");
    assert_eq!(
        w0.split_whitespace().take(2).collect::<Vec<_>>(),
        ["ADDED", "w0"],
        "{w0}"
    );
    k.kubectl_stdin(33, &["create", "-f", "-"], Some(&cm("w1")));
    k.ok(
        33,
        &[
            "patch",
            "configmap",
            "w1",
            "--type=merge",
            "-p",
            r#"{"data":{"a":"2"}}"#,
        ],
    );
    k.ok(33, &["delete", "configmap", "w1"]);
    let got: Vec<String> = (0..3).map(|_| next("w1 events")).collect();
    let _ = child.kill();
    let _ = child.wait();
    let kinds: Vec<(&str, &str)> = got
        .iter()
        .map(|l| {
            let mut w = l.split_whitespace();
            (w.next().unwrap_or(""), w.next().unwrap_or(""))
        })
        .collect();
    assert_eq!(
        kinds,
        vec![("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")],
        "{got:?}"
    );
}

#[test]
fn rollout_status_scale_and_strict_validation() {
    let k = Klab::start(&[]);
    let (_, _, deploy) = manifests("default");
    let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(&deploy));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = k.ok(
        33,
        &["rollout", "status", "deployment/web", "--timeout=60s"],
    );
    assert!(
        out.trim_end()
            .ends_with("deployment \"web\" successfully rolled out"),
        "{out}"
    );
    k.ok(33, &["scale", "deployment", "web", "--replicas=3"]);
    let out = k.ok(
        33,
        &["rollout", "status", "deployment/web", "--timeout=60s"],
    );
    assert!(
        out.trim_end()
            .ends_with("deployment \"web\" successfully rolled out"),
        "{out}"
    );
    let ready = k.ok(
        33,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
    );
    assert_eq!(ready, "3");
    // A manifest with a field the API does not know: kubectl's usual strict-validation error, and
    // nothing is stored.
    let bad = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: typo\ndatta:\n  a: b\n";
    let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(bad));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("strict decoding error: unknown field \"datta\""),
        "{err}"
    );
    let out = k.kubectl(33, &["get", "configmap", "typo"]);
    assert!(!out.status.success(), "nothing was stored");
    // Asked to warn instead, kubectl prints the server's warning and the field is dropped.
    let out = k.kubectl_stdin(33, &["apply", "--validate=warn", "-f", "-"], Some(bad));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("Warning: unknown field \"datta\""), "{err}");
    let stored: serde_json::Value =
        serde_json::from_str(&k.ok(33, &["get", "configmap", "typo", "-o", "json"])).unwrap();
    assert!(stored.get("datta").is_none(), "{stored}");
}
