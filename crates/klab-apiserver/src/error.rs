//! API errors as `metav1.Status` bodies with upstream reasons, codes and message templates (§b.11).
//! Every failure leaves the API server through here, including body-decode errors, so kubectl and
//! kube-rs always get a Status they can print.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::registry::ResourceInfo;

/// One `details.causes[]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    pub reason: String,
    pub message: String,
    pub field: String,
}

/// An API failure: HTTP code, Status reason, message and optional details.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub(crate) fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    fn details_for(ri: &ResourceInfo, name: &str) -> Value {
        let mut d = json!({"name": name, "kind": ri.plural});
        if !ri.group.is_empty() {
            d["group"] = json!(ri.group);
        }
        d
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// The watch cache's answer to a read at a revision the store has not reached after waiting
    /// (`storage.NewTooLargeResourceVersionError`: a 504 Timeout with a retry hint).
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        Self::new(
            504,
            "Timeout",
            format!("Too large resource version: {requested}, current: {current}"),
        )
        .with_details(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1
        }))
    }

    pub fn not_found(ri: &ResourceInfo, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", ri.qualified_plural(), name),
        )
        .with_details(Self::details_for(ri, name))
    }

    /// The generic 404 for paths that name no served resource.
    pub fn no_such_path() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// `namespaces "x" not found`, for writes into a missing namespace.
    pub fn namespace_not_found(ns: &str) -> Self {
        Self::new(404, "NotFound", format!("namespaces \"{ns}\" not found"))
            .with_details(json!({"name": ns, "kind": "namespaces"}))
    }

    pub fn already_exists(ri: &ResourceInfo, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", ri.qualified_plural(), name),
        )
        .with_details(Self::details_for(ri, name))
    }

    pub fn conflict(ri: &ResourceInfo, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply your changes to the latest version and try again",
                ri.qualified_plural(),
                name
            ),
        )
        .with_details(Self::details_for(ri, name))
    }

    /// A failed delete/update precondition (`Precondition failed: UID in precondition: …`).
    pub fn precondition_failed(ri: &ResourceInfo, name: &str, what: String) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                ri.qualified_plural(),
                name,
                what
            ),
        )
        .with_details(Self::details_for(ri, name))
    }

    pub fn invalid(ri: &ResourceInfo, name: &str, message: String, causes: Vec<Cause>) -> Self {
        let mut d = json!({"name": name, "kind": ri.kind});
        if !ri.group.is_empty() {
            d["group"] = json!(ri.group);
        }
        d["causes"] = Value::Array(
            causes
                .into_iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect(),
        );
        Self::new(422, "Invalid", message).with_details(d)
    }

    pub fn method_not_allowed(verb: &str, ri: &ResourceInfo) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!(
                "{verb} is not supported on resources of kind \"{}\"",
                ri.plural
            ),
        )
    }

    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn too_large() -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            "Request entity too large: limit is 3145728",
        )
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn internal(message: impl std::fmt::Display) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
    }

    pub fn too_many_requests(message: impl Into<String>, details: Value) -> Self {
        Self::new(429, "TooManyRequests", message).with_details(details)
    }

    /// The Status JSON body.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        // An error that is not an API status has no reason (`StatusReasonUnknown`, omitted):
        // kubectl prints it as `Error from server: <message>`.
        if self.reason.is_empty()
            && let Some(m) = s.as_object_mut()
        {
            m.remove("reason");
        }
        s
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.to_status()).unwrap_or_default();
        (
            code,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}

impl From<klab_store::StoreError> for ApiError {
    fn from(e: klab_store::StoreError) -> Self {
        use klab_store::StoreError as E;
        match e {
            E::Compacted {
                requested,
                compacted,
            } => ApiError::expired(format!(
                "too old resource version: {requested} ({compacted})"
            )),
            E::FutureRevision { requested, current } => ApiError::new(
                504,
                "Timeout",
                format!("Too large resource version: {requested}, current: {current}"),
            ),
            other => ApiError::internal(other),
        }
    }
}
