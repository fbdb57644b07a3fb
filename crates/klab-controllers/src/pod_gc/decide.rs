//! Pure decisions of the pod garbage collector (spec §7): which pods each of the four passes
//! force-deletes, in upstream order, and the orphan-node quarantine queue driven by `now`.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use klab_api::names;

use crate::node_lifecycle::decide::{add, ready_condition, update_pod_condition};

/// Configuration of PodGC (kube-controller-manager flags and upstream constants).
#[derive(Clone, Debug, PartialEq)]
pub struct PodGcConfig {
    /// `--terminated-pod-gc-threshold` (≤ 0 disables only the terminated-pod GC).
    pub terminated_pod_gc_threshold: i32,
    /// Pass period (`gcCheckPeriod`, 20 s).
    pub gc_check_period: Duration,
    /// Quarantine of a missing node before its pods are orphan-collected (`quarantineTime`, 40 s).
    pub quarantine_time: Duration,
}

impl Default for PodGcConfig {
    fn default() -> Self {
        PodGcConfig {
            terminated_pod_gc_threshold: 12500,
            gc_check_period: Duration::from_secs(20),
            quarantine_time: Duration::from_secs(40),
        }
    }
}

/// Why a pod is force-deleted (upstream metric reason labels).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GcReason {
    Terminated,
    TerminatingOutOfService,
    Orphaned,
    TerminatingUnscheduled,
}

impl GcReason {
    /// The `reason` label of `pod_gc_collector_force_delete_pods_total`.
    pub fn label(self) -> &'static str {
        match self {
            GcReason::Terminated => "terminated",
            GcReason::TerminatingOutOfService => "terminating_out_of_service",
            GcReason::Orphaned => "orphaned",
            GcReason::TerminatingUnscheduled => "terminating_unscheduled",
        }
    }
}

/// One force deletion: `markFailedAndDeletePod[WithCondition]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ForceDelete {
    pub namespace: String,
    pub name: String,
    pub reason: GcReason,
    /// The status patch (phase Failed and the conditions list) sent first, unless the pod is
    /// already Succeeded or Failed.
    pub status_patch: Option<FailedStatus>,
}

/// The status PodGC writes before deleting a non-terminal pod.
#[derive(Clone, Debug, PartialEq)]
pub struct FailedStatus {
    /// Always `Failed`.
    pub phase: String,
    /// The full conditions list when a condition is added (orphans), else None (untouched).
    pub conditions: Option<Vec<PodCondition>>,
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// `isPodTerminated`: any phase other than Pending, Running, Unknown (an empty phase counts).
pub fn is_terminated(pod: &Pod) -> bool {
    !matches!(phase(pod), "Pending" | "Running" | "Unknown")
}

fn is_evicted(pod: &Pod) -> bool {
    phase(pod) == "Failed"
        && pod.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("Evicted")
}

fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// `byEvictionAndCreationTimestamp`: evicted first, then older creationTimestamp, then name.
pub fn by_eviction_and_creation(a: &&Pod, b: &&Pod) -> Ordering {
    is_evicted(b)
        .cmp(&is_evicted(a))
        .then_with(|| {
            let ca = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
            let cb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
            ca.cmp(&cb)
        })
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

fn force_delete(
    pod: &Pod,
    reason: GcReason,
    condition: Option<PodCondition>,
    now: Timestamp,
) -> ForceDelete {
    let status_patch = if matches!(phase(pod), "Succeeded" | "Failed") {
        None
    } else {
        let conditions = condition.map(|c| {
            let mut conds = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default();
            update_pod_condition(&mut conds, c, now);
            conds
        });
        Some(FailedStatus {
            phase: "Failed".into(),
            conditions,
        })
    };
    ForceDelete {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        reason,
        status_patch,
    }
}

/// `gcTerminated`: when more than `threshold` pods are terminated, the surplus, evicted and oldest
/// first. A threshold ≤ 0 disables it.
pub fn gc_terminated(
    pods: &[impl Borrow<Pod>],
    threshold: i32,
    now: Timestamp,
) -> Vec<ForceDelete> {
    if threshold <= 0 {
        return Vec::new();
    }
    let mut terminated: Vec<&Pod> = pods
        .iter()
        .map(Borrow::borrow)
        .filter(|p| is_terminated(p))
        .collect();
    let surplus = terminated
        .len()
        .saturating_sub(usize::try_from(threshold).unwrap_or(usize::MAX));
    if surplus == 0 {
        return Vec::new();
    }
    terminated.sort_by(by_eviction_and_creation);
    terminated
        .iter()
        .take(surplus)
        .map(|p| force_delete(p, GcReason::Terminated, None, now))
        .collect()
}

/// Whether the node has the out-of-service taint (any effect, any value).
pub fn has_out_of_service_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == names::TAINT_OUT_OF_SERVICE))
}

/// `IsNodeReady`: the Ready condition is True.
pub fn is_node_ready(node: &Node) -> bool {
    ready_condition(node).is_some_and(|c| c.status == "True")
}

/// `gcTerminating`: terminating pods on a cached node that is not Ready and has the out-of-service
/// taint, sorted like `gc_terminated`; phase Failed without extra condition.
pub fn gc_terminating(
    pods: &[impl Borrow<Pod>],
    nodes: &BTreeMap<String, impl Borrow<Node>>,
    now: Timestamp,
) -> Vec<ForceDelete> {
    let mut chosen: Vec<&Pod> = pods
        .iter()
        .map(Borrow::borrow)
        .filter(|p| is_terminating(p))
        .filter(|p| {
            nodes
                .get(node_name(p))
                .map(Borrow::borrow)
                .is_some_and(|n: &Node| !is_node_ready(n) && has_out_of_service_taint(n))
        })
        .collect();
    chosen.sort_by(by_eviction_and_creation);
    chosen
        .iter()
        .map(|p| force_delete(p, GcReason::TerminatingOutOfService, None, now))
        .collect()
}

/// `gcUnscheduledTerminating`: terminating pods without a node, phase Failed.
pub fn gc_unscheduled_terminating(pods: &[impl Borrow<Pod>], now: Timestamp) -> Vec<ForceDelete> {
    pods.iter()
        .map(Borrow::borrow)
        .filter(|p| is_terminating(p) && node_name(p).is_empty())
        .map(|p| force_delete(p, GcReason::TerminatingUnscheduled, None, now))
        .collect()
}

/// The orphan-node quarantine (a delaying queue of node names).
#[derive(Clone, Debug, Default)]
pub struct OrphanQuarantine {
    /// Node name → ready time. A re-add keeps the earlier ready time (client-go `AddAfter`).
    waiting: BTreeMap<String, Timestamp>,
}

impl OrphanQuarantine {
    /// Enqueues every node named by a pod but absent from the cache (`existing`), ready after the
    /// quarantine.
    pub fn observe(
        &mut self,
        pods: &[impl Borrow<Pod>],
        existing: &BTreeSet<String>,
        now: Timestamp,
        quarantine: Duration,
    ) {
        let ready = add(now, quarantine);
        for p in pods {
            let n = node_name(p.borrow());
            if !n.is_empty() && !existing.contains(n) {
                let e = self.waiting.entry(n.to_string()).or_insert(ready);
                if ready < *e {
                    *e = ready;
                }
            }
        }
    }

    /// Takes the nodes whose quarantine is over and that are still absent from the cache; the shell
    /// then GETs each from the API (NotFound ⇒ deleted). Items still present are dropped too.
    pub fn take_ready(&mut self, existing: &BTreeSet<String>, now: Timestamp) -> Vec<String> {
        let ready: Vec<String> = self
            .waiting
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &ready {
            self.waiting.remove(k);
        }
        ready
            .into_iter()
            .filter(|k| !existing.contains(k))
            .collect()
    }

    pub fn is_waiting(&self, node: &str) -> bool {
        self.waiting.contains_key(node)
    }
}

/// `gcOrphaned`'s deletions: every pod bound to a node confirmed deleted, phase Failed plus
/// `DisruptionTarget / DeletionByPodGC`.
pub fn gc_orphaned(
    pods: &[impl Borrow<Pod>],
    deleted_nodes: &BTreeSet<String>,
    now: Timestamp,
) -> Vec<ForceDelete> {
    pods.iter()
        .map(Borrow::borrow)
        .filter(|p| deleted_nodes.contains(node_name(p)))
        .map(|p| {
            let cond = PodCondition {
                type_: names::POD_COND_DISRUPTION_TARGET.into(),
                status: "True".into(),
                reason: Some(names::REASON_DELETION_BY_POD_GC.into()),
                message: Some(names::MSG_DELETION_BY_POD_GC.into()),
                ..Default::default()
            };
            force_delete(p, GcReason::Orphaned, Some(cond), now)
        })
        .collect()
}

#[cfg(test)]
mod order_props {
    use super::*;
    use k8s_openapi::api::core::v1::PodStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use proptest::prelude::*;

    fn arb_pod() -> impl Strategy<Value = Pod> {
        (0..3u8, any::<bool>(), prop::option::of(0..3i64)).prop_map(|(name, evicted, created)| {
            Pod {
                metadata: ObjectMeta {
                    name: Some(format!("p{name}")),
                    creation_timestamp: created
                        .map(|c| Time(jiff::Timestamp::from_second(1_767_225_600 + c).unwrap())),
                    ..Default::default()
                },
                status: Some(PodStatus {
                    phase: Some("Failed".into()),
                    reason: evicted.then(|| "Evicted".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }
        })
    }

    proptest! {
        /// The GC's deletion order is a total order: sorting never panics, and the result is
        /// the same from any input order (colliding names and timestamps included).
        #[test]
        fn eviction_then_creation_order_is_total(pods in prop::collection::vec(arb_pod(), 0..12)) {
            let mut a: Vec<&Pod> = pods.iter().collect();
            let mut b: Vec<&Pod> = pods.iter().rev().collect();
            a.sort_by(by_eviction_and_creation);
            b.sort_by(by_eviction_and_creation);
            for w in a.windows(2) {
                prop_assert_ne!(by_eviction_and_creation(&w[0], &w[1]), Ordering::Greater);
            }
            let key = |v: &[&Pod]| -> Vec<(bool, Option<i64>, Option<String>)> {
                v.iter()
                    .map(|p| (is_evicted(p), p.metadata.creation_timestamp.as_ref().map(|t| t.0.as_second()), p.metadata.name.clone()))
                    .collect()
            };
            prop_assert_eq!(key(&a), key(&b));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        NodeCondition, NodeSpec, NodeStatus, PodSpec, PodStatus, Taint,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_420_113_600 + s).unwrap()
    }

    fn pod(name: &str, phase: &str, node: &str, created: i64) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                creation_timestamp: Some(Time(t(created))),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: (!node.is_empty()).then(|| node.into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: (!phase.is_empty()).then(|| phase.into()),
                ..Default::default()
            }),
        }
    }

    fn deleting(mut p: Pod) -> Pod {
        p.metadata.deletion_timestamp = Some(Time(t(0)));
        p
    }

    fn evicted(mut p: Pod) -> Pod {
        p.status.as_mut().unwrap().reason = Some("Evicted".into());
        p
    }

    fn names_of(v: &[ForceDelete]) -> Vec<&str> {
        v.iter().map(|d| d.name.as_str()).collect()
    }

    #[test]
    fn cp49_terminated_threshold() {
        let cases: Vec<(Vec<Pod>, i32, Vec<&str>)> = vec![
            (
                vec![
                    pod("a", "Failed", "n", 1),
                    pod("b", "Succeeded", "n", 2),
                    pod("c", "Failed", "n", 3),
                ],
                1,
                vec!["a", "b"],
            ),
            (
                vec![pod("a", "Failed", "n", 1), pod("b", "Succeeded", "n", 2)],
                0,
                vec![],
            ),
            (
                vec![
                    pod("a", "Running", "n", 1),
                    pod("b", "Succeeded", "n", 2),
                    pod("c", "Failed", "n", 3),
                ],
                1,
                vec!["b"],
            ),
            (
                vec![pod("a", "Failed", "n", 1), pod("b", "Succeeded", "n", 2)],
                1,
                vec!["a"],
            ),
            (
                vec![pod("a", "Failed", "n", 1), pod("b", "Succeeded", "n", 2)],
                5,
                vec![],
            ),
            (
                vec![
                    pod("a", "Failed", "n", 1),
                    pod("b", "Succeeded", "n", 2),
                    evicted(pod("c", "Failed", "n", 3)),
                ],
                1,
                vec!["c", "a"],
            ),
            (
                vec![
                    pod("a", "Running", "n", 1),
                    pod("b", "Succeeded", "n", 2),
                    evicted(pod("c", "Failed", "n", 3)),
                ],
                1,
                vec!["c"],
            ),
        ];
        for (i, (pods, threshold, want)) in cases.iter().enumerate() {
            let got = gc_terminated(pods, *threshold, t(100));
            assert_eq!(names_of(&got), *want, "case {i}");
            assert!(
                got.iter().all(|d| d.status_patch.is_none()),
                "terminal pods are not patched"
            );
        }
    }

    fn node(name: &str, ready: &str, taints: Vec<Taint>) -> (String, Node) {
        let n = Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(taints),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        };
        (name.to_string(), n)
    }

    fn oos(value: &str, effect: &str) -> Taint {
        Taint {
            key: names::TAINT_OUT_OF_SERVICE.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            time_added: None,
        }
    }

    #[test]
    fn cp52_out_of_service_terminating_gc() {
        let nodes: BTreeMap<String, Node> = [
            node("w0", "False", vec![oos("", "NoExecute")]),
            node("w1", "False", vec![]),
            node("w2", "True", vec![oos("", "NoExecute")]),
            node("w3", "False", vec![oos("", "NoSchedule")]),
            node("w4", "Unknown", vec![oos("", "PreferNoSchedule")]),
            node("w5", "False", vec![oos("any-value", "NoExecute")]),
        ]
        .into_iter()
        .collect();
        let mut pods = Vec::new();
        for w in ["w0", "w1", "w2", "w3", "w4", "w5"] {
            pods.push(pod(&format!("a-{w}"), "", w, 1));
            pods.push(deleting(pod(&format!("b-{w}"), "", w, 2)));
            pods.push(pod(&format!("c-{w}"), "Pending", w, 3));
            pods.push(pod(&format!("d-{w}"), "Running", w, 4));
            pods.push(pod(&format!("e-{w}"), "Unknown", w, 5));
        }
        let got = gc_terminating(&pods, &nodes, t(100));
        assert_eq!(names_of(&got), ["b-w0", "b-w3", "b-w4", "b-w5"]);
        assert!(got.iter().all(|d| d.status_patch
            == Some(FailedStatus {
                phase: "Failed".into(),
                conditions: None
            })));

        // Second table: terminal pods are deleted too, only the Running one is patched.
        let nodes: BTreeMap<String, Node> = [node("w", "False", vec![oos("", "NoExecute")])]
            .into_iter()
            .collect();
        let pods = vec![
            deleting(pod("a", "Running", "w", 1)),
            deleting(pod("b", "Failed", "w", 2)),
            deleting(pod("c", "Succeeded", "w", 3)),
        ];
        let got = gc_terminating(&pods, &nodes, t(100));
        assert_eq!(names_of(&got), ["a", "b", "c"]);
        let patched: Vec<bool> = got.iter().map(|d| d.status_patch.is_some()).collect();
        assert_eq!(patched, [true, false, false]);
        // Merely NotReady: nothing. Node missing from the cache: skipped.
        let nodes: BTreeMap<String, Node> = [node("w", "False", vec![])].into_iter().collect();
        assert!(gc_terminating(&pods, &nodes, t(100)).is_empty());
        assert!(gc_terminating(&pods, &BTreeMap::<String, Node>::new(), t(100)).is_empty());
    }

    #[test]
    fn cp53_unscheduled_terminating() {
        let pods = vec![
            deleting(pod("f", "Failed", "", 1)),
            deleting(pod("s", "Succeeded", "", 2)),
            deleting(pod("r", "Running", "", 3)),
            deleting(pod("bound", "Running", "n", 4)),
            pod("alive", "Pending", "", 5),
        ];
        let got = gc_unscheduled_terminating(&pods, t(0));
        assert_eq!(names_of(&got), ["f", "s", "r"]);
        let patched: Vec<bool> = got.iter().map(|d| d.status_patch.is_some()).collect();
        assert_eq!(patched, [false, false, true]);
    }

    #[test]
    fn cp50_orphan_quarantine() {
        let q40 = Duration::from_secs(40);
        let none = BTreeSet::new();
        let pods = vec![
            pod("a", "Failed", "deleted", 1),
            pod("b", "Succeeded", "deleted", 2),
            pod("c", "Running", "deleted", 3),
        ];
        // Delay 20 s (< quarantine) ⇒ nothing ready.
        let mut q = OrphanQuarantine::default();
        q.observe(&pods, &none, t(0), q40);
        assert!(q.take_ready(&none, t(20)).is_empty());
        // Pass at 40: ready; the node is confirmed deleted ⇒ all three deleted, only c patched.
        let ready = q.take_ready(&none, t(40));
        assert_eq!(ready, ["deleted"]);
        let deleted: BTreeSet<String> = ready.into_iter().collect();
        let got = gc_orphaned(&pods, &deleted, t(40));
        assert_eq!(names_of(&got), ["a", "b", "c"]);
        assert_eq!(got[0].status_patch, None);
        let c = got[2].status_patch.as_ref().unwrap();
        assert_eq!(c.phase, "Failed");
        let cond = &c.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (
                cond.type_.as_str(),
                cond.status.as_str(),
                cond.reason.as_deref(),
                cond.message.as_deref()
            ),
            (
                "DisruptionTarget",
                "True",
                Some("DeletionByPodGC"),
                Some("PodGC: node no longer exists")
            )
        );
        // Node added to the cache after quarantine ⇒ nothing.
        let mut q = OrphanQuarantine::default();
        q.observe(&pods, &none, t(0), q40);
        let present: BTreeSet<String> = ["deleted".to_string()].into_iter().collect();
        assert!(q.take_ready(&present, t(80)).is_empty());
        // Nodes present in the cache ⇒ never enqueued.
        let mut q = OrphanQuarantine::default();
        q.observe(&pods, &present, t(0), q40);
        assert!(!q.is_waiting("deleted"));
        // Re-observing keeps the earlier ready time.
        let mut q = OrphanQuarantine::default();
        q.observe(&pods, &none, t(0), q40);
        q.observe(&pods, &none, t(20), q40);
        assert_eq!(q.take_ready(&none, t(40)), ["deleted"]);
    }
}
