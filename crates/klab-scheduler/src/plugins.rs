//! The default-profile filter and score plugins as pure functions over a pod and a [`NodeInfo`]
//! (upstream `pkg/scheduler/framework/plugins/*`), with upstream reason strings verbatim.

use k8s_openapi::api::core::v1::{Pod, Taint, Toleration};
use klab_api::names;
use klab_api::taints::{tolerated_by_any, untolerated};

use crate::nodeinfo::{NodeInfo, Resources, host_ports, ports_conflict};
use klab_api::nodeaffinity;

/// The score of the best node (upstream `framework.MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;

pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";
pub const ERR_REASON_NODE_NAME: &str = "node(s) didn't match the requested node name";
pub const ERR_REASON_NODE_AFFINITY: &str = "node(s) didn't match Pod's node affinity/selector";
pub const ERR_REASON_NODE_PORTS: &str =
    "node(s) didn't have free ports for the requested pod ports";
pub const ERR_REASON_AFFINITY_CONFLICT: &str = "pod affinity terms conflict";
pub const REASON_TOO_MANY_PODS: &str = "Too many pods";
pub const REASON_INSUFFICIENT_CPU: &str = "Insufficient cpu";
pub const REASON_INSUFFICIENT_MEMORY: &str = "Insufficient memory";

/// Default-profile plugins that can reject a pod, in upstream filter order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Plugin {
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
    NodePorts,
    NodeResourcesFit,
    /// ReadWriteOncePod claims already in use.
    VolumeRestrictions,
    /// CSI attach limits from the nodes' CSINodes.
    NodeVolumeLimits,
    /// The pod's claims (PreFilter only; claim changes requeue it).
    VolumeBinding,
}

impl Plugin {
    /// The upstream plugin name (used in `didn't satisfy plugin(s) [...]` and logs).
    pub fn name(self) -> &'static str {
        match self {
            Plugin::NodeUnschedulable => "NodeUnschedulable",
            Plugin::NodeName => "NodeName",
            Plugin::TaintToleration => "TaintToleration",
            Plugin::NodeAffinity => "NodeAffinity",
            Plugin::NodePorts => "NodePorts",
            Plugin::NodeResourcesFit => "NodeResourcesFit",
            Plugin::VolumeRestrictions => "VolumeRestrictions",
            Plugin::NodeVolumeLimits => "NodeVolumeLimits",
            Plugin::VolumeBinding => "VolumeBinding",
        }
    }
}

/// Status codes of a rejection (upstream `framework.Code`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Might fit after preemption or cluster changes.
    Unschedulable,
    /// Preemption cannot help on this node.
    UnschedulableAndUnresolvable,
}

/// A filter plugin's verdict that a node cannot host the pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    pub plugin: Plugin,
    pub code: Code,
    pub reasons: Vec<String>,
}

fn reject(plugin: Plugin, code: Code, reason: impl Into<String>) -> Option<Rejection> {
    Some(Rejection {
        plugin,
        code,
        reasons: vec![reason.into()],
    })
}

fn tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[])
}

fn node_taints(ni: &NodeInfo) -> &[Taint] {
    ni.node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[])
}

/// NodeUnschedulable: `spec.unschedulable` nodes, unless the pod tolerates
/// `node.kubernetes.io/unschedulable:NoSchedule`.
pub fn filter_node_unschedulable(pod: &Pod, ni: &NodeInfo) -> Option<Rejection> {
    let unschedulable = ni
        .node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    if !unschedulable {
        return None;
    }
    let taint = Taint {
        key: names::TAINT_UNSCHEDULABLE.into(),
        effect: names::EFFECT_NO_SCHEDULE.into(),
        value: None,
        time_added: None,
    };
    if tolerated_by_any(tolerations(pod), &taint) {
        return None;
    }
    reject(
        Plugin::NodeUnschedulable,
        Code::UnschedulableAndUnresolvable,
        ERR_REASON_UNSCHEDULABLE,
    )
}

/// NodeName: a pod that names a node fits only that node.
pub fn filter_node_name(pod: &Pod, ni: &NodeInfo) -> Option<Rejection> {
    match pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
        Some(n) if !n.is_empty() && n != ni.name() => reject(
            Plugin::NodeName,
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_NODE_NAME,
        ),
        _ => None,
    }
}

/// TaintToleration: the first (node order) NoSchedule/NoExecute taint the pod does not tolerate.
pub fn filter_taint_toleration(pod: &Pod, ni: &NodeInfo) -> Option<Rejection> {
    let bad = untolerated(
        node_taints(ni),
        tolerations(pod),
        &[names::EFFECT_NO_SCHEDULE, names::EFFECT_NO_EXECUTE],
    );
    let t = bad.first()?;
    reject(
        Plugin::TaintToleration,
        Code::UnschedulableAndUnresolvable,
        format!(
            "node(s) had untolerated taint {{{}: {}}}",
            t.key,
            t.value.as_deref().unwrap_or("")
        ),
    )
}

/// NodeAffinity: `nodeSelector` and required node affinity.
pub fn filter_node_affinity(pod: &Pod, ni: &NodeInfo) -> Option<Rejection> {
    if nodeaffinity::required_node_affinity_matches(pod, &ni.node) {
        return None;
    }
    reject(
        Plugin::NodeAffinity,
        Code::UnschedulableAndUnresolvable,
        ERR_REASON_NODE_AFFINITY,
    )
}

/// NodePorts: a wanted host port already held on the node.
pub fn filter_node_ports(pod: &Pod, ni: &NodeInfo) -> Option<Rejection> {
    let want = host_ports(pod);
    if want
        .iter()
        .any(|w| ni.used_ports.iter().any(|u| ports_conflict(w, u)))
    {
        return reject(
            Plugin::NodePorts,
            Code::Unschedulable,
            ERR_REASON_NODE_PORTS,
        );
    }
    None
}

/// NodeResourcesFit (v1.33): pod count, then cpu and memory against allocatable minus the requests
/// of the pods already on the node. Always `Unschedulable` in v1.33 (preemption may help).
pub fn filter_node_resources_fit(req: Resources, ni: &NodeInfo) -> Option<Rejection> {
    let mut reasons = Vec::new();
    if (ni.pods.len() as i64).saturating_add(1) > ni.allowed_pods {
        reasons.push(REASON_TOO_MANY_PODS.to_string());
    }
    // Saturating: requests and allocatable are user quantities up to i64::MAX (and a Node's
    // status may even be negative).
    if req.milli_cpu > 0
        && req.milli_cpu
            > ni.allocatable
                .milli_cpu
                .saturating_sub(ni.requested.milli_cpu)
    {
        reasons.push(REASON_INSUFFICIENT_CPU.to_string());
    }
    if req.memory > 0 && req.memory > ni.allocatable.memory.saturating_sub(ni.requested.memory) {
        reasons.push(REASON_INSUFFICIENT_MEMORY.to_string());
    }
    if reasons.is_empty() {
        return None;
    }
    Some(Rejection {
        plugin: Plugin::NodeResourcesFit,
        code: Code::Unschedulable,
        reasons,
    })
}

/// Runs the filters in upstream order and returns the first rejection (upstream stops at the first
/// failing plugin for a node).
pub fn run_filters(pod: &Pod, req: Resources, ni: &NodeInfo) -> Option<Rejection> {
    filter_node_unschedulable(pod, ni)
        .or_else(|| filter_node_name(pod, ni))
        .or_else(|| filter_taint_toleration(pod, ni))
        .or_else(|| filter_node_affinity(pod, ni))
        .or_else(|| filter_node_ports(pod, ni))
        .or_else(|| filter_node_resources_fit(req, ni))
}

// ---------------------------------------------------------------- scores

/// TaintToleration raw score: PreferNoSchedule taints not tolerated by the pod's tolerations whose
/// effect is PreferNoSchedule or empty (lower is better; normalised in reverse).
pub fn score_taint_toleration(pod: &Pod, ni: &NodeInfo) -> i64 {
    let tols: Vec<Toleration> = tolerations(pod)
        .iter()
        .filter(|t| {
            matches!(
                t.effect.as_deref(),
                None | Some("") | Some(names::EFFECT_PREFER_NO_SCHEDULE)
            )
        })
        .cloned()
        .collect();
    node_taints(ni)
        .iter()
        .filter(|t| t.effect == names::EFFECT_PREFER_NO_SCHEDULE && !tolerated_by_any(&tols, t))
        .count() as i64
}

fn least_requested(requested: i64, capacity: i64) -> i64 {
    if capacity <= 0 || requested > capacity {
        return 0;
    }
    // In i128: `(capacity - requested) * 100` overflows i64 for capacities above i64::MAX / 100
    // (upstream's int64 arithmetic wraps there).
    let score = i128::from(capacity)
        .saturating_sub(i128::from(requested))
        .saturating_mul(i128::from(MAX_NODE_SCORE))
        .checked_div(i128::from(capacity))
        .unwrap_or(0);
    score.clamp(0, i128::from(MAX_NODE_SCORE)) as i64
}

/// NodeResourcesFit score, LeastAllocated strategy with cpu:1 memory:1 on non-zero requests.
pub fn score_least_allocated(pod_non_zero: Resources, ni: &NodeInfo) -> i64 {
    let mut sum = 0i64;
    let mut weights = 0i64;
    for (req, alloc) in [
        (
            ni.non_zero_requested
                .milli_cpu
                .saturating_add(pod_non_zero.milli_cpu),
            ni.allocatable.milli_cpu,
        ),
        (
            ni.non_zero_requested
                .memory
                .saturating_add(pod_non_zero.memory),
            ni.allocatable.memory,
        ),
    ] {
        if alloc == 0 {
            continue;
        }
        sum = sum.saturating_add(least_requested(req, alloc));
        weights = weights.saturating_add(1);
    }
    sum.checked_div(weights).unwrap_or(0)
}

/// NodeResourcesBalancedAllocation on actual requests: `(1 − |f_cpu − f_mem| / 2) × 100`.
/// `None` (plugin skipped) for a best-effort pod that requests nothing.
pub fn score_balanced_allocation(pod_actual: Resources, ni: &NodeInfo) -> Option<i64> {
    if pod_actual.milli_cpu == 0 && pod_actual.memory == 0 {
        return None;
    }
    let mut fractions = Vec::new();
    for (req, alloc) in [
        (
            ni.requested.milli_cpu.saturating_add(pod_actual.milli_cpu),
            ni.allocatable.milli_cpu,
        ),
        (
            ni.requested.memory.saturating_add(pod_actual.memory),
            ni.allocatable.memory,
        ),
    ] {
        if alloc == 0 {
            continue;
        }
        fractions.push((req as f64 / alloc as f64).min(1.0));
    }
    let std = if fractions.len() == 2 {
        ((fractions[0] - fractions[1]) / 2.0).abs()
    } else {
        0.0
    };
    Some(((1.0 - std) * MAX_NODE_SCORE as f64) as i64)
}

/// Upstream `DefaultNormalizeScore`: scale to 0..=max by the largest score; `reverse` flips it
/// (and gives everyone max when all scores are zero).
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        let v = MAX_NODE_SCORE
            .saturating_mul(*s)
            .checked_div(max)
            .unwrap_or(0);
        *s = if reverse {
            MAX_NODE_SCORE.saturating_sub(v)
        } else {
            v
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn node_info(v: serde_json::Value, pods: Vec<Pod>) -> NodeInfo {
        NodeInfo::new(serde_json::from_value(v).unwrap(), pods)
    }
    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "default"}, "spec": spec}),
        )
        .unwrap()
    }
    fn cpu_pod(cpu: &str) -> Pod {
        pod(json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}))
    }
    fn alloc() -> serde_json::Value {
        json!({"cpu": "2", "memory": "4Gi", "pods": "110"})
    }

    #[test]
    fn taint_toleration_filter_table() {
        let unreachable = json!({"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"});
        let cases = [
            (json!([]), json!([]), None),
            (
                json!([unreachable]),
                json!([]),
                Some("node(s) had untolerated taint {node.kubernetes.io/unreachable: }"),
            ),
            (
                json!([{"key": "K", "value": "v", "effect": "NoExecute"}]),
                json!([]),
                Some("node(s) had untolerated taint {K: v}"),
            ),
            (
                json!([{"key": "K", "value": "v", "effect": "PreferNoSchedule"}]),
                json!([]),
                None,
            ),
            (
                json!([unreachable]),
                json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"}]),
                None,
            ),
            // a NoExecute toleration does not cover the NoSchedule taint
            (
                json!([unreachable]),
                json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
                Some("node(s) had untolerated taint {node.kubernetes.io/unreachable: }"),
            ),
            (json!([unreachable]), json!([{"operator": "Exists"}]), None),
            // first untolerated taint in node order is reported
            (
                json!([{"key": "a", "effect": "NoSchedule"}, {"key": "b", "value": "x", "effect": "NoSchedule"}]),
                json!([{"key": "a", "operator": "Exists"}]),
                Some("node(s) had untolerated taint {b: x}"),
            ),
        ];
        for (i, (taints, tols, want)) in cases.into_iter().enumerate() {
            let ni = node_info(
                json!({"metadata": {"name": "n1"}, "spec": {"taints": taints}, "status": {"allocatable": alloc()}}),
                vec![],
            );
            let got =
                filter_taint_toleration(&pod(json!({"containers": [], "tolerations": tols})), &ni);
            assert_eq!(
                got.as_ref().map(|r| r.reasons[0].as_str()),
                want,
                "case {i}"
            );
            if let Some(r) = got {
                assert_eq!(r.code, Code::UnschedulableAndUnresolvable);
            }
        }
    }

    #[test]
    fn node_unschedulable_filter_table() {
        let cordoned = node_info(
            json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": true}}),
            vec![],
        );
        let open = node_info(json!({"metadata": {"name": "n1"}}), vec![]);
        let plain = pod(json!({"containers": []}));
        let tolerant = pod(
            json!({"containers": [], "tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}),
        );
        assert_eq!(
            filter_node_unschedulable(&plain, &cordoned)
                .unwrap()
                .reasons,
            vec![ERR_REASON_UNSCHEDULABLE]
        );
        assert_eq!(filter_node_unschedulable(&tolerant, &cordoned), None);
        assert_eq!(filter_node_unschedulable(&plain, &open), None);
        assert_eq!(
            filter_node_name(&pod(json!({"containers": [], "nodeName": "n2"})), &open)
                .unwrap()
                .reasons,
            vec![ERR_REASON_NODE_NAME]
        );
        assert_eq!(
            filter_node_name(&pod(json!({"containers": [], "nodeName": "n1"})), &open),
            None
        );
    }

    #[test]
    fn resources_fit_table() {
        let existing = vec![cpu_pod("1500m")];
        let ni = node_info(
            json!({"metadata": {"name": "n1"}, "status": {"allocatable": alloc()}}),
            existing,
        );
        let full = node_info(
            json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "1"}}}),
            vec![cpu_pod("0")],
        );
        let r = |c: &str, m: &str| {
            let mut p = pod(
                json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": c, "memory": m}}}]}),
            );
            p.metadata.name = Some("x".into());
            crate::nodeinfo::pod_requests(&p, false)
        };
        assert_eq!(filter_node_resources_fit(r("500m", "1Gi"), &ni), None);
        assert_eq!(
            filter_node_resources_fit(r("501m", "1Gi"), &ni)
                .unwrap()
                .reasons,
            vec![REASON_INSUFFICIENT_CPU]
        );
        assert_eq!(
            filter_node_resources_fit(r("3", "5Gi"), &ni)
                .unwrap()
                .reasons,
            vec![REASON_INSUFFICIENT_CPU, REASON_INSUFFICIENT_MEMORY]
        );
        assert_eq!(
            filter_node_resources_fit(r("0", "0"), &full)
                .unwrap()
                .reasons,
            vec![REASON_TOO_MANY_PODS]
        );
        assert_eq!(
            filter_node_resources_fit(r("0", "0"), &full).unwrap().code,
            Code::Unschedulable
        );
    }

    #[test]
    fn scores_table() {
        let ni = node_info(
            json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}),
            vec![cpu_pod("1")],
        );
        // existing non-zero: 1000m cpu, 200Mi mem; pod non-zero: 1000m, 200Mi
        let pnz = Resources {
            milli_cpu: 1000,
            memory: 200 << 20,
        };
        // cpu (4000-2000)*100/4000 = 50; mem (8192-400)Mi*100/8192Mi = 95 → (50+95)/2 = 72
        assert_eq!(score_least_allocated(pnz, &ni), 72);
        // actual: cpu 2000/4000 = .5, mem 0/8Gi = 0 → 1 - .25 = 75
        assert_eq!(
            score_balanced_allocation(
                Resources {
                    milli_cpu: 1000,
                    memory: 0
                },
                &ni
            ),
            Some(75)
        );
        assert_eq!(score_balanced_allocation(Resources::default(), &ni), None);
        let tainted = node_info(
            json!({"metadata": {"name": "n2"}, "spec": {"taints": [
            {"key": "a", "effect": "PreferNoSchedule"}, {"key": "b", "effect": "PreferNoSchedule"}, {"key": "c", "effect": "NoSchedule"}]}}),
            vec![],
        );
        assert_eq!(
            score_taint_toleration(&pod(json!({"containers": []})), &tainted),
            2
        );
        assert_eq!(
            score_taint_toleration(
                &pod(
                    json!({"containers": [], "tolerations": [{"key": "a", "operator": "Exists"}]})
                ),
                &tainted
            ),
            1
        );
        // a NoSchedule-only toleration is ignored for the PreferNoSchedule score
        assert_eq!(
            score_taint_toleration(
                &pod(
                    json!({"containers": [], "tolerations": [{"key": "a", "operator": "Exists", "effect": "NoSchedule"}]})
                ),
                &tainted
            ),
            2
        );
        let mut s = vec![0, 2, 1];
        default_normalize(&mut s, true);
        assert_eq!(s, vec![100, 0, 50]);
        let mut z = vec![0, 0];
        default_normalize(&mut z, true);
        assert_eq!(z, vec![100, 100]);
        let mut f = vec![3, 6];
        default_normalize(&mut f, false);
        assert_eq!(f, vec![50, 100]);
    }
}
