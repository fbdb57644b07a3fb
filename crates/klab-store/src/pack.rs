//! History values of the memory store, packed against the version that superseded them.
//!
//! The memory store keeps every version of a key until compaction (as etcd does; the API server
//! compacts every five minutes up to the revision of the tick before, so up to ten minutes of
//! writes are held). At scale those versions are most of the store: a pod's versions differ in a
//! few fields (its status, a time, the resourceVersion), yet each is a whole document. Once a
//! newer version exists, the older one is kept as a raw deflate stream whose preset dictionary is
//! the newer value — what the two share costs a back-reference — so a 4 KB pod version becomes
//! a few hundred bytes. The current value of a key is never packed: gets, writes and lists at
//! the current revision read plain bytes; only reads of history (a watch replaying from a past
//! revision, a list at a past revision) unpack, newest first along the key's versions.

use bytes::Bytes;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// Values shorter than this stay as they are (a packed stream has its own overhead).
pub(crate) const MIN_PACKED: usize = 128;

/// A retained version's value.
#[derive(Clone, Debug)]
pub(crate) enum Held {
    /// A key's current value, or a past one that did not shrink when packed.
    Plain(Bytes),
    Packed(Packed),
}

impl Held {
    /// The bytes this value holds in memory.
    pub(crate) fn held_len(&self) -> usize {
        match self {
            Held::Plain(b) => b.len(),
            Held::Packed(p) => p.held_len(),
        }
    }
}

/// A value as a raw deflate stream.
#[derive(Clone, Debug)]
pub(crate) struct Packed {
    data: Box<[u8]>,
    /// The value's length (checked when unpacked).
    len: usize,
    /// Whether the stream's dictionary is the value of the key's next version (else none: the
    /// version was followed by a deletion).
    against_next: bool,
}

impl Packed {
    pub(crate) fn against_next(&self) -> bool {
        self.against_next
    }

    pub(crate) fn held_len(&self) -> usize {
        self.data.len()
    }
}

/// Packs values; holds one compressor, reset for each value (making one costs more than the
/// packing of a small document).
pub(crate) struct Packer {
    compress: Compress,
}

impl Default for Packer {
    fn default() -> Self {
        Packer {
            compress: Compress::new(Compression::fast(), false),
        }
    }
}

impl std::fmt::Debug for Packer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Packer")
    }
}

impl Packer {
    /// `value` packed against `next` (the value of the version after it, `None` after a
    /// deletion); `None` when packing would not make it smaller (or failed: the value then
    /// stays plain, nothing is lost).
    pub(crate) fn pack(&mut self, value: &[u8], next: Option<&[u8]>) -> Option<Packed> {
        if value.len() < MIN_PACKED {
            return None;
        }
        let c = &mut self.compress;
        c.reset();
        if let Some(dict) = next {
            c.set_dictionary(dict).ok()?;
        }
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
            against_next: next.is_some(),
        })
    }
}

/// The value `packed` holds; `next` is the next version's value when it was packed against it.
pub(crate) fn unpack(packed: &Packed, next: Option<&[u8]>) -> Result<Bytes, String> {
    let mut d = Decompress::new(false);
    if packed.against_next {
        let dict = next.ok_or("the version it was packed against is gone")?;
        d.set_dictionary(dict).map_err(|e| e.to_string())?;
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(rv: u32, phase: &str) -> Vec<u8> {
        format!(
            r#"{{"metadata":{{"name":"web-1","resourceVersion":"{rv}","labels":{{"app":"web"}}}},"spec":{{"containers":[{{"name":"c","image":"nginx:1.27"}}],"nodeName":"n1"}},"status":{{"phase":"{phase}","conditions":[{{"type":"Ready","status":"True"}}]}}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn a_version_packed_against_its_successor_is_small_and_comes_back_whole() {
        let mut p = Packer::default();
        let old = doc(10, "Pending");
        let new = doc(11, "Running");
        let packed = p.pack(&old, Some(&new)).expect("packs");
        assert!(packed.data.len() * 4 < old.len(), "{}", packed.data.len());
        assert_eq!(
            unpack(&packed, Some(&new)).unwrap(),
            Bytes::from(old.clone())
        );
        // against another value it does not come back
        assert!(unpack(&packed, Some(&doc(12, "Failed"))) != Ok(Bytes::from(old.clone())));
        assert!(unpack(&packed, None).is_err());
        // the compressor is reused: a second value packs alike
        let again = p.pack(&old, Some(&new)).expect("packs");
        assert_eq!(again.data, packed.data);
        // without a successor (a deletion followed it)
        let alone = p.pack(&old, None).expect("packs");
        assert!(!alone.against_next());
        assert_eq!(unpack(&alone, None).unwrap(), Bytes::from(old));
    }

    #[test]
    fn small_or_incompressible_values_stay_plain() {
        let mut p = Packer::default();
        assert!(p.pack(b"renew 7", Some(b"renew 8")).is_none());
        // bytes with no repetition do not shrink
        let mut x: u64 = 1;
        let noise: Vec<u8> = (0..400)
            .map(|_| {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (x >> 56) as u8
            })
            .collect();
        assert!(p.pack(&noise, None).is_none());
    }
}
