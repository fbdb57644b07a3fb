//! Taints and tolerations: matching rules shared by the scheduler, the taint eviction controller,
//! the DaemonSet controller and the kubelet's admission (k8s.io/api core/v1 toleration.go, taint.go).

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Two taints are the same taint when key and effect are equal; value and timeAdded are ignored
/// (upstream `Taint.MatchTaint`). Every add/remove of a taint uses this identity.
pub fn taint_matches(a: &Taint, b: &Taint) -> bool {
    a.key == b.key && a.effect == b.effect
}

/// Whether `toleration` tolerates `taint` (upstream `Toleration.ToleratesTaint`):
/// - an empty effect matches every effect, otherwise the effects must be equal;
/// - an empty key with `Exists` matches every key; otherwise the keys must be equal;
/// - `Exists` ignores the value; `Equal` (also the meaning of an empty operator) compares values.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("") {
        "Exists" => true,
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// Whether any of `tolerations` tolerates `taint`.
pub fn tolerated_by_any(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// Taints (of the given effects) that none of `tolerations` tolerates, in the node's order.
pub fn untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    effects: &[&str],
) -> Vec<&'a Taint> {
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect.as_str()))
        .filter(|t| !tolerated_by_any(tolerations, t))
        .collect()
}

/// Upstream's `Taint.ToString()`: `key=value:effect`, `key:effect` when the value is empty, and
/// `key=value` / `key` when the effect is empty.
pub fn taint_to_string(t: &Taint) -> String {
    let value = t.value.as_deref().unwrap_or("");
    match (value.is_empty(), t.effect.is_empty()) {
        (true, true) => t.key.clone(),
        (true, false) => format!("{}:{}", t.key, t.effect),
        (false, true) => format!("{}={}", t.key, value),
        (false, false) => format!("{}={}:{}", t.key, value, t.effect),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        let s = |x: &str| (!x.is_empty()).then(|| x.to_string());
        Toleration {
            key: s(key),
            operator: s(op),
            value: s(value),
            effect: s(effect),
            toleration_seconds: None,
        }
    }

    #[test]
    fn toleration_matching_table() {
        let unreachable = taint("node.kubernetes.io/unreachable", "", "NoExecute");
        let dedicated = taint("dedicated", "gpu", "NoSchedule");
        let cases = [
            (
                tol("node.kubernetes.io/unreachable", "Exists", "", "NoExecute"),
                &unreachable,
                true,
            ),
            (
                tol("node.kubernetes.io/unreachable", "Exists", "", ""),
                &unreachable,
                true,
            ),
            (
                tol("node.kubernetes.io/unreachable", "Exists", "", "NoSchedule"),
                &unreachable,
                false,
            ),
            (tol("", "Exists", "", ""), &unreachable, true),
            (tol("", "Exists", "", "NoSchedule"), &unreachable, false),
            (
                tol("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
                &unreachable,
                false,
            ),
            // Equal with a value does not tolerate an empty-valued taint (the admission quirk).
            (
                tol("node.kubernetes.io/unreachable", "Equal", "x", "NoExecute"),
                &unreachable,
                false,
            ),
            (
                tol("node.kubernetes.io/unreachable", "", "", "NoExecute"),
                &unreachable,
                true,
            ),
            (
                tol("dedicated", "Equal", "gpu", "NoSchedule"),
                &dedicated,
                true,
            ),
            (tol("dedicated", "", "gpu", ""), &dedicated, true),
            (
                tol("dedicated", "Equal", "cpu", "NoSchedule"),
                &dedicated,
                false,
            ),
            (
                tol("dedicated", "Exists", "", "NoSchedule"),
                &dedicated,
                true,
            ),
            (
                tol("dedicated", "Bogus", "gpu", "NoSchedule"),
                &dedicated,
                false,
            ),
        ];
        for (i, (t, taint, want)) in cases.iter().enumerate() {
            assert_eq!(tolerates(t, taint), *want, "case {i}: {t:?}");
        }
    }

    #[test]
    fn identity_and_strings() {
        let a = taint("k", "v1", "NoSchedule");
        let b = taint("k", "v2", "NoSchedule");
        assert!(taint_matches(&a, &b));
        assert!(!taint_matches(&a, &taint("k", "v1", "NoExecute")));
        assert_eq!(taint_to_string(&a), "k=v1:NoSchedule");
        assert_eq!(
            taint_to_string(&taint("node.kubernetes.io/unreachable", "", "NoExecute")),
            "node.kubernetes.io/unreachable:NoExecute"
        );
        let taints = vec![
            a.clone(),
            taint("x", "", "NoExecute"),
            taint("p", "", "PreferNoSchedule"),
        ];
        let u = untolerated(
            &taints,
            &[tol("k", "Exists", "", "")],
            &["NoSchedule", "NoExecute"],
        );
        assert_eq!(u.len(), 1);
        assert_eq!(u[0].key, "x");
    }
}
