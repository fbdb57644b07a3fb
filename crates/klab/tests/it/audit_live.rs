//! The audit log and static tokens on a live `klab up` with the real kubectl 1.33:
//! `--audit-policy-file` + `--audit-log-path` record `kubectl taint` and `kubectl delete pod
//! --force` as audit.k8s.io/v1 Events with the admin's user (RequestReceived omitted by the
//! policy, the Request level carrying the request body), reads left out by a `None` rule, an
//! impersonated request with both users; `--token-auth-file` users authenticate with
//! `kubectl --token` and are authorized as themselves; a bad token file or policy refuses the
//! start with a clear error.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::harness::Klab;

const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    verbs: [get, list, watch]
  - level: None
    userGroups: ["system:nodes", "system:serviceaccounts"]
  - level: None
    users: ["system:kube-scheduler", "system:kube-controller-manager"]
  - level: Request
    resources:
      - group: ""
        resources: [nodes]
  - level: Metadata
"#;

const TOKENS: &str = "s3cret-alice,alice,1001,\"dev,ops\"\ns3cret-bob,bob,1002\n";

fn events(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON Event"))
        .collect()
}

#[test]
fn audit_log_and_static_tokens_with_kubectl_1_33() {
    let files = tempfile::tempdir().unwrap();
    let policy = files.path().join("policy.yaml");
    let tokens = files.path().join("tokens.csv");
    let log = files.path().join("audit.log");
    std::fs::write(&policy, POLICY).unwrap();
    std::fs::write(&tokens, TOKENS).unwrap();
    let k = Klab::start(&[
        "--speed",
        "30",
        "--authorization-mode",
        "Node,RBAC",
        "--audit-policy-file",
        policy.to_str().unwrap(),
        "--audit-log-path",
        log.to_str().unwrap(),
        "--token-auth-file",
        tokens.to_str().unwrap(),
    ]);
    let bound = Duration::from_secs(60);
    let node = k.wait_for("a node", bound, || {
        // `items[*]`, not `items[0]`: kubectl's jsonpath fails on an index into
        // the empty list it gets before the first node has registered.
        let names = k.ok(
            33,
            &["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"],
        );
        names.split_whitespace().next().map(str::to_string)
    });
    k.ok(33, &["taint", "nodes", &node, "audit=yes:NoSchedule"]);
    k.ok(33, &["run", "victim", "--image=nginx"]);
    k.ok(
        33,
        &["delete", "pod", "victim", "--grace-period=0", "--force"],
    );
    // Impersonation: the admin acting as alice, who may not create ConfigMaps.
    let out = k.kubectl(33, &["create", "configmap", "x", "--as", "alice"]);
    assert!(!out.status.success(), "{out:?}");

    let all = events(&log);
    assert!(!all.is_empty(), "no audit events in {}", log.display());
    for e in &all {
        assert_eq!(e["apiVersion"], "audit.k8s.io/v1", "{e}");
        assert_eq!(e["kind"], "Event", "{e}");
        assert_eq!(
            e["stage"], "ResponseComplete",
            "RequestReceived is omitted: {e}"
        );
        assert!(
            !["get", "list", "watch"].contains(&e["verb"].as_str().unwrap()),
            "{e}"
        );
        assert!(e["auditID"].as_str().is_some_and(|s| s.len() == 36), "{e}");
        assert!(
            e["requestReceivedTimestamp"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z')),
            "{e}"
        );
        let user = e["user"]["username"].as_str().unwrap();
        assert!(
            !user.starts_with("system:node:") && !user.starts_with("system:serviceaccount:"),
            "filtered by the policy: {e}"
        );
    }
    let taint = all
        .iter()
        .find(|e| e["verb"] == "patch" && e["objectRef"]["resource"] == "nodes")
        .unwrap_or_else(|| panic!("the taint is audited: {all:#?}"));
    assert_eq!(taint["level"], "Request");
    assert_eq!(taint["user"]["username"], "kubernetes-admin");
    assert_eq!(
        taint["user"]["groups"],
        serde_json::json!(["system:masters", "system:authenticated"])
    );
    assert_eq!(taint["objectRef"]["name"], node.as_str());
    assert_eq!(taint["objectRef"]["apiVersion"], "v1");
    assert_eq!(taint["responseStatus"]["code"], 200);
    assert_eq!(taint["sourceIPs"], serde_json::json!(["127.0.0.1"]));
    assert!(
        taint["userAgent"]
            .as_str()
            .is_some_and(|u| u.starts_with("kubectl")),
        "{taint}"
    );
    assert!(
        taint["requestObject"].to_string().contains("audit"),
        "the Request level keeps the body: {taint}"
    );
    assert!(taint.get("responseObject").is_none(), "{taint}");
    let delete = all
        .iter()
        .find(|e| {
            e["verb"] == "delete"
                && e["objectRef"]["resource"] == "pods"
                && e["objectRef"]["name"] == "victim"
        })
        .unwrap_or_else(|| panic!("the forced delete is audited: {all:#?}"));
    assert_eq!(delete["level"], "Metadata");
    assert_eq!(delete["user"]["username"], "kubernetes-admin");
    assert_eq!(delete["objectRef"]["namespace"], "default");
    assert!(delete.get("requestObject").is_none(), "{delete}");
    let imp = all
        .iter()
        .find(|e| e["impersonatedUser"]["username"] == "alice")
        .unwrap_or_else(|| panic!("the impersonated create is audited: {all:#?}"));
    assert_eq!(imp["user"]["username"], "kubernetes-admin");
    assert_eq!(imp["verb"], "create");
    assert_eq!(imp["responseStatus"]["code"], 403);
    assert_eq!(imp["responseStatus"]["reason"], "Forbidden");
    assert_eq!(
        imp["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );

    // Static tokens: alice (groups dev, ops) and bob authenticate; under Node,RBAC they are
    // refused until bound, then allowed; a wrong token is 401.
    let out = k.kubectl_with_token(
        "s3cret-alice",
        &["auth", "whoami", "-o", "jsonpath={.status.userInfo}"],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        r#"{"groups":["dev","ops","system:authenticated"],"username":"alice"}"#,
        "{out:?}"
    );
    let out = k.kubectl_with_token("s3cret-bob", &["get", "pods"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "Error from server (Forbidden): pods is forbidden: User \"bob\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
    );
    k.ok(
        33,
        &[
            "create",
            "rolebinding",
            "bob-view",
            "--clusterrole=view",
            "--user=bob",
        ],
    );
    let out = k.kubectl_with_token("s3cret-bob", &["get", "pods"]);
    assert!(out.status.success(), "{out:?}");
    let out = k.kubectl_with_token("s3cret-carol", &["get", "pods"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: You must be logged in to the server (Unauthorized)"
    );
    // The token user's own writes are audited under its name.
    let out = k.kubectl_with_token("s3cret-bob", &["create", "configmap", "y"]);
    assert!(!out.status.success(), "view does not create: {out:?}");
    let bob = events(&log)
        .into_iter()
        .find(|e| e["user"]["username"] == "bob")
        .expect("bob's create is audited");
    assert_eq!(bob["responseStatus"]["code"], 403, "{bob}");
    k.assert_no_component_denials();
}

#[test]
fn bad_token_files_and_policies_refuse_the_start() {
    let files = tempfile::tempdir().unwrap();
    let tokens = files.path().join("tokens.csv");
    std::fs::write(&tokens, "good,alice,1\nshort,bob\n").unwrap();
    let policy = files.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Loud}]\n",
    )
    .unwrap();
    let data = files.path().join("data");
    for (args, want) in [
        (
            vec!["--token-auth-file", tokens.to_str().unwrap()],
            format!(
                "--token-auth-file: token file '{}' must have at least 3 columns (token, user name, user uid), found 2",
                tokens.display()
            ),
        ),
        (
            vec![
                "--audit-policy-file",
                policy.to_str().unwrap(),
                "--audit-log-path",
                "/dev/null",
            ],
            format!("--audit-policy-file {}: ", policy.display()),
        ),
        (
            vec!["--audit-policy-file", policy.to_str().unwrap()],
            "--audit-policy-file needs --audit-log-path".to_string(),
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_klab"))
            .args(["up", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&want), "{args:?}: {err}");
    }
}
