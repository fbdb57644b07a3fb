//! Required node affinity of a pod (`spec.nodeSelector` + required `nodeAffinity` terms with
//! `matchExpressions` on labels and `matchFields` on `metadata.name`), as upstream
//! `component-helpers/scheduling/corev1/nodeaffinity`: the DaemonSet controller's "should this
//! node run a daemon pod" predicate.
//!
//! A copy of the same rules in `klab-scheduler` (`nodeaffinity.rs`): controllers and the scheduler
//! must not depend on each other; both copies belong in `klab-api` once the lead moves them.

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
fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
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
fn node_selector_matches(sel: &NodeSelector, node: &Node) -> bool {
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
