//! Table tests of the RBAC evaluator, the escalation check, validation and aggregation.

use serde_json::json;

use super::*;

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Rule {
    let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
    Rule {
        verbs: v(verbs),
        api_groups: v(groups),
        resources: v(resources),
        resource_names: v(names),
        non_resource_urls: vec![],
    }
}

fn url_rule(verbs: &[&str], urls: &[&str]) -> Rule {
    Rule {
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        non_resource_urls: urls.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn res(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
    let groups: Vec<String> = vec!["dev".into(), "system:authenticated".into()];
    Attributes::resource("alice", &groups, verb, (group, resource, sub), ns, name)
}

fn path(verb: &str, p: &str) -> Attributes {
    Attributes {
        user: "alice".into(),
        verb: verb.into(),
        path: p.into(),
        ..Default::default()
    }
}

#[test]
fn rule_allows_table() {
    let pods_read = rule(&["get", "list"], &[""], &["pods"], &[]);
    let star_scale = rule(&["update"], &["apps"], &["*/scale"], &[]);
    let named = rule(&["get"], &[""], &["configmaps"], &["app-config"]);
    let all = rule(&["*"], &["*"], &["*"], &[]);
    let urls = url_rule(&["get"], &["/healthz", "/api/*"]);
    let cases: Vec<(&str, &Rule, Attributes, bool)> = vec![
        (
            "verb and resource",
            &pods_read,
            res("list", "", "pods", "", "d", ""),
            true,
        ),
        (
            "other verb",
            &pods_read,
            res("delete", "", "pods", "", "d", "x"),
            false,
        ),
        (
            "other group",
            &pods_read,
            res("get", "apps", "pods", "", "d", "x"),
            false,
        ),
        (
            "subresource needs its own entry",
            &pods_read,
            res("get", "", "pods", "log", "d", "x"),
            false,
        ),
        (
            "*/scale matches any scale",
            &star_scale,
            res("update", "apps", "deployments", "scale", "d", "w"),
            true,
        ),
        (
            "*/scale does not match the parent",
            &star_scale,
            res("update", "apps", "deployments", "", "d", "w"),
            false,
        ),
        (
            "named rule, right name",
            &named,
            res("get", "", "configmaps", "", "d", "app-config"),
            true,
        ),
        (
            "named rule, other name",
            &named,
            res("get", "", "configmaps", "", "d", "other"),
            false,
        ),
        (
            "named rule never matches a list",
            &named,
            res("list", "", "configmaps", "", "d", ""),
            false,
        ),
        (
            "everything",
            &all,
            res(
                "deletecollection",
                "storage.k8s.io",
                "volumeattachments",
                "",
                "",
                "",
            ),
            true,
        ),
        (
            "resource rule never matches a path",
            &all,
            path("get", "/healthz"),
            false,
        ),
        ("exact URL", &urls, path("get", "/healthz"), true),
        ("URL prefix", &urls, path("get", "/api/v1"), true),
        (
            "URL prefix is not a match of its stem",
            &urls,
            path("get", "/apis"),
            false,
        ),
        ("URL verb", &urls, path("post", "/healthz"), false),
        (
            "URL rule never matches a resource",
            &urls,
            res("get", "", "pods", "", "d", ""),
            false,
        ),
    ];
    for (what, r, a, want) in cases {
        assert_eq!(rule_allows(&a, r), want, "{what}");
    }
}

fn policy() -> Policy {
    let mut p = Policy::default();
    p.add(
        "ClusterRole",
        &json!({"metadata": {"name": "view"}, "rules": [
            {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}]}),
    );
    p.add(
        "ClusterRole",
        &json!({"metadata": {"name": "system:discovery"}, "rules": [
            {"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*"]}]}),
    );
    p.add(
        "Role",
        &json!({"metadata": {"name": "cm-writer", "namespace": "team"}, "rules": [
            {"verbs": ["create"], "apiGroups": [""], "resources": ["configmaps"]}]}),
    );
    p.add(
        "ClusterRoleBinding",
        &json!({"metadata": {"name": "discovery"}, "roleRef": {"kind": "ClusterRole", "name": "system:discovery"},
            "subjects": [{"kind": "Group", "name": "system:authenticated"}]}),
    );
    p.add(
        "ClusterRoleBinding",
        &json!({"metadata": {"name": "dangling"}, "roleRef": {"kind": "ClusterRole", "name": "gone"},
            "subjects": [{"kind": "User", "name": "alice"}]}),
    );
    p.add(
        "RoleBinding",
        &json!({"metadata": {"name": "viewers", "namespace": "team"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "bot"}]}),
    );
    p.add(
        "RoleBinding",
        &json!({"metadata": {"name": "writers", "namespace": "team"}, "roleRef": {"kind": "Role", "name": "cm-writer"},
            "subjects": [{"kind": "Group", "name": "dev"}]}),
    );
    p
}

#[test]
fn policy_authorize_table() {
    let p = policy();
    let sa = |mut a: Attributes, user: &str| {
        a.user = user.into();
        a.groups = vec![];
        a
    };
    let cases: Vec<(&str, Attributes, bool, &str)> = vec![
        (
            "cluster role through a namespaced binding",
            res("list", "", "pods", "", "team", ""),
            true,
            r#"RBAC: allowed by RoleBinding "viewers/team" of ClusterRole "view" to User "alice""#,
        ),
        (
            "the binding's grant ends at its namespace",
            res("list", "", "pods", "", "other", ""),
            false,
            "",
        ),
        (
            "a namespaced binding grants nothing cluster-wide",
            res("list", "", "pods", "", "", ""),
            false,
            "",
        ),
        (
            "role through a group",
            res("create", "", "configmaps", "", "team", ""),
            true,
            r#"RBAC: allowed by RoleBinding "writers/team" of Role "cm-writer" to Group "dev""#,
        ),
        (
            "cluster binding to a group, non-resource URL",
            path("get", "/api/v1"),
            false,
            "",
        ),
        (
            "service account subject defaults to the binding's namespace",
            sa(
                res("get", "", "pods", "", "team", "p"),
                "system:serviceaccount:team:bot",
            ),
            true,
            r#"RBAC: allowed by RoleBinding "viewers/team" of ClusterRole "view" to ServiceAccount "bot/team""#,
        ),
        (
            "same account name in another namespace",
            sa(
                res("get", "", "pods", "", "team", "p"),
                "system:serviceaccount:other:bot",
            ),
            false,
            "",
        ),
    ];
    for (what, a, allowed, reason) in cases {
        let d = p.authorize(&a);
        assert_eq!(d.allowed, allowed, "{what}");
        assert!(!d.denied, "{what}: RBAC never denies");
        assert_eq!(d.reason, reason, "{what}");
    }
    // The discovery binding applies to the group system:authenticated.
    let mut a = path("get", "/api/v1");
    a.groups = vec!["system:authenticated".into()];
    assert_eq!(
        p.authorize(&a).reason,
        r#"RBAC: allowed by ClusterRoleBinding "discovery" of ClusterRole "system:discovery" to Group "system:authenticated""#
    );
    // Rules for alice in team: discovery's (via the group she is not in here: none), the view
    // rules, cm-writer's; the dangling binding is a resolution error.
    let (rules, errors) = p.rules_for("alice", &["dev".into()], "team");
    assert_eq!(rules.len(), 2);
    assert_eq!(
        errors,
        vec![r#"clusterrole.rbac.authorization.k8s.io "gone" not found"#]
    );
}

#[test]
fn forbidden_messages_as_upstream() {
    let cases = [
        (
            res("list", "", "pods", "", "y", ""),
            r#"pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "y""#,
        ),
        (
            res("get", "", "pods", "log", "y", "web"),
            r#"pods "web" is forbidden: User "alice" cannot get resource "pods/log" in API group "" in the namespace "y""#,
        ),
        (
            res("delete", "", "nodes", "", "", "n1"),
            r#"nodes "n1" is forbidden: User "alice" cannot delete resource "nodes" in API group "" at the cluster scope"#,
        ),
        (
            res("create", "apps", "deployments", "", "y", ""),
            r#"deployments.apps is forbidden: User "alice" cannot create resource "deployments" in API group "apps" in the namespace "y""#,
        ),
        (
            path("get", "/metrics"),
            r#"forbidden: User "alice" cannot get path "/metrics""#,
        ),
    ];
    for (a, want) in cases {
        assert_eq!(forbidden_message(&a, ""), want);
    }
    assert_eq!(
        forbidden_message(
            &res("get", "", "secrets", "", "y", "s"),
            "no relationship found"
        ),
        r#"secrets "s" is forbidden: User "alice" cannot get resource "secrets" in API group "" in the namespace "y": no relationship found"#
    );
}

#[test]
fn escalation_table() {
    let owner = vec![
        rule(&["get", "list"], &[""], &["pods"], &[]),
        rule(&["update"], &["apps"], &["*/scale"], &[]),
        rule(&["get"], &[""], &["configmaps"], &["a"]),
        url_rule(&["get"], &["/api/*"]),
    ];
    let groups = vec!["dev".to_string(), "system:authenticated".to_string()];
    let ok: Vec<Vec<Rule>> = vec![
        vec![rule(&["get"], &[""], &["pods"], &[])],
        vec![rule(
            &["update"],
            &["apps"],
            &["deployments/scale", "statefulsets/scale"],
            &[],
        )],
        vec![rule(&["get"], &[""], &["configmaps"], &["a"])],
        vec![url_rule(&["get"], &["/api/v1"])],
        vec![],
    ];
    for r in ok {
        assert_eq!(
            escalation_error("alice", &groups, &owner, &r, &[]),
            None,
            "{r:?}"
        );
    }
    let bad = [
        (
            vec![rule(&["get", "delete", "watch"], &[""], &["pods"], &[])],
            "{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\" \"watch\"]}",
        ),
        (
            vec![rule(&["get"], &[""], &["configmaps"], &[])],
            "{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"get\"]}",
        ),
        (
            vec![rule(&["update"], &["apps"], &["deployments"], &[])],
            "{APIGroups:[\"apps\"], Resources:[\"deployments\"], Verbs:[\"update\"]}",
        ),
        (
            vec![url_rule(&["get"], &["/healthz"])],
            "{NonResourceURLs:[\"/healthz\"], Verbs:[\"get\"]}",
        ),
    ];
    for (r, missing) in bad {
        assert_eq!(
            escalation_error("alice", &groups, &owner, &r, &[]).unwrap(),
            format!(
                "user \"alice\" (groups=[\"dev\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{missing}"
            )
        );
    }
}

#[test]
fn validation_table() {
    let run = |kind: &str, obj: serde_json::Value| {
        let mut errs = Vec::new();
        validate(kind, &obj, &mut errs);
        errs.iter().map(FieldError::message).collect::<Vec<_>>()
    };
    assert_eq!(
        run(
            "Role",
            json!({"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]})
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        run("Role", json!({"rules": [{"apiGroups": [""]}]})),
        vec![
            "rules[0].verbs: Required value: verbs must contain at least one value",
            "rules[0].resources: Required value: resource rules must supply at least one resource"
        ]
    );
    assert_eq!(
        run(
            "Role",
            json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]})
        ),
        vec![
            "rules[0].nonResourceURLs: Invalid value: []string{\"/x\"}: namespaced rules cannot apply to non-resource URLs"
        ]
    );
    assert_eq!(
        run(
            "ClusterRole",
            json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"], "resources": ["pods"]}]})
        ),
        vec![
            "rules[0].nonResourceURLs: Invalid value: []string{\"/x\"}: rules cannot apply to both regular resources and non-resource URLs"
        ]
    );
    assert_eq!(
        run("ClusterRole", json!({"aggregationRule": {}})),
        vec![
            "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"
        ]
    );
    assert_eq!(
        run(
            "ClusterRoleBinding",
            json!({"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "x"},
                "subjects": [{"kind": "ServiceAccount", "name": "bot"}, {"kind": "User", "name": "u", "apiGroup": "other"},
                    {"kind": "Robot", "name": "r"}]})
        ),
        vec![
            "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
            "subjects[0].namespace: Required value",
            "subjects[1].apiGroup: Unsupported value: \"other\": supported values: \"rbac.authorization.k8s.io\"",
            "subjects[2].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\""
        ]
    );
    assert_eq!(
        run(
            "RoleBinding",
            json!({"roleRef": {"apiGroup": "", "kind": "Role", "name": ""},
                "subjects": [{"kind": "ServiceAccount", "name": "Bad_Name", "apiGroup": GROUP}]})
        ),
        vec![
            "roleRef.apiGroup: Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\"",
            "roleRef.name: Required value",
            "subjects[0].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            "subjects[0].apiGroup: Unsupported value: \"rbac.authorization.k8s.io\": supported values: \"\""
        ]
    );
    let mut errs = Vec::new();
    validate_update(
        "RoleBinding",
        &json!({"roleRef": {"kind": "ClusterRole", "name": "edit"}}),
        &json!({"roleRef": {"kind": "ClusterRole", "name": "view"}}),
        &mut errs,
    );
    assert_eq!(errs.len(), 1);
    assert!(errs[0].message().starts_with("roleRef: Invalid value: "));
    assert!(errs[0].message().ends_with(": cannot change roleRef"));
}

#[test]
fn defaults_fill_groups() {
    let mut o = json!({"roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "u"}, {"kind": "Group", "name": "g"}, {"kind": "ServiceAccount", "name": "s", "namespace": "d"}]});
    default_object("RoleBinding", o.as_object_mut().unwrap());
    assert_eq!(o["roleRef"]["apiGroup"], GROUP);
    assert_eq!(o["subjects"][0]["apiGroup"], GROUP);
    assert_eq!(o["subjects"][1]["apiGroup"], GROUP);
    assert!(o["subjects"][2].get("apiGroup").is_none());
}

#[test]
fn a_service_account_subject_names_exactly_its_user() {
    let sa = |namespace: &str, name: &str| Subject {
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: namespace.into(),
    };
    let cases = [
        (
            sa("kube-system", "node-controller"),
            "system:serviceaccount:kube-system:node-controller",
            "",
            true,
        ),
        // The binding's namespace stands in for an empty one.
        (
            sa("", "default"),
            "system:serviceaccount:team:default",
            "team",
            true,
        ),
        (
            sa("", "default"),
            "system:serviceaccount:team:default",
            "",
            false,
        ),
        (
            sa("kube-system", "node"),
            "system:serviceaccount:kube-system:node-controller",
            "",
            false,
        ),
        (
            sa("kube", "node"),
            "system:serviceaccount:kube-system:node",
            "",
            false,
        ),
        (
            sa("kube-system", "node"),
            "system:serviceaccount:kube-system",
            "",
            false,
        ),
        (
            sa("kube-system", "node"),
            "system:serviceaccounts:kube-system:node",
            "",
            false,
        ),
        (sa("a", "b:c"), "system:serviceaccount:a:b:c", "", true),
    ];
    for (subject, user, binding_ns, want) in cases {
        assert_eq!(
            applies(&subject, user, &[], binding_ns),
            want,
            "{subject:?} {user}"
        );
    }
}
