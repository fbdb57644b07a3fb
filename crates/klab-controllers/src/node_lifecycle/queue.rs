//! The per-zone rate-limited timed queue of NoExecute tainting (upstream `RateLimitedTimedQueue`
//! with a `tokenBucketRateLimiter`, burst 1) as a pure data structure driven by `now`.
//!
//! Upstream's `Try(fn)` holds a lock while calling `fn` for each due item; here the shell drives the
//! same loop step by step so that `fn` can be async: `next_due(now)` (limiter + due check, exactly
//! the order upstream uses), then `complete(value, outcome, now)`.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// One queued node (`TimedValue`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimedValue {
    /// The node name.
    pub value: String,
    /// The node UID at enqueue time.
    pub uid: String,
    pub added_at: Timestamp,
    pub process_at: Timestamp,
}

/// A token bucket with burst 1 (golang.org/x/time/rate semantics), or the "never" limiter installed
/// for a rate of 0.
#[derive(Clone, Debug, PartialEq)]
pub enum Limiter {
    /// Accepts at `qps` per second; the bucket starts full.
    TokenBucket {
        qps: f32,
        tokens: f64,
        last: Option<Timestamp>,
    },
    /// Never accepts. Quirk kept from upstream: it reports `QPS() == 1`.
    Never,
    /// Always accepts (upstream `NewFakeAlwaysRateLimiter`, used by tests); reports `QPS() == 1`.
    Always,
}

/// The rate limiter burst of NLC (`EvictionRateLimiterBurst`).
pub const BURST: f64 = 1.0;

impl Limiter {
    /// `qps <= 0` gives the never limiter (`flowcontrol.NewFakeNeverRateLimiter`).
    pub fn new(qps: f32) -> Self {
        if qps <= 0.0 {
            Limiter::Never
        } else {
            Limiter::TokenBucket {
                qps,
                tokens: BURST,
                last: None,
            }
        }
    }

    /// The rate the limiter reports (`QPS()`); the never limiter reports 1.
    pub fn qps(&self) -> f32 {
        match self {
            Limiter::TokenBucket { qps, .. } => *qps,
            Limiter::Never | Limiter::Always => 1.0,
        }
    }

    /// Takes one token if available now (`TryAccept` = `AllowN(now, 1)`); state changes only on
    /// success, as in x/time/rate.
    pub fn try_accept(&mut self, now: Timestamp) -> bool {
        match self {
            Limiter::Never => false,
            Limiter::Always => true,
            Limiter::TokenBucket { qps, tokens, last } => {
                let elapsed = match last {
                    // A `now` before `last` counts as no time elapsed (rate.Limiter's advance).
                    Some(l) if now > *l => nanos_as_secs(now.duration_since(*l)),
                    Some(_) => 0.0,
                    None => f64::INFINITY,
                };
                let available = (*tokens + elapsed * f64::from(*qps)).min(BURST);
                if available >= 1.0 {
                    *tokens = available - 1.0;
                    *last = Some(now);
                    true
                } else {
                    false
                }
            }
        }
    }
}

fn nanos_as_secs(d: SignedDuration) -> f64 {
    d.as_nanos() as f64 / 1e9
}

/// One zone's queue of nodes waiting for their NoExecute taint.
#[derive(Clone, Debug)]
pub struct RateLimitedTimedQueue {
    /// Ordered by `process_at`, ties in insertion order (upstream's heap leaves ties unspecified).
    items: Vec<(TimedValue, u64)>,
    set: BTreeSet<String>,
    seq: u64,
    limiter: Limiter,
}

/// What processing one item returned (upstream `ActionFunc`'s `(bool, time.Duration)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done: the item leaves the heap but stays in the de-duplication set.
    Done,
    /// Retry after this delay (+1 ns, as upstream).
    RetryAfter(Duration),
}

impl RateLimitedTimedQueue {
    pub fn new(qps: f32) -> Self {
        RateLimitedTimedQueue {
            items: Vec::new(),
            set: BTreeSet::new(),
            seq: 0,
            limiter: Limiter::new(qps),
        }
    }

    /// A queue with a given limiter (tests use [`Limiter::Always`]).
    pub fn with_limiter(limiter: Limiter) -> Self {
        RateLimitedTimedQueue {
            items: Vec::new(),
            set: BTreeSet::new(),
            seq: 0,
            limiter,
        }
    }

    pub fn limiter(&self) -> &Limiter {
        &self.limiter
    }

    /// `Add`: false if the value is already in the set (queued, or processed and not yet removed).
    pub fn add(&mut self, value: &str, uid: &str, now: Timestamp) -> bool {
        if self.set.contains(value) {
            return false;
        }
        self.set.insert(value.to_string());
        let item = TimedValue {
            value: value.to_string(),
            uid: uid.to_string(),
            added_at: now,
            process_at: now,
        };
        self.push(item);
        true
    }

    fn push(&mut self, item: TimedValue) {
        self.seq = self.seq.saturating_add(1);
        let key = (item.process_at, self.seq);
        let pos = self
            .items
            .partition_point(|(it, s)| (it.process_at, *s) <= key);
        self.items.insert(pos, (item, self.seq));
    }

    /// `Remove`: drops the value from both the set and the heap; false if it was not in the set.
    pub fn remove(&mut self, value: &str) -> bool {
        if !self.set.remove(value) {
            return false;
        }
        self.items.retain(|(it, _)| it.value != value);
        true
    }

    /// `Clear`: empties the queue and the set.
    pub fn clear(&mut self) {
        self.items.clear();
        self.set.clear();
    }

    /// Whether the value is in the de-duplication set.
    pub fn contains(&self, value: &str) -> bool {
        self.set.contains(value)
    }

    /// The queued items in processing order.
    pub fn items(&self) -> Vec<&TimedValue> {
        self.items.iter().map(|(it, _)| it).collect()
    }

    /// One step of `Try`: the head if the limiter grants a token (consumed even if the head is not
    /// yet due — upstream's order) and the head is due. `None` ends this `Try`.
    pub fn next_due(&mut self, now: Timestamp) -> Option<TimedValue> {
        let head = self.items.first().map(|(it, _)| it.clone())?;
        if !self.limiter.try_accept(now) {
            return None;
        }
        if now < head.process_at {
            return None;
        }
        Some(head)
    }

    /// Finishes processing `item` (taken from `next_due`). A retried item is re-positioned only if
    /// it is still in the set (`Replace` is a no-op for a value removed meanwhile); a done item
    /// leaves the heap but stays in the set (`RemoveFromQueue`).
    pub fn complete(&mut self, item: &TimedValue, outcome: Outcome, now: Timestamp) {
        match outcome {
            Outcome::Done => self.items.retain(|(it, _)| it.value != item.value),
            Outcome::RetryAfter(wait) => {
                if !self.set.contains(&item.value) {
                    return;
                }
                let Some(pos) = self.items.iter().position(|(it, _)| it.value == item.value) else {
                    return;
                };
                let (mut it, _) = self.items.remove(pos);
                let wait = SignedDuration::try_from(wait).unwrap_or(SignedDuration::MAX);
                // Saturating: a wait to the end of time must neither overflow nor retry at once.
                it.process_at = now
                    .checked_add(wait.saturating_add(SignedDuration::from_nanos(1)))
                    .unwrap_or(Timestamp::MAX);
                self.push(it);
            }
        }
    }

    /// `SwapLimiter(qps)`: no-op when the current limiter reports the same QPS (so a never limiter,
    /// which reports 1, is not replaced by a rate of exactly 1.0 — upstream quirk); a rate ≤ 0
    /// installs a new never limiter; otherwise a new full bucket, drained by one token if the old
    /// limiter had no token available right now.
    pub fn swap_limiter(&mut self, qps: f32, now: Timestamp) {
        if self.limiter.qps() == qps {
            return;
        }
        if qps <= 0.0 {
            self.limiter = Limiter::Never;
            return;
        }
        let mut new = Limiter::new(qps);
        if !self.limiter.try_accept(now) {
            new.try_accept(now);
        }
        self.limiter = new;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(1_420_113_600_000 + ms).unwrap()
    }

    fn values(q: &RateLimitedTimedQueue) -> Vec<String> {
        q.items().iter().map(|i| i.value.clone()).collect()
    }

    /// Drives one `Try` with a processing function, as the shell does.
    fn try_all(
        q: &mut RateLimitedTimedQueue,
        now: Timestamp,
        mut f: impl FnMut(&TimedValue, &mut RateLimitedTimedQueue) -> Outcome,
    ) {
        while let Some(item) = q.next_due(now) {
            let out = f(&item, q);
            q.complete(&item, out, now);
        }
    }

    #[test]
    fn cp38a_remove_from_queue_and_set() {
        let mut q = RateLimitedTimedQueue::new(10.0);
        for v in ["first", "second", "third"] {
            assert!(q.add(v, "", t(0)));
        }
        assert!(!q.add("first", "", t(0)), "duplicate add is a no-op");
        assert!(q.remove("first"));
        assert_eq!(values(&q), ["second", "third"]);
        assert!(!q.contains("first") && q.contains("second") && q.contains("third"));
        assert!(!q.remove("first"));
    }

    #[test]
    fn cp38b_try_processes_remaining_items() {
        let mut q = RateLimitedTimedQueue::with_limiter(Limiter::Always);
        for v in ["first", "second", "third"] {
            q.add(v, "", t(0));
        }
        q.remove("second");
        let mut seen = Vec::new();
        try_all(&mut q, t(0), |it, _| {
            seen.push(it.value.clone());
            Outcome::Done
        });
        assert_eq!(seen, ["first", "third"]);
        assert!(q.items().is_empty());
        assert!(q.contains("first"), "processed items stay in the set");
    }

    /// A retry after the longest wait neither overflows (`wait + 1ns` panicked for a wait of
    /// SignedDuration::MAX) nor comes back at once: it waits to the end of time.
    #[test]
    fn retry_after_the_longest_wait_saturates() {
        let mut q = RateLimitedTimedQueue::with_limiter(Limiter::Always);
        q.add("x", "", t(0));
        try_all(&mut q, t(1), |_, _| Outcome::RetryAfter(Duration::MAX));
        assert_eq!(q.items()[0].process_at, Timestamp::MAX);
        assert!(q.next_due(t(2)).is_none());
    }

    #[test]
    fn cp38c_retry_requeues_with_wait_plus_one_nanosecond() {
        let mut q = RateLimitedTimedQueue::with_limiter(Limiter::Always);
        for v in ["first", "second", "third"] {
            q.add(v, "", t(0));
        }
        let mut calls = 0;
        let mut done = Vec::new();
        let now = t(1);
        try_all(&mut q, now, |it, _| {
            calls += 1;
            if it.value == "second" {
                Outcome::RetryAfter(Duration::from_millis(2))
            } else {
                done.push(it.value.clone());
                Outcome::Done
            }
        });
        assert_eq!(calls, 3);
        assert_eq!(done, ["first", "third"]);
        let items = q.items();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].value, "second");
        assert_eq!(
            items[0].process_at,
            now + SignedDuration::from_nanos(2_000_001)
        );
        assert!(q.next_due(t(2)).is_none(), "not yet due");
    }

    #[test]
    fn cp38d_removed_while_processing_is_not_retried() {
        let mut q = RateLimitedTimedQueue::with_limiter(Limiter::Always);
        for v in ["first", "second", "third"] {
            q.add(v, "", t(0));
        }
        let mut done = Vec::new();
        try_all(&mut q, t(0), |it, q| {
            if it.value == "second" {
                q.remove("second");
                Outcome::RetryAfter(Duration::ZERO)
            } else {
                done.push(it.value.clone());
                Outcome::Done
            }
        });
        assert_eq!(done, ["first", "third"]);
        assert!(q.items().is_empty());
    }

    #[test]
    fn cp38e_add_after_try_is_noop_until_removed() {
        let mut q = RateLimitedTimedQueue::with_limiter(Limiter::Always);
        q.add("first", "", t(0));
        try_all(&mut q, t(0), |_, _| Outcome::Done);
        assert!(!q.add("first", "", t(1)));
        assert!(q.next_due(t(1)).is_none());
        assert!(q.remove("first"));
        assert!(q.add("first", "", t(2)));
        assert_eq!(q.next_due(t(2)).map(|i| i.value), Some("first".into()));
    }

    #[test]
    fn cp38fg_swap_limiter() {
        let mut q = RateLimitedTimedQueue::new(0.1);
        q.swap_limiter(0.0, t(0));
        assert_eq!(q.limiter(), &Limiter::Never);
        assert_eq!(q.limiter().qps(), 1.0);
        // Quirk (g): the never limiter reports 1, so a swap to 1.0 is a no-op.
        q.swap_limiter(1.0, t(0));
        assert_eq!(q.limiter(), &Limiter::Never);
        q.swap_limiter(5.5, t(0));
        assert_eq!(q.limiter().qps(), 5.5);
    }

    #[test]
    fn token_bucket_rate_and_token_consumed_when_head_not_due() {
        let mut q = RateLimitedTimedQueue::new(0.1);
        q.add("a", "", t(0));
        q.add("b", "", t(0));
        assert_eq!(q.next_due(t(0)).map(|i| i.value.clone()), Some("a".into()));
        let a = q.items()[0].clone();
        q.complete(&a, Outcome::Done, t(0));
        // The next token arrives 10 s later (rate 0.1/s, burst 1).
        assert!(q.next_due(t(9_900)).is_none());
        assert_eq!(q.next_due(t(10_000)).map(|i| i.value), Some("b".into()));
        // A head that is not due still consumes the token.
        let mut q = RateLimitedTimedQueue::new(0.1);
        q.add("x", "", t(0));
        let x = q.items()[0].clone();
        q.complete(&x, Outcome::RetryAfter(Duration::from_millis(50)), t(0));
        assert!(q.next_due(t(0)).is_none(), "token taken, head not due");
        assert!(q.next_due(t(100)).is_none(), "no token for 10 s");
        assert!(q.next_due(t(10_000)).is_some());
    }

    #[test]
    fn cp31_swap_to_secondary_rate_keeps_full_bucket_or_drains() {
        // Old bucket still has its token: the new bucket starts full.
        let mut q = RateLimitedTimedQueue::new(0.1);
        q.swap_limiter(0.01, t(55_000));
        q.add("n", "", t(60_000));
        assert!(q.next_due(t(60_000)).is_some());
        // Old bucket empty: the new bucket is drained by one token (next token 1/q later).
        let mut q = RateLimitedTimedQueue::new(0.1);
        assert!(q.limiter.try_accept(t(50_000)));
        q.swap_limiter(0.01, t(55_000));
        q.add("n", "", t(60_000));
        assert!(q.next_due(t(60_000)).is_none());
        assert!(q.next_due(t(154_900)).is_none());
        // The rate is a float32 flag widened to float64 as upstream does (0.01f32 < 0.01), so the
        // token arrives 2.2 µs after 100 s: the tainting tick at 155.0 just misses it.
        assert!(q.next_due(t(155_000)).is_none());
        assert!(q.next_due(t(155_100)).is_some());
    }
}
