//! Joining and widening access on a live `klab up` under its default `Node,RBAC`, with the real
//! kubectl 1.33: a bootstrap token (a `bootstrap.kubernetes.io/token` Secret in kube-system)
//! authenticates as `system:bootstrap:<id>`, may create a CertificateSigningRequest once bound to
//! `system:node-bootstrapper` as kubeadm binds it, and nothing else; wrong, expired and unmarked
//! tokens are 401. An `aggregate-to-view` ClusterRole widens `view`, `edit` and `admin`, and a
//! `view` user's access review then allows it.

use std::process::Command;
use std::time::Duration;

use crate::harness::{Klab, kubectl_binary};

/// Runs kubectl 1.33 with only a bearer token: (success, stdout, trimmed stderr).
fn with_token(k: &Klab, token: &str, args: &[&str]) -> (bool, String, String) {
    let out = k.kubectl_with_token(token, args);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    )
}

fn token_secret(id: &str, secret: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1
kind: Secret
metadata:
  name: bootstrap-token-{id}
  namespace: kube-system
type: bootstrap.kubernetes.io/token
stringData:
  token-id: {id}
  token-secret: {secret}
{extra}"
    )
}

/// A PKCS#10 request for a kubelet client certificate, as the kubelet's TLS bootstrap sends it.
fn csr_manifest(name: &str) -> String {
    use base64::Engine as _;
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "system:node:joiner");
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "system:nodes");
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    format!(
        "apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: {name}
spec:
  request: {}
  signerName: kubernetes.io/kube-apiserver-client-kubelet
  usages: [digital signature, client auth]
  username: system:admin
",
        base64::engine::general_purpose::STANDARD.encode(pem)
    )
}

fn apply(k: &Klab, manifest: &str) {
    let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(manifest));
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_bootstrap_token_may_ask_for_a_certificate_and_nothing_else() {
    let k = Klab::start(&["--speed", "10"]);
    let token = "abcdef.0123456789abcdef";
    apply(
        &k,
        &token_secret(
            "abcdef",
            "0123456789abcdef",
            "  usage-bootstrap-authentication: \"true\"\n  auth-extra-groups: system:bootstrappers:kubeadm:default-node-token\n",
        ),
    );
    let (ok, out, err) = with_token(&k, token, &["auth", "whoami"]);
    assert!(ok, "{err}");
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>().join(" "),
        "ATTRIBUTE VALUE Username system:bootstrap:abcdef Groups [system:bootstrappers system:bootstrappers:kubeadm:default-node-token system:authenticated]"
    );

    // Nothing is granted until kubeadm's binding exists.
    let create = |name: &str| {
        let server = k.ok(
            33,
            &[
                "config",
                "view",
                "-o",
                "jsonpath={.clusters[0].cluster.server}",
            ],
        );
        let mut child = Command::new(kubectl_binary(33))
            .args([
                "--kubeconfig=/dev/null",
                "--server",
                &server,
                "--insecure-skip-tls-verify",
                "--token",
                token,
                "create",
                "-f",
                "-",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(csr_manifest(name).as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        )
    };
    let (ok, _, err) = create("node-csr-early");
    assert!(!ok);
    assert_eq!(
        err,
        "Error from server (Forbidden): error when creating \"STDIN\": certificatesigningrequests.certificates.k8s.io is forbidden: User \"system:bootstrap:abcdef\" cannot create resource \"certificatesigningrequests\" in API group \"certificates.k8s.io\" at the cluster scope"
    );
    k.ok(
        33,
        &[
            "create",
            "clusterrolebinding",
            "kubeadm:kubelet-bootstrap",
            "--clusterrole=system:node-bootstrapper",
            "--group=system:bootstrappers:kubeadm:default-node-token",
        ],
    );
    let (ok, out, err) = create("node-csr-abc");
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "certificatesigningrequest.certificates.k8s.io/node-csr-abc created\n"
    );
    // The requester is who sent it, not what the body claimed; nobody approves it yet.
    let table = k.ok(33, &["get", "csr"]);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "NAME",
            "AGE",
            "SIGNERNAME",
            "REQUESTOR",
            "REQUESTEDDURATION",
            "CONDITION"
        ],
        "{table}"
    );
    assert_eq!(rows.len(), 2, "{table}");
    assert_eq!(rows[1][0], "node-csr-abc");
    assert_eq!(
        rows[1][2..],
        [
            "kubernetes.io/kube-apiserver-client-kubelet",
            "system:bootstrap:abcdef",
            "<none>",
            "Pending"
        ]
    );
    assert_eq!(
        k.ok(
            33,
            &[
                "get",
                "csr",
                "node-csr-abc",
                "-o",
                "jsonpath={.spec.groups}"
            ]
        ),
        r#"["system:bootstrappers","system:bootstrappers:kubeadm:default-node-token","system:authenticated"]"#
    );
    // It may read its requests back (to watch for the certificate) ...
    let (ok, out, err) = with_token(&k, token, &["get", "csr", "-o", "name"]);
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "certificatesigningrequest.certificates.k8s.io/node-csr-abc\n"
    );
    // ... and nothing else.
    let refused: [(&[&str], &str); 4] = [
        (
            &["get", "nodes"],
            "Error from server (Forbidden): nodes is forbidden: User \"system:bootstrap:abcdef\" cannot list resource \"nodes\" in API group \"\" at the cluster scope",
        ),
        (
            &["get", "secrets", "-n", "kube-system"],
            "Error from server (Forbidden): secrets is forbidden: User \"system:bootstrap:abcdef\" cannot list resource \"secrets\" in API group \"\" in the namespace \"kube-system\"",
        ),
        (
            &["delete", "csr", "node-csr-abc"],
            "Error from server (Forbidden): certificatesigningrequests.certificates.k8s.io \"node-csr-abc\" is forbidden: User \"system:bootstrap:abcdef\" cannot delete resource \"certificatesigningrequests\" in API group \"certificates.k8s.io\" at the cluster scope",
        ),
        (
            &["create", "namespace", "mine"],
            "Error from server (Forbidden): namespaces is forbidden: User \"system:bootstrap:abcdef\" cannot create resource \"namespaces\" in API group \"\" at the cluster scope",
        ),
    ];
    for (args, want) in refused {
        let (ok, _, err) = with_token(&k, token, args);
        assert!(!ok, "{args:?}");
        assert_eq!(err, want, "{args:?}");
    }
    let (_, out, _) = with_token(&k, token, &["auth", "can-i", "create", "csr"]);
    assert_eq!(out, "yes\n");
    let (_, out, _) = with_token(&k, token, &["auth", "can-i", "create", "pods"]);
    assert_eq!(out, "no\n");
    // Its whole list: the role's CSR rule, what every authenticated user gets, nothing more.
    let (ok, list, err) = with_token(&k, token, &["auth", "can-i", "--list"]);
    assert!(ok, "{err}");
    let resources: Vec<&str> = list
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .filter(|r| !r.starts_with('['))
        .collect();
    assert_eq!(
        resources,
        [
            "certificatesigningrequests.certificates.k8s.io",
            "selfsubjectreviews.authentication.k8s.io",
            "selfsubjectaccessreviews.authorization.k8s.io",
            "selfsubjectrulesreviews.authorization.k8s.io"
        ],
        "{list}"
    );
    assert!(
        list.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == [
                    "certificatesigningrequests.certificates.k8s.io",
                    "[]",
                    "[]",
                    "[create",
                    "get",
                    "list",
                    "watch]"
                ]),
        "{list}"
    );

    // Tokens that are not good: all 401, as upstream answers them.
    apply(
        &k,
        &token_secret(
            "expire",
            "0123456789abcdef",
            "  usage-bootstrap-authentication: \"true\"\n  expiration: \"2001-01-01T00:00:00Z\"\n",
        ),
    );
    apply(&k, &token_secret("nouse1", "0123456789abcdef", ""));
    for bad in [
        "abcdef.0123456789abcdee",
        "expire.0123456789abcdef",
        "nouse1.0123456789abcdef",
        "zzzzzz.0123456789abcdef",
        "abcdef.0123456789ABCDEF",
        "abcdef",
    ] {
        let (ok, _, err) = with_token(&k, bad, &["get", "csr"]);
        assert!(!ok, "{bad}");
        assert_eq!(
            err, "error: You must be logged in to the server (Unauthorized)",
            "{bad}"
        );
    }
    // Deleting the Secret revokes the token.
    k.ok(
        33,
        &[
            "delete",
            "secret",
            "bootstrap-token-abcdef",
            "-n",
            "kube-system",
        ],
    );
    let (ok, _, err) = with_token(&k, token, &["get", "csr"]);
    assert!(!ok);
    assert_eq!(
        err,
        "error: You must be logged in to the server (Unauthorized)"
    );
}

#[test]
fn an_aggregated_cluster_role_widens_view_for_its_users() {
    let k = Klab::start(&["--speed", "10"]);
    let data = k.dir.path().join("data");
    let out = Command::new(env!("CARGO_BIN_EXE_klab"))
        .args(["user", "add", "viewer", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // It prints where it wrote the kubeconfig, last.
    let viewer = std::path::PathBuf::from(
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .rsplit(' ')
            .next()
            .unwrap(),
    );
    assert!(viewer.exists(), "{out:?}");
    let as_viewer = |args: &[&str]| {
        let out = Command::new(kubectl_binary(33))
            .arg("--kubeconfig")
            .arg(&viewer)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // kubectl auth can-i cannot map a resource the server does not serve (it would ask for
    // resource "widgets.example.com" in the core group), so the viewer sends the
    // SelfSubjectAccessReview it would send for a served one.
    let can_i = |verb: &str| {
        let path = k.dir.path().join(format!("ssar-{verb}.yaml"));
        std::fs::write(
            &path,
            format!(
                "apiVersion: authorization.k8s.io/v1
kind: SelfSubjectAccessReview
spec:
  resourceAttributes: {{group: example.com, resource: widgets, verb: {verb}, namespace: default}}
"
            ),
        )
        .unwrap();
        as_viewer(&[
            "create",
            "-f",
            path.to_str().unwrap(),
            "-o",
            "jsonpath={.status.allowed}",
        ])
    };
    k.ok(
        33,
        &[
            "create",
            "clusterrolebinding",
            "viewer-view",
            "--clusterrole=view",
            "--user=viewer",
        ],
    );
    assert_eq!(can_i("list"), "false");
    apply(
        &k,
        "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widgets-view
  labels:
    rbac.authorization.k8s.io/aggregate-to-view: \"true\"
rules:
- apiGroups: [example.com]
  resources: [widgets]
  verbs: [get, list, watch]
",
    );
    let has_rule = |role: &str| {
        let yaml = k.ok(33, &["get", "clusterrole", role, "-o", "yaml"]);
        yaml.contains(
            "  - example.com\n  resources:\n  - widgets\n  verbs:\n  - get\n  - list\n  - watch\n",
        )
        .then_some(yaml)
    };
    let yaml = k.wait_for("view gains the rule", Duration::from_secs(30), || {
        has_rule("view")
    });
    assert!(yaml.contains("aggregationRule:"), "{yaml}");
    // view aggregates into edit, and edit into admin.
    k.wait_for("edit and admin gain it", Duration::from_secs(30), || {
        has_rule("edit").and(has_rule("admin"))
    });
    assert_eq!(can_i("list"), "true");
    assert_eq!(can_i("delete"), "false");
    // kubectl auth can-i --list shows it among what view grants.
    let list = as_viewer(&["auth", "can-i", "--list"]);
    assert!(
        list.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["widgets.example.com", "[]", "[]", "[get", "list", "watch]"]),
        "{list}"
    );
    // Removing the label takes the rule away again.
    k.ok(
        33,
        &[
            "label",
            "clusterrole",
            "widgets-view",
            "rbac.authorization.k8s.io/aggregate-to-view-",
        ],
    );
    k.wait_for("view loses the rule", Duration::from_secs(30), || {
        has_rule("view").is_none().then_some(())
    });
    assert_eq!(can_i("list"), "false");
}
