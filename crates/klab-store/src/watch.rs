//! Watch fan-out shared by the backends: the per-watcher live queues (`Hub`) and the stream that
//! chains a history replay with the live queue without gap or duplicate (`feed`).
//!
//! Design:
//! * Every watcher owns a bounded queue. The backend publishes each committed event to the
//!   watchers whose prefix matches, while holding the same lock under which watchers register, so
//!   a watcher sees every event published after its registration.
//! * Filtering happens on the publishing side, so a slow Pod watcher is not pushed into lag by
//!   unrelated Lease traffic.
//! * A full queue means the watcher fell too far behind: the hub drops its sender and records the
//!   first revision it could not deliver. The stream then yields what was queued (no gap), then
//!   `Err(StoreError::Lagged(rev))`, then ends. Memory stays bounded by the queue capacity.
//! * Events are shared as `Arc<Event>` between the history, the hub and all queues.
//! * A watcher may carry a [`Trigger`] (an index function and the value it waits for): the hub
//!   computes each event's index values once and offers it only to the watchers filed under them.
//!   A trigger only narrows what is offered, never what a watcher's own filter would keep: the
//!   API server gives one only for a selector that pins the same field.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use tokio::sync::mpsc;

use crate::{Event, Result, Revision, StoreError, Trigger, TriggerFn, WatchStream};

/// Default capacity of a watcher's live queue, in events. Generous: a watcher only lags if it
/// stops reading while this many matching events are committed.
pub const DEFAULT_WATCH_BUFFER: usize = 65_536;

/// Shared between the hub and one stream: 0 while healthy, else the first revision not delivered.
type LagFlag = Arc<AtomicU64>;

struct Subscriber {
    prefix: String,
    /// Where the subscriber is filed when it has a trigger: (prefix, index name, value).
    trigger: Option<(String, &'static str, String)>,
    tx: mpsc::Sender<Arc<Event>>,
    lag: LagFlag,
}

/// Watchers with a trigger on one index under one prefix, by the value they wait for.
struct TriggerGroup {
    func: TriggerFn,
    /// Index value → registration numbers.
    by_value: BTreeMap<String, BTreeSet<u64>>,
    /// Every watcher of the group: an event whose value cannot be computed goes to all of them.
    all: BTreeSet<u64>,
}

/// The registered watchers of one store. The owner keeps it under the lock it publishes under.
///
/// Watchers are numbered in registration order and every event is delivered in that order (so the
/// order in which their tasks wake, and with it a sim run, does not depend on how they are
/// filed). A watcher without a trigger is offered every event; one with a trigger is filed under
/// its (prefix, index, value) and offered only the events whose old or new value files under the
/// same value — each event's index values are computed once, however many watchers there are
/// (upstream's watch cache trigger functions: 5 000 kubelets watching pods by node do not each
/// look at every pod change).
#[derive(Default)]
pub(crate) struct Hub {
    subscribers: BTreeMap<u64, Subscriber>,
    /// Registration numbers of the watchers without a trigger, by the prefix they watch: an
    /// event is offered only to the watchers of its key's prefixes, found by looking the key's
    /// first `n` bytes up for each length `n` some prefix has, so a Lease renewal never visits
    /// the 5 000 kubelets' pod watches.
    plain: BTreeMap<String, BTreeSet<u64>>,
    /// The lengths of the prefixes in `plain`, with how many prefixes have each.
    plain_lengths: BTreeMap<usize, usize>,
    /// (prefix, index name) → the watchers with that trigger.
    triggered: BTreeMap<(String, &'static str), TriggerGroup>,
    next: u64,
    /// Events offered to watchers so far (one per watcher an event was queued for or examined
    /// against its prefix), for tests and benchmarks.
    offered: u64,
}

/// The receiving half of one registration, turned into a stream by [`feed`].
pub(crate) struct Subscription {
    rx: mpsc::Receiver<Arc<Event>>,
    lag: LagFlag,
}

/// How often (in registrations) closed watchers that no event reached are swept out.
const SWEEP_EVERY: u64 = 64;

impl Hub {
    /// Registers a watcher of `prefix` (offered only the events matching `trigger`, if any) whose
    /// live queue holds at most `capacity` events.
    pub(crate) fn subscribe_triggered(
        &mut self,
        prefix: &str,
        trigger: Option<&Trigger>,
        capacity: usize,
    ) -> Subscription {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let lag = LagFlag::default();
        let seq = self.next;
        self.next = self.next.wrapping_add(1);
        if seq % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.sweep();
        }
        let filed = trigger.map(|t| (prefix.to_owned(), t.index.name, t.value.clone()));
        match trigger {
            Some(t) => {
                let group = self
                    .triggered
                    .entry((prefix.to_owned(), t.index.name))
                    .or_insert_with(|| TriggerGroup {
                        func: t.index.func,
                        by_value: BTreeMap::new(),
                        all: BTreeSet::new(),
                    });
                group
                    .by_value
                    .entry(t.value.clone())
                    .or_default()
                    .insert(seq);
                group.all.insert(seq);
            }
            None => {
                let seqs = self.plain.entry(prefix.to_owned()).or_default();
                if seqs.is_empty() {
                    *self.plain_lengths.entry(prefix.len()).or_default() += 1;
                }
                seqs.insert(seq);
            }
        }
        self.subscribers.insert(
            seq,
            Subscriber {
                prefix: prefix.to_owned(),
                trigger: filed,
                tx,
                lag: lag.clone(),
            },
        );
        Subscription { rx, lag }
    }

    /// Delivers one committed event to every matching watcher; callers publish in revision order.
    pub(crate) fn publish(&mut self, event: &Arc<Event>) {
        let key = event.key.as_str();
        let mut targets: Vec<u64> = Vec::new();
        for &len in self.plain_lengths.keys() {
            let Some(head) = key.get(..len) else {
                // Longer than the key (lengths ascend), or not at a character boundary.
                if len > key.len() {
                    break;
                }
                continue;
            };
            if let Some(seqs) = self.plain.get(head) {
                targets.extend(seqs.iter().copied());
            }
        }
        for ((prefix, _), group) in &self.triggered {
            if !event.key.starts_with(prefix.as_str()) {
                continue;
            }
            let values = [event.value.as_ref(), event.prev_value.as_ref()]
                .into_iter()
                .flatten()
                .map(|v| (group.func)(&event.key, v))
                .collect::<Vec<_>>();
            if values.iter().any(Option::is_none) {
                // Not computable (bytes the index cannot read): offered to all, whose own
                // filters decide, rather than risk losing an event.
                targets.extend(group.all.iter().copied());
                continue;
            }
            for v in values.into_iter().flatten() {
                if let Some(seqs) = group.by_value.get(&v) {
                    targets.extend(seqs.iter().copied());
                }
            }
        }
        targets.sort_unstable();
        targets.dedup();
        let mut gone = Vec::new();
        for seq in targets {
            let Some(s) = self.subscribers.get(&seq) else {
                continue;
            };
            if s.tx.is_closed() {
                gone.push(seq); // the stream was dropped
                continue;
            }
            if !event.key.starts_with(&s.prefix) {
                continue;
            }
            self.offered = self.offered.saturating_add(1);
            match s.tx.try_send(event.clone()) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    // Dropping the sender ends the stream after what is already queued.
                    s.lag.store(event.revision, Ordering::Release);
                    gone.push(seq);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => gone.push(seq),
            }
        }
        for seq in gone {
            self.remove(seq);
        }
    }

    /// Forgets watcher `seq` (its sender is dropped, which ends its stream).
    fn remove(&mut self, seq: u64) {
        let Some(s) = self.subscribers.remove(&seq) else {
            return;
        };
        if let Some(seqs) = self.plain.get_mut(&s.prefix)
            && seqs.remove(&seq)
            && seqs.is_empty()
        {
            self.plain.remove(&s.prefix);
            if let Some(n) = self.plain_lengths.get_mut(&s.prefix.len()) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.plain_lengths.remove(&s.prefix.len());
                }
            }
        }
        if let Some((prefix, name, value)) = s.trigger {
            let key = (prefix, name);
            if let Some(group) = self.triggered.get_mut(&key) {
                group.all.remove(&seq);
                if let Some(seqs) = group.by_value.get_mut(&value) {
                    seqs.remove(&seq);
                    if seqs.is_empty() {
                        group.by_value.remove(&value);
                    }
                }
                if group.all.is_empty() {
                    self.triggered.remove(&key);
                }
            }
        }
    }

    /// Drops every watcher whose stream is gone (those no event reached since).
    fn sweep(&mut self) {
        let closed: Vec<u64> = self
            .subscribers
            .iter()
            .filter(|(_, s)| s.tx.is_closed())
            .map(|(seq, _)| *seq)
            .collect();
        for seq in closed {
            self.remove(seq);
        }
    }

    /// Number of live watchers (tests and diagnostics).
    pub(crate) fn len(&self) -> usize {
        self.subscribers
            .values()
            .filter(|s| !s.tx.is_closed())
            .count()
    }

    /// Distinct prefixes of the watchers without a trigger (tests).
    #[cfg(test)]
    pub(crate) fn plain_prefixes(&self) -> usize {
        debug_assert_eq!(self.plain_lengths.values().sum::<usize>(), self.plain.len());
        self.plain.len()
    }

    /// Registrations held, closed ones not yet swept included (tests).
    #[cfg(test)]
    pub(crate) fn registered(&self) -> usize {
        self.subscribers.len()
    }

    /// Events offered to watchers so far (tests and benchmarks).
    pub(crate) fn offered(&self) -> u64 {
        self.offered
    }
}

/// Where the history part of a watch comes from.
pub(crate) trait Replay: Send + 'static {
    /// The next historical event in revision order, `None` when the history part is done.
    fn next_event(&mut self) -> Option<Result<Arc<Event>>>;
}

/// A replay fully collected up front (the memory store: collecting `Arc`s is cheap).
impl Replay for VecDeque<Arc<Event>> {
    fn next_event(&mut self) -> Option<Result<Arc<Event>>> {
        self.pop_front().map(Ok)
    }
}

struct FeedState {
    replay: Option<Box<dyn Replay>>,
    sub: Subscription,
    /// Live events at or below this revision were already covered by the replay.
    skip_through: Revision,
    done: bool,
}

/// Chains `replay` with the live queue of `sub`. Live events with revision ≤ `skip_through` are
/// dropped: the replay's snapshot may overlap the registration point (redb reads a snapshot that
/// can be newer than the last published revision), and this keeps every event exactly once.
pub(crate) fn feed(
    replay: Box<dyn Replay>,
    sub: Subscription,
    skip_through: Revision,
) -> WatchStream {
    let state = FeedState {
        replay: Some(replay),
        sub,
        skip_through,
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        if let Some(replay) = st.replay.as_mut() {
            match replay.next_event() {
                Some(Ok(ev)) => {
                    st.skip_through = st.skip_through.max(ev.revision);
                    return Some((Ok(Event::clone(&ev)), st));
                }
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
                None => st.replay = None,
            }
        }
        loop {
            match st.sub.rx.recv().await {
                Some(ev) if ev.revision <= st.skip_through => continue,
                Some(ev) => {
                    st.skip_through = ev.revision;
                    return Some((Ok(Event::clone(&ev)), st));
                }
                None => {
                    st.done = true;
                    let lag = st.sub.lag.load(Ordering::Acquire);
                    let err = if lag != 0 {
                        StoreError::Lagged(lag)
                    } else {
                        StoreError::Closed
                    };
                    return Some((Err(err), st));
                }
            }
        }
    })
    .boxed()
}
