//! Pure decisions of the taint eviction controller (spec §2): which tolerations count, the
//! toleration window, the timed eviction queue keyed by pod (`timed_workers.go`), and
//! `processPodOnNode` with its cancel/replace quirks. Driven by `now`; no I/O.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition, Taint, Toleration};
use klab_api::names;
use klab_api::taints::tolerates;

use crate::node_lifecycle::decide::{add, update_pod_condition};

/// How long a pod may stay on a node with its current NoExecute taints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// Evict now (some taint not tolerated, or a used toleration has `tolerationSeconds <= 0`).
    Immediate,
    /// Evict after this long.
    After(Duration),
    /// Every used toleration is unbounded: never evict.
    Forever,
}

/// `GetMatchingTolerations`: for each taint, the **first** toleration (pod order) that tolerates it;
/// None when some taint has none. No taints → all tolerated with none used.
pub fn matching_tolerations<'a>(
    taints: &[Taint],
    tolerations: &'a [Toleration],
) -> Option<Vec<&'a Toleration>> {
    if taints.is_empty() {
        return Some(Vec::new());
    }
    let mut used = Vec::new();
    for taint in taints {
        used.push(tolerations.iter().find(|t| tolerates(t, taint))?);
    }
    Some(used)
}

/// `getMinTolerationTime`: empty → immediate; any `tolerationSeconds <= 0` → immediate; unset
/// seconds are ignored; all unset → forever; else the minimum.
pub fn min_toleration_time(used: &[&Toleration]) -> Window {
    if used.is_empty() {
        return Window::Immediate;
    }
    let mut min: Option<i64> = None;
    for t in used {
        if let Some(s) = t.toleration_seconds {
            if s <= 0 {
                return Window::Immediate;
            }
            min = Some(min.map_or(s, |m| m.min(s)));
        }
    }
    match min {
        None => Window::Forever,
        Some(s) => Window::After(Duration::from_secs(s.unsigned_abs())),
    }
}

/// The toleration window of a pod against a node's NoExecute taints.
pub fn toleration_window(taints: &[Taint], tolerations: &[Toleration]) -> Window {
    match matching_tolerations(taints, tolerations) {
        None => Window::Immediate,
        Some(used) => min_toleration_time(&used),
    }
}

/// The node's NoExecute taints, in the node's order.
pub fn no_execute_taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|ts| {
            ts.iter()
                .filter(|t| t.effect == names::EFFECT_NO_EXECUTE)
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// A scheduled or running eviction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Work {
    pub created_at: Timestamp,
    pub fire_at: Timestamp,
    /// Whether the work is timer-backed (`false` = the nil marker of an immediate item in progress).
    pub timer: bool,
}

/// What `add_work` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Added {
    /// The key already had work: skipped ("Trying to add already existing work, skipping").
    Skipped,
    /// `fireAt - createdAt <= 0`: the shell must run the eviction now, then call `finish`.
    RunNow,
    /// A timer fires at this instant (`now + (fireAt - createdAt)`).
    Timer(Timestamp),
}

/// The result of `process_pod_on_node`, for the shell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodOutcome {
    /// A timer-backed work was cancelled: emit "Cancelling deletion of Pod <ns>/<name>".
    pub cancelled: bool,
    /// Work added (or not) in this call.
    pub added: Option<Added>,
}

/// The timed eviction queue keyed by `"<namespace>/<name>"` (no UID).
#[derive(Clone, Debug, Default)]
pub struct EvictionQueue {
    works: BTreeMap<String, Work>,
}

impl EvictionQueue {
    pub fn get(&self, key: &str) -> Option<&Work> {
        self.works.get(key)
    }

    pub fn len(&self) -> usize {
        self.works.len()
    }

    pub fn is_empty(&self) -> bool {
        self.works.is_empty()
    }

    /// `AddWork`.
    pub fn add_work(
        &mut self,
        key: &str,
        created_at: Timestamp,
        fire_at: Timestamp,
        now: Timestamp,
    ) -> Added {
        if self.works.contains_key(key) {
            return Added::Skipped;
        }
        if fire_at <= created_at {
            self.works.insert(
                key.to_string(),
                Work {
                    created_at,
                    fire_at,
                    timer: false,
                },
            );
            return Added::RunNow;
        }
        let delay = fire_at.duration_since(created_at);
        let at = now.checked_add(delay).unwrap_or(Timestamp::MAX);
        self.works.insert(
            key.to_string(),
            Work {
                created_at,
                fire_at: at,
                timer: true,
            },
        );
        Added::Timer(at)
    }

    /// `CancelWork`: removes the entry; true only if it was timer-backed (then emit the event).
    pub fn cancel_work(&mut self, key: &str) -> bool {
        self.works.remove(key).is_some_and(|w| w.timer)
    }

    /// The handler finished (success or failure): the entry is deleted.
    pub fn finish(&mut self, key: &str) {
        self.works.remove(key);
    }

    /// Timer-backed works due at `now`, earliest first (ties by key).
    pub fn due(&self, now: Timestamp) -> Vec<String> {
        let mut v: Vec<(&Timestamp, &String)> = self
            .works
            .iter()
            .filter(|(_, w)| w.timer && w.fire_at <= now)
            .map(|(k, w)| (&w.fire_at, k))
            .collect();
        v.sort();
        v.into_iter().map(|(_, k)| k.clone()).collect()
    }

    /// The earliest pending timer.
    pub fn next_fire(&self) -> Option<Timestamp> {
        self.works
            .values()
            .filter(|w| w.timer)
            .map(|w| w.fire_at)
            .min()
    }

    /// Keys of all works (for "cancel every pod of the node").
    pub fn keys(&self) -> Vec<String> {
        self.works.keys().cloned().collect()
    }

    /// `processPodOnNode(pod, taints, now)` (§2.6).
    pub fn process_pod_on_node(
        &mut self,
        key: &str,
        taints: &[Taint],
        tolerations: &[Toleration],
        now: Timestamp,
    ) -> PodOutcome {
        let mut cancelled = false;
        if taints.is_empty() {
            cancelled |= self.cancel_work(key);
        }
        let Some(used) = matching_tolerations(taints, tolerations) else {
            cancelled |= self.cancel_work(key);
            let added = self.add_work(key, now, now, now);
            return PodOutcome {
                cancelled,
                added: Some(added),
            };
        };
        let window = min_toleration_time(&used);
        let m = match window {
            Window::Forever => {
                cancelled |= self.cancel_work(key);
                return PodOutcome {
                    cancelled,
                    added: None,
                };
            }
            Window::Immediate => Duration::ZERO,
            Window::After(d) => d,
        };
        let mut start = now;
        let trigger = add(now, m);
        if let Some(w) = self.works.get(key).filter(|w| w.timer) {
            // Upstream reprocesses a pod in real time, so a second look is strictly later than the
            // first; in virtual time both can share one instant. Recomputing the very same fire
            // time at the instant the work was created is a no-op here (newer upstream
            // `UpdateWork` keeps such work too) instead of a spurious cancel event + re-add.
            if w.created_at == now && w.fire_at == trigger {
                return PodOutcome {
                    cancelled,
                    added: None,
                };
            }
            start = w.created_at;
            if add(start, m) < trigger {
                // An earlier countdown is kept unchanged (longer or shorter toleration alike).
                return PodOutcome {
                    cancelled,
                    added: None,
                };
            }
            cancelled |= self.cancel_work(key);
        }
        let added = self.add_work(key, start, trigger, now);
        PodOutcome {
            cancelled,
            added: Some(added),
        }
    }
}

/// `"<namespace>/<name>"` of a pod.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The pod's tolerations.
pub fn pod_tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[])
}

/// The pod's node name ("" when unscheduled).
pub fn pod_node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// The conditions after adding `DisruptionTarget=True` with the given reason and message, or None
/// if the pod already carries exactly that condition (then no status patch is sent).
pub fn with_disruption_target(
    pod: &Pod,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Option<Vec<PodCondition>> {
    let mut conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let cond = PodCondition {
        type_: names::POD_COND_DISRUPTION_TARGET.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        ..Default::default()
    };
    update_pod_condition(&mut conditions, cond, now).then_some(conditions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;

    fn taint(key: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: "NoExecute".into(),
            value: None,
            time_added: None,
        }
    }

    fn tol(key: &str, seconds: Option<i64>) -> Toleration {
        Toleration {
            key: (!key.is_empty()).then(|| key.into()),
            operator: Some("Exists".into()),
            effect: (!key.is_empty()).then(|| "NoExecute".into()),
            value: None,
            toleration_seconds: seconds,
        }
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_420_113_600 + s).unwrap()
    }

    #[test]
    fn cp23_min_toleration_time() {
        let cases: [(Vec<Option<i64>>, Window); 7] = [
            (vec![], Window::Immediate),
            (vec![None], Window::Forever),
            (
                vec![Some(1), Some(2)],
                Window::After(Duration::from_secs(1)),
            ),
            (vec![Some(1), None], Window::After(Duration::from_secs(1))),
            (vec![None, Some(1)], Window::After(Duration::from_secs(1))),
            (vec![Some(0)], Window::Immediate),
            (vec![Some(-5)], Window::Immediate),
        ];
        for (secs, want) in cases {
            let tols: Vec<Toleration> = secs.iter().map(|s| tol("k", *s)).collect();
            let used: Vec<&Toleration> = tols.iter().collect();
            assert_eq!(min_toleration_time(&used), want, "{secs:?}");
        }
    }

    #[test]
    fn cp25_only_first_matching_toleration_counts() {
        let taints = [taint(names::TAINT_UNREACHABLE)];
        let tols = [
            tol(names::TAINT_UNREACHABLE, Some(600)),
            tol(names::TAINT_UNREACHABLE, Some(10)),
        ];
        assert_eq!(
            toleration_window(&taints, &tols),
            Window::After(Duration::from_secs(600))
        );
        let tols = [tol("", None), tol(names::TAINT_UNREACHABLE, Some(10))];
        assert_eq!(toleration_window(&taints, &tols), Window::Forever);
    }

    #[test]
    fn cp01_toleration_windows_of_the_pods() {
        let unreachable = [taint(names::TAINT_UNREACHABLE)];
        let default_pod = [
            tol(names::TAINT_NOT_READY, Some(300)),
            tol(names::TAINT_UNREACHABLE, Some(300)),
        ];
        let ds_pod = [
            tol(names::TAINT_NOT_READY, None),
            tol(names::TAINT_UNREACHABLE, None),
        ];
        let c_pod = [
            tol(names::TAINT_UNREACHABLE, Some(0)),
            tol(names::TAINT_NOT_READY, Some(300)),
            tol(names::TAINT_UNREACHABLE, Some(300)),
        ];
        let d_pod = [tol("", None)];
        assert_eq!(
            toleration_window(&unreachable, &default_pod),
            Window::After(Duration::from_secs(300))
        );
        assert_eq!(toleration_window(&unreachable, &ds_pod), Window::Forever);
        assert_eq!(toleration_window(&unreachable, &c_pod), Window::Immediate);
        assert_eq!(toleration_window(&unreachable, &d_pod), Window::Forever);
        assert_eq!(toleration_window(&unreachable, &[]), Window::Immediate);
        // CP-13: for not-ready, C's first match is the defaulted 300 s.
        assert_eq!(
            toleration_window(&[taint(names::TAINT_NOT_READY)], &c_pod),
            Window::After(Duration::from_secs(300))
        );
    }

    #[test]
    fn cp18_several_pods_different_tolerations() {
        let mut q = EvictionQueue::default();
        let t1 = [taint("T1")];
        let now = t(0);
        assert_eq!(
            q.process_pod_on_node("ns/pod1", &t1, &[], now).added,
            Some(Added::RunNow)
        );
        assert_eq!(
            q.process_pod_on_node("ns/pod2", &t1, &[tol("T1", Some(1))], now)
                .added,
            Some(Added::Timer(t(1)))
        );
        assert_eq!(
            q.process_pod_on_node("ns/pod3", &t1, &[tol("T1", None)], now)
                .added,
            None
        );
        let mut q = EvictionQueue::default();
        let both = [taint("T1"), taint("T2")];
        for (k, tols) in [
            ("ns/pod1", vec![]),
            ("ns/pod2", vec![tol("T1", Some(1))]),
            ("ns/pod3", vec![tol("T1", None)]),
        ] {
            assert_eq!(
                q.process_pod_on_node(k, &both, &tols, now).added,
                Some(Added::RunNow),
                "{k}"
            );
        }
    }

    #[test]
    fn cp19_node_taint_changes() {
        let now = t(0);
        // (b) tolerated 100 s: not deleted within the window.
        let mut q = EvictionQueue::default();
        q.process_pod_on_node("p", &[taint("T1")], &[tol("T1", Some(100))], now);
        assert!(q.due(t(99)).is_empty());
        // (c) T1+T2, tolerates only T1 → immediate.
        let mut q = EvictionQueue::default();
        let o = q.process_pod_on_node("p", &[taint("T1"), taint("T2")], &[tol("T1", None)], now);
        assert_eq!(o.added, Some(Added::RunNow));
        // (d) T1 removed (node has no NoExecute taints) → cancel with event, never fires.
        let mut q = EvictionQueue::default();
        q.process_pod_on_node("p", &[taint("T1")], &[tol("T1", Some(1))], now);
        assert!(q.cancel_work("p"));
        assert!(q.due(t(2)).is_empty());
        // (e) T1 for 1 s and T2 for 100 s → after 1 s.
        let mut q = EvictionQueue::default();
        let o = q.process_pod_on_node(
            "p",
            &[taint("T1"), taint("T2")],
            &[tol("T1", Some(1)), tol("T2", Some(100))],
            now,
        );
        assert_eq!(o.added, Some(Added::Timer(t(1))));
        assert_eq!(q.due(t(1)), ["p"]);
    }

    #[test]
    fn cp20_pod_changes() {
        let t1 = [taint("T1")];
        // (c) toleration removed after scheduling → cancel (event) + immediate.
        let mut q = EvictionQueue::default();
        q.process_pod_on_node("p", &t1, &[tol("T1", Some(100))], t(0));
        let o = q.process_pod_on_node("p", &t1, &[], t(1));
        assert_eq!(
            o,
            PodOutcome {
                cancelled: true,
                added: Some(Added::RunNow)
            }
        );
        // (d) lengthened from 1 s to 100 s → still fires at 1 s.
        let mut q = EvictionQueue::default();
        q.process_pod_on_node("p", &t1, &[tol("T1", Some(1))], t(0));
        let o = q.process_pod_on_node(
            "p",
            &t1,
            &[tol("T1", Some(100))],
            t(0) + SignedDuration::from_millis(500),
        );
        assert_eq!(
            o,
            PodOutcome {
                cancelled: false,
                added: None
            }
        );
        assert_eq!(q.get("p").unwrap().fire_at, t(1));
        // Shortened later: the original fire time is kept too (quirk).
        let mut q = EvictionQueue::default();
        q.process_pod_on_node("p", &t1, &[tol("T1", Some(100))], t(0));
        q.process_pod_on_node("p", &t1, &[tol("T1", Some(10))], t(5));
        assert_eq!(q.get("p").unwrap().fire_at, t(100));
        // Becoming infinitely tolerant cancels with an event.
        let o = q.process_pod_on_node("p", &t1, &[tol("T1", None)], t(6));
        assert_eq!(
            o,
            PodOutcome {
                cancelled: true,
                added: None
            }
        );
        assert!(q.is_empty());
    }

    #[test]
    fn cp21_same_instant_recompute_replaces_work() {
        // createdAt == now: start + m is not before the trigger → cancel (event) and re-add.
        let mut q = EvictionQueue::default();
        q.process_pod_on_node("p", &[taint("T1")], &[tol("T1", Some(100))], t(0));
        let o = q.process_pod_on_node("p", &[taint("T1")], &[tol("T1", Some(50))], t(0));
        assert_eq!(
            o,
            PodOutcome {
                cancelled: true,
                added: Some(Added::Timer(t(50)))
            }
        );
    }

    #[test]
    fn same_instant_same_fire_time_is_a_no_op() {
        let mut q = EvictionQueue::default();
        q.process_pod_on_node("p", &[taint("T1")], &[tol("T1", Some(100))], t(0));
        let o = q.process_pod_on_node("p", &[taint("T1")], &[tol("T1", Some(100))], t(0));
        assert_eq!(
            o,
            PodOutcome {
                cancelled: false,
                added: None
            }
        );
        assert_eq!(q.get("p").unwrap().fire_at, t(100));
    }

    #[test]
    fn immediate_work_cancel_reports_no_event_and_blocks_re_add() {
        let mut q = EvictionQueue::default();
        assert_eq!(q.add_work("p", t(0), t(0), t(0)), Added::RunNow);
        assert_eq!(q.add_work("p", t(0), t(5), t(0)), Added::Skipped);
        assert!(!q.cancel_work("p"), "nil marker: no cancel event");
        assert!(q.is_empty());
    }

    #[test]
    fn disruption_target_condition_added_once() {
        let pod = Pod::default();
        let c = with_disruption_target(
            &pod,
            names::REASON_DELETION_BY_TAINT_MANAGER,
            names::MSG_DELETION_BY_TAINT_MANAGER,
            t(60),
        )
        .unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].type_, "DisruptionTarget");
        assert_eq!(
            c[0].message.as_deref(),
            Some("Taint manager: deleting due to NoExecute taint")
        );
        let pod = Pod {
            status: Some(k8s_openapi::api::core::v1::PodStatus {
                conditions: Some(c),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            with_disruption_target(
                &pod,
                names::REASON_DELETION_BY_TAINT_MANAGER,
                names::MSG_DELETION_BY_TAINT_MANAGER,
                t(61)
            ),
            None
        );
    }
}
