//! Graceful deletion decisions, pure (control-plane spec §6, api-surface §b.10).
//!
//! Pods are deleted gracefully: a DELETE sets `deletionTimestamp = now + grace` and the kubelet (or a
//! force delete) removes the object later. Unbound or terminal pods go at once. Objects with
//! finalizers are only marked until the finalizers are removed.

use jiff::Timestamp;
use klab_api::clock::saturating_add_secs;

/// What a DELETE does to a stored object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteDecision {
    /// Remove the object from storage now.
    RemoveNow,
    /// Persist the object with these deletion fields; it stays until someone finishes the delete.
    Mark {
        deletion_timestamp: Timestamp,
        grace_seconds: i64,
    },
    /// The delete changes nothing (a graceful delete is already pending with an equal or shorter grace).
    Unchanged,
    /// A graceful delete with grace 0: persist the deletion fields (grace 0) first, then remove
    /// the object — upstream's `updateForGracefulDeletionAndFinalizers` followed by the storage
    /// delete, so watchers see the pod MODIFIED with its deletionTimestamp, then DELETED.
    MarkThenRemove { deletion_timestamp: Timestamp },
}

/// The parts of a stored pod that graceful deletion reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodDeleteView {
    pub node_name: Option<String>,
    pub phase: Option<String>,
    pub termination_grace_period_seconds: Option<i64>,
    pub deletion_timestamp: Option<Timestamp>,
    pub deletion_grace_period_seconds: Option<i64>,
    pub has_finalizers: bool,
}

/// Grace period a DELETE applies to a pod that is not yet being deleted.
pub fn pod_grace_period(pod: &PodDeleteView, requested: Option<i64>) -> i64 {
    let mut period = requested
        .or(pod.termination_grace_period_seconds)
        .unwrap_or(0);
    if pod.node_name.as_deref().unwrap_or("").is_empty() {
        period = 0;
    }
    if matches!(pod.phase.as_deref(), Some("Succeeded") | Some("Failed")) {
        period = 0;
    }
    if period < 0 {
        period = 1;
    }
    period
}

/// Decides a pod DELETE (control-plane spec §6, including the v1.33 clamp of PR #122646).
pub fn decide_pod_delete(
    pod: &PodDeleteView,
    requested: Option<i64>,
    now: Timestamp,
) -> DeleteDecision {
    let requested = requested.map(|g| if g < 0 { 1 } else { g });
    match (pod.deletion_timestamp, pod.deletion_grace_period_seconds) {
        (Some(old_ts), Some(old_grace)) if old_grace > 0 => {
            // Already being deleted gracefully.
            let Some(new_grace) = requested else {
                return DeleteDecision::Unchanged;
            };
            if new_grace >= old_grace {
                return DeleteDecision::Unchanged;
            }
            // old − oldGrace + newGrace = old − (oldGrace − newGrace), with 0 ≤ newGrace < oldGrace.
            let mut ts = saturating_add_secs(old_ts, -(old_grace - new_grace));
            let mut grace = new_grace;
            if ts < now {
                ts = now;
                if grace > 0 {
                    grace = 1;
                }
            }
            if grace == 0 && !pod.has_finalizers {
                return DeleteDecision::MarkThenRemove {
                    deletion_timestamp: ts,
                };
            }
            DeleteDecision::Mark {
                deletion_timestamp: ts,
                grace_seconds: grace,
            }
        }
        (Some(_), _) => {
            // Stored grace nil or 0: the recovery path deletes at once (unless finalizers hold it).
            if pod.has_finalizers {
                DeleteDecision::Unchanged
            } else {
                DeleteDecision::RemoveNow
            }
        }
        (None, _) => {
            // A pod is always deleted gracefully upstream (its strategy's CheckGracefulDelete
            // says yes), even with grace 0: then the marked pod is written and removed at once.
            let grace = pod_grace_period(pod, requested);
            if grace > 0 || pod.has_finalizers {
                DeleteDecision::Mark {
                    // A grace period of centuries is valid input: saturate, never overflow.
                    deletion_timestamp: saturating_add_secs(now, grace),
                    grace_seconds: grace,
                }
            } else {
                DeleteDecision::MarkThenRemove {
                    deletion_timestamp: now,
                }
            }
        }
    }
}

/// Decides a DELETE of a non-pod object: finalizers hold it, otherwise it goes at once.
pub fn decide_generic_delete(
    already_deleting: bool,
    has_finalizers: bool,
    now: Timestamp,
) -> DeleteDecision {
    if !has_finalizers {
        DeleteDecision::RemoveNow
    } else if already_deleting {
        DeleteDecision::Unchanged
    } else {
        DeleteDecision::Mark {
            deletion_timestamp: now,
            grace_seconds: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn bound_running() -> PodDeleteView {
        PodDeleteView {
            node_name: Some("n1".into()),
            phase: Some("Running".into()),
            termination_grace_period_seconds: Some(30),
            ..Default::default()
        }
    }

    #[test]
    fn cp48_graceful_deletion_table() {
        let now = ts("2026-01-01T00:01:00Z");
        let mark = |s: &str, g| DeleteDecision::Mark {
            deletion_timestamp: ts(s),
            grace_seconds: g,
        };
        // Bound running pod: spec grace 30.
        assert_eq!(
            decide_pod_delete(&bound_running(), None, now),
            mark("2026-01-01T00:01:30Z", 30)
        );
        // Explicit grace wins.
        assert_eq!(
            decide_pod_delete(&bound_running(), Some(5), now),
            mark("2026-01-01T00:01:05Z", 5)
        );
        // Force: grace 0 marks (deletionTimestamp now, grace 0), then removes.
        let marked_now = DeleteDecision::MarkThenRemove {
            deletion_timestamp: now,
        };
        assert_eq!(
            decide_pod_delete(&bound_running(), Some(0), now),
            marked_now
        );
        // Negative grace becomes 1.
        assert_eq!(
            decide_pod_delete(&bound_running(), Some(-5), now),
            mark("2026-01-01T00:01:01Z", 1)
        );
        // Unbound pod: at once.
        let unbound = PodDeleteView {
            node_name: None,
            ..bound_running()
        };
        assert_eq!(decide_pod_delete(&unbound, None, now), marked_now);
        // Terminal pods: at once.
        for phase in ["Succeeded", "Failed"] {
            let p = PodDeleteView {
                phase: Some(phase.into()),
                ..bound_running()
            };
            assert_eq!(decide_pod_delete(&p, None, now), marked_now, "{phase}");
        }
        // Unbound pod with finalizers: marked with grace 0.
        let held = PodDeleteView {
            has_finalizers: true,
            ..unbound
        };
        assert_eq!(
            decide_pod_delete(&held, None, now),
            mark("2026-01-01T00:01:00Z", 0)
        );
    }

    #[test]
    fn second_delete_shortens_or_keeps() {
        let now = ts("2026-01-01T00:01:10Z");
        let deleting = PodDeleteView {
            deletion_timestamp: Some(ts("2026-01-01T00:01:30Z")),
            deletion_grace_period_seconds: Some(30),
            ..bound_running()
        };
        // No grace given: pending graceful, unchanged.
        assert_eq!(
            decide_pod_delete(&deleting, None, now),
            DeleteDecision::Unchanged
        );
        // Larger or equal grace: unchanged.
        assert_eq!(
            decide_pod_delete(&deleting, Some(60), now),
            DeleteDecision::Unchanged
        );
        assert_eq!(
            decide_pod_delete(&deleting, Some(30), now),
            DeleteDecision::Unchanged
        );
        // Shorter grace: old − oldGrace + newGrace = 00:01:00 + 20 s.
        assert_eq!(
            decide_pod_delete(&deleting, Some(20), now),
            DeleteDecision::Mark {
                deletion_timestamp: ts("2026-01-01T00:01:20Z"),
                grace_seconds: 20
            }
        );
        // Shorter grace landing in the past: clamped to now, grace raised to 1.
        assert_eq!(
            decide_pod_delete(&deleting, Some(5), now),
            DeleteDecision::Mark {
                deletion_timestamp: now,
                grace_seconds: 1
            }
        );
        // Force delete of a terminating pod: its deadline moves to now with grace 0, then it goes.
        assert_eq!(
            decide_pod_delete(&deleting, Some(0), now),
            DeleteDecision::MarkThenRemove {
                deletion_timestamp: now
            }
        );
        // Stored grace 0 (recovery path): removes at once.
        let zero = PodDeleteView {
            deletion_grace_period_seconds: Some(0),
            ..deleting
        };
        assert_eq!(
            decide_pod_delete(&zero, None, now),
            DeleteDecision::RemoveNow
        );
    }

    #[test]
    fn generic_delete() {
        let now = ts("2026-01-01T00:00:00Z");
        assert_eq!(
            decide_generic_delete(false, false, now),
            DeleteDecision::RemoveNow
        );
        assert_eq!(
            decide_generic_delete(false, true, now),
            DeleteDecision::Mark {
                deletion_timestamp: now,
                grace_seconds: 0
            }
        );
        assert_eq!(
            decide_generic_delete(true, true, now),
            DeleteDecision::Unchanged
        );
    }
}
