//! Why is this pod still Terminating, when will it be evicted, why was no replacement created:
//! pure explanations of a [`Snapshot`] of API objects at an instant `now`.
//!
//! `klab why` fills the snapshot from any cluster's API, `klab sim` from its own at the end of a
//! run; both call [`explain`] and [`render_text`], so the two always say the same thing. The rules
//! and numbers are upstream's (node lifecycle controller, taint eviction, pod GC, workload
//! controllers; v1.33 defaults unless the kube-controller-manager flags are known).
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))] // tests compute expectations freely

mod explain;
pub mod fetch;
mod render;

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use serde::Serialize;

pub use explain::{explain, explain_stuck_pods, pod_status};
pub use render::{format_span, render_text};

/// The kube-controller-manager settings the explanations quote (upstream v1.33 defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub node_monitor_period: Duration,
    pub node_monitor_grace_period: Duration,
    pub node_startup_grace_period: Duration,
    pub node_eviction_rate: f64,
    pub secondary_node_eviction_rate: f64,
    pub large_cluster_size_threshold: u64,
    pub unhealthy_zone_threshold: f64,
    /// The pod garbage collector's pass period and its quarantine of a vanished node's pods.
    pub pod_gc_period: Duration,
    pub pod_gc_quarantine: Duration,
    /// False when these are upstream's defaults rather than the cluster's known flags.
    pub known: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            node_monitor_period: Duration::from_secs(5),
            node_monitor_grace_period: Duration::from_secs(50),
            node_startup_grace_period: Duration::from_secs(60),
            node_eviction_rate: 0.1,
            secondary_node_eviction_rate: 0.01,
            large_cluster_size_threshold: 50,
            unhealthy_zone_threshold: 0.55,
            pod_gc_period: Duration::from_secs(20),
            pod_gc_quarantine: Duration::from_secs(40),
            known: false,
        }
    }
}

impl Settings {
    /// Applies one kube-controller-manager flag by its upstream name. `Ok(false)` for flags the
    /// explanations do not quote; `Err` for a value that does not parse.
    pub fn set_flag(&mut self, name: &str, value: &str) -> Result<bool, String> {
        let dur = || klab_api::parse_duration(value).map_err(|e| format!("--{name}: {e}"));
        let num = || {
            value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("--{name}: invalid number {value:?}"))
        };
        match name.trim_start_matches("--") {
            "node-monitor-period" => self.node_monitor_period = dur()?,
            "node-monitor-grace-period" => self.node_monitor_grace_period = dur()?,
            "node-startup-grace-period" => self.node_startup_grace_period = dur()?,
            "node-eviction-rate" => self.node_eviction_rate = num()?,
            "secondary-node-eviction-rate" => self.secondary_node_eviction_rate = num()?,
            "unhealthy-zone-threshold" => self.unhealthy_zone_threshold = num()?,
            "large-cluster-size-threshold" => {
                self.large_cluster_size_threshold = value
                    .parse()
                    .map_err(|_| format!("--{name}: invalid integer {value:?}"))?
            }
            _ => return Ok(false),
        }
        self.known = true;
        Ok(true)
    }

    /// Applies the flags of a kube-controller-manager command line (`--name=value` or
    /// `--name value`); values that do not parse are skipped (the defaults stay).
    pub fn apply_args<'s>(&mut self, args: impl IntoIterator<Item = &'s str>) {
        let args: Vec<&str> = args.into_iter().collect();
        for (i, a) in args.iter().enumerate() {
            let Some(flag) = a.strip_prefix("--") else {
                continue;
            };
            let (name, value) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (flag, args.get(i.saturating_add(1)).copied()),
            };
            if let Some(v) = value {
                let _ = self.set_flag(name, v);
            }
        }
    }
}

/// What was read from the cluster at `now`. Lists that could not be read are empty and named in
/// `unreadable` (with the server's reason), so an explanation can say what it could not see.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub now: Timestamp,
    pub pods: Vec<Pod>,
    pub nodes: Vec<Node>,
    /// `None` when the cluster has no Leases or they could not be read.
    pub leases: Option<Vec<Lease>>,
    /// The Events about pods but for the routine ones ([`fetch::explaining_events`]): all that
    /// explanations read.
    pub events: Vec<Event>,
    pub replica_sets: Vec<ReplicaSet>,
    pub deployments: Vec<Deployment>,
    pub stateful_sets: Vec<StatefulSet>,
    pub daemon_sets: Vec<DaemonSet>,
    pub jobs: Vec<Job>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub volume_attachments: Vec<VolumeAttachment>,
    pub settings: Settings,
    /// `"<resource>: <reason>"` for every list that failed.
    pub unreadable: Vec<String>,
}

/// What to explain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Kind {
    Pod,
    Node,
    Deployment,
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    Job,
}

impl Kind {
    /// The kind as `kubectl` spells it on the command line: singular, plural or short name.
    pub fn parse(s: &str) -> Option<Kind> {
        let s = s.to_ascii_lowercase();
        let s = s.split('.').next().unwrap_or_default(); // `deployments.apps`
        Some(match s {
            "po" | "pod" | "pods" => Kind::Pod,
            "no" | "node" | "nodes" => Kind::Node,
            "deploy" | "deployment" | "deployments" => Kind::Deployment,
            "rs" | "replicaset" | "replicasets" => Kind::ReplicaSet,
            "sts" | "statefulset" | "statefulsets" => Kind::StatefulSet,
            "ds" | "daemonset" | "daemonsets" => Kind::DaemonSet,
            "job" | "jobs" => Kind::Job,
            _ => return None,
        })
    }

    /// The lower-case plural of upstream's NotFound message (`pods "x" not found`).
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Pod => "pods",
            Kind::Node => "nodes",
            Kind::Deployment => "deployments.apps",
            Kind::ReplicaSet => "replicasets.apps",
            Kind::StatefulSet => "statefulsets.apps",
            Kind::DaemonSet => "daemonsets.apps",
            Kind::Job => "jobs.batch",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::Node => "Node",
            Kind::Deployment => "Deployment",
            Kind::ReplicaSet => "ReplicaSet",
            Kind::StatefulSet => "StatefulSet",
            Kind::DaemonSet => "DaemonSet",
            Kind::Job => "Job",
        }
    }
}

impl Target {
    /// `kind/name` (as kubectl accepts it) in `namespace` (ignored for nodes).
    pub fn parse(s: &str, namespace: &str) -> Result<Target, String> {
        let (kind, name) = s.split_once('/').ok_or_else(|| {
            format!("expected KIND/NAME (e.g. pod/web-1, node/n2, deployment/nginx), got {s:?}")
        })?;
        let kind = Kind::parse(kind).ok_or_else(|| {
            format!(
                "cannot explain {kind:?}: one of pod, node, deployment, replicaset, statefulset, daemonset, job"
            )
        })?;
        if name.is_empty() || name.contains('/') {
            return Err(format!("invalid name {name:?} in {s:?}"));
        }
        Ok(Target {
            kind,
            namespace: if kind == Kind::Node {
                String::new()
            } else {
                namespace.to_string()
            },
            name: name.to_string(),
        })
    }
}

/// How instants are written: wall-clock UTC (`klab why`) or time since the start of a run
/// (`klab sim`, whose traces count from its virtual epoch).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimeStyle {
    Wall,
    Elapsed(Timestamp),
}

impl TimeStyle {
    pub fn format(self, t: Timestamp) -> String {
        match self {
            TimeStyle::Wall => jiff::fmt::strtime::format("%H:%M:%S", t).unwrap_or_default(),
            TimeStyle::Elapsed(epoch) => {
                let d = t.duration_since(epoch);
                let d = Duration::try_from(d).unwrap_or_default();
                klab_api::clock::format_elapsed(d)
            }
        }
    }
}

/// Why one object is in its state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    pub kind: Kind,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    /// What `kubectl get` would show, e.g. `Terminating`, `NotReady`, `2/3 available`.
    pub state: String,
    /// Something is stuck or still pending (the exit code of `klab why`).
    pub stuck: bool,
    /// The chain of causes, oldest first, then what will happen next.
    pub causes: Vec<Cause>,
    /// A node's pods, a workload's missing or unready replicas.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Explanation>,
    /// What could not be read, so the explanation may be incomplete.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
}

/// One link of the chain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cause {
    /// What it is about: the node under the pod, the pod itself, its owner, or what comes next.
    pub about: About,
    pub text: String,
    /// When it started (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// When the next step is due (RFC 3339), for countdowns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum About {
    Node,
    Pod,
    Owner,
    Next,
}

/// Why `explain` could not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WhyError {
    /// Upstream's NotFound text, e.g. `pods "web-9" not found`.
    NotFound(String),
}

impl std::fmt::Display for WhyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WhyError::NotFound(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for WhyError {}

/// The explanation as JSON (`-o json`).
pub fn render_json(e: &Explanation) -> String {
    serde_json::to_string_pretty(e).unwrap_or_default()
}

/// The explanation as YAML (`-o yaml`).
pub fn render_yaml(e: &Explanation) -> String {
    serde_saphyr::to_string(e).unwrap_or_default()
}
