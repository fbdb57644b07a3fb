//! klab-runtime: the one way klab's controllers are built — shared informers, an ordered work
//! queue and a reconcile loop — after client-go's SharedInformerFactory, `util/workqueue` and
//! the `syncHandler(key)` shape of kube-controller-manager.
//!
//! - [`Informers`] is a process's factory: **one** list+watch per resource type, whatever the
//!   number of controllers reading it. Each [`SharedInformer`] keeps the objects once (`Arc`) in a
//!   [`store::Store`] ordered by `(namespace, name)`, with named indexes (pods by node, by
//!   controller UID, …) that controllers query instead of scanning, and fans every change out to
//!   its subscribers in subscription order.
//! - [`WorkQueue`] dedups keys, pops them first in, first out, and owns timed re-queues
//!   (`add_at`); queues made through [`Informers::queue`] are metered with client-go's
//!   workqueue metrics ([`QueueMetrics`], rendered on the API server's `/metrics`).
//! - [`run`] is the loop every controller runs: take in every notification already delivered
//!   (sources in a fixed priority order, like `select! { biased; }`), hand each to the
//!   controller's synchronous handler (which only enqueues keys and observes expectations), fire
//!   due timers, then — once every source has synced — `reconcile` the next dirty key, and again,
//!   so that what arrives during a reconcile is taken in before the next one.
//! - [`events::EventRecorder`] writes a component's Events through client-go's correlation
//!   (aggregation, de-duplication, the spam filter), for controllers and kubelets alike.
//! - [`Tracked`] keeps what a controller derives from the objects of one scope (an index value,
//!   or every object) across syncs, brought up to date from the store's record of what changed
//!   when: a sync over thousands of objects costs the ones that changed.
//!
//! Components stay ordinary API clients: an informer is a kube-rs watcher over whatever
//! `kube::Client` it is given (in-process transport or TLS). Everything is ordered (`BTreeMap`,
//! subscription order, biased polling), so a sim run stays a pure function of its seed.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))]

pub mod controller;
pub mod create;
pub mod derived;
pub mod events;
pub mod index;
pub mod informer;
pub mod metrics;
pub mod queue;
pub mod store;
pub mod throttle;

pub use controller::{Reconcile, Sources, run};
pub use derived::Tracked;
pub use informer::{
    Change, Informers, Notice, SharedInformer, StopGuard, Subscription, change_key,
};
pub use metrics::QueueMetrics;
pub use queue::WorkQueue;
pub use store::{ObjKey, ReadStats, key_of};
pub use throttle::{Rate, Throttled};

#[cfg(test)]
mod tests;
