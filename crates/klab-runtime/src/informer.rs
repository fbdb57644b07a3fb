//! Shared informers: one list+watch per resource type per process, a [`Store`] that holds each
//! object once, and subscriptions that receive every change in order (client-go's
//! `SharedIndexInformer` with `AddEventHandler`).
//!
//! The store is updated and the change sent to every subscriber under one lock, and a new
//! subscriber is registered under the same lock after being handed the store's contents, so a
//! subscriber sees each object's history exactly once and in order, whenever it subscribed. As in
//! client-go, a reader of the store may see changes whose notifications it has not handled yet.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{FutureExt, StreamExt, TryStreamExt};
use klab_api::Clock;
use klab_api::shared::Shared;
use klab_api::slim::Slim;
use klab_api::supervise::{Health, RestartPolicy, supervise};
use kube::Resource;
use kube::api::Api;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

use crate::metrics::QueueMetrics;
use crate::queue::WorkQueue;
use crate::store::{IndexFn, ObjKey, ReadStats, Store, key_of};

/// One change: `(old, new)`; `new == None` is a deletion (`old` is then the last state known).
pub type Change<K> = (Option<Arc<K>>, Option<Arc<K>>);

/// The key of the object a change is about (its new state, or the last one known).
pub fn change_key<K: Resource>((old, new): &Change<K>) -> Option<ObjKey> {
    new.as_ref().or(old.as_ref()).map(|o| key_of(o.as_ref()))
}

/// What a subscriber receives.
#[derive(Debug)]
pub enum Notice<K> {
    Changed(Change<K>),
    /// The informer's list completed (after its changes): the store is a full picture.
    Synced,
}

/// Back-off after a watch error (fixed, so that sim stays deterministic; on the cluster's clock).
pub const WATCH_ERROR_BACKOFF: Duration = Duration::from_secs(1);

struct State<K> {
    store: Store<K>,
    synced: bool,
    /// Objects of a relist in progress (between `Init` and `InitDone`).
    relist: Option<BTreeMap<ObjKey, Arc<K>>>,
    subscribers: Vec<mpsc::UnboundedSender<Notice<K>>>,
}

impl<K> State<K> {
    fn notify(&mut self, n: impl Fn() -> Notice<K>) {
        // A subscriber that went away (a controller that stopped) is dropped here.
        self.subscribers.retain(|s| s.send(n()).is_ok());
    }
}

/// A shared informer of one resource type. Cloning shares it.
pub struct SharedInformer<K> {
    state: Arc<Mutex<State<K>>>,
}

impl<K> Clone for SharedInformer<K> {
    fn clone(&self) -> Self {
        SharedInformer {
            state: self.state.clone(),
        }
    }
}

impl<K> Default for SharedInformer<K> {
    fn default() -> Self {
        SharedInformer {
            state: Arc::new(Mutex::new(State {
                store: Store::default(),
                synced: false,
                relist: None,
                subscribers: Vec::new(),
            })),
        }
    }
}

/// An object without its managedFields (kept only by the API server).
fn trim<K: Resource>(mut obj: K) -> K {
    obj.meta_mut().managed_fields = None;
    obj
}

impl<K: Resource + Send + Sync + 'static> SharedInformer<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // The lock is never held across a panic point that matters: a poisoned lock still holds
        // a consistent store (every mutation completes before anything can panic).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a named index (idempotent), filing the objects already held.
    pub fn add_index(&self, name: &'static str, func: IndexFn<K>) {
        self.lock().store.add_index(name, func);
    }

    /// A new subscription. When the informer has synced already, the subscription starts with
    /// every object as an addition (in key order) and `Synced`, as client-go replays its store
    /// to a handler added late.
    pub fn subscribe(&self) -> Subscription<K> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut st = self.lock();
        if st.synced {
            for o in st.store.keys() {
                if let Some(obj) = st.store.peek(&o) {
                    let _ = tx.send(Notice::Changed((None, Some(obj))));
                }
            }
            let _ = tx.send(Notice::Synced);
        }
        st.subscribers.push(tx);
        Subscription { rx }
    }

    /// Whether the first list has completed.
    pub fn synced(&self) -> bool {
        self.lock().synced
    }

    pub fn get(&self, key: &ObjKey) -> Option<Arc<K>> {
        self.lock().store.get(key)
    }

    /// Every object in key order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.lock().store.list()
    }

    /// Objects of one namespace in name order.
    pub fn in_namespace(&self, ns: &str) -> Vec<Arc<K>> {
        self.lock().store.in_namespace(ns)
    }

    /// Objects filed under `value` in index `name`, in key order.
    pub fn by_index(&self, name: &str, value: &str) -> Vec<Arc<K>> {
        self.lock().store.by_index(name, value)
    }

    /// Calls `f` with each object in key order, under the informer's lock (`f` must not
    /// block): a reader that keeps something derived from each object, not the objects
    /// ([`crate::Tracked`] finding removals), reads thousands without cloning them.
    pub fn visit(&self, f: impl FnMut(&Arc<K>)) {
        self.lock().store.visit(f)
    }

    /// [`Self::visit`] of the objects filed under `value` in index `name`.
    pub fn visit_index(&self, name: &str, value: &str, f: impl FnMut(&Arc<K>)) {
        self.lock().store.visit_index(name, value, f)
    }

    /// Keeps, from now on, what changed when, for [`Self::changes_since`] (idempotent).
    pub fn track_changes(&self) {
        self.lock().store.track_changes()
    }

    /// [`Store::changes_since`] under the informer's lock (`f` must not block); `None` until
    /// [`Self::track_changes`].
    pub fn changes_since(
        &self,
        since: u64,
        index: Option<(&str, &str)>,
        f: impl FnMut(&Arc<K>),
    ) -> Option<(u64, usize)> {
        self.lock().store.changes_since(since, index, f)
    }

    /// Keys in key order (not counted as reads).
    pub fn keys(&self) -> Vec<ObjKey> {
        self.lock().store.keys()
    }

    pub fn len(&self) -> usize {
        self.lock().store.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().store.is_empty()
    }

    /// What readers took out of the store so far.
    pub fn stats(&self) -> ReadStats {
        self.lock().store.stats()
    }

    /// Applies one watcher event to the store and tells every subscriber what changed.
    ///
    /// `metadata.managedFields` is dropped on the way in, as kube-controller-manager's informer
    /// factory trims it: no controller reads it, it is a large share of every object, and a
    /// write from a cached copy without it keeps the stored field managers.
    pub fn apply(&self, ev: watcher::Event<K>) {
        self.apply_shared(match ev {
            watcher::Event::Apply(o) => watcher::Event::Apply(Arc::new(trim(o))),
            watcher::Event::InitApply(o) => watcher::Event::InitApply(Arc::new(trim(o))),
            watcher::Event::Delete(o) => watcher::Event::Delete(Arc::new(o)),
            watcher::Event::Init => watcher::Event::Init,
            watcher::Event::InitDone => watcher::Event::InitDone,
        });
    }

    /// [`Self::apply`] of objects already decoded without their managed fields and shared with
    /// the process's other decodes of the same bytes ([`Shared`]): held as they are.
    fn apply_shared(&self, ev: watcher::Event<Arc<K>>) {
        let mut st = self.lock();
        match ev {
            watcher::Event::Apply(obj) => {
                let old = st.store.insert(obj.clone());
                st.notify(|| Notice::Changed((old.clone(), Some(obj.clone()))));
            }
            watcher::Event::Delete(obj) => {
                let old = st.store.remove(&key_of(obj.as_ref()));
                let last = old.unwrap_or(obj);
                st.notify(|| Notice::Changed((Some(last.clone()), None)));
            }
            watcher::Event::Init => st.relist = Some(BTreeMap::new()),
            watcher::Event::InitApply(obj) => {
                st.relist
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key_of(obj.as_ref()), obj);
            }
            watcher::Event::InitDone => {
                // A (re)list is diffed against the store, like client-go's DeltaFIFO `Replace`:
                // deletions and updates in key order, then additions.
                let fresh = st.relist.take().unwrap_or_default();
                let mut changes: Vec<Change<K>> = Vec::new();
                for k in st.store.keys() {
                    let Some(o) = st.store.peek(&k) else {
                        continue;
                    };
                    match fresh.get(&k) {
                        None => changes.push((Some(o), None)),
                        Some(n) if rv(n.as_ref()) != rv(o.as_ref()) => {
                            changes.push((Some(o), Some(n.clone())))
                        }
                        Some(_) => {}
                    }
                }
                for (k, n) in &fresh {
                    if st.store.peek(k).is_none() {
                        changes.push((None, Some(n.clone())));
                    }
                }
                for (o, n) in changes {
                    match &n {
                        Some(n) => {
                            st.store.insert(n.clone());
                        }
                        None => {
                            if let Some(o) = &o {
                                st.store.remove(&key_of(o.as_ref()));
                            }
                        }
                    }
                    st.notify(|| Notice::Changed((o.clone(), n.clone())));
                }
                st.synced = true;
                st.notify(|| Notice::Synced);
            }
        }
    }

    /// Lists and watches every `K` of the cluster into this informer for ever (a watch error
    /// backs off [`WATCH_ERROR_BACKOFF`] on the cluster's clock and relists). Objects are
    /// decoded without their managed fields ([`Slim`]) rather than decoded and then trimmed,
    /// and once per process ([`Shared`]): the scheduler's and the kubelets' watches hold the
    /// same decodes.
    pub async fn run(self, client: kube::Client, clock: Clock) -> Result<(), String>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        let api = Api::<Shared<K>>::all(client);
        let mut stream = watcher(api, watcher::Config::default())
            .map_ok(unshare)
            .boxed();
        loop {
            match stream.next().await {
                Some(Ok(ev)) => {
                    self.apply_shared(ev);
                    // Take in what already arrived before yielding to the subscribers.
                    while let Some(Some(Ok(ev))) = stream.next().now_or_never() {
                        self.apply_shared(ev);
                    }
                }
                Some(Err(e)) => {
                    tracing::warn!(resource = %K::plural(&()), error = %e, "watch failed; relisting");
                    clock.sleep(WATCH_ERROR_BACKOFF).await;
                }
                None => return Err(format!("the {} watch stream ended", K::plural(&()))),
            }
        }
    }
}

/// A watcher event of `Shared<K>` as one of the shared `Arc<K>`.
pub fn unshare<K>(ev: watcher::Event<Shared<K>>) -> watcher::Event<Arc<K>> {
    map_event(ev, Shared::into_arc)
}

/// A watcher event of `Slim<K>` as one of `K`.
pub fn unslim<K>(ev: watcher::Event<Slim<K>>) -> watcher::Event<K> {
    map_event(ev, Slim::into_inner)
}

/// A watcher event with `f` applied to its object.
fn map_event<A, B>(ev: watcher::Event<A>, f: impl FnOnce(A) -> B) -> watcher::Event<B> {
    match ev {
        watcher::Event::Apply(o) => watcher::Event::Apply(f(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(f(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(f(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

fn rv<K: Resource>(o: &K) -> Option<&String> {
    o.meta().resource_version.as_ref()
}

/// One subscriber's ordered feed of an informer's changes.
pub struct Subscription<K> {
    rx: mpsc::UnboundedReceiver<Notice<K>>,
}

impl<K> Subscription<K> {
    /// The next notice; `None` once the informer is gone.
    pub async fn recv(&mut self) -> Option<Notice<K>> {
        self.rx.recv().await
    }

    /// The next notice if one was delivered already.
    pub fn try_recv(&mut self) -> Option<Notice<K>> {
        self.rx.try_recv().ok()
    }

    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Notice<K>>> {
        self.rx.poll_recv(cx)
    }
}

/// Supervision of the informers' watch tasks: where their health is reported.
#[derive(Clone)]
struct Supervision {
    health: Health,
    /// Component name prefix, e.g. `kube-controller-manager/shared-informers`.
    prefix: String,
}

/// A process's informer factory (client-go's `SharedInformerFactory`): the first request for a
/// type starts its informer, every later one shares it.
#[derive(Clone)]
pub struct Informers {
    client: kube::Client,
    clock: Clock,
    supervision: Option<Supervision>,
    informers: Arc<Mutex<BTreeMap<TypeId, Box<dyn Any + Send>>>>,
    /// The informers' watch tasks, stopped together by a [`StopGuard`].
    tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    /// The workqueue metrics of the controllers built on this factory.
    queue_metrics: QueueMetrics,
}

/// Stops every informer of a factory when dropped (whoever owns the factory's lifetime holds it:
/// the controller manager's task, so that stopping the controllers stops their watches too).
pub struct StopGuard {
    tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        for t in self
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            t.abort();
        }
    }
}

impl Informers {
    /// A factory whose informers list and watch through `client`.
    pub fn new(client: kube::Client, clock: Clock) -> Self {
        Informers {
            client,
            queue_metrics: QueueMetrics::new(clock.clone()),
            clock,
            supervision: None,
            informers: Arc::new(Mutex::new(BTreeMap::new())),
            tasks: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// A work queue metered under upstream's queue name (`replicaset`, `endpoint_slice`, …),
    /// timed on this factory's clock.
    pub fn queue(&self, name: &'static str) -> WorkQueue {
        self.queue_metrics.queue(name)
    }

    /// The workqueue metrics of every queue made by [`Informers::queue`].
    pub fn queue_metrics(&self) -> QueueMetrics {
        self.queue_metrics.clone()
    }

    /// A guard whose drop stops every informer this factory started (or will have started).
    pub fn stop_guard(&self) -> StopGuard {
        StopGuard {
            tasks: self.tasks.clone(),
        }
    }

    /// Runs every informer's watch task supervised, reported in `health` as
    /// `<prefix>/<resource>` (e.g. `kube-controller-manager/shared-informers/pods`).
    pub fn supervised(mut self, health: Health, prefix: impl Into<String>) -> Self {
        self.supervision = Some(Supervision {
            health,
            prefix: prefix.into(),
        });
        self
    }

    /// The shared informer of `K` over all namespaces, started on first use.
    pub fn get<K>(&self) -> SharedInformer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let mut map = self.informers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = map
            .get(&TypeId::of::<K>())
            .and_then(|b| b.downcast_ref::<SharedInformer<K>>())
        {
            return i.clone();
        }
        let informer = SharedInformer::<K>::default();
        map.insert(TypeId::of::<K>(), Box::new(informer.clone()));
        drop(map);
        let (client, clock) = (self.client.clone(), self.clock.clone());
        let i = informer.clone();
        let task = match &self.supervision {
            None => tokio::spawn(async move {
                if let Err(e) = i.run(client, clock).await {
                    tracing::error!("informer stopped: {e}");
                }
            }),
            Some(s) => {
                let name = format!("{}/{}", s.prefix, K::plural(&()));
                tokio::spawn(supervise(
                    s.health.clone(),
                    name,
                    clock.clone(),
                    RestartPolicy::CrashLoop,
                    move || i.clone().run(client.clone(), clock.clone()),
                ))
            }
        };
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(task.abort_handle());
        informer
    }
}

impl<K: Resource + Clone + Send + Sync + 'static> Subscription<K> {
    /// This subscription as the event stream of a kube-runtime watcher (`Init`, `InitApply`…,
    /// `InitDone`, then `Apply`/`Delete`), for a component that keeps its own view of the objects
    /// (with writes of its own applied ahead of the watch) but shares the informer's one watch.
    /// Later relists of the informer arrive as the individual changes they amount to. Objects
    /// are the informer's own `Arc`s: a component's view holds them without copying them.
    pub fn into_watch_events(self) -> impl futures::Stream<Item = watcher::Event<Arc<K>>> + Send {
        futures::stream::unfold((self, Phase::Start), |(mut sub, phase)| async move {
            loop {
                if phase == Phase::Start {
                    return Some((watcher::Event::Init, (sub, Phase::Listing)));
                }
                let ev = match (sub.recv().await?, phase) {
                    (Notice::Synced, Phase::Listing) => {
                        return Some((watcher::Event::InitDone, (sub, Phase::Watching)));
                    }
                    (Notice::Synced, _) => continue,
                    (Notice::Changed((_, Some(n))), Phase::Listing) => watcher::Event::InitApply(n),
                    (Notice::Changed((_, Some(n))), _) => watcher::Event::Apply(n),
                    (Notice::Changed((Some(o), None)), Phase::Watching) => {
                        watcher::Event::Delete(o)
                    }
                    // Before its first `Synced` an informer only sends the additions of its
                    // first list (its store was empty), so there is no deletion to pass on.
                    (Notice::Changed(_), _) => continue,
                };
                return Some((ev, (sub, phase)));
            }
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    Listing,
    Watching,
}
