//! The API server value: configuration, bootstrap objects, the Router, and request dispatch from
//! a URL to the verb handlers in `crud`, `subresources` and `watch`.
//!
//! Resource URLs are parsed by hand in one fallback handler (rather than by axum route patterns)
//! because Kubernetes paths are ambiguous to a pattern router: `/api/v1/namespaces/x/pods` is a
//! collection inside a namespace, while `/api/v1/namespaces/x/status` is a subresource of the
//! namespace `x`. Only the resource table can tell them apart.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use klab_api::supervise::Health;
use klab_api::{Clock, DetRng};
use klab_store::DynStorage;

use crate::admission::DefaultTolerationSeconds;
use crate::error::{ApiError, ApiResult};
use crate::identity::Identity;
use crate::registry::{self, ResourceInfo};

/// Knobs of the API server, with upstream kube-apiserver flag names where one exists.
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    /// `--default-not-ready-toleration-seconds` / `--default-unreachable-toleration-seconds`.
    pub default_toleration_seconds: DefaultTolerationSeconds,
    /// Largest accepted request body (upstream: 3 MiB).
    pub max_request_bytes: usize,
    /// Watch duration when the client gives no `timeoutSeconds` (upstream: 30–60 min).
    pub default_watch_timeout: Duration,
    /// How often a watch that allows bookmarks gets one.
    pub bookmark_interval: Duration,
    /// `--etcd-compaction-interval` (default 5m): every interval, history up to the revision seen
    /// at the previous tick is compacted, as upstream does. Zero disables compaction.
    pub compaction_interval: Duration,
    /// `--authorization-mode`.
    pub authorization_mode: crate::authz::AuthorizationMode,
    /// `--audit-log-path` with `--audit-policy-file` (no policy: nothing is audited).
    pub audit: Option<crate::audit::AuditConfig>,
    /// `--token-auth-file`: static bearer tokens.
    pub token_auth: Option<Arc<crate::token_file::StaticTokens>>,
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        ApiServerConfig {
            default_toleration_seconds: DefaultTolerationSeconds::default(),
            max_request_bytes: 3 * 1024 * 1024,
            default_watch_timeout: Duration::from_secs(1800),
            bookmark_interval: Duration::from_secs(60),
            compaction_interval: Duration::from_secs(300),
            authorization_mode: Default::default(),
            audit: None,
            token_auth: None,
        }
    }
}

pub(crate) struct Inner {
    pub store: DynStorage,
    pub clock: Clock,
    pub rng: DetRng,
    pub config: ApiServerConfig,
    /// The supervision registry of the components of this cluster, served as health checks.
    pub health: Health,
    /// Recent changes decoded once for all the watches that examine them.
    pub decoded: Arc<crate::watch::DecodedEvents>,
    /// Held from reading which cluster IPs and node ports are taken to storing the Service that
    /// takes one, so that two writes never take the same.
    pub service_alloc: tokio::sync::Mutex<()>,
    /// The network to the kubelets (set once by the composition root; unset: no route).
    pub kubelet_net: std::sync::OnceLock<Arc<dyn klab_api::kubelet_net::KubeletNetwork>>,
    /// The metrics pipeline behind `metrics.k8s.io` (set once by the composition root; unset:
    /// the group answers 503 as an unavailable APIService does).
    pub metrics_reader: std::sync::OnceLock<Arc<dyn klab_api::resource_metrics::MetricsReader>>,
    /// The service-account token key (kept in the store, so tokens outlive restarts).
    pub signer: crate::token::Signer,
    /// Request, watch and storage metrics (`/metrics`).
    pub metrics: crate::metrics::SharedMetrics,
    /// The RBAC objects as last decoded for the authorizer.
    pub policy: crate::authz::PolicyCache,
    /// The PriorityClasses as last decoded for the Priority admission plugin.
    pub priority_classes:
        crate::prefix_cache::PrefixCache<Vec<crate::admission::PriorityClassInfo>>,
    /// In-process components' requests the authorizer refused.
    pub denials: crate::authz::Denials,
    /// The audit log, when configured.
    pub audit: Option<crate::audit::AuditLog>,
}

/// The API server. Cheap to clone; every clone serves the same store.
#[derive(Clone)]
pub struct ApiServer {
    pub(crate) inner: Arc<Inner>,
    /// The router, built on first use and shared by every in-process client: a router holds a
    /// service per route, tens of KB that a thousand kubelets' clients need not each own.
    router: Arc<std::sync::OnceLock<Router>>,
}

/// The storage objects every klab cluster has from the start: the `csi.klab.dev` CSIDriver
/// (attach required, so volumes go through VolumeAttachments) and the default StorageClass
/// `standard` (WaitForFirstConsumer: a claim is provisioned where its first pod is scheduled).
pub fn storage_bootstrap_objects() -> [(&'static str, serde_json::Value); 2] {
    use klab_api::names::{ANN_DEFAULT_STORAGE_CLASS, CSI_DRIVER_KLAB, DEFAULT_STORAGE_CLASS};
    [
        (
            "csidrivers",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
                "metadata": {"name": CSI_DRIVER_KLAB},
                "spec": {"attachRequired": true, "podInfoOnMount": false}}),
        ),
        (
            "storageclasses",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": DEFAULT_STORAGE_CLASS,
                             "annotations": {ANN_DEFAULT_STORAGE_CLASS: "true"}},
                "provisioner": CSI_DRIVER_KLAB, "reclaimPolicy": "Delete",
                "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": true}),
        ),
    ]
}

/// The ChaCha stream the bootstrap RBAC objects' UIDs are drawn from.
const RBAC_UID_STREAM: u64 = 0x72_62_61_63;

/// The RNG stream audit IDs are drawn from (ASCII "audt"): auditing never moves other draws.
const AUDIT_ID_STREAM: u64 = 0x61_75_64_74;

/// The namespaces every cluster has from the start.
pub const BOOTSTRAP_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

impl ApiServer {
    /// Builds the server over `store` and creates what every cluster has when missing: the
    /// bootstrap namespaces, the two system PriorityClasses (upstream's
    /// `scheduling/bootstrap-system-priority-classes` post-start hook), the storage bootstrap
    /// objects and the `kubernetes` Service.
    pub async fn new(
        store: DynStorage,
        clock: Clock,
        rng: DetRng,
        config: ApiServerConfig,
    ) -> ApiResult<Self> {
        let signer = crate::token::Signer::load_or_create(&store, &rng).await?;
        let audit = match &config.audit {
            Some(cfg) => Some(
                crate::audit::AuditLog::open(cfg, rng.side_stream(AUDIT_ID_STREAM)).map_err(
                    |e| {
                        ApiError::internal(format!(
                            "opening the audit log {}: {e}",
                            cfg.log_path.display()
                        ))
                    },
                )?,
            ),
            None => None,
        };
        let api = ApiServer {
            router: Arc::default(),
            inner: Arc::new(Inner {
                signer,
                audit,
                metrics: Default::default(),
                policy: Default::default(),
                priority_classes: Default::default(),
                denials: Default::default(),
                store,
                clock,
                rng,
                config,
                health: Health::new(),
                decoded: Default::default(),
                service_alloc: Default::default(),
                kubelet_net: Default::default(),
                metrics_reader: Default::default(),
            }),
        };
        // A durable store builds its index of pods by node now, not at the first kubelet's list.
        api.inner
            .store
            .prepare_index(crate::watch::POD_NODE_NAME)
            .await?;
        let ns = registry::lookup("", "v1", "namespaces").expect("namespaces are served");
        for name in BOOTSTRAP_NAMESPACES {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            match crate::crud::create_object(&api.inner, ns, None, obj, false, false).await {
                Ok(_) => {}
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => return Err(e),
            }
        }
        // Their `default` ServiceAccounts, which upstream's service-account controller creates
        // within moments of start-up: here before anything can ask for a pod, so that a pod
        // created as the cluster starts is not refused for want of its account.
        let sa = registry::lookup("", "v1", "serviceaccounts").expect("serviceaccounts are served");
        for ns in BOOTSTRAP_NAMESPACES {
            let obj = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
            match crate::crud::create_object(&api.inner, sa, Some(ns), obj, false, false).await {
                Ok(_) => {}
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => return Err(e),
            }
        }
        let pc = registry::lookup("scheduling.k8s.io", "v1", "priorityclasses")
            .expect("priorityclasses are served");
        for (name, value, description) in crate::validation::SYSTEM_PRIORITY_CLASSES {
            let obj = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value, "description": description});
            match crate::crud::create_object(&api.inner, pc, None, obj, false, false).await {
                Ok(_) => {}
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => return Err(e),
            }
        }
        // The simulated CSI driver and the default StorageClass provisioned by it, as a cluster
        // installer (kind, a cloud) leaves them: claims without a class get `standard`.
        for (plural, obj) in storage_bootstrap_objects() {
            let ri = registry::lookup("storage.k8s.io", "v1", plural).expect("served");
            match crate::crud::create_object(&api.inner, ri, None, obj, false, false).await {
                Ok(_) => {}
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => return Err(e),
            }
        }
        // The `kubernetes` Service every cluster has, on the first address of the service range.
        let svc = registry::lookup("", "v1", "services").expect("services are served");
        let obj = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": crate::services::KUBERNETES_SERVICE_IP.to_string(),
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]}});
        // Looked up first: a second create would fail on its address (already allocated)
        // before it could fail on its name.
        let key = svc.key(Some("default"), "kubernetes");
        if api.inner.store.get(&key).await?.is_none() {
            match crate::crud::create_object(&api.inner, svc, Some("default"), obj, false, false)
                .await
            {
                Ok(_) => {}
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => return Err(e),
            }
        }
        crate::crud::UID_SOURCE
            .scope(
                api.inner.rng.side_stream(RBAC_UID_STREAM),
                api.reconcile_rbac(),
            )
            .await?;
        api.start_compactor();
        Ok(api)
    }

    /// Upstream's `rbac/bootstrap-roles` post-start hook: the bootstrap roles and bindings are
    /// created or reconciled, then aggregated ClusterRoles get their rules (the aggregation
    /// controller keeps them so afterwards).
    async fn reconcile_rbac(&self) -> ApiResult<()> {
        use crate::crud::{Changes, WriteMode, WriteScope};
        let mode = WriteMode {
            scope: WriteScope::Main,
            dry_run: false,
            strict: false,
            changes: Changes::Any,
        };
        for (plural, obj) in crate::rbac::bootstrap::objects() {
            let ri = registry::lookup(crate::rbac::GROUP, "v1", plural).expect("served");
            let name = crate::object::name(&obj).to_string();
            let key = ri.key(None, &name);
            match self.inner.store.get(&key).await? {
                None => {
                    match crate::crud::create_object(&self.inner, ri, None, obj, false, false).await
                    {
                        Ok(_) => {}
                        Err(e) if e.reason == "AlreadyExists" => {}
                        Err(e) => return Err(e),
                    }
                }
                Some(kv) => {
                    let existing = crate::crud::decode_kv(ri, &kv)?;
                    if let Some(next) = crate::rbac::bootstrap::reconcile(&existing, &obj) {
                        crate::crud::guarded_update(&self.inner, ri, None, &name, mode, |_| {
                            Ok(next.clone())
                        })
                        .await?;
                    }
                }
            }
        }
        // Aggregation reads roles that aggregation itself fills (admin aggregates edit, which
        // aggregates view): a few rounds reach the fixed point.
        let ri = registry::lookup(crate::rbac::GROUP, "v1", "clusterroles").expect("served");
        for _ in 0..4 {
            let list = self
                .inner
                .store
                .list(&ri.key_prefix(), Default::default())
                .await?;
            let mut roles = std::collections::BTreeMap::new();
            for kv in &list.kvs {
                let o = crate::crud::decode_kv(ri, kv)?;
                roles.insert(crate::object::name(&o).to_string(), o);
            }
            let changes = crate::rbac::aggregate(&roles);
            if changes.is_empty() {
                break;
            }
            for (name, rules) in changes {
                crate::crud::guarded_update(&self.inner, ri, None, &name, mode, |cur| {
                    let mut next = cur.clone();
                    next["rules"] = serde_json::Value::Array(rules.clone());
                    Ok(next)
                })
                .await?;
            }
        }
        Ok(())
    }

    /// Compacts the store's history every `compaction_interval`, up to the revision seen one
    /// interval earlier, so that Lease heartbeats do not grow history without bound while watches
    /// can still resume from anything younger than one interval.
    fn start_compactor(&self) {
        let interval = self.inner.config.compaction_interval;
        if interval.is_zero() {
            return;
        }
        let store = self.inner.store.clone();
        let clock = self.inner.clock.clone();
        tokio::spawn(async move {
            let mut previous = store.current_revision();
            loop {
                clock.sleep(interval).await;
                if previous > store.compacted_revision()
                    && let Err(e) = store.compact(previous).await
                {
                    tracing::warn!("compaction to revision {previous} failed: {e}");
                }
                previous = store.current_revision();
            }
        });
    }

    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    /// The supervision registry whose components `/readyz`, `/livez`, `/healthz` and `/metrics`
    /// report; the composition root supervises every component into it.
    pub fn health(&self) -> &Health {
        &self.inner.health
    }

    /// Connects the API server to the kubelets (`pods/log`, exec, attach, port-forward). Only
    /// the first call has an effect.
    pub fn set_kubelet_network(&self, net: Arc<dyn klab_api::kubelet_net::KubeletNetwork>) {
        let _ = self.inner.kubelet_net.set(net);
    }

    /// Connects `metrics.k8s.io` to the metrics pipeline's storage. Only the first call has an
    /// effect.
    pub fn set_metrics_reader(&self, reader: Arc<dyn klab_api::resource_metrics::MetricsReader>) {
        let _ = self.inner.metrics_reader.set(reader);
    }

    pub fn store(&self) -> &DynStorage {
        &self.inner.store
    }

    /// What the watches' decoding of changes has done so far: changes examined by a watch
    /// (once per watch), decoded (the others were the write's own object, kept decoded, or
    /// another watch's decoding), and read from a change's memo. Diagnostics (the scale
    /// benchmark).
    pub fn watch_decodes(&self) -> crate::watch::WatchDecodes {
        self.inner.decoded.stats()
    }

    /// The request, watch and storage accounting (`/metrics`, and the request log `klab sim`'s
    /// `writes` expectations read).
    pub fn metrics(&self) -> &crate::metrics::SharedMetrics {
        &self.inner.metrics
    }

    /// Adds a source of more `/metrics` text (the controllers' metric families).
    pub fn add_metrics_source(&self, f: impl Fn() -> String + Send + Sync + 'static) {
        self.inner.metrics.add_source(f);
    }

    /// The Router with no identity attached (the TLS server attaches one per connection; requests
    /// without one are treated as the cluster admin by in-process callers).
    pub fn router(&self) -> Router {
        self.router.get_or_init(|| self.build_router()).clone()
    }

    fn build_router(&self) -> Router {
        let resources = Router::new()
            .fallback(dispatch)
            .with_state(self.inner.clone());
        let metrics = Router::new()
            .route("/metrics", axum::routing::get(metrics_handler))
            .with_state(self.inner.clone());
        let router = crate::discovery::routes()
            .merge(crate::health::routes(self.inner.health.clone()))
            .merge(metrics)
            .merge(crate::openapi::routes())
            .merge(resources);
        #[cfg(test)]
        let router = router.route(
            "/debug/panic",
            axum::routing::get(|| async {
                let v: Vec<u8> = Vec::new();
                v[1].to_string()
            }),
        );
        router
            .layer(axum::middleware::from_fn_with_state(
                self.inner.clone(),
                crate::authz::authorize_request,
            ))
            .layer(axum::middleware::from_fn_with_state(
                self.inner.clone(),
                crate::authz::impersonate,
            ))
            .layer(axum::middleware::from_fn_with_state(
                self.inner.clone(),
                crate::audit::audit_request,
            ))
            .layer(axum::middleware::from_fn_with_state(
                self.inner.clone(),
                authenticate_bearer,
            ))
            .layer(axum::middleware::from_fn(recover_panics))
    }

    /// The API as seen by one in-process component: every request carries `identity`.
    pub fn router_as(&self, identity: Identity) -> ComponentService {
        ComponentService {
            router: self.router(),
            identity,
        }
    }

    /// The first request of an in-process component (`router_as`) the authorizer refused: its
    /// instant and the Forbidden message. Always a klab bug: each component's upstream role must
    /// grant what it does.
    pub fn first_component_denial(&self) -> Option<(jiff::Timestamp, String)> {
        self.inner.denials.first()
    }

    /// Every refused request of an in-process component as `user verb resource ×count`.
    pub fn component_denials(&self) -> Vec<String> {
        self.inner.denials.summary()
    }
}

/// The shared router with one component's identity on every request ([`ApiServer::router_as`]).
///
/// A plain service over the one router rather than a `Router` of its own: every kubelet has three
/// clients, and a `Router` wrapping the shared one (its route table, its boxed fallback) cost
/// about 3.3 KB apiece, 10 KB per node.
#[derive(Clone)]
pub struct ComponentService {
    router: Router,
    identity: Identity,
}

impl<B> tower::Service<axum::http::Request<B>> for ComponentService
where
    Router: tower::Service<axum::http::Request<B>>,
{
    type Response = <Router as tower::Service<axum::http::Request<B>>>::Response;
    type Error = <Router as tower::Service<axum::http::Request<B>>>::Error;
    type Future = <Router as tower::Service<axum::http::Request<B>>>::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        tower::Service::<axum::http::Request<B>>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, mut req: axum::http::Request<B>) -> Self::Future {
        let ext = req.extensions_mut();
        ext.insert(self.identity.clone());
        ext.insert(crate::authz::InProcess);
        self.router.call(req)
    }
}

/// `/metrics`: the supervision counters, the API server's families and the registered sources.
async fn metrics_handler(State(inner): State<Arc<Inner>>) -> Response {
    let mut objects = Vec::new();
    for ri in crate::metrics::stored_resources() {
        let prefix = crate::conversion::storage_resource(ri).key_prefix();
        let opts = klab_store::ListOptions {
            limit: Some(1),
            ..Default::default()
        };
        if let Ok(l) = inner.store.list(&prefix, opts).await {
            objects.push((ri, (l.kvs.len() as u64).saturating_add(l.remaining)));
        }
    }
    let mut body = crate::health::render_metrics(&inner.health);
    body.push_str(&inner.metrics.render(&objects));
    body.push_str(&inner.denials.render());
    let mut resp = (axum::http::StatusCode::OK, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}

/// Service-account bearer tokens (`kubectl --token=$(kubectl create token sa)`): a request that
/// arrives without an identity (the TLS server found no client certificate) but with
/// `Authorization: Bearer` is authenticated here, as upstream's token authenticator; a token that
/// does not verify is 401. A client certificate wins over a token, as in upstream's union of
/// authenticators (x509 first).
async fn authenticate_bearer(
    State(inner): State<Arc<Inner>>,
    mut req: Request,
    next: axum::middleware::Next,
) -> Response {
    if req.extensions().get::<Identity>().is_none()
        && let Some(token) = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(|t| t.trim().to_string())
    {
        // The token file first, then service-account tokens (upstream's union of token
        // authenticators).
        if let Some(id) = inner
            .config
            .token_auth
            .as_ref()
            .and_then(|t| t.authenticate(&token))
        {
            req.extensions_mut().insert(id);
            return next.run(req).await;
        }
        // Then bootstrap tokens: a token in their shape is theirs to accept (none of the other
        // kinds has that shape), so a refusal there is final.
        if let Some((id, secret)) = crate::bootstrap_token::parse(&token) {
            return match bootstrap_identity(&inner, id, secret).await {
                Ok(Some(identity)) => {
                    req.extensions_mut().insert(identity);
                    next.run(req).await
                }
                Ok(None) => ApiError::unauthorized().into_response(),
                Err(e) => e.into_response(),
            };
        }
        match crate::review::authenticate(&inner, &token).await {
            Ok(Some((id, _))) => {
                req.extensions_mut().insert(id);
            }
            Ok(None) => return ApiError::unauthorized().into_response(),
            Err(e) => return e.into_response(),
        }
    }
    next.run(req).await
}

/// The user of a bootstrap token `id.secret`, read from its Secret in kube-system; none (a 401)
/// when the Secret is missing or refuses the token (the reason is logged, as upstream does).
async fn bootstrap_identity(inner: &Inner, id: &str, secret: &str) -> ApiResult<Option<Identity>> {
    let ri = registry::lookup("", "v1", "secrets").expect("served");
    let name = crate::bootstrap_token::secret_name(id);
    let Some(kv) = inner
        .store
        .get(&ri.key(Some(crate::bootstrap_token::NAMESPACE), &name))
        .await?
    else {
        tracing::debug!("no secret of name {name} to match bootstrap bearer token");
        return Ok(None);
    };
    let obj = crate::crud::decode_kv(ri, &kv)?;
    match crate::bootstrap_token::decide(id, secret, &obj, inner.clock.now()) {
        Ok(identity) => Ok(Some(identity)),
        Err(why) => {
            tracing::debug!("{why}");
            Ok(None)
        }
    }
}

/// kube-apiserver's panic recovery: a handler that panics answers 500 with upstream's message
/// (as a `metav1.Status`, like every klab error) and is logged once with its backtrace; the
/// server goes on serving. In one process this also keeps a bug in a handler from unwinding
/// into the component whose in-process request it was serving.
async fn recover_panics(req: Request, next: axum::middleware::Next) -> Response {
    let (method, uri) = (req.method().clone(), req.uri().clone());
    match klab_api::supervise::catch_panic(next.run(req)).await {
        Ok(resp) => resp,
        Err(p) => panicked(&method, &uri, p),
    }
}

/// The answer to a request whose handler panicked, logged once with its backtrace (also used by
/// the audit layer, which catches the panic first to record its Panic stage).
pub(crate) fn panicked(
    method: &Method,
    uri: &axum::http::Uri,
    p: klab_api::supervise::CaughtPanic,
) -> Response {
    tracing::error!(
        "apiserver panic'd: {method} {uri}: {}\nbacktrace:\n{}",
        p.message,
        p.backtrace.unwrap_or_default()
    );
    ApiError::internal("This request caused apiserver to panic. Look in the logs for details.")
        .into_response()
}

/// What a resource URL names.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Target {
    pub ri: &'static ResourceInfo,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub sub: Option<String>,
    /// `nodes/{name}/proxy/{path}`: the path after `proxy` (with its leading `/`).
    pub proxy_path: Option<String>,
}

/// Percent-decodes a URL path as Go's `URL.Path` (an escaped `/` becomes a separator, so a
/// name can never contain one); a malformed escape is a 400 as in Go's URL parser.
pub(crate) fn decode_path(path: &str) -> ApiResult<String> {
    if !path.contains('%') {
        return Ok(path.to_string());
    }
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok());
            match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(v) => {
                    out.push(v);
                    i += 3;
                    continue;
                }
                None => {
                    let esc: String = path[i..].chars().take(3).collect();
                    return Err(ApiError::bad_request(format!("invalid URL escape {esc:?}")));
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).map_err(|_| ApiError::bad_request("invalid URL path: not UTF-8"))
}

/// Parses `/api/v1/...` and `/apis/<g>/<v>/...` resource paths (percent-decoded first).
pub(crate) fn parse_path(path: &str) -> ApiResult<Target> {
    let path = decode_path(path)?;
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::no_such_path()),
    };
    if rest.iter().any(|s| s.is_empty()) {
        return Err(ApiError::no_such_path());
    }
    let owned = |s: &&str| Some(s.to_string());
    // `/namespaces/<ns>/<resource>[/<name>[/<sub>]]` when <resource> is a namespaced resource.
    if let ["namespaces", ns, res, tail @ ..] = rest
        && let Some(ri) = registry::lookup(group, version, res).filter(|ri| ri.namespaced)
    {
        return match tail {
            [] => Ok(Target {
                ri,
                namespace: owned(ns),
                name: None,
                sub: None,
                proxy_path: None,
            }),
            [name] => Ok(Target {
                ri,
                namespace: owned(ns),
                name: owned(name),
                sub: None,
                proxy_path: None,
            }),
            [name, sub] => Ok(Target {
                ri,
                namespace: owned(ns),
                name: owned(name),
                sub: owned(sub),
                proxy_path: None,
            }),
            _ => Err(ApiError::no_such_path()),
        };
    }
    let ri = match rest.first() {
        Some(res) => registry::lookup(group, version, res).ok_or_else(ApiError::no_such_path)?,
        None => return Err(ApiError::no_such_path()),
    };
    match &rest[1..] {
        [] => Ok(Target {
            ri,
            namespace: None,
            name: None,
            sub: None,
            proxy_path: None,
        }),
        // A namespaced resource has no object URLs outside a namespace.
        _ if ri.namespaced => Err(ApiError::no_such_path()),
        // `nodes/{name}/proxy/{path…}`: everything after `proxy` is the kubelet's path.
        [name, "proxy", rest @ ..] if ri.plural == "nodes" && !rest.is_empty() => Ok(Target {
            ri,
            namespace: None,
            name: owned(name),
            sub: Some("proxy".into()),
            proxy_path: Some(format!("/{}", rest.join("/"))),
        }),
        [name] => Ok(Target {
            ri,
            namespace: None,
            name: owned(name),
            sub: None,
            proxy_path: None,
        }),
        [name, sub] => Ok(Target {
            ri,
            namespace: None,
            name: owned(name),
            sub: owned(sub),
            proxy_path: None,
        }),
        _ => Err(ApiError::no_such_path()),
    }
}

/// One request, decoded enough for the verb handlers.
pub(crate) struct Ctx {
    pub inner: Arc<Inner>,
    pub target: Target,
    pub query: BTreeMap<String, String>,
    pub headers: HeaderMap,
    #[allow(dead_code)] // read by admission plugins that check who is asking (NodeRestriction)
    pub identity: Option<Identity>,
    /// The query exactly as sent (repeated parameters such as exec's `command` kept in order).
    pub raw_query: Option<String>,
    /// The client connection's upgrade, when the request came over HTTP/1.1 from hyper (exec,
    /// attach and port-forward take it over).
    pub upgrade: std::sync::Mutex<Option<hyper::upgrade::OnUpgrade>>,
}

impl Ctx {
    pub fn q(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str)
    }

    pub fn q_bool(&self, k: &str) -> bool {
        matches!(self.q(k), Some("true") | Some("1"))
    }

    pub fn accept(&self) -> &str {
        self.headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// `fieldValidation=Strict`: unknown fields are an error rather than dropped.
    pub fn strict(&self) -> bool {
        self.q("fieldValidation") == Some("Strict")
    }

    pub fn dry_run(&self) -> bool {
        self.query.get("dryRun").is_some_and(|v| v == "All")
    }
}

fn parse_query(uri: &axum::http::Uri) -> ApiResult<BTreeMap<String, String>> {
    let Some(q) = uri.query() else {
        return Ok(BTreeMap::new());
    };
    let pairs: Vec<(String, String)> =
        axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map(|q| q.0)
            .map_err(|_| ApiError::bad_request(format!("invalid query string {q:?}")))?;
    Ok(pairs.into_iter().filter(|(k, _)| !k.is_empty()).collect())
}

async fn dispatch(State(inner): State<Arc<Inner>>, req: Request) -> Response {
    let target = parse_path(req.uri().path()).ok();
    let deprecated = target.as_ref().and_then(|t| registry::deprecation(t.ri));
    // What `apiserver_request_total` calls this request.
    let watch = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let apply = req
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/apply-patch"));
    let labels = target.as_ref().map(|t| {
        let named = t.name.is_some();
        let sub = t.sub.clone().unwrap_or_default();
        crate::metrics::RequestLabels {
            verb: crate::metrics::verb(req.method(), named, watch, t.sub.as_deref(), apply),
            group: t.ri.group,
            version: t.ri.version,
            resource: t.ri.plural,
            scope: crate::metrics::scope(named, t.namespace.is_some()),
            subresource: sub,
            code: 0,
        }
    });
    // Who asked, for the request log (in-process callers without one are the admin).
    let entry = target.as_ref().map(|t| {
        let user = req
            .extensions()
            .get::<Identity>()
            .map(|i| i.user.clone())
            .unwrap_or_else(|| Identity::admin().user);
        (user, t.namespace.clone(), t.name.clone())
    });
    let started = inner.clock.elapsed();
    let metrics = inner.metrics.clone();
    let clock = inner.clock.clone();
    let warns = warns_of_unknown_fields(req.uri());
    let (result, warnings) = if warns {
        FIELD_WARNINGS
            .scope(Default::default(), async {
                let r = dispatch_inner(inner, req).await;
                (r, FIELD_WARNINGS.with(std::cell::RefCell::take))
            })
            .await
    } else {
        (dispatch_inner(inner, req).await, Vec::new())
    };
    let mut resp = match result {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    if let Some(mut l) = labels {
        l.code = resp.status().as_u16();
        let long_running = matches!(l.verb, "WATCH" | "CONNECT")
            || (l.subresource == "log" && resp.status().is_success());
        let took = (!long_running).then(|| clock.elapsed().saturating_sub(started));
        if let Some((user, namespace, name)) = entry {
            metrics.log_request(crate::metrics::RequestEntry {
                at: started,
                user,
                verb: l.verb,
                resource: l.resource,
                subresource: l.subresource.clone(),
                namespace,
                name,
                code: l.code,
            });
        }
        metrics.observe(l, took);
    }
    // Upstream's deprecation filter warns on every request to a deprecated resource; kubectl
    // prints it as `Warning: …`.
    for v in deprecated
        .into_iter()
        .chain(warnings.iter().map(String::as_str))
        .filter_map(warning_header)
    {
        resp.headers_mut().append(axum::http::header::WARNING, v);
    }
    resp
}

tokio::task_local! {
    /// The warnings a request's handling collects for its response: the unknown fields a
    /// write's decoding dropped, when its field validation is `Warn`.
    static FIELD_WARNINGS: std::cell::RefCell<Vec<String>>;
}

/// Whether a request's dropped unknown fields come back as warnings: `fieldValidation=Warn`,
/// which is upstream's default when the parameter is absent (`Ignore` drops them silently,
/// `Strict` refuses the write).
fn warns_of_unknown_fields(uri: &axum::http::Uri) -> bool {
    let query = parse_query(uri).unwrap_or_default();
    !matches!(
        query.get("fieldValidation").map(String::as_str),
        Some("Ignore" | "Strict")
    )
}

/// Records `unknown field "<path>"` for each of `fields` as a warning of the request being
/// handled, once each, as upstream's decoder reports a dropped field; nothing outside a request
/// that warns.
pub(crate) fn warn_unknown_fields(fields: &[String]) {
    if fields.is_empty() {
        return;
    }
    let _ = FIELD_WARNINGS.try_with(|w| {
        let mut w = w.borrow_mut();
        for f in fields {
            let text = format!("unknown field \"{f}\"");
            if !w.contains(&text) {
                w.push(text);
            }
        }
    });
}

/// The `Warning` header upstream writes for `text` (apimachinery's `NewWarningHeader` with code
/// 299 and no agent): `299 - "<text>"` with only quotes and backslashes escaped. `None` for a
/// text with a control character, which upstream refuses to send.
fn warning_header(text: &str) -> Option<axum::http::HeaderValue> {
    if text.chars().any(char::is_control) {
        return None;
    }
    let mut out = String::with_capacity(text.len().saturating_add(8));
    out.push_str("299 - \"");
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    axum::http::HeaderValue::from_str(&out).ok()
}

/// How long a request body may take to arrive (kube-apiserver's `--request-timeout`, 60 s).
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);

async fn dispatch_inner(inner: Arc<Inner>, req: Request) -> ApiResult<Response> {
    let (mut parts, body) = req.into_parts();
    let target = parse_path(parts.uri.path())?;
    let upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
    let query = parse_query(&parts.uri)?;
    let identity = parts.extensions.get::<Identity>().cloned();
    let limit = inner.config.max_request_bytes;
    let ctx = Ctx {
        inner,
        target,
        query,
        headers: parts.headers,
        identity,
        raw_query: parts.uri.query().map(String::from),
        upgrade: std::sync::Mutex::new(upgrade),
    };
    let read_body = || async move {
        // A client that stops sending its body mid-way holds a connection and a task: give up
        // after upstream's request timeout (60 s of runtime time), as a timed-out request.
        let read = tokio::time::timeout(BODY_READ_TIMEOUT, axum::body::to_bytes(body, limit));
        let Ok(read) = read.await else {
            return Err(ApiError::new(
                504,
                "Timeout",
                "request did not complete within requested timeout - context deadline exceeded",
            ));
        };
        read.map_err(|e| {
            // Over the limit is 413; a body that breaks off (a connection closed before
            // Content-Length bytes, a malformed chunk) is the client's error, 400.
            let mut src: Option<&(dyn std::error::Error + 'static)> = Some(&e);
            while let Some(err) = src {
                if err.is::<http_body_util::LengthLimitError>() {
                    return ApiError::too_large();
                }
                src = err.source();
            }
            ApiError::bad_request(format!("error reading request body: {e}"))
        })
    };
    let t = &ctx.target;
    let sub = t.sub.as_deref();
    if registry::is_metrics(t.ri) {
        return crate::metrics_api::handle(&ctx, &parts.method).await;
    }
    if registry::is_review(t.ri) {
        return match (&parts.method, t.name.is_some()) {
            (&Method::POST, false) => crate::review::create(&ctx, read_body().await?).await,
            (m, _) => Err(ApiError::method_not_allowed(m.as_str(), t.ri)),
        };
    }
    match (&parts.method, t.name.is_some(), sub) {
        (&Method::GET, false, _) => {
            if ctx.q_bool("watch") {
                crate::watch::watch(ctx).await
            } else {
                crate::crud::list(&ctx).await
            }
        }
        (&Method::POST, false, _) => crate::crud::create(&ctx, read_body().await?).await,
        (&Method::DELETE, false, _) => {
            crate::crud::delete_collection(&ctx, read_body().await?).await
        }
        (&Method::GET, true, None | Some("status")) => crate::crud::get(&ctx).await,
        (&Method::PUT, true, None | Some("status")) => {
            crate::crud::update(&ctx, read_body().await?).await
        }
        (&Method::PATCH, true, None | Some("status")) => {
            crate::crud::patch(&ctx, read_body().await?).await
        }
        (&Method::DELETE, true, None) => crate::crud::delete(&ctx, read_body().await?).await,
        (m, true, Some(s)) if ctx.target.ri.has_subresource(s) => {
            crate::subresources::handle(&ctx, m.clone(), s, read_body().await?).await
        }
        (_, true, Some(_)) => Err(ApiError::no_such_path()),
        (m, _, _) => Err(ApiError::method_not_allowed(m.as_str(), ctx.target.ri)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Warning headers are written as apimachinery's `NewWarningHeader` writes them: quotes and
    /// backslashes escaped, other characters as they are, and no header for a control character.
    #[test]
    fn warning_headers_quote_as_upstream() {
        let h = |t: &str| warning_header(t).map(|v| v.to_str().unwrap().to_string());
        assert_eq!(
            h(r#"unknown field "spec.x""#).as_deref(),
            Some(r#"299 - "unknown field \"spec.x\"""#)
        );
        assert_eq!(h(r"a\b").as_deref(), Some(r#"299 - "a\\b""#));
        assert_eq!(
            h("v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice")
                .as_deref(),
            Some(
                "299 - \"v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice\""
            )
        );
        assert_eq!(h("unknown field \"a\nb\""), None);
        assert_eq!(h("\u{85}"), None);
    }

    type Parsed = (String, Option<String>, Option<String>, Option<String>);

    fn t(path: &str) -> ApiResult<Parsed> {
        parse_path(path).map(|t| (t.ri.plural.to_string(), t.namespace, t.name, t.sub))
    }

    fn s(x: &str) -> Option<String> {
        Some(x.to_string())
    }

    #[test]
    fn parses_resource_paths() {
        assert_eq!(
            t("/api/v1/pods").unwrap(),
            ("pods".into(), None, None, None)
        );
        assert_eq!(
            t("/api/v1/namespaces/default/pods").unwrap(),
            ("pods".into(), s("default"), None, None)
        );
        assert_eq!(
            t("/api/v1/namespaces/default/pods/web").unwrap(),
            ("pods".into(), s("default"), s("web"), None)
        );
        assert_eq!(
            t("/api/v1/namespaces/default/pods/web/status").unwrap(),
            ("pods".into(), s("default"), s("web"), s("status"))
        );
        assert_eq!(
            t("/api/v1/namespaces").unwrap(),
            ("namespaces".into(), None, None, None)
        );
        assert_eq!(
            t("/api/v1/namespaces/kube-system").unwrap(),
            ("namespaces".into(), None, s("kube-system"), None)
        );
        assert_eq!(
            t("/api/v1/namespaces/x/finalize").unwrap(),
            ("namespaces".into(), None, s("x"), s("finalize"))
        );
        assert_eq!(
            t("/api/v1/nodes/n1/status").unwrap(),
            ("nodes".into(), None, s("n1"), s("status"))
        );
        assert_eq!(
            t("/apis/apps/v1/namespaces/default/deployments/web/scale").unwrap(),
            ("deployments".into(), s("default"), s("web"), s("scale"))
        );
        assert_eq!(
            t("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases").unwrap(),
            ("leases".into(), s("kube-node-lease"), None, None)
        );
        let proxy = parse_path("/api/v1/nodes/n1/proxy/containerLogs/ns/p/c").unwrap();
        assert_eq!(proxy.sub.as_deref(), Some("proxy"));
        assert_eq!(proxy.proxy_path.as_deref(), Some("/containerLogs/ns/p/c"));
        for bad in [
            "/api/v1/widgets",
            "/api/v1/pods/web",
            "/apis/apps/v1/nodes",
            "/api/v1/namespaces/a/nodes/n1",
            "/foo",
            "/api/v1/namespaces/a/pods/b/c/d",
            "/api/v1/nodes//status",
        ] {
            assert_eq!(t(bad).unwrap_err().code, 404, "{bad}");
        }
    }
}
