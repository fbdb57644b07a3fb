//! In-memory backend (sim and tests): an MVCC key history, an event log and the watch hub, all
//! under one mutex.
//!
//! Made for `klab sim` on a paused current-thread runtime: no threads, no I/O, no
//! `spawn_blocking`, nothing that awaits. Every operation completes synchronously under the lock,
//! so results depend only on call order, and a write's event is queued to every watcher before the
//! write returns.
//!
//! Data model (the same as the redb backend, etcd's MVCC in miniature):
//! * `keys`: every retained version of every key, newest last; a deletion leaves a tombstone so
//!   that reads at a past revision see the key as absent from then on.
//!   Each value is held packed against a sibling under the same parent key (`pack`): the
//!   pods of one namespace, the versions of one key, cost what they do not share.
//! * `log`: one entry per revision, dense from `compacted + 1` to `rev`, for watch replay (the
//!   values are read from `keys`: the log holds none).
//! * `compact(c)` drops log entries ≤ c and, per key, every version ≤ c except the newest one
//!   (which a read at revision c still needs) unless that one is a tombstone. History therefore
//!   stays bounded under constant Lease renewals as long as the API server compacts periodically.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;

use crate::pack::{Held, Packer};
use crate::watch::{self, Hub};
use crate::{
    Event, EventKind, KeyValue, ListOptions, ListResult, Result, Revision, Storage, StoreError,
    WatchStream,
};

/// Tuning of the memory store.
#[derive(Clone, Debug)]
pub struct MemoryConfig {
    /// Live-queue capacity per watcher, in events; a watcher further behind gets `Lagged`.
    pub watch_buffer: usize,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            watch_buffer: watch::DEFAULT_WATCH_BUFFER,
        }
    }
}

/// One retained version of a key.
#[derive(Clone, Debug)]
struct Version {
    /// The revision that wrote this version.
    rev: Revision,
    /// The key's create revision as of this version (unused for tombstones).
    create_rev: Revision,
    /// `None` marks a deletion.
    value: Option<Held>,
}

/// A revision in the watch log: which key changed and how (its values are the key's versions).
#[derive(Clone, Debug)]
struct Logged {
    revision: Revision,
    kind: EventKind,
    /// The key, shared with `keys` (one allocation per key, not one per revision).
    key: Arc<str>,
}

#[derive(Default)]
struct Inner {
    rev: Revision,
    compacted: Revision,
    keys: BTreeMap<Arc<str>, Vec<Version>>,
    log: VecDeque<Logged>,
    hub: Hub,
    /// Retained versions and the bytes their values hold (packed ones at their packed size,
    /// dictionaries apart: see `Packer::dict_bytes`), kept as they change.
    versions: u64,
    value_bytes: u64,
    packer: Packer,
}

/// The in-memory [`Storage`] backend. Create it with [`MemoryStore::new`], which returns an
/// `Arc<MemoryStore>` (coerces to [`crate::DynStorage`]).
pub struct MemoryStore {
    inner: Mutex<Inner>,
    config: MemoryConfig,
}

impl MemoryStore {
    /// An empty store with the default configuration.
    pub fn new() -> Arc<Self> {
        Self::with_config(MemoryConfig::default())
    }

    pub fn with_config(config: MemoryConfig) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(Inner::default()),
            config,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock can only come from a bug in this module; the data is
        // still structurally valid, so keep serving rather than poisoning every later caller.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Number of retained key versions (tombstones included): shows that compaction bounds
    /// history. Diagnostics and tests.
    pub fn retained_versions(&self) -> usize {
        self.lock().keys.values().map(Vec::len).sum()
    }

    /// The bytes of every retained version's value and of every dictionary they or the packer
    /// hold, each counted once, with the packer's indexes, by a walk (what
    /// [`Storage::memory_held`] keeps as it goes). Tests.
    #[cfg(test)]
    fn retained_value_bytes(&self) -> u64 {
        let g = self.lock();
        let held = g.keys.values().flatten().filter_map(|v| v.value.as_ref());
        let mut dicts: Vec<&Arc<crate::pack::Dict>> = held
            .clone()
            .filter_map(Held::dict)
            .chain(g.packer.current_dicts())
            .collect();
        dicts.sort_by_key(|d| Arc::as_ptr(d));
        dicts.dedup_by(|a, b| Arc::ptr_eq(a, b));
        held.map(|b| b.held_len() as u64).sum::<u64>()
            + dicts.iter().map(|d| d.len() as u64).sum::<u64>()
            + g.packer.index_bytes()
    }

    /// Asserts that the running counts of [`Storage::memory_held`] are what a walk finds.
    #[cfg(test)]
    fn assert_memory_held(&self) {
        assert_eq!(
            self.memory_held(),
            Some((self.retained_versions() as u64, self.retained_value_bytes()))
        );
    }

    /// Number of retained events in the watch log. Diagnostics and tests.
    pub fn retained_events(&self) -> usize {
        self.lock().log.len()
    }

    /// Number of registered live watchers. Diagnostics and tests.
    pub fn watcher_count(&self) -> usize {
        self.lock().hub.len()
    }
}

impl Inner {
    fn current(&self, key: &str) -> Option<KeyValue> {
        let versions = self.keys.get(key)?;
        let last = versions.len().checked_sub(1)?;
        // An error could only come from a broken invariant (a value that does not unpack), and
        // reads as absent.
        match value_at(versions, last) {
            Ok(value) => kv_of(key, &versions[last], value),
            Err(e) => {
                tracing::error!(key, error = %e, "current value unreadable");
                None
            }
        }
    }

    /// Appends a version and its event, publishes the event; returns the new revision.
    fn commit(
        &mut self,
        key: &str,
        value: Option<Bytes>,
        prev: Option<&KeyValue>,
        memo: crate::Memo,
    ) -> Revision {
        let rev = self.rev + 1;
        self.rev = rev;
        let create_rev = match (&value, prev) {
            (Some(_), Some(p)) => p.create_revision,
            _ => rev,
        };
        let kind = match (&value, prev) {
            (None, _) => EventKind::Delete,
            (Some(_), Some(_)) => EventKind::Update,
            (Some(_), None) => EventKind::Create,
        };
        let event = Arc::new(Event {
            revision: rev,
            kind,
            key: key.to_owned(),
            value: value.clone(),
            prev_value: prev.map(|p| p.value.clone()),
            memo,
        });
        // The version this one supersedes stays as it is held: history costs nothing more.
        let held = value.map(|v| self.packer.hold(key, v));
        self.versions = self.versions.saturating_add(1);
        self.value_bytes = self
            .value_bytes
            .saturating_add(held.as_ref().map_or(0, |v| v.held_len() as u64));
        let shared: Arc<str> = match self.keys.get_key_value(key) {
            Some((k, _)) => k.clone(),
            None => Arc::from(key),
        };
        self.keys.entry(shared.clone()).or_default().push(Version {
            rev,
            create_rev,
            value: held,
        });
        self.log.push_back(Logged {
            revision: rev,
            kind,
            key: shared,
        });
        self.hub.publish(&event);
        rev
    }

    fn conflict(&self, key: &str, expected: Revision) -> StoreError {
        StoreError::Conflict {
            key: key.to_owned(),
            expected,
            current: self.current(key).map(Box::new),
        }
    }

    fn compact(&mut self, rev: Revision) {
        let target = rev.min(self.rev);
        if target <= self.compacted {
            return;
        }
        // Only keys written in (compacted, target] can have versions that become droppable.
        let mut touched = BTreeSet::new();
        while self.log.front().is_some_and(|e| e.revision <= target) {
            if let Some(e) = self.log.pop_front() {
                touched.insert(e.key.clone());
            }
        }
        for key in touched {
            let Some(versions) = self.keys.get_mut(&*key) else {
                continue;
            };
            // Versions ≤ target: keep only the newest, and only if it is not a tombstone.
            let at_or_below = versions.partition_point(|v| v.rev <= target);
            let keep_newest = at_or_below > 0 && versions[at_or_below - 1].value.is_some();
            let drop_n = if keep_newest {
                at_or_below - 1
            } else {
                at_or_below
            };
            for v in versions.drain(..drop_n) {
                self.versions = self.versions.saturating_sub(1);
                self.value_bytes = self
                    .value_bytes
                    .saturating_sub(v.value.as_ref().map_or(0, |v| v.held_len() as u64));
            }
            if versions.is_empty() {
                self.keys.remove(&*key);
            }
        }
        self.packer.sweep();
        self.compacted = target;
    }
}

fn kv_of(key: &str, v: &Version, value: Option<Bytes>) -> Option<KeyValue> {
    value.map(|value| KeyValue {
        key: key.to_owned(),
        value,
        create_revision: v.create_rev,
        mod_revision: v.rev,
    })
}

/// The value of `versions[idx]` (`None` for a tombstone), unpacked.
fn value_at(versions: &[Version], idx: usize) -> std::result::Result<Option<Bytes>, String> {
    match versions.get(idx) {
        None => Err(format!("version {idx} of {} missing", versions.len())),
        Some(v) => v.value.as_ref().map(Held::bytes).transpose(),
    }
}

/// The event of a logged revision, its values read from the key's versions.
fn replayed(inner: &Inner, e: &Logged) -> Result<Arc<Event>> {
    let unreadable = |why: String| {
        StoreError::Io(format!(
            "history of {} at revision {} unreadable: {why}",
            e.key, e.revision
        ))
    };
    let versions = inner
        .keys
        .get(&*e.key)
        .ok_or_else(|| unreadable("no versions".into()))?;
    let idx = versions
        .binary_search_by_key(&e.revision, |v| v.rev)
        .map_err(|_| unreadable("no version".into()))?;
    let value = value_at(versions, idx).map_err(unreadable)?;
    let prev_value = match e.kind {
        EventKind::Create => None,
        _ => {
            let prev = idx
                .checked_sub(1)
                .ok_or_else(|| unreadable("no previous version".into()))?;
            value_at(versions, prev).map_err(unreadable)?
        }
    };
    Ok(Arc::new(Event {
        revision: e.revision,
        kind: e.kind,
        key: e.key.to_string(),
        value,
        prev_value,
        memo: crate::Memo::default(),
    }))
}

/// Resolves `ListOptions::revision` against the store's current and compacted revisions: `None`
/// and `Some(0)` mean "current" (etcd's convention).
pub(crate) fn read_revision(
    requested: Option<Revision>,
    current: Revision,
    compacted: Revision,
) -> Result<Revision> {
    match requested {
        None | Some(0) => Ok(current),
        Some(r) if r > current => Err(StoreError::FutureRevision {
            requested: r,
            current,
        }),
        Some(r) if r < compacted => Err(StoreError::Compacted {
            requested: r,
            compacted,
        }),
        Some(r) => Ok(r),
    }
}

/// The first key to read for `prefix` and `start_key` (a start key below the prefix is ignored).
pub(crate) fn range_start<'a>(prefix: &'a str, start_key: Option<&'a str>) -> &'a str {
    match start_key {
        Some(s) if s > prefix => s,
        _ => prefix,
    }
}

/// `ListOptions::limit`, with `Some(0)` meaning "no limit" as in etcd.
pub(crate) fn effective_limit(limit: Option<usize>) -> usize {
    match limit {
        None | Some(0) => usize::MAX,
        Some(n) => n,
    }
}

impl MemoryStore {
    /// Distinct prefixes of the watchers without a trigger (tests).
    #[cfg(test)]
    fn hub_prefixes(&self) -> usize {
        self.lock().hub.plain_prefixes()
    }
}

#[async_trait::async_trait]
impl Storage for MemoryStore {
    fn current_revision(&self) -> Revision {
        self.lock().rev
    }

    fn compacted_revision(&self) -> Revision {
        self.lock().compacted
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        Ok(self.lock().current(key))
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        let inner = self.lock();
        let at = read_revision(opts.revision, inner.rev, inner.compacted)?;
        let limit = effective_limit(opts.limit);
        let start = range_start(prefix, opts.start_key.as_deref());
        let mut out = ListResult {
            kvs: Vec::new(),
            revision: at,
            remaining: 0,
        };
        let range = inner
            .keys
            .range::<str, _>((std::ops::Bound::Included(start), std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix));
        // A key the list's index leaves out by its name alone is not unpacked (see
        // `ListOptions::index` for `remaining` then).
        let index = opts.index.as_ref().filter(|_| limit == usize::MAX);
        let mut left_out = false;
        for (key, versions) in range {
            let Some(i) = versions.partition_point(|v| v.rev <= at).checked_sub(1) else {
                continue;
            };
            let v = &versions[i];
            if index.is_some_and(|t| !t.may_want_key(key)) {
                left_out |= v.value.is_some();
                continue;
            }
            // Past the limit a live key is only counted, not copied out.
            if out.kvs.len() < limit {
                let value = value_at(versions, i).map_err(|e| {
                    StoreError::Io(format!("{key} at revision {at} unreadable: {e}"))
                })?;
                left_out &= value.is_none();
                out.kvs.extend(kv_of(key, v, value));
            } else if v.value.is_some() {
                out.remaining += 1;
            }
        }
        if index.is_some() {
            out.remaining = u64::from(left_out);
        }
        Ok(out)
    }

    async fn create_noted(&self, key: &str, value: Bytes, memo: crate::Memo) -> Result<Revision> {
        let mut inner = self.lock();
        // Whether the key is live, read without unpacking its value.
        if inner
            .keys
            .get(key)
            .and_then(|v| v.last())
            .is_some_and(|v| v.value.is_some())
        {
            return Err(StoreError::AlreadyExists(key.to_owned()));
        }
        Ok(inner.commit(key, Some(value), None, memo))
    }

    async fn update_noted(
        &self,
        key: &str,
        value: Bytes,
        expected: Revision,
        memo: crate::Memo,
    ) -> Result<Revision> {
        let mut inner = self.lock();
        let Some(prev) = inner.current(key) else {
            return Err(StoreError::NotFound(key.to_owned()));
        };
        if prev.mod_revision != expected {
            return Err(inner.conflict(key, expected));
        }
        Ok(inner.commit(key, Some(value), Some(&prev), memo))
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)> {
        let mut inner = self.lock();
        let Some(prev) = inner.current(key) else {
            return Err(StoreError::NotFound(key.to_owned()));
        };
        if let Some(expected) = expected
            && prev.mod_revision != expected
        {
            return Err(inner.conflict(key, expected));
        }
        let rev = inner.commit(key, None, Some(&prev), crate::Memo::shared());
        Ok((rev, prev))
    }

    fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
        self.watch_triggered(prefix, after, None)
    }

    fn memory_held(&self) -> Option<(u64, u64)> {
        let g = self.lock();
        Some((
            g.versions,
            g.value_bytes.saturating_add(g.packer.dict_bytes()),
        ))
    }

    fn offered_events(&self) -> u64 {
        self.lock().hub.offered()
    }

    fn watch_triggered(
        &self,
        prefix: &str,
        after: Revision,
        trigger: Option<crate::Trigger>,
    ) -> Result<WatchStream> {
        let mut inner = self.lock();
        if after < inner.compacted {
            return Err(StoreError::Compacted {
                requested: after,
                compacted: inner.compacted,
            });
        }
        // Snapshot of the history and registration happen under one lock: no gap, no duplicate.
        let first = inner.log.front().map_or(inner.rev + 1, |e| e.revision);
        let skip =
            usize::try_from(after.saturating_add(1).saturating_sub(first)).unwrap_or(usize::MAX);
        let skip = skip.min(inner.log.len());
        let replay = inner
            .log
            .range(skip..)
            .filter(|e| e.key.starts_with(prefix))
            .map(|e| replayed(&inner, e))
            .collect::<Result<VecDeque<Arc<Event>>>>()?;
        let sub = inner
            .hub
            .subscribe_triggered(prefix, trigger.as_ref(), self.config.watch_buffer);
        let skip_through = inner.rev.max(after);
        Ok(watch::feed(Box::new(replay), sub, skip_through))
    }

    async fn compact(&self, rev: Revision) -> Result<()> {
        self.lock().compact(rev);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::conformance::{self, Fixture};

    fn fixture() -> Fixture {
        Fixture::new(MemoryStore::new())
    }

    // The whole suite, on the paused current-thread runtime that `klab sim` uses.
    crate::storage_conformance_tests!(fixture(), start_paused = true);

    #[tokio::test(start_paused = true)]
    async fn run_all_passes_and_takes_no_virtual_time() {
        let start = tokio::time::Instant::now();
        conformance::run_all(fixture).await;
        // Nothing in the memory store waits: the whole suite happens at one virtual instant.
        assert_eq!(tokio::time::Instant::now(), start);
    }

    #[tokio::test(start_paused = true)]
    async fn lagging_watcher_gets_lagged_after_queued_events_then_ends() {
        let store = MemoryStore::with_config(MemoryConfig { watch_buffer: 4 });
        let mut w = store.watch("/a/", 0).unwrap();
        for i in 0..10 {
            store
                .create(&format!("/a/{i}"), Bytes::from_static(b"v"))
                .await
                .unwrap();
        }
        // The replay was empty; the live queue held 4 events, the 5th (revision 5) overflowed.
        for want in 1..=4 {
            assert_eq!(w.next().await.unwrap().unwrap().revision, want);
        }
        assert_eq!(w.next().await.unwrap(), Err(StoreError::Lagged(5)));
        assert!(w.next().await.is_none());
        // The dropped watcher no longer costs anything.
        assert_eq!(store.watcher_count(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn unrelated_traffic_does_not_make_a_watcher_lag() {
        let store = MemoryStore::with_config(MemoryConfig { watch_buffer: 4 });
        let mut pods = store.watch("/registry/pods/", 0).unwrap();
        for i in 0..100u32 {
            let key = "/registry/leases/kube-node-lease/n1";
            match store.get(key).await.unwrap() {
                None => store.create(key, Bytes::from(i.to_string())).await.unwrap(),
                Some(kv) => store
                    .update(key, Bytes::from(i.to_string()), kv.mod_revision)
                    .await
                    .unwrap(),
            };
        }
        let rev = store
            .create("/registry/pods/default/p", Bytes::from_static(b"p"))
            .await
            .unwrap();
        assert_eq!(rev, 101);
        assert_eq!(pods.next().await.unwrap().unwrap().revision, 101);
    }

    #[tokio::test(start_paused = true)]
    async fn store_drop_ends_watch_with_closed() {
        let store = MemoryStore::new();
        let mut w = store.watch("", 0).unwrap();
        store.create("/k", Bytes::from_static(b"v")).await.unwrap();
        drop(store);
        assert_eq!(w.next().await.unwrap().unwrap().revision, 1);
        assert_eq!(w.next().await.unwrap(), Err(StoreError::Closed));
        assert!(w.next().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn lease_renewals_with_periodic_compaction_keep_history_bounded() {
        let store = MemoryStore::new();
        let nodes = 50;
        let mut revs: BTreeMap<String, Revision> = BTreeMap::new();
        for round in 0..40u32 {
            for n in 0..nodes {
                let key = format!("/registry/leases/kube-node-lease/node-{n}");
                let value = Bytes::from(format!("renew {round} {}", "x".repeat(n)));
                let rev = match revs.get(&key) {
                    None => store.create(&key, value).await.unwrap(),
                    Some(&r) => store.update(&key, value, r).await.unwrap(),
                };
                revs.insert(key, rev);
            }
            if round % 5 == 4 {
                let current = store.current_revision();
                store.compact(current).await.unwrap();
                // One version per live key survives; the log is empty right after compaction.
                assert_eq!(store.retained_versions(), nodes);
                assert_eq!(store.retained_events(), 0);
            }
            store.assert_memory_held();
        }
        assert_eq!(store.current_revision(), 40 * nodes as u64);
        // Between compactions history grows by at most one version per write.
        assert!(store.retained_versions() <= nodes + 5 * nodes);
    }

    #[tokio::test(start_paused = true)]
    async fn compaction_forgets_deleted_keys() {
        let store = MemoryStore::new();
        let r = store
            .create("/a/x", Bytes::from_static(b"1"))
            .await
            .unwrap();
        store.delete("/a/x", Some(r)).await.unwrap();
        store
            .create("/a/y", Bytes::from_static(b"2"))
            .await
            .unwrap();
        store.assert_memory_held();
        store.compact(2).await.unwrap();
        assert_eq!(store.retained_versions(), 1);
        store.assert_memory_held();
        assert_eq!(store.memory_held(), Some((1, 1)));
        let list = store
            .list(
                "/a/",
                ListOptions {
                    revision: Some(2),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert!(list.kvs.is_empty());
    }

    #[test]
    fn read_revision_resolution() {
        // (requested, current, compacted) → result
        let cases: &[(Option<Revision>, Revision, Revision, Result<Revision>)] = &[
            (None, 7, 0, Ok(7)),
            (Some(0), 7, 3, Ok(7)),
            (Some(3), 7, 3, Ok(3)),
            (Some(7), 7, 3, Ok(7)),
            (
                Some(2),
                7,
                3,
                Err(StoreError::Compacted {
                    requested: 2,
                    compacted: 3,
                }),
            ),
            (
                Some(8),
                7,
                3,
                Err(StoreError::FutureRevision {
                    requested: 8,
                    current: 7,
                }),
            ),
        ];
        for (req, cur, comp, want) in cases {
            assert_eq!(
                &read_revision(*req, *cur, *comp),
                want,
                "{req:?} {cur} {comp}"
            );
        }
    }

    #[test]
    fn range_start_and_limit() {
        assert_eq!(range_start("/a/", None), "/a/");
        assert_eq!(range_start("/a/", Some("/a/m")), "/a/m");
        assert_eq!(range_start("/a/", Some("/")), "/a/");
        assert_eq!(effective_limit(None), usize::MAX);
        assert_eq!(effective_limit(Some(0)), usize::MAX);
        assert_eq!(effective_limit(Some(3)), 3);
    }

    /// The index of the trigger tests: the value is the bytes before the first `:` (a node name).
    fn node_of(_key: &str, value: &[u8]) -> Option<String> {
        let s = std::str::from_utf8(value).ok()?;
        Some(s.split(':').next().unwrap_or_default().to_string())
    }

    const NODE: crate::TriggerIndex = crate::TriggerIndex {
        name: "node",
        func: node_of,
        prefix: Some("/p/"),
    };

    fn on(node: &str) -> Option<crate::Trigger> {
        Some(crate::Trigger {
            index: NODE,
            value: node.to_string(),
        })
    }

    /// A change is offered only to the watchers of its key's prefixes (found by prefix, not by
    /// visiting every watcher): a Lease renewal reaches the Lease and whole-store watchers, not
    /// the pod watchers; a pod change reaches the pod, its namespace's and the whole-store ones.
    #[tokio::test(start_paused = true)]
    async fn a_change_is_offered_only_to_the_watchers_of_its_prefixes() {
        let store = MemoryStore::new();
        let mut pods: Vec<_> = (0..3)
            .map(|_| store.watch("/registry/core/pods/", 0).unwrap())
            .collect();
        let mut ns1 = store.watch("/registry/core/pods/ns1/", 0).unwrap();
        let mut leases = store.watch("/registry/leases/", 0).unwrap();
        let mut everything = store.watch("/", 0).unwrap();
        let before = store.offered_events();
        store
            .create("/registry/leases/n1", Bytes::from_static(b"l"))
            .await
            .unwrap();
        assert_eq!(store.offered_events() - before, 2);
        store
            .create("/registry/core/pods/ns1/p", Bytes::from_static(b"p"))
            .await
            .unwrap();
        store
            .create("/registry/core/pods/ns10/q", Bytes::from_static(b"q"))
            .await
            .unwrap();
        assert_eq!(store.offered_events() - before, 2 + 5 + 4);
        let key = |e: Option<Result<crate::Event>>| e.unwrap().unwrap().key;
        assert_eq!(key(leases.next().await), "/registry/leases/n1");
        assert_eq!(key(ns1.next().await), "/registry/core/pods/ns1/p");
        for k in [
            "/registry/leases/n1",
            "/registry/core/pods/ns1/p",
            "/registry/core/pods/ns10/q",
        ] {
            assert_eq!(key(everything.next().await), k);
        }
        for w in &mut pods {
            assert_eq!(key(w.next().await), "/registry/core/pods/ns1/p");
            assert_eq!(key(w.next().await), "/registry/core/pods/ns10/q");
        }
        // A dropped watcher is forgotten when an event under its prefix reaches it, and its
        // prefix with it once it was the last.
        assert_eq!(store.hub_prefixes(), 4);
        drop((ns1, leases));
        store
            .create("/registry/leases/n2", Bytes::from_static(b"l"))
            .await
            .unwrap();
        assert_eq!(store.hub_prefixes(), 3, "the Lease prefix is gone");
        store
            .create("/registry/core/pods/ns1/r", Bytes::from_static(b"r"))
            .await
            .unwrap();
        assert_eq!(
            store.hub_prefixes(),
            2,
            "the pods and whole-store prefixes remain"
        );
    }

    /// A watcher with a trigger is offered only the changes whose old or new value files under
    /// its value (a pod moving onto or off its node included); one without sees everything; the
    /// hub's count of offered events shows the others were never looked at.
    #[tokio::test(start_paused = true)]
    async fn a_triggered_watcher_is_offered_only_its_values_changes() {
        let store = MemoryStore::new();
        let mut n1 = store
            .watch_triggered("/registry/pods/", 0, on("n1"))
            .unwrap();
        let mut n2 = store
            .watch_triggered("/registry/pods/", 0, on("n2"))
            .unwrap();
        let _n3 = store
            .watch_triggered("/registry/pods/", 0, on("n3"))
            .unwrap();
        let mut all = store.watch("/registry/pods/", 0).unwrap();
        let before = store.offered_events();
        let a = store
            .create("/registry/pods/d/a", Bytes::from_static(b"n1:1"))
            .await
            .unwrap();
        let b = store
            .create("/registry/pods/d/b", Bytes::from_static(b"n2:1"))
            .await
            .unwrap();
        // a moves from n1 to n2: both see it (n1 its old state, n2 its new one).
        let moved = store
            .update("/registry/pods/d/a", Bytes::from_static(b"n2:2"), a)
            .await
            .unwrap();
        let (gone, _) = store.delete("/registry/pods/d/b", Some(b)).await.unwrap();
        // Unrelated keys never reach a pods watcher.
        store
            .create("/registry/leases/l", Bytes::from_static(b"n1:x"))
            .await
            .unwrap();
        let revs = |w: &mut WatchStream, n: usize| {
            let mut out = Vec::new();
            for _ in 0..n {
                out.push(
                    futures::FutureExt::now_or_never(w.next())
                        .flatten()
                        .and_then(|r| r.ok())
                        .map(|e| e.revision),
                );
            }
            out
        };
        assert_eq!(revs(&mut n1, 1), [Some(a)]);
        assert_eq!(revs(&mut n1, 1), [Some(moved)]);
        assert_eq!(revs(&mut n2, 3), [Some(b), Some(moved), Some(gone)]);
        assert_eq!(
            revs(&mut all, 4),
            [Some(a), Some(b), Some(moved), Some(gone)]
        );
        assert!(futures::FutureExt::now_or_never(n1.next()).is_none());
        assert!(futures::FutureExt::now_or_never(all.next()).is_none());
        // 4 to the plain watcher, 1 + 1 to n1 and 1 + 1 + 1 to n2, none to n3.
        assert_eq!(store.offered_events() - before, 9);
    }

    /// Bytes the index cannot read are offered to every triggered watcher (their own filters
    /// decide) rather than lost.
    #[tokio::test(start_paused = true)]
    async fn an_unreadable_value_is_offered_to_every_triggered_watcher() {
        let store = MemoryStore::new();
        let mut n1 = store.watch_triggered("/p/", 0, on("n1")).unwrap();
        let mut n2 = store.watch_triggered("/p/", 0, on("n2")).unwrap();
        let rev = store
            .create("/p/x", Bytes::from_static(b"\xff\xfe"))
            .await
            .unwrap();
        assert_eq!(n1.next().await.unwrap().unwrap().revision, rev);
        assert_eq!(n2.next().await.unwrap().unwrap().revision, rev);
    }

    /// Dropped triggered watchers are forgotten, whether or not an event reached them since.
    #[tokio::test(start_paused = true)]
    async fn dropped_triggered_watchers_are_forgotten() {
        let store = MemoryStore::new();
        for i in 0..200 {
            let w = store
                .watch_triggered("/p/", 0, on(&format!("n{i}")))
                .unwrap();
            drop(w);
        }
        assert_eq!(store.watcher_count(), 0);
        assert!(store.lock().hub.registered() < 64 + 1, "swept as they come");
    }
}

/// History packed against newer versions reads back exactly: lists at every retained revision
/// and watches replaying from each of them, against a model of every write.
#[cfg(test)]
mod history_tests {
    use futures::StreamExt;
    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        /// Create or update key `k` with a document of `size` bytes varied by `seed`.
        Put {
            k: u8,
            size: u16,
            seed: u8,
        },
        Delete {
            k: u8,
        },
        /// Compact `back` revisions behind the current one.
        Compact {
            back: u8,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u8..4, 0u16..3000, any::<u8>()).prop_map(|(k, size, seed)| Op::Put { k, size, seed }),
            1 => (0u8..4).prop_map(|k| Op::Delete { k }),
            1 => (0u8..20).prop_map(|back| Op::Compact { back }),
        ]
    }

    /// A document like a stored object's: mostly the same from version to version, a few
    /// fields varied, sometimes tiny (left plain).
    fn doc(k: u8, size: u16, seed: u8, rev: Revision) -> Bytes {
        let mut s = format!(
            r#"{{"metadata":{{"name":"p{k}","resourceVersion":"{rev}"}},"status":{{"phase":"P{seed}","#
        );
        let mut i = 0u32;
        while s.len() < usize::from(size) {
            s.push_str(&format!(r#""f{i}":"{}","#, i % 13));
            i += 1;
        }
        s.push_str("\"end\":true}}");
        Bytes::from(s)
    }

    /// Every write as the store's event would report it.
    #[derive(Clone, Debug, PartialEq)]
    struct Written {
        revision: Revision,
        kind: EventKind,
        key: String,
        value: Option<Bytes>,
        prev_value: Option<Bytes>,
    }

    fn state_at(log: &[Written], rev: Revision) -> BTreeMap<String, Bytes> {
        let mut m = BTreeMap::new();
        for w in log.iter().filter(|w| w.revision <= rev) {
            match &w.value {
                Some(v) => m.insert(w.key.clone(), v.clone()),
                None => m.remove(&w.key),
            };
        }
        m
    }

    async fn check(ops: Vec<Op>) {
        let store = MemoryStore::new();
        let mut log: Vec<Written> = Vec::new();
        for op in ops {
            match op {
                Op::Put { k, size, seed } => {
                    let key = format!("/p/{k}");
                    let value = doc(k, size, seed, store.current_revision() + 1);
                    let prev = store.get(&key).await.unwrap();
                    let rev = match &prev {
                        None => store.create(&key, value.clone()).await.unwrap(),
                        Some(p) => store
                            .update(&key, value.clone(), p.mod_revision)
                            .await
                            .unwrap(),
                    };
                    log.push(Written {
                        revision: rev,
                        kind: if prev.is_some() {
                            EventKind::Update
                        } else {
                            EventKind::Create
                        },
                        key,
                        value: Some(value),
                        prev_value: prev.map(|p| p.value),
                    });
                }
                Op::Delete { k } => {
                    let key = format!("/p/{k}");
                    if let Ok((rev, prev)) = store.delete(&key, None).await {
                        log.push(Written {
                            revision: rev,
                            kind: EventKind::Delete,
                            key,
                            value: None,
                            prev_value: Some(prev.value),
                        });
                    }
                }
                Op::Compact { back } => {
                    let rev = store.current_revision().saturating_sub(u64::from(back));
                    store.compact(rev).await.unwrap();
                }
            }
            store.assert_memory_held();
        }
        let compacted = store.compacted_revision();
        let current = store.current_revision();
        // (revision 0 reads the current state, as etcd's does)
        for rev in compacted.max(1)..=current {
            let listed = store
                .list(
                    "/p/",
                    ListOptions {
                        revision: Some(rev),
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
            let got: BTreeMap<String, Bytes> = listed
                .kvs
                .into_iter()
                .map(|kv| (kv.key, kv.value))
                .collect();
            assert_eq!(got, state_at(&log, rev), "list at {rev}");
            let want: Vec<&Written> = log.iter().filter(|w| w.revision > rev).collect();
            let mut w = store.watch("/p/", rev).unwrap();
            for expected in want {
                let e = w.next().await.unwrap().unwrap();
                let e = Written {
                    revision: e.revision,
                    kind: e.kind,
                    key: e.key,
                    value: e.value,
                    prev_value: e.prev_value,
                };
                assert_eq!(&e, expected, "watch from {rev}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        #[test]
        fn packed_history_reads_back_as_written(ops in proptest::collection::vec(op(), 1..60)) {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(check(ops));
        }
    }

    /// A key updated a hundred times holds its history in a small part of its size.
    #[tokio::test]
    async fn history_of_small_changes_is_held_packed() {
        let store = MemoryStore::new();
        let mut rev = store.create("/p/0", doc(0, 2000, 0, 1)).await.unwrap();
        let mut raw = 0u64;
        for i in 1..100u8 {
            let value = doc(0, 2000, i, rev + 1);
            raw += value.len() as u64;
            rev = store.update("/p/0", value, rev).await.unwrap();
        }
        let (versions, held) = store.memory_held().unwrap();
        assert_eq!(versions, 100);
        assert!(held * 5 < raw, "{held} bytes held for {raw} written");
        store.assert_memory_held();
    }
}
