//! Values a controller derives from stored objects, kept across syncs: a sync that reads
//! thousands of objects (a DaemonSet's pods, every node) derives only from the ones that changed
//! since its last read, and finds those from the store's record of what changed when
//! ([`crate::store::Store::changes_since`]) instead of visiting every object.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::Resource;

use crate::informer::SharedInformer;
use crate::store::{ObjKey, key_of};

/// The hasher of controllers' internal maps: fast (these maps are looked up thousands of times
/// per sync at thousands of nodes; SipHash was a visible share of a sync) and the same on every
/// run (no per-process seed), so that even an iteration order that reached a result would not
/// vary between runs.
pub type Fixed = foldhash::fast::FixedState;

/// `V`s derived from the objects of one scope of an informer (every object, or those filed under
/// one value of an index), kept by object key and brought up to date from what changed since the
/// last read ([`SharedInformer::changes_since`]): a read costs the changes, not the scope.
pub struct Tracked<V> {
    /// The informer's change number at the last read.
    since: u64,
    entries: HashMap<ObjKey, V, Fixed>,
    derived: u64,
}

impl<V> Default for Tracked<V> {
    fn default() -> Self {
        Tracked {
            since: 0,
            entries: HashMap::default(),
            derived: 0,
        }
    }
}

impl<V> Tracked<V> {
    /// What changed in the scope since the last read: the values derived now (in change order)
    /// and the values dropped (of objects changed, gone or out of the scope). A reader that
    /// keeps something built from the values takes the dropped ones out of it, then puts the new
    /// ones in.
    pub fn update<K>(
        &mut self,
        informer: &SharedInformer<K>,
        index: Option<(&str, &str)>,
        derive: impl Fn(&Arc<K>) -> V,
    ) -> (Vec<&V>, Vec<V>)
    where
        K: Resource + Send + Sync + 'static,
    {
        informer.track_changes();
        let mut added: Vec<ObjKey> = Vec::new();
        let mut dropped: Vec<V> = Vec::new();
        let (entries, derived) = (&mut self.entries, &mut self.derived);
        let seen = informer.changes_since(self.since, index, |obj| {
            let key = key_of(obj.as_ref());
            *derived = derived.wrapping_add(1);
            added.push(key.clone());
            dropped.extend(entries.insert(key, derive(obj)));
        });
        let Some((now, len)) = seen else {
            // No such index: nothing is in the scope.
            self.since = 0;
            dropped.extend(self.entries.drain().map(|(_, v)| v));
            return (Vec::new(), dropped);
        };
        self.since = now;
        if self.entries.len() != len {
            // Some left the scope (removed, or filed under another value: neither is visited):
            // find which.
            let mut present: HashSet<ObjKey, Fixed> = HashSet::default();
            let mut note = |obj: &Arc<K>| {
                present.insert(key_of(obj.as_ref()));
            };
            match index {
                Some((name, value)) => informer.visit_index(name, value, &mut note),
                None => informer.visit(&mut note),
            }
            let gone: Vec<ObjKey> = self
                .entries
                .keys()
                .filter(|k| !present.contains(*k))
                .cloned()
                .collect();
            for k in gone {
                dropped.extend(self.entries.remove(&k));
            }
        }
        let added = added.iter().filter_map(|k| self.entries.get(k)).collect();
        (added, dropped)
    }

    /// How many values were derived so far.
    pub fn derived(&self) -> u64 {
        self.derived
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets every value: the next read derives the whole scope again.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.since = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SharedInformer;
    use kube::runtime::watcher;

    /// A tracked read derives only what changed in its scope; an object leaving the scope, a
    /// removal (found by the count) and a re-creation are dropped and derived as they should be.
    #[test]
    fn a_tracked_read_costs_the_changes() {
        use k8s_openapi::api::core::v1::Pod;
        let inf: SharedInformer<Pod> = SharedInformer::default();
        inf.add_index(
            crate::index::CONTROLLER_UID,
            crate::index::controller_uid::<Pod>,
        );
        let pod = |name: &str, uid: &str, v: &str| -> Pod {
            serde_json::from_value(serde_json::json!({"metadata": {"name": name, "namespace": "ns",
                "labels": {"v": v},
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": uid, "controller": true}]}}))
            .unwrap()
        };
        let put = |p: Pod| inf.apply(watcher::Event::Apply(p));
        for n in ["a", "b", "c"] {
            put(pod(n, "u", "1"));
        }
        put(pod("z", "other", "1"));
        let mut t: Tracked<String> = Tracked::default();
        let label = |p: &Arc<Pod>| {
            format!(
                "{}={}",
                p.metadata.name.as_deref().unwrap_or(""),
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("v"))
                    .cloned()
                    .unwrap_or_default()
            )
        };
        let read = |t: &mut Tracked<String>| -> (Vec<String>, Vec<String>) {
            let (added, mut dropped) =
                t.update(&inf, Some((crate::index::CONTROLLER_UID, "u")), label);
            let added = added.into_iter().cloned().collect();
            dropped.sort();
            (added, dropped)
        };
        assert_eq!(
            read(&mut t),
            (vec!["a=1".into(), "b=1".into(), "c=1".into()], vec![])
        );
        assert_eq!(read(&mut t), (vec![], vec![]));
        assert_eq!(t.derived(), 3);
        // Another owner's pods changing are not derived, nor even walked.
        for v in 2..20 {
            put(pod("z", "other", &v.to_string()));
        }
        put(pod("b", "u", "2"));
        let before = inf.stats();
        assert_eq!(read(&mut t), (vec!["b=2".into()], vec!["b=1".into()]));
        assert_eq!(t.derived(), 4);
        assert_eq!(inf.stats().since(&before).total(), 1);
        // Out of the scope by an update; out by a removal; a removal and re-creation.
        put(pod("a", "other", "3"));
        inf.apply(watcher::Event::Delete(pod("c", "u", "1")));
        put(pod("d", "u", "1"));
        assert_eq!(
            read(&mut t),
            (vec!["d=1".into()], vec!["a=1".into(), "c=1".into()])
        );
        assert_eq!(t.len(), 2);
        inf.apply(watcher::Event::Delete(pod("d", "u", "1")));
        put(pod("d", "u", "4"));
        assert_eq!(read(&mut t), (vec!["d=4".into()], vec!["d=1".into()]));
        t.clear();
        assert_eq!(read(&mut t).0, vec!["b=2".to_string(), "d=4".into()]);
    }
}
