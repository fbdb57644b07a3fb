//! Values of the memory store, packed against a sibling: each value is held as copies from
//! another value of the same parent key (its dictionary) and the literal bytes between them.
//!
//! At scale the memory store is mostly values: a pod's document is 4–6 KB with its managed
//! fields, an Event's 1 KB, and a running cluster holds tens of thousands of each, besides
//! every version written since the last compaction (the API server compacts every five minutes
//! up to the revision of the tick before, so up to ten minutes of writes are held). Yet the
//! values under one parent key (`/registry/pods/default/`) are near copies of each other: the
//! pods of one ReplicaSet differ in their names, uids, node and times, the versions of one key
//! in a few fields. Packed against a sibling, what the two share costs a copy of a few bytes: a
//! 4.3 KB pod keeps about 310 bytes, an Event of 1.1 KB about 370, a Lease renewal of 870 about
//! 110 (documents of a live cluster, each against the first of its kind).
//!
//! The dictionary of a parent key is its first value, replaced by a later one that packs
//! poorly against it, or only fairly and is larger (see [`keeps`]): it is copied once, shared
//! by every value packed against it (`Arc<Dict>`), and freed with the last of them. The
//! packer indexes the current dictionary of each parent once, where it becomes current, so
//! that a write costs time in proportion to its own value, not to the dictionary's. (This
//! store used deflate with a preset dictionary before: that re-reads the dictionary and clears
//! a 128 KiB table for every value, and codes literals in Huffman codes too small a value does
//! not repay. A pod packed in 9 µs that way and unpacked in 2; now in 1.5 and 0.6, to 40 % fewer
//! bytes; Events pack to 7 % more.) Reads unpack: a get, a list and a watch replay each rebuild
//! the values they return, mostly by copying runs of bytes; a write packs its value once,
//! whether it is created or updated, and the version it supersedes becomes history as it is.
//!
//! ## Format
//!
//! A packed value is a sequence of operations, each opening with a varint `n << 1 | copy`:
//!
//! * a literal (`copy` 0): the next `n` bytes of the value follow;
//! * a copy (`copy` 1): `n` bytes from a source address, given next as a zigzag varint relative
//!   to the address expected. Addresses `0..D` are the dictionary's `D` bytes, and `D + i` the
//!   value's own `i`-th byte, already rebuilt (such a copy may overlap what it writes, and is
//!   then made byte by byte). The expected address continues the last copy from the
//!   dictionary as if the literals since had replaced as many of its bytes (a changed uid or
//!   time), so that the copy after a same-length change costs one byte of address.
//!
//! The value's length is kept beside it and checked when it is unpacked.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

/// Values shorter than this stay as they are (a packed value has its own overhead).
pub(crate) const MIN_PACKED: usize = 128;

/// A value that packs to more than `1 / POOR_RATIO` of its size against its parent key's
/// dictionary becomes the parent's new dictionary: the shape of the values there changed. (Two
/// Events of different reasons pack to about a third of their size against each other, so a
/// parent holding both keeps one dictionary; a pod against a sibling packs to a fourteenth.)
const POOR_RATIO: usize = 2;

/// A value that packs to at most `1 / GOOD_RATIO` of its size keeps its parent's dictionary
/// whatever its size (see [`keeps`]).
const GOOD_RATIO: usize = 8;

/// The shortest copy found through a hash of its first 8 bytes (shorter ones cost about what
/// they save).
const MIN_HASHED: usize = 8;

/// The shortest copy taken at the expected address (its address costs one byte).
const MIN_EXPECTED: usize = 4;

/// Bits of the table of the value's own earlier bytes, built for each value (4 KiB cleared).
const OWN_BITS: u32 = 10;

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
            Held::Packed(p) => unpack(&p.dict.bytes, &p.data, p.len).map(Bytes::from),
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

/// A value as operations against a dictionary (see the module's format).
#[derive(Clone, Debug)]
pub(crate) struct Packed {
    data: Box<[u8]>,
    /// The value's length (checked when unpacked).
    len: usize,
    dict: Arc<Dict>,
}

/// Where 8-byte windows of a dictionary start, by the window's hash (the first start of
/// windows with one hash; plus one, 0 being empty): one slot per dictionary byte up to
/// [`INDEX_SLOTS_MAX`] slots, held only while the dictionary is its parent's current one. A
/// larger dictionary (a big ConfigMap) has only every `stride`-th start entered, so that its
/// index stays at 256 KiB: a copy is still found wherever an entered start lies inside it (the
/// packer looks up every byte of the value and extends a copy back), that is, when it is at
/// least `MIN_HASHED + stride - 1` bytes long.
struct Index {
    slots: Box<[u32]>,
    bits: u32,
}

/// The most slots of an index.
const INDEX_SLOTS_MAX: usize = 1 << 16;

impl Index {
    fn of(dict: &[u8]) -> Index {
        let n = dict.len().clamp(64, INDEX_SLOTS_MAX).next_power_of_two();
        let bits = n.trailing_zeros();
        let stride = dict.len().div_ceil(n).max(1);
        let mut slots = vec![0u32; n].into_boxed_slice();
        // From the end, so that the first start of a window wins its slot.
        for i in (0..dict.len().saturating_sub(7))
            .rev()
            .filter(|i| i % stride == 0)
        {
            if let (Some(w), Ok(at)) = (window(dict, i), u32::try_from(i + 1)) {
                slots[slot(w, bits)] = at;
            }
        }
        Index { slots, bits }
    }

    fn bytes(&self) -> u64 {
        (self.slots.len() * std::mem::size_of::<u32>()) as u64
    }
}

/// The 8 bytes of `b` from `i`, if there are as many.
fn window(b: &[u8], i: usize) -> Option<u64> {
    let w = b.get(i..i.checked_add(8)?)?;
    Some(u64::from_le_bytes(w.try_into().ok()?))
}

/// A window's slot in a table of `1 << bits` (a multiplicative hash's top bits).
fn slot(w: u64, bits: u32) -> usize {
    (w.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

/// How many bytes `a` and `b` share from their starts.
fn common(a: &[u8], b: &[u8]) -> usize {
    let m = a.len().min(b.len());
    let mut n = 0;
    while n + 8 <= m {
        let (Some(x), Some(y)) = (window(a, n), window(b, n)) else {
            break;
        };
        if x != y {
            return n + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + a[n..m]
        .iter()
        .zip(&b[n..m])
        .take_while(|(x, y)| x == y)
        .count()
}

fn put_varint(out: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        out.push(x as u8 | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

fn get_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut x = 0u64;
    for shift in (0..64).step_by(7) {
        let c = *b.get(*at)?;
        *at += 1;
        x |= u64::from(c & 0x7f).checked_shl(shift)?;
        if c < 0x80 {
            return Some(x);
        }
    }
    None
}

fn put_literal(out: &mut Vec<u8>, bytes: &[u8]) {
    if !bytes.is_empty() {
        put_varint(out, (bytes.len() as u64) << 1);
        out.extend_from_slice(bytes);
    }
}

/// `value` as operations against `dict` (whose index is `index`); `None` when that would not
/// be smaller than the value. Greedy: at each byte, the copy at the expected address if it is
/// at least [`MIN_EXPECTED`] long, else the longer of the dictionary's and the value's own
/// earlier window with this byte's 8-byte hash, if at least [`MIN_HASHED`] long; a copy found
/// is extended back over the literals before it.
fn pack(dict: &[u8], index: &Index, value: &[u8]) -> Option<Vec<u8>> {
    let d_len = dict.len();
    let mut own = [0u32; 1 << OWN_BITS];
    let mut out = Vec::with_capacity(value.len() / 8 + 16);
    // The value's next byte, the start of the pending literals, the next start to enter in
    // `own`, and the address the next copy is expected at less the value's position.
    let (mut i, mut lit, mut entered) = (0usize, 0usize, 0usize);
    let mut shift: i64 = 0;
    // A source address's bytes: the dictionary's, then the value's own.
    let source = |a: usize| -> &[u8] {
        match a.checked_sub(d_len) {
            None => &dict[a..],
            Some(j) => &value[j..],
        }
    };
    while i + MIN_EXPECTED <= value.len() {
        while entered < i {
            if let (Some(w), Ok(at)) = (window(value, entered), u32::try_from(entered + 1)) {
                own[slot(w, OWN_BITS)] = at;
            }
            entered += 1;
        }
        let rest = &value[i..];
        let mut found: Option<(usize, usize)> = None;
        let expected = i as i64 + shift;
        if let Ok(a) = usize::try_from(expected)
            && a < d_len
        {
            let n = common(&dict[a..], rest);
            if n >= MIN_EXPECTED {
                found = Some((a, n));
            }
        }
        if found.is_none()
            && let Some(w) = window(value, i)
        {
            let in_dict = index.slots[slot(w, index.bits)] as usize;
            if let Some(a) = in_dict.checked_sub(1).filter(|&a| a < d_len) {
                let n = common(&dict[a..], rest);
                if n >= MIN_HASHED {
                    found = Some((a, n));
                }
            }
            let in_own = own[slot(w, OWN_BITS)] as usize;
            if let Some(j) = in_own.checked_sub(1).filter(|&j| j < i) {
                let n = common(&value[j..], rest);
                if n >= MIN_HASHED && found.is_none_or(|(_, m)| n > m) {
                    found = Some((d_len + j, n));
                }
            }
        }
        let Some((mut a, mut n)) = found else {
            i += 1;
            continue;
        };
        // Back over the pending literals while the bytes before both agree (not across the
        // dictionary's start or its end, where the value's own bytes begin).
        let mut s = i;
        while s > lit && a > 0 && a != d_len && source(a - 1)[0] == value[s - 1] {
            s -= 1;
            a -= 1;
            n += 1;
        }
        put_literal(&mut out, &value[lit..s]);
        put_varint(&mut out, ((n as u64) << 1) | 1);
        let offset = a as i64 - (s as i64 + shift);
        put_varint(&mut out, ((offset << 1) ^ (offset >> 63)) as u64);
        i = s + n;
        lit = i;
        // The bytes of a copy are found again through their source: only the last windows
        // reaching into it are entered.
        entered = entered.max(i.saturating_sub(7));
        if a < d_len {
            shift = (a + n) as i64 - i as i64;
        }
        if out.len() >= value.len() {
            return None;
        }
    }
    put_literal(&mut out, &value[lit..]);
    (out.len() < value.len()).then_some(out)
}

/// The `len` bytes of a value packed as `data` against `dict`.
fn unpack(dict: &[u8], data: &[u8], len: usize) -> Result<Vec<u8>, String> {
    let bad = |what: &str| format!("a packed value of {len} bytes: {what}");
    let d_len = dict.len();
    let mut out: Vec<u8> = Vec::with_capacity(len);
    let (mut at, mut shift) = (0usize, 0i64);
    while at < data.len() {
        let op = get_varint(data, &mut at).ok_or_else(|| bad("truncated operation"))?;
        let n = usize::try_from(op >> 1).map_err(|_| bad("length overflows"))?;
        if n > len - out.len() {
            return Err(bad("longer than its length"));
        }
        if op & 1 == 0 {
            let bytes = data
                .get(at..at + n)
                .ok_or_else(|| bad("truncated literal"))?;
            out.extend_from_slice(bytes);
            at += n;
            continue;
        }
        let z = get_varint(data, &mut at).ok_or_else(|| bad("truncated address"))?;
        let offset = ((z >> 1) as i64) ^ -((z & 1) as i64);
        let a = (out.len() as i64)
            .checked_add(shift)
            .and_then(|e| e.checked_add(offset))
            .and_then(|a| usize::try_from(a).ok())
            .ok_or_else(|| bad("address out of range"))?;
        match a.checked_sub(d_len) {
            None => {
                let bytes = a
                    .checked_add(n)
                    .and_then(|end| dict.get(a..end))
                    .ok_or_else(|| bad("copy past the dictionary"))?;
                out.extend_from_slice(bytes);
                shift = (a + n) as i64 - out.len() as i64;
            }
            Some(j) if j < out.len() => {
                for k in j..j + n {
                    let b = out[k];
                    out.push(b);
                }
            }
            Some(_) => return Err(bad("copy of bytes not yet rebuilt")),
        }
    }
    if out.len() != len {
        return Err(bad(&format!("rebuilt {} bytes", out.len())));
    }
    Ok(out)
}

/// A parent key's current dictionary with its index.
struct Current {
    dict: Arc<Dict>,
    index: Index,
}

/// Packs values; holds the current dictionary of each parent key, indexed.
#[derive(Default)]
pub(crate) struct Packer {
    dicts: HashMap<Box<str>, Current>,
    /// The bytes of every live dictionary, current or retired but still packed against.
    total: Arc<AtomicU64>,
    /// The bytes of the current dictionaries' indexes.
    index_bytes: u64,
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
    /// The bytes of every live dictionary, and of the current ones' indexes.
    pub(crate) fn dict_bytes(&self) -> u64 {
        self.total.load(Ordering::Relaxed) + self.index_bytes
    }

    /// How `value`, written under `key`, is held: packed against its parent key's dictionary;
    /// against itself, as the parent's new dictionary, when the parent has none or does not
    /// keep it (see [`keeps`]); plain when it is small or does not shrink.
    pub(crate) fn hold(&mut self, key: &str, value: Bytes) -> Held {
        if value.len() < MIN_PACKED {
            return Held::Plain(value);
        }
        let parent = parent(key);
        if let Some(cur) = self.dicts.get(parent)
            && let Some(data) = pack(&cur.dict.bytes, &cur.index, &value)
            && keeps(&cur.dict, &value, data.len())
        {
            return Held::Packed(Packed {
                data: data.into_boxed_slice(),
                len: value.len(),
                dict: cur.dict.clone(),
            });
        }
        self.total.fetch_add(value.len() as u64, Ordering::Relaxed);
        let dict = Arc::new(Dict {
            bytes: Box::from(&value[..]),
            total: self.total.clone(),
        });
        let index = Index::of(&dict.bytes);
        let held = match pack(&dict.bytes, &index, &value) {
            Some(data) => Held::Packed(Packed {
                data: data.into_boxed_slice(),
                len: value.len(),
                dict: dict.clone(),
            }),
            None => Held::Plain(value),
        };
        self.index_bytes += index.bytes();
        let cur = Current { dict, index };
        if let Some(old) = self.dicts.insert(parent.into(), cur) {
            self.index_bytes -= old.index.bytes();
        }
        held
    }

    /// Forgets the dictionaries no value is packed against any more (those of parent keys
    /// whose values were all deleted and compacted away).
    pub(crate) fn sweep(&mut self) {
        let mut freed = 0;
        self.dicts.retain(|_, c| {
            let live = Arc::strong_count(&c.dict) > 1;
            if !live {
                freed += c.index.bytes();
            }
            live
        });
        self.index_bytes -= freed;
    }

    /// Dictionaries held by the packer (tests).
    #[cfg(test)]
    pub(crate) fn current_dicts(&self) -> impl Iterator<Item = &Arc<Dict>> {
        self.dicts.values().map(|c| &c.dict)
    }

    /// The bytes of the current dictionaries' indexes (tests).
    #[cfg(test)]
    pub(crate) fn index_bytes(&self) -> u64 {
        self.index_bytes
    }
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
        assert_eq!(p.dict_bytes(), first.len() as u64 + p.index_bytes());
        assert!(held.held_len() * 8 < first.len(), "{}", held.held_len());
        assert_eq!(held.bytes().unwrap(), first);
        let sibling = doc("web-1", 11, "Running");
        let h = p.hold("/registry/pods/default/web-1", sibling.clone());
        assert!(h.held_len() * 4 < sibling.len(), "{}", h.held_len());
        assert!(Arc::ptr_eq(h.dict().unwrap(), held.dict().unwrap()));
        assert_eq!(h.bytes().unwrap(), sibling);
        // no new dictionary was needed
        assert_eq!(p.dict_bytes(), first.len() as u64 + p.index_bytes());
        // another parent has its own
        let other = doc("web-0", 12, "Running");
        let o = p.hold("/registry/pods/other/web-0", other.clone());
        assert!(!Arc::ptr_eq(o.dict().unwrap(), held.dict().unwrap()));
        assert_eq!(o.bytes().unwrap(), other);
        assert_eq!(
            p.dict_bytes(),
            (first.len() + other.len()) as u64 + p.index_bytes()
        );
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
        // the retired dictionary's index is dropped: only the current one's is held
        assert_eq!(p.dict_bytes(), (a.len() + b.len()) as u64 + p.index_bytes());
        assert_eq!(p.index_bytes(), Index::of(&b).bytes());
        assert_eq!(held_a.bytes().unwrap(), a);
        assert_eq!(held_b.bytes().unwrap(), b);
        // the retired dictionary is freed with the last value packed against it
        drop(held_a);
        assert_eq!(p.dict_bytes(), b.len() as u64 + p.index_bytes());
        // and a parent whose values are all gone loses its dictionary at a sweep
        p.sweep();
        assert_eq!(p.current_dicts().count(), 1);
        drop(held_b);
        p.sweep();
        assert_eq!(p.current_dicts().count(), 0);
        assert_eq!(p.dict_bytes(), 0);
        assert_eq!(p.index_bytes(), 0);
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
        assert_eq!(
            p.dict_bytes(),
            (created.len() + run.len()) as u64 + p.index_bytes()
        );
        // a sibling as created packs well against it and keeps it; so does a sibling running
        let sib = p.hold("/registry/pods/default/web-1", doc("web-1", 30, "Pending"));
        let sib_run = p.hold("/registry/pods/default/web-1", running("web-1"));
        for h in [&sib, &sib_run] {
            assert!(Arc::ptr_eq(h.dict().unwrap(), later.dict().unwrap()));
        }
        assert!(sib_run.held_len() * 8 <= running("web-1").len());
        // the dictionary of the pod as created lives as long as the value packed against it
        drop(first);
        assert_eq!(p.dict_bytes(), run.len() as u64 + p.index_bytes());
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
        assert_eq!(p.dict_bytes(), 800 + p.index_bytes());
        assert!(first.held_len() + second.held_len() < 40);
    }

    /// A document and edits of it: replaced, inserted and removed runs, as versions and
    /// siblings differ.
    fn edited(base: &[u8], edits: &[(usize, usize, Vec<u8>)]) -> Vec<u8> {
        let mut v = base.to_vec();
        for (at, remove, insert) in edits {
            let at = at % (v.len() + 1);
            let end = (at + remove).min(v.len());
            v.splice(at..end, insert.iter().copied());
        }
        v
    }

    #[test]
    fn a_same_length_change_costs_its_bytes_and_two_copies() {
        let dict = doc("web-0", 10, "Pending");
        let index = Index::of(&dict);
        let value = doc("web-1", 10, "Pending");
        let data = pack(&dict, &index, &value).unwrap();
        // copy up to the name, the one changed byte, the copy after it at the expected address
        assert!(data.len() <= 10, "{data:?}");
        assert_eq!(unpack(&dict, &data, value.len()).unwrap(), value.to_vec());
    }

    #[test]
    fn a_repeated_run_the_dictionary_lacks_is_copied_from_the_value_itself() {
        let dict = doc("web-0", 10, "Pending");
        let index = Index::of(&dict);
        let name = "a-name-the-dictionary-has-never-seen-0123456789";
        let value = format!("{name}{}{name}{name}", String::from_utf8_lossy(&dict));
        let data = pack(&dict, &index, value.as_bytes()).unwrap();
        assert!(data.len() < name.len() + 20, "{}", data.len());
        assert_eq!(unpack(&dict, &data, value.len()).unwrap(), value.as_bytes());
    }

    #[test]
    fn a_large_dictionary_has_a_bounded_index_and_still_packs_its_near_copies() {
        // 1 MB of distinct lines, as a big ConfigMap holds
        let big: String = (0..40_000)
            .map(|i| format!("key-{i:06}: value {}\n", i * 7919 % 100_003))
            .collect();
        let index = Index::of(big.as_bytes());
        assert_eq!(index.bytes(), (INDEX_SLOTS_MAX * 4) as u64);
        let mut changed = big.clone().into_bytes();
        changed[500_000] = b'#';
        changed[900_000] = b'#';
        let data = pack(big.as_bytes(), &index, &changed).unwrap();
        assert!(data.len() < 200, "{}", data.len());
        assert_eq!(
            unpack(big.as_bytes(), &data, changed.len()).unwrap(),
            changed
        );
    }

    proptest::proptest! {
        #[test]
        fn values_come_back_whole(
            base in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            dict_edits in proptest::collection::vec(
                (0usize..700, 0usize..40, proptest::collection::vec(0u8..4, 0..30)), 0..6),
            value_edits in proptest::collection::vec(
                (0usize..700, 0usize..40, proptest::collection::vec(0u8..4, 0..30)), 0..6),
        ) {
            let dict = edited(&base, &dict_edits);
            let value = edited(&base, &value_edits);
            let index = Index::of(&dict);
            if let Some(data) = pack(&dict, &index, &value) {
                proptest::prop_assert!(data.len() < value.len());
                proptest::prop_assert_eq!(&unpack(&dict, &data, value.len()).unwrap(), &value);
            }
            // and through a packer, whatever it makes of them
            let mut p = Packer::default();
            let a = p.hold("/p/a", Bytes::from(dict.clone()));
            let b = p.hold("/p/b", Bytes::from(value.clone()));
            proptest::prop_assert_eq!(a.bytes().unwrap(), dict);
            proptest::prop_assert_eq!(b.bytes().unwrap(), value);
        }

        #[test]
        fn damaged_data_is_an_error_not_a_panic(
            dict in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            len in 0usize..1000,
        ) {
            if let Ok(v) = unpack(&dict, &data, len) {
                proptest::prop_assert_eq!(v.len(), len);
            }
        }
    }
}
