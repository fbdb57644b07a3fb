//! metrics-server (shell); decisions live in decide.rs.
//!
//! Every `--metric-resolution` (at start, then on a fixed tick as upstream's ticker) it reads the
//! Nodes from its node informer (upstream's lister: one watch, not a LIST per scrape) and scrapes
//! each node's kubelet `/metrics/resource` directly, as upstream's metrics-server does: it dials
//! the node's first InternalIP, ExternalIP or Hostname address (`--kubelet-preferred-address-types`
//! as `components.yaml` sets it) at the kubelet's port from `daemonEndpoints`, through the
//! cluster's [`KubeletNetwork`], so the node's faults decide what the dial meets, as they do for
//! the API server's node proxy. The requests are staggered over up to 4 s (8 ms per node), each
//! bounded by 90 % of the resolution and by the tick's end. It decodes the answers and stores
//! them in its in-memory [`MetricsStore`] when the last node has answered or given up; a node that
//! does not answer in time, refuses or answers an error is absent from that scrape, so its
//! metrics are forgotten. The scrapes are not API requests: the API server sees only
//! metrics-server's node watch.
//! The API server serves `metrics.k8s.io` from that store (upstream's metrics-server is an
//! aggregated API server with the same in-memory storage).

pub mod decide;

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Node;
use klab_api::kubelet_net::{KubeletNetwork, kubelet_host, kubelet_port};
use klab_api::resource_metrics::{MetricsReader, NodeUsage, PodUsage};
use klab_api::supervise::Health;
use klab_api::{Clock, DetRng};
use klab_runtime::informer::{Notice, SharedInformer};

pub use decide::MetricsServerConfig;
use decide::{Batch, Storage};

/// The in-memory storage, shared by the scraper and the API server's `metrics.k8s.io` handlers.
#[derive(Clone, Debug, Default)]
pub struct MetricsStore {
    inner: Arc<Mutex<Storage>>,
}

impl MetricsStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, Storage> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stores one complete scrape.
    pub fn store(&self, batch: Batch, config: &MetricsServerConfig) {
        self.lock().store(batch, config.metric_resolution);
    }

    /// Whether a node has metrics yet (metrics-server's readiness).
    pub fn ready(&self) -> bool {
        self.lock().ready()
    }
}

impl MetricsReader for MetricsStore {
    fn node(&self, name: &str) -> Option<NodeUsage> {
        self.lock().node(name)
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<PodUsage> {
        self.lock().pod(namespace, name)
    }
}

/// Where a node's kubelet listens: its preferred address and `daemonEndpoints` port.
fn kubelet_location(node: &Node) -> (String, u16) {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let status = node.status.as_ref();
    let addresses = status
        .and_then(|s| s.addresses.as_deref())
        .unwrap_or_default();
    let host = kubelet_host(
        addresses
            .iter()
            .map(|a| (a.type_.as_str(), a.address.as_str())),
        name,
    );
    let port = status
        .and_then(|s| s.daemon_endpoints.as_ref())
        .and_then(|d| d.kubelet_endpoint.as_ref())
        .map(|k| i64::from(k.port));
    (host.to_string(), kubelet_port(port))
}

/// `GET /metrics/resource` of the kubelet at `host:port`: the answer's text, or why there is
/// none (upstream's kubelet client: a failed dial, a broken connection or an answer other than
/// 200 fails the node's scrape).
async fn get_metrics(net: &dyn KubeletNetwork, host: &str, port: u16) -> Result<Bytes, String> {
    let url = format!("https://{host}:{port}/metrics/resource");
    let conn = net
        .dial(host, port)
        .await
        .map_err(|e| format!("Get {url:?}: dial tcp {host}:{port}: {e}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(conn))
            .await
            .map_err(|e| format!("Get {url:?}: {e}"))?;
    // The connection lives as long as this request: when it returns, or when the scrape's
    // deadline drops it mid-answer, `_stop` goes and the connection is closed.
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        tokio::select! {
            biased;
            _ = stopped => {}
            _ = connection => {}
        }
    });
    let req = http::Request::get("/metrics/resource")
        .header(http::header::HOST, format!("{host}:{port}"))
        .body(http_body_util::Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|_| format!("Get {url:?}: EOF"))?;
    let status = resp.status();
    if status != http::StatusCode::OK {
        return Err(format!("request failed, status: {status:?}"));
    }
    Ok(resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("Get {url:?}: {e}"))?
        .to_bytes())
}

/// One node's `/metrics/resource`, scraped from its kubelet and decoded; `None` when the kubelet
/// does not answer (or answers an error).
async fn scrape_node(net: &dyn KubeletNetwork, clock: &Clock, node: &Node) -> Option<Batch> {
    let name = node.metadata.name.as_deref()?;
    let (host, port) = kubelet_location(node);
    let started = clock.now();
    let text = get_metrics(net, &host, port)
        .await
        .and_then(|b| String::from_utf8(b.into()).map_err(|e| e.to_string()));
    match text {
        Ok(text) => Some(decide::decode(&text, name, started)),
        Err(error) => {
            tracing::debug!(node = name, error, "metrics-server: failed to scrape node");
            None
        }
    }
}

/// One scrape of every node the informer holds (upstream's `tick` and `Scrape`), stored when the
/// last node has answered or given up. Each node's request starts after its own random stagger
/// (drawn from `rng` in name order, so a seed gives the same scrape), and may take the scrape
/// timeout but not past the tick's end.
pub async fn tick(
    net: &dyn KubeletNetwork,
    clock: &Clock,
    rng: &DetRng,
    config: &MetricsServerConfig,
    store: &MetricsStore,
    nodes: &SharedInformer<Node>,
) {
    // In key order, which for nodes is name order. Every node, Ready or not, as upstream: a
    // node marked NotReady or Unknown may still have a kubelet that answers.
    let nodes = nodes.list();
    // Drawn before any request starts: the draws do not depend on which kubelet answers first.
    let plan = decide::scrape_plan(config, nodes.len(), |window| rng.range(0, window));
    let scrapes = nodes.iter().zip(plan).map(|(n, (stagger, timeout))| {
        let timeout = clock.to_runtime(timeout);
        async move {
            clock.sleep(stagger).await;
            tokio::time::timeout(timeout, scrape_node(net, clock, n))
                .await
                .ok()
                .flatten()
        }
    });
    // Results come back in the nodes' order whatever order they finish in.
    let results = futures::future::join_all(scrapes).await;
    let mut batch = Batch::default();
    for b in results.into_iter().flatten() {
        batch.merge(b);
    }
    store.store(batch, config);
}

/// Runs metrics-server until the task is dropped: `client` for its node watch, `net` to reach
/// the kubelets. Its node informer's watch is supervised in `health` as
/// `metrics-server/informers/nodes`, and stops with this task.
pub async fn run(
    client: kube::Client,
    net: Arc<dyn KubeletNetwork>,
    clock: Clock,
    rng: DetRng,
    config: MetricsServerConfig,
    store: MetricsStore,
    health: Health,
) -> Result<(), String> {
    let informers = klab_runtime::Informers::new(client.clone(), clock.clone())
        .supervised(health, "metrics-server/informers");
    let _stop = informers.stop_guard();
    let nodes = informers.get::<Node>();
    // Upstream waits for its informers' first list before the first scrape.
    let mut sub = nodes.subscribe();
    loop {
        match sub.recv().await {
            Some(Notice::Synced) => break,
            Some(Notice::Changed(_)) => {}
            None => return Err("the node informer stopped".into()),
        }
    }
    // Not read again: an unread subscription would only buffer every change.
    drop(sub);
    let mut next = clock.now();
    loop {
        tick(net.as_ref(), &clock, &rng, &config, &store, &nodes).await;
        // A fixed tick, as a Go ticker: a scrape never takes longer than the resolution.
        next = klab_api::clock::saturating_add(next, config.metric_resolution);
        clock.sleep_until(next).await;
    }
}
