//! Reads one string field of a stored JSON document (a pod's `spec.nodeName`) by skipping over
//! everything else, without building or validating the rest; writes a stored document, or its
//! `metadata`, as a read returns it (its resourceVersion added) the same way; and decodes a
//! stored document without some of its paths (what a Table's printer never reads).
//!
//! The store's index of pods by node and the watch triggers read this field from every pod
//! write. serde's derive skips the other fields too, but validates each of them as it goes:
//! about 27 µs for a 4 KiB pod, against a few µs here. Stored documents are compact JSON written
//! by serde_json, so both give the same answer for them (a test checks it); for bytes that are
//! not JSON this answers `None` or whatever the path's bytes say, never panics.

use klab_api::shape::{Shape, Shaped};
use serde::de::{Deserialize, DeserializeSeed};
use serde_json::Value;

/// The string at `path` (object keys from the top), `Ok(None)` when a key on the way is absent
/// or a value on the way is `null`; `Err(())` when the bytes are not a JSON object or the value is
/// not a string.
pub(crate) fn string_at(doc: &[u8], path: &[&str]) -> Result<Option<String>, ()> {
    let mut s = Scanner { b: doc, i: 0 };
    let mut path = path.iter();
    let Some(mut want) = path.next() else {
        return Err(());
    };
    s.ws();
    let mut top = true;
    loop {
        // `null` on the way reads as absent; the document itself must be an object.
        if !top && s.peek() == Some(b'n') {
            return s.literal(b"null").map(|()| None);
        }
        top = false;
        s.expect(b'{')?;
        let mut found = false;
        s.ws();
        if s.peek() == Some(b'}') {
            return Ok(None);
        }
        loop {
            s.ws();
            let key = s.string_raw()?;
            s.ws();
            s.expect(b':')?;
            s.ws();
            if key == want.as_bytes() {
                found = true;
                break;
            }
            s.skip_value(0)?;
            s.ws();
            match s.next() {
                Some(b',') => continue,
                Some(b'}') => break,
                _ => return Err(()),
            }
        }
        if !found {
            return Ok(None);
        }
        match path.next() {
            Some(next) => want = next,
            None => {
                return match s.peek() {
                    Some(b'"') => {
                        let raw = s.string_span()?;
                        serde_json::from_slice::<String>(raw)
                            .map(Some)
                            .map_err(|_| ())
                    }
                    Some(b'n') => s.literal(b"null").map(|()| None),
                    _ => Err(()),
                };
            }
        }
    }
}

/// A stored document as a read presents it (`crud::present` of its decoding, encoded): the same
/// bytes with `"resourceVersion":"<rv>"` added as the last field of `metadata`, found by skipping
/// over everything else. `None` when that would not be the same document: the top level is not an
/// object whose `apiVersion` and `kind` are exactly `api_version` and `kind`, or `metadata` is not
/// an object, or it has a `resourceVersion` already (the store never keeps one).
///
/// Stored documents are compact serde_json output (no whitespace, no duplicate keys, every string
/// escaped as serde_json escapes it), which decoding and encoding again would give back byte for
/// byte with serde_json's `preserve_order`: replacing `apiVersion` and `kind` by themselves keeps
/// their place, and a new `resourceVersion` goes last. A test checks this against the decoding.
pub(crate) fn presented(doc: &[u8], api_version: &str, kind: &str, rv: u64) -> Option<Vec<u8>> {
    let (_, close, empty) = metadata_end(doc, Some((api_version, kind)))?;
    let (head, tail) = doc.split_at(close);
    let mut out = Vec::with_capacity(doc.len().saturating_add(42));
    out.extend_from_slice(head);
    push_resource_version(&mut out, rv, empty);
    out.extend_from_slice(tail);
    Some(out)
}

/// The `metadata` of a stored document as a read presents it (the `metadata` of `presented`'s
/// document): its bytes with `"resourceVersion":"<rv>"` added last. `None` when the document is
/// not an object, has no `metadata` object, or its `metadata` has a `resourceVersion` already.
/// A Table row's `PartialObjectMetadata` is written from it without decoding the metadata.
pub(crate) fn metadata_presented(doc: &[u8], rv: u64) -> Option<Vec<u8>> {
    let (start, close, empty) = metadata_end(doc, None)?;
    let head = doc.get(start..close)?;
    let mut out = Vec::with_capacity(head.len().saturating_add(43));
    out.extend_from_slice(head);
    push_resource_version(&mut out, rv, empty);
    out.push(b'}');
    Some(out)
}

/// Appends `"resourceVersion":"<rv>"` as the last field of an object whose closing brace comes
/// next (`empty`: the object has no field yet).
fn push_resource_version(out: &mut Vec<u8>, rv: u64, empty: bool) {
    if !empty {
        out.push(b',');
    }
    out.extend_from_slice(b"\"resourceVersion\":\"");
    out.extend_from_slice(rv.to_string().as_bytes());
    out.push(b'"');
}

/// The offsets of the top-level `metadata` object's opening and closing braces in a whole,
/// compact stored document, and whether that object is empty; `None` unless the document is one object with
/// such a `metadata` holding no `resourceVersion`, and, when `type_meta` is given, with exactly
/// that `apiVersion` and `kind`.
fn metadata_end(doc: &[u8], type_meta: Option<(&str, &str)>) -> Option<(usize, usize, bool)> {
    let mut s = Scanner { b: doc, i: 0 };
    s.expect(b'{').ok()?;
    let (mut api_ok, mut kind_ok) = (false, false);
    let mut meta_close = None;
    if s.peek() == Some(b'}') {
        return None;
    }
    loop {
        let key = s.string_raw().ok()?;
        s.expect(b':').ok()?;
        let start = s.i;
        match (key, type_meta) {
            (b"apiVersion" | b"kind", Some((api_version, kind))) => {
                let raw = s.string_raw().ok()?;
                let want = if key == b"kind" { kind } else { api_version };
                if raw != want.as_bytes() {
                    return None;
                }
                if key == b"kind" {
                    kind_ok = true;
                } else {
                    api_ok = true;
                }
            }
            (b"metadata", _) => {
                s.expect(b'{').ok()?;
                if s.peek() != Some(b'}') {
                    loop {
                        if s.string_raw().ok()? == b"resourceVersion" {
                            return None;
                        }
                        s.expect(b':').ok()?;
                        s.skip_value(1).ok()?;
                        match s.next()? {
                            b',' => continue,
                            b'}' => break,
                            _ => return None,
                        }
                    }
                    s.i = s.i.checked_sub(1)?;
                }
                // At metadata's closing brace; `start + 1` is just past its opening one.
                meta_close = Some((start, s.i, s.i == start.saturating_add(1)));
                s.expect(b'}').ok()?;
            }
            _ => s.skip_value(0).ok()?,
        }
        match s.next()? {
            b',' => continue,
            b'}' => break,
            _ => return None,
        }
    }
    if s.i != doc.len() || (type_meta.is_some() && !(api_ok && kind_ok)) {
        return None;
    }
    meta_close
}

/// A stored document decoded as `serde_json::from_slice` decodes it, except that the values at
/// `skip`'s paths (object keys from the top) are left out: the parser steps over them without
/// building them. A Table row reads a few fields of an object; a pod's or a node's
/// `managedFields` alone can be a third of its bytes, and building the values of a list page
/// and dropping them again was most of the time of `kubectl get` at scale.
pub(crate) fn decode_without(doc: &[u8], skip: &[&[&str]]) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_slice(doc);
    let v = if skip.is_empty() {
        Value::deserialize(&mut de)?
    } else {
        Shaped(Without {
            skip: skip.to_vec(),
        })
        .deserialize(&mut de)?
    };
    de.end()?;
    Ok(v)
}

/// A value with the paths in `skip` (relative to it) left out. Paths go through objects only:
/// an array is decoded whole.
struct Without<'a> {
    skip: Vec<&'a [&'a str]>,
}

impl Shape for Without<'_> {
    fn field(&self, key: &str) -> Option<Option<Self>> {
        let below: Vec<&[&str]> = self
            .skip
            .iter()
            .filter_map(|p| match p.split_first() {
                Some((first, rest)) if *first == key => Some(rest),
                _ => None,
            })
            .collect();
        if below.iter().any(|rest| rest.is_empty()) {
            None
        } else if below.is_empty() {
            Some(None)
        } else {
            Some(Some(Without { skip: below }))
        }
    }

    fn element(&self) -> Option<Self> {
        None
    }
}

/// Values nested deeper than this are refused rather than followed (no input may exhaust the
/// stack; the API server's own documents are far shallower).
const MAX_DEPTH: usize = 512;

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), ()> {
        (self.next() == Some(c)).then_some(()).ok_or(())
    }

    fn literal(&mut self, lit: &[u8]) -> Result<(), ()> {
        let end = self.i.checked_add(lit.len()).ok_or(())?;
        if self.b.get(self.i..end) == Some(lit) {
            self.i = end;
            Ok(())
        } else {
            Err(())
        }
    }

    /// A string with its quotes; the scanner moves past it.
    fn string_span(&mut self) -> Result<&'a [u8], ()> {
        let start = self.i;
        self.expect(b'"')?;
        loop {
            let rest = self.b.get(self.i..).ok_or(())?;
            let at = memchr::memchr2(b'"', b'\\', rest).ok_or(())?;
            self.i += at;
            match self.next() {
                Some(b'"') => {
                    let b: &'a [u8] = self.b;
                    return b.get(start..self.i).ok_or(());
                }
                // An escape: whatever follows the backslash is part of the string.
                _ => {
                    self.next().ok_or(())?;
                }
            }
        }
    }

    /// A string's raw bytes between its quotes (escapes left as they are: keys compared with it
    /// are plain ASCII, and an escaped key simply does not compare equal).
    fn string_raw(&mut self) -> Result<&'a [u8], ()> {
        let span = self.string_span()?;
        span.get(1..span.len().saturating_sub(1)).ok_or(())
    }

    fn skip_value(&mut self, depth: usize) -> Result<(), ()> {
        if depth > MAX_DEPTH {
            return Err(());
        }
        match self.peek().ok_or(())? {
            b'"' => self.string_span().map(|_| ()),
            open @ (b'{' | b'[') => {
                let close = if open == b'{' { b'}' } else { b']' };
                self.i += 1;
                self.ws();
                if self.peek() == Some(close) {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.ws();
                    if open == b'{' {
                        self.string_span()?;
                        self.ws();
                        self.expect(b':')?;
                        self.ws();
                    }
                    self.skip_value(depth + 1)?;
                    self.ws();
                    match self.next() {
                        Some(b',') => continue,
                        Some(c) if c == close => return Ok(()),
                        _ => return Err(()),
                    }
                }
            }
            _ => {
                // A number, true, false or null: up to the next delimiter.
                let start = self.i;
                while let Some(c) = self.peek() {
                    if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    self.i += 1;
                }
                (self.i > start).then_some(()).ok_or(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// What serde's derive reads for the same path (the definition this must agree with).
    fn by_serde(doc: &[u8]) -> Result<Option<String>, ()> {
        #[derive(serde::Deserialize)]
        struct Pod {
            spec: Option<Spec>,
        }
        #[derive(serde::Deserialize)]
        struct Spec {
            #[serde(rename = "nodeName")]
            node_name: Option<String>,
        }
        let pod: Pod = serde_json::from_slice(doc).map_err(|_| ())?;
        Ok(pod.spec.and_then(|s| s.node_name))
    }

    const PATH: &[&str] = &["spec", "nodeName"];

    #[test]
    fn reads_the_field_as_serde_does() {
        let docs = [
            json!({"metadata": {"name": "p", "annotations": {"nodeName": "decoy"}},
                "spec": {"containers": [{"name": "c", "args": ["}", "\"nodeName\":\"x\""]}],
                    "nodeName": "n1", "tolerations": []}, "status": {"phase": "Running"}}),
            json!({"spec": {"nodeName": "with \"quotes\" and \\ and \u{e9}"}}),
            json!({"spec": {"nodeName": null}}),
            json!({"spec": {"containers": []}}),
            json!({"spec": null}),
            json!({"metadata": {"nodeName": "n1"}}),
            json!({}),
            json!({"spec": {"a": {"b": [1, 2.5e3, -3, true, false, null, {"c": {}}]}, "nodeName": ""}}),
        ];
        for doc in docs {
            for bytes in [
                serde_json::to_vec(&doc).unwrap(),
                serde_json::to_vec_pretty(&doc).unwrap(),
            ] {
                assert_eq!(
                    string_at(&bytes, PATH),
                    by_serde(&bytes),
                    "{}",
                    String::from_utf8_lossy(&bytes)
                );
            }
        }
    }

    /// `decode_without` is `serde_json::from_slice` with the skipped paths removed afterwards,
    /// key order and duplicate keys included.
    #[test]
    fn decode_without_is_the_decoding_with_the_paths_removed() {
        let docs = [
            r#"{"metadata":{"name":"p","managedFields":[{"a":1}],"labels":{"x":"y"}},"status":{"images":[1],"phase":"Running"}}"#,
            r#"{"metadata":{"managedFields":{"deep":{"er":[{}]}}},"spec":{"metadata":{"managedFields":1}}}"#,
            r#"{"metadata":null,"status":[1,2,{"images":3}]}"#,
            r#"{"metadata":{"name":"a","managedFields":1,"name":"b","managedFields":2},"x":1.5e300,"y":-3,"z":18446744073709551615}"#,
            r#"{}"#,
            r#" { "metadata" : { "managedFields" : [ ] , "uid" : "\u00e9\n" } } "#,
            r#"[1,2]"#,
            r#""s""#,
        ];
        let skip: &[&[&str]] = &[&["metadata", "managedFields"], &["status", "images"]];
        for doc in docs {
            let mut want: Value = serde_json::from_slice(doc.as_bytes()).unwrap();
            for path in skip {
                let parent = want.pointer_mut(&format!("/{}", path[0]));
                if let Some(Value::Object(m)) = parent {
                    m.shift_remove(path[1]);
                }
            }
            let got = decode_without(doc.as_bytes(), skip).unwrap();
            assert_eq!(
                serde_json::to_string(&got).unwrap(),
                serde_json::to_string(&want).unwrap(),
                "{doc}"
            );
            assert_eq!(
                decode_without(doc.as_bytes(), &[]).unwrap(),
                serde_json::from_slice::<Value>(doc.as_bytes()).unwrap()
            );
        }
        for bad in [
            &b"{\"metadata\":{\"managedFields\":[}"[..],
            b"{} x",
            b"",
            b"{\"a\":",
        ] {
            assert!(decode_without(bad, skip).is_err(), "{bad:?}");
        }
    }

    /// `metadata_presented` is the `metadata` of `presented`'s document.
    #[test]
    fn metadata_presented_is_the_presented_documents_metadata() {
        let docs = [
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"}"}},"spec":{}}"#,
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{},"spec":{}}"#,
            r#"{"spec":{"metadata":{"x":1}},"metadata":{"name":"late"},"apiVersion":"v1","kind":"Pod"}"#,
        ];
        for doc in docs {
            let whole = presented(doc.as_bytes(), "v1", "Pod", 42).unwrap();
            let whole: Value = serde_json::from_slice(&whole).unwrap();
            let meta = metadata_presented(doc.as_bytes(), 42).unwrap();
            assert_eq!(
                String::from_utf8(meta).unwrap(),
                serde_json::to_string(&whole["metadata"]).unwrap(),
                "{doc}"
            );
        }
        for doc in [
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","resourceVersion":"3"}}"#,
            r#"{"apiVersion":"v1","kind":"Pod","spec":{}}"#,
            r#"{"metadata":null}"#,
            r#"{"metadata":{"name":"p"}} "#,
            r#"{"metadata":{"name":"p"}"#,
            r#"[]"#,
        ] {
            assert_eq!(metadata_presented(doc.as_bytes(), 42), None, "{doc}");
        }
    }

    #[test]
    fn presented_adds_the_resource_version_last_in_metadata() {
        let cases: &[(&str, Option<&str>)] = &[
            (
                r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}}"#,
                Some(
                    r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","resourceVersion":"42"},"spec":{}}"#,
                ),
            ),
            (
                r#"{"metadata":{},"kind":"Pod","apiVersion":"v1"}"#,
                Some(r#"{"metadata":{"resourceVersion":"42"},"kind":"Pod","apiVersion":"v1"}"#),
            ),
            (
                r#"{"kind":"Pod","apiVersion":"v1","metadata":{"annotations":{"resourceVersion":"x","a":"}"}}}"#,
                Some(
                    r#"{"kind":"Pod","apiVersion":"v1","metadata":{"annotations":{"resourceVersion":"x","a":"}"},"resourceVersion":"42"}}"#,
                ),
            ),
            // Not as the store keeps documents, or not of this resource: decoded instead.
            (
                r#"{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"1"}}"#,
                None,
            ),
            (r#"{"apiVersion":"v1","kind":"Node","metadata":{}}"#, None),
            (
                r#"{"apiVersion":"apps/v1","kind":"Pod","metadata":{}}"#,
                None,
            ),
            (r#"{"kind":"Pod","metadata":{}}"#, None),
            (r#"{"apiVersion":"v1","kind":"Pod"}"#, None),
            (r#"{"apiVersion":"v1","kind":"Pod","metadata":null}"#, None),
            (r#"{"apiVersion":"v1","kind":"Pod","metadata":{} }"#, None),
            (r#"{"apiVersion":"v1","kind":"Pod","metadata":{}}x"#, None),
            (r#"{"apiVersion":"v1","kind":"Pod","metadata":{"#, None),
            (r#"{}"#, None),
            (r#"[]"#, None),
        ];
        for (doc, want) in cases {
            let got = presented(doc.as_bytes(), "v1", "Pod", 42);
            assert_eq!(
                got.as_deref().map(|b| std::str::from_utf8(b).unwrap()),
                *want,
                "{doc}"
            );
        }
    }

    #[test]
    fn bad_bytes_are_refused_without_panicking() {
        let deep = "[".repeat(100_000);
        let deep_spec = format!(r#"{{"spec":{{"x":{deep}"#);
        for bad in [
            "",
            "[]",
            "\"spec\"",
            "{",
            r#"{"spec""#,
            r#"{"spec":"#,
            r#"{"spec":{"nodeName":"#,
            r#"{"spec":{"nodeName":"n1"#,
            r#"{"spec":{"nodeName":5}}"#,
            r#"{"spec":{"nodeName":"\"#,
            r#"{"spec":[1,2]}"#,
            deep_spec.as_str(),
        ] {
            assert_eq!(string_at(bad.as_bytes(), PATH), Err(()), "{bad}");
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z\"\\\\{}\\[\\]:, ]{0,8}".prop_map(Value::String),
            prop_oneof![Just("nodeName"), Just("spec")].prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(
                    (
                        prop_oneof![
                            Just("spec".to_string()),
                            Just("nodeName".to_string()),
                            "[a-z\"]{0,4}"
                        ],
                        inner
                    ),
                    0..4
                )
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// On any JSON document serde_json writes, the scanner and serde agree.
        #[test]
        fn agrees_with_serde_on_any_document(doc in arb_json()) {
            // Stored pods are objects whose `spec` is an object (serde's derive would also read
            // a struct from an array, which no stored pod has).
            prop_assume!(doc.is_object());
            prop_assume!(doc.get("spec").is_none_or(|s| s.is_object() || s.is_null()));
            let bytes = serde_json::to_vec(&doc).unwrap();
            prop_assert_eq!(string_at(&bytes, PATH), by_serde(&bytes));
        }

        /// Pod-shaped documents: the field among others, before and after, any value in it.
        #[test]
        fn agrees_with_serde_on_pod_shaped_documents(
            before in prop::collection::vec(("[a-z]{1,6}", arb_json()), 0..3),
            name in prop_oneof![
                "[a-z0-9.\"\\\\-]{0,12}".prop_map(Value::String),
                arb_json(),
            ],
            after in prop::collection::vec(("[a-z]{1,6}", arb_json()), 0..3),
            metadata in arb_json(),
        ) {
            let mut spec = serde_json::Map::new();
            spec.extend(before.into_iter().filter(|(k, _)| k != "nodeName"));
            spec.insert("nodeName".into(), name.clone());
            spec.extend(after.into_iter().filter(|(k, _)| k != "nodeName"));
            let doc = json!({"metadata": metadata, "spec": spec});
            let bytes = serde_json::to_vec(&doc).unwrap();
            let got = string_at(&bytes, PATH);
            prop_assert_eq!(&got, &by_serde(&bytes));
            if let Value::String(n) = name {
                prop_assert_eq!(got, Ok(Some(n)));
            }
        }

        /// Any bytes at all: no panic.
        #[test]
        fn never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = string_at(&bytes, PATH);
            let _ = presented(&bytes, "v1", "Pod", 7);
        }

        /// A stored document presented without decoding is the decoded one encoded, and every
        /// document the store can hold for the resource (its type, an object as metadata with no
        /// resourceVersion) is presented so.
        #[test]
        fn presented_is_the_decoded_document_encoded(
            fields in prop::collection::vec((
                prop_oneof![
                    Just("apiVersion".to_string()),
                    Just("kind".to_string()),
                    Just("metadata".to_string()),
                    "[a-z\"\\\\\u{e9}\u{1}]{0,5}",
                ],
                arb_json(),
            ), 0..6),
            api in prop_oneof![Just("v1"), Just("apps/v1")],
            meta in prop::collection::vec((
                prop_oneof![Just("name".to_string()), Just("resourceVersion".to_string()), "[a-z\u{e9}\n]{0,4}"],
                arb_json(),
            ), 0..4),
            typed in any::<bool>(),
            rv in any::<u64>(),
        ) {
            let mut doc = serde_json::Map::new();
            if typed {
                doc.insert("apiVersion".into(), json!("v1"));
            }
            for (k, v) in fields {
                doc.insert(k, v);
            }
            if typed {
                doc.insert("kind".into(), json!("Pod"));
                doc.insert("metadata".into(), Value::Object(meta.into_iter().collect()));
            }
            let doc = Value::Object(doc);
            let bytes = serde_json::to_vec(&doc).unwrap();
            let mut want = doc.clone();
            crate::object::set_resource_version(&mut want, rv);
            crate::object::set_type_meta(&mut want, api, "Pod");
            crate::object::set_resource_version(&mut want, rv);
            let storable = doc.get("apiVersion") == Some(&json!(api))
                && doc.get("kind") == Some(&json!("Pod"))
                && doc["metadata"].as_object().is_some_and(|m| !m.contains_key("resourceVersion"));
            match presented(&bytes, api, "Pod", rv) {
                Some(got) => {
                    prop_assert!(storable);
                    prop_assert_eq!(
                        String::from_utf8(got).unwrap(),
                        String::from_utf8(serde_json::to_vec(&want).unwrap()).unwrap()
                    );
                }
                None => prop_assert!(!storable, "{}", String::from_utf8_lossy(&bytes)),
            }
        }
    }
}
