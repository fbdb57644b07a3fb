//! Two volume Filter plugins, pure: VolumeRestrictions' ReadWriteOncePod check
//! (`pkg/scheduler/framework/plugins/volumerestrictions`: a claim with the ReadWriteOncePod access
//! mode already used by a pod anywhere makes every node refuse another pod using it) and
//! NodeVolumeLimits (`nodevolumelimits/csi.go`: the CSI volumes a node would attach, counted per
//! driver without double-counting a volume shared by pods, may not exceed the driver's
//! `allocatable.count` in the node's CSINode) and VolumeBinding's node check (a bound volume's
//! `spec.nodeAffinity` must match the node — the zonal volume that cannot follow its pod to
//! another zone — and a WaitForFirstConsumer claim's class `allowedTopologies` must admit it).
//! They run after the node-level filters, in upstream's order.
//!
//! Preemption is not modelled: a pod refused for an RWOP conflict stays Pending until the other
//! pod is gone (upstream could preempt a lower-priority holder).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, NodeSelector, Pod, TopologySelectorTerm};

use crate::nodeinfo::NodeInfo;
use crate::plugins::{Code, Plugin, Rejection};

/// `ErrReasonReadWriteOncePodConflict`.
pub const ERR_REASON_RWOP_CONFLICT: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";
/// `ErrReasonMaxVolumeCountExceeded`.
pub const ERR_REASON_MAX_VOLUME_COUNT: &str = "node(s) exceed max volume count";
/// VolumeBinding `ErrReasonNodeConflict`.
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
/// VolumeBinding `ErrReasonBindConflict` (nothing can be provisioned for this node).
pub const ERR_REASON_BIND_CONFLICT: &str =
    "node(s) didn't find available persistent volumes to bind";

/// (namespace, claim name).
pub type ClaimKey = (String, String);

/// What the filters need to know of one claim.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimFacts {
    /// Its access modes include ReadWriteOncePod.
    pub rwop: bool,
    /// (driver, unique volume name) when the volume is attachable through a CSI driver: the bound
    /// PV's `spec.csi` (driver/volumeHandle), or for an unbound claim its class's provisioner and
    /// the claim itself (upstream's `getCSIDriverInfoFromSC`).
    pub csi: Option<(String, String)>,
    /// The bound volume's `spec.nodeAffinity.required`.
    pub node_affinity: Option<NodeSelector>,
    /// For an unbound claim: its class's `allowedTopologies` (None: no restriction).
    pub allowed_topologies: Option<Vec<TopologySelectorTerm>>,
}

/// The claims of the pod and of the pods on the nodes, and each node's CSI limits.
#[derive(Clone, Debug, Default)]
pub struct VolumeFacts {
    pub claims: BTreeMap<ClaimKey, ClaimFacts>,
    /// node → driver → `allocatable.count` from the node's CSINode.
    pub limits: BTreeMap<String, BTreeMap<String, i64>>,
}

/// The claims a pod's volumes reference, as keys.
pub fn pod_claims(pod: &Pod) -> Vec<ClaimKey> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    crate::volumes::claim_names(pod)
        .into_iter()
        .map(|n| (ns.clone(), n))
        .collect()
}

/// VolumeRestrictions PreFilter: how many of the pod's ReadWriteOncePod claims some pod on a
/// node (another pod: a pod's own claim is no conflict) already uses.
pub fn rwop_conflicts(pod: &Pod, nodes: &[NodeInfo], facts: &VolumeFacts) -> usize {
    let me = (&pod.metadata.namespace, &pod.metadata.name);
    let rwop: BTreeSet<ClaimKey> = pod_claims(pod)
        .into_iter()
        .filter(|k| facts.claims.get(k).is_some_and(|c| c.rwop))
        .collect();
    if rwop.is_empty() {
        return 0;
    }
    let used: BTreeSet<ClaimKey> = nodes
        .iter()
        .flat_map(|ni| ni.pods.iter())
        .filter(|p| (&p.metadata.namespace, &p.metadata.name) != me)
        .flat_map(|p| pod_claims(p))
        .collect();
    rwop.intersection(&used).count()
}

/// The CSI volumes (unique name → driver) a pod's claims attach.
fn attachable(pod: &Pod, facts: &VolumeFacts, out: &mut BTreeMap<String, String>) {
    for k in pod_claims(pod) {
        if let Some((driver, unique)) = facts.claims.get(&k).and_then(|c| c.csi.clone()) {
            out.insert(unique, driver);
        }
    }
}

/// `MatchTopologySelectorTerms`: some term whose every expression has the node's label value
/// among its values (no terms: everything matches).
fn topology_matches(terms: &[TopologySelectorTerm], node: &Node) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    terms.is_empty()
        || terms.iter().any(|t| {
            t.match_label_expressions
                .iter()
                .flatten()
                .all(|e| labels.get(&e.key).is_some_and(|v| e.values.contains(v)))
        })
}

/// VolumeBinding's Filter on one node: every bound volume reachable from it, and every unbound
/// claim provisionable for it.
fn volume_binding(pod: &Pod, ni: &NodeInfo, facts: &VolumeFacts) -> Option<Rejection> {
    let mut reasons = Vec::new();
    for k in pod_claims(pod) {
        let Some(c) = facts.claims.get(&k) else {
            continue;
        };
        if let Some(sel) = &c.node_affinity
            && !klab_api::nodeaffinity::node_selector_matches(sel, &ni.node)
            && !reasons.contains(&ERR_REASON_NODE_CONFLICT)
        {
            reasons.push(ERR_REASON_NODE_CONFLICT);
        }
        if let Some(terms) = &c.allowed_topologies
            && !topology_matches(terms, &ni.node)
            && !reasons.contains(&ERR_REASON_BIND_CONFLICT)
        {
            reasons.push(ERR_REASON_BIND_CONFLICT);
        }
    }
    (!reasons.is_empty()).then(|| Rejection {
        plugin: Plugin::VolumeBinding,
        code: Code::UnschedulableAndUnresolvable,
        reasons: reasons.into_iter().map(String::from).collect(),
    })
}

/// VolumeRestrictions (RWOP part), NodeVolumeLimits, then VolumeBinding for one node. `conflicts` is
/// `rwop_conflicts` of the pod (computed once per cycle, as upstream's PreFilter state).
pub fn filter(
    pod: &Pod,
    ni: &NodeInfo,
    facts: &VolumeFacts,
    conflicts: usize,
) -> Option<Rejection> {
    if conflicts > 0 {
        return Some(Rejection {
            plugin: Plugin::VolumeRestrictions,
            code: Code::Unschedulable,
            reasons: vec![ERR_REASON_RWOP_CONFLICT.into()],
        });
    }
    node_volume_limits(pod, ni, facts).or_else(|| volume_binding(pod, ni, facts))
}

fn node_volume_limits(pod: &Pod, ni: &NodeInfo, facts: &VolumeFacts) -> Option<Rejection> {
    let mut new: BTreeMap<String, String> = BTreeMap::new();
    attachable(pod, facts, &mut new);
    if new.is_empty() {
        return None;
    }
    let limits = facts.limits.get(ni.name())?;
    let mut attached: BTreeMap<String, String> = BTreeMap::new();
    for p in &ni.pods {
        attachable(p, facts, &mut attached);
    }
    let mut count: BTreeMap<&str, i64> = BTreeMap::new();
    for (unique, driver) in &attached {
        // a volume already attached for another pod is not counted again
        new.remove(unique);
        let c = count.entry(driver).or_default();
        *c = c.saturating_add(1);
    }
    let mut adding: BTreeMap<&str, i64> = BTreeMap::new();
    for driver in new.values() {
        let c = adding.entry(driver).or_default();
        *c = c.saturating_add(1);
    }
    for (driver, n) in adding {
        if let Some(max) = limits.get(driver)
            && count.get(driver).copied().unwrap_or(0).saturating_add(n) > *max
        {
            return Some(Rejection {
                plugin: Plugin::NodeVolumeLimits,
                code: Code::Unschedulable,
                reasons: vec![ERR_REASON_MAX_VOLUME_COUNT.into()],
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, claims: &[&str]) -> Pod {
        let vols: Vec<_> = claims
            .iter()
            .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [], "volumes": vols}}))
        .unwrap()
    }

    fn node(name: &str, pods: Vec<Pod>) -> NodeInfo {
        zoned(name, "", pods)
    }

    fn zoned(name: &str, zone: &str, pods: Vec<Pod>) -> NodeInfo {
        let n: Node = serde_json::from_value(json!({"metadata": {"name": name,
                "labels": {"topology.csi.klab.dev/zone": zone}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
        .unwrap();
        NodeInfo::new(n, pods)
    }

    fn facts() -> VolumeFacts {
        let csi = |v: &str| ClaimFacts {
            csi: Some(("csi.klab.dev".into(), format!("csi.klab.dev/{v}"))),
            ..Default::default()
        };
        let k = |n: &str| ("default".to_string(), n.to_string());
        VolumeFacts {
            claims: BTreeMap::from([
                (
                    k("solo"),
                    ClaimFacts {
                        rwop: true,
                        csi: Some(("csi.klab.dev".into(), "csi.klab.dev/v-solo".into())),
                        ..Default::default()
                    },
                ),
                (k("a"), csi("v-a")),
                (k("b"), csi("v-b")),
                (k("c"), csi("v-c")),
                (k("nfs"), ClaimFacts::default()),
            ]),
            limits: BTreeMap::from([(
                "n1".to_string(),
                BTreeMap::from([("csi.klab.dev".to_string(), 2)]),
            )]),
        }
    }

    #[test]
    fn read_write_once_pod_conflicts_anywhere() {
        let f = facts();
        let holder = pod("holder", &["solo"]);
        let nodes = vec![node("n1", vec![]), node("n2", vec![holder.clone()])];
        let second = pod("second", &["solo"]);
        assert_eq!(rwop_conflicts(&second, &nodes, &f), 1);
        // every node refuses, not only the holder's
        let r = filter(&second, &nodes[0], &f, 1).unwrap();
        assert_eq!(
            (r.plugin, r.code, r.reasons[0].as_str()),
            (
                Plugin::VolumeRestrictions,
                Code::Unschedulable,
                ERR_REASON_RWOP_CONFLICT
            )
        );
        // the holder itself (being rescheduled) and a pod on other claims: no conflict
        assert_eq!(rwop_conflicts(&holder, &nodes, &f), 0);
        assert_eq!(rwop_conflicts(&pod("x", &["a"]), &nodes, &f), 0);
        // an RWO claim shared by two pods is no RWOP conflict
        let nodes = vec![node("n1", vec![pod("p", &["a"])])];
        assert_eq!(rwop_conflicts(&pod("q", &["a"]), &nodes, &f), 0);
    }

    #[test]
    fn node_volume_limits_count_unique_volumes_per_driver() {
        let f = facts();
        // n1 allows 2: one attached, one new fits; two new do not
        let n1 = node("n1", vec![pod("p", &["a"])]);
        assert_eq!(filter(&pod("q", &["b"]), &n1, &f, 0), None);
        let r = filter(&pod("q", &["b", "c"]), &n1, &f, 0).unwrap();
        assert_eq!(
            (r.plugin, r.reasons[0].as_str()),
            (Plugin::NodeVolumeLimits, ERR_REASON_MAX_VOLUME_COUNT)
        );
        // the volume already attached there is not counted twice
        let full = node("n1", vec![pod("p", &["a"]), pod("r", &["b"])]);
        assert_eq!(filter(&pod("q", &["a"]), &full, &f, 0), None);
        assert!(filter(&pod("q", &["c"]), &full, &f, 0).is_some());
        // non-CSI volumes and nodes without a CSINode limit are not limited
        assert_eq!(filter(&pod("q", &["nfs"]), &full, &f, 0), None);
        let n2 = node("n2", vec![pod("p", &["a"]), pod("r", &["b"])]);
        assert_eq!(filter(&pod("q", &["c"]), &n2, &f, 0), None);
    }

    /// The zonal volume: a bound claim's volume in z1 refuses nodes elsewhere ("my database
    /// cannot move zones"); an unbound claim's class limited to z2 refuses z1.
    #[test]
    fn volume_binding_topology() {
        let k = ("default".to_string(), "data".to_string());
        let affinity: NodeSelector = serde_json::from_value(json!({"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.csi.klab.dev/zone", "operator": "In", "values": ["z1"]}]}]}))
        .unwrap();
        let mut f = VolumeFacts::default();
        f.claims.insert(
            k.clone(),
            ClaimFacts {
                node_affinity: Some(affinity),
                ..Default::default()
            },
        );
        let p = pod("db-0", &["data"]);
        assert_eq!(filter(&p, &zoned("a", "z1", vec![]), &f, 0), None);
        let r = filter(&p, &zoned("b", "z2", vec![]), &f, 0).unwrap();
        assert_eq!(
            (r.plugin, r.code, r.reasons.clone()),
            (
                Plugin::VolumeBinding,
                Code::UnschedulableAndUnresolvable,
                vec![ERR_REASON_NODE_CONFLICT.to_string()]
            )
        );
        let terms: Vec<TopologySelectorTerm> =
            serde_json::from_value(json!([{"matchLabelExpressions": [
            {"key": "topology.csi.klab.dev/zone", "values": ["z2"]}]}]))
            .unwrap();
        f.claims.insert(
            k,
            ClaimFacts {
                allowed_topologies: Some(terms),
                ..Default::default()
            },
        );
        assert_eq!(filter(&p, &zoned("b", "z2", vec![]), &f, 0), None);
        let r = filter(&p, &zoned("a", "z1", vec![]), &f, 0).unwrap();
        assert_eq!(r.reasons, vec![ERR_REASON_BIND_CONFLICT.to_string()]);
    }
}
