//! The API server's own metrics, with upstream's names and labels, rendered on `/metrics` in the
//! Prometheus text format after the supervision counters: `apiserver_request_total`,
//! `apiserver_request_duration_seconds` (runtime time, so 0 in a paused sim),
//! `apiserver_watch_events_total` and `apiserver_storage_objects`. In one klab process the
//! controllers' metrics (`node_collector_*`, …) are registered here as extra sources, since there
//! is no separate kube-controller-manager port to scrape.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::Method;

use crate::registry::{self, ResourceInfo};

/// Upstream's request-duration buckets (seconds).
const BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// The labels of one request (upstream's `verb`, `group`, `version`, `resource`, `subresource`,
/// `scope`, `component`, `code`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RequestLabels {
    pub verb: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub resource: &'static str,
    pub subresource: String,
    pub scope: &'static str,
    pub code: u16,
}

/// One answered request as the server accounted for it: when it arrived (virtual time since the
/// clock's epoch), who sent it, and upstream's labels. Kept only once `record_requests` is called
/// (`klab sim` does, so expectations can count a component's writes in a window).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestEntry {
    pub at: Duration,
    /// The authenticated user (`system:node:n1`, `system:serviceaccount:kube-system:…`).
    pub user: String,
    pub verb: &'static str,
    pub resource: &'static str,
    pub subresource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub code: u16,
}

#[derive(Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

type Source = Box<dyn Fn() -> String + Send + Sync>;

/// Counters shared by every request of one server.
#[derive(Default)]
pub struct ApiMetrics {
    requests: Mutex<BTreeMap<RequestLabels, u64>>,
    durations: Mutex<BTreeMap<RequestLabels, Histogram>>,
    watch_events: Mutex<BTreeMap<(&'static str, &'static str, &'static str), u64>>,
    sources: Mutex<Vec<Source>>,
    /// Every request in arrival order, once `record_requests` turned it on (it grows with the
    /// run, so a long-lived `klab up` never keeps it).
    log: Mutex<Option<Vec<RequestEntry>>>,
}

/// Upstream's verb for a request: `LIST` and `WATCH` for collection reads, `APPLY` for
/// server-side apply patches, `CONNECT` for exec/attach/port-forward/proxy.
pub fn verb(
    method: &Method,
    named: bool,
    watch: bool,
    sub: Option<&str>,
    apply: bool,
) -> &'static str {
    match (method, named, sub) {
        (_, _, Some("exec" | "attach" | "portforward" | "proxy")) => "CONNECT",
        (&Method::GET, false, _) if watch => "WATCH",
        (&Method::GET, false, _) => "LIST",
        (&Method::GET, true, _) if watch => "WATCH",
        (&Method::GET, true, _) => "GET",
        (&Method::POST, _, _) => "POST",
        (&Method::PUT, _, _) => "PUT",
        (&Method::PATCH, _, _) if apply => "APPLY",
        (&Method::PATCH, _, _) => "PATCH",
        (&Method::DELETE, false, _) => "DELETECOLLECTION",
        (&Method::DELETE, true, _) => "DELETE",
        _ => "UNKNOWN",
    }
}

/// `resource` (a named object), `namespace` or `cluster`.
pub fn scope(named: bool, namespaced: bool) -> &'static str {
    match (named, namespaced) {
        (true, _) => "resource",
        (false, true) => "namespace",
        (false, false) => "cluster",
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl ApiMetrics {
    /// Counts one answered request; long-running ones (watches, streams) are not timed.
    pub fn observe(&self, labels: RequestLabels, took: Option<Duration>) {
        if let Some(d) = took {
            let mut h = lock(&self.durations);
            let e = h.entry(labels.clone()).or_default();
            let secs = d.as_secs_f64();
            for (i, b) in BUCKETS.iter().enumerate() {
                if secs <= *b {
                    e.counts[i] = e.counts[i].saturating_add(1);
                }
            }
            e.count = e.count.saturating_add(1);
            e.sum += secs;
        }
        let mut r = lock(&self.requests);
        let n = r.entry(labels).or_default();
        *n = n.saturating_add(1);
    }

    /// Keeps every request from now on (see [`RequestEntry`]).
    pub fn record_requests(&self) {
        let mut l = lock(&self.log);
        if l.is_none() {
            *l = Some(Vec::new());
        }
    }

    /// Adds one request to the log, if it is kept.
    pub fn log_request(&self, e: RequestEntry) {
        if let Some(l) = lock(&self.log).as_mut() {
            l.push(e);
        }
    }

    /// The requests logged so far, in arrival order.
    pub fn request_log(&self) -> Vec<RequestEntry> {
        lock(&self.log).clone().unwrap_or_default()
    }

    /// Counts one event sent on a watch of `ri`.
    pub fn watch_event(&self, ri: &'static ResourceInfo) {
        let mut w = lock(&self.watch_events);
        let n = w.entry((ri.group, ri.version, ri.kind)).or_default();
        *n = n.saturating_add(1);
    }

    /// Adds a source of more metrics text (the controllers' families), rendered after these.
    pub fn add_source(&self, f: impl Fn() -> String + Send + Sync + 'static) {
        lock(&self.sources).push(Box::new(f));
    }

    /// The text exposition; `objects` gives `apiserver_storage_objects` per resource.
    pub fn render(&self, objects: &[(&'static ResourceInfo, u64)]) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code."
        );
        let _ = writeln!(out, "# TYPE apiserver_request_total counter");
        for (l, n) in lock(&self.requests).iter() {
            let _ = writeln!(
                out,
                "apiserver_request_total{{code=\"{}\",component=\"apiserver\",dry_run=\"\",group=\"{}\",resource=\"{}\",scope=\"{}\",subresource=\"{}\",verb=\"{}\",version=\"{}\"}} {n}",
                l.code,
                l.group,
                l.resource,
                l.scope,
                escape(&l.subresource),
                l.verb,
                l.version
            );
        }
        let _ = writeln!(
            out,
            "# HELP apiserver_request_duration_seconds [STABLE] Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component."
        );
        let _ = writeln!(out, "# TYPE apiserver_request_duration_seconds histogram");
        for (l, h) in lock(&self.durations).iter() {
            let labels = format!(
                "component=\"apiserver\",dry_run=\"\",group=\"{}\",resource=\"{}\",scope=\"{}\",subresource=\"{}\",verb=\"{}\",version=\"{}\"",
                l.group,
                l.resource,
                l.scope,
                escape(&l.subresource),
                l.verb,
                l.version
            );
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "apiserver_request_duration_seconds_bucket{{{labels},le=\"{b}\"}} {}",
                    h.counts[i]
                );
            }
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_sum{{{labels}}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_count{{{labels}}} {}",
                h.count
            );
        }
        let _ = writeln!(
            out,
            "# HELP apiserver_watch_events_total [ALPHA] Number of events sent in watch clients"
        );
        let _ = writeln!(out, "# TYPE apiserver_watch_events_total counter");
        for ((g, v, k), n) in lock(&self.watch_events).iter() {
            let _ = writeln!(
                out,
                "apiserver_watch_events_total{{group=\"{g}\",kind=\"{k}\",version=\"{v}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP apiserver_storage_objects [STABLE] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1."
        );
        let _ = writeln!(out, "# TYPE apiserver_storage_objects gauge");
        for (ri, n) in objects {
            let _ = writeln!(
                out,
                "apiserver_storage_objects{{resource=\"{}\"}} {n}",
                ri.qualified_plural()
            );
        }
        for s in lock(&self.sources).iter() {
            out.push_str(&s());
        }
        out
    }
}

/// The stored resources whose objects `apiserver_storage_objects` counts (not the reviews, and
/// each storage prefix once: core and events.k8s.io Events are one set of objects).
pub fn stored_resources() -> Vec<&'static ResourceInfo> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for ri in registry::RESOURCES {
        if registry::is_review(ri) || registry::is_metrics(ri) {
            continue;
        }
        let prefix = crate::conversion::storage_resource(ri).key_prefix();
        if !seen.contains(&prefix) {
            seen.push(prefix);
            out.push(ri);
        }
    }
    out
}

/// A shared handle, as the server holds it.
pub type SharedMetrics = Arc<ApiMetrics>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_scopes_and_rendering() {
        assert_eq!(verb(&Method::GET, false, false, None, false), "LIST");
        assert_eq!(verb(&Method::GET, false, true, None, false), "WATCH");
        assert_eq!(verb(&Method::GET, true, false, Some("log"), false), "GET");
        assert_eq!(
            verb(&Method::POST, true, false, Some("exec"), false),
            "CONNECT"
        );
        assert_eq!(verb(&Method::PATCH, true, false, None, true), "APPLY");
        assert_eq!(
            verb(&Method::DELETE, false, false, None, false),
            "DELETECOLLECTION"
        );
        assert_eq!(scope(false, true), "namespace");
        let m = ApiMetrics::default();
        let l = RequestLabels {
            verb: "LIST",
            group: "",
            version: "v1",
            resource: "pods",
            subresource: String::new(),
            scope: "namespace",
            code: 200,
        };
        m.observe(l.clone(), Some(Duration::from_millis(30)));
        m.observe(l, Some(Duration::from_millis(1)));
        m.watch_event(registry::lookup("", "v1", "pods").unwrap());
        m.add_source(|| "node_collector_zone_size{zone=\"\"} 3\n".into());
        let pods = registry::lookup("", "v1", "pods").unwrap();
        let text = m.render(&[(pods, 2)]);
        assert!(text.contains("apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"namespace\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 2\n"), "{text}");
        assert!(text.contains("le=\"0.005\"} 1\n"));
        assert!(text.contains("le=\"0.05\"} 2\n"));
        assert!(
            text.contains(
                "apiserver_watch_events_total{group=\"\",kind=\"Pod\",version=\"v1\"} 1\n"
            )
        );
        assert!(text.contains("apiserver_storage_objects{resource=\"pods\"} 2\n"));
        assert!(text.ends_with("node_collector_zone_size{zone=\"\"} 3\n"));
    }

    #[test]
    fn the_request_log_is_kept_only_once_turned_on() {
        let m = ApiMetrics::default();
        let e = |user: &str| RequestEntry {
            at: Duration::from_secs(10),
            user: user.into(),
            verb: "PATCH",
            resource: "nodes",
            subresource: "status".into(),
            namespace: None,
            name: Some("n1".into()),
            code: 200,
        };
        m.log_request(e("before"));
        assert!(m.request_log().is_empty());
        m.record_requests();
        m.log_request(e("system:node:n1"));
        m.record_requests(); // a second call keeps what was logged
        m.log_request(e("system:node:n2"));
        let users: Vec<String> = m.request_log().into_iter().map(|e| e.user).collect();
        assert_eq!(users, ["system:node:n1", "system:node:n2"]);
    }
}
