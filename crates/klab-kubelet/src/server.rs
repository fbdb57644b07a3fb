//! The kubelet's HTTP server (port 10250, node spec §8.2) and the "network" in front of it.
//!
//! The API server reaches a kubelet by dialing its node's address ([`KubeletEndpoint::dial`]).
//! What the dial meets depends on the node, as on a real network: a powered-off, frozen or
//! partitioned machine answers nothing (the caller's dial timeout decides), a machine whose
//! kubelet process is stopped refuses the connection at once (TCP RST), and a running kubelet
//! serves HTTP/1.1 on an in-memory stream. Connections are served by the kubelet process: when
//! it stops (or the machine loses power, freezes or is cut off) every open connection breaks, so
//! a `logs -f` or an exec through it ends as it would on a real node.
//!
//! Routes: `/containerLogs/{ns}/{pod}/{container}` (logs from [`crate::logs`]), `/healthz`,
//! `/pods`. Errors follow the kubelet: unknown pod or container 404, a container with no logs
//! to show 400 with the text of `validateContainerLogStatus`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Extension;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use klab_api::Clock;
use tokio::io::DuplexStream;

use crate::fault::NetFault;
use crate::logs::{Budget, LogLines, LogOptions, LogScript, render, select};
use crate::runtime::{Machine, RtState};

/// The pods a kubelet process knows, by UID (its pod manager and status manager in one: the
/// objects as last seen on its watch, with the status it wrote).
pub type PodView = Arc<Mutex<BTreeMap<String, Arc<Pod>>>>;

/// Buffer of one in-memory connection in each direction.
const CONN_BUFFER: usize = 64 * 1024;

/// How often a follower re-reads the container's state while it waits for its next line (a
/// container can be stopped at any moment; klab has no exit notification to wait on).
const FOLLOW_POLL: Duration = Duration::from_secs(1);

/// What a dial to the kubelet's port meets.
#[derive(Debug)]
pub enum Dial {
    /// The kubelet accepted: the client's end of the connection.
    Connected(DuplexStream),
    /// The host is up but nothing listens on the port (the kubelet is stopped): TCP RST.
    Refused,
    /// Nothing answers (powered off, frozen, partitioned): the dial waits for its timeout.
    NoAnswer,
}

/// The network address of one node's kubelet. Cheap to clone.
#[derive(Clone)]
pub struct KubeletEndpoint {
    pub(crate) machine: Arc<Mutex<Machine>>,
    pub(crate) net: NetFault,
    pub(crate) clock: Clock,
    /// The running kubelet process's pod view; `None` while no kubelet process runs.
    pub(crate) process: Arc<Mutex<Option<PodView>>>,
    /// Log streams and exec/attach/port-forward sessions being served, for tests that check
    /// nothing outlives its client.
    pub(crate) open_streams: Arc<AtomicUsize>,
    /// The node's name and capacities, for `/stats/summary`.
    pub(crate) node: Arc<crate::resource_metrics::NodeInfo>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl KubeletEndpoint {
    /// Opens a connection to the kubelet's port (see [`Dial`]).
    pub fn dial(&self) -> Dial {
        let powered = lock(&self.machine).powered;
        let net = self.net.state();
        if !powered || net.frozen || net.partitioned {
            return Dial::NoAnswer;
        }
        let Some(pods) = lock(&self.process).clone() else {
            return Dial::Refused;
        };
        let (client, server) = tokio::io::duplex(CONN_BUFFER);
        self.serve(pods, server);
        Dial::Connected(client)
    }

    /// A future that completes when the kubelet process's connections break (it stopped, or the
    /// machine lost power, froze or was cut off): upgraded streams end with it.
    pub(crate) fn cut(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.net.subscribe();
        let epoch = rx.borrow().epoch;
        async move {
            let _ = rx.wait_for(|s| s.epoch != epoch).await;
        }
    }

    /// Log streams and exec/attach/port-forward sessions currently open on this node.
    pub fn open_streams(&self) -> usize {
        self.open_streams.load(Ordering::SeqCst)
    }

    fn serve(&self, pods: PodView, io: DuplexStream) {
        let state = Arc::new(ServerState {
            endpoint: self.clone(),
            pods,
        });
        // One router for every kubelet (building one per connection was most of the cost of a
        // metrics scrape); the connection's kubelet goes with each request.
        let router = tower::service_fn(
            move |mut req: axum::extract::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(state.clone());
                tower::ServiceExt::oneshot(routes().clone(), req)
            },
        );
        let mut rx = self.net.subscribe();
        let epoch = rx.borrow().epoch;
        tokio::spawn(async move {
            let svc = hyper_util::service::TowerToHyperService::new(router);
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(io), svc)
                .with_upgrades();
            // The connection belongs to the kubelet process: it breaks with it.
            tokio::select! {
                biased;
                _ = rx.wait_for(|s| s.epoch != epoch) => {}
                _ = conn => {}
            }
        });
    }
}

struct ServerState {
    endpoint: KubeletEndpoint,
    pods: PodView,
}

/// The kubelet's routes; each request carries its kubelet's `Arc<ServerState>` as an extension.
fn routes() -> &'static Router {
    static ROUTES: std::sync::OnceLock<Router> = std::sync::OnceLock::new();
    ROUTES.get_or_init(router)
}

fn router() -> Router {
    Router::new()
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            get(container_logs),
        )
        .route("/exec/{namespace}/{pod}/{container}", get(exec).post(exec))
        .route(
            "/attach/{namespace}/{pod}/{container}",
            get(attach).post(attach),
        )
        .route(
            "/portForward/{namespace}/{pod}",
            get(port_forward).post(port_forward),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics/resource", get(metrics_resource))
        .route("/stats/summary", get(stats_summary))
        .route("/pods", get(pods))
}

fn text(code: StatusCode, message: String) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

async fn pods(Extension(s): Extension<Arc<ServerState>>) -> Response {
    let items: Vec<Pod> = lock(&s.pods).values().map(|p| (**p).clone()).collect();
    let list =
        serde_json::json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items});
    (
        [(header::CONTENT_TYPE, "application/json")],
        list.to_string(),
    )
        .into_response()
}

/// `/metrics/resource`: the resource metrics pipeline's families from the machine's usage model
/// (see [`crate::resource_metrics`]).
async fn metrics_resource(Extension(s): Extension<Arc<ServerState>>) -> Response {
    // Sampled at the millisecond the samples are stamped with, so that a rate computed from two
    // scrapes (metrics-server's CPU) is exact.
    let now = s.endpoint.clock.now();
    let now = jiff::Timestamp::from_millisecond(now.as_millisecond()).unwrap_or(now);
    let samples = crate::resource_metrics::samples(&mut lock(&s.endpoint.machine), now);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::resource_metrics::render(&samples),
    )
        .into_response()
}

/// `/stats/summary`: the Summary API (`stats/v1alpha1`) from the machine's usage model.
async fn stats_summary(Extension(s): Extension<Arc<ServerState>>) -> Response {
    let now = s.endpoint.clock.now();
    let body = {
        let mut m = lock(&s.endpoint.machine);
        let samples = crate::resource_metrics::samples(&mut m, now);
        crate::resource_metrics::summary(&s.endpoint.node, &m, &samples)
    };
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Which instance of a container a log request reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Instance {
    Current,
    Previous,
}

/// The kubelet's `validateContainerLogStatus`: from the pod's status, which instance has logs,
/// or the error text the kubelet answers (400) when none has.
pub fn validate_container_log_status(
    pod: &Pod,
    container: &str,
    previous: bool,
) -> Result<Instance, String> {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let status = pod.status.as_ref();
    let statuses = status
        .and_then(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .find(|c| c.name == container)
        })
        .or_else(|| {
            status.and_then(|s| {
                s.init_container_statuses
                    .iter()
                    .flatten()
                    .find(|c| c.name == container)
            })
        });
    let Some(cs) = statuses else {
        return Err(format!(
            "container {container:?} in pod {name:?} is waiting to start: ContainerCreating"
        ));
    };
    let last = cs.last_state.as_ref().and_then(|s| s.terminated.as_ref());
    let state = cs.state.as_ref();
    let has_id = |id: &Option<String>| id.as_deref().is_some_and(|i| !i.is_empty());
    if previous {
        return match last {
            Some(t) if has_id(&t.container_id) => Ok(Instance::Previous),
            _ => Err(format!(
                "previous terminated container {container:?} in pod {name:?} not found"
            )),
        };
    }
    if state.and_then(|s| s.running.as_ref()).is_some() {
        return Ok(Instance::Current);
    }
    if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
        return if has_id(&t.container_id) {
            Ok(Instance::Current)
        } else if last.is_some_and(|l| has_id(&l.container_id)) {
            Ok(Instance::Previous)
        } else {
            Err(format!(
                "container {container:?} in pod {name:?} is terminated"
            ))
        };
    }
    if let Some(l) = last {
        return if has_id(&l.container_id) {
            Ok(Instance::Previous)
        } else {
            Err(format!(
                "container {container:?} in pod {name:?} is terminated"
            ))
        };
    }
    match state.and_then(|s| s.waiting.as_ref()) {
        Some(w) => Err(match w.reason.as_deref().unwrap_or("") {
            "ErrImagePull" => {
                format!(
                    "container {container:?} in pod {name:?} is waiting to start: image can't be pulled"
                )
            }
            "ImagePullBackOff" => format!(
                "container {container:?} in pod {name:?} is waiting to start: trying and failing to pull image"
            ),
            reason => {
                format!("container {container:?} in pod {name:?} is waiting to start: {reason}")
            }
        }),
        None => Err(format!(
            "container {container:?} in pod {name:?} is waiting to start - no logs yet"
        )),
    }
}

/// Parses the kubelet's log query (`PodLogOptions` as query parameters).
fn log_options(query: &[(String, String)], now: Timestamp) -> Result<LogOptions, String> {
    let mut o = LogOptions::default();
    let flag = |v: &str| matches!(v, "true" | "1");
    let int = |k: &str, v: &str| {
        v.parse::<i64>()
            .map_err(|_| format!("Unable to decode query: {k}={v}"))
    };
    for (k, v) in query {
        match k.as_str() {
            "follow" => o.follow = flag(v),
            "previous" => o.previous = flag(v),
            "timestamps" => o.timestamps = flag(v),
            "tailLines" => o.tail_lines = Some(int(k, v)?.max(0) as u64),
            "limitBytes" => o.limit_bytes = Some(int(k, v)?.max(0) as u64),
            "sinceSeconds" => {
                let secs = int(k, v)?;
                o.since = Some(klab_api::clock::saturating_add_secs(
                    now,
                    secs.saturating_neg(),
                ));
            }
            "sinceTime" => {
                o.since = Some(
                    v.parse::<Timestamp>()
                        .map_err(|_| format!("Unable to decode query: {k}={v}"))?,
                )
            }
            _ => {}
        }
    }
    Ok(o)
}

async fn container_logs(
    Extension(s): Extension<Arc<ServerState>>,
    Path((namespace, pod_name, container)): Path<(String, String, String)>,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let clock = s.endpoint.clock.clone();
    let now = clock.now();
    let opts = match log_options(&query, now) {
        Ok(o) => o,
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    let pod = lock(&s.pods)
        .values()
        .find(|p| {
            p.metadata.namespace.as_deref() == Some(&namespace)
                && p.metadata.name.as_deref() == Some(&pod_name)
        })
        .cloned();
    let Some(pod) = pod else {
        return text(
            StatusCode::NOT_FOUND,
            format!("pod {pod_name:?} does not exist\n"),
        );
    };
    let spec = pod.spec.clone().unwrap_or_default();
    let Some(c) = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == container)
    else {
        return text(
            StatusCode::NOT_FOUND,
            format!("container {container:?} not found in pod {pod_name:?}\n"),
        );
    };
    let instance = match validate_container_log_status(&pod, &container, opts.previous) {
        Ok(i) => i,
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    let script = LogScript::from_container(
        c.command.as_deref().unwrap_or_default(),
        c.args.as_deref().unwrap_or_default(),
        c.image.as_deref().unwrap_or_default(),
    );
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    // The instance's span in the runtime: (start, end if it ended, container id).
    let span = {
        let mut m = lock(&s.endpoint.machine);
        m.advance(now);
        m.pod_or_removed(&uid)
            .and_then(|p| p.containers.get(&container))
            .and_then(|rc| match (instance, &rc.state) {
                // While an instance runs, the API's lastState is the one before it; once it
                // has exited (waiting in back-off) it is that instance itself.
                (Instance::Previous, RtState::Running { .. }) => rc
                    .previous
                    .as_ref()
                    .map(|t| (t.started_at, Some(t.finished_at), t.container_id.clone())),
                (Instance::Current, RtState::Running { started_at, .. }) => {
                    Some((*started_at, None, rc.container_id.clone()))
                }
                (_, RtState::Exited(t)) => {
                    Some((t.started_at, Some(t.finished_at), t.container_id.clone()))
                }
            })
    };
    let Some((started, ended, container_id)) = span else {
        // Known to the pod manager but not (or no longer) to the runtime: nothing written.
        return text(StatusCode::OK, String::new());
    };
    let mut lines = script.lines(started);
    let until = ended.map_or(now, |e| e.min(now));
    let first = select(&mut lines, until, &opts);
    let mut budget = Budget::new(opts.limit_bytes);
    let mut head = String::new();
    for (at, l) in &first {
        head.push_str(&render(*at, l, opts.timestamps));
    }
    let head = budget.take(head);
    if !opts.follow || ended.is_some() || budget.spent() {
        return Response::builder()
            .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(Body::from(head))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }
    let follower = Follower {
        endpoint: s.endpoint.clone(),
        uid,
        container,
        container_id,
        lines,
        timestamps: opts.timestamps,
        budget,
        _guard: StreamGuard::new(&s.endpoint.open_streams),
    };
    let stream = futures::stream::once(async move { Ok::<_, std::io::Error>(head) }).chain(
        futures::stream::unfold(follower, |mut f| async move {
            f.next_chunk().await.map(|c| (Ok(c), f))
        }),
    );
    Response::builder()
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

use futures::StreamExt;

fn find_pod(s: &ServerState, namespace: &str, name: &str) -> Option<Arc<Pod>> {
    lock(&s.pods)
        .values()
        .find(|p| {
            p.metadata.namespace.as_deref() == Some(namespace)
                && p.metadata.name.as_deref() == Some(name)
        })
        .cloned()
}

fn header_has(req: &axum::extract::Request, name: &str, value: &str) -> bool {
    req.headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|p| p.trim().eq_ignore_ascii_case(value)))
}

/// `/attach/{ns}/{pod}/{container}`: the container's output from now on, as an exec session
/// with no command.
async fn attach(
    s: Extension<Arc<ServerState>>,
    path: Path<(String, String, String)>,
    Query(mut query): Query<Vec<(String, String)>>,
    req: axum::extract::Request,
) -> Response {
    query.retain(|(k, _)| k != "command");
    exec(s, path, Query(query), req).await
}

/// `/portForward/{ns}/{pod}`: SPDY `portforward.k8s.io` streams to the pod's ports.
async fn port_forward(
    Extension(s): Extension<Arc<ServerState>>,
    Path((namespace, pod_name)): Path<(String, String)>,
    req: axum::extract::Request,
) -> Response {
    let Some(pod) = find_pod(&s, &namespace, &pod_name) else {
        return text(StatusCode::NOT_FOUND, "pod does not exist".into());
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let container = pod
        .spec
        .as_ref()
        .and_then(|sp| sp.containers.first())
        .map(|c| c.name.clone())
        .unwrap_or_default();
    let target = crate::exec::ExecTarget {
        endpoint: s.endpoint.clone(),
        uid,
        pod,
        container,
    };
    // The pod's network namespace exists while its sandbox runs.
    if !target.running() {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            // Upstream names the pod by its runtime full name, `<name>_<namespace>`.
            format!("pod not found ({:?})", format!("{pod_name}_{namespace}")),
        );
    }
    let cut = s.endpoint.cut();
    if header_has(&req, "upgrade", "websocket") {
        // kubectl ≥ 1.31 tunnels the SPDY session through a WebSocket (binary messages carry
        // the SPDY byte stream); a refused upgrade makes it fall back to plain SPDY.
        use axum::extract::FromRequest;
        let ws = match axum::extract::ws::WebSocketUpgrade::from_request(req, &()).await {
            Ok(ws) => ws.protocols([crate::spdy::TUNNEL_PROTOCOL]),
            Err(rejection) => return rejection.into_response(),
        };
        if ws.selected_protocol().is_none() {
            return text(
                StatusCode::BAD_REQUEST,
                format!(
                    "unable to upgrade: expected protocol {}",
                    crate::spdy::TUNNEL_PROTOCOL
                ),
            );
        }
        return ws.on_upgrade(move |socket| async move {
            let io = crate::spdy::tunnel(socket);
            tokio::select! {
                biased;
                _ = cut => {}
                _ = crate::portforward::session(crate::spdy::session(io), target) => {}
            }
        });
    }
    crate::spdy::upgrade(req, "portforward.k8s.io", cut, move |session| {
        crate::portforward::session(session, target)
    })
}

/// `/exec/{ns}/{pod}/{container}`: a command in the simulated shell, over a WebSocket
/// (`v5.channel.k8s.io`, `v4.channel.k8s.io`) or SPDY/3.1 upgrade.
async fn exec(
    Extension(s): Extension<Arc<ServerState>>,
    Path((namespace, pod_name, container)): Path<(String, String, String)>,
    Query(query): Query<Vec<(String, String)>>,
    req: axum::extract::Request,
) -> Response {
    use axum::extract::FromRequest;
    let opts = crate::exec::ExecOptions::from_query(&query);
    let Some(pod) = find_pod(&s, &namespace, &pod_name) else {
        return text(StatusCode::NOT_FOUND, "pod does not exist".into());
    };
    let target = crate::exec::ExecTarget {
        endpoint: s.endpoint.clone(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        pod,
        container: container.clone(),
    };
    // The runtime only finds running containers (`GetPods(all=false)`).
    if !target.running() {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("container not found ({container:?})"),
        );
    }
    let cut = s.endpoint.cut();
    if header_has(&req, "upgrade", "websocket") {
        let ws = match axum::extract::ws::WebSocketUpgrade::from_request(req, &()).await {
            Ok(ws) => ws.protocols(["v5.channel.k8s.io", "v4.channel.k8s.io"]),
            Err(rejection) => return rejection.into_response(),
        };
        let v5 = ws
            .selected_protocol()
            .is_some_and(|p| p == "v5.channel.k8s.io");
        return ws.on_upgrade(move |socket| {
            crate::exec::websocket_session(socket, v5, target, opts, cut)
        });
    }
    if header_has(&req, "upgrade", "SPDY/3.1") {
        return crate::spdy::exec_upgrade(req, target, opts, cut);
    }
    text(StatusCode::BAD_REQUEST, "Upgrade request required".into())
}

/// Counts a stream as open for as long as it lives.
pub(crate) struct StreamGuard(Arc<AtomicUsize>);

impl StreamGuard {
    pub(crate) fn new(n: &Arc<AtomicUsize>) -> Self {
        n.fetch_add(1, Ordering::SeqCst);
        StreamGuard(n.clone())
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A `follow=true` reader: waits in virtual time for the instance's next line, and ends when
/// the instance ends.
struct Follower {
    endpoint: KubeletEndpoint,
    uid: String,
    container: String,
    container_id: String,
    lines: LogLines,
    timestamps: bool,
    budget: Budget,
    _guard: StreamGuard,
}

impl Follower {
    /// When the followed instance ended (`None` while it runs).
    fn ended(&self, now: Timestamp) -> Option<Timestamp> {
        let mut m = lock(&self.endpoint.machine);
        m.advance(now);
        let rc = m
            .pods
            .get(&self.uid)
            .and_then(|p| p.containers.get(&self.container));
        match rc {
            Some(rc) if rc.container_id == self.container_id => match &rc.state {
                RtState::Running { .. } => None,
                RtState::Exited(t) => Some(t.finished_at),
            },
            Some(rc) => rc
                .previous
                .as_ref()
                .filter(|p| p.container_id == self.container_id)
                .map_or(Some(now), |p| Some(p.finished_at)),
            None => Some(now),
        }
    }

    async fn next_chunk(&mut self) -> Option<bytes::Bytes> {
        if self.budget.spent() {
            return None;
        }
        let next = self.lines.next();
        loop {
            let clock = self.endpoint.clock.clone();
            let now = clock.now();
            let ended = self.ended(now);
            match (&next, ended) {
                (Some((at, _)), Some(end)) if *at > end => return None,
                (None, Some(_)) => return None,
                (Some((at, line)), _) if *at <= now => {
                    let chunk = self.budget.take(render(*at, line, self.timestamps));
                    return Some(chunk);
                }
                (Some((at, _)), None) => {
                    let wake = (*at).min(klab_api::clock::saturating_add(now, FOLLOW_POLL));
                    clock.sleep_until(wake).await;
                }
                _ => clock.sleep(FOLLOW_POLL).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
        ContainerStatus, PodStatus,
    };

    fn pod(status: ContainerStatus) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("web".into());
        p.status = Some(PodStatus {
            container_statuses: Some(vec![status]),
            ..Default::default()
        });
        p
    }

    fn cs(state: ContainerState, last: Option<ContainerState>) -> ContainerStatus {
        ContainerStatus {
            name: "c".into(),
            state: Some(state),
            last_state: last,
            ..Default::default()
        }
    }

    fn waiting(reason: &str) -> ContainerState {
        ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn terminated(id: &str) -> ContainerState {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                container_id: Some(id.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn log_status_errors_are_the_kubelets() {
        let running = ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..Default::default()
        };
        let check = |p: &Pod, prev: bool| validate_container_log_status(p, "c", prev);
        assert_eq!(
            check(&pod(cs(running.clone(), None)), false),
            Ok(Instance::Current)
        );
        assert_eq!(
            check(&pod(cs(running.clone(), None)), true),
            Err("previous terminated container \"c\" in pod \"web\" not found".into())
        );
        assert_eq!(
            check(&pod(cs(running, Some(terminated("containerd://1")))), true),
            Ok(Instance::Previous)
        );
        assert_eq!(
            check(&pod(cs(waiting("ContainerCreating"), None)), false),
            Err("container \"c\" in pod \"web\" is waiting to start: ContainerCreating".into())
        );
        assert_eq!(
            check(
                &pod(cs(waiting("CrashLoopBackOff"), Some(terminated("x://1")))),
                false
            ),
            Ok(Instance::Previous)
        );
        assert_eq!(
            check(&pod(cs(terminated(""), None)), false),
            Err("container \"c\" in pod \"web\" is terminated".into())
        );
        assert_eq!(
            check(&Pod::default(), false),
            Err("container \"c\" in pod \"\" is waiting to start: ContainerCreating".into())
        );
    }

    #[test]
    fn log_query_is_parsed_like_the_kubelets() {
        let now = Timestamp::from_second(1_767_225_600).unwrap();
        let q = |s: &[(&str, &str)]| {
            log_options(
                &s.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<Vec<_>>(),
                now,
            )
        };
        let o = q(&[
            ("follow", "true"),
            ("tailLines", "3"),
            ("sinceSeconds", "10"),
        ])
        .unwrap();
        assert!(o.follow);
        assert_eq!(o.tail_lines, Some(3));
        assert_eq!(
            o.since,
            Some(Timestamp::from_second(1_767_225_590).unwrap())
        );
        assert!(q(&[("tailLines", "x")]).is_err());
        assert!(q(&[("sinceSeconds", "-99999999999999999")]).is_ok());
    }
}
