//! API objects decoded once per process: `Shared<K>` is an `Arc<K>` decoded as [`Slim`] (without
//! `metadata.managedFields`), and a document whose bytes were decoded before, by any component
//! of the process, is not decoded again: it is the same `Arc`.
//!
//! Upstream's kube-controller-manager, kube-scheduler and every kubelet are separate processes,
//! each holding its own copy of the pods it watches. In one klab process they are not: the
//! controller manager's informer, the scheduler's cache and the pod's kubelet each held a typed
//! copy of every pod (about 15 KB apiece), most of a large cluster's memory, and each decoded the
//! same watch event's bytes on its own. The API server encodes an event once for all its
//! watchers, so the copies are decodes of identical bytes; decoding is a pure function of them,
//! and the objects are immutable behind their `Arc`, so sharing one decode changes nothing a
//! component can observe but the pointer (which no decision may depend on; the caches that
//! compare `Arc`s do so only to skip recomputing what equal contents would give).
//!
//! The key of a decode is the document's 128-bit XXH3 hash and length, with the Rust type
//! decoded into; the table holds `Weak` references, so it keeps no object alive. A `Weak` does
//! keep its object's allocation (a pod's 2.2 KB inline, its lists freed), so the table is swept
//! of the dead ones after every sixteenth of its size of new decodes: at most about one entry
//! in sixteen is dead, where sweeping when the table had doubled let half of it be (330 MB at
//! 150 000 pods). The table is the process's, not a cluster's: two clusters in one process
//! (tests) share only decodes of byte-identical documents, which are equal.
//!
//! Decoding needs the document's bytes as they were sent (`serde_json::value::RawValue`), so a
//! `Shared<K>` decodes only from serde_json (a `from_slice`/`from_str`/`from_value`, as kube's
//! client decodes lists and watch events), never from a buffered intermediate form.

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::slim::Slim;

/// `K` decoded without its managed fields, shared with every other decode of the same bytes.
pub struct Shared<K>(pub Arc<K>);

impl<K> Shared<K> {
    pub fn into_arc(self) -> Arc<K> {
        self.0
    }
}

impl<K> Clone for Shared<K> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<K: fmt::Debug> fmt::Debug for Shared<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<K> std::ops::Deref for Shared<K> {
    type Target = K;
    fn deref(&self) -> &K {
        &self.0
    }
}

impl<K: Serialize> Serialize for Shared<K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de, K: DeserializeOwned + Send + Sync + 'static> Deserialize<'de> for Shared<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        decode(raw.get()).map(Shared).map_err(D::Error::custom)
    }
}

impl<K: kube_core::Resource + Clone> kube_core::Resource for Shared<K> {
    crate::slim::resource_of_inner!();

    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        self.0.meta()
    }
    /// A `Shared` object is immutable (other components hold it): a caller that changes one
    /// changes its own copy, made here.
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        Arc::make_mut(&mut self.0).meta_mut()
    }
}

/// What identifies one decode: the type decoded into, the document's hash and its length.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    hash: u128,
    len: usize,
    ty: TypeId,
}

#[derive(Default)]
struct Table {
    live: BTreeMap<Key, Weak<dyn Any + Send + Sync>>,
    /// New decodes until the next sweep.
    until_sweep: usize,
}

/// The fewest new decodes between two sweeps (a small table is not swept at every decode).
const MIN_SWEEP: usize = 1024;

/// A sweep comes after this fraction of the table's size of new decodes.
const SWEEP_FRACTION: usize = 16;

static TABLE: Mutex<Table> = Mutex::new(Table {
    live: BTreeMap::new(),
    until_sweep: MIN_SWEEP,
});
static HITS: AtomicU64 = AtomicU64::new(0);
static MISSES: AtomicU64 = AtomicU64::new(0);

fn table() -> std::sync::MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The object `text` decodes to as a [`Slim`] `K`: the live one if these bytes were decoded
/// into a `K` before and some component still holds it, else a fresh decode, remembered.
pub fn decode<K: DeserializeOwned + Send + Sync + 'static>(
    text: &str,
) -> Result<Arc<K>, serde_json::Error> {
    let key = Key {
        hash: xxhash_rust::xxh3::xxh3_128(text.as_bytes()),
        len: text.len(),
        ty: TypeId::of::<K>(),
    };
    let held = table().live.get(&key).and_then(Weak::upgrade);
    if let Some(obj) = held.and_then(|o| o.downcast::<K>().ok()) {
        HITS.fetch_add(1, Ordering::Relaxed);
        return Ok(obj);
    }
    MISSES.fetch_add(1, Ordering::Relaxed);
    // Decoded outside the lock: two components decoding the same new bytes at once both decode
    // them, and the later one's copy is the one remembered; both are equal.
    let mut obj = serde_json::from_str::<Slim<K>>(text)?.0;
    compact(&mut obj);
    let obj: Arc<K> = Arc::new(obj);
    let any: Arc<dyn Any + Send + Sync> = obj.clone();
    let mut t = table();
    t.live.insert(key, Arc::downgrade(&any));
    t.until_sweep = t.until_sweep.saturating_sub(1);
    if t.until_sweep == 0 {
        // One look at each entry per 1/16 of the table's size of decodes: a few nanoseconds per
        // decode, which costs microseconds.
        t.live.retain(|_, w| w.strong_count() > 0);
        t.until_sweep = (t.live.len() / SWEEP_FRACTION).max(MIN_SWEEP);
    }
    Ok(obj)
}

/// Drops the spare capacity a decode leaves in the lists of the objects held longest and most
/// (pods and nodes). serde grows a list as it reads it (JSON does not say how long it is), so a
/// pod's one container status took room for four (2.2 KB more), its five conditions
/// room for eight. Other kinds are left as decoded.
fn compact(obj: &mut dyn Any) {
    use k8s_openapi::api::core::v1::{Container, Node, Pod};
    fn shrink<T>(v: &mut Option<Vec<T>>) {
        if let Some(v) = v {
            v.shrink_to_fit();
        }
    }
    fn container(c: &mut Container) {
        shrink(&mut c.args);
        shrink(&mut c.command);
        shrink(&mut c.env);
        shrink(&mut c.ports);
        shrink(&mut c.volume_mounts);
    }
    if let Some(pod) = obj.downcast_mut::<Pod>() {
        shrink(&mut pod.metadata.owner_references);
        shrink(&mut pod.metadata.finalizers);
        if let Some(spec) = &mut pod.spec {
            spec.containers.shrink_to_fit();
            spec.containers.iter_mut().for_each(container);
            shrink(&mut spec.init_containers);
            spec.init_containers
                .iter_mut()
                .flatten()
                .for_each(container);
            shrink(&mut spec.volumes);
            for v in spec.volumes.iter_mut().flatten() {
                if let Some(p) = &mut v.projected {
                    shrink(&mut p.sources);
                }
            }
            shrink(&mut spec.tolerations);
            shrink(&mut spec.topology_spread_constraints);
            shrink(&mut spec.readiness_gates);
        }
        if let Some(status) = &mut pod.status {
            shrink(&mut status.conditions);
            shrink(&mut status.container_statuses);
            shrink(&mut status.init_container_statuses);
            shrink(&mut status.host_ips);
            shrink(&mut status.pod_ips);
        }
    } else if let Some(node) = obj.downcast_mut::<Node>() {
        shrink(&mut node.metadata.owner_references);
        if let Some(spec) = &mut node.spec {
            shrink(&mut spec.taints);
            shrink(&mut spec.pod_cidrs);
        }
        if let Some(status) = &mut node.status {
            shrink(&mut status.addresses);
            shrink(&mut status.conditions);
            shrink(&mut status.images);
            for image in status.images.iter_mut().flatten() {
                shrink(&mut image.names);
            }
            shrink(&mut status.volumes_attached);
            shrink(&mut status.volumes_in_use);
        }
    }
}

/// Decodes served from the table and decodes made, since the process started (every cluster
/// of the process counts).
pub fn stats() -> (u64, u64) {
    (HITS.load(Ordering::Relaxed), MISSES.load(Ordering::Relaxed))
}

/// How many of the table's decodes some component still holds, and how many of those are pods
/// (the benchmark's measure of how many versions of each pod the process keeps; a lower bound,
/// as an object decoded outside the table is not counted).
pub fn live() -> (usize, usize) {
    (
        live_where(|_| true),
        live_of::<k8s_openapi::api::core::v1::Pod>(),
    )
}

/// How many of the table's decodes into a `K` some component still holds.
pub fn live_of<K: 'static>() -> usize {
    let ty = TypeId::of::<K>();
    live_where(|k| k.ty == ty)
}

fn live_where(f: impl Fn(&Key) -> bool) -> usize {
    let t = table();
    t.live
        .iter()
        .filter(|(k, w)| f(k) && w.strong_count() > 0)
        .count()
}

/// How many decodes the table remembers, dead ones not yet swept included.
pub fn remembered() -> usize {
    table().live.len()
}

#[cfg(test)]
mod tests;
