//! RBAC decisions shared by the API server (bootstrap reconciliation) and the ClusterRole
//! aggregation controller.

use std::collections::BTreeMap;

use serde_json::Value;

/// The ClusterRole aggregation controller's decision: for each ClusterRole with an
/// `aggregationRule`, the union (first occurrence kept, in ClusterRole name order) of the rules
/// of every other ClusterRole whose labels match one of its selectors. Returns the roles whose
/// rules must change, with their new rules.
pub fn aggregate(cluster_roles: &BTreeMap<String, Value>) -> Vec<(String, Vec<Value>)> {
    let mut out = Vec::new();
    for (name, role) in cluster_roles {
        let Some(selectors) = role
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array)
        else {
            continue;
        };
        let mut rules: Vec<Value> = Vec::new();
        for (other_name, other) in cluster_roles {
            if other_name == name {
                continue;
            }
            let labels: BTreeMap<String, String> = other
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                        .collect()
                })
                .unwrap_or_default();
            let matched = selectors.iter().any(|sel| {
                crate::selector::LabelSelector::from_json(sel).is_ok_and(|s| s.matches(&labels))
            });
            if !matched {
                continue;
            }
            for r in other
                .get("rules")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if !rules.contains(r) {
                    rules.push(r.clone());
                }
            }
        }
        let current: Vec<Value> = role
            .get("rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if current != rules {
            out.push((name.clone(), rules));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn aggregation_table() {
        let mut roles = BTreeMap::new();
        roles.insert(
            "view".to_string(),
            json!({"metadata": {"name": "view", "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]}}),
        );
        roles.insert(
            "edit".to_string(),
            json!({"metadata": {"name": "edit"},
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}}]},
                "rules": [{"verbs": ["stale"]}]}),
        );
        let r1 = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]});
        let r2 = json!({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]});
        roles.insert(
            "a-view".to_string(),
            json!({"metadata": {"name": "a-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}, "rules": [r1, r2]}),
        );
        roles.insert(
            "b-view".to_string(),
            json!({"metadata": {"name": "b-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}, "rules": [r2]}),
        );
        let out = aggregate(&roles);
        // edit aggregates view's current rules (none yet: the controller converges over rounds);
        // view gets the union of a-view and b-view, deduplicated, in name order.
        assert_eq!(
            out,
            vec![
                ("edit".to_string(), vec![]),
                ("view".to_string(), vec![r1.clone(), r2.clone()])
            ]
        );
        // A second round, with view's rules stored, carries them into edit.
        roles.get_mut("view").unwrap()["rules"] = json!([r1, r2]);
        roles.get_mut("edit").unwrap()["rules"] = json!([]);
        assert_eq!(aggregate(&roles), vec![("edit".to_string(), vec![r1, r2])]);
    }
}
