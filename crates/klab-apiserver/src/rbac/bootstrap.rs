//! Upstream's bootstrap RBAC policy (`bootstrap_policy.txt`) and its reconciliation at start-up,
//! as kube-apiserver's `rbac/bootstrap-roles` post-start hook does it: missing objects are
//! created; existing ones annotated `rbac.authorization.kubernetes.io/autoupdate: "true"` get the
//! rules, subjects, labels and annotations they lack (nothing a user added is removed); one
//! annotated `"false"` is left alone.

use serde_json::{Map, Value, json};

use super::GROUP;

/// Upstream's annotation that lets the reconciler update a bootstrap object.
pub const ANN_AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// The label every bootstrap object carries.
pub const LABEL_BOOTSTRAPPING: &str = "kubernetes.io/bootstrapping";

const POLICY: &str = include_str!("bootstrap_policy.txt");

fn list(s: &str) -> Vec<Value> {
    s.trim()
        .split(',')
        .map(|x| {
            let x = x.trim();
            Value::from(if x == "\"\"" { "" } else { x })
        })
        .collect()
}

fn meta(name: &str, labels: Map<String, Value>) -> Value {
    let mut l = labels;
    l.insert(LABEL_BOOTSTRAPPING.into(), json!("rbac-defaults"));
    json!({"name": name, "labels": l, "annotations": {ANN_AUTOUPDATE: "true"}})
}

fn kv(s: &str) -> (String, Value) {
    let (k, v) = s.split_once('=').unwrap_or((s, ""));
    (k.to_string(), json!(v))
}

/// The bootstrap objects: `("clusterroles" | "clusterrolebindings", object)`, in file order.
pub fn objects() -> Vec<(&'static str, Value)> {
    let mut out: Vec<(&'static str, Value)> = Vec::new();
    for line in POLICY.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = trimmed.split_whitespace().collect();
        if line.starts_with("clusterrole ") {
            let mut labels = Map::new();
            let mut aggregate = None;
            let mut i = 2;
            while i + 1 < words.len() {
                let (k, v) = kv(words[i + 1]);
                match words[i] {
                    "label" => {
                        labels.insert(k, v);
                    }
                    _ => aggregate = Some((k, v)),
                }
                i += 2;
            }
            let mut obj = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": meta(words[1], labels), "rules": []});
            if let Some((k, v)) = aggregate {
                obj["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {k: v}}]});
            }
            out.push(("clusterroles", obj));
        } else if line.starts_with("clusterrolebinding ") {
            let subjects: Vec<Value> = words[3..]
                .iter()
                .filter_map(|s| {
                    let (kind, name) = s.split_once(':')?;
                    Some(match kind {
                        "ServiceAccount" => {
                            let (ns, n) = name.split_once('/').unwrap_or(("", name));
                            json!({"kind": kind, "name": n, "namespace": ns})
                        }
                        _ => json!({"apiGroup": GROUP, "kind": kind, "name": name}),
                    })
                })
                .collect();
            let mut obj = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": meta(words[1], Map::new()),
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": words[2]}});
            if !subjects.is_empty() {
                obj["subjects"] = Value::Array(subjects);
            }
            out.push(("clusterrolebindings", obj));
        } else if let Some((_, role)) = out.last_mut() {
            // A rule of the last role.
            let rule = if let Some(rest) = trimmed.strip_prefix("url ") {
                let parts: Vec<&str> = rest.split(';').collect();
                json!({"verbs": list(parts[0]), "nonResourceURLs": list(parts.get(1).unwrap_or(&""))})
            } else {
                let parts: Vec<&str> = trimmed.split(';').collect();
                let mut r = json!({"verbs": list(parts[0]), "apiGroups": list(parts.get(1).unwrap_or(&"")),
                    "resources": list(parts.get(2).unwrap_or(&""))});
                if let Some(names) = parts.get(3) {
                    r["resourceNames"] = Value::Array(list(names));
                }
                r
            };
            if let Some(Value::Array(rules)) = role.get_mut("rules") {
                rules.push(rule);
            }
        }
    }
    out
}

/// What reconciliation makes of a stored bootstrap object: `None` when it needs no change (or
/// must not be changed), else the object to store.
pub fn reconcile(existing: &Value, expected: &Value) -> Option<Value> {
    if existing
        .pointer(&format!(
            "/metadata/annotations/{}",
            ANN_AUTOUPDATE.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        == Some("false")
    {
        return None;
    }
    let mut out = existing.clone();
    for field in ["labels", "annotations"] {
        let want = expected
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object);
        for (k, v) in want.into_iter().flatten() {
            let map = out["metadata"]
                .as_object_mut()
                .map(|m| m.entry(field).or_insert_with(|| json!({})));
            if let Some(Value::Object(m)) = map
                && !m.contains_key(k)
            {
                m.insert(k.clone(), v.clone());
            }
        }
    }
    // Rules and subjects: what is expected and missing is added (upstream's union). An
    // aggregated role's rules belong to the aggregation controller; only its rule is reconciled.
    let union = |out: &mut Value, field: &str| {
        let want: Vec<Value> = expected
            .get(field)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut have: Vec<Value> = out
            .get(field)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for w in want {
            if !have.contains(&w) {
                have.push(w);
            }
        }
        if !have.is_empty() {
            out[field] = Value::Array(have);
        }
    };
    if expected.get("aggregationRule").is_some() {
        if out.get("aggregationRule") != expected.get("aggregationRule") {
            out["aggregationRule"] = expected["aggregationRule"].clone();
        }
    } else if expected.get("rules").is_some() {
        union(&mut out, "rules");
    }
    if expected.get("roleRef").is_some() {
        union(&mut out, "subjects");
    }
    (out != *existing).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_parses_as_upstream_objects() {
        let objs = objects();
        let find = |plural: &str, name: &str| {
            objs.iter()
                .find(|(p, o)| *p == plural && o["metadata"]["name"] == name)
                .map(|(_, o)| o.clone())
                .unwrap_or_else(|| panic!("{plural}/{name}"))
        };
        let admin = find("clusterroles", "cluster-admin");
        assert_eq!(
            admin["rules"],
            json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, {"verbs": ["*"], "nonResourceURLs": ["*"]}])
        );
        assert_eq!(
            admin["metadata"]["labels"][LABEL_BOOTSTRAPPING],
            "rbac-defaults"
        );
        assert_eq!(admin["metadata"]["annotations"][ANN_AUTOUPDATE], "true");
        let view = find("clusterroles", "view");
        assert_eq!(
            view["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["rbac.authorization.k8s.io/aggregate-to-view"],
            "true"
        );
        assert_eq!(
            view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"],
            "true"
        );
        let kcm = find("clusterroles", "system:kube-controller-manager");
        assert_eq!(
            kcm["rules"][2],
            json!({"verbs": ["get", "update"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["kube-controller-manager"]})
        );
        assert_eq!(kcm["rules"][0]["apiGroups"], json!(["", "events.k8s.io"]));
        let piv = find("clusterrolebindings", "system:public-info-viewer");
        assert_eq!(
            piv["subjects"],
            json!([{"apiGroup": GROUP, "kind": "Group", "name": "system:authenticated"},
                {"apiGroup": GROUP, "kind": "Group", "name": "system:unauthenticated"}])
        );
        // system:node is bound to no one: kubelets get their rights from the Node authorizer.
        assert!(
            find("clusterrolebindings", "system:node")
                .get("subjects")
                .is_none()
        );
        // Every object validates.
        for (plural, o) in &objs {
            let ri = crate::registry::lookup(GROUP, "v1", plural).unwrap();
            crate::validation::validate_create(ri, o).unwrap_or_else(|e| panic!("{o}: {e:?}"));
        }
    }

    #[test]
    fn reconcile_adds_and_keeps() {
        let expected = json!({"metadata": {"name": "r", "labels": {"a": "1"}, "annotations": {ANN_AUTOUPDATE: "true"}},
            "rules": [{"verbs": ["get"]}, {"verbs": ["list"]}]});
        assert_eq!(reconcile(&expected, &expected), None);
        let user_changed = json!({"metadata": {"name": "r", "labels": {"a": "2"}, "annotations": {ANN_AUTOUPDATE: "true"}},
            "rules": [{"verbs": ["get"]}, {"verbs": ["watch"]}]});
        assert_eq!(
            reconcile(&user_changed, &expected),
            Some(
                json!({"metadata": {"name": "r", "labels": {"a": "2"}, "annotations": {ANN_AUTOUPDATE: "true"}},
                "rules": [{"verbs": ["get"]}, {"verbs": ["watch"]}, {"verbs": ["list"]}]})
            )
        );
        let frozen = json!({"metadata": {"name": "r", "annotations": {ANN_AUTOUPDATE: "false"}}, "rules": []});
        assert_eq!(reconcile(&frozen, &expected), None);
        let b_expected = json!({"metadata": {"name": "b"}, "roleRef": {"name": "x"}, "subjects": [{"kind": "Group", "name": "g"}]});
        let b = json!({"metadata": {"name": "b"}, "roleRef": {"name": "x"}, "subjects": [{"kind": "User", "name": "u"}]});
        assert_eq!(
            reconcile(&b, &b_expected).unwrap()["subjects"],
            json!([{"kind": "User", "name": "u"}, {"kind": "Group", "name": "g"}])
        );
    }

    /// The component identities klab runs get what upstream's policy grants them, no more.
    #[test]
    fn component_identities_under_the_bootstrap_policy() {
        let mut policy = crate::rbac::Policy::default();
        for (plural, o) in objects() {
            let kind = if plural == "clusterroles" {
                "ClusterRole"
            } else {
                "ClusterRoleBinding"
            };
            policy.add(kind, &o);
        }
        let sa = |name: &str| {
            (
                format!("system:serviceaccount:kube-system:{name}"),
                vec![
                    "system:serviceaccounts".to_string(),
                    "system:serviceaccounts:kube-system".to_string(),
                    "system:authenticated".to_string(),
                ],
            )
        };
        let scheduler = (
            "system:kube-scheduler".to_string(),
            vec!["system:authenticated".to_string()],
        );
        let ask = |who: &(String, Vec<String>), verb: &str, group: &str, res: &str, sub: &str| {
            policy
                .authorize(&crate::authz::Attributes {
                    user: who.0.clone(),
                    groups: who.1.clone(),
                    verb: verb.into(),
                    resource_request: true,
                    namespace: "default".into(),
                    group: group.into(),
                    resource: res.into(),
                    subresource: sub.into(),
                    ..Default::default()
                })
                .allowed
        };
        let cases = [
            (sa("node-controller"), "patch", "", "nodes", "status", true),
            (sa("node-controller"), "delete", "", "pods", "", true),
            (sa("node-controller"), "create", "", "pods", "", false),
            (sa("replicaset-controller"), "create", "", "pods", "", true),
            (
                sa("replicaset-controller"),
                "update",
                "apps",
                "replicasets",
                "status",
                true,
            ),
            (
                sa("replicaset-controller"),
                "delete",
                "",
                "nodes",
                "",
                false,
            ),
            (
                sa("deployment-controller"),
                "create",
                "apps",
                "replicasets",
                "",
                true,
            ),
            (
                sa("disruption-controller"),
                "get",
                "apps",
                "statefulsets",
                "scale",
                true,
            ),
            (
                sa("statefulset-controller"),
                "create",
                "",
                "persistentvolumeclaims",
                "",
                true,
            ),
            (
                sa("generic-garbage-collector"),
                "delete",
                "apps",
                "replicasets",
                "",
                true,
            ),
            (
                sa("attachdetach-controller"),
                "create",
                "storage.k8s.io",
                "volumeattachments",
                "",
                true,
            ),
            (
                sa("service-account-controller"),
                "create",
                "",
                "serviceaccounts",
                "",
                true,
            ),
            (
                sa("service-account-controller"),
                "delete",
                "",
                "serviceaccounts",
                "",
                false,
            ),
            (scheduler.clone(), "create", "", "pods", "binding", true),
            (
                scheduler.clone(),
                "create",
                "events.k8s.io",
                "events",
                "",
                true,
            ),
            (
                scheduler.clone(),
                "patch",
                "",
                "persistentvolumeclaims",
                "",
                true,
            ),
            (scheduler, "delete", "", "nodes", "", false),
            // metrics-server: nodes and pods read, its kubelets' metrics (which it scrapes
            // directly, not through the node proxy), nothing written.
            (sa("metrics-server"), "get", "", "nodes", "proxy", false),
            (sa("metrics-server"), "list", "", "pods", "", true),
            (sa("metrics-server"), "get", "", "nodes", "metrics", true),
            (sa("metrics-server"), "delete", "", "pods", "", false),
            (sa("metrics-server"), "get", "", "secrets", "", false),
        ];
        for (who, verb, group, res, sub, want) in cases {
            assert_eq!(
                ask(&who, verb, group, res, sub),
                want,
                "{} {verb} {res}/{sub}",
                who.0
            );
        }
    }
}
