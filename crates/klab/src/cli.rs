//! Command-line interface: `klab up` (component flags under their upstream names), `klab sim`,
//! `klab why` and the client commands of a running cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "klab",
    version,
    about = "A Kubernetes-API-compatible cluster whose node-failure behaviour matches upstream"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a live cluster served over TLS for kubectl.
    Up(Box<UpArgs>),
    /// Play a scenario in deterministic virtual time and print its trace.
    Sim(SimArgs),
    /// Apply a fault to a node of a running `klab up`, re-register it (`rejoin`), add or remove a
    /// machine, or list the nodes.
    Node(NodeArgs),
    /// List the supervised components of a running `klab up` (restarts, panics), make one
    /// panic to watch it be restarted, stop / start / restart one, or brown out a client's
    /// requests: `klab component list`, `klab component panic|stop|start|restart NAME`,
    /// `klab component brownout NAME [--latency D] [--error-rate R] [--code C] [--end]`.
    Component(ComponentArgs),
    /// Make a volume's simulated CSI backend unavailable or healthy again, so attach and detach
    /// fail (and are retried) in between: `klab volume fail NAME`, `klab volume heal NAME`
    /// (NAME: a PersistentVolume, or a claim as `[namespace/]claim`).
    Volume(VolumeArgs),
    /// Explain why a pod, node or workload is in its state, with times and countdowns, from the
    /// API of any cluster: `klab why pod/web-1 -n default`, `klab why node/n2`,
    /// `klab why deployment/nginx -o json`. Exit code 0: nothing stuck, 1: something stuck or
    /// pending, 2: error.
    Why(WhyArgs),
    /// Mint a user: `klab user add NAME [--group G] [--kubeconfig OUT]` writes a kubeconfig with a
    /// client certificate (CN NAME, O the group) signed by the cluster's CA, to try RBAC as a
    /// real user (default output <data-dir>/users/NAME.kubeconfig).
    User(UserArgs),
}

#[derive(Debug, Args)]
pub struct WhyArgs {
    /// KIND/NAME: pod, node, deployment, replicaset, statefulset, daemonset, job (or kubectl's
    /// short names: po, no, deploy, rs, sts, ds).
    pub target: String,
    /// Namespace (default: the kubeconfig context's).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: crate::why_cmd::WhyOutput,
    /// Kubeconfig (default: $KUBECONFIG or ~/.kube/config as kubectl reads them, else
    /// <data-dir>/kubeconfig when it exists).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Data directory of a local `klab up`.
    #[arg(long, default_value = ".klab")]
    pub data_dir: PathBuf,
    /// A kube-controller-manager flag of the cluster, when it differs from upstream's default
    /// and cannot be read from the cluster: e.g. `node-monitor-grace-period=40s`.
    #[arg(long = "controller-flag")]
    pub controller_flags: Vec<String>,
}

#[derive(Debug, Args)]
pub struct UserArgs {
    /// add
    pub action: String,
    /// The user name (the certificate's CN).
    pub name: String,
    /// The group the user belongs to (the certificate's O; at most one).
    #[arg(long = "group")]
    pub groups: Vec<String>,
    /// Where to write the user's kubeconfig.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Data directory of the cluster (its CA and admin kubeconfig).
    #[arg(long, default_value = ".klab")]
    pub data_dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct VolumeArgs {
    /// fail, heal
    pub action: String,
    /// A PersistentVolume, or a claim as `[namespace/]claim`.
    pub name: String,
    #[command(flatten)]
    pub cluster: RunningCluster,
}

#[derive(Debug, Args)]
pub struct ComponentArgs {
    /// list, panic, stop, start, restart, brownout
    pub action: String,
    /// The component, as `klab component list` names it (e.g.
    /// kube-controller-manager/replicaset-controller, kube-scheduler, kubelet/klab-worker);
    /// stop/start/restart also take kube-apiserver, kube-controller-manager and a controller's
    /// `--controllers` name or alias (nodelifecycle, replicaset, …).
    pub name: Option<String>,
    /// `brownout`: latency added to each of the client's requests (e.g. 2s).
    #[arg(long)]
    pub latency: Option<String>,
    /// `brownout`: the share of the client's requests that fail, in [0, 1].
    #[arg(long)]
    pub error_rate: Option<String>,
    /// `brownout`: the status failed requests get: 500, 503 (default) or 429.
    #[arg(long)]
    pub code: Option<String>,
    /// `brownout`: end the client's brownout.
    #[arg(long)]
    pub end: bool,
    #[command(flatten)]
    pub cluster: RunningCluster,
}

#[derive(Debug, Args)]
pub struct NodeArgs {
    /// list, stop-kubelet, start-kubelet, power-off, power-on, reboot, partition, heal, freeze,
    /// thaw, memory-pressure|disk-pressure|pid-pressure (with --available), relieve, shutdown (`systemctl poweroff`: graceful when the kubelet has a shutdownGracePeriod),
    /// shutdown-cancel, runtime-down|runtime-up (the container runtime stops answering / answers
    /// again), fail-lease-updates|fail-status-updates (only the kubelet's Lease / Node status
    /// writes fail) and heal-lease-updates|heal-status-updates, rejoin (restart the kubelet: it
    /// registers again), add (a new machine joins), remove
    /// (the machine is powered off for good and its Node deleted), clock-skew (with --offset:
    /// the machine's clock runs ahead or behind), condition (with --type, --status, --reason,
    /// --message: the running kubelet reports that condition) and clear-condition (--type),
    /// image-pull-fail|image-pull-heal (NAME IMAGE, or --all IMAGE: pulls of the image fail /
    /// work again), reboot with --cpu/--memory/--label (the machine boots resized or relabelled)
    pub action: String,
    /// The node (not needed for `list`; with `image-pull-fail|heal --all`, the image).
    pub name: Option<String>,
    /// `image-pull-fail|image-pull-heal NAME IMAGE`: the image, as pods name it.
    pub image: Option<String>,
    /// `condition`, `clear-condition`: the condition type (Ready, NetworkUnavailable, …).
    #[arg(long = "type")]
    pub type_: Option<String>,
    /// `condition`: True, False or Unknown.
    #[arg(long)]
    pub status: Option<String>,
    /// `condition`: the condition's reason (e.g. KubeletNotReady).
    #[arg(long)]
    pub reason: Option<String>,
    /// `condition`: the condition's message; `image-pull-fail`: the runtime's pull error
    /// (default: containerd's not-found answer).
    #[arg(long)]
    pub message: Option<String>,
    /// `image-pull-fail|image-pull-heal`: on every node.
    #[arg(long)]
    pub all: bool,
    /// `reboot`: the machine's CPU capacity after the reboot (e.g. 8).
    #[arg(long)]
    pub cpu: Option<String>,
    /// `reboot`: the machine's memory capacity after the reboot (e.g. 16Gi).
    #[arg(long)]
    pub memory: Option<String>,
    /// `reboot`: the kubelet's `--node-labels` after the reboot, key=value (repeatable).
    #[arg(long = "label")]
    pub labels: Vec<String>,
    /// `add` only: the new node's `topology.kubernetes.io/zone`.
    #[arg(long)]
    pub zone: Option<String>,
    /// `memory-pressure`, `disk-pressure`, `pid-pressure` only: what the signal
    /// (`memory.available`, `nodefs.available`, `pid.available`) observes from now on, e.g.
    /// `80Mi` or `500`; `relieve` returns every signal to the usage model.
    #[arg(long)]
    pub available: Option<String>,
    /// `clock-skew` only: how far the machine's clock is ahead (`2m`) or behind (`-2m`); `0`
    /// puts it right again.
    #[arg(long, allow_hyphen_values = true)]
    pub offset: Option<String>,
    #[command(flatten)]
    pub cluster: RunningCluster,
}

/// How `klab node` and `klab component` find a running `klab up`.
#[derive(Debug, Args)]
pub struct RunningCluster {
    /// Kubeconfig of the running cluster (default: the first file of $KUBECONFIG, else
    /// <data-dir>/kubeconfig).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Data directory of the running cluster.
    #[arg(long, default_value = ".klab")]
    pub data_dir: PathBuf,
}

impl RunningCluster {
    fn kubeconfig(self) -> PathBuf {
        node_kubeconfig(
            self.kubeconfig,
            std::env::var_os("KUBECONFIG"),
            &self.data_dir,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_kubeconfig_follows_kubectl_precedence() {
        let dir = std::path::Path::new("/d");
        assert_eq!(
            node_kubeconfig(Some("/flag".into()), Some("/env1:/env2".into()), dir),
            PathBuf::from("/flag")
        );
        assert_eq!(
            node_kubeconfig(None, Some("/env1:/env2".into()), dir),
            PathBuf::from("/env1")
        );
        assert_eq!(
            node_kubeconfig(None, Some("".into()), dir),
            dir.join("kubeconfig")
        );
        assert_eq!(node_kubeconfig(None, None, dir), dir.join("kubeconfig"));
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct SimArgs {
    /// The scenario file (YAML).
    pub file: PathBuf,
    /// Seed of the run (default: the scenario's `seed`, else 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Trace format: aligned text or JSON lines.
    #[arg(long, value_enum, default_value = "text")]
    pub format: TraceFormat,
    /// Stop the run at this virtual time (e.g. `90s`); later expectations are skipped.
    #[arg(long)]
    pub until: Option<String>,
    /// Also write the run as one self-contained HTML page: an SVG timeline with a lane per node
    /// and per pod, Events, evictions linked to replacements, expectations and the summary.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// No progress bar (it is drawn on stderr only when stderr is a terminal).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// Flags of kube-apiserver that klab honours, under their upstream names.
#[derive(Debug, Args, Clone)]
pub struct ApiServerFlags {
    /// Toleration seconds added to pods without a not-ready NoExecute toleration.
    #[arg(long = "default-not-ready-toleration-seconds", default_value_t = 300)]
    pub default_not_ready_toleration_seconds: i64,
    /// Toleration seconds added to pods without an unreachable NoExecute toleration.
    #[arg(long = "default-unreachable-toleration-seconds", default_value_t = 300)]
    pub default_unreachable_toleration_seconds: i64,
    /// Authorizers, as kube-apiserver's flag: Node,RBAC (with NodeRestriction; the default, as
    /// upstream clusters run), RBAC, or AlwaysAllow. `system:masters` (the admin kubeconfig) is
    /// always allowed.
    #[arg(long = "authorization-mode", default_value = "Node,RBAC", value_parser = klab_apiserver::authz::AuthorizationMode::parse)]
    pub authorization_mode: klab_apiserver::authz::AuthorizationMode,
    /// Write audit.k8s.io/v1 Events as JSON lines to this file (with --audit-policy-file).
    #[arg(long = "audit-log-path")]
    pub audit_log_path: Option<PathBuf>,
    /// The audit.k8s.io/v1 Policy deciding what is audited, at which level.
    #[arg(long = "audit-policy-file")]
    pub audit_policy_file: Option<PathBuf>,
    /// Static bearer tokens: a CSV file of token,user,uid,"group1,group2".
    #[arg(long = "token-auth-file")]
    pub token_auth_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Where the cluster keeps its store, PKI and kubeconfig.
    #[arg(long, default_value = ".klab")]
    pub data_dir: PathBuf,
    /// Address of the TLS API endpoint.
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Where to write the kubeconfig (default: <data-dir>/kubeconfig).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Number of simulated nodes.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Zones to spread the nodes over, round-robin (`topology.kubernetes.io/zone`), e.g. `a,b,c`.
    #[arg(long, value_delimiter = ',')]
    pub zones: Vec<String>,
    /// Run the cluster's time this many times faster than the wall clock.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub speed: f64,
    /// Boot every node fresh instead of restoring the machines a previous run saved (a power
    /// loss of every node rather than a control-plane restart).
    #[arg(long)]
    pub cold_start: bool,
    #[command(flatten)]
    pub apiserver: ApiServerFlags,
    #[command(flatten)]
    pub components: ComponentFlags,
}

/// kube-controller-manager and kubelet flags, under their upstream names; each is passed to
/// `Cluster::set_flag`, which owns the mapping onto component configurations.
#[derive(Debug, Args, Clone, Default)]
pub struct ComponentFlags {
    /// How often the node lifecycle controller checks node health (default 5s).
    #[arg(long = "node-monitor-period")]
    pub node_monitor_period: Option<String>,
    /// How long a node may stay silent before it is marked Unknown (default 50s).
    #[arg(long = "node-monitor-grace-period")]
    pub node_monitor_grace_period: Option<String>,
    /// How long a new node may stay silent before it is marked Unknown (default 60s).
    #[arg(long = "node-startup-grace-period")]
    pub node_startup_grace_period: Option<String>,
    /// NoExecute tainting rate per zone, nodes/s (default 0.1).
    #[arg(long = "node-eviction-rate")]
    pub node_eviction_rate: Option<String>,
    /// Tainting rate in a partially disrupted large zone (default 0.01).
    #[arg(long = "secondary-node-eviction-rate")]
    pub secondary_node_eviction_rate: Option<String>,
    /// Zones larger than this use the secondary rate when partially disrupted (default 50).
    #[arg(long = "large-cluster-size-threshold")]
    pub large_cluster_size_threshold: Option<String>,
    /// Fraction of not-ready nodes that makes a zone partially disrupted (default 0.55).
    #[arg(long = "unhealthy-zone-threshold")]
    pub unhealthy_zone_threshold: Option<String>,
    /// Terminated pods kept before PodGC deletes the oldest (default 12500).
    #[arg(long = "terminated-pod-gc-threshold")]
    pub terminated_pod_gc_threshold: Option<String>,
    /// Kubelet nodeStatusUpdateFrequency (default 10s).
    #[arg(long = "node-status-update-frequency")]
    pub node_status_update_frequency: Option<String>,
    /// Kubelet hard eviction thresholds (default memory.available<100Mi,nodefs.available<10%,…).
    #[arg(long = "eviction-hard")]
    pub eviction_hard: Option<String>,
    /// Kubelet soft eviction thresholds, e.g. memory.available<500Mi (default none).
    #[arg(long = "eviction-soft")]
    pub eviction_soft: Option<String>,
    /// Grace periods of the soft thresholds, e.g. memory.available=1m30s.
    #[arg(long = "eviction-soft-grace-period")]
    pub eviction_soft_grace_period: Option<String>,
    /// Longest grace (seconds) of a soft-threshold eviction (default 0).
    #[arg(long = "eviction-max-pod-grace-period")]
    pub eviction_max_pod_grace_period: Option<String>,
    /// Kubelet imageGCHighThresholdPercent: disk usage that starts image GC (default 85).
    #[arg(long = "image-gc-high-threshold")]
    pub image_gc_high_threshold: Option<String>,
    /// Kubelet imageGCLowThresholdPercent: disk usage image GC frees down to (default 80).
    #[arg(long = "image-gc-low-threshold")]
    pub image_gc_low_threshold: Option<String>,
    /// Kubelet imageMinimumGCAge: an image younger than this is never collected (default 2m).
    #[arg(long = "minimum-image-ttl-duration")]
    pub minimum_image_ttl_duration: Option<String>,
    /// Kubelet containerLogMaxSize: a container log this large is rotated (default 10Mi;
    /// negative: no rotation).
    #[arg(long = "container-log-max-size", allow_hyphen_values = true)]
    pub container_log_max_size: Option<String>,
    /// Kubelet containerLogMaxFiles: log files kept per container (default 5).
    #[arg(long = "container-log-max-files")]
    pub container_log_max_files: Option<String>,
    /// Kubelet shutdownGracePeriod: graceful node shutdown (default 0s: disabled).
    #[arg(long = "shutdown-grace-period")]
    pub shutdown_grace_period: Option<String>,
    /// Kubelet shutdownGracePeriodCriticalPods: the part of it kept for critical pods (default 0s).
    #[arg(long = "shutdown-grace-period-critical-pods")]
    pub shutdown_grace_period_critical_pods: Option<String>,
    /// kube-controller-manager's client rate: requests per second of each controller's client
    /// (default 20; watches are not throttled).
    #[arg(long = "kube-api-qps")]
    pub kube_api_qps: Option<String>,
    /// kube-controller-manager's client burst (default 30).
    #[arg(long = "kube-api-burst")]
    pub kube_api_burst: Option<String>,
    /// kube-scheduler's client rate, its configuration's `clientConnection.qps` (default 50):
    /// what bounds bindings per second.
    #[arg(long = "scheduler-kube-api-qps")]
    pub scheduler_kube_api_qps: Option<String>,
    /// kube-scheduler's client burst, `clientConnection.burst` (default 100).
    #[arg(long = "scheduler-kube-api-burst")]
    pub scheduler_kube_api_burst: Option<String>,
    /// metrics-server's scrape interval, what `kubectl top` lags by (default 15s, at least 10s).
    #[arg(long = "metric-resolution")]
    pub metric_resolution: Option<String>,
}

impl ComponentFlags {
    /// The flags that were given, as (upstream name, value).
    pub fn given(&self) -> Vec<(&'static str, &str)> {
        [
            ("node-monitor-period", &self.node_monitor_period),
            ("node-monitor-grace-period", &self.node_monitor_grace_period),
            ("node-startup-grace-period", &self.node_startup_grace_period),
            ("node-eviction-rate", &self.node_eviction_rate),
            (
                "secondary-node-eviction-rate",
                &self.secondary_node_eviction_rate,
            ),
            (
                "large-cluster-size-threshold",
                &self.large_cluster_size_threshold,
            ),
            ("unhealthy-zone-threshold", &self.unhealthy_zone_threshold),
            (
                "terminated-pod-gc-threshold",
                &self.terminated_pod_gc_threshold,
            ),
            (
                "node-status-update-frequency",
                &self.node_status_update_frequency,
            ),
            ("eviction-hard", &self.eviction_hard),
            (
                "eviction-soft-grace-period",
                &self.eviction_soft_grace_period,
            ),
            ("eviction-soft", &self.eviction_soft),
            (
                "eviction-max-pod-grace-period",
                &self.eviction_max_pod_grace_period,
            ),
            ("image-gc-high-threshold", &self.image_gc_high_threshold),
            ("image-gc-low-threshold", &self.image_gc_low_threshold),
            (
                "minimum-image-ttl-duration",
                &self.minimum_image_ttl_duration,
            ),
            ("container-log-max-size", &self.container_log_max_size),
            ("container-log-max-files", &self.container_log_max_files),
            // The total before the critical share: each is validated against the other.
            ("shutdownGracePeriod", &self.shutdown_grace_period),
            (
                "shutdownGracePeriodCriticalPods",
                &self.shutdown_grace_period_critical_pods,
            ),
            ("kube-api-qps", &self.kube_api_qps),
            ("kube-api-burst", &self.kube_api_burst),
            ("clientConnection.qps", &self.scheduler_kube_api_qps),
            ("clientConnection.burst", &self.scheduler_kube_api_burst),
            ("metric-resolution", &self.metric_resolution),
        ]
        .into_iter()
        .filter_map(|(n, v)| v.as_deref().map(|v| (n, v)))
        .collect()
    }
}

impl ApiServerFlags {
    fn config(&self) -> anyhow::Result<klab_apiserver::ApiServerConfig> {
        let mut c = klab_apiserver::ApiServerConfig::default();
        // As kube-apiserver: a log without a policy records nothing, a policy needs a log.
        match (&self.audit_log_path, &self.audit_policy_file) {
            (Some(log_path), Some(policy)) => {
                let text = std::fs::read_to_string(policy)
                    .with_context(|| format!("--audit-policy-file {}", policy.display()))?;
                let policy = klab_apiserver::audit::Policy::parse(&text).map_err(|e| {
                    anyhow::anyhow!("--audit-policy-file {}: {e}", policy.display())
                })?;
                c.audit = Some(klab_apiserver::audit::AuditConfig {
                    log_path: log_path.clone(),
                    policy,
                });
            }
            (None, Some(_)) => anyhow::bail!("--audit-policy-file needs --audit-log-path"),
            _ => {}
        }
        c.default_toleration_seconds.not_ready_seconds = self.default_not_ready_toleration_seconds;
        c.default_toleration_seconds.unreachable_seconds =
            self.default_unreachable_toleration_seconds;
        c.authorization_mode = self.authorization_mode;
        if let Some(path) = &self.token_auth_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--token-auth-file {}", path.display()))?;
            let tokens =
                klab_apiserver::token_file::StaticTokens::parse(&path.display().to_string(), &text)
                    .map_err(|e| anyhow::anyhow!("--token-auth-file: {e}"))?;
            c.token_auth = Some(std::sync::Arc::new(tokens));
        }
        Ok(c)
    }
}

/// The kubeconfig `klab node` talks through, as kubectl finds one: `--kubeconfig`, else the first
/// file of `$KUBECONFIG`, else the one `klab up` wrote into the data directory.
pub fn node_kubeconfig(
    flag: Option<PathBuf>,
    env: Option<std::ffi::OsString>,
    data_dir: &std::path::Path,
) -> PathBuf {
    if let Some(p) = flag {
        return p;
    }
    if let Some(first) = env
        .as_deref()
        .and_then(|v| std::env::split_paths(v).find(|p| !p.as_os_str().is_empty()))
    {
        return first;
    }
    data_dir.join("kubeconfig")
}

/// The runtime of a one-shot client command (`klab node`, `klab component`).
fn client_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Up(a) => {
            anyhow::ensure!(
                a.speed > 0.0 && a.speed.is_finite(),
                "--speed must be a positive number, got {}",
                a.speed
            );
            anyhow::ensure!(a.nodes >= 1, "--nodes must be at least 1");
            anyhow::ensure!(
                a.zones.iter().all(|z| !z.trim().is_empty()),
                "--zones has an empty zone name ({:?}): give names like a,b,c",
                a.zones.join(",")
            );
            let mut cluster = klab_cluster::ClusterConfig {
                nodes: klab_server::up::default_node_names(a.nodes)
                    .into_iter()
                    .enumerate()
                    .map(|(i, name)| klab_cluster::NodeSpec {
                        zone: (!a.zones.is_empty()).then(|| a.zones[i % a.zones.len()].clone()),
                        ..klab_cluster::NodeSpec::new(name)
                    })
                    .collect(),
                apiserver: a.apiserver.config()?,
                ..Default::default()
            };
            for (name, value) in a.components.given() {
                // The error names the flag itself.
                klab_cluster::Cluster::set_flag(&mut cluster, name, value)?;
            }
            klab_cluster::Cluster::validate_config(&cluster)?;
            let opts = klab_server::up::UpOptions {
                data_dir: a.data_dir,
                listen: a.listen,
                kubeconfig: a.kubeconfig,
                speed: a.speed,
                cluster,
                cold_start: a.cold_start,
            };
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the runtime")?;
            rt.block_on(klab_server::up::run(opts))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Node(a) => {
            let (kubeconfig, rt) = (a.cluster.kubeconfig(), client_runtime()?);
            match (a.action.as_str(), a.name.as_deref()) {
                ("list", _) => rt.block_on(crate::node_cmd::list(&kubeconfig)),
                (action, _) if a.zone.is_some() && action != "add" => {
                    anyhow::bail!("--zone is only for `klab node add`")
                }
                (action, _)
                    if a.available.is_some() && klab_cluster::pressure_signal(action).is_none() =>
                {
                    anyhow::bail!(
                        "--available is only for `klab node memory-pressure|disk-pressure|pid-pressure`"
                    )
                }
                (action, Some(name))
                    if action == "relieve" || klab_cluster::pressure_signal(action).is_some() =>
                {
                    rt.block_on(crate::node_cmd::pressure(
                        &kubeconfig,
                        action,
                        name,
                        a.available.as_deref(),
                    ))
                }
                ("clock-skew", Some(name)) => match a.offset.as_deref() {
                    Some(offset) => {
                        rt.block_on(crate::node_cmd::clock_skew(&kubeconfig, name, offset))
                    }
                    None => anyhow::bail!("`klab node clock-skew` needs --offset (e.g. 2m or -2m)"),
                },
                (action, _) if a.offset.is_some() => {
                    anyhow::bail!("--offset is only for `klab node clock-skew`, not {action:?}")
                }
                (action, _) if a.image.is_some() && !action.starts_with("image-pull-") => {
                    anyhow::bail!(
                        "an image argument is only for `klab node image-pull-fail|image-pull-heal`"
                    )
                }
                (action, _) if a.all && !action.starts_with("image-pull-") => {
                    anyhow::bail!("--all is only for `klab node image-pull-fail|image-pull-heal`")
                }
                (action, _)
                    if (a.type_.is_some()
                        && !matches!(action, "condition" | "clear-condition"))
                        || ((a.status.is_some() || a.reason.is_some())
                            && action != "condition")
                        || (a.message.is_some()
                            && !matches!(action, "condition" | "image-pull-fail")) =>
                {
                    anyhow::bail!(
                        "--type, --status and --reason are for `klab node condition` (--type also for clear-condition), --message for condition and image-pull-fail"
                    )
                }
                (action, _)
                    if (a.cpu.is_some() || a.memory.is_some() || !a.labels.is_empty())
                        && action != "reboot" =>
                {
                    anyhow::bail!("--cpu, --memory and --label are only for `klab node reboot`")
                }
                ("condition" | "clear-condition", Some(name)) => {
                    let Some(type_) = a.type_.as_deref() else {
                        anyhow::bail!("`klab node {}` needs --type (e.g. Ready)", a.action)
                    };
                    let report = if a.action == "condition" {
                        let Some(st) = a.status.as_deref() else {
                            anyhow::bail!("`klab node condition` needs --status True|False|Unknown")
                        };
                        Some((st, a.reason.as_deref(), a.message.as_deref()))
                    } else {
                        None
                    };
                    rt.block_on(crate::node_cmd::condition(&kubeconfig, name, type_, report))
                }
                (action @ ("image-pull-fail" | "image-pull-heal"), name) => {
                    let (node, image) = match (a.all, name, a.image.as_deref()) {
                        (true, Some(image), None) => (None, image),
                        (false, Some(node), Some(image)) => (Some(node), image),
                        _ => anyhow::bail!(
                            "usage: `klab node {action} NAME IMAGE` or `klab node {action} --all IMAGE`"
                        ),
                    };
                    rt.block_on(crate::node_cmd::image_pull(
                        &kubeconfig,
                        node,
                        image,
                        action == "image-pull-fail",
                        a.message.as_deref(),
                    ))
                }
                ("reboot", Some(name))
                    if a.cpu.is_some() || a.memory.is_some() || !a.labels.is_empty() =>
                {
                    rt.block_on(crate::node_cmd::reboot_with(
                        &kubeconfig,
                        name,
                        a.cpu.as_deref(),
                        a.memory.as_deref(),
                        &a.labels,
                    ))
                }
                ("add", Some(name)) => {
                    rt.block_on(crate::node_cmd::add(&kubeconfig, name, a.zone.as_deref()))
                }
                ("remove", Some(name)) => rt.block_on(crate::node_cmd::remove(&kubeconfig, name)),
                (action, Some(name))
                    if action == "rejoin" || klab_cluster::parse_fault(action).is_some() =>
                {
                    rt.block_on(crate::node_cmd::fault(&kubeconfig, action, name))
                }
                (action, None)
                    if matches!(
                        action,
                        "rejoin" | "add" | "remove" | "relieve" | "condition" | "clear-condition"
                    ) || klab_cluster::parse_fault(action).is_some()
                        || klab_cluster::pressure_signal(action).is_some() =>
                {
                    anyhow::bail!("`klab node {action}` needs a node name")
                }
                (action, _) => anyhow::bail!(
                    "unknown node action {action:?}: one of list, {}, memory-pressure, disk-pressure, pid-pressure, relieve, rejoin, add, remove, clock-skew, condition, clear-condition, image-pull-fail, image-pull-heal",
                    klab_cluster::FAULT_NAMES.join(", ")
                ),
            }
        }
        Command::Why(a) => {
            let kubeconfig = crate::why_cmd::kubeconfig_choice(a.kubeconfig, &a.data_dir);
            Ok(client_runtime()?.block_on(crate::why_cmd::why(
                &a.target,
                a.namespace.as_deref(),
                kubeconfig.as_deref(),
                a.output,
                &a.controller_flags,
            )))
        }
        Command::User(a) => {
            if a.action != "add" {
                anyhow::bail!("unknown user action {:?}: add", a.action);
            }
            let path = klab_server::kubeconfig::add_user(
                &a.data_dir,
                &a.name,
                &a.groups,
                a.kubeconfig.as_deref(),
            )
            .map_err(anyhow::Error::msg)?;
            println!("user {:?} written to {}", a.name, path.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Volume(a) => {
            let (kubeconfig, rt) = (a.cluster.kubeconfig(), client_runtime()?);
            match a.action.as_str() {
                "fail" | "heal" => {
                    rt.block_on(crate::node_cmd::volume(&kubeconfig, &a.action, &a.name))
                }
                other => anyhow::bail!("unknown volume action {other:?}: one of fail, heal"),
            }
        }
        Command::Component(a) => {
            let admin = crate::node_cmd::Admin::find(a.cluster.kubeconfig());
            let rt = client_runtime()?;
            match (a.action.as_str(), a.name.as_deref()) {
                ("list", _) => rt.block_on(crate::node_cmd::list_components(&admin)),
                ("panic", Some(name)) => {
                    rt.block_on(crate::node_cmd::panic_component(&admin, name))
                }
                ("stop" | "start" | "restart", Some(name)) => {
                    rt.block_on(crate::node_cmd::control_component(&admin, name, &a.action))
                }
                ("brownout", Some(name)) => {
                    let mut q = Vec::new();
                    if a.end {
                        q.push("end=".to_string());
                    }
                    for (k, v) in [
                        ("latency", &a.latency),
                        ("error-rate", &a.error_rate),
                        ("code", &a.code),
                    ] {
                        if let Some(v) = v {
                            q.push(format!("{k}={v}"));
                        }
                    }
                    rt.block_on(crate::node_cmd::brownout(&admin, name, &q.join("&")))
                }
                (action @ ("panic" | "stop" | "start" | "restart" | "brownout"), None) => {
                    anyhow::bail!("`klab component {action}` needs a component name")
                }
                (action, _) => anyhow::bail!(
                    "unknown component action {action:?}: one of list, panic, stop, start, restart, brownout"
                ),
            }
        }
        Command::Sim(a) => {
            let format = match a.format {
                TraceFormat::Text => klab_sim::Format::Text,
                TraceFormat::Json => klab_sim::Format::Json,
            };
            let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr().lock());
            let code = klab_sim::cli_with(
                &a.file,
                a.seed,
                format,
                a.until.as_deref(),
                &klab_sim::CliExtras {
                    report: a.report,
                    progress: !a.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()),
                },
                &mut out,
                &mut err,
            );
            Ok(ExitCode::from(code))
        }
    }
}
