//! The OpenAPI v3 index and per group-version documents kubectl needs for validation (§b.4).
//!
//! kubectl's default `--validate=strict` asks the server whether it can validate fields itself:
//! it reads `/openapi/v3`, fetches the group-version document named there, finds the path whose
//! `patch` operation carries `x-kubernetes-group-version-kind` = the object's GVK, and looks for
//! a `fieldValidation` query parameter. If found it sends `fieldValidation=Strict` and skips
//! client-side schema validation; if `/openapi/v3` is missing it falls back to `/openapi/v2`
//! and, on 404 there too, refuses `create -f` / `apply -f` / `replace -f` altogether.
//!
//! The documents are therefore minimal: one PATCH operation per resource, with no
//! `requestBody` — a `requestBody` naming `application/strategic-merge-patch+json` without
//! `components` makes `kubectl apply` warn `OpenAPI V3 Components is nil`; without it, apply
//! falls back to its compiled-in patch metadata.
//!
//! kubectl 1.27 and 1.28 do not read v3 for this check: they fetch `/openapi/v2` as protobuf
//! (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, gnostic `openapi_v2.Document`)
//! and fail `create -f` when it is missing. `/openapi/v2` serves the full Swagger 2.0 document —
//! the PATCH operations with their GVK, `consumes` (strategic merge patch among them) and
//! `fieldValidation`, and every served kind's `definitions` — as JSON, or as that protobuf
//! message when asked for it. kubectl's client-side apply computes strategic merge patches from
//! it (`x-kubernetes-patch-strategy` / `-merge-key` on the definitions) and `kubectl explain
//! --output=plaintext-openapiv2` reads its definitions.
//!
//! Both versions carry what k8s-openapi's schemas lack and upstream's have: `enum` on `+enum`
//! string fields with upstream's "Possible enum values" description section (kubectl 1.30+
//! `explain` prints `ENUM:` / `enum:` lines), and the list and patch extensions, from the
//! generated table `openapi_fields.jsonl` (tools/gen_openapi_extensions.py).

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value, json};

use crate::discovery::{GIT_VERSION, not_found};
use crate::registry::ResourceInfo;

/// The resources the documents describe: every served one but metrics-server's, whose schemas
/// its aggregated API server would publish (klab does not serve them).
fn described() -> impl Iterator<Item = &'static ResourceInfo> {
    crate::registry::RESOURCES
        .iter()
        .filter(|r| !crate::registry::is_metrics(r))
}

/// The index key of a group-version: `api/v1` or `apis/<group>/<version>`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// Every served group-version as (group, version), core first, in registry order.
fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in described() {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// `/openapi/v3`: `paths` → `serverRelativeURL` with the document's content hash, so clients
/// re-fetch exactly when a document changes.
pub fn index() -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions() {
        let key = gv_path(group, version);
        if let Some(doc) = documents().get(&key) {
            paths.insert(
                key.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={}", doc.hash)}),
            );
        }
    }
    json!({"paths": paths})
}

/// Upstream operation-id stem of a group: `Core`, `Apps`, `Coordination`, `Storage`, …
fn group_stem(group: &str) -> String {
    let first = if group.is_empty() {
        "core"
    } else {
        group.split('.').next().unwrap_or(group)
    };
    let mut chars = first.chars();
    match chars.next() {
        Some(c) => c.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

fn query_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

/// The path item of one resource's object URL, with its PATCH operation.
fn patch_path_item(ri: &ResourceInfo) -> (String, Value) {
    let prefix = if ri.group.is_empty() {
        format!("/api/{}", ri.version)
    } else {
        format!("/apis/{}/{}", ri.group, ri.version)
    };
    let (path, scope) = if ri.namespaced {
        (
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", ri.plural),
            "Namespaced",
        )
    } else {
        (format!("{prefix}/{}/{{name}}", ri.plural), "")
    };
    let mut path_params = vec![json!({
        "name": "name", "in": "path", "description": format!("name of the {}", ri.kind),
        "required": true, "schema": {"type": "string", "uniqueItems": true}
    })];
    if ri.namespaced {
        path_params.push(json!({
            "name": "namespace", "in": "path",
            "description": "object name and auth scope, such as for teams and projects",
            "required": true, "schema": {"type": "string", "uniqueItems": true}
        }));
    }
    path_params.push(query_param("pretty", "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget)."));
    let tag = format!(
        "{}_{}",
        if ri.group.is_empty() {
            "core".to_string()
        } else {
            ri.group.split('.').next().unwrap_or(ri.group).to_string()
        },
        ri.version
    );
    let op = json!({
        "tags": [tag],
        "description": format!("partially update the specified {}", ri.kind),
        "operationId": format!("patch{}{}{scope}{}", group_stem(ri.group), capitalized(ri.version), ri.kind),
        "parameters": [
            query_param("dryRun", "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed"),
            query_param("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint. This field is required for apply requests (application/apply-patch) but optional for non-apply patch types (JsonPatch, MergePatch, StrategicMergePatch)."),
            query_param("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered."),
            {"name": "force", "in": "query", "description": "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.", "schema": {"type": "boolean", "uniqueItems": true}},
        ],
        "responses": {
            "200": {"description": "OK"},
            "201": {"description": "Created"},
            "401": {"description": "Unauthorized"},
        },
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": {"group": ri.group, "version": ri.version, "kind": ri.kind},
    });
    (path, json!({"parameters": path_params, "patch": op}))
}

/// Describes a kind into a schema generator, returning its schema name.
struct Describe<'a>(&'a mut schemars::SchemaGenerator);

impl crate::schema::KindVisitor for Describe<'_> {
    type Out = String;
    fn visit<T: serde::de::DeserializeOwned + serde::Serialize + schemars::JsonSchema>(
        self,
    ) -> String {
        self.0.subschema_for::<T>();
        T::schema_name().into_owned()
    }
}

/// `components.schemas` of one group-version: every served kind's schema (from k8s-openapi,
/// which carries upstream's documentation) and everything it references, with upstream's
/// `x-kubernetes-group-version-kind` on the kinds (what `kubectl explain` looks a resource up
/// by). A `$ref` with a description becomes `allOf: [{$ref}]` beside it, as upstream writes it.
fn component_schemas(resources: &[&ResourceInfo]) -> Map<String, Value> {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let mut kinds: Vec<(String, &ResourceInfo)> = Vec::new();
    for ri in resources {
        if let Some(name) = crate::schema::visit_kind(ri, Describe(&mut generator)) {
            kinds.push((name, ri));
        }
    }
    let mut defs = generator.take_definitions(true);
    apply_upstream_fields(&mut defs);
    for (name, ri) in kinds {
        let Some(schema) = defs.get_mut(&name).and_then(Value::as_object_mut) else {
            continue;
        };
        schema.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": ri.group, "kind": ri.kind, "version": ri.version}]),
        );
        // k8s-openapi marks `metadata` required (it is not an Option there); upstream does not.
        if let Some(req) = schema.get_mut("required").and_then(Value::as_array_mut) {
            req.retain(|r| r != "metadata");
            if req.is_empty() {
                schema.remove("required");
            }
        }
    }
    // Ordered by name, as upstream's documents are.
    let sorted: std::collections::BTreeMap<String, Value> = defs.into_iter().collect();
    sorted.into_iter().collect()
}

/// One row of `openapi_fields.jsonl`: what upstream's OpenAPI has on one property beyond
/// k8s-openapi's schema.
#[derive(serde::Deserialize)]
struct UpstreamField {
    def: String,
    prop: String,
    #[serde(rename = "enum", default)]
    values: Option<Vec<String>>,
    #[serde(rename = "enumDoc", default)]
    enum_doc: Option<String>,
    #[serde(default)]
    ext: Map<String, Value>,
}

/// The table, parsed once (a row that does not parse is skipped; a unit test checks none is).
fn upstream_fields() -> &'static [UpstreamField] {
    static FIELDS: std::sync::OnceLock<Vec<UpstreamField>> = std::sync::OnceLock::new();
    FIELDS.get_or_init(|| {
        include_str!("openapi_fields.jsonl")
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    })
}

/// Puts upstream's enums (values, and the "Possible enum values" section after the
/// description) and list/patch extensions on the properties of `defs` that have them.
fn apply_upstream_fields(defs: &mut Map<String, Value>) {
    for f in upstream_fields() {
        let Some(prop) = defs
            .get_mut(&f.def)
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(&f.prop))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        if let (Some(values), Some(doc)) = (&f.values, &f.enum_doc) {
            let desc = match prop.get("description").and_then(Value::as_str) {
                Some(d) if !d.is_empty() => format!("{d}\n\n{doc}"),
                _ => doc.clone(),
            };
            prop.insert("description".into(), Value::String(desc));
            prop.insert("enum".into(), json!(values));
        }
        for (k, v) in &f.ext {
            prop.insert(k.clone(), v.clone());
        }
    }
}

/// One served document: its JSON text and content hash.
struct Document {
    json: String,
    hash: String,
}

/// Every group-version document, built and serialised once (they do not change while serving;
/// the core one is a few hundred kilobytes).
fn documents() -> &'static std::collections::BTreeMap<String, Document> {
    static DOCS: std::sync::OnceLock<std::collections::BTreeMap<String, Document>> =
        std::sync::OnceLock::new();
    DOCS.get_or_init(|| {
        group_versions()
            .into_iter()
            .filter_map(|(g, v)| {
                let key = gv_path(g, v);
                let doc = build_document(&key)?;
                Some((
                    key,
                    Document {
                        json: doc.to_string(),
                        hash: hash(&doc),
                    },
                ))
            })
            .collect()
    })
}

/// The document for one index key (`api/v1`, `apis/apps/v1`), or `None` if nothing is served
/// there.
pub fn group_version_document(gv: &str) -> Option<Value> {
    documents()
        .get(gv)
        .and_then(|d| serde_json::from_str(&d.json).ok())
}

fn build_document(gv: &str) -> Option<Value> {
    let mut paths = Map::new();
    for ri in described().filter(|r| gv_path(r.group, r.version) == gv) {
        let (path, item) = patch_path_item(ri);
        paths.insert(path, item);
    }
    if paths.is_empty() {
        return None;
    }
    let served: Vec<&ResourceInfo> = described()
        .filter(|r| gv_path(r.group, r.version) == gv)
        .collect();
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "components": {"schemas": component_schemas(&served)},
    }))
}

/// A content hash of a document: 128-bit FNV-1a over its JSON, upper-case hex (upstream uses
/// SHA-512; clients treat the value as opaque).
fn hash(doc: &Value) -> String {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut h = OFFSET;
    for b in doc.to_string().bytes() {
        h ^= u128::from(b);
        h = h.wrapping_mul(PRIME);
    }
    format!("{h:032X}")
}

/// `/openapi/v3`, `/openapi/v3/{*gv}` and `/openapi/v2` (JSON, or protobuf as kubectl asks).
pub fn routes() -> Router {
    Router::new()
        .route("/openapi/v3", get(index_handler))
        .route("/openapi/v3/{*gv}", get(document_handler))
        .route("/openapi/v2", get(v2_handler))
}

fn json_ok(body: &Value, etag: Option<String>) -> Response {
    json_text_ok(body.to_string(), etag)
}

fn json_text_ok(body: String, etag: Option<String>) -> Response {
    let mut resp = (StatusCode::OK, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(tag) = etag.and_then(|t| HeaderValue::from_str(&format!("\"{t}\"")).ok()) {
        resp.headers_mut().insert(header::ETAG, tag);
    }
    resp
}

async fn index_handler() -> Response {
    json_ok(&index(), None)
}

async fn document_handler(Path(gv): Path<String>) -> Response {
    // `?hash=` only busts caches: every hash gets the current document.
    match documents().get(gv.trim_matches('/')) {
        Some(doc) => json_text_ok(doc.json.clone(), Some(doc.hash.clone())),
        None => not_found(),
    }
}

/// The protobuf media type kubectl requests `/openapi/v2` with.
pub const OPENAPI_V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The same type as a response `Content-Type`: client-go parses it with Go's `mime` package,
/// which rejects the `@` of the request form ("unexpected content after media subtype").
const OPENAPI_V2_PROTOBUF_RESPONSE: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

async fn v2_handler(headers: axum::http::HeaderMap) -> Response {
    let wants_protobuf = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| {
            a.split(',').any(|r| {
                matches!(
                    r.split(';').next().unwrap_or("").trim(),
                    OPENAPI_V2_PROTOBUF | OPENAPI_V2_PROTOBUF_RESPONSE
                )
            })
        });
    let v2 = v2_built();
    if wants_protobuf {
        let mut resp = (StatusCode::OK, v2.protobuf.clone()).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(OPENAPI_V2_PROTOBUF_RESPONSE),
        );
        resp
    } else {
        json_text_ok(v2.json.clone(), Some(v2.hash.clone()))
    }
}

/// The v2 document in both encodings, built once.
struct V2 {
    json: String,
    hash: String,
    protobuf: Vec<u8>,
}

fn v2_built() -> &'static V2 {
    static V2DOC: std::sync::OnceLock<V2> = std::sync::OnceLock::new();
    V2DOC.get_or_init(|| {
        let doc = v2_document();
        V2 {
            json: doc.to_string(),
            hash: hash(&doc),
            protobuf: pb_document(&doc).0,
        }
    })
}

/// Rewrites a v3 schema into Swagger 2.0's form: references point into `#/definitions/`, and a
/// reference with siblings (v3's `allOf: [{$ref}]` beside a description) is a plain `$ref`
/// beside them, as upstream's v2 writes it.
fn to_v2_schema(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref")
                && let Some(name) = r.strip_prefix("#/components/schemas/")
            {
                *r = format!("#/definitions/{name}");
            }
            for (_, child) in m.iter_mut() {
                to_v2_schema(child);
            }
            let single_ref = m
                .get("allOf")
                .and_then(Value::as_array)
                .filter(|a| a.len() == 1)
                .and_then(|a| a[0].get("$ref"))
                .cloned();
            if let Some(r) = single_ref {
                m.remove("allOf");
                m.insert("$ref".into(), r);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(to_v2_schema),
        _ => {}
    }
}

/// A v3 PATCH path item in Swagger 2.0's form: parameters carry their type inline, the
/// operation says what it consumes (the four patch types of a built-in kind) and produces, and
/// takes the patch as its body.
fn v2_path_item(ri: &ResourceInfo, v3: &Value) -> Value {
    let param = |p: &Value| -> Value {
        let mut p = p.clone();
        if let Some(obj) = p.as_object_mut()
            && let Some(Value::Object(schema)) = obj.remove("schema")
        {
            for (k, v) in schema {
                obj.insert(k, v);
            }
        }
        p
    };
    let path_params: Vec<Value> = v3["parameters"]
        .as_array()
        .map(|a| a.iter().map(param).collect())
        .unwrap_or_default();
    let op = &v3["patch"];
    let mut params = vec![json!({
        "name": "body", "in": "body", "required": true,
        "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}
    })];
    params.extend(
        op["parameters"]
            .as_array()
            .map(|a| a.iter().map(param).collect::<Vec<_>>())
            .unwrap_or_default(),
    );
    let kind_ref = crate::schema::visit_kind(ri, SchemaName)
        .map(|n| json!({"$ref": format!("#/definitions/{n}")}));
    let response = |description: &str| match &kind_ref {
        Some(r) => json!({"description": description, "schema": r}),
        None => json!({"description": description}),
    };
    json!({
        "parameters": path_params,
        "patch": {
            "description": op["description"],
            "consumes": [
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
                "application/apply-patch+yaml"
            ],
            "produces": ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"],
            "schemes": ["https"],
            "tags": op["tags"],
            "operationId": op["operationId"],
            "parameters": params,
            "responses": {
                "200": response("OK"),
                "201": response("Created"),
                "401": {"description": "Unauthorized"}
            },
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": op["x-kubernetes-group-version-kind"],
        }
    })
}

/// The name of a kind's schema.
struct SchemaName;

impl crate::schema::KindVisitor for SchemaName {
    type Out = String;
    fn visit<T: serde::de::DeserializeOwned + serde::Serialize + schemars::JsonSchema>(
        self,
    ) -> String {
        T::schema_name().into_owned()
    }
}

/// `/openapi/v2`: every served resource's PATCH operation and every definition they use, with
/// upstream's v2 shapes for the two string-or-number types.
fn v2_document() -> Value {
    let all: Vec<&ResourceInfo> = described().collect();
    let mut definitions = component_schemas(&all);
    // The Patch body every PATCH operation names (upstream: an object of any shape).
    definitions.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch".into(),
        json!({"description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.", "type": "object"}),
    );
    if let Some(Value::Object(m)) =
        definitions.get_mut("io.k8s.apimachinery.pkg.util.intstr.IntOrString")
    {
        m.remove("x-kubernetes-int-or-string");
        m.insert("type".into(), json!("string"));
        m.insert("format".into(), json!("int-or-string"));
    }
    if let Some(Value::Object(m)) =
        definitions.get_mut("io.k8s.apimachinery.pkg.api.resource.Quantity")
    {
        m.remove("x-kubernetes-int-or-string");
        m.insert("type".into(), json!("string"));
    }
    let sorted: std::collections::BTreeMap<String, Value> = definitions.into_iter().collect();
    let mut definitions: Map<String, Value> = sorted.into_iter().collect();
    for v in definitions.values_mut() {
        to_v2_schema(v);
    }
    let mut paths = std::collections::BTreeMap::new();
    for ri in described() {
        let (path, item) = patch_path_item(ri);
        paths.insert(path, v2_path_item(ri, &item));
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "definitions": definitions,
    })
}

// ---- OpenAPI v2 as gnostic `openapi.v2.Document` protobuf (field numbers of OpenAPIv2.proto) ----

/// A protobuf message being written.
#[derive(Default)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) -> &mut Self {
        self.varint(u64::from(field) << 3 | 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
        self
    }

    fn string(&mut self, field: u32, s: &str) -> &mut Self {
        self.bytes(field, s.as_bytes())
    }

    fn message(&mut self, field: u32, msg: Pb) -> &mut Self {
        self.bytes(field, &msg.0)
    }

    fn bool(&mut self, field: u32, b: bool) -> &mut Self {
        self.varint(u64::from(field) << 3);
        self.varint(u64::from(b));
        self
    }

    fn int64(&mut self, field: u32, v: i64) -> &mut Self {
        self.varint(u64::from(field) << 3);
        self.varint(v as u64);
        self
    }

    fn double(&mut self, field: u32, v: f64) -> &mut Self {
        self.varint(u64::from(field) << 3 | 1);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// `field` as a string when `v` is one.
    fn str_of(&mut self, field: u32, v: Option<&Value>) -> &mut Self {
        if let Some(s) = v.and_then(Value::as_str) {
            self.string(field, s);
        }
        self
    }

    /// Every string of an array (or the one string) as repeated `field`.
    fn strings_of(&mut self, field: u32, v: Option<&Value>) -> &mut Self {
        match v {
            Some(Value::String(s)) => {
                self.string(field, s);
            }
            Some(Value::Array(a)) => {
                for s in a.iter().filter_map(Value::as_str) {
                    self.string(field, s);
                }
            }
            _ => {}
        }
        self
    }

    fn bool_of(&mut self, field: u32, v: Option<&Value>) -> &mut Self {
        if let Some(b) = v.and_then(Value::as_bool) {
            self.bool(field, b);
        }
        self
    }
}

/// gnostic's `Any{yaml}`: the value as YAML text (JSON is YAML; kubectl YAML-decodes it).
fn pb_any(v: &Value) -> Pb {
    let mut any = Pb::default();
    any.string(2, &format!("{v}\n"));
    any
}

/// The `x-` keys of `m` as repeated `NamedAny` in `field`.
fn pb_extensions(pb: &mut Pb, field: u32, m: &Map<String, Value>) {
    for (k, v) in m.iter().filter(|(k, _)| k.starts_with("x-")) {
        let mut named = Pb::default();
        named.string(1, k).message(2, pb_any(v));
        pb.message(field, named);
    }
}

/// A JSON schema as gnostic's `Schema`.
fn pb_schema(v: &Value) -> Pb {
    let mut pb = Pb::default();
    let Some(m) = v.as_object() else {
        return pb;
    };
    pb.str_of(1, m.get("$ref"))
        .str_of(2, m.get("format"))
        .str_of(3, m.get("title"))
        .str_of(4, m.get("description"));
    if let Some(d) = m.get("default") {
        pb.message(5, pb_any(d));
    }
    for (key, field) in [("multipleOf", 6), ("maximum", 7), ("minimum", 9)] {
        if let Some(x) = m.get(key).and_then(Value::as_f64) {
            pb.double(field, x);
        }
    }
    pb.bool_of(8, m.get("exclusiveMaximum"))
        .bool_of(10, m.get("exclusiveMinimum"));
    for (key, field) in [
        ("maxLength", 11),
        ("minLength", 12),
        ("maxItems", 14),
        ("minItems", 15),
        ("maxProperties", 17),
        ("minProperties", 18),
    ] {
        if let Some(x) = m.get(key).and_then(Value::as_i64) {
            pb.int64(field, x);
        }
    }
    pb.str_of(13, m.get("pattern"))
        .bool_of(16, m.get("uniqueItems"))
        .strings_of(19, m.get("required"));
    for e in m
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        pb.message(20, pb_any(e));
    }
    match m.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut item = Pb::default();
            item.bool(2, *b);
            pb.message(21, item);
        }
        Some(s @ Value::Object(_)) => {
            let mut item = Pb::default();
            item.message(1, pb_schema(s));
            pb.message(21, item);
        }
        _ => {}
    }
    if m.contains_key("type") {
        let mut ty = Pb::default();
        ty.strings_of(1, m.get("type"));
        pb.message(22, ty);
    }
    match m.get("items") {
        Some(Value::Array(a)) => {
            let mut items = Pb::default();
            for s in a {
                items.message(1, pb_schema(s));
            }
            pb.message(23, items);
        }
        Some(s @ Value::Object(_)) => {
            let mut items = Pb::default();
            items.message(1, pb_schema(s));
            pb.message(23, items);
        }
        _ => {}
    }
    for s in m
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        pb.message(24, pb_schema(s));
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        let mut p = Pb::default();
        for (name, s) in props {
            let mut named = Pb::default();
            named.string(1, name).message(2, pb_schema(s));
            p.message(1, named);
        }
        pb.message(25, p);
    }
    pb.bool_of(27, m.get("readOnly"));
    if let Some(d) = m.get("externalDocs").and_then(Value::as_object) {
        let mut docs = Pb::default();
        docs.str_of(1, d.get("description")).str_of(2, d.get("url"));
        pb.message(29, docs);
    }
    pb_extensions(&mut pb, 31, m);
    pb
}

/// A parameter as gnostic's `ParametersItem{Parameter{...}}`: the body, or a query or path
/// parameter.
fn pb_parameter(p: &Value) -> Pb {
    let mut param = Pb::default();
    if p["in"] == "body" {
        let mut body = Pb::default();
        body.str_of(1, p.get("description"))
            .str_of(2, p.get("name"))
            .str_of(3, p.get("in"))
            .bool_of(4, p.get("required"));
        if let Some(s) = p.get("schema") {
            body.message(5, pb_schema(s));
        }
        param.message(1, body);
    } else {
        let path = p["in"] == "path";
        let mut sub = Pb::default();
        sub.bool_of(1, p.get("required"))
            .str_of(2, p.get("in"))
            .str_of(3, p.get("description"))
            .str_of(4, p.get("name"))
            .str_of(if path { 5 } else { 6 }, p.get("type"))
            .bool_of(if path { 19 } else { 20 }, p.get("uniqueItems"));
        let mut non_body = Pb::default();
        non_body.message(if path { 4 } else { 3 }, sub);
        param.message(2, non_body);
    }
    let mut item = Pb::default();
    item.message(1, param);
    item
}

fn pb_operation(op: &Value) -> Pb {
    let mut pb = Pb::default();
    pb.strings_of(1, op.get("tags"))
        .str_of(3, op.get("description"))
        .str_of(5, op.get("operationId"))
        .strings_of(6, op.get("produces"))
        .strings_of(7, op.get("consumes"));
    for p in op["parameters"].as_array().into_iter().flatten() {
        pb.message(8, pb_parameter(p));
    }
    let mut responses = Pb::default();
    for (code, r) in op["responses"].as_object().into_iter().flatten() {
        let mut response = Pb::default();
        response.str_of(1, r.get("description"));
        if let Some(s) = r.get("schema") {
            let mut item = Pb::default();
            item.message(1, pb_schema(s));
            response.message(2, item);
        }
        let mut value = Pb::default();
        value.message(1, response);
        let mut named = Pb::default();
        named.string(1, code).message(2, value);
        responses.message(1, named);
    }
    pb.message(9, responses);
    pb.strings_of(10, op.get("schemes"));
    if let Some(m) = op.as_object() {
        pb_extensions(&mut pb, 13, m);
    }
    pb
}

/// The v2 document as gnostic's `Document`.
fn pb_document(doc: &Value) -> Pb {
    let mut paths = Pb::default();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        let mut pi = Pb::default();
        if let Some(op) = item.get("patch") {
            pi.message(8, pb_operation(op));
        }
        for p in item["parameters"].as_array().into_iter().flatten() {
            pi.message(9, pb_parameter(p));
        }
        let mut named = Pb::default();
        named.string(1, path).message(2, pi);
        paths.message(2, named);
    }
    let mut definitions = Pb::default();
    for (name, s) in doc["definitions"].as_object().into_iter().flatten() {
        let mut named = Pb::default();
        named.string(1, name).message(2, pb_schema(s));
        definitions.message(1, named);
    }
    let mut info = Pb::default();
    info.str_of(1, doc["info"].get("title"))
        .str_of(2, doc["info"].get("version"));
    let mut pb = Pb::default();
    pb.str_of(1, doc.get("swagger"))
        .message(2, info)
        .message(8, paths)
        .message(9, definitions);
    pb
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::kubectl_harness::{Harness, bin_dir};
    use tower::ServiceExt;

    #[test]
    fn index_points_at_every_group_version() {
        let idx = index();
        let paths = idx["paths"].as_object().unwrap();
        let keys: Vec<&str> = paths.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "api/v1",
                "apis/apps/v1",
                "apis/authentication.k8s.io/v1",
                "apis/authorization.k8s.io/v1",
                "apis/batch/v1",
                "apis/certificates.k8s.io/v1",
                "apis/coordination.k8s.io/v1",
                "apis/discovery.k8s.io/v1",
                "apis/events.k8s.io/v1",
                "apis/policy/v1",
                "apis/rbac.authorization.k8s.io/v1",
                "apis/scheduling.k8s.io/v1",
                "apis/storage.k8s.io/v1"
            ]
        );
        let url = paths["apis/apps/v1"]["serverRelativeURL"].as_str().unwrap();
        let doc = group_version_document("apis/apps/v1").unwrap();
        assert_eq!(url, format!("/openapi/v3/apis/apps/v1?hash={}", hash(&doc)));
        assert_eq!(hash(&doc).len(), 32);
        assert_ne!(
            hash(&doc),
            hash(&group_version_document("api/v1").unwrap()),
            "hash follows content"
        );
        assert_eq!(
            hash(&doc),
            hash(&group_version_document("apis/apps/v1").unwrap()),
            "and is stable"
        );
    }

    #[test]
    fn documents_offer_field_validation_on_patch_for_every_kind() {
        for ri in described() {
            let doc = group_version_document(&gv_path(ri.group, ri.version)).unwrap();
            assert_eq!(doc["openapi"], "3.0.0");
            // What kubectl's query-param verifier does: find the PATCH operation for the GVK and
            // its `fieldValidation` query parameter.
            let gvk = json!({"group": ri.group, "version": ri.version, "kind": ri.kind});
            let ops: Vec<&Value> = doc["paths"]
                .as_object()
                .unwrap()
                .values()
                .filter_map(|item| item.get("patch"))
                .filter(|op| op["x-kubernetes-group-version-kind"] == gvk)
                .collect();
            assert_eq!(ops.len(), 1, "{}", ri.kind);
            // No requestBody: kubectl apply then computes strategic merge patches from its
            // compiled-in types (the component schemas carry no patch-merge keys).
            assert!(ops[0].get("requestBody").is_none());
            let params = ops[0]["parameters"].as_array().unwrap();
            assert!(
                params
                    .iter()
                    .any(|p| p["name"] == "fieldValidation" && p["in"] == "query"),
                "{}",
                ri.kind
            );
        }
        let core = group_version_document("api/v1").unwrap();
        let pod = &core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(pod["operationId"], "patchCoreV1NamespacedPod");
        assert_eq!(
            core["paths"]["/api/v1/nodes/{name}"]["patch"]["operationId"],
            "patchCoreV1Node"
        );
        let storage = group_version_document("apis/storage.k8s.io/v1").unwrap();
        assert_eq!(
            storage["paths"]["/apis/storage.k8s.io/v1/volumeattachments/{name}"]["patch"]["operationId"],
            "patchStorageV1VolumeAttachment"
        );
        assert!(group_version_document("apis/apps/v2").is_none());
        assert!(group_version_document("apis").is_none());
    }

    #[test]
    fn components_describe_every_kind_with_upstream_documentation() {
        for ri in described() {
            let doc = group_version_document(&gv_path(ri.group, ri.version)).unwrap();
            let schemas = doc["components"]["schemas"].as_object().unwrap();
            let gvk = json!([{"group": ri.group, "kind": ri.kind, "version": ri.version}]);
            let found: Vec<&String> = schemas
                .iter()
                .filter(|(_, s)| s["x-kubernetes-group-version-kind"] == gvk)
                .map(|(n, _)| n)
                .collect();
            assert_eq!(found.len(), 1, "{} {}", ri.group, ri.kind);
            let kind = &schemas[found[0]];
            assert!(kind["description"].as_str().is_some_and(|d| !d.is_empty()));
            // A documented metadata field is `allOf: [{$ref}]` beside its description; an
            // undocumented one (CertificateSigningRequest's) is the bare reference.
            let meta = &kind["properties"]["metadata"];
            let meta_ref = if meta.get("description").is_some() {
                &meta["allOf"][0]["$ref"]
            } else {
                &meta["$ref"]
            };
            assert_eq!(
                meta_ref, "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                "{} {}",
                ri.group, ri.kind
            );
            // Every reference resolves inside the document.
            let text = doc.to_string();
            for r in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
                let name = &r[..r.find('"').unwrap()];
                assert!(
                    schemas.contains_key(name),
                    "{name} unresolved in {}",
                    ri.kind
                );
            }
        }
        let core = group_version_document("api/v1").unwrap();
        let tol = &core["components"]["schemas"]["io.k8s.api.core.v1.Toleration"];
        assert_eq!(tol["properties"]["tolerationSeconds"]["format"], "int64");
        assert!(
            tol["description"]
                .as_str()
                .unwrap()
                .starts_with("The pod this Toleration is attached to tolerates any taint")
        );
        let pod = &core["components"]["schemas"]["io.k8s.api.core.v1.Pod"];
        assert!(
            pod.get("required").is_none(),
            "metadata is not required upstream"
        );
    }

    async fn get(uri: &str, accept: Option<&str>) -> (u16, Vec<u8>, axum::http::HeaderMap) {
        let mut req = axum::http::Request::builder().uri(uri);
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        let resp = routes()
            .oneshot(req.body(axum::body::Body::empty()).unwrap())
            .await
            .unwrap();
        let code = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        (code, body.to_vec(), headers)
    }

    fn json_of(body: &[u8]) -> Value {
        serde_json::from_slice(body).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn routes_serve_index_documents_and_v2() {
        let (code, idx, _) = get("/openapi/v3?timeout=32s", None).await;
        assert_eq!(code, 200);
        let url = json_of(&idx)["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .to_string();
        let (code, doc, headers) =
            get(&format!("{url}&timeout=32s"), Some("application/json")).await;
        assert_eq!(code, 200);
        let doc = json_of(&doc);
        assert_eq!(doc, group_version_document("api/v1").unwrap());
        assert_eq!(headers["etag"], format!("\"{}\"", hash(&doc)).as_str());
        let (code, doc, _) = get("/openapi/v3/apis/coordination.k8s.io/v1?hash=stale", None).await;
        assert_eq!(code, 200);
        assert!(
            json_of(&doc)["paths"]
                .get("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
                .is_some()
        );
        for missing in ["/openapi/v3/apis/nope/v1", "/openapi/v3/apis/apps"] {
            let (code, status, _) = get(missing, None).await;
            assert_eq!(code, 404, "{missing}");
            assert_eq!(json_of(&status)["reason"], "NotFound");
        }
        // v2: JSON by default, protobuf with a Content-Type Go's mime package parses.
        for accept in [Some("application/json"), None] {
            let (code, doc, headers) = get("/openapi/v2?timeout=32s", accept).await;
            assert_eq!(code, 200);
            assert_eq!(headers["content-type"], "application/json");
            assert_eq!(json_of(&doc), v2_document());
        }
        let (code, body, headers) = get("/openapi/v2?timeout=32s", Some(OPENAPI_V2_PROTOBUF)).await;
        assert_eq!(code, 200);
        assert_eq!(headers["content-type"], OPENAPI_V2_PROTOBUF_RESPONSE);
        assert!(!OPENAPI_V2_PROTOBUF_RESPONSE.contains('@'));
        assert_eq!(body, pb_document(&v2_document()).0);
    }

    /// Reads one protobuf message into (field number, payload) pairs (varints as LE bytes).
    fn pb_fields(mut buf: &[u8]) -> Vec<(u64, Vec<u8>)> {
        fn varint(buf: &mut &[u8]) -> u64 {
            let mut v = 0u64;
            let mut shift = 0;
            loop {
                let b = buf[0];
                *buf = &buf[1..];
                v |= u64::from(b & 0x7f) << shift;
                shift += 7;
                if b < 0x80 {
                    return v;
                }
            }
        }
        let mut out = Vec::new();
        while !buf.is_empty() {
            let key = varint(&mut buf);
            match key & 7 {
                0 => {
                    let v = varint(&mut buf);
                    out.push((key >> 3, v.to_le_bytes().to_vec()));
                }
                2 => {
                    let len = varint(&mut buf) as usize;
                    out.push((key >> 3, buf[..len].to_vec()));
                    buf = &buf[len..];
                }
                other => panic!("unexpected wire type {other}"),
            }
        }
        out
    }

    fn field(msg: &[u8], n: u64) -> Vec<Vec<u8>> {
        pb_fields(msg)
            .into_iter()
            .filter(|(f, _)| *f == n)
            .map(|(_, v)| v)
            .collect()
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn v2_protobuf_carries_gvk_and_field_validation() {
        let doc = pb_document(&v2_document()).0;
        assert_eq!(field(&doc, 1), [b"2.0".to_vec()]);
        assert_eq!(text(&field(&field(&doc, 2)[0], 2)[0]), GIT_VERSION);
        let named = field(&field(&doc, 8)[0], 2);
        assert_eq!(named.len(), described().count());
        let pod = named
            .iter()
            .find(|n| field(n, 1)[0] == b"/api/v1/namespaces/{namespace}/pods/{name}")
            .expect("pod path");
        let op = &field(&field(pod, 2)[0], 8)[0];
        let exts: Vec<(String, String)> = field(op, 13)
            .iter()
            .map(|e| (text(&field(e, 1)[0]), text(&field(&field(e, 2)[0], 2)[0])))
            .collect();
        let gvk = serde_json::from_str::<Value>(
            &exts
                .iter()
                .find(|(k, _)| k == "x-kubernetes-group-version-kind")
                .expect("gvk")
                .1,
        )
        .unwrap();
        assert_eq!(gvk, json!({"group": "", "kind": "Pod", "version": "v1"}));
        // parameters → ParametersItem.parameter → Parameter.body | .non_body → NonBody.query
        let items = field(op, 8);
        let body = &field(&field(&items[0], 1)[0], 1)[0];
        assert_eq!(field(body, 2)[0], b"body");
        let names: Vec<String> = items[1..]
            .iter()
            .map(|item| {
                let query = &field(&field(&field(item, 1)[0], 2)[0], 3)[0];
                assert_eq!(field(query, 2)[0], b"query");
                text(&field(query, 4)[0])
            })
            .collect();
        assert_eq!(
            names,
            ["dryRun", "fieldManager", "fieldValidation", "force"]
        );
        // What kubectl's apply looks for before a strategic merge patch.
        let consumes: Vec<String> = field(op, 7).iter().map(|c| text(c)).collect();
        assert!(consumes.contains(&"application/strategic-merge-patch+json".to_string()));

        // definitions → NamedSchema: the PodSpec's containers carry upstream's patch keys, the
        // Pod its GVK, restartPolicy its enum.
        let defs = field(&field(&doc, 9)[0], 1);
        let def = |name: &str| -> Vec<u8> {
            let d = defs
                .iter()
                .find(|d| field(d, 1)[0] == name.as_bytes())
                .unwrap_or_else(|| panic!("{name}"));
            field(d, 2)[0].clone()
        };
        let prop = |schema: &[u8], name: &str| -> Vec<u8> {
            let props = field(&field(schema, 25)[0], 1);
            let p = props
                .iter()
                .find(|p| field(p, 1)[0] == name.as_bytes())
                .unwrap_or_else(|| panic!("{name}"));
            field(p, 2)[0].clone()
        };
        let exts = |schema: &[u8]| -> Vec<(String, String)> {
            field(schema, 31)
                .iter()
                .map(|e| (text(&field(e, 1)[0]), text(&field(&field(e, 2)[0], 2)[0])))
                .collect()
        };
        let spec = def("io.k8s.api.core.v1.PodSpec");
        let containers = prop(&spec, "containers");
        assert!(
            exts(&containers)
                .contains(&("x-kubernetes-patch-merge-key".into(), "\"name\"\n".into()))
        );
        assert!(
            exts(&containers)
                .contains(&("x-kubernetes-patch-strategy".into(), "\"merge\"\n".into()))
        );
        let items = field(&field(&containers, 23)[0], 1);
        assert_eq!(
            text(&field(&items[0], 1)[0]),
            "#/definitions/io.k8s.api.core.v1.Container"
        );
        let restart = prop(&spec, "restartPolicy");
        let values: Vec<String> = field(&restart, 20)
            .iter()
            .map(|a| text(&field(a, 2)[0]))
            .collect();
        assert_eq!(values, ["\"Always\"\n", "\"Never\"\n", "\"OnFailure\"\n"]);
        assert!(
            exts(&def("io.k8s.api.core.v1.Pod"))
                .iter()
                .any(|(k, v)| k == "x-kubernetes-group-version-kind"
                    && v.contains("\"kind\":\"Pod\""))
        );
    }

    #[test]
    fn v2_json_has_every_kind_and_resolving_references() {
        let doc = v2_document();
        assert_eq!(doc["swagger"], "2.0");
        let defs = doc["definitions"].as_object().unwrap();
        for ri in described() {
            let gvk = json!([{"group": ri.group, "kind": ri.kind, "version": ri.version}]);
            assert_eq!(
                defs.values()
                    .filter(|d| d["x-kubernetes-group-version-kind"] == gvk)
                    .count(),
                1,
                "{}",
                ri.kind
            );
        }
        let text = doc.to_string();
        assert!(!text.contains("#/components/schemas/"));
        for r in text.split("\"$ref\":\"#/definitions/").skip(1) {
            let name = &r[..r.find('"').unwrap()];
            assert!(defs.contains_key(name), "{name} unresolved");
        }
        // A described reference is a plain $ref beside its description, as upstream's v2 is.
        let meta = &defs["io.k8s.api.core.v1.Pod"]["properties"]["metadata"];
        assert_eq!(
            meta["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert!(meta.get("allOf").is_none());
        assert_eq!(
            defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"],
            "int-or-string"
        );
        let op = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            op["responses"]["200"]["schema"]["$ref"],
            "#/definitions/io.k8s.api.apps.v1.Deployment"
        );
        assert_eq!(op["parameters"][0]["in"], "body");
    }

    #[test]
    fn upstream_enums_and_extensions_reach_the_schemas() {
        let rows = include_str!("openapi_fields.jsonl").lines().count();
        assert_eq!(upstream_fields().len(), rows, "every row parses");
        let core = group_version_document("api/v1").unwrap();
        let schemas = &core["components"]["schemas"];
        let restart = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["restartPolicy"];
        assert_eq!(restart["enum"], json!(["Always", "Never", "OnFailure"]));
        assert_eq!(
            restart["description"],
            "Restart policy for all containers within the pod. One of Always, OnFailure, Never. In some contexts, only a subset of those values may be permitted. Default to Always. More info: https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#restart-policy\n\nPossible enum values:\n - `\"Always\"`\n - `\"Never\"`\n - `\"OnFailure\"`"
        );
        let tol = &schemas["io.k8s.api.core.v1.Toleration"]["properties"];
        assert_eq!(tol["operator"]["enum"], json!(["Equal", "Exists"]));
        assert_eq!(
            tol["effect"]["enum"],
            json!(["NoExecute", "NoSchedule", "PreferNoSchedule"])
        );
        assert_eq!(
            schemas["io.k8s.api.core.v1.ServiceSpec"]["properties"]["type"]["enum"],
            json!(["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"])
        );
        let containers = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        let apps = group_version_document("apis/apps/v1").unwrap();
        assert_eq!(
            apps["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentStrategy"]["properties"]["type"]
                ["enum"],
            json!(["Recreate", "RollingUpdate"])
        );
        // A field without an upstream enum is unchanged.
        assert!(
            schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["hostname"]
                .get("enum")
                .is_none()
        );
    }

    /// Stands in for the resource routes: POST stores and echoes the object (201), GET and
    /// PATCH answer with the stored object, else 404.
    fn stub_resources() -> Router {
        use std::collections::BTreeMap;
        use std::sync::{Arc, Mutex};
        let objects: Arc<Mutex<BTreeMap<String, Value>>> = Arc::default();
        Router::new().fallback(move |req: axum::extract::Request| {
            let objects = objects.clone();
            async move {
                let path = req.uri().path().to_string();
                let method = req.method().clone();
                let body = axum::body::to_bytes(req.into_body(), usize::MAX)
                    .await
                    .unwrap();
                let (code, obj) = if method == axum::http::Method::POST {
                    let mut obj: Value = serde_json::from_slice(&body).unwrap();
                    obj["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000001");
                    obj["metadata"]["resourceVersion"] = json!("7");
                    let key = format!("{path}/{}", obj["metadata"]["name"].as_str().unwrap());
                    objects.lock().unwrap().insert(key, obj.clone());
                    (StatusCode::CREATED, obj)
                } else {
                    let found = objects.lock().unwrap().get(&path).cloned();
                    match found {
                        Some(obj) => (StatusCode::OK, obj),
                        None => return not_found(),
                    }
                };
                let mut resp = (code, obj.to_string()).into_response();
                resp.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                resp
            }
        })
    }

    const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p1\nspec:\n  containers:\n  - name: c\n    image: nginx:1.27\n";
    const DEPLOY: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: nginx\n        image: nginx:1.25\n";

    /// Real kubectl 1.27–1.33 `create -f` and `apply -f` (create, then a client-side SMP patch)
    /// with default strict validation: no OpenAPI errors or warnings, `fieldValidation=Strict` on
    /// the wire. Without OpenAPI the same kubectl refuses.
    #[tokio::test]
    async fn real_kubectl_create_and_apply_validate_server_side() {
        let Some(dir) = bin_dir() else {
            eprintln!("SKIPPED: kubectl.1.27/kubectl.1.33 not found (set KLAB_KUBECTL_DIR)");
            return;
        };
        let app = crate::discovery::routes()
            .merge(routes())
            .merge(stub_resources());
        let h = Harness::start(dir.clone(), app).await;
        std::fs::write(h.dir.join("pod.yaml"), POD).unwrap();
        for version in ["1.33", "1.32", "1.31", "1.30", "1.29", "1.28", "1.27"] {
            let minor = &version[2..];
            let ns = format!("ns{minor}");
            let (ok, out, err) = h
                .kubectl(version, &["create", "-f", "pod.yaml", "-n", &ns])
                .await;
            assert!(ok, "kubectl.{version} create: {err}\n{:#?}", h.requests());
            assert_eq!(out, "pod/p1 created\n");
            assert_eq!(err, "", "kubectl.{version} create");
            let file = format!("deploy-{minor}.yaml");
            std::fs::write(h.dir.join(&file), DEPLOY).unwrap();
            let (ok, out, err) = h.kubectl(version, &["apply", "-f", &file, "-n", &ns]).await;
            assert!(ok, "kubectl.{version} apply: {err}\n{:#?}", h.requests());
            assert_eq!(out, "deployment.apps/web created\n");
            assert_eq!(err, "", "kubectl.{version} apply");
            std::fs::write(
                h.dir.join(&file),
                DEPLOY.replace("replicas: 2", "replicas: 3"),
            )
            .unwrap();
            let (ok, out, err) = h.kubectl(version, &["apply", "-f", &file, "-n", &ns]).await;
            assert!(
                ok,
                "kubectl.{version} second apply: {err}\n{:#?}",
                h.requests()
            );
            assert_eq!(out, "deployment.apps/web configured\n");
            assert_eq!(
                err, "",
                "kubectl.{version} second apply: no OpenAPI warnings"
            );
        }
        let requests = h.requests();
        for want in [
            "POST /api/v1/namespaces/ns27/pods?fieldManager=kubectl-create&fieldValidation=Strict",
            "POST /api/v1/namespaces/ns33/pods?fieldManager=kubectl-create&fieldValidation=Strict",
            "POST /apis/apps/v1/namespaces/ns33/deployments?fieldManager=kubectl-client-side-apply&fieldValidation=Strict",
            "PATCH /apis/apps/v1/namespaces/ns27/deployments/web?fieldManager=kubectl-client-side-apply&fieldValidation=Strict",
            "PATCH /apis/apps/v1/namespaces/ns33/deployments/web?fieldManager=kubectl-client-side-apply&fieldValidation=Strict",
            "GET /openapi/v3/apis/apps/v1?hash=",
            "GET /openapi/v2?",
        ] {
            assert!(
                requests.iter().any(|r| r.starts_with(want)),
                "missing {want}: {requests:#?}"
            );
        }

        // The control: without OpenAPI, kubectl refuses to create (§0.3).
        let bare = Harness::start(dir, crate::discovery::routes().merge(stub_resources())).await;
        std::fs::write(bare.dir.join("pod.yaml"), POD).unwrap();
        let (ok, _, err) = bare.kubectl("1.33", &["create", "-f", "pod.yaml"]).await;
        assert!(!ok);
        assert!(err.contains("failed to download openapi"), "{err}");
    }
}
