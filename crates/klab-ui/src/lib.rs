//! The live dashboard of `klab up` at `https://…/ui/`: one self-contained page (inline CSS and
//! script, nothing fetched from elsewhere) and `/ui/events`, a server-sent-events stream that
//! sends a snapshot of the cluster and then deltas.
//!
//! The stream is fed by watches, as every component is: the feed (a supervised task started on the first visit)
//! runs its own shared informers through an in-process client, rebuilds the [`view::View`] when
//! any of them delivers a change, and publishes it on a `watch` channel; each connection sends the
//! difference from what it sent last. The fault buttons POST to the existing admin endpoint
//! (`/klab/v1/nodes/{name}/{fault}`), whose answers (including its errors) the page shows.
//! Authentication ([`auth`]): the admin client certificate, or the login token `klab up` prints.

pub mod auth;
pub mod view;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use futures::Stream;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use klab_api::Clock;
use klab_api::supervise::{Health, RestartPolicy, supervise};
use klab_apiserver::Identity;
use klab_runtime::informer::{Informers, SharedInformer, Subscription};
use tokio::sync::watch;

use crate::view::View;

/// The page, with `/*CONFIG*/` replaced by the page's settings.
const PAGE: &str = include_str!("page.html");

/// How long the feed waits after a change for the changes that come with it (a Lease renewal
/// and a status update, a Deployment's pods) before rebuilding the view once for all of them.
const SETTLE: Duration = Duration::from_millis(50);

/// The component name the feed is supervised under.
pub const COMPONENT: &str = "klab-dashboard";

/// The dashboard of one cluster.
pub struct Dashboard {
    client: kube::Client,
    clock: Clock,
    health: Health,
    /// The admin endpoint's node faults, one button each.
    faults: Vec<String>,
    /// The login token (empty: only client certificates).
    token: String,
    feed: Mutex<Option<watch::Receiver<Arc<View>>>>,
    /// The runtime the dashboard was made on (the cluster's): the feed's informers run there,
    /// not on whichever runtime serves the first page's connection.
    home: Option<tokio::runtime::Handle>,
}

impl Dashboard {
    /// `client` reads the cluster (an administrator: the page shows everything); `clock` is the
    /// cluster's, so that times on the page are the objects' times.
    pub fn new(
        client: kube::Client,
        clock: Clock,
        health: Health,
        faults: Vec<String>,
        token: String,
    ) -> Arc<Self> {
        Arc::new(Dashboard {
            client,
            clock,
            health,
            faults,
            token,
            feed: Mutex::new(None),
            home: tokio::runtime::Handle::try_current().ok(),
        })
    }

    /// The views as they are rebuilt; the feed starts on the first call.
    pub fn views(&self) -> watch::Receiver<Arc<View>> {
        let mut feed = self.feed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rx) = feed.as_ref() {
            return rx.clone();
        }
        let (tx, rx) = watch::channel(Arc::new(View::default()));
        let informers = Informers::new(self.client.clone(), self.clock.clone())
            .supervised(self.health.clone(), format!("{COMPONENT}/informers"));
        let clock = self.clock.clone();
        let tx = Arc::new(tx);
        let feed_task = supervise(
            self.health.clone(),
            COMPONENT,
            self.clock.clone(),
            RestartPolicy::CrashLoop,
            move || run_feed(informers.clone(), clock.clone(), tx.clone()),
        );
        match &self.home {
            Some(home) => drop(home.spawn(feed_task)),
            None => drop(tokio::spawn(feed_task)),
        }
        *feed = Some(rx.clone());
        rx
    }
}

/// Any subscription, as "something changed".
trait Changes: Send {
    fn poll_changed(&mut self, cx: &mut Context<'_>) -> Poll<Option<()>>;
}

impl<K: Send + Sync> Changes for Subscription<K> {
    fn poll_changed(&mut self, cx: &mut Context<'_>) -> Poll<Option<()>> {
        self.poll_recv(cx).map(|n| n.map(|_| ()))
    }
}

/// Waits until any subscription delivers (taking in everything delivered so far); `false` once
/// one of them is gone.
fn any_change(subs: &mut [Box<dyn Changes>]) -> impl Future<Output = bool> + '_ {
    futures::future::poll_fn(move |cx| {
        let mut any = false;
        for s in subs.iter_mut() {
            loop {
                match s.poll_changed(cx) {
                    Poll::Ready(Some(())) => any = true,
                    Poll::Ready(None) => return Poll::Ready(false),
                    Poll::Pending => break,
                }
            }
        }
        if any {
            Poll::Ready(true)
        } else {
            Poll::Pending
        }
    })
}

struct Sources {
    nodes: SharedInformer<Node>,
    pods: SharedInformer<Pod>,
    leases: SharedInformer<Lease>,
    events: SharedInformer<Event>,
    replica_sets: SharedInformer<ReplicaSet>,
    deployments: SharedInformer<Deployment>,
    stateful_sets: SharedInformer<StatefulSet>,
    daemon_sets: SharedInformer<DaemonSet>,
    jobs: SharedInformer<Job>,
    pdbs: SharedInformer<PodDisruptionBudget>,
    pvcs: SharedInformer<PersistentVolumeClaim>,
    volume_attachments: SharedInformer<VolumeAttachment>,
}

fn owned<K: kube::Resource + Clone + Send + Sync + 'static>(i: &SharedInformer<K>) -> Vec<K> {
    i.list().iter().map(|o| (**o).clone()).collect()
}

impl Sources {
    fn new(f: &Informers) -> Self {
        Sources {
            nodes: f.get(),
            pods: f.get(),
            leases: f.get(),
            events: f.get(),
            replica_sets: f.get(),
            deployments: f.get(),
            stateful_sets: f.get(),
            daemon_sets: f.get(),
            jobs: f.get(),
            pdbs: f.get(),
            pvcs: f.get(),
            volume_attachments: f.get(),
        }
    }

    fn subscribe(&self) -> Vec<Box<dyn Changes>> {
        vec![
            Box::new(self.nodes.subscribe()),
            Box::new(self.pods.subscribe()),
            Box::new(self.leases.subscribe()),
            Box::new(self.events.subscribe()),
            Box::new(self.replica_sets.subscribe()),
            Box::new(self.deployments.subscribe()),
            Box::new(self.stateful_sets.subscribe()),
            Box::new(self.daemon_sets.subscribe()),
            Box::new(self.jobs.subscribe()),
            Box::new(self.pdbs.subscribe()),
            Box::new(self.pvcs.subscribe()),
            Box::new(self.volume_attachments.subscribe()),
        ]
    }

    /// Nodes, pods and Leases listed: enough for a first picture.
    fn synced(&self) -> bool {
        self.nodes.synced() && self.pods.synced() && self.leases.synced()
    }

    fn snapshot(&self, now: jiff::Timestamp) -> klab_why::Snapshot {
        let pods = owned(&self.pods);
        let settings = view::settings_from_pods(&pods);
        klab_why::Snapshot {
            now,
            pods,
            nodes: owned(&self.nodes),
            leases: Some(owned(&self.leases)),
            events: owned(&self.events),
            replica_sets: owned(&self.replica_sets),
            deployments: owned(&self.deployments),
            stateful_sets: owned(&self.stateful_sets),
            daemon_sets: owned(&self.daemon_sets),
            jobs: owned(&self.jobs),
            pdbs: owned(&self.pdbs),
            pvcs: owned(&self.pvcs),
            volume_attachments: owned(&self.volume_attachments),
            settings,
            unreadable: Vec::new(),
        }
    }
}

async fn run_feed(
    informers: Informers,
    clock: Clock,
    tx: Arc<watch::Sender<Arc<View>>>,
) -> Result<(), String> {
    let sources = Sources::new(&informers);
    let mut subs = sources.subscribe();
    loop {
        if !any_change(&mut subs).await {
            return Err("an informer of the dashboard stopped".into());
        }
        tokio::time::sleep(SETTLE).await;
        if !sources.synced() {
            continue;
        }
        let view = view::build(&sources.snapshot(clock.now()), clock.speed());
        tx.send_replace(Arc::new(view));
    }
}

fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "{}".into())
}

/// `/ui/events`: `snapshot` (the whole view), then `delta`s.
async fn events(
    State(d): State<Arc<Dashboard>>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    type Step = Pin<Box<dyn Future<Output = Option<(SseEvent, State_)>> + Send>>;
    type State_ = (watch::Receiver<Arc<View>>, Option<Arc<View>>);
    let rx = d.views();
    let stream = futures::stream::unfold((rx, None), |(mut rx, sent): State_| -> Step {
        Box::pin(async move {
            let Some(prev) = sent else {
                let first = rx.wait_for(|v| !v.now.is_empty()).await.ok()?.clone();
                rx.mark_unchanged();
                let ev = SseEvent::default().event("snapshot").data(json(&*first));
                return Some((ev, (rx, Some(first))));
            };
            let mut prev = prev;
            loop {
                rx.changed().await.ok()?;
                let next = rx.borrow_and_update().clone();
                let delta = view::diff(&prev, &next);
                if delta.is_empty() {
                    prev = next;
                    continue;
                }
                let ev = SseEvent::default().event("delta").data(json(&delta));
                return Some((ev, (rx, Some(next))));
            }
        })
    });
    Sse::new(futures::StreamExt::map(stream, Ok)).keep_alive(KeepAlive::default())
}

fn no_store(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn page(State(d): State<Arc<Dashboard>>) -> Response {
    let config = serde_json::json!({"faults": d.faults});
    no_store(Html(PAGE.replace("/*CONFIG*/null", &json(&config))).into_response())
}

/// The page of a refused visit (401 or 403): what is missing and how to get in.
fn refusal(code: StatusCode, message: &str) -> Response {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>klab dashboard: {code}</title></head>\
<body style=\"font-family:sans-serif;margin:3em;max-width:50em\"><h1>{code}</h1><p id=\"refused\">{}</p>\
<p>Open the URL <code>klab up</code> printed (<code>dashboard: https://…/ui/?token=…</code>; the token is \
also in <code>&lt;data-dir&gt;/dashboard-token</code>), or present the admin client certificate of the \
kubeconfig it wrote.</p></body></html>",
        html_escape(message)
    );
    no_store((code, Html(body)).into_response())
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Authenticates the dashboard's requests (the page, its events, the admin endpoint's POSTs by
/// cookie); everything else passes untouched. Layered over the dashboard and admin routers only.
pub async fn authenticate(
    State(d): State<Arc<Dashboard>>,
    mut req: Request,
    next: Next,
) -> Response {
    let cookie = req
        .headers()
        .get(header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let decision = auth::decide(
        req.uri().path(),
        req.uri().query(),
        cookie.as_deref(),
        req.extensions().get::<Identity>(),
        &d.token,
    );
    match decision {
        auth::Decision::Pass | auth::Decision::Certificate => next.run(req).await,
        auth::Decision::Cookie => {
            req.extensions_mut().insert(auth::token_identity());
            next.run(req).await
        }
        auth::Decision::Login => {
            let mut r = (StatusCode::SEE_OTHER, "").into_response();
            r.headers_mut()
                .insert(header::LOCATION, HeaderValue::from_static("/ui/"));
            if let Ok(v) = HeaderValue::from_str(&auth::set_cookie(&d.token)) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            no_store(r)
        }
        auth::Decision::Unauthorized if req.uri().path().starts_with("/klab/v1/") => {
            klab_apiserver::ApiError::unauthorized().into_response()
        }
        auth::Decision::Unauthorized => refusal(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: the dashboard needs the login token or the admin client certificate (a token that does not match is refused).",
        ),
        auth::Decision::Forbidden(m) => refusal(StatusCode::FORBIDDEN, &m),
    }
}

/// `/ui/` (the page) and `/ui/events` (the stream). Merge it with the admin router and layer
/// [`authenticate`] over both.
pub fn router(d: Arc<Dashboard>) -> Router {
    Router::new()
        .route(
            "/ui",
            get(|| async {
                (
                    StatusCode::MOVED_PERMANENTLY,
                    [(header::LOCATION, HeaderValue::from_static("/ui/"))],
                )
            }),
        )
        .route("/ui/", get(page))
        .route("/ui/events", get(events))
        .with_state(d)
}
