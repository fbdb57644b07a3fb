//! One scheduling cycle as a pure function (`schedule_one`): PreFilter (NodeAffinity name pins),
//! Filter over the nodes in order, Score with the default-profile weights, deterministic tie-break,
//! and on failure the upstream `FitError` message including the DefaultPreemption PostFilter part.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use klab_api::DetRng;

use crate::nodeinfo::{NodeInfo, SpreadKey, ZoneSpread, pod_requests};
use crate::plugins::{self, Code, Plugin, Rejection};
use klab_api::nodeaffinity;

/// Upstream `ErrNoNodesAvailable` text.
pub const ERR_NO_NODES_AVAILABLE: &str = "no nodes available to schedule pods";
/// Preemption message for nodes where removing pods cannot help.
pub const PREEMPTION_NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// Preemption message for nodes without lower-priority pods.
pub const PREEMPTION_NO_VICTIMS: &str = "No preemption victims found for incoming pod";

/// Default-profile score weights (v1.33 `getDefaultPlugins`).
const WEIGHT_TAINT_TOLERATION: i64 = 3;
const WEIGHT_NODE_AFFINITY: i64 = 2;
const WEIGHT_NODE_RESOURCES_FIT: i64 = 1;
const WEIGHT_POD_TOPOLOGY_SPREAD: i64 = 2;
const WEIGHT_BALANCED_ALLOCATION: i64 = 1;

/// Cycle-to-cycle state of the algorithm (upstream `nextStartNodeIndex`).
#[derive(Clone, Debug, Default)]
pub struct AlgorithmState {
    pub next_start_node_index: usize,
}

/// Why a pod could not be placed: per-node rejections plus the pieces of the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FitError {
    pub num_all_nodes: usize,
    /// Explicit per-node rejections (nodes that were evaluated).
    pub node_statuses: BTreeMap<String, Rejection>,
    /// The status of nodes never evaluated because a PreFilter narrowed the candidates.
    pub absent_status: Option<Rejection>,
    /// A PreFilter's own failure message (all nodes rejected at once).
    pub pre_filter_msg: Option<String>,
    /// The DefaultPreemption PostFilter message (`preemption: ...`).
    pub post_filter_msg: String,
}

impl FitError {
    /// Plugins that rejected the pod somewhere (drives requeueing on cluster events).
    pub fn rejector_plugins(&self) -> std::collections::BTreeSet<Plugin> {
        self.node_statuses
            .values()
            .chain(self.absent_status.iter())
            .map(|r| r.plugin)
            .collect()
    }

    /// Upstream `FitError.Error()` (v1.30+: the PostFilter message is appended after a space, with
    /// no extra period): `0/N nodes are available: <histogram>. preemption: ...`.
    pub fn message(&self) -> String {
        let mut msg = format!("0/{} nodes are available:", self.num_all_nodes);
        if let Some(pf) = &self.pre_filter_msg {
            msg.push_str(&format!(" {pf}."));
        } else {
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for r in self.node_statuses.values() {
                for reason in &r.reasons {
                    let n = counts.entry(reason).or_default();
                    *n = n.saturating_add(1);
                }
            }
            let absent = self.num_all_nodes.saturating_sub(self.node_statuses.len());
            if let (Some(a), true) = (&self.absent_status, absent > 0) {
                for reason in &a.reasons {
                    let n = counts.entry(reason).or_default();
                    *n = n.saturating_add(absent);
                }
            }
            let hist = histogram(&counts);
            if !hist.is_empty() {
                msg.push_str(&format!(" {}.", hist.join(", ")));
            }
        }
        if !self.post_filter_msg.is_empty() {
            msg.push(' ');
            msg.push_str(&self.post_filter_msg);
        }
        msg
    }
}

/// `"<count> <reason>"` strings sorted as strings (upstream `sort.Strings`, so "10 x" < "2 y").
fn histogram(counts: &BTreeMap<&str, usize>) -> Vec<String> {
    let mut v: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    v.sort();
    v
}

/// The outcome of one scheduling cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleOutcome {
    /// Bind the pod to this node.
    Feasible {
        node: String,
        evaluated: usize,
        feasible: usize,
    },
    /// No node fits; the FitError carries the event / condition message.
    Unschedulable(FitError),
    /// There are no nodes at all (upstream `ErrNoNodesAvailable`, reason Unschedulable).
    NoNodes,
}

impl ScheduleOutcome {
    /// The `FailedScheduling` / `PodScheduled=False` message of a failure.
    pub fn failure_message(&self) -> Option<String> {
        match self {
            ScheduleOutcome::Feasible { .. } => None,
            ScheduleOutcome::Unschedulable(fe) => Some(fe.message()),
            ScheduleOutcome::NoNodes => Some(ERR_NO_NODES_AVAILABLE.into()),
        }
    }
}

/// Upstream `numFeasibleNodesToFind` with the adaptive default (percentageOfNodesToScore = 0).
pub fn num_feasible_nodes_to_find(num_all: usize) -> usize {
    const MIN_FEASIBLE: usize = 100;
    const MIN_PERCENT: i64 = 5;
    if num_all < MIN_FEASIBLE {
        return num_all;
    }
    let all = i64::try_from(num_all).unwrap_or(i64::MAX);
    let pct = 50i64.saturating_sub(all / 125).max(MIN_PERCENT);
    let n = usize::try_from(all.saturating_mul(pct) / 100).unwrap_or(usize::MAX);
    n.max(MIN_FEASIBLE)
}

/// Pods on the node with the same spreading owner (the node info counts them once when it is
/// built, so scoring does not walk every pod of every node for every pod it schedules).
fn count_owned(ni: &NodeInfo, owner: SpreadKey) -> i64 {
    ni.spread_counts.get(&owner).copied().unwrap_or(0)
}

/// PodTopologySpread with the system default constraints (`kubernetes.io/hostname` maxSkew 3 and
/// `topology.kubernetes.io/zone` maxSkew 5, both ScheduleAnyway), score + normalisation.
/// Returns `None` when the plugin is skipped (no owner to spread by). `spread` holds the sums of
/// `all` by zone (read instead of walking every node, unless the pod's node affinity narrows the
/// nodes counted).
fn score_topology_spread(
    pod: &Pod,
    all: &[NodeInfo],
    feasible: &[usize],
    spread: &ZoneSpread,
) -> Option<Vec<i64>> {
    let owner = crate::nodeinfo::spread_key(pod)?;
    const MAX_SKEW_HOSTNAME: i64 = 3;
    const MAX_SKEW_ZONE: i64 = 5;
    // Topology sizes over the feasible nodes (hostname: the number of feasible nodes). Zone
    // labels and owner counts are read from the node infos (cached there): this runs for every
    // node for every pod scheduled.
    let mut zone_counts: BTreeMap<&str, i64> = BTreeMap::new();
    for &i in feasible {
        if let Some(z) = all[i].zone.as_deref() {
            zone_counts.entry(z).or_insert(0);
        }
    }
    let weight_hostname = (feasible.len() as f64 + 2.0).ln();
    let weight_zone = (zone_counts.len() as f64 + 2.0).ln();
    // Zone counts over all nodes that pass the pod's node affinity (nodeAffinityPolicy: Honor).
    let has_affinity = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .is_some()
        || pod
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.as_ref())
            .is_some_and(|m| !m.is_empty());
    if has_affinity {
        for ni in all {
            let Some(c) = ni.zone.as_deref().and_then(|z| zone_counts.get_mut(z)) else {
                continue;
            };
            if nodeaffinity::required_node_affinity_matches(pod, &ni.node) {
                *c = c.saturating_add(count_owned(ni, owner));
            }
        }
    } else {
        for (z, c) in zone_counts.iter_mut() {
            *c = spread.count(owner, z);
        }
    }
    let mut raw = Vec::with_capacity(feasible.len());
    for &i in feasible {
        let ni = &all[i];
        let mut score = 0f64;
        if ni.has_hostname {
            score +=
                count_owned(ni, owner) as f64 * weight_hostname + (MAX_SKEW_HOSTNAME as f64 - 1.0);
        }
        if let Some(z) = ni.zone.as_deref() {
            let cnt = zone_counts.get(z).copied().unwrap_or(0);
            score += cnt as f64 * weight_zone + (MAX_SKEW_ZONE as f64 - 1.0);
        }
        raw.push(score.round() as i64);
    }
    let min = raw.iter().copied().min().unwrap_or(0);
    let max = raw.iter().copied().max().unwrap_or(0);
    Some(
        raw.iter()
            .map(|&s| {
                if max == 0 {
                    plugins::MAX_NODE_SCORE
                } else {
                    plugins::MAX_NODE_SCORE
                        .saturating_mul(max.saturating_add(min).saturating_sub(s))
                        .checked_div(max)
                        .unwrap_or(0)
                }
            })
            .collect(),
    )
}

/// Total weighted score of each feasible node (same order as `feasible`); `spread` holds the
/// sums of `all` by zone ([`ZoneSpread::of`]).
pub fn score_nodes(
    pod: &Pod,
    all: &[NodeInfo],
    feasible: &[usize],
    spread: &ZoneSpread,
) -> Vec<i64> {
    let actual = pod_requests(pod, false);
    let non_zero = pod_requests(pod, true);
    let mut total = vec![0i64; feasible.len()];
    let mut taint: Vec<i64> = feasible
        .iter()
        .map(|&i| plugins::score_taint_toleration(pod, &all[i]))
        .collect();
    plugins::default_normalize(&mut taint, true);
    let mut aff: Vec<i64> = feasible
        .iter()
        .map(|&i| nodeaffinity::preferred_score(pod, &all[i].node))
        .collect();
    plugins::default_normalize(&mut aff, false);
    let spread = score_topology_spread(pod, all, feasible, spread);
    for (k, &i) in feasible.iter().enumerate() {
        let ni = &all[i];
        let mut add = |weight: i64, score: i64| {
            total[k] = total[k].saturating_add(weight.saturating_mul(score));
        };
        add(WEIGHT_TAINT_TOLERATION, taint[k]);
        add(WEIGHT_NODE_AFFINITY, aff[k]);
        add(
            WEIGHT_NODE_RESOURCES_FIT,
            plugins::score_least_allocated(non_zero, ni),
        );
        if let Some(b) = plugins::score_balanced_allocation(actual, ni) {
            add(WEIGHT_BALANCED_ALLOCATION, b);
        }
        if let Some(s) = &spread {
            add(WEIGHT_POD_TOPOLOGY_SPREAD, s[k]);
        }
    }
    total
}

/// DefaultPreemption's PostFilter message when no preemption happens. klab does not preempt: a
/// node rejected with `Unschedulable` reports "No preemption victims found" when no lower-priority
/// pod runs there; when there are lower-priority pods upstream would try to evict them
/// (not modelled: reported the same way).
pub(crate) fn preemption_message(
    pod: &Pod,
    all: &[NodeInfo],
    statuses: &BTreeMap<String, Rejection>,
) -> String {
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.preemption_policy.as_deref())
        == Some("Never")
    {
        return "preemption: not eligible due to preemptionPolicy=Never.".into();
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for ni in all {
        let reason = match statuses.get(ni.name()) {
            // With lower-priority pods on the node upstream would look for victims; klab does not
            // preempt, so it reports no victims either way.
            Some(r) if r.code == Code::Unschedulable => PREEMPTION_NO_VICTIMS,
            _ => PREEMPTION_NOT_HELPFUL,
        };
        let n = counts.entry(reason).or_default();
        *n = n.saturating_add(1);
    }
    format!(
        "preemption: 0/{} nodes are available: {}.",
        all.len(),
        histogram(&counts).join(", ")
    )
}

/// The FitError of a pod VolumeBinding refused at PreFilter (every node rejected at once).
pub fn volume_binding_fit_error(pod: &Pod, nodes: &[NodeInfo], msg: &str) -> FitError {
    FitError {
        num_all_nodes: nodes.len(),
        node_statuses: BTreeMap::new(),
        absent_status: Some(Rejection {
            plugin: Plugin::VolumeBinding,
            code: Code::UnschedulableAndUnresolvable,
            reasons: vec![msg.to_string()],
        }),
        pre_filter_msg: Some(msg.to_string()),
        post_filter_msg: preemption_message(pod, nodes, &BTreeMap::new()),
    }
}

/// One scheduling cycle for `pod` over `nodes` (in snapshot order). Pure apart from the tie-break
/// draw from `rng` (upstream picks uniformly among the top-scored nodes).
pub fn schedule_one(
    pod: &Pod,
    nodes: &[NodeInfo],
    state: &mut AlgorithmState,
    rng: &DetRng,
) -> ScheduleOutcome {
    schedule_one_with(pod, nodes, &ZoneSpread::of(nodes), state, rng, &|_| None)
}

/// `schedule_one` over a snapshot whose zone sums are kept beside it (`spread` must equal
/// [`ZoneSpread::of`]`(nodes)`), with the volume filters (`volume_filters::filter`), which need
/// facts from outside the node infos: `extra` runs on a node after the node-level filters passed.
pub fn schedule_one_with(
    pod: &Pod,
    nodes: &[NodeInfo],
    spread: &ZoneSpread,
    state: &mut AlgorithmState,
    rng: &DetRng,
    extra: &dyn Fn(&NodeInfo) -> Option<Rejection>,
) -> ScheduleOutcome {
    if nodes.is_empty() {
        return ScheduleOutcome::NoNodes;
    }
    let req = pod_requests(pod, false);
    // PreFilter: NodeAffinity narrows to the nodes named by matchFields metadata.name.
    let pinned = nodeaffinity::pinned_node_names(pod);
    if let Some(names) = &pinned
        && names.is_empty()
    {
        let fe = FitError {
            num_all_nodes: nodes.len(),
            node_statuses: BTreeMap::new(),
            absent_status: Some(Rejection {
                plugin: Plugin::NodeAffinity,
                code: Code::UnschedulableAndUnresolvable,
                reasons: vec![plugins::ERR_REASON_AFFINITY_CONFLICT.into()],
            }),
            pre_filter_msg: Some(plugins::ERR_REASON_AFFINITY_CONFLICT.into()),
            post_filter_msg: preemption_message(pod, nodes, &BTreeMap::new()),
        };
        return ScheduleOutcome::Unschedulable(fe);
    }
    let candidates: Vec<usize> = match &pinned {
        Some(names) => (0..nodes.len())
            .filter(|&i| names.iter().any(|n| n == nodes[i].name()))
            .collect(),
        None => (0..nodes.len()).collect(),
    };
    let absent_status = pinned.as_ref().map(|_| Rejection {
        plugin: Plugin::NodeAffinity,
        code: Code::UnschedulableAndUnresolvable,
        reasons: vec![format!(
            "node(s) didn't satisfy plugin(s) [{}]",
            Plugin::NodeAffinity.name()
        )],
    });
    // Filter, starting where the previous cycle stopped, until enough feasible nodes are found.
    let want = if pinned.is_some() {
        candidates.len()
    } else {
        num_feasible_nodes_to_find(candidates.len())
    };
    let mut feasible = Vec::new();
    let mut statuses = BTreeMap::new();
    let start = if candidates.is_empty() {
        0
    } else {
        state
            .next_start_node_index
            .checked_rem(candidates.len())
            .unwrap_or(0)
    };
    let mut processed = 0usize;
    for k in 0..candidates.len() {
        if feasible.len() >= want {
            break;
        }
        let i = candidates[start
            .saturating_add(k)
            .checked_rem(candidates.len())
            .unwrap_or(0)];
        processed = processed.saturating_add(1);
        match plugins::run_filters(pod, req, &nodes[i]).or_else(|| extra(&nodes[i])) {
            None => feasible.push(i),
            Some(r) => {
                statuses.insert(nodes[i].name().to_string(), r);
            }
        }
    }
    if !candidates.is_empty() {
        state.next_start_node_index = start
            .saturating_add(processed)
            .checked_rem(candidates.len())
            .unwrap_or(0);
    }
    if feasible.is_empty() {
        let post = preemption_message(pod, nodes, &statuses);
        return ScheduleOutcome::Unschedulable(FitError {
            num_all_nodes: nodes.len(),
            node_statuses: statuses,
            absent_status,
            pre_filter_msg: None,
            post_filter_msg: post,
        });
    }
    let evaluated = processed;
    let n_feasible = feasible.len();
    if feasible.len() == 1 {
        return ScheduleOutcome::Feasible {
            node: nodes[feasible[0]].name().into(),
            evaluated,
            feasible: 1,
        };
    }
    let scores = score_nodes(pod, nodes, &feasible, spread);
    let best = scores.iter().copied().max().unwrap_or(0);
    let mut top: Vec<&str> = feasible
        .iter()
        .zip(&scores)
        .filter(|(_, s)| **s == best)
        .map(|(&i, _)| nodes[i].name())
        .collect();
    top.sort();
    let pick = if top.len() == 1 {
        0
    } else {
        rng.range(0, top.len() as u64) as usize
    };
    ScheduleOutcome::Feasible {
        node: top[pick].to_string(),
        evaluated,
        feasible: n_feasible,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, extra: serde_json::Value) -> NodeInfo {
        let mut v = json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                           "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}});
        if let Some(spec) = extra.get("spec") {
            v["spec"] = spec.clone();
        }
        if let Some(a) = extra.get("allocatable") {
            v["status"]["allocatable"] = a.clone();
        }
        NodeInfo::new(serde_json::from_value(v).unwrap(), vec![])
    }
    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "default"}, "spec": spec}),
        )
        .unwrap()
    }
    fn unreachable() -> serde_json::Value {
        json!({"spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}, {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}})
    }

    #[test]
    fn failure_message_taint_and_cpu() {
        let nodes = vec![
            node("n1", unreachable()),
            node(
                "n2",
                json!({"allocatable": {"cpu": "1", "memory": "4Gi", "pods": "110"}}),
            ),
            node(
                "n3",
                json!({"allocatable": {"cpu": "1", "memory": "4Gi", "pods": "110"}}),
            ),
        ];
        let p = pod(
            json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]}),
        );
        let out = schedule_one(
            &p,
            &nodes,
            &mut AlgorithmState::default(),
            &DetRng::seeded(1),
        );
        assert_eq!(
            out.failure_message().unwrap(),
            "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 2 Insufficient cpu. \
             preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod."
        );
        let ScheduleOutcome::Unschedulable(fe) = out else {
            panic!("expected failure")
        };
        assert_eq!(
            fe.rejector_plugins().into_iter().collect::<Vec<_>>(),
            vec![Plugin::TaintToleration, Plugin::NodeResourcesFit]
        );
    }

    #[test]
    fn failure_message_table() {
        let cordoned = json!({"spec": {"unschedulable": true}});
        let cases: Vec<(Vec<NodeInfo>, Pod, &str)> = vec![
            (
                vec![
                    node("n1", unreachable()),
                    node("n2", unreachable()),
                    node("n3", unreachable()),
                ],
                pod(json!({"containers": []})),
                "0/3 nodes are available: 3 node(s) had untolerated taint {node.kubernetes.io/unreachable: }. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
            ),
            (
                vec![
                    node("n1", cordoned.clone()),
                    node(
                        "n2",
                        json!({"spec": {"taints": [{"key": "K", "value": "v", "effect": "NoExecute"}]}}),
                    ),
                ],
                pod(json!({"containers": [], "nodeSelector": {"disk": "ssd"}})),
                "0/2 nodes are available: 1 node(s) had untolerated taint {K: v}, 1 node(s) were unschedulable. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
            ),
            (
                vec![node("n1", json!({})), node("n2", json!({}))],
                pod(json!({"containers": [], "nodeSelector": {"disk": "ssd"}})),
                "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
            ),
            (
                vec![node("n1", json!({}))],
                pod(
                    json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "3", "memory": "5Gi"}}}], "preemptionPolicy": "Never"}),
                ),
                "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. preemption: not eligible due to preemptionPolicy=Never.",
            ),
            // A DaemonSet-style pod pinned to a dead node: the other nodes are absent from Filter.
            (
                vec![
                    node("n1", unreachable()),
                    node("n2", json!({})),
                    node("n3", json!({})),
                ],
                pod(
                    json!({"containers": [], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}),
                ),
                "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
            ),
        ];
        for (i, (nodes, p, want)) in cases.into_iter().enumerate() {
            let out = schedule_one(
                &p,
                &nodes,
                &mut AlgorithmState::default(),
                &DetRng::seeded(1),
            );
            assert_eq!(out.failure_message().as_deref(), Some(want), "case {i}");
        }
        let out = schedule_one(
            &pod(json!({"containers": []})),
            &[],
            &mut AlgorithmState::default(),
            &DetRng::seeded(1),
        );
        assert_eq!(out, ScheduleOutcome::NoNodes);
        assert_eq!(
            out.failure_message().as_deref(),
            Some("no nodes available to schedule pods")
        );
    }

    #[test]
    fn histogram_sorts_as_strings() {
        let mut c = BTreeMap::new();
        c.insert("b", 10);
        c.insert("a", 2);
        assert_eq!(histogram(&c), vec!["10 b", "2 a"]);
    }

    #[test]
    fn tolerating_pod_can_land_on_dead_node() {
        // Seed 000 §3: a pod that tolerates the unreachable NoSchedule taint may be bound there.
        let nodes = vec![node(
            "n1",
            json!({"spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]}}),
        )];
        let p = pod(
            json!({"containers": [], "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"}]}),
        );
        let out = schedule_one(
            &p,
            &nodes,
            &mut AlgorithmState::default(),
            &DetRng::seeded(1),
        );
        assert_eq!(
            out,
            ScheduleOutcome::Feasible {
                node: "n1".into(),
                evaluated: 1,
                feasible: 1
            }
        );
    }

    fn owned_pod(name: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u1", "controller": true}]},
            "spec": {"containers": [{"name": "c"}]}})).unwrap()
    }

    #[test]
    fn spreading_prefers_nodes_without_siblings() {
        // Identical nodes; n1 already has one sibling, so n2/n3 score higher.
        let mk = |name: &str, pods: Vec<Pod>| {
            NodeInfo::new(
                serde_json::from_value(
                    json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}),
                )
                .unwrap(),
                pods,
            )
        };
        let nodes = vec![
            mk("n1", vec![owned_pod("web-a")]),
            mk("n2", vec![]),
            mk("n3", vec![]),
        ];
        let p = owned_pod("web-b");
        let scores = score_nodes(&p, &nodes, &[0, 1, 2], &ZoneSpread::of(&nodes));
        assert!(
            scores[0] < scores[1] && scores[1] == scores[2],
            "{scores:?}"
        );
        // Tie between n2 and n3 is broken by the seeded rng, deterministically.
        let pick = |seed| match schedule_one(
            &p,
            &nodes,
            &mut AlgorithmState::default(),
            &DetRng::seeded(seed),
        ) {
            ScheduleOutcome::Feasible { node, .. } => node,
            o => panic!("{o:?}"),
        };
        assert_ne!(pick(1), "n1");
        assert_eq!(pick(7), pick(7));
    }

    #[test]
    fn zone_spreading_counts_siblings_on_nodes_that_pass_the_node_affinity() {
        let mk = |name: &str, zone: &str, disk: &str, pods: Vec<Pod>| {
            NodeInfo::new(
                serde_json::from_value(json!({"metadata": {"name": name, "labels": {
                    "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone, "disk": disk}},
                    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
                .unwrap(),
                pods,
            )
        };
        let nodes = vec![
            mk("n1", "za", "hdd", vec![owned_pod("web-a")]),
            mk("n2", "za", "ssd", vec![]),
            mk("n3", "zb", "ssd", vec![]),
        ];
        // Raw scores: count × ln(topologies + 2) + (maxSkew − 1) per constraint; n1 has one
        // sibling on the node and in zone za, n2 one in its zone, n3 none: 9, 7, 6.
        let p = owned_pod("web-b");
        assert_eq!(
            score_topology_spread(&p, &nodes, &[0, 1, 2], &ZoneSpread::of(&nodes)),
            Some(vec![66, 88, 100])
        );
        // A nodeSelector that n1 fails: its sibling is not counted in za (nodeAffinityPolicy
        // Honor), so n2 and n3 tie.
        let mut sel = owned_pod("web-b");
        sel.spec.as_mut().unwrap().node_selector = Some([("disk".into(), "ssd".into())].into());
        assert_eq!(
            score_topology_spread(&sel, &nodes, &[1, 2], &ZoneSpread::of(&nodes)),
            Some(vec![100, 100])
        );
        // A pod without a spreading owner skips the plugin.
        assert_eq!(
            score_topology_spread(&pod(json!({})), &nodes, &[0, 1, 2], &ZoneSpread::of(&nodes)),
            None
        );
    }

    #[test]
    fn feasible_node_count() {
        assert_eq!(num_feasible_nodes_to_find(50), 50);
        assert_eq!(num_feasible_nodes_to_find(100), 100);
        assert_eq!(num_feasible_nodes_to_find(1000), 420);
        assert_eq!(num_feasible_nodes_to_find(5000), 500);
        assert_eq!(num_feasible_nodes_to_find(6000), 300);
    }
}
