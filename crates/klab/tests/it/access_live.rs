//! Access control on a live `klab up --authorization-mode Node,RBAC` over TLS with the real
//! kubectl 1.33: a kubelet's certificate (minted with `klab user add`) cannot touch another Node,
//! change its own taints or restricted labels, read secrets its pods do not use, read another
//! node's Lease or delete another node's pods; a user gets upstream's Forbidden texts until a
//! `view` binding lets them read, and never more.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::harness::{Klab, kubectl_binary};

fn as_user(k: &Klab, kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(kubectl_binary(33))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(k.dir.path().join("cache-user"))
        .args(args)
        .output()
        .expect("kubectl runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    )
}

fn add_user(k: &Klab, name: &str, group: Option<&str>) -> std::path::PathBuf {
    let data = k.dir.path().join("data");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_klab"));
    cmd.args(["user", "add", name, "--data-dir"]).arg(&data);
    if let Some(g) = group {
        cmd.args(["--group", g]);
    }
    let out = cmd.output().expect("klab runs");
    assert!(out.status.success(), "{out:?}");
    let path = String::from_utf8_lossy(&out.stdout)
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_string();
    path.into()
}

#[test]
fn node_and_user_identities_get_upstreams_answers() {
    let k = Klab::start(&[
        "--speed",
        "10",
        "--nodes",
        "2",
        "--authorization-mode",
        "Node,RBAC",
    ]);
    // Both Nodes, and klab-worker's Lease: a kubelet creates its Lease only after its Node, and
    // the node identity reads it below.
    k.wait_for(
        "both nodes and klab-worker's lease",
        Duration::from_secs(60),
        || {
            (k.kubectl(33, &["get", "node", "klab-worker2"])
                .status
                .success()
                && k.kubectl(
                    33,
                    &["get", "lease", "klab-worker", "-n", "kube-node-lease"],
                )
                .status
                .success())
            .then_some(())
        },
    );
    let node = add_user(&k, "system:node:klab-worker", Some("system:nodes"));
    let alice = add_user(&k, "alice", None);

    let cases: [(&[&str], &str); 7] = [
        (
            &["label", "node", "klab-worker2", "x=y"],
            "Error from server (Forbidden): nodes \"klab-worker2\" is forbidden: User \"system:node:klab-worker\" cannot get resource \"nodes\" in API group \"\" at the cluster scope: node 'klab-worker' cannot read 'klab-worker2', only its own Node object",
        ),
        (
            &["taint", "node", "klab-worker", "a=b:NoSchedule"],
            "Error from server (Forbidden): nodes \"klab-worker\" is forbidden: node \"klab-worker\" is not allowed to modify taints",
        ),
        (
            &[
                "label",
                "node",
                "klab-worker",
                "node-role.kubernetes.io/worker=",
            ],
            "Error from server (Forbidden): nodes \"klab-worker\" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/worker",
        ),
        (
            &["get", "secret", "x", "-n", "kube-system"],
            "Error from server (Forbidden): secrets \"x\" is forbidden: User \"system:node:klab-worker\" cannot get resource \"secrets\" in API group \"\" in the namespace \"kube-system\": no relationship found between node 'klab-worker' and this object",
        ),
        (
            &["get", "nodes"],
            "Error from server (Forbidden): nodes is forbidden: User \"system:node:klab-worker\" cannot list resource \"nodes\" in API group \"\" at the cluster scope: node 'klab-worker' cannot read all nodes, only its own Node object",
        ),
        (
            &["get", "lease", "klab-worker2", "-n", "kube-node-lease"],
            "Error from server (Forbidden): leases.coordination.k8s.io \"klab-worker2\" is forbidden: User \"system:node:klab-worker\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-node-lease\": can only access node lease with the same name as the requesting node",
        ),
        (
            &["delete", "lease", "klab-worker2", "-n", "kube-node-lease"],
            "Error from server (Forbidden): leases.coordination.k8s.io \"klab-worker2\" is forbidden: User \"system:node:klab-worker\" cannot delete resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-node-lease\": can only access node lease with the same name as the requesting node",
        ),
    ];
    for (args, want) in cases {
        let (ok, _, err) = as_user(&k, &node, args);
        assert!(!ok, "{args:?}");
        assert_eq!(err, want, "{args:?}");
    }
    // Its rules list is what RBAC grants everyone, marked incomplete as upstream's Node
    // authorizer marks it (it cannot enumerate what its graph allows).
    let (ok, out, err) = as_user(&k, &node, &["auth", "can-i", "--list"]);
    assert!(ok, "{err}");
    assert_eq!(
        err,
        "Warning: the list may be incomplete: node authorizer does not support user rule resolution"
    );
    assert!(
        out.contains("selfsubjectaccessreviews.authorization.k8s.io"),
        "{out}"
    );
    // Its own Node, Lease and harmless labels are fine.
    assert!(as_user(&k, &node, &["get", "node", "klab-worker"]).0);
    assert!(
        as_user(
            &k,
            &node,
            &["get", "lease", "klab-worker", "-n", "kube-node-lease"]
        )
        .0
    );
    let (ok, _, err) = as_user(&k, &node, &["label", "node", "klab-worker", "team=a"]);
    assert!(ok, "{err}");
    // A pod bound to the other node cannot be deleted by this one.
    k.ok(
        33,
        &[
            "run",
            "there",
            "--image=nginx",
            "--overrides",
            r#"{"spec":{"nodeName":"klab-worker2"}}"#,
        ],
    );
    let (ok, _, err) = as_user(&k, &node, &["delete", "pod", "there", "--wait=false"]);
    assert!(!ok);
    assert_eq!(
        err,
        "Error from server (Forbidden): pods \"there\" is forbidden: node \"klab-worker\" can only delete pods with spec.nodeName set to itself"
    );

    // A user: nothing until bound, then what `view` grants.
    let (ok, _, err) = as_user(&k, &alice, &["get", "pods"]);
    assert!(!ok);
    assert_eq!(
        err,
        "Error from server (Forbidden): pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
    );
    k.ok(
        33,
        &[
            "create",
            "rolebinding",
            "alice-view",
            "--clusterrole=view",
            "--user=alice",
        ],
    );
    let (ok, out, err) = as_user(&k, &alice, &["get", "pods", "-o", "name"]);
    assert!(ok, "{err}");
    assert_eq!(out, "pod/there\n");
    let (ok, _, err) = as_user(&k, &alice, &["delete", "pod", "there"]);
    assert!(!ok);
    assert_eq!(
        err,
        "Error from server (Forbidden): pods \"there\" is forbidden: User \"alice\" cannot delete resource \"pods\" in API group \"\" in the namespace \"default\""
    );
    let (ok, out, _) = as_user(&k, &alice, &["auth", "can-i", "get", "secrets"]);
    assert!(!ok);
    assert_eq!(out, "no\n");
    let (ok, out, _) = as_user(&k, &alice, &["auth", "can-i", "--list"]);
    assert!(ok);
    assert!(
        out.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
            == ["pods", "[]", "[]", "[get", "list", "watch]"]),
        "{out}"
    );
    // The admin may act as alice.
    assert_eq!(
        k.ok(33, &["auth", "can-i", "get", "pods", "--as=alice"]),
        "yes\n"
    );
}
