//! The scenario language's node faults on a live `klab up --speed 20`, with the real kubectl
//! 1.33: `klab node condition` (describe node shows the condition, the node lifecycle controller
//! taints as upstream, `clear-condition` lifts both), `klab node image-pull-fail` (kubectl get pods
//! shows ErrImagePull, then ImagePullBackOff; healed, the pod runs), `klab node reboot --cpu
//! --memory` (the Node's capacity follows), and bad input refused with nothing changed.

use std::process::Command;
use std::time::Duration;

use crate::harness::Klab;

fn taints(k: &Klab, node: &str) -> String {
    k.ok(
        33,
        &[
            "get",
            "node",
            node,
            "-o",
            "jsonpath={range .spec.taints[*]}{.key}:{.effect} {end}",
        ],
    )
}

#[test]
fn node_condition_image_pull_failure_and_resized_reboot_on_a_live_cluster() {
    let k = Klab::start(&["--speed", "20", "--nodes", "2"]);
    let bound = Duration::from_secs(90);
    k.wait_for("two nodes Ready", bound, || {
        let out = k.ok(33, &["get", "nodes", "--no-headers"]);
        (out.lines().filter(|l| l.contains(" Ready ")).count() == 2).then_some(())
    });
    let nodes = k.ok(
        33,
        &["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"],
    );
    let names: Vec<&str> = nodes.split_whitespace().collect();
    let (n1, n2) = (names[0], names[1]);

    // Bad input: refused with a Status, nothing changed.
    let unknown = k.klab_fails(&[
        "node",
        "condition",
        "n9",
        "--type",
        "Ready",
        "--status",
        "False",
    ]);
    assert!(unknown.contains("nodes \"n9\" not found"), "{unknown}");
    let bad_status = k.klab_fails(&[
        "node",
        "condition",
        n1,
        "--type",
        "Ready",
        "--status",
        "Maybe",
    ]);
    assert!(
        bad_status.contains("the status must be True, False or Unknown"),
        "{bad_status}"
    );
    let bad_type = k.klab_fails(&[
        "node",
        "condition",
        n1,
        "--type",
        "not-a-type",
        "--status",
        "True",
    ]);
    assert!(
        bad_type.contains("a condition type is letters and digits"),
        "{bad_type}"
    );
    let no_status = k.klab_fails(&["node", "condition", n1, "--type", "Ready"]);
    assert!(no_status.contains("needs --status"), "{no_status}");
    let bad_label = k.klab_fails(&["node", "reboot", n2, "--label", "a b=c"]);
    assert!(bad_label.contains("invalid label"), "{bad_label}");
    let bad_cpu = k.klab_fails(&["node", "reboot", n2, "--cpu", "lots"]);
    assert!(bad_cpu.contains("bad cpu quantity"), "{bad_cpu}");
    let no_image = k.klab_fails(&["node", "image-pull-fail", n2]);
    assert!(
        no_image.contains("usage: `klab node image-pull-fail NAME IMAGE`"),
        "{no_image}"
    );
    let node = k.ok(33, &["get", "node", n1, "--no-headers"]);
    assert!(node.contains(" Ready "), "{node}");
    assert_eq!(taints(&k, n1), "");

    // The kubelet alive, reporting Ready=False: the condition as given, and the not-ready
    // taints the node lifecycle controller sets for it.
    let out = k.klab(&[
        "node",
        "condition",
        n1,
        "--type",
        "Ready",
        "--status",
        "False",
        "--reason",
        "KubeletNotReady",
        "--message",
        "container runtime is down",
    ]);
    assert!(
        out.starts_with(&format!("node/{n1}: the kubelet reports Ready=False")),
        "{out}"
    );
    k.wait_for("describe node shows the condition", bound, || {
        let d = k.ok(33, &["describe", "node", n1]);
        d.lines()
            .any(|l| {
                let cells: Vec<&str> = l.split_whitespace().collect();
                cells.first() == Some(&"Ready")
                    && cells.get(1) == Some(&"False")
                    && l.contains("KubeletNotReady")
                    && l.ends_with("container runtime is down")
            })
            .then_some(())
    });
    k.wait_for("the not-ready taints", bound, || {
        let t = taints(&k, n1);
        (t.contains("node.kubernetes.io/not-ready:NoSchedule")
            && t.contains("node.kubernetes.io/not-ready:NoExecute"))
        .then_some(())
    });
    let d = k.ok(33, &["describe", "node", n1]);
    assert!(
        d.lines()
            .any(|l| l.starts_with("Taints:")
                && l.contains("node.kubernetes.io/not-ready:NoExecute")),
        "{d}"
    );
    assert_eq!(
        k.klab(&["node", "clear-condition", n1, "--type", "Ready"]),
        format!(
            "node/{n1}: the kubelet's own Ready condition again (power on, kubelet running, network connected)\n"
        )
    );
    k.wait_for("Ready again, untainted", bound, || {
        let node = k.ok(33, &["get", "node", n1, "--no-headers"]);
        (node.contains(" Ready ") && taints(&k, n1).is_empty()).then_some(())
    });

    // Pulls of one image fail on n2: the pod pinned there shows ErrImagePull, then
    // ImagePullBackOff; healed, it runs.
    let image = "registry.example.com/team/app:v2";
    assert_eq!(
        k.klab(&["node", "image-pull-fail", n2, image]),
        format!("node/{n2}: pulls of {image:?} fail\n")
    );
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: puller}}\nspec:\n  nodeName: {n2}\n  containers: [{{name: c, image: \"{image}\"}}]\n"
    );
    let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(&pod));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = |k: &Klab| {
        let out = k.ok(33, &["get", "pods", "puller", "--no-headers"]);
        out.split_whitespace()
            .nth(2)
            .unwrap_or_default()
            .to_string()
    };
    k.wait_for("ErrImagePull", bound, || {
        (status(&k) == "ErrImagePull").then_some(())
    });
    k.wait_for("ImagePullBackOff", bound, || {
        (status(&k) == "ImagePullBackOff").then_some(())
    });
    let events = k.ok(
        33,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=puller",
        ],
    );
    assert!(
        events.contains(&format!(
            "Failed to pull image \"{image}\": rpc error: code = NotFound"
        )),
        "{events}"
    );
    assert_eq!(
        k.klab(&["node", "image-pull-heal", "--all", image]),
        format!("every node: pulls of {image:?} work again\n")
    );
    k.wait_for("the pod runs once healed", bound, || {
        (status(&k) == "Running").then_some(())
    });

    // A reboot into a bigger machine: the re-registering kubelet patches the capacity.
    let out = k.klab(&["node", "reboot", n2, "--cpu", "8", "--memory", "16Gi"]);
    assert!(out.starts_with(&format!("node/{n2}: reboot done")), "{out}");
    k.wait_for("the new capacity", bound, || {
        let c = k.ok(
            33,
            &[
                "get",
                "node",
                n2,
                "-o",
                "jsonpath={.status.capacity.cpu}/{.status.capacity.memory}",
            ],
        );
        (c == "8/16Gi").then_some(())
    });
    k.assert_no_component_denials();
}

/// `klab component stop kube-apiserver` on a live cluster closes its port as a stopped
/// kube-apiserver's: kubectl's connection is refused and an open `kubectl get -w` ends; `klab
/// component list` and `start` still reach the cluster (over the data directory's admin
/// socket), and once started the same store is served on the same address.
#[test]
#[allow(clippy::disallowed_methods)] // the watch's exit is awaited on the wall clock
fn a_stopped_api_server_refuses_connections_and_comes_back_with_its_store() {
    let k = Klab::start(&["--speed", "20", "--nodes", "1"]);
    let bound = Duration::from_secs(90);
    k.wait_for("the node Ready", bound, || {
        let out = k.ok(33, &["get", "nodes", "--no-headers"]);
        out.contains(" Ready ").then_some(())
    });
    k.ok(33, &["create", "configmap", "kept", "--from-literal=a=b"]);
    let mut watch = Command::new(crate::harness::kubectl_binary(33))
        .arg("--kubeconfig")
        .arg(&k.kubeconfig)
        .args(["get", "configmaps", "-w"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn kubectl get -w");
    std::thread::sleep(Duration::from_millis(500));
    assert!(watch.try_wait().unwrap().is_none(), "the watch runs");

    assert_eq!(
        k.klab(&["component", "stop", "kube-apiserver"]),
        "component/kube-apiserver: stopped\n"
    );
    let refused = k.kubectl(33, &["get", "nodes"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("was refused - did you specify the right host or port?"),
        "{err}"
    );
    let start = std::time::Instant::now();
    while watch.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "kubectl get -w still runs"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let list = k.klab(&["component", "list"]);
    let line = list
        .lines()
        .find(|l| l.starts_with("kube-apiserver "))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(line.contains(" stopped "), "{line}");
    let again = k.klab_fails(&["component", "stop", "kube-apiserver"]);
    assert!(
        again.contains("component kube-apiserver is already stopped"),
        "{again}"
    );

    assert_eq!(
        k.klab(&["component", "start", "kube-apiserver"]),
        "component/kube-apiserver: started\n"
    );
    k.wait_for("the API served again", bound, || {
        k.kubectl(33, &["get", "configmap", "kept"])
            .status
            .success()
            .then_some(())
    });
    let data = k.ok(
        33,
        &["get", "configmap", "kept", "-o", "jsonpath={.data.a}"],
    );
    assert_eq!(data, "b");
    k.wait_for("the node Ready", bound, || {
        let out = k.ok(33, &["get", "nodes", "--no-headers"]);
        out.contains(" Ready ").then_some(())
    });
    k.assert_no_component_denials();
}
