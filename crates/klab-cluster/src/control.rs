//! Control-plane faults: stopping, starting and restarting the API server, the controller
//! manager, one of its controllers or the scheduler, and API brownouts of one component's
//! requests.
//!
//! The supervised components are stopped through `klab_api::supervise` (their run is dropped with
//! its in-memory state, as a process that exits loses its own). The API server is not a task: it
//! is every component's path to the store, so stopping it happens on that path. Every in-process
//! client goes through a [`GateService`] naming its component; while the API server is down each
//! request fails like a refused connection and every open response (a watch) ends, so clients
//! retry and relist exactly as against a restarted kube-apiserver; the store keeps everything.
//! A brownout answers a share of one component's requests with an upstream error Status (500,
//! 503, or 429 with `Retry-After`) and/or delays them, drawn from a side stream of the cluster's
//! RNG so a sim run stays a function of its seed.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use http::{Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, BodyStream, Full, StreamBody};
use tokio::sync::watch;
use tower::{Service, ServiceExt};

use klab_api::supervise::ComponentOp;
use klab_api::{Clock, DetRng};
use klab_kubelet::fault::{BoxError, ConnectionRefused};

/// The API server's name as a component.
pub const APISERVER: &str = "kube-apiserver";
/// The controller manager: every controller and its shared informers.
pub const CONTROLLER_MANAGER: &str = klab_controllers::manager::COMPONENT;
/// The scheduler.
pub const SCHEDULER: &str = "kube-scheduler";

/// kube-controller-manager's controllers klab runs, by their `--controllers` name, with the alias
/// upstream still accepts for each (`nodelifecycle`, `replicaset`, …).
pub const CONTROLLERS: &[(&str, Option<&str>)] = &[
    (
        "clusterrole-aggregation-controller",
        Some("clusterrole-aggregation"),
    ),
    ("cronjob-controller", Some("cronjob")),
    ("daemonset-controller", Some("daemonset")),
    ("deployment-controller", Some("deployment")),
    ("disruption-controller", Some("disruption")),
    ("endpoints-controller", Some("endpoint")),
    ("endpointslice-controller", Some("endpointslice")),
    ("garbage-collector-controller", Some("garbagecollector")),
    ("job-controller", Some("job")),
    ("namespace-controller", Some("namespace")),
    ("node-lifecycle-controller", Some("nodelifecycle")),
    (
        "persistentvolume-attach-detach-controller",
        Some("attachdetach"),
    ),
    (
        "persistentvolume-binder-controller",
        Some("persistentvolume-binder"),
    ),
    (
        "persistentvolume-protection-controller",
        Some("pv-protection"),
    ),
    ("pod-garbage-collector-controller", Some("podgc")),
    ("replicaset-controller", Some("replicaset")),
    ("serviceaccount-controller", Some("serviceaccount")),
    ("statefulset-controller", Some("statefulset")),
    ("taint-eviction-controller", None),
];

/// Supervised under the controller manager's prefix but not one of its controllers: the
/// simulated CSI driver's sidecars are pods of their own upstream, so stopping the controller
/// manager leaves them running.
const NOT_CONTROLLER_MANAGER: &[&str] = &["kube-controller-manager/csi-klab-dev"];

/// What a component name given to `component-stop` / `klab component stop` means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentTarget {
    /// The API server (its gate on every client's path).
    ApiServer,
    /// The whole controller manager: every supervised `kube-controller-manager/…` component.
    ControllerManager,
    /// One supervised component by its full name (`kube-scheduler`,
    /// `kube-controller-manager/node-lifecycle-controller`).
    Named(String),
}

impl ComponentTarget {
    /// How the trace and the admin endpoint name it.
    pub fn display(&self) -> &str {
        match self {
            ComponentTarget::ApiServer => APISERVER,
            ComponentTarget::ControllerManager => CONTROLLER_MANAGER,
            ComponentTarget::Named(n) => n,
        }
    }
}

/// Resolves a component name: `kube-apiserver`, `kube-controller-manager`, `kube-scheduler`
/// (each also without `kube-`), `metrics-server`, or one controller by its `--controllers` name
/// or alias, with or without the `kube-controller-manager/` prefix. Pure, so a scenario is
/// checked before it runs.
pub fn resolve_component(name: &str) -> Result<ComponentTarget, String> {
    let name = name.trim();
    match name {
        APISERVER | "apiserver" => return Ok(ComponentTarget::ApiServer),
        CONTROLLER_MANAGER | "controller-manager" => {
            return Ok(ComponentTarget::ControllerManager);
        }
        SCHEDULER | "scheduler" => return Ok(ComponentTarget::Named(SCHEDULER.into())),
        "metrics-server" => return Ok(ComponentTarget::Named("metrics-server".into())),
        _ => {}
    }
    let short = name
        .strip_prefix("kube-controller-manager/")
        .unwrap_or(name);
    CONTROLLERS
        .iter()
        .find(|(full, alias)| *full == short || *alias == Some(short))
        .map(|(full, _)| ComponentTarget::Named(format!("{CONTROLLER_MANAGER}/{full}")))
        .ok_or_else(|| {
            let names: Vec<&str> = CONTROLLERS.iter().map(|(n, _)| *n).collect();
            format!(
                "unknown component {name:?}: one of {APISERVER}, {CONTROLLER_MANAGER}, {SCHEDULER}, metrics-server, or a controller ({})",
                names.join(", ")
            )
        })
}

/// Whether a supervised component belongs to the controller manager as a whole.
pub fn in_controller_manager(supervised: &str) -> bool {
    supervised.starts_with("kube-controller-manager/")
        && !NOT_CONTROLLER_MANAGER.contains(&supervised)
}

/// The error answer of a brownout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BrownoutError {
    /// 500 InternalError, as when etcd times out under the API server.
    Internal,
    /// 503 ServiceUnavailable.
    Unavailable,
    /// 429 TooManyRequests with `Retry-After: 1` (API Priority and Fairness / max-in-flight).
    TooManyRequests,
}

impl BrownoutError {
    pub fn parse(code: u16) -> Option<Self> {
        match code {
            500 => Some(BrownoutError::Internal),
            503 => Some(BrownoutError::Unavailable),
            429 => Some(BrownoutError::TooManyRequests),
            _ => None,
        }
    }

    pub fn code(self) -> u16 {
        match self {
            BrownoutError::Internal => 500,
            BrownoutError::Unavailable => 503,
            BrownoutError::TooManyRequests => 429,
        }
    }

    /// Upstream's Status body and the extra header for this answer.
    fn answer(self) -> (serde_json::Value, Option<(&'static str, &'static str)>) {
        let status = |code: u16, reason: &str, message: &str| {
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": message, "reason": reason, "code": code})
        };
        match self {
            BrownoutError::Internal => {
                let mut s = status(
                    500,
                    "InternalError",
                    "Internal error occurred: etcdserver: request timed out",
                );
                s["details"] =
                    serde_json::json!({"causes": [{"message": "etcdserver: request timed out"}]});
                (s, None)
            }
            BrownoutError::Unavailable => (
                status(
                    503,
                    "ServiceUnavailable",
                    "the server is currently unable to handle the request",
                ),
                None,
            ),
            BrownoutError::TooManyRequests => {
                let mut s = status(
                    429,
                    "TooManyRequests",
                    "Too many requests, please try again later.",
                );
                s["details"] = serde_json::json!({"retryAfterSeconds": 1});
                (s, Some(("retry-after", "1")))
            }
        }
    }
}

/// One component's brownout: every request waits `latency`, then fails with `error` with
/// probability `error_rate`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Brownout {
    pub latency: Duration,
    pub error_rate: f64,
    pub error: BrownoutError,
}

impl Brownout {
    /// Checks a brownout as the user gave it.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(format!(
                "error-rate must be between 0 and 1, got {}",
                self.error_rate
            ));
        }
        if self.latency > MAX_LATENCY {
            return Err(format!(
                "latency must be at most {}s, got {}s",
                MAX_LATENCY.as_secs(),
                self.latency.as_secs()
            ));
        }
        Ok(())
    }

    /// Whether a request fails, given a uniform draw in `[0, 1)`.
    pub fn fails(&self, draw: f64) -> bool {
        draw < self.error_rate
    }
}

/// A delay past which a request is as good as lost; it bounds the timers a brownout sets.
const MAX_LATENCY: Duration = Duration::from_secs(3600);

/// Which brownout applies to a client: its own name (`kubelet/n1`, `kube-scheduler`), else the
/// group it belongs to (`kube-controller-manager` for every controller).
pub fn brownout_for<'a>(
    brownouts: &'a BTreeMap<String, Brownout>,
    who: &str,
) -> Option<&'a Brownout> {
    brownouts.get(who).or_else(|| {
        who.split_once('/')
            .and_then(|(group, _)| brownouts.get(group))
    })
}

/// The API path's state, shared by every component's gate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlaneState {
    /// The API server is stopped.
    pub api_down: bool,
    /// Bumped when the API server stops: every response open before ends.
    pub epoch: u64,
    /// Brownouts by component (`kubelet/n1`, `kube-scheduler`, `kube-controller-manager`).
    pub brownouts: BTreeMap<String, Brownout>,
}

/// The pure transition of the API server's stop / start / restart; a restart is a stop and a
/// start in one instant (every open watch ends, nothing else is lost).
pub fn next_plane(s: &PlaneState, op: ComponentOp) -> Result<PlaneState, String> {
    let mut n = s.clone();
    match (op, s.api_down) {
        (ComponentOp::Stop, true) => {
            return Err(format!("component {APISERVER} is already stopped"));
        }
        (ComponentOp::Start, false) => {
            return Err(format!(
                "component {APISERVER} is not stopped (use restart)"
            ));
        }
        (ComponentOp::Stop, false) => {
            n.api_down = true;
            n.epoch = n.epoch.saturating_add(1);
        }
        (ComponentOp::Start, true) => n.api_down = false,
        (ComponentOp::Restart, down) => {
            n.api_down = false;
            if !down {
                n.epoch = n.epoch.saturating_add(1);
            }
        }
    }
    Ok(n)
}

/// The handle on the API path: stops and starts the API server, sets brownouts. Cheap to clone.
#[derive(Clone)]
pub struct ControlPlane {
    tx: Arc<watch::Sender<PlaneState>>,
    clock: Clock,
    rng: DetRng,
}

/// The RNG stream brownout draws come from (ASCII "brwn"): a brownout never moves other draws.
const BROWNOUT_STREAM: u64 = 0x62_72_77_6e;

impl ControlPlane {
    pub fn new(clock: Clock, rng: &DetRng) -> Self {
        ControlPlane {
            tx: Arc::new(watch::channel(PlaneState::default()).0),
            clock,
            rng: rng.side_stream(BROWNOUT_STREAM),
        }
    }

    pub fn state(&self) -> PlaneState {
        self.tx.borrow().clone()
    }

    /// The API path's state as it changes (what `klab up`'s listener follows).
    pub fn subscribe(&self) -> watch::Receiver<PlaneState> {
        self.tx.subscribe()
    }

    /// Stops, starts or restarts the API server.
    pub fn api_server(&self, op: ComponentOp) -> Result<(), String> {
        let next = next_plane(&self.tx.borrow(), op)?;
        self.tx.send_replace(next);
        Ok(())
    }

    /// Starts (or replaces) a brownout of `who`'s requests; `None` ends it.
    pub fn set_brownout(&self, who: &str, b: Option<Brownout>) -> Result<(), String> {
        if let Some(b) = &b {
            b.validate()?;
        }
        self.tx.send_modify(|s| match b {
            Some(b) => {
                s.brownouts.insert(who.to_string(), b);
            }
            None => {
                s.brownouts.remove(who);
            }
        });
        Ok(())
    }

    /// Wraps a component's service: its requests go through this gate as `who`.
    pub fn gate<S>(&self, inner: S, who: impl Into<String>) -> GateService<S> {
        GateService {
            inner,
            plane: self.clone(),
            who: Arc::from(who.into()),
        }
    }
}

/// A component's path to the API server (see the module docs).
#[derive(Clone)]
pub struct GateService<S> {
    inner: S,
    plane: ControlPlane,
    who: Arc<str>,
}

/// Response body of [`GateService`].
pub type GateBody = UnsyncBoxBody<Bytes, BoxError>;

impl<S, ReqB, ResB> Service<Request<ReqB>> for GateService<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    ReqB: Send + 'static,
    ResB: hyper::body::Body<Data = Bytes> + Send + 'static,
    ResB::Error: Into<BoxError>,
{
    type Response = Response<GateBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness is checked on the clone used in `call` (oneshot).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        let inner = self.inner.clone();
        let plane = self.plane.clone();
        let who = self.who.clone();
        Box::pin(async move {
            let brownout = brownout_for(&plane.tx.borrow().brownouts, &who).copied();
            if let Some(b) = brownout {
                if !b.latency.is_zero() {
                    plane.clock.sleep(b.latency).await;
                }
                if b.error_rate > 0.0 && b.fails(plane.rng.unit()) {
                    let (body, header) = b.error.answer();
                    let mut resp = Response::builder()
                        .status(b.error.code())
                        .header("content-type", "application/json");
                    if let Some((k, v)) = header {
                        resp = resp.header(k, v);
                    }
                    let body: GateBody = Full::new(Bytes::from(body.to_string()))
                        .map_err(|e| match e {})
                        .boxed_unsync();
                    return resp.body(body).map_err(|e| Box::new(e) as BoxError);
                }
            }
            let mut rx = plane.tx.subscribe();
            let (down, epoch) = {
                let s = rx.borrow_and_update();
                (s.api_down, s.epoch)
            };
            if down {
                return Err(Box::new(ConnectionRefused) as BoxError);
            }
            let resp = inner.oneshot(req).await.map_err(Into::into)?;
            let (parts, body) = resp.into_parts();
            // The API server stopping ends this response (a watch) where it is.
            let cut = async move {
                let _ = rx.wait_for(|s| s.epoch != epoch).await;
            };
            let frames =
                TryStreamExt::map_err(BodyStream::new(body), Into::into).take_until(Box::pin(cut));
            let body: GateBody = StreamBody::new(frames).boxed_unsync();
            Ok(Response::from_parts(parts, body))
        })
    }
}

/// A clock offset: a Go duration, negative for a clock behind; at most a year either way.
pub fn parse_offset(s: &str) -> Result<jiff::SignedDuration, String> {
    let t = s.trim();
    let (negative, d) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let d = klab_api::parse_duration(d)?;
    let d = jiff::SignedDuration::try_from(d).map_err(|e| format!("invalid offset {s:?}: {e}"))?;
    if d > klab_api::clock::MAX_SKEW {
        return Err(format!(
            "invalid offset {s:?}: a clock skew is at most {}h either way",
            klab_api::clock::MAX_SKEW.as_hours()
        ));
    }
    Ok(if negative {
        d.checked_neg().unwrap_or(jiff::SignedDuration::MIN)
    } else {
        d
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_names_resolve_with_upstream_aliases() {
        let named = |s: &str| Ok(ComponentTarget::Named(s.to_string()));
        let cases: &[(&str, Result<ComponentTarget, String>)] = &[
            ("kube-apiserver", Ok(ComponentTarget::ApiServer)),
            ("apiserver", Ok(ComponentTarget::ApiServer)),
            (
                "kube-controller-manager",
                Ok(ComponentTarget::ControllerManager),
            ),
            ("controller-manager", Ok(ComponentTarget::ControllerManager)),
            ("scheduler", named("kube-scheduler")),
            ("kube-scheduler", named("kube-scheduler")),
            ("metrics-server", named("metrics-server")),
            (
                "nodelifecycle",
                named("kube-controller-manager/node-lifecycle-controller"),
            ),
            (
                "node-lifecycle-controller",
                named("kube-controller-manager/node-lifecycle-controller"),
            ),
            (
                "kube-controller-manager/replicaset-controller",
                named("kube-controller-manager/replicaset-controller"),
            ),
            (
                "replicaset",
                named("kube-controller-manager/replicaset-controller"),
            ),
            (
                "taint-eviction-controller",
                named("kube-controller-manager/taint-eviction-controller"),
            ),
            (
                "podgc",
                named("kube-controller-manager/pod-garbage-collector-controller"),
            ),
        ];
        for (name, want) in cases {
            assert_eq!(&resolve_component(name), want, "{name}");
        }
        let err = resolve_component("etcd").unwrap_err();
        assert!(
            err.starts_with("unknown component \"etcd\": one of kube-apiserver, kube-controller-manager, kube-scheduler, metrics-server, or a controller (clusterrole-aggregation-controller, "),
            "{err}"
        );
        // Upstream has no alias for the taint eviction controller; "" is nobody.
        assert!(resolve_component("taint-eviction").is_err());
        assert!(resolve_component("").is_err());
        assert!(in_controller_manager(
            "kube-controller-manager/shared-informers/pods"
        ));
        assert!(!in_controller_manager(
            "kube-controller-manager/csi-klab-dev"
        ));
        assert!(!in_controller_manager("kube-scheduler"));
    }

    #[test]
    fn clock_offsets_parse_signed_and_bounded() {
        let s = jiff::SignedDuration::from_secs;
        assert_eq!(parse_offset("2m"), Ok(s(120)));
        assert_eq!(parse_offset("+90s"), Ok(s(90)));
        assert_eq!(parse_offset("-1h30m"), Ok(s(-5400)));
        assert_eq!(parse_offset("0"), Ok(s(0)));
        assert!(parse_offset("--2m").is_err());
        assert!(parse_offset("2x").is_err());
        assert!(parse_offset("").is_err());
        assert_eq!(
            parse_offset("9000h"),
            Err("invalid offset \"9000h\": a clock skew is at most 8784h either way".into())
        );
    }

    #[test]
    fn api_server_transitions() {
        let up = PlaneState::default();
        let down = next_plane(&up, ComponentOp::Stop).unwrap();
        assert_eq!((down.api_down, down.epoch), (true, 1));
        assert_eq!(
            next_plane(&down, ComponentOp::Stop),
            Err("component kube-apiserver is already stopped".into())
        );
        assert_eq!(
            next_plane(&up, ComponentOp::Start),
            Err("component kube-apiserver is not stopped (use restart)".into())
        );
        let started = next_plane(&down, ComponentOp::Start).unwrap();
        assert_eq!((started.api_down, started.epoch), (false, 1));
        // A restart of a running server ends the open watches; of a stopped one it just starts.
        let r = next_plane(&started, ComponentOp::Restart).unwrap();
        assert_eq!((r.api_down, r.epoch), (false, 2));
        let r = next_plane(&down, ComponentOp::Restart).unwrap();
        assert_eq!((r.api_down, r.epoch), (false, 1));
    }

    #[test]
    fn brownouts_validate_and_pick_their_component() {
        let b = |rate: f64, secs: u64| Brownout {
            latency: Duration::from_secs(secs),
            error_rate: rate,
            error: BrownoutError::Unavailable,
        };
        assert_eq!(b(0.0, 0).validate(), Ok(()));
        assert_eq!(b(1.0, 3600).validate(), Ok(()));
        assert_eq!(
            b(1.5, 0).validate(),
            Err("error-rate must be between 0 and 1, got 1.5".into())
        );
        assert_eq!(
            b(-0.1, 0).validate(),
            Err("error-rate must be between 0 and 1, got -0.1".into())
        );
        assert!(b(f64::NAN, 0).validate().is_err());
        assert_eq!(
            b(0.5, 3601).validate(),
            Err("latency must be at most 3600s, got 3601s".into())
        );
        assert!(b(0.5, 0).fails(0.49) && !b(0.5, 0).fails(0.5));
        assert!(!b(0.0, 0).fails(0.0) && b(1.0, 0).fails(0.999));
        let mut m = BTreeMap::new();
        m.insert("kube-controller-manager".to_string(), b(1.0, 0));
        m.insert("kubelet/n1".to_string(), b(0.5, 0));
        assert_eq!(
            brownout_for(&m, "kube-controller-manager/node-controller").map(|b| b.error_rate),
            Some(1.0)
        );
        assert_eq!(
            brownout_for(&m, "kubelet/n1").map(|b| b.error_rate),
            Some(0.5)
        );
        assert_eq!(brownout_for(&m, "kubelet/n2"), None);
        assert_eq!(brownout_for(&m, "kube-scheduler"), None);
        for (code, e) in [
            (500, BrownoutError::Internal),
            (503, BrownoutError::Unavailable),
            (429, BrownoutError::TooManyRequests),
        ] {
            assert_eq!(BrownoutError::parse(code), Some(e));
            assert_eq!(e.code(), code);
        }
        assert_eq!(BrownoutError::parse(404), None);
        let (body, header) = BrownoutError::TooManyRequests.answer();
        assert_eq!(header, Some(("retry-after", "1")));
        assert_eq!(body["details"]["retryAfterSeconds"], 1);
        assert_eq!(
            body["message"],
            "Too many requests, please try again later."
        );
    }
}
