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

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use tokio::sync::mpsc;

use crate::{Event, Result, Revision, StoreError, WatchStream};

/// Default capacity of a watcher's live queue, in events. Generous: a watcher only lags if it
/// stops reading while this many matching events are committed.
pub const DEFAULT_WATCH_BUFFER: usize = 65_536;

/// Shared between the hub and one stream: 0 while healthy, else the first revision not delivered.
type LagFlag = Arc<AtomicU64>;

struct Subscriber {
    prefix: String,
    tx: mpsc::Sender<Arc<Event>>,
    lag: LagFlag,
}

/// The registered watchers of one store. The owner keeps it under the lock it publishes under.
#[derive(Default)]
pub(crate) struct Hub {
    subscribers: Vec<Subscriber>,
}

/// The receiving half of one registration, turned into a stream by [`feed`].
pub(crate) struct Subscription {
    rx: mpsc::Receiver<Arc<Event>>,
    lag: LagFlag,
}

impl Hub {
    /// Registers a watcher of `prefix` whose live queue holds at most `capacity` events.
    pub(crate) fn subscribe(&mut self, prefix: &str, capacity: usize) -> Subscription {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let lag = LagFlag::default();
        self.subscribers.push(Subscriber {
            prefix: prefix.to_owned(),
            tx,
            lag: lag.clone(),
        });
        Subscription { rx, lag }
    }

    /// Delivers one committed event to every matching watcher; callers publish in revision order.
    pub(crate) fn publish(&mut self, event: &Arc<Event>) {
        self.subscribers.retain(|s| {
            if s.tx.is_closed() {
                return false; // the stream was dropped
            }
            if !event.key.starts_with(&s.prefix) {
                return true;
            }
            match s.tx.try_send(event.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    // Dropping the sender ends the stream after what is already queued.
                    s.lag.store(event.revision, Ordering::Release);
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
    }

    /// Number of registered watchers (tests and diagnostics).
    pub(crate) fn len(&self) -> usize {
        self.subscribers.len()
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
