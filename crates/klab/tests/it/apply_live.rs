//! Server-side apply with the real kubectl 1.27, 1.30 and 1.33 against `klab up`:
//! `apply --server-side` of the README's manifests, managedFields shown by
//! `--show-managed-fields`, a conflict with the manager that scaled the Deployment and
//! `--force-conflicts`, and the upgrade from client-side apply.

use crate::harness::Klab;

const MANIFESTS: &str = include_str!("../../../../examples/seed-000.yaml");

fn deployment(ns: &str, replicas: u32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: nginx\n        image: {image}\n        ports:\n        - containerPort: 80\n"
    )
}

fn config_map(ns: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\ndata:\n  mode: {value}\n  level: info\n"
    )
}

/// Runs kubectl with stdin and returns (success, stdout, stderr).
fn run(k: &Klab, minor: u32, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let out = k.kubectl_stdin(minor, args, stdin);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim_end().to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn ok(k: &Klab, minor: u32, args: &[&str], stdin: Option<&str>) -> String {
    let (success, stdout, stderr) = run(k, minor, args, stdin);
    assert!(
        success,
        "kubectl 1.{minor} {args:?}\nstdout: {stdout}\nstderr: {stderr}"
    );
    stdout
}

fn server_side_apply(k: &Klab, minor: u32) {
    let ns = format!("ssa-{minor}");
    // The namespace itself is created by apply (cluster-scoped).
    let namespace = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n");
    let out = ok(
        k,
        minor,
        &["apply", "--server-side", "-f", "-"],
        Some(&namespace),
    );
    assert_eq!(out, format!("namespace/{ns} serverside-applied"));
    let nsf = ["-n", ns.as_str()];
    // The README's manifests, created by apply and applied again.
    for _ in 0..2 {
        let out = ok(
            k,
            minor,
            &["apply", "--server-side", "-n", &ns, "-f", "-"],
            Some(MANIFESTS),
        );
        assert_eq!(
            out,
            "deployment.apps/nginx-deployment serverside-applied\nstatefulset.apps/mysql serverside-applied",
            "kubectl 1.{minor}"
        );
    }
    let yaml = ok(
        k,
        minor,
        &[
            "get",
            "deployment",
            "nginx-deployment",
            "-o",
            "yaml",
            "--show-managed-fields",
            nsf[0],
            nsf[1],
        ],
        None,
    );
    assert!(yaml.contains("managedFields:"), "{yaml}");
    assert!(
        yaml.contains("manager: kubectl\n    operation: Apply"),
        "{yaml}"
    );
    assert!(yaml.contains("f:replicas: {}"), "{yaml}");
    assert!(yaml.contains("k:{\"name\":\"nginx\"}:"), "{yaml}");
    let hidden = ok(
        k,
        minor,
        &[
            "get",
            "deployment",
            "nginx-deployment",
            "-o",
            "yaml",
            nsf[0],
            nsf[1],
        ],
        None,
    );
    assert!(
        !hidden.contains("managedFields"),
        "kubectl hides them by default"
    );

    // A Deployment scaled by another manager: re-applying the old replicas conflicts.
    let web = deployment(&ns, 1, "nginx:1.27");
    ok(k, minor, &["apply", "--server-side", "-f", "-"], Some(&web));
    ok(
        k,
        minor,
        &["scale", "deployment", "web", "--replicas=3", nsf[0], nsf[1]],
        None,
    );
    let (success, _, stderr) = run(k, minor, &["apply", "--server-side", "-f", "-"], Some(&web));
    assert!(!success);
    // The scaler is named by its fieldManager (kubectl-scale) or, for kubectl versions that send
    // none, by its User-Agent (the binary's name, kubectl.1.<minor>).
    let named = [format!("kubectl.1.{minor}"), "kubectl-scale".to_string()]
        .iter()
        .any(|scaler| {
            stderr.contains(&format!(
                "error: Apply failed with 1 conflict: conflict with \"{scaler}\" with subresource \"scale\" using apps/v1: .spec.replicas\nPlease review the fields above--they currently have other managers."
            ))
        });
    assert!(named, "kubectl 1.{minor}: {stderr}");
    let replicas = ok(
        k,
        minor,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}",
            nsf[0],
            nsf[1],
        ],
        None,
    );
    assert_eq!(replicas, "3", "a refused apply changes nothing");
    let out = ok(
        k,
        minor,
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(&web),
    );
    assert_eq!(out, "deployment.apps/web serverside-applied");
    let replicas = ok(
        k,
        minor,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}",
            nsf[0],
            nsf[1],
        ],
        None,
    );
    assert_eq!(replicas, "1");
    // Dropping a field this applier alone set removes it.
    let no_ports = deployment(&ns, 1, "nginx:1.27")
        .replace("        ports:\n        - containerPort: 80\n", "");
    ok(
        k,
        minor,
        &["apply", "--server-side", "-f", "-"],
        Some(&no_ports),
    );
    let ports = ok(
        k,
        minor,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].ports}",
            nsf[0],
            nsf[1],
        ],
        None,
    );
    assert_eq!(ports, "", "kubectl 1.{minor}");

    // Client-side apply, then server-side: kubectl's upgrade path takes the fields over.
    let (_, stdout, _) = run(k, minor, &["apply", "-f", "-"], Some(&config_map(&ns, "a")));
    assert_eq!(stdout, "configmap/settings created");
    let out = ok(
        k,
        minor,
        &["apply", "--server-side", "-f", "-"],
        Some(&config_map(&ns, "b")),
    );
    assert_eq!(out, "configmap/settings serverside-applied");
    let yaml = ok(
        k,
        minor,
        &[
            "get",
            "configmap",
            "settings",
            "-o",
            "yaml",
            "--show-managed-fields",
            nsf[0],
            nsf[1],
        ],
        None,
    );
    assert!(yaml.contains("mode: b"), "{yaml}");
    assert!(
        yaml.contains("manager: kubectl\n    operation: Apply"),
        "kubectl 1.{minor}: {yaml}"
    );
    assert!(
        yaml.contains(r#"{"apiVersion":"v1","data":{"level":"info","mode":"b"}"#),
        "the last-applied annotation follows the server-side apply: {yaml}"
    );
    // And a client-side apply afterwards still works from the updated annotation.
    ok(k, minor, &["apply", "-f", "-"], Some(&config_map(&ns, "c")));
    let mode = ok(
        k,
        minor,
        &[
            "get",
            "configmap",
            "settings",
            "-o",
            "jsonpath={.data.mode}",
            nsf[0],
            nsf[1],
        ],
        None,
    );
    assert_eq!(mode, "c", "kubectl 1.{minor}");
}

#[test]
fn server_side_apply_with_kubectl_1_27_1_30_1_33() {
    let k = Klab::start(&[]);
    for minor in [27, 30, 33] {
        server_side_apply(&k, minor);
    }
}
