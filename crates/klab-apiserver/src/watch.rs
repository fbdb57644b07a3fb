//! Watch: newline-delimited JSON events streamed from the store's change feed (api-surface §b.9).
//!
//! * `resourceVersion` unset or `0`: synthetic ADDED events for the current state, then changes;
//!   `N`: only changes after N; N compacted away: HTTP 200 and one in-stream ERROR event with a 410
//!   Status, as the real server does, so clients relist.
//! * Selectors are applied to both the old and the new state: an object that stops matching is
//!   delivered as DELETED, one that starts matching as ADDED.
//! * `sendInitialEvents=true` ends the initial ADDED burst with a BOOKMARK annotated
//!   `k8s.io/initial-events-end`.
//! * Bookmarks carry the store's current revision once every change up to it has been examined
//!   (delivered or filtered out), as upstream's watch cache does: an idle watch keeps up with
//!   compaction, and a client resuming from a bookmark cannot skip an event. They come every
//!   minute and 2 s before the watch's deadline (upstream's schedule), so a watch that times out
//!   resumes from a revision seconds old and replays little history.
//! * `timeoutSeconds` ends the stream cleanly; the deadline runs on the `Clock`, so in sim it is
//!   virtual.
//! * A selector that pins `spec.nodeName` (pods) or
//!   `metadata.name` gives the watch a store trigger (upstream's watch cache trigger functions): the store computes each change's node or
//!   name once and offers the change only to the watches waiting for it, so a kubelet's watch of
//!   its node's pods never looks at another node's pod changes. The watch's own selector still
//!   decides, so the trigger changes what is examined, never what is sent.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use klab_store::{EventKind, ListOptions, StoreError};

use crate::crud::Selectors;
use crate::error::{ApiError, ApiResult};
use crate::object;
use crate::registry::ResourceInfo;
use crate::server::{Ctx, Inner};
use crate::table::{self, IncludeObject};

/// How a watch renders its objects.
#[derive(Clone)]
enum Render {
    Object,
    Table {
        include: IncludeObject,
    },
    /// Length-prefixed protobuf `WatchEvent` frames (`…protobuf;stream=watch`).
    Protobuf,
    /// `as=PartialObjectMetadata`: each object as a `meta.k8s.io/v1` `PartialObjectMetadata`
    /// (a metadata informer's watch, as the garbage collector's).
    PartialMetadata,
}

struct Encoder {
    ri: &'static ResourceInfo,
    render: Render,
    first_table: bool,
    clock: klab_api::Clock,
}

impl Encoder {
    /// The line of a change's state: as JSON objects, encoded once for every watch that sends
    /// it (upstream's cacher likewise caches an event's serialization per encoding).
    fn state_line(&mut self, ty: &str, state: &State) -> Bytes {
        match &self.render {
            Render::Object => state.line(ty),
            Render::PartialMetadata => state
                .partial_metadata_line(ty)
                .unwrap_or_else(|| self.line(ty, state.value())),
            _ => self.line(ty, state.value()),
        }
    }

    fn line(&mut self, ty: &str, obj: &Value) -> Bytes {
        let object = match &self.render {
            Render::Object => return encode_line(ty, obj),
            Render::PartialMetadata => table::partial_object_metadata(obj),
            Render::Protobuf => return encode_frame(ty, obj),
            Render::Table { include } => {
                let rv = object::resource_version(obj).unwrap_or("").to_string();
                let t = table::table(
                    self.ri,
                    std::slice::from_ref(obj),
                    *include,
                    json!({"resourceVersion": rv}),
                    self.clock.now(),
                    self.first_table,
                );
                self.first_table = false;
                t
            }
        };
        encode_line(ty, &object)
    }

    fn bookmark(&self, rv: u64, initial_events_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = if matches!(self.render, Render::PartialMetadata) {
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta})
        } else {
            json!({"kind": self.ri.kind, "apiVersion": self.ri.api_version(), "metadata": meta})
        };
        if matches!(self.render, Render::Protobuf) {
            return encode_frame("BOOKMARK", &object);
        }
        let mut bytes =
            serde_json::to_vec(&json!({"type": "BOOKMARK", "object": object})).unwrap_or_default();
        bytes.push(b'\n');
        Bytes::from(bytes)
    }

    fn error(&self, e: &ApiError) -> Bytes {
        if matches!(self.render, Render::Protobuf) {
            return encode_frame("ERROR", &e.to_status());
        }
        let mut bytes = serde_json::to_vec(&json!({"type": "ERROR", "object": e.to_status()}))
            .unwrap_or_default();
        bytes.push(b'\n');
        Bytes::from(bytes)
    }
}

/// `{"type": ty, "object": obj}` and a newline, serialized from borrowed parts (no copy of the
/// object).
fn encode_line(ty: &str, obj: &Value) -> Bytes {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        #[serde(rename = "type")]
        ty: &'a str,
        object: &'a Value,
    }
    let mut bytes = serde_json::to_vec(&Line { ty, object: obj }).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

/// A change's state (decoded, or its stored bytes decoded on first use) and, once a watch has
/// sent it as JSON, its encoding.
pub(crate) struct State {
    /// The presented object. A state made from stored bytes ([`State::lazy`]) decodes them
    /// when first asked: a watch sending JSON without selectors, or with selectors decided from
    /// the bytes, writes its line from them and never needs the object.
    value: OnceLock<Value>,
    json: OnceLock<Bytes>,
    /// The stored document the value is (or decodes into) the presented decoding of.
    stored: Option<StoredDoc>,
    /// Counts the decodes of a lazy state (its owner's `values_decoded`).
    decodes: Option<Arc<AtomicU64>>,
}

/// A stored document, its revision and the resource it is presented as.
struct StoredDoc {
    bytes: Bytes,
    revision: u64,
    ri: &'static ResourceInfo,
    /// `ri` is stored as it is served: the document's bytes are the presented object's, but
    /// for its `apiVersion`, `kind` and `resourceVersion` (`json_field::presented`).
    served_as_stored: bool,
}

impl StoredDoc {
    fn new(ri: &'static ResourceInfo, bytes: &Bytes, revision: u64) -> StoredDoc {
        StoredDoc {
            bytes: bytes.clone(),
            revision,
            ri,
            served_as_stored: crate::conversion::is_identity(ri),
        }
    }
}

impl State {
    fn new(value: Value) -> Arc<State> {
        Arc::new(State {
            value: OnceLock::from(value),
            json: OnceLock::new(),
            stored: None,
            decodes: None,
        })
    }

    /// The state of stored `bytes` at `revision` as `ri` presents them: `value` must be
    /// `crud::decode_kv`'s object for them.
    fn of_stored(
        value: Value,
        ri: &'static ResourceInfo,
        bytes: &Bytes,
        revision: u64,
    ) -> Arc<State> {
        Arc::new(State {
            value: OnceLock::from(value),
            json: OnceLock::new(),
            stored: Some(StoredDoc::new(ri, bytes, revision)),
            decodes: None,
        })
    }

    /// The state of stored `bytes` at `revision` as `ri` presents them, decoded when first
    /// needed (counted in `decodes`).
    fn lazy(
        ri: &'static ResourceInfo,
        bytes: &Bytes,
        revision: u64,
        decodes: &Arc<AtomicU64>,
    ) -> Arc<State> {
        Arc::new(State {
            value: OnceLock::new(),
            json: OnceLock::new(),
            stored: Some(StoredDoc::new(ri, bytes, revision)),
            decodes: Some(decodes.clone()),
        })
    }

    /// The decoded object.
    pub(crate) fn value(&self) -> &Value {
        self.value.get_or_init(|| {
            let Some(s) = &self.stored else {
                // Every state without a stored document is made with its value.
                return Value::Null;
            };
            if let Some(n) = &self.decodes {
                n.fetch_add(1, Relaxed);
            }
            match object::decode_stored(&s.bytes, s.revision) {
                Ok(o) => {
                    crate::crud::present(s.ri, crate::conversion::from_storage(s.ri, o), s.revision)
                }
                Err(e) => {
                    // The API server wrote every stored document from an object.
                    tracing::error!(
                        revision = s.revision,
                        "stored document does not decode: {e}"
                    );
                    Value::Null
                }
            }
        })
    }

    /// Whether the object satisfies `sel`: read from the stored document without decoding it
    /// when the selectors can be decided there (`Selectors::matches_stored`).
    fn matches(&self, ri: &ResourceInfo, sel: &Selectors) -> bool {
        if sel.is_everything() {
            return true;
        }
        // `matches_stored` answers only for a kind stored as it is served.
        if self.value.get().is_none()
            && let Some(s) = &self.stored
            && let Some(m) = sel.matches_stored(ri, &s.bytes)
        {
            return m;
        }
        sel.matches(ri, self.value())
    }

    /// The state at another revision (a deletion's): the same stored document presented
    /// again, or the value copied and stamped.
    fn at_revision(&self, revision: u64) -> Arc<State> {
        match &self.stored {
            Some(s) if self.value.get().is_none() => Arc::new(State {
                value: OnceLock::new(),
                json: OnceLock::new(),
                stored: Some(StoredDoc::new(s.ri, &s.bytes, revision)),
                decodes: self.decodes.clone(),
            }),
            _ => {
                let mut v = self.value().clone();
                object::set_resource_version(&mut v, revision);
                State::new(v)
            }
        }
    }

    /// The object in JSON, as a read answers with it: written once, for the write's answer and
    /// every watch's event alike.
    pub(crate) fn json(&self) -> &Bytes {
        self.json.get_or_init(|| {
            self.stored
                .as_ref()
                .filter(|s| s.served_as_stored)
                .and_then(|s| {
                    crate::json_field::presented(
                        &s.bytes,
                        &s.ri.api_version(),
                        s.ri.kind,
                        s.revision,
                    )
                })
                .unwrap_or_else(|| serde_json::to_vec(self.value()).unwrap_or_default())
                .into()
        })
    }

    /// The line of a metadata watch (the garbage collector's) for this state, written from the
    /// stored document's `metadata` bytes (`json_field::metadata_presented`) instead of copying
    /// the decoded metadata and encoding it: byte for byte what [`encode_line`] writes for
    /// [`table::partial_object_metadata`] of the value. `None` when the state has no stored
    /// document to read it from.
    fn partial_metadata_line(&self, ty: &str) -> Option<Bytes> {
        let s = self.stored.as_ref().filter(|s| s.served_as_stored)?;
        let meta = crate::json_field::metadata_presented(&s.bytes, s.revision)?;
        const HEAD: &[u8] =
            b"\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":";
        let mut out = Vec::with_capacity(
            meta.len()
                .saturating_add(ty.len())
                .saturating_add(HEAD.len())
                .saturating_add(16),
        );
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(ty.as_bytes());
        out.extend_from_slice(HEAD);
        out.extend_from_slice(&meta);
        out.extend_from_slice(b"}}\n");
        Some(Bytes::from(out))
    }

    /// `{"type":ty,"object":…}` and a newline, byte for byte what [`encode_line`] writes (`ty`
    /// is one of the fixed event types, which need no escaping).
    fn line(&self, ty: &str) -> Bytes {
        let json = self.json();
        let mut out = Vec::with_capacity(json.len().saturating_add(ty.len()).saturating_add(24));
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(ty.as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        out.extend_from_slice(json);
        out.extend_from_slice(b"}\n");
        Bytes::from(out)
    }
}

/// One protobuf watch frame; an object the codec cannot encode (it came from the store, so this
/// is a server bug) is logged and skipped rather than ending the stream.
fn encode_frame(ty: &str, obj: &Value) -> Bytes {
    match crate::protobuf::watch_frame(ty, obj) {
        Ok(b) => Bytes::from(b),
        Err(e) => {
            tracing::warn!("protobuf watch event: {e}");
            Bytes::new()
        }
    }
}

/// A change as watches see it: the new and the previous object, decoded, converted to the
/// watched resource's version and stamped with the change's revision (an update's previous
/// object, never sent, may carry its own).
#[derive(Clone, Default)]
struct Decoded {
    new: Option<Arc<State>>,
    prev: Prev,
}

/// A change's previous object: none (a create), the kept state of the key's last change, or
/// the stored bytes as a state decoded when a watch first needs its object. A watch without
/// selectors only needs to know that there was one (every object matches), so an update seen
/// only by such watches (a node's status to the controllers' informers) never decodes its
/// previous state; nor does one whose selectors are decided from the bytes (a kubelet's
/// `spec.nodeName`), which at a thousand nodes is most pod updates: their previous objects
/// have left the window by their next change.
#[derive(Clone, Default)]
enum Prev {
    #[default]
    None,
    Kept(Arc<State>),
    Stored(Arc<State>),
}

impl Prev {
    /// Whether the previous object satisfies `sel`.
    fn matches(&self, ri: &ResourceInfo, sel: &Selectors) -> bool {
        self.state().is_some_and(|s| s.matches(ri, sel))
    }

    fn state(&self) -> Option<&Arc<State>> {
        match self {
            Prev::None => None,
            Prev::Kept(s) | Prev::Stored(s) => Some(s),
        }
    }
}

/// Recent store changes decoded once for every watch that examines them (the first half of
/// upstream's watch cache: there, each change is decoded once and filtered per watcher). With a
/// hundred kubelets watching pods by node, every pod change used to be decoded by every one of
/// them only to be filtered out. Entries are a pure function of the stored bytes, the revision
/// and the resource, so a hit and a miss give the same answer; the oldest revisions are dropped
/// beyond [`DECODED_EVENTS_KEPT`].
#[derive(Default)]
pub(crate) struct DecodedEvents {
    /// (revision, resource) → the keys changed in it with their decoded states.
    entries: Mutex<DecodedWindow>,
    /// Open watches per resource: a change of a resource with one watch is decoded for it alone
    /// and not kept (the window would cost more than it saves, e.g. for Lease renewals).
    watches: Mutex<BTreeMap<usize, usize>>,
    /// Changes whose states were made from their stored bytes (misses), for tests and
    /// benchmarks.
    decodes: std::sync::atomic::AtomicU64,
    /// Changes examined by watches (one per watch a change reached), for tests and benchmarks.
    examined: std::sync::atomic::AtomicU64,
    /// Previous states taken from the kept state of the key's last change, for tests.
    reused: std::sync::atomic::AtomicU64,
    /// Replayed changes skipped unread (neither state's bytes could match), for tests.
    skipped: std::sync::atomic::AtomicU64,
    /// Changes whose decoded states a watch took from the change's memo, for tests.
    memo_hits: std::sync::atomic::AtomicU64,
    /// Of `decodes`, those of a resource with one watch (never kept), for diagnostics.
    decodes_alone: std::sync::atomic::AtomicU64,
    /// Changes whose memo holds their decoded states now.
    memos: Arc<std::sync::atomic::AtomicUsize>,
    /// Changes whose memo was left empty because `MEMOS_KEPT` were held, for diagnostics.
    memos_refused: std::sync::atomic::AtomicU64,
    /// States made from stored bytes that a watch decoded into objects ([`State::lazy`]),
    /// for tests and benchmarks.
    values_decoded: Arc<AtomicU64>,
}

/// The most changes whose memos hold their decoded states at once (see [`DecodedEvents::get`]).
/// A burst larger than the window is a controller's batch of writes (a slow-start batch of
/// pod creates: at most a thousand).
pub(crate) const MEMOS_KEPT: usize = 2048;

/// A change's decoded states for watches of one resource, kept in the change's memo.
struct Memoized {
    resource: usize,
    decoded: Decoded,
    _counted: MemoCounted,
}

/// Counts a kept memo in [`DecodedEvents::memos`] for as long as it lives.
struct MemoCounted(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for MemoCounted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The decoded changes kept, by (revision, resource address), and the newest kept state of each
/// key with its stored bytes: the next change of that key has those bytes as its previous value,
/// so its previous state need not be decoded again.
#[derive(Default)]
struct DecodedWindow {
    by_revision: BTreeMap<(u64, usize), Vec<(String, Decoded)>>,
    latest: std::collections::HashMap<(usize, String), Latest>,
    /// How many `latest` states outlive their change's entry (see [`Latest::outlives`]).
    outliving: usize,
}

/// The newest kept state of a key: its revision, stored bytes and decoded state.
struct Latest {
    revision: u64,
    bytes: Bytes,
    state: Arc<State>,
    /// Kept after its change leaves the window: a small document that was updated, as a Lease
    /// renewed every 10 s (at a thousand nodes, a thousand other changes pass between two
    /// renewals of one Lease, and the next renewal would decode it again to write it).
    outlives: bool,
}

/// The largest stored document whose state outlives the window when it was updated (a node's
/// Lease takes about 600 bytes; pods and Nodes take several KiB).
const OUTLIVING_DOC_MAX: usize = 1536;

/// The most states kept beyond the window at once (a Lease for each of 16 384 nodes).
const OUTLIVING_MAX: usize = 16_384;

impl DecodedWindow {
    /// Puts `l` as the newest state of `key`, or forgets the key's newest state (`None`).
    fn set_latest(&mut self, key: (usize, String), l: Option<Latest>) {
        let old = match l {
            Some(l) => self.latest.insert(key, l),
            None => self.latest.remove(&key),
        };
        if old.is_some_and(|o| o.outlives) {
            self.outliving = self.outliving.saturating_sub(1);
        }
    }

    /// Drops the oldest revisions beyond [`DECODED_EVENTS_KEPT`], with the newest states of
    /// their keys unless those outlive them.
    fn trim(&mut self) {
        while self.by_revision.len() > DECODED_EVENTS_KEPT {
            let Some(((rev, res), keys)) = self.by_revision.pop_first() else {
                break;
            };
            for (key, d) in keys {
                let k = (res, key);
                let Some(l) = self.latest.get_mut(&k).filter(|l| l.revision == rev) else {
                    continue;
                };
                let small_update = matches!(d.prev, Prev::Kept(_) | Prev::Stored(_))
                    && l.bytes.len() <= OUTLIVING_DOC_MAX;
                if l.outlives || (small_update && self.outliving < OUTLIVING_MAX) {
                    if !l.outlives {
                        l.outlives = true;
                        self.outliving = self.outliving.saturating_add(1);
                    }
                } else {
                    self.set_latest(k, None);
                }
            }
        }
    }
}

/// The same stored document: the same buffer, or equal bytes (a store that holds its values
/// packed hands out a fresh buffer at every read; comparing a few KiB costs far less than
/// decoding them).
fn same_document(a: &Bytes, b: &Bytes) -> bool {
    (a.as_ptr() == b.as_ptr() && a.len() == b.len()) || a == b
}

/// How many recent (revision, resource) entries are kept decoded. Watches examine a change within
/// moments of its commit, so a short window serves nearly every lookup; a watch that lags behind
/// it reads the stored bytes for itself (a pod as a `Value` takes tens of KiB, so the window is
/// kept small).
pub(crate) const DECODED_EVENTS_KEPT: usize = 512;

/// Counts of [`DecodedEvents`], for diagnostics.
#[derive(Clone, Copy, Debug, Default)]
pub struct WatchDecodes {
    pub examined: u64,
    /// Changes whose states were made from their stored bytes (no writer's object or memo at
    /// hand); decoded only for a watch that needs the objects (`objects_decoded`).
    pub from_bytes: u64,
    /// Of `from_bytes`, changes of a resource with one watch (read for it alone, not kept).
    pub from_bytes_alone: u64,
    pub from_memo: u64,
    /// Changes whose memo was left empty because too many memos held decoded states.
    pub memo_refused: u64,
    /// Objects decoded from stored bytes, new or previous, for a watch that needed one: one
    /// whose selectors could not be matched against the bytes, that renders Tables or
    /// protobuf, or a deletion's.
    pub objects_decoded: u64,
}

impl DecodedEvents {
    pub(crate) fn stats(&self) -> WatchDecodes {
        WatchDecodes {
            examined: self.examined.load(Relaxed),
            from_bytes: self.decodes.load(Relaxed),
            from_bytes_alone: self.decodes_alone.load(Relaxed),
            from_memo: self.memo_hits.load(Relaxed),
            memo_refused: self.memos_refused.load(Relaxed),
            objects_decoded: self.values_decoded.load(Relaxed),
        }
    }

    /// How many changes' states were made from their stored bytes (each once, whatever the
    /// number of watches).
    #[cfg(test)]
    pub(crate) fn decodes(&self) -> u64 {
        self.decodes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many changes' memos hold their decoded states now.
    #[cfg(test)]
    pub(crate) fn memos_held(&self) -> usize {
        self.memos.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many changes a watch read from the memo another watch left in them.
    #[cfg(test)]
    pub(crate) fn memo_hits(&self) -> u64 {
        self.memo_hits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many previous states were the kept state of the key's last change (not decoded).
    #[cfg(test)]
    pub(crate) fn reused(&self) -> u64 {
        self.reused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many replayed changes were skipped without decoding.
    #[cfg(test)]
    pub(crate) fn skipped(&self) -> u64 {
        self.skipped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many changes reached a watch (each counted once per watch that examined it).
    #[cfg(test)]
    pub(crate) fn examined(&self) -> u64 {
        self.examined.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Registers an open watch of `ri` for as long as the returned guard lives.
    fn open(self: &Arc<Self>, ri: &'static ResourceInfo) -> OpenWatch {
        let id = std::ptr::from_ref(ri) as usize;
        let mut w = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        let n = w.entry(id).or_insert(0);
        *n = n.saturating_add(1);
        OpenWatch {
            events: self.clone(),
            id,
        }
    }

    /// The states of a change a watch of `ri` examines: the ones the first watch to examine
    /// this live change kept in its memo, else the window's (made from the stored bytes on a
    /// miss), then kept in the memo. The memo serves the watches the window has already
    /// forgotten the change for: when a burst of writes (a ReplicaSet creating a thousand pods
    /// at once) commits more changes than the window holds before the watches run, each change
    /// is still read, and decoded if a watch needs it, once.
    fn get(&self, ri: &'static ResourceInfo, ev: &klab_store::Event) -> Decoded {
        let resource = std::ptr::from_ref(ri) as usize;
        if let Some(m) = ev.memo.get::<Memoized>()
            && m.resource == resource
        {
            self.memo_hits
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return m.decoded.clone();
        }
        let change = Change {
            revision: ev.revision,
            kind: ev.kind,
            key: &ev.key,
            value: ev.value.as_ref(),
            prev_value: ev.prev_value.as_ref(),
        };
        let d = self.settle(ri, &change, &mut None).unwrap_or_default();
        // Not for a resource with one watch: the change reaches that watch alone.
        if self.keeps(ri) {
            self.note(&ev.memo, resource, &d);
        }
        d
    }

    /// Keeps `d` in a change's memo for the other watches of `resource`, while few memos hold
    /// decoded states: a watch whose client stopped reading holds the changes queued for it,
    /// and a decoded pod takes ten times its bytes.
    fn note(&self, memo: &klab_store::Memo, resource: usize, d: &Decoded) {
        if self.memos.load(Relaxed) >= MEMOS_KEPT {
            self.memos_refused.fetch_add(1, Relaxed);
        } else {
            self.memos.fetch_add(1, Relaxed);
            // Dropped (and uncounted) at once when another reader filled the memo first.
            memo.set(Memoized {
                resource,
                decoded: d.clone(),
                _counted: MemoCounted(self.memos.clone()),
            });
        }
    }

    /// Keeps the state a write of `ri` just stored, so that the watches examining the change
    /// need not decode it: `presented` is the object a read of `change.value` at its revision
    /// gives (`crud::decode_kv`), made from the document the API server encoded into those
    /// bytes, and `memo` the slot the write handed its change (`Storage::create_noted`). The
    /// state goes into the memo (for every watch the change reaches, however late) and, when
    /// more than one watch of `ri` is open, into the window (for the next write of the key).
    /// Returns the state, or `presented` back for a change without bytes.
    pub(crate) fn wrote(
        &self,
        ri: &'static ResourceInfo,
        change: &Change<'_>,
        presented: Value,
        memo: &klab_store::Memo,
    ) -> Result<Arc<State>, Value> {
        let mut presented = Some(presented);
        let d = self.settle(ri, change, &mut presented);
        if let Some(d) = &d {
            self.note(memo, std::ptr::from_ref(ri) as usize, d);
        }
        match d.and_then(|d| d.new) {
            Some(state) => Ok(state),
            // A change without bytes: `settle` handed the object back.
            None => Err(presented.unwrap_or_default()),
        }
    }

    /// Whether the changes of `ri` are kept: more than one watch of it is open.
    fn keeps(&self, ri: &'static ResourceInfo) -> bool {
        self.watches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(std::ptr::from_ref(ri) as usize))
            .is_some_and(|n| *n > 1)
    }

    /// The kept state of `key` when `kv` is the stored version it was decoded from: the object
    /// `crud::decode_kv(ri, kv)` gives, without decoding it again.
    pub(crate) fn current(
        &self,
        ri: &'static ResourceInfo,
        key: &str,
        kv: &klab_store::KeyValue,
    ) -> Option<Arc<State>> {
        let window = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let l = window
            .latest
            .get(&(std::ptr::from_ref(ri) as usize, key.to_string()))?;
        (l.revision == kv.mod_revision && same_document(&l.bytes, &kv.value))
            .then(|| l.state.clone())
    }

    /// The states of `change` for watches of `ri`: the kept ones, or made (from `written` when
    /// the API server had the object at hand, else from the stored bytes, decoded on first use)
    /// and kept when more than one watch of `ri` is open.
    fn settle(
        &self,
        ri: &'static ResourceInfo,
        change: &Change<'_>,
        written: &mut Option<Value>,
    ) -> Option<Decoded> {
        let resource = std::ptr::from_ref(ri) as usize;
        let shared = self.keeps(ri);
        let revision = change.revision;
        let id = (revision, resource);
        let mut window = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = window
            .by_revision
            .get(&id)
            .and_then(|v| v.iter().find(|(k, _)| k == change.key))
        {
            return Some(d.1.clone());
        }
        if written.is_none() {
            self.decodes
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if !shared {
                self.decodes_alone
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let latest_key = (resource, change.key.to_string());
        // The previous state is the kept state of the key's last change when the bytes are that
        // change's. An update's previous state is only matched against selectors, so it keeps
        // its own revision; a deletion sends it, stamped with the deletion's revision.
        let prev = match change.prev_value {
            None => Prev::None,
            Some(b) => match window.latest.get(&latest_key) {
                Some(l) if same_document(&l.bytes, b) => {
                    self.reused
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    Prev::Kept(match change.kind {
                        EventKind::Delete => l.state.at_revision(revision),
                        _ => l.state.clone(),
                    })
                }
                _ => Prev::Stored(State::lazy(ri, b, revision, &self.values_decoded)),
            },
        };
        let new = match (change.value, written.take()) {
            // The writer's object, as a read of the stored bytes presents them.
            (Some(bytes), Some(presented)) => {
                Some(State::of_stored(presented, ri, bytes, revision))
            }
            (value, w) => {
                *written = w;
                value.map(|b| State::lazy(ri, b, revision, &self.values_decoded))
            }
        };
        let d = Decoded { new, prev };
        if shared {
            window
                .by_revision
                .entry(id)
                .or_default()
                .push((change.key.to_string(), d.clone()));
            // A watch lagging behind the window reads an old change again; the key's newest
            // kept state stays the newest.
            let newer = window
                .latest
                .get(&latest_key)
                .is_none_or(|l| l.revision < revision);
            match (change.value, &d.new) {
                (Some(bytes), Some(state)) if newer => window.set_latest(
                    latest_key,
                    Some(Latest {
                        revision,
                        bytes: bytes.clone(),
                        state: state.clone(),
                        outlives: false,
                    }),
                ),
                _ if newer => window.set_latest(latest_key, None),
                _ => {}
            }
            window.trim();
        }
        Some(d)
    }
}

/// One change of a key, as the store's event for it has it.
pub(crate) struct Change<'a> {
    pub revision: u64,
    pub kind: EventKind,
    pub key: &'a str,
    pub value: Option<&'a Bytes>,
    pub prev_value: Option<&'a Bytes>,
}

/// An open watch, counted while it lives.
struct OpenWatch {
    events: Arc<DecodedEvents>,
    id: usize,
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        let mut w = self
            .events
            .watches
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = w.get_mut(&self.id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                w.remove(&self.id);
            }
        }
    }
}

/// Index of stored pods by `spec.nodeName` (missing: `""`, as the field selector reads it).
pub(crate) const POD_NODE_NAME: klab_store::TriggerIndex = klab_store::TriggerIndex {
    name: "pods:spec.nodeName",
    func: pod_node_name,
    prefix: Some(POD_PREFIX),
};

/// Where pods are stored (any namespace).
const POD_PREFIX: &str = "/registry/core/pods/";

/// Index of stored objects by name: the key's last segment, with no decoding.
const OBJECT_NAME: klab_store::TriggerIndex = klab_store::TriggerIndex {
    name: "metadata.name",
    func: object_name,
    prefix: None,
};

fn pod_node_name(_key: &str, value: &[u8]) -> Option<String> {
    // Reads only the one field, skipping the rest of the document without decoding it.
    crate::json_field::string_at(value, &["spec", "nodeName"])
        .ok()
        .map(Option::unwrap_or_default)
}

fn object_name(key: &str, _value: &[u8]) -> Option<String> {
    key.rsplit('/').next().map(str::to_string)
}

/// The store trigger a watch of `ri` with `sel` may use: one only when the selector requires
/// the indexed field to equal one value, so every change the trigger leaves out is one the
/// selector would have dropped (neither its old nor its new state can match).
pub(crate) fn trigger_for(
    ri: &'static ResourceInfo,
    sel: &Selectors,
) -> Option<klab_store::Trigger> {
    let storage = crate::conversion::storage_resource(ri);
    let equals = |field: &str| {
        sel.fields
            .terms()
            .iter()
            .find(|t| t.field == field && t.op == crate::selector_field::FieldOp::Equals)
            .map(|t| t.value.clone())
    };
    if storage.group.is_empty() && storage.plural == "pods" {
        let node = equals("spec.nodeName").or_else(|| equals("spec.host"));
        if let Some(value) = node {
            return Some(klab_store::Trigger {
                index: POD_NODE_NAME,
                value,
            });
        }
    }
    sel.fields.single_name().map(|name| klab_store::Trigger {
        index: OBJECT_NAME,
        value: name.to_string(),
    })
}

/// Whether a stored object (key and bytes) could match a watch's selector ([`list_prefilter`]).
type CouldMatch = dyn Fn(&str, &[u8]) -> bool + Sync;

/// For a list: whether a stored object (key and bytes) could match `sel`, read without decoding
/// it. False only when the selector's pinned field (a pod's `spec.nodeName`, an object's name;
/// the same as the watch triggers) has another value, so a list of one node's pods among 150 000
/// decodes only that node's pods. The selector still decides for every object that passes.
pub(crate) fn list_prefilter(
    ri: &'static ResourceInfo,
    sel: &Selectors,
) -> impl Fn(&str, &[u8]) -> bool + Send + Sync + use<> {
    let trigger = trigger_for(ri, sel);
    // Stored objects are compact JSON written by serde_json, so a pod on node `n` holds the
    // bytes `"nodeName":"n"` (the value escaped as serde_json escapes it); bytes without them
    // cannot be on `n`. An empty value (unscheduled pods) has no such bytes: the index function
    // reads the field instead.
    let needle = trigger
        .as_ref()
        .filter(|t| t.index.name == POD_NODE_NAME.name && !t.value.is_empty())
        .and_then(|t| serde_json::to_string(&t.value).ok())
        .map(|v| memchr::memmem::Finder::new(&format!("\"nodeName\":{v}")).into_owned());
    move |key, value| match (&needle, &trigger) {
        (Some(n), _) => n.find(value).is_some(),
        (None, Some(t)) => (t.index.func)(key, value).is_none_or(|v| v == t.value),
        (None, None) => true,
    }
}

/// How the stream starts.
enum Start {
    /// Synthetic ADDED for the current state, then changes after its revision.
    InitialState { initial_events_end_bookmark: bool },
    /// Changes after this revision.
    After(u64),
}

pub(crate) async fn watch(ctx: Ctx) -> ApiResult<Response> {
    let ri = ctx.target.ri;
    let sel = Selectors::from_ctx(&ctx)?;
    let allow_bookmarks = ctx.q_bool("allowWatchBookmarks");
    let rv = ctx.q("resourceVersion").unwrap_or("").to_string();
    let send_initial = ctx.q_bool("sendInitialEvents");
    if send_initial && (ctx.q("resourceVersionMatch") != Some("NotOlderThan") || !allow_bookmarks) {
        return Err(ApiError::new(
            422,
            "Invalid",
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled and allowWatchBookmarks is set to true and resourceVersionMatch is set to NotOlderThan",
        ));
    }
    let start = if send_initial {
        Start::InitialState {
            initial_events_end_bookmark: true,
        }
    } else if rv.is_empty() || rv == "0" {
        Start::InitialState {
            initial_events_end_bookmark: false,
        }
    } else {
        let rv = crate::crud::parse_resource_version("resourceVersion", &rv)?;
        // A watch from a revision the store has not reached waits for it, as a list does.
        crate::crud::wait_for_revision(&ctx.inner, rv).await?;
        Start::After(rv)
    };
    let render = if table::wants_table(ctx.accept()) {
        Render::Table {
            include: IncludeObject::parse(ctx.q("includeObject")).map_err(ApiError::bad_request)?,
        }
    } else if crate::protobuf::wants_protobuf(ctx.accept())
        && crate::protobuf::supports(ctx.target.ri)
    {
        Render::Protobuf
    } else if table::wants_partial_metadata(ctx.accept()).is_some() {
        Render::PartialMetadata
    } else {
        Render::Object
    };
    let content_type = if matches!(render, Render::Protobuf) {
        crate::protobuf::WATCH_MEDIA_TYPE
    } else {
        "application/json"
    };
    let timeout = match crate::crud::query_i64(&ctx, "timeoutSeconds")? {
        // Zero or negative means the server's default, as upstream's minRequestTimeout path.
        Some(s) if s > 0 => std::time::Duration::from_secs(s.unsigned_abs()),
        _ => ctx.inner.config.default_watch_timeout,
    };
    let prefix =
        crate::conversion::storage_resource(ri).key_prefix_in(ctx.target.namespace.as_deref());
    let trigger = trigger_for(ri, &sel);
    let inner = ctx.inner.clone();
    let mut enc = Encoder {
        ri,
        render,
        first_table: true,
        clock: inner.clock.clone(),
    };
    // Changes already committed when the watch starts (its initial state, or the history it
    // replays from an older resourceVersion) are mostly outside the decode window: those whose
    // stored bytes cannot match the selector's pinned field are skipped unread, so 5 000
    // kubelets re-watching their node's pods do not each decode every pod change of the last
    // minute. Live changes go through the window as before.
    let could_match = list_prefilter(ri, &sel);
    let replayed_through = inner.store.current_revision();

    // Everything that can fail with a plain HTTP error happens before the 200 is sent.
    let mut initial: Vec<Bytes> = Vec::new();
    let (after, stream) = match start {
        Start::InitialState {
            initial_events_end_bookmark,
        } => {
            let res = inner.store.list(&prefix, ListOptions::default()).await?;
            for kv in &res.kvs {
                if !could_match(&kv.key, &kv.value) {
                    continue;
                }
                let obj = crate::crud::decode_kv(ri, kv)?;
                if sel.matches(ri, &obj) {
                    initial.push(enc.line("ADDED", &obj));
                }
            }
            if initial_events_end_bookmark {
                initial.push(enc.bookmark(res.revision, true));
            }
            (
                res.revision,
                inner.store.watch_triggered(&prefix, res.revision, trigger),
            )
        }
        Start::After(n) => (n, inner.store.watch_triggered(&prefix, n, trigger)),
    };
    let stream = match stream {
        Ok(s) => Some(s),
        Err(StoreError::Compacted { .. }) | Err(StoreError::FutureRevision { .. }) => {
            let current = inner.store.current_revision();
            let e = ApiError::expired(format!("too old resource version: {after} ({current})"));
            initial.push(enc.error(&e));
            None
        }
        Err(e) => return Err(e.into()),
    };

    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(256);
    let clock = inner.clock.clone();
    let store = inner.store.clone();
    let bookmark_every = inner.config.bookmark_interval;
    let open = inner.decoded.open(ri);
    tokio::spawn(async move {
        let _open = open;
        for line in initial {
            if tx.send(Ok(line)).await.is_err() {
                return;
            }
        }
        let Some(mut stream) = stream else { return };
        let deadline = clock.sleep(timeout);
        tokio::pin!(deadline);
        let deadline_at = clock.elapsed().saturating_add(timeout);
        let mut last_rv = after;
        let mut bookmark_due = next_bookmark_in(clock.elapsed(), deadline_at, bookmark_every);
        let mut next_bookmark = Box::pin(clock.sleep(bookmark_due.unwrap_or(timeout)));
        loop {
            tokio::select! {
                biased;
                _ = tx.closed() => return,
                _ = &mut deadline => return,
                item = stream.next() => {
                    if forward(item, &mut enc, &sel, (&could_match, replayed_through), &tx, &inner, &mut last_rv).await.is_err() {
                        return;
                    }
                }
                _ = &mut next_bookmark, if allow_bookmarks && bookmark_due.is_some() => {
                    // Upstream's watch cache bookmarks its current revision even when nothing
                    // matched this watch, so an idle watcher resumes from a recent revision
                    // instead of falling behind compaction and relisting. Every change up to
                    // `current` was published to this stream before `current` became visible
                    // (a store invariant), so once the stream has nothing ready, this watch has
                    // examined them all and may claim `current` without skipping an event.
                    let current = store.current_revision();
                    while let Some(item) = stream.next().now_or_never() {
                        if forward(item, &mut enc, &sel, (&could_match, replayed_through), &tx, &inner, &mut last_rv).await.is_err() {
                            return;
                        }
                    }
                    last_rv = last_rv.max(current);
                    if tx.send(Ok(enc.bookmark(last_rv, false))).await.is_err() {
                        return;
                    }
                    bookmark_due = next_bookmark_in(clock.elapsed(), deadline_at, bookmark_every);
                    next_bookmark = Box::pin(clock.sleep(bookmark_due.unwrap_or(timeout)));
                }
            }
        }
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(body)
        .map_err(ApiError::internal)
}

/// How long until a watch's next bookmark, as upstream's cache watcher schedules them: every
/// `every`, and 2 s before the watch's deadline, so that a client whose watch times out resumes
/// from a revision seconds old instead of up to a minute old (a resumed watch replays the history
/// since). `None` once that last one is past: the watch sends no more bookmarks.
pub(crate) fn next_bookmark_in(
    now: Duration,
    deadline: Duration,
    every: Duration,
) -> Option<Duration> {
    let heartbeat = now.saturating_add(every);
    let at = heartbeat.min(deadline.checked_sub(PRE_TIMEOUT_BOOKMARK)?);
    // Strictly later: the bookmark due now is the one being sent.
    (at > now).then(|| at - now)
}

/// How long before its deadline a watch gets its last bookmark (upstream's cache watcher: 2 s).
const PRE_TIMEOUT_BOOKMARK: Duration = Duration::from_secs(2);

/// Sends what one item of the store's change feed means to this watcher: its line, if it matches,
/// or the terminal error. `Err(())` ends the watch.
async fn forward(
    item: Option<Result<klab_store::Event, StoreError>>,
    enc: &mut Encoder,
    sel: &Selectors,
    (could_match, replayed_through): (&CouldMatch, u64),
    tx: &mpsc::Sender<Result<Bytes, Infallible>>,
    inner: &Inner,
    last_rv: &mut u64,
) -> Result<(), ()> {
    let (store, decoded, metrics) = (&inner.store, &*inner.decoded, &inner.metrics);
    let ev = match item {
        None => return Err(()),
        Some(Ok(ev)) => ev,
        Some(Err(StoreError::Lagged(_))) | Some(Err(StoreError::Compacted { .. })) => {
            let e = ApiError::expired(format!(
                "too old resource version: {last_rv} ({})",
                store.current_revision()
            ));
            let _ = tx.send(Ok(enc.error(&e))).await;
            return Err(());
        }
        Some(Err(e)) => {
            let _ = tx.send(Ok(enc.error(&ApiError::internal(e)))).await;
            return Err(());
        }
    };
    *last_rv = ev.revision;
    decoded
        .examined
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let may_match = |b: &Option<Bytes>| b.as_ref().is_some_and(|b| could_match(&ev.key, b));
    if ev.revision <= replayed_through && !may_match(&ev.value) && !may_match(&ev.prev_value) {
        // Neither state can match: `event_line` would send nothing.
        decoded
            .skipped
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return Ok(());
    }
    if let Some(line) = event_line(enc, sel, decoded, &ev) {
        metrics.watch_event(enc.ri);
        if tx.send(Ok(line)).await.is_err() {
            return Err(());
        }
    }
    Ok(())
}

/// Turns one store change into the watch line this watcher should see, if any.
fn event_line(
    enc: &mut Encoder,
    sel: &Selectors,
    decoded: &DecodedEvents,
    ev: &klab_store::Event,
) -> Option<Bytes> {
    let ri = enc.ri;
    let Decoded { new, prev } = decoded.get(ri, ev);
    match ev.kind {
        EventKind::Create => new
            .filter(|s| s.matches(ri, sel))
            .map(|s| enc.state_line("ADDED", &s)),
        // The DELETED object is the last state, stamped with the deletion's revision.
        EventKind::Delete => prev
            .state()
            .filter(|s| s.matches(ri, sel))
            .map(|s| enc.state_line("DELETED", s)),
        EventKind::Update => {
            let new = new?;
            let ty = match (prev.matches(ri, sel), new.matches(ri, sel)) {
                (true, true) => "MODIFIED",
                (false, true) => "ADDED",
                (true, false) => "DELETED",
                (false, false) => return None,
            };
            Some(enc.state_line(ty, &new))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector_field::FieldSelector;
    use klab_api::selector::LabelSelector;

    fn sel(fields: &str) -> Selectors {
        Selectors {
            labels: LabelSelector::everything(),
            fields: FieldSelector::parse(fields).unwrap(),
        }
    }

    #[test]
    fn a_state_line_is_the_line_encoded_for_each_watch() {
        let objects = [
            json!({"kind": "Pod", "metadata": {"name": "p\"q", "resourceVersion": "7"},
                   "status": {"message": "caf\u{e9} \n"}, "spec": {"n": [1, 2.5, null, true]}}),
            json!({}),
        ];
        for obj in objects {
            let state = State::new(obj.clone());
            for ty in ["ADDED", "MODIFIED", "DELETED"] {
                // Twice: the second line comes from the kept encoding.
                assert_eq!(state.line(ty), encode_line(ty, &obj), "{ty} {obj}");
                assert_eq!(state.line(ty), encode_line(ty, &obj), "{ty} {obj}");
            }
        }
    }

    /// A metadata watch's line written from a stored document's bytes is the line encoded from
    /// its decoded state; a state without a stored document (or a document without metadata)
    /// is encoded from its value.
    #[test]
    fn a_metadata_watch_line_from_stored_bytes_is_the_encoded_line() {
        let pods = crate::registry::lookup("", "v1", "pods").unwrap();
        let docs = [
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "p\"q", "namespace": "default", "uid": "u",
                                "labels": {"app": "caf\u{e9} \n"},
                                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                    "name": "r", "uid": "o", "controller": true}],
                                "managedFields": [{"manager": "m", "operation": "Update",
                                    "fieldsV1": {"f:metadata": {}}}]},
                   "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}}),
            json!({"apiVersion": "v1", "kind": "Pod"}),
        ];
        let mut render = Encoder {
            ri: pods,
            render: Render::PartialMetadata,
            first_table: true,
            clock: klab_api::Clock::scaled(1.0),
        };
        for doc in docs {
            let bytes = Bytes::from(serde_json::to_vec(&doc).unwrap());
            let state = State::lazy(pods, &bytes, 42, &Arc::default());
            let from_value = State::new(state.value().clone());
            for ty in ["ADDED", "MODIFIED", "DELETED"] {
                let want = encode_line(ty, &table::partial_object_metadata(state.value()));
                assert_eq!(render.state_line(ty, &state), want, "{ty} {doc}");
                assert_eq!(render.state_line(ty, &from_value), want, "{ty} {doc}");
            }
            assert_eq!(
                state.partial_metadata_line("ADDED").is_some(),
                doc.get("metadata").is_some(),
                "{doc}"
            );
        }
    }

    #[test]
    fn bookmarks_come_every_minute_and_two_seconds_before_the_deadline() {
        let s = Duration::from_secs;
        let minute = s(60);
        // (now, deadline) → next bookmark in
        let cases = [
            ((s(0), s(1800)), Some(s(60))),
            ((s(0), s(290)), Some(s(60))),
            ((s(240), s(290)), Some(s(48))), // 288 s: before the 300 s heartbeat
            ((s(287), s(290)), Some(s(1))),
            ((s(288), s(290)), None), // just sent
            ((s(289), s(290)), None), // the last one is past
            ((s(0), s(1)), None),     // a watch shorter than 2 s gets none
            ((s(0), Duration::MAX), Some(s(60))),
            ((Duration::MAX, Duration::MAX), None),
        ];
        for ((now, deadline), want) in cases {
            assert_eq!(
                next_bookmark_in(now, deadline, minute),
                want,
                "now {now:?}, deadline {deadline:?}"
            );
        }
    }

    /// An update's previous state is decoded only once a watch must match a selector against
    /// it: watches without selectors send MODIFIED knowing only that there was one.
    #[test]
    fn previous_states_are_decoded_only_for_selectors() {
        let pods = crate::registry::lookup("", "v1", "pods").unwrap();
        let events = Arc::new(DecodedEvents::default());
        let (_a, _b) = (events.open(pods), events.open(pods));
        let pod = |app: &str| {
            Bytes::from(
                serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "labels": {"app": app}}}))
                .unwrap(),
            )
        };
        let ev = klab_store::Event {
            revision: 9,
            kind: EventKind::Update,
            key: "/registry/core/pods/default/p".into(),
            value: Some(pod("db")),
            prev_value: Some(pod("web")),
            memo: klab_store::Memo::default(),
        };
        let mut enc = Encoder {
            ri: pods,
            render: Render::Object,
            first_table: false,
            clock: klab_api::Clock::virtual_default(),
        };
        let kept_prev = || {
            let window = events.entries.lock().unwrap();
            match &window.by_revision[&(9, std::ptr::from_ref(pods) as usize)][0]
                .1
                .prev
            {
                Prev::Stored(p) => p.value.get().is_some(),
                _ => panic!("the previous state is the stored bytes"),
            }
        };
        let labels = |s: &str| Selectors {
            labels: LabelSelector::parse(s).unwrap(),
            fields: FieldSelector::everything(),
        };
        let line = event_line(&mut enc, &labels(""), &events, &ev).unwrap();
        assert!(line.starts_with(b"{\"type\":\"MODIFIED\""));
        assert!(!kept_prev(), "not decoded for a watch of everything");
        let line = event_line(&mut enc, &labels("app=web"), &events, &ev).unwrap();
        assert!(
            line.starts_with(b"{\"type\":\"DELETED\""),
            "left the selector"
        );
        assert!(kept_prev(), "decoded once a selector needed it");
        let line = event_line(&mut enc, &labels("app=db"), &events, &ev).unwrap();
        assert!(
            line.starts_with(b"{\"type\":\"ADDED\""),
            "entered the selector"
        );
    }

    /// A watch lagging behind the window does not make an old state the key's newest, and a
    /// change its writer kept is found by the watches without a decode.
    #[test]
    fn kept_states_stay_the_newest_and_written_ones_are_not_decoded() {
        let pods = crate::registry::lookup("", "v1", "pods").unwrap();
        let events = Arc::new(DecodedEvents::default());
        let (_a, _b) = (events.open(pods), events.open(pods));
        let doc = |app: &str| {
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": app}}})
        };
        let bytes = |app: &str| Bytes::from(serde_json::to_vec(&doc(app)).unwrap());
        let key = "/registry/core/pods/default/p";
        let (b9, b10, b11) = (bytes("a"), bytes("b"), bytes("c"));
        let event = |revision, kind, value: &Bytes, prev: Option<&Bytes>| klab_store::Event {
            revision,
            kind,
            key: key.into(),
            value: Some(value.clone()),
            prev_value: prev.cloned(),
            memo: klab_store::Memo::default(),
        };
        events.get(pods, &event(10, EventKind::Update, &b10, Some(&b9)));
        events.get(pods, &event(9, EventKind::Create, &b9, None));
        let kv = |value: &Bytes, mod_revision| klab_store::KeyValue {
            key: key.into(),
            value: value.clone(),
            create_revision: 9,
            mod_revision,
        };
        assert!(events.current(pods, key, &kv(&b10, 10)).is_some());
        assert!(events.current(pods, key, &kv(&b9, 9)).is_none());
        let decodes = events.decodes();
        let change = Change {
            revision: 11,
            kind: EventKind::Update,
            key,
            value: Some(&b11),
            prev_value: Some(&b10),
        };
        let mut v = doc("c");
        object::set_resource_version(&mut v, 11);
        let kept = events
            .wrote(pods, &change, v, &klab_store::Memo::default())
            .expect("two watches: kept");
        let d = events.get(pods, &event(11, EventKind::Update, &b11, Some(&b10)));
        assert_eq!(events.decodes(), decodes, "kept by its writer");
        assert!(
            Arc::ptr_eq(d.new.as_ref().unwrap(), &kept),
            "the writer's state is the one sent"
        );
        assert_eq!(
            d.new.unwrap().value().pointer("/metadata/resourceVersion"),
            Some(&json!("11"))
        );
        assert!(events.current(pods, key, &kv(&b11, 11)).is_some());
        // A store that packs its values hands out a fresh buffer at each read: the same bytes
        // are the same document, at the same revision only.
        let fresh = |b: &Bytes| Bytes::from(b.to_vec());
        assert!(events.current(pods, key, &kv(&fresh(&b11), 11)).is_some());
        assert!(events.current(pods, key, &kv(&fresh(&b11), 10)).is_none());
        assert!(events.current(pods, key, &kv(&bytes("d"), 11)).is_none());
        // and the next change's previous state is the kept one, not decoded again
        let b12 = bytes("e");
        let reused = events.reused.load(std::sync::atomic::Ordering::Relaxed);
        let decodes = events.decodes();
        events.get(
            pods,
            &event(12, EventKind::Update, &b12, Some(&fresh(&b11))),
        );
        assert_eq!(
            events.reused.load(std::sync::atomic::Ordering::Relaxed),
            reused + 1
        );
        assert_eq!(events.decodes(), decodes + 1, "only the new state decoded");
    }

    const NONE: (&str, &str) = ("note", "");

    /// A stored pod on `node` with the annotation `note`.
    fn stored(node: Option<&str>, note: (&str, &str)) -> Vec<u8> {
        let mut pod = json!({"metadata": {"name": "p", "annotations": {note.0: note.1}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        if let Some(n) = node {
            pod["spec"]["nodeName"] = json!(n);
        }
        serde_json::to_vec(&pod).unwrap()
    }

    /// The list prefilter rules out another node's pod from its bytes, lets through every pod
    /// that may match (a mention of the node elsewhere is decoded and left to the selector), and
    /// reads names from keys.
    #[test]
    fn the_list_prefilter_rules_out_only_objects_that_cannot_match() {
        let pods = crate::registry::lookup("", "v1", "pods").unwrap();
        let key = "/registry/pods/default/p";
        let n1 = list_prefilter(pods, &sel("spec.nodeName=n1"));
        assert!(n1(key, &stored(Some("n1"), NONE)));
        assert!(!n1(key, &stored(Some("n2"), NONE)));
        assert!(!n1(key, &stored(None, NONE)));
        // An annotation named `nodeName` looks the same in the bytes; a mention inside a value
        // has its quotes escaped and does not.
        assert!(n1(key, &stored(Some("n2"), ("nodeName", "n1"))));
        assert!(!n1(
            key,
            &stored(Some("n2"), ("note", r#""nodeName":"n1""#))
        ));
        assert!(!list_prefilter(pods, &sel("spec.host=n1"))(
            key,
            &stored(Some("n2"), NONE)
        ));
        // A value serde_json escapes is looked for escaped.
        let quoted = list_prefilter(pods, &sel(r#"spec.nodeName=a"b"#));
        assert!(quoted(key, &stored(Some(r#"a"b"#), NONE)));
        let unscheduled = list_prefilter(pods, &sel("spec.nodeName="));
        assert!(unscheduled(key, &stored(None, NONE)));
        assert!(!unscheduled(key, &stored(Some("n1"), NONE)));
        let by_name = list_prefilter(pods, &sel("metadata.name=q"));
        assert!(!by_name(key, &stored(Some("n1"), NONE)));
        assert!(by_name(
            "/registry/pods/default/q",
            &stored(Some("n1"), NONE)
        ));
        // Other selectors rule out nothing.
        let other = list_prefilter(pods, &sel("status.phase=Running"));
        assert!(other(key, &stored(Some("n2"), NONE)));
        assert!(list_prefilter(pods, &sel("spec.nodeName!=n1"))(
            key,
            &stored(Some("n1"), NONE)
        ));
    }

    #[test]
    fn the_pod_index_covers_where_pods_are_stored() {
        let pods = crate::registry::lookup("", "v1", "pods").unwrap();
        assert_eq!(pods.key_prefix(), POD_PREFIX);
        assert_eq!(POD_NODE_NAME.prefix, Some(POD_PREFIX));
    }
}
