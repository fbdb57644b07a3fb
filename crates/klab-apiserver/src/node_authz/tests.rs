//! Table tests of the Node authorizer: the graph and every rule with its reason.

use serde_json::json;

use super::*;

fn graph() -> NodeGraph {
    let pods = vec![
        json!({"metadata": {"namespace": "d", "name": "web"}, "spec": {"nodeName": "n1", "serviceAccountName": "app",
            "imagePullSecrets": [{"name": "pull"}],
            "containers": [{"name": "c", "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}},
                {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}}],
                "envFrom": [{"secretRef": {"name": "from-secret"}}, {"configMapRef": {"name": "from-cm"}}]}],
            "initContainers": [{"name": "i", "envFrom": [{"configMapRef": {"name": "init-cm"}}]}],
            "volumes": [{"name": "s", "secret": {"secretName": "vol-secret"}}, {"name": "m", "configMap": {"name": "vol-cm"}},
                {"name": "api", "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}, {"secret": {"name": "proj-secret"}}]}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]}}),
        json!({"metadata": {"namespace": "d", "name": "other"}, "spec": {"nodeName": "n2",
            "volumes": [{"name": "s", "secret": {"secretName": "n2-secret"}}, {"name": "data", "persistentVolumeClaim": {"claimName": "n2-data"}}]}}),
        json!({"metadata": {"namespace": "d", "name": "pending"}, "spec": {"volumes": [{"name": "s", "secret": {"secretName": "pending-secret"}}]}}),
    ];
    let claims = vec![
        json!({"metadata": {"namespace": "d", "name": "data"}, "spec": {"volumeName": "pv-1"}}),
        json!({"metadata": {"namespace": "d", "name": "n2-data"}, "spec": {"volumeName": "pv-2"}}),
    ];
    let vas = vec![
        json!({"metadata": {"name": "csi-a"}, "spec": {"nodeName": "n1"}}),
        json!({"metadata": {"name": "csi-b"}, "spec": {"nodeName": "n2"}}),
    ];
    NodeGraph::build("n1", &pods, &claims, &vas)
}

#[test]
fn graph_follows_pod_references() {
    let g = graph();
    let nn = |n: &str| ("d".to_string(), n.to_string());
    let secrets: Vec<_> = g.secrets.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        secrets,
        [
            "env-secret",
            "from-secret",
            "proj-secret",
            "pull",
            "vol-secret"
        ]
    );
    let cms: Vec<_> = g.configmaps.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        cms,
        ["env-cm", "from-cm", "init-cm", "kube-root-ca.crt", "vol-cm"]
    );
    assert!(g.claims.contains(&nn("data")) && g.claims.contains(&nn("web-scratch")));
    assert!(!g.claims.contains(&nn("n2-data")));
    assert_eq!(g.volumes.iter().collect::<Vec<_>>(), ["pv-1"]);
    assert_eq!(g.attachments.iter().collect::<Vec<_>>(), ["csi-a"]);
    assert_eq!(g.service_accounts.iter().collect::<Vec<_>>(), [&nn("app")]);
    assert_eq!(g.pods.iter().collect::<Vec<_>>(), [&nn("web")]);
}

fn a(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
    let groups: Vec<String> = vec![NODES_GROUP.into(), "system:authenticated".into()];
    Attributes::resource(
        "system:node:n1",
        &groups,
        verb,
        (group, resource, sub),
        ns,
        name,
    )
}

fn node_rules() -> Vec<Rule> {
    vec![
        Rule {
            verbs: vec!["get".into(), "list".into(), "watch".into()],
            api_groups: vec!["".into()],
            resources: vec!["services".into()],
            ..Default::default()
        },
        Rule {
            verbs: vec!["create".into(), "patch".into(), "update".into()],
            api_groups: vec!["".into()],
            resources: vec!["events".into()],
            ..Default::default()
        },
    ]
}

#[test]
fn node_authorizer_table() {
    let g = graph();
    let none = "";
    let no_rel = "no relationship found between node 'n1' and this object";
    let mut watch_own = a("watch", "", "pods", "", "", "");
    watch_own.field_selector = "spec.nodeName=n1".into();
    let mut watch_other = a("watch", "", "pods", "", "", "");
    watch_other.field_selector = "spec.nodeName=n2".into();
    let cases: Vec<(&str, Attributes, bool, &str)> = vec![
        (
            "its pod's secret",
            a("get", "", "secrets", "", "d", "vol-secret"),
            true,
            none,
        ),
        (
            "a watch of one referenced secret",
            a("watch", "", "secrets", "", "d", "env-secret"),
            true,
            none,
        ),
        (
            "another node's secret",
            a("get", "", "secrets", "", "d", "n2-secret"),
            false,
            no_rel,
        ),
        (
            "an unscheduled pod's secret",
            a("get", "", "secrets", "", "d", "pending-secret"),
            false,
            no_rel,
        ),
        (
            "same name, other namespace",
            a("get", "", "secrets", "", "e", "vol-secret"),
            false,
            no_rel,
        ),
        (
            "all secrets",
            a("list", "", "secrets", "", "d", ""),
            false,
            "No Object name found",
        ),
        (
            "writing a secret",
            a("update", "", "secrets", "", "d", "vol-secret"),
            false,
            "can only read resources of this type",
        ),
        (
            "a secret's subresource",
            a("get", "", "secrets", "x", "d", "vol-secret"),
            false,
            "cannot read subresource",
        ),
        (
            "a secret across namespaces",
            a("list", "", "secrets", "", "", ""),
            false,
            "can only read namespaced object of this type",
        ),
        (
            "the projected root CA",
            a("get", "", "configmaps", "", "d", "kube-root-ca.crt"),
            true,
            none,
        ),
        (
            "its claim",
            a("get", "", "persistentvolumeclaims", "", "d", "data"),
            true,
            none,
        ),
        (
            "its ephemeral claim",
            a("get", "", "persistentvolumeclaims", "", "d", "web-scratch"),
            true,
            none,
        ),
        (
            "listing claims",
            a("list", "", "persistentvolumeclaims", "", "d", ""),
            false,
            "can only get individual resources of this type",
        ),
        (
            "its claim's status",
            a("patch", "", "persistentvolumeclaims", "status", "d", "data"),
            true,
            none,
        ),
        (
            "reading claim status",
            a("get", "", "persistentvolumeclaims", "status", "d", "data"),
            false,
            "can only get/update/patch this type",
        ),
        (
            "another node's claim",
            a("get", "", "persistentvolumeclaims", "", "d", "n2-data"),
            false,
            no_rel,
        ),
        (
            "its volume",
            a("get", "", "persistentvolumes", "", "", "pv-1"),
            true,
            none,
        ),
        (
            "another node's volume",
            a("get", "", "persistentvolumes", "", "", "pv-2"),
            false,
            no_rel,
        ),
        (
            "its attachment",
            a(
                "get",
                "storage.k8s.io",
                "volumeattachments",
                "",
                "",
                "csi-a",
            ),
            true,
            none,
        ),
        (
            "another attachment",
            a(
                "get",
                "storage.k8s.io",
                "volumeattachments",
                "",
                "",
                "csi-b",
            ),
            false,
            no_rel,
        ),
        (
            "its pods' account token",
            a("create", "", "serviceaccounts", "token", "d", "app"),
            true,
            none,
        ),
        (
            "another account's token",
            a("create", "", "serviceaccounts", "token", "d", "default"),
            false,
            no_rel,
        ),
        (
            "reading an account",
            a("get", "", "serviceaccounts", "", "d", "app"),
            false,
            "can only create tokens for individual service accounts",
        ),
        (
            "its lease",
            a(
                "update",
                "coordination.k8s.io",
                "leases",
                "",
                "kube-node-lease",
                "n1",
            ),
            true,
            none,
        ),
        (
            "creating a lease",
            a(
                "create",
                "coordination.k8s.io",
                "leases",
                "",
                "kube-node-lease",
                "",
            ),
            true,
            none,
        ),
        (
            "another node's lease",
            a(
                "update",
                "coordination.k8s.io",
                "leases",
                "",
                "kube-node-lease",
                "n2",
            ),
            false,
            "can only access node lease with the same name as the requesting node",
        ),
        (
            "a lease elsewhere",
            a(
                "get",
                "coordination.k8s.io",
                "leases",
                "",
                "kube-system",
                "n1",
            ),
            false,
            "can only access leases in the \"kube-node-lease\" system namespace",
        ),
        (
            "listing leases",
            a(
                "list",
                "coordination.k8s.io",
                "leases",
                "",
                "kube-node-lease",
                "",
            ),
            false,
            "can only get, create, update, patch, or delete a node lease",
        ),
        (
            "its CSINode",
            a("patch", "storage.k8s.io", "csinodes", "", "", "n1"),
            true,
            none,
        ),
        (
            "another CSINode",
            a("get", "storage.k8s.io", "csinodes", "", "", "n2"),
            false,
            "can only access CSINode with the same name as the requesting node",
        ),
        (
            "CSINode watch",
            a("watch", "storage.k8s.io", "csinodes", "", "", "n1"),
            false,
            "can only get, create, update, patch, or delete a CSINode",
        ),
        ("its Node", a("get", "", "nodes", "", "", "n1"), true, none),
        (
            "updating a Node (NodeRestriction decides whose)",
            a("update", "", "nodes", "", "", "n2"),
            true,
            none,
        ),
        (
            "a Node's status",
            a("patch", "", "nodes", "status", "", "n2"),
            true,
            none,
        ),
        (
            "reading another Node",
            a("get", "", "nodes", "", "", "n2"),
            false,
            "node 'n1' cannot read 'n2', only its own Node object",
        ),
        (
            "listing Nodes",
            a("list", "", "nodes", "", "", ""),
            false,
            "node 'n1' cannot read all nodes, only its own Node object",
        ),
        (
            "deleting a Node",
            a("delete", "", "nodes", "", "", "n1"),
            false,
            none,
        ),
        ("watching its pods", watch_own, true, none),
        (
            "watching another node's pods",
            watch_other,
            false,
            "can only list/watch pods with spec.nodeName field selector",
        ),
        ("its pod", a("get", "", "pods", "", "d", "web"), true, none),
        (
            "another node's pod",
            a("get", "", "pods", "", "d", "other"),
            false,
            no_rel,
        ),
        (
            "pod status (NodeRestriction decides whose)",
            a("patch", "", "pods", "status", "d", "other"),
            true,
            none,
        ),
        (
            "evicting",
            a("create", "", "pods", "eviction", "d", "web"),
            true,
            none,
        ),
        (
            "pod logs",
            a("get", "", "pods", "log", "d", "web"),
            false,
            none,
        ),
        (
            "services from the static rules",
            a("list", "", "services", "", "", ""),
            true,
            none,
        ),
        (
            "events from the static rules",
            a("create", "", "events", "", "d", ""),
            true,
            none,
        ),
        (
            "deployments: nothing",
            a("list", "apps", "deployments", "", "d", ""),
            false,
            none,
        ),
    ];
    for (what, attrs, allowed, reason) in cases {
        let d = authorize("n1", &attrs, &g, &node_rules());
        assert_eq!((d.allowed, d.reason.as_str()), (allowed, reason), "{what}");
        assert!(!d.denied, "{what}");
    }
    let d = authorize("", &a("get", "", "nodes", "", "", "n1"), &g, &node_rules());
    assert_eq!(d.reason, "unknown node for user \"system:node:n1\"");
}

#[test]
fn node_identities() {
    let nodes = vec![NODES_GROUP.to_string()];
    assert_eq!(node_identity("system:node:n1", &nodes), Some("n1".into()));
    assert_eq!(node_identity("kubelet", &nodes), Some(String::new()));
    assert_eq!(node_identity("system:node:n1", &[]), None);
}

/// The graph is built only for requests whose decision reads it.
#[test]
fn only_reads_that_follow_references_need_the_graph() {
    let needs = |verb: &str, group: &str, resource: &str, sub: &str, name: &str| {
        needs_graph(&a(verb, group, resource, sub, "default", name))
    };
    assert!(needs("get", "", "pods", "", "web"));
    assert!(needs("watch", "", "pods", "", "web"));
    assert!(!needs("patch", "", "pods", "status", "web"));
    assert!(!needs("create", "", "pods", "eviction", "web"));
    assert!(!needs("delete", "", "pods", "", "web"));
    assert!(!needs("watch", "", "pods", "", ""));
    assert!(needs("get", "", "secrets", "", "s"));
    assert!(needs(
        "get",
        "storage.k8s.io",
        "volumeattachments",
        "",
        "va"
    ));
    assert!(!needs("update", "coordination.k8s.io", "leases", "", "n1"));
    assert!(!needs("patch", "", "nodes", "status", "n1"));
}
