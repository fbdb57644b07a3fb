//! Reads one string field of a stored JSON document (a pod's `spec.nodeName`) by skipping over
//! everything else, without building or validating the rest.
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
        }
    }
}
