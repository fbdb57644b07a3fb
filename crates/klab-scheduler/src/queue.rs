//! The scheduling queue (upstream `PriorityQueue`, v1.33 defaults): activeQ ordered by priority then
//! enqueue time, backoffQ for pods whose retry backoff has not expired, and the unschedulable pool
//! for pods waiting for a cluster event. Pure: time is passed in as the span since the clock started.
//!
//! v1.33 behaviours modelled: exponential backoff 1 s → 10 s by the number of unschedulable
//! attempts; cluster events move only pods whose rejecting plugins the event may help (queueing
//! hints, decided by the caller); pods stuck in the unschedulable pool for more than 5 min are
//! flushed on the 30 s leftover tick; backoff completion is flushed on the 1 s tick; and
//! `SchedulerPopFromBackoffQ` (beta, on): when activeQ is empty a pod is popped from backoffQ.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::plugins::Plugin;

/// `namespace/name` of a pending pod.
pub type PodKey = String;

/// Queue knobs with upstream names and defaults (KubeSchedulerConfiguration).
#[derive(Clone, Debug, PartialEq)]
pub struct QueueConfig {
    /// `podInitialBackoffSeconds` (1 s).
    pub pod_initial_backoff: Duration,
    /// `podMaxBackoffSeconds` (10 s).
    pub pod_max_backoff: Duration,
    /// `podMaxInUnschedulablePodsDuration` (5 min).
    pub pod_max_in_unschedulable_pods_duration: Duration,
    /// `SchedulerPopFromBackoffQ` feature gate (beta, on by default in v1.33).
    pub pop_from_backoff_q: bool,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            pod_initial_backoff: Duration::from_secs(1),
            pod_max_backoff: Duration::from_secs(10),
            pod_max_in_unschedulable_pods_duration: Duration::from_secs(300),
            pop_from_backoff_q: true,
        }
    }
}

/// Period of the backoffQ flush (upstream `flushBackoffQCompleted` every 1 s).
const BACKOFF_FLUSH_PERIOD: Duration = Duration::from_secs(1);
/// Period of the unschedulable-leftover flush (upstream every 30 s).
const LEFTOVER_FLUSH_PERIOD: Duration = Duration::from_secs(30);

/// Where a queued pod currently is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    Active,
    Backoff,
    Unschedulable,
    /// Popped, being scheduled.
    InFlight,
}

#[derive(Clone, Debug)]
struct Entry {
    priority: i32,
    /// When the pod was (re)queued or last failed (upstream `QueuedPodInfo.Timestamp`).
    timestamp: Duration,
    unschedulable_count: u32,
    rejectors: BTreeSet<Plugin>,
    location: Location,
    /// Scheduling cycle in which the pod was popped.
    cycle: u64,
    seq: u64,
    /// The priority the pod was pushed to activeQ with (its place there; a later priority change
    /// does not move it, as the heap is not re-sorted until the pod is popped or re-added).
    active_priority: i32,
    /// Whether the pod may be popped from backoffQ before its backoff expires (moved there by a
    /// cluster event rather than by an error).
    early_pop: bool,
}

/// Active queue ordering: higher priority first, then earlier timestamp, then FIFO.
type ActiveKey = (std::cmp::Reverse<i32>, Duration, u64, PodKey);
/// Early-pop order of backoffQ: earliest expiry, then higher priority, then key.
type EarlyKey = (Duration, std::cmp::Reverse<i32>, PodKey);

/// The queue. All methods take `now` (span since the clock started).
///
/// Besides the entries, the queue keeps each sub-queue ordered by what its next step looks at, so
/// that a pop, a flush or a cluster event costs the pods it moves rather than a scan of every
/// pending pod (30 000 pending pods made the scans most of the scheduler's time). Every change to
/// an entry goes through [`SchedulingQueue::modify`], which files it again.
#[derive(Debug, Default)]
pub struct SchedulingQueue {
    config: QueueConfig,
    entries: BTreeMap<PodKey, Entry>,
    active: BTreeSet<ActiveKey>,
    /// backoffQ by the 1 s flush tick at which each backoff completes.
    backoff_due: BTreeSet<(Duration, PodKey)>,
    /// The backoffQ pods that may be popped early, in the order they would be.
    early: BTreeSet<EarlyKey>,
    /// The unschedulable pool by the 30 s tick at which each pod is flushed from it.
    unschedulable_due: BTreeSet<(Duration, PodKey)>,
    /// The unschedulable pool's pods, the ones a cluster event may move.
    waiting: BTreeSet<PodKey>,
    seq: u64,
    cycle: u64,
    /// Cluster events so far: a count, so that an event costs O(1) for the pods in flight, as
    /// upstream's one list of in-flight events (an event is not marked on each in-flight pod:
    /// a pod's binding is in flight too, and a thousand of them with thousands of node updates a
    /// second made the marking most of the scheduler's time).
    events: u64,
    /// Each in-flight pod's view of the events: the count when it was popped, and whether the
    /// pod itself changed since.
    in_flight: BTreeMap<PodKey, Flight>,
}

/// What an in-flight pod needs to know when it fails: whether anything happened meanwhile.
#[derive(Clone, Copy, Debug)]
struct Flight {
    events_at_pop: u64,
    updated: bool,
}

/// Where one entry is filed in the queue's ordered sets.
#[derive(Debug, Default, PartialEq)]
struct Filing {
    active: Option<ActiveKey>,
    backoff_due: Option<(Duration, PodKey)>,
    early: Option<EarlyKey>,
    unschedulable_due: Option<(Duration, PodKey)>,
    waiting: Option<PodKey>,
}

impl SchedulingQueue {
    pub fn new(config: QueueConfig) -> Self {
        SchedulingQueue {
            config,
            ..Default::default()
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn location(&self, key: &str) -> Option<Location> {
        self.entries.get(key).map(|e| e.location)
    }

    fn next_seq(&mut self) -> u64 {
        self.seq = self.seq.saturating_add(1);
        self.seq
    }

    /// Where `e` belongs in the ordered sets.
    fn filing(&self, key: &str, e: &Entry) -> Filing {
        let mut f = Filing::default();
        match e.location {
            Location::Active => {
                f.active = Some((
                    std::cmp::Reverse(e.active_priority),
                    e.timestamp,
                    e.seq,
                    key.to_string(),
                ));
            }
            Location::Backoff => {
                let expiry = self.backoff_expiry(e);
                f.backoff_due = Some((
                    tick_at_or_after(expiry, BACKOFF_FLUSH_PERIOD),
                    key.to_string(),
                ));
                if e.early_pop {
                    f.early = Some((expiry, std::cmp::Reverse(e.priority), key.to_string()));
                }
            }
            Location::Unschedulable => {
                f.unschedulable_due = Some((
                    tick_after(
                        e.timestamp
                            .saturating_add(self.config.pod_max_in_unschedulable_pods_duration),
                        LEFTOVER_FLUSH_PERIOD,
                    ),
                    key.to_string(),
                ));
                f.waiting = Some(key.to_string());
            }
            Location::InFlight => {}
        }
        f
    }

    fn unfile(&mut self, f: Filing) {
        if let Some(k) = f.active {
            self.active.remove(&k);
        }
        if let Some(k) = f.backoff_due {
            self.backoff_due.remove(&k);
        }
        if let Some(k) = f.early {
            self.early.remove(&k);
        }
        if let Some(k) = f.unschedulable_due {
            self.unschedulable_due.remove(&k);
        }
        if let Some(k) = f.waiting {
            self.waiting.remove(&k);
        }
    }

    fn file(&mut self, f: Filing) {
        if let Some(k) = f.active {
            self.active.insert(k);
        }
        if let Some(k) = f.backoff_due {
            self.backoff_due.insert(k);
        }
        if let Some(k) = f.early {
            self.early.insert(k);
        }
        if let Some(k) = f.unschedulable_due {
            self.unschedulable_due.insert(k);
        }
        if let Some(k) = f.waiting {
            self.waiting.insert(k);
        }
    }

    /// Changes one entry and files it again; `None` if there is no such entry.
    fn modify<R>(&mut self, key: &str, change: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let old = self.filing(key, self.entries.get(key)?);
        self.unfile(old);
        let e = self.entries.get_mut(key)?;
        let r = change(e);
        let new = self.filing(key, self.entries.get(key)?);
        self.file(new);
        Some(r)
    }

    fn push_active(&mut self, key: &str, now: Duration) {
        let seq = self.next_seq();
        self.modify(key, |e| {
            e.location = Location::Active;
            e.timestamp = now;
            e.seq = seq;
            e.active_priority = e.priority;
        });
    }

    /// Backoff duration after `count` unschedulable attempts (upstream `calculateBackoffDuration`).
    pub fn backoff_duration(&self, count: u32) -> Duration {
        if count == 0 {
            return Duration::ZERO;
        }
        let mut d = self.config.pod_initial_backoff;
        for _ in 1..count {
            if d > self.config.pod_max_backoff.saturating_sub(d) {
                return self.config.pod_max_backoff;
            }
            d = d.saturating_add(d);
        }
        d.min(self.config.pod_max_backoff)
    }

    fn backoff_expiry(&self, e: &Entry) -> Duration {
        e.timestamp
            .saturating_add(self.backoff_duration(e.unschedulable_count))
    }

    /// A new pending pod (or one seen again after a restart): goes straight to activeQ.
    pub fn add(&mut self, key: &str, priority: i32, now: Duration) {
        if self.entries.contains_key(key) {
            return;
        }
        // Filed as in flight (in no queue) until `push_active` puts it in activeQ.
        self.entries.insert(
            key.to_string(),
            Entry {
                priority,
                timestamp: now,
                unschedulable_count: 0,
                rejectors: BTreeSet::new(),
                location: Location::InFlight,
                cycle: 0,
                seq: 0,
                active_priority: priority,
                early_pop: false,
            },
        );
        self.push_active(key, now);
    }

    /// The pod left the queue's concern (bound, deleted, or no longer ours).
    pub fn delete(&mut self, key: &str) {
        if let Some(e) = self.entries.get(key) {
            let f = self.filing(key, e);
            self.unfile(f);
        }
        self.entries.remove(key);
        self.in_flight.remove(key);
    }

    /// The pending pod itself changed (e.g. tolerations, labels): retry it.
    pub fn update(&mut self, key: &str, priority: i32, now: Duration) {
        let Some(location) = self.modify(key, |e| {
            e.priority = priority;
            e.location
        }) else {
            self.add(key, priority, now);
            return;
        };
        match location {
            Location::Unschedulable => self.requeue(key, now),
            Location::InFlight => {
                if let Some(f) = self.in_flight.get_mut(key) {
                    f.updated = true;
                }
            }
            _ => {}
        }
    }

    /// Move an unschedulable pod to backoffQ or activeQ depending on its backoff.
    fn requeue(&mut self, key: &str, now: Duration) {
        let Some(e) = self.entries.get(key) else {
            return;
        };
        if self.backoff_expiry(e) > now {
            self.modify(key, |e| {
                e.location = Location::Backoff;
                e.early_pop = true;
            });
        } else {
            self.push_active(key, now);
        }
    }

    /// Pops the next pod to schedule, if any.
    pub fn pop(&mut self, now: Duration) -> Option<PodKey> {
        self.flush(now);
        let key = if let Some(first) = self.active.first() {
            first.3.clone()
        } else if self.config.pop_from_backoff_q {
            // Earliest backoff expiry first, then priority. Pods backing off after an error are
            // not popped early, so that a failing API call cannot spin in zero virtual time.
            self.early.first()?.2.clone()
        } else {
            return None;
        };
        self.cycle = self.cycle.saturating_add(1);
        let cycle = self.cycle;
        self.modify(&key, |e| {
            e.location = Location::InFlight;
            e.cycle = cycle;
        });
        self.in_flight.insert(
            key.clone(),
            Flight {
                events_at_pop: self.events,
                updated: false,
            },
        );
        Some(key)
    }

    /// The in-flight pod could not be placed: `rejectors` are the plugins that rejected it (empty
    /// for an error such as a failed API call, which always goes to backoff).
    pub fn failed(&mut self, key: &str, rejectors: BTreeSet<Plugin>, now: Duration) {
        let event_during_flight = self
            .in_flight
            .remove(key)
            .is_some_and(|f| f.updated || self.events > f.events_at_pop);
        self.modify(key, |e| {
            e.timestamp = now;
            e.unschedulable_count = e.unschedulable_count.saturating_add(1);
            let is_error = rejectors.is_empty();
            e.rejectors = rejectors;
            // An event while the pod was being scheduled may already have helped: retry after
            // backoff (upstream re-runs the hints over the recorded events; klab retries on any
            // event).
            if is_error || event_during_flight {
                e.location = Location::Backoff;
                e.early_pop = !is_error;
            } else {
                e.location = Location::Unschedulable;
            }
        });
    }

    /// The in-flight pod was bound.
    pub fn done(&mut self, key: &str) {
        self.delete(key);
    }

    /// A cluster event happened; `may_help(key, rejectors)` is the queueing hint deciding whether
    /// it may make that pod schedulable. Moves matching unschedulable pods, and counts the event
    /// for the pods in flight.
    pub fn on_cluster_event(
        &mut self,
        now: Duration,
        mut may_help: impl FnMut(&str, &BTreeSet<Plugin>) -> bool,
    ) {
        self.events = self.events.saturating_add(1);
        let helped: Vec<PodKey> = self
            .waiting
            .iter()
            .filter(|k| {
                self.entries
                    .get(k.as_str())
                    .is_some_and(|e| may_help(k, &e.rejectors))
            })
            .cloned()
            .collect();
        for k in helped {
            self.requeue(&k, now);
        }
    }

    /// Periodic flushes: backoffQ pods whose backoff expired (at the 1 s ticks) go to activeQ, and
    /// pods in the unschedulable pool longer than the maximum (at the 30 s ticks) are requeued.
    /// Each step takes its pods in key order (each push draws the next FIFO number).
    pub fn flush(&mut self, now: Duration) {
        let mut expired: Vec<PodKey> = self
            .backoff_due
            .iter()
            .take_while(|(due, _)| *due <= now)
            .map(|(_, k)| k.clone())
            .collect();
        expired.sort();
        for k in expired {
            self.push_active(&k, now);
        }
        let mut stale: Vec<PodKey> = self
            .unschedulable_due
            .iter()
            .take_while(|(due, _)| *due <= now)
            .map(|(_, k)| k.clone())
            .collect();
        stale.sort();
        for k in stale {
            self.requeue(&k, now);
        }
    }

    /// When the queue next needs a `flush` (None: only events can make progress).
    pub fn next_wakeup(&self) -> Option<Duration> {
        let backoff = self.backoff_due.first().map(|(t, _)| *t);
        let unschedulable = self.unschedulable_due.first().map(|(t, _)| *t);
        match (backoff, unschedulable) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether a pod is ready to pop now.
    pub fn has_ready(&self) -> bool {
        !self.active.is_empty() || (self.config.pop_from_backoff_q && !self.early.is_empty())
    }

    /// Test support: every ordered set holds exactly what a scan of the entries would find.
    #[cfg(test)]
    fn assert_filed(&self) {
        let mut want = SchedulingQueue::new(self.config.clone());
        for (k, e) in &self.entries {
            let f = self.filing(k, e);
            want.file(f);
        }
        assert_eq!(self.active, want.active, "activeQ");
        assert_eq!(self.backoff_due, want.backoff_due, "backoffQ");
        assert_eq!(self.early, want.early, "early pops");
        assert_eq!(self.unschedulable_due, want.unschedulable_due, "pool");
        assert_eq!(self.waiting, want.waiting, "waiting");
    }
}

/// The first multiple of `period` that is ≥ `t`.
fn tick_at_or_after(t: Duration, period: Duration) -> Duration {
    let p = period.as_nanos().max(1);
    let n = t.as_nanos().div_ceil(p);
    duration_from_nanos(n.saturating_mul(p))
}

/// The first multiple of `period` that is > `t` (upstream compares with a strict `>`).
fn tick_after(t: Duration, period: Duration) -> Duration {
    let p = period.as_nanos().max(1);
    let n = t.as_nanos().checked_div(p).unwrap_or(0).saturating_add(1);
    duration_from_nanos(n.saturating_mul(p))
}

/// A span of `nanos`, saturating at `Duration::MAX` (a configured timeout of centuries must not
/// wrap around to a tick in the past).
fn duration_from_nanos(nanos: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    match u64::try_from(nanos / NANOS_PER_SEC) {
        Ok(secs) => Duration::new(secs, (nanos % NANOS_PER_SEC) as u32),
        Err(_) => Duration::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: u64) -> Duration {
        Duration::from_secs(x)
    }
    fn plugins(p: &[Plugin]) -> BTreeSet<Plugin> {
        p.iter().copied().collect()
    }

    #[test]
    fn backoff_doubles_to_max() {
        let q = SchedulingQueue::new(QueueConfig::default());
        let got: Vec<u64> = (0..7).map(|c| q.backoff_duration(c).as_secs()).collect();
        assert_eq!(got, vec![0, 1, 2, 4, 8, 10, 10]);
    }

    #[test]
    fn priority_then_fifo() {
        let mut q = SchedulingQueue::new(QueueConfig::default());
        q.add("ns/a", 0, s(0));
        q.add("ns/b", 10, s(1));
        q.add("ns/c", 0, s(2));
        assert_eq!(q.pop(s(3)).as_deref(), Some("ns/b"));
        assert_eq!(q.pop(s(3)).as_deref(), Some("ns/a"));
        assert_eq!(q.pop(s(3)).as_deref(), Some("ns/c"));
        assert_eq!(q.pop(s(3)), None);
    }

    #[test]
    fn unschedulable_waits_for_a_helpful_event() {
        let mut q = SchedulingQueue::new(QueueConfig::default());
        q.add("ns/p", 0, s(0));
        assert_eq!(q.pop(s(0)).as_deref(), Some("ns/p"));
        q.failed("ns/p", plugins(&[Plugin::TaintToleration]), s(0));
        assert_eq!(q.location("ns/p"), Some(Location::Unschedulable));
        assert_eq!(q.pop(s(5)), None);
        // An event that does not help (hint says no) leaves it.
        q.on_cluster_event(s(6), |_, r| r.contains(&Plugin::NodeResourcesFit));
        assert_eq!(q.location("ns/p"), Some(Location::Unschedulable));
        // A helpful event after the 1 s backoff moves it to activeQ.
        q.on_cluster_event(s(7), |_, r| r.contains(&Plugin::TaintToleration));
        assert_eq!(q.location("ns/p"), Some(Location::Active));
        assert_eq!(q.pop(s(7)).as_deref(), Some("ns/p"));
    }

    #[test]
    fn event_during_backoff_goes_to_backoff_and_pops_when_idle() {
        let mut q = SchedulingQueue::new(QueueConfig::default());
        q.add("ns/p", 0, s(0));
        q.pop(s(0));
        q.failed("ns/p", plugins(&[Plugin::NodeResourcesFit]), s(10));
        q.pop(s(10));
        q.failed("ns/p", plugins(&[Plugin::NodeResourcesFit]), s(10)); // 2 failures: 2 s backoff
        q.on_cluster_event(s(10), |_, _| true);
        assert_eq!(q.location("ns/p"), Some(Location::Backoff));
        // SchedulerPopFromBackoffQ: activeQ is empty, so the pod is popped at once.
        assert_eq!(q.pop(s(10)).as_deref(), Some("ns/p"));

        let mut q = SchedulingQueue::new(QueueConfig {
            pop_from_backoff_q: false,
            ..Default::default()
        });
        q.add("ns/p", 0, s(0));
        q.pop(s(0));
        q.failed(
            "ns/p",
            plugins(&[Plugin::NodeResourcesFit]),
            Duration::from_millis(10_500),
        );
        q.on_cluster_event(s(11), |_, _| true);
        assert_eq!(q.pop(s(11)), None);
        // backoff 1 s expires at 11.5 s; flushed on the next 1 s tick (12 s)
        assert_eq!(q.next_wakeup(), Some(s(12)));
        assert_eq!(q.pop(Duration::from_millis(11_900)), None);
        assert_eq!(q.pop(s(12)).as_deref(), Some("ns/p"));
    }

    #[test]
    fn event_while_in_flight_sends_failure_to_backoff() {
        let mut q = SchedulingQueue::new(QueueConfig {
            pop_from_backoff_q: false,
            ..Default::default()
        });
        q.add("ns/p", 0, s(0));
        q.pop(s(0));
        q.on_cluster_event(s(0), |_, _| false);
        q.failed("ns/p", plugins(&[Plugin::TaintToleration]), s(0));
        assert_eq!(q.location("ns/p"), Some(Location::Backoff));
        assert_eq!(q.next_wakeup(), Some(s(1)));

        // Only events after a pod's own pop count for it: `a` was popped before the event,
        // `b` after it; `c` saw no event but was itself updated while in flight.
        let mut q = SchedulingQueue::new(QueueConfig::default());
        for k in ["ns/a", "ns/b", "ns/c"] {
            q.add(k, 0, s(0));
        }
        assert_eq!(q.pop(s(0)).as_deref(), Some("ns/a"));
        q.on_cluster_event(s(0), |_, _| false);
        assert_eq!(q.pop(s(0)).as_deref(), Some("ns/b"));
        q.failed("ns/b", plugins(&[Plugin::TaintToleration]), s(0));
        assert_eq!(q.location("ns/b"), Some(Location::Unschedulable));
        q.failed("ns/a", plugins(&[Plugin::TaintToleration]), s(0));
        assert_eq!(q.location("ns/a"), Some(Location::Backoff));
        assert_eq!(q.pop(s(0)).as_deref(), Some("ns/c"));
        q.update("ns/c", 0, s(0));
        q.failed("ns/c", plugins(&[Plugin::TaintToleration]), s(0));
        assert_eq!(q.location("ns/c"), Some(Location::Backoff));
        q.assert_filed();
    }

    #[test]
    fn error_backoff_is_not_popped_early() {
        let mut q = SchedulingQueue::new(QueueConfig::default());
        q.add("ns/p", 0, s(0));
        q.pop(s(0));
        q.failed("ns/p", BTreeSet::new(), s(0));
        assert_eq!(q.location("ns/p"), Some(Location::Backoff));
        assert!(!q.has_ready());
        assert_eq!(q.pop(s(0)), None);
        assert_eq!(q.next_wakeup(), Some(s(1)));
        assert_eq!(q.pop(s(1)).as_deref(), Some("ns/p"));
    }

    proptest::proptest! {
        /// Random sequences of queue operations at random (monotonic) times: after each one,
        /// every ordered set agrees with a scan of the entries, and a pop takes activeQ's head
        /// or, with activeQ empty, the early-pop head of backoffQ.
        #[test]
        fn ordered_sets_always_match_the_entries(
            ops in proptest::collection::vec((0u8..8, 0usize..6, -2i32..3, 0u64..40_000), 1..200),
        ) {
            let mut q = SchedulingQueue::new(QueueConfig::default());
            let mut now = Duration::ZERO;
            let mut in_flight: Vec<PodKey> = Vec::new();
            for (op, pod, prio, step) in ops {
                now = now.saturating_add(Duration::from_millis(step));
                let key = format!("ns/p{pod}");
                match op {
                    0 | 1 => q.add(&key, prio, now),
                    2 => q.update(&key, prio, now),
                    3 => q.delete(&key),
                    4 => {
                        if let Some(k) = q.pop(now) {
                            proptest::prop_assert_eq!(q.location(&k), Some(Location::InFlight));
                            in_flight.push(k);
                        }
                    }
                    5 => {
                        if let Some(k) = in_flight.pop() {
                            let rejectors = if prio < 0 {
                                BTreeSet::new()
                            } else {
                                plugins(&[Plugin::NodeResourcesFit])
                            };
                            q.failed(&k, rejectors, now);
                        }
                    }
                    6 => q.on_cluster_event(now, |k, _| k.ends_with(&pod.to_string())),
                    _ => q.flush(now),
                }
                q.assert_filed();
                let due = q.next_wakeup();
                proptest::prop_assert!(due.is_none_or(|d| d > now || op != 7));
            }
        }
    }

    #[test]
    fn leftover_flush_after_five_minutes() {
        let mut q = SchedulingQueue::new(QueueConfig::default());
        q.add("ns/p", 0, s(0));
        q.pop(s(0));
        q.failed("ns/p", plugins(&[Plugin::TaintToleration]), s(3));
        // 3 s + 300 s = 303 s → first 30 s tick strictly after it is 330 s.
        assert_eq!(q.next_wakeup(), Some(s(330)));
        assert_eq!(q.pop(s(329)), None);
        assert_eq!(q.pop(s(330)).as_deref(), Some("ns/p"));
    }
}
