//! The controller manager: one entry point that starts every controller with its own client
//! identity, and one place that maps kube-controller-manager flag names onto controller configs.

use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::task::JoinHandle;

use klab_api::supervise::{Health, RestartPolicy, supervise};
use klab_api::{Clock, DetRng, duration::parse_duration};

use klab_api::names;
use klab_runtime::Informers;

use crate::attach_detach::AttachDetachConfig;
use crate::csi_driver::{CsiBackend, CsiModel};
use crate::daemonset::DaemonSetControllerConfig;
use crate::deployment::DeploymentControllerConfig;
use crate::events::EventRecorder;
use crate::garbage_collector::GarbageCollectorConfig;
use crate::job::JobControllerConfig;
use crate::node_lifecycle::{NodeLifecycleConfig, NodeLifecycleMetrics};
use crate::pod_gc::{PodGcConfig, PodGcMetrics};
use crate::replicaset::ReplicaSetControllerConfig;
use crate::serviceaccount::ServiceAccountControllerConfig;
use crate::statefulset::StatefulSetControllerConfig;
use crate::taint_eviction::{TaintEvictionConfig, TaintEvictionMetrics};

/// The component name health checks and metrics use for the controllers (`kube-controller-manager/
/// replicaset-controller`, …), after the binary that runs them upstream.
pub const COMPONENT: &str = "kube-controller-manager";

/// Configuration of every controller, set from kube-controller-manager flags.
#[derive(Debug, Clone, Default)]
pub struct ControllerManagerConfig {
    pub node_lifecycle: NodeLifecycleConfig,
    pub taint_eviction: TaintEvictionConfig,
    pub pod_gc: PodGcConfig,
    pub replicaset: ReplicaSetControllerConfig,
    pub deployment: DeploymentControllerConfig,
    pub statefulset: StatefulSetControllerConfig,
    pub garbage_collector: GarbageCollectorConfig,
    pub daemonset: DaemonSetControllerConfig,
    pub job: JobControllerConfig,
    pub serviceaccount: ServiceAccountControllerConfig,
    pub attach_detach: AttachDetachConfig,
    /// The simulated CSI driver's latencies and its backend's faults.
    pub csi_model: CsiModel,
    pub csi_backend: CsiBackend,
}

/// The flags `set_flag` understands, with upstream names.
pub const FLAGS: &[&str] = &[
    "node-monitor-period",
    "node-monitor-grace-period",
    "node-startup-grace-period",
    "node-eviction-rate",
    "secondary-node-eviction-rate",
    "large-cluster-size-threshold",
    "unhealthy-zone-threshold",
    "terminated-pod-gc-threshold",
    "disable-force-detach-on-timeout",
];

impl ControllerManagerConfig {
    /// Sets one kube-controller-manager flag. `Ok(false)` means the flag is not one of ours.
    pub fn set_flag(&mut self, name: &str, value: &str) -> Result<bool, String> {
        let dur = |v: &str| -> Result<Duration, String> { parse_duration(v) };
        let f32v = |v: &str| v.parse::<f32>().map_err(|e| format!("{e}"));
        let i32v = |v: &str| v.parse::<i32>().map_err(|e| format!("{e}"));
        let nlc = &mut self.node_lifecycle;
        match name {
            "node-monitor-period" => nlc.node_monitor_period = dur(value)?,
            "node-monitor-grace-period" => nlc.node_monitor_grace_period = dur(value)?,
            "node-startup-grace-period" => nlc.node_startup_grace_period = dur(value)?,
            "node-eviction-rate" => nlc.node_eviction_rate = f32v(value)?,
            "secondary-node-eviction-rate" => nlc.secondary_node_eviction_rate = f32v(value)?,
            "large-cluster-size-threshold" => nlc.large_cluster_size_threshold = i32v(value)?,
            "unhealthy-zone-threshold" => nlc.unhealthy_zone_threshold = f32v(value)?,
            "terminated-pod-gc-threshold" => self.pod_gc.terminated_pod_gc_threshold = i32v(value)?,
            "disable-force-detach-on-timeout" => {
                // Go's strconv.ParseBool, as pflag parses boolean flags.
                self.attach_detach.disable_force_detach_on_timeout = match value {
                    "1" | "t" | "T" | "true" | "TRUE" | "True" => true,
                    "0" | "f" | "F" | "false" | "FALSE" | "False" => false,
                    other => {
                        return Err(format!(
                            "strconv.ParseBool: parsing {other:?}: invalid syntax"
                        ));
                    }
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Metrics handles of the running controllers.
#[derive(Clone)]
pub struct ControllerMetrics {
    pub node_lifecycle: NodeLifecycleMetrics,
    pub taint_eviction: TaintEvictionMetrics,
    pub pod_gc: PodGcMetrics,
    /// client-go's `workqueue_*` families of the queues made through the shared informers.
    pub workqueue: klab_runtime::QueueMetrics,
}

/// A start function for the supervisor: each run gets fresh clones of `args`.
fn restartable<A, F, Fut, E>(args: A, run: F) -> StartFn
where
    A: Clone + Send + 'static,
    F: Fn(A) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display,
{
    Box::new(move || {
        let fut = run(args.clone());
        async move { fut.await.map_err(|e| e.to_string()) }.boxed()
    })
}

type StartFn = Box<dyn FnMut() -> BoxFuture<'static, Result<(), String>> + Send>;

/// Starts every controller, each supervised (`klab_api::supervise`): a controller that panics or
/// stops is logged once, reported in `health` as `kube-controller-manager/<name>`, and started
/// again with crash-loop backoff, as a static-pod controller manager would be. `client_for(
/// service_account)` returns the in-process client for one controller's identity (upstream runs
/// each controller under its own service account in kube-system, e.g. `node-controller`).
pub fn start(
    client_for: impl Fn(&str) -> kube::Client,
    clock: Clock,
    rng: DetRng,
    config: ControllerManagerConfig,
    health: Health,
) -> (Vec<JoinHandle<()>>, ControllerMetrics) {
    let mut tasks = Vec::new();
    // One run of a controller from clones of what it was given, so the supervisor can start it
    // again after a failure.
    let mut spawn =
        |name: &str, start: Box<dyn FnMut() -> BoxFuture<'static, Result<(), String>> + Send>| {
            tasks.push(tokio::spawn(supervise(
                health.clone(),
                format!("{COMPONENT}/{name}"),
                clock.clone(),
                RestartPolicy::CrashLoop,
                start,
            )));
        };
    // One informer per resource type for every controller (kube-controller-manager's
    // SharedInformerFactory, which lists and watches as `shared-informers`).
    let informers = Informers::new(client_for("shared-informers"), clock.clone())
        .supervised(health.clone(), format!("{COMPONENT}/shared-informers"));
    let metrics = ControllerMetrics {
        node_lifecycle: NodeLifecycleMetrics::default(),
        taint_eviction: TaintEvictionMetrics::default(),
        pod_gc: PodGcMetrics::default(),
        workqueue: informers.queue_metrics(),
    };
    let recorder = |client: &kube::Client, controller: &'static str| {
        EventRecorder::new(client.clone(), clock.clone(), rng.clone(), controller)
    };
    spawn(
        "node-lifecycle-controller",
        restartable(
            (
                client_for("node-controller"),
                informers.clone(),
                clock.clone(),
                rng.clone(),
                config.node_lifecycle.clone(),
                metrics.node_lifecycle.clone(),
            ),
            |(c, inf, clock, rng, cfg, m)| crate::node_lifecycle::run(c, inf, clock, rng, cfg, m),
        ),
    );
    spawn(
        "taint-eviction-controller",
        restartable(
            (
                // Upstream's taint eviction runs with the node controller's account and role.
                client_for("node-controller"),
                informers.clone(),
                clock.clone(),
                rng.clone(),
                config.taint_eviction.clone(),
                metrics.taint_eviction.clone(),
            ),
            |(c, inf, clock, rng, cfg, m)| crate::taint_eviction::run(c, inf, clock, rng, cfg, m),
        ),
    );
    spawn(
        "pod-garbage-collector-controller",
        restartable(
            (
                client_for("pod-garbage-collector"),
                informers.clone(),
                clock.clone(),
                config.pod_gc.clone(),
                metrics.pod_gc.clone(),
            ),
            |(c, inf, clock, cfg, m)| crate::pod_gc::run(c, inf, clock, cfg, m),
        ),
    );
    // Workload controllers: each with its own identity and event recorder.
    let c = client_for("replicaset-controller");
    let rec = recorder(&c, names::CONTROLLER_REPLICASET);
    spawn(
        "replicaset-controller",
        restartable(
            (
                c,
                informers.clone(),
                clock.clone(),
                config.replicaset.clone(),
                rec,
            ),
            |(c, inf, clock, cfg, rec)| crate::replicaset::run(c, inf, clock, cfg, rec),
        ),
    );
    let c = client_for("deployment-controller");
    let rec = recorder(&c, names::CONTROLLER_DEPLOYMENT);
    spawn(
        "deployment-controller",
        restartable(
            (
                c,
                informers.clone(),
                clock.clone(),
                config.deployment.clone(),
                rec,
            ),
            |(c, inf, clock, cfg, rec)| crate::deployment::run(c, inf, clock, cfg, rec),
        ),
    );
    let c = client_for("statefulset-controller");
    let rec = recorder(&c, names::CONTROLLER_STATEFULSET);
    spawn(
        "statefulset-controller",
        restartable(
            (
                c,
                informers.clone(),
                clock.clone(),
                config.statefulset.clone(),
                rec,
            ),
            |(c, inf, clock, cfg, rec)| crate::statefulset::run(c, inf, clock, cfg, rec),
        ),
    );
    let c = client_for("daemon-set-controller");
    let rec = recorder(&c, names::CONTROLLER_DAEMONSET);
    spawn(
        "daemonset-controller",
        restartable(
            (
                c,
                informers.clone(),
                clock.clone(),
                config.daemonset.clone(),
                rec,
            ),
            |(c, inf, clock, cfg, rec)| crate::daemonset::run(c, inf, clock, cfg, rec),
        ),
    );
    // Upstream's disruption controller records events as `controllermanager`.
    let c = client_for("disruption-controller");
    let rec = recorder(&c, crate::disruption::EVENT_COMPONENT);
    spawn(
        "disruption-controller",
        restartable(
            (c, informers.clone(), clock.clone(), rec),
            |(c, inf, clock, rec)| crate::disruption::run(c, inf, clock, rec),
        ),
    );
    spawn(
        crate::clusterrole_aggregation::CONTROLLER_NAME,
        restartable(
            (
                client_for(crate::clusterrole_aggregation::CONTROLLER_NAME),
                informers.clone(),
                clock.clone(),
            ),
            |(c, inf, clock)| crate::clusterrole_aggregation::run(c, inf, clock),
        ),
    );
    spawn(
        "endpointslice-controller",
        restartable(
            (
                client_for("endpointslice-controller"),
                informers.clone(),
                clock.clone(),
            ),
            |(c, inf, clock)| crate::endpointslice::run_slices(c, inf, clock),
        ),
    );
    spawn(
        "endpoints-controller",
        restartable(
            (
                client_for("endpoint-controller"),
                informers.clone(),
                clock.clone(),
            ),
            |(c, inf, clock)| crate::endpointslice::run_endpoints(c, inf, clock),
        ),
    );
    let c = client_for("job-controller");
    let rec = recorder(&c, names::CONTROLLER_JOB);
    spawn(
        "job-controller",
        restartable(
            (c, informers.clone(), clock.clone(), config.job.clone(), rec),
            |(c, inf, clock, cfg, rec)| crate::job::run(c, inf, clock, cfg, rec),
        ),
    );
    // Storage: the PV controller, the protection controllers, the attach/detach controller and
    // the simulated CSI driver's sidecars.
    let c = client_for("persistent-volume-binder");
    let rec = recorder(&c, names::CONTROLLER_PERSISTENT_VOLUME);
    spawn(
        "persistentvolume-binder-controller",
        restartable(
            (c, informers.clone(), clock.clone(), rec),
            |(c, inf, clock, rec)| crate::persistent_volume::run(c, inf, clock, rec),
        ),
    );
    spawn(
        "persistentvolume-protection-controller",
        restartable(
            (
                client_for("pvc-protection-controller"),
                client_for("pv-protection-controller"),
                informers.clone(),
                clock.clone(),
            ),
            |(c, pv, inf, clock)| crate::volume_protection::run(c, pv, inf, clock),
        ),
    );
    let c = client_for("attachdetach-controller");
    let rec = recorder(&c, names::CONTROLLER_ATTACH_DETACH);
    spawn(
        "persistentvolume-attach-detach-controller",
        restartable(
            (
                c,
                informers.clone(),
                clock.clone(),
                config.attach_detach.clone(),
                rec,
            ),
            |(c, inf, clock, cfg, rec)| crate::attach_detach::run(c, inf, clock, cfg, rec),
        ),
    );
    let c = client_for("csi-klab-dev");
    let rec = recorder(&c, names::CSI_DRIVER_KLAB);
    spawn(
        "csi-klab-dev",
        restartable(
            (
                c,
                informers.clone(),
                clock.clone(),
                config.csi_model.clone(),
                config.csi_backend.clone(),
                rec,
            ),
            |(c, inf, clock, model, backend, rec)| {
                crate::csi_driver::run(c, inf, clock, model, backend, rec)
            },
        ),
    );
    // `--enable-garbage-collector=false` means the controller is not started at all.
    if config.garbage_collector.enable_garbage_collector {
        spawn(
            "garbage-collector-controller",
            restartable(
                (
                    client_for("generic-garbage-collector"),
                    clock.clone(),
                    config.garbage_collector.clone(),
                ),
                |(c, clock, cfg)| crate::garbage_collector::run(c, clock, cfg),
            ),
        );
    }
    spawn(
        "namespace-controller",
        restartable(
            (
                client_for("namespace-controller"),
                informers.clone(),
                clock.clone(),
            ),
            |(c, inf, clock)| crate::namespace::run(c, inf, clock),
        ),
    );
    let c = client_for("cronjob-controller");
    let rec = recorder(&c, crate::cronjob::CONTROLLER_NAME);
    spawn(
        "cronjob-controller",
        restartable(
            (c, informers.clone(), clock.clone(), rec),
            |(c, inf, clock, rec)| crate::cronjob::run(c, inf, clock, rec),
        ),
    );
    // The `default` ServiceAccount of every namespace, and the root CA ConfigMap when the
    // cluster has a CA.
    spawn(
        "serviceaccount-controller",
        restartable(
            (
                client_for("service-account-controller"),
                client_for("root-ca-cert-publisher"),
                informers.clone(),
                clock.clone(),
                config.serviceaccount.clone(),
            ),
            |(c, p, inf, clock, cfg)| crate::serviceaccount::run(c, p, inf, clock, cfg),
        ),
    );
    // The informers live as long as the controllers: aborting this task (with the others, when
    // the cluster stops) stops their watches.
    let guard = informers.stop_guard();
    tasks.push(tokio::spawn(async move {
        let _guard = guard;
        std::future::pending::<()>().await
    }));
    (tasks, metrics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_map_onto_configs() {
        let mut c = ControllerManagerConfig::default();
        assert_eq!(c.set_flag("node-monitor-grace-period", "40s"), Ok(true));
        assert_eq!(
            c.node_lifecycle.node_monitor_grace_period,
            Duration::from_secs(40)
        );
        assert_eq!(c.set_flag("node-eviction-rate", "0.5"), Ok(true));
        assert_eq!(c.node_lifecycle.node_eviction_rate, 0.5);
        assert_eq!(c.set_flag("terminated-pod-gc-threshold", "10"), Ok(true));
        assert_eq!(c.pod_gc.terminated_pod_gc_threshold, 10);
        assert_eq!(c.set_flag("not-a-flag", "1"), Ok(false));
        assert!(c.set_flag("node-monitor-period", "soon").is_err());
        for f in FLAGS {
            assert!(
                c.set_flag(f, if f.contains("period") { "5s" } else { "1" })
                    .is_ok(),
                "{f}"
            );
        }
    }
}
