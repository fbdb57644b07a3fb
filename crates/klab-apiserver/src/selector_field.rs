//! Field selectors: parsing `a=b,c!=d` and the fields each kind supports (api-surface §b.8).
//!
//! Follows upstream `k8s.io/apimachinery/pkg/fields` (term splitting, `\` escapes, `!=`/`==`/`=`
//! operators, no whitespace trimming) and, per kind, the field-label conversion functions
//! (`pkg/apis/core/v1/conversion.go`, `pkg/apis/batch/v1/conversion.go`,
//! `pkg/apis/events/v1/conversion.go`, the default `metadata.name`/`metadata.namespace` one) for which labels are accepted and with which 400
//! message, plus each registry's `ToSelectableFields` for the value a field has in an object
//! (missing = `""`, booleans `"true"`/`"false"`, Job `status.successful` = `status.succeeded`).

use std::fmt;

use serde_json::Value;

use crate::object::Pointer;
use crate::registry::ResourceInfo;

/// `=`/`==` (match) or `!=` (does not match).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOp {
    Equals,
    NotEquals,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    pub op: FieldOp,
    /// Unescaped value.
    pub value: String,
}

impl FieldTerm {
    /// The field the term reads, its legacy alias resolved (`spec.host`, kept for old v1
    /// clients).
    fn resolved(&self, ri: &ResourceInfo) -> &str {
        if ri.group.is_empty() && ri.kind == "Pod" && self.field == "spec.host" {
            "spec.nodeName"
        } else {
            &self.field
        }
    }

    /// Whether a field with value `have` satisfies the term.
    fn holds(&self, have: &str) -> bool {
        match self.op {
            FieldOp::Equals => have == self.value,
            FieldOp::NotEquals => have != self.value,
        }
    }
}

/// An AND of field terms, sorted as upstream sorts the raw terms before parsing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

/// How a kind's field labels are checked: the accepted labels and the error text upstream's
/// conversion function gives for any other.
struct KindFields {
    labels: &'static [&'static str],
    error: fn(&str) -> String,
}

fn err_not_supported(f: &str) -> String {
    format!("field label not supported: {f}")
}
fn err_job(f: &str) -> String {
    format!("field label {f:?} not supported for Job")
}
fn err_default(f: &str) -> String {
    format!("{f:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"")
}

const POD_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
    "spec.host",
];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
    "metadata.namespace",
    "metadata.name",
];

/// events.k8s.io/v1's labels: the core ones under that API's field names (`regarding.*`,
/// `reportingController`), which upstream maps onto the core selectable fields.
const EVENTS_V1_FIELDS: &[&str] = &[
    "reason",
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reportingController",
    "source",
    "type",
    "metadata.namespace",
    "metadata.name",
];

fn kind_fields(ri: &ResourceInfo) -> KindFields {
    let (labels, error): (&'static [&'static str], fn(&str) -> String) = match (ri.group, ri.kind) {
        ("", "Pod") => (POD_FIELDS, err_not_supported),
        ("", "Node") => (&["metadata.name", "spec.unschedulable"], err_not_supported),
        ("", "Event") => (EVENT_FIELDS, err_not_supported),
        ("events.k8s.io", "Event") => (EVENTS_V1_FIELDS, err_not_supported),
        ("", "Namespace") => (&["status.phase", "metadata.name"], err_not_supported),
        ("", "Secret") => (
            &["type", "metadata.namespace", "metadata.name"],
            err_not_supported,
        ),
        ("", "Service") => (
            &[
                "metadata.namespace",
                "metadata.name",
                "spec.clusterIP",
                "spec.type",
            ],
            err_not_supported,
        ),
        ("", "ReplicationController") => (
            &["metadata.name", "metadata.namespace", "status.replicas"],
            err_not_supported,
        ),
        ("batch", "Job") => (
            &["metadata.name", "metadata.namespace", "status.successful"],
            err_job,
        ),
        _ => (&["metadata.name", "metadata.namespace"], err_default),
    };
    KindFields { labels, error }
}

/// The string at a JSON path; numbers and booleans rendered as Go's `strconv` would.
fn str_at(obj: &Value, path: &[&str]) -> String {
    let mut cur = obj;
    for p in path {
        match cur.get(p) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

fn bool_at(obj: &Value, path: &[&str]) -> String {
    let mut cur = obj;
    for p in path {
        match cur.get(p) {
            Some(v) => cur = v,
            None => return "false".into(),
        }
    }
    cur.as_bool().unwrap_or(false).to_string()
}

/// Where the value of a (supported, alias-resolved) field comes from, as upstream's
/// `ToSelectableFields` would compute it.
enum Source<'f> {
    /// Always `""`: a cluster-scoped kind's namespace.
    Empty,
    /// The scalar at this JSON path (`str_at`): most fields.
    Path(Vec<&'f str>),
    /// Computed from several places of the object.
    Computed(fn(&Value) -> String),
}

fn source<'f>(ri: &ResourceInfo, field: &'f str) -> Source<'f> {
    match (ri.group, ri.kind, field) {
        // Cluster-scoped kinds have no namespace field in their set: always "".
        (_, _, "metadata.namespace") if !ri.namespaced => Source::Empty,
        (_, _, "metadata.name" | "metadata.namespace") => Source::Path(field.split('.').collect()),
        ("", "Pod", "spec.hostNetwork") => {
            Source::Computed(|obj| bool_at(obj, &["spec", "hostNetwork"]))
        }
        ("", "Pod", "status.podIP") => Source::Computed(|obj| {
            // Upstream uses podIPs[0]; fall back to the singular field older writers set.
            let first = obj.at("/status/podIPs/0/ip").and_then(Value::as_str);
            first
                .map(str::to_string)
                .unwrap_or_else(|| str_at(obj, &["status", "podIP"]))
        }),
        // Accepted by the conversion function but absent from the selectable set upstream.
        ("", "Pod", "status.podIPs") => Source::Empty,
        ("", "Node", "spec.unschedulable") => {
            Source::Computed(|obj| bool_at(obj, &["spec", "unschedulable"]))
        }
        ("", "Event", "source") => Source::Computed(|obj| {
            let c = str_at(obj, &["source", "component"]);
            if c.is_empty() {
                str_at(obj, &["reportingComponent"])
            } else {
                c
            }
        }),
        // The same field on the events.k8s.io form of the object (matched as served).
        ("events.k8s.io", "Event", "source") => Source::Computed(|obj| {
            let c = str_at(obj, &["deprecatedSource", "component"]);
            if c.is_empty() {
                str_at(obj, &["reportingController"])
            } else {
                c
            }
        }),
        ("batch", "Job", "status.successful") => Source::Computed(|obj| {
            obj.at("/status/succeeded")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                .to_string()
        }),
        _ => Source::Path(field.split('.').collect()),
    }
}

/// The value of a (supported, alias-resolved) field in an object.
fn field_value(ri: &ResourceInfo, obj: &Value, field: &str) -> String {
    match source(ri, field) {
        Source::Empty => String::new(),
        Source::Path(path) => str_at(obj, &path),
        Source::Computed(f) => f(obj),
    }
}

/// The value of a field in a stored document, read from its bytes without decoding them, when
/// that is the value [`field_value`] gives for its decoding as a read presents it: `None` for a
/// computed field, one a read sets (`apiVersion`, `kind`, `metadata.resourceVersion`) and a
/// value that is not a string or `null` (which `str_at` renders).
fn stored_field_value(ri: &ResourceInfo, doc: &[u8], field: &str) -> Option<String> {
    match source(ri, field) {
        Source::Empty => Some(String::new()),
        Source::Path(path) => match path.as_slice() {
            ["apiVersion" | "kind", ..] | ["metadata", "resourceVersion", ..] => None,
            path => crate::json_field::string_at(doc, path)
                .ok()
                .map(Option::unwrap_or_default),
        },
        Source::Computed(_) => None,
    }
}

/// Splits on commas not preceded by a backslash escape (upstream `splitTerms`).
fn split_terms(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            cur.push(c);
            in_slash = false;
        } else if c == '\\' {
            cur.push(c);
            in_slash = true;
        } else if c == ',' {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

/// Finds the first operator (`!=`, `==`, `=`, checked in that order at each position) not inside
/// an escape (upstream `splitTerm`).
fn split_term(term: &str) -> Option<(String, FieldOp, String)> {
    let mut in_slash = false;
    // char_indices, not bytes: slicing must stay on UTF-8 boundaries (input is untrusted).
    for (i, c) in term.char_indices() {
        if in_slash {
            in_slash = false;
            continue;
        }
        if c == '\\' {
            in_slash = true;
            continue;
        }
        let rest = &term[i..];
        for (op, fo) in [
            ("!=", FieldOp::NotEquals),
            ("==", FieldOp::Equals),
            ("=", FieldOp::Equals),
        ] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((term[..i].to_string(), fo, value.to_string()));
            }
        }
    }
    None
}

fn unescape_value(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                other => {
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: \\{other}"
                    ));
                }
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // Go prints the rune with %v, i.e. as its code point number.
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                ));
            }
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(out)
}

fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl FieldSelector {
    pub fn everything() -> Self {
        FieldSelector::default()
    }

    /// Parses the query-string form (upstream `fields.ParseSelector`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = split_terms(s);
        parts.sort();
        let mut terms = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((field, op, rhs)) = split_term(&part) else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            terms.push(FieldTerm {
                field,
                op,
                value: unescape_value(&rhs)?,
            });
        }
        Ok(FieldSelector { terms })
    }

    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    pub fn is_everything(&self) -> bool {
        self.terms.is_empty()
    }

    /// 400 BadRequest text when a term names a field the kind does not support.
    pub fn check_supported(&self, ri: &ResourceInfo) -> Result<(), String> {
        let kf = kind_fields(ri);
        for t in &self.terms {
            if !kf.labels.contains(&t.field.as_str()) {
                return Err((kf.error)(&t.field));
            }
        }
        Ok(())
    }

    /// Whether `obj` (a stored object of kind `ri`) satisfies every term. Fields the kind does
    /// not support compare as `""` (callers reject them first with `check_supported`).
    pub fn matches(&self, ri: &ResourceInfo, obj: &Value) -> bool {
        self.terms
            .iter()
            .all(|t| t.holds(&field_value(ri, obj, t.resolved(ri))))
    }

    /// [`Self::matches`] of a stored document of a kind stored as it is served, decided from its
    /// bytes without decoding them (a watch matching a change's previous object): `None` when a
    /// term's field cannot be read that way.
    pub fn matches_stored(&self, ri: &ResourceInfo, doc: &[u8]) -> Option<bool> {
        for t in &self.terms {
            if !t.holds(&stored_field_value(ri, doc, t.resolved(ri))?) {
                return Some(false);
            }
        }
        Some(true)
    }

    /// `Some(name)` when the selector pins `metadata.name` to one value (upstream
    /// `RequiresExactMatch("metadata.name")`), e.g. the watch kubectl opens for one object.
    pub fn single_name(&self) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.field == "metadata.name" && t.op == FieldOp::Equals)
            .map(|t| t.value.as_str())
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = if t.op == FieldOp::Equals { "=" } else { "!=" };
            write!(f, "{}{op}{}", t.field, escape_value(&t.value))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{lookup, lookup_kind};
    use serde_json::json;

    fn ri(api_version: &str, kind: &str) -> &'static ResourceInfo {
        lookup_kind(api_version, kind).unwrap()
    }

    #[test]
    fn parse_table() {
        // (input, Display after parse) — terms are sorted, `==` prints as `=`.
        let cases = [
            ("", ""),
            ("metadata.name=web", "metadata.name=web"),
            ("spec.nodeName==n1", "spec.nodeName=n1"),
            (
                "status.phase!=Running,spec.nodeName=n1",
                "spec.nodeName=n1,status.phase!=Running",
            ),
            ("metadata.name=a\\,b", "metadata.name=a\\,b"),
            ("spec.nodeName=", "spec.nodeName="),
            (",metadata.name=x,", "metadata.name=x"),
        ];
        for (input, want) in cases {
            let s = FieldSelector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(s.to_string(), want, "{input:?}");
        }
        let s = FieldSelector::parse("metadata.name=a\\,b").unwrap();
        assert_eq!(s.terms()[0].value, "a,b");
        // No trimming: the space belongs to the field name, as upstream.
        assert_eq!(
            FieldSelector::parse("spec.nodeName =x").unwrap().terms()[0].field,
            "spec.nodeName "
        );
        assert!(FieldSelector::parse("").unwrap().is_everything());
        let s = FieldSelector::parse("metadata.name=ä-ö").unwrap();
        assert_eq!(
            (s.terms()[0].field.as_str(), s.terms()[0].value.as_str()),
            ("metadata.name", "ä-ö")
        );
    }

    #[test]
    fn parse_errors() {
        let cases = [
            ("foo", "invalid selector: 'foo'; can't understand 'foo'"),
            // Multi-byte characters must not split (no panic on untrusted input).
            ("ä=ö,ü", "invalid selector: 'ä=ö,ü'; can't understand 'ü'"),
            ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
            (
                "a=b\\x",
                "invalid field selector: invalid escape sequence: \\x",
            ),
            (
                "a=b=c",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "a=b\\",
                "invalid field selector: invalid escape sequence: \\",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(FieldSelector::parse(input).unwrap_err(), want, "{input:?}");
        }
    }

    #[test]
    fn supported_fields_and_messages() {
        let pods = ri("v1", "Pod");
        let deploy = ri("apps/v1", "Deployment");
        let job = ri("batch/v1", "Job");
        let cases: Vec<(&ResourceInfo, &str, Result<(), String>)> = vec![
            (pods, "spec.nodeName=n1,status.phase=Running", Ok(())),
            (pods, "spec.host=n1", Ok(())),
            (pods, "spec.foo=bar", Err("field label not supported: spec.foo".into())),
            (ri("v1", "Node"), "spec.unschedulable=true", Ok(())),
            (ri("v1", "Node"), "metadata.namespace=x", Err("field label not supported: metadata.namespace".into())),
            (ri("v1", "Event"), "involvedObject.name=n1,involvedObject.kind=Node,source=kubelet", Ok(())),
            (ri("v1", "Event"), "message=x", Err("field label not supported: message".into())),
            (
                ri("events.k8s.io/v1", "Event"),
                "reason=Scheduled,regarding.kind=Pod,regarding.name=a,reportingController=default-scheduler,source=kubelet,type=Normal",
                Ok(()),
            ),
            (ri("events.k8s.io/v1", "Event"), "note=x", Err("field label not supported: note".into())),
            (
                ri("events.k8s.io/v1", "Event"),
                "involvedObject.kind=Pod",
                Err("field label not supported: involvedObject.kind".into()),
            ),
            (ri("v1", "Namespace"), "status.phase=Active", Ok(())),
            (ri("v1", "Namespace"), "metadata.namespace=x", Err("field label not supported: metadata.namespace".into())),
            (job, "status.successful=1", Ok(())),
            (job, "spec.x=1", Err("field label \"spec.x\" not supported for Job".into())),
            (deploy, "metadata.name=a,metadata.namespace=b", Ok(())),
            (
                deploy,
                "spec.replicas=1",
                Err("\"spec.replicas\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"".into()),
            ),
            (ri("v1", "Secret"), "type=Opaque", Ok(())),
            (ri("v1", "Service"), "spec.type=ClusterIP", Ok(())),
            (ri("v1", "ConfigMap"), "data.x=1", Err(err_default("data.x"))),
        ];
        for (ri, sel, want) in cases {
            let s = FieldSelector::parse(sel).unwrap();
            assert_eq!(s.check_supported(ri), want, "{} {sel}", ri.kind);
        }
    }

    #[test]
    fn matching_table() {
        let pods = ri("v1", "Pod");
        let pod = json!({
            "metadata": {"name": "web-1", "namespace": "default"},
            "spec": {"nodeName": "n1", "restartPolicy": "Always"},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}], "podIP": "10.0.0.5"}
        });
        let pending = json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {}});
        // (selector, matches pod, matches pending)
        let cases = [
            ("", true, true),
            ("spec.nodeName=n1", true, false),
            ("spec.host=n1", true, false),
            ("spec.nodeName=", false, true),
            ("spec.nodeName!=", true, false),
            ("status.phase!=Succeeded,status.phase!=Failed", true, true),
            ("status.podIP=10.0.0.5", true, false),
            ("spec.hostNetwork=false", true, true),
            ("spec.hostNetwork=true", false, false),
            (
                "metadata.namespace=default,metadata.name=web-1",
                true,
                false,
            ),
            ("status.nominatedNodeName=", true, true),
        ];
        for (sel, want_pod, want_pending) in cases {
            let s = FieldSelector::parse(sel).unwrap();
            assert_eq!(s.matches(pods, &pod), want_pod, "{sel} on pod");
            assert_eq!(s.matches(pods, &pending), want_pending, "{sel} on pending");
        }

        let nodes = lookup("", "v1", "nodes").unwrap();
        let cordoned = json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": true}});
        let plain = json!({"metadata": {"name": "n2"}});
        let s = FieldSelector::parse("spec.unschedulable=true").unwrap();
        assert!(s.matches(nodes, &cordoned) && !s.matches(nodes, &plain));
        let s = FieldSelector::parse("spec.unschedulable=false").unwrap();
        assert!(!s.matches(nodes, &cordoned) && s.matches(nodes, &plain));

        // `kubectl describe node` event query; `source` falls back to reportingComponent.
        let events = ri("v1", "Event");
        let ev = json!({
            "metadata": {"name": "n1.1", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": "n1", "uid": "n1"},
            "source": {"component": "kubelet"}, "type": "Normal", "reason": "Starting"
        });
        let ev2 = json!({"metadata": {"name": "e2", "namespace": "default"}, "reportingComponent": "node-controller"});
        let s = FieldSelector::parse("involvedObject.kind=Node,involvedObject.uid=n1,involvedObject.name=n1,involvedObject.namespace=")
            .unwrap();
        assert!(s.matches(events, &ev) && !s.matches(events, &ev2));
        assert!(
            FieldSelector::parse("source=kubelet")
                .unwrap()
                .matches(events, &ev)
        );
        assert!(
            FieldSelector::parse("source=node-controller")
                .unwrap()
                .matches(events, &ev2)
        );

        // The same on the events.k8s.io form: `regarding`, `reportingController`,
        // `deprecatedSource`.
        let events_v1 = ri("events.k8s.io/v1", "Event");
        let scheduled = json!({
            "metadata": {"name": "a.1", "namespace": "default"},
            "regarding": {"kind": "Pod", "name": "a", "namespace": "default", "uid": "u1"},
            "reason": "Scheduled", "type": "Normal", "reportingController": "default-scheduler"
        });
        let kubelet = json!({
            "metadata": {"name": "n1.1", "namespace": "default"},
            "regarding": {"kind": "Node", "name": "n1"},
            "deprecatedSource": {"component": "kubelet"}, "reason": "Starting", "type": "Normal"
        });
        for (sel, want_scheduled, want_kubelet) in [
            ("reason=Scheduled", true, false),
            (
                "regarding.kind=Pod,regarding.name=a,regarding.uid=u1",
                true,
                false,
            ),
            ("regarding.kind=Node,regarding.namespace=", false, true),
            ("reportingController=default-scheduler", true, false),
            ("source=default-scheduler", true, false),
            ("source=kubelet", false, true),
            ("type=Normal,metadata.namespace=default", true, true),
            ("type!=Normal", false, false),
        ] {
            let s = FieldSelector::parse(sel).unwrap();
            assert_eq!(s.matches(events_v1, &scheduled), want_scheduled, "{sel}");
            assert_eq!(s.matches(events_v1, &kubelet), want_kubelet, "{sel}");
        }

        let job = ri("batch/v1", "Job");
        let s = FieldSelector::parse("status.successful=0").unwrap();
        assert!(s.matches(job, &json!({"metadata": {"name": "j"}})));
        assert!(!s.matches(
            job,
            &json!({"metadata": {"name": "j"}, "status": {"succeeded": 2}})
        ));
        assert!(
            FieldSelector::parse("status.successful=2")
                .unwrap()
                .matches(job, &json!({"status": {"succeeded": 2}}))
        );

        // Cluster-scoped: metadata.namespace is always "".
        let ns = ri("v1", "Namespace");
        assert!(
            FieldSelector::parse("status.phase=Active")
                .unwrap()
                .matches(ns, &json!({"status": {"phase": "Active"}}))
        );
    }

    /// A selector decided from a stored document's bytes says what it says of the document
    /// decoded, and decides every plain field of string or `null` values (the kubelets'
    /// `spec.nodeName`); computed fields and values of other types are left to the decoding.
    #[test]
    fn a_selector_decided_from_stored_bytes_agrees_with_the_decoded_document() {
        let pods = ri("v1", "Pod");
        let ns = ri("v1", "Namespace");
        // (document, whether the fields the plain selectors read hold strings or nulls)
        let docs = [
            (
                json!({"metadata": {"name": "web-1", "namespace": "default"},
                       "spec": {"nodeName": "n1", "restartPolicy": "Always", "hostNetwork": true},
                       "status": {"phase": "Running", "podIP": "10.0.0.5"}}),
                true,
            ),
            (
                json!({"metadata": {"name": "p\"q\\", "namespace": "caf\u{e9}"},
                       "spec": {"nodeName": null}, "status": null}),
                true,
            ),
            (json!({}), true),
            (
                json!({"metadata": {"name": "x"}, "spec": {"nodeName": 5}, "status": {"phase": ["a"]}}),
                false,
            ),
            (json!({"metadata": {"name": "x"}, "spec": "n1"}), false),
            (
                json!({"metadata": {"name": "x"}, "spec": {"nodeName": {"a": 1}}}),
                false,
            ),
        ];
        // (selector, whether it reads plain fields only)
        let selectors = [
            ("spec.nodeName=n1", true),
            ("spec.host=n1", true),
            ("spec.nodeName=", true),
            ("spec.nodeName!=n1,status.phase=Running", true),
            ("status.phase!=Succeeded,status.phase!=Failed", true),
            ("metadata.name=p\"q\\\\,metadata.namespace=caf\u{e9}", true),
            ("status.podIP=10.0.0.5", false),
            ("spec.hostNetwork=true", false),
        ];
        let mut decided = 0;
        for (doc, plain_values) in &docs {
            let bytes = serde_json::to_vec(doc).unwrap();
            let presented = crate::crud::present(pods, doc.clone(), 7);
            for (sel, plain) in selectors {
                let s = FieldSelector::parse(sel).unwrap();
                let got = s.matches_stored(pods, &bytes);
                if let Some(m) = got {
                    assert_eq!(m, s.matches(pods, &presented), "{sel} on {doc}");
                    decided += 1;
                }
                if plain && *plain_values {
                    assert!(got.is_some(), "{sel} on {doc} is decided from the bytes");
                }
                if !plain {
                    assert_eq!(got, None, "{sel} is computed");
                }
            }
        }
        assert!(decided > 20, "{decided}");
        // A cluster-scoped kind's namespace is "" without reading anything.
        let s = FieldSelector::parse("metadata.namespace=").unwrap();
        assert_eq!(s.matches_stored(ns, b"{}"), Some(true));
    }

    proptest::proptest! {
        /// The same over generated documents: any value in the fields the selectors read.
        #[test]
        fn stored_and_decoded_matching_agree(
            node in value_strategy(),
            phase in value_strategy(),
            name in "[a-z\"\\\\\u{e9}]{0,4}",
            sel_node in "[a-z1]{0,2}",
            negate in proptest::bool::ANY,
        ) {
            let pods = ri("v1", "Pod");
            let mut doc = json!({"metadata": {"name": name, "namespace": "d"}});
            if let Some(n) = node { doc["spec"] = json!({"nodeName": n}); }
            if let Some(p) = phase { doc["status"] = json!({"phase": p}); }
            let bytes = serde_json::to_vec(&doc).unwrap();
            let presented = crate::crud::present(pods, doc.clone(), 3);
            let op = if negate { "!=" } else { "=" };
            for sel in [
                format!("spec.nodeName{op}{sel_node}"),
                format!("status.phase{op}{sel_node},spec.nodeName!=n1"),
                format!("metadata.name{op}{sel_node}"),
            ] {
                let s = FieldSelector::parse(&sel).unwrap();
                if let Some(m) = s.matches_stored(pods, &bytes) {
                    proptest::prop_assert_eq!(m, s.matches(pods, &presented), "{} on {}", sel, doc);
                }
            }
        }
    }

    /// A field's value: absent, or null, a string, a number, a boolean or an object.
    fn value_strategy() -> impl proptest::strategy::Strategy<Value = Option<Value>> {
        use proptest::prelude::*;
        prop_oneof![
            Just(None),
            Just(Some(Value::Null)),
            "[a-z1]{0,2}".prop_map(|s| Some(json!(s))),
            any::<i32>().prop_map(|n| Some(json!(n))),
            any::<bool>().prop_map(|b| Some(json!(b))),
            Just(Some(json!({"n1": "n1"}))),
        ]
    }

    #[test]
    fn single_name() {
        assert_eq!(
            FieldSelector::parse("metadata.name=web")
                .unwrap()
                .single_name(),
            Some("web")
        );
        assert_eq!(
            FieldSelector::parse("metadata.name==web,spec.nodeName=n1")
                .unwrap()
                .single_name(),
            Some("web")
        );
        assert_eq!(
            FieldSelector::parse("metadata.name!=web")
                .unwrap()
                .single_name(),
            None
        );
        assert_eq!(FieldSelector::parse("").unwrap().single_name(), None);
    }
}
