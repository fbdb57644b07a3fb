//! Swarm testing: random sequences of ordinary operations and faults, played as ordinary scenarios.
//!
//! For one seed, [`generate`] writes a scenario file: a small zoned cluster running a RollingUpdate
//! Deployment, a Recreate Deployment, a StatefulSet and a DaemonSet; then, during a chaos window,
//! random scale-ups and scale-downs, rollouts, pod deletions with random grace (incl. force and
//! grace periods of decades), node faults (every valid transition of stop/start kubelet, power,
//! reboot, partition, freeze, graceful shutdown), memory / disk / PID pressure and a container's
//! memory spike (kubelet evictions and admission rejections), Node objects deleted and rejoined,
//! machines added and removed for good, the StatefulSet's volume backend failing, taints incl.
//! `node.kubernetes.io/out-of-service`, cordons, drains; then every fault is healed and the
//! cluster is given time to settle. Its expectations: every workload converged (all replicas
//! updated, ready and available), every Service's endpoints and every disruption budget's
//! healthy count matching the ready pods, no pod left Terminating, every node Ready (a removed one gone)
//! — and, as in every sim run, no component failed (a panic fails the run).
//!
//! Because a swarm case is a scenario file, a failing seed is replayed and debugged with
//! `klab sim` like any other scenario (the failure report carries the file).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use klab_api::DetRng;

use crate::{RunOptions, run_blocking, scenario};

/// The shape of generated cases.
#[derive(Debug, Clone)]
pub struct SwarmConfig {
    pub nodes: usize,
    pub zones: usize,
    /// Random operations during the chaos window.
    pub operations: usize,
    /// Random node-side operations during the chaos window (pressure, graceful shutdown, Node
    /// deletion and rejoin, machines added and removed, volume backend failures).
    pub node_operations: usize,
    /// Random control-plane and kubelet-level operations during the chaos window: components
    /// stopped and started or restarted (the API server, the controller manager, the
    /// scheduler, one controller), brownouts, clock skews, node conditions, image pull failures.
    pub control_operations: usize,
    pub chaos_for: Duration,
    /// Time to converge after every fault is healed.
    pub settle_for: Duration,
}

impl Default for SwarmConfig {
    fn default() -> Self {
        SwarmConfig {
            nodes: 4,
            zones: 2,
            operations: 30,
            node_operations: 10,
            control_operations: 8,
            chaos_for: Duration::from_secs(600),
            // Long enough for the DaemonSet controller's failed-pod backoff and the longest
            // default toleration after the last heal.
            settle_for: Duration::from_secs(1200),
        }
    }
}

/// What the generator knows of a node, so that it only asks for valid transitions.
#[derive(Debug, Clone)]
struct NodeModel {
    name: String,
    powered: bool,
    kubelet: bool,
    partitioned: bool,
    frozen: bool,
    out_of_service: bool,
    tainted: bool,
    cordoned: bool,
    /// Under a pressure fault (relieved at the end).
    pressure: bool,
    /// Its Node object was deleted (`delete-node`): the machine runs on, the kubelet rejoins.
    deleted: bool,
    /// Powered off for good and its Node deleted (`remove-node`): no later step names it.
    removed: bool,
    /// A graceful shutdown is under way until this instant (ms): the machine powers off by then.
    busy_until: u64,
    /// A control-plane step names it until this instant (ms): a clearing condition, a skew
    /// reset, a brownout's end. It is not removed before then.
    pinned_until: u64,
}

impl NodeModel {
    fn new(name: String) -> Self {
        NodeModel {
            name,
            powered: true,
            kubelet: true,
            partitioned: false,
            frozen: false,
            out_of_service: false,
            tainted: false,
            cordoned: false,
            pressure: false,
            deleted: false,
            removed: false,
            busy_until: 0,
            pinned_until: 0,
        }
    }

    /// Whether machine faults may name it at `t`.
    fn machine_ok(&self, t: u64) -> bool {
        !self.removed && self.busy_until <= t
    }

    /// Whether steps on its Node object (taints, cordons, drains) may name it.
    fn object_ok(&self) -> bool {
        !self.removed && !self.deleted
    }
}

/// Shutdown grace periods of swarm clusters, so `shutdown` is the graceful path; the machine is
/// off well before the generator names the node again.
const SHUTDOWN_GRACE_MS: u64 = 30_000;
const SHUTDOWN_BUSY_MS: u64 = SHUTDOWN_GRACE_MS + 10_000;

const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute";
const CUSTOM_TAINT: &str = "swarm.klab.dev/maintenance=true:NoSchedule";

const MANIFESTS: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: nginx, image: "nginx:1.27", resources: {requests: {cpu: 100m, memory: 64Mi}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: batch}
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector: {matchLabels: {app: batch}}
  template:
    metadata: {labels: {app: batch}}
    spec:
      containers:
      - {name: worker, image: "busybox:1.36", resources: {requests: {cpu: 100m}}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - name: mysql
        image: "mysql:8.4"
        resources: {requests: {cpu: 200m, memory: 256Mi}}
        volumeMounts: [{name: data, mountPath: /var/lib/mysql}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - {name: agent, image: "fluent-bit:3.2", resources: {requests: {cpu: 50m}}}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: db}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{port: 3306}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  maxUnavailable: 33%
  selector: {matchLabels: {app: web}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: db}}
"#;

fn pick<'a, T>(rng: &DetRng, items: &'a [T]) -> &'a T {
    let i = rng.range(0, items.len() as u64) as usize;
    &items[i.min(items.len() - 1)]
}

fn secs(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// The valid node faults for a node in this state, as scenario fault names.
fn valid_faults(n: &NodeModel) -> Vec<&'static str> {
    let mut out = Vec::new();
    if n.powered {
        out.push("power-off");
        out.push("reboot");
        out.push(if n.kubelet {
            "stop-kubelet"
        } else {
            "start-kubelet"
        });
        out.push(if n.frozen { "thaw" } else { "freeze" });
        out.push(if n.partitioned { "heal" } else { "partition" });
    } else {
        out.push("power-on");
        if n.partitioned {
            out.push("heal");
        }
    }
    out
}

fn apply_fault(n: &mut NodeModel, fault: &str, api_up: bool) {
    match fault {
        "power-off" => {
            n.powered = false;
            n.kubelet = false;
            n.frozen = false;
        }
        // A starting kubelet registers its Node again if it was deleted — if it can reach the
        // API server; a partitioned one cannot, and stays deleted until the rejoin at the end.
        // Started while the API server is stopped, it registers only when that starts, if it is
        // not frozen, partitioned or off by then: the model keeps it deleted (its Node object
        // named by no step) until the rejoin at the end.
        "power-on" | "reboot" => {
            n.powered = true;
            n.kubelet = true;
            n.frozen = false;
            n.deleted &= n.partitioned || !api_up;
        }
        "stop-kubelet" => n.kubelet = false,
        "start-kubelet" => {
            n.kubelet = true;
            n.deleted &= n.partitioned || n.frozen || !api_up;
        }
        "freeze" => n.frozen = true,
        "thaw" => n.frozen = false,
        "partition" => n.partitioned = true,
        "heal" => n.partitioned = false,
        _ => {}
    }
}

/// Writes the scenario of one swarm case.
pub fn generate(seed: u64, cfg: &SwarmConfig) -> String {
    let rng = DetRng::seeded(seed ^ 0x5741_524d); // the plan's own stream, apart from the run's
    let mut nodes: Vec<NodeModel> = (1..=cfg.nodes.max(1))
        .map(|i| NodeModel::new(format!("n{i}")))
        .collect();
    let end = cfg.chaos_for + cfg.settle_for;
    let mut y = String::new();
    let _ = writeln!(y, "name: swarm-{seed}");
    let _ = writeln!(
        y,
        "description: random operations and faults for {}, then {} to converge",
        secs(cfg.chaos_for),
        secs(cfg.settle_for)
    );
    let _ = writeln!(y, "seed: {seed}");
    let _ = writeln!(y, "run-for: {}", secs(end));
    let _ = writeln!(y, "cluster:\n  nodes:");
    for (i, n) in nodes.iter().enumerate() {
        // Room for every replica on one node: the cases test failure handling, not capacity
        // (a DaemonSet pod on a full node stays Pending upstream too: it does not preempt).
        let _ = writeln!(
            y,
            "    - {{name: {}, zone: zone-{}, cpu: 16, memory: 64Gi}}",
            n.name,
            i % cfg.zones.max(1)
        );
    }
    let _ = writeln!(
        y,
        "flags:\n  shutdownGracePeriod: {}\n  shutdownGracePeriodCriticalPods: 10s",
        secs(Duration::from_millis(SHUTDOWN_GRACE_MS))
    );
    let _ = writeln!(y, "manifests:\n  - inline: |");
    for l in MANIFESTS.lines() {
        let _ = writeln!(y, "      {l}");
    }
    let _ = writeln!(y, "faults:");
    // Two plans on their own random streams, merged by time: the ordinary operations (the
    // stream earlier swarm versions drew, so old seeds keep most of their cases) and the node-
    // side ones (pressure, shutdown, Node deletion, machines added and removed, volumes).
    let extra_rng = DetRng::seeded(seed ^ 0x4e4f_4445);
    // A third plan on a stream of its own: control-plane and kubelet-level faults.
    let control_rng = DetRng::seeded(seed ^ 0x4354_524c);
    let window = cfg.chaos_for.as_millis().max(5_001) as u64;
    let mut plan: Vec<(u64, Plan)> = (0..cfg.operations)
        .map(|_| (rng.range(5_000, window), Plan::Ordinary))
        .chain((0..cfg.node_operations).map(|_| (extra_rng.range(5_000, window), Plan::Node)))
        .chain(
            (0..cfg.control_operations).map(|_| (control_rng.range(5_000, window), Plan::Control)),
        )
        .collect();
    plan.sort_unstable();
    let first = nodes.len();
    let mut revision = 0u32;
    let mut extra = Extra::default();
    let mut control = Control::default();
    for (t, which) in plan {
        match which {
            Plan::Node => {
                if let Some(step) = extra_step(
                    &extra_rng,
                    &mut nodes,
                    &mut extra,
                    t,
                    cfg,
                    &control.api_down,
                ) {
                    let _ = writeln!(y, "  - {step}");
                }
                continue;
            }
            Plan::Control => {
                for step in control_steps(&control_rng, &mut nodes, &mut control, t, first, cfg) {
                    let _ = writeln!(y, "  - {step}");
                }
                continue;
            }
            Plan::Ordinary => {}
        }
        let at = secs(Duration::from_millis(t));
        // kubectl's steps wait for a stopped API server to start; node faults do not.
        let kubectl_at = secs(Duration::from_millis(api_up_at(&control.api_down, t)));
        let step = match rng.range(0, 16) {
            0..=2 => {
                let (target, max) = *pick(
                    &rng,
                    &[
                        ("deployment/web", 12u64),
                        ("deployment/batch", 3),
                        ("statefulset/db", 4),
                    ],
                );
                // Now and then a big jump, as `kubectl scale` of a busy service does.
                let replicas = if rng.range(0, 5) == 0 {
                    rng.range(0, 30)
                } else {
                    rng.range(0, max + 1)
                };
                Some(format!(
                    "{{at: {kubectl_at}, fault: scale, target: {target}, replicas: {replicas}}}"
                ))
            }
            3 | 4 => {
                revision += 1;
                let target = pick(
                    &rng,
                    &[
                        "deployment/web",
                        "deployment/batch",
                        "statefulset/db",
                        "daemonset/agent",
                    ],
                );
                Some(format!(
                    "{{at: {kubectl_at}, fault: patch, target: {target}, patch: {{spec: {{template: {{metadata: {{annotations: {{swarm.klab.dev/revision: \"{revision}\"}}}}}}}}}}}}"
                ))
            }
            5..=7 => {
                let app = pick(&rng, &["web", "batch", "db", "agent"]);
                let how = match rng.range(0, 6) {
                    0 => ", force: true".to_string(),
                    1 => ", grace: 0".to_string(),
                    2 => ", grace: 1".to_string(),
                    3 => format!(", grace: {}", u32::MAX),
                    4 => ", grace: 30".to_string(),
                    _ => String::new(),
                };
                let on_node = if rng.range(0, 2) == 0 {
                    format!(", on-node: {}", pick(&rng, &nodes[..first]).name)
                } else {
                    String::new()
                };
                Some(format!(
                    "{{at: {kubectl_at}, fault: delete-pod, selector: app={app}{on_node}{how}}}"
                ))
            }
            8..=12 => {
                let i = rng.range(0, first as u64) as usize;
                let n = &mut nodes[i];
                let fault = *pick(&rng, &valid_faults(n));
                let api_up = api_up_at(&control.api_down, t) == t;
                n.machine_ok(t).then(|| {
                    apply_fault(n, fault, api_up);
                    format!("{{at: {at}, fault: {fault}, node: {}}}", n.name)
                })
            }
            13 | 14 => {
                let i = rng.range(0, first as u64) as usize;
                let n = &mut nodes[i];
                let coin = rng.range(0, 2);
                if !n.object_ok() {
                    None
                } else if coin == 0 {
                    n.out_of_service = !n.out_of_service;
                    if n.out_of_service {
                        Some(format!(
                            "{{at: {kubectl_at}, fault: taint, node: {}, taint: \"{OUT_OF_SERVICE}\"}}",
                            n.name
                        ))
                    } else {
                        Some(format!(
                            "{{at: {kubectl_at}, fault: untaint, node: {}, taint: \"node.kubernetes.io/out-of-service:NoExecute\"}}",
                            n.name
                        ))
                    }
                } else {
                    n.tainted = !n.tainted;
                    if n.tainted {
                        Some(format!(
                            "{{at: {kubectl_at}, fault: taint, node: {}, taint: \"{CUSTOM_TAINT}\"}}",
                            n.name
                        ))
                    } else {
                        Some(format!(
                            "{{at: {kubectl_at}, fault: untaint, node: {}, taint: \"swarm.klab.dev/maintenance:NoSchedule\"}}",
                            n.name
                        ))
                    }
                }
            }
            15 if rng.range(0, 2) == 0 => {
                // kubectl drain beside the timeline (it cordons: healed by the uncordon below).
                let i = rng.range(0, first as u64) as usize;
                let n = &mut nodes[i];
                let skip = if rng.range(0, 2) == 0 {
                    ", skip-wait-for-delete-timeout: 20"
                } else {
                    ""
                };
                n.object_ok().then(|| {
                    n.cordoned = true;
                    format!(
                        "{{at: {kubectl_at}, fault: drain, node: {}, ignore-daemonsets: true, timeout: 90s{skip}}}",
                        n.name
                    )
                })
            }
            _ => {
                let i = rng.range(0, first as u64) as usize;
                let n = &mut nodes[i];
                n.object_ok().then(|| {
                    n.cordoned = !n.cordoned;
                    let verb = if n.cordoned { "cordon" } else { "uncordon" };
                    format!("{{at: {kubectl_at}, fault: {verb}, node: {}}}", n.name)
                })
            }
        };
        if let Some(step) = step {
            let _ = writeln!(y, "  - {step}");
        }
    }
    // Heal everything at the end of the chaos window.
    let at = secs(cfg.chaos_for);
    for n in nodes.iter().filter(|n| !n.removed) {
        let mut steps: Vec<String> = Vec::new();
        if n.frozen {
            steps.push("fault: thaw".into());
        }
        if n.partitioned {
            steps.push("fault: heal".into());
        }
        if !n.powered {
            // Booting starts the kubelet, which registers a deleted Node again.
            steps.push("fault: power-on".into());
        } else if n.deleted {
            steps.push("fault: rejoin".into());
        } else if !n.kubelet {
            steps.push("fault: start-kubelet".into());
        }
        if n.pressure {
            steps.push("fault: relieve".into());
        }
        // A Node registered again has none of the old object's taints or cordon.
        let fresh = n.deleted;
        if n.out_of_service && !fresh {
            steps.push(
                "fault: untaint, taint: \"node.kubernetes.io/out-of-service:NoExecute\"".into(),
            );
        }
        if n.tainted && !fresh {
            steps.push("fault: untaint, taint: \"swarm.klab.dev/maintenance:NoSchedule\"".into());
        }
        if n.cordoned && !fresh {
            steps.push("fault: uncordon".into());
        }
        for s in steps {
            let _ = writeln!(y, "  - {{at: {at}, {s}, node: {}}}", n.name);
        }
    }
    for n in nodes.iter().filter(|n| !n.removed) {
        if let Some(type_) = control.conditions.get(&n.name) {
            let _ = writeln!(
                y,
                "  - {{at: {at}, fault: clear-node-condition, node: {}, condition: {type_}}}",
                n.name
            );
        }
        if control.skewed.contains(&n.name) {
            let _ = writeln!(
                y,
                "  - {{at: {at}, fault: clock-skew, node: {}, offset: 0s}}",
                n.name
            );
        }
    }
    for image in &control.failing_images {
        let _ = writeln!(
            y,
            "  - {{at: {at}, fault: image-pull-heal, image: \"{image}\"}}"
        );
    }
    if extra.volume_failed {
        let _ = writeln!(
            y,
            "  - {{at: {at}, fault: volume-heal, volume: {DB_CLAIM}}}"
        );
    }
    let _ = writeln!(y, "expect:");
    let _ = writeln!(y, "  - {{workloads: converged}}");
    let _ = writeln!(y, "  - {{services: converged}}");
    let _ = writeln!(
        y,
        "  - {{pods: {{namespace: default}}, status: Terminating, count: 0}}"
    );
    for n in &nodes {
        if n.removed {
            let _ = writeln!(y, "  - {{node: {}, exists: false}}", n.name);
        } else {
            let _ = writeln!(y, "  - {{node: {}, status: Ready}}", n.name);
        }
    }
    y
}

/// The claim of the StatefulSet's first replica, whose volume backend `volume-fail` breaks.
const DB_CLAIM: &str = "default/data-db-0";

/// What the node-side plan has done so far.
#[derive(Debug, Default)]
struct Extra {
    added: usize,
    removed: usize,
    volume_failed: bool,
}

/// One node-side step at `t`, or nothing when no node can take it now.
fn extra_step(
    rng: &DetRng,
    nodes: &mut Vec<NodeModel>,
    extra: &mut Extra,
    t: u64,
    cfg: &SwarmConfig,
    api_down: &[(u64, u64)],
) -> Option<String> {
    let at = secs(Duration::from_millis(t));
    // kubectl's steps wait for a stopped API server to start (the plan refuses them otherwise).
    let kubectl_at = secs(Duration::from_millis(api_up_at(api_down, t)));
    let kind = rng.range(0, 7);
    // Nodes a machine fault may name now, and one of them drawn (always drawn, so that the
    // stream does not depend on how many qualify).
    let live: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].machine_ok(t))
        .collect();
    let draw = rng.range(0, live.len().max(1) as u64) as usize;
    let chosen = live.get(draw).copied();
    match kind {
        0 => {
            let n = &mut nodes[chosen?];
            if !n.powered {
                return None;
            }
            let step = if n.pressure {
                format!("{{at: {at}, fault: relieve, node: {}}}", n.name)
            } else {
                let (fault, available) = *pick(
                    rng,
                    &[
                        ("memory-pressure", "50Mi"),
                        ("disk-pressure", "500Mi"),
                        ("pid-pressure", "50"),
                    ],
                );
                format!(
                    "{{at: {at}, fault: {fault}, node: {}, available: {available}}}",
                    n.name
                )
            };
            n.pressure = !n.pressure;
            Some(step)
        }
        // A container's working set beyond its node's memory: the eviction manager must rank
        // and evict it without its arithmetic overflowing.
        1 => Some(format!(
            "{{at: {kubectl_at}, fault: usage, selector: app=batch, container: worker, usage: \"memory=70Gi\"}}"
        )),
        2 => {
            let n = &mut nodes[chosen?];
            // The machine must be off before the heal at the end of the window.
            if !n.powered || t.saturating_add(SHUTDOWN_BUSY_MS) >= cfg.chaos_for.as_millis() as u64
            {
                return None;
            }
            n.powered = false;
            n.kubelet = false;
            n.frozen = false;
            n.busy_until = t.saturating_add(SHUTDOWN_BUSY_MS);
            Some(format!("{{at: {at}, fault: shutdown, node: {}}}", n.name))
        }
        3 => {
            let n = &mut nodes[chosen?];
            if !n.deleted && api_up_at(api_down, t) != t {
                // The Node's deletion is kubectl's: not while the API server is stopped (a
                // deferred one could land after a rejoin the model already counted).
                None
            } else if !n.deleted {
                n.deleted = true;
                n.tainted = false;
                n.out_of_service = false;
                n.cordoned = false;
                Some(format!(
                    "{{at: {at}, fault: delete-node, node: {}}}",
                    n.name
                ))
            } else if n.powered && !n.frozen {
                // Registers unless partitioned or the API server is stopped (then the rejoin at
                // the end does).
                n.deleted = n.partitioned || api_up_at(api_down, t) != t;
                n.kubelet = true;
                Some(format!("{{at: {at}, fault: rejoin, node: {}}}", n.name))
            } else {
                None
            }
        }
        4 if extra.added < 2 => {
            extra.added += 1;
            let name = format!("n{}", nodes.len() + 1);
            let zone = nodes.len() % cfg.zones.max(1);
            nodes.push(NodeModel::new(name.clone()));
            Some(format!(
                "{{at: {at}, fault: add-node, node: {name}, zone: zone-{zone}}}"
            ))
        }
        5 if extra.removed < 1 && nodes.iter().filter(|n| !n.removed).count() > 3 => {
            let n = &mut nodes[chosen?];
            if n.pinned_until > t {
                return None;
            }
            extra.removed += 1;
            n.removed = true;
            Some(format!(
                "{{at: {at}, fault: remove-node, node: {}}}",
                n.name
            ))
        }
        6 => {
            extra.volume_failed = !extra.volume_failed;
            let verb = if extra.volume_failed {
                "volume-fail"
            } else {
                "volume-heal"
            };
            Some(format!("{{at: {at}, fault: {verb}, volume: {DB_CLAIM}}}"))
        }
        _ => None,
    }
}

/// Which of the three plans a drawn instant belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Plan {
    Ordinary,
    Node,
    Control,
}

/// What the control-plane plan has done so far.
#[derive(Debug, Default)]
struct Control {
    /// Windows (ms, start inclusive, end exclusive) in which the API server is stopped.
    api_down: Vec<(u64, u64)>,
    /// Until when (ms) a component is stopped: stops and restarts never overlap, so no
    /// transition is refused (the controller manager stops as a whole with its controllers).
    components_busy_until: u64,
    /// Until when (ms) a brownout runs (one at a time per client is what the plan keeps).
    brownout_until: std::collections::BTreeMap<String, u64>,
    /// Conditions reported by kubelets, cleared at the end of the chaos window.
    conditions: std::collections::BTreeMap<String, String>,
    /// Machines whose clocks are off, put right at the end of the chaos window.
    skewed: std::collections::BTreeSet<String>,
    /// Images whose pulls fail, healed at the end of the chaos window.
    failing_images: std::collections::BTreeSet<&'static str>,
}

/// When a kubectl step drawn at `t` runs: at `t`, or when the API server stopped at `t` starts
/// again (in that instant, after the start step, which is written first).
fn api_up_at(windows: &[(u64, u64)], t: u64) -> u64 {
    windows
        .iter()
        .find(|(from, to)| *from <= t && t < *to)
        .map_or(t, |(_, to)| *to)
}

/// Components a swarm stops, starts or restarts (by the names and aliases users type).
const SWARM_COMPONENTS: &[&str] = &[
    "kube-controller-manager",
    "kube-scheduler",
    "nodelifecycle",
    "replicaset",
    "deployment",
    "statefulset",
    "daemonset",
    "taint-eviction-controller",
    "endpointslice",
    "garbagecollector",
    "podgc",
    "metrics-server",
];

/// The images of the swarm's workloads, whose pulls may fail.
const SWARM_IMAGES: &[&str] = &["nginx:1.27", "busybox:1.36", "mysql:8.4", "fluent-bit:3.2"];

/// The control-plane plan's steps at `t` (a fault and, for windows, its end), or none when the
/// drawn operation cannot run now. Every fault it leaves on is undone by the end of the chaos
/// window.
fn control_steps(
    rng: &DetRng,
    nodes: &mut [NodeModel],
    c: &mut Control,
    t: u64,
    first: usize,
    cfg: &SwarmConfig,
) -> Vec<String> {
    let chaos = cfg.chaos_for.as_millis() as u64;
    let at = secs(Duration::from_millis(t));
    let kind = rng.range(0, 8);
    // Always drawn, so the stream does not depend on which branch runs.
    let length = rng.range(5_000, 60_000);
    let until = t.saturating_add(length);
    let node_i = rng.range(0, first as u64) as usize;
    let variant = rng.range(0, 4);
    let mut out = Vec::new();
    match kind {
        // A component stopped for a while, then started.
        0 | 1 if t >= c.components_busy_until && until < chaos => {
            let name = *pick(rng, SWARM_COMPONENTS);
            c.components_busy_until = until;
            out.push(format!(
                "{{at: {at}, fault: component-stop, component: {name}}}"
            ));
            out.push(format!(
                "{{at: {}, fault: component-start, component: {name}}}",
                secs(Duration::from_millis(until))
            ));
        }
        // The API server stopped for a while: clients relist when it is back.
        2 if t >= c.components_busy_until && until < chaos => {
            c.components_busy_until = until;
            c.api_down.push((t, until));
            out.push(format!(
                "{{at: {at}, fault: component-stop, component: kube-apiserver}}"
            ));
            out.push(format!(
                "{{at: {}, fault: component-start, component: kube-apiserver}}",
                secs(Duration::from_millis(until))
            ));
        }
        3 if t >= c.components_busy_until => {
            let name = if variant == 0 {
                "kube-apiserver"
            } else {
                *pick(rng, SWARM_COMPONENTS)
            };
            out.push(format!(
                "{{at: {at}, fault: component-restart, component: {name}}}"
            ));
        }
        // A brownout of a client, ending by itself before the end of the chaos window.
        4 if until < chaos => {
            let n = &mut nodes[node_i];
            let who = match variant {
                0 if n.machine_ok(t) => format!("kubelet/{}", n.name),
                0 | 1 => "kube-controller-manager".to_string(),
                2 => "kube-scheduler".to_string(),
                _ => "metrics-server".to_string(),
            };
            if c.brownout_until.get(&who).is_some_and(|&u| u > t) {
                return out;
            }
            if who.starts_with("kubelet/") {
                n.pinned_until = n.pinned_until.max(until);
            }
            c.brownout_until.insert(who.clone(), until);
            let code = *pick(rng, &[500u16, 503, 429]);
            let rate = rng.range(0, 101);
            let latency = rng.range(0, 3_000);
            out.push(format!(
                "{{at: {at}, fault: brownout, component: {who}, latency: {latency}ms, error-rate: {}.{:02}, code: {code}, duration: {}}}",
                rate / 100,
                rate % 100,
                secs(Duration::from_millis(length))
            ));
        }
        // A machine's clock off by up to three minutes, put right at the end.
        5 => {
            let n = &mut nodes[node_i];
            if !n.machine_ok(t) {
                return out;
            }
            let offset = rng.range(0, 360_001);
            let sign = if offset < 180_000 { "-" } else { "" };
            let ms = offset.abs_diff(180_000);
            n.pinned_until = chaos;
            c.skewed.insert(n.name.clone());
            out.push(format!(
                "{{at: {at}, fault: clock-skew, node: {}, offset: {sign}{ms}ms}}",
                n.name
            ));
        }
        // The running kubelet reports a failure: cleared after a while or at the end.
        6 => {
            let n = &mut nodes[node_i];
            if !n.machine_ok(t) || c.conditions.contains_key(&n.name) {
                return out;
            }
            let (cond, extra) = match variant {
                0 | 1 => (
                    "Ready=False",
                    ", reason: KubeletNotReady, message: \"container runtime is down\"",
                ),
                2 => ("NetworkUnavailable=True", ", reason: NoRouteCreated"),
                _ => (
                    "MemoryPressure=True",
                    ", reason: KubeletHasInsufficientMemory",
                ),
            };
            let type_ = cond.split('=').next().unwrap_or(cond);
            out.push(format!(
                "{{at: {at}, fault: node-condition, node: {}, condition: {cond}{extra}}}",
                n.name
            ));
            if until < chaos {
                out.push(format!(
                    "{{at: {}, fault: clear-node-condition, node: {}, condition: {type_}}}",
                    secs(Duration::from_millis(until)),
                    n.name
                ));
                n.pinned_until = n.pinned_until.max(until);
            } else {
                c.conditions.insert(n.name.clone(), type_.to_string());
                n.pinned_until = chaos;
            }
        }
        // Pulls of a workload's image fail, on one node or on all; healed at the end.
        7 => {
            let image = *pick(rng, SWARM_IMAGES);
            let n = &mut nodes[node_i];
            let on = if variant < 2 && n.machine_ok(t) {
                n.pinned_until = chaos;
                format!(", node: {}", n.name)
            } else {
                String::new()
            };
            c.failing_images.insert(image);
            out.push(format!(
                "{{at: {at}, fault: image-pull-fail, image: \"{image}\"{on}}}"
            ));
        }
        _ => {}
    }
    out
}

/// A failed swarm case: its seed, its scenario and what went wrong.
#[derive(Debug, Clone)]
pub struct SwarmFailure {
    pub seed: u64,
    pub scenario: String,
    pub problem: String,
}

impl std::fmt::Display for SwarmFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "swarm seed {}: {}\n(save the scenario below as swarm-{}.yaml and replay it with `klab sim swarm-{}.yaml`)\n{}",
            self.seed, self.problem, self.seed, self.seed, self.scenario
        )
    }
}

/// Runs one swarm case.
pub fn run_case(seed: u64, cfg: &SwarmConfig) -> Result<(), SwarmFailure> {
    let text = generate(seed, cfg);
    let fail = |problem: String| SwarmFailure {
        seed,
        scenario: text.clone(),
        problem,
    };
    let path = format!("swarm-{seed}.yaml");
    let sc = scenario::parse(&text, Path::new(&path)).map_err(|e| fail(e.to_string()))?;
    let outcome = run_blocking(&sc, &RunOptions::default()).map_err(|e| fail(e.to_string()))?;
    if outcome.verdict.failures.is_empty() {
        return Ok(());
    }
    Err(fail(crate::failure_report(&sc, &outcome)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_cases_parse_and_only_ask_for_valid_transitions() {
        let cfg = SwarmConfig {
            operations: 200,
            ..SwarmConfig::default()
        };
        for seed in 0..50 {
            let text = generate(seed, &cfg);
            let sc = scenario::parse(&text, Path::new("swarm.yaml"))
                .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
            assert_eq!(sc.seed, seed);
            // Steps on nodes that cannot take them (removed, shutting down, a deleted Node)
            // are left out; most of the plan stays.
            assert!(sc.steps.len() >= 150, "seed {seed}: {}", sc.steps.len());
            assert_eq!(generate(seed, &cfg), text, "generation is deterministic");
            // A removed machine is never named again, except to expect it gone.
            let lines: Vec<&str> = text.lines().collect();
            for (i, l) in lines.iter().enumerate() {
                let Some(rest) = l.split("fault: remove-node, node: ").nth(1) else {
                    continue;
                };
                let node = format!(", node: {}", rest.trim_end_matches('}'));
                for later in &lines[i + 1..] {
                    let names =
                        later.contains(&format!("{node},")) || later.contains(&format!("{node}}}"));
                    assert!(
                        !names || later.contains("exists: false"),
                        "seed {seed}: {later}"
                    );
                }
            }
        }
        assert_ne!(generate(1, &cfg), generate(2, &cfg));
    }

    /// The control-plane plan draws every kind of its faults over a few seeds, and each case
    /// still parses: no kubectl step falls in a window where the API server is stopped (the plan
    /// would be refused), every window and condition ends, every skew is put right.
    #[test]
    fn generated_cases_draw_control_plane_faults_and_undo_them() {
        let cfg = SwarmConfig {
            control_operations: 40,
            ..SwarmConfig::default()
        };
        let mut all = String::new();
        for seed in 0..40 {
            let text = generate(seed, &cfg);
            scenario::parse(&text, Path::new("swarm.yaml"))
                .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
            let count = |p: &str| text.matches(p).count();
            assert_eq!(
                count("component-stop, component: kube-apiserver"),
                count("component-start, component: kube-apiserver"),
                "seed {seed}"
            );
            assert_eq!(
                count("fault: component-stop"),
                count("fault: component-start")
            );
            for l in text.lines().filter(|l| l.contains("fault: clock-skew")) {
                let node = l.split("node: ").nth(1).and_then(|r| r.split(',').next());
                let reset = format!(
                    "fault: clock-skew, node: {}, offset: 0s}}",
                    node.unwrap_or("?")
                );
                assert!(text.contains(&reset), "seed {seed}: a skew left on: {l}");
            }
            if count("fault: image-pull-fail") > 0 {
                assert!(count("fault: image-pull-heal") > 0, "seed {seed}");
            }
            all.push_str(&text);
        }
        for want in [
            "fault: component-stop, component: kube-apiserver",
            "fault: component-stop, component: kube-controller-manager",
            "fault: component-restart, component: kube-apiserver",
            "fault: component-stop, component: nodelifecycle",
            "fault: brownout, component: kubelet/",
            "fault: brownout, component: kube-scheduler",
            "fault: clock-skew",
            "condition: Ready=False",
            "condition: NetworkUnavailable=True",
            "fault: clear-node-condition",
            "fault: image-pull-fail",
        ] {
            assert!(all.contains(want), "no {want:?} in 40 seeds");
        }
    }

    /// A few seeds in every test run (the release swarm bench runs thousands): no component
    /// fails, and every workload converges after the faults heal. Seeds that once failed stay as
    /// regressions: 8 (the ReplicaSet ranking panicked on a scale-down), 670 (a pod deleted by
    /// selector went away between the list and its delete), 77 (a pod evicted while the API
    /// server was stopped stayed Running in the API), 268 (a ReplicaSet whose status write failed
    /// never retried it; the run also depended on tokio's unseeded generator), 359 (a Node
    /// powered on during an API-server outage was taken for registered).
    #[test]
    fn random_operations_and_faults_converge_without_component_failures() {
        let cfg = SwarmConfig::default();
        for seed in [1, 2, 8, 670, 77, 268, 359] {
            if let Err(f) = run_case(seed, &cfg) {
                panic!("{f}");
            }
        }
    }
}
