//! The object verbs: create, get, list, update, patch, delete, deletecollection — with
//! upstream metadata rules, the spec/status split, no-op detection, optimistic concurrency,
//! graceful deletion and finalizers (api-surface §b.8, §b.10; control-plane §6).
//!
//! Every write follows the same path: decode → default → admit → validate → compare with the
//! stored object → compare-and-swap in the store. A failing request stores nothing.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bytes::Bytes;
use jiff::Timestamp;
use klab_api::DetRng;
use serde_json::{Map, Value, json};

use klab_api::clock::format_time;
use klab_api::selector::LabelSelector;
use klab_store::{KeyValue, ListOptions, StoreError};

use crate::apply::FieldManager;
use crate::conversion;
use crate::deletion::{DeleteDecision, PodDeleteView, decide_generic_delete, decide_pod_delete};
use crate::error::{ApiError, ApiResult, Cause};
use crate::object::{self, Pointer, meta_mut};
use crate::patch::PatchKind;
use crate::registry::{self, ResourceInfo};
use crate::selector_field::FieldSelector;
use crate::server::{Ctx, Inner};

/// How many times a write re-reads and retries after losing a compare-and-swap race it did not ask
/// to lose (no resourceVersion precondition from the client).
const MAX_WRITE_RETRIES: usize = 16;

// ---------------------------------------------------------------------------------------------
// Encoding

/// A JSON response with the given status code.
pub(crate) fn json_response(code: StatusCode, body: &Value) -> Response {
    json_bytes_response(code, serde_json::to_vec(body).unwrap_or_default())
}

/// A response of JSON already encoded.
fn json_bytes_response(code: StatusCode, bytes: impl Into<Bytes>) -> Response {
    let bytes: Bytes = bytes.into();
    (
        code,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        bytes,
    )
        .into_response()
}

/// Decodes a request body (JSON, YAML or protobuf) into an object.
pub(crate) fn decode_body(ctx: &Ctx, body: &[u8]) -> ApiResult<Value> {
    let ct = ctx
        .content_type()
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let value: Value = match ct.as_str() {
        "" | "application/json" | "*/*" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("{}: {}", decode_prefix(ctx.target.ri), e))
        })?,
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            let text =
                std::str::from_utf8(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
            crate::yaml::from_str(text).map_err(|e| {
                ApiError::bad_request(format!("{}: {}", decode_prefix(ctx.target.ri), e))
            })?
        }
        crate::protobuf::MEDIA_TYPE => {
            crate::protobuf::decode_request(ctx.target.ri.kind, ctx.target.ri.version, body)?
        }
        _ => {
            return Err(ApiError::unsupported_media_type(&[
                "application/json",
                "application/yaml",
                crate::protobuf::MEDIA_TYPE,
            ]));
        }
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(format!(
            "{}: the body must be a JSON object",
            decode_prefix(ctx.target.ri)
        )));
    }
    Ok(value)
}

/// Decodes a subresource body (Binding, Eviction, Scale, Namespace): JSON, YAML or protobuf.
pub(crate) fn decode_body_any(body: &[u8]) -> ApiResult<Value> {
    if body.starts_with(crate::protobuf::MAGIC) {
        return crate::protobuf::envelope_body(body);
    }
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => match std::str::from_utf8(body)
            .ok()
            .and_then(|t| crate::yaml::from_str::<Value>(t).ok())
        {
            Some(v) => v,
            None => {
                return Err(ApiError::bad_request(format!(
                    "error decoding request body: {e}"
                )));
            }
        },
    };
    if !v.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    Ok(v)
}

fn decode_prefix(ri: &ResourceInfo) -> String {
    format!(
        "{} in version \"{}\" cannot be handled as a {}",
        ri.kind, ri.version, ri.kind
    )
}

/// Checks `apiVersion`/`kind` of a body against the URL (both may be omitted).
fn check_type_meta(ri: &ResourceInfo, obj: &mut Value) -> ApiResult<()> {
    let av = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !kind.is_empty() && kind != ri.kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({}) for this URL",
            ri.kind
        )));
    }
    if !av.is_empty() && av != ri.api_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            ri.api_version()
        )));
    }
    object::set_type_meta(obj, &ri.api_version(), ri.kind);
    Ok(())
}

/// Decodes an object the way the server's typed model does: `apiVersion`/`kind` checked and set,
/// unknown fields dropped — or refused with `fieldValidation=Strict`.
pub(crate) fn normalize(ri: &ResourceInfo, mut obj: Value, strict: bool) -> ApiResult<Value> {
    check_type_meta(ri, &mut obj)?;
    let (pruned, unknown) = crate::schema::prune_owned(ri, obj)
        .map_err(|e| ApiError::bad_request(format!("{}: {e}", decode_prefix(ri))))?;
    if strict && !unknown.is_empty() {
        let list: Vec<String> = unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect();
        return Err(ApiError::bad_request(format!(
            "{}: strict decoding error: {}",
            decode_prefix(ri),
            list.join(", ")
        )));
    }
    crate::server::warn_unknown_fields(&unknown);
    Ok(pruned)
}

/// [`normalize`] of a write's result that changed only what `changes` names of a stored, hence
/// normalised, object: only `status` goes through its typed model (a Binding's `spec.nodeName`
/// is a string its writer put in its place, see [`crate::schema::set_node_name`]). Debug builds
/// check it against the whole normalisation.
fn normalize_changed(
    ri: &ResourceInfo,
    mut obj: Value,
    strict: bool,
    changes: Changes,
) -> ApiResult<Value> {
    if strict || changes == Changes::Any {
        return normalize(ri, obj, strict);
    }
    #[cfg(debug_assertions)]
    let whole = normalize(ri, obj.clone(), strict);
    check_type_meta(ri, &mut obj)?;
    let out = match crate::schema::prune_status(ri, &mut obj) {
        Some(r) => r
            .map(|unknown| {
                crate::server::warn_unknown_fields(&unknown);
                obj
            })
            .map_err(|e| ApiError::bad_request(format!("{}: {e}", decode_prefix(ri)))),
        None => normalize(ri, obj, strict),
    };
    // Compared as values, whose equality ignores the order of an object's keys: the fields the
    // API server sets at a create (`uid`, `creationTimestamp`, …) follow the client's in the
    // stored metadata, where the typed model would put them in its own order, and a write that
    // normalises only what it changed keeps them where they are (kubectl prints an object's
    // keys sorted; typed clients see no order).
    #[cfg(debug_assertions)]
    assert_eq!(
        out.as_ref().map_err(ApiError::to_status),
        whole.as_ref().map_err(ApiError::to_status),
        "normalising only what a {changes:?} write changed differs from normalising it whole"
    );
    out
}

/// Whether a merge or strategic merge patch can change only `status`, besides the metadata a
/// status writer sends as preconditions (a kubelet's `{"metadata":{"uid":…},"status":{…}}`).
pub(crate) fn touches_only_status(doc: &Value) -> bool {
    let Some(top) = doc.as_object() else {
        return false;
    };
    top.iter().all(|(k, v)| match k.as_str() {
        "status" => true,
        "apiVersion" | "kind" => v.is_string(),
        "metadata" => v.as_object().is_some_and(|m| {
            m.iter().all(|(k, v)| {
                matches!(k.as_str(), "uid" | "resourceVersion" | "name" | "namespace")
                    && v.is_string()
            })
        }),
        _ => false,
    })
}

/// Returns an object as clients see it: type meta set, resourceVersion stamped.
pub(crate) fn present(ri: &ResourceInfo, mut obj: Value, rv: u64) -> Value {
    object::set_type_meta(&mut obj, &ri.api_version(), ri.kind);
    object::set_resource_version(&mut obj, rv);
    obj
}

pub(crate) fn decode_kv(ri: &ResourceInfo, kv: &KeyValue) -> ApiResult<Value> {
    let obj = object::decode_stored(&kv.value, kv.mod_revision).map_err(ApiError::internal)?;
    Ok(present(
        ri,
        conversion::from_storage(ri, obj),
        kv.mod_revision,
    ))
}

/// The bytes to store for `obj`, and the document they encode when `obj` is stored converted
/// (which the watches' window of decoded changes can keep instead of decoding the bytes again).
/// An object stored as it is served is encoded straight from `obj` (`object::Unversioned`):
/// the bytes of a stripped copy, without the copy (which was most of a write's allocations).
fn encode_for_store(ri: &ResourceInfo, obj: &Value) -> ApiResult<(Bytes, Option<Value>)> {
    let (bytes, doc) = if conversion::is_identity(ri) {
        (serde_json::to_vec(&object::Unversioned(obj)), None)
    } else {
        let mut v = conversion::to_storage(ri, obj);
        object::strip_for_storage(&mut v);
        (serde_json::to_vec(&v), Some(v))
    };
    let mut bytes = bytes.map_err(ApiError::internal)?;
    // The store keeps these bytes for as long as the version is retained; the serializer's
    // spare capacity (up to as much again) would be kept with them.
    bytes.shrink_to_fit();
    Ok((Bytes::from(bytes), doc))
}

/// Tells the watches what a write of `obj` stored (`doc`, as `encode_for_store` gave it),
/// through the memo the write handed its change and the window, and returns the object the
/// write answers with: the stored version as a read presents it, the watches' own state (so
/// that the answer's JSON is theirs too).
fn written(
    inner: &Inner,
    ri: &'static ResourceInfo,
    change: &crate::watch::Change<'_>,
    (obj, doc): (Value, Option<Value>),
    memo: &klab_store::Memo,
) -> Current {
    let read = stored_as_read(ri, obj, doc, change.revision);
    match inner.decoded.wrote(ri, change, read, memo) {
        Ok(state) => Current::Kept(state),
        Err(read) => Current::Decoded(read),
    }
}

/// What a read at `rev` of the bytes `encode_for_store(ri, &obj)` gave presents (`decode_kv`),
/// from `obj` and the converted document (if any) that call returned.
fn stored_as_read(ri: &ResourceInfo, obj: Value, doc: Option<Value>, rev: u64) -> Value {
    let doc = match doc {
        None => {
            let mut doc = obj;
            object::strip_for_storage(&mut doc);
            doc
        }
        Some(doc) => conversion::from_storage(ri, doc),
    };
    present(ri, doc, rev)
}

/// A stored object as `decode_kv` gives it: the watches' kept decoding of it, or decoded anew.
pub(crate) enum Current {
    Kept(Arc<crate::watch::State>),
    Decoded(Value),
}

impl std::ops::Deref for Current {
    type Target = Value;
    fn deref(&self) -> &Value {
        match self {
            Current::Kept(s) => s.value(),
            Current::Decoded(v) => v,
        }
    }
}

impl From<Value> for Current {
    fn from(v: Value) -> Self {
        Current::Decoded(v)
    }
}

impl Current {
    pub(crate) fn into_value(self) -> Value {
        match self {
            Current::Kept(s) => s.value().clone(),
            Current::Decoded(v) => v,
        }
    }
}

/// Writes the response for a single object, as a Table or metadata-only when asked. A kept
/// state answers plain JSON with the bytes its watch events carry (written once for all).
pub(crate) fn object_response(
    ctx: &Ctx,
    code: StatusCode,
    obj: impl Into<Current>,
) -> ApiResult<Response> {
    let obj = obj.into();
    let accept = ctx.accept();
    if let Current::Kept(state) = &obj
        && wants_plain_json(accept)
    {
        return Ok(json_bytes_response(code, state.json().clone()));
    }
    if crate::table::wants_table(accept) {
        let include = crate::table::IncludeObject::parse(ctx.q("includeObject"))
            .map_err(ApiError::bad_request)?;
        let rv = object::resource_version(&obj).unwrap_or("").to_string();
        let t = crate::table::table(
            ctx.target.ri,
            std::slice::from_ref(&obj),
            include,
            json!({"resourceVersion": rv}),
            ctx.inner.clock.now(),
            true,
        );
        return Ok(json_response(code, &t));
    }
    if crate::table::wants_partial_metadata(accept).is_some() {
        let partial = crate::table::partial_object_metadata(&obj);
        if crate::protobuf::wants_protobuf_metadata(accept)
            && let Some(resp) = crate::protobuf::response(code, &partial)
        {
            return Ok(resp);
        }
        return Ok(json_response(code, &partial));
    }
    if crate::protobuf::wants_protobuf(accept)
        && let Some(resp) = crate::protobuf::response(code, &obj)
    {
        return Ok(resp);
    }
    Ok(json_response(code, &obj))
}

// ---------------------------------------------------------------------------------------------
// Read verbs

fn store_key(ctx: &Ctx) -> ApiResult<String> {
    let name = ctx
        .target
        .name
        .as_deref()
        .ok_or_else(ApiError::no_such_path)?;
    Ok(conversion::storage_resource(ctx.target.ri).key(ctx.target.namespace.as_deref(), name))
}

async fn get_current(
    inner: &Inner,
    ri: &'static ResourceInfo,
    key: &str,
    name: &str,
) -> ApiResult<(Current, KeyValue)> {
    let Some(kv) = inner.store.get(key).await? else {
        return Err(ApiError::not_found(ri, name));
    };
    // The object a write just stored is usually still kept decoded for the watches.
    let current = match inner.decoded.current(ri, key, &kv) {
        Some(state) => Current::Kept(state),
        None => Current::Decoded(decode_kv(ri, &kv)?),
    };
    Ok((current, kv))
}

pub(crate) async fn get(ctx: &Ctx) -> ApiResult<Response> {
    if let Some(rv) = query_resource_version(ctx)? {
        wait_for_revision(&ctx.inner, rv).await?;
    }
    let key = store_key(ctx)?;
    let name = ctx.target.name.as_deref().unwrap_or("");
    let ri = ctx.target.ri;
    if wants_plain_json(ctx.accept()) {
        let kv = ctx
            .inner
            .store
            .get(&key)
            .await?
            .ok_or_else(|| ApiError::not_found(ri, name))?;
        return Ok(json_bytes_response(StatusCode::OK, stored_json(ri, &kv)?));
    }
    let (obj, _) = get_current(&ctx.inner, ri, &key, name).await?;
    object_response(ctx, StatusCode::OK, obj)
}

/// Whether a response is the object itself as JSON (not a Table, metadata only or protobuf).
fn wants_plain_json(accept: &str) -> bool {
    !crate::table::wants_table(accept)
        && crate::table::wants_partial_metadata(accept).is_none()
        && !crate::protobuf::wants_protobuf(accept)
}

/// A stored object as a read returns it in JSON: byte for byte `decode_kv`'s object encoded, but
/// without decoding it when the resource is served as stored (the kubelets' node GETs, every
/// few seconds each, and the items of lists; upstream serves them from its watch cache).
fn stored_json(ri: &ResourceInfo, kv: &KeyValue) -> ApiResult<Vec<u8>> {
    if conversion::is_identity(ri)
        && let Some(b) =
            crate::json_field::presented(&kv.value, &ri.api_version(), ri.kind, kv.mod_revision)
    {
        return Ok(b);
    }
    serde_json::to_vec(&decode_kv(ri, kv)?).map_err(ApiError::internal)
}

/// Parsed label and field selectors of a list or watch.
pub(crate) struct Selectors {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selectors {
    pub fn from_ctx(ctx: &Ctx) -> ApiResult<Self> {
        let labels = match ctx.q("labelSelector") {
            Some(s) if !s.trim().is_empty() => LabelSelector::parse(s).map_err(|e| {
                let prefix = "unable to parse requirement: ";
                ApiError::bad_request(if e.starts_with(prefix) {
                    e
                } else {
                    format!("{prefix}{e}")
                })
            })?,
            _ => LabelSelector::everything(),
        };
        let fields = match ctx.q("fieldSelector") {
            Some(s) if !s.trim().is_empty() => {
                FieldSelector::parse(s).map_err(ApiError::bad_request)?
            }
            _ => FieldSelector::everything(),
        };
        fields
            .check_supported(ctx.target.ri)
            .map_err(ApiError::bad_request)?;
        Ok(Selectors { labels, fields })
    }

    /// No label or field requirement: every object matches.
    pub fn is_everything(&self) -> bool {
        self.labels.is_everything() && self.fields.is_everything()
    }

    pub fn matches(&self, ri: &ResourceInfo, obj: &Value) -> bool {
        self.labels
            .matches_json(obj.get("metadata").and_then(|m| m.get("labels")))
            && self.fields.matches(ri, obj)
    }

    /// [`Self::matches`] of the object a read of stored `doc` presents, decided from the bytes
    /// without decoding them (`FieldSelector::matches_stored`): `None` when it cannot be, e.g.
    /// under a label selector or for a kind stored in another version than it is served in.
    pub fn matches_stored(&self, ri: &ResourceInfo, doc: &[u8]) -> Option<bool> {
        if !self.labels.is_everything() || !conversion::is_identity(ri) {
            return None;
        }
        self.fields.matches_stored(ri, doc)
    }
}

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

fn encode_continue(rv: u64, start: &str) -> String {
    let raw = serde_json::to_vec(&json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start}))
        .unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> ApiResult<(u64, String)> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v
        .get("start")
        .and_then(Value::as_str)
        .ok_or_else(bad)?
        .to_string();
    Ok((rv, start))
}

/// Go's `strconv` error text for a number that does not parse.
fn go_parse_error(func: &str, text: &str, e: &std::num::ParseIntError) -> String {
    let why = match e.kind() {
        std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
            "value out of range"
        }
        _ => "invalid syntax",
    };
    format!("strconv.{func}: parsing {text:?}: {why}")
}

/// Parses a resourceVersion as upstream's `APIObjectVersioner.ParseResourceVersion` (a decimal
/// uint64; `field` names where it came from in the error).
pub(crate) fn parse_resource_version(field: &str, rv: &str) -> ApiResult<u64> {
    rv.parse::<u64>().map_err(|e| {
        ApiError::bad_request(format!(
            "{field}: Invalid value: {rv:?}: {}",
            go_parse_error("ParseUint", rv, &e)
        ))
    })
}

/// The `resourceVersion` query parameter: `None` when absent, empty or "0" (any version).
pub(crate) fn query_resource_version(ctx: &Ctx) -> ApiResult<Option<u64>> {
    match ctx.q("resourceVersion") {
        None | Some("") | Some("0") => Ok(None),
        Some(rv) => parse_resource_version("resourceVersion", rv).map(Some),
    }
}

/// An integer query parameter (`limit`, `timeoutSeconds`), refused as upstream's parameter
/// decoding does when it is not a decimal int64.
pub(crate) fn query_i64(ctx: &Ctx, name: &str) -> ApiResult<Option<i64>> {
    match ctx.q(name) {
        None => Ok(None),
        Some(v) => v
            .parse::<i64>()
            .map(Some)
            .map_err(|e| ApiError::bad_request(go_parse_error("ParseInt", v, &e))),
    }
}

/// How long a read at a future revision waits for the store (upstream's watch cache blocks for
/// 3 s before answering "Too large resource version").
const FRESHNESS_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Waits (on the cluster's clock) until the store has reached `rv`, or answers 504.
pub(crate) async fn wait_for_revision(inner: &Inner, rv: u64) -> ApiResult<()> {
    let step = std::time::Duration::from_millis(100);
    let mut waited = std::time::Duration::ZERO;
    loop {
        let current = inner.store.current_revision();
        if current >= rv {
            return Ok(());
        }
        if waited >= FRESHNESS_WAIT {
            return Err(ApiError::too_large_resource_version(rv, current));
        }
        inner.clock.sleep(step).await;
        waited += step;
    }
}

/// Checks the list parameters that upstream validates (resourceVersionMatch and continue).
fn validate_list_params(ctx: &Ctx) -> ApiResult<()> {
    query_resource_version(ctx)?;
    query_i64(ctx, "limit")?;
    let rv = ctx.q("resourceVersion").unwrap_or("");
    match ctx.q("resourceVersionMatch") {
        None | Some("") => {}
        Some(m @ ("NotOlderThan" | "Exact")) => {
            if rv.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided ({m})"
                )));
            }
            if ctx.q("continue").is_some() {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if m == "Exact" && rv == "0" {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "resourceVersionMatch: Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\""
            )));
        }
    }
    if ctx.q_bool("sendInitialEvents") {
        return Err(ApiError::bad_request(
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
        ));
    }
    Ok(())
}

/// Lists matching objects: `(items, list revision, continue token, remaining count)`.
pub(crate) async fn list_objects(
    ctx: &Ctx,
    sel: &Selectors,
) -> ApiResult<(Vec<Value>, u64, Option<String>, Option<u64>)> {
    let ri = ctx.target.ri;
    list_items(ctx, sel, |kv| {
        let obj = decode_kv(ri, kv)?;
        Ok(sel.matches(ri, &obj).then_some(obj))
    })
    .await
}

/// A list's page: each candidate the selectors may match becomes `item(kv)` (`None`: it does not
/// match), with the list's revision, its continue token and the remaining count.
async fn list_items<T>(
    ctx: &Ctx,
    sel: &Selectors,
    item: impl Fn(&KeyValue) -> ApiResult<Option<T>>,
) -> ApiResult<(Vec<T>, u64, Option<String>, Option<u64>)> {
    let ri = ctx.target.ri;
    let prefix = conversion::storage_resource(ri).key_prefix_in(ctx.target.namespace.as_deref());
    let mut opts = ListOptions::default();
    if let Some(token) = ctx.q("continue").filter(|t| !t.is_empty()) {
        let (rv, start) = decode_continue(token)?;
        if !start.starts_with(&prefix) {
            return Err(ApiError::bad_request(format!(
                "continue key is not valid: {token:?}"
            )));
        }
        opts.start_key = Some(start);
        opts.revision = Some(rv);
    } else if let Some(rv) = query_resource_version(ctx)? {
        wait_for_revision(&ctx.inner, rv).await?;
        if ctx.q("resourceVersionMatch") == Some("Exact") {
            opts.revision = Some(rv);
        }
    }
    let limit = query_i64(ctx, "limit")?
        .filter(|l| *l > 0)
        .map(|l| usize::try_from(l).unwrap_or(usize::MAX));
    // Without selectors the store stops at the limit and counts the rest, so a page decodes only
    // its own objects (a paginated list of 150 000 pods reads 500 per page, not all of them).
    let everything = sel.is_everything();
    if everything {
        opts.limit = limit;
    } else {
        // A store that indexes pods by node reads only the selected node's pods.
        opts.index = crate::watch::trigger_for(ri, sel);
    }
    let res = match ctx.inner.store.list(&prefix, opts.clone()).await {
        Err(StoreError::Compacted { .. }) if opts.start_key.is_some() => {
            return Err(ApiError::new(410, "Expired", CONTINUE_EXPIRED));
        }
        other => other?,
    };
    let could_match = crate::watch::list_prefilter(ri, sel);
    let mut items = Vec::new();
    let mut last_key: Option<&str> = None;
    let mut more = everything && res.remaining > 0;
    for kv in &res.kvs {
        // As upstream's etcd3 list: once the page is full, any further key means more pages,
        // whether or not it would match.
        if limit.is_some_and(|l| items.len() >= l) {
            more = true;
            break;
        }
        // A namespaced prefix for all namespaces also covers every namespace; nothing else shares it.
        last_key = Some(&kv.key);
        if !could_match(&kv.key, &kv.value) {
            continue;
        }
        if let Some(obj) = item(kv)? {
            items.push(obj);
        }
    }
    // A store that read only an index's candidates says whether other keys follow the last one
    // it returned: a page that filled up on that key is not the last either.
    if !everything && limit.is_some_and(|l| items.len() >= l) && res.remaining > 0 {
        more = true;
    }
    // The next page starts just after the last key this one examined (upstream's
    // `lastKey + "\x00"`).
    let token = more
        .then(|| last_key.map(|k| encode_continue(res.revision, &format!("{k}\0"))))
        .flatten();
    // upstream sets remainingItemCount only for a list without selectors (with one, the count
    // of keys left would include objects that do not match).
    let remaining = (everything && token.is_some()).then_some(res.remaining);
    Ok((items, res.revision, token, remaining))
}

/// A Table list's item when the selectors match it: the object decoded without what no printer
/// reads (`table::unprinted`), with its metadata's bytes as a read presents them for the row's
/// `PartialObjectMetadata`; the whole object where those bytes cannot be had. Only for
/// resources served as stored (`conversion::is_identity`).
fn table_item(
    ri: &ResourceInfo,
    sel: &Selectors,
    include: crate::table::IncludeObject,
    kv: &KeyValue,
) -> ApiResult<Option<(Value, Option<Vec<u8>>)>> {
    let pruned = crate::json_field::decode_without(&kv.value, crate::table::unprinted(ri))
        .map_err(ApiError::internal)?;
    let obj = present(ri, pruned, kv.mod_revision);
    if !sel.matches(ri, &obj) {
        return Ok(None);
    }
    if include != crate::table::IncludeObject::Metadata {
        return Ok(Some((obj, None)));
    }
    Ok(Some(
        match crate::json_field::metadata_presented(&kv.value, kv.mod_revision) {
            Some(meta) => (obj, Some(meta)),
            None => (decode_kv(ri, kv)?, None),
        },
    ))
}

pub(crate) async fn list(ctx: &Ctx) -> ApiResult<Response> {
    validate_list_params(ctx)?;
    let sel = Selectors::from_ctx(ctx)?;
    let ri = ctx.target.ri;
    let accept = ctx.accept();
    let meta = |rev: u64, token: &Option<String>, remaining: Option<u64>| {
        let mut meta = json!({"resourceVersion": rev.to_string()});
        if let Some(t) = token {
            meta["continue"] = json!(t);
            if let Some(r) = remaining {
                meta["remainingItemCount"] = json!(r);
            }
        }
        meta
    };
    if sel.is_everything() && wants_plain_json(accept) {
        // Every object as stored, none decoded: the list as `object::fields` below would encode it.
        let (items, rev, token, remaining) =
            list_items(ctx, &sel, |kv| stored_json(ri, kv).map(Some)).await?;
        let head = serde_json::to_vec(&object::fields([
            ("kind", ri.list_kind().into()),
            ("apiVersion", ri.api_version().into()),
            ("metadata", meta(rev, &token, remaining)),
        ]))
        .map_err(ApiError::internal)?;
        let len = items
            .iter()
            .map(Vec::len)
            .fold(head.len(), usize::saturating_add);
        let mut body = Vec::with_capacity(len.saturating_add(items.len()).saturating_add(12));
        body.extend_from_slice(head.strip_suffix(b"}").unwrap_or(&head));
        body.extend_from_slice(b",\"items\":[");
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(item);
        }
        body.extend_from_slice(b"]}");
        return Ok(json_bytes_response(StatusCode::OK, body));
    }
    let table_include = if crate::table::wants_table(accept) {
        Some(
            crate::table::IncludeObject::parse(ctx.q("includeObject"))
                .map_err(ApiError::bad_request)?,
        )
    } else {
        None
    };
    if let Some(include) = table_include
        && conversion::is_identity(ri)
        && include != crate::table::IncludeObject::Object
    {
        let (rows, rev, token, remaining) =
            list_items(ctx, &sel, |kv| table_item(ri, &sel, include, kv)).await?;
        let now = ctx.inner.clock.now();
        let body = crate::table::table_json(ri, &rows, include, meta(rev, &token, remaining), now)
            .map_err(ApiError::internal)?;
        return Ok(json_bytes_response(StatusCode::OK, body));
    }
    let (items, rev, token, remaining) = list_objects(ctx, &sel).await?;
    let meta = meta(rev, &token, remaining);
    if let Some(include) = table_include {
        let t = crate::table::table(ri, &items, include, meta, ctx.inner.clock.now(), true);
        return Ok(json_response(StatusCode::OK, &t));
    }
    if crate::table::wants_partial_metadata(accept).is_some() {
        let body = crate::table::partial_object_metadata_list(&items, meta);
        if crate::protobuf::wants_protobuf_metadata(accept)
            && let Some(resp) = crate::protobuf::response(StatusCode::OK, &body)
        {
            return Ok(resp);
        }
        return Ok(json_response(StatusCode::OK, &body));
    }
    let body = object::fields([
        ("kind", ri.list_kind().into()),
        ("apiVersion", ri.api_version().into()),
        ("metadata", meta),
        ("items", Value::Array(items)),
    ]);
    if crate::protobuf::wants_protobuf(accept)
        && let Some(resp) = crate::protobuf::response(StatusCode::OK, &body)
    {
        return Ok(resp);
    }
    Ok(json_response(StatusCode::OK, &body))
}

// ---------------------------------------------------------------------------------------------
// Create

/// Checks that the namespace of a namespaced write exists and is not terminating.
fn is_pods(ri: &ResourceInfo) -> bool {
    ri.group.is_empty() && ri.plural == "pods"
}

fn is_priority_classes(ri: &ResourceInfo) -> bool {
    ri.group == "scheduling.k8s.io" && ri.plural == "priorityclasses"
}

/// Every PriorityClass, as the Priority admission plugin reads them (upstream reads an informer;
/// klab reads the store — through a cache kept while the prefix is quiet — so a class is usable
/// as soon as its create is acknowledged).
async fn priority_classes(
    inner: &Inner,
) -> ApiResult<Arc<Vec<crate::admission::PriorityClassInfo>>> {
    let pcri = registry::lookup("scheduling.k8s.io", "v1", "priorityclasses").expect("served");
    let derive = |lists: &[Vec<klab_store::KeyValue>]| {
        lists
            .iter()
            .flatten()
            .map(|kv| {
                crate::admission::PriorityClassInfo::from_stored(&kv.value)
                    .map_err(ApiError::internal)
            })
            .collect()
    };
    inner
        .priority_classes
        .get(&*inner.store, &[pcri.key_prefix()], derive)
        .await
}

/// Every StorageClass, as the DefaultStorageClass admission plugin reads them.
async fn storage_classes(inner: &Inner) -> ApiResult<Vec<crate::admission::StorageClassInfo>> {
    let scri = registry::lookup("storage.k8s.io", "v1", "storageclasses").expect("served");
    let res = inner
        .store
        .list(&scri.key_prefix(), ListOptions::default())
        .await?;
    res.kvs
        .iter()
        .map(|kv| {
            crate::admission::StorageClassInfo::from_stored(&kv.value).map_err(ApiError::internal)
        })
        .collect()
}

/// The Priority plugin's check on PriorityClass writes: one global default at most.
async fn check_one_default(
    inner: &Inner,
    ri: &ResourceInfo,
    obj: &Value,
    create: bool,
) -> ApiResult<()> {
    let class = crate::admission::PriorityClassInfo::from_object(obj);
    if !class.global_default {
        return Ok(());
    }
    let others = priority_classes(inner).await?;
    crate::admission::check_global_default(&class, &others, create)
        .map_err(|reason| admission_forbidden(ri, obj, &reason))
}

/// Upstream's `admission.NewForbidden`: the object is named by its name, else its generateName
/// (admission runs before a name is generated), else "Unknown".
fn admission_forbidden(ri: &ResourceInfo, obj: &Value, reason: &str) -> ApiError {
    let name = [
        object::name(obj),
        object::meta_str(obj, "generateName").unwrap_or(""),
    ]
    .into_iter()
    .find(|n| !n.is_empty())
    .unwrap_or("Unknown");
    ApiError::forbidden(format!(
        "{} \"{name}\" is forbidden: {reason}",
        ri.qualified_plural()
    ))
}

/// The ServiceAccount a new pod names (`spec.serviceAccountName`, defaulted), if it exists.
async fn pod_service_account(inner: &Inner, ns: &str, pod: &Value) -> ApiResult<Option<Value>> {
    let name = pod
        .at("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let sa_ri = registry::lookup("", "v1", "serviceaccounts").expect("served");
    match inner.store.get(&sa_ri.key(Some(ns), name)).await? {
        Some(kv) => Ok(Some(decode_kv(sa_ri, &kv)?)),
        None => Ok(None),
    }
}

async fn check_namespace(inner: &Inner, ri: &ResourceInfo, ns: &str, name: &str) -> ApiResult<()> {
    let nsri = registry::lookup("", "v1", "namespaces").expect("served");
    let Some(kv) = inner.store.get(&nsri.key(None, ns)).await? else {
        return Err(ApiError::namespace_not_found(ns));
    };
    // Every create asks: the one field is read from the stored bytes, which are not decoded.
    let phase = match crate::json_field::string_at(&kv.value, &["status", "phase"]) {
        Ok(phase) => phase,
        Err(_) => decode_kv(nsri, &kv)?
            .at("/status/phase")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    if phase.as_deref() == Some("Terminating") && ri.plural != "events" {
        return Err(ApiError::forbidden(format!(
            "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
            ri.qualified_plural(),
            name,
        )));
    }
    Ok(())
}

pub(crate) fn validation_error(
    ri: &ResourceInfo,
    name: &str,
    errs: Vec<crate::validation::FieldError>,
) -> ApiError {
    let message = crate::validation::invalid_message(ri, name, &errs);
    let causes = errs
        .iter()
        .map(|e| Cause {
            reason: e.reason().to_string(),
            message: e.body(),
            field: e.field.clone(),
        })
        .collect();
    ApiError::invalid(ri, name, message, causes)
}

/// Resets the status of a new object the way upstream `PrepareForCreate` strategies do.
fn prepare_status_for_create(ri: &ResourceInfo, obj: &mut Value) {
    match (ri.group, ri.plural) {
        // Kubelets create their Node with status; namespaces get their phase from defaulting.
        ("", "nodes") | ("", "namespaces") => {}
        ("", "pods") => {
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
            crate::defaults::default_pod_status_on_create(obj);
        }
        _ if ri.has_subresource("status") => {
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
        }
        _ => {}
    }
}

tokio::task_local! {
    /// Where the UIDs of the objects created in this task come from, when not the server's
    /// sequence: the bootstrap RBAC policy draws from a side stream, so adding it (or a role to
    /// it) does not rename every object created after start-up.
    pub(crate) static UID_SOURCE: DetRng;
}

/// Creates one object as the API server itself (bootstrap objects: manager `kube-apiserver`).
pub(crate) async fn create_object(
    inner: &Arc<Inner>,
    ri: &'static ResourceInfo,
    url_namespace: Option<&str>,
    obj: Value,
    dry_run: bool,
    strict: bool,
) -> ApiResult<Value> {
    let rec = Recording::Update(FieldManager::new("kube-apiserver", None));
    create_object_as(inner, ri, url_namespace, obj, dry_run, strict, &rec)
        .await
        .map(Current::into_value)
}

/// How a write records field managers in `metadata.managedFields`.
#[derive(Debug, Clone)]
pub(crate) enum Recording {
    /// A write the server composes itself (binding, eviction, finalize): entries unchanged.
    Keep,
    /// An `Update` by this manager.
    Update(FieldManager),
    /// The mutation computed the entries itself (server-side apply).
    Applied,
}

impl Recording {
    /// Sets `next`'s managedFields. `requested` are the ones the client's object carried.
    fn record(
        &self,
        ri: &ResourceInfo,
        live: Option<&Value>,
        requested: Option<Value>,
        next: &mut Value,
        now: &str,
    ) {
        let keep = match self {
            Recording::Keep => live.and_then(|l| l.at("/metadata/managedFields")).cloned(),
            Recording::Applied => requested,
            Recording::Update(m) => {
                crate::apply::record_update(ri, m, live, requested, next, now);
                return;
            }
        };
        let m = meta_mut(next);
        match keep {
            Some(v) if !v.is_null() => {
                m.insert("managedFields".into(), v);
            }
            _ => {
                m.remove("managedFields");
            }
        }
    }
}

/// The field manager of a write request (upstream `managerOrUserAgent`), checked as upstream
/// checks `CreateOptions`/`UpdateOptions`/`PatchOptions`: an apply patch must name one, a name
/// is at most 128 printable bytes, `force` belongs to apply patches only.
pub(crate) fn request_field_manager(
    ctx: &Ctx,
    options_kind: &str,
    apply: bool,
) -> ApiResult<FieldManager> {
    use crate::validation::FieldError;
    let param = ctx.q("fieldManager");
    let mut errs: Vec<FieldError> = Vec::new();
    if apply && param.is_none_or(str::is_empty) {
        errs.push(FieldError::required(
            "fieldManager",
            "is required for apply patch",
        ));
    }
    if !apply && options_kind == "PatchOptions" && ctx.query.contains_key("force") {
        errs.push(FieldError::forbidden(
            "force",
            "may not be specified for non-apply patch",
        ));
    }
    if let Some(e) = param.and_then(crate::apply::validate_field_manager) {
        errs.push(e);
    }
    if !errs.is_empty() {
        let head = format!("{options_kind}.meta.k8s.io \"\" is invalid");
        let msgs: Vec<String> = errs.iter().map(FieldError::message).collect();
        let message = match msgs.as_slice() {
            [one] => format!("{head}: {one}"),
            many => format!("{head}: [{}]", many.join(", ")),
        };
        return Err(ApiError::new(422, "Invalid", message).with_details(json!({
            "name": "", "group": "meta.k8s.io", "kind": options_kind,
            "causes": crate::validation::causes(&errs)})));
    }
    let user_agent = ctx
        .headers
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let user = ctx.identity.as_ref().map(|i| i.user.as_str());
    let sub = ctx
        .target
        .sub
        .as_deref()
        .filter(|s| matches!(*s, "status" | "scale"));
    Ok(FieldManager::new(
        crate::apply::manager_name(param, user_agent, user),
        sub,
    ))
}

/// Creates one object (shared by POST, apply-create, bootstrap and subresources).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn create_object_as(
    inner: &Arc<Inner>,
    ri: &'static ResourceInfo,
    url_namespace: Option<&str>,
    obj: Value,
    dry_run: bool,
    strict: bool,
    rec: &Recording,
) -> ApiResult<Current> {
    let mut obj = normalize(ri, obj, strict)?;
    let requested_fields = obj.at("/metadata/managedFields").cloned();
    // Namespace: filled from the URL, and must agree with it.
    let body_ns = object::namespace(&obj).map(str::to_string);
    let namespace = if ri.namespaced {
        let ns = match (url_namespace, body_ns.as_deref()) {
            (Some(u), Some(b)) if u != b => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            (Some(u), _) => u.to_string(),
            (None, Some(b)) => b.to_string(),
            (None, None) => return Err(ApiError::no_such_path()),
        };
        meta_mut(&mut obj).insert("namespace".into(), json!(ns));
        Some(ns)
    } else {
        meta_mut(&mut obj).remove("namespace");
        None
    };
    // Server-managed metadata.
    let now = inner.clock.now();
    {
        let m = meta_mut(&mut obj);
        for k in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "selfLink",
            "managedFields",
        ] {
            m.remove(k);
        }
        let uid = UID_SOURCE
            .try_with(DetRng::uid)
            .unwrap_or_else(|_| inner.rng.uid());
        m.insert("uid".into(), json!(uid));
        m.insert("creationTimestamp".into(), json!(format_time(now)));
        if ri.has_generation {
            m.insert("generation".into(), json!(1));
        }
    }
    let generate_name = object::meta_str(&obj, "generateName")
        .unwrap_or("")
        .to_string();
    let explicit_name = object::name(&obj).to_string();
    if explicit_name.is_empty() && generate_name.is_empty() {
        let errs = vec![crate::validation::FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )];
        return Err(validation_error(ri, "", errs));
    }
    if ri.plural == "jobs" {
        let uid = object::uid(&obj).to_string();
        crate::defaults::default_job_selector(&mut obj, &uid);
    }
    prepare_status_for_create(ri, &mut obj);
    crate::defaults::default_on_create(ri, &mut obj);
    crate::defaults::default_object(ri, &mut obj);
    // Field managers are recorded on the defaulted object, before admission and allocation, as
    // upstream's handler records them before its storage runs.
    rec.record(ri, None, requested_fields, &mut obj, &format_time(now));
    if ri.plural == "pods" && ri.group.is_empty() {
        inner.config.default_toleration_seconds.admit_pod(&mut obj);
    }
    if let Some(ns) = &namespace {
        check_namespace(inner, ri, ns, &explicit_name).await?;
    }
    // Services: validated as sent, then given their cluster IP and node ports under the
    // allocation lock, held until the object is stored.
    let _alloc = if is_service(ri) {
        let guard = inner.service_alloc.lock().await;
        crate::validation::validate_create(ri, &obj)
            .map_err(|errs| validation_error(ri, &explicit_name, errs))?;
        let in_use = services_in_use(inner, None).await?;
        crate::services::allocate(&mut obj, None, &in_use, &inner.rng)
            .map_err(|errs| validation_error(ri, &explicit_name, errs))?;
        Some(guard)
    } else {
        None
    };
    if is_pods(ri) {
        // Admission in upstream's plugin order: ServiceAccount before Priority.
        let sa = pod_service_account(inner, namespace.as_deref().unwrap_or(""), &obj).await?;
        crate::admission::admit_service_account(
            &mut obj,
            namespace.as_deref().unwrap_or(""),
            sa.as_ref(),
            || inner.rng.suffix(5),
        )
        .map_err(|reason| admission_forbidden(ri, &obj, &reason))?;
        let classes = priority_classes(inner).await?;
        crate::admission::admit_pod_priority(&mut obj, &classes)
            .map_err(|reason| admission_forbidden(ri, &obj, &reason))?;
    }
    if ri.group.is_empty() && matches!(ri.kind, "PersistentVolumeClaim" | "PersistentVolume") {
        if ri.kind == "PersistentVolumeClaim" {
            let classes = storage_classes(inner).await?;
            crate::admission::admit_claim_storage_class(&mut obj, &classes);
        }
        crate::admission::admit_storage_protection(ri.kind, &mut obj);
    }
    // generateName: the suffix is drawn per attempt; a clash retries with a new one.
    for attempt in 0..8 {
        if explicit_name.is_empty() {
            let name = format!("{generate_name}{}", inner.rng.suffix(5));
            meta_mut(&mut obj).insert("name".into(), json!(name));
        }
        let name = object::name(&obj).to_string();
        crate::validation::validate_create(ri, &obj)
            .map_err(|errs| validation_error(ri, &name, errs))?;
        if is_priority_classes(ri) {
            check_one_default(inner, ri, &obj, true).await?;
        }
        crate::authz::check_escalation(inner, ri, &obj, None).await?;
        crate::authz::admit_node_write(
            inner,
            ri,
            "",
            crate::node_restriction::Op::Create,
            namespace.as_deref().unwrap_or(""),
            "",
            Some(&obj),
            None,
        )
        .await?;
        if dry_run {
            return Ok(Current::Decoded(present(
                ri,
                obj,
                inner.store.current_revision(),
            )));
        }
        let key = conversion::storage_resource(ri).key(namespace.as_deref(), &name);
        let (bytes, doc) = encode_for_store(ri, &obj)?;
        let memo = klab_store::Memo::shared();
        match inner
            .store
            .create_noted(&key, bytes.clone(), memo.clone())
            .await
        {
            Ok(rev) => {
                let change = crate::watch::Change {
                    revision: rev,
                    kind: klab_store::EventKind::Create,
                    key: &key,
                    value: Some(&bytes),
                    prev_value: None,
                };
                return Ok(written(inner, ri, &change, (obj, doc), &memo));
            }
            Err(StoreError::AlreadyExists(_)) if explicit_name.is_empty() && attempt < 7 => {
                continue;
            }
            Err(StoreError::AlreadyExists(_)) => return Err(ApiError::already_exists(ri, &name)),
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::internal("could not generate a unique name"))
}

fn is_service(ri: &ResourceInfo) -> bool {
    ri.group.is_empty() && ri.plural == "services"
}

/// The cluster IPs and node ports held by stored Services other than `skip` (namespace, name).
async fn services_in_use(
    inner: &Arc<Inner>,
    skip: Option<(&str, &str)>,
) -> ApiResult<crate::services::InUse> {
    let ri = registry::lookup("", "v1", "services").expect("services are served");
    let list = inner
        .store
        .list(&ri.key_prefix(), Default::default())
        .await?;
    let mut svcs = Vec::with_capacity(list.kvs.len());
    for kv in &list.kvs {
        svcs.push(object::decode_stored(&kv.value, kv.mod_revision).map_err(ApiError::internal)?);
    }
    Ok(crate::services::InUse::from_services(svcs.iter(), skip))
}

pub(crate) async fn create(ctx: &Ctx, body: Bytes) -> ApiResult<Response> {
    let mut obj = decode_body(ctx, &body)?;
    let ri = ctx.target.ri;
    if ri.group == "certificates.k8s.io" {
        let who = ctx
            .identity
            .clone()
            .unwrap_or_else(crate::identity::Identity::admin);
        crate::csr::prepare_create(&mut obj, &who);
    }
    if ri.namespaced && ctx.target.namespace.is_none() {
        return Err(ApiError::no_such_path());
    }
    let manager = request_field_manager(ctx, "CreateOptions", false)?;
    let created = create_object_as(
        &ctx.inner,
        ri,
        ctx.target.namespace.as_deref(),
        obj,
        ctx.dry_run(),
        ctx.strict(),
        &Recording::Update(manager),
    )
    .await?;
    object_response(ctx, StatusCode::CREATED, created)
}

// ---------------------------------------------------------------------------------------------
// Update and patch

/// Which part of the object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteScope {
    /// The main resource: everything but `status` (for kinds with a status subresource).
    Main,
    /// The `status` subresource: only `status`.
    Status,
    /// A write the server itself composes (binding): taken as proposed, no generation bump.
    Internal,
}

impl WriteScope {
    fn of(ctx: &Ctx) -> Self {
        if ctx.target.sub.as_deref() == Some("status") {
            WriteScope::Status
        } else {
            WriteScope::Main
        }
    }
}

/// Builds the object to store from the client's new version and the stored one: server-managed
/// metadata is kept, the spec/status split applied, generation bumped on spec change.
fn merge_update(ri: &ResourceInfo, scope: WriteScope, old: &Value, mut new: Value) -> Value {
    let mut out = match scope {
        WriteScope::Status => {
            // The old object with the new status in the old one's place: the old status is not
            // copied, and the new one is moved.
            let mut status = new.as_object_mut().and_then(|m| m.remove("status"));
            let Value::Object(fields) = old else {
                return old.clone();
            };
            let mut o = Map::new();
            for (k, v) in fields {
                if k == "status" {
                    if let Some(s) = status.take() {
                        o.insert(k.clone(), s);
                    }
                } else if let (Value::Object(meta), "metadata") = (v, k.as_str()) {
                    // Without copying the managedFields, which are dropped below: a null keeps
                    // their place so that dropping them leaves the same key order.
                    let meta = meta
                        .iter()
                        .map(|(mk, mv)| {
                            let mv = if mk == "managedFields" {
                                Value::Null
                            } else {
                                mv.clone()
                            };
                            (mk.clone(), mv)
                        })
                        .collect();
                    o.insert(k.clone(), Value::Object(meta));
                } else {
                    o.insert(k.clone(), v.clone());
                }
            }
            if let Some(s) = status {
                o.insert("status".into(), s);
            }
            Value::Object(o)
        }
        WriteScope::Main => {
            let mut o = new;
            if ri.has_subresource("status") {
                match old.get("status") {
                    Some(s) => o["status"] = s.clone(),
                    None => {
                        if let Some(m) = o.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            o
        }
        WriteScope::Internal => new,
    };
    let old_meta = old.get("metadata");
    let m = meta_mut(&mut out);
    for k in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "namespace",
        "name",
    ] {
        match old_meta.and_then(|om| om.get(k)) {
            Some(v) => {
                m.insert(k.into(), v.clone());
            }
            None => {
                m.remove(k);
            }
        }
    }
    m.remove("managedFields");
    m.remove("selfLink");
    if ri.has_generation && scope == WriteScope::Main && old.get("spec") != out.get("spec") {
        let g = old_meta
            .and_then(|om| om.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta_mut(&mut out).insert("generation".into(), json!(g.saturating_add(1)));
    }
    out
}

/// Whether an update leaves an object that must now be removed: deletion requested, no finalizers
/// left, and no grace period pending (upstream `shouldDeleteDuringUpdate`).
fn should_delete_during_update(obj: &Value) -> bool {
    object::deletion_timestamp(obj).is_some()
        && object::finalizers(obj).is_empty()
        && obj
            .at("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0
}

/// How a guarded write treats the client's object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WriteMode {
    pub scope: WriteScope,
    pub dry_run: bool,
    /// `fieldValidation=Strict`: unknown fields are refused.
    pub strict: bool,
    /// What the write can change of the stored object: only that is normalised.
    pub changes: Changes,
}

/// What a guarded write can change of the stored, hence normalised, object (see
/// [`normalize_changed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Changes {
    /// Anything: the whole object is normalised.
    Any,
    /// `status` alone: a status write whose client object differs from the stored one only in
    /// `status` (a merge patch that [`touches_only_status`], sent to the status subresource).
    Status,
    /// A Binding's: `spec.nodeName` (set by [`crate::schema::set_node_name`]) and `status`.
    Binding,
}

/// The outcome of a guarded write.
pub(crate) enum WriteOutcome {
    /// Stored (or unchanged) object.
    Stored(Current),
    /// The write emptied the finalizers of a deleted object, which is now gone.
    Deleted(Current),
}

/// Read–modify–write with compare-and-swap, retried when the store moved underneath us and the
/// client did not pin a resourceVersion. `mutate` receives the current object and returns the
/// client's proposed new object (before server-side rules).
pub(crate) async fn guarded_update<F>(
    inner: &Arc<Inner>,
    ri: &'static ResourceInfo,
    namespace: Option<&str>,
    name: &str,
    mode: WriteMode,
    mutate: F,
) -> ApiResult<WriteOutcome>
where
    F: FnMut(&Value) -> ApiResult<Value>,
{
    guarded_update_as(inner, ri, namespace, name, mode, &Recording::Keep, mutate).await
}

/// `guarded_update`, recording field managers as `rec` says.
pub(crate) async fn guarded_update_as<F>(
    inner: &Arc<Inner>,
    ri: &'static ResourceInfo,
    namespace: Option<&str>,
    name: &str,
    mode: WriteMode,
    rec: &Recording,
    mut mutate: F,
) -> ApiResult<WriteOutcome>
where
    F: FnMut(&Value) -> ApiResult<Value>,
{
    let WriteMode {
        scope,
        dry_run,
        strict,
        changes,
    } = mode;
    let key = conversion::storage_resource(ri).key(namespace, name);
    let _alloc = if is_service(ri) && scope == WriteScope::Main {
        Some(inner.service_alloc.lock().await)
    } else {
        None
    };
    for _ in 0..MAX_WRITE_RETRIES {
        let (current, kv) = get_current(inner, ri, &key, name).await?;
        let mut proposed = normalize_changed(ri, mutate(&current)?, strict, changes)?;
        if object::name(&proposed) != name && !object::name(&proposed).is_empty() {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                object::name(&proposed)
            )));
        }
        if ri.namespaced
            && let Some(pns) = object::namespace(&proposed)
            && Some(pns) != namespace
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        // A uid in the body is a precondition too (kubelets patch status with their pod's uid, so a
        // pod recreated under the same name is never written with a stale status).
        if let Some(uid) = object::meta_str(&proposed, "uid").filter(|u| !u.is_empty())
            && uid != object::uid(&current)
        {
            return Err(ApiError::precondition_failed(
                ri,
                name,
                format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    object::uid(&current)
                ),
            ));
        }
        // An explicit resourceVersion is a precondition.
        let pinned = object::resource_version(&proposed).map(str::to_string);
        if let Some(rv) = &pinned {
            parse_resource_version("metadata.resourceVersion", rv)?;
            if rv != &kv.mod_revision.to_string() {
                return Err(ApiError::conflict(ri, name));
            }
        }
        // Moved out rather than copied: `merge_update` drops the proposed object's managedFields
        // (the null left in their place goes with them, so the stored key order is unchanged).
        let requested_fields = proposed
            .at_mut("/metadata/managedFields")
            .map(std::mem::take);
        let mut next = merge_update(ri, scope, &current, proposed);
        crate::defaults::default_object(ri, &mut next);
        rec.record(
            ri,
            Some(&current),
            requested_fields,
            &mut next,
            &format_time(inner.clock.now()),
        );
        if scope == WriteScope::Main && is_pods(ri) {
            crate::admission::keep_pod_priority(&mut next, &current);
            inner.config.default_toleration_seconds.admit_pod(&mut next);
        }
        // Upstream's binding writes straight to storage (`GuaranteedUpdate`), without the pod
        // strategy's update validation: a bound pod's spec.nodeName is immutable only to
        // clients.
        if scope != WriteScope::Internal {
            crate::validation::validate_defaulted_update(ri, &next, &current)
                .map_err(|errs| validation_error(ri, name, errs))?;
        }
        if _alloc.is_some() {
            let in_use = services_in_use(inner, Some((namespace.unwrap_or(""), name))).await?;
            crate::services::allocate(&mut next, Some(&current), &in_use, &inner.rng)
                .map_err(|errs| validation_error(ri, name, errs))?;
        }
        if is_priority_classes(ri) {
            check_one_default(inner, ri, &next, false).await?;
        }
        crate::authz::check_escalation(inner, ri, &next, Some(&current)).await?;
        if scope != WriteScope::Internal {
            let sub = if scope == WriteScope::Status {
                "status"
            } else {
                ""
            };
            crate::authz::admit_node_write(
                inner,
                ri,
                sub,
                crate::node_restriction::Op::Update,
                namespace.unwrap_or(""),
                name,
                Some(&next),
                Some(&current),
            )
            .await?;
        }
        if object::same_ignoring_rv(&next, &current) {
            return Ok(WriteOutcome::Stored(current));
        }
        if dry_run {
            return Ok(WriteOutcome::Stored(Current::Decoded(present(
                ri,
                next,
                kv.mod_revision,
            ))));
        }
        if should_delete_during_update(&next) {
            match inner.store.delete(&key, Some(kv.mod_revision)).await {
                Ok((rev, _)) => {
                    return Ok(WriteOutcome::Deleted(Current::Decoded(present(
                        ri, next, rev,
                    ))));
                }
                Err(StoreError::Conflict { .. }) if pinned.is_none() => continue,
                Err(StoreError::Conflict { .. }) => return Err(ApiError::conflict(ri, name)),
                Err(StoreError::NotFound(_)) => return Err(ApiError::not_found(ri, name)),
                Err(e) => return Err(e.into()),
            }
        }
        let (bytes, doc) = encode_for_store(ri, &next)?;
        let memo = klab_store::Memo::shared();
        match inner
            .store
            .update_noted(&key, bytes.clone(), kv.mod_revision, memo.clone())
            .await
        {
            Ok(rev) => {
                let change = updated(rev, &key, &bytes, &kv);
                return Ok(WriteOutcome::Stored(written(
                    inner,
                    ri,
                    &change,
                    (next, doc),
                    &memo,
                )));
            }
            Err(StoreError::Conflict { .. }) if pinned.is_none() => continue,
            Err(StoreError::Conflict { .. }) => return Err(ApiError::conflict(ri, name)),
            Err(StoreError::NotFound(_)) => return Err(ApiError::not_found(ri, name)),
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict(ri, name))
}

/// The change an update at `rev` made to the key whose stored version was `kv`.
fn updated<'a>(
    rev: u64,
    key: &'a str,
    bytes: &'a Bytes,
    kv: &'a KeyValue,
) -> crate::watch::Change<'a> {
    crate::watch::Change {
        revision: rev,
        kind: klab_store::EventKind::Update,
        key,
        value: Some(bytes),
        prev_value: Some(&kv.value),
    }
}

fn outcome_response(ctx: &Ctx, outcome: WriteOutcome) -> ApiResult<Response> {
    match outcome {
        WriteOutcome::Stored(obj) | WriteOutcome::Deleted(obj) => {
            object_response(ctx, StatusCode::OK, obj)
        }
    }
}

pub(crate) async fn update(ctx: &Ctx, body: Bytes) -> ApiResult<Response> {
    let new = decode_body(ctx, &body)?;
    let manager = request_field_manager(ctx, "UpdateOptions", false)?;
    let t = &ctx.target;
    let name = t.name.as_deref().unwrap_or("");
    let outcome = guarded_update_as(
        &ctx.inner,
        t.ri,
        t.namespace.as_deref(),
        name,
        WriteMode {
            scope: WriteScope::of(ctx),
            dry_run: ctx.dry_run(),
            strict: ctx.strict(),
            changes: Changes::Any,
        },
        &Recording::Update(manager),
        |_| Ok(new.clone()),
    )
    .await?;
    outcome_response(ctx, outcome)
}

pub(crate) async fn patch(ctx: &Ctx, body: Bytes) -> ApiResult<Response> {
    let t = &ctx.target;
    let kind = crate::patch::PatchKind::from_content_type(ctx.content_type())?;
    let patch_doc = crate::patch::decode_patch(kind, &body)?;
    let manager = request_field_manager(ctx, "PatchOptions", kind == PatchKind::Apply)?;
    if kind == PatchKind::Apply {
        return server_side_apply(ctx, manager, patch_doc).await;
    }
    let name = t.name.as_deref().unwrap_or("");
    let ri = t.ri;
    let pins_rv = crate::patch::pins_resource_version(kind, &patch_doc);
    let scope = WriteScope::of(ctx);
    let status_patch =
        matches!(kind, PatchKind::Merge | PatchKind::Strategic) && touches_only_status(&patch_doc);
    let outcome = guarded_update_as(
        &ctx.inner,
        ri,
        t.namespace.as_deref(),
        name,
        WriteMode {
            scope,
            dry_run: ctx.dry_run(),
            strict: ctx.strict(),
            changes: if status_patch && scope == WriteScope::Status {
                Changes::Status
            } else {
                Changes::Any
            },
        },
        &Recording::Update(manager),
        |current| {
            // The patch applies to the whole current object (a JSON patch may `test` its
            // resourceVersion). Only a resourceVersion the patch itself sets is a precondition;
            // otherwise the stamped one is dropped, so a concurrent write makes the server retry.
            // A status write's patch of status alone applies to the object without its spec and
            // managedFields: the write keeps the stored ones whatever it proposes (and the
            // patch, which names nothing else, gives the same status and metadata either way).
            let mut out = if status_patch && scope == WriteScope::Status {
                crate::patch::apply_patch(ri, kind, &status_view(current), &patch_doc)?
            } else {
                crate::patch::apply_patch(ri, kind, current, &patch_doc)?
            };
            if !pins_rv {
                object::strip_for_storage(&mut out);
            }
            Ok(out)
        },
    )
    .await?;
    outcome_response(ctx, outcome)
}

/// `obj` without `spec` and `metadata.managedFields`, the rest copied.
fn status_view(obj: &Value) -> Value {
    crate::apply::without_fields(obj, &["spec"])
}

/// `application/apply-patch+yaml`: server-side apply onto the stored object, or a create when
/// there is none (201).
async fn server_side_apply(ctx: &Ctx, manager: FieldManager, config: Value) -> ApiResult<Response> {
    let t = &ctx.target;
    let ri = t.ri;
    let name = t.name.as_deref().unwrap_or("");
    crate::apply::check_config(ri, t.namespace.as_deref(), name, &config)?;
    let force = ctx.q_bool("force");
    let pins_rv = crate::patch::pins_resource_version(PatchKind::Apply, &config);
    let mode = WriteMode {
        scope: WriteScope::of(ctx),
        dry_run: ctx.dry_run(),
        strict: ctx.strict(),
        changes: Changes::Any,
    };
    let inner = &ctx.inner;
    let updated = guarded_update_as(
        inner,
        ri,
        t.namespace.as_deref(),
        name,
        mode,
        &Recording::Applied,
        |current| {
            let now = format_time(inner.clock.now());
            let mut out =
                crate::apply::apply(ri, name, &manager, Some(current), &config, force, &now)?;
            if !pins_rv {
                object::strip_for_storage(&mut out);
            }
            Ok(out)
        },
    )
    .await;
    match updated {
        Ok(outcome) => outcome_response(ctx, outcome),
        Err(e) if e.code == 404 && e.reason == "NotFound" && t.sub.is_none() => {
            let now = format_time(inner.clock.now());
            let mut obj = crate::apply::apply(ri, name, &manager, None, &config, force, &now)?;
            meta_mut(&mut obj).insert("name".into(), json!(name));
            let created = create_object_as(
                inner,
                ri,
                t.namespace.as_deref(),
                obj,
                ctx.dry_run(),
                ctx.strict(),
                &Recording::Applied,
            )
            .await?;
            object_response(ctx, StatusCode::CREATED, created)
        }
        Err(e) => Err(e),
    }
}

// ---------------------------------------------------------------------------------------------
// Delete

/// DeleteOptions from the body (JSON) and/or the query string.
#[derive(Debug, Default, Clone)]
pub(crate) struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub dry_run: bool,
}

impl DeleteOptions {
    pub fn parse(ctx: &Ctx, body: &[u8]) -> ApiResult<Self> {
        let mut o = DeleteOptions::default();
        if body.starts_with(crate::protobuf::MAGIC) {
            let v = crate::protobuf::decode_request("DeleteOptions", "v1", body)?;
            o = Self::from_value(&v)?;
        } else if !body.iter().all(u8::is_ascii_whitespace) {
            let v: Value = serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!(
                    "DeleteOptions in version \"v1\" cannot be handled as a DeleteOptions: {e}"
                ))
            })?;
            o = Self::from_value(&v)?;
        }
        if let Some(g) = ctx.q("gracePeriodSeconds") {
            o.grace_period_seconds =
                Some(g.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid gracePeriodSeconds {g:?}"))
                })?);
        }
        if let Some(p) = ctx.q("propagationPolicy") {
            o.propagation_policy = Some(p.to_string());
        }
        if ctx.dry_run() {
            o.dry_run = true;
        }
        if let Some(p) = &o.propagation_policy
            && !matches!(p.as_str(), "Orphan" | "Background" | "Foreground")
        {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
        Ok(o)
    }

    pub fn from_value(v: &Value) -> ApiResult<Self> {
        if !v.is_object() {
            return Err(ApiError::bad_request("DeleteOptions must be a JSON object"));
        }
        Ok(DeleteOptions {
            grace_period_seconds: v.get("gracePeriodSeconds").and_then(Value::as_i64),
            propagation_policy: v
                .get("propagationPolicy")
                .and_then(Value::as_str)
                .map(String::from)
                .or_else(|| {
                    // The deprecated orphanDependents maps onto a policy.
                    v.get("orphanDependents").and_then(Value::as_bool).map(|o| {
                        if o {
                            "Orphan".into()
                        } else {
                            "Background".into()
                        }
                    })
                }),
            precondition_uid: v
                .at("/preconditions/uid")
                .and_then(Value::as_str)
                .map(String::from),
            precondition_rv: v
                .at("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(String::from),
            dry_run: v
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|x| x == "All")),
        })
    }
}

fn pod_view(obj: &Value) -> PodDeleteView {
    let ts = |s: Option<&str>| s.and_then(|s| s.parse::<Timestamp>().ok());
    PodDeleteView {
        node_name: obj
            .at("/spec/nodeName")
            .and_then(Value::as_str)
            .map(String::from),
        phase: obj
            .at("/status/phase")
            .and_then(Value::as_str)
            .map(String::from),
        termination_grace_period_seconds: obj
            .at("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64),
        deletion_timestamp: ts(object::deletion_timestamp(obj)),
        deletion_grace_period_seconds: obj
            .at("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64),
        has_finalizers: !object::finalizers(obj).is_empty(),
    }
}

/// The result of deleting one object.
pub(crate) enum Deleted {
    /// Removed from storage; the last state (with the deletion's revision).
    Removed(Current),
    /// Still stored, marked for deletion (graceful pod, finalizers, namespace).
    Marked(Current),
}

impl Deleted {
    pub fn into_object(self) -> Current {
        match self {
            Deleted::Removed(v) | Deleted::Marked(v) => v,
        }
    }
}

/// Deletes one object with graceful deletion, finalizers and preconditions.
pub(crate) async fn delete_object(
    inner: &Arc<Inner>,
    ri: &'static ResourceInfo,
    namespace: Option<&str>,
    name: &str,
    opts: &DeleteOptions,
) -> ApiResult<Deleted> {
    let key = conversion::storage_resource(ri).key(namespace, name);
    for _ in 0..MAX_WRITE_RETRIES {
        let (current, kv) = get_current(inner, ri, &key, name).await?;
        if let Some(uid) = &opts.precondition_uid
            && uid != object::uid(&current)
        {
            return Err(ApiError::precondition_failed(
                ri,
                name,
                format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    object::uid(&current)
                ),
            ));
        }
        if let Some(rv) = &opts.precondition_rv
            && rv != &kv.mod_revision.to_string()
        {
            return Err(ApiError::precondition_failed(
                ri,
                name,
                format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    kv.mod_revision
                ),
            ));
        }
        let now = inner.clock.now();
        let mut next = current.clone();
        // Propagation policies that the garbage collector carries out through finalizers.
        let gc_finalizer = match opts.propagation_policy.as_deref() {
            Some("Foreground") => Some("foregroundDeletion"),
            Some("Orphan") => Some("orphan"),
            _ => None,
        };
        if let Some(f) = gc_finalizer
            && object::deletion_timestamp(&current).is_none()
            && !object::finalizers(&current).iter().any(|x| x == f)
        {
            let m = meta_mut(&mut next);
            let list = m.entry("finalizers").or_insert_with(|| json!([]));
            if let Some(a) = list.as_array_mut() {
                a.push(json!(f));
            }
        }
        let is_namespace = ri.plural == "namespaces" && ri.group.is_empty();
        let decision = if ri.plural == "pods" && ri.group.is_empty() {
            let mut view = pod_view(&current);
            view.has_finalizers = !object::finalizers(&next).is_empty();
            decide_pod_delete(&view, opts.grace_period_seconds, now)
        } else if is_namespace {
            // Namespaces are finalized by the namespace controller after their content is gone.
            if object::deletion_timestamp(&current).is_some() {
                DeleteDecision::Unchanged
            } else {
                DeleteDecision::Mark {
                    deletion_timestamp: now,
                    grace_seconds: 0,
                }
            }
        } else {
            decide_generic_delete(
                object::deletion_timestamp(&current).is_some(),
                !object::finalizers(&next).is_empty(),
                now,
            )
        };
        match decision {
            DeleteDecision::Unchanged => return Ok(Deleted::Marked(current)),
            DeleteDecision::Mark {
                deletion_timestamp,
                grace_seconds,
            } => {
                let m = meta_mut(&mut next);
                m.insert(
                    "deletionTimestamp".into(),
                    json!(format_time(deletion_timestamp)),
                );
                m.insert("deletionGracePeriodSeconds".into(), json!(grace_seconds));
                if ri.has_generation
                    && object::deletion_timestamp(&current).is_none()
                    && let Some(g) = m
                        .get("generation")
                        .and_then(Value::as_i64)
                        .filter(|g| *g > 0)
                {
                    m.insert("generation".into(), json!(g + 1));
                }
                if is_namespace {
                    next["status"]["phase"] = json!("Terminating");
                }
                if opts.dry_run {
                    return Ok(Deleted::Marked(Current::Decoded(present(
                        ri,
                        next,
                        kv.mod_revision,
                    ))));
                }
                let (bytes, doc) = encode_for_store(ri, &next)?;
                let memo = klab_store::Memo::shared();
                match inner
                    .store
                    .update_noted(&key, bytes.clone(), kv.mod_revision, memo.clone())
                    .await
                {
                    Ok(rev) => {
                        let change = updated(rev, &key, &bytes, &kv);
                        return Ok(Deleted::Marked(written(
                            inner,
                            ri,
                            &change,
                            (next, doc),
                            &memo,
                        )));
                    }
                    Err(StoreError::Conflict { .. }) | Err(StoreError::NotFound(_)) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            DeleteDecision::MarkThenRemove { deletion_timestamp } => {
                let m = meta_mut(&mut next);
                m.insert(
                    "deletionTimestamp".into(),
                    json!(format_time(deletion_timestamp)),
                );
                m.insert("deletionGracePeriodSeconds".into(), json!(0));
                if opts.dry_run {
                    return Ok(Deleted::Removed(Current::Decoded(present(
                        ri,
                        next,
                        kv.mod_revision,
                    ))));
                }
                let (bytes, doc) = encode_for_store(ri, &next)?;
                let memo = klab_store::Memo::shared();
                let marked = match inner
                    .store
                    .update_noted(&key, bytes.clone(), kv.mod_revision, memo.clone())
                    .await
                {
                    Ok(rev) => {
                        let change = updated(rev, &key, &bytes, &kv);
                        written(inner, ri, &change, (next.clone(), doc), &memo);
                        rev
                    }
                    Err(StoreError::Conflict { .. }) | Err(StoreError::NotFound(_)) => continue,
                    Err(e) => return Err(e.into()),
                };
                // Someone else (the kubelet, a force delete) may remove it first: not an error,
                // as upstream ignores NotFound here.
                return match inner.store.delete(&key, Some(marked)).await {
                    Ok((rev, _)) => Ok(Deleted::Removed(Current::Decoded(present(ri, next, rev)))),
                    Err(StoreError::NotFound(_)) | Err(StoreError::Conflict { .. }) => Ok(
                        Deleted::Removed(Current::Decoded(present(ri, next, marked))),
                    ),
                    Err(e) => Err(e.into()),
                };
            }
            DeleteDecision::RemoveNow => {
                if opts.dry_run {
                    return Ok(Deleted::Removed(current));
                }
                match inner.store.delete(&key, Some(kv.mod_revision)).await {
                    Ok((rev, _)) => {
                        return Ok(Deleted::Removed(Current::Decoded(present(
                            ri,
                            current.into_value(),
                            rev,
                        ))));
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(StoreError::NotFound(_)) => return Err(ApiError::not_found(ri, name)),
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    Err(ApiError::conflict(ri, name))
}

/// The Status body upstream returns when a non-pod object was removed.
fn success_status(ri: &ResourceInfo, obj: &Value) -> Value {
    let mut details =
        json!({"name": object::name(obj), "kind": ri.plural, "uid": object::uid(obj)});
    if !ri.group.is_empty() {
        details["group"] = json!(ri.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

pub(crate) async fn delete(ctx: &Ctx, body: Bytes) -> ApiResult<Response> {
    let opts = DeleteOptions::parse(ctx, &body)?;
    let t = &ctx.target;
    let ri = t.ri;
    let name = t.name.as_deref().unwrap_or("");
    // Upstream's PriorityClass REST refuses to delete the system classes by name (a delete of
    // the collection goes through the plain store and is not refused).
    if is_priority_classes(ri)
        && crate::validation::SYSTEM_PRIORITY_CLASSES
            .iter()
            .any(|(n, _, _)| *n == name)
    {
        return Err(ApiError::forbidden(format!(
            "{} \"{name}\" is forbidden: this is a system priority class and cannot be deleted",
            ri.qualified_plural()
        )));
    }
    if ri.group.is_empty() && ri.plural == "pods" {
        let key = ri.key(t.namespace.as_deref(), name);
        if let Some(kv) = ctx.inner.store.get(&key).await? {
            let existing = decode_kv(ri, &kv)?;
            crate::authz::admit_node_write(
                &ctx.inner,
                ri,
                "",
                crate::node_restriction::Op::Delete,
                t.namespace.as_deref().unwrap_or(""),
                name,
                None,
                Some(&existing),
            )
            .await?;
        }
    }
    let result = delete_object(&ctx.inner, ri, t.namespace.as_deref(), name, &opts).await?;
    // Pods return the deleted object; other kinds a Status once removed, the object while marked.
    let returns_object = ri.group.is_empty() && matches!(ri.plural, "pods" | "services");
    match result {
        Deleted::Removed(obj) if !returns_object => {
            Ok(json_response(StatusCode::OK, &success_status(ri, &obj)))
        }
        other => object_response(ctx, StatusCode::OK, other.into_object()),
    }
}

pub(crate) async fn delete_collection(ctx: &Ctx, body: Bytes) -> ApiResult<Response> {
    let ri = ctx.target.ri;
    if ri.namespaced && ctx.target.namespace.is_none() {
        return Err(ApiError::no_such_path());
    }
    let opts = DeleteOptions::parse(ctx, &body)?;
    let sel = Selectors::from_ctx(ctx)?;
    let (items, rev, _, _) = list_objects(ctx, &sel).await?;
    let mut out = Vec::new();
    for item in items {
        match delete_object(
            &ctx.inner,
            ri,
            object::namespace(&item),
            object::name(&item),
            &opts,
        )
        .await
        {
            Ok(d) => out.push(d.into_object().into_value()),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let body = json!({"kind": ri.list_kind(), "apiVersion": ri.api_version(), "metadata": {"resourceVersion": rev.to_string()}, "items": out});
    Ok(json_response(StatusCode::OK, &body))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Table list built from stored documents (objects decoded without what no printer reads,
    /// `PartialObjectMetadata` written from the stored bytes) is byte for byte the Table of the
    /// whole decoded objects, for every `includeObject` it serves.
    #[test]
    fn a_table_from_stored_documents_is_the_table_of_the_decoded_objects() {
        let pods = registry::lookup("", "v1", "pods").unwrap();
        let nodes = registry::lookup("", "v1", "nodes").unwrap();
        let deployments = registry::lookup("apps", "v1", "deployments").unwrap();
        let managed = json!([
            {"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
             "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}},
            {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "subresource": "status",
             "time": "2026-01-01T00:00:05Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:status": {"f:phase": {}, "f:podIP": {}}}}
        ]);
        let pod = |name: &str, phase: &str, deleting: bool| {
            let mut meta = json!({"name": name, "namespace": "default", "uid": "u1",
                "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app": "web"},
                "managedFields": managed});
            if deleting {
                meta["deletionTimestamp"] = json!("2026-01-01T00:01:00Z");
                meta["deletionGracePeriodSeconds"] = json!(30);
            }
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}],
                    "initContainers": [{"name": "s", "image": "i", "restartPolicy": "Always"}]},
                "status": {"phase": phase, "podIP": "10.0.0.1", "conditions": [
                        {"type": "Ready", "status": "True"}],
                    "containerStatuses": [{"name": "c", "ready": true, "restartCount": 2,
                        "state": {"running": {"startedAt": "2026-01-01T00:00:03Z"}},
                        "lastState": {"terminated": {"exitCode": 1,
                            "finishedAt": "2026-01-01T00:00:02Z"}}}],
                    "initContainerStatuses": [{"name": "s", "ready": true, "started": true,
                        "restartCount": 0, "state": {"running": {}}}]}})
        };
        let node = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "x"},
                "managedFields": managed},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "172.18.0.2"}],
                "images": [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 320368}],
                "nodeInfo": {"kubeletVersion": "v1.33.1", "osImage": "Debian"}}});
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "default", "managedFields": managed},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "status": {"readyReplicas": 2}});
        let no_metadata = json!({"apiVersion": "v1", "kind": "Pod", "spec": {}});
        let cases = [
            (pods, pod("running", "Running", false)),
            (pods, pod("done", "Succeeded", false)),
            (pods, pod("leaving", "Running", true)),
            (pods, no_metadata),
            (nodes, node),
            (deployments, deployment),
        ];
        let everything = Selectors {
            labels: klab_api::selector::LabelSelector::everything(),
            fields: crate::selector_field::FieldSelector::everything(),
        };
        let now: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        for (ri, obj) in cases {
            let (bytes, _) = encode_for_store(ri, &obj).unwrap();
            let kv = KeyValue {
                key: "k".into(),
                value: bytes,
                create_revision: 3,
                mod_revision: 7,
            };
            for include in [
                crate::table::IncludeObject::Metadata,
                crate::table::IncludeObject::None,
            ] {
                let meta = json!({"resourceVersion": "9"});
                let whole = decode_kv(ri, &kv).unwrap();
                let want = crate::table::table(ri, &[whole], include, meta.clone(), now, true);
                let row = table_item(ri, &everything, include, &kv).unwrap().unwrap();
                let got = crate::table::table_json(ri, &[row], include, meta, now).unwrap();
                assert_eq!(
                    String::from_utf8(got).unwrap(),
                    serde_json::to_string(&want).unwrap(),
                    "{} {include:?}",
                    ri.kind
                );
            }
        }
    }

    /// Whichever way a write is encoded, the store gets the bytes of the stored form of a copy
    /// without resourceVersion and selfLink, and the window's document (from the object itself
    /// when no converted one is given) is what a read of them presents.
    #[test]
    fn a_write_stores_its_object_stripped_and_presents_it_as_a_read_does() {
        let pods = registry::lookup("", "v1", "pods").unwrap();
        let events = registry::lookup("events.k8s.io", "v1", "events").unwrap();
        let pod = |meta: Value| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": {"containers": [{"name": "c", "image": "i"}]}})
        };
        let cases = [
            (
                pods,
                pod(json!({"name": "p", "uid": "u", "resourceVersion": "3"})),
                true,
            ),
            (pods, pod(json!({"name": "p", "uid": "u"})), true),
            // resourceVersion not last, a selfLink: removed as `Map::remove` does.
            (
                pods,
                pod(json!({"resourceVersion": "3", "name": "p", "uid": "u"})),
                true,
            ),
            (
                pods,
                pod(json!({"name": "p", "selfLink": "/x", "resourceVersion": "3"})),
                true,
            ),
            (
                events,
                json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                    "metadata": {"name": "e", "namespace": "d"}, "note": "n", "reason": "R"}),
                false,
            ),
        ];
        for (ri, obj, direct) in cases {
            let (bytes, doc) = encode_for_store(ri, &obj).unwrap();
            assert_eq!(doc.is_none(), direct, "{obj}");
            let mut copy = conversion::to_storage(ri, &obj);
            object::strip_for_storage(&mut copy);
            assert_eq!(bytes, serde_json::to_vec(&copy).unwrap(), "{obj}");
            let kv = KeyValue {
                key: "k".into(),
                value: bytes,
                create_revision: 9,
                mod_revision: 9,
            };
            let presented = stored_as_read(ri, obj.clone(), doc, 9);
            let read = decode_kv(ri, &kv).unwrap();
            assert_eq!(presented, read, "{obj}");
            assert_eq!(
                serde_json::to_vec(&presented).unwrap(),
                serde_json::to_vec(&read).unwrap(),
                "the same document, field order too: {obj}"
            );
        }
    }

    /// A status write's patch of status alone gives the same status and metadata applied to the
    /// object without its spec and managedFields as applied to the whole object.
    #[test]
    fn a_status_patch_applies_to_the_status_view_as_to_the_whole_object() {
        use crate::patch::{PatchKind, apply_patch};
        let ri = registry::lookup("", "v1", "pods").unwrap();
        let current = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "u1", "resourceVersion": "7",
                "labels": {"app": "web"},
                "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:nodeName": {}}}}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]}});
        let patches = [
            (
                PatchKind::Strategic,
                json!({"metadata": {"uid": "u1"}, "status": {
                "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "PodScheduled"}, {"type": "Ready"}],
                "conditions": [{"type": "Initialized", "status": "True"},
                               {"type": "Ready", "status": "True", "reason": null}],
                "phase": "Running"}}),
            ),
            (
                PatchKind::Strategic,
                json!({"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}}),
            ),
            (
                PatchKind::Merge,
                json!({"metadata": {"resourceVersion": "7"}, "status": {"phase": null, "conditions": []}}),
            ),
            (PatchKind::Merge, json!({"status": "odd"})),
        ];
        for (kind, patch) in patches {
            assert!(touches_only_status(&patch), "{patch}");
            let whole = apply_patch(ri, kind, &current, &patch);
            let view = apply_patch(ri, kind, &status_view(&current), &patch);
            let (Ok(whole), Ok(view)) = (whole, view) else {
                panic!("{patch}: applies to the whole object and to the status view");
            };
            assert_eq!(whole.get("status"), view.get("status"), "{patch}");
            let mut meta = whole["metadata"].clone();
            meta.as_object_mut().unwrap().remove("managedFields");
            assert_eq!(meta, view["metadata"], "{patch}");
            assert_eq!(view.get("spec"), None);
        }
    }

    /// A status write keeps everything of the stored object but its status, which it takes from
    /// the request in the stored status's place (or drops, when the request has none); the
    /// system-owned metadata comes from the stored object.
    #[test]
    fn a_status_write_takes_only_the_status_and_keeps_field_order() {
        let ri = registry::lookup("", "v1", "pods").expect("served");
        let old = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "uid": "u1", "generation": 3, "labels": {"a": "1"}},
            "status": {"phase": "Pending"},
            "spec": {"nodeName": "n1"}
        });
        let new = json!({
            "metadata": {"name": "p", "uid": "other", "labels": {"a": "2"}},
            "spec": {"nodeName": "n2"},
            "status": {"phase": "Running"}
        });
        let out = merge_update(ri, WriteScope::Status, &old, new);
        let keys: Vec<&str> = out
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(keys, ["apiVersion", "kind", "metadata", "status", "spec"]);
        assert_eq!(out["status"], json!({"phase": "Running"}));
        assert_eq!(out["spec"], json!({"nodeName": "n1"}));
        assert_eq!(out["metadata"]["uid"], "u1");
        assert_eq!(out["metadata"]["labels"], json!({"a": "1"}));
        assert_eq!(out["metadata"]["generation"], 3);

        let without = merge_update(ri, WriteScope::Status, &old, json!({"metadata": {}}));
        assert!(without.get("status").is_none());
        let added = merge_update(
            ri,
            WriteScope::Status,
            &json!({"metadata": {"name": "p"}}),
            json!({"status": {"phase": "Running"}}),
        );
        assert_eq!(added["status"], json!({"phase": "Running"}));
        // A stored value that is not an object is returned as it is (never indexed into).
        assert_eq!(
            merge_update(ri, WriteScope::Status, &json!(null), json!({})),
            json!(null)
        );
    }

    /// A main write of a kind with generations bumps it when the spec changes, saturating.
    #[test]
    fn a_spec_change_bumps_the_generation_without_overflow() {
        let ri = registry::lookup("apps", "v1", "deployments").expect("served");
        let old =
            json!({"metadata": {"name": "d", "generation": i64::MAX}, "spec": {"replicas": 1}});
        let out = merge_update(
            ri,
            WriteScope::Main,
            &old,
            json!({"metadata": {"name": "d"}, "spec": {"replicas": 2}}),
        );
        assert_eq!(out["metadata"]["generation"], i64::MAX);
        let old = json!({"metadata": {"name": "d", "generation": 4}, "spec": {"replicas": 1}});
        let out = merge_update(
            ri,
            WriteScope::Main,
            &old,
            json!({"metadata": {"name": "d"}, "spec": {"replicas": 2}}),
        );
        assert_eq!(out["metadata"]["generation"], 5);
    }
}
