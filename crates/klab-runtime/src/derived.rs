//! Values a controller derives from stored objects, kept across syncs, one per stored version of
//! each object: a sync that reads thousands of objects (a DaemonSet's pods, every node) derives
//! only from the ones that changed since its last read.
//!
//! An informer never modifies a stored object in place: a change stores a new `Arc`. So the
//! `Arc`'s address names one version of one object, as long as the `Arc` lives; each entry holds
//! its `Arc`, so that address cannot be reused by another object while the entry exists.

use std::collections::HashMap;
use std::sync::Arc;

/// The hasher of controllers' internal maps: fast (these maps are looked up thousands of times
/// per sync at thousands of nodes; SipHash was a visible share of a sync) and the same on every
/// run (no per-process seed), so that even an iteration order that reached a result would not
/// vary between runs.
pub type Fixed = foldhash::fast::FixedState;

struct Entry<K, V> {
    _obj: Arc<K>,
    value: V,
    /// The read this entry was last seen in.
    seen: u64,
}

/// `V`s derived from `K`s by object version. See the module documentation.
pub struct Derived<K, V> {
    entries: HashMap<usize, Entry<K, V>, Fixed>,
    /// The current read's number.
    epoch: u64,
    /// Values derived so far (objects read).
    derived: u64,
}

impl<K, V> Default for Derived<K, V> {
    fn default() -> Self {
        Derived {
            entries: HashMap::default(),
            epoch: 0,
            derived: 0,
        }
    }
}

impl<K, V> Derived<K, V> {
    /// The values of the objects `visit` walks, in its order: `visit` calls the function it is
    /// given with each object (e.g. [`crate::SharedInformer::visit_index`]), and `derive` runs
    /// only for versions not seen before. Entries of objects not walked are dropped.
    pub fn refresh(
        &mut self,
        visit: impl FnOnce(&mut dyn FnMut(&Arc<K>)),
        derive: impl Fn(&K) -> V,
    ) -> Vec<&V> {
        self.epoch = self.epoch.wrapping_add(1);
        let epoch = self.epoch;
        let mut order: Vec<usize> = Vec::new();
        let (entries, derived) = (&mut self.entries, &mut self.derived);
        visit(&mut |obj: &Arc<K>| {
            let at = Arc::as_ptr(obj) as usize;
            let e = entries.entry(at).or_insert_with(|| {
                *derived = derived.wrapping_add(1);
                Entry {
                    _obj: obj.clone(),
                    value: derive(obj),
                    seen: epoch,
                }
            });
            e.seen = epoch;
            order.push(at);
        });
        if self.entries.len() > order.len() {
            self.entries.retain(|_, e| e.seen == epoch);
        }
        order
            .iter()
            .filter_map(|at| self.entries.get(at).map(|e| &e.value))
            .collect()
    }

    /// What changed since the last read of the objects `visit` walks: the values derived now
    /// (of versions not seen before, in the walk's order) and the values dropped (of versions
    /// no longer walked: replaced or gone). A reader that keeps something built from the values
    /// takes the dropped ones out of it, then puts the new ones in.
    pub fn update(
        &mut self,
        visit: impl FnOnce(&mut dyn FnMut(&Arc<K>)),
        derive: impl Fn(&K) -> V,
    ) -> (Vec<&V>, Vec<V>) {
        self.epoch = self.epoch.wrapping_add(1);
        let epoch = self.epoch;
        let mut added: Vec<usize> = Vec::new();
        let mut walked = 0usize;
        let (entries, derived) = (&mut self.entries, &mut self.derived);
        visit(&mut |obj: &Arc<K>| {
            let at = Arc::as_ptr(obj) as usize;
            walked = walked.saturating_add(1);
            match entries.get_mut(&at) {
                Some(e) => e.seen = epoch,
                None => {
                    *derived = derived.wrapping_add(1);
                    entries.insert(
                        at,
                        Entry {
                            _obj: obj.clone(),
                            value: derive(obj),
                            seen: epoch,
                        },
                    );
                    added.push(at);
                }
            }
        });
        let mut dropped = Vec::new();
        if self.entries.len() > walked {
            // In address order, made deterministic by the caller's use (it files by name).
            let gone: Vec<usize> = self
                .entries
                .iter()
                .filter(|(_, e)| e.seen != epoch)
                .map(|(at, _)| *at)
                .collect();
            for at in gone {
                if let Some(e) = self.entries.remove(&at) {
                    dropped.push(e.value);
                }
            }
        }
        let added = added
            .iter()
            .filter_map(|at| self.entries.get(at).map(|e| &e.value))
            .collect();
        (added, dropped)
    }

    /// Every value held, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.values().map(|e| &e.value)
    }

    /// How many values were derived so far (each one an object version read).
    pub fn derived(&self) -> u64 {
        self.derived
    }

    /// How many object versions are held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets every value (what they were derived with changed).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SharedInformer;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::watcher;

    fn cm(name: &str, v: &str) -> ConfigMap {
        ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            data: Some([("v".to_string(), v.to_string())].into()),
            ..Default::default()
        }
    }

    fn value(c: &ConfigMap) -> String {
        c.data
            .as_ref()
            .and_then(|d| d.get("v"))
            .cloned()
            .unwrap_or_default()
    }

    /// Values come in the walk's order, are derived once per stored version, and go with it.
    #[test]
    fn one_derivation_per_stored_version() {
        let inf: SharedInformer<ConfigMap> = SharedInformer::default();
        for (n, v) in [("b", "1"), ("a", "1"), ("c", "1")] {
            inf.apply(watcher::Event::Apply(cm(n, v)));
        }
        let mut d: Derived<ConfigMap, String> = Derived::default();
        let read = |d: &mut Derived<ConfigMap, String>| -> Vec<String> {
            d.refresh(
                |f| inf.visit(f),
                |c| format!("{}={}", c.metadata.name.as_deref().unwrap_or(""), value(c)),
            )
            .into_iter()
            .cloned()
            .collect()
        };
        assert_eq!(read(&mut d), ["a=1", "b=1", "c=1"]);
        assert_eq!((d.derived(), d.len()), (3, 3));
        assert_eq!(read(&mut d), ["a=1", "b=1", "c=1"]);
        assert_eq!(d.derived(), 3);
        // The same content written again is a new version: derived again.
        inf.apply(watcher::Event::Apply(cm("b", "2")));
        inf.apply(watcher::Event::Apply(cm("c", "1")));
        assert_eq!(read(&mut d), ["a=1", "b=2", "c=1"]);
        assert_eq!((d.derived(), d.len()), (5, 3));
        inf.apply(watcher::Event::Delete(cm("a", "1")));
        assert_eq!(read(&mut d), ["b=2", "c=1"]);
        assert_eq!((d.derived(), d.len()), (5, 2));
        d.clear();
        assert!(d.is_empty());
        assert_eq!(read(&mut d).len(), 2);
        assert_eq!(d.derived(), 7);
    }
}
