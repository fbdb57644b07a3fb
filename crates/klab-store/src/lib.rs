//! klab-store: an etcd-shaped, content-blind, revisioned key→bytes store.
//!
//! Keys look like `/registry/<group>/<resource>/<ns>/<name>`; values are opaque bytes (the API
//! server stores JSON). One global revision counts every write; it becomes `resourceVersion`.
//! Every backend offers the same contract, checked by one conformance suite (`conformance`):
//!
//! * writes are linearizable and acknowledged only once durable (for durable backends);
//! * `create` is create-if-absent, `update`/`delete` are compare-and-swap on the key's mod revision;
//! * `list` reads a consistent snapshot, at the current revision or at a retained past one;
//! * `watch(prefix, after)` yields every change with revision > `after` exactly once, in revision
//!   order, with no gap between the history it replays and the live changes that follow;
//! * `compact(rev)` drops history at or below `rev`; reads and watches that need it answer
//!   [`StoreError::Compacted`] (the API server turns that into 410 Gone).
//!
//! Backends are chosen only by the composition root: [`memory::MemoryStore`] for sim and tests,
//! [`redb_store::RedbStore`] for the durable default of `klab up`.

use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;

mod key_index;
pub mod memory;
mod pack;
pub mod redb_store;
mod watch;

pub use memory::{MemoryConfig, MemoryStore};
pub use redb_store::{RedbConfig, RedbStore};
pub use watch::DEFAULT_WATCH_BUFFER;

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;

/// The global revision. 0 means "nothing written yet"; the first write gets revision 1.
pub type Revision = u64;

/// One stored key at one revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Bytes,
    /// Revision of the write that created this key (etcd `create_revision`).
    pub create_revision: Revision,
    /// Revision of the last write to this key (etcd `mod_revision`); the object's resourceVersion.
    pub mod_revision: Revision,
}

/// What a change did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The key did not exist before this revision.
    Create,
    /// The key existed and got a new value.
    Update,
    /// The key was removed.
    Delete,
}

/// One committed change, as replayed from history or delivered live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub revision: Revision,
    pub kind: EventKind,
    pub key: String,
    /// The new value (`None` for `Delete`).
    pub value: Option<Bytes>,
    /// The value before this change (`None` for `Create`).
    pub prev_value: Option<Bytes>,
    /// What a reader derived from this change, shared by every watcher it is delivered to live.
    pub memo: Memo,
}

/// A slot for what a reader derives from one live change (the API server's decoding of it),
/// shared by every copy of the event the store hands its watchers and freed with the last copy:
/// the watchers of one change derive it once, however many changes were committed between their
/// reads of it. A writer may hand the slot in with its write and fill it itself
/// ([`Storage::create_noted`]). The store never reads it, and two events compare equal whatever
/// their memos hold. A replayed event has no slot (it reaches one watcher only): `set` keeps
/// nothing.
#[derive(Clone, Default)]
pub struct Memo(Option<Arc<std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>>>);

impl Memo {
    /// An empty slot, to be shared by the copies of a live event.
    pub fn shared() -> Memo {
        Memo(Some(Arc::default()))
    }

    /// What the first reader kept, if it is a `T`.
    pub fn get<T: std::any::Any>(&self) -> Option<&T> {
        self.0.as_ref()?.get()?.downcast_ref()
    }

    /// Keeps `value` for the other readers, unless a reader kept something first.
    pub fn set<T: std::any::Any + Send + Sync>(&self, value: T) {
        if let Some(slot) = &self.0 {
            // A second reader finding the slot filled keeps the first's value.
            let _ = slot.set(Box::new(value));
        }
    }
}

impl PartialEq for Memo {
    fn eq(&self, _: &Memo) -> bool {
        true
    }
}

impl Eq for Memo {}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.0 {
            None => "none",
            Some(slot) if slot.get().is_some() => "kept",
            Some(_) => "empty",
        };
        write!(f, "Memo({state})")
    }
}

/// A consistent read of a key range.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListResult {
    /// Keys in byte order.
    pub kvs: Vec<KeyValue>,
    /// The revision this snapshot was read at.
    pub revision: Revision,
    /// Number of matching keys after the last one returned (0 when the range is complete).
    pub remaining: u64,
}

/// How to read a range.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// Start at this key (inclusive); used for pagination.
    pub start_key: Option<String>,
    /// At most this many keys (None = all).
    pub limit: Option<usize>,
    /// Read at this past revision (None = current). Older than the compacted revision → Compacted.
    pub revision: Option<Revision>,
    /// A hint for a list without a `limit`: only keys whose value files under this trigger's
    /// value (or whose bytes its function cannot read) are wanted. A backend that keeps the index
    /// (see [`TriggerIndex::prefix`]) may leave the other keys out; one that does not returns
    /// them all. Either way `remaining` is 1 when live keys follow the last key returned (left
    /// out or not), 0 otherwise, so that the caller can tell whether a full page is the last as
    /// if it had read every key. The caller still filters what it gets. Ignored with a `limit`.
    pub index: Option<Trigger>,
}

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum StoreError {
    #[error("key {0} already exists")]
    AlreadyExists(String),
    #[error("key {0} not found")]
    NotFound(String),
    /// The key's mod revision was not the expected one; `current` is what is stored now.
    #[error("key {key} was modified: expected revision {expected}")]
    Conflict {
        key: String,
        expected: Revision,
        current: Option<Box<KeyValue>>,
    },
    /// The requested revision has been compacted away.
    #[error("required revision {requested} has been compacted (compacted revision {compacted})")]
    Compacted {
        requested: Revision,
        compacted: Revision,
    },
    /// A read at a revision the store has not reached yet.
    #[error("revision {requested} is in the future (current revision {current})")]
    FutureRevision {
        requested: Revision,
        current: Revision,
    },
    /// A watcher fell too far behind the live stream and must start again from a list.
    #[error("watch fell behind at revision {0}")]
    Lagged(Revision),
    #[error("store closed")]
    Closed,
    #[error("storage I/O error: {0}")]
    Io(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A live stream of changes; ends with an error if the watcher lags or the store closes.
pub type WatchStream = BoxStream<'static, Result<Event>>;

/// An index function of a watch trigger: the value a stored object (its key and bytes) files
/// under, `None` when the bytes cannot be read (the event is then offered to every watcher).
pub type TriggerFn = fn(key: &str, value: &[u8]) -> Option<String>;

/// A named index function for watch triggers (upstream's watch cache `IndexerFunc`).
#[derive(Clone, Copy, Debug)]
pub struct TriggerIndex {
    /// Watchers are grouped by this name; one name always means one function.
    pub name: &'static str,
    pub func: TriggerFn,
    /// The key prefix of the objects `func` reads (a pod's `spec.nodeName`: the pods), under
    /// which a store may keep the index for lists ([`ListOptions::index`]); `None` for functions
    /// of the key alone, which a list evaluates as cheaply as an index would.
    pub prefix: Option<&'static str>,
}

/// What a watcher waits for: only changes whose old or new object files under `value` in
/// `index` are offered to it. The watcher's own filter must imply it (a trigger narrows delivery,
/// it does not filter for the watcher).
#[derive(Clone, Debug)]
pub struct Trigger {
    pub index: TriggerIndex,
    pub value: String,
}

impl Trigger {
    /// For a list that wants this trigger's keys ([`ListOptions::index`]): whether `key` may be
    /// one of them, told from the key alone. An index of keys alone (`prefix: None`, an object's
    /// name) decides here, so a list of one name among 5 000 Nodes reads one value, not 5 000;
    /// any other index needs the value, and every key may be wanted.
    pub fn may_want_key(&self, key: &str) -> bool {
        self.index.prefix.is_some() || (self.index.func)(key, &[]).is_none_or(|v| v == self.value)
    }
}

/// The storage contract every backend implements. See the crate docs for the guarantees.
#[async_trait::async_trait]
pub trait Storage: Send + Sync + 'static {
    /// The revision of the last acknowledged write.
    fn current_revision(&self) -> Revision;

    /// The highest revision compacted so far (0 if never).
    fn compacted_revision(&self) -> Revision;

    async fn get(&self, key: &str) -> Result<Option<KeyValue>>;

    /// Keys starting with `prefix`, in byte order.
    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult>;

    /// Creates `key` if absent; returns the new revision.
    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        self.create_noted(key, value, Memo::shared()).await
    }

    /// Replaces `key` if its mod revision is `expected`; returns the new revision.
    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<Revision> {
        self.update_noted(key, value, expected, Memo::shared())
            .await
    }

    /// [`Storage::create`] whose live event carries `memo`, which the writer fills once it
    /// knows the revision (the API server: the object it stored, decoded, so that no watch
    /// decodes it).
    async fn create_noted(&self, key: &str, value: Bytes, memo: Memo) -> Result<Revision>;

    /// [`Storage::update`] whose live event carries `memo` (see [`Storage::create_noted`]).
    async fn update_noted(
        &self,
        key: &str,
        value: Bytes,
        expected: Revision,
        memo: Memo,
    ) -> Result<Revision>;

    /// Removes `key` (if `expected` is given, only at that mod revision); returns the new revision
    /// and the removed entry.
    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)>;

    /// Every change to keys under `prefix` with revision > `after`: first the retained history,
    /// then live changes, with no gap and no duplicate. `after` below the compacted revision →
    /// `Compacted`.
    fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream>;

    /// [`Storage::watch`] whose live changes are offered only when they match `trigger` (the
    /// history part may hold others: a trigger saves work, the caller filters). Backends without
    /// a watch hub ignore the trigger.
    fn watch_triggered(
        &self,
        prefix: &str,
        after: Revision,
        trigger: Option<Trigger>,
    ) -> Result<WatchStream> {
        let _ = trigger;
        self.watch(prefix, after)
    }

    /// Has a backend that keeps list indexes ([`ListOptions::index`]) build `index` now rather
    /// than at the first list that wants it. Others do nothing.
    async fn prepare_index(&self, index: TriggerIndex) -> Result<()> {
        let _ = index;
        Ok(())
    }

    /// Live-change deliveries to watchers so far (an event queued for, or checked against the
    /// prefix of, one watcher counts once); 0 for backends that do not count.
    fn offered_events(&self) -> u64 {
        0
    }

    /// What a backend holds in memory of the keys' values: `(versions, bytes)` of every retained
    /// version (history included, a value shared by a version and its watch event counted once);
    /// `None` for backends whose values live on disk. Diagnostics (the scale benchmark).
    fn memory_held(&self) -> Option<(u64, u64)> {
        None
    }

    /// Drops history at or below `rev` (clamped to the current revision).
    async fn compact(&self, rev: Revision) -> Result<()>;
}

/// Backends are shared behind this handle.
pub type DynStorage = Arc<dyn Storage>;
