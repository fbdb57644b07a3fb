//! A sorted cache of dynamic objects fed by a kube-runtime `watcher` stream, for the garbage
//! collector, which watches every resource with owner references (typed controllers use the
//! shared informers of `klab_runtime`).

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::Resource;
use kube::runtime::watcher;

/// `(namespace, name)`; namespace is empty for cluster-scoped objects.
pub type ObjKey = (String, String);

/// The key of an object.
pub fn key_of<K: Resource>(obj: &K) -> ObjKey {
    let m = obj.meta();
    (
        m.namespace.clone().unwrap_or_default(),
        m.name.clone().unwrap_or_default(),
    )
}

/// One change seen by the cache: `(old, new)`; `new == None` is a deletion.
pub type Change<K> = (Option<Arc<K>>, Option<Arc<K>>);

/// Objects of one kind, as last seen on the watch.
#[derive(Debug)]
pub struct Cache<K> {
    objects: BTreeMap<ObjKey, Arc<K>>,
    /// Objects of a relist in progress (between `Init` and `InitDone`).
    relist: Option<BTreeMap<ObjKey, Arc<K>>>,
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

impl<K: Resource + Clone> Cache<K> {
    /// The initial list has been received at least once.
    pub fn synced(&self) -> bool {
        self.synced
    }

    pub fn get(&self, key: &ObjKey) -> Option<&Arc<K>> {
        self.objects.get(key)
    }

    /// All objects in key order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<K>> {
        self.objects.values()
    }

    /// Objects of one namespace in name order.
    pub fn in_namespace<'a>(&'a self, ns: &'a str) -> impl Iterator<Item = &'a Arc<K>> + 'a {
        self.objects
            .range((ns.to_string(), String::new())..)
            .take_while(move |((n, _), _)| n == ns)
            .map(|(_, v)| v)
    }

    /// Applies one watcher event and returns what changed.
    pub fn apply(&mut self, ev: watcher::Event<K>) -> Vec<Change<K>> {
        match ev {
            watcher::Event::Apply(obj) => {
                let obj = Arc::new(obj);
                let old = self.objects.insert(key_of(obj.as_ref()), obj.clone());
                vec![(old, Some(obj))]
            }
            watcher::Event::Delete(obj) => {
                let k = key_of(&obj);
                let old = self.objects.remove(&k);
                vec![(old.or_else(|| Some(Arc::new(obj.clone()))), None)]
            }
            watcher::Event::Init => {
                self.relist = Some(BTreeMap::new());
                Vec::new()
            }
            watcher::Event::InitApply(obj) => {
                let obj = Arc::new(obj);
                self.relist
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key_of(obj.as_ref()), obj);
                Vec::new()
            }
            watcher::Event::InitDone => {
                let fresh = self.relist.take().unwrap_or_default();
                let old = std::mem::replace(&mut self.objects, fresh);
                self.synced = true;
                let mut out = Vec::new();
                for (k, o) in &old {
                    match self.objects.get(k) {
                        None => out.push((Some(o.clone()), None)),
                        Some(n) if rv(n.as_ref()) != rv(o.as_ref()) => {
                            out.push((Some(o.clone()), Some(n.clone())))
                        }
                        Some(_) => {}
                    }
                }
                for (k, n) in &self.objects {
                    if !old.contains_key(k) {
                        out.push((None, Some(n.clone())));
                    }
                }
                out
            }
        }
    }
}

fn rv<K: Resource>(o: &K) -> Option<&String> {
    o.meta().resource_version.as_ref()
}

/// What a watch stream item means for the loop.
pub enum Polled<K> {
    Event(watcher::Event<K>),
    /// A watch error: the watcher re-lists on the next poll; back off a little first.
    Error(watcher::Error),
    /// The stream ended (never for a kube watcher): stop the controller.
    Ended,
}

impl<K> From<Option<Result<watcher::Event<K>, watcher::Error>>> for Polled<K> {
    fn from(v: Option<Result<watcher::Event<K>, watcher::Error>>) -> Self {
        match v {
            Some(Ok(e)) => Polled::Event(e),
            Some(Err(e)) => Polled::Error(e),
            None => Polled::Ended,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn p(ns: &str, name: &str, rv: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn cache_relist_reports_differences() {
        let mut c = Cache::<Pod>::default();
        assert!(!c.synced());
        c.apply(watcher::Event::Init);
        c.apply(watcher::Event::InitApply(p("a", "x", "1")));
        c.apply(watcher::Event::InitApply(p("b", "y", "1")));
        let ch = c.apply(watcher::Event::InitDone);
        assert!(c.synced());
        assert_eq!(ch.len(), 2);
        let ch = c.apply(watcher::Event::Apply(p("a", "z", "2")));
        assert!(ch[0].0.is_none());
        let names: Vec<_> = c
            .in_namespace("a")
            .map(|o| o.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, vec!["x", "z"]);
        // relist: x changed, z gone, y same
        c.apply(watcher::Event::Init);
        c.apply(watcher::Event::InitApply(p("a", "x", "3")));
        c.apply(watcher::Event::InitApply(p("b", "y", "1")));
        let ch = c.apply(watcher::Event::InitDone);
        assert_eq!(ch.len(), 2);
        assert!(
            ch.iter()
                .any(|(o, n)| n.is_none()
                    && o.as_ref().unwrap().metadata.name.as_deref() == Some("z"))
        );
        let ch = c.apply(watcher::Event::Delete(p("a", "x", "4")));
        assert!(ch[0].1.is_none());
        assert_eq!(c.iter().count(), 1);
    }
}
