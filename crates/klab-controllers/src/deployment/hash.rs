//! Upstream's naming hashes: FNV-32a of a pod template plus the collision count, rendered with
//! `rand.SafeEncodeString` — the `7d4b9c8f5` in `web-7d4b9c8f5` (Deployment → ReplicaSet) and in
//! `web-6d5b8c7d4f` (StatefulSet → ControllerRevision).
//!
//! Upstream feeds the hasher a `spew` dump of the Go struct, which cannot be reproduced outside Go;
//! klab hashes the template's normalized JSON instead. Same algorithm and alphabet, so names have
//! the same shape and stability (equal templates ⇒ equal names), not the same values.

use k8s_openapi::api::core::v1::PodTemplateSpec;

use crate::replicaset::util::normalized_template;

/// `k8s.io/apimachinery/pkg/util/rand` alphabet (no vowels, no confusable characters).
const ALPHANUMS: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// FNV-1a, 32 bits.
pub fn fnv32a(data: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in data {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// FNV-1 (not 1a), 32 bits: what upstream's `HashControllerRevision` uses (`fnv.New32`).
pub fn fnv32(data: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in data {
        h = h.wrapping_mul(0x0100_0193);
        h ^= u32::from(*b);
    }
    h
}

/// Upstream `history.HashControllerRevision`: FNV-1 of the revision's raw data, then the
/// collision count as decimal text (the controller always passes a count, so `0` is hashed too).
pub fn controller_revision_hash(data: &[u8], collision_count: i32) -> String {
    let mut buf = data.to_vec();
    buf.extend_from_slice(collision_count.to_string().as_bytes());
    safe_encode_string(&fnv32(&buf).to_string())
}

/// JSON with object keys sorted at every level and no whitespace — what Go's `json.Marshal` of a
/// `map[string]interface{}` produces (the form of ControllerRevision data).
pub fn canonical_json(v: &serde_json::Value) -> Vec<u8> {
    fn sorted(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut out = serde_json::Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&m[k]));
                }
                serde_json::Value::Object(out)
            }
            serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_vec(&sorted(v)).unwrap_or_default()
}

/// Upstream `rand.SafeEncodeString`: each byte mapped onto the alphabet.
pub fn safe_encode_string(s: &str) -> String {
    s.bytes()
        .map(|b| ALPHANUMS[usize::from(b) % 27] as char)
        .collect()
}

/// Upstream `controller.ComputeHash`: hash of the template, then (when set) the collision count as
/// 8 bytes (uint32 little endian, zero padded), printed in decimal and safe-encoded.
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let json = serde_json::to_vec(&normalized_template(template)).unwrap_or_default();
    hash_bytes(&json, collision_count)
}

/// The same over arbitrary bytes (ControllerRevision data).
pub fn hash_bytes(data: &[u8], collision_count: Option<i32>) -> String {
    let mut buf = data.to_vec();
    if let Some(c) = collision_count {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&(c as u32).to_le_bytes());
        buf.extend_from_slice(&b);
    }
    safe_encode_string(&fnv32a(&buf).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn fnv_reference_values() {
        // Published FNV-1a 32 test vectors.
        assert_eq!(fnv32a(b""), 0x811c9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c292c);
        assert_eq!(fnv32a(b"foobar"), 0xbf9cf968);
    }

    #[test]
    fn fnv1_reference_values_and_revision_hash() {
        // Published FNV-1 32 test vectors.
        assert_eq!(fnv32(b""), 0x811c9dc5);
        assert_eq!(fnv32(b"a"), 0x050c5d7e);
        assert_eq!(fnv32(b"foobar"), 0x31f0b262);
        assert_ne!(
            controller_revision_hash(b"{}", 0),
            controller_revision_hash(b"{}", 1)
        );
        let v = serde_json::json!({"b": 1, "a": {"d": [1, {"z": 0, "y": 1}], "c": null}});
        assert_eq!(
            canonical_json(&v),
            br#"{"a":{"c":null,"d":[1,{"y":1,"z":0}]},"b":1}"#.to_vec()
        );
    }

    #[test]
    fn safe_encoding_matches_upstream_alphabet() {
        // '0' is byte 48 → 48 % 27 = 21 → '4'; '9' is 57 → 3 → 'f'.
        assert_eq!(safe_encode_string("0"), "4");
        assert_eq!(safe_encode_string("9"), "f");
        assert_eq!(safe_encode_string("1234567890"), "56789bcdf4");
    }

    #[test]
    fn hash_is_stable_and_collision_count_changes_it() {
        let t = |app: &str| PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".into(), app.into())].into()),
                ..Default::default()
            }),
            spec: None,
        };
        let a = compute_hash(&t("web"), None);
        assert_eq!(a, compute_hash(&t("web"), None));
        assert_ne!(a, compute_hash(&t("db"), None));
        assert_ne!(a, compute_hash(&t("web"), Some(1)));
        assert!(a.len() <= 10 && a.bytes().all(|b| ALPHANUMS.contains(&b)));
        // nil vs empty maps hash the same (semantic equality)
        let mut e = t("web");
        e.metadata.as_mut().unwrap().annotations = Some(Default::default());
        assert_eq!(a, compute_hash(&e, None));
    }
}
