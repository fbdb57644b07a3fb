//! Pure decisions of metrics-server: decoding a kubelet's `/metrics/resource` into metric points
//! (upstream's rules for incomplete points included) and the two-sample storage that turns
//! cumulative CPU into a rate over the window between two scrapes.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use klab_api::resource_metrics::{NodeUsage, PodUsage, Usage};

/// `--metric-resolution` (upstream default 15 s): how often every node is scraped.
pub const DEFAULT_METRIC_RESOLUTION: Duration = Duration::from_secs(15);

/// A container younger than this at a scrape gets no synthetic first point: its early CPU would
/// be inaccurate (upstream's `freshContainerMinMetricsResolution`).
pub const FRESH_CONTAINER_MIN_METRICS_RESOLUTION: Duration = Duration::from_secs(10);

/// Configuration of metrics-server, with its flag names.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricsServerConfig {
    /// `--metric-resolution`.
    pub metric_resolution: Duration,
}

impl Default for MetricsServerConfig {
    fn default() -> Self {
        MetricsServerConfig {
            metric_resolution: DEFAULT_METRIC_RESOLUTION,
        }
    }
}

impl MetricsServerConfig {
    /// How long one scrape of every node may take: 90 % of the resolution, as upstream derives it.
    pub fn scrape_timeout(&self) -> Duration {
        self.metric_resolution.mul_f64(0.9)
    }

    /// How long one node's request may take once its stagger is over: the scrape timeout, and no
    /// later than the tick's end (upstream gives each request the scrape timeout inside the
    /// tick's own context, which ends one resolution after the tick began).
    pub fn node_timeout(&self, stagger: Duration) -> Duration {
        self.scrape_timeout()
            .min(self.metric_resolution.saturating_sub(stagger))
    }
}

/// Upstream's `delayPerSourceMs`: the stagger window grows by this much per node...
const DELAY_PER_NODE: Duration = Duration::from_millis(8);
/// ...up to `maxDelayMs`.
const MAX_DELAY: Duration = Duration::from_secs(4);

/// The window a scrape spreads its requests over, so that not every kubelet is asked at once:
/// each node's request first waits a random whole number of milliseconds below it (upstream's
/// `rand.Intn(delayMs)`), 8 ms per node up to 4 s.
pub fn stagger_window(nodes: usize) -> Duration {
    let nodes = u32::try_from(nodes).unwrap_or(u32::MAX);
    DELAY_PER_NODE.saturating_mul(nodes).min(MAX_DELAY)
}

/// One scrape's plan for `nodes` nodes, in their order: how long each node's request waits
/// before it starts, drawn by `draw(window_ms)` (a whole number of milliseconds below the
/// window, upstream's `rand.Intn`), and how long it may then take.
pub fn scrape_plan(
    config: &MetricsServerConfig,
    nodes: usize,
    mut draw: impl FnMut(u64) -> u64,
) -> Vec<(Duration, Duration)> {
    let window = u64::try_from(stagger_window(nodes).as_millis()).unwrap_or(0);
    (0..nodes)
        .map(|_| {
            let ms = if window == 0 {
                0
            } else {
                draw(window).min(window.saturating_sub(1))
            };
            let stagger = Duration::from_millis(ms);
            (stagger, config.node_timeout(stagger))
        })
        .collect()
}

/// One sample of a node or a container.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    /// When the container started (`container_start_time_seconds`); `None` for nodes and for
    /// containers the kubelet gave no start time (Go's zero time: before everything).
    pub start: Option<Timestamp>,
    /// When the sample was taken.
    pub timestamp: Timestamp,
    /// Cumulative CPU since the start, nanosecond-cores.
    pub cpu_ns: u64,
    /// Working set, bytes.
    pub memory: u64,
}

/// (namespace, pod name).
pub type PodRef = (String, String);

/// What one scrape brought: the complete node and pod points (already filtered as upstream's
/// decoder filters them).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    pub nodes: BTreeMap<String, Point>,
    pub pods: BTreeMap<PodRef, ContainerPoints>,
}

/// The points of one pod's containers by name, in name order: a sorted vector, sized to its
/// contents. A pod has one container or a few, and metrics-server holds two sets of them for
/// every pod (a `BTreeMap` allocates a node of eleven slots for each, about 800 bytes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerPoints(Vec<(String, Point)>);

impl ContainerPoints {
    /// Sets `name`'s point.
    pub fn insert(&mut self, name: String, point: Point) {
        match self.0.binary_search_by(|(n, _)| n.as_str().cmp(&name)) {
            Ok(i) => self.0[i].1 = point,
            Err(i) => {
                self.0.reserve_exact(1);
                self.0.insert(i, (name, point));
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<&Point> {
        self.0
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| &self.0[i].1)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The containers and their points, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Point)> {
        self.0.iter().map(|(n, p)| (n, p))
    }
}

/// For tests' `points["app"]`.
#[cfg(test)]
impl std::ops::Index<&str> for ContainerPoints {
    type Output = Point;
    fn index(&self, name: &str) -> &Point {
        self.get(name)
            .unwrap_or_else(|| panic!("no container {name:?}"))
    }
}

impl Batch {
    /// Adds another node's batch; a node or pod already present keeps its first points (upstream
    /// logs the duplicate and skips it).
    pub fn merge(&mut self, other: Batch) {
        for (k, v) in other.nodes {
            self.nodes.entry(k).or_insert(v);
        }
        for (k, v) in other.pods {
            self.pods.entry(k).or_insert(v);
        }
    }
}

/// Partial points while decoding (every field optional until seen).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Partial {
    start: Option<Timestamp>,
    timestamp: Option<Timestamp>,
    cpu_ns: u64,
    memory: u64,
}

impl Partial {
    fn point(&self) -> Option<Point> {
        Some(Point {
            start: self.start,
            timestamp: self.timestamp?,
            cpu_ns: self.cpu_ns,
            memory: self.memory,
        })
    }
}

/// One series of the Prometheus text format: name, labels, value, timestamp (ms). Borrowed from
/// the page where it can be (a label value with escapes is the one copy): a scrape has a few
/// series per container of every pod on the node.
#[derive(Debug, PartialEq)]
struct Series<'a> {
    name: &'a str,
    labels: Vec<(&'a str, Cow<'a, str>)>,
    value: f64,
    timestamp_ms: Option<i64>,
}

impl<'a> Series<'a> {
    /// Where a label is (the last one, when a line repeats it).
    fn position(&self, key: &str) -> Option<usize> {
        self.labels.iter().rposition(|(k, _)| *k == key)
    }

    /// The value of a label, `""` when absent.
    #[cfg(test)]
    fn label(&self, key: &str) -> &str {
        self.position(key).map_or("", |i| &self.labels[i].1)
    }

    /// [`Series::label`], taken out of the series.
    fn take_label(&mut self, key: &str) -> Cow<'a, str> {
        match self.position(key) {
            Some(i) => std::mem::take(&mut self.labels[i].1),
            None => Cow::Borrowed(""),
        }
    }
}

/// Parses one sample line (`name{k="v",…} value [timestamp]`); `None` for what is not one.
fn parse_series(line: &str) -> Option<Series<'_>> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(['{', ' ', '\t']).unwrap_or(line.len());
    let name = line.get(..name_end)?;
    let mut rest = line.get(name_end..)?;
    let mut labels = Vec::new();
    if let Some(mut after) = rest.strip_prefix('{') {
        loop {
            after = after.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
            if let Some(r) = after.strip_prefix('}') {
                rest = r;
                break;
            }
            let eq = after.find('=')?;
            let key = after.get(..eq)?.trim();
            after = after.get(eq.saturating_add(1)..)?.strip_prefix('"')?;
            let stop = after.find(['"', '\\'])?;
            let value = if after.as_bytes().get(stop) == Some(&b'"') {
                // No escapes (nearly every value): the page's own text.
                let v = after.get(..stop)?;
                after = after.get(stop.saturating_add(1)..)?;
                Cow::Borrowed(v)
            } else {
                let mut v = after.get(..stop)?.to_string();
                let mut chars = after.get(stop..)?.char_indices();
                let mut close = None;
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => match chars.next().map(|(_, c)| c) {
                            Some('n') => v.push('\n'),
                            Some(c) => v.push(c),
                            None => return None,
                        },
                        '"' => {
                            close = Some(i);
                            break;
                        }
                        c => v.push(c),
                    }
                }
                after = after.get(stop.saturating_add(close?).saturating_add(1)..)?;
                Cow::Owned(v)
            };
            labels.push((key, value));
        }
    }
    let mut fields = rest.split_whitespace();
    let value = match fields.next()? {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse::<f64>().ok()?,
    };
    let timestamp_ms = match fields.next() {
        Some(t) => Some(t.parse::<i64>().ok()?),
        None => None,
    };
    Some(Series {
        name,
        labels,
        value,
        timestamp_ms,
    })
}

fn ms(t: i64) -> Option<Timestamp> {
    Timestamp::from_millisecond(t).ok()
}

/// Seconds (a float) as nanoseconds; negative and NaN values become 0, as far too large ones
/// saturate (Go's conversion is undefined there; nothing sane sends them).
fn nanos(seconds: f64) -> u64 {
    (seconds * 1e9) as u64
}

/// The families of `/metrics/resource` that [`decode`] reads.
const DECODED_FAMILIES: [&str; 5] = [
    "node_cpu_usage_seconds_total",
    "node_memory_working_set_bytes",
    "container_cpu_usage_seconds_total",
    "container_memory_working_set_bytes",
    "container_start_time_seconds",
];

/// Decodes a kubelet's `/metrics/resource` as metrics-server does: the node point is kept only
/// with a timestamp and non-zero CPU and memory; a pod is dropped when any of its containers has
/// zero cumulative CPU or zero memory; samples without a timestamp take `default_time` (the
/// scrape's start).
pub fn decode(text: &str, node: &str, default_time: Timestamp) -> Batch {
    let mut node_point = Partial::default();
    let mut pods: Containers<'_> = BTreeMap::new();
    for line in text.lines() {
        // Only five families matter: the others' labels are not parsed at all.
        let name = line
            .trim_start()
            .split(['{', ' ', '\t'])
            .next()
            .unwrap_or_default();
        if !DECODED_FAMILIES.contains(&name) {
            continue;
        }
        let Some(mut s) = parse_series(line) else {
            continue;
        };
        let at = s.timestamp_ms.and_then(ms).unwrap_or(default_time);
        match s.name {
            "node_cpu_usage_seconds_total" => {
                node_point.cpu_ns = nanos(s.value);
                node_point.timestamp = Some(at);
            }
            "node_memory_working_set_bytes" => {
                node_point.memory = s.value as u64;
                node_point.timestamp = Some(at);
            }
            "container_cpu_usage_seconds_total" => {
                let p = pod_entry(&mut pods, &mut s);
                p.cpu_ns = nanos(s.value);
                p.timestamp = Some(at);
            }
            "container_memory_working_set_bytes" => {
                let p = pod_entry(&mut pods, &mut s);
                p.memory = s.value as u64;
                p.timestamp = Some(at);
            }
            "container_start_time_seconds" => {
                let p = pod_entry(&mut pods, &mut s);
                // The value is the start in seconds since the epoch (not the sample's time).
                p.start = Timestamp::from_nanosecond((s.value * 1e9) as i128).ok();
            }
            _ => {}
        }
    }
    let mut batch = Batch::default();
    if let Some(p) = node_point.point()
        && p.cpu_ns != 0
        && p.memory != 0
    {
        batch.nodes.insert(node.to_string(), p);
    }
    for ((namespace, pod), containers) in pods {
        let pod = (namespace.into_owned(), pod.into_owned());
        let mut points = ContainerPoints::default();
        let mut complete = true;
        for (name, c) in containers {
            if c == Partial::default() {
                continue;
            }
            match c.point() {
                Some(p) if p.cpu_ns != 0 && p.memory != 0 => {
                    points.insert(name.into_owned(), p);
                }
                _ => {
                    complete = false;
                    break;
                }
            }
        }
        if complete && !points.is_empty() {
            batch.pods.insert(pod, points);
        }
    }
    batch
}

/// The partial points of each container of each pod on a page, keyed by the page's text.
type Containers<'a> = BTreeMap<(Cow<'a, str>, Cow<'a, str>), BTreeMap<Cow<'a, str>, Partial>>;

fn pod_entry<'a, 'p>(pods: &'p mut Containers<'a>, s: &mut Series<'a>) -> &'p mut Partial {
    let pod = (s.take_label("namespace"), s.take_label("pod"));
    pods.entry(pod)
        .or_default()
        .entry(s.take_label("container"))
        .or_default()
}

/// Go's zero time stands for a missing start: before every timestamp.
fn start_ms(p: &Point) -> i64 {
    p.start.map_or(i64::MIN, |t| t.as_millisecond())
}

/// The usage between two points of one node or container (upstream's `resourceUsage`): `None`
/// when the later point started earlier, its CPU went down, or no time passed.
pub fn resource_usage(last: &Point, prev: &Point) -> Option<(Usage, Timestamp, Duration)> {
    if start_ms(last) < start_ms(prev) || last.cpu_ns < prev.cpu_ns {
        return None;
    }
    let window = last.timestamp.duration_since(prev.timestamp);
    let window = Duration::try_from(window).ok().filter(|w| !w.is_zero())?;
    // Nanocores = CPU nanoseconds per second of window, in exact integer arithmetic: upstream
    // divides in float64, whose rounding truncates an exact 250m over a 14.085 s window to
    // 249999999n (the nanosecond timestamps of a real node seldom give such round values).
    // The counters themselves are read as upstream reads them (`nanos`, truncating), so a
    // counter can still come out 1 ns short and the rate 1n below the model's.
    let cpu = u128::from(last.cpu_ns.saturating_sub(prev.cpu_ns))
        .saturating_mul(1_000_000_000)
        .checked_div(window.as_nanos())?;
    Some((
        Usage {
            cpu_nanocores: u64::try_from(cpu).unwrap_or(u64::MAX),
            memory_bytes: last.memory,
        },
        last.timestamp,
        window,
    ))
}

/// Milliseconds from `a` to `b` (negative when `b` is earlier).
fn since_ms(b: &Timestamp, a: i64) -> i64 {
    b.as_millisecond().saturating_sub(a)
}

/// metrics-server's in-memory storage: the last two points of every node and container.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Storage {
    last_nodes: BTreeMap<String, Point>,
    prev_nodes: BTreeMap<String, Point>,
    last_pods: BTreeMap<PodRef, ContainerPoints>,
    prev_pods: BTreeMap<PodRef, ContainerPoints>,
}

impl Storage {
    /// Stores one scrape of every node. What the batch lacks is forgotten: a node that did not
    /// answer has no metrics until it has answered twice again.
    pub fn store(&mut self, batch: Batch, resolution: Duration) {
        let mut last_nodes = BTreeMap::new();
        let mut prev_nodes = BTreeMap::new();
        for (name, new) in batch.nodes {
            if let Some(last) = self.last_nodes.get(&name) {
                if new.timestamp > last.timestamp {
                    prev_nodes.insert(name.clone(), *last);
                } else if let Some(prev) = self.prev_nodes.get(&name)
                    && prev.timestamp < new.timestamp
                {
                    prev_nodes.insert(name.clone(), *prev);
                }
            }
            last_nodes.insert(name, new);
        }
        self.last_nodes = last_nodes;
        self.prev_nodes = prev_nodes;

        let resolution_ms = i64::try_from(resolution.as_millis()).unwrap_or(i64::MAX);
        let fresh_ms =
            i64::try_from(FRESH_CONTAINER_MIN_METRICS_RESOLUTION.as_millis()).unwrap_or(i64::MAX);
        let mut last_pods = BTreeMap::new();
        let mut prev_pods = BTreeMap::new();
        for (pod, containers) in batch.pods {
            let mut prev_containers = ContainerPoints::default();
            for (name, new) in containers.iter() {
                let age = since_ms(&new.timestamp, start_ms(new));
                if age > 0 && age < resolution_ms && age >= fresh_ms {
                    // A container that started since the last scrape (but not just now): its
                    // start is a first point with no CPU used, so one scrape gives it metrics.
                    let mut first = *new;
                    first.timestamp = new.start.unwrap_or(new.timestamp);
                    first.cpu_ns = 0;
                    prev_containers.insert(name.clone(), first);
                } else if let Some(last) = self.last_pods.get(&pod).and_then(|p| p.get(name))
                    // Not restarted since the stored point.
                    && start_ms(new) < last.timestamp.as_millisecond()
                {
                    if new.timestamp > last.timestamp {
                        prev_containers.insert(name.clone(), *last);
                    } else if let Some(prev) = self.prev_pods.get(&pod).and_then(|p| p.get(name))
                        && prev.timestamp < new.timestamp
                    {
                        prev_containers.insert(name.clone(), *prev);
                    }
                }
            }
            if !prev_containers.is_empty() {
                prev_pods.insert(pod.clone(), prev_containers);
            }
            last_pods.insert(pod, containers);
        }
        self.last_pods = last_pods;
        self.prev_pods = prev_pods;
    }

    /// A node's usage, once it has two points.
    pub fn node(&self, name: &str) -> Option<NodeUsage> {
        let last = self.last_nodes.get(name)?;
        let prev = self.prev_nodes.get(name)?;
        let (usage, timestamp, window) = resource_usage(last, prev)?;
        Some(NodeUsage {
            timestamp,
            window,
            usage,
        })
    }

    /// A pod's usage, once every container it last reported has two points. Its timestamp and
    /// window are those of the container sampled earliest.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<PodUsage> {
        let key = (namespace.to_string(), name.to_string());
        let last = self.last_pods.get(&key)?;
        let prev = self.prev_pods.get(&key)?;
        let mut containers = Vec::new();
        let mut earliest: Option<(Timestamp, Duration)> = None;
        for (c, last) in last.iter() {
            let prev = prev.get(c)?;
            let Some((usage, ts, window)) = resource_usage(last, prev) else {
                continue;
            };
            containers.push((c.clone(), usage));
            if earliest.is_none_or(|(t, _)| t > ts) {
                earliest = Some((ts, window));
            }
        }
        let (timestamp, window) = earliest?;
        Some(PodUsage {
            timestamp,
            window,
            containers,
        })
    }

    /// Whether anything can be served yet (upstream's readiness: a node with two points).
    pub fn ready(&self) -> bool {
        !self.prev_nodes.is_empty()
    }
}

#[cfg(test)]
mod tests;
