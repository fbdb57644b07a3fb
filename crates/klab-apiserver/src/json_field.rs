//! Reads one string field of a stored JSON document (a pod's `spec.nodeName`) by skipping over
//! everything else, without building or validating the rest; and writes a stored document as
//! a read returns it (its resourceVersion added) the same way.
//!
//! The store's index of pods by node and the watch triggers read this field from every pod
//! write. serde's derive skips the other fields too, but validates each of them as it goes:
//! about 27 µs for a 4 KiB pod, against a few µs here. Stored documents are compact JSON written
//! by serde_json, so both give the same answer for them (a test checks it); for bytes that are
//! not JSON this answers `None` or whatever the path's bytes say, never panics.

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
        match key {
            b"apiVersion" | b"kind" => {
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
            b"metadata" => {
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
                meta_close = Some((s.i, s.i == start.saturating_add(1)));
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
    if s.i != doc.len() || !api_ok || !kind_ok {
        return None;
    }
    let (close, empty) = meta_close?;
    let (head, tail) = doc.split_at(close);
    let rv = rv.to_string();
    let mut out = Vec::with_capacity(doc.len().saturating_add(rv.len()).saturating_add(22));
    out.extend_from_slice(head);
    if !empty {
        out.push(b',');
    }
    out.extend_from_slice(b"\"resourceVersion\":\"");
    out.extend_from_slice(rv.as_bytes());
    out.push(b'"');
    out.extend_from_slice(tail);
    Some(out)
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
