//! The reconcile loop every controller runs: informer subscriptions in a fixed priority order
//! feed a synchronous handler that enqueues keys; due timers join them; once every source has
//! synced, the dirty keys are reconciled first in, first out. A failed reconcile is retried
//! after [`RETRY_AFTER`] by the queue.
//!
//! Ordering rules (determinism): notices are taken from the first source that has one, starting
//! again from the first source after each (`select! { biased; }` semantics), and every notice
//! already delivered is handled before the next key is reconciled, so a reconcile sees a store no
//! older than the notices it was queued for.
//!
//! Notices are handled between two reconciles, not only once the queue is empty: upstream's
//! handlers run as notices arrive, beside the workers. A notice waiting in its subscription holds
//! the object's old and new versions; were notices handled only once the queue is empty, a
//! queue of ReplicaSets creating their pods in batches (seconds, during which every pod created
//! is bound, started and updated) would keep several versions of each pod of a starting cluster.

use std::fmt::Display;
use std::future::Future;
use std::task::{Context, Poll};
use std::time::Duration;

use jiff::Timestamp;
use klab_api::Clock;
use kube::Resource;

use crate::informer::{Change, Notice, SharedInformer, Subscription};
use crate::queue::WorkQueue;
use crate::store::ObjKey;

/// A failed reconcile runs again this long after (fixed, so that sim stays deterministic).
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// A controller on the runtime: `handle` turns an informer change into queued keys (it must not
/// do I/O: upstream's event handlers only enqueue), `reconcile` brings one key's world in line.
/// The controller owns its [`WorkQueue`] (handlers and reconciles queue keys and timers on it);
/// the loop pops it.
pub trait Reconcile: Send {
    /// The controller's union of the changes of the informers it subscribes to.
    type Event: Send + 'static;
    type Error: Display + Send;

    fn queue(&mut self) -> &mut WorkQueue;

    fn handle(&mut self, ev: Self::Event);

    fn reconcile(&mut self, key: ObjKey) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Work not tied to one key, run at every turn of the loop once every source has synced:
    /// after the notices delivered so far are handled and before the next key is reconciled
    /// (e.g. releasing finalizers of pods whose owner is gone). It runs once per reconcile, so
    /// it must be cheap when it has nothing to do.
    fn before_reconcile(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// The earliest instant at which `before_reconcile` has timed work of its own (work kept
    /// outside the queue, e.g. a second queue of other keys); the loop wakes for it.
    fn next_timer(&mut self) -> Option<Timestamp> {
        None
    }
}

/// What one poll of a source produced.
enum Item<E> {
    Event(E),
    Synced,
    Ended,
}

trait Source<E>: Send {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Item<E>>;
    fn try_next(&mut self) -> Option<Item<E>>;
    fn resource(&self) -> String;
}

struct Sub<K, E> {
    sub: Subscription<K>,
    wrap: fn(Change<K>) -> E,
}

impl<K: Resource<DynamicType = ()> + Send + Sync, E> Sub<K, E> {
    fn item(&self, n: Option<Notice<K>>) -> Item<E> {
        match n {
            Some(Notice::Changed(c)) => Item::Event((self.wrap)(c)),
            Some(Notice::Synced) => Item::Synced,
            None => Item::Ended,
        }
    }
}

impl<K: Resource<DynamicType = ()> + Send + Sync, E: Send> Source<E> for Sub<K, E> {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Item<E>> {
        self.sub.poll_recv(cx).map(|n| self.item(n))
    }
    fn try_next(&mut self) -> Option<Item<E>> {
        self.sub.try_recv().map(|n| self.item(Some(n)))
    }
    fn resource(&self) -> String {
        K::plural(&()).into_owned()
    }
}

/// A controller's subscriptions, in priority order.
pub struct Sources<E> {
    list: Vec<(Box<dyn Source<E>>, bool)>,
}

impl<E: Send + 'static> Default for Sources<E> {
    fn default() -> Self {
        Sources { list: Vec::new() }
    }
}

impl<E: Send + 'static> Sources<E> {
    /// Subscribes to `informer`; its changes reach the controller as `wrap(change)`. Sources
    /// added first are served first.
    pub fn add<K>(mut self, informer: &SharedInformer<K>, wrap: fn(Change<K>) -> E) -> Self
    where
        K: Resource<DynamicType = ()> + Send + Sync + 'static,
    {
        let sub = Sub {
            sub: informer.subscribe(),
            wrap,
        };
        self.list.push((Box::new(sub), false));
        self
    }

    /// Whether every source's informer has synced.
    pub fn synced(&self) -> bool {
        self.list.iter().all(|(_, s)| *s)
    }

    /// Waits for the next notice of any source, the first source first.
    async fn next(&mut self) -> (usize, Item<E>) {
        std::future::poll_fn(|cx| {
            for (i, (s, _)) in self.list.iter_mut().enumerate() {
                if let Poll::Ready(item) = s.poll(cx) {
                    return Poll::Ready((i, item));
                }
            }
            Poll::Pending
        })
        .await
    }

    /// A notice already delivered, the first source first.
    fn try_next(&mut self) -> Option<(usize, Item<E>)> {
        self.list
            .iter_mut()
            .enumerate()
            .find_map(|(i, (s, _))| s.try_next().map(|item| (i, item)))
    }

    /// Hands a notice to the controller; `Err` when a source ended (its informer is gone).
    fn deliver<C: Reconcile<Event = E>>(
        &mut self,
        (i, item): (usize, Item<E>),
        c: &mut C,
    ) -> Result<(), String> {
        match item {
            Item::Event(e) => c.handle(e),
            Item::Synced => {
                if let Some((_, s)) = self.list.get_mut(i) {
                    *s = true;
                }
            }
            Item::Ended => {
                let what = self
                    .list
                    .get(i)
                    .map(|(s, _)| s.resource())
                    .unwrap_or_default();
                return Err(format!("the {what} informer stopped"));
            }
        }
        Ok(())
    }
}

/// Sleeps until `deadline` in the objects' timeline, or for ever when there is none.
pub async fn sleep_until(clock: &Clock, deadline: Option<Timestamp>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(clock.runtime_instant_at(t)).await,
        None => std::future::pending::<()>().await,
    }
}

/// Runs controller `c` on `sources` until a source ends (never, while its informer runs).
pub async fn run<C: Reconcile>(
    clock: Clock,
    mut sources: Sources<C::Event>,
    c: &mut C,
) -> Result<(), String> {
    loop {
        // Wait only when there is nothing to reconcile yet.
        if !sources.synced() || c.queue().is_empty() {
            let deadline = match (c.queue().next_deadline(), c.next_timer()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let item = tokio::select! {
                biased;
                item = sources.next() => Some(item),
                _ = sleep_until(&clock, deadline) => None,
            };
            if let Some(item) = item {
                sources.deliver(item, c)?;
            }
        }
        // Take in everything the informers already delivered (during the last reconcile, or
        // with the notice just awaited) before acting on it; the keys it adds, and the timers
        // now due, queue behind the keys already waiting.
        while let Some(item) = sources.try_next() {
            sources.deliver(item, c)?;
        }
        c.queue().fire_due(clock.now());
        if !sources.synced() {
            continue;
        }
        c.before_reconcile().await;
        if let Some(key) = c.queue().pop() {
            let res = c.reconcile(key.clone()).await;
            if let Err(e) = res {
                tracing::debug!(namespace = %key.0, name = %key.1, error = %e, "sync failed; retrying");
                c.queue().add_after(key.clone(), clock.now(), RETRY_AFTER);
            }
            c.queue().done(&key);
        }
    }
}
