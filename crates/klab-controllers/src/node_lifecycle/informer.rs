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

/// Objects by key, in key order.
#[derive(Clone, Debug)]
pub struct Cache<K> {
    objects: BTreeMap<String, Arc<K>>,
    relist: Option<BTreeMap<String, Arc<K>>>,
    synced: bool,
}

impl<K> Default for Cache<K> {
    fn default() -> Self {
        Cache {
            objects: BTreeMap::new(),
            relist: None,
            synced: false,
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
                let old = self.objects.insert(key, obj.clone());
                if old.as_ref() == Some(&obj) {
                    Vec::new()
                } else {
                    vec![Change::Applied { old, new: obj }]
                }
            }
            Event::Delete(obj) => {
                let key = key_of(obj.as_ref());
                let old = self.objects.remove(&key);
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
                changes
            }
        }
    }

    /// Stores an object we just wrote (read-your-writes before the watch event arrives).
    pub fn store(&mut self, obj: K) {
        self.objects.insert(key_of(&obj), Arc::new(obj));
    }
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
