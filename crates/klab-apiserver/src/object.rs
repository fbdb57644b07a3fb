//! Small helpers over objects held as `serde_json::Value`: metadata access, resourceVersion
//! injection, and the "same object?" comparison behind no-op detection.

use serde_json::{Map, Value, json};

/// `Value::pointer` without its two string copies per path segment: a pointer written in the
/// code has no escapes to undo (one that has falls back to `Value::pointer`). The same answers;
/// every request reads a few dozen of them.
pub trait Pointer {
    fn at(&self, pointer: &str) -> Option<&Value>;
    fn at_mut(&mut self, pointer: &str) -> Option<&mut Value>;
}

/// A JSON pointer's array index: decimal, no sign, no leading zero (as `Value::pointer`).
fn pointer_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

/// A pointer's segments when it has nothing to unescape; `None` leaves the pointer (escaped,
/// empty or not starting with `/`) to `Value::pointer`.
fn plain_segments(pointer: &str) -> Option<std::str::Split<'_, char>> {
    if pointer.contains('~') {
        return None;
    }
    pointer.strip_prefix('/').map(|rest| rest.split('/'))
}

impl Pointer for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        let Some(mut segments) = plain_segments(pointer) else {
            return self.pointer(pointer);
        };
        segments.try_fold(self, |target, token| match target {
            Value::Object(m) => m.get(token),
            Value::Array(a) => pointer_index(token).and_then(|i| a.get(i)),
            _ => None,
        })
    }

    fn at_mut(&mut self, pointer: &str) -> Option<&mut Value> {
        let Some(mut segments) = plain_segments(pointer) else {
            return self.pointer_mut(pointer);
        };
        segments.try_fold(self, |target, token| match target {
            Value::Object(m) => m.get_mut(token),
            Value::Array(a) => pointer_index(token).and_then(|i| a.get_mut(i)),
            _ => None,
        })
    }
}

/// A JSON object of these fields, moved in. (`json!` would copy each non-literal value through
/// `serde_json::to_value`, which for a list's items or a Table's rows is a deep copy of the whole
/// response.)
pub fn fields<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// `metadata` as a mutable map, created if missing or not an object.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or("")
}

pub fn namespace(obj: &Value) -> Option<&str> {
    meta_str(obj, "namespace").filter(|s| !s.is_empty())
}

pub fn uid(obj: &Value) -> &str {
    meta_str(obj, "uid").unwrap_or("")
}

pub fn resource_version(obj: &Value) -> Option<&str> {
    meta_str(obj, "resourceVersion").filter(|s| !s.is_empty())
}

pub fn deletion_timestamp(obj: &Value) -> Option<&str> {
    meta_str(obj, "deletionTimestamp")
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub fn set_resource_version(obj: &mut Value, rv: u64) {
    // Always the last field of metadata, where a stored document read back has it
    // (`json_field::presented`): every answer about one revision is then the same bytes, so a
    // write's response and the watch event of that write decode once in a client process.
    let meta = meta_mut(obj);
    meta.shift_remove("resourceVersion");
    meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
}

/// Drops fields that are never stored: the resourceVersion lives in the store's mod revision.
pub fn strip_for_storage(obj: &mut Value) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("selfLink");
    }
}

/// An object serialized as `strip_for_storage` of a copy of it would be, without the copy:
/// `metadata` without `resourceVersion` and `selfLink`, each removed as `Map::remove` removes
/// (with `preserve_order`, the map's last field takes the removed one's place).
pub struct Unversioned<'a>(pub &'a Value);

impl serde::Serialize for Unversioned<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        /// A metadata map without the fields never stored.
        struct Meta<'a>(&'a Map<String, Value>);
        impl serde::Serialize for Meta<'_> {
            fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
                let mut fields: Vec<(&String, &Value)> = self.0.iter().collect();
                for key in ["resourceVersion", "selfLink"] {
                    if let Some(i) = fields.iter().position(|(k, _)| *k == key) {
                        fields.swap_remove(i);
                    }
                }
                let mut m = ser.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
        let Value::Object(top) = self.0 else {
            return self.0.serialize(ser);
        };
        let mut m = ser.serialize_map(Some(top.len()))?;
        for (k, v) in top {
            match v {
                Value::Object(meta) if k == "metadata" => m.serialize_entry(k, &Meta(meta))?,
                _ => m.serialize_entry(k, v)?,
            }
        }
        m.end()
    }
}

/// Decodes a stored value and stamps the revision it was read at as its resourceVersion.
pub fn decode_stored(bytes: &[u8], rv: u64) -> Result<Value, serde_json::Error> {
    let mut v: Value = serde_json::from_slice(bytes)?;
    set_resource_version(&mut v, rv);
    Ok(v)
}

/// Compares two objects ignoring their resourceVersion and selfLink (no-op write detection):
/// equal as `strip_for_storage` would leave them, without copying either (every update asks).
pub fn same_ignoring_rv(a: &Value, b: &Value) -> bool {
    const NOT_STORED: &[&str] = &["resourceVersion", "selfLink"];
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            same_fields_except(a, b, &[], |k, va, vb| match (k, va, vb) {
                ("metadata", Value::Object(ma), Value::Object(mb)) => {
                    same_fields_except(ma, mb, NOT_STORED, |_, x, y| x == y)
                }
                _ => va == vb,
            })
        }
        _ => a == b,
    }
}

/// Two maps have the same keys outside `skip`, and `same` holds for each such key's values.
fn same_fields_except(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    skip: &[&str],
    same: impl Fn(&str, &Value, &Value) -> bool,
) -> bool {
    let kept = |m: &Map<String, Value>| m.keys().filter(|k| !skip.contains(&k.as_str())).count();
    kept(a) == kept(b)
        && a.iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .all(|(k, va)| b.get(k).is_some_and(|vb| same(k, va, vb)))
}

/// Sets `kind` and `apiVersion` (objects are always returned with both).
pub fn set_type_meta(obj: &mut Value, api_version: &str, kind: &str) {
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(api_version.into()));
        m.insert("kind".into(), Value::String(kind.into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `at` and `at_mut` answer what `pointer` and `pointer_mut` do, for every kind of pointer.
    #[test]
    fn at_is_pointer() {
        let mut v = json!({"metadata": {"name": "p", "labels": {"a/b": "1", "c~d": "2", "": "3"}},
            "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]},
            "": {"x": 1}, "n": null, "s": "str"});
        let pointers = [
            "",
            "/",
            "/metadata",
            "/metadata/name",
            "/metadata/name/x",
            "/metadata/labels/a~1b",
            "/metadata/labels/c~0d",
            "/metadata/labels/",
            "/metadata/labels/a/b",
            "//x",
            "/spec/containers/0/name",
            "/spec/containers/00/name",
            "/spec/containers/+0/name",
            "/spec/containers/1",
            "/spec/containers/-1",
            "/spec/containers/0/ports/0/containerPort",
            "/spec/containers/x",
            "metadata",
            "/n",
            "/n/x",
            "/s/0",
            "/missing",
            "/spec/containers/18446744073709551616",
        ];
        for p in pointers {
            assert_eq!(v.at(p), v.pointer(p), "{p:?}");
            let want = v.pointer(p).cloned();
            assert_eq!(v.at_mut(p).map(|x| x.clone()), want, "{p:?} mut");
        }
        *v.at_mut("/spec/containers/0/name").expect("present") = json!("d");
        assert_eq!(v.pointer("/spec/containers/0/name"), Some(&json!("d")));
    }

    /// `Unversioned` writes what `strip_for_storage` of a copy does.
    #[test]
    fn unversioned_is_the_stripped_copy_encoded() {
        let cases = [
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": "u",
                "resourceVersion": "7"}, "spec": {"containers": []}}),
            json!({"metadata": {"resourceVersion": "7", "name": "p", "uid": "u", "x": 1}}),
            json!({"metadata": {"a": 1, "selfLink": "/s", "b": 2, "resourceVersion": "7",
                "c": 3, "d": 4}}),
            json!({"metadata": {"selfLink": "/s", "resourceVersion": "7"}}),
            json!({"metadata": {"resourceVersion": "7", "a": 1, "selfLink": "/s"}}),
            json!({"metadata": {"name": "p", "labels": {"resourceVersion": "x"}}, "status": {}}),
            json!({"metadata": {"resourceVersion": "1"}}),
            json!({"metadata": {}}),
            json!({"metadata": 5, "b": [1, {"resourceVersion": "2"}]}),
            json!({"kind": "X"}),
            json!([1, 2]),
            json!("s"),
        ];
        for obj in cases {
            let mut copy = obj.clone();
            strip_for_storage(&mut copy);
            assert_eq!(
                serde_json::to_vec(&Unversioned(&obj)).unwrap(),
                serde_json::to_vec(&copy).unwrap(),
                "{obj}"
            );
        }
    }

    /// `same_ignoring_rv` agrees with comparing the two objects as they would be stored.
    #[test]
    fn same_ignoring_rv_is_equality_after_strip_for_storage() {
        let base = json!({"kind": "Pod", "metadata": {"name": "a", "resourceVersion": "5", "labels": {"x": "1"}}, "spec": {"n": 1}});
        let cases = [
            (
                json!({"kind": "Pod", "metadata": {"name": "a", "resourceVersion": "9", "labels": {"x": "1"}}, "spec": {"n": 1}}),
                true,
            ),
            (
                json!({"kind": "Pod", "metadata": {"labels": {"x": "1"}, "name": "a"}, "spec": {"n": 1}}),
                true,
            ),
            (
                json!({"kind": "Pod", "metadata": {"name": "a", "selfLink": "/x", "labels": {"x": "1"}}, "spec": {"n": 1}}),
                true,
            ),
            (
                json!({"kind": "Pod", "metadata": {"name": "a", "resourceVersion": "5", "labels": {"x": "2"}}, "spec": {"n": 1}}),
                false,
            ),
            (
                json!({"kind": "Pod", "metadata": {"name": "a", "resourceVersion": "5", "labels": {"x": "1"}, "uid": "u"}, "spec": {"n": 1}}),
                false,
            ),
            (
                json!({"kind": "Pod", "metadata": {"name": "a", "labels": {"x": "1"}}}),
                false,
            ),
            (
                json!({"kind": "Pod", "metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"n": 1}, "status": {}}),
                false,
            ),
            (
                json!({"kind": "Pod", "metadata": null, "spec": {"n": 1}}),
                false,
            ),
            (
                json!({"kind": "Pod", "metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"n": 2}}),
                false,
            ),
            (json!("Pod"), false),
        ];
        for (other, want) in cases {
            let stored = |v: &Value| {
                let mut v = v.clone();
                strip_for_storage(&mut v);
                v
            };
            assert_eq!(stored(&base) == stored(&other), want, "{other}");
            assert_eq!(same_ignoring_rv(&base, &other), want, "{other}");
            assert_eq!(same_ignoring_rv(&other, &base), want, "{other}");
        }
        assert!(same_ignoring_rv(&json!(null), &json!(null)));
        assert!(same_ignoring_rv(
            &json!({"metadata": 1}),
            &json!({"metadata": 1})
        ));
    }
}
