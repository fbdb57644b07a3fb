//! The work queue of a controller: a set of dirty keys popped in key order (deduplicated, as
//! client-go's workqueue), and timed re-queues on the objects' timeline (its `AddAfter`), the
//! earliest of several requests for one key winning.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;

use crate::store::ObjKey;

/// Keys to sync now, and keys to sync at a given instant of the objects' timeline.
#[derive(Debug, Default)]
pub struct WorkQueue {
    dirty: BTreeSet<ObjKey>,
    timers: BTreeMap<ObjKey, Timestamp>,
}

impl WorkQueue {
    pub fn add(&mut self, key: ObjKey) {
        self.dirty.insert(key);
    }

    /// Re-queue at `t` (the earliest of several requests wins, like a delaying queue).
    pub fn add_at(&mut self, key: ObjKey, t: Timestamp) {
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

    /// Moves due timers into the dirty set.
    pub fn fire_due(&mut self, now: Timestamp) {
        let due: Vec<ObjKey> = self
            .timers
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in due {
            self.timers.remove(&k);
            self.dirty.insert(k);
        }
    }

    pub fn pop(&mut self) -> Option<ObjKey> {
        self.dirty.pop_first()
    }

    pub fn is_empty(&self) -> bool {
        self.dirty.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_fire_in_order_and_the_earliest_request_wins() {
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
        // Dirty keys are deduplicated and popped in key order.
        q.add(("n".into(), "z".into()));
        q.add(("n".into(), "c".into()));
        q.add(("n".into(), "z".into()));
        assert_eq!(q.pop(), Some(("n".into(), "c".into())));
        assert_eq!(q.pop(), Some(("n".into(), "z".into())));
        assert!(q.is_empty());
        // A delay past the end of time is never due.
        q.add_after(("n".into(), "x".into()), t(1), std::time::Duration::MAX);
        assert_eq!(q.next_deadline(), None);
    }
}
