//! kubectl against a real `klab up`: version, discovery, get, TLS identities.

use crate::harness::Klab;

#[test]
fn version_and_namespaces_with_three_kubectl_versions() {
    let k = Klab::start(&[]);
    for minor in [27, 30, 33] {
        let v = k.ok(minor, &["version", "-o", "json"]);
        let v: serde_json::Value = serde_json::from_str(&v).unwrap();
        assert_eq!(
            v["serverVersion"]["gitVersion"], "v1.33.1",
            "kubectl 1.{minor}"
        );
        let ns = k.ok(minor, &["get", "namespaces"]);
        let names: Vec<&str> = ns
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(
            names,
            vec!["default", "kube-node-lease", "kube-public", "kube-system"],
            "kubectl 1.{minor}:\n{ns}"
        );
        assert!(ns.starts_with("NAME"), "{ns}");
        assert!(ns.lines().nth(1).unwrap().contains("Active"), "{ns}");
    }
}

#[test]
fn unauthenticated_and_wrong_certificate_are_refused() {
    let k = Klab::start(&[]);
    // A kubeconfig with the right CA but no client certificate.
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&k.kubeconfig).unwrap()).unwrap();
    let mut anon = cfg.clone();
    anon["users"][0]["user"] = serde_json::json!({"token": "not-a-valid-token"});
    let path = k.dir.path().join("anon.kubeconfig");
    std::fs::write(&path, serde_json::to_string(&anon).unwrap()).unwrap();
    let out = std::process::Command::new(crate::harness::kubectl_binary(33))
        .args([
            "--kubeconfig",
            path.to_str().unwrap(),
            "--cache-dir",
            k.dir.path().join("c-anon").to_str().unwrap(),
            "get",
            "pods",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Unauthorized") || err.contains("You must be logged in"),
        "{err}"
    );
    // A client certificate from another cluster's CA.
    let other = Klab::start(&[]);
    let foreign: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&other.kubeconfig).unwrap()).unwrap();
    let mut mixed = cfg;
    mixed["users"][0]["user"] = foreign["users"][0]["user"].clone();
    let path = k.dir.path().join("mixed.kubeconfig");
    std::fs::write(&path, serde_json::to_string(&mixed).unwrap()).unwrap();
    let out = std::process::Command::new(crate::harness::kubectl_binary(33))
        .args([
            "--kubeconfig",
            path.to_str().unwrap(),
            "--cache-dir",
            k.dir.path().join("c-mixed").to_str().unwrap(),
            "get",
            "pods",
        ])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "a certificate from another CA must not be accepted"
    );
}
