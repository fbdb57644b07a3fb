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
    entries: BTreeMap<String, BTreeMap<ObjKey, Arc<K>>>,
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
        let mut entries: BTreeMap<String, BTreeMap<ObjKey, Arc<K>>> = BTreeMap::new();
        for (k, o) in &self.objects {
            for v in func(o) {
                entries.entry(v).or_default().insert(k.clone(), o.clone());
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
        if let Some(c) = &mut self.changes {
            if let Some(o) = &old {
                c.forget(o);
            }
            c.record(self.seq, &obj);
        }
        for ix in self.indexes.values_mut() {
            if let Some(o) = &old {
                for v in (ix.func)(o) {
                    unfile(&mut ix.entries, v, &key);
                }
            }
            for v in (ix.func)(&obj) {
                ix.entries
                    .entry(v)
                    .or_default()
                    .insert(key.clone(), obj.clone());
            }
        }
        old
    }

    /// Removes the object under `key`; returns it.
    pub fn remove(&mut self, key: &ObjKey) -> Option<Arc<K>> {
        let old = self.objects.remove(key)?;
        self.seq = self.seq.saturating_add(1);
        if let Some(c) = &mut self.changes {
            c.forget(&old);
        }
        for ix in self.indexes.values_mut() {
            for v in (ix.func)(&old) {
                unfile(&mut ix.entries, v, key);
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
            .map(|objs| objs.values().cloned().collect())
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
        let Some(objs) = self.indexes.get(name).and_then(|ix| ix.entries.get(value)) else {
            return;
        };
        objs.values().for_each(&mut f);
        bump(&self.counters.indexed, objs.len());
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
        self.changes = Some(c);
    }

    /// The number of the last change.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Calls `f` with each object stored by a change after `since` (its current version, once,
    /// in change order) and whether it is filed under `value` of index `name` (always `true`
    /// without an index). Returns the number of the last change and how many objects that
    /// scope holds now. `None` when changes are not tracked. Removed objects are not visited: a
    /// reader that kept the scope's objects as of `since` and applied these changes holds more
    /// than the scope when, and only when, some were removed.
    pub fn changes_since(
        &self,
        since: u64,
        index: Option<(&str, &str)>,
        mut f: impl FnMut(&Arc<K>, bool),
    ) -> Option<(u64, usize)> {
        let c = self.changes.as_ref()?;
        let ix = match index {
            Some((name, value)) => Some((self.indexes.get(name)?, value)),
            None => None,
        };
        let mut n = 0usize;
        for obj in c.by_seq.range(since.saturating_add(1)..).map(|(_, o)| o) {
            n = n.saturating_add(1);
            let in_scope = ix.is_none_or(|(ix, value)| (ix.func)(obj).iter().any(|v| v == value));
            f(obj, in_scope);
        }
        let counter = match ix {
            Some(_) => &self.counters.indexed,
            None => &self.counters.scanned,
        };
        bump(counter, n);
        let len = match ix {
            Some((ix, value)) => ix.entries.get(value).map_or(0, BTreeMap::len),
            None => self.objects.len(),
        };
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

fn unfile<K>(
    entries: &mut BTreeMap<String, BTreeMap<ObjKey, Arc<K>>>,
    value: String,
    key: &ObjKey,
) {
    if let Some(set) = entries.get_mut(&value) {
        set.remove(key);
        if set.is_empty() {
            entries.remove(&value);
        }
    }
}
