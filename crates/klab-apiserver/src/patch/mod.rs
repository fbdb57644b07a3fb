//! PATCH bodies: JSON patch (RFC 6902), JSON merge patch (RFC 7386), strategic merge patch; apply
//! patches are decoded here and applied by `crate::apply` (server-side apply with field
//! ownership), except on `scale`, where the small Scale object is merged.

pub mod strategic;

use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::object::Pointer;
use crate::registry::ResourceInfo;

/// The patch formats a PATCH may carry, by Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    Strategic,
    Apply,
}

const ACCEPTED: [&str; 4] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
    "application/strategic-merge-patch+json",
];

impl PatchKind {
    pub fn from_content_type(ct: &str) -> ApiResult<Self> {
        let base = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match base.as_str() {
            "application/json-patch+json" => Ok(PatchKind::Json),
            "application/merge-patch+json" => Ok(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Ok(PatchKind::Apply),
            _ => Err(ApiError::unsupported_media_type(&ACCEPTED)),
        }
    }
}

/// Decodes a patch body: JSON for the three JSON forms, YAML (a superset) for apply.
pub fn decode_patch(kind: PatchKind, body: &[u8]) -> ApiResult<Value> {
    let v: Value = match kind {
        PatchKind::Apply => {
            let text =
                std::str::from_utf8(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
            crate::yaml::from_str(text)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
        }
        _ => serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
    };
    match kind {
        PatchKind::Json if !v.is_array() => Err(ApiError::bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        )),
        PatchKind::Json => {
            if v.as_array().map_or(0, Vec::len) > 10_000 {
                return Err(ApiError::new(
                    422,
                    "RequestEntityTooLarge",
                    "The allowed maximum operations in a JSON patch is 10000",
                ));
            }
            Ok(v)
        }
        _ if !v.is_object() => Err(ApiError::bad_request("the patch must be a JSON object")),
        _ => Ok(v),
    }
}

/// Whether a patch sets `metadata.resourceVersion`, which makes it a precondition.
pub fn pins_resource_version(kind: PatchKind, patch: &Value) -> bool {
    match kind {
        PatchKind::Json => patch.as_array().is_some_and(|ops| {
            ops.iter().any(|op| {
                op.get("path").and_then(Value::as_str) == Some("/metadata/resourceVersion")
                    && matches!(
                        op.get("op").and_then(Value::as_str),
                        Some("add" | "replace")
                    )
            })
        }),
        _ => patch
            .at("/metadata/resourceVersion")
            .is_some_and(|v| !v.is_null()),
    }
}

/// Applies a decoded patch to the current object (without its resourceVersion).
pub fn apply_patch(
    ri: &ResourceInfo,
    kind: PatchKind,
    current: &Value,
    patch: &Value,
) -> ApiResult<Value> {
    match kind {
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            let mut doc = current.clone();
            json_patch::patch(&mut doc, &ops).map_err(|e| {
                let _ = e;
                ApiError::new(
                    422,
                    "Invalid",
                    "the server rejected our request due to an error in our request",
                )
            })?;
            Ok(doc)
        }
        PatchKind::Merge | PatchKind::Apply => {
            let mut doc = current.clone();
            json_patch::merge(&mut doc, patch);
            Ok(doc)
        }
        PatchKind::Strategic => strategic::strategic_merge_patch(ri, current, patch)
            .map_err(|e| ApiError::new(422, "Invalid", e)),
    }
}
