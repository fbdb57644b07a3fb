//! Seams between the request path and the per-kind rules (defaulting, validation, OpenAPI routes).
//! TEMPORARY: minimal rules until `defaults`, `validation` and `openapi` land; then these forward.

use serde_json::{Value, json};

use crate::registry::ResourceInfo;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    Required,
    Invalid,
}

#[derive(Debug, Clone)]
pub struct FieldError {
    pub kind: FieldErrorKind,
    pub field: String,
    pub bad_value: Option<Value>,
    pub detail: String,
}

impl FieldError {
    pub fn reason(&self) -> &'static str {
        match self.kind {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid => "FieldValueInvalid",
        }
    }
    pub fn message(&self) -> String {
        match self.kind {
            FieldErrorKind::Required => format!("{}: Required value", self.field),
            FieldErrorKind::Invalid => format!("{}: Invalid value: {}", self.field, self.detail),
        }
    }
}

pub fn invalid_message(ri: &ResourceInfo, name: &str, errs: &[FieldError]) -> String {
    let parts: Vec<String> = errs.iter().map(FieldError::message).collect();
    format!("{} \"{}\" is invalid: {}", ri.qualified_kind(), name, parts.join(", "))
}

pub fn validate_create(ri: &ResourceInfo, obj: &Value) -> Result<(), Vec<FieldError>> {
    let mut errs = Vec::new();
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    if !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.') {
        errs.push(FieldError { kind: FieldErrorKind::Invalid, field: "metadata.name".into(), bad_value: Some(json!(name)), detail: "a lowercase RFC 1123 subdomain".into() });
    }
    if ri.kind == "Pod" {
        if let Some(cs) = obj.pointer("/spec/containers").and_then(Value::as_array) {
            for (i, c) in cs.iter().enumerate() {
                if c.get("name").and_then(Value::as_str).unwrap_or("").is_empty() {
                    errs.push(FieldError { kind: FieldErrorKind::Required, field: format!("spec.containers[{i}].name"), bad_value: None, detail: String::new() });
                }
            }
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

pub fn validate_update(ri: &ResourceInfo, obj: &Value, _old: &Value) -> Result<(), Vec<FieldError>> {
    validate_create(ri, obj)
}

pub fn default_object(ri: &ResourceInfo, obj: &mut Value) {
    match ri.kind {
        "Pod" => {
            let spec = &mut obj["spec"];
            if spec.is_object() {
                for (k, v) in [("restartPolicy", json!("Always")), ("terminationGracePeriodSeconds", json!(30)), ("schedulerName", json!("default-scheduler"))] {
                    if spec.get(k).is_none() {
                        spec[k] = v;
                    }
                }
            }
        }
        "Namespace" if obj.get("status").is_none() => {
            obj["status"] = json!({"phase": "Active"});
            let name = obj.pointer("/metadata/name").cloned().unwrap_or(json!(""));
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        }
        "Deployment" => {
            let spec = &mut obj["spec"];
            if spec.get("strategy").is_none() {
                spec["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}});
            }
            if spec.get("revisionHistoryLimit").is_none() {
                spec["revisionHistoryLimit"] = json!(10);
            }
        }
        _ => {}
    }
}

pub fn default_pod_status_on_create(obj: &mut Value) {
    obj["status"] = json!({"phase": "Pending"});
}

pub fn default_job_selector(_obj: &mut Value, _uid: &str) {}

pub fn openapi_routes() -> axum::Router {
    axum::Router::new()
}
