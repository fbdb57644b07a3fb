//! The scenario file format: parsing (serde-saphyr) and validation into typed, line-numbered plans.
//!
//! Everything here is pure: a scenario is read, checked and turned into a [`Scenario`] before any
//! cluster starts, so a bad duration, an unknown fault or node, or a malformed manifest is rejected
//! with the line it was written on and never half-way through a run.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use klab_api::selector::LabelSelector;
use klab_api::supervise::ComponentOp;
use klab_apiserver::registry::ResourceInfo;
use klab_cluster::control::{Brownout, BrownoutError};
use klab_cluster::{Cluster, ClusterConfig, NodeFault, NodeSpec};
use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::manifest::{self, Manifest};

/// Why a scenario was rejected before the run. Every variant names the file, and the line when
/// the problem has one.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{file}:{line}: {msg}")]
    At {
        file: String,
        line: u64,
        msg: String,
    },
    #[error("{file}: {msg}")]
    File { file: String, msg: String },
}

/// A validated scenario, ready to run.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Where it was read from (for messages and the replay command).
    pub path: PathBuf,
    pub name: String,
    pub description: String,
    /// The seed of the run unless `--seed` overrides it.
    pub seed: u64,
    /// Virtual epoch (`Clock::virtual_at`); `None` is `DEFAULT_VIRTUAL_EPOCH`.
    pub epoch: Option<jiff::Timestamp>,
    /// Nodes and component flags, already applied with `Cluster::set_flag`.
    pub cluster: ClusterConfig,
    /// `(flag, value)` as written, for the summary.
    pub flags: Vec<(String, String)>,
    /// Objects created at t = 0, in order.
    pub manifests: Vec<Manifest>,
    /// Faults and API actions, sorted by time (file order within one instant).
    pub steps: Vec<Step>,
    pub run_for: Duration,
    pub expectations: Vec<Expectation>,
    /// Kinds whose whole objects the runner records, because an `object:` expectation (or a
    /// `wait-for` on one) reads them; sorted, each once.
    pub object_kinds: Vec<&'static ResourceInfo>,
}

/// One timed entry of the fault plan.
#[derive(Debug, Clone)]
pub struct Step {
    pub at: Duration,
    pub line: u64,
    pub action: Action,
}

/// What a step does. Node faults act at the node's seams (through `Cluster::apply_fault`); the
/// others are API calls the runner makes as the cluster administrator, like kubectl would.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Fault {
        node: String,
        fault: NodeFault,
    },
    /// `kubectl taint nodes NODE key[=value]:Effect`
    Taint {
        node: String,
        taint: TaintSpec,
    },
    /// `kubectl taint nodes NODE key[:Effect]-`
    Untaint {
        node: String,
        taint: TaintSpec,
    },
    /// `kubectl cordon` / `uncordon`.
    Cordon {
        node: String,
        unschedulable: bool,
    },
    /// `kubectl drain NODE [flags]`, running beside the timeline.
    Drain {
        node: String,
        opts: crate::drain::DrainOptions,
    },
    /// `kubectl delete node`.
    DeleteNode {
        node: String,
    },
    /// `klab node memory-pressure|disk-pressure|pid-pressure NODE --available Q`, or `relieve`:
    /// what the node's eviction signals observe (`Cluster::apply_pressure`).
    Pressure {
        node: String,
        fault: String,
        available: Option<String>,
    },
    /// `node-condition` / `clear-node-condition`: the node's kubelet reports a chosen condition
    /// (`Cluster::set_node_condition`) until cleared (`report: None`).
    NodeCondition {
        node: String,
        type_: String,
        report: Option<klab_cluster::ConditionOverride>,
    },
    /// `image-pull-fail` / `image-pull-heal`: pulls of an image fail on one node or on all
    /// (`Cluster::image_pull_fault`), with the runtime's error (`message`) or containerd's
    /// not-found answer.
    ImagePull {
        node: Option<String>,
        image: String,
        fail: bool,
        message: Option<String>,
    },
    /// `reboot` with `cpu`, `memory` or `labels`: the machine comes back resized or with new
    /// `--node-labels` (`Cluster::reboot_node_with`).
    RebootWith {
        node: String,
        cpu: Option<String>,
        memory: Option<String>,
        labels: Option<BTreeMap<String, String>>,
    },
    /// `kubectl annotate pod POD|-l SELECTOR --overwrite probe.klab.dev/CONTAINER.KIND=RESULT`: a
    /// container's startup, readiness or liveness probe answers RESULT from its next tick on.
    Probe {
        namespace: String,
        pod: Option<String>,
        selector: Option<String>,
        container: String,
        /// `startup`, `readiness` or `liveness`.
        kind: String,
        /// The annotation value (`klab_api::probe_script`): `success`, `failure: <output>`,
        /// `exit: 1`, `http: 500`, `grpc: NOT_SERVING`, `refused`, `timeout`.
        value: String,
    },
    /// `klab node rejoin`: the kubelet restarts and registers again (`Cluster::rejoin_node`).
    Rejoin {
        node: String,
    },
    /// `klab node add`: a new machine boots and its kubelet registers (`Cluster::add_node`).
    AddNode {
        spec: NodeSpec,
    },
    /// `klab node remove`: the machine powers off for good and its Node is deleted
    /// (`Cluster::remove_node`).
    RemoveNode {
        node: String,
    },
    /// `kubectl delete pod [--grace-period=N] [--force]`.
    DeletePod {
        namespace: String,
        name: String,
        grace: Option<i64>,
        force: bool,
    },
    /// `kubectl delete pods -l SELECTOR [--field-selector spec.nodeName=NODE] [--grace-period=N] [--force]`.
    DeletePods {
        namespace: String,
        selector: String,
        on_node: Option<String>,
        grace: Option<i64>,
        force: bool,
    },
    /// `kubectl scale KIND/NAME --replicas=N`.
    Scale {
        kind: String,
        namespace: String,
        name: String,
        replicas: i64,
    },
    /// `kubectl patch KIND/NAME --type=merge|json|strategic -p PATCH [--subresource=status]`.
    Patch {
        resource: &'static ResourceInfo,
        namespace: Option<String>,
        name: String,
        patch: serde_json::Value,
        patch_type: PatchType,
        subresource: Option<String>,
    },
    /// `kubectl delete KIND NAME [--cascade=background|foreground|orphan] [--grace-period=N]`,
    /// for any served kind.
    Delete {
        resource: &'static ResourceInfo,
        namespace: Option<String>,
        name: String,
        propagation: Option<Propagation>,
        grace: Option<i64>,
    },
    /// `POST pods/NAME/eviction` (what `kubectl drain` sends for each pod): a budget's 429 and
    /// any other refusal go into the trace as kubectl prints them.
    Evict {
        namespace: String,
        name: String,
        grace: Option<i64>,
    },
    /// Holds the plan until the expectation holds (or `timeout` passes, a failed expectation):
    /// later steps keep their distance from this one, counted from the moment it held.
    WaitFor {
        until: WaitSpec,
        timeout: Duration,
    },
    /// `kubectl create -f` at a later time.
    Apply {
        manifests: Vec<Manifest>,
    },
    /// `klab volume fail|heal NAME`: a volume's simulated CSI backend fails or heals
    /// (`Cluster::volume_fault`; NAME a PersistentVolume or a `[namespace/]claim`).
    VolumeFault {
        name: String,
        fail: bool,
    },
    /// `kubectl annotate pod POD|-l SELECTOR --overwrite usage.klab.dev/CONTAINER=VALUE`: the
    /// container's modelled usage changes (the kubelet re-anchors the running instance's model).
    Usage {
        namespace: String,
        /// A pod name, or every pod a label selector matches.
        pod: Option<String>,
        selector: Option<String>,
        container: String,
        value: String,
    },
    /// `kubectl logs POD [-c CONTAINER] [--tail=N]`: its output or error lines go into the trace.
    Logs {
        namespace: String,
        name: String,
        container: Option<String>,
        tail: Option<i64>,
    },
    /// `kubectl exec POD [-c CONTAINER] -- COMMAND…` (over WebSocket `v5.channel.k8s.io`, as
    /// kubectl ≥ 1.30): its output or error lines go into the trace.
    Exec {
        namespace: String,
        name: String,
        container: Option<String>,
        command: Vec<String>,
    },
    // ---- control-plane faults ----
    /// `klab component stop|start|restart NAME` (`Cluster::control_component`): the API server,
    /// the controller manager, one controller or the scheduler.
    Component {
        component: String,
        op: ComponentOp,
    },
    /// `klab component brownout NAME`: a share of one client's requests fail and/or wait
    /// (`Cluster::brownout`); `None` ends it.
    Brownout {
        component: String,
        brownout: Option<Brownout>,
    },
    /// `klab node clock-skew NODE --offset D`: the machine's clock runs `offset` ahead (or
    /// behind, negative) of the cluster's (`Cluster::set_clock_skew`).
    ClockSkew {
        node: String,
        offset: jiff::SignedDuration,
    },
}

/// A client's step while `kube-apiserver` is stopped would be refused, as kubectl is by a
/// stopped API server ("The connection to the server … was refused"): refused when the scenario
/// loads, with the line of the step and of the stop. The plan's order is the order of `at`
/// (a `wait-for` shifts every later step alike), so the check is a walk over the sorted steps.
pub fn check_api_down_steps(steps: &[Step]) -> Result<(), (u64, String)> {
    let mut stopped: Option<&Step> = None;
    for step in steps {
        match &step.action {
            Action::Component { component, op }
                if component == klab_cluster::control::APISERVER =>
            {
                stopped = match op {
                    ComponentOp::Stop => Some(step),
                    ComponentOp::Start | ComponentOp::Restart => None,
                };
            }
            a if a.needs_api() => {
                if let Some(stop) = stopped {
                    return Err((
                        step.line,
                        format!(
                            "{:?} needs the API server, which is stopped at {} (line {}): kubectl would fail with \"The connection to the server was refused\"; start kube-apiserver first (component-start)",
                            a.describe(),
                            klab_api::clock::format_elapsed(stop.at),
                            stop.line
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

impl Action {
    /// Whether the step is a client's request to the API server (kubectl's verbs, a drain, an
    /// annotation): a client that a stopped `kube-apiserver` refuses. Node, machine and
    /// component faults act at the cluster's seams (`klab node …`, `klab component …`, which
    /// stay reachable), and a `wait-for` watches the trace, so they run while it is stopped.
    /// Exhaustive on purpose: a new action must say which it is.
    pub fn needs_api(&self) -> bool {
        match self {
            Action::Taint { .. }
            | Action::Untaint { .. }
            | Action::Cordon { .. }
            | Action::Drain { .. }
            | Action::DeleteNode { .. }
            | Action::Probe { .. }
            | Action::DeletePod { .. }
            | Action::DeletePods { .. }
            | Action::Scale { .. }
            | Action::Patch { .. }
            | Action::Delete { .. }
            | Action::Evict { .. }
            | Action::Apply { .. }
            | Action::Usage { .. }
            | Action::Logs { .. }
            | Action::Exec { .. } => true,
            Action::Fault { .. }
            | Action::Pressure { .. }
            | Action::NodeCondition { .. }
            | Action::ImagePull { .. }
            | Action::RebootWith { .. }
            | Action::Rejoin { .. }
            | Action::AddNode { .. }
            | Action::RemoveNode { .. }
            | Action::WaitFor { .. }
            | Action::VolumeFault { .. }
            | Action::Component { .. }
            | Action::Brownout { .. }
            | Action::ClockSkew { .. } => false,
        }
    }

    /// The kubectl-like description printed in the trace (component `sim`).
    pub fn describe(&self) -> String {
        match self {
            Action::Fault { node, fault } => format!("Node {node} fault {}", fault_name(*fault)),
            Action::Taint { node, taint } => format!("Node {node} kubectl taint {taint}"),
            Action::Untaint { node, taint } => format!("Node {node} kubectl taint {taint}-"),
            Action::Cordon {
                node,
                unschedulable: true,
            } => format!("Node {node} kubectl cordon"),
            Action::Cordon {
                node,
                unschedulable: false,
            } => format!("Node {node} kubectl uncordon"),
            Action::Drain { node, opts } => {
                format!("Node {node} kubectl drain {node}{}", opts.flags())
            }
            Action::DeleteNode { node } => format!("Node {node} kubectl delete node"),
            Action::Rejoin { node } => format!("Node {node} klab node rejoin"),
            Action::Component { component, op } => {
                format!("Component {component} klab component {}", op.name())
            }
            Action::Brownout {
                component,
                brownout: None,
            } => format!("Component {component} brownout ends"),
            Action::ClockSkew { node, offset } => {
                let sign = if offset.is_negative() { "-" } else { "+" };
                let abs = std::time::Duration::from_nanos(
                    u64::try_from(offset.as_nanos().unsigned_abs()).unwrap_or(u64::MAX),
                );
                format!(
                    "Node {node} clock-skew {sign}{}",
                    klab_api::duration::format_go_duration(abs)
                )
            }
            Action::Brownout {
                component,
                brownout: Some(b),
            } => format!(
                "Component {component} brownout latency {} error-rate {} code {}",
                klab_api::duration::format_go_duration(b.latency),
                b.error_rate,
                b.error.code()
            ),
            Action::VolumeFault { name, fail } => format!(
                "Volume {name} klab volume {}",
                if *fail { "fail" } else { "heal" }
            ),
            Action::Pressure {
                node,
                fault,
                available,
            } => match available {
                Some(a) => format!("Node {node} fault {fault} --available {a}"),
                None => format!("Node {node} fault {fault}"),
            },
            Action::NodeCondition {
                node,
                type_,
                report: Some(r),
            } => format!(
                "Node {node} fault node-condition {}",
                ConditionSpec {
                    type_: type_.clone(),
                    status: r.status.clone(),
                    reason: r.reason.clone(),
                    message: r.message.clone(),
                }
            ),
            Action::NodeCondition {
                node,
                type_,
                report: None,
            } => format!("Node {node} fault clear-node-condition {type_}"),
            Action::ImagePull {
                node,
                image,
                fail,
                message,
            } => {
                let kind = if *fail {
                    "image-pull-fail"
                } else {
                    "image-pull-heal"
                };
                let mut s = match node {
                    Some(n) => format!("Node {n} fault {kind} {image}"),
                    None => format!("fault {kind} {image} (every node)"),
                };
                if let Some(m) = message {
                    s.push_str(&format!(": {m}"));
                }
                s
            }
            Action::Probe {
                namespace,
                pod,
                selector,
                container,
                kind,
                value,
            } => {
                let kv = format!("probe.klab.dev/{container}.{kind}={value:?}");
                annotate_text(namespace, pod.as_deref(), selector.as_deref(), &kv)
            }
            Action::RebootWith {
                node,
                cpu,
                memory,
                labels,
            } => {
                let mut s = format!("Node {node} fault reboot");
                if let Some(c) = cpu {
                    s.push_str(&format!(" cpu={c}"));
                }
                if let Some(m) = memory {
                    s.push_str(&format!(" memory={m}"));
                }
                if let Some(l) = labels {
                    let kv: Vec<String> = l.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    s.push_str(&format!(" --node-labels={}", kv.join(",")));
                }
                s
            }
            Action::AddNode { spec } => match &spec.zone {
                Some(z) => format!("Node {} klab node add --zone {z}", spec.name),
                None => format!("Node {} klab node add", spec.name),
            },
            Action::RemoveNode { node } => format!("Node {node} klab node remove"),
            Action::DeletePod {
                namespace,
                name,
                grace,
                force,
            } => {
                let mut s = format!("Pod {namespace}/{name} kubectl delete pod");
                if let Some(g) = grace {
                    s.push_str(&format!(" --grace-period={g}"));
                }
                if *force {
                    s.push_str(" --force");
                }
                s
            }
            Action::DeletePods {
                namespace,
                selector,
                on_node,
                grace,
                force,
            } => {
                let mut s = format!("kubectl delete pods -n {namespace} -l {selector}");
                if let Some(n) = on_node {
                    s.push_str(&format!(" --field-selector spec.nodeName={n}"));
                }
                if let Some(g) = grace {
                    s.push_str(&format!(" --grace-period={g}"));
                }
                if *force {
                    s.push_str(" --force");
                }
                s
            }
            Action::Scale {
                kind,
                namespace,
                name,
                replicas,
            } => {
                format!("{kind} {namespace}/{name} kubectl scale --replicas={replicas}")
            }
            Action::Patch {
                resource,
                namespace,
                name,
                patch,
                patch_type,
                subresource,
            } => {
                let mut s = format!(
                    "{} kubectl patch --type={} -p '{patch}'",
                    object_label(resource, namespace.as_deref(), name),
                    patch_type.name()
                );
                if let Some(sub) = subresource {
                    s.push_str(&format!(" --subresource={sub}"));
                }
                s
            }
            Action::Delete {
                resource,
                namespace,
                name,
                propagation,
                grace,
            } => {
                let mut s = format!(
                    "{} kubectl delete {} {name}",
                    object_label(resource, namespace.as_deref(), name),
                    resource.singular
                );
                if let Some(p) = propagation {
                    s.push_str(&format!(" --cascade={}", p.cascade()));
                }
                if let Some(g) = grace {
                    s.push_str(&format!(" --grace-period={g}"));
                }
                s
            }
            Action::Evict {
                namespace,
                name,
                grace,
            } => {
                let mut s = format!("Pod {namespace}/{name} POST pods/eviction");
                if let Some(g) = grace {
                    s.push_str(&format!(" (gracePeriodSeconds {g})"));
                }
                s
            }
            Action::WaitFor { until, timeout } => format!(
                "wait-for {} (timeout {})",
                until.0.text,
                klab_api::clock::format_elapsed(*timeout)
            ),
            Action::Apply { manifests } => {
                let names: Vec<String> = manifests.iter().map(|m| m.display()).collect();
                format!("kubectl create {}", names.join(" "))
            }
            Action::Usage {
                namespace,
                pod,
                selector,
                container,
                value,
            } => {
                let kv = format!("usage.klab.dev/{container}={value}");
                annotate_text(namespace, pod.as_deref(), selector.as_deref(), &kv)
            }
            Action::Logs {
                namespace,
                name,
                container,
                tail,
            } => {
                let mut s = format!("Pod {namespace}/{name} kubectl logs");
                if let Some(c) = container {
                    s.push_str(&format!(" -c {c}"));
                }
                if let Some(t) = tail {
                    s.push_str(&format!(" --tail={t}"));
                }
                s
            }
            Action::Exec {
                namespace,
                name,
                container,
                command,
            } => {
                let mut s = format!("Pod {namespace}/{name} kubectl exec");
                if let Some(c) = container {
                    s.push_str(&format!(" -c {c}"));
                }
                // Arguments quoted as a shell user would type them.
                let args: Vec<String> = command
                    .iter()
                    .map(|a| {
                        if a.is_empty()
                            || a.contains(|c: char| c.is_whitespace() || "'\";&|$<>".contains(c))
                        {
                            format!("'{}'", a.replace('\'', "'\\''"))
                        } else {
                            a.clone()
                        }
                    })
                    .collect();
                format!("{s} -- {}", args.join(" "))
            }
        }
    }
}

/// A taint as kubectl writes it: `key[=value]:Effect` (the effect may be omitted for untaint).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TaintSpec {
    pub key: String,
    pub value: Option<String>,
    pub effect: Option<String>,
}

impl TaintSpec {
    /// Parses `key[=value][:Effect]`.
    pub fn parse(s: &str) -> Result<TaintSpec, String> {
        let s = s.trim();
        let (kv, effect) = match s.rsplit_once(':') {
            Some((kv, e)) => (kv, Some(e.to_string())),
            None => (s, None),
        };
        if let Some(e) = &effect
            && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&e.as_str())
        {
            return Err(format!(
                "invalid taint effect {e:?} (NoSchedule, PreferNoSchedule or NoExecute)"
            ));
        }
        let (key, value) = match kv.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (kv.to_string(), None),
        };
        if key.is_empty() {
            return Err(format!("invalid taint {s:?}: empty key"));
        }
        Ok(TaintSpec { key, value, effect })
    }
}

impl fmt::Display for TaintSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)?;
        if let Some(v) = &self.value {
            write!(f, "={v}")?;
        }
        if let Some(e) = &self.effect {
            write!(f, ":{e}")?;
        }
        Ok(())
    }
}

/// `Kind ns/name` (or `Kind name` for a cluster-scoped object), as trace lines name objects.
/// The trace text of `kubectl annotate` on one pod, or on the pods a selector picks.
/// A `probe` step's result must fit the probe it scripts: the step's pod (by name or selector)
/// is looked up among the scenario's manifests (pods and workload templates, at start or applied
/// by a step); where the container is found, it must have that probe, and the result must suit
/// its handler (an exit code for `exec`, a status code for `httpGet`, …). Pods the scenario does
/// not define are not checked.
fn check_probe_steps(cx: &Cx, steps: &[Step], manifests: &[Manifest]) -> Result<(), ScenarioError> {
    use klab_api::probe_script::{Handler, parse};
    let applied = steps.iter().flat_map(|s| match &s.action {
        Action::Apply { manifests } => manifests.as_slice(),
        _ => &[],
    });
    let all: Vec<&Manifest> = manifests.iter().chain(applied).collect();
    for step in steps {
        let Action::Probe {
            namespace,
            pod,
            selector,
            container,
            kind,
            value,
        } = &step.action
        else {
            continue;
        };
        let Ok(scripted) = parse(value) else { continue };
        let sel = selector
            .as_deref()
            .and_then(|s| LabelSelector::parse(s).ok());
        for m in &all {
            if m.namespace() != Some(namespace.as_str()) {
                continue;
            }
            let (labels, spec) = match m.kind() {
                "Pod" => ("/metadata/labels", "/spec"),
                "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Job" => {
                    ("/spec/template/metadata/labels", "/spec/template/spec")
                }
                _ => continue,
            };
            let matched = match (pod, &sel) {
                (Some(p), _) => match m.kind() {
                    "Pod" => m.name() == p,
                    // StatefulSet pods are NAME-ORDINAL; the others NAME-suffix.
                    "StatefulSet" => p
                        .strip_prefix(m.name())
                        .and_then(|r| r.strip_prefix('-'))
                        .is_some_and(|o| !o.is_empty() && o.bytes().all(|b| b.is_ascii_digit())),
                    _ => p.strip_prefix(m.name()).is_some_and(|r| r.starts_with('-')),
                },
                (None, Some(sel)) => sel.matches_json(m.object.pointer(labels)),
                (None, None) => false,
            };
            if !matched {
                continue;
            }
            let Some(c) = m
                .object
                .pointer(&format!("{spec}/containers"))
                .and_then(|v| v.as_array())
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c.get("name").and_then(|n| n.as_str()) == Some(container))
                })
            else {
                continue;
            };
            let what = format!(
                "container {container} of {} {} ({})",
                m.kind(),
                m.name(),
                m.source
            );
            let Some(probe) = c.get(format!("{kind}Probe")) else {
                return Err(cx.at(step.line, format!("{what} has no {kind} probe")));
            };
            let handler = [
                ("exec", Handler::Exec),
                ("httpGet", Handler::HttpGet),
                ("tcpSocket", Handler::TcpSocket),
                ("grpc", Handler::Grpc),
            ]
            .into_iter()
            .find(|(k, _)| probe.get(k).is_some())
            .map(|(_, h)| h);
            if let Some(h) = handler
                && let Err(e) = scripted.fits(h)
            {
                return Err(cx.at(step.line, format!("{kind} probe of {what}: {e}")));
            }
        }
    }
    Ok(())
}

fn annotate_text(namespace: &str, pod: Option<&str>, selector: Option<&str>, kv: &str) -> String {
    match (pod, selector) {
        (Some(p), _) => format!("Pod {namespace}/{p} kubectl annotate pod {p} --overwrite {kv}"),
        (None, Some(sel)) => {
            format!("kubectl annotate pods -n {namespace} -l {sel} --overwrite {kv}")
        }
        (None, None) => format!("kubectl annotate pods --overwrite {kv}"),
    }
}

pub fn object_label(r: &ResourceInfo, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if r.namespaced => format!("{} {ns}/{name}", r.kind),
        _ => format!("{} {name}", r.kind),
    }
}

/// kubectl patch's `--type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
}

impl PatchType {
    pub fn name(self) -> &'static str {
        match self {
            PatchType::Merge => "merge",
            PatchType::Json => "json",
            PatchType::Strategic => "strategic",
        }
    }

    /// The request's Content-Type.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::Strategic => "application/strategic-merge-patch+json",
        }
    }
}

/// DeleteOptions' `propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Foreground,
    Background,
    Orphan,
}

impl Propagation {
    pub fn policy(self) -> &'static str {
        match self {
            Propagation::Foreground => "Foreground",
            Propagation::Background => "Background",
            Propagation::Orphan => "Orphan",
        }
    }

    /// kubectl's `--cascade` value for it.
    pub fn cascade(self) -> &'static str {
        match self {
            Propagation::Foreground => "foreground",
            Propagation::Background => "background",
            Propagation::Orphan => "orphan",
        }
    }
}

/// The expectation a `wait-for` step waits on (compared by its line and text: a regex has no
/// equality).
#[derive(Debug, Clone)]
pub struct WaitSpec(pub Box<Expectation>);

impl PartialEq for WaitSpec {
    fn eq(&self, other: &Self) -> bool {
        self.0.line == other.0.line && self.0.text == other.0.text
    }
}

/// `condition: Type=Status` with optional `reason` and `message`, on a Node or any object with
/// `status.conditions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionSpec {
    pub type_: String,
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
}

impl fmt::Display for ConditionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.type_, self.status)?;
        match (&self.reason, &self.message) {
            (Some(r), Some(m)) => write!(f, " ({r}: {m})"),
            (Some(r), None) => write!(f, " ({r})"),
            (None, Some(m)) => write!(f, " (: {m})"),
            (None, None) => Ok(()),
        }
    }
}

/// An assertion about the cluster at a virtual time.
#[derive(Debug, Clone)]
pub struct Expectation {
    /// `None` = at the end of the run.
    pub at: Option<Duration>,
    /// For trace checks: only lines at or after this time count.
    pub from: Option<Duration>,
    pub line: u64,
    /// The expectation as written (one line), for failure messages.
    pub text: String,
    pub check: Check,
}

#[derive(Debug, Clone)]
pub enum Check {
    Node {
        name: String,
        exists: Option<bool>,
        /// kubectl STATUS column (`Ready`, `NotReady`, `Ready,SchedulingDisabled`).
        status: Option<String>,
        /// `Ready=Unknown`, optionally with its reason and message.
        condition: Option<ConditionSpec>,
        has_taints: Vec<TaintSpec>,
        no_taints: Vec<TaintSpec>,
    },
    Pod {
        namespace: String,
        name: String,
        exists: Option<bool>,
        status: Option<String>,
        ready: Option<String>,
        restarts: Option<i64>,
        node: Option<String>,
    },
    Pods {
        namespace: Option<String>,
        selector: Option<LabelSelector>,
        on_node: Option<String>,
        status: Option<String>,
        count: Count,
    },
    Trace {
        pattern: Pattern,
        present: bool,
    },
    /// Every Deployment, ReplicaSet, StatefulSet and DaemonSet (in `namespace`, or all) shows its
    /// spec carried out: observed generation current, all replicas updated, ready and available.
    WorkloadsConverged {
        namespace: Option<String>,
    },
    /// Every Service with a selector (in `namespace`, or all) has exactly its ready pods as
    /// ready endpoints in its EndpointSlices and no endpoint for a pod that is gone, and every
    /// PodDisruptionBudget has observed its generation and counts its healthy pods right.
    ServicesConverged {
        namespace: Option<String>,
    },
    /// Any object: it exists (or not), a JSONPath reaches something that equals / matches a
    /// value, a condition in `status.conditions` has a status, reason and message.
    Object {
        resource: &'static ResourceInfo,
        /// Empty for cluster-scoped kinds.
        namespace: String,
        name: String,
        exists: Option<bool>,
        path: Option<crate::jsonpath::JsonPath>,
        equals: Option<String>,
        matches: Option<regex::Regex>,
        condition: Option<ConditionSpec>,
    },
    /// API requests counted by the API server itself, per component (user) and verb, within
    /// `[from, at]`.
    Writes {
        filter: WriteFilter,
        count: Count,
    },
}

/// Which requests a `writes` expectation counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteFilter {
    /// `kubelet` (any node's), `kubelet/n1`, a controller's service account
    /// (`node-controller`), `kube-scheduler`, `kubectl` (the scenario's own requests), or a
    /// full user name.
    pub component: String,
    /// Upstream's verb (`PATCH`, `PUT`, `POST`, `DELETE`, …); `None` counts every write.
    pub verb: Option<String>,
    /// Plural resource (`nodes`, `leases`).
    pub resource: Option<String>,
    pub subresource: Option<String>,
    pub name: Option<String>,
}

impl WriteFilter {
    /// Whether `user` is this component.
    pub fn user_matches(&self, user: &str) -> bool {
        let c = self.component.as_str();
        match c {
            "kubelet" => user.starts_with("system:node:"),
            "kubectl" => user == "kubernetes-admin",
            _ => {
                if let Some(node) = c.strip_prefix("kubelet/") {
                    return user.strip_prefix("system:node:") == Some(node);
                }
                user == c
                    || user.strip_prefix("system:") == Some(c)
                    || user.strip_prefix("system:serviceaccount:kube-system:") == Some(c)
            }
        }
    }

    /// Whether a logged request is one this filter counts (reads never are).
    pub fn counts(
        &self,
        user: &str,
        verb: &str,
        resource: &str,
        subresource: &str,
        name: Option<&str>,
    ) -> bool {
        let write = matches!(
            verb,
            "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE" | "DELETECOLLECTION"
        );
        write
            && self.user_matches(user)
            && self.verb.as_deref().is_none_or(|v| v == verb)
            && self.resource.as_deref().is_none_or(|r| r == resource)
            && self.subresource.as_deref().is_none_or(|s| s == subresource)
            && self.name.as_deref().is_none_or(|n| Some(n) == name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    Exactly(usize),
    AtLeast(usize),
    AtMost(usize),
}

impl Count {
    pub fn holds(self, n: usize) -> bool {
        match self {
            Count::Exactly(c) => n == c,
            Count::AtLeast(c) => n >= c,
            Count::AtMost(c) => n <= c,
        }
    }
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Count::Exactly(c) => write!(f, "{c}"),
            Count::AtLeast(c) => write!(f, "at least {c}"),
            Count::AtMost(c) => write!(f, "at most {c}"),
        }
    }
}

/// A trace pattern: plain substring or regular expression.
#[derive(Debug, Clone)]
pub enum Pattern {
    Substring(String),
    Regex(regex::Regex),
}

impl Pattern {
    pub fn is_match(&self, line: &str) -> bool {
        match self {
            Pattern::Substring(s) => line.contains(s.as_str()),
            Pattern::Regex(r) => r.is_match(line),
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Substring(s) => write!(f, "{s:?}"),
            Pattern::Regex(r) => write!(f, "/{}/", r.as_str()),
        }
    }
}

/// Upstream-style name of a node fault, as written in scenario files.
pub fn fault_name(f: NodeFault) -> &'static str {
    match f {
        NodeFault::StopKubelet => "stop-kubelet",
        NodeFault::StartKubelet => "start-kubelet",
        NodeFault::PowerOff => "power-off",
        NodeFault::PowerOn => "power-on",
        NodeFault::Reboot => "reboot",
        NodeFault::Partition => "partition",
        NodeFault::Heal => "heal",
        NodeFault::Freeze => "freeze",
        NodeFault::Thaw => "thaw",
        NodeFault::Shutdown => "shutdown",
        NodeFault::ShutdownCancel => "shutdown-cancel",
        NodeFault::RuntimeDown => "runtime-down",
        NodeFault::RuntimeUp => "runtime-up",
        NodeFault::FailLeaseUpdates => "fail-lease-updates",
        NodeFault::HealLeaseUpdates => "heal-lease-updates",
        NodeFault::FailStatusUpdates => "fail-status-updates",
        NodeFault::HealStatusUpdates => "heal-status-updates",
    }
}

const NODE_FAULTS: &[NodeFault] = &[
    NodeFault::StopKubelet,
    NodeFault::StartKubelet,
    NodeFault::PowerOff,
    NodeFault::PowerOn,
    NodeFault::Reboot,
    NodeFault::Partition,
    NodeFault::Heal,
    NodeFault::Freeze,
    NodeFault::Thaw,
    NodeFault::Shutdown,
    NodeFault::ShutdownCancel,
    NodeFault::RuntimeDown,
    NodeFault::RuntimeUp,
    NodeFault::FailLeaseUpdates,
    NodeFault::HealLeaseUpdates,
    NodeFault::FailStatusUpdates,
    NodeFault::HealStatusUpdates,
];

const API_ACTIONS: &[&str] = &[
    "taint",
    "untaint",
    "cordon",
    "uncordon",
    "drain",
    "delete-node",
    "rejoin",
    "volume-fail",
    "volume-heal",
    "memory-pressure",
    "disk-pressure",
    "pid-pressure",
    "relieve",
    "node-condition",
    "clear-node-condition",
    "image-pull-fail",
    "image-pull-heal",
    "probe",
    "add-node",
    "remove-node",
    "delete-pod",
    "scale",
    "patch",
    "apply",
    "logs",
    "exec",
    "usage",
    "delete",
    "evict",
    "wait-for",
    "component-stop",
    "component-start",
    "component-restart",
    "brownout",
    "clock-skew",
];

// ---- raw (as written) form -------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawScenario {
    name: Option<String>,
    description: Option<String>,
    seed: Option<u64>,
    epoch: Option<Spanned<String>>,
    run_for: Spanned<String>,
    #[serde(default)]
    cluster: RawCluster,
    #[serde(default)]
    flags: BTreeMap<String, Spanned<Scalar>>,
    #[serde(default)]
    manifests: Vec<Spanned<RawManifest>>,
    #[serde(default)]
    faults: Vec<Spanned<RawStep>>,
    #[serde(default)]
    expect: Vec<Spanned<RawExpect>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    #[serde(default)]
    nodes: Vec<Spanned<RawNode>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawNode {
    name: Option<String>,
    /// With `count`: nodes `<prefix>1` … `<prefix><count>`.
    name_prefix: Option<String>,
    count: Option<u32>,
    zone: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    cpu: Option<Scalar>,
    memory: Option<String>,
    pods: Option<u32>,
    /// This node's KubeletConfiguration fields (`registerWithTaints`, `kubeReserved`, …).
    #[serde(default)]
    kubelet: BTreeMap<String, serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    file: Option<String>,
    inline: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawStep {
    at: Spanned<String>,
    /// May be left out when the step is `wait-for: {…}`.
    fault: Option<Spanned<String>>,
    node: Option<Spanned<String>>,
    taint: Option<String>,
    /// Pressure faults: the signal's available amount (`80Mi`, `500`).
    available: Option<Scalar>,
    pod: Option<String>,
    namespace: Option<String>,
    grace: Option<i64>,
    #[serde(default)]
    force: bool,
    target: Option<String>,
    replicas: Option<i64>,
    selector: Option<String>,
    on_node: Option<String>,
    patch: Option<serde_json::Value>,
    #[serde(default)]
    manifests: Vec<Spanned<RawManifest>>,
    // `drain` flags, named as kubectl's.
    #[serde(default)]
    ignore_daemonsets: bool,
    #[serde(default)]
    delete_emptydir_data: bool,
    #[serde(default)]
    disable_eviction: bool,
    timeout: Option<Spanned<String>>,
    skip_wait_for_delete_timeout: Option<u64>,
    container: Option<String>,
    tail: Option<i64>,
    #[serde(default)]
    command: Vec<String>,
    /// `add-node`: the new node's zone.
    zone: Option<String>,
    /// `volume-fail` / `volume-heal`: a PersistentVolume or `[namespace/]claim`.
    volume: Option<String>,
    /// `usage`: the container's `usage.klab.dev/<container>` value (`memory-growth=10Mi/min`).
    usage: Option<String>,
    /// `delete`: `Foreground`, `Background` or `Orphan`.
    propagation: Option<String>,
    /// `patch`: `status` (or another served subresource).
    subresource: Option<String>,
    /// `patch`: `merge` (default), `json` or `strategic`.
    #[serde(rename = "type")]
    patch_type: Option<String>,
    /// `wait-for`: the expectation the plan waits on.
    wait_for: Option<Box<Spanned<RawExpect>>>,
    /// `node-condition`: `Type=Status`; `clear-node-condition`: `Type`.
    condition: Option<String>,
    /// `node-condition`: the condition's reason and message; `image-pull-fail`: the pull error.
    reason: Option<String>,
    message: Option<String>,
    /// `image-pull-fail` / `image-pull-heal`: the image as pods name it.
    image: Option<String>,
    /// `probe`: `startup`, `readiness` or `liveness`, and what it answers (`success`, `failure`,
    /// `exit: 1`, `http: 500`, `grpc: NOT_SERVING`, `refused`, `timeout`).
    probe: Option<String>,
    result: Option<String>,
    /// `reboot`: the machine's new capacity and `--node-labels`.
    cpu: Option<Scalar>,
    memory: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    /// `component-stop|start|restart`, `brownout`: the component (`kube-apiserver`,
    /// `kube-controller-manager`, `kube-scheduler`, a controller, `kubelet/NODE`).
    component: Option<Spanned<String>>,
    /// `brownout`: the latency added to each request (Go duration).
    latency: Option<Spanned<String>>,
    /// `brownout`: the share of requests answered with `code`, in [0, 1].
    error_rate: Option<f64>,
    /// `brownout`: 500, 503 (default) or 429.
    code: Option<u16>,
    /// `brownout`: how long it lasts; without it, it lasts to the end of the run.
    duration: Option<Spanned<String>>,
    /// `clock-skew`: how far the node's clock is ahead (`2m`) or behind (`-2m`).
    offset: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawExpect {
    at: Option<Spanned<String>>,
    from: Option<Spanned<String>>,
    node: Option<Spanned<String>>,
    pod: Option<String>,
    pods: Option<RawPods>,
    exists: Option<bool>,
    status: Option<String>,
    condition: Option<String>,
    ready: Option<Scalar>,
    restarts: Option<i64>,
    on_node: Option<String>,
    #[serde(default)]
    has_taint: Vec<String>,
    #[serde(default)]
    no_taint: Vec<String>,
    count: Option<usize>,
    min_count: Option<usize>,
    max_count: Option<usize>,
    trace: Option<String>,
    trace_regex: Option<String>,
    #[serde(default)]
    absent: bool,
    workloads: Option<RawWorkloads>,
    services: Option<RawWorkloads>,
    object: Option<RawObjectRef>,
    jsonpath: Option<String>,
    equals: Option<Scalar>,
    matches: Option<String>,
    reason: Option<String>,
    message: Option<String>,
    writes: Option<RawWrites>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawObjectRef {
    kind: String,
    name: String,
    namespace: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWrites {
    component: String,
    verb: Option<String>,
    resource: Option<String>,
    subresource: Option<String>,
    name: Option<String>,
}

/// `workloads: converged` or `workloads: {converged: true, namespace: ns}` (and the same for
/// `services`).
#[derive(Deserialize)]
#[serde(untagged)]
enum RawWorkloads {
    Word(String),
    Filter {
        converged: bool,
        namespace: Option<String>,
    },
}

impl RawWorkloads {
    /// `Some(namespace filter)` for the forms that ask for convergence.
    fn converged_in(&self) -> Option<Option<String>> {
        match self {
            RawWorkloads::Word(word) if word == "converged" => Some(None),
            RawWorkloads::Filter {
                converged: true,
                namespace,
            } => Some(namespace.clone()),
            _ => None,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPods {
    namespace: Option<String>,
    selector: Option<String>,
}

/// A YAML scalar of any type, kept as the string it was written as (flags: `40s`, `100`).
struct Scalar(String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a scalar (string, number or boolean)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

// ---- validation ------------------------------------------------------------------------------

/// Reads and validates a scenario file.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::File {
        file: path.display().to_string(),
        msg: format!("cannot read: {e}"),
    })?;
    parse(&text, path)
}

/// Validates scenario text; `path` names it in messages and anchors relative manifest paths.
pub fn parse(text: &str, path: &Path) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let raw: RawScenario = serde_saphyr::from_str(text).map_err(|e| yaml_error(&file, 0, &e))?;
    let cx = Cx {
        file: file.clone(),
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
    };

    let mut cluster = ClusterConfig::default();
    let mut names = BTreeSet::new();
    for n in &raw.cluster.nodes {
        let line = n.referenced.line();
        for spec in cx.node_specs(&n.value, line)? {
            if !names.insert(spec.name.clone()) {
                return Err(cx.at(line, format!("duplicate node {:?}", spec.name)));
            }
            cluster.nodes.push(spec);
        }
    }

    let mut flags = Vec::new();
    for (name, v) in &raw.flags {
        let name = name.trim_start_matches('-');
        Cluster::set_flag(&mut cluster, name, &v.value.0)
            .map_err(|e| cx.at(v.referenced.line(), e.to_string()))?;
        flags.push((name.to_string(), v.value.0.clone()));
    }
    // Flags checked against each other: reported at the last flag's line.
    let last_flag_line = raw
        .flags
        .values()
        .map(|v| v.referenced.line())
        .max()
        .unwrap_or(1);
    Cluster::validate_config(&cluster).map_err(|e| cx.at(last_flag_line, e.to_string()))?;

    let mut manifests = Vec::new();
    for m in &raw.manifests {
        manifests.extend(cx.manifests(&m.value, m.referenced.line())?);
    }
    // Node objects a scenario creates itself are as good as cluster nodes for actions on them.
    for m in &manifests {
        if m.kind() == "Node" {
            names.insert(m.name().to_string());
        }
    }

    let run_for = cx.duration(&raw.run_for)?;
    if run_for.is_zero() {
        return Err(cx.at(
            raw.run_for.referenced.line(),
            "run-for must be positive".into(),
        ));
    }

    // Machines that join during the run are nodes like the others for every step and expectation.
    for s in &raw.faults {
        if s.value
            .fault
            .as_ref()
            .is_some_and(|f| f.value == "add-node")
            && let Some(n) = &s.value.node
        {
            let errs = klab_api::selector::is_dns1123_subdomain(&n.value);
            if !errs.is_empty() {
                return Err(cx.at(
                    n.referenced.line(),
                    format!("invalid node name {:?}: {}", n.value, errs.join("; ")),
                ));
            }
            if cluster.nodes.iter().any(|c| c.name == n.value) {
                return Err(cx.at(
                    n.referenced.line(),
                    format!("node {:?} is already a cluster node", n.value),
                ));
            }
            names.insert(n.value.clone());
        }
    }

    let mut steps = Vec::new();
    for s in &raw.faults {
        let step = cx.step(&s.value, s.referenced.line(), &names, text)?;
        if step.at > run_for {
            return Err(cx.at(
                step.line,
                format!("step at {:?} is after run-for {:?}", step.at, run_for),
            ));
        }
        // A brownout with a `duration` ends by itself: its end is a step of its own.
        let end = match (&step.action, &s.value.duration) {
            (Action::Brownout { component, .. }, Some(d)) => {
                Some((step.at.saturating_add(cx.duration(d)?), component.clone()))
            }
            (_, Some(d)) => {
                return Err(cx.at(
                    d.referenced.line(),
                    "`duration` is only for brownout".into(),
                ));
            }
            _ => None,
        };
        let line = step.line;
        steps.push(step);
        if let Some((at, component)) = end
            && at <= run_for
        {
            steps.push(Step {
                at,
                line,
                action: Action::Brownout {
                    component,
                    brownout: None,
                },
            });
        }
    }
    steps.sort_by_key(|s| s.at); // stable: file order within one instant
    check_probe_steps(&cx, &steps, &manifests)?;
    check_api_down_steps(&steps).map_err(|(line, msg)| cx.at(line, msg))?;

    let mut expectations = Vec::new();
    for e in &raw.expect {
        let line = e.referenced.line();
        let exp = cx.expectation(&e.value, line, &names, text)?;
        if let Some(at) = exp.at
            && at > run_for
        {
            return Err(cx.at(
                line,
                format!("expectation at {at:?} is after run-for {run_for:?}"),
            ));
        }
        expectations.push(exp);
    }

    let mut object_kinds: Vec<&'static ResourceInfo> = Vec::new();
    let waits = steps.iter().filter_map(|s| match &s.action {
        Action::WaitFor { until, .. } => Some(&*until.0),
        _ => None,
    });
    for e in expectations.iter().chain(waits) {
        let wanted: Vec<&'static ResourceInfo> = match &e.check {
            Check::Object { resource, .. } => vec![resource],
            // Read whole: the Services' selectors and the budgets' status.
            Check::ServicesConverged { .. } => ["Service", "PodDisruptionBudget"]
                .into_iter()
                .filter_map(resolve_kind)
                .collect(),
            _ => Vec::new(),
        };
        for resource in wanted {
            if !object_kinds
                .iter()
                .any(|r| r.group == resource.group && r.kind == resource.kind)
            {
                object_kinds.push(resource);
            }
        }
    }
    object_kinds.sort_by_key(|r| (r.group, r.kind));

    let epoch = match &raw.epoch {
        Some(e) => Some(e.value.parse::<jiff::Timestamp>().map_err(|err| {
            cx.at(
                e.referenced.line(),
                format!("invalid epoch {:?}: {err}", e.value),
            )
        })?),
        None => None,
    };

    Ok(Scenario {
        path: path.to_path_buf(),
        name: raw.name.unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        }),
        description: raw.description.unwrap_or_default(),
        seed: raw.seed.unwrap_or(1),
        epoch,
        cluster,
        flags,
        manifests,
        steps,
        run_for,
        expectations,
        object_kinds,
    })
}

/// The first line of saphyr's message without its own `error: line N column M:` prefix (our
/// messages carry the line, relative to the scenario file).
pub(crate) fn yaml_message(e: &serde_saphyr::Error) -> String {
    let msg = e.to_string();
    let first = msg.lines().next().unwrap_or("invalid YAML");
    let re = regex::Regex::new(r"^(error: )?line \d+ column \d+: ").expect("valid regex");
    re.replace(first, "").into_owned()
}

fn yaml_error(file: &str, line_offset: u64, e: &serde_saphyr::Error) -> ScenarioError {
    // The library's message carries a source snippet; the first line is the message itself.
    let first = yaml_message(e);
    match e.location() {
        Some(loc) if loc.line() > 0 => ScenarioError::At {
            file: file.into(),
            line: loc.line() + line_offset,
            msg: first,
        },
        _ => ScenarioError::File {
            file: file.into(),
            msg: first,
        },
    }
}

struct Cx {
    file: String,
    dir: PathBuf,
}

impl Cx {
    /// The namespace filter of a `workloads:` / `services:` convergence expectation.
    fn converged_in(
        &self,
        line: u64,
        what: &str,
        w: &RawWorkloads,
    ) -> Result<Option<String>, ScenarioError> {
        w.converged_in().ok_or_else(|| {
            self.at(
                line,
                format!("`{what}` takes `converged` or `{{converged: true, namespace: NS}}`"),
            )
        })
    }

    fn at(&self, line: u64, msg: String) -> ScenarioError {
        ScenarioError::At {
            file: self.file.clone(),
            line,
            msg,
        }
    }

    fn duration(&self, s: &Spanned<String>) -> Result<Duration, ScenarioError> {
        klab_api::parse_duration(&s.value).map_err(|e| self.at(s.referenced.line(), e))
    }

    fn node_specs(&self, n: &RawNode, line: u64) -> Result<Vec<NodeSpec>, ScenarioError> {
        let names: Vec<String> = match (&n.name, &n.name_prefix, n.count) {
            (Some(name), None, None) => vec![name.clone()],
            (None, Some(p), Some(c)) if c > 0 => (1..=c).map(|i| format!("{p}{i}")).collect(),
            _ => {
                return Err(self.at(
                    line,
                    "a node needs `name`, or `name-prefix` with a positive `count`".into(),
                ));
            }
        };
        let mut out = Vec::new();
        for name in names {
            let errs = klab_api::selector::is_dns1123_subdomain(&name);
            if !errs.is_empty() {
                return Err(self.at(
                    line,
                    format!("invalid node name {name:?}: {}", errs.join("; ")),
                ));
            }
            let mut spec = NodeSpec::new(name);
            spec.zone = n.zone.clone();
            spec.labels = n.labels.clone();
            if let Some(c) = &n.cpu {
                spec.cpu = c.0.clone();
            }
            if let Some(m) = &n.memory {
                spec.memory = m.clone();
            }
            if let Some(p) = n.pods {
                spec.pods = p;
            }
            spec.kubelet = kubelet_fields(&n.kubelet);
            klab_cluster::node_kubelet_config(&Default::default(), &spec.kubelet)
                .map_err(|e| self.at(line, format!("node {}: {e}", spec.name)))?;
            out.push(spec);
        }
        Ok(out)
    }

    fn manifests(&self, m: &RawManifest, line: u64) -> Result<Vec<Manifest>, ScenarioError> {
        match (&m.file, &m.inline) {
            (Some(f), None) => {
                let p = self.dir.join(f);
                let text = std::fs::read_to_string(&p).map_err(|e| {
                    self.at(line, format!("cannot read manifest {}: {e}", p.display()))
                })?;
                manifest::parse_documents(&text, &p.display().to_string(), 0)
            }
            (None, Some(inline)) => {
                // saphyr locates a block scalar (`inline: |`) at its first content line, so
                // document line N is scenario line start + N - 1.
                let start = inline.referenced.line();
                manifest::parse_documents(&inline.value, &self.file, start.saturating_sub(1))
            }
            _ => Err(self.at(
                line,
                "a manifest needs exactly one of `file` or `inline`".into(),
            )),
        }
    }

    fn node_ref(
        &self,
        n: &Option<Spanned<String>>,
        line: u64,
        names: &BTreeSet<String>,
        what: &str,
    ) -> Result<String, ScenarioError> {
        let n = n
            .as_ref()
            .ok_or_else(|| self.at(line, format!("{what} needs `node`")))?;
        if !names.contains(&n.value) {
            let known: Vec<&str> = names.iter().map(String::as_str).collect();
            return Err(self.at(
                n.referenced.line(),
                format!("unknown node {:?} (nodes: {})", n.value, known.join(", ")),
            ));
        }
        Ok(n.value.clone())
    }

    /// `target: kind/name` (+ `namespace`) resolved as kubectl resolves it.
    fn target(
        &self,
        s: &RawStep,
        line: u64,
        what: &str,
    ) -> Result<(&'static ResourceInfo, Option<String>, String), ScenarioError> {
        let target = s
            .target
            .as_deref()
            .ok_or_else(|| self.at(line, format!("{what} needs `target: kind/name`")))?;
        let (kind_s, rest) = target.split_once('/').ok_or_else(|| {
            self.at(
                line,
                format!("invalid {what} target {target:?}: expected kind/name"),
            )
        })?;
        let resource = resolve_kind(kind_s)
            .ok_or_else(|| self.at(line, format!("unknown resource {kind_s:?}")))?;
        if rest.is_empty() {
            return Err(self.at(
                line,
                format!("invalid {what} target {target:?}: empty name"),
            ));
        }
        Ok(if resource.namespaced {
            let (ns, name) = split_ns(rest, s.namespace.as_deref());
            (resource, Some(ns), name)
        } else {
            (resource, None, rest.to_string())
        })
    }

    fn grace(&self, grace: Option<i64>, line: u64) -> Result<Option<i64>, ScenarioError> {
        if let Some(g) = grace
            && !(0..=i64::from(u32::MAX)).contains(&g)
        {
            return Err(self.at(
                line,
                format!("grace must be between 0 and {} seconds, got {g}", u32::MAX),
            ));
        }
        Ok(grace)
    }

    fn step(
        &self,
        s: &RawStep,
        line: u64,
        names: &BTreeSet<String>,
        text: &str,
    ) -> Result<Step, ScenarioError> {
        let at = self.duration(&s.at)?;
        let (kind, fline) = match (&s.fault, &s.wait_for) {
            (Some(f), _) => (f.value.as_str(), f.referenced.line()),
            (None, Some(_)) => ("wait-for", line),
            (None, None) => {
                return Err(self.at(line, "a step needs `fault` (or `wait-for`)".into()));
            }
        };
        let resized = s.cpu.is_some() || s.memory.is_some() || s.labels.is_some();
        if resized && kind != "reboot" {
            return Err(self.at(
                line,
                "`cpu`, `memory` and `labels` go with `fault: reboot`".into(),
            ));
        }
        let action = if kind == "reboot" && resized {
            let node = self.node_ref(&s.node, line, names, kind)?;
            let cpu = s.cpu.as_ref().map(|c| c.0.clone());
            if let Some(c) = &cpu
                && klab_cluster::parse_cpu(c).is_none()
            {
                return Err(self.at(line, format!("reboot: invalid cpu quantity {c:?}")));
            }
            if let Some(m) = &s.memory
                && klab_cluster::parse_available(m).is_none()
            {
                return Err(self.at(line, format!("reboot: invalid memory quantity {m:?}")));
            }
            if let Some(l) = &s.labels {
                for (k, v) in l {
                    let mut errs = klab_api::selector::is_qualified_name(k);
                    errs.extend(klab_api::selector::is_valid_label_value(v));
                    if !errs.is_empty() {
                        return Err(self.at(
                            line,
                            format!("reboot: invalid label {k}={v}: {}", errs.join("; ")),
                        ));
                    }
                }
            }
            Action::RebootWith {
                node,
                cpu,
                memory: s.memory.clone(),
                labels: s.labels.clone(),
            }
        } else if let Some(f) = NODE_FAULTS.iter().find(|f| fault_name(**f) == kind) {
            Action::Fault {
                node: self.node_ref(&s.node, line, names, kind)?,
                fault: *f,
            }
        } else {
            match kind {
                "taint" | "untaint" => {
                    let node = self.node_ref(&s.node, line, names, kind)?;
                    let t = s.taint.as_deref().ok_or_else(|| {
                        self.at(line, format!("{kind} needs `taint: key[=value]:Effect`"))
                    })?;
                    let taint = TaintSpec::parse(t).map_err(|e| self.at(line, e))?;
                    if kind == "taint" {
                        if taint.effect.is_none() {
                            return Err(self.at(
                                line,
                                format!("taint {t:?} needs an effect (key[=value]:Effect)"),
                            ));
                        }
                        Action::Taint { node, taint }
                    } else {
                        Action::Untaint { node, taint }
                    }
                }
                "cordon" | "uncordon" => Action::Cordon {
                    node: self.node_ref(&s.node, line, names, kind)?,
                    unschedulable: kind == "cordon",
                },
                "drain" => Action::Drain {
                    node: self.node_ref(&s.node, line, names, kind)?,
                    opts: crate::drain::DrainOptions {
                        ignore_daemonsets: s.ignore_daemonsets,
                        delete_emptydir_data: s.delete_emptydir_data,
                        force: s.force,
                        grace_period: s.grace,
                        timeout: s.timeout.as_ref().map(|t| self.duration(t)).transpose()?,
                        skip_wait_for_delete_timeout: s.skip_wait_for_delete_timeout.unwrap_or(0),
                        disable_eviction: s.disable_eviction,
                        pod_selector: s.selector.clone(),
                    },
                },
                "delete-node" => Action::DeleteNode {
                    node: self.node_ref(&s.node, line, names, kind)?,
                },
                "rejoin" => Action::Rejoin {
                    node: self.node_ref(&s.node, line, names, kind)?,
                },
                "volume-fail" | "volume-heal" => Action::VolumeFault {
                    name: s.volume.clone().ok_or_else(|| {
                        self.at(
                            line,
                            format!("{kind} needs `volume: NAME` (a volume or [namespace/]claim)"),
                        )
                    })?,
                    fail: kind == "volume-fail",
                },
                "memory-pressure" | "disk-pressure" | "pid-pressure" | "relieve" => {
                    let node = self.node_ref(&s.node, line, names, kind)?;
                    let available = s.available.as_ref().map(|a| a.0.clone());
                    if kind == "relieve" {
                        if available.is_some() {
                            return Err(self.at(line, "relieve takes no `available`".into()));
                        }
                    } else {
                        let a = available.as_deref().ok_or_else(|| {
                            self.at(line, format!("{kind} needs `available: QUANTITY`"))
                        })?;
                        if klab_cluster::parse_available(a).is_none() {
                            return Err(self.at(
                                line,
                                format!("{kind}: invalid quantity {a:?} for `available`"),
                            ));
                        }
                    }
                    Action::Pressure {
                        node,
                        fault: kind.to_string(),
                        available,
                    }
                }
                "node-condition" | "clear-node-condition" => {
                    let node = self.node_ref(&s.node, line, names, kind)?;
                    let c = s.condition.as_deref().ok_or_else(|| {
                        self.at(
                            line,
                            if kind == "node-condition" {
                                "node-condition needs `condition: Type=Status`".to_string()
                            } else {
                                "clear-node-condition needs `condition: Type`".to_string()
                            },
                        )
                    })?;
                    let (type_, report) = if kind == "node-condition" {
                        let (t, st) = c.split_once('=').ok_or_else(|| {
                            self.at(
                                line,
                                format!("invalid condition {c:?}: expected Type=Status"),
                            )
                        })?;
                        if !["True", "False", "Unknown"].contains(&st) {
                            return Err(self.at(
                                line,
                                format!("invalid condition status {st:?} (True, False or Unknown)"),
                            ));
                        }
                        let report = klab_cluster::ConditionOverride {
                            status: st.to_string(),
                            reason: s.reason.clone(),
                            message: s.message.clone(),
                        };
                        (t.to_string(), Some(report))
                    } else {
                        if c.contains('=') || s.reason.is_some() || s.message.is_some() {
                            return Err(self.at(
                                line,
                                "clear-node-condition takes only `condition: Type`".into(),
                            ));
                        }
                        (c.to_string(), None)
                    };
                    klab_cluster::check_condition_type(&type_).map_err(|e| {
                        self.at(line, format!("invalid condition type {type_:?}: {e}"))
                    })?;
                    Action::NodeCondition {
                        node,
                        type_,
                        report,
                    }
                }
                "probe" => {
                    let container = s
                        .container
                        .clone()
                        .ok_or_else(|| self.at(line, "probe needs `container`".into()))?;
                    let kind = match s.probe.as_deref() {
                        Some(k) if klab_api::probe_script::PROBE_KINDS.contains(&k) => {
                            k.to_string()
                        }
                        Some(other) => {
                            return Err(self.at(
                                line,
                                format!("invalid probe {other:?} (startup, readiness or liveness)"),
                            ));
                        }
                        None => {
                            return Err(self.at(
                                line,
                                "probe needs `probe: startup|readiness|liveness`".into(),
                            ));
                        }
                    };
                    // `result` is what the annotation says (`success`, `exit: 1`, `http: 500`,
                    // `refused`, `timeout`, …); `message` is a failure's output.
                    let Some(result) = s.result.as_deref() else {
                        return Err(self.at(
                            line,
                            "probe needs `result` (success, failure, exit: <code>, http: <status>, grpc: <status>, refused or timeout)".into(),
                        ));
                    };
                    let value = match (result.trim(), &s.message) {
                        ("failure", Some(m)) => format!("failure: {m}"),
                        (_, Some(_)) => {
                            return Err(self.at(
                                line,
                                "a probe's `message` goes with `result: failure`".into(),
                            ));
                        }
                        (r, None) => klab_api::probe_script::parse(r)
                            .map_err(|e| self.at(line, e))?
                            .annotation_value(),
                    };
                    let (namespace, pod, selector) = match (s.pod.as_deref(), s.selector.as_deref())
                    {
                        (Some(p), None) => {
                            let (ns, name) = split_ns(p, s.namespace.as_deref());
                            (ns, Some(name), None)
                        }
                        (None, Some(sel)) => {
                            LabelSelector::parse(sel)
                                .map_err(|e| self.at(line, format!("invalid selector: {e}")))?;
                            (
                                s.namespace.clone().unwrap_or_else(|| "default".into()),
                                None,
                                Some(sel.to_string()),
                            )
                        }
                        _ => {
                            return Err(self.at(
                                line,
                                "probe needs one of `pod: [namespace/]name` or `selector`".into(),
                            ));
                        }
                    };
                    Action::Probe {
                        namespace,
                        pod,
                        selector,
                        container,
                        kind,
                        value,
                    }
                }
                "image-pull-fail" | "image-pull-heal" => {
                    let node = match &s.node {
                        Some(_) => Some(self.node_ref(&s.node, line, names, kind)?),
                        None => None,
                    };
                    let image = s
                        .image
                        .clone()
                        .filter(|i| !i.trim().is_empty())
                        .ok_or_else(|| self.at(line, format!("{kind} needs `image: NAME`")))?;
                    if kind == "image-pull-heal" && s.message.is_some() {
                        return Err(self.at(line, "image-pull-heal takes no `message`".into()));
                    }
                    Action::ImagePull {
                        node,
                        image,
                        fail: kind == "image-pull-fail",
                        message: s.message.clone(),
                    }
                }
                "remove-node" => Action::RemoveNode {
                    node: self.node_ref(&s.node, line, names, kind)?,
                },
                "add-node" => {
                    // Its name is already among `names` (collected before the steps), so the
                    // other steps can act on it.
                    let node = self.node_ref(&s.node, line, names, kind)?;
                    let mut spec = NodeSpec::new(node);
                    spec.zone = s.zone.clone();
                    Action::AddNode { spec }
                }
                "delete-pod" => {
                    if let Some(g) = s.grace
                        && !(0..=i64::from(u32::MAX)).contains(&g)
                    {
                        return Err(self.at(
                            line,
                            format!("grace must be between 0 and {} seconds, got {g}", u32::MAX),
                        ));
                    }
                    if s.force && s.grace.is_some_and(|g| g != 0) {
                        // kubectl: "--force" needs "--grace-period=0" (or none).
                        return Err(
                            self.at(line, "force deletion needs grace 0 (or no grace)".into())
                        );
                    }
                    let grace = if s.force { Some(0) } else { s.grace };
                    match (s.pod.as_deref(), s.selector.as_deref()) {
                        (Some(pod), None) => {
                            let (namespace, name) = split_ns(pod, s.namespace.as_deref());
                            Action::DeletePod {
                                namespace,
                                name,
                                grace,
                                force: s.force,
                            }
                        }
                        (None, Some(sel)) => {
                            LabelSelector::parse(sel)
                                .map_err(|e| self.at(line, format!("invalid selector: {e}")))?;
                            if let Some(n) = &s.on_node
                                && !names.contains(n)
                            {
                                return Err(self.at(line, format!("unknown node {n:?}")));
                            }
                            Action::DeletePods {
                                namespace: s.namespace.clone().unwrap_or_else(|| "default".into()),
                                selector: sel.to_string(),
                                on_node: s.on_node.clone(),
                                grace,
                                force: s.force,
                            }
                        }
                        _ => {
                            return Err(self.at(
                                line,
                                "delete-pod needs one of `pod: [namespace/]name` or `selector`"
                                    .into(),
                            ));
                        }
                    }
                }
                "patch" => {
                    let (resource, namespace, name) = self.target(s, line, kind)?;
                    let patch_type = match s.patch_type.as_deref() {
                        None | Some("merge") => PatchType::Merge,
                        Some("json") => PatchType::Json,
                        Some("strategic") => PatchType::Strategic,
                        Some(other) => {
                            return Err(self.at(
                                line,
                                format!("invalid patch type {other:?} (merge, json or strategic)"),
                            ));
                        }
                    };
                    let patch = s.patch.clone().ok_or_else(|| {
                        self.at(
                            line,
                            "patch needs `patch:` (a mapping, or a list for type json)".into(),
                        )
                    })?;
                    match patch_type {
                        PatchType::Json => {
                            let ops = patch.as_array().ok_or_else(|| {
                                self.at(line, "a json patch is a list of operations".into())
                            })?;
                            for op in ops {
                                let name = op.get("op").and_then(serde_json::Value::as_str);
                                if !matches!(
                                    name,
                                    Some("add" | "remove" | "replace" | "move" | "copy" | "test")
                                ) || op.get("path").and_then(serde_json::Value::as_str).is_none()
                                {
                                    return Err(self.at(
                                        line,
                                        format!("invalid json patch operation {op} (needs `op`: add, remove, replace, move, copy or test, and `path`)"),
                                    ));
                                }
                            }
                        }
                        _ if !patch.is_object() => {
                            return Err(self
                                .at(line, format!("a {} patch is a mapping", patch_type.name())));
                        }
                        _ => {}
                    }
                    if let Some(sub) = &s.subresource
                        && !resource.subresources.contains(&sub.as_str())
                    {
                        return Err(self.at(
                            line,
                            format!(
                                "{} has no subresource {sub:?} (subresources: {})",
                                resource.plural,
                                resource.subresources.join(", ")
                            ),
                        ));
                    }
                    Action::Patch {
                        resource,
                        namespace,
                        name,
                        patch,
                        patch_type,
                        subresource: s.subresource.clone(),
                    }
                }
                "delete" => {
                    let (resource, namespace, name) = self.target(s, line, kind)?;
                    let propagation = match s.propagation.as_deref() {
                        None => None,
                        Some("Foreground") => Some(Propagation::Foreground),
                        Some("Background") => Some(Propagation::Background),
                        Some("Orphan") => Some(Propagation::Orphan),
                        Some(other) => {
                            return Err(self.at(
                                line,
                                format!(
                                    "invalid propagation {other:?} (Foreground, Background or Orphan)"
                                ),
                            ));
                        }
                    };
                    Action::Delete {
                        resource,
                        namespace,
                        name,
                        propagation,
                        grace: self.grace(s.grace, line)?,
                    }
                }
                "evict" => {
                    let pod = s.pod.as_deref().ok_or_else(|| {
                        self.at(line, "evict needs `pod: [namespace/]name`".into())
                    })?;
                    let (namespace, name) = split_ns(pod, s.namespace.as_deref());
                    Action::Evict {
                        namespace,
                        name,
                        grace: self.grace(s.grace, line)?,
                    }
                }
                "wait-for" => {
                    let w = s.wait_for.as_ref().ok_or_else(|| {
                        self.at(line, "wait-for needs `wait-for: {an expectation}`".into())
                    })?;
                    let wline = w.referenced.line();
                    if w.value.at.is_some() || w.value.from.is_some() {
                        return Err(self.at(
                            wline,
                            "a wait-for expectation takes no `at` or `from` (it is checked from the step's time until `timeout`)".into(),
                        ));
                    }
                    let mut until = self.expectation(&w.value, wline, names, text)?;
                    // Written inline, the expectation is the `{…}` after `wait-for:`.
                    if let Some(inline) = until
                        .text
                        .split_once("wait-for:")
                        .and_then(|(_, rest)| balanced_braces(rest.trim_start()))
                    {
                        until.text = inline.to_string();
                    }
                    let timeout = s
                        .timeout
                        .as_ref()
                        .map(|t| self.duration(t))
                        .transpose()?
                        .ok_or_else(|| {
                            self.at(line, "wait-for needs `timeout` (e.g. 5m)".into())
                        })?;
                    if timeout.is_zero() {
                        return Err(self.at(line, "wait-for timeout must be positive".into()));
                    }
                    Action::WaitFor {
                        until: WaitSpec(Box::new(until)),
                        timeout,
                    }
                }
                "scale" => {
                    let target = s
                        .target
                        .as_deref()
                        .ok_or_else(|| self.at(line, "scale needs `target: kind/name`".into()))?;
                    let (kind_s, rest) = target.split_once('/').ok_or_else(|| {
                        self.at(
                            line,
                            format!("invalid scale target {target:?}: expected kind/name"),
                        )
                    })?;
                    let kind = scale_kind(kind_s).ok_or_else(|| {
                        self.at(
                            line,
                            format!(
                                "cannot scale {kind_s:?} (deployment, replicaset, statefulset)"
                            ),
                        )
                    })?;
                    let (namespace, name) = split_ns(rest, s.namespace.as_deref());
                    let replicas = s
                        .replicas
                        .ok_or_else(|| self.at(line, "scale needs `replicas`".into()))?;
                    if replicas < 0 {
                        return Err(self.at(line, format!("replicas must be >= 0, got {replicas}")));
                    }
                    Action::Scale {
                        kind: kind.into(),
                        namespace,
                        name,
                        replicas,
                    }
                }
                "usage" => {
                    let container = s
                        .container
                        .clone()
                        .ok_or_else(|| self.at(line, "usage needs `container: NAME`".into()))?;
                    let value = s.usage.clone().ok_or_else(|| {
                        self.at(
                            line,
                            "usage needs `usage: VALUE` (memory-growth=10Mi/min)".into(),
                        )
                    })?;
                    // `volume.<name>` is an emptyDir's contents: its storage keys only.
                    if container.starts_with("volume.") {
                        klab_cluster::parse_volume_usage(&value).map(|_| ())
                    } else {
                        klab_cluster::parse_usage(&value).map(|_| ())
                    }
                    .map_err(|e| self.at(line, format!("usage: {e}")))?;
                    let (namespace, pod) = match (s.pod.as_deref(), s.selector.as_deref()) {
                        (Some(p), None) => {
                            let (ns, name) = split_ns(p, s.namespace.as_deref());
                            (ns, Some(name))
                        }
                        (None, Some(sel)) => {
                            LabelSelector::parse(sel)
                                .map_err(|e| self.at(line, format!("invalid selector: {e}")))?;
                            (
                                s.namespace.clone().unwrap_or_else(|| "default".into()),
                                None,
                            )
                        }
                        _ => {
                            return Err(self.at(
                                line,
                                "usage needs one of `pod: [namespace/]name` or `selector`".into(),
                            ));
                        }
                    };
                    Action::Usage {
                        namespace,
                        pod,
                        selector: s.selector.clone(),
                        container,
                        value,
                    }
                }
                "logs" | "exec" => {
                    let pod = s.pod.as_deref().ok_or_else(|| {
                        self.at(line, format!("{kind} needs `pod: [namespace/]name`"))
                    })?;
                    let (namespace, name) = split_ns(pod, s.namespace.as_deref());
                    if kind == "logs" {
                        Action::Logs {
                            namespace,
                            name,
                            container: s.container.clone(),
                            tail: s.tail,
                        }
                    } else {
                        if s.command.is_empty() {
                            // kubectl's own check, before any request.
                            return Err(self.at(
                                line,
                                "exec needs `command` (you must specify at least one command for the container)".into(),
                            ));
                        }
                        Action::Exec {
                            namespace,
                            name,
                            container: s.container.clone(),
                            command: s.command.clone(),
                        }
                    }
                }
                "component-stop" | "component-start" | "component-restart" => {
                    let c = s
                        .component
                        .as_ref()
                        .ok_or_else(|| self.at(line, format!("{kind} needs `component: NAME`")))?;
                    let target = klab_cluster::control::resolve_component(&c.value)
                        .map_err(|e| self.at(c.referenced.line(), e))?;
                    let op = ComponentOp::parse(kind.trim_start_matches("component-"))
                        .ok_or_else(|| self.at(line, format!("unknown fault {kind:?}")))?;
                    Action::Component {
                        component: target.display().to_string(),
                        op,
                    }
                }
                "clock-skew" => {
                    let node = self.node_ref(&s.node, line, names, kind)?;
                    let o = s.offset.as_ref().ok_or_else(|| {
                        self.at(
                            line,
                            "clock-skew needs `offset: DURATION` (e.g. 2m or -2m)".into(),
                        )
                    })?;
                    let offset = klab_cluster::control::parse_offset(&o.value)
                        .map_err(|e| self.at(o.referenced.line(), e))?;
                    Action::ClockSkew { node, offset }
                }
                "brownout" => {
                    let c = s.component.as_ref().ok_or_else(|| {
                        self.at(
                            line,
                            "brownout needs `component: NAME` (kubelet/NODE, kube-controller-manager, kube-scheduler or metrics-server)".into(),
                        )
                    })?;
                    let nodes: Vec<String> = names.iter().cloned().collect();
                    let component = klab_cluster::brownout_target(&c.value, &nodes)
                        .map_err(|e| self.at(c.referenced.line(), e.to_string()))?;
                    let latency = s
                        .latency
                        .as_ref()
                        .map(|l| self.duration(l))
                        .transpose()?
                        .unwrap_or_default();
                    let code = s.code.unwrap_or(503);
                    let error = BrownoutError::parse(code).ok_or_else(|| {
                        self.at(
                            line,
                            format!("brownout code must be 500, 503 or 429, got {code}"),
                        )
                    })?;
                    let b = Brownout {
                        latency,
                        error_rate: s.error_rate.unwrap_or(0.0),
                        error,
                    };
                    b.validate()
                        .map_err(|e| self.at(line, format!("brownout: {e}")))?;
                    if b.latency.is_zero() && b.error_rate == 0.0 {
                        return Err(self.at(
                            line,
                            "brownout needs `latency` or a positive `error-rate`".into(),
                        ));
                    }
                    Action::Brownout {
                        component,
                        brownout: Some(b),
                    }
                }
                "apply" => {
                    let mut manifests = Vec::new();
                    for m in &s.manifests {
                        manifests.extend(self.manifests(&m.value, m.referenced.line())?);
                    }
                    if manifests.is_empty() {
                        return Err(self.at(line, "apply needs `manifests`".into()));
                    }
                    Action::Apply { manifests }
                }
                other => {
                    let mut all: Vec<&str> = NODE_FAULTS.iter().map(|f| fault_name(*f)).collect();
                    all.extend(API_ACTIONS);
                    return Err(self.at(
                        fline,
                        format!("unknown fault {other:?} (one of: {})", all.join(", ")),
                    ));
                }
            }
        };
        Ok(Step { at, line, action })
    }

    fn expectation(
        &self,
        e: &RawExpect,
        line: u64,
        names: &BTreeSet<String>,
        text: &str,
    ) -> Result<Expectation, ScenarioError> {
        let at =
            e.at.as_ref()
                .filter(|a| a.value != "end")
                .map(|a| self.duration(a))
                .transpose()?;
        let from = e.from.as_ref().map(|a| self.duration(a)).transpose()?;
        let subjects = [
            e.node.is_some(),
            e.pod.is_some(),
            e.pods.is_some(),
            e.trace.is_some() || e.trace_regex.is_some(),
            e.workloads.is_some(),
            e.services.is_some(),
            e.object.is_some(),
            e.writes.is_some(),
        ];
        if subjects.iter().filter(|b| **b).count() != 1 {
            return Err(self.at(
                line,
                "an expectation needs exactly one of `node`, `pod`, `pods`, `trace`/`trace-regex`, `workloads`, `services`, `object`, `writes`"
                    .into(),
            ));
        }
        let object_only = [
            ("jsonpath", e.jsonpath.is_some()),
            ("equals", e.equals.is_some()),
            ("matches", e.matches.is_some()),
        ];
        if e.object.is_none()
            && let Some((f, _)) = object_only.iter().find(|(_, set)| *set)
        {
            return Err(self.at(line, format!("`{f}` applies to `object` expectations")));
        }
        if (e.reason.is_some() || e.message.is_some()) && e.condition.is_none() {
            return Err(self.at(
                line,
                "`reason` and `message` go with `condition: Type=Status`".into(),
            ));
        }
        let condition = match &e.condition {
            Some(c) => {
                let (t, st) = c.split_once('=').ok_or_else(|| {
                    self.at(
                        line,
                        format!("invalid condition {c:?}: expected Type=Status"),
                    )
                })?;
                if !["True", "False", "Unknown"].contains(&st) {
                    return Err(self.at(
                        line,
                        format!("invalid condition status {st:?} (True, False or Unknown)"),
                    ));
                }
                Some(ConditionSpec {
                    type_: t.to_string(),
                    status: st.to_string(),
                    reason: e.reason.clone(),
                    message: e.message.clone(),
                })
            }
            None => None,
        };
        let taints = |v: &[String]| -> Result<Vec<TaintSpec>, ScenarioError> {
            v.iter()
                .map(|t| TaintSpec::parse(t).map_err(|err| self.at(line, err)))
                .collect()
        };
        let check = if let Some(n) = &e.node {
            let name = n.value.clone();
            if !names.contains(&name) {
                return Err(self.at(n.referenced.line(), format!("unknown node {name:?}")));
            }
            Check::Node {
                name,
                exists: e.exists,
                status: e.status.clone(),
                condition: condition.clone(),
                has_taints: taints(&e.has_taint)?,
                no_taints: taints(&e.no_taint)?,
            }
        } else if let Some(p) = &e.pod {
            let (namespace, name) = split_ns(p, None);
            Check::Pod {
                namespace,
                name,
                exists: e.exists,
                status: e.status.clone(),
                ready: e.ready.as_ref().map(|r| r.0.clone()),
                restarts: e.restarts,
                node: e.on_node.clone(),
            }
        } else if let Some(o) = &e.object {
            let resource = resolve_kind(&o.kind)
                .ok_or_else(|| self.at(line, format!("unknown resource {:?}", o.kind)))?;
            let namespace = if resource.namespaced {
                o.namespace.clone().unwrap_or_else(|| "default".into())
            } else if o.namespace.is_some() {
                return Err(self.at(
                    line,
                    format!("{} is cluster-scoped: no `namespace`", resource.kind),
                ));
            } else {
                String::new()
            };
            let path = e
                .jsonpath
                .as_deref()
                .map(crate::jsonpath::JsonPath::parse)
                .transpose()
                .map_err(|err| self.at(line, err))?;
            let matches = e
                .matches
                .as_deref()
                .map(regex::Regex::new)
                .transpose()
                .map_err(|err| self.at(line, format!("invalid regex: {err}")))?;
            let equals = e.equals.as_ref().map(|v| v.0.clone());
            if path.is_none() && (equals.is_some() || matches.is_some()) {
                return Err(self.at(line, "`equals` and `matches` need a `jsonpath`".into()));
            }
            if path.is_some() && equals.is_none() && matches.is_none() && e.exists.is_none() {
                return Err(self.at(
                    line,
                    "a `jsonpath` needs one of `equals`, `matches` or `exists`".into(),
                ));
            }
            if e.exists == Some(false)
                && (condition.is_some() || equals.is_some() || matches.is_some())
            {
                return Err(self.at(
                    line,
                    "`exists: false` cannot be combined with `condition`, `equals` or `matches`"
                        .into(),
                ));
            }
            Check::Object {
                resource,
                namespace,
                name: o.name.clone(),
                exists: e.exists,
                path,
                equals,
                matches,
                condition: condition.clone(),
            }
        } else if let Some(w) = &e.writes {
            let count = match (e.count, e.min_count, e.max_count) {
                (Some(c), None, None) => Count::Exactly(c),
                (None, Some(c), None) => Count::AtLeast(c),
                (None, None, Some(c)) => Count::AtMost(c),
                _ => {
                    return Err(self.at(
                        line,
                        "`writes` needs exactly one of `count`, `min-count`, `max-count`".into(),
                    ));
                }
            };
            let verbs = [
                "POST",
                "PUT",
                "PATCH",
                "APPLY",
                "DELETE",
                "DELETECOLLECTION",
            ];
            if let Some(v) = &w.verb
                && !verbs.contains(&v.as_str())
            {
                return Err(self.at(
                    line,
                    format!("invalid write verb {v:?} (one of: {})", verbs.join(", ")),
                ));
            }
            if let Some(r) = &w.resource
                && !klab_apiserver::registry::RESOURCES
                    .iter()
                    .any(|ri| ri.plural == r)
            {
                return Err(self.at(
                    line,
                    format!("unknown resource {r:?} (the plural, as in URLs: nodes, leases)"),
                ));
            }
            if w.component.is_empty() {
                return Err(self.at(line, "`writes` needs a `component`".into()));
            }
            Check::Writes {
                filter: WriteFilter {
                    component: w.component.clone(),
                    verb: w.verb.clone(),
                    resource: w.resource.clone(),
                    subresource: w.subresource.clone(),
                    name: w.name.clone(),
                },
                count,
            }
        } else if let Some(w) = &e.workloads {
            Check::WorkloadsConverged {
                namespace: self.converged_in(line, "workloads", w)?,
            }
        } else if let Some(w) = &e.services {
            Check::ServicesConverged {
                namespace: self.converged_in(line, "services", w)?,
            }
        } else if let Some(p) = &e.pods {
            let selector = p
                .selector
                .as_deref()
                .map(LabelSelector::parse)
                .transpose()
                .map_err(|err| self.at(line, format!("invalid selector: {err}")))?;
            let count = match (e.count, e.min_count, e.max_count) {
                (Some(c), None, None) => Count::Exactly(c),
                (None, Some(c), None) => Count::AtLeast(c),
                (None, None, Some(c)) => Count::AtMost(c),
                _ => {
                    return Err(self.at(
                        line,
                        "`pods` needs exactly one of `count`, `min-count`, `max-count`".into(),
                    ));
                }
            };
            Check::Pods {
                namespace: p.namespace.clone(),
                selector,
                on_node: e.on_node.clone(),
                status: e.status.clone(),
                count,
            }
        } else {
            let pattern = match (&e.trace, &e.trace_regex) {
                (Some(s), None) => Pattern::Substring(s.clone()),
                (None, Some(r)) => Pattern::Regex(
                    regex::Regex::new(r)
                        .map_err(|err| self.at(line, format!("invalid regex: {err}")))?,
                ),
                _ => return Err(self.at(line, "use one of `trace` or `trace-regex`".into())),
            };
            Check::Trace {
                pattern,
                present: !e.absent,
            }
        };
        if condition.is_some() && !matches!(check, Check::Node { .. } | Check::Object { .. }) {
            return Err(self.at(
                line,
                "`condition` applies to `node` and `object` expectations".into(),
            ));
        }
        if e.absent && !matches!(check, Check::Trace { .. }) {
            return Err(self.at(
                line,
                "`absent` applies to trace expectations; use `exists: false` for objects".into(),
            ));
        }
        let text = text
            .lines()
            .nth(line.saturating_sub(1) as usize)
            .unwrap_or("")
            .trim()
            .trim_start_matches("- ")
            .to_string();
        Ok(Expectation {
            at,
            from,
            line,
            text,
            check,
        })
    }
}

/// The leading `{…}` of `s`, braces balanced (quotes are not special: scenario text is small).
/// A node's `kubelet:` fields in the text form `node_kubelet_config` reads: lists joined by
/// commas (taints as `key[=value]:Effect`, also from `{key, value, effect}` objects), mappings as
/// `name=value,…` (`signal<value,…` for eviction thresholds, as the flags spell them).
fn kubelet_fields(raw: &BTreeMap<String, serde_json::Value>) -> Vec<(String, String)> {
    use serde_json::Value;
    fn scalar(v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
    raw.iter()
        .map(|(name, v)| {
            let text = match v {
                Value::Array(items) => items
                    .iter()
                    .map(|i| match i {
                        Value::Object(t) => {
                            let key = t.get("key").map(scalar).unwrap_or_default();
                            let effect = t.get("effect").map(scalar).unwrap_or_default();
                            match t.get("value").map(scalar).filter(|v| !v.is_empty()) {
                                Some(v) => format!("{key}={v}:{effect}"),
                                None => format!("{key}:{effect}"),
                            }
                        }
                        other => scalar(other),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                Value::Object(m) => {
                    let op = if matches!(name.as_str(), "evictionHard" | "evictionSoft") {
                        '<'
                    } else {
                        '='
                    };
                    m.iter()
                        .map(|(k, v)| format!("{k}{op}{}", scalar(v)))
                        .collect::<Vec<_>>()
                        .join(",")
                }
                other => scalar(other),
            };
            (name.clone(), text)
        })
        .collect()
}

fn balanced_braces(s: &str) -> Option<&str> {
    if !s.starts_with('{') {
        return None;
    }
    let mut depth = 0usize;
    for (i, ch) in s.char_indices() {
        match ch {
            '{' => depth = depth.saturating_add(1),
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return s.get(..=i);
                }
            }
            _ => {}
        }
    }
    None
}

fn split_ns(s: &str, ns: Option<&str>) -> (String, String) {
    match s.split_once('/') {
        Some((n, name)) => (n.to_string(), name.to_string()),
        None => (ns.unwrap_or("default").to_string(), s.to_string()),
    }
}

/// Finds a resource the way kubectl resolves `KIND/NAME` (kind, singular, plural or short name).
pub fn resolve_kind(k: &str) -> Option<&'static ResourceInfo> {
    let k = k.to_ascii_lowercase();
    klab_apiserver::registry::RESOURCES.iter().find(|r| {
        r.kind.eq_ignore_ascii_case(&k)
            || r.singular == k
            || r.plural == k
            || r.short_names.contains(&k.as_str())
    })
}

fn scale_kind(k: &str) -> Option<&'static str> {
    match k.to_ascii_lowercase().as_str() {
        "deployment" | "deployments" | "deploy" => Some("Deployment"),
        "replicaset" | "replicasets" | "rs" => Some("ReplicaSet"),
        "statefulset" | "statefulsets" | "sts" => Some("StatefulSet"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"name: demo
seed: 7
run-for: 10m
cluster:
  nodes:
    - name: n1
      zone: z1
    - name-prefix: w
      count: 2
      cpu: 8
flags:
  default-unreachable-toleration-seconds: 100
manifests:
  - inline: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: web}
      ---
      apiVersion: v1
      kind: Node
      metadata: {name: extra}
faults:
  - {at: 400s, fault: taint, node: extra, taint: "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"}
  - {at: 30s, fault: stop-kubelet, node: w2}
  - {at: 30s, fault: delete-pod, pod: web-1, force: true}
  - {at: 1m, fault: scale, target: deployment/web, replicas: 3}
expect:
  - {at: 55s, node: w2, condition: Ready=Unknown, has-taint: ["node.kubernetes.io/unreachable:NoSchedule"]}
  - {pods: {selector: app=web}, status: Running, count: 3}
  - {at: 61s, from: 55s, trace-regex: 'taint\+ node\.kubernetes\.io/unreachable:NoExecute'}
"#;

    #[test]
    fn parses_a_full_scenario() {
        let sc = parse(GOOD, Path::new("dir/demo.yaml")).unwrap();
        assert_eq!(
            (sc.name.as_str(), sc.seed, sc.run_for),
            ("demo", 7, Duration::from_secs(600))
        );
        let nodes: Vec<(&str, &str)> = sc
            .cluster
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.cpu.as_str()))
            .collect();
        assert_eq!(nodes, vec![("n1", "4"), ("w1", "8"), ("w2", "8")]);
        assert_eq!(sc.cluster.nodes[0].zone.as_deref(), Some("z1"));
        assert_eq!(
            sc.cluster
                .apiserver
                .default_toleration_seconds
                .unreachable_seconds,
            100
        );
        assert_eq!(sc.manifests.len(), 2);
        assert_eq!(sc.manifests[0].source, "dir/demo.yaml:15");
        assert_eq!(sc.manifests[1].source, "dir/demo.yaml:19");
        // Sorted by time, file order within an instant.
        let steps: Vec<(u64, String)> = sc
            .steps
            .iter()
            .map(|s| (s.at.as_secs(), s.action.describe()))
            .collect();
        assert_eq!(
            steps,
            vec![
                (30, "Node w2 fault stop-kubelet".to_string()),
                (30, "Pod default/web-1 kubectl delete pod --grace-period=0 --force".to_string()),
                (60, "Deployment default/web kubectl scale --replicas=3".to_string()),
                (400, "Node extra kubectl taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute".to_string()),
            ]
        );
        assert_eq!(sc.steps[0].line, 24);
        assert_eq!(sc.expectations.len(), 3);
        assert_eq!(sc.expectations[0].line, 28);
        assert_eq!(sc.expectations[0].at, Some(Duration::from_secs(55)));
        assert!(sc.expectations[1].at.is_none());
        assert!(sc.expectations[0].text.starts_with("{at: 55s, node: w2"));
        match &sc.expectations[2].check {
            Check::Trace {
                pattern,
                present: true,
            } => {
                assert!(pattern.is_match("60.100s node-lifecycle-controller Node w2 taint+ node.kubernetes.io/unreachable:NoExecute"))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn manifests_from_files_are_relative_to_the_scenario() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("app.yaml"),
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
        )
        .unwrap();
        let path = dir.path().join("s.yaml");
        std::fs::write(&path, "run-for: 1m\nmanifests:\n  - file: app.yaml\n").unwrap();
        let sc = load(&path).unwrap();
        assert_eq!(sc.manifests[0].name(), "p");
        std::fs::write(&path, "run-for: 1m\nmanifests:\n  - file: missing.yaml\n").unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains("s.yaml:3: cannot read manifest"), "{e}");
    }

    #[test]
    fn machines_added_during_the_run_are_nodes_for_every_step() {
        let text = "run-for: 10m\ncluster:\n  nodes:\n    - name: n1\nfaults:\n  - {at: 5m, fault: remove-node, node: n2}\n  - {at: 1m, fault: add-node, node: n2, zone: z2}\n  - {at: 2m, fault: rejoin, node: n1}\nexpect:\n  - {at: 3m, node: n2, status: Ready}\n";
        let sc = parse(text, Path::new("s.yaml")).unwrap();
        let actions: Vec<String> = sc.steps.iter().map(|s| s.action.describe()).collect();
        assert_eq!(
            actions,
            [
                "Node n2 klab node add --zone z2",
                "Node n1 klab node rejoin",
                "Node n2 klab node remove"
            ]
        );
        match &sc.steps[0].action {
            Action::AddNode { spec } => {
                assert_eq!(spec.name, "n2");
                assert_eq!(spec.zone.as_deref(), Some("z2"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_input_is_rejected_with_its_line() {
        let base = "run-for: 10m\ncluster:\n  nodes:\n    - name: n1\n";
        let cases: &[(&str, &str)] = &[
            (
                "faults:\n  - at: 30s\n    fault: unplug\n    node: n1\n",
                "s.yaml:7: unknown fault \"unplug\" (one of: stop-kubelet, start-kubelet",
            ),
            (
                "faults:\n  - at: 30s\n    fault: stop-kubelet\n    node: n9\n",
                "s.yaml:8: unknown node \"n9\" (nodes: n1)",
            ),
            (
                "faults:\n  - at: 30x\n    fault: stop-kubelet\n    node: n1\n",
                "s.yaml:6: invalid duration \"30x\": unknown unit \"x\"",
            ),
            (
                "faults:\n  - at: 11m\n    fault: stop-kubelet\n    node: n1\n",
                "s.yaml:6: step at 660s is after run-for 600s",
            ),
            (
                "faults:\n  - at: 1m\n    fault: taint\n    node: n1\n    taint: k=v:Sometimes\n",
                "s.yaml:6: invalid taint effect \"Sometimes\"",
            ),
            (
                "faults:\n  - at: 1m\n    fault: delete-pod\n    pod: p\n    grace: 5\n    force: true\n",
                "s.yaml:6: force deletion needs grace 0",
            ),
            (
                "faults:\n  - at: 1m\n    fault: delete-pod\n    pod: p\n    grace: -1\n",
                "s.yaml:6: grace must be between 0 and 4294967295 seconds, got -1",
            ),
            (
                "manifests:\n  - inline: |\n      apiVersion: v1\n      kind: Pod\n      metadata: {name: [x\n",
                "s.yaml:9: malformed manifest:",
            ),
            (
                "manifests:\n  - inline: |\n      apiVersion: v1\n      kind: Widget\n      metadata: {name: x}\n",
                "s.yaml:7: malformed manifest: no resource for apiVersion \"v1\" kind \"Widget\"",
            ),
            (
                "flags:\n  node-monitor-grace-perod: 40s\n",
                "s.yaml:6: unknown flag --node-monitor-grace-perod",
            ),
            (
                "flags:\n  default-unreachable-toleration-seconds: soon\n",
                "s.yaml:6: invalid value \"soon\" for --default-unreachable-toleration-seconds",
            ),
            (
                "expect:\n  - at: 1m\n    status: Running\n",
                "s.yaml:6: an expectation needs exactly one of",
            ),
            (
                "expect:\n  - at: 1m\n    node: n2\n    status: Ready\n",
                "s.yaml:7: unknown node \"n2\"",
            ),
            (
                "expect:\n  - {services: settled}\n",
                "s.yaml:6: `services` takes `converged` or `{converged: true, namespace: NS}`",
            ),
            (
                "expect:\n  - {workloads: {converged: false}}\n",
                "s.yaml:6: `workloads` takes `converged` or `{converged: true, namespace: NS}`",
            ),
            (
                "expect:\n  - pods: {selector: 'a in (b'}\n    count: 1\n",
                "s.yaml:6: invalid selector",
            ),
            ("expect:\n  - trace-regex: '('\n", "s.yaml:6: invalid regex"),
            (
                "expect:\n  - node: n1\n    condition: Ready\n",
                "s.yaml:6: invalid condition \"Ready\"",
            ),
            ("bogus: 1\n", "s.yaml:5: unknown field `bogus`"),
            (
                "faults:\n  - {at: 1m, fault: add-node, node: n1}\n",
                "s.yaml:6: node \"n1\" is already a cluster node",
            ),
            (
                "faults:\n  - {at: 1m, fault: add-node, node: N_2}\n",
                "s.yaml:6: invalid node name \"N_2\"",
            ),
            (
                "faults:\n  - {at: 1m, fault: rejoin, node: n2}\n",
                "s.yaml:6: unknown node \"n2\" (nodes: n1)",
            ),
            (
                "faults:\n  - {at: 1m, fault: remove-node}\n",
                "s.yaml:6: remove-node needs `node`",
            ),
            (
                "faults:\n  - {at: 1m, fault: delete, target: widget/x}\n",
                "s.yaml:6: unknown resource \"widget\"",
            ),
            (
                "faults:\n  - {at: 1m, fault: delete, target: rs/web, propagation: Sideways}\n",
                "s.yaml:6: invalid propagation \"Sideways\" (Foreground, Background or Orphan)",
            ),
            (
                "faults:\n  - {at: 1m, fault: delete, target: lease/}\n",
                "s.yaml:6: invalid delete target \"lease/\": empty name",
            ),
            (
                "faults:\n  - {at: 1m, fault: evict, grace: 5}\n",
                "s.yaml:6: evict needs `pod: [namespace/]name`",
            ),
            (
                "faults:\n  - {at: 1m, fault: evict, pod: p, grace: -3}\n",
                "s.yaml:6: grace must be between 0 and 4294967295 seconds, got -3",
            ),
            (
                "faults:\n  - {at: 1m, fault: patch, target: node/n1, type: xml, patch: {}}\n",
                "s.yaml:6: invalid patch type \"xml\" (merge, json or strategic)",
            ),
            (
                "faults:\n  - {at: 1m, fault: patch, target: node/n1, type: json, patch: {a: 1}}\n",
                "s.yaml:6: a json patch is a list of operations",
            ),
            (
                "faults:\n  - {at: 1m, fault: patch, target: node/n1, type: json, patch: [{op: frob, path: /a}]}\n",
                "s.yaml:6: invalid json patch operation",
            ),
            (
                "faults:\n  - {at: 1m, fault: patch, target: node/n1, type: strategic, patch: [1]}\n",
                "s.yaml:6: a strategic patch is a mapping",
            ),
            (
                "faults:\n  - {at: 1m, fault: patch, target: configmap/c, subresource: status, patch: {}}\n",
                "s.yaml:6: configmaps has no subresource \"status\"",
            ),
            (
                "faults:\n  - {at: 1m, wait-for: {node: n1, status: NotReady}}\n",
                "s.yaml:6: wait-for needs `timeout`",
            ),
            (
                "faults:\n  - at: 1m\n    timeout: 1m\n    wait-for:\n      at: 2m\n      node: n1\n",
                "s.yaml:9: a wait-for expectation takes no `at` or `from`",
            ),
            (
                "faults:\n  - {at: 1m, timeout: 1m, wait-for: {node: n7, status: Ready}}\n",
                "s.yaml:6: unknown node \"n7\"",
            ),
            (
                "faults:\n  - {at: 1m, node: n1}\n",
                "s.yaml:6: a step needs `fault` (or `wait-for`)",
            ),
            (
                "expect:\n  - {object: {kind: Lease, name: n1}, jsonpath: '{.spec..x}', exists: true}\n",
                "s.yaml:6: invalid jsonpath \"{.spec..x}\": recursive descent",
            ),
            (
                "expect:\n  - {object: {kind: Lease, name: n1}, jsonpath: '{.spec.x}'}\n",
                "s.yaml:6: a `jsonpath` needs one of `equals`, `matches` or `exists`",
            ),
            (
                "expect:\n  - {object: {kind: Lease, name: n1}, equals: x}\n",
                "s.yaml:6: `equals` and `matches` need a `jsonpath`",
            ),
            (
                "expect:\n  - {object: {kind: Node, name: n1, namespace: x}}\n",
                "s.yaml:6: Node is cluster-scoped: no `namespace`",
            ),
            (
                "expect:\n  - {object: {kind: Gizmo, name: n1}}\n",
                "s.yaml:6: unknown resource \"Gizmo\"",
            ),
            (
                "expect:\n  - {object: {kind: Lease, name: n1}, jsonpath: '{.a}', matches: '('}\n",
                "s.yaml:6: invalid regex",
            ),
            (
                "expect:\n  - {pod: p, jsonpath: '{.a}', exists: true}\n",
                "s.yaml:6: `jsonpath` applies to `object` expectations",
            ),
            (
                "expect:\n  - {node: n1, reason: KubeletReady}\n",
                "s.yaml:6: `reason` and `message` go with `condition: Type=Status`",
            ),
            (
                "expect:\n  - {pod: p, condition: Ready=True}\n",
                "s.yaml:6: `condition` applies to `node` and `object` expectations",
            ),
            (
                "expect:\n  - {writes: {component: kubelet, verb: GET}, max-count: 1}\n",
                "s.yaml:6: invalid write verb \"GET\"",
            ),
            (
                "expect:\n  - {writes: {component: kubelet, resource: node}, max-count: 1}\n",
                "s.yaml:6: unknown resource \"node\" (the plural",
            ),
            (
                "expect:\n  - {writes: {component: kubelet}}\n",
                "s.yaml:6: `writes` needs exactly one of `count`, `min-count`, `max-count`",
            ),
            (
                "faults:\n  - {at: 1m, fault: usage, pod: p, container: volume.cache, usage: memory=1Gi}\n",
                "s.yaml:6: usage: a volume's usage takes only ephemeral-storage and ephemeral-storage-growth",
            ),
            (
                "faults:\n  - {at: 1m, fault: usage, pod: p, container: app, usage: image-size=lots}\n",
                "s.yaml:6: usage: invalid image-size \"lots\": not a quantity",
            ),
            (
                "flags:\n  image-gc-high-threshold: 50\n  image-gc-low-threshold: 60\n",
                "s.yaml:7: invalid value \"60\" for --image-gc-low-threshold: invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 60 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 50",
            ),
        ];
        for (extra, want) in cases {
            let text = format!("{base}{extra}");
            let err = parse(&text, Path::new("s.yaml"))
                .expect_err(extra)
                .to_string();
            assert!(
                err.starts_with(want),
                "{extra:?}\n got: {err}\nwant: {want}"
            );
        }
        let e = parse("cluster: {}\n", Path::new("s.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("run-for"), "{e}");
        let e = parse(
            "run-for: 1m\ncluster:\n  nodes:\n    - name: a\n    - name: a\n",
            Path::new("s.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "s.yaml:5: duplicate node \"a\"");
    }

    #[test]
    fn probe_results_must_fit_the_probes_handler() {
        let head = r#"run-for: 10m
cluster:
  nodes:
    - name: n1
manifests:
  - inline: |
      apiVersion: v1
      kind: Pod
      metadata: {name: web, labels: {app: web}}
      spec:
        containers:
          - name: c
            image: nginx
            livenessProbe: {httpGet: {path: /healthz, port: 80}}
            startupProbe: {exec: {command: [cat, /tmp/started]}}
      ---
      apiVersion: apps/v1
      kind: StatefulSet
      metadata: {name: db}
      spec:
        selector: {matchLabels: {app: db}}
        serviceName: db
        template:
          metadata: {labels: {app: db}}
          spec:
            containers:
              - name: pg
                image: postgres
                readinessProbe: {tcpSocket: {port: 5432}}
faults:
"#;
        // Fitting results load, with the annotation value they set.
        let ok = format!(
            "{head}  - {{at: 1m, fault: probe, pod: web, container: c, probe: liveness, result: \"http: 500\"}}\n  - {{at: 1m, fault: probe, pod: web, container: c, probe: startup, result: \"exit: 1\"}}\n  - {{at: 1m, fault: probe, selector: app=db, container: pg, probe: readiness, result: refused}}\n  - {{at: 1m, fault: probe, pod: db-0, container: pg, probe: readiness, result: timeout}}\n  - {{at: 1m, fault: probe, pod: other, container: x, probe: liveness, result: \"grpc: NOT_SERVING\"}}\n"
        );
        let sc = parse(&ok, Path::new("s.yaml")).unwrap();
        let values: Vec<String> = sc.steps.iter().map(|s| s.action.describe()).collect();
        assert_eq!(
            values,
            [
                "Pod default/web kubectl annotate pod web --overwrite probe.klab.dev/c.liveness=\"http: 500\"",
                "Pod default/web kubectl annotate pod web --overwrite probe.klab.dev/c.startup=\"exit: 1\"",
                "kubectl annotate pods -n default -l app=db --overwrite probe.klab.dev/pg.readiness=\"refused\"",
                "Pod default/db-0 kubectl annotate pod db-0 --overwrite probe.klab.dev/pg.readiness=\"timeout\"",
                "Pod default/other kubectl annotate pod other --overwrite probe.klab.dev/x.liveness=\"grpc: NOT_SERVING\"",
            ]
        );
        let cases: &[(&str, &str)] = &[
            (
                "  - {at: 1m, fault: probe, pod: web, container: c, probe: liveness, result: \"exit: 1\"}\n",
                "s.yaml:31: liveness probe of container c of Pod web (s.yaml:7): an exit code (exit: 1) does not fit the probe's handler httpGet",
            ),
            (
                "  - {at: 1m, fault: probe, pod: web, container: c, probe: startup, result: refused}\n",
                "s.yaml:31: startup probe of container c of Pod web (s.yaml:7): a refused connection (refused) does not fit the probe's handler exec",
            ),
            (
                "  - {at: 1m, fault: probe, selector: app=db, container: pg, probe: readiness, result: \"http: 503\"}\n",
                "s.yaml:31: readiness probe of container pg of StatefulSet db (s.yaml:17): an HTTP status code (http: 503) does not fit the probe's handler tcpSocket",
            ),
            (
                "  - {at: 1m, fault: probe, pod: db-1, container: pg, probe: liveness, result: success}\n",
                "s.yaml:31: container pg of StatefulSet db (s.yaml:17) has no liveness probe",
            ),
            (
                "  - {at: 1m, fault: probe, pod: web, container: c, probe: liveness, result: \"http: 5000\"}\n",
                "s.yaml:31: invalid HTTP status code \"5000\": an integer from 100 to 599",
            ),
            (
                "  - {at: 1m, fault: probe, pod: web, container: c, probe: liveness, result: \"exit: 1\", message: m}\n",
                "s.yaml:31: a probe's `message` goes with `result: failure`",
            ),
            (
                "  - {at: 1m, fault: probe, pod: web, container: c, probe: liveness}\n",
                "s.yaml:31: probe needs `result` (success, failure, exit: <code>, http: <status>, grpc: <status>, refused or timeout)",
            ),
        ];
        for (step, want) in cases {
            let e = parse(&format!("{head}{step}"), Path::new("s.yaml"))
                .unwrap_err()
                .to_string();
            assert_eq!(e, *want, "{step}");
        }
    }

    #[test]
    fn node_condition_and_image_pull_faults_parse_and_bad_ones_name_their_line() {
        let text = r#"run-for: 10m
cluster:
  nodes:
    - name: n1
faults:
  - {at: 1m, fault: node-condition, node: n1, condition: Ready=False, reason: KubeletNotReady, message: "container runtime is down"}
  - {at: 2m, fault: node-condition, node: n1, condition: NetworkUnavailable=True}
  - {at: 3m, fault: clear-node-condition, node: n1, condition: Ready}
  - {at: 4m, fault: image-pull-fail, image: "nginx:nope"}
  - {at: 5m, fault: image-pull-fail, node: n1, image: "nginx:nope", message: "rpc error: code = Unavailable desc = registry down"}
  - {at: 6m, fault: image-pull-heal, image: "nginx:nope"}
  - {at: 7m, fault: probe, pod: web-0, container: c, probe: readiness, result: failure, message: "HTTP probe failed with statuscode: 503"}
  - {at: 8m, fault: probe, selector: app=web, container: c, probe: liveness, result: success}
"#;
        let sc = parse(text, Path::new("s.yaml")).unwrap();
        let steps: Vec<String> = sc.steps.iter().map(|s| s.action.describe()).collect();
        assert_eq!(
            steps,
            [
                "Node n1 fault node-condition Ready=False (KubeletNotReady: container runtime is down)",
                "Node n1 fault node-condition NetworkUnavailable=True",
                "Node n1 fault clear-node-condition Ready",
                "fault image-pull-fail nginx:nope (every node)",
                "Node n1 fault image-pull-fail nginx:nope: rpc error: code = Unavailable desc = registry down",
                "fault image-pull-heal nginx:nope (every node)",
                "Pod default/web-0 kubectl annotate pod web-0 --overwrite probe.klab.dev/c.readiness=\"failure: HTTP probe failed with statuscode: 503\"",
                "kubectl annotate pods -n default -l app=web --overwrite probe.klab.dev/c.liveness=\"success\"",
            ]
        );
        let base = "run-for: 10m\ncluster:\n  nodes:\n    - name: n1\nfaults:\n";
        let cases: &[(&str, &str)] = &[
            (
                "  - {at: 1m, fault: node-condition, node: n1}\n",
                "s.yaml:6: node-condition needs `condition: Type=Status`",
            ),
            (
                "  - {at: 1m, fault: node-condition, node: n1, condition: Ready}\n",
                "s.yaml:6: invalid condition \"Ready\": expected Type=Status",
            ),
            (
                "  - {at: 1m, fault: node-condition, node: n1, condition: Ready=Maybe}\n",
                "s.yaml:6: invalid condition status \"Maybe\" (True, False or Unknown)",
            ),
            (
                "  - {at: 1m, fault: node-condition, node: n1, condition: 'Net work=True'}\n",
                "s.yaml:6: invalid condition type \"Net work\": a condition type is letters and digits",
            ),
            (
                "  - {at: 1m, fault: clear-node-condition, node: n1, condition: Ready=True}\n",
                "s.yaml:6: clear-node-condition takes only `condition: Type`",
            ),
            (
                "  - {at: 1m, fault: clear-node-condition, node: n9, condition: Ready}\n",
                "s.yaml:6: unknown node \"n9\" (nodes: n1)",
            ),
            (
                "  - {at: 1m, fault: probe, pod: p, container: c, probe: ready, result: failure}\n",
                "s.yaml:6: invalid probe \"ready\" (startup, readiness or liveness)",
            ),
            (
                "  - {at: 1m, fault: probe, pod: p, container: c, probe: liveness, result: flaky}\n",
                "s.yaml:6: invalid probe result \"flaky\": success, failure, failure: <output>, exit: <code>, http: <status>, grpc: <status>, refused or timeout",
            ),
            (
                "  - {at: 1m, fault: probe, pod: p, container: c, probe: liveness, result: success, message: m}\n",
                "s.yaml:6: a probe's `message` goes with `result: failure`",
            ),
            (
                "  - {at: 1m, fault: probe, pod: p, probe: liveness, result: success}\n",
                "s.yaml:6: probe needs `container`",
            ),
            (
                "  - {at: 1m, fault: image-pull-fail, node: n1}\n",
                "s.yaml:6: image-pull-fail needs `image: NAME`",
            ),
            (
                "  - {at: 1m, fault: image-pull-heal, image: x, message: m}\n",
                "s.yaml:6: image-pull-heal takes no `message`",
            ),
            (
                "  - {at: 1m, fault: image-pull-fail, node: n7, image: x}\n",
                "s.yaml:6: unknown node \"n7\" (nodes: n1)",
            ),
        ];
        for (extra, want) in cases {
            let err = parse(&format!("{base}{extra}"), Path::new("s.yaml"))
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(want),
                "{extra:?}\n got: {err}\nwant: {want}"
            );
        }
    }

    #[test]
    fn per_node_kubelet_configuration_and_resizing_reboots_parse() {
        let text = r#"run-for: 10m
cluster:
  nodes:
    - name: n1
      kubelet:
        registerWithTaints: [{key: dedicated, value: gpu, effect: NoSchedule}, "example.com/x:NoExecute"]
        kubeReserved: {cpu: 500m, memory: 1Gi}
        systemReserved: {memory: 512Mi}
        evictionHard: {memory.available: 200Mi}
        enableControllerAttachDetach: false
        nodeLeaseDurationSeconds: 20
    - name: n2
faults:
  - {at: 1m, fault: reboot, node: n1, cpu: 8, memory: 16Gi, labels: {disk: ssd}}
  - {at: 2m, fault: reboot, node: n2}
"#;
        let sc = parse(text, Path::new("s.yaml")).unwrap();
        let n1 = &sc.cluster.nodes[0];
        let cfg = klab_cluster::node_kubelet_config(&Default::default(), &n1.kubelet).unwrap();
        let taints: Vec<(String, Option<String>, String)> = cfg
            .register_with_taints
            .iter()
            .map(|t| (t.key.clone(), t.value.clone(), t.effect.clone()))
            .collect();
        assert_eq!(
            taints,
            [
                ("dedicated".into(), Some("gpu".into()), "NoSchedule".into()),
                ("example.com/x".into(), None, "NoExecute".into()),
            ]
        );
        assert_eq!(cfg.reserved_cpu_millis, 500);
        assert_eq!(cfg.reserved_memory, (1024 + 512) * 1024 * 1024);
        assert_eq!(cfg.eviction_hard_memory_available, 200 * 1024 * 1024);
        assert!(!cfg.enable_controller_attach_detach);
        assert_eq!(cfg.node_lease_duration_seconds, 20);
        assert!(sc.cluster.nodes[1].kubelet.is_empty());
        let steps: Vec<String> = sc.steps.iter().map(|s| s.action.describe()).collect();
        assert_eq!(
            steps,
            [
                "Node n1 fault reboot cpu=8 memory=16Gi --node-labels=disk=ssd",
                "Node n2 fault reboot",
            ]
        );
        let base = "run-for: 10m\ncluster:\n  nodes:\n    - name: n1\n";
        let cases: &[(&str, &str)] = &[
            (
                "      kubelet: {registerWithTaints: [\"a=b\"]}\n",
                "s.yaml:4: node n1: kubelet registerWithTaints: taint \"a=b\" needs an effect",
            ),
            (
                "      kubelet: {kubeReserved: {gpu: 1}}\n",
                "s.yaml:4: node n1: kubelet kubeReserved: unsupported resource \"gpu\"",
            ),
            (
                "      kubelet: {nodeLeaseDurationSecond: 20}\n",
                "s.yaml:4: node n1: unknown kubelet field \"nodeLeaseDurationSecond\" (one of: registerNode,",
            ),
            (
                "      kubelet: {enableControllerAttachDetach: maybe}\n",
                "s.yaml:4: node n1: kubelet enableControllerAttachDetach: \"maybe\" is not a boolean",
            ),
            (
                "faults:\n  - {at: 1m, fault: reboot, node: n1, memory: lots}\n",
                "s.yaml:6: reboot: invalid memory quantity \"lots\"",
            ),
            (
                "faults:\n  - {at: 1m, fault: power-off, node: n1, cpu: 2}\n",
                "s.yaml:6: `cpu`, `memory` and `labels` go with `fault: reboot`",
            ),
            (
                "faults:\n  - {at: 1m, fault: reboot, node: n1, labels: {'a b': c}}\n",
                "s.yaml:6: reboot: invalid label a b=c:",
            ),
        ];
        for (extra, want) in cases {
            let err = parse(&format!("{base}{extra}"), Path::new("s.yaml"))
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(want),
                "{extra:?}\n got: {err}\nwant: {want}"
            );
        }
    }

    #[test]
    fn actions_on_any_object_and_waits_parse() {
        let text = r#"run-for: 10m
cluster:
  nodes:
    - name: n1
faults:
  - {at: 3m, fault: delete, target: lease/n1, namespace: kube-node-lease, propagation: Orphan, grace: 0}
  - {at: 1m, fault: evict, pod: kube-system/web-1, grace: 10}
  - {at: 2m, timeout: 90s, wait-for: {object: {kind: Deployment, name: web}, condition: Available=True}}
  - {at: 2m, fault: patch, target: node/n1, subresource: status, type: json, patch: [{op: add, path: /status/conditions/0/reason, value: X}]}
  - {at: 4m, fault: patch, target: pod/p, type: strategic, patch: {metadata: {labels: {a: b}}}}
  - {at: 5m, fault: delete, target: node/n1}
expect:
  - {at: 5m, object: {kind: Lease, name: n1, namespace: kube-node-lease}, exists: false}
  - {object: {kind: deploy, name: web}, condition: Progressing=False, reason: ProgressDeadlineExceeded}
  - {object: {kind: Node, name: n1}, jsonpath: '{.status.conditions[?(@.type=="Ready")].reason}', equals: KubeletReady}
  - {from: 1m, at: 6m, writes: {component: kubelet/n1, verb: PATCH, resource: nodes, subresource: status}, max-count: 1}
  - {node: n1, condition: Ready=False, reason: KubeletNotReady, message: "container runtime is down"}
"#;
        let sc = parse(text, Path::new("s.yaml")).unwrap();
        let steps: Vec<String> = sc.steps.iter().map(|s| s.action.describe()).collect();
        assert_eq!(
            steps,
            [
                "Pod kube-system/web-1 POST pods/eviction (gracePeriodSeconds 10)",
                "wait-for {object: {kind: Deployment, name: web}, condition: Available=True} (timeout 90.000s)",
                "Node n1 kubectl patch --type=json -p '[{\"op\":\"add\",\"path\":\"/status/conditions/0/reason\",\"value\":\"X\"}]' --subresource=status",
                "Lease kube-node-lease/n1 kubectl delete lease n1 --cascade=orphan --grace-period=0",
                "Pod default/p kubectl patch --type=strategic -p '{\"metadata\":{\"labels\":{\"a\":\"b\"}}}'",
                "Node n1 kubectl delete node n1",
            ]
        );
        // Whole objects are recorded for the kinds object expectations (and waits) read.
        let kinds: Vec<&str> = sc.object_kinds.iter().map(|r| r.kind).collect();
        assert_eq!(kinds, ["Node", "Deployment", "Lease"]);
        match &sc.expectations[3].check {
            Check::Writes { filter, count } => {
                assert_eq!(*count, Count::AtMost(1));
                assert!(filter.counts("system:node:n1", "PATCH", "nodes", "status", Some("n1")));
                assert!(!filter.counts("system:node:n2", "PATCH", "nodes", "status", Some("n2")));
                assert!(!filter.counts("system:node:n1", "GET", "nodes", "status", Some("n1")));
                assert!(!filter.counts("system:node:n1", "PATCH", "nodes", "", Some("n1")));
            }
            other => panic!("{other:?}"),
        }
        match &sc.expectations[4].check {
            Check::Node {
                condition: Some(c), ..
            } => assert_eq!(
                c.to_string(),
                "Ready=False (KubeletNotReady: container runtime is down)"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn write_filters_name_components_as_the_api_server_knows_them() {
        let f = |c: &str| WriteFilter {
            component: c.into(),
            verb: None,
            resource: None,
            subresource: None,
            name: None,
        };
        let table: &[(&str, &str, bool)] = &[
            ("kubelet", "system:node:n1", true),
            ("kubelet", "system:kube-scheduler", false),
            ("kubelet/n2", "system:node:n2", true),
            ("kubelet/n2", "system:node:n22", false),
            ("kube-scheduler", "system:kube-scheduler", true),
            (
                "node-controller",
                "system:serviceaccount:kube-system:node-controller",
                true,
            ),
            ("kubectl", "kubernetes-admin", true),
            ("system:node:n1", "system:node:n1", true),
        ];
        for (component, user, want) in table {
            assert_eq!(f(component).user_matches(user), *want, "{component} {user}");
        }
        assert!(!f("kubelet").counts("system:node:n1", "LIST", "pods", "", None));
        assert!(f("kubelet").counts("system:node:n1", "APPLY", "pods", "", None));
    }

    #[test]
    fn taint_specs_round_trip() {
        for s in [
            "k:NoSchedule",
            "k=v:NoExecute",
            "k",
            "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
        ] {
            assert_eq!(TaintSpec::parse(s).unwrap().to_string(), s);
        }
        assert!(TaintSpec::parse(":NoSchedule").is_err());
        assert!(TaintSpec::parse("k:Never").is_err());
    }
}
