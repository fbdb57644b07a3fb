//! Discovery documents: legacy /api, /apis, /api/v1, /apis/<g>/<v> and aggregated v2 / v2beta1 (§b.3).
//!
//! Also `/version` (§b.2) and the `/healthz`, `/livez`, `/readyz` probes. Every document is built
//! by a pure function from [`crate::registry::RESOURCES`]; [`routes`] only negotiates and serves.
//!
//! Aggregated discovery is chosen from the `Accept` header in the client's order: kubectl
//! 1.30–1.33 accept v2 (or v2beta1), kubectl 1.27–1.29 accept *only* v2beta1 — answering them v2
//! makes every resource type unknown — and anything else gets the legacy `APIVersions` /
//! `APIGroupList`, after which clients fetch `/api/v1` and each `/apis/<g>/<v>`.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value, json};

use crate::registry::{self, RESOURCES, ResourceInfo};
use crate::table::media_ranges;

/// The Kubernetes release klab answers as (`/version`, OpenAPI `info.version`).
///
/// This string decides which kubectl runs behind gcloud's `kubectl` dispatcher (§0.1): with
/// `v1.33.1` it is `kubectl.1.33`.
pub const GIT_VERSION: &str = "v1.33.1";
/// `major` of [`GIT_VERSION`].
pub const MAJOR: &str = "1";
/// `minor` of [`GIT_VERSION`].
pub const MINOR: &str = "33";
/// The upstream commit of v1.33.1 (what a real v1.33.1 server reports).
const GIT_COMMIT: &str = "8adc0f041b8e7ad1d30e29cc59c6ae7a15e19828";
const BUILD_DATE: &str = "2025-05-15T08:27:33Z";
const GO_VERSION: &str = "go1.24.2";

/// Response `Content-Type` of aggregated discovery v2.
pub const CONTENT_TYPE_AGGREGATED_V2: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// Response `Content-Type` of aggregated discovery v2beta1.
pub const CONTENT_TYPE_AGGREGATED_V2BETA1: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// Which document `/api` and `/apis` answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryFormat {
    /// `apidiscovery.k8s.io/v2` `APIGroupDiscoveryList` (kubectl ≥ 1.30, kube-rs `run_aggregated`).
    AggregatedV2,
    /// `apidiscovery.k8s.io/v2beta1`: same shape, the only aggregated form kubectl 1.27–1.29 accept.
    AggregatedV2Beta1,
    /// `APIVersions` (`/api`) or `APIGroupList` (`/apis`).
    Legacy,
}

impl DiscoveryFormat {
    fn api_version(self) -> &'static str {
        match self {
            DiscoveryFormat::AggregatedV2Beta1 => "apidiscovery.k8s.io/v2beta1",
            _ => "apidiscovery.k8s.io/v2",
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            DiscoveryFormat::AggregatedV2 => CONTENT_TYPE_AGGREGATED_V2,
            DiscoveryFormat::AggregatedV2Beta1 => CONTENT_TYPE_AGGREGATED_V2BETA1,
            DiscoveryFormat::Legacy => "application/json",
        }
    }
}

/// Picks the discovery format from `Accept`, honouring the client's order; parameters may come
/// in any order. `None` when nothing in the header can be produced (406). A missing header means
/// legacy JSON.
pub fn negotiate(accept: Option<&str>) -> Option<DiscoveryFormat> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Some(DiscoveryFormat::Legacy);
    };
    for range in media_ranges(accept) {
        if !matches!(
            range.mime.as_str(),
            "application/json" | "application/*" | "*/*"
        ) {
            continue;
        }
        let Some(kind) = range.param("as") else {
            return Some(DiscoveryFormat::Legacy);
        };
        if kind != "APIGroupDiscoveryList" || range.param("g") != Some("apidiscovery.k8s.io") {
            continue;
        }
        match range.param("v") {
            Some("v2") => return Some(DiscoveryFormat::AggregatedV2),
            Some("v2beta1") => return Some(DiscoveryFormat::AggregatedV2Beta1),
            _ => continue,
        }
    }
    None
}

// ------------------------------------------------------------------------------------------------
// Documents
// ------------------------------------------------------------------------------------------------

/// `/version`: all nine fields kube-rs requires, plus the 1.33 emulation/compatibility fields.
pub fn version_info() -> Value {
    json!({
        "major": MAJOR,
        "minor": MINOR,
        "emulationMajor": MAJOR,
        "emulationMinor": MINOR,
        // A 1.33 server is compatible with 1.32 (one minor back), and says so.
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": GIT_VERSION,
        "gitCommit": GIT_COMMIT,
        "gitTreeState": "clean",
        "buildDate": BUILD_DATE,
        "goVersion": GO_VERSION,
        "compiler": "gc",
        "platform": platform(),
    })
}

/// Go's `GOOS/GOARCH` for the machine klab runs on.
fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    };
    format!("{}/{arch}", std::env::consts::OS)
}

/// Legacy `/api`: `APIVersions`. `server_address` is how clients reach this server
/// (`host:port`); upstream reports its advertise address, klab echoes the request's `Host`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_version_for_discovery(group: &str, version: &str) -> Value {
    json!({"groupVersion": format!("{group}/{version}"), "version": version})
}

/// The versions served for a group, preferred first (each group serves only `v1` today).
fn group_versions(group: &str) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for r in RESOURCES.iter().filter(|r| r.group == group) {
        if !out.contains(&r.version) {
            out.push(r.version);
        }
    }
    out
}

/// `APIGroup` for one named group, or `None` if it is not served.
pub fn api_group(group: &str) -> Option<Value> {
    if group.is_empty() {
        return None;
    }
    let versions = group_versions(group);
    let preferred = versions.first()?;
    Some(json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions.iter().map(|v| group_version_for_discovery(group, v)).collect::<Vec<_>>(),
        "preferredVersion": group_version_for_discovery(group, preferred),
    }))
}

/// Legacy `/apis`: `APIGroupList`, groups in discovery order.
pub fn api_group_list() -> Value {
    let groups: Vec<Value> = registry::groups()
        .into_iter()
        .filter_map(|g| {
            let mut group = api_group(g)?;
            if let Value::Object(m) = &mut group {
                m.remove("kind");
                m.remove("apiVersion");
            }
            Some(group)
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// Verbs of a main resource. Namespaces have no `deletecollection`, as upstream.
fn resource_verbs(ri: &ResourceInfo) -> Vec<&'static str> {
    if crate::registry::is_review(ri) {
        vec!["create"]
    } else if crate::registry::is_metrics(ri) {
        vec!["get", "list"]
    } else if ri.group.is_empty() && ri.kind == "Namespace" {
        vec![
            "create", "delete", "get", "list", "patch", "update", "watch",
        ]
    } else {
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

/// A subresource as discovery describes it.
struct Subresource {
    name: &'static str,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    verbs: &'static [&'static str],
}

/// The kind and verbs upstream serves each subresource with.
fn subresource(ri: &ResourceInfo, name: &'static str) -> Subresource {
    let (group, version, kind, verbs): (&str, &str, &str, &[&str]) = match name {
        "status" => (ri.group, ri.version, ri.kind, &["get", "patch", "update"]),
        "scale" => ("autoscaling", "v1", "Scale", &["get", "patch", "update"]),
        "binding" => ("", "v1", "Binding", &["create"]),
        "eviction" => ("policy", "v1", "Eviction", &["create"]),
        "log" => ("", "v1", "Pod", &["get"]),
        "exec" => ("", "v1", "PodExecOptions", &["create", "get"]),
        "attach" => ("", "v1", "PodAttachOptions", &["create", "get"]),
        "portforward" => ("", "v1", "PodPortForwardOptions", &["create", "get"]),
        "ephemeralcontainers" => ("", "v1", "Pod", &["get", "patch", "update"]),
        "resize" => ("", "v1", "Pod", &["get", "patch", "update"]),
        "proxy" if ri.kind == "Node" => (
            "",
            "v1",
            "NodeProxyOptions",
            &["create", "delete", "get", "patch", "update"],
        ),
        "proxy" => (
            "",
            "v1",
            "PodProxyOptions",
            &["create", "delete", "get", "patch", "update"],
        ),
        "finalize" => (ri.group, ri.version, ri.kind, &["update"]),
        "token" => ("authentication.k8s.io", "v1", "TokenRequest", &["create"]),
        _ => (ri.group, ri.version, ri.kind, &["get"]),
    };
    Subresource {
        name,
        group,
        version,
        kind,
        verbs,
    }
}

fn resources_of(group: &str, version: &str) -> impl Iterator<Item = &'static ResourceInfo> {
    let (group, version) = (group.to_string(), version.to_string());
    RESOURCES
        .iter()
        .filter(move |r| r.group == group && r.version == version)
}

/// Legacy `/api/v1` or `/apis/<g>/<v>`: `APIResourceList` with every resource and subresource,
/// sorted by name as upstream serves it. `None` if the group-version is not served.
///
/// `pods/eviction` carries `group: policy, version: v1, kind: Eviction`: `kubectl drain` GETs
/// `/api/v1` to decide whether it may evict, and otherwise falls back to protobuf DELETEs.
pub fn api_resource_list(group: &str, version: &str) -> Option<Value> {
    let mut entries: Vec<(String, Value)> = Vec::new();
    for ri in resources_of(group, version) {
        let mut m = Map::new();
        m.insert("name".into(), json!(ri.plural));
        m.insert("singularName".into(), json!(ri.singular));
        m.insert("namespaced".into(), json!(ri.namespaced));
        m.insert("kind".into(), json!(ri.kind));
        m.insert("verbs".into(), json!(resource_verbs(ri)));
        if !ri.short_names.is_empty() {
            m.insert("shortNames".into(), json!(ri.short_names));
        }
        if !ri.categories.is_empty() {
            m.insert("categories".into(), json!(ri.categories));
        }
        m.insert("storageVersionHash".into(), json!(storage_version_hash(ri)));
        entries.push((ri.plural.to_string(), Value::Object(m)));
        for sub in ri.subresources.iter().map(|s| subresource(ri, s)) {
            let name = format!("{}/{}", ri.plural, sub.name);
            let mut m = Map::new();
            m.insert("name".into(), json!(name));
            m.insert("singularName".into(), json!(""));
            m.insert("namespaced".into(), json!(ri.namespaced));
            // Upstream names group/version only when the subresource's kind lives elsewhere.
            if (sub.group, sub.version) != (ri.group, ri.version) {
                m.insert("group".into(), json!(sub.group));
                m.insert("version".into(), json!(sub.version));
            }
            m.insert("kind".into(), json!(sub.kind));
            m.insert("verbs".into(), json!(sub.verbs));
            entries.push((name, Value::Object(m)));
        }
    }
    if entries.is_empty() {
        return None;
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
    }))
}

/// Upstream `storageversionhash.StorageVersionHash`: standard base64 of the first 8 bytes of
/// SHA-256 over `<group>/<version>/<kind>` of the version the resource is *stored* in. Events of
/// `events.k8s.io/v1` are stored as core `v1` Events, so they share that hash.
pub fn storage_version_hash(ri: &ResourceInfo) -> String {
    let (group, version, kind) = if ri.group == "events.k8s.io" && ri.kind == "Event" {
        ("", "v1", "Event")
    } else {
        (ri.group, ri.version, ri.kind)
    };
    let digest = klab_api::sha256::sha256(format!("{group}/{version}/{kind}").as_bytes());
    base64_std(&digest[..8])
}

/// Standard base64 with padding.
fn base64_std(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// One `APIResourceDiscovery` of aggregated discovery.
fn aggregated_resource(ri: &ResourceInfo) -> Value {
    let mut m = Map::new();
    m.insert("resource".into(), json!(ri.plural));
    m.insert(
        "responseKind".into(),
        json!({"group": ri.group, "version": ri.version, "kind": ri.kind}),
    );
    m.insert(
        "scope".into(),
        json!(if ri.namespaced {
            "Namespaced"
        } else {
            "Cluster"
        }),
    );
    m.insert("singularResource".into(), json!(ri.singular));
    m.insert("verbs".into(), json!(resource_verbs(ri)));
    if !ri.short_names.is_empty() {
        m.insert("shortNames".into(), json!(ri.short_names));
    }
    if !ri.categories.is_empty() {
        m.insert("categories".into(), json!(ri.categories));
    }
    let mut subs: Vec<Subresource> = ri.subresources.iter().map(|s| subresource(ri, s)).collect();
    subs.sort_by(|a, b| a.name.cmp(b.name));
    if !subs.is_empty() {
        let subs: Vec<Value> = subs
            .iter()
            .map(|s| {
                json!({
                    "subresource": s.name,
                    "responseKind": {"group": s.group, "version": s.version, "kind": s.kind},
                    "verbs": s.verbs,
                })
            })
            .collect();
        m.insert("subresources".into(), Value::Array(subs));
    }
    Value::Object(m)
}

/// One `APIGroupDiscovery`: `name` is `""` for the core group.
fn aggregated_group(group: &str) -> Value {
    let versions: Vec<Value> = group_versions(group)
        .into_iter()
        .map(|version| {
            let mut resources: Vec<&ResourceInfo> = resources_of(group, version).collect();
            resources.sort_by(|a, b| a.plural.cmp(b.plural));
            json!({
                "version": version,
                "resources": resources.into_iter().map(aggregated_resource).collect::<Vec<_>>(),
                "freshness": "Current",
            })
        })
        .collect();
    json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": versions})
}

/// Aggregated discovery for `/api` (`core = true`: the one core group) or `/apis` (every named
/// group, in discovery order).
pub fn aggregated(core: bool, format: DiscoveryFormat) -> Value {
    let items: Vec<Value> = if core {
        vec![aggregated_group("")]
    } else {
        registry::groups()
            .into_iter()
            .map(aggregated_group)
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format.api_version(),
        "metadata": {},
        "items": items,
    })
}

// ------------------------------------------------------------------------------------------------
// Routes
// ------------------------------------------------------------------------------------------------

/// `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}`,
/// `/apis/{group}/{version}` — exactly these paths, so the router can sit in front of the
/// resource routes. `?timeout=32s` on discovery calls is a client timeout and is ignored.
pub fn routes() -> Router {
    Router::new()
        .route("/version", get(version_handler))
        // The Python client's `VersionApi` asks for `/version/`; upstream serves both.
        .route("/version/", get(version_handler))
        .route("/api", get(api_handler))
        .route("/api/v1", get(api_v1_handler))
        .route("/apis", get(apis_handler))
        .route("/apis/{group}", get(group_handler))
        .route("/apis/{group}/{version}", get(group_version_handler))
}

fn json_response(content_type: &'static str, body: &Value) -> Response {
    let mut resp = (StatusCode::OK, body.to_string()).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// A `metav1.Status` failure response.
pub(crate) fn status_response(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {},
        "code": code.as_u16(),
    });
    let mut resp = (code, body.to_string()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// 404 for a path nothing serves, with upstream's message.
pub(crate) fn not_found() -> Response {
    status_response(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
    )
}

fn not_acceptable() -> Response {
    status_response(
        StatusCode::NOT_ACCEPTABLE,
        "NotAcceptable",
        "only the following media types are accepted: application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList, application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
    )
}

async fn version_handler() -> Response {
    json_response("application/json", &version_info())
}

fn accept(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok())
}

/// Serves `/api` or `/apis` in the negotiated format. The response varies on `Accept`, so
/// caches must key on it.
fn discovery_root(headers: &HeaderMap, core: bool) -> Response {
    let Some(format) = negotiate(accept(headers)) else {
        return not_acceptable();
    };
    let mut resp = match format {
        DiscoveryFormat::Legacy if core => {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("127.0.0.1:6443");
            json_response(format.content_type(), &api_versions(host))
        }
        DiscoveryFormat::Legacy => json_response(format.content_type(), &api_group_list()),
        aggregated_format => {
            json_response(format.content_type(), &aggregated(core, aggregated_format))
        }
    };
    resp.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    resp
}

async fn api_handler(headers: HeaderMap) -> Response {
    discovery_root(&headers, true)
}

async fn apis_handler(headers: HeaderMap) -> Response {
    discovery_root(&headers, false)
}

async fn api_v1_handler() -> Response {
    match api_resource_list("", "v1") {
        Some(list) => json_response("application/json", &list),
        None => not_found(),
    }
}

async fn group_handler(Path(group): Path<String>) -> Response {
    match api_group(&group) {
        Some(doc) => json_response("application/json", &doc),
        None => not_found(),
    }
}

async fn group_version_handler(Path((group, version)): Path<(String, String)>) -> Response {
    // The core group is only served under /api.
    match api_resource_list(&group, &version).filter(|_| !group.is_empty()) {
        Some(list) => json_response("application/json", &list),
        None => not_found(),
    }
}

/// Runs the real `kubectl` binaries against a router served on a loopback port (tests only).
#[cfg(test)]
pub(crate) mod kubectl_harness {
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    use axum::Router;

    /// The directory holding `kubectl.1.27` … `kubectl.1.33` (beside the gcloud dispatcher that
    /// `kubectl` on PATH resolves to), or `KLAB_KUBECTL_DIR`.
    pub(crate) fn bin_dir() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("KLAB_KUBECTL_DIR") {
            return Some(PathBuf::from(dir));
        }
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|p| p.join("kubectl"))
            .filter(|p| p.is_file())
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .filter_map(|p| p.parent().map(Path::to_path_buf))
            .find(|dir| dir.join("kubectl.1.33").is_file())
    }

    /// A router served on 127.0.0.1 with a request log, plus a private kubeconfig, HOME and
    /// discovery cache (kubectl caches discovery per host:port for 6 h).
    pub(crate) struct Harness {
        pub(crate) bin_dir: PathBuf,
        pub(crate) dir: PathBuf,
        pub(crate) log: Arc<Mutex<Vec<String>>>,
        server: tokio::task::JoinHandle<()>,
    }

    impl Harness {
        pub(crate) async fn start(bin_dir: PathBuf, app: Router) -> Harness {
            let log = Arc::new(Mutex::new(Vec::new()));
            let recorder = log.clone();
            let app = app.layer(axum::middleware::map_request(
                move |req: axum::extract::Request| {
                    let recorder = recorder.clone();
                    async move {
                        let accept = req
                            .headers()
                            .get("accept")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_string();
                        recorder.lock().unwrap().push(format!(
                            "{} {} [{accept}]",
                            req.method(),
                            req.uri()
                        ));
                        req
                    }
                },
            ));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = tokio::spawn(async move {
                axum::serve(listener, app).await.unwrap();
            });
            let dir = std::env::temp_dir().join(format!(
                "klab-kubectl-{}-{}",
                std::process::id(),
                addr.port()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let kubeconfig = format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: klab\n  cluster:\n    server: http://{addr}\n\
                 contexts:\n- name: klab\n  context:\n    cluster: klab\n    user: klab\n    namespace: default\n\
                 current-context: klab\nusers:\n- name: klab\n  user: {{}}\n"
            );
            std::fs::write(dir.join("kubeconfig"), kubeconfig).unwrap();
            Harness {
                bin_dir,
                dir,
                log,
                server,
            }
        }

        /// Runs `kubectl.<version> args…` with a fresh cache dir per call; returns (success,
        /// stdout, stderr).
        pub(crate) async fn kubectl(&self, version: &str, args: &[&str]) -> (bool, String, String) {
            let cache = self.dir.join(format!(
                "cache-{version}-{}",
                self.log.lock().unwrap().len()
            ));
            let mut cmd =
                tokio::process::Command::new(self.bin_dir.join(format!("kubectl.{version}")));
            cmd.arg(format!(
                "--kubeconfig={}",
                self.dir.join("kubeconfig").display()
            ))
            .arg(format!("--cache-dir={}", cache.display()))
            .arg("--request-timeout=20s")
            .args(args)
            .current_dir(&self.dir)
            .env("HOME", &self.dir)
            .env_remove("KUBECONFIG")
            .kill_on_drop(true);
            // A bound, not a pause: kubectl answers in well under a second.
            let out = tokio::time::timeout(std::time::Duration::from_secs(120), cmd.output())
                .await
                .expect("kubectl did not finish")
                .expect("kubectl runs");
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }

        pub(crate) fn requests(&self) -> Vec<String> {
            self.log.lock().unwrap().clone()
        }
    }

    impl Drop for Harness {
        fn drop(&mut self) {
            self.server.abort();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// Lays rows out as kubectl's tabwriter does (min width 10, padding 3, last column unpadded).
    pub(crate) fn tabulate(rows: &[Vec<&str>]) -> String {
        let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..cols)
            .map(|c| {
                rows.iter()
                    .filter_map(|r| r.get(c))
                    .map(|s| s.len() + 3)
                    .max()
                    .unwrap_or(0)
                    .max(10)
            })
            .collect();
        let mut out = String::new();
        for row in rows {
            for (c, cell) in row.iter().enumerate() {
                if c + 1 == row.len() {
                    out.push_str(cell);
                } else {
                    out.push_str(&format!("{cell:<w$}", w = widths[c]));
                }
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    const AGG: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    const AGG_OLD: &str = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

    #[test]
    fn negotiation_follows_the_accept_order() {
        assert_eq!(negotiate(Some(AGG)), Some(DiscoveryFormat::AggregatedV2));
        assert_eq!(
            negotiate(Some(AGG_OLD)),
            Some(DiscoveryFormat::AggregatedV2Beta1),
            "kubectl 1.27-1.29 must not get v2"
        );
        assert_eq!(
            negotiate(Some("application/json, */*")),
            Some(DiscoveryFormat::Legacy)
        );
        assert_eq!(negotiate(None), Some(DiscoveryFormat::Legacy));
        assert_eq!(negotiate(Some("")), Some(DiscoveryFormat::Legacy));
        assert_eq!(
            negotiate(Some(
                "application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io"
            )),
            Some(DiscoveryFormat::AggregatedV2),
            "parameter order is free"
        );
        assert_eq!(
            negotiate(Some(
                "application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            )),
            Some(DiscoveryFormat::Legacy),
            "plain JSON first wins"
        );
        assert_eq!(
            negotiate(Some(
                "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
            )),
            Some(DiscoveryFormat::AggregatedV2Beta1),
            "protobuf is skipped"
        );
        assert_eq!(
            negotiate(Some(
                "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList"
            )),
            None
        );
        assert_eq!(negotiate(Some("application/vnd.kubernetes.protobuf")), None);
    }

    #[test]
    fn core_resource_list_has_eviction_and_subresource_kinds() {
        let list = api_resource_list("", "v1").unwrap();
        assert_eq!(list["kind"], "APIResourceList");
        assert_eq!(list["groupVersion"], "v1");
        let resources = list["resources"].as_array().unwrap();
        let names: Vec<&str> = resources
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "upstream serves resources sorted by name");
        let find = |n: &str| {
            resources
                .iter()
                .find(|r| r["name"] == n)
                .unwrap_or_else(|| panic!("{n} missing"))
                .clone()
        };
        assert_eq!(
            find("pods"),
            json!({"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                   "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                   "shortNames": ["po"], "categories": ["all"], "storageVersionHash": "xPOwRZ+Yhw8="})
        );
        assert_eq!(
            find("pods/eviction"),
            json!({"name": "pods/eviction", "singularName": "", "namespaced": true, "group": "policy", "version": "v1",
                   "kind": "Eviction", "verbs": ["create"]})
        );
        assert_eq!(
            find("pods/exec"),
            json!({"name": "pods/exec", "singularName": "", "namespaced": true, "kind": "PodExecOptions", "verbs": ["create", "get"]})
        );
        assert_eq!(find("pods/log")["kind"], "Pod");
        assert_eq!(
            find("pods/status")["verbs"],
            json!(["get", "patch", "update"])
        );
        assert_eq!(find("pods/binding")["kind"], "Binding");
        assert_eq!(find("nodes/proxy")["kind"], "NodeProxyOptions");
        assert_eq!(find("namespaces/finalize")["verbs"], json!(["update"]));
        assert_eq!(
            find("namespaces")["verbs"],
            json!([
                "create", "delete", "get", "list", "patch", "update", "watch"
            ])
        );
        assert_eq!(find("nodes")["namespaced"], false);
        assert!(find("secrets").get("shortNames").is_none());
        assert!(find("events").get("categories").is_none());

        let apps = api_resource_list("apps", "v1").unwrap();
        assert_eq!(apps["groupVersion"], "apps/v1");
        let scale = apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "deployments/scale")
            .unwrap()
            .clone();
        assert_eq!(
            scale,
            json!({"name": "deployments/scale", "singularName": "", "namespaced": true, "group": "autoscaling",
                   "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]})
        );
        let status = apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "deployments/status")
            .unwrap()
            .clone();
        assert!(
            status.get("group").is_none(),
            "same-group subresources carry no group"
        );
        assert_eq!(status["kind"], "Deployment");
        assert!(api_resource_list("apps", "v2").is_none());
        assert!(api_resource_list("nope", "v1").is_none());
    }

    #[test]
    fn storage_version_hashes_match_upstream() {
        let hash = |g: &str, p: &str| storage_version_hash(registry::lookup(g, "v1", p).unwrap());
        // Values a real v1.33 server reports.
        assert_eq!(hash("", "pods"), "xPOwRZ+Yhw8=");
        assert_eq!(hash("", "nodes"), "XwShjMxG9Fs=");
        assert_eq!(hash("", "events"), "r2yiGXH7wu8=");
        assert_eq!(
            hash("events.k8s.io", "events"),
            "r2yiGXH7wu8=",
            "stored as core v1 Events"
        );
        assert_eq!(hash("apps", "deployments"), "8aSe+NMegvE=");
        assert_eq!(hash("coordination.k8s.io", "leases"), "gqkMMb/YqFM=");
        assert_eq!(hash("scheduling.k8s.io", "priorityclasses"), "1QwjyaZjj3Y=");
        assert_eq!(base64_std(b"ab"), "YWI=");
        assert_eq!(base64_std(b"a"), "YQ==");
        let empty = klab_api::sha256::sha256(b"");
        assert_eq!(
            base64_std(&empty),
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
        // Multi-block input (56 bytes pad into two blocks); expected value from Python hashlib.
        let two =
            klab_api::sha256::sha256(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq");
        assert_eq!(
            base64_std(&two),
            "JI1qYdIGOLjlwCaTDD5gOaM85Flk/yFn9uzt1BnbBsE="
        );
    }

    #[test]
    fn group_documents() {
        let list = api_group_list();
        assert_eq!(list["kind"], "APIGroupList");
        let groups: Vec<&str> = list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert_eq!(groups, registry::groups());
        assert_eq!(
            list["groups"][0],
            json!({"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
                   "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}})
        );
        let g = api_group("policy").unwrap();
        assert_eq!(g["kind"], "APIGroup");
        assert_eq!(g["preferredVersion"]["groupVersion"], "policy/v1");
        assert!(api_group("nope").is_none());
        assert!(api_group("").is_none());
        assert_eq!(
            api_versions("10.0.0.1:6443"),
            json!({"kind": "APIVersions", "versions": ["v1"],
                   "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"}]})
        );
    }

    #[test]
    fn aggregated_documents() {
        let core = aggregated(true, DiscoveryFormat::AggregatedV2);
        assert_eq!(core["apiVersion"], "apidiscovery.k8s.io/v2");
        assert_eq!(core["items"].as_array().unwrap().len(), 1);
        assert_eq!(core["items"][0]["metadata"]["name"], "");
        let v1 = &core["items"][0]["versions"][0];
        assert_eq!(v1["version"], "v1");
        assert_eq!(v1["freshness"], "Current");
        let pods = v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap();
        assert_eq!(
            pods["responseKind"],
            json!({"group": "", "version": "v1", "kind": "Pod"})
        );
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(pods["singularResource"], "pod");
        assert_eq!(pods["categories"], json!(["all"]));
        let subs: Vec<&str> = pods["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["subresource"].as_str().unwrap())
            .collect();
        assert_eq!(
            subs,
            [
                "attach",
                "binding",
                "ephemeralcontainers",
                "eviction",
                "exec",
                "log",
                "portforward",
                "status"
            ]
        );
        let eviction = pods["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["subresource"] == "eviction")
            .unwrap();
        assert_eq!(
            eviction["responseKind"],
            json!({"group": "policy", "version": "v1", "kind": "Eviction"})
        );
        let nodes = v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "nodes")
            .unwrap();
        assert_eq!(nodes["scope"], "Cluster");

        let apis = aggregated(false, DiscoveryFormat::AggregatedV2Beta1);
        assert_eq!(apis["apiVersion"], "apidiscovery.k8s.io/v2beta1");
        let names: Vec<&str> = apis["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, registry::groups());
        let deploy = apis["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        let scale = deploy["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["subresource"] == "scale")
            .unwrap();
        assert_eq!(
            scale["responseKind"],
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
        );
        // Same body otherwise: only apiVersion differs between v2 and v2beta1.
        let mut v2 = aggregated(false, DiscoveryFormat::AggregatedV2);
        v2["apiVersion"] = json!("apidiscovery.k8s.io/v2beta1");
        assert_eq!(v2, apis);
    }

    #[test]
    fn version_has_all_fields_kube_rs_requires() {
        let v = version_info();
        let info: k8s_openapi::apimachinery::pkg::version::Info =
            serde_json::from_value(v.clone()).unwrap();
        assert_eq!(info.git_version, "v1.33.1");
        assert_eq!(info.major, "1");
        assert_eq!(info.minor, "33");
        for field in [
            "gitCommit",
            "gitTreeState",
            "buildDate",
            "goVersion",
            "compiler",
            "platform",
        ] {
            assert!(!v[field].as_str().unwrap().is_empty(), "{field}");
        }
        assert_eq!(v["emulationMinor"], "33");
        assert_eq!(v["minCompatibilityMinor"], "32");
    }

    async fn get_raw(uri: &str, accept: Option<&str>) -> (StatusCode, String, String) {
        let mut req = axum::http::Request::builder()
            .uri(uri)
            .header("host", "127.0.0.1:7443");
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        let resp = routes()
            .merge(crate::health::routes(Default::default()))
            .oneshot(req.body(axum::body::Body::empty()).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let ct = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, ct, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn routes_negotiate_and_serve() {
        let (code, ct, body) = get_raw("/api?timeout=32s", Some(AGG)).await;
        assert_eq!(
            (code, ct.as_str()),
            (StatusCode::OK, CONTENT_TYPE_AGGREGATED_V2)
        );
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["kind"],
            "APIGroupDiscoveryList"
        );
        let (_, ct, body) = get_raw("/apis", Some(AGG_OLD)).await;
        assert_eq!(ct, CONTENT_TYPE_AGGREGATED_V2BETA1);
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["apiVersion"],
            "apidiscovery.k8s.io/v2beta1"
        );
        let (_, ct, body) = get_raw("/api", Some("application/json, */*")).await;
        assert_eq!(ct, "application/json");
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap(),
            api_versions("127.0.0.1:7443")
        );
        let (_, _, body) = get_raw("/apis", None).await;
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["kind"],
            "APIGroupList"
        );
        let (code, _, body) = get_raw("/api", Some("application/vnd.kubernetes.protobuf")).await;
        assert_eq!(code, StatusCode::NOT_ACCEPTABLE);
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["reason"],
            "NotAcceptable"
        );
        let (code, _, body) = get_raw("/api/v1?timeout=32s", Some(AGG)).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["kind"],
            "APIResourceList"
        );
        let (_, _, body) = get_raw("/apis/storage.k8s.io/v1", None).await;
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["groupVersion"],
            "storage.k8s.io/v1"
        );
        let (_, _, body) = get_raw("/apis/batch", None).await;
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["name"],
            "batch"
        );
        for missing in ["/apis/nope", "/apis/apps/v2", "/apis/nope/v1"] {
            let (code, ct, body) = get_raw(missing, None).await;
            assert_eq!(
                (code, ct.as_str()),
                (StatusCode::NOT_FOUND, "application/json"),
                "{missing}"
            );
            let status: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(
                status["message"],
                "the server could not find the requested resource"
            );
            assert_eq!(status["code"], 404);
        }
        for probe in ["/healthz", "/livez", "/readyz"] {
            let (code, ct, body) = get_raw(probe, None).await;
            assert_eq!(
                (code, ct.as_str(), body.as_str()),
                (StatusCode::OK, "text/plain; charset=utf-8", "ok")
            );
        }
        let (_, _, body) = get_raw("/version?timeout=5s", None).await;
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap(),
            version_info()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn kube_rs_discovery_both_ways() {
        use kube::discovery::{Discovery, Scope};
        let client = kube::Client::new(routes(), "default");
        let info = client.apiserver_version().await.unwrap();
        assert_eq!(info.git_version, GIT_VERSION);
        for aggregated in [false, true] {
            let d = Discovery::new(client.clone());
            let d = if aggregated {
                d.run_aggregated().await.unwrap()
            } else {
                d.run().await.unwrap()
            };
            let mut groups: Vec<String> = d.groups().map(|g| g.name().to_string()).collect();
            groups.sort();
            let mut want: Vec<String> = registry::groups().iter().map(|g| g.to_string()).collect();
            want.push(String::new());
            want.sort();
            assert_eq!(groups, want);
            assert!(groups.contains(&"apps".to_string()) && groups.contains(&String::new()));
            for ri in RESOURCES {
                let gvk = kube::core::GroupVersionKind::gvk(ri.group, ri.version, ri.kind);
                let (ar, caps) = d
                    .resolve_gvk(&gvk)
                    .unwrap_or_else(|| panic!("{} (aggregated: {aggregated})", ri.kind));
                assert_eq!(ar.plural, ri.plural);
                let scope = if ri.namespaced {
                    Scope::Namespaced
                } else {
                    Scope::Cluster
                };
                assert_eq!(caps.scope, scope, "{}", ri.plural);
                if registry::is_review(ri) {
                    assert!(caps.supports_operation("create"), "{}", ri.plural);
                    assert!(!caps.supports_operation("get"), "{}", ri.plural);
                } else if registry::is_metrics(ri) {
                    assert!(caps.supports_operation("list"), "{}", ri.plural);
                    assert!(!caps.supports_operation("watch"), "{}", ri.plural);
                } else {
                    assert!(caps.supports_operation("watch"), "{}", ri.plural);
                }
            }
        }
    }

    /// What `kubectl api-resources` prints for klab's resource set: core first, then groups
    /// alphabetically, each in served (alphabetical) order — as a real v1.33 cluster prints these
    /// rows.
    fn expected_api_resources() -> String {
        let mut rows: Vec<Vec<&str>> = vec![vec![
            "NAME",
            "SHORTNAMES",
            "APIVERSION",
            "NAMESPACED",
            "KIND",
        ]];
        let mut groups: Vec<&str> = registry::groups();
        groups.sort();
        groups.insert(0, "");
        let mut api_versions: Vec<String> = Vec::new();
        let mut all: Vec<&ResourceInfo> = Vec::new();
        for g in &groups {
            let mut rs: Vec<&ResourceInfo> = RESOURCES.iter().filter(|r| r.group == *g).collect();
            rs.sort_by(|a, b| a.plural.cmp(b.plural));
            for r in rs {
                api_versions.push(r.api_version());
                all.push(r);
            }
        }
        let shorts: Vec<String> = all.iter().map(|r| r.short_names.join(",")).collect();
        for (i, r) in all.iter().enumerate() {
            rows.push(vec![
                r.plural,
                shorts[i].as_str(),
                api_versions[i].as_str(),
                if r.namespaced { "true" } else { "false" },
                r.kind,
            ]);
        }
        kubectl_harness::tabulate(&rows)
    }

    /// The real kubectl 1.27 (aggregated v2beta1 only) and 1.33 (v2) list exactly klab's
    /// resources. Skipped with a note when the kubectl binaries are not installed.
    #[tokio::test]
    async fn real_kubectl_api_resources() {
        let Some(bin_dir) = kubectl_harness::bin_dir() else {
            eprintln!("SKIPPED: kubectl.1.27/kubectl.1.33 not found (set KLAB_KUBECTL_DIR)");
            return;
        };
        let h = kubectl_harness::Harness::start(
            bin_dir,
            routes()
                .merge(crate::openapi::routes())
                .merge(crate::health::routes(Default::default())),
        )
        .await;
        let expected = expected_api_resources();
        let words = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
        let lines: Vec<String> = expected.lines().map(words).collect();
        assert_eq!(lines[0], "NAME SHORTNAMES APIVERSION NAMESPACED KIND");
        assert!(lines.contains(&"pods po v1 true Pod".to_string()));
        for version in ["1.27", "1.33"] {
            let (ok, out, err) = h.kubectl(version, &["api-resources"]).await;
            assert!(ok, "kubectl.{version} api-resources failed: {err}");
            assert_eq!(out, expected, "kubectl.{version}\nstderr: {err}");
        }
        let requests = h.requests();
        assert!(
            requests.iter().any(|r| r.starts_with(
                "GET /apis?timeout=20s [application/json;g=apidiscovery.k8s.io;v=v2beta1;"
            )),
            "{requests:#?}"
        );
        assert!(
            requests.iter().all(|r| !r.starts_with("GET /apis/")),
            "aggregated discovery needs no per-group calls: {requests:#?}"
        );

        // `kubectl version` reads /version; `get --raw` reaches the probes.
        let (ok, out, err) = h.kubectl("1.33", &["version", "-o", "json"]).await;
        assert!(ok, "{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["serverVersion"]["gitVersion"], GIT_VERSION);
        let (ok, out, _) = h.kubectl("1.27", &["get", "--raw", "/readyz"]).await;
        assert!(ok);
        assert_eq!(out.trim(), "ok");
        let (ok, out, err) = h.kubectl("1.33", &["api-versions"]).await;
        assert!(ok, "{err}");
        assert_eq!(
            out,
            "apps/v1\nauthentication.k8s.io/v1\nauthorization.k8s.io/v1\nbatch/v1\ncertificates.k8s.io/v1\ncoordination.k8s.io/v1\ndiscovery.k8s.io/v1\nevents.k8s.io/v1\nmetrics.k8s.io/v1beta1\npolicy/v1\nrbac.authorization.k8s.io/v1\nscheduling.k8s.io/v1\nstorage.k8s.io/v1\nv1\n"
        );
    }
}
