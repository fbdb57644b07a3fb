//! Node selection by a pod: `spec.nodeSelector` and `affinity.nodeAffinity` (required terms with
//! `matchExpressions` on labels and `matchFields` on `metadata.name`; preferred terms by weight),
//! as upstream `component-helpers/scheduling/corev1/nodeaffinity`. Shared by the scheduler and the
//! DaemonSet controller ("should this node run a daemon pod").

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
};

fn label_requirement_matches(
    r: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Option<bool> {
    let values = r.values.as_deref().unwrap_or(&[]);
    let v = labels.get(&r.key);
    Some(match r.operator.as_str() {
        "In" => v.is_some_and(|v| values.contains(v)),
        "NotIn" => v.is_none_or(|v| !values.contains(v)),
        "Exists" => v.is_some(),
        "DoesNotExist" => v.is_none(),
        "Gt" | "Lt" => {
            // Exactly one integer value is required; a parse error makes the term invalid.
            if values.len() != 1 {
                return None;
            }
            let want: i64 = values[0].parse().ok()?;
            match v {
                None => false,
                Some(have) => match have.parse::<i64>() {
                    Ok(have) => {
                        if r.operator == "Gt" {
                            have > want
                        } else {
                            have < want
                        }
                    }
                    Err(_) => false,
                },
            }
        }
        _ => return None,
    })
}

fn field_requirement_matches(r: &NodeSelectorRequirement, node_name: &str) -> Option<bool> {
    // Only `metadata.name` is a supported node field; `In`/`NotIn` with one value.
    if r.key != "metadata.name" {
        return None;
    }
    let values = r.values.as_deref().unwrap_or(&[]);
    match r.operator.as_str() {
        "In" => Some(values.iter().any(|v| v == node_name)),
        "NotIn" => Some(!values.iter().any(|v| v == node_name)),
        _ => None,
    }
}

/// Whether one term matches: every expression and every field requirement holds. A term with
/// neither matches nothing; an invalid requirement makes the term not match.
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let name = node.metadata.name.as_deref().unwrap_or("");
    exprs
        .iter()
        .all(|r| label_requirement_matches(r, labels) == Some(true))
        && fields
            .iter()
            .all(|r| field_requirement_matches(r, name) == Some(true))
}

/// A NodeSelector matches when any of its terms matches (no terms: nothing matches).
pub fn node_selector_matches(sel: &NodeSelector, node: &Node) -> bool {
    sel.node_selector_terms
        .iter()
        .any(|t| term_matches(t, node))
}

/// Upstream `GetRequiredNodeAffinity(pod).Match(node)`: `spec.nodeSelector` labels all equal, and
/// the required node affinity (when set) matches.
pub fn required_node_affinity_matches(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    if let Some(sel) = spec.node_selector.as_ref() {
        let labels = node.metadata.labels.as_ref();
        if !sel
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        {
            return false;
        }
    }
    match spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        }) {
        Some(req) => node_selector_matches(req, node),
        None => true,
    }
}

/// Sum of the weights of the preferred terms that match (upstream NodeAffinity Score, before
/// normalisation).
pub fn preferred_score(pod: &Pod, node: &Node) -> i64 {
    let Some(prefs) = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return 0;
    };
    prefs
        .iter()
        .filter(|p| p.weight != 0 && term_matches(&p.preference, node))
        .map(|p| i64::from(p.weight))
        .sum()
}

/// The node names a pod's required affinity pins it to through `matchFields metadata.name In`
/// (upstream NodeAffinity PreFilter): `None` when some term has no name pin (all nodes are
/// candidates); otherwise the union over terms of each term's intersection of `In` lists. An empty
/// result means the terms conflict and no node can match.
pub fn pinned_node_names(pod: &Pod) -> Option<Vec<String>> {
    let req = pod
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?;
    if req.node_selector_terms.is_empty() {
        return None;
    }
    let mut out: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    for term in &req.node_selector_terms {
        let mut term_names: Option<std::collections::BTreeSet<String>> = None;
        for r in term.match_fields.iter().flatten() {
            if r.key == "metadata.name" && r.operator == "In" {
                let s: std::collections::BTreeSet<String> =
                    r.values.iter().flatten().cloned().collect();
                term_names = Some(match term_names {
                    None => s,
                    Some(prev) => prev.intersection(&s).cloned().collect(),
                });
            }
        }
        // A term without a name pin could match any node: terms are ORed.
        out.extend(term_names?);
    }
    Some(out.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: serde_json::Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
    }
    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }
    fn req(terms: serde_json::Value) -> serde_json::Value {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
    }

    #[test]
    fn required_affinity_table() {
        let n1 = node("n1", json!({"zone": "a", "gen": "5"}));
        let cases = [
            (json!({"containers": []}), true),
            (json!({"nodeSelector": {"zone": "a"}}), true),
            (json!({"nodeSelector": {"zone": "b"}}), false),
            (json!({"nodeSelector": {"missing": "x"}}), false),
            (
                json!({"affinity": req(json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]))}),
                true,
            ),
            (
                json!({"affinity": req(json!([{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}]))}),
                false,
            ),
            (
                json!({"affinity": req(json!([{"matchExpressions": [{"key": "other", "operator": "NotIn", "values": ["a"]}]}]))}),
                true,
            ),
            (
                json!({"affinity": req(json!([{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]))}),
                true,
            ),
            (
                json!({"affinity": req(json!([{"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}]))}),
                false,
            ),
            (
                json!({"affinity": req(json!([{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]}]))}),
                true,
            ),
            (
                json!({"affinity": req(json!([{"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["4"]}]}]))}),
                false,
            ),
            (
                json!({"affinity": req(json!([{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["x"]}]}]))}),
                false,
            ),
            (
                json!({"affinity": req(json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]))}),
                true,
            ),
            (
                json!({"affinity": req(json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]))}),
                false,
            ),
            (
                json!({"affinity": req(json!([{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}]}]))}),
                true,
            ),
            // terms are ORed; an empty term matches nothing; no terms match nothing
            (
                json!({"affinity": req(json!([{}, {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]))}),
                true,
            ),
            (json!({"affinity": req(json!([{}]))}), false),
            (json!({"affinity": req(json!([]))}), false),
            // nodeSelector and affinity must both hold
            (
                json!({"nodeSelector": {"zone": "b"}, "affinity": req(json!([{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]))}),
                false,
            ),
        ];
        for (i, (spec, want)) in cases.into_iter().enumerate() {
            assert_eq!(
                required_node_affinity_matches(&pod(spec.clone()), &n1),
                want,
                "case {i}: {spec}"
            );
        }
    }

    #[test]
    fn preferred_and_pinned() {
        let n1 = node("n1", json!({"zone": "a"}));
        let p = pod(
            json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
            {"weight": 7, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}},
            {"weight": 3, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]}}}),
        );
        assert_eq!(preferred_score(&p, &n1), 8);
        let ds = pod(
            json!({"affinity": req(json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}]))}),
        );
        assert_eq!(pinned_node_names(&ds), Some(vec!["n3".to_string()]));
        let free = pod(
            json!({"affinity": req(json!([{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]))}),
        );
        assert_eq!(pinned_node_names(&free), None);
    }
}
