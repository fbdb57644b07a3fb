//! Validation of names and required fields for the served kinds (422 Invalid with causes).
//!
//! Mirrors the parts of upstream `pkg/apis/*/validation` and apimachinery's
//! `ValidateObjectMeta` that matter for the kinds klab serves, with upstream's field paths and
//! `field.Error` texts, because kubectl prints them verbatim (`The Pod "x" is invalid: ...`).
//! Objects are checked as JSON *after* defaulting (as upstream validates defaulted objects), so a
//! container without a name — which k8s-openapi would happily deserialize — is refused here with a
//! cause. Known simplifications: bad values that are Go structs upstream (printed with `%#v`) are
//! printed as compact JSON here, except string maps (labels, selectors' matchLabels), which use
//! Go's `map[string]string{...}` form; the pod-update `Forbidden` message carries a short list of
//! changed fields instead of upstream's `cmp.Diff` output.

use std::collections::{BTreeMap, BTreeSet};

use klab_api::selector::{
    is_dns1123_label, is_dns1123_subdomain, is_qualified_name, is_valid_label_value, regex_error,
};
use serde_json::{Map, Value};

use crate::object::Pointer;
use crate::registry::ResourceInfo;

/// Upstream `field.ErrorType` (the subset klab emits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    Required,
    Invalid,
    NotSupported,
    Duplicate,
    Forbidden,
    TooLong,
    TooMany,
    NotFound,
}

/// One validation failure (upstream `field.Error`).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub kind: FieldErrorKind,
    /// Dotted path with indices and map keys, e.g. `spec.containers[0].name`.
    pub field: String,
    pub bad_value: Option<Value>,
    pub detail: String,
}

impl FieldError {
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            kind: FieldErrorKind::Required,
            field: field.into(),
            bad_value: None,
            detail: detail.into(),
        }
    }
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        FieldError {
            kind: FieldErrorKind::Invalid,
            field: field.into(),
            bad_value: Some(value),
            detail: detail.into(),
        }
    }
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            kind: FieldErrorKind::Forbidden,
            field: field.into(),
            bad_value: None,
            detail: detail.into(),
        }
    }
    pub fn duplicate(field: impl Into<String>, value: Value) -> Self {
        FieldError {
            kind: FieldErrorKind::Duplicate,
            field: field.into(),
            bad_value: Some(value),
            detail: String::new(),
        }
    }
    pub fn not_found(field: impl Into<String>, value: Value) -> Self {
        FieldError {
            kind: FieldErrorKind::NotFound,
            field: field.into(),
            bad_value: Some(value),
            detail: String::new(),
        }
    }
    /// Upstream `field.NotSupported`: the detail lists the quoted valid values.
    pub fn not_supported(field: impl Into<String>, value: Value, valid: &[&str]) -> Self {
        let detail = if valid.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = valid.iter().map(|v| format!("{v:?}")).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        FieldError {
            kind: FieldErrorKind::NotSupported,
            field: field.into(),
            bad_value: Some(value),
            detail,
        }
    }
    /// Upstream `field.TooMany`.
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        FieldError {
            kind: FieldErrorKind::TooMany,
            field: field.into(),
            bad_value: Some(Value::from(actual)),
            detail: format!("must have at most {max} items"),
        }
    }

    /// Upstream `field.TooLong` (value not printed).
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        FieldError {
            kind: FieldErrorKind::TooLong,
            field: field.into(),
            bad_value: None,
            detail: format!("may not be more than {max} bytes"),
        }
    }

    /// The `StatusCause.reason` (upstream `CauseType`).
    pub fn reason(&self) -> &'static str {
        match self.kind {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
            FieldErrorKind::NotFound => "FieldValueNotFound",
        }
    }

    fn type_string(&self) -> &'static str {
        match self.kind {
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Invalid => "Invalid value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::Duplicate => "Duplicate value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
            FieldErrorKind::NotFound => "Not found",
        }
    }

    /// Upstream `field.Error.ErrorBody()`: the `StatusCause.message` (no field prefix).
    pub fn body(&self) -> String {
        let mut s = match self.kind {
            FieldErrorKind::Required | FieldErrorKind::Forbidden | FieldErrorKind::TooLong => {
                self.type_string().to_string()
            }
            _ => format!(
                "{}: {}",
                self.type_string(),
                render_bad_value(&self.field, self.bad_value.as_ref())
            ),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// Upstream `field.Error.Error()`: `<field>: <body>`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }
}

/// Renders a bad value as Go's `ErrorBody` would: strings `%q`, numbers and bools plain, `null`,
/// `map[string]string` fields (labels, matchLabels, …) as `map[string]string{"k":"v"}` (sorted
/// keys, as Go prints maps), other composites as compact JSON (upstream prints Go structs with
/// `%#v`, which has no JSON equivalent).
fn render_bad_value(field: &str, v: Option<&Value>) -> String {
    // Fields whose Go type is `map[string]string`.
    let string_map = ["labels", "matchLabels", "nodeSelector", "annotations"]
        .iter()
        .any(|suffix| field.rsplit('.').next() == Some(suffix));
    match v {
        None | Some(Value::Null) => "null".to_string(),
        Some(Value::String(s)) => format!("{s:?}"),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Object(m)) if string_map && m.values().all(Value::is_string) => {
            let sorted: BTreeMap<&String, &str> = m
                .iter()
                .map(|(k, v)| (k, v.as_str().unwrap_or("")))
                .collect();
            let items: Vec<String> = sorted.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect();
            format!("map[string]string{{{}}}", items.join(", "))
        }
        Some(Value::Object(m)) if m.len() == 1 && m.get(GO_VALUE).is_some_and(Value::is_string) => {
            m.get(GO_VALUE)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        }
        Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_string) => {
            let items: Vec<String> = a
                .iter()
                .map(|v| format!("{:?}", v.as_str().unwrap_or("")))
                .collect();
            format!("[]string{{{}}}", items.join(", "))
        }
        Some(other) => other.to_string(),
    }
}

/// The 422 message (upstream `errors.NewInvalid`): `Pod "x" is invalid: <err>` for one
/// distinct error, `... is invalid: [<e1>, <e2>]` for several (duplicates collapsed).
pub fn invalid_message(ri: &ResourceInfo, name: &str, errs: &[FieldError]) -> String {
    let head = format!("{} {:?} is invalid", ri.qualified_kind(), name);
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        let m = e.message();
        if !seen.contains(&m) {
            seen.push(m);
        }
    }
    match seen.len() {
        0 => head,
        1 => format!("{head}: {}", seen[0]),
        _ => format!("{head}: [{}]", seen.join(", ")),
    }
}

/// The `details.causes` entries for a 422 (`reason`, `message` = body, `field`).
pub fn causes(errs: &[FieldError]) -> Vec<Value> {
    errs.iter()
        .map(|e| serde_json::json!({"reason": e.reason(), "message": e.body(), "field": e.field}))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Small JSON helpers
// ---------------------------------------------------------------------------------------------

fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}
fn s_or_empty<'a>(v: &'a Value, key: &str) -> &'a str {
    s(v, key).unwrap_or("")
}
fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}
fn jstr(x: &str) -> Value {
    Value::String(x.to_string())
}

type Errs = Vec<FieldError>;

fn non_negative(errs: &mut Errs, obj: &Value, key: &str, path: &str) {
    if let Some(n) = obj.get(key).and_then(Value::as_i64)
        && n < 0
    {
        errs.push(FieldError::invalid(
            format!("{path}.{key}"),
            n.into(),
            "must be greater than or equal to 0",
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// ObjectMeta
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum NameRule {
    Subdomain,
    Label,
    /// DNS-1035 label (Services).
    Dns1035,
    /// Only the path-segment rule (`ValidateRBACName`: `system:node` is a valid role name).
    PathSegment,
}

fn name_rule(ri: &ResourceInfo) -> NameRule {
    match (ri.group, ri.kind) {
        ("", "Namespace") => NameRule::Label,
        ("", "Service") => NameRule::Dns1035,
        (crate::rbac::GROUP, _) => NameRule::PathSegment,
        _ => NameRule::Subdomain,
    }
}

fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(klab_api::selector::max_len_error(63));
    }
    let b = value.as_bytes();
    let ok = !b.is_empty()
        && b[0].is_ascii_lowercase()
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
    if !ok {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// Upstream `NameIs…` with `prefix` for generateName: a trailing `-` is allowed then.
fn check_name(rule: NameRule, name: &str, prefix: bool) -> Vec<String> {
    let n = if prefix {
        name.strip_suffix('-').unwrap_or(name)
    } else {
        name
    };
    match rule {
        NameRule::Subdomain => is_dns1123_subdomain(n),
        NameRule::Label => is_dns1123_label(n),
        NameRule::Dns1035 => is_dns1035_label(n),
        // Checked by `path_segment_errors` for every kind.
        NameRule::PathSegment => Vec::new(),
    }
}

/// Upstream path-segment name checks (`path.IsValidPathSegmentName`), applied to every name.
fn path_segment_errors(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    let mut errs = Vec::new();
    for bad in ["/", "%"] {
        if name.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

/// Labels (keys and values) at `path` (upstream `ValidateLabels`).
pub fn validate_labels(labels: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(m) = labels.and_then(Value::as_object) else {
        return errs;
    };
    for (k, v) in m {
        for msg in is_qualified_name(k) {
            errs.push(FieldError::invalid(path, jstr(k), msg));
        }
        let val = v.as_str().unwrap_or("");
        for msg in is_valid_label_value(val) {
            errs.push(FieldError::invalid(path, jstr(val), msg));
        }
    }
    errs
}

const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

fn validate_annotations(annotations: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(m) = annotations.and_then(Value::as_object) else {
        return errs;
    };
    let mut total = 0;
    for (k, v) in m {
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, jstr(k), msg));
        }
        total += k.len() + v.as_str().map_or(0, str::len);
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

fn validate_finalizers(meta: &Value, errs: &mut Errs) {
    for (i, f) in arr(meta, "finalizers").iter().enumerate() {
        let path = format!("metadata.finalizers[{i}]");
        let name = f.as_str().unwrap_or("");
        let msgs = is_qualified_name(name);
        if !msgs.is_empty() {
            for msg in msgs {
                errs.push(FieldError::invalid(&path, jstr(name), msg));
            }
        } else if !name.contains('/')
            && !matches!(name, "kubernetes" | "orphan" | "foregroundDeletion")
        {
            errs.push(FieldError::invalid(
                &path,
                jstr(name),
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
}

fn validate_owner_references(meta: &Value, errs: &mut Errs) {
    let refs = arr(meta, "ownerReferences");
    let path = "metadata.ownerReferences";
    let mut controllers = Vec::new();
    for r in refs {
        let api_version = s_or_empty(r, "apiVersion");
        // The version is the part after `/` (or all of it for core).
        let version = api_version.rsplit('/').next().unwrap_or("");
        if version.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.apiVersion"),
                jstr(api_version),
                "version must not be empty",
            ));
        }
        for key in ["kind", "name", "uid"] {
            if s_or_empty(r, key).is_empty() {
                errs.push(FieldError::invalid(
                    format!("{path}.{key}"),
                    jstr(""),
                    "must not be empty",
                ));
            }
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            controllers.push(s_or_empty(r, "name").to_string());
        }
    }
    if controllers.len() > 1 {
        errs.push(FieldError::invalid(
            path,
            Value::Array(refs.to_vec()),
            format!(
                "Only one reference can have Controller set to true. Found \"true\" in references for {}",
                controllers.join(" and ")
            ),
        ));
    }
}

fn validate_object_meta(ri: &ResourceInfo, obj: &Value, errs: &mut Errs) {
    let empty = Value::Object(Map::new());
    let meta = obj.get("metadata").unwrap_or(&empty);
    let rule = name_rule(ri);
    let name = s_or_empty(meta, "name");
    let generate_name = s_or_empty(meta, "generateName");
    if !generate_name.is_empty() {
        for msg in check_name(rule, generate_name, true) {
            errs.push(FieldError::invalid(
                "metadata.generateName",
                jstr(generate_name),
                msg,
            ));
        }
    }
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for msg in check_name(rule, name, false) {
            errs.push(FieldError::invalid("metadata.name", jstr(name), msg));
        }
        for msg in path_segment_errors(name) {
            errs.push(FieldError::invalid("metadata.name", jstr(name), msg));
        }
    }
    let namespace = s_or_empty(meta, "namespace");
    if ri.namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for msg in is_dns1123_label(namespace) {
                errs.push(FieldError::invalid(
                    "metadata.namespace",
                    jstr(namespace),
                    msg,
                ));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    if let Some(g) = meta.get("generation").and_then(Value::as_i64)
        && g < 0
    {
        errs.push(FieldError::invalid(
            "metadata.generation",
            g.into(),
            "must be greater than or equal to 0",
        ));
    }
    errs.extend(validate_labels(meta.get("labels"), "metadata.labels"));
    errs.extend(validate_annotations(
        meta.get("annotations"),
        "metadata.annotations",
    ));
    validate_owner_references(meta, errs);
    validate_finalizers(meta, errs);
}

/// A `metadata` field that is set (not null).
fn meta_field<'a>(obj: &'a Value, key: &str) -> Option<&'a Value> {
    obj.get("metadata")
        .and_then(|m| m.get(key))
        .filter(|v| !v.is_null())
}

fn validate_object_meta_update(obj: &Value, old: &Value, errs: &mut Errs) {
    // Every update is checked: read in place, copied only into an error.
    for key in ["name", "namespace", "uid", "creationTimestamp"] {
        let new_v = meta_field(obj, key);
        let old_v = meta_field(old, key);
        // An absent uid/creationTimestamp in the request means "keep" (the server copies them).
        if matches!(key, "uid" | "creationTimestamp") && new_v.is_none() {
            continue;
        }
        if new_v != old_v {
            errs.push(FieldError::invalid(
                format!("metadata.{key}"),
                new_v.cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Selectors
// ---------------------------------------------------------------------------------------------

/// Upstream `ValidateLabelSelector` (matchLabels and matchExpressions).
fn validate_label_selector(sel: &Value, path: &str, errs: &mut Errs) {
    errs.extend(validate_labels(
        sel.get("matchLabels"),
        &format!("{path}.matchLabels"),
    ));
    for (i, e) in arr(sel, "matchExpressions").iter().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let op = s_or_empty(e, "operator");
        let values = arr(e, "values");
        match op {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        format!("{p}.values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        format!("{p}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            _ => errs.push(FieldError::invalid(
                format!("{p}.operator"),
                jstr(op),
                "not a valid selector operator",
            )),
        }
        let key = s_or_empty(e, "key");
        for msg in is_qualified_name(key) {
            errs.push(FieldError::invalid(format!("{p}.key"), jstr(key), msg));
        }
        for (j, v) in values.iter().enumerate() {
            let v = v.as_str().unwrap_or("");
            for msg in is_valid_label_value(v) {
                errs.push(FieldError::invalid(
                    format!("{p}.values[{j}]"),
                    jstr(v),
                    msg,
                ));
            }
        }
    }
}

fn selector_is_empty(sel: &Value) -> bool {
    sel.get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty)
        && arr(sel, "matchExpressions").is_empty()
}

/// Selector present, non-empty, valid, and matching the template's labels (the common part of
/// Deployment/ReplicaSet/StatefulSet/DaemonSet/Job validation).
fn validate_workload_selector(spec: &Value, empty_msg: &str, errs: &mut Errs) {
    let Some(sel) = spec.get("selector").filter(|v| !v.is_null()) else {
        errs.push(FieldError::required("spec.selector", ""));
        return;
    };
    if selector_is_empty(sel) {
        errs.push(FieldError::invalid("spec.selector", sel.clone(), empty_msg));
        return;
    }
    validate_label_selector(sel, "spec.selector", errs);
    let labels = spec.at("/template/metadata/labels");
    match klab_api::selector::LabelSelector::from_json(sel) {
        Ok(selector) => {
            if !selector.matches_json(labels) {
                errs.push(FieldError::invalid(
                    "spec.template.metadata.labels",
                    labels.cloned().unwrap_or(Value::Null),
                    "`selector` does not match template `labels`",
                ));
            }
        }
        Err(_) => errs.push(FieldError::invalid(
            "spec.selector",
            sel.clone(),
            "invalid label selector",
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Pod spec
// ---------------------------------------------------------------------------------------------

const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
const PULL_POLICIES: &[&str] = &["Always", "IfNotPresent", "Never"];
const DNS_POLICIES: &[&str] = &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"];
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn validate_taint_effect(effect: &str, allow_empty: bool, path: &str, errs: &mut Errs) {
    if effect.is_empty() {
        if !allow_empty {
            errs.push(FieldError::required(path, ""));
        }
        return;
    }
    if !TAINT_EFFECTS.contains(&effect) {
        errs.push(FieldError::not_supported(path, jstr(effect), TAINT_EFFECTS));
    }
}

/// Upstream `validateTolerations`.
fn validate_tolerations(tolerations: &[Value], path: &str, errs: &mut Errs) {
    for (i, t) in tolerations.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let key = s_or_empty(t, "key");
        let op = s_or_empty(t, "operator");
        let value = s_or_empty(t, "value");
        let effect = s_or_empty(t, "effect");
        if !key.is_empty() {
            for msg in is_qualified_name(key) {
                errs.push(FieldError::invalid(format!("{p}.key"), jstr(key), msg));
            }
        }
        if key.is_empty() && op != "Exists" {
            errs.push(FieldError::invalid(
                format!("{p}.operator"),
                jstr(op),
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t.get("tolerationSeconds").is_some_and(|v| !v.is_null()) && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                format!("{p}.effect"),
                jstr(effect),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match op {
            "Equal" | "" => {
                let msgs = is_valid_label_value(value);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{p}.operator"),
                        jstr(value),
                        msgs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{p}.operator"),
                        t.clone(),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(
                format!("{p}.operator"),
                jstr(other),
                &["Equal", "Exists"],
            )),
        }
        validate_taint_effect(effect, true, &format!("{p}.effect"), errs);
    }
}

/// Upstream `IsValidPortName` (an IANA_SVC_NAME).
fn port_name_errors(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(klab_api::selector::max_len_error(15));
    }
    if !port
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string(),
        );
    }
    if !port.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

fn validate_container(c: &Value, path: &str, volumes: &BTreeSet<String>, errs: &mut Errs) {
    let name = s_or_empty(c, "name");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    } else {
        for msg in is_dns1123_label(name) {
            errs.push(FieldError::invalid(format!("{path}.name"), jstr(name), msg));
        }
    }
    let image = s_or_empty(c, "image");
    if image.is_empty() {
        errs.push(FieldError::required(format!("{path}.image"), ""));
    } else if image.trim() != image {
        errs.push(FieldError::invalid(
            format!("{path}.image"),
            jstr(image),
            "must not have leading or trailing whitespace",
        ));
    }
    match s_or_empty(c, "imagePullPolicy") {
        "" => errs.push(FieldError::required(format!("{path}.imagePullPolicy"), "")),
        p if !PULL_POLICIES.contains(&p) => errs.push(FieldError::not_supported(
            format!("{path}.imagePullPolicy"),
            jstr(p),
            PULL_POLICIES,
        )),
        _ => {}
    }
    match s_or_empty(c, "terminationMessagePolicy") {
        "" => errs.push(FieldError::required(
            format!("{path}.terminationMessagePolicy"),
            "",
        )),
        p if !["File", "FallbackToLogsOnError"].contains(&p) => {
            errs.push(FieldError::not_supported(
                format!("{path}.terminationMessagePolicy"),
                jstr(p),
                &["File", "FallbackToLogsOnError"],
            ))
        }
        _ => {}
    }
    let mut port_names = BTreeSet::new();
    for (i, port) in arr(c, "ports").iter().enumerate() {
        let p = format!("{path}.ports[{i}]");
        let pname = s_or_empty(port, "name");
        if !pname.is_empty() {
            let msgs = port_name_errors(pname);
            if !msgs.is_empty() {
                for msg in msgs {
                    errs.push(FieldError::invalid(format!("{p}.name"), jstr(pname), msg));
                }
            } else if !port_names.insert(pname.to_string()) {
                errs.push(FieldError::duplicate(format!("{p}.name"), jstr(pname)));
            }
        }
        match port.get("containerPort").and_then(Value::as_i64) {
            None | Some(0) => errs.push(FieldError::required(format!("{p}.containerPort"), "")),
            Some(n) if !(1..=65535).contains(&n) => errs.push(FieldError::invalid(
                format!("{p}.containerPort"),
                n.into(),
                "must be between 1 and 65535, inclusive",
            )),
            _ => {}
        }
        if let Some(hp) = port.get("hostPort").and_then(Value::as_i64)
            && hp != 0
            && !(1..=65535).contains(&hp)
        {
            errs.push(FieldError::invalid(
                format!("{p}.hostPort"),
                hp.into(),
                "must be between 1 and 65535, inclusive",
            ));
        }
        match s_or_empty(port, "protocol") {
            "" => errs.push(FieldError::required(format!("{p}.protocol"), "")),
            pr if !PROTOCOLS.contains(&pr) => errs.push(FieldError::not_supported(
                format!("{p}.protocol"),
                jstr(pr),
                PROTOCOLS,
            )),
            _ => {}
        }
    }
    validate_resources(c, path, errs);
    for (i, e) in arr(c, "env").iter().enumerate() {
        if s_or_empty(e, "name").is_empty() {
            errs.push(FieldError::required(format!("{path}.env[{i}].name"), ""));
        }
    }
    let mut mount_paths = BTreeSet::new();
    for (i, m) in arr(c, "volumeMounts").iter().enumerate() {
        let p = format!("{path}.volumeMounts[{i}]");
        let vname = s_or_empty(m, "name");
        if vname.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        } else if !volumes.contains(vname) {
            errs.push(FieldError::not_found(format!("{p}.name"), jstr(vname)));
        }
        let mp = s_or_empty(m, "mountPath");
        if mp.is_empty() {
            errs.push(FieldError::required(format!("{p}.mountPath"), ""));
        } else if !mount_paths.insert(mp.to_string()) {
            errs.push(FieldError::invalid(
                format!("{p}.mountPath"),
                jstr(mp),
                "must be unique",
            ));
        }
    }
}

/// Container resources: quantities parse, are not negative, and requests do not exceed limits
/// (upstream `ValidateContainerResourceRequirements`; values printed as the client wrote them).
fn validate_resources(c: &Value, path: &str, errs: &mut Errs) {
    let empty = Map::new();
    let section = |name: &str| {
        c.at(&format!("/resources/{name}"))
            .and_then(Value::as_object)
            .unwrap_or(&empty)
    };
    let (limits, requests) = (section("limits"), section("requests"));
    for (name, list) in [("limits", limits), ("requests", requests)] {
        for (res, q) in list {
            let p = format!("{path}.resources.{name}[{res}]");
            match crate::defaults::parse_quantity(q) {
                None => errs.push(FieldError::invalid(
                    p,
                    q.clone(),
                    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                )),
                Some(n) if n < 0.0 => errs.push(FieldError::invalid(p, q.clone(), "must be greater than or equal to 0")),
                Some(_) => {}
            }
        }
    }
    for (res, req) in requests {
        let (Some(r), Some(limit)) = (crate::defaults::parse_quantity(req), limits.get(res)) else {
            continue;
        };
        if let Some(l) = crate::defaults::parse_quantity(limit)
            && r > l
        {
            let shown = |v: &Value| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            };
            errs.push(FieldError::invalid(
                format!("{path}.resources.requests"),
                Value::String(shown(req)),
                format!(
                    "must be less than or equal to {res} limit of {}",
                    shown(limit)
                ),
            ));
        }
    }
}

/// `data`/`binaryData` keys of a ConfigMap or Secret (upstream `IsConfigMapKey`) and the 1 MiB
/// total size limit.
/// The size upstream counts for a config value: bytes of a string, decoded bytes of base64
/// (`binaryData`, Secret `data`).
fn config_value_len(v: &Value, base64: bool) -> usize {
    use base64::Engine as _;
    let s = v.as_str().unwrap_or("");
    if base64 {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_or(s.len(), |b| b.len())
    } else {
        s.len()
    }
}

/// Upstream `core.MaxSecretSize`: the data of one ConfigMap or Secret.
const MAX_CONFIG_SIZE: usize = 1024 * 1024;

fn validate_config_keys(obj: &Value, secret: bool, errs: &mut Errs) {
    let mut total = 0usize;
    for field in ["data", "binaryData", "stringData"] {
        let Some(m) = obj.get(field).and_then(Value::as_object) else {
            continue;
        };
        let base64 = field == "binaryData" || (secret && field == "data");
        for (k, v) in m {
            total = total.saturating_add(config_value_len(v, base64));
            let ok = !k.is_empty()
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
            if k.len() > 253 {
                errs.push(FieldError::invalid(
                    format!("{field}[{k}]"),
                    jstr(k),
                    klab_api::selector::max_len_error(253),
                ));
            }
            if !ok {
                errs.push(FieldError::invalid(
                    format!("{field}[{k}]"),
                    jstr(k),
                    regex_error(
                        "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                        "[-._a-zA-Z0-9]+",
                        &["key.name", "KEY_NAME", "key-name"],
                    ),
                ));
            } else if k == "." || k == ".." || k.starts_with("..") {
                errs.push(FieldError::invalid(
                    format!("{field}[{k}]"),
                    jstr(k),
                    format!("must not be '{k}'"),
                ));
            }
        }
    }
    if total > MAX_CONFIG_SIZE {
        // A ConfigMap's whole object is too long (field ""); a Secret's `data`.
        let mut e = FieldError::too_long(if secret { "data" } else { "" }, MAX_CONFIG_SIZE);
        e.detail = format!("must have at most {MAX_CONFIG_SIZE} bytes");
        errs.push(e);
    }
}

/// Upstream `ValidatePodSpec` (the parts klab's users hit). `path` is `spec` or
/// `spec.template.spec`.
/// A container's probes as upstream's validateContainers checks them: one handler each, no
/// negative timing or threshold, a positive probe-level grace (not on readiness probes), and
/// `successThreshold` 1 for liveness and startup probes (their results decide a kill, which
/// must not wait for a run of successes).
fn validate_probes(c: &Value, path: &str, errs: &mut Errs) {
    for field in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let Some(probe) = c.get(field).filter(|v| v.is_object()) else {
            continue;
        };
        let p = format!("{path}.{field}");
        let handlers: Vec<&str> = ["exec", "httpGet", "tcpSocket", "grpc"]
            .into_iter()
            .filter(|h| probe.get(*h).is_some_and(|v| !v.is_null()))
            .collect();
        match handlers.as_slice() {
            [] => errs.push(FieldError::required(&p, "must specify a handler type")),
            [_] => {}
            [_, rest @ ..] => {
                for h in rest {
                    errs.push(FieldError::forbidden(
                        format!("{p}.{h}"),
                        "may not specify more than 1 handler type",
                    ));
                }
            }
        }
        for f in [
            "initialDelaySeconds",
            "timeoutSeconds",
            "periodSeconds",
            "successThreshold",
            "failureThreshold",
        ] {
            if let Some(n) = probe.get(f).and_then(Value::as_i64)
                && n < 0
            {
                errs.push(FieldError::invalid(
                    format!("{p}.{f}"),
                    n.into(),
                    "must be greater than or equal to 0",
                ));
            }
        }
        let tgps = probe
            .get("terminationGracePeriodSeconds")
            .and_then(Value::as_i64);
        if let Some(g) = tgps
            && g <= 0
        {
            errs.push(FieldError::invalid(
                format!("{p}.terminationGracePeriodSeconds"),
                g.into(),
                "must be greater than 0",
            ));
        }
        if field == "readinessProbe" {
            if let Some(g) = tgps {
                errs.push(FieldError::invalid(
                    format!("{p}.terminationGracePeriodSeconds"),
                    g.into(),
                    "must not be set for readinessProbes",
                ));
            }
        } else {
            // Defaulting sets 1 before validation; an absent value is the default.
            let st = probe
                .get("successThreshold")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            if st != 1 {
                errs.push(FieldError::invalid(
                    format!("{p}.successThreshold"),
                    st.into(),
                    "must be 1",
                ));
            }
        }
    }
}

fn validate_pod_spec(spec: &Value, path: &str, errs: &mut Errs) {
    let mut volumes = BTreeSet::new();
    for (i, v) in arr(spec, "volumes").iter().enumerate() {
        let p = format!("{path}.volumes[{i}].name");
        let name = s_or_empty(v, "name");
        if name.is_empty() {
            errs.push(FieldError::required(p, ""));
            continue;
        }
        for msg in is_dns1123_label(name) {
            errs.push(FieldError::invalid(&p, jstr(name), msg));
        }
        if !volumes.insert(name.to_string()) {
            errs.push(FieldError::duplicate(p, jstr(name)));
        }
    }

    let containers = arr(spec, "containers");
    if containers.is_empty() {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
    }
    // Names are unique across init and regular containers.
    let mut names = BTreeSet::new();
    for (field, list) in [
        ("initContainers", arr(spec, "initContainers")),
        ("containers", containers),
    ] {
        for (i, c) in list.iter().enumerate() {
            let p = format!("{path}.{field}[{i}]");
            validate_container(c, &p, &volumes, errs);
            if field == "containers" {
                validate_probes(c, &p, errs);
            }
            let name = s_or_empty(c, "name");
            if !name.is_empty() && !names.insert(name.to_string()) {
                errs.push(FieldError::duplicate(format!("{p}.name"), jstr(name)));
            }
        }
    }

    match s_or_empty(spec, "restartPolicy") {
        "" => errs.push(FieldError::required(format!("{path}.restartPolicy"), "")),
        p if !RESTART_POLICIES.contains(&p) => errs.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            jstr(p),
            RESTART_POLICIES,
        )),
        _ => {}
    }
    match s_or_empty(spec, "dnsPolicy") {
        "" => errs.push(FieldError::required(format!("{path}.dnsPolicy"), "")),
        p if !DNS_POLICIES.contains(&p) => errs.push(FieldError::not_supported(
            format!("{path}.dnsPolicy"),
            jstr(p),
            DNS_POLICIES,
        )),
        _ => {}
    }
    if let Some(n) = spec.get("activeDeadlineSeconds").and_then(Value::as_i64)
        && !(1..=i64::from(i32::MAX)).contains(&n)
    {
        errs.push(FieldError::invalid(
            format!("{path}.activeDeadlineSeconds"),
            n.into(),
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    let node_name = s_or_empty(spec, "nodeName");
    if !node_name.is_empty() {
        for msg in is_dns1123_subdomain(node_name) {
            errs.push(FieldError::invalid(
                format!("{path}.nodeName"),
                jstr(node_name),
                msg,
            ));
        }
    }
    // `ValidatePriorityClassName`: a class name is an object name (templates are checked here;
    // a pod's is resolved by admission first).
    let class = s_or_empty(spec, "priorityClassName");
    if !class.is_empty() {
        for msg in is_dns1123_subdomain(class) {
            errs.push(FieldError::invalid(
                format!("{path}.priorityClassName"),
                jstr(class),
                msg,
            ));
        }
    }
    errs.extend(validate_labels(
        spec.get("nodeSelector"),
        &format!("{path}.nodeSelector"),
    ));
    validate_tolerations(
        arr(spec, "tolerations"),
        &format!("{path}.tolerations"),
        errs,
    );
    let sa = s_or_empty(spec, "serviceAccountName");
    if !sa.is_empty() {
        for msg in is_dns1123_subdomain(sa) {
            errs.push(FieldError::invalid(
                format!("{path}.serviceAccountName"),
                jstr(sa),
                msg,
            ));
        }
    }
}

/// A pod template inside a workload: labels, and the spec with the allowed restart policies.
fn validate_pod_template(spec: &Value, restart_policies: &[&str], errs: &mut Errs) {
    validate_pod_template_as(spec, restart_policies, "ReplicaSet", true, errs)
}

/// [`validate_pod_template`] naming `kind` in the activeDeadlineSeconds error; with
/// `validate_spec == false` the pod spec itself is not validated (upstream's StatefulSet rule:
/// its template's volume mounts may name volumeClaimTemplates, which only the pods created from
/// it carry as volumes, so pods are validated when the controller creates them).
fn validate_pod_template_as(
    spec: &Value,
    restart_policies: &[&str],
    kind: &str,
    validate_spec: bool,
    errs: &mut Errs,
) {
    let Some(template) = spec.get("template").filter(|t| t.is_object()) else {
        errs.push(FieldError::required("spec.template", ""));
        return;
    };
    errs.extend(validate_labels(
        template.at("/metadata/labels"),
        "spec.template.metadata.labels",
    ));
    errs.extend(validate_annotations(
        template.at("/metadata/annotations"),
        "spec.template.metadata.annotations",
    ));
    let empty = Value::Object(Map::new());
    let pod_spec = template.get("spec").unwrap_or(&empty);
    if validate_spec {
        validate_pod_spec(pod_spec, "spec.template.spec", errs);
    }
    let rp = s_or_empty(pod_spec, "restartPolicy");
    if !rp.is_empty() && RESTART_POLICIES.contains(&rp) && !restart_policies.contains(&rp) {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            jstr(rp),
            restart_policies,
        ));
    }
    if pod_spec
        .get("activeDeadlineSeconds")
        .is_some_and(|v| !v.is_null())
        && restart_policies == ["Always"]
    {
        errs.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// Per-kind rules
// ---------------------------------------------------------------------------------------------

/// An int-or-percent value (`maxSurge`, `minAvailable`, …): `Ok(Some((n, is_percent)))`.
fn int_or_percent(v: &Value, path: &str, errs: &mut Errs) -> Option<(i64, bool)> {
    match v {
        Value::Number(n) => n.as_i64().map(|n| (n, false)),
        Value::String(s) => {
            let num = s
                .strip_suffix('%')
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
            match num.and_then(|d| d.parse::<i64>().ok()) {
                Some(n) => Some((n, true)),
                None => {
                    errs.push(FieldError::invalid(
                        path,
                        v.clone(),
                        regex_error(
                            "a valid percent string must be a numeric string followed by an ending '%'",
                            "[0-9]+%",
                            &["1%", "93%"],
                        ),
                    ));
                    None
                }
            }
        }
        _ => None,
    }
}

fn validate_int_or_percent_field(v: Option<&Value>, path: &str, errs: &mut Errs) -> Option<i64> {
    let v = v.filter(|v| !v.is_null())?;
    let (n, pct) = int_or_percent(v, path, errs)?;
    if n < 0 {
        errs.push(FieldError::invalid(
            path,
            v.clone(),
            "must be greater than or equal to 0",
        ));
    }
    if pct && n > 100 {
        errs.push(FieldError::invalid(
            path,
            v.clone(),
            "must not be greater than 100%",
        ));
    }
    Some(n)
}

fn validate_deployment(obj: &Value, errs: &mut Errs) {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    for key in ["replicas", "minReadySeconds", "revisionHistoryLimit"] {
        non_negative(errs, spec, key, "spec");
    }
    validate_workload_selector(spec, "empty selector is invalid for deployment", errs);
    validate_pod_template(spec, &["Always"], errs);
    let strategy = spec.get("strategy").unwrap_or(&empty);
    match s_or_empty(strategy, "type") {
        "Recreate" => {
            if strategy.get("rollingUpdate").is_some_and(|v| !v.is_null()) {
                errs.push(FieldError::forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => {
            let ru = strategy.get("rollingUpdate").unwrap_or(&empty);
            let p = "spec.strategy.rollingUpdate";
            let unavailable = validate_int_or_percent_field(
                ru.get("maxUnavailable"),
                &format!("{p}.maxUnavailable"),
                errs,
            );
            let surge =
                validate_int_or_percent_field(ru.get("maxSurge"), &format!("{p}.maxSurge"), errs);
            if unavailable == Some(0) && surge == Some(0) {
                errs.push(FieldError::invalid(
                    format!("{p}.maxUnavailable"),
                    ru.get("maxUnavailable").cloned().unwrap_or(Value::Null),
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
        }
        "" => errs.push(FieldError::required("spec.strategy.type", "")),
        other => errs.push(FieldError::not_supported(
            "spec.strategy.type",
            jstr(other),
            &["Recreate", "RollingUpdate"],
        )),
    }
    if let Some(pds) = spec.get("progressDeadlineSeconds").and_then(Value::as_i64) {
        let mrs = spec
            .get("minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if pds < 0 {
            errs.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                pds.into(),
                "must be greater than or equal to 0",
            ));
        } else if pds <= mrs {
            errs.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                pds.into(),
                "must be greater than minReadySeconds",
            ));
        }
    }
}

fn validate_replicaset(obj: &Value, errs: &mut Errs) {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    non_negative(errs, spec, "replicas", "spec");
    non_negative(errs, spec, "minReadySeconds", "spec");
    // Upstream's ReplicaSet validation reuses the Deployment wording.
    validate_workload_selector(spec, "empty selector is invalid for deployment", errs);
    validate_pod_template(spec, &["Always"], errs);
}

fn validate_statefulset(obj: &Value, errs: &mut Errs) {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    non_negative(errs, spec, "replicas", "spec");
    non_negative(errs, spec, "minReadySeconds", "spec");
    match s_or_empty(spec, "podManagementPolicy") {
        "OrderedReady" | "Parallel" => {}
        "" => errs.push(FieldError::required("spec.podManagementPolicy", "")),
        other => errs.push(FieldError::not_supported(
            "spec.podManagementPolicy",
            jstr(other),
            &["OrderedReady", "Parallel"],
        )),
    }
    let us = spec.get("updateStrategy").unwrap_or(&empty);
    match s_or_empty(us, "type") {
        "RollingUpdate" => {
            if let Some(p) = us.at("/rollingUpdate/partition").and_then(Value::as_i64)
                && p < 0
            {
                errs.push(FieldError::invalid(
                    "spec.updateStrategy.rollingUpdate.partition",
                    p.into(),
                    "must be greater than or equal to 0",
                ));
            }
        }
        "OnDelete" => {
            if us.get("rollingUpdate").is_some_and(|v| !v.is_null()) {
                errs.push(FieldError::invalid(
                    "spec.updateStrategy.rollingUpdate",
                    us.get("rollingUpdate").cloned().unwrap_or(Value::Null),
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        "" => errs.push(FieldError::required("spec.updateStrategy", "")),
        other => errs.push(FieldError::not_supported(
            "spec.updateStrategy.type",
            jstr(other),
            &["OnDelete", "RollingUpdate"],
        )),
    }
    validate_workload_selector(spec, "empty selector is invalid for statefulset", errs);
    validate_pod_template_as(spec, &["Always"], "StatefulSet", false, errs);
}

fn validate_daemonset(obj: &Value, errs: &mut Errs) {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    non_negative(errs, spec, "minReadySeconds", "spec");
    non_negative(errs, spec, "revisionHistoryLimit", "spec");
    validate_workload_selector(spec, "empty selector is invalid for daemonset", errs);
    validate_pod_template_as(spec, &["Always"], "DaemonSet", true, errs);
    let us = spec.get("updateStrategy").unwrap_or(&empty);
    match s_or_empty(us, "type") {
        "OnDelete" => {}
        "RollingUpdate" => {
            let ru = us.get("rollingUpdate").unwrap_or(&empty);
            let p = "spec.updateStrategy.rollingUpdate";
            let unavailable = validate_int_or_percent_field(
                ru.get("maxUnavailable"),
                &format!("{p}.maxUnavailable"),
                errs,
            );
            let surge =
                validate_int_or_percent_field(ru.get("maxSurge"), &format!("{p}.maxSurge"), errs);
            if unavailable == Some(0) && surge.unwrap_or(0) == 0 {
                errs.push(FieldError::invalid(
                    format!("{p}.maxUnavailable"),
                    ru.get("maxUnavailable").cloned().unwrap_or(Value::Null),
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
        }
        "" => errs.push(FieldError::required("spec.updateStrategy.type", "")),
        other => errs.push(FieldError::not_supported(
            "spec.updateStrategy.type",
            jstr(other),
            &["OnDelete", "RollingUpdate"],
        )),
    }
}

fn validate_job(obj: &Value, errs: &mut Errs) {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    for key in ["parallelism", "completions", "backoffLimit"] {
        non_negative(errs, spec, key, "spec");
    }
    if let Some(n) = spec.get("activeDeadlineSeconds").and_then(Value::as_i64)
        && n <= 0
    {
        errs.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            n.into(),
            "must be greater than 0",
        ));
    }
    if let Some(n) = spec.get("ttlSecondsAfterFinished").and_then(Value::as_i64)
        && n < 0
    {
        errs.push(FieldError::invalid(
            "spec.ttlSecondsAfterFinished",
            n.into(),
            "must be greater than or equal to 0",
        ));
    }
    match s_or_empty(spec, "completionMode") {
        "" | "NonIndexed" | "Indexed" => {}
        other => errs.push(FieldError::not_supported(
            "spec.completionMode",
            jstr(other),
            &["NonIndexed", "Indexed"],
        )),
    }
    if s(spec, "completionMode") == Some("Indexed")
        && spec.get("completions").is_none_or(Value::is_null)
    {
        errs.push(FieldError::required(
            "spec.completions",
            "when completion mode is Indexed",
        ));
    }
    validate_workload_selector(spec, "empty selector is invalid for job", errs);
    // `Always` is refused as NotSupported with OnFailure/Never listed, as upstream.
    validate_pod_template(spec, &["OnFailure", "Never"], errs);
}

/// CronJob (`ValidateCronJobCreate`): the name leaves room for the 11-character job suffix, the
/// schedule parses (and carries no time zone of its own), the policies are known, the counts
/// are not negative, and the job template is a valid Job spec (its selector is generated when
/// the Job is made, so it is not asked for here).
fn validate_cronjob(obj: &Value, errs: &mut Errs) {
    let name = obj
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.len() > 52 {
        errs.push(FieldError::invalid(
            "metadata.name",
            jstr(name),
            "must be no more than 52 characters",
        ));
    }
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    match s(spec, "schedule") {
        None | Some("") => errs.push(FieldError::required("spec.schedule", "")),
        Some(sched) if sched.contains("TZ") => errs.push(FieldError::invalid(
            "spec.schedule",
            jstr(sched),
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        )),
        Some(sched) => {
            if let Err(e) = klab_api::cron::Schedule::parse(sched) {
                errs.push(FieldError::invalid("spec.schedule", jstr(sched), e));
            }
        }
    }
    if let Some(tz) = s(spec, "timeZone") {
        // Upstream's validateTimeZone: an IANA name the tz database knows.
        for e in klab_api::cron::validate_time_zone(tz) {
            errs.push(FieldError::invalid("spec.timeZone", jstr(tz), e));
        }
    }
    match s_or_empty(spec, "concurrencyPolicy") {
        "" | "Allow" | "Forbid" | "Replace" => {}
        other => errs.push(FieldError::not_supported(
            "spec.concurrencyPolicy",
            jstr(other),
            &["Allow", "Forbid", "Replace"],
        )),
    }
    for key in [
        "startingDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ] {
        non_negative(errs, spec, key, "spec");
    }
    let job_spec = spec
        .at("/jobTemplate/spec")
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    let mut inner = Vec::new();
    validate_job(&serde_json::json!({"spec": job_spec}), &mut inner);
    for mut e in inner {
        if e.field.starts_with("spec.selector") {
            continue;
        }
        e.field = format!("spec.jobTemplate.{}", e.field);
        errs.push(e);
    }
}

fn validate_node(obj: &Value, errs: &mut Errs) {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    for (i, t) in arr(spec, "taints").iter().enumerate() {
        let p = format!("spec.taints[{i}]");
        let key = s_or_empty(t, "key");
        for msg in is_qualified_name(key) {
            errs.push(FieldError::invalid(format!("{p}.key"), jstr(key), msg));
        }
        let value = s_or_empty(t, "value");
        let msgs = is_valid_label_value(value);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                format!("{p}.value"),
                jstr(value),
                msgs.join(";"),
            ));
        }
        let effect = s_or_empty(t, "effect");
        validate_taint_effect(effect, false, &format!("{p}.effect"), errs);
        if !seen.insert((key.to_string(), effect.to_string())) {
            let mut e = FieldError::duplicate(&p, t.clone());
            e.detail = "taints must be unique by key and effect pair".into();
            errs.push(e);
        }
    }
}

fn validate_namespace(obj: &Value, errs: &mut Errs) {
    for (i, f) in obj
        .at("/spec/finalizers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .enumerate()
    {
        let name = f.as_str().unwrap_or("");
        let p = format!("spec.finalizers[{i}]");
        let msgs = is_qualified_name(name);
        if !msgs.is_empty() {
            for msg in msgs {
                errs.push(FieldError::invalid(&p, jstr(name), msg));
            }
        } else if !name.contains('/') && name != "kubernetes" {
            errs.push(FieldError::invalid(
                &p,
                jstr(name),
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
}

fn validate_lease(obj: &Value, errs: &mut Errs) {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    if let Some(n) = spec.get("leaseDurationSeconds").and_then(Value::as_i64)
        && n <= 0
    {
        errs.push(FieldError::invalid(
            "spec.leaseDurationSeconds",
            n.into(),
            "must be greater than 0",
        ));
    }
    non_negative(errs, spec, "leaseTransitions", "spec");
}

const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

/// Upstream's access-mode checks of claims and volumes: each mode supported, and ReadWriteOncePod
/// alone (it cannot be combined with another mode).
fn validate_access_modes(modes: &[Value], errs: &mut Errs) {
    let (mut rwop, mut other) = (false, false);
    for m in modes {
        let m = m.as_str().unwrap_or("");
        if !ACCESS_MODES.contains(&m) {
            errs.push(FieldError::not_supported(
                "spec.accessModes",
                jstr(m),
                ACCESS_MODES,
            ));
        } else if m == "ReadWriteOncePod" {
            rwop = true;
        } else {
            other = true;
        }
    }
    if rwop && other {
        errs.push(FieldError::forbidden(
            "spec.accessModes",
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
}

fn validate_pvc(obj: &Value, errs: &mut Errs) {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    let modes = arr(spec, "accessModes");
    if modes.is_empty() {
        errs.push(FieldError::required(
            "spec.accessModes",
            "at least 1 access mode is required",
        ));
    }
    validate_access_modes(modes, errs);
    match spec.at("/resources/requests/storage") {
        None => errs.push(FieldError::required("spec.resources[storage]", "")),
        // `ValidatePersistentVolumeClaimSpec`: a size that is not a quantity, or not above zero.
        Some(q) => match crate::defaults::parse_quantity(q) {
            None => errs.push(FieldError::invalid(
                "spec.resources.requests[storage]",
                q.clone(),
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            )),
            Some(n) if n <= 0.0 => errs.push(FieldError::invalid(
                "spec.resources[storage]",
                q.clone(),
                "must be greater than zero",
            )),
            Some(_) => {}
        },
    }
    match s_or_empty(spec, "volumeMode") {
        "" | "Filesystem" | "Block" => {}
        other => errs.push(FieldError::not_supported(
            "spec.volumeMode",
            jstr(other),
            &["Block", "Filesystem"],
        )),
    }
}

/// Volume sources a PersistentVolume may name (`ValidatePersistentVolumeSpec` counts them: exactly
/// one is required).
const PV_SOURCES: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

/// Upstream `ValidatePersistentVolumeSpec`, the parts a client can get wrong: access modes,
/// a `storage` capacity, the reclaim policy and exactly one volume source (a CSI source names its
/// driver and volume handle).
fn validate_pv(obj: &Value, errs: &mut Errs) {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    let modes = arr(spec, "accessModes");
    if modes.is_empty() {
        errs.push(FieldError::required("spec.accessModes", ""));
    }
    validate_access_modes(modes, errs);
    match spec.get("capacity").and_then(Value::as_object) {
        None => errs.push(FieldError::required("spec.capacity", "")),
        Some(c) if c.is_empty() => errs.push(FieldError::required("spec.capacity", "")),
        Some(c) => {
            if !c.contains_key("storage") {
                errs.push(FieldError::required("spec.capacity.storage", ""));
            }
            for k in c.keys().filter(|k| k.as_str() != "storage") {
                errs.push(FieldError::not_supported(
                    "spec.capacity",
                    jstr(k),
                    &["storage"],
                ));
            }
        }
    }
    match s_or_empty(spec, "persistentVolumeReclaimPolicy") {
        "" | "Delete" | "Recycle" | "Retain" => {}
        other => errs.push(FieldError::not_supported(
            "spec.persistentVolumeReclaimPolicy",
            jstr(other),
            &["Delete", "Recycle", "Retain"],
        )),
    }
    let sources: Vec<&str> = PV_SOURCES
        .iter()
        .copied()
        .filter(|k| spec.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    match sources.len() {
        0 => errs.push(FieldError::required("spec", "must specify a volume type")),
        1 => {}
        _ => errs.push(FieldError::forbidden(
            format!("spec.{}", sources[1]),
            "may not specify more than 1 volume type",
        )),
    }
    if let Some(csi) = spec.get("csi").filter(|v| !v.is_null()) {
        if s_or_empty(csi, "driver").is_empty() {
            errs.push(FieldError::required("spec.csi.driver", ""));
        }
        if s_or_empty(csi, "volumeHandle").is_empty() {
            errs.push(FieldError::required("spec.csi.volumeHandle", ""));
        }
    }
}

/// Upstream `ValidateStorageClass`: a provisioner, and policies from the closed sets.
fn validate_storage_class(obj: &Value, errs: &mut Errs) {
    if s_or_empty(obj, "provisioner").is_empty() {
        errs.push(FieldError::required("provisioner", ""));
    }
    match s_or_empty(obj, "reclaimPolicy") {
        "" | "Delete" | "Retain" => {}
        other => errs.push(FieldError::not_supported(
            "reclaimPolicy",
            jstr(other),
            &["Delete", "Retain"],
        )),
    }
    match s_or_empty(obj, "volumeBindingMode") {
        "" | "Immediate" | "WaitForFirstConsumer" => {}
        other => errs.push(FieldError::not_supported(
            "volumeBindingMode",
            jstr(other),
            &["Immediate", "WaitForFirstConsumer"],
        )),
    }
}

fn validate_pdb(obj: &Value, errs: &mut Errs) {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    let min = spec.get("minAvailable").filter(|v| !v.is_null());
    let max = spec.get("maxUnavailable").filter(|v| !v.is_null());
    if min.is_some() && max.is_some() {
        errs.push(FieldError::invalid(
            "spec",
            spec.clone(),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    validate_int_or_percent_field(min, "spec.minAvailable", errs);
    validate_int_or_percent_field(max, "spec.maxUnavailable", errs);
    if let Some(sel) = spec.get("selector").filter(|v| !v.is_null()) {
        validate_label_selector(sel, "spec.selector", errs);
    }
    match s_or_empty(spec, "unhealthyPodEvictionPolicy") {
        "" | "IfHealthyBudget" | "AlwaysAllow" => {}
        other => errs.push(FieldError::not_supported(
            "spec.unhealthyPodEvictionPolicy",
            jstr(other),
            &["AlwaysAllow", "IfHealthyBudget"],
        )),
    }
}

/// Upstream `ValidateEndpointSlice` (the parts a client can get wrong): the address type, at
/// least one address per endpoint and at most 100 of them, at most 1000 endpoints and 100 ports.
fn validate_endpoint_slice(obj: &Value, errs: &mut Errs) {
    const TYPES: &[&str] = &["FQDN", "IPv4", "IPv6"];
    match s_or_empty(obj, "addressType") {
        "" => errs.push(FieldError::required("addressType", "")),
        t if !TYPES.contains(&t) => {
            errs.push(FieldError::not_supported("addressType", jstr(t), TYPES))
        }
        _ => {}
    }
    let endpoints = arr(obj, "endpoints");
    if endpoints.len() > 1000 {
        errs.push(FieldError::too_many("endpoints", endpoints.len(), 1000));
    }
    for (i, e) in endpoints.iter().enumerate() {
        let n = arr(e, "addresses").len();
        if n == 0 {
            errs.push(FieldError::required(
                format!("endpoints[{i}].addresses"),
                "must contain at least 1 address",
            ));
        } else if n > 100 {
            errs.push(FieldError::too_many(
                format!("endpoints[{i}].addresses"),
                n,
                100,
            ));
        }
    }
    let ports = arr(obj, "ports");
    if ports.len() > 100 {
        errs.push(FieldError::too_many("ports", ports.len(), 100));
    }
}

/// Upstream `legacyValidateEvent` for core/v1 Events.
fn validate_event(obj: &Value, errs: &mut Errs) {
    let ns = obj
        .at("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let io_ns = obj
        .at("/involvedObject/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let has_event_time = obj.get("eventTime").is_some_and(|v| !v.is_null());
    let mismatch = || {
        FieldError::invalid(
            "involvedObject.namespace",
            jstr(io_ns),
            "does not match event.namespace",
        )
    };
    if !has_event_time {
        if io_ns.is_empty() {
            if !ns.is_empty() && ns != "default" {
                errs.push(mismatch());
            }
        } else if ns != io_ns {
            errs.push(mismatch());
        }
    } else {
        if io_ns.is_empty() && ns != "default" && ns != "kube-system" {
            errs.push(mismatch());
        }
        let rc = s_or_empty(obj, "reportingComponent");
        if rc.is_empty() {
            errs.push(FieldError::required("reportingComponent", ""));
        }
        for msg in is_qualified_name(rc) {
            errs.push(FieldError::invalid("reportingComponent", jstr(rc), msg));
        }
        let limits: [(&str, usize); 3] =
            [("reportingInstance", 128), ("action", 128), ("reason", 128)];
        for (key, limit) in limits {
            let v = s_or_empty(obj, key);
            if v.is_empty() {
                errs.push(FieldError::required(key, ""));
            } else if v.len() > limit {
                errs.push(FieldError::invalid(
                    key,
                    jstr(""),
                    format!("can have at most {limit} characters"),
                ));
            }
        }
        if s_or_empty(obj, "message").len() > 1024 {
            errs.push(FieldError::invalid(
                "message",
                jstr(""),
                "can have at most 1024 characters",
            ));
        }
    }
}

fn validate_service(obj: &Value, errs: &mut Errs) {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    let types = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    let ty = s_or_empty(spec, "type");
    if !ty.is_empty() && !types.contains(&ty) {
        errs.push(FieldError::not_supported("spec.type", jstr(ty), &types));
    }
    let headless = s(spec, "clusterIP") == Some("None");
    let ports = arr(spec, "ports");
    if ports.is_empty() && ty != "ExternalName" && !headless {
        errs.push(FieldError::required("spec.ports", ""));
    }
    for (i, p) in ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        match p.get("port").and_then(Value::as_i64) {
            Some(n) if (1..=65535).contains(&n) => {}
            Some(n) => errs.push(FieldError::invalid(
                format!("{path}.port"),
                n.into(),
                "must be between 1 and 65535, inclusive",
            )),
            None => errs.push(FieldError::required(format!("{path}.port"), "")),
        }
        let pr = s_or_empty(p, "protocol");
        if !pr.is_empty() && !PROTOCOLS.contains(&pr) {
            errs.push(FieldError::not_supported(
                format!("{path}.protocol"),
                jstr(pr),
                PROTOCOLS,
            ));
        }
        if ports.len() > 1 && s_or_empty(p, "name").is_empty() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        }
        let name = s_or_empty(p, "name");
        if !name.is_empty() && ports[..i].iter().any(|q| s_or_empty(q, "name") == name) {
            errs.push(FieldError::duplicate(format!("{path}.name"), jstr(name)));
        }
        let node_port = p.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
        if node_port != 0 && matches!(ty, "ClusterIP" | "ExternalName" | "") {
            let t = if ty.is_empty() { "ClusterIP" } else { ty };
            errs.push(FieldError::forbidden(
                format!("{path}.nodePort"),
                format!("may not be used when `type` is '{t}'"),
            ));
        }
    }
    // (protocol, port) pairs and (protocol, nodePort) pairs are unique.
    for (i, p) in ports.iter().enumerate() {
        let key = |q: &Value, f: &str| {
            (
                s_or_empty(q, "protocol").to_string(),
                q.get(f).and_then(Value::as_i64).unwrap_or(0),
            )
        };
        let (proto, port) = key(p, "port");
        if ports[..i]
            .iter()
            .any(|q| key(q, "port") == (proto.clone(), port))
        {
            // Upstream prints the key, a ServicePort with only protocol and port set, with %#v.
            errs.push(FieldError::duplicate(
                format!("spec.ports[{i}]"),
                serde_json::json!({GO_VALUE: format!(
                    "core.ServicePort{{Name:\"\", Protocol:{proto:?}, AppProtocol:(*string)(nil), Port:{port}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}"
                )}),
            ));
        }
        let (proto, np) = key(p, "nodePort");
        if np != 0
            && ports[..i]
                .iter()
                .any(|q| key(q, "nodePort") == (proto.clone(), np))
        {
            errs.push(FieldError::duplicate(
                format!("spec.ports[{i}].nodePort"),
                serde_json::json!(np),
            ));
        }
    }
}

/// A bad value already rendered as Go's `%#v` prints it (`{GO_VALUE: "core.ServicePort{…}"}`).
pub(crate) const GO_VALUE: &str = "$go";

fn kind_rules(ri: &ResourceInfo, obj: &Value, errs: &mut Errs) {
    match (ri.group, ri.kind) {
        ("", "Pod") => {
            let empty = Value::Object(Map::new());
            validate_pod_spec(obj.get("spec").unwrap_or(&empty), "spec", errs);
        }
        ("", "Node") => validate_node(obj, errs),
        ("", "Namespace") => validate_namespace(obj, errs),
        ("", "Event") => validate_event(obj, errs),
        ("", "Service") => validate_service(obj, errs),
        ("", "PersistentVolumeClaim") => validate_pvc(obj, errs),
        ("", "PersistentVolume") => validate_pv(obj, errs),
        ("storage.k8s.io", "StorageClass") => validate_storage_class(obj, errs),
        ("", "ConfigMap") => validate_config_keys(obj, false, errs),
        ("", "Secret") => validate_config_keys(obj, true, errs),
        ("apps", "Deployment") => validate_deployment(obj, errs),
        ("apps", "ReplicaSet") => validate_replicaset(obj, errs),
        ("apps", "StatefulSet") => validate_statefulset(obj, errs),
        ("apps", "DaemonSet") => validate_daemonset(obj, errs),
        ("batch", "Job") => validate_job(obj, errs),
        ("batch", "CronJob") => validate_cronjob(obj, errs),
        ("coordination.k8s.io", "Lease") => validate_lease(obj, errs),
        ("policy", "PodDisruptionBudget") => validate_pdb(obj, errs),
        ("discovery.k8s.io", "EndpointSlice") => validate_endpoint_slice(obj, errs),
        ("scheduling.k8s.io", "PriorityClass") => validate_priority_class(obj, errs),
        (crate::rbac::GROUP, kind) => crate::rbac::validate(kind, obj, errs),
        ("certificates.k8s.io", "CertificateSigningRequest") => crate::csr::validate(obj, errs),
        _ => {}
    }
}

/// The values upstream's `HighestUserDefinablePriority` and system classes fix.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;
/// The built-in system PriorityClasses: (name, value, description). Their `globalDefault` is false.
pub const SYSTEM_PRIORITY_CLASSES: [(&str, i64, &str); 2] = [
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// `ValidatePriorityClass`: names with the reserved `system-` prefix must be one of the built-in
/// classes exactly (value and globalDefault); any other class may not go above
/// `HighestUserDefinablePriority`; the preemption policy is one of the two known.
fn validate_priority_class(obj: &Value, errs: &mut Errs) {
    let name = obj
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let value = obj.get("value").and_then(Value::as_i64).unwrap_or(0);
    let global_default = obj
        .get("globalDefault")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if name.starts_with("system-") {
        let known = SYSTEM_PRIORITY_CLASSES.iter().find(|(n, _, _)| *n == name);
        let problem = match known {
            None => Some(format!("{name} is not a known system priority class")),
            Some((n, v, _)) if *v != value => {
                Some(format!("value of {n} PriorityClass must be {v}"))
            }
            Some((n, _, _)) if global_default => {
                Some(format!("globalDefault of {n} PriorityClass must be false"))
            }
            Some(_) => None,
        };
        if let Some(p) = problem {
            errs.push(FieldError::forbidden(
                "metadata.name",
                format!(
                    "priority class names with 'system-' prefix are reserved for system use only. error: {p}"
                ),
            ));
        }
    } else if value > HIGHEST_USER_DEFINABLE_PRIORITY {
        errs.push(FieldError::forbidden(
            "value",
            format!(
                "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
            ),
        ));
    }
    if let Some(p) = obj.get("preemptionPolicy")
        && !matches!(p.as_str(), Some("Never" | "PreemptLowerPriority"))
    {
        errs.push(FieldError::not_supported(
            "preemptionPolicy",
            p.clone(),
            &["Never", "PreemptLowerPriority"],
        ));
    }
}

fn result(errs: Errs) -> Result<(), Vec<FieldError>> {
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

/// Validates an object about to be created (after defaulting).
pub fn validate_create(ri: &ResourceInfo, obj: &Value) -> Result<(), Vec<FieldError>> {
    let mut errs = Vec::new();
    if !obj.is_object() {
        errs.push(FieldError::invalid(
            "",
            obj.clone(),
            "must be a JSON object",
        ));
        return Err(errs);
    }
    validate_object_meta(ri, obj, &mut errs);
    kind_rules(ri, obj, &mut errs);
    result(errs)
}

// ---------------------------------------------------------------------------------------------
// Updates
// ---------------------------------------------------------------------------------------------

/// Drops values Go's `omitempty` / semantic equality treats as unset (null, false, "", empty list,
/// empty map), so that JSON spellings of the same Go value compare equal.
fn normalized(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let n = normalized(v);
                let unset = match &n {
                    Value::Null | Value::Bool(false) => true,
                    Value::String(s) => s.is_empty(),
                    Value::Array(a) => a.is_empty(),
                    Value::Object(o) => o.is_empty(),
                    Value::Number(_) | Value::Bool(true) => false,
                };
                if !unset {
                    out.insert(k.clone(), n);
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        other => other.clone(),
    }
}

fn field_immutable(errs: &mut Errs, path: &str, new: Option<&Value>, old: Option<&Value>) {
    let n = new.map(normalized).unwrap_or(Value::Null);
    let o = old.map(normalized).unwrap_or(Value::Null);
    let n_unset = matches!(&n, Value::Null) || n == Value::Object(Map::new());
    let o_unset = matches!(&o, Value::Null) || o == Value::Object(Map::new());
    if n != o && !(n_unset && o_unset) {
        errs.push(FieldError::invalid(
            path,
            new.cloned().unwrap_or(Value::Null),
            "field is immutable",
        ));
    }
}

/// The upstream Forbidden text for pod spec changes (the diff that follows it upstream is a Go
/// `cmp.Diff`; klab lists the changed top-level spec fields instead).
pub const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn validate_pod_update(obj: &Value, old: &Value, errs: &mut Errs) {
    let empty = Value::Object(Map::new());
    let new_spec = obj.get("spec").unwrap_or(&empty);
    let old_spec = old.get("spec").unwrap_or(&empty);

    // activeDeadlineSeconds: may be set or decreased, never increased or unset.
    match (
        new_spec
            .get("activeDeadlineSeconds")
            .and_then(Value::as_i64),
        old_spec
            .get("activeDeadlineSeconds")
            .and_then(Value::as_i64),
    ) {
        (Some(n), _) if !(0..=i64::from(i32::MAX)).contains(&n) => {
            errs.push(FieldError::invalid(
                "spec.activeDeadlineSeconds",
                n.into(),
                "must be between 0 and 2147483647, inclusive",
            ));
            return;
        }
        (Some(n), Some(o)) if o < n => {
            errs.push(FieldError::invalid(
                "spec.activeDeadlineSeconds",
                n.into(),
                "must be less than or equal to previous value",
            ));
            return;
        }
        (None, Some(_)) => errs.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            Value::Null,
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }
    // An unchanged spec (every status write) passes the rest: each old toleration is there, and
    // munging changes nothing the old spec does not have. Comparing is cheaper than munging.
    if new_spec == old_spec {
        return;
    }

    // Tolerations: every old one must still be there (tolerationSeconds may change).
    let new_tol = arr(new_spec, "tolerations");
    for o in arr(old_spec, "tolerations") {
        let strip = |t: &Value| {
            let mut t = normalized(t);
            if let Some(m) = t.as_object_mut() {
                m.remove("tolerationSeconds");
            }
            t
        };
        if !new_tol.iter().any(|n| strip(n) == strip(o)) {
            errs.push(FieldError::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            break;
        }
    }

    // Munge the allowed changes away and compare the rest.
    let mut munged = normalized(new_spec);
    let old_n = normalized(old_spec);
    if let Some(m) = munged.as_object_mut() {
        for field in ["containers", "initContainers"] {
            let old_list = old_n
                .get(field)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if let Some(Value::Array(list)) = m.get_mut(field)
                && list.len() == old_list.len()
            {
                for (c, oc) in list.iter_mut().zip(&old_list) {
                    if let (Some(cm), Some(img)) = (c.as_object_mut(), oc.get("image")) {
                        cm.insert("image".into(), img.clone());
                    }
                }
            }
        }
        // Tolerations were checked above (only additions); like upstream they are munged either
        // way so that a bad toleration change gives one error, not two.
        for field in ["activeDeadlineSeconds", "tolerations"] {
            match old_n.get(field) {
                Some(v) => m.insert(field.into(), v.clone()),
                None => m.remove(field),
            };
        }
        // `spec.nodeName` may go from unset to set: klab's `pods/binding` is stored through this
        // same update path (upstream binds without update validation). Once set it is immutable.
        if old_n.get("nodeName").is_none() {
            m.remove("nodeName");
        }
        let old_tgps = old_n
            .get("terminationGracePeriodSeconds")
            .and_then(Value::as_i64);
        let new_tgps = m
            .get("terminationGracePeriodSeconds")
            .and_then(Value::as_i64);
        if old_tgps.is_some_and(|o| o < 0) && new_tgps == Some(1) {
            m.insert(
                "terminationGracePeriodSeconds".into(),
                old_tgps.unwrap_or(1).into(),
            );
        }
    }
    // Images must stay non-empty: checked by the pod spec rules that run on updates too.
    if munged != old_n {
        let keys: BTreeSet<&String> = munged
            .as_object()
            .into_iter()
            .flat_map(|m| m.keys())
            .chain(old_n.as_object().into_iter().flat_map(|m| m.keys()))
            .collect();
        let changed: Vec<String> = keys
            .into_iter()
            .filter(|k| munged.get(k.as_str()) != old_n.get(k.as_str()))
            .map(|k| format!("spec.{k}"))
            .collect();
        errs.push(FieldError::forbidden(
            "spec",
            format!("{POD_UPDATE_FORBIDDEN}\n  changed: {}", changed.join(", ")),
        ));
    }
}

fn spec_ptr<'a>(v: &'a Value, ptr: &str) -> Option<&'a Value> {
    v.pointer(ptr)
}

/// Validates an update (after defaulting): everything a create checks, plus immutability.
pub fn validate_update(ri: &ResourceInfo, obj: &Value, old: &Value) -> Result<(), Vec<FieldError>> {
    let mut new_defaulted = obj.clone();
    crate::defaults::default_object(ri, &mut new_defaulted);
    validate_defaulted_update(ri, &new_defaulted, old)
}

/// [`validate_update`] of an object the caller has already defaulted (the write path's).
///
/// Upstream decodes the stored object with defaulting too, so the comparison is against a
/// defaulted copy of `old`: an object stored before a default existed must not look "changed" by
/// it. Defaulting only fills absent fields, so an update that passes against `old` as stored
/// passes against its defaulted copy too (a field `old` lacks and `obj` has already differs);
/// the copy is made only when the stored form reports errors.
pub fn validate_defaulted_update(
    ri: &ResourceInfo,
    obj: &Value,
    old: &Value,
) -> Result<(), Vec<FieldError>> {
    let errs = validate_update_against(ri, obj, old);
    if errs.is_empty() {
        return Ok(());
    }
    let mut old_defaulted = old.clone();
    crate::defaults::default_object(ri, &mut old_defaulted);
    if old_defaulted == *old {
        return Err(errs);
    }
    let errs = validate_update_against(ri, obj, &old_defaulted);
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

fn validate_update_against(ri: &ResourceInfo, obj: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !obj.is_object() {
        errs.push(FieldError::invalid(
            "",
            obj.clone(),
            "must be a JSON object",
        ));
        return errs;
    }
    validate_object_meta(ri, obj, &mut errs);
    validate_object_meta_update(obj, old, &mut errs);
    kind_rules(ri, obj, &mut errs);
    match (ri.group, ri.kind) {
        ("", "Pod") => validate_pod_update(obj, old, &mut errs),
        (crate::rbac::GROUP, kind) => crate::rbac::validate_update(kind, obj, old, &mut errs),
        ("scheduling.k8s.io", "PriorityClass") => {
            if obj.get("value") != old.get("value") {
                errs.push(FieldError::forbidden(
                    "value",
                    "may not be changed in an update.",
                ));
            }
            field_immutable(
                &mut errs,
                "preemptionPolicy",
                obj.get("preemptionPolicy"),
                old.get("preemptionPolicy"),
            );
        }
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet") => field_immutable(
            &mut errs,
            "spec.selector",
            spec_ptr(obj, "/spec/selector"),
            spec_ptr(old, "/spec/selector"),
        ),
        ("apps", "StatefulSet") => {
            // Only the fields named in the upstream message may change.
            let strip = |v: &Value| {
                let mut spec = normalized(v.get("spec").unwrap_or(&Value::Null));
                if let Some(m) = spec.as_object_mut() {
                    for k in [
                        "replicas",
                        "ordinals",
                        "template",
                        "updateStrategy",
                        "revisionHistoryLimit",
                        "persistentVolumeClaimRetentionPolicy",
                        "minReadySeconds",
                    ] {
                        m.remove(k);
                    }
                }
                spec
            };
            if strip(obj) != strip(old) {
                errs.push(FieldError::forbidden(
                    "spec",
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
                ));
            }
        }
        ("batch", "Job") => {
            field_immutable(
                &mut errs,
                "spec.selector",
                spec_ptr(obj, "/spec/selector"),
                spec_ptr(old, "/spec/selector"),
            );
            field_immutable(
                &mut errs,
                "spec.completionMode",
                spec_ptr(obj, "/spec/completionMode"),
                spec_ptr(old, "/spec/completionMode"),
            );
            // The template may change only while the job is (and was) suspended.
            let suspended = old.at("/spec/suspend").and_then(Value::as_bool) == Some(true);
            if !suspended {
                field_immutable(
                    &mut errs,
                    "spec.template",
                    spec_ptr(obj, "/spec/template"),
                    spec_ptr(old, "/spec/template"),
                );
            }
        }
        ("", "PersistentVolumeClaim") => {
            let strip = |v: &Value| {
                let mut spec = normalized(v.get("spec").unwrap_or(&Value::Null));
                if let Some(m) = spec.as_object_mut() {
                    m.remove("resources");
                    m.remove("volumeAttributesClassName");
                    // volumeName may be set once (binding).
                    if old
                        .at("/spec/volumeName")
                        .is_none_or(|v| v.as_str() == Some(""))
                    {
                        m.remove("volumeName");
                    }
                }
                spec
            };
            if strip(obj) != strip(old) {
                errs.push(FieldError::forbidden(
                    "spec",
                    "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
                ));
            }
        }
        // `ValidatePersistentVolumeUpdate`: the volume source never changes.
        ("", "PersistentVolume") => {
            let source = |v: &Value| {
                let spec = normalized(v.get("spec").unwrap_or(&Value::Null));
                PV_SOURCES
                    .iter()
                    .map(|k| spec.get(*k).cloned().unwrap_or(Value::Null))
                    .collect::<Vec<_>>()
            };
            if source(obj) != source(old) {
                errs.push(FieldError::forbidden(
                    "spec.persistentvolumesource",
                    "spec.persistentvolumesource is immutable after creation",
                ));
            }
        }
        // `ValidateStorageClassUpdate`.
        ("storage.k8s.io", "StorageClass") => {
            if normalized(obj.get("parameters").unwrap_or(&Value::Null))
                != normalized(old.get("parameters").unwrap_or(&Value::Null))
            {
                errs.push(FieldError::forbidden(
                    "parameters",
                    "updates to parameters are forbidden.",
                ));
            }
            if s_or_empty(obj, "provisioner") != s_or_empty(old, "provisioner") {
                errs.push(FieldError::forbidden(
                    "provisioner",
                    "updates to provisioner are forbidden.",
                ));
            }
            if s_or_empty(obj, "reclaimPolicy") != s_or_empty(old, "reclaimPolicy") {
                errs.push(FieldError::forbidden(
                    "reclaimPolicy",
                    "updates to reclaimPolicy are forbidden.",
                ));
            }
            if s_or_empty(obj, "volumeBindingMode") != s_or_empty(old, "volumeBindingMode") {
                errs.push(FieldError::forbidden(
                    "volumeBindingMode",
                    "field is immutable",
                ));
            }
        }
        _ => {}
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::lookup_kind;
    use serde_json::json;

    fn ri(api_version: &str, kind: &str) -> &'static ResourceInfo {
        lookup_kind(api_version, kind).unwrap()
    }

    /// A defaulted, valid pod.
    fn pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "containers": [{"name": "app", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent",
                                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                                "ports": [{"containerPort": 80, "protocol": "TCP"}], "resources": {}}],
                "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "terminationGracePeriodSeconds": 30,
                "schedulerName": "default-scheduler", "serviceAccountName": "default", "securityContext": {},
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
            }
        })
    }

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 2, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod()["spec"].clone()}
            }
        })
    }

    fn set(v: &mut Value, ptr: &str, new: Value) {
        *v.pointer_mut(ptr).unwrap_or_else(|| panic!("no {ptr}")) = new;
    }

    fn messages(ri: &ResourceInfo, obj: &Value) -> Vec<String> {
        match validate_create(ri, obj) {
            Ok(()) => vec![],
            Err(errs) => errs.iter().map(FieldError::message).collect(),
        }
    }

    #[test]
    fn valid_objects_pass() {
        assert_eq!(messages(ri("v1", "Pod"), &pod()), Vec::<String>::new());
        assert_eq!(
            messages(ri("apps/v1", "Deployment"), &deployment()),
            Vec::<String>::new()
        );
        let node = json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}]}});
        assert_eq!(messages(ri("v1", "Node"), &node), Vec::<String>::new());
        let ns = json!({"metadata": {"name": "team-a"}, "spec": {"finalizers": ["kubernetes"]}});
        assert_eq!(messages(ri("v1", "Namespace"), &ns), Vec::<String>::new());
    }

    /// Table: (case, kind, mutation of a valid object, expected messages exactly).
    #[test]
    fn create_table() {
        let pods = ri("v1", "Pod");
        type Mutation = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(&str, &ResourceInfo, Value, Mutation, Vec<&str>)> = vec![
            (
                "template priority class name",
                ri("apps/v1", "Deployment"),
                deployment(),
                Box::new(|d| {
                    d["spec"]["template"]["spec"]["priorityClassName"] = json!("High_Prio");
                }),
                vec![
                    "spec.template.spec.priorityClassName: Invalid value: \"High_Prio\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ],
            ),
            (
                "priority class in the reserved prefix",
                ri("scheduling.k8s.io/v1", "PriorityClass"),
                json!({"metadata": {"name": "system-cluster-critical"}, "value": 2_000_000_000, "globalDefault": true}),
                Box::new(|_| {}),
                vec![
                    "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: globalDefault of system-cluster-critical PriorityClass must be false",
                ],
            ),
            (
                "uppercase name",
                pods,
                pod(),
                Box::new(|p| set(p, "/metadata/name", json!("Foo"))),
                vec![
                    "metadata.name: Invalid value: \"Foo\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ],
            ),
            (
                "missing name",
                pods,
                pod(),
                Box::new(|p| {
                    p["metadata"].as_object_mut().unwrap().remove("name");
                }),
                vec!["metadata.name: Required value: name or generateName is required"],
            ),
            (
                "generateName alone: the server fills the name before validating",
                pods,
                pod(),
                Box::new(|p| {
                    p["metadata"].as_object_mut().unwrap().remove("name");
                    p["metadata"]["generateName"] = json!("web-");
                }),
                vec!["metadata.name: Required value: name or generateName is required"],
            ),
            (
                "container without a name",
                pods,
                pod(),
                Box::new(|p| {
                    p["spec"]["containers"][0]
                        .as_object_mut()
                        .unwrap()
                        .remove("name");
                }),
                vec!["spec.containers[0].name: Required value"],
            ),
            (
                "liveness and startup probes need successThreshold 1",
                pods,
                pod(),
                Box::new(|p| {
                    p["spec"]["containers"][0]["livenessProbe"] =
                        json!({"httpGet": {"port": 80}, "successThreshold": 2});
                    p["spec"]["containers"][0]["startupProbe"] =
                        json!({"exec": {"command": ["true"]}, "successThreshold": 3});
                    p["spec"]["containers"][0]["readinessProbe"] =
                        json!({"tcpSocket": {"port": 80}, "successThreshold": 2});
                }),
                vec![
                    "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
                    "spec.containers[0].startupProbe.successThreshold: Invalid value: 3: must be 1",
                ],
            ),
            (
                "a probe has exactly one handler and no negative timing",
                pods,
                pod(),
                Box::new(|p| {
                    p["spec"]["containers"][0]["livenessProbe"] = json!({"periodSeconds": -1});
                    p["spec"]["containers"][0]["readinessProbe"] = json!({"exec": {"command": ["true"]}, "httpGet": {"port": 80}, "terminationGracePeriodSeconds": 5});
                }),
                vec![
                    "spec.containers[0].livenessProbe: Required value: must specify a handler type",
                    "spec.containers[0].livenessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0",
                    "spec.containers[0].readinessProbe.httpGet: Forbidden: may not specify more than 1 handler type",
                    "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes",
                ],
            ),
            (
                "container without an image",
                pods,
                pod(),
                Box::new(|p| set(p, "/spec/containers/0/image", json!(""))),
                vec!["spec.containers[0].image: Required value"],
            ),
            (
                "no containers",
                pods,
                pod(),
                Box::new(|p| set(p, "/spec/containers", json!([]))),
                vec!["spec.containers: Required value"],
            ),
            (
                "duplicate container names",
                pods,
                pod(),
                Box::new(|p| {
                    let c = p["spec"]["containers"][0].clone();
                    p["spec"]["containers"].as_array_mut().unwrap().push(c);
                }),
                vec!["spec.containers[1].name: Duplicate value: \"app\""],
            ),
            (
                "bad restartPolicy",
                pods,
                pod(),
                Box::new(|p| set(p, "/spec/restartPolicy", json!("Sometimes"))),
                vec![
                    "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                ],
            ),
            (
                "tolerationSeconds without NoExecute",
                pods,
                pod(),
                Box::new(|p| set(p, "/spec/tolerations/0/effect", json!("NoSchedule"))),
                vec![
                    "spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
                ],
            ),
            (
                "empty key needs Exists",
                pods,
                pod(),
                Box::new(|p| {
                    set(
                        p,
                        "/spec/tolerations",
                        json!([{"operator": "Equal", "value": "x"}]),
                    )
                }),
                vec![
                    "spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
                ],
            ),
            (
                "bad toleration operator and effect",
                pods,
                pod(),
                Box::new(|p| {
                    set(
                        p,
                        "/spec/tolerations",
                        json!([{"key": "k", "operator": "Maybe", "effect": "Sometimes"}]),
                    )
                }),
                vec![
                    "spec.tolerations[0].operator: Unsupported value: \"Maybe\": supported values: \"Equal\", \"Exists\"",
                    "spec.tolerations[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
                ],
            ),
            (
                "bad label key and value",
                pods,
                pod(),
                Box::new(|p| set(p, "/metadata/labels", json!({"a/b/c": "ok", "k": "-x"}))),
                vec![
                    "metadata.labels: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                    "metadata.labels: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                ],
            ),
            (
                "bad container port",
                pods,
                pod(),
                Box::new(|p| set(p, "/spec/containers/0/ports/0/containerPort", json!(70000))),
                vec![
                    "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                ],
            ),
            (
                "request above limit",
                pods,
                pod(),
                Box::new(|p| {
                    p["spec"]["containers"][0]["resources"] =
                        json!({"limits": {"cpu": "1"}, "requests": {"cpu": "1500m"}})
                }),
                vec![
                    "spec.containers[0].resources.requests: Invalid value: \"1500m\": must be less than or equal to cpu limit of 1",
                ],
            ),
            (
                "unparsable quantity",
                pods,
                pod(),
                Box::new(|p| {
                    p["spec"]["containers"][0]["resources"] =
                        json!({"requests": {"memory": "lots"}})
                }),
                vec![
                    "spec.containers[0].resources.requests[memory]: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                ],
            ),
            (
                "configmap key",
                ri("v1", "ConfigMap"),
                json!({"metadata": {"name": "c", "namespace": "default"}, "data": {"ok.key": "1", "bad key": "2"}}),
                Box::new(|_| {}),
                vec![
                    "data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                ],
            ),
            (
                "port names",
                pods,
                pod(),
                Box::new(|p| {
                    p["spec"]["containers"][0]["ports"] = json!([
                        {"name": "http", "containerPort": 80, "protocol": "TCP"},
                        {"name": "http", "containerPort": 81, "protocol": "TCP"},
                        {"name": "8080", "containerPort": 82, "protocol": "TCP"}
                    ])
                }),
                vec![
                    "spec.containers[0].ports[1].name: Duplicate value: \"http\"",
                    "spec.containers[0].ports[2].name: Invalid value: \"8080\": must contain at least one letter (a-z)",
                ],
            ),
            (
                "image with whitespace",
                pods,
                pod(),
                Box::new(|p| set(p, "/spec/containers/0/image", json!(" nginx"))),
                vec![
                    "spec.containers[0].image: Invalid value: \" nginx\": must not have leading or trailing whitespace",
                ],
            ),
            (
                "volume mount without volume",
                pods,
                pod(),
                Box::new(|p| {
                    p["spec"]["containers"][0]["volumeMounts"] =
                        json!([{"name": "data", "mountPath": "/data"}])
                }),
                vec!["spec.containers[0].volumeMounts[0].name: Not found: \"data\""],
            ),
            (
                "finalizer not qualified",
                pods,
                pod(),
                Box::new(|p| p["metadata"]["finalizers"] = json!(["custom"])),
                vec![
                    "metadata.finalizers[0]: Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified",
                ],
            ),
            (
                "owner reference without uid",
                pods,
                pod(),
                Box::new(|p| {
                    p["metadata"]["ownerReferences"] =
                        json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs"}])
                }),
                vec!["metadata.ownerReferences.uid: Invalid value: \"\": must not be empty"],
            ),
            (
                "duplicate taint",
                ri("v1", "Node"),
                json!({"metadata": {"name": "n1"}}),
                Box::new(
                    |n| n["spec"] = json!({"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "value": "x", "effect": "NoSchedule"}]}),
                ),
                vec![
                    "spec.taints[1]: Duplicate value: {\"key\":\"a\",\"value\":\"x\",\"effect\":\"NoSchedule\"}: taints must be unique by key and effect pair",
                ],
            ),
            (
                "taint without effect",
                ri("v1", "Node"),
                json!({"metadata": {"name": "n1"}}),
                Box::new(|n| n["spec"] = json!({"taints": [{"key": "a"}]})),
                vec!["spec.taints[0].effect: Required value"],
            ),
            (
                "namespace name is a DNS label",
                ri("v1", "Namespace"),
                json!({"metadata": {"name": "a.b"}}),
                Box::new(|_| {}),
                vec![
                    "metadata.name: Invalid value: \"a.b\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                ],
            ),
            (
                "deployment negative replicas",
                ri("apps/v1", "Deployment"),
                deployment(),
                Box::new(|d| set(d, "/spec/replicas", json!(-1))),
                vec!["spec.replicas: Invalid value: -1: must be greater than or equal to 0"],
            ),
            (
                "deployment selector mismatch",
                ri("apps/v1", "Deployment"),
                deployment(),
                Box::new(|d| set(d, "/spec/template/metadata/labels", json!({"app": "other"}))),
                vec![
                    "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`",
                ],
            ),
            (
                "deployment without selector",
                ri("apps/v1", "Deployment"),
                deployment(),
                Box::new(|d| {
                    d["spec"].as_object_mut().unwrap().remove("selector");
                }),
                vec!["spec.selector: Required value"],
            ),
            (
                "deployment template restartPolicy",
                ri("apps/v1", "Deployment"),
                deployment(),
                Box::new(|d| set(d, "/spec/template/spec/restartPolicy", json!("Never"))),
                vec![
                    "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
                ],
            ),
            (
                "deployment template container name",
                ri("apps/v1", "Deployment"),
                deployment(),
                Box::new(|d| {
                    set(
                        d,
                        "/spec/template/spec/containers/0/name",
                        json!("Bad_Name"),
                    )
                }),
                vec![
                    "spec.template.spec.containers[0].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                ],
            ),
            (
                "deployment maxSurge and maxUnavailable 0",
                ri("apps/v1", "Deployment"),
                deployment(),
                Box::new(|d| {
                    set(
                        d,
                        "/spec/strategy/rollingUpdate",
                        json!({"maxSurge": 0, "maxUnavailable": "0%"}),
                    )
                }),
                vec![
                    "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": may not be 0 when `maxSurge` is 0",
                ],
            ),
            (
                "deployment Recreate with rollingUpdate",
                ri("apps/v1", "Deployment"),
                deployment(),
                Box::new(|d| set(d, "/spec/strategy/type", json!("Recreate"))),
                vec![
                    "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'",
                ],
            ),
            (
                "job restartPolicy Always",
                ri("batch/v1", "Job"),
                {
                    let mut j = deployment();
                    j["spec"] = json!({"selector": {"matchLabels": {"app": "web"}}, "template": j["spec"]["template"].clone(), "backoffLimit": 6});
                    j
                },
                Box::new(|_| {}),
                vec![
                    "spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\"",
                ],
            ),
            (
                "lease duration",
                ri("coordination.k8s.io/v1", "Lease"),
                json!({"metadata": {"name": "n1", "namespace": "kube-node-lease"}}),
                Box::new(|l| l["spec"] = json!({"leaseDurationSeconds": 0})),
                vec!["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"],
            ),
            (
                "pvc access modes and storage",
                ri("v1", "PersistentVolumeClaim"),
                json!({"metadata": {"name": "data", "namespace": "default"}}),
                Box::new(|p| p["spec"] = json!({"accessModes": ["ReadWriteSometimes"]})),
                vec![
                    "spec.accessModes: Unsupported value: \"ReadWriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
                    "spec.resources[storage]: Required value",
                ],
            ),
            (
                "pvc ReadWriteOncePod with another mode",
                ri("v1", "PersistentVolumeClaim"),
                json!({"metadata": {"name": "data", "namespace": "default"}}),
                Box::new(|p| {
                    p["spec"] = json!({"accessModes": ["ReadWriteOncePod", "ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}})
                }),
                vec![
                    "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
                ],
            ),
            (
                "pv ReadWriteOncePod with another mode",
                ri("v1", "PersistentVolume"),
                json!({"metadata": {"name": "pv1"}}),
                Box::new(|p| {
                    p["spec"] = json!({"accessModes": ["ReadOnlyMany", "ReadWriteOncePod"],
                        "capacity": {"storage": "1Gi"},
                        "csi": {"driver": "csi.klab.dev", "volumeHandle": "h"}})
                }),
                vec![
                    "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
                ],
            ),
            (
                "pdb both set",
                ri("policy/v1", "PodDisruptionBudget"),
                json!({"metadata": {"name": "p", "namespace": "default"}}),
                Box::new(|p| p["spec"] = json!({"minAvailable": 1, "maxUnavailable": "150%"})),
                vec![
                    "spec: Invalid value: {\"minAvailable\":1,\"maxUnavailable\":\"150%\"}: minAvailable and maxUnavailable cannot be both set",
                    "spec.maxUnavailable: Invalid value: \"150%\": must not be greater than 100%",
                ],
            ),
            (
                "event namespace mismatch",
                ri("v1", "Event"),
                json!({"metadata": {"name": "e", "namespace": "default"}, "involvedObject": {"kind": "Pod", "namespace": "other", "name": "p"}}),
                Box::new(|_| {}),
                vec![
                    "involvedObject.namespace: Invalid value: \"other\": does not match event.namespace",
                ],
            ),
            (
                "node event in default ok",
                ri("v1", "Event"),
                json!({"metadata": {"name": "n1.1", "namespace": "default"}, "involvedObject": {"kind": "Node", "name": "n1"}}),
                Box::new(|_| {}),
                vec![],
            ),
            (
                "namespaced object without namespace",
                ri("v1", "ConfigMap"),
                json!({"metadata": {"name": "c"}}),
                Box::new(|_| {}),
                vec!["metadata.namespace: Required value"],
            ),
            (
                "cluster-scoped object with namespace",
                ri("v1", "Node"),
                json!({"metadata": {"name": "n1", "namespace": "x"}}),
                Box::new(|_| {}),
                vec!["metadata.namespace: Forbidden: not allowed on this type"],
            ),
        ];
        for (name, ri, mut obj, mutate, want) in cases {
            mutate(&mut obj);
            assert_eq!(messages(ri, &obj), want, "{name}");
        }
    }

    #[test]
    fn invalid_message_forms_and_causes() {
        let pods = ri("v1", "Pod");
        let one = vec![FieldError::required("spec.containers[0].name", "")];
        assert_eq!(
            invalid_message(pods, "x", &one),
            "Pod \"x\" is invalid: spec.containers[0].name: Required value"
        );
        let two = vec![
            FieldError::required("spec.containers[0].name", ""),
            FieldError::invalid(
                "spec.replicas",
                json!(-1),
                "must be greater than or equal to 0",
            ),
            FieldError::required("spec.containers[0].name", ""),
        ];
        assert_eq!(
            invalid_message(ri("apps/v1", "Deployment"), "web", &two),
            "Deployment.apps \"web\" is invalid: [spec.containers[0].name: Required value, spec.replicas: Invalid value: -1: must be greater than or equal to 0]"
        );
        assert_eq!(invalid_message(pods, "x", &[]), "Pod \"x\" is invalid");
        let c = causes(&two[1..2]);
        assert_eq!(
            c[0],
            json!({"reason": "FieldValueInvalid", "message": "Invalid value: -1: must be greater than or equal to 0", "field": "spec.replicas"})
        );
        let reasons: Vec<&str> = [
            FieldError::required("a", ""),
            FieldError::invalid("a", json!(1), ""),
            FieldError::not_supported("a", json!("x"), &[]),
            FieldError::duplicate("a", json!("x")),
            FieldError::forbidden("a", ""),
            FieldError::too_long("a", 1),
            FieldError::not_found("a", json!("x")),
        ]
        .iter()
        .map(FieldError::reason)
        .collect();
        assert_eq!(
            reasons,
            vec![
                "FieldValueRequired",
                "FieldValueInvalid",
                "FieldValueNotSupported",
                "FieldValueDuplicate",
                "FieldValueForbidden",
                "FieldValueTooLong",
                "FieldValueNotFound"
            ]
        );
        assert_eq!(
            FieldError::too_long("metadata.annotations", 262144).message(),
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
        assert_eq!(
            FieldError::invalid("x", Value::Null, "bad").message(),
            "x: Invalid value: null: bad"
        );
    }

    fn update_messages(ri: &ResourceInfo, new: &Value, old: &Value) -> Vec<String> {
        match validate_update(ri, new, old) {
            Ok(()) => vec![],
            Err(errs) => errs.iter().map(FieldError::message).collect(),
        }
    }

    /// A pod stored before a default existed (no `enableServiceLinks`, no container
    /// `terminationMessagePolicy`) is compared as upstream decodes it, defaulted: the same pod
    /// with the defaults is not a change of its spec, while a real change still is.
    #[test]
    fn an_update_is_compared_against_the_defaulted_stored_object() {
        let pods = ri("v1", "Pod");
        let mut stored = pod();
        stored["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("terminationMessagePolicy");
        stored["spec"].as_object_mut().unwrap().remove("dnsPolicy");
        let mut new = stored.clone();
        crate::defaults::default_object(pods, &mut new);
        assert_ne!(new, stored, "defaulting fills the absent fields");
        assert_eq!(validate_defaulted_update(pods, &new, &stored), Ok(()));
        new["spec"]["restartPolicy"] = json!("Never");
        let errs = validate_defaulted_update(pods, &new, &stored).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0]
                .message()
                .starts_with("spec: Forbidden: pod updates may not change fields other than"),
            "{}",
            errs[0].message()
        );
    }

    #[test]
    fn pod_update_rules() {
        let pods = ri("v1", "Pod");
        let old = pod();
        let check = |mutate: &dyn Fn(&mut Value)| {
            let mut new = old.clone();
            mutate(&mut new);
            update_messages(pods, &new, &old)
        };
        // Allowed.
        assert!(check(&|p| set(p, "/spec/containers/0/image", json!("nginx:1.26"))).is_empty());
        assert!(check(&|p| p["spec"]["activeDeadlineSeconds"] = json!(100)).is_empty());
        assert!(
            check(&|p| p["spec"]["tolerations"]
                .as_array_mut()
                .unwrap()
                .push(json!({"key": "x", "operator": "Exists"})))
            .is_empty()
        );
        assert!(check(&|p| set(p, "/spec/tolerations/0/tolerationSeconds", json!(10))).is_empty());
        assert!(check(&|p| set(p, "/metadata/labels", json!({"app": "web", "x": "y"}))).is_empty());
        // `hostNetwork: false` is the same Go value as absent.
        assert!(check(&|p| p["spec"]["hostNetwork"] = json!(false)).is_empty());
        // Forbidden.
        let msgs = check(&|p| set(p, "/spec/restartPolicy", json!("Never")));
        assert_eq!(msgs.len(), 1);
        assert!(
            msgs[0].starts_with(&format!("spec: Forbidden: {POD_UPDATE_FORBIDDEN}")),
            "{msgs:?}"
        );
        assert!(msgs[0].ends_with("changed: spec.restartPolicy"), "{msgs:?}");
        assert_eq!(
            check(&|p| set(p, "/spec/tolerations", json!([]))),
            vec![
                "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
            ]
        );
        assert_eq!(
            check(&|p| set(p, "/spec/containers/0/image", json!(""))),
            vec!["spec.containers[0].image: Required value"]
        );
        assert_eq!(
            check(&|p| set(p, "/metadata/name", json!("other"))),
            vec!["metadata.name: Invalid value: \"other\": field is immutable"]
        );
        // activeDeadlineSeconds may only decrease.
        let mut with_deadline = old.clone();
        with_deadline["spec"]["activeDeadlineSeconds"] = json!(100);
        let mut raised = with_deadline.clone();
        raised["spec"]["activeDeadlineSeconds"] = json!(200);
        assert_eq!(
            update_messages(pods, &raised, &with_deadline),
            vec![
                "spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"
            ]
        );
        let mut lowered = with_deadline.clone();
        lowered["spec"]["activeDeadlineSeconds"] = json!(50);
        assert!(update_messages(pods, &lowered, &with_deadline).is_empty());
        assert_eq!(
            update_messages(pods, &old, &with_deadline),
            vec![
                "spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value"
            ]
        );
        // A stored pod that predates defaulting compares equal to its defaulted update.
        let mut bare = json!({"metadata": {"name": "web", "namespace": "default"},
                              "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}});
        let mut next = bare.clone();
        crate::defaults::default_object(pods, &mut next);
        assert!(update_messages(pods, &next, &bare).is_empty());
        bare["spec"]["containers"][0]["image"] = json!("nginx:1.24");
        assert!(update_messages(pods, &next, &bare).is_empty());
        // An unchanged spec (a status write) is still held to activeDeadlineSeconds' range.
        let mut huge = old.clone();
        huge["spec"]["activeDeadlineSeconds"] = json!(i64::from(i32::MAX) + 1);
        assert!(
            update_messages(pods, &huge, &huge).contains(
                &"spec.activeDeadlineSeconds: Invalid value: 2147483648: must be between 0 and 2147483647, inclusive".to_string()
            ),
            "{:?}",
            update_messages(pods, &huge, &huge)
        );
        // Binding (unset -> set) passes; once set, nodeName cannot change.
        let mut bound = old.clone();
        bound["spec"]["nodeName"] = json!("n1");
        assert!(update_messages(pods, &bound, &old).is_empty());
        let mut bound = old.clone();
        bound["spec"]["nodeName"] = json!("n1");
        let mut moved = bound.clone();
        moved["spec"]["nodeName"] = json!("n2");
        assert!(update_messages(pods, &moved, &bound)[0].starts_with("spec: Forbidden"));
    }

    #[test]
    fn workload_update_rules() {
        let deploy = ri("apps/v1", "Deployment");
        let old = deployment();
        let mut scaled = old.clone();
        scaled["spec"]["replicas"] = json!(5);
        scaled["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
        assert!(update_messages(deploy, &scaled, &old).is_empty());
        let mut resel = old.clone();
        resel["spec"]["selector"] = json!({"matchLabels": {"app": "web", "v": "2"}});
        resel["spec"]["template"]["metadata"]["labels"] = json!({"app": "web", "v": "2"});
        assert_eq!(
            update_messages(deploy, &resel, &old),
            vec![
                "spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"web\",\"v\":\"2\"}}: field is immutable"
            ]
        );

        let sts = ri("apps/v1", "StatefulSet");
        let mut old_sts = deployment();
        old_sts["spec"] = json!({
            "replicas": 1, "serviceName": "web", "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "selector": {"matchLabels": {"app": "web"}}, "template": old["spec"]["template"].clone()
        });
        assert!(update_messages(sts, &old_sts, &old_sts).is_empty());
        let mut new_sts = old_sts.clone();
        new_sts["spec"]["replicas"] = json!(3);
        assert!(update_messages(sts, &new_sts, &old_sts).is_empty());
        new_sts["spec"]["serviceName"] = json!("other");
        assert!(
            update_messages(sts, &new_sts, &old_sts)[0]
                .starts_with("spec: Forbidden: updates to statefulset spec")
        );

        let job = ri("batch/v1", "Job");
        let mut old_job = deployment();
        old_job["spec"] = json!({"selector": {"matchLabels": {"app": "web"}}, "template": old["spec"]["template"].clone()});
        old_job["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        let mut new_job = old_job.clone();
        new_job["spec"]["template"]["spec"]["containers"][0]["image"] = json!("x");
        let msgs = update_messages(job, &new_job, &old_job);
        assert_eq!(msgs.len(), 1);
        assert!(
            msgs[0].starts_with("spec.template: Invalid value: ")
                && msgs[0].ends_with(": field is immutable"),
            "{msgs:?}"
        );
        old_job["spec"]["suspend"] = json!(true);
        new_job["spec"]["suspend"] = json!(true);
        assert!(update_messages(job, &new_job, &old_job).is_empty());
    }

    #[test]
    fn cronjob_schedules_names_and_templates() {
        let cj = ri("batch/v1", "CronJob");
        let obj = |name: &str, spec: Value| json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec});
        let template = json!({"spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "Always",
                            "terminationMessagePolicy": "File"}],
            "dnsPolicy": "ClusterFirst"}}}});
        let msgs = |o: Value| -> Vec<String> {
            match validate_create(cj, &o) {
                Ok(()) => vec![],
                Err(errs) => errs.iter().map(FieldError::message).collect(),
            }
        };
        assert_eq!(
            msgs(obj(
                "ok",
                json!({"schedule": "*/5 * * * *", "jobTemplate": template})
            )),
            Vec::<String>::new()
        );
        assert_eq!(
            msgs(obj(
                "bad",
                json!({"schedule": "61 * * * *", "jobTemplate": template})
            )),
            [
                "spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61"
            ]
        );
        assert_eq!(
            msgs(obj(
                "tz",
                json!({"schedule": "TZ=UTC 0 * * * *", "jobTemplate": template})
            )),
            [
                "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
            ]
        );
        // spec.timeZone: IANA names from the tz database, upstream's messages otherwise.
        for (tz, want) in [
            ("Europe/Berlin", vec![]),
            ("America/New_York", vec![]),
            (
                "Mars/Olympus",
                vec![
                    "spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus",
                ],
            ),
            (
                "",
                vec![
                    "spec.timeZone: Invalid value: \"\": timeZone must be nil or non-empty string",
                ],
            ),
            (
                "Local",
                vec![
                    "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
                ],
            ),
        ] {
            assert_eq!(
                msgs(obj(
                    "zoned",
                    json!({"schedule": "0 9 * * *", "timeZone": tz, "jobTemplate": template})
                )),
                want,
                "{tz:?}"
            );
        }
        let long = "x".repeat(53);
        assert_eq!(
            msgs(obj(
                &long,
                json!({"schedule": "@hourly", "jobTemplate": template})
            )),
            [format!(
                "metadata.name: Invalid value: \"{long}\": must be no more than 52 characters"
            )]
        );
        let m = msgs(obj(
            "p",
            json!({"schedule": "@daily", "concurrencyPolicy": "Sometimes",
            "startingDeadlineSeconds": -1, "jobTemplate": template}),
        ));
        assert!(m.contains(&"spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"".to_string()), "{m:?}");
        assert!(
            m.iter()
                .any(|x| x.starts_with("spec.startingDeadlineSeconds: Invalid value: -1")),
            "{m:?}"
        );
        let mut always = template.clone();
        always["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        let m = msgs(obj(
            "a",
            json!({"schedule": "@daily", "jobTemplate": always}),
        ));
        assert!(
            m.iter()
                .all(|x| x.starts_with("spec.jobTemplate.spec.template.spec.restartPolicy")),
            "{m:?}"
        );
        assert!(!m.is_empty());
    }
}
