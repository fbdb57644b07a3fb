//! Protobuf bodies (`application/vnd.kubernetes.protobuf`), as upstream's protobuf serializer
//! frames them: the 4-byte magic `k8s\x00`, then a `runtime.Unknown` whose `typeMeta` names the
//! object's `apiVersion`/`kind` and whose `raw` is the object's message (api-surface §b.1).
//!
//! kubectl 1.32+ sends every typed-client write this way (`kubectl create namespace|deployment|…`,
//! `kubectl run`) and client-go's core components ask for protobuf responses. Objects stay JSON
//! inside the server: a protobuf request is converted to JSON at the boundary and then follows
//! the same path as any JSON body; a response is converted just before it is written. The
//! message of a kind is found by upstream's package naming (`k8s.io.api.<group>.<version>.<Kind>`,
//! core for the legacy group), so a resource added to the registry gets protobuf with no code.
//!
//! Content negotiation follows upstream: JSON unless the client lists protobuf first; Tables and
//! metadata-only answers stay JSON (`meta.k8s.io` Table has no protobuf form in klab, and every
//! client asking for a Table lists JSON); error Statuses stay JSON, which client-go decodes by the
//! response's content type.

pub mod codec;
#[cfg(test)]
mod tests;

use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::registry::ResourceInfo;

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The content type of a protobuf watch stream (length-prefixed frames).
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// The prefix of every protobuf-encoded Kubernetes object.
pub const MAGIC: &[u8] = b"k8s\x00";

const META_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";

/// The proto message of `apiVersion`/`kind`, if the table has it: `k8s.io.api.core.v1.Pod`,
/// `k8s.io.api.apps.v1.Deployment`, `meta.k8s.io` kinds (and `DeleteOptions`/`Status` sent
/// under any group) in apimachinery's `meta/v1`, `metrics.k8s.io` in `k8s.io.metrics`.
pub fn message_for(api_version: &str, kind: &str) -> Option<String> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let mut candidates = Vec::new();
    match group {
        "" => candidates.push(format!("k8s.io.api.core.{version}.{kind}")),
        "meta.k8s.io" => {}
        "metrics.k8s.io" => {
            candidates.push(format!("k8s.io.metrics.pkg.apis.metrics.{version}.{kind}"))
        }
        g => {
            let package = g.split('.').next().unwrap_or(g);
            candidates.push(format!("k8s.io.api.{package}.{version}.{kind}"));
        }
    }
    // Option kinds (DeleteOptions, …) and Status travel under the group of the request.
    candidates.push(format!("{META_V1}.{kind}"));
    let table = codec::table();
    candidates
        .into_iter()
        .find(|c| table.messages.contains_key(c))
}

/// Whether a resource's objects (and lists) have a protobuf form.
pub fn supports(ri: &ResourceInfo) -> bool {
    message_for(&ri.api_version(), ri.kind).is_some()
}

/// `k8s\x00` + `runtime.Unknown{typeMeta, raw, contentEncoding, contentType}` for one object.
pub fn encode_envelope(api_version: &str, kind: &str, obj: &Value) -> Result<Vec<u8>, String> {
    let msg = message_for(api_version, kind)
        .ok_or_else(|| format!("{kind} in {api_version} has no protobuf form"))?;
    let raw = codec::encode(&msg, obj)?;
    let mut type_meta = Vec::new();
    codec::put_bytes(&mut type_meta, 1, api_version.as_bytes());
    codec::put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = MAGIC.to_vec();
    // Go's Unknown marshaller writes all four fields, the empty strings included.
    codec::put_bytes(&mut out, 1, &type_meta);
    codec::put_bytes(&mut out, 2, &raw);
    codec::put_bytes(&mut out, 3, b"");
    codec::put_bytes(&mut out, 4, b"");
    Ok(out)
}

/// Decodes an enveloped object into `(apiVersion, kind, object JSON)`.
pub fn decode_envelope(bytes: &[u8]) -> Result<(String, String, Value), String> {
    decode_envelope_at(bytes, 0)
}

pub(crate) fn decode_envelope_at(
    bytes: &[u8],
    depth: usize,
) -> Result<(String, String, Value), String> {
    let Some(body) = bytes.strip_prefix(MAGIC) else {
        return Err("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]".into());
    };
    if depth > 8 {
        return Err("protobuf envelopes nested too deeply".into());
    }
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    let mut encoding = String::new();
    let mut r = codec::Reader::new(body);
    while let Some((n, value)) = r.next_field()? {
        match (n, value) {
            (1, codec::Raw::Bytes(tm)) => {
                let mut tr = codec::Reader::new(tm);
                while let Some((tn, tv)) = tr.next_field()? {
                    if let codec::Raw::Bytes(s) = tv {
                        let s = String::from_utf8_lossy(s).into_owned();
                        match tn {
                            1 => api_version = s,
                            2 => kind = s,
                            _ => {}
                        }
                    }
                }
            }
            (2, codec::Raw::Bytes(b)) => raw = b,
            (3, codec::Raw::Bytes(b)) => encoding = String::from_utf8_lossy(b).into_owned(),
            (4, codec::Raw::Bytes(_)) => {}
            _ => return Err(format!("proto: wrong wireType for field {n} of Unknown")),
        }
    }
    if !encoding.is_empty() {
        return Err(format!("unsupported content encoding {encoding:?}"));
    }
    if kind.is_empty() {
        return Err("Object 'Kind' is missing in the protobuf envelope".into());
    }
    let msg = message_for(&api_version, &kind).ok_or_else(|| {
        format!("no kind \"{kind}\" is registered for version \"{api_version}\" in protobuf")
    })?;
    let obj = codec::decode(&msg, raw)?.unwrap_or_else(|| Value::Object(Default::default()));
    Ok((api_version, kind, obj))
}

/// A request body in protobuf, converted to the JSON the rest of the write path reads, with
/// `apiVersion`/`kind` from the envelope (checked against the URL by the caller as for JSON).
/// `expected` names the body's usual type in error messages (`Namespace in version "v1"`).
pub fn decode_request(
    expected_kind: &str,
    expected_version: &str,
    body: &[u8],
) -> ApiResult<Value> {
    let prefix = format!(
        "{expected_kind} in version \"{expected_version}\" cannot be handled as a {expected_kind}"
    );
    let (api_version, kind, mut obj) =
        decode_envelope(body).map_err(|e| ApiError::bad_request(format!("{prefix}: {e}")))?;
    if let Some(o) = obj.as_object_mut() {
        // The envelope's type meta is what a Go decoder sets on the object.
        o.insert("apiVersion".into(), Value::String(api_version));
        o.insert("kind".into(), Value::String(kind));
    }
    Ok(obj)
}

/// A subresource body (Binding, Eviction, Scale) in protobuf, whatever its kind.
pub fn envelope_body(body: &[u8]) -> ApiResult<Value> {
    let (api_version, kind, mut obj) = decode_envelope(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))?;
    if let Some(o) = obj.as_object_mut() {
        o.insert("apiVersion".into(), Value::String(api_version));
        o.insert("kind".into(), Value::String(kind));
    }
    Ok(obj)
}

/// Whether a response should be protobuf: the first media range of `Accept` this server can
/// produce is `application/vnd.kubernetes.protobuf` without an `as=` transformation.
pub fn wants_protobuf(accept: &str) -> bool {
    for range in crate::table::media_ranges(accept) {
        match range.mime.as_str() {
            MEDIA_TYPE => return range.param("as").is_none(),
            "application/json" | "application/*" | "*/*" => return false,
            _ => continue,
        }
    }
    false
}

/// Whether a metadata-only answer (`as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`, what
/// client-go's metadata informers ask for) should be protobuf: the first such range the server
/// can produce is protobuf.
pub fn wants_protobuf_metadata(accept: &str) -> bool {
    for range in crate::table::media_ranges(accept) {
        let partial = matches!(
            range.param("as"),
            Some("PartialObjectMetadata" | "PartialObjectMetadataList")
        ) && range.param("g") == Some("meta.k8s.io")
            && range.param("v") == Some("v1");
        match range.mime.as_str() {
            MEDIA_TYPE if partial => return true,
            "application/json" | "application/*" | "*/*" if partial => return false,
            _ => continue,
        }
    }
    false
}

/// An object (or list) response in protobuf, or `None` when the kind has no protobuf form, so
/// the caller answers JSON (which every protobuf client also accepts).
pub fn response(code: axum::http::StatusCode, obj: &Value) -> Option<axum::response::Response> {
    use axum::response::IntoResponse;
    let api_version = obj.get("apiVersion")?.as_str()?;
    let kind = obj.get("kind")?.as_str()?;
    let bytes = encode_envelope(api_version, kind, obj)
        .map_err(|e| tracing::warn!("protobuf response for {kind}: {e}"))
        .ok()?;
    Some(
        (
            code,
            [(axum::http::header::CONTENT_TYPE, MEDIA_TYPE)],
            bytes,
        )
            .into_response(),
    )
}

/// One protobuf watch frame: a 4-byte big-endian length, then a `meta.k8s.io/v1`
/// `WatchEvent{type, object: RawExtension{raw}}` written bare (upstream's stream serializer is
/// the raw one: no magic, no `Unknown`), whose `raw` is the object enveloped as usual.
pub fn watch_frame(event_type: &str, obj: &Value) -> Result<Vec<u8>, String> {
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("v1");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("Status");
    let inner = encode_envelope(api_version, kind, obj)?;
    let mut raw_ext = Vec::new();
    codec::put_bytes(&mut raw_ext, 1, &inner);
    let mut event = Vec::new();
    codec::put_bytes(&mut event, 1, event_type.as_bytes());
    codec::put_bytes(&mut event, 2, &raw_ext);
    let len = u32::try_from(event.len()).map_err(|_| "watch event too large".to_string())?;
    let mut out = len.to_be_bytes().to_vec();
    out.extend_from_slice(&event);
    Ok(out)
}
