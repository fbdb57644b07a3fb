//! redb backend: the durable default of `klab up` — one writer thread with group commit, MVCC
//! snapshot reads, and a persisted history and event log so that watches resume across restarts.
//!
//! Writes: callers enqueue a request and await a oneshot reply. One dedicated OS thread takes the
//! first queued request, drains everything else queued (up to `max_batch`), applies all of them in
//! one redb write transaction with `Durability::Immediate`, commits (one fsync for the batch), then
//! publishes the batch's events to the watch hub in revision order and only then acknowledges each
//! caller. A storage failure fails the whole batch (`StoreError::Io`) and advances nothing.
//!
//! Runtimes: the writer is a plain thread, so this works on multi-thread (`klab up`) and
//! current-thread runtimes alike. On a *paused* runtime, awaiting the writer is real I/O on another
//! thread: tokio sees every task idle and may auto-advance virtual time while an fsync runs. `klab
//! sim` therefore uses the memory store; tests of this backend use un-paused runtimes.
//!
//! Reads: `get` runs inline (one short MVCC read transaction, microseconds); `list` runs under
//! `spawn_blocking` because a large range scan must not stall the runtime thread. A list plans
//! from the in-memory [`KeyIndex`] of retained versions (which keys its page holds at its
//! revision, how many follow) and reads from the history table only its page's values. `watch` registers
//! with the hub first, then opens a read snapshot and replays the persisted log from it in chunks;
//! live events already covered by the snapshot are skipped (see `watch::feed`). A watch with a
//! trigger (a kubelet's, of its node's pods) skips, unread, the logged changes that the key index
//! shows cannot concern it (`KeyIndex::misses`): at 5 000 nodes a kubelet's watch re-opened after
//! its timeout would otherwise read every pod change since its last bookmark, value and previous
//! value, to send the few of its own node.
//!
//! Tables (values are little-endian encoded by hand so the on-disk format is ours, not redb's):
//! * `meta`:    "schema", "rev" (current revision), "compacted" (compacted revision);
//! * `current`: key → create_rev u64 | mod_rev u64 | value — the latest state, for current reads;
//! * `history`: (key, rev) → tag u8 (1 put, 0 tombstone) | create_rev u64 | value — every retained
//!   version, for reads at past revisions and the values of replayed events;
//! * `log`:     rev → key — one entry per revision, for watch replay.
//!
//! `compact(c)` (queued like a write, so it is ordered with writes) removes log entries ≤ c and,
//! for each key written in (old compacted, c], every version ≤ c but the newest, which is also
//! removed if it is a tombstone — exactly the memory store's rule.
//!
//! The key index is updated by the writer after each commit and before the batch is published or
//! acknowledged, under its lock; a list takes the lock and opens its read snapshot under it, so
//! the snapshot holds every version the index names (commits precede their index update) and the
//! index holds every acknowledged write.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Display;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::JoinHandle;

use bytes::Bytes;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use tokio::sync::{mpsc, oneshot};

use crate::key_index::{KeyIndex, Secondary, Version};
use crate::memory::{effective_limit, range_start, read_revision};
use crate::watch::{self, Hub, Replay};
use crate::{
    Event, EventKind, KeyValue, ListOptions, ListResult, Result, Revision, Storage, StoreError,
    TriggerIndex, WatchStream,
};

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const CURRENT: TableDefinition<&str, &[u8]> = TableDefinition::new("current");
const HISTORY: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("history");
const LOG: TableDefinition<u64, &str> = TableDefinition::new("log");

const SCHEMA_VERSION: u64 = 1;
const META_SCHEMA: &str = "schema";
const META_REV: &str = "rev";
const META_COMPACTED: &str = "compacted";

/// Log entries examined per replay chunk (bounds the work done per stream poll).
const REPLAY_CHUNK: usize = 512;

/// Tuning of the redb store.
#[derive(Clone, Debug)]
pub struct RedbConfig {
    /// Live-queue capacity per watcher, in events; a watcher further behind gets `Lagged`.
    pub watch_buffer: usize,
    /// Most writes applied in one transaction (one fsync). Bounds transaction size and latency.
    pub max_batch: usize,
    /// Bytes of store pages redb keeps in memory (reads beyond it go to the file, through the
    /// OS page cache).
    pub cache_bytes: usize,
}

impl Default for RedbConfig {
    fn default() -> Self {
        Self {
            watch_buffer: watch::DEFAULT_WATCH_BUFFER,
            max_batch: 1024,
            // redb's own default is 1 GiB. Measured with `klab up --nodes 5000` (idle, 6 min):
            // at 1 GiB the process grew with the store file (1.76 GB to 2.16 GB RSS), at 64 MiB
            // it stayed at 1.5-1.6 GB, with the same CPU: reads past the cache are served from
            // the OS page cache.
            cache_bytes: 64 << 20,
        }
    }
}

/// The durable [`Storage`] backend on redb. Open with [`RedbStore::open`].
pub struct RedbStore {
    db: Arc<Database>,
    shared: Arc<Shared>,
    /// `None` only during drop, so the writer sees the queue close.
    queue: Option<mpsc::UnboundedSender<Request>>,
    writer: Option<JoinHandle<()>>,
    config: RedbConfig,
}

/// State the writer thread publishes to readers.
struct Shared {
    current: AtomicU64,
    compacted: AtomicU64,
    commits: AtomicU64,
    /// Watchers register and the writer publishes under this lock (no gap between the two).
    hub: Mutex<Hub>,
    /// Which versions the history table holds (see the module docs for its ordering).
    index: RwLock<KeyIndex>,
}

impl Shared {
    fn hub(&self) -> MutexGuard<'_, Hub> {
        self.hub.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn index(&self) -> std::sync::RwLockReadGuard<'_, KeyIndex> {
        self.index.read().unwrap_or_else(PoisonError::into_inner)
    }
}

enum WriteOp {
    Create {
        key: String,
        value: Bytes,
        memo: crate::Memo,
    },
    Update {
        key: String,
        value: Bytes,
        expected: Revision,
        memo: crate::Memo,
    },
    Delete {
        key: String,
        expected: Option<Revision>,
    },
    Compact(Revision),
    /// Keeps a secondary index (see `key_index`) built from a read snapshot at revision `at`:
    /// the writer files again the keys written since, from the log.
    Index {
        built: Box<Secondary>,
        at: Revision,
    },
}

enum Reply {
    Written(Revision),
    Deleted(Revision, KeyValue),
    Compacted,
    Indexed,
}

struct Request {
    op: WriteOp,
    reply: oneshot::Sender<Result<Reply>>,
}

fn io(e: impl Display) -> StoreError {
    StoreError::Io(e.to_string())
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Io(format!("corrupt store: {what}"))
}

// ---- encoding -------------------------------------------------------------------------------

fn encode_current(create_rev: Revision, mod_rev: Revision, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + value.len());
    out.extend_from_slice(&create_rev.to_le_bytes());
    out.extend_from_slice(&mod_rev.to_le_bytes());
    out.extend_from_slice(value);
    out
}

fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let raw: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(raw))
}

fn decode_current(key: &str, raw: &[u8]) -> Result<KeyValue> {
    let (Some(create_revision), Some(mod_revision)) = (read_u64(raw, 0), read_u64(raw, 8)) else {
        return Err(corrupt("short current entry"));
    };
    Ok(KeyValue {
        key: key.to_owned(),
        value: Bytes::copy_from_slice(&raw[16..]),
        create_revision,
        mod_revision,
    })
}

/// One decoded history entry.
struct HistVersion {
    create_rev: Revision,
    /// `None` for a tombstone.
    value: Option<Bytes>,
}

fn encode_history(create_rev: Revision, value: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + value.map_or(0, <[u8]>::len));
    out.push(u8::from(value.is_some()));
    out.extend_from_slice(&create_rev.to_le_bytes());
    if let Some(v) = value {
        out.extend_from_slice(v);
    }
    out
}

fn decode_history(raw: &[u8]) -> Result<HistVersion> {
    let (Some(&tag), Some(create_rev)) = (raw.first(), read_u64(raw, 1)) else {
        return Err(corrupt("short history entry"));
    };
    let value = match tag {
        0 => None,
        1 => Some(Bytes::copy_from_slice(&raw[9..])),
        _ => return Err(corrupt("history tag")),
    };
    Ok(HistVersion { create_rev, value })
}

// ---- open / drop ----------------------------------------------------------------------------

impl RedbStore {
    /// Opens (or creates) the store file at `path` with the default configuration.
    pub fn open(path: impl AsRef<Path>) -> Result<Arc<RedbStore>> {
        Self::open_with(path, RedbConfig::default())
    }

    pub fn open_with(path: impl AsRef<Path>, config: RedbConfig) -> Result<Arc<RedbStore>> {
        let db = Arc::new(
            Database::builder()
                .set_cache_size(config.cache_bytes)
                .create(path.as_ref())
                .map_err(io)?,
        );
        let (rev, compacted) = init_tables(&db).map_err(|e| match e {
            InitError::Redb(e) => io(e),
            InitError::Store(e) => e,
        })?;
        let mut index = load_index(&db)?;
        index.rev = rev;
        index.compacted = compacted;
        let shared = Arc::new(Shared {
            current: AtomicU64::new(rev),
            compacted: AtomicU64::new(compacted),
            commits: AtomicU64::new(0),
            hub: Mutex::new(Hub::default()),
            index: RwLock::new(index),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = Writer {
            db: db.clone(),
            shared: shared.clone(),
            rx,
            rev,
            compacted,
            max_batch: config.max_batch.max(1),
        };
        let handle = std::thread::Builder::new()
            .name("klab-store-writer".into())
            .spawn(move || writer.run())
            .map_err(io)?;
        Ok(Arc::new(RedbStore {
            db,
            shared,
            queue: Some(tx),
            writer: Some(handle),
            config,
        }))
    }

    /// Number of write transactions committed since open (group commit makes this smaller than
    /// the number of writes under concurrency). Diagnostics and tests.
    pub fn commit_count(&self) -> u64 {
        self.shared.commits.load(Ordering::Acquire)
    }

    /// Number of retained key versions (tombstones included). Diagnostics and tests.
    pub fn retained_versions(&self) -> Result<u64> {
        use redb::ReadableTableMetadata;
        let txn = self.db.begin_read().map_err(io)?;
        txn.open_table(HISTORY).map_err(io)?.len().map_err(io)
    }

    /// Checks that the in-memory key index is what reading the history table back gives.
    #[cfg(test)]
    fn assert_index_mirrors_history(&self) {
        let index = self.shared.index();
        let loaded = load_index(&self.db).unwrap();
        assert!(index.same_versions(&loaded), "{index:?}\n{loaded:?}");
        assert_eq!(index.versions(), self.retained_versions().unwrap());
        // Each secondary index is what building it again from the current state gives.
        let txn = self.db.begin_read().unwrap();
        let current = txn.open_table(CURRENT).unwrap();
        for (trigger_index, secondary) in index.secondaries() {
            assert_eq!(
                *secondary,
                build_secondary(&current, trigger_index).unwrap()
            );
        }
    }

    async fn submit(&self, op: WriteOp) -> Result<Reply> {
        let (reply, rx) = oneshot::channel();
        let queue = self.queue.as_ref().ok_or(StoreError::Closed)?;
        queue
            .send(Request { op, reply })
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

impl Drop for RedbStore {
    fn drop(&mut self) {
        // Closing the queue stops the writer after its current batch; joining it releases the
        // file, so the same path can be reopened right after the store is dropped.
        self.queue.take();
        if let Some(handle) = self.writer.take() {
            let _ = handle.join();
        }
    }
}

/// The key index of what the history table holds, read back at open.
fn load_index(db: &Database) -> Result<KeyIndex> {
    let txn = db.begin_read().map_err(io)?;
    let table = txn.open_table(HISTORY).map_err(io)?;
    let mut index = KeyIndex::default();
    for entry in table.iter().map_err(io)? {
        let (k, v) = entry.map_err(io)?;
        let (key, rev) = k.value();
        let put = match v.value().first() {
            Some(1) => true,
            Some(0) => false,
            _ => return Err(corrupt("history tag")),
        };
        index.load(key, Version::unfiled(rev, put));
    }
    Ok(index)
}

enum InitError {
    Redb(redb::Error),
    Store(StoreError),
}

impl<E: Into<redb::Error>> From<E> for InitError {
    fn from(e: E) -> Self {
        InitError::Redb(e.into())
    }
}

/// Creates missing tables, checks the schema version, returns (rev, compacted).
fn init_tables(db: &Database) -> Result<(Revision, Revision), InitError> {
    let txn = db.begin_write()?;
    let (rev, compacted);
    {
        let mut meta = txn.open_table(META)?;
        txn.open_table(CURRENT)?;
        txn.open_table(HISTORY)?;
        txn.open_table(LOG)?;
        let schema = meta.get(META_SCHEMA)?.map(|g| g.value());
        match schema {
            None => {
                meta.insert(META_SCHEMA, SCHEMA_VERSION)?;
            }
            Some(SCHEMA_VERSION) => {}
            Some(other) => {
                return Err(InitError::Store(StoreError::Io(format!(
                    "store schema version {other}, this build reads {SCHEMA_VERSION}"
                ))));
            }
        }
        rev = meta.get(META_REV)?.map_or(0, |g| g.value());
        compacted = meta.get(META_COMPACTED)?.map_or(0, |g| g.value());
    }
    txn.commit()?;
    Ok((rev, compacted))
}

// ---- the writer -----------------------------------------------------------------------------

struct Writer {
    db: Arc<Database>,
    shared: Arc<Shared>,
    rx: mpsc::UnboundedReceiver<Request>,
    rev: Revision,
    compacted: Revision,
    max_batch: usize,
}

/// What one committed batch produced.
struct BatchOutcome {
    rev: Revision,
    compacted: Revision,
    results: Vec<Result<Reply>>,
    events: Vec<Arc<Event>>,
    /// Each compaction's target and the newest revision ≤ it of every key it compacted.
    compactions: Vec<(Revision, BTreeMap<String, Revision>)>,
    /// Secondary indexes built in the batch.
    secondaries: Vec<Secondary>,
}

impl Writer {
    fn run(mut self) {
        while let Some(first) = self.rx.blocking_recv() {
            let mut batch = vec![first];
            while batch.len() < self.max_batch {
                match self.rx.try_recv() {
                    Ok(req) => batch.push(req),
                    Err(_) => break,
                }
            }
            let (ops, replies): (Vec<WriteOp>, Vec<_>) =
                batch.into_iter().map(|r| (r.op, r.reply)).unzip();
            match self.apply(ops) {
                Ok(out) => {
                    self.rev = out.rev;
                    self.compacted = out.compacted;
                    // The index before anyone can learn of the commit: a list that sees an
                    // acknowledged write's revision finds its version in the index.
                    {
                        let mut index = self
                            .shared
                            .index
                            .write()
                            .unwrap_or_else(PoisonError::into_inner);
                        // A secondary index built in this batch read the batch's state where it
                        // was built; filing every event of the batch after it ends in the state
                        // the batch committed.
                        for secondary in out.secondaries {
                            index.add_secondary(secondary);
                        }
                        for e in &out.events {
                            index.record(&e.key, e.revision, e.value.as_deref());
                        }
                        for (to, newest) in &out.compactions {
                            index.compact(*to, newest);
                        }
                        index.rev = out.rev;
                        index.compacted = out.compacted;
                    }
                    // Publish before advancing the visible revision: whoever reads
                    // `current_revision() == r` can rely on every event up to r being queued for
                    // its watchers already.
                    {
                        let mut hub = self.shared.hub();
                        for e in &out.events {
                            hub.publish(e);
                        }
                    }
                    self.shared.current.store(out.rev, Ordering::Release);
                    self.shared
                        .compacted
                        .store(out.compacted, Ordering::Release);
                    self.shared.commits.fetch_add(1, Ordering::AcqRel);
                    for (reply, result) in replies.into_iter().zip(out.results) {
                        let _ = reply.send(result); // the caller may have given up waiting
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, writes = replies.len(), "store batch failed");
                    let err = io(e);
                    for reply in replies {
                        let _ = reply.send(Err(err.clone()));
                    }
                }
            }
        }
    }

    /// Applies `ops` in order in one durable transaction. Per-op failures (exists, conflict, not
    /// found) are results; a storage failure aborts the whole batch.
    fn apply(&self, ops: Vec<WriteOp>) -> Result<BatchOutcome, redb::Error> {
        let mut txn = self.db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        let (results, rev, compacted, events, compactions, secondaries) = {
            let mut batch = Batch {
                current: txn.open_table(CURRENT)?,
                history: txn.open_table(HISTORY)?,
                log: txn.open_table(LOG)?,
                rev: self.rev,
                compacted: self.compacted,
                events: Vec::new(),
                compactions: Vec::new(),
                secondaries: Vec::new(),
                indexed: |name: &str| self.shared.index().has_secondary(name),
            };
            let mut results = Vec::with_capacity(ops.len());
            for op in ops {
                results.push(batch.apply(op)?);
            }
            (
                results,
                batch.rev,
                batch.compacted,
                batch.events,
                batch.compactions,
                batch.secondaries,
            )
        };
        {
            let mut meta = txn.open_table(META)?;
            meta.insert(META_REV, rev)?;
            meta.insert(META_COMPACTED, compacted)?;
        }
        txn.commit()?;
        Ok(BatchOutcome {
            rev,
            compacted,
            results,
            events,
            compactions,
            secondaries,
        })
    }
}

/// The open tables of one write transaction and what the batch has done so far.
struct Batch<'txn, F> {
    current: redb::Table<'txn, &'static str, &'static [u8]>,
    history: redb::Table<'txn, (&'static str, u64), &'static [u8]>,
    log: redb::Table<'txn, u64, &'static str>,
    rev: Revision,
    compacted: Revision,
    events: Vec<Arc<Event>>,
    compactions: Vec<(Revision, BTreeMap<String, Revision>)>,
    secondaries: Vec<Secondary>,
    /// Whether the key index already keeps a secondary index.
    indexed: F,
}

impl<F: Fn(&str) -> bool> Batch<'_, F> {
    /// One operation: the outer error is a storage failure (aborts the batch), the inner one is
    /// the operation's own answer.
    fn apply(&mut self, op: WriteOp) -> Result<Result<Reply>, redb::Error> {
        let op = match op {
            WriteOp::Index { built, at } => return self.keep_index(*built, at),
            op => op,
        };
        Ok(match &op {
            WriteOp::Create { key, value, memo } => match self.current_kv(key)? {
                Some(_) => Err(StoreError::AlreadyExists(key.clone())),
                None => {
                    let rev = self.put(key, Some(value), None, memo.clone())?;
                    Ok(Reply::Written(rev))
                }
            },
            WriteOp::Update {
                key,
                value,
                expected,
                memo,
            } => match self.current_kv(key)? {
                None => Err(StoreError::NotFound(key.clone())),
                Some(Err(e)) => Err(e),
                Some(Ok(prev)) if prev.mod_revision != *expected => Err(StoreError::Conflict {
                    key: key.clone(),
                    expected: *expected,
                    current: Some(Box::new(prev)),
                }),
                Some(Ok(prev)) => Ok(Reply::Written(self.put(
                    key,
                    Some(value),
                    Some(&prev),
                    memo.clone(),
                )?)),
            },
            WriteOp::Delete { key, expected } => match self.current_kv(key)? {
                None => Err(StoreError::NotFound(key.clone())),
                Some(Err(e)) => Err(e),
                Some(Ok(prev)) => match expected {
                    Some(x) if *x != prev.mod_revision => Err(StoreError::Conflict {
                        key: key.clone(),
                        expected: *x,
                        current: Some(Box::new(prev)),
                    }),
                    _ => Ok(Reply::Deleted(
                        self.put(key, None, Some(&prev), crate::Memo::shared())?,
                        prev,
                    )),
                },
            },
            WriteOp::Compact(target) => {
                let target = (*target).min(self.rev);
                if target > self.compacted {
                    let newest =
                        compact_range(&mut self.history, &mut self.log, self.compacted, target)?;
                    self.compactions.push((target, newest));
                    self.compacted = target;
                }
                Ok(Reply::Compacted)
            }
            WriteOp::Index { .. } => Ok(Reply::Indexed), // kept above
        })
    }

    /// Keeps a secondary index built from a snapshot at `at`, filing again every key written
    /// since (unless an index of that name is kept already).
    fn keep_index(
        &mut self,
        mut secondary: Secondary,
        at: Revision,
    ) -> Result<Result<Reply>, redb::Error> {
        let name = secondary.name();
        if (self.indexed)(name) || self.secondaries.iter().any(|s| s.name() == name) {
            return Ok(Ok(Reply::Indexed));
        }
        if at < self.compacted {
            // The log no longer says what changed since: read everything again.
            secondary = build_secondary(&self.current, secondary.trigger_index())?;
        } else if at < self.rev {
            for entry in self.log.range(at.saturating_add(1)..=self.rev)? {
                let (_, key) = entry?;
                let key = key.value();
                let value = self.current.get(key)?;
                let bytes = value
                    .as_ref()
                    .map(|v| v.value().get(16..).unwrap_or_default());
                secondary.file(key, bytes);
            }
        }
        self.secondaries.push(secondary);
        Ok(Ok(Reply::Indexed))
    }

    fn current_kv(&self, key: &str) -> Result<Option<Result<KeyValue>>, redb::Error> {
        Ok(self
            .current
            .get(key)?
            .map(|g| decode_current(key, g.value())))
    }

    /// Writes the next revision of `key` (`value: None` deletes) and records its event.
    fn put(
        &mut self,
        key: &str,
        value: Option<&Bytes>,
        prev: Option<&KeyValue>,
        memo: crate::Memo,
    ) -> Result<Revision, redb::Error> {
        self.rev += 1;
        let rev = self.rev;
        let kind = match (value, prev) {
            (None, _) => EventKind::Delete,
            (Some(_), Some(_)) => EventKind::Update,
            (Some(_), None) => EventKind::Create,
        };
        let create_rev = match (value, prev) {
            (Some(_), Some(p)) => p.create_revision,
            _ => rev,
        };
        match value {
            Some(v) => {
                self.current
                    .insert(key, encode_current(create_rev, rev, v).as_slice())?;
            }
            None => {
                self.current.remove(key)?;
            }
        }
        self.history.insert(
            (key, rev),
            encode_history(create_rev, value.map(|v| v.as_ref())).as_slice(),
        )?;
        self.log.insert(rev, key)?;
        self.events.push(Arc::new(Event {
            revision: rev,
            kind,
            key: key.to_owned(),
            value: value.cloned(),
            prev_value: prev.map(|p| p.value.clone()),
            memo,
        }));
        Ok(rev)
    }
}

/// A secondary index of the current keys under `index`'s prefix.
fn build_secondary(
    current: &impl ReadableTable<&'static str, &'static [u8]>,
    index: TriggerIndex,
) -> Result<Secondary, redb::Error> {
    let mut secondary = Secondary::new(index);
    let prefix = secondary.prefix();
    for entry in current.range(prefix..)? {
        let (k, v) = entry?;
        let key = k.value();
        if !key.starts_with(prefix) {
            break;
        }
        secondary.file(key, Some(v.value().get(16..).unwrap_or_default()));
    }
    Ok(secondary)
}

/// Drops log entries in (from, to] and the history versions they make unreachable; returns the
/// newest revision ≤ `to` of every key written in the range (what the key index drops by).
fn compact_range(
    history: &mut redb::Table<'_, (&'static str, u64), &'static [u8]>,
    log: &mut redb::Table<'_, u64, &'static str>,
    from: Revision,
    to: Revision,
) -> Result<BTreeMap<String, Revision>, redb::Error> {
    // The newest revision ≤ `to` of every key written in the range.
    let mut newest: BTreeMap<String, Revision> = BTreeMap::new();
    for entry in log.range((from + 1)..=to)? {
        let (rev, key) = entry?;
        newest.insert(key.value().to_owned(), rev.value());
    }
    for (key, keep) in &newest {
        let mut doomed = Vec::new();
        for entry in history.range((key.as_str(), 0u64)..(key.as_str(), *keep))? {
            doomed.push(entry?.0.value().1);
        }
        for rev in doomed {
            history.remove((key.as_str(), rev))?;
        }
        let tombstone = history
            .get((key.as_str(), *keep))?
            .is_some_and(|g| g.value().first() == Some(&0));
        if tombstone {
            history.remove((key.as_str(), *keep))?;
        }
    }
    log.retain_in((from + 1)..=to, |_, _| false)?;
    Ok(newest)
}

// ---- reads ----------------------------------------------------------------------------------

fn read_meta(txn: &redb::ReadTransaction) -> Result<(Revision, Revision)> {
    let meta = txn.open_table(META).map_err(io)?;
    let rev = meta.get(META_REV).map_err(io)?.map_or(0, |g| g.value());
    let compacted = meta
        .get(META_COMPACTED)
        .map_err(io)?
        .map_or(0, |g| g.value());
    Ok((rev, compacted))
}

fn list_blocking(
    db: &Database,
    shared: &Shared,
    prefix: &str,
    opts: &ListOptions,
) -> Result<ListResult> {
    // Plan and open the snapshot under the index lock (see the module docs): the snapshot then
    // holds every version the plan names.
    let (txn, at, plan) = {
        let index = shared.index();
        let txn = db.begin_read().map_err(io)?;
        let (_, snapshot_compacted) = read_meta(&txn)?;
        // A compaction committed but not yet in the index already bounds what the snapshot holds.
        let compacted = index.compacted.max(snapshot_compacted);
        let at = read_revision(opts.revision, index.rev, compacted)?;
        let start = range_start(prefix, opts.start_key.as_deref());
        let limit = effective_limit(opts.limit);
        let wanted = opts.index.as_ref().filter(|_| limit == usize::MAX);
        let filtered = wanted.and_then(|t| index.filtered(prefix, start, at, t));
        let plan = filtered.unwrap_or_else(|| index.plan(prefix, start, at, limit, wanted));
        (txn, at, plan)
    };
    let table = txn.open_table(HISTORY).map_err(io)?;
    let mut kvs = Vec::with_capacity(plan.page.len());
    for (key, rev) in plan.page {
        let raw = table
            .get((key.as_str(), rev))
            .map_err(io)?
            .ok_or_else(|| corrupt("indexed version missing from history"))?;
        let v = decode_history(raw.value())?;
        let value = v
            .value
            .ok_or_else(|| corrupt("indexed put is a tombstone"))?;
        kvs.push(KeyValue {
            key,
            value,
            create_revision: v.create_rev,
            mod_revision: rev,
        });
    }
    Ok(ListResult {
        kvs,
        revision: at,
        remaining: plan.remaining,
    })
}

/// Replays the persisted log from one read snapshot, a chunk at a time.
struct RedbReplay {
    log: redb::ReadOnlyTable<u64, &'static str>,
    history: redb::ReadOnlyTable<(&'static str, u64), &'static [u8]>,
    prefix: String,
    /// The watch's trigger: changes the key index shows cannot concern it are skipped unread
    /// (`KeyIndex::misses`).
    trigger: Option<crate::Trigger>,
    shared: Arc<Shared>,
    /// Next revision to examine.
    next: Revision,
    /// The snapshot's current revision (inclusive end).
    end: Revision,
    buf: VecDeque<Arc<Event>>,
}

impl RedbReplay {
    /// Reads log chunks until at least one matching event is buffered or the snapshot ends.
    fn fill(&mut self) -> Result<()> {
        while self.buf.is_empty() && self.next <= self.end {
            let mut examined = 0;
            let mut resume = self.end.saturating_add(1);
            // Read under the index's lock, held for one chunk: the writer waits at most that long.
            let index = self.trigger.as_ref().map(|_| self.shared.index());
            for entry in self.log.range(self.next..=self.end).map_err(io)? {
                let (rev, key) = entry.map_err(io)?;
                let (rev, key) = (rev.value(), key.value());
                let missed = || {
                    index
                        .as_ref()
                        .zip(self.trigger.as_ref())
                        .is_some_and(|(index, t)| index.misses(key, rev, t))
                };
                if key.starts_with(&self.prefix) && !missed() {
                    self.buf.push_back(Arc::new(self.event_at(key, rev)?));
                }
                examined += 1;
                if examined == REPLAY_CHUNK {
                    resume = rev + 1;
                    break;
                }
            }
            self.next = resume;
        }
        Ok(())
    }

    /// Rebuilds the event of revision `rev` on `key` from the key's retained versions.
    fn event_at(&self, key: &str, rev: Revision) -> Result<Event> {
        let raw = self
            .history
            .get((key, rev))
            .map_err(io)?
            .ok_or_else(|| corrupt("log entry without history"))?;
        let this = decode_history(raw.value())?;
        let prev = match self
            .history
            .range((key, 0u64)..(key, rev))
            .map_err(io)?
            .next_back()
        {
            Some(entry) => decode_history(entry.map_err(io)?.1.value())?.value,
            None => None,
        };
        let kind = match &this.value {
            None => EventKind::Delete,
            Some(_) if this.create_rev == rev => EventKind::Create,
            Some(_) => EventKind::Update,
        };
        Ok(Event {
            revision: rev,
            kind,
            key: key.to_owned(),
            value: this.value,
            prev_value: prev,
            memo: crate::Memo::default(),
        })
    }
}

impl Replay for RedbReplay {
    fn next_event(&mut self) -> Option<Result<Arc<Event>>> {
        if self.buf.is_empty()
            && let Err(e) = self.fill()
        {
            self.next = self.end.saturating_add(1);
            return Some(Err(e));
        }
        self.buf.pop_front().map(Ok)
    }
}

#[async_trait::async_trait]
impl Storage for RedbStore {
    fn current_revision(&self) -> Revision {
        self.shared.current.load(Ordering::Acquire)
    }

    async fn prepare_index(&self, index: TriggerIndex) -> Result<()> {
        if index.prefix.is_none() || self.shared.index().has_secondary(index.name) {
            return Ok(());
        }
        // Read from a snapshot off the writer's thread (at 150 000 pods, seconds); the writer
        // then catches it up with what was written since.
        let db = self.db.clone();
        let (built, at) = tokio::task::spawn_blocking(move || -> Result<_> {
            let txn = db.begin_read().map_err(io)?;
            let (at, _) = read_meta(&txn)?;
            let current = txn.open_table(CURRENT).map_err(io)?;
            Ok((build_secondary(&current, index).map_err(io)?, at))
        })
        .await
        .map_err(io)??;
        let built = Box::new(built);
        self.submit(WriteOp::Index { built, at }).await?;
        Ok(())
    }

    fn compacted_revision(&self) -> Revision {
        self.shared.compacted.load(Ordering::Acquire)
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let txn = self.db.begin_read().map_err(io)?;
        let table = txn.open_table(CURRENT).map_err(io)?;
        match table.get(key).map_err(io)? {
            None => Ok(None),
            Some(raw) => decode_current(key, raw.value()).map(Some),
        }
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        // The first list that wants an index the store can keep builds it.
        if let Some(t) = opts.index.as_ref().filter(|t| {
            effective_limit(opts.limit) == usize::MAX
                && t.index.prefix.is_some_and(|p| prefix.starts_with(p))
        }) {
            self.prepare_index(t.index).await?;
        }
        let db = self.db.clone();
        let shared = self.shared.clone();
        let prefix = prefix.to_owned();
        tokio::task::spawn_blocking(move || list_blocking(&db, &shared, &prefix, &opts))
            .await
            .map_err(io)?
    }

    async fn create_noted(&self, key: &str, value: Bytes, memo: crate::Memo) -> Result<Revision> {
        match self
            .submit(WriteOp::Create {
                key: key.to_owned(),
                value,
                memo,
            })
            .await?
        {
            Reply::Written(rev) => Ok(rev),
            _ => Err(StoreError::Io(
                "writer answered a create with another reply".into(),
            )),
        }
    }

    async fn update_noted(
        &self,
        key: &str,
        value: Bytes,
        expected: Revision,
        memo: crate::Memo,
    ) -> Result<Revision> {
        match self
            .submit(WriteOp::Update {
                key: key.to_owned(),
                value,
                expected,
                memo,
            })
            .await?
        {
            Reply::Written(rev) => Ok(rev),
            _ => Err(StoreError::Io(
                "writer answered an update with another reply".into(),
            )),
        }
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)> {
        match self
            .submit(WriteOp::Delete {
                key: key.to_owned(),
                expected,
            })
            .await?
        {
            Reply::Deleted(rev, kv) => Ok((rev, kv)),
            _ => Err(StoreError::Io(
                "writer answered a delete with another reply".into(),
            )),
        }
    }

    fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
        self.watch_triggered(prefix, after, None)
    }

    fn offered_events(&self) -> u64 {
        self.shared.hub().offered()
    }

    fn watch_triggered(
        &self,
        prefix: &str,
        after: Revision,
        trigger: Option<crate::Trigger>,
    ) -> Result<WatchStream> {
        // Register first, then snapshot: every event is either in the snapshot or arrives live
        // (publication follows the commit), and `feed` drops the overlap.
        let sub = self.shared.hub().subscribe_triggered(
            prefix,
            trigger.as_ref(),
            self.config.watch_buffer,
        );
        let txn = self.db.begin_read().map_err(io)?;
        let (rev, compacted) = read_meta(&txn)?;
        if after < compacted {
            return Err(StoreError::Compacted {
                requested: after,
                compacted,
            });
        }
        let replay = RedbReplay {
            log: txn.open_table(LOG).map_err(io)?,
            history: txn.open_table(HISTORY).map_err(io)?,
            prefix: prefix.to_owned(),
            trigger,
            shared: self.shared.clone(),
            next: after.saturating_add(1),
            end: rev,
            buf: VecDeque::new(),
        };
        Ok(watch::feed(Box::new(replay), sub, rev.max(after)))
    }

    async fn compact(&self, rev: Revision) -> Result<()> {
        match self.submit(WriteOp::Compact(rev)).await? {
            Reply::Compacted => Ok(()),
            _ => Err(StoreError::Io(
                "writer answered a compaction with another reply".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::io::{BufRead, BufReader, Write};
    use std::path::PathBuf;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use futures::StreamExt;

    use super::*;
    use crate::DynStorage;
    use crate::conformance::{self, Fixture};
    use crate::key_index::tests::node_of;

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = RedbStore::open(dir.path().join("store.redb")).expect("open");
        Fixture::with_guard(store, dir)
    }

    // The whole suite on a current-thread runtime (real time: the writer is a real thread).
    crate::storage_conformance_tests!(fixture());

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_on_a_multi_thread_runtime() {
        let f = fixture();
        conformance::concurrent_writers(&f.store).await;
        conformance::watch_live(&f.store).await;
    }

    #[tokio::test]
    async fn concurrent_writes_share_commits() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(dir.path().join("s.redb")).unwrap();
        let before = store.commit_count();
        let dyn_store: DynStorage = store.clone();
        let tasks: Vec<_> = (0..64)
            .map(|t| {
                let s = dyn_store.clone();
                tokio::spawn(async move {
                    for i in 0..20 {
                        s.create(&format!("/g/{t}/{i}"), Bytes::from_static(&[7; 1024]))
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(store.current_revision(), 64 * 20);
        let commits = store.commit_count() - before;
        // 64 callers queue at once on this current-thread runtime: batches hold many writes.
        assert!(
            commits * 8 <= 64 * 20,
            "{commits} commits for 1280 writes: no group commit"
        );
    }

    #[tokio::test]
    async fn reopened_store_keeps_state_history_and_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.redb");
        let (r1, r3, r5, r6);
        {
            let s = RedbStore::open(&path).unwrap();
            r1 = s.create("/x/a", Bytes::from_static(b"a1")).await.unwrap();
            let r2 = s.create("/x/b", Bytes::from_static(b"b1")).await.unwrap();
            r3 = s
                .update("/x/a", Bytes::from_static(b"a2"), r1)
                .await
                .unwrap();
            s.compact(r2).await.unwrap();
            let (r4, _) = s.delete("/x/b", Some(r2)).await.unwrap();
            r5 = s.create("/x/c", Bytes::from_static(b"c1")).await.unwrap();
            r6 = s
                .update("/x/a", Bytes::from_static(b"a3"), r3)
                .await
                .unwrap();
            assert_eq!((r4, r6), (4, 6));
            s.assert_index_mirrors_history();
        }
        let s = RedbStore::open(&path).unwrap();
        s.assert_index_mirrors_history();
        assert_eq!((s.current_revision(), s.compacted_revision()), (r6, 2));
        let a = s.get("/x/a").await.unwrap().unwrap();
        assert_eq!(
            (a.value.as_ref(), a.create_revision, a.mod_revision),
            (&b"a3"[..], r1, r6)
        );
        let past = s
            .list(
                "/x/",
                ListOptions {
                    revision: Some(r3),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let got: Vec<(&str, &[u8])> = past
            .kvs
            .iter()
            .map(|kv| (kv.key.as_str(), kv.value.as_ref()))
            .collect();
        assert_eq!(got, [("/x/a", &b"a2"[..]), ("/x/b", &b"b1"[..])]);
        assert!(matches!(
            s.list(
                "/x/",
                ListOptions {
                    revision: Some(1),
                    ..Default::default()
                }
            )
            .await,
            Err(StoreError::Compacted {
                requested: 1,
                compacted: 2
            })
        ));
        assert!(matches!(
            s.watch("/x/", 1),
            Err(StoreError::Compacted { .. })
        ));
        // Watch replay from the persisted log, then live, continuing the revision sequence.
        let mut w = s.watch("/x/", 2).unwrap();
        let mut replay = Vec::new();
        for _ in 0..4 {
            let e = w.next().await.unwrap().unwrap();
            replay.push((e.revision, e.kind, e.key, e.prev_value));
        }
        assert_eq!(
            replay,
            [
                (
                    3,
                    EventKind::Update,
                    "/x/a".to_owned(),
                    Some(Bytes::from_static(b"a1"))
                ),
                (
                    4,
                    EventKind::Delete,
                    "/x/b".to_owned(),
                    Some(Bytes::from_static(b"b1"))
                ),
                (r5, EventKind::Create, "/x/c".to_owned(), None),
                (
                    r6,
                    EventKind::Update,
                    "/x/a".to_owned(),
                    Some(Bytes::from_static(b"a2"))
                ),
            ]
        );
        let r7 = s.create("/x/d", Bytes::from_static(b"d1")).await.unwrap();
        assert_eq!(r7, r6 + 1);
        assert_eq!(w.next().await.unwrap().unwrap().revision, r7);
    }

    #[tokio::test]
    async fn long_replay_crosses_chunks_and_filters() {
        let dir = tempfile::tempdir().unwrap();
        let s = RedbStore::open(dir.path().join("s.redb")).unwrap();
        let n = 3 * REPLAY_CHUNK + 7;
        for i in 0..n {
            let prefix = if i % 3 == 0 { "/m/" } else { "/n/" };
            s.create(&format!("{prefix}{i:05}"), Bytes::from_static(b"v"))
                .await
                .unwrap();
        }
        let mut w = s.watch("/m/", 0).unwrap();
        let want: Vec<Revision> = (0..n as u64)
            .filter(|i| i % 3 == 0)
            .map(|i| i + 1)
            .collect();
        let mut got = Vec::new();
        for _ in 0..want.len() {
            got.push(w.next().await.unwrap().unwrap().revision);
        }
        assert_eq!(got, want);
        let r = s.create("/m/live", Bytes::from_static(b"v")).await.unwrap();
        assert_eq!(w.next().await.unwrap().unwrap().revision, r);
    }

    #[tokio::test]
    async fn lagging_watcher_gets_lagged() {
        let dir = tempfile::tempdir().unwrap();
        let config = RedbConfig {
            watch_buffer: 3,
            ..Default::default()
        };
        let s = RedbStore::open_with(dir.path().join("s.redb"), config).unwrap();
        let mut w = s.watch("/l/", 0).unwrap();
        for i in 0..6 {
            s.create(&format!("/l/{i}"), Bytes::from_static(b"v"))
                .await
                .unwrap();
        }
        for want in 1..=3 {
            assert_eq!(w.next().await.unwrap().unwrap().revision, want);
        }
        assert_eq!(w.next().await.unwrap(), Err(StoreError::Lagged(4)));
        assert!(w.next().await.is_none());
    }

    #[tokio::test]
    async fn dropping_the_store_closes_watches_and_releases_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.redb");
        let s = RedbStore::open(&path).unwrap();
        let mut w = s.watch("", 0).unwrap();
        s.create("/k", Bytes::from_static(b"v")).await.unwrap();
        drop(s);
        assert_eq!(w.next().await.unwrap().unwrap().revision, 1);
        assert_eq!(w.next().await.unwrap(), Err(StoreError::Closed));
        let again = RedbStore::open(&path).unwrap();
        assert_eq!(again.current_revision(), 1);
    }

    #[tokio::test]
    async fn lease_renewals_with_compaction_keep_history_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let s = RedbStore::open(dir.path().join("s.redb")).unwrap();
        let nodes = 20u64;
        let mut revs = BTreeMap::new();
        for round in 0..10 {
            for n in 0..nodes {
                let key = format!("/registry/leases/kube-node-lease/node-{n}");
                let value = Bytes::from(format!("renew {round}"));
                let rev = match revs.get(&key) {
                    None => s.create(&key, value).await.unwrap(),
                    Some(&r) => s.update(&key, value, r).await.unwrap(),
                };
                revs.insert(key, rev);
            }
            if round % 3 == 2 {
                s.compact(s.current_revision()).await.unwrap();
                assert_eq!(s.retained_versions().unwrap(), nodes);
                s.assert_index_mirrors_history();
            }
        }
        assert_eq!(s.retained_versions().unwrap(), 2 * nodes);
        s.assert_index_mirrors_history();
    }

    /// A seeded xorshift sequence: each call gives a number below its argument.
    fn below(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        }
    }

    const NODE: crate::TriggerIndex = crate::TriggerIndex {
        name: "node",
        func: node_of,
        prefix: Some("/a/"),
    };

    /// Random creates, updates, deletes and compactions applied to this store and to the memory
    /// store; after each, lists at random past revisions, starts and limits must read the same
    /// (the key index plans them here, the memory store's versions there). Lists that want one
    /// node's keys must find the same ones once filtered, and at the current revision this
    /// store, which keeps the index, returns only those.
    #[tokio::test]
    async fn random_writes_and_compactions_list_as_the_memory_store_does() {
        for seed in 1..=4u64 {
            let dir = tempfile::tempdir().unwrap();
            let store = RedbStore::open(dir.path().join("s.redb")).unwrap();
            let redb: DynStorage = store.clone();
            let memory: DynStorage = crate::MemoryStore::new();
            let mut rnd = below(seed);
            for step in 0..300 {
                let key = format!("/{}/k{}", ["a", "b"][rnd(2) as usize], rnd(12));
                let value = Bytes::from(format!(
                    "{}:{step}",
                    ["n0", "n1", "n2", "x"][rnd(4) as usize]
                ));
                let current = memory.get(&key).await.unwrap();
                let (m, r) = match (rnd(10), current) {
                    (0, _) => {
                        let to = rnd(memory.current_revision() + 1);
                        (
                            memory.compact(to).await.map(|_| 0),
                            redb.compact(to).await.map(|_| 0),
                        )
                    }
                    (1..=2, Some(kv)) => (
                        memory
                            .delete(&key, Some(kv.mod_revision))
                            .await
                            .map(|r| r.0),
                        redb.delete(&key, Some(kv.mod_revision)).await.map(|r| r.0),
                    ),
                    (_, Some(kv)) => (
                        memory.update(&key, value.clone(), kv.mod_revision).await,
                        redb.update(&key, value, kv.mod_revision).await,
                    ),
                    (_, None) => (
                        memory.create(&key, value.clone()).await,
                        redb.create(&key, value).await,
                    ),
                };
                assert_eq!(m, r, "seed {seed} step {step}");
                for _ in 0..3 {
                    let prefix = ["/", "/a/", "/b/"][rnd(3) as usize];
                    let rev = memory.current_revision();
                    let opts = ListOptions {
                        start_key: (rnd(2) == 0).then(|| format!("{prefix}k{}", rnd(12))),
                        limit: (rnd(2) == 0).then(|| rnd(6) as usize),
                        revision: (rnd(2) == 0).then(|| rnd(rev + 2)),
                        index: None,
                    };
                    let (m, r) = (
                        memory.list(prefix, opts.clone()).await,
                        redb.list(prefix, opts.clone()).await,
                    );
                    assert_eq!(m, r, "seed {seed} step {step} {prefix} {opts:?}");
                    // The same list for one node's keys only.
                    let node = format!("n{}", rnd(3));
                    let trigger = crate::Trigger {
                        index: NODE,
                        value: node.clone(),
                    };
                    let opts = ListOptions {
                        limit: None,
                        index: Some(trigger),
                        ..opts
                    };
                    let on_node =
                        |kv: &KeyValue| node_of(&kv.key, &kv.value).is_none_or(|n| n == node);
                    let (m, r) = match (
                        memory.list(prefix, opts.clone()).await,
                        redb.list(prefix, opts.clone()).await,
                    ) {
                        (Ok(m), Ok(r)) => (m, r),
                        (m, r) => {
                            assert_eq!(m.err(), r.err(), "seed {seed} step {step} {opts:?}");
                            continue;
                        }
                    };
                    let filtered = |l: &ListResult| {
                        l.kvs
                            .iter()
                            .filter(|kv| on_node(kv))
                            .cloned()
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(
                        filtered(&m),
                        filtered(&r),
                        "seed {seed} step {step} {opts:?}"
                    );
                    if opts.revision.is_none() && prefix.starts_with("/a/") {
                        assert!(
                            r.kvs.iter().all(on_node),
                            "seed {seed} step {step} {opts:?}"
                        );
                    }
                    // `remaining` tells whether any key follows the last one returned.
                    let follows = r.kvs.last().map_or(!m.kvs.is_empty(), |last| {
                        m.kvs.iter().any(|kv| kv.key > last.key)
                    });
                    assert_eq!(r.remaining, u64::from(follows), "seed {seed} step {step}");
                    assert_eq!(m.remaining, 0);
                }
            }
            assert_eq!(store.shared.index().secondaries().count(), 1);
            store.assert_index_mirrors_history();
        }
    }

    /// A watch with a trigger resuming from a past revision replays only the changes that may
    /// concern it: random creates, updates (some moving a key to another node), deletes and
    /// compactions; then watches of one node's keys from random retained revisions. Each must
    /// replay what the memory store's watch from the same revision holds for that node (the
    /// change's new or old value on it, or unreadable), and nothing else: the key index knows
    /// what every version filed under, so the other changes are skipped unread.
    #[tokio::test]
    async fn a_triggered_watch_replays_only_the_changes_that_may_concern_it() {
        let mut skipped = 0;
        for seed in 1..=4u64 {
            let dir = tempfile::tempdir().unwrap();
            let store = RedbStore::open(dir.path().join("s.redb")).unwrap();
            store.prepare_index(NODE).await.unwrap();
            let redb: DynStorage = store.clone();
            let memory: DynStorage = crate::MemoryStore::new();
            let mut rnd = below(seed);
            for step in 0..200 {
                let key = format!("/{}/k{}", ["a", "b"][rnd(2) as usize], rnd(8));
                let node = ["n0", "n1", "n2", "x"][rnd(4) as usize];
                let value = Bytes::from(format!("{node}:{step}"));
                let current = memory.get(&key).await.unwrap();
                match (rnd(12), current) {
                    (0, _) => {
                        // Compact to a recent revision, keeping some history to replay.
                        let to = memory.current_revision().saturating_sub(rnd(40));
                        memory.compact(to).await.unwrap();
                        redb.compact(to).await.unwrap();
                    }
                    (1..=2, Some(kv)) => {
                        memory.delete(&key, Some(kv.mod_revision)).await.unwrap();
                        redb.delete(&key, Some(kv.mod_revision)).await.unwrap();
                    }
                    (_, Some(kv)) => {
                        memory
                            .update(&key, value.clone(), kv.mod_revision)
                            .await
                            .unwrap();
                        redb.update(&key, value, kv.mod_revision).await.unwrap();
                    }
                    (_, None) => {
                        memory.create(&key, value.clone()).await.unwrap();
                        redb.create(&key, value).await.unwrap();
                    }
                }
                if step % 20 != 19 {
                    continue;
                }
                let compacted = redb.compacted_revision();
                let current = redb.current_revision();
                let mut watches = Vec::new();
                for _ in 0..4 {
                    let node = format!("n{}", rnd(3));
                    let after = compacted + rnd(current - compacted + 1);
                    let trigger = crate::Trigger {
                        index: NODE,
                        value: node.clone(),
                    };
                    let replayed = redb.watch_triggered("/a/", after, Some(trigger)).unwrap();
                    let all = memory.watch("/a/", after).unwrap();
                    watches.push((node, after, replayed, all));
                }
                // A change every watch is offered (unreadable bytes) marks the end of the replays.
                let end = memory
                    .create(&format!("/a/end{step}"), Bytes::from_static(b"x"))
                    .await;
                let end = end.unwrap();
                assert_eq!(
                    redb.create(&format!("/a/end{step}"), Bytes::from_static(b"x"))
                        .await
                        .unwrap(),
                    end
                );
                for (node, after, mut replayed, mut all) in watches {
                    let on = |v: &Option<Bytes>| {
                        v.as_ref()
                            .is_some_and(|v| node_of("", v).is_none_or(|n| n == node))
                    };
                    let concerns = |e: &Event| on(&e.value) || on(&e.prev_value);
                    let mut got = Vec::new();
                    loop {
                        let e = replayed.next().await.unwrap().unwrap();
                        assert!(
                            concerns(&e),
                            "seed {seed} step {step}: {node} after {after} replayed {e:?}"
                        );
                        got.push(e.clone());
                        if e.revision == end {
                            break;
                        }
                    }
                    let mut want = Vec::new();
                    loop {
                        let e = all.next().await.unwrap().unwrap();
                        if concerns(&e) {
                            want.push(e.clone());
                        } else {
                            skipped += 1;
                        }
                        if e.revision == end {
                            break;
                        }
                    }
                    assert_eq!(got, want, "seed {seed} step {step}: {node} after {after}");
                }
            }
            store.assert_index_mirrors_history();
        }
        assert!(skipped > 100, "the watches left out only {skipped} changes");
    }

    /// An index read from a snapshot is caught up by the writer with what was written after the
    /// snapshot: from the log, or, when compaction has dropped that part of the log, by reading
    /// everything again.
    #[tokio::test]
    async fn an_index_built_from_a_snapshot_catches_up_with_later_writes() {
        for compact_in_between in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let s = RedbStore::open(dir.path().join("s.redb")).unwrap();
            let a1 = s.create("/a/1", Bytes::from_static(b"n1:a")).await.unwrap();
            s.create("/a/2", Bytes::from_static(b"n2:a")).await.unwrap();
            let (built, at) = {
                let txn = s.db.begin_read().unwrap();
                let (at, _) = read_meta(&txn).unwrap();
                let current = txn.open_table(CURRENT).unwrap();
                (build_secondary(&current, NODE).unwrap(), at)
            };
            // After the snapshot: a move to another node, a deletion, a creation.
            s.update("/a/1", Bytes::from_static(b"n2:b"), a1)
                .await
                .unwrap();
            s.delete("/a/2", None).await.unwrap();
            s.create("/a/3", Bytes::from_static(b"n1:c")).await.unwrap();
            if compact_in_between {
                s.compact(s.current_revision()).await.unwrap();
            }
            let built = Box::new(built);
            s.submit(WriteOp::Index { built, at }).await.unwrap();
            assert!(s.shared.index().has_secondary(NODE.name));
            s.assert_index_mirrors_history();
            let on = |node: &str| ListOptions {
                index: Some(crate::Trigger {
                    index: NODE,
                    value: node.to_string(),
                }),
                ..Default::default()
            };
            let keys = |l: ListResult| l.kvs.into_iter().map(|kv| kv.key).collect::<Vec<_>>();
            assert_eq!(keys(s.list("/a/", on("n1")).await.unwrap()), ["/a/3"]);
            assert_eq!(keys(s.list("/a/", on("n2")).await.unwrap()), ["/a/1"]);
        }
    }

    #[test]
    fn codec_round_trips_and_rejects_short_input() {
        let kv = decode_current("/k", &encode_current(3, 9, b"val")).unwrap();
        assert_eq!(
            (kv.create_revision, kv.mod_revision, kv.value.as_ref()),
            (3, 9, &b"val"[..])
        );
        let h = decode_history(&encode_history(4, Some(b"x"))).unwrap();
        assert_eq!((h.create_rev, h.value.as_deref()), (4, Some(&b"x"[..])));
        assert!(
            decode_history(&encode_history(5, None))
                .unwrap()
                .value
                .is_none()
        );
        assert!(decode_current("/k", &[1, 2, 3]).is_err());
        assert!(decode_history(&[1, 0, 0]).is_err());
        assert!(
            decode_history(
                &encode_history(4, Some(b"x"))
                    .iter()
                    .enumerate()
                    .map(|(i, b)| if i == 0 { 9 } else { *b })
                    .collect::<Vec<_>>()
            )
            .is_err()
        );
    }

    // ---- crash test ----------------------------------------------------------------------
    //
    // The parent re-executes this test binary running only `crash_child`, with `CHILD_ENV`
    // naming the store file. The child writes from several tasks as fast as it can and prints
    // each acknowledged write; the parent SIGKILLs it at a fixed pseudo-random moment, reopens
    // the store and checks that every acknowledged write survived and the log is consistent.

    const CHILD_ENV: &str = "KLAB_STORE_CRASH_CHILD";
    const CHILD_TEST: &str = "redb_store::tests::crash_child";
    const WRITERS: usize = 8;
    const VALUE_LEN: usize = 1024;

    /// Child mode only: a no-op (passes) in a normal test run.
    #[test]
    fn crash_child() {
        let Some(path) = std::env::var_os(CHILD_ENV) else {
            return;
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let store: DynStorage = RedbStore::open(PathBuf::from(path)).unwrap();
            let out = Arc::new(Mutex::new(std::io::stdout()));
            let tasks: Vec<_> = (0..WRITERS)
                .map(|t| {
                    let (store, out) = (store.clone(), out.clone());
                    tokio::spawn(async move {
                        let lease = format!("/crash/lease/{t}");
                        let mut lease_rev = None;
                        // Bounded so that a forgotten child cannot run forever.
                        for i in 0..200_000u64 {
                            let key = format!("/crash/obj/{t}/{i:06}");
                            let rev = store
                                .create(&key, Bytes::from(vec![b'a' + (t as u8); VALUE_LEN]))
                                .await
                                .unwrap();
                            let mut line = format!("ack {rev} {key}\n");
                            if i % 10 == 0 {
                                let value = Bytes::from(format!("renew {i}"));
                                let r = match lease_rev {
                                    None => store.create(&lease, value).await.unwrap(),
                                    Some(r) => store.update(&lease, value, r).await.unwrap(),
                                };
                                lease_rev = Some(r);
                                line.push_str(&format!("lease {r} {lease}\n"));
                            }
                            // Compactions interleave with writes (multi-table deletes in a batch).
                            if t == 0 && i % 25 == 24 {
                                let c = store.current_revision().saturating_sub(100);
                                store.compact(c).await.unwrap();
                                line.push_str(&format!("compact {c} -\n"));
                            }
                            let mut out = out.lock().unwrap();
                            // A closed pipe means the parent is gone: stop.
                            if out
                                .write_all(line.as_bytes())
                                .and_then(|()| out.flush())
                                .is_err()
                            {
                                std::process::exit(0);
                            }
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
    }

    #[test]
    fn crash_recovery_keeps_every_acknowledged_write() {
        // Fixed pseudo-random kill delays in 100..=800 ms (no unseeded randomness in tests).
        const KILL_AFTER_MS: [u64; 6] = [137, 512, 260, 781, 104, 433];
        let exe = std::env::current_exe().unwrap();
        for (round, delay) in KILL_AFTER_MS.iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("crash.redb");
            let mut child = Command::new(&exe)
                .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
                .env(CHILD_ENV, &path)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let stdout = child.stdout.take().unwrap();
            let (tx, rx) = std::sync::mpsc::channel::<String>();
            let reader = std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            // Start the clock once writes are flowing, so every round kills mid-write.
            let mut lines = Vec::new();
            loop {
                let line = rx
                    .recv_timeout(Duration::from_secs(60))
                    .expect("child never acknowledged a write");
                let first_ack = line.starts_with("ack ");
                lines.push(line);
                if first_ack {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(*delay));
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            reader.join().unwrap();
            lines.extend(rx.try_iter());
            check_recovered(&path, &lines, round);
        }
    }

    fn check_recovered(path: &std::path::Path, lines: &[String], round: usize) {
        let mut objects: Vec<(Revision, String)> = Vec::new();
        let mut leases: BTreeMap<String, Revision> = BTreeMap::new();
        let mut compacted_acked = 0;
        for line in lines {
            let mut parts = line.split(' ');
            match (
                parts.next(),
                parts.next().and_then(|r| r.parse::<Revision>().ok()),
                parts.next(),
            ) {
                (Some("ack"), Some(rev), Some(key)) => objects.push((rev, key.to_owned())),
                (Some("lease"), Some(rev), Some(key)) => {
                    let e = leases.entry(key.to_owned()).or_default();
                    *e = (*e).max(rev);
                }
                (Some("compact"), Some(rev), _) => compacted_acked = compacted_acked.max(rev),
                _ => {} // test-harness chatter
            }
        }
        assert!(!objects.is_empty(), "round {round}: no acknowledged writes");
        let max_acked = objects
            .iter()
            .map(|(r, _)| *r)
            .chain(leases.values().copied())
            .max()
            .unwrap_or(0);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let store = RedbStore::open(path).expect("reopen after SIGKILL");
            let current = store.current_revision();
            assert!(
                current >= max_acked,
                "round {round}: current {current} < acknowledged {max_acked}"
            );
            for (rev, key) in &objects {
                let kv = store
                    .get(key)
                    .await
                    .unwrap()
                    .unwrap_or_else(|| panic!("round {round}: lost {key}@{rev}"));
                assert_eq!(
                    (kv.create_revision, kv.mod_revision, kv.value.len()),
                    (*rev, *rev, VALUE_LEN)
                );
            }
            for (key, rev) in &leases {
                let kv = store
                    .get(key)
                    .await
                    .unwrap()
                    .unwrap_or_else(|| panic!("round {round}: lost {key}"));
                assert!(
                    kv.mod_revision >= *rev,
                    "round {round}: {key} went back to {}",
                    kv.mod_revision
                );
            }
            let compacted = store.compacted_revision();
            assert!(compacted >= compacted_acked, "round {round}: compaction {compacted_acked} lost");
            // The log holds exactly one event per revision after the compaction point.
            let mut w = store.watch("", compacted).unwrap();
            let mut created_in_log = BTreeSet::new();
            for want in compacted + 1..=current {
                let e = w.next().await.unwrap().unwrap();
                assert_eq!(e.revision, want, "round {round}: log gap");
                if e.kind == EventKind::Create && e.key.starts_with("/crash/obj/") {
                    created_in_log.insert(e.key);
                }
            }
            // Current state, log and retained history agree: objects are written once, so the
            // ones created after the compaction point are exactly the creates in the log, and a
            // list at the compaction point holds exactly the older ones.
            let listed = store.list("/crash/obj/", ListOptions::default()).await.unwrap();
            assert_eq!(listed.revision, current);
            let newer: BTreeSet<String> = listed
                .kvs
                .iter()
                .filter(|kv| kv.create_revision > compacted)
                .map(|kv| kv.key.clone())
                .collect();
            assert_eq!(newer, created_in_log, "round {round}: list and log disagree");
            // (Revision 0 means "current" to `list`, so this needs a compaction to have happened.)
            if compacted > 0 {
                let at_compaction = store
                    .list("/crash/obj/", ListOptions { revision: Some(compacted), ..Default::default() })
                    .await
                    .unwrap();
                assert_eq!(at_compaction.kvs.len() + newer.len(), listed.kvs.len(), "round {round}");
                assert!(at_compaction.kvs.iter().all(|kv| kv.create_revision <= compacted));
            }
            let listed_keys: BTreeSet<&str> = listed.kvs.iter().map(|kv| kv.key.as_str()).collect();
            assert!(objects.iter().all(|(_, k)| listed_keys.contains(k.as_str())));
            // Nothing follows in the log: the next write is the next event.
            let r = store
                .create("/crash/after", Bytes::from_static(b"x"))
                .await
                .unwrap();
            assert_eq!(r, current + 1);
            assert_eq!(w.next().await.unwrap().unwrap().revision, r);
            eprintln!(
                "crash round {round}: {} acked, recovered revision {current}, compacted {compacted}",
                objects.len()
            );
        });
    }
}
