//! The object store behind a shared informer: objects held once (`Arc`), ordered by
//! `(namespace, name)`, with named indexes kept up to date on every change (client-go's
//! `ThreadSafeStore` with its `Indexers`), and counters of what readers took out of it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kube::Resource;

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

/// An index function: the index values an object is filed under (none: not indexed).
pub type IndexFn<K> = fn(&K) -> Vec<String>;

/// What readers took out of a store: objects handed out by each kind of read. The point is to
/// make "a sync reads only its own pods" testable (and visible in benchmarks).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadStats {
    /// Objects returned by `get`.
    pub gets: u64,
    /// Objects returned by index lookups.
    pub indexed: u64,
    /// Objects returned by namespace scans.
    pub namespace_scanned: u64,
    /// Objects returned by whole-store scans.
    pub scanned: u64,
}

impl ReadStats {
    /// Every object handed out, however it was read.
    pub fn total(&self) -> u64 {
        self.gets
            .saturating_add(self.indexed)
            .saturating_add(self.namespace_scanned)
            .saturating_add(self.scanned)
    }

    /// What was read between `earlier` and `self`.
    pub fn since(&self, earlier: &ReadStats) -> ReadStats {
        ReadStats {
            gets: self.gets.saturating_sub(earlier.gets),
            indexed: self.indexed.saturating_sub(earlier.indexed),
            namespace_scanned: self
                .namespace_scanned
                .saturating_sub(earlier.namespace_scanned),
            scanned: self.scanned.saturating_sub(earlier.scanned),
        }
    }
}

#[derive(Default)]
struct Counters {
    gets: AtomicU64,
    indexed: AtomicU64,
    namespace_scanned: AtomicU64,
    scanned: AtomicU64,
}

fn bump(c: &AtomicU64, n: usize) {
    c.fetch_add(u64::try_from(n).unwrap_or(u64::MAX), Ordering::Relaxed);
}

/// An index: value → the objects filed under it, by key (holding the `Arc`s themselves, so a
/// lookup is one map access, not one per object).
struct Index<K> {
    func: IndexFn<K>,
    entries: BTreeMap<String, Filed<K>>,
}

/// The objects filed under one index value; once changes are tracked, also by the number of the
/// change that stored each, so that a reader of this value alone visits its own changes and not
/// every change of the store (a ReplicaSet's sync: its pods, not every pod that changed).
struct Filed<K> {
    objs: BTreeMap<ObjKey, Arc<K>>,
    by_seq: BTreeMap<u64, Arc<K>>,
}

impl<K> Default for Filed<K> {
    fn default() -> Self {
        Filed {
            objs: BTreeMap::new(),
            by_seq: BTreeMap::new(),
        }
    }
}

/// Every object at the number of the last change that stored it, so that a reader can visit
/// what changed since it last read (see [`Store::changes_since`]). Kept only once a reader asks
/// ([`Store::track_changes`]).
struct Changes<K> {
    by_seq: BTreeMap<u64, Arc<K>>,
    /// The change number of each stored version (by the `Arc`'s address; `by_seq` holds the
    /// `Arc`, so the address names that version while it is here).
    seq_of: HashMap<usize, u64, crate::derived::Fixed>,
}

impl<K> Default for Changes<K> {
    fn default() -> Self {
        Changes {
            by_seq: BTreeMap::new(),
            seq_of: HashMap::default(),
        }
    }
}

impl<K> Changes<K> {
    fn forget(&mut self, old: &Arc<K>) {
        if let Some(seq) = self.seq_of.remove(&(Arc::as_ptr(old) as usize)) {
            self.by_seq.remove(&seq);
        }
    }

    fn record(&mut self, seq: u64, obj: &Arc<K>) {
        self.by_seq.insert(seq, obj.clone());
        self.seq_of.insert(Arc::as_ptr(obj) as usize, seq);
    }

    /// The change number of this stored version, if recorded.
    fn seq_of(&self, obj: &Arc<K>) -> Option<u64> {
        self.seq_of.get(&(Arc::as_ptr(obj) as usize)).copied()
    }
}

/// Objects of one kind by key, with indexes.
pub struct Store<K> {
    objects: BTreeMap<ObjKey, Arc<K>>,
    indexes: BTreeMap<&'static str, Index<K>>,
    counters: Counters,
    /// Changes so far (every insert and remove).
    seq: u64,
    changes: Option<Changes<K>>,
}

impl<K> Default for Store<K> {
    fn default() -> Self {
        Store {
            objects: BTreeMap::new(),
            indexes: BTreeMap::new(),
            counters: Counters::default(),
            seq: 0,
            changes: None,
        }
    }
}

impl<K: Resource> Store<K> {
    /// Adds an index (a no-op when one of that name exists), filing every object already held.
    pub fn add_index(&mut self, name: &'static str, func: IndexFn<K>) {
        if self.indexes.contains_key(name) {
            return;
        }
        let mut entries: BTreeMap<String, Filed<K>> = BTreeMap::new();
        for (k, o) in &self.objects {
            let seq = self.changes.as_ref().and_then(|c| c.seq_of(o));
            for v in func(o) {
                file(&mut entries, v, k, o, seq);
            }
        }
        self.indexes.insert(name, Index { func, entries });
    }

    pub fn has_index(&self, name: &str) -> bool {
        self.indexes.contains_key(name)
    }

    /// Stores `obj` under its key; returns what it replaced.
    pub fn insert(&mut self, obj: Arc<K>) -> Option<Arc<K>> {
        let key = key_of(obj.as_ref());
        let old = self.objects.insert(key.clone(), obj.clone());
        self.seq = self.seq.saturating_add(1);
        let mut old_seq = None;
        let mut seq = None;
        if let Some(c) = &mut self.changes {
            if let Some(o) = &old {
                old_seq = c.seq_of(o);
                c.forget(o);
            }
            c.record(self.seq, &obj);
            seq = Some(self.seq);
        }
        for ix in self.indexes.values_mut() {
            if let Some(o) = &old {
                for v in (ix.func)(o) {
                    unfile(&mut ix.entries, v, &key, old_seq);
                }
            }
            for v in (ix.func)(&obj) {
                file(&mut ix.entries, v, &key, &obj, seq);
            }
        }
        old
    }

    /// Removes the object under `key`; returns it.
    pub fn remove(&mut self, key: &ObjKey) -> Option<Arc<K>> {
        let old = self.objects.remove(key)?;
        self.seq = self.seq.saturating_add(1);
        let mut old_seq = None;
        if let Some(c) = &mut self.changes {
            old_seq = c.seq_of(&old);
            c.forget(&old);
        }
        for ix in self.indexes.values_mut() {
            for v in (ix.func)(&old) {
                unfile(&mut ix.entries, v, key, old_seq);
            }
        }
        Some(old)
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The object under `key`.
    pub fn get(&self, key: &ObjKey) -> Option<Arc<K>> {
        let o = self.objects.get(key).cloned();
        bump(&self.counters.gets, usize::from(o.is_some()));
        o
    }

    /// Every object in key order.
    pub fn list(&self) -> Vec<Arc<K>> {
        let v: Vec<Arc<K>> = self.objects.values().cloned().collect();
        bump(&self.counters.scanned, v.len());
        v
    }

    /// Objects of one namespace in name order.
    pub fn in_namespace(&self, ns: &str) -> Vec<Arc<K>> {
        let v: Vec<Arc<K>> = self
            .objects
            .range((ns.to_string(), String::new())..)
            .take_while(|((n, _), _)| n == ns)
            .map(|(_, o)| o.clone())
            .collect();
        bump(&self.counters.namespace_scanned, v.len());
        v
    }

    /// Objects filed under `value` in index `name`, in key order (none when there is no such index).
    pub fn by_index(&self, name: &str, value: &str) -> Vec<Arc<K>> {
        let v: Vec<Arc<K>> = self
            .indexes
            .get(name)
            .and_then(|ix| ix.entries.get(value))
            .map(|f| f.objs.values().cloned().collect())
            .unwrap_or_default();
        bump(&self.counters.indexed, v.len());
        v
    }

    /// Calls `f` with each object in key order, without handing the objects out.
    pub fn visit(&self, f: impl FnMut(&Arc<K>)) {
        self.objects.values().for_each(f);
        bump(&self.counters.scanned, self.objects.len());
    }

    /// Calls `f` with each object filed under `value` in index `name`, in key order, without
    /// handing the objects out (no `Arc` is cloned unless `f` keeps one).
    pub fn visit_index(&self, name: &str, value: &str, mut f: impl FnMut(&Arc<K>)) {
        let Some(filed) = self.indexes.get(name).and_then(|ix| ix.entries.get(value)) else {
            return;
        };
        filed.objs.values().for_each(&mut f);
        bump(&self.counters.indexed, filed.objs.len());
    }

    /// Keeps, from now on, what changed when (idempotent): every object held is taken as
    /// changed now.
    pub fn track_changes(&mut self) {
        if self.changes.is_some() {
            return;
        }
        let mut c = Changes::default();
        for obj in self.objects.values() {
            self.seq = self.seq.saturating_add(1);
            c.record(self.seq, obj);
        }
        for ix in self.indexes.values_mut() {
            for filed in ix.entries.values_mut() {
                for obj in filed.objs.values() {
                    if let Some(seq) = c.seq_of(obj) {
                        filed.by_seq.insert(seq, obj.clone());
                    }
                }
            }
        }
        self.changes = Some(c);
    }

    /// The number of the last change.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Calls `f` with each object of a scope (every object, or those filed under `value` of
    /// index `name`) stored by a change after `since`: its current version, once, in change
    /// order; only the scope's own changes are walked. Returns the number of the last change
    /// and how many objects the scope holds now. `None` when changes are not tracked or there
    /// is no such index. Objects removed from the scope (deleted, or now filed elsewhere) are
    /// not visited: a reader that kept the scope's objects as of `since` and applied these
    /// changes holds more than the scope when, and only when, some left it.
    pub fn changes_since(
        &self,
        since: u64,
        index: Option<(&str, &str)>,
        mut f: impl FnMut(&Arc<K>),
    ) -> Option<(u64, usize)> {
        let c = self.changes.as_ref()?;
        let (log, len, counter) = match index {
            Some((name, value)) => match self.indexes.get(name)?.entries.get(value) {
                Some(filed) => (&filed.by_seq, filed.objs.len(), &self.counters.indexed),
                None => return Some((self.seq, 0)),
            },
            None => (&c.by_seq, self.objects.len(), &self.counters.scanned),
        };
        let mut n = 0usize;
        for obj in log.range(since.saturating_add(1)..).map(|(_, o)| o) {
            n = n.saturating_add(1);
            f(obj);
        }
        bump(counter, n);
        Some((self.seq, len))
    }

    /// The object under `key`, not counted as a read (the informer's own bookkeeping).
    pub(crate) fn peek(&self, key: &ObjKey) -> Option<Arc<K>> {
        self.objects.get(key).cloned()
    }

    /// Keys in key order (not counted as reads: no object is handed out).
    pub fn keys(&self) -> Vec<ObjKey> {
        self.objects.keys().cloned().collect()
    }

    /// Reads so far.
    pub fn stats(&self) -> ReadStats {
        ReadStats {
            gets: self.counters.gets.load(Ordering::Relaxed),
            indexed: self.counters.indexed.load(Ordering::Relaxed),
            namespace_scanned: self.counters.namespace_scanned.load(Ordering::Relaxed),
            scanned: self.counters.scanned.load(Ordering::Relaxed),
        }
    }
}

/// Files `obj` under `value` (at change `seq`, when changes are tracked).
fn file<K>(
    entries: &mut BTreeMap<String, Filed<K>>,
    value: String,
    key: &ObjKey,
    obj: &Arc<K>,
    seq: Option<u64>,
) {
    let filed = entries.entry(value).or_default();
    filed.objs.insert(key.clone(), obj.clone());
    if let Some(seq) = seq {
        filed.by_seq.insert(seq, obj.clone());
    }
}

/// Takes the object under `key` (stored at change `seq`) out of `value`.
fn unfile<K>(
    entries: &mut BTreeMap<String, Filed<K>>,
    value: String,
    key: &ObjKey,
    seq: Option<u64>,
) {
    if let Some(filed) = entries.get_mut(&value) {
        filed.objs.remove(key);
        if let Some(seq) = seq {
            filed.by_seq.remove(&seq);
        }
        if filed.objs.is_empty() {
            entries.remove(&value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    fn by_label(cm: &ConfigMap) -> Vec<String> {
        cm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("v"))
            .cloned()
            .into_iter()
            .collect()
    }

    /// A reader of one index value that keeps the objects it was shown (by key, the version)
    /// and finds the ones that left by the count, as `Tracked` does, holds the scope after every
    /// sequence of stores, removals, moves between values, and changes tracked or an index added
    /// part way; and each read walks only changes of its own value.
    #[test]
    fn a_scope_read_from_its_changes_is_the_scope() {
        #[derive(Clone, Debug)]
        enum Op {
            Put(u8, u8),
            Remove(u8),
            Track,
            AddIndex,
            Read(u8),
        }
        let op = prop_oneof![
            4 => (0u8..8, 0u8..3).prop_map(|(k, v)| Op::Put(k, v)),
            1 => (0u8..8).prop_map(Op::Remove),
            1 => Just(Op::Track),
            1 => Just(Op::AddIndex),
            2 => (0u8..3).prop_map(Op::Read),
        ];
        TestRunner::new(Config {
            cases: 300,
            ..Config::default()
        })
        .run(&proptest::collection::vec(op, 1..60), |ops| {
            let mut store: Store<ConfigMap> = Store::default();
            // Per value: the change number of the last read and what it kept.
            let mut readers: Vec<(u64, BTreeMap<ObjKey, Arc<ConfigMap>>)> =
                vec![(0, BTreeMap::new()); 3];
            let mut version = 0u32;
            for op in ops {
                match op {
                    Op::Put(k, v) => {
                        version = version.saturating_add(1);
                        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
                            "metadata": {"name": format!("c{k}"), "namespace": "ns",
                                "labels": {"v": v.to_string()},
                                "annotations": {"version": version.to_string()}}}))
                        .unwrap();
                        store.insert(Arc::new(cm));
                    }
                    Op::Remove(k) => {
                        store.remove(&("ns".into(), format!("c{k}")));
                    }
                    Op::Track => store.track_changes(),
                    Op::AddIndex => store.add_index("v", by_label),
                    Op::Read(v) => {
                        let value = v.to_string();
                        let (since, kept) = &mut readers[usize::from(v)];
                        let before = store.stats();
                        let mut walked = 0u64;
                        let seen = store.changes_since(*since, Some(("v", &value)), |o| {
                            walked += 1;
                            kept.insert(key_of(o.as_ref()), o.clone());
                        });
                        let Some((now, len)) = seen else {
                            // untracked, or no index yet: the reader starts over later
                            *since = 0;
                            kept.clear();
                            continue;
                        };
                        prop_assert_eq!(store.stats().since(&before).indexed, walked);
                        *since = now;
                        if kept.len() != len {
                            let mut present = Vec::new();
                            store.visit_index("v", &value, |o| present.push(key_of(o.as_ref())));
                            kept.retain(|k, _| present.contains(k));
                        }
                        let scope: BTreeMap<ObjKey, Arc<ConfigMap>> = store
                            .by_index("v", &value)
                            .into_iter()
                            .map(|o| (key_of(o.as_ref()), o))
                            .collect();
                        prop_assert_eq!(kept.len(), scope.len());
                        for (k, o) in &scope {
                            prop_assert!(kept.get(k).is_some_and(|x| Arc::ptr_eq(x, o)));
                        }
                        // Every object walked was changed in this value since the last read.
                        prop_assert!(walked <= u64::try_from(scope.len()).unwrap());
                    }
                }
            }
            Ok(())
        })
        .unwrap();
    }
}
