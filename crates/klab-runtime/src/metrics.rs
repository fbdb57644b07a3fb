//! Workqueue metrics with client-go's names, labels, buckets and accounting
//! (`workqueue_adds_total`, `workqueue_depth`, `workqueue_queue_duration_seconds`,
//! `workqueue_work_duration_seconds`, `workqueue_retries_total`,
//! `workqueue_unfinished_work_seconds`, `workqueue_longest_running_processor_seconds`, each
//! labelled `name` with the queue's upstream name), timed on the cluster's [`Clock`] so that a
//! sim run reports virtual seconds.
//!
//! Accounting follows client-go: an add of a key that is not already waiting counts once and
//! raises the depth (a key added while it is being processed counts too, as upstream's dirty
//! set does); a get lowers the depth and observes how long the key waited since its first
//! add; a done observes how long it was processed; every delayed add (`AddAfter`, our
//! `add_at`) is a retry. The unfinished-work gauges are computed when rendered (upstream
//! refreshes them every 500 ms).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;
use klab_api::Clock;
use klab_api::prom_text::float;

use crate::queue::WorkQueue;
use crate::store::ObjKey;

/// Number of buckets of upstream's `ExponentialBuckets(10e-9, 10, 10)`.
const NBUCKETS: usize = 10;

/// Upstream's bucket bounds, computed as Go's `ExponentialBuckets` does (repeated products, so
/// the bounds carry the same rounding: `9.999999999999999e-06`).
fn buckets() -> [f64; NBUCKETS] {
    let mut out = [0.0; NBUCKETS];
    let mut b = 10e-9_f64;
    for slot in &mut out {
        *slot = b;
        b *= 10.0;
    }
    out
}

#[derive(Debug, Clone, Default)]
struct Histogram {
    counts: [u64; NBUCKETS],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, bounds: &[f64; NBUCKETS], secs: f64) {
        for (c, b) in self.counts.iter_mut().zip(bounds) {
            if secs <= *b {
                *c = c.saturating_add(1);
            }
        }
        self.count = self.count.saturating_add(1);
        self.sum += secs;
    }
}

/// One queue's counters and its in-flight bookkeeping.
#[derive(Debug, Default)]
struct QueueStats {
    adds: u64,
    depth: u64,
    retries: u64,
    latency: Histogram,
    work: Histogram,
    /// First add of each waiting key (client-go's `addTimes`).
    add_times: BTreeMap<ObjKey, Timestamp>,
    /// Start of each key being processed (client-go's `processingStartTimes`).
    processing: BTreeMap<ObjKey, Timestamp>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Seconds from `from` to `to`, never negative.
fn secs_between(from: Timestamp, to: Timestamp) -> f64 {
    let d = to.duration_since(from).as_secs_f64();
    if d > 0.0 { d } else { 0.0 }
}

/// The metering handle of one named queue (held by its [`WorkQueue`]).
#[derive(Clone)]
pub(crate) struct Meter {
    clock: Clock,
    stats: Arc<Mutex<QueueStats>>,
}

impl std::fmt::Debug for Meter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Meter")
    }
}

impl Meter {
    pub(crate) fn add(&self, key: &ObjKey) {
        let now = self.clock.now();
        let mut s = lock(&self.stats);
        s.adds = s.adds.saturating_add(1);
        s.depth = s.depth.saturating_add(1);
        s.add_times.entry(key.clone()).or_insert(now);
    }

    pub(crate) fn get(&self, key: &ObjKey) {
        let now = self.clock.now();
        let mut s = lock(&self.stats);
        s.depth = s.depth.saturating_sub(1);
        s.processing.insert(key.clone(), now);
        if let Some(t) = s.add_times.remove(key) {
            let b = buckets();
            s.latency.observe(&b, secs_between(t, now));
        }
    }

    pub(crate) fn done(&self, key: &ObjKey) {
        let now = self.clock.now();
        let mut s = lock(&self.stats);
        if let Some(t) = s.processing.remove(key) {
            let b = buckets();
            s.work.observe(&b, secs_between(t, now));
        }
    }

    pub(crate) fn retry(&self) {
        let mut s = lock(&self.stats);
        s.retries = s.retries.saturating_add(1);
    }
}

/// One queue's shared numbers.
type SharedStats = Arc<Mutex<QueueStats>>;

/// Every named queue of one controller process, rendered on `/metrics`.
#[derive(Clone)]
pub struct QueueMetrics {
    clock: Clock,
    queues: Arc<Mutex<BTreeMap<&'static str, SharedStats>>>,
}

impl QueueMetrics {
    pub fn new(clock: Clock) -> Self {
        QueueMetrics {
            clock,
            queues: Arc::new(Mutex::new(BTreeMap::new())),
        }
    }

    /// A new queue metered as `name` (upstream's queue name, e.g. `replicaset`). A queue made
    /// again under the same name (a restarted controller) keeps the counters and histograms,
    /// while its depth and in-flight work start empty, like the new queue itself.
    pub fn queue(&self, name: &'static str) -> WorkQueue {
        let stats = {
            let mut q = lock(&self.queues);
            q.entry(name).or_default().clone()
        };
        {
            let mut s = lock(&stats);
            s.depth = 0;
            s.add_times.clear();
            s.processing.clear();
        }
        WorkQueue::metered(Meter {
            clock: self.clock.clone(),
            stats,
        })
    }

    /// The seven families in the Prometheus text format, sorted by family then queue name as
    /// a Prometheus registry writes them.
    pub fn render(&self) -> String {
        let now = self.clock.now();
        let queues: Vec<(&'static str, SharedStats)> = lock(&self.queues)
            .iter()
            .map(|(n, s)| (*n, s.clone()))
            .collect();
        // Take one consistent copy of each queue's numbers.
        struct Snap {
            name: &'static str,
            adds: u64,
            depth: u64,
            retries: u64,
            latency: Histogram,
            work: Histogram,
            unfinished: f64,
            longest: f64,
        }
        let snaps: Vec<Snap> = queues
            .iter()
            .map(|(name, s)| {
                let s = lock(s);
                let mut unfinished = 0.0;
                let mut longest: f64 = 0.0;
                for t in s.processing.values() {
                    let age = secs_between(*t, now);
                    unfinished += age;
                    longest = longest.max(age);
                }
                Snap {
                    name,
                    adds: s.adds,
                    depth: s.depth,
                    retries: s.retries,
                    latency: s.latency.clone(),
                    work: s.work.clone(),
                    unfinished,
                    longest,
                }
            })
            .collect();
        let mut out = String::new();
        // A registry writes no family that has no series.
        if snaps.is_empty() {
            return out;
        }
        let mut family = |name: &str, kind: &str, help: &str, line: &dyn Fn(&Snap, &mut String)| {
            let _ = writeln!(out, "# HELP {name} [ALPHA] {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for s in &snaps {
                line(s, &mut out);
            }
        };
        let bounds = buckets();
        let hist = |fam: &'static str| {
            move |s: &Snap, out: &mut String| {
                let h = if fam == "workqueue_queue_duration_seconds" {
                    &s.latency
                } else {
                    &s.work
                };
                for (c, b) in h.counts.iter().zip(bounds.iter()) {
                    let _ = writeln!(
                        out,
                        "{fam}_bucket{{name=\"{}\",le=\"{}\"}} {c}",
                        s.name,
                        float(*b)
                    );
                }
                let _ = writeln!(
                    out,
                    "{fam}_bucket{{name=\"{}\",le=\"+Inf\"}} {}",
                    s.name, h.count
                );
                let _ = writeln!(out, "{fam}_sum{{name=\"{}\"}} {}", s.name, float(h.sum));
                let _ = writeln!(out, "{fam}_count{{name=\"{}\"}} {}", s.name, h.count);
            }
        };
        family(
            "workqueue_adds_total",
            "counter",
            "Total number of adds handled by workqueue",
            &|s, out| {
                let _ = writeln!(
                    out,
                    "workqueue_adds_total{{name=\"{}\"}} {}",
                    s.name, s.adds
                );
            },
        );
        family(
            "workqueue_depth",
            "gauge",
            "Current depth of workqueue",
            &|s, out| {
                let _ = writeln!(out, "workqueue_depth{{name=\"{}\"}} {}", s.name, s.depth);
            },
        );
        family(
            "workqueue_longest_running_processor_seconds",
            "gauge",
            "How many seconds has the longest running processor for workqueue been running.",
            &|s, out| {
                let _ = writeln!(
                    out,
                    "workqueue_longest_running_processor_seconds{{name=\"{}\"}} {}",
                    s.name,
                    float(s.longest)
                );
            },
        );
        family(
            "workqueue_queue_duration_seconds",
            "histogram",
            "How long in seconds an item stays in workqueue before being requested.",
            &hist("workqueue_queue_duration_seconds"),
        );
        family(
            "workqueue_retries_total",
            "counter",
            "Total number of retries handled by workqueue",
            &|s, out| {
                let _ = writeln!(
                    out,
                    "workqueue_retries_total{{name=\"{}\"}} {}",
                    s.name, s.retries
                );
            },
        );
        family(
            "workqueue_unfinished_work_seconds",
            "gauge",
            "How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
            &|s, out| {
                let _ = writeln!(
                    out,
                    "workqueue_unfinished_work_seconds{{name=\"{}\"}} {}",
                    s.name,
                    float(s.unfinished)
                );
            },
        );
        family(
            "workqueue_work_duration_seconds",
            "histogram",
            "How long in seconds processing an item from workqueue takes.",
            &hist("workqueue_work_duration_seconds"),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn k(n: &str) -> ObjKey {
        ("ns".into(), n.into())
    }

    fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line {prefix} in\n{text}"))
    }

    /// The workqueue histograms' bucket bounds print as client-go's (`le="9.999999999999999e-06"`).
    #[test]
    fn bucket_bounds_print_as_upstreams() {
        let b = buckets();
        let got: Vec<String> = b.iter().map(|v| float(*v)).collect();
        assert_eq!(
            got,
            [
                "1e-08",
                "1e-07",
                "1e-06",
                "9.999999999999999e-06",
                "9.999999999999999e-05",
                "0.001",
                "0.01",
                "0.1",
                "1",
                "10"
            ]
        );
    }

    #[test]
    fn nothing_is_rendered_without_a_named_queue() {
        let m = QueueMetrics::new(Clock::virtual_default());
        assert_eq!(m.render(), "");
        // An unnamed queue is not metered.
        let mut q = WorkQueue::default();
        q.add(k("a"));
        assert_eq!(q.pop(), Some(k("a")));
        q.done(&k("a"));
        assert_eq!(m.render(), "");
    }

    #[tokio::test(start_paused = true)]
    async fn adds_gets_dones_and_retries_are_counted_on_the_cluster_clock() {
        let clock = Clock::virtual_default();
        let m = QueueMetrics::new(clock.clone());
        let mut q = m.queue("replicaset");
        let _other = m.queue("deployment");
        q.add(k("a"));
        q.add(k("a")); // already waiting: not an add
        q.add(k("b"));
        tokio::time::advance(Duration::from_secs(2)).await;
        let text = m.render();
        assert!(
            text.contains("workqueue_adds_total{name=\"replicaset\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("workqueue_depth{name=\"replicaset\"} 2\n"));
        assert!(text.contains("workqueue_adds_total{name=\"deployment\"} 0\n"));
        // `a` waited 2 s, then is processed for 3 s.
        assert_eq!(q.pop(), Some(k("a")));
        tokio::time::advance(Duration::from_secs(3)).await;
        let text = m.render();
        assert!(text.contains("workqueue_depth{name=\"replicaset\"} 1\n"));
        assert!(text.contains("workqueue_unfinished_work_seconds{name=\"replicaset\"} 3\n"));
        assert!(
            text.contains("workqueue_longest_running_processor_seconds{name=\"replicaset\"} 3\n")
        );
        // Re-added while processing: counted again, as client-go's dirty set does, and queued
        // behind `b`.
        q.add(k("a"));
        q.done(&k("a"));
        // `b` waited 5 s; processed instantly; then requeued with a delay (a retry) that fires.
        assert_eq!(q.pop(), Some(k("b")));
        q.add_after(k("b"), clock.now(), Duration::from_secs(1));
        q.done(&k("b"));
        assert_eq!(q.pop(), Some(k("a")));
        q.done(&k("a"));
        tokio::time::advance(Duration::from_secs(1)).await;
        q.fire_due(clock.now());
        assert_eq!(q.pop(), Some(k("b")));
        q.done(&k("b"));
        let text = m.render();
        assert!(
            text.contains("workqueue_adds_total{name=\"replicaset\"} 4\n"),
            "{text}"
        );
        assert!(text.contains("workqueue_depth{name=\"replicaset\"} 0\n"));
        assert!(text.contains("workqueue_retries_total{name=\"replicaset\"} 1\n"));
        assert!(text.contains("workqueue_unfinished_work_seconds{name=\"replicaset\"} 0\n"));
        // Waits: a 2 s, b 5 s, a 0 s, b 0 s.
        assert_eq!(
            line(
                &text,
                "workqueue_queue_duration_seconds_count{name=\"replicaset\"}"
            ),
            "workqueue_queue_duration_seconds_count{name=\"replicaset\"} 4"
        );
        assert_eq!(
            line(
                &text,
                "workqueue_queue_duration_seconds_sum{name=\"replicaset\"}"
            ),
            "workqueue_queue_duration_seconds_sum{name=\"replicaset\"} 7"
        );
        assert_eq!(
            line(
                &text,
                "workqueue_queue_duration_seconds_bucket{name=\"replicaset\",le=\"1\"}"
            ),
            "workqueue_queue_duration_seconds_bucket{name=\"replicaset\",le=\"1\"} 2"
        );
        assert_eq!(
            line(
                &text,
                "workqueue_queue_duration_seconds_bucket{name=\"replicaset\",le=\"10\"}"
            ),
            "workqueue_queue_duration_seconds_bucket{name=\"replicaset\",le=\"10\"} 4"
        );
        // Work: a 3 s, a 0 s, b 0 s, b 0 s.
        assert_eq!(
            line(
                &text,
                "workqueue_work_duration_seconds_sum{name=\"replicaset\"}"
            ),
            "workqueue_work_duration_seconds_sum{name=\"replicaset\"} 3"
        );
        assert_eq!(
            line(
                &text,
                "workqueue_work_duration_seconds_bucket{name=\"replicaset\",le=\"1e-08\"}"
            ),
            "workqueue_work_duration_seconds_bucket{name=\"replicaset\",le=\"1e-08\"} 3"
        );
        assert_eq!(
            line(
                &text,
                "workqueue_work_duration_seconds_bucket{name=\"replicaset\",le=\"+Inf\"}"
            ),
            "workqueue_work_duration_seconds_bucket{name=\"replicaset\",le=\"+Inf\"} 4"
        );
        // Families in name order, queues in name order within each, upstream's help texts.
        let families: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE")).collect();
        assert_eq!(
            families,
            [
                "# TYPE workqueue_adds_total counter",
                "# TYPE workqueue_depth gauge",
                "# TYPE workqueue_longest_running_processor_seconds gauge",
                "# TYPE workqueue_queue_duration_seconds histogram",
                "# TYPE workqueue_retries_total counter",
                "# TYPE workqueue_unfinished_work_seconds gauge",
                "# TYPE workqueue_work_duration_seconds histogram",
            ]
        );
        assert!(text.contains(
            "# HELP workqueue_adds_total [ALPHA] Total number of adds handled by workqueue\n"
        ));
        let adds = text
            .find("workqueue_adds_total{name=\"deployment\"}")
            .unwrap();
        let adds_rs = text
            .find("workqueue_adds_total{name=\"replicaset\"}")
            .unwrap();
        assert!(adds < adds_rs);
    }

    #[tokio::test(start_paused = true)]
    async fn a_queue_made_again_keeps_counters_and_drops_its_depth() {
        let m = QueueMetrics::new(Clock::virtual_default());
        let mut q = m.queue("job");
        q.add(k("a"));
        q.add(k("b"));
        assert_eq!(q.pop(), Some(k("a")));
        drop(q);
        let _q = m.queue("job");
        let text = m.render();
        assert!(text.contains("workqueue_adds_total{name=\"job\"} 2\n"));
        assert!(text.contains("workqueue_depth{name=\"job\"} 0\n"));
        assert!(text.contains("workqueue_unfinished_work_seconds{name=\"job\"} 0\n"));
    }
}
