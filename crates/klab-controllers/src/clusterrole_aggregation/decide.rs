//! The ClusterRole aggregation decision on typed ClusterRoles: which roles with an
//! `aggregationRule` need new rules. The rule itself (selectors, union in name order, first
//! occurrence kept) is `klab_api::rbac::aggregate`, shared with the API server's bootstrap.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use serde_json::Value;

/// The aggregated roles whose rules differ from the union of the rules of the roles their
/// selectors match, with those rules. Roles that do not serialize are left out.
pub fn changes(roles: &[&ClusterRole]) -> Vec<(String, Vec<PolicyRule>)> {
    let by_name: BTreeMap<String, Value> = roles
        .iter()
        .filter_map(|r| {
            let name = r.metadata.name.clone()?;
            serde_json::to_value(r).ok().map(|v| (name, v))
        })
        .collect();
    klab_api::rbac::aggregate(&by_name)
        .into_iter()
        .filter_map(|(name, rules)| {
            let rules: Vec<PolicyRule> = serde_json::from_value(Value::Array(rules)).ok()?;
            Some((name, rules))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(v: Value) -> ClusterRole {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn aggregated_roles_follow_their_labelled_roles() {
        let agg = role(json!({"metadata": {"name": "monitoring"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/agg": "true"}}]},
            "rules": []}));
        let a = role(
            json!({"metadata": {"name": "a", "labels": {"example.com/agg": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
        );
        let b = role(
            json!({"metadata": {"name": "b", "labels": {"example.com/agg": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                      {"apiGroups": [""], "resources": ["services"], "verbs": ["list"]}]}),
        );
        let other = role(json!({"metadata": {"name": "c", "labels": {"x": "y"}},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}]}));
        let rule = |res: &str, verb: &str| PolicyRule {
            api_groups: Some(vec!["".into()]),
            resources: Some(vec![res.into()]),
            verbs: vec![verb.into()],
            ..Default::default()
        };
        // Nothing labelled yet: an aggregated role with no rules needs none.
        assert_eq!(changes(&[&agg, &other]), vec![]);
        // A labelled role appears: its rules are copied; a second adds only what is new.
        assert_eq!(
            changes(&[&agg, &a, &other]),
            vec![("monitoring".into(), vec![rule("pods", "get")])]
        );
        assert_eq!(
            changes(&[&agg, &a, &b, &other]),
            vec![(
                "monitoring".into(),
                vec![rule("pods", "get"), rule("services", "list")]
            )]
        );
        // Already aggregated: nothing to do.
        let mut done = agg.clone();
        done.rules = Some(vec![rule("pods", "get"), rule("services", "list")]);
        assert_eq!(changes(&[&done, &a, &b, &other]), vec![]);
        // A labelled role removed: its rules go.
        assert_eq!(
            changes(&[&done, &a, &other]),
            vec![("monitoring".into(), vec![rule("pods", "get")])]
        );
    }
}
