//! metrics-server (shell); decisions live in decide.rs.
//!
//! Every `--metric-resolution` (at start, then on a fixed tick as upstream's ticker) it reads the
//! Nodes from its node informer (upstream's lister: one watch, not a LIST per scrape), scrapes
//! each Ready node's kubelet `/metrics/resource` through the API server's node proxy
//! (`nodes/{name}/proxy/metrics/resource`, all nodes at once, the whole scrape bounded by 90 % of
//! the resolution), decodes the answers and stores them in its in-memory [`MetricsStore`].
//! A node that does not answer in time is absent from the scrape, so its metrics are forgotten.
//! The API server serves `metrics.k8s.io` from that store (upstream's metrics-server is an
//! aggregated API server with the same in-memory storage).

pub mod decide;

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Node;
use klab_api::Clock;
use klab_api::resource_metrics::{MetricsReader, NodeUsage, PodUsage};
use klab_api::supervise::Health;
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

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == klab_api::names::COND_READY && c.status == "True")
        })
}

/// One node's `/metrics/resource` through the node proxy, decoded; `None` when the kubelet does
/// not answer (or answers an error).
async fn scrape_node(client: &kube::Client, clock: &Clock, node: &str) -> Option<Batch> {
    let started = clock.now();
    let req = http::Request::get(format!("/api/v1/nodes/{node}/proxy/metrics/resource"))
        .body(Vec::new())
        .ok()?;
    match client.request_text(req).await {
        Ok(text) => Some(decide::decode(&text, node, started)),
        Err(e) => {
            tracing::debug!(node, error = %e, "metrics-server: failed to scrape node");
            None
        }
    }
}

/// One scrape of every Ready node the informer holds (upstream's `tick`), stored when it ends.
pub async fn tick(
    client: &kube::Client,
    clock: &Clock,
    config: &MetricsServerConfig,
    store: &MetricsStore,
    nodes: &SharedInformer<Node>,
) {
    // In key order, which for nodes is name order.
    let names: Vec<String> = nodes
        .list()
        .iter()
        .filter(|n| is_ready(n))
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let timeout = clock.to_runtime(config.scrape_timeout());
    let scrapes = names.iter().map(|n| async move {
        tokio::time::timeout(timeout, scrape_node(client, clock, n))
            .await
            .ok()
            .flatten()
    });
    // Results come back in the nodes' order whatever order they finish in.
    let results = futures::future::join_all(scrapes).await;
    let mut batch = Batch::default();
    for b in results.into_iter().flatten() {
        batch.merge(b);
    }
    store.store(batch, config);
}

/// Runs metrics-server until the task is dropped. Its node informer's watch is supervised in
/// `health` as `metrics-server/informers/nodes`, and stops with this task.
pub async fn run(
    client: kube::Client,
    clock: Clock,
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
        tick(&client, &clock, &config, &store, &nodes).await;
        // A fixed tick, as a Go ticker: a scrape never takes longer than the resolution.
        next = klab_api::clock::saturating_add(next, config.metric_resolution);
        clock.sleep_until(next).await;
    }
}
