//! Values of the memory store, packed against a sibling: each value is held as a raw deflate
//! stream whose preset dictionary is another value of the same parent key.
//!
//! At scale the memory store is mostly values: a pod's document is 4–6 KB with its managed
//! fields, an Event's 1 KB, and a running cluster holds tens of thousands of each, besides
//! every version written since the last compaction (the API server compacts every five minutes
//! up to the revision of the tick before, so up to ten minutes of writes are held). Yet the
//! values under one parent key (`/registry/pods/default/`) are near copies of each other: the
//! pods of one ReplicaSet differ in their names, uids, node and times, the versions of one key
//! in a few fields. Packed against a sibling, what the two share costs a back-reference: a
//! 4.3 KB pod becomes about 220 bytes, where packed alone it is 1.5 KB. (In a 100-node,
//! 3 000-pod run, pod versions average 3.7 KB and keep 380 bytes, Events 1.1 KB and 235.)
//!
//! The dictionary of a parent key is its first value, replaced by a later one that packs
//! poorly against it, or only fairly and is larger (see [`keeps`]): it is copied once, shared
//! by every value packed against it (`Arc<Dict>`), and freed with the last of them. Reads unpack:
//! a get, a list and a watch replay each inflate the values they return, which costs a few
//! microseconds per document; a write packs its value once, whether it is created or updated,
//! and the version it supersedes becomes history as it is.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// Values shorter than this stay as they are (a packed stream has its own overhead).
pub(crate) const MIN_PACKED: usize = 128;

/// A value that packs to more than `1 / POOR_RATIO` of its size against its parent key's
/// dictionary becomes the parent's new dictionary: the shape of the values there changed. (Two
/// Events of different reasons pack to about a third of their size against each other, so a
/// parent holding both keeps one dictionary; a pod against a sibling packs to a twentieth.)
const POOR_RATIO: usize = 2;

/// A value that packs to at most `1 / GOOD_RATIO` of its size keeps its parent's dictionary
/// whatever its size (see [`keeps`]).
const GOOD_RATIO: usize = 8;

/// A retained version's value.
#[derive(Clone, Debug)]
pub(crate) enum Held {
    /// A value too small to pack, or one that did not shrink.
    Plain(Bytes),
    Packed(Packed),
}

impl Held {
    /// The bytes this value holds in memory of its own (its dictionary is counted once, in
    /// [`Packer::dict_bytes`]).
    pub(crate) fn held_len(&self) -> usize {
        match self {
            Held::Plain(b) => b.len(),
            Held::Packed(p) => p.data.len(),
        }
    }

    /// The dictionary the value is packed against, if any (tests).
    #[cfg(test)]
    pub(crate) fn dict(&self) -> Option<&Arc<Dict>> {
        match self {
            Held::Plain(_) => None,
            Held::Packed(p) => Some(&p.dict),
        }
    }

    /// The value's bytes (a packed one unpacked).
    pub(crate) fn bytes(&self) -> Result<Bytes, String> {
        match self {
            Held::Plain(b) => Ok(b.clone()),
            Held::Packed(p) => unpack(p),
        }
    }
}

/// A value that others are packed against; counted in its packer's total while it lives.
pub(crate) struct Dict {
    bytes: Box<[u8]>,
    total: Arc<AtomicU64>,
}

impl Dict {
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }
}

impl Drop for Dict {
    fn drop(&mut self) {
        self.total
            .fetch_sub(self.bytes.len() as u64, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for Dict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Dict({} bytes)", self.bytes.len())
    }
}

/// A value as a raw deflate stream against a dictionary.
#[derive(Clone, Debug)]
pub(crate) struct Packed {
    data: Box<[u8]>,
    /// The value's length (checked when unpacked).
    len: usize,
    dict: Arc<Dict>,
}

/// Packs values; holds one compressor, reset for each value (making one costs more than the
/// packing of a small document), and the current dictionary of each parent key.
pub(crate) struct Packer {
    compress: Compress,
    dicts: HashMap<Box<str>, Arc<Dict>>,
    /// The bytes of every live dictionary, current or retired but still packed against.
    total: Arc<AtomicU64>,
}

impl Default for Packer {
    fn default() -> Self {
        Packer {
            compress: Compress::new(Compression::fast(), false),
            dicts: HashMap::new(),
            total: Arc::default(),
        }
    }
}

impl std::fmt::Debug for Packer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Packer")
    }
}

/// Whether a parent keeps its dictionary after `value` packed to `packed` bytes against it: it
/// does when the value packed well, or fairly and is no larger than the dictionary; otherwise
/// the value becomes the dictionary. A larger value that packs only fairly holds parts the
/// dictionary lacks (a Running pod's status and its kubelet's managed fields, where the
/// dictionary is the pod as created); each such change makes the dictionary larger, so a
/// parent changes dictionaries only as often as its values outgrow them or change shape.
fn keeps(dict: &Dict, value: &[u8], packed: usize) -> bool {
    packed.saturating_mul(GOOD_RATIO) <= value.len()
        || (packed.saturating_mul(POOR_RATIO) <= value.len() && value.len() <= dict.bytes.len())
}

/// The parent of a key: everything up to its last `/` (the key itself when it has none).
fn parent(key: &str) -> &str {
    key.rfind('/').map_or(key, |i| &key[..=i])
}

impl Packer {
    /// The bytes of every live dictionary.
    pub(crate) fn dict_bytes(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// How `value`, written under `key`, is held: packed against its parent key's dictionary;
    /// against itself, as the parent's new dictionary, when the parent has none or does not
    /// keep it (see [`keeps`]); plain when it is small or does not shrink.
    pub(crate) fn hold(&mut self, key: &str, value: Bytes) -> Held {
        if value.len() < MIN_PACKED {
            return Held::Plain(value);
        }
        let parent = parent(key);
        if let Some(dict) = self.dicts.get(parent).cloned()
            && let Some(p) = self.pack(&value, &dict)
            && keeps(&dict, &value, p.data.len())
        {
            return Held::Packed(p);
        }
        self.total.fetch_add(value.len() as u64, Ordering::Relaxed);
        let dict = Arc::new(Dict {
            bytes: Box::from(&value[..]),
            total: self.total.clone(),
        });
        let held = match self.pack(&value, &dict) {
            Some(p) => Held::Packed(p),
            None => Held::Plain(value),
        };
        match self.dicts.get_mut(parent) {
            Some(d) => *d = dict,
            None => {
                self.dicts.insert(parent.into(), dict);
            }
        }
        held
    }

    /// Forgets the dictionaries no value is packed against any more (those of parent keys
    /// whose values were all deleted and compacted away).
    pub(crate) fn sweep(&mut self) {
        self.dicts.retain(|_, d| Arc::strong_count(d) > 1);
    }

    /// Dictionaries held by the packer (tests).
    #[cfg(test)]
    pub(crate) fn current_dicts(&self) -> impl Iterator<Item = &Arc<Dict>> {
        self.dicts.values()
    }

    /// `value` packed against `dict`; `None` when packing would not make it smaller (or
    /// failed: the value then stays plain, nothing is lost).
    fn pack(&mut self, value: &[u8], dict: &Arc<Dict>) -> Option<Packed> {
        let c = &mut self.compress;
        c.reset();
        c.set_dictionary(&dict.bytes).ok()?;
        let mut out = Vec::with_capacity(value.len() / 8 + 64);
        loop {
            let consumed = usize::try_from(c.total_in()).ok()?;
            let status = c
                .compress_vec(value.get(consumed..)?, &mut out, FlushCompress::Finish)
                .ok()?;
            if status == Status::StreamEnd {
                break;
            }
            if out.len() >= value.len() {
                return None;
            }
            out.reserve(out.capacity().max(256));
        }
        (out.len() < value.len()).then(|| Packed {
            data: out.into_boxed_slice(),
            len: value.len(),
            dict: dict.clone(),
        })
    }
}

thread_local! {
    /// One decompressor per thread, reset for each value: making one allocates and zeroes its
    /// 32 KiB window, more than unpacking a document costs.
    static INFLATE: std::cell::RefCell<Decompress> = std::cell::RefCell::new(Decompress::new(false));
}

/// The value `packed` holds.
fn unpack(packed: &Packed) -> Result<Bytes, String> {
    INFLATE.with(|d| {
        let mut d = d.try_borrow_mut().map_err(|e| e.to_string())?;
        d.reset(false);
        d.set_dictionary(&packed.dict.bytes)
            .map_err(|e| e.to_string())?;
        let mut out = Vec::with_capacity(packed.len);
        let status = d
            .decompress_vec(&packed.data, &mut out, FlushDecompress::Finish)
            .map_err(|e| e.to_string())?;
        if status != Status::StreamEnd || out.len() != packed.len {
            return Err(format!(
                "unpacked {} of {} bytes ({status:?})",
                out.len(),
                packed.len
            ));
        }
        Ok(Bytes::from(out))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(name: &str, rv: u32, phase: &str) -> Bytes {
        Bytes::from(format!(
            r#"{{"metadata":{{"name":"{name}","resourceVersion":"{rv}","labels":{{"app":"web"}}}},"spec":{{"containers":[{{"name":"c","image":"nginx:1.27"}}],"nodeName":"n1"}},"status":{{"phase":"{phase}","conditions":[{{"type":"Ready","status":"True"}}]}}}}"#
        ))
    }

    #[test]
    fn siblings_pack_against_the_first_and_come_back_whole() {
        let mut p = Packer::default();
        let first = doc("web-0", 10, "Pending");
        let held = p.hold("/registry/pods/default/web-0", first.clone());
        // the first value of a parent is its dictionary, and packs against itself to a trifle
        assert_eq!(p.dict_bytes(), first.len() as u64);
        assert!(held.held_len() * 8 < first.len(), "{}", held.held_len());
        assert_eq!(held.bytes().unwrap(), first);
        let sibling = doc("web-1", 11, "Running");
        let h = p.hold("/registry/pods/default/web-1", sibling.clone());
        assert!(h.held_len() * 4 < sibling.len(), "{}", h.held_len());
        assert!(Arc::ptr_eq(h.dict().unwrap(), held.dict().unwrap()));
        assert_eq!(h.bytes().unwrap(), sibling);
        // no new dictionary was needed
        assert_eq!(p.dict_bytes(), first.len() as u64);
        // another parent has its own
        let other = doc("web-0", 12, "Running");
        let o = p.hold("/registry/pods/other/web-0", other.clone());
        assert!(!Arc::ptr_eq(o.dict().unwrap(), held.dict().unwrap()));
        assert_eq!(o.bytes().unwrap(), other);
        assert_eq!(p.dict_bytes(), (first.len() + other.len()) as u64);
    }

    #[test]
    fn a_value_unlike_the_dictionary_becomes_the_next_one_and_old_ones_live_while_used() {
        let mut p = Packer::default();
        let a = doc("web-0", 10, "Pending");
        let held_a = p.hold("/r/x/a", a.clone());
        // a value sharing nothing with the dictionary
        let b: String = (0..60)
            .map(|i| format!("q{}z{},", i * 7919 % 1000, i))
            .collect();
        let b = Bytes::from(b);
        let held_b = p.hold("/r/x/b", b.clone());
        assert!(!Arc::ptr_eq(held_a.dict().unwrap(), held_b.dict().unwrap()));
        assert_eq!(p.dict_bytes(), (a.len() + b.len()) as u64);
        assert_eq!(held_a.bytes().unwrap(), a);
        assert_eq!(held_b.bytes().unwrap(), b);
        // the retired dictionary is freed with the last value packed against it
        drop(held_a);
        assert_eq!(p.dict_bytes(), b.len() as u64);
        // and a parent whose values are all gone loses its dictionary at a sweep
        p.sweep();
        assert_eq!(p.current_dicts().count(), 1);
        drop(held_b);
        p.sweep();
        assert_eq!(p.current_dicts().count(), 0);
        assert_eq!(p.dict_bytes(), 0);
    }

    /// A pod as created, then Running with a status its creation did not have.
    fn running(name: &str) -> Bytes {
        // image digests: 32 bytes each that nothing else shares
        let mut x = name.len() as u64;
        let mut digest = || -> String {
            (0..4)
                .map(|_| {
                    x = x
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    format!("{x:016x}")
                })
                .collect()
        };
        let statuses: String = (0..3)
            .map(|i| format!(r#"{{"name":"c{i}","ready":true,"restartCount":0,"started":true,"state":{{"running":{{"startedAt":"2026-01-01T00:00:{i:02}Z"}}}},"imageID":"docker.io/library/nginx@sha256:{}"}},"#, digest()))
            .collect();
        let mut d = doc(name, 20, "Running").to_vec();
        d.truncate(d.len() - 2);
        d.extend_from_slice(format!(r#","containerStatuses":[{statuses}{{}}]}}}}"#).as_bytes());
        Bytes::from(d)
    }

    #[test]
    fn a_larger_value_that_packs_only_fairly_becomes_the_dictionary() {
        let mut p = Packer::default();
        let created = doc("web-0", 10, "Pending");
        let first = p.hold("/registry/pods/default/web-0", created.clone());
        let run = running("web-0");
        let later = p.hold("/registry/pods/default/web-0", run.clone());
        assert_eq!(later.bytes().unwrap(), run);
        // the running pod outgrew the dictionary: it is the new one
        assert!(!Arc::ptr_eq(first.dict().unwrap(), later.dict().unwrap()));
        assert_eq!(p.dict_bytes(), (created.len() + run.len()) as u64);
        // a sibling as created packs well against it and keeps it; so does a sibling running
        let sib = p.hold("/registry/pods/default/web-1", doc("web-1", 30, "Pending"));
        let sib_run = p.hold("/registry/pods/default/web-1", running("web-1"));
        for h in [&sib, &sib_run] {
            assert!(Arc::ptr_eq(h.dict().unwrap(), later.dict().unwrap()));
        }
        assert!(sib_run.held_len() * 8 <= running("web-1").len());
        // the dictionary of the pod as created lives as long as the value packed against it
        drop(first);
        assert_eq!(p.dict_bytes(), run.len() as u64);
    }

    #[test]
    fn small_values_stay_plain_and_unlike_ones_cost_about_their_size() {
        let mut p = Packer::default();
        assert!(matches!(
            p.hold("/k/a", Bytes::from_static(b"renew 7")),
            Held::Plain(_)
        ));
        assert_eq!(p.dict_bytes(), 0);
        // bytes with no repetition do not pack against each other: each becomes its parent's
        // dictionary, held once, and packs against itself to a back-reference
        let noise = |seed: u64| -> Bytes {
            let mut x = seed;
            (0..400)
                .map(|_| {
                    x = x
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    (x >> 56) as u8
                })
                .collect::<Vec<u8>>()
                .into()
        };
        let first = p.hold("/k/n1", noise(1));
        let second = p.hold("/k/n2", noise(2));
        assert_eq!(first.bytes().unwrap(), noise(1));
        assert_eq!(second.bytes().unwrap(), noise(2));
        assert_eq!(p.dict_bytes(), 800);
        assert!(first.held_len() + second.held_len() < 40);
    }
}
