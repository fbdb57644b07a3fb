//! The own caches of the node-failure controllers (NLC, TEC, PodGC), which apply their writes
//! ahead of the watch: a `BTreeMap` of the shared informer's `Arc`s (no copy of an object until
//! a controller records a write of its own into it) fed by its subscription (`shared_watch`),
//! turned into add/update/delete changes (a relist is diffed against the cache, like client-go's
//! DeltaFIFO `Replace`), plus the "settle" rule used to schedule periodic passes.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use kube::Resource;
use kube::runtime::watcher::{self, Event};

/// Periodic passes run this long after their nominal instant, so that every API write made at the
/// nominal instant (a kubelet renewing its Lease at t = 10 s while the monitor pass is due at
/// t = 10 s) has reached the caches first: under paused time the runtime only advances the clock
/// once every task is idle. The reference timing model says a pass at t observes writes made at ≤ t.
/// One millisecond because tokio timers have millisecond resolution (a shorter delay is rounded
/// up to it anyway); passes then decide with their nominal instant ([`pass_time`]).
pub const SETTLE: Duration = Duration::from_millis(1);

/// A cache key: `namespace/name` (or `name` for cluster-scoped objects).
pub fn key_of<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{}", meta.name.as_deref().unwrap_or_default()),
        _ => meta.name.clone().unwrap_or_default(),
    }
}

/// A change seen by the cache.
#[derive(Clone, Debug)]
pub enum Change<K> {
    /// Added (`old == None`) or updated.
    Applied {
        old: Option<Arc<K>>,
        new: Arc<K>,
    },
    Deleted(Arc<K>),
}

/// Objects by key, in key order, optionally indexed by one value of theirs (pods by node, as
/// upstream's `podIndexer` by `spec.nodeName`).
#[derive(Clone, Debug)]
pub struct Cache<K> {
    objects: BTreeMap<String, Arc<K>>,
    relist: Option<BTreeMap<String, Arc<K>>>,
    synced: bool,
    index: Option<Index<K>>,
}

/// Keys by the value `func` gives their object (objects it gives none are not filed). Keys, not
/// the `Arc`s `klab_runtime::store::Store`'s indexes hold: [`Cache::get_mut`] replaces an
/// object's `Arc` with the controller's own write, which an index holding the old one would miss.
#[derive(Clone, Debug)]
struct Index<K> {
    func: fn(&K) -> Option<&str>,
    keys: BTreeMap<String, std::collections::BTreeSet<String>>,
}

impl<K> Index<K> {
    fn file(&mut self, key: &str, obj: &K) {
        if let Some(v) = (self.func)(obj) {
            self.keys
                .entry(v.to_string())
                .or_default()
                .insert(key.to_string());
        }
    }

    fn unfile(&mut self, key: &str, obj: &K) {
        if let Some(v) = (self.func)(obj)
            && let Some(keys) = self.keys.get_mut(v)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.keys.remove(v);
            }
        }
    }
}

impl<K> Default for Cache<K> {
    fn default() -> Self {
        Cache {
            objects: BTreeMap::new(),
            relist: None,
            synced: false,
            index: None,
        }
    }
}

impl<K> Cache<K> {
    /// An empty cache whose objects are indexed by `func` (see [`Cache::indexed`]). The indexed
    /// value must not change through [`Cache::get_mut`] (a pod's node does not, once set).
    pub fn indexed_by(func: fn(&K) -> Option<&str>) -> Self {
        Cache {
            index: Some(Index {
                func,
                keys: BTreeMap::new(),
            }),
            ..Cache::default()
        }
    }

    /// The objects whose indexed value is `value`, in key order: what filtering
    /// [`Cache::values`] by it gives, without visiting the others. Empty without an index.
    pub fn indexed<'a>(&'a self, value: &'a str) -> impl Iterator<Item = &'a K> + 'a {
        self.index
            .as_ref()
            .and_then(|i| i.keys.get(value).map(|keys| (i.func, keys)))
            .into_iter()
            .flat_map(move |(func, keys)| {
                keys.iter()
                    .filter_map(|k| self.objects.get(k))
                    .map(Arc::as_ref)
                    .filter(move |o| func(o) == Some(value))
            })
    }

    fn file(&mut self, key: &str, old: Option<&Arc<K>>, new: Option<&Arc<K>>) {
        if let Some(i) = self.index.as_mut() {
            if let Some(o) = old {
                i.unfile(key, o);
            }
            if let Some(n) = new {
                i.file(key, n);
            }
        }
    }
}

impl<K: Resource + Clone + PartialEq> Cache<K> {
    /// Whether the first list has completed.
    pub fn synced(&self) -> bool {
        self.synced
    }

    pub fn get(&self, key: &str) -> Option<&K> {
        self.objects.get(key).map(Arc::as_ref)
    }

    /// The cached object, to record a write this controller made before the watch confirms it
    /// (the watch event replaces it when it arrives). Copied from the informer's on first write.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut K> {
        self.objects.get_mut(key).map(Arc::make_mut)
    }

    /// All objects in key order (namespace/name).
    pub fn values(&self) -> impl Iterator<Item = &K> {
        self.objects.values().map(Arc::as_ref)
    }

    /// All objects in key order, shared with the cache.
    pub fn arcs(&self) -> impl Iterator<Item = &Arc<K>> {
        self.objects.values()
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.objects.keys()
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Applies one watcher event; returns the resulting changes (none while a relist is buffering).
    pub fn apply(&mut self, event: Event<Arc<K>>) -> Vec<Change<K>> {
        match event {
            Event::Apply(obj) => {
                let key = key_of(obj.as_ref());
                let old = self.objects.insert(key.clone(), obj.clone());
                self.file(&key, old.as_ref(), Some(&obj));
                if old.as_ref() == Some(&obj) {
                    Vec::new()
                } else {
                    vec![Change::Applied { old, new: obj }]
                }
            }
            Event::Delete(obj) => {
                let key = key_of(obj.as_ref());
                let old = self.objects.remove(&key);
                self.file(&key, old.as_ref(), None);
                vec![Change::Deleted(old.unwrap_or(obj))]
            }
            Event::Init => {
                self.relist = Some(BTreeMap::new());
                Vec::new()
            }
            Event::InitApply(obj) => {
                let key = key_of(obj.as_ref());
                self.relist
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key, obj);
                Vec::new()
            }
            Event::InitDone => {
                self.synced = true;
                let fresh = self.relist.take().unwrap_or_default();
                let mut changes = Vec::new();
                for (k, old) in &self.objects {
                    if !fresh.contains_key(k) {
                        changes.push(Change::Deleted(old.clone()));
                    }
                }
                for (k, new) in &fresh {
                    let old = self.objects.get(k);
                    if old != Some(new) {
                        changes.push(Change::Applied {
                            old: old.cloned(),
                            new: new.clone(),
                        });
                    }
                }
                self.objects = fresh;
                if let Some(i) = self.index.as_mut() {
                    i.keys.clear();
                    for (k, o) in &self.objects {
                        i.file(k, o);
                    }
                }
                changes
            }
        }
    }

    /// Stores an object we just wrote (read-your-writes before the watch event arrives).
    pub fn store(&mut self, obj: K) {
        let key = key_of(&obj);
        let new = Arc::new(obj);
        let old = self.objects.insert(key.clone(), new.clone());
        self.file(&key, old.as_ref(), Some(&new));
    }
}

/// A pod's `spec.nodeName`: the value the node-failure controllers index their pods by.
pub fn pod_node(pod: &k8s_openapi::api::core::v1::Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// "Now" inside a periodic pass: the clock minus [`SETTLE`], i.e. the pass's nominal instant.
pub fn pass_time(clock: &klab_api::Clock) -> Timestamp {
    let settle = jiff::SignedDuration::try_from(SETTLE).unwrap_or_default();
    clock.now().checked_sub(settle).unwrap_or(Timestamp::MIN)
}

/// The next nominal instant of a sliding-period loop: `end - SETTLE + period`.
pub fn next_after(end: Timestamp, period: Duration) -> Timestamp {
    let settle = jiff::SignedDuration::try_from(SETTLE).unwrap_or_default();
    let p = jiff::SignedDuration::try_from(period).unwrap_or(jiff::SignedDuration::MAX);
    end.checked_sub(settle)
        .and_then(|t| t.checked_add(p))
        .unwrap_or(Timestamp::MAX)
}

/// Whether an API error is a 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Whether an API error is a 409.
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Logs a watch error once per occurrence (the backoff retries).
pub fn log_watch_error(what: &str, e: &watcher::Error) {
    tracing::warn!(resource = what, error = %e, "watch failed; retrying");
}

/// Drains a stream item: `Some(event)` for a good event, `None` for an error (logged).
pub fn ok_event<K>(
    what: &str,
    item: Option<Result<Event<Arc<K>>, watcher::Error>>,
) -> Option<Event<Arc<K>>> {
    match item {
        Some(Ok(ev)) => Some(ev),
        Some(Err(e)) => {
            log_watch_error(what, &e);
            None
        }
        None => None,
    }
}

/// Boxes a watch stream so it can live in a struct or a `select!`.
pub type WatchStream<K> =
    futures::stream::BoxStream<'static, Result<Event<Arc<K>>, watcher::Error>>;

/// The event stream of a shared informer, for a controller that keeps its own cache.
pub fn shared_watch<K>(informer: &klab_runtime::SharedInformer<K>) -> WatchStream<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    informer.subscribe().into_watch_events().map(Ok).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, label: &str) -> Arc<Node> {
        Arc::new(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("l".to_string(), label.to_string())].into_iter().collect()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    /// The pods-by-node index gives what filtering every pod gives, in the same order, through
    /// watch events, a relist, a delete and a write of our own.
    #[test]
    fn the_node_index_agrees_with_a_scan() {
        use k8s_openapi::api::core::v1::{Pod, PodSpec};
        let pod = |name: &str, node: Option<&str>, label: &str| {
            Arc::new(Pod {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("ns".into()),
                    labels: Some([("l".to_string(), label.to_string())].into_iter().collect()),
                    ..Default::default()
                },
                spec: Some(PodSpec {
                    node_name: node.map(str::to_string),
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        let check = |c: &Cache<Pod>| {
            for n in ["n1", "n2", "n3", ""] {
                let scan: Vec<&Pod> = c.values().filter(|p| pod_node(p) == Some(n)).collect();
                let idx: Vec<&Pod> = c.indexed(n).collect();
                assert_eq!(idx, scan, "{n}");
            }
        };
        let mut c = Cache::<Pod>::indexed_by(pod_node);
        c.apply(Event::Init);
        c.apply(Event::InitApply(pod("b", Some("n1"), "1")));
        c.apply(Event::InitApply(pod("a", Some("n1"), "1")));
        c.apply(Event::InitApply(pod("u", None, "1")));
        c.apply(Event::InitDone);
        check(&c);
        assert_eq!(c.indexed("n1").count(), 2);
        // Bound, updated, deleted.
        c.apply(Event::Apply(pod("u", Some("n2"), "1")));
        c.apply(Event::Apply(pod("a", Some("n1"), "2")));
        c.apply(Event::Delete(pod("b", Some("n1"), "1")));
        check(&c);
        // A relist that drops one and adds one, then a write of our own.
        c.apply(Event::Init);
        c.apply(Event::InitApply(pod("u", Some("n2"), "1")));
        c.apply(Event::InitApply(pod("c", Some("n3"), "1")));
        c.apply(Event::InitDone);
        check(&c);
        c.store((*pod("d", Some("n3"), "1")).clone());
        check(&c);
        assert_eq!(c.indexed("n3").count(), 2);
        assert_eq!(Cache::<Pod>::default().indexed("n3").count(), 0);
    }

    #[test]
    fn relist_is_diffed_against_the_cache() {
        let mut c = Cache::<Node>::default();
        assert!(c.apply(Event::Init).is_empty());
        c.apply(Event::InitApply(node("a", "1")));
        c.apply(Event::InitApply(node("b", "1")));
        assert!(!c.synced());
        let ch = c.apply(Event::InitDone);
        assert!(c.synced());
        assert_eq!(ch.len(), 2);
        // An update, an unchanged apply, then a relist that drops "a" and changes "b".
        assert_eq!(c.apply(Event::Apply(node("a", "2"))).len(), 1);
        assert!(c.apply(Event::Apply(node("a", "2"))).is_empty());
        c.apply(Event::Init);
        c.apply(Event::InitApply(node("b", "3")));
        let ch = c.apply(Event::InitDone);
        assert!(matches!(&ch[0], Change::Deleted(n) if n.metadata.name.as_deref() == Some("a")));
        assert!(
            matches!(&ch[1], Change::Applied { old: Some(_), new } if new.metadata.name.as_deref() == Some("b"))
        );
        assert_eq!(c.keys().cloned().collect::<Vec<_>>(), ["b"]);
    }
}
