//! The work queue of a controller: dirty keys popped in the order they were first added
//! (deduplicated, as client-go's workqueue: a key already waiting keeps its place), and timed
//! re-queues on the objects' timeline (its `AddAfter`), the earliest of several requests for one
//! key winning. A queue made by [`QueueMetrics::queue`](crate::metrics::QueueMetrics::queue) is
//! metered under its upstream name (adds, depth, waits, work, retries); `WorkQueue::default()`
//! is not.
//!
//! First in, first out, as upstream: the controller loop hands the queue the keys of every
//! notice as it arrives, between two reconciles, so a key added while others wait is synced
//! after them. Popped in key order instead, the keys a busy round keeps adding would starve the
//! later ones (the first ReplicaSets of a big cluster would keep the others from creating their
//! pods). The order stays deterministic: keys are added in the order of the notices and timers.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use jiff::Timestamp;

use crate::metrics::Meter;
use crate::store::ObjKey;

/// Keys to sync now, and keys to sync at a given instant of the objects' timeline.
#[derive(Debug, Default)]
pub struct WorkQueue {
    /// The keys waiting in `order` (membership only; never iterated).
    dirty: BTreeSet<ObjKey>,
    /// The waiting keys, first added first.
    order: VecDeque<ObjKey>,
    timers: BTreeMap<ObjKey, Timestamp>,
    meter: Option<Meter>,
}

impl WorkQueue {
    pub(crate) fn metered(meter: Meter) -> Self {
        WorkQueue {
            meter: Some(meter),
            ..WorkQueue::default()
        }
    }

    pub fn add(&mut self, key: ObjKey) {
        self.insert_dirty(key);
    }

    /// Marks `key` dirty; only a key not already waiting counts as an add (client-go's `Add`).
    fn insert_dirty(&mut self, key: ObjKey) {
        match &self.meter {
            Some(m) => {
                if !self.dirty.contains(&key) {
                    m.add(&key);
                    self.dirty.insert(key.clone());
                    self.order.push_back(key);
                }
            }
            None => {
                if self.dirty.insert(key.clone()) {
                    self.order.push_back(key);
                }
            }
        }
    }

    /// Re-queue at `t` (the earliest of several requests wins, like a delaying queue). Each
    /// request counts as a retry, as every `AddAfter` does upstream.
    pub fn add_at(&mut self, key: ObjKey, t: Timestamp) {
        if let Some(m) = &self.meter {
            m.retry();
        }
        let e = self.timers.entry(key).or_insert(t);
        if t < *e {
            *e = t;
        }
    }

    /// Re-queue `after` from `now`; a delay past the end of time never fires.
    pub fn add_after(&mut self, key: ObjKey, now: Timestamp, after: std::time::Duration) {
        if let Some(t) = jiff::SignedDuration::try_from(after)
            .ok()
            .and_then(|d| now.checked_add(d).ok())
        {
            self.add_at(key, t);
        }
    }

    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.timers.values().min().copied()
    }

    /// Moves due timers into the dirty set (in key order, after the keys already waiting).
    pub fn fire_due(&mut self, now: Timestamp) {
        let due: Vec<ObjKey> = self
            .timers
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in due {
            self.timers.remove(&k);
            self.insert_dirty(k);
        }
    }

    /// The next dirty key; the caller processes it and then calls [`WorkQueue::done`].
    pub fn pop(&mut self) -> Option<ObjKey> {
        let k = self.order.pop_front()?;
        self.dirty.remove(&k);
        if let Some(m) = &self.meter {
            m.get(&k);
        }
        Some(k)
    }

    /// Processing of a popped key finished (client-go's `Done`): its work time is observed.
    pub fn done(&mut self, key: &ObjKey) {
        if let Some(m) = &self.meter {
            m.done(key);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.dirty.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_pop_first_in_first_out_and_the_earliest_timer_wins() {
        let t = |s| Timestamp::from_second(s).unwrap();
        let mut q = WorkQueue::default();
        q.add_at(("n".into(), "a".into()), t(10));
        q.add_at(("n".into(), "a".into()), t(5));
        q.add_at(("n".into(), "b".into()), t(7));
        assert_eq!(q.next_deadline(), Some(t(5)));
        q.fire_due(t(6));
        assert_eq!(q.pop(), Some(("n".into(), "a".into())));
        assert!(q.pop().is_none());
        q.fire_due(t(7));
        assert_eq!(q.pop(), Some(("n".into(), "b".into())));
        assert_eq!(q.next_deadline(), None);
        // Dirty keys are deduplicated and popped first in, first out: a key added again while
        // it waits keeps its place, and one added again once popped goes to the back.
        q.add(("n".into(), "z".into()));
        q.add(("n".into(), "c".into()));
        q.add(("n".into(), "z".into()));
        assert_eq!(q.pop(), Some(("n".into(), "z".into())));
        q.add(("n".into(), "z".into()));
        q.add(("n".into(), "c".into()));
        assert_eq!(q.pop(), Some(("n".into(), "c".into())));
        assert_eq!(q.pop(), Some(("n".into(), "z".into())));
        assert!(q.is_empty());
        // Due timers join behind the keys already waiting.
        q.add(("n".into(), "y".into()));
        q.add_at(("n".into(), "b".into()), t(8));
        q.add_at(("n".into(), "a".into()), t(8));
        q.fire_due(t(8));
        assert_eq!(q.pop(), Some(("n".into(), "y".into())));
        assert_eq!(q.pop(), Some(("n".into(), "a".into())));
        assert_eq!(q.pop(), Some(("n".into(), "b".into())));
        assert!(q.is_empty());
        // A delay past the end of time is never due.
        q.add_after(("n".into(), "x".into()), t(1), std::time::Duration::MAX);
        assert_eq!(q.next_deadline(), None);
    }
}
