//! Graceful node shutdown (upstream `pkg/kubelet/nodeshutdown`), the pure part: the effective
//! priority table from the kubelet configuration, the group a pod is killed in, the grace period
//! it is killed with, the status written for it, and the configuration checks with upstream's
//! texts. The pod manager ([`crate::pods::PodManager`]) walks the groups; the agent turns logind's
//! `PrepareForShutdown` signal ([`Logind`]) into the manager's "shutting down" state.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use klab_api::duration::format_go_duration;
use klab_api::names;
use tokio::sync::watch;

/// `SystemCriticalPriority` (`pkg/apis/scheduling`): the critical group of the migrated table.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
/// `DefaultPriorityWhenNoDefaultClassExists`: the base group of the migrated table.
pub const DEFAULT_PRIORITY: i32 = 0;

/// Node event reason for both the shutdown and its cancellation (`kubeletevents.NodeShutdown`).
pub const EVENT_NODE_SHUTDOWN: &str = "NodeShutdown";
pub const MSG_SHUTDOWN_DETECTED: &str = "Shutdown manager detected shutdown event";
pub const MSG_SHUTDOWN_CANCELLED: &str = "Shutdown manager detected shutdown cancellation";
/// `ShutdownStatus()` while shutting down: the Ready condition's message.
pub const MSG_NODE_SHUTTING_DOWN: &str = "node is shutting down";
/// Admission while shutting down (`nodeShutdownReason`, `nodeShutdownNotAdmittedMessage`).
pub const REJECT_REASON: &str = "NodeShutdown";
pub const REJECT_MESSAGE: &str = "Pod was rejected as the node is shutting down.";
/// The status of a pod killed for the shutdown (`nodeShutdownReason` is `Terminated` there).
pub const KILLED_REASON: &str = "Terminated";
pub const KILLED_MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";
/// `DisruptionTarget` reason of a pod the kubelet killed.
pub const REASON_TERMINATION_BY_KUBELET: &str = names::REASON_TERMINATION_BY_KUBELET;
/// logind's `InhibitDelayMaxSec` before the kubelet overrides it (systemd's default).
pub const LOGIND_DEFAULT_INHIBIT_DELAY: Duration = Duration::from_secs(5);

/// One entry of `shutdownGracePeriodByPodPriority`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PriorityGroup {
    pub priority: i32,
    pub shutdown_grace_period_seconds: i64,
}

/// The graceful-shutdown part of the kubelet configuration (defaults: all zero, feature off).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShutdownConfig {
    /// `shutdownGracePeriod`.
    pub grace_period: Duration,
    /// `shutdownGracePeriodCriticalPods`.
    pub grace_period_critical_pods: Duration,
    /// `shutdownGracePeriodByPodPriority`.
    pub by_pod_priority: Vec<PriorityGroup>,
}

/// Go's `%v` of a `metav1.Duration` (a struct: `{30s}`).
fn go_struct_duration(d: Duration) -> String {
    format!("{{{}}}", format_go_duration(d))
}

impl ShutdownConfig {
    /// Upstream's configuration validation (`ValidateKubeletConfiguration`, both feature gates
    /// on), with its texts. Durations cannot be negative here (they are parsed unsigned).
    pub fn validate(&self) -> Result<(), String> {
        let (total, critical) = (self.grace_period, self.grace_period_critical_pods);
        if critical > total {
            return Err(format!(
                "invalid configuration: shutdownGracePeriodCriticalPods {} must be <= shutdownGracePeriod {}",
                go_struct_duration(critical),
                go_struct_duration(total)
            ));
        }
        let sub_second = |d: Duration| !d.is_zero() && d < Duration::from_secs(1);
        if sub_second(total) {
            return Err(format!(
                "invalid configuration: shutdownGracePeriod {} must be either zero or otherwise >= 1 sec",
                go_struct_duration(total)
            ));
        }
        if sub_second(critical) {
            return Err(format!(
                "invalid configuration: shutdownGracePeriodCriticalPods {} must be either zero or otherwise >= 1 sec",
                go_struct_duration(critical)
            ));
        }
        if !self.by_pod_priority.is_empty() && (!total.is_zero() || !critical.is_zero()) {
            return Err("invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time".into());
        }
        Ok(())
    }

    /// The effective table (`newPodManager`), sorted by priority ascending; empty = the feature is
    /// disabled (no inhibitor lock, never "shutting down").
    pub fn priority_table(&self) -> Vec<PriorityGroup> {
        let mut table = if self.by_pod_priority.is_empty() {
            // Migration of the two durations: a zero total, or a critical share larger than the
            // total, disables the feature.
            let total = secs(self.grace_period);
            let critical = secs(self.grace_period_critical_pods);
            let default = total.saturating_sub(critical);
            if total == 0 || default < 0 {
                return Vec::new();
            }
            vec![
                PriorityGroup {
                    priority: DEFAULT_PRIORITY,
                    shutdown_grace_period_seconds: default,
                },
                PriorityGroup {
                    priority: SYSTEM_CRITICAL_PRIORITY,
                    shutdown_grace_period_seconds: critical,
                },
            ]
        } else {
            self.by_pod_priority.clone()
        };
        table.sort();
        table
    }

    /// `periodRequested`: the sum of the table's periods (what logind is asked to wait).
    pub fn period_requested(&self) -> Duration {
        let total = self.priority_table().iter().fold(0i64, |acc, g| {
            acc.saturating_add(g.shutdown_grace_period_seconds.max(0))
        });
        Duration::from_secs(u64::try_from(total).unwrap_or(0))
    }
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// Parses `shutdownGracePeriodByPodPriority` written as `PRIORITY=DURATION` pairs separated by
/// commas (`0=20s,2000000000=10s`).
pub fn parse_by_pod_priority(v: &str) -> Result<Vec<PriorityGroup>, String> {
    let mut out = Vec::new();
    for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (p, d) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?} is not PRIORITY=DURATION"))?;
        let priority = p
            .trim()
            .parse::<i32>()
            .map_err(|e| format!("priority {p:?}: {e}"))?;
        let d = klab_api::duration::parse_duration(d.trim())?;
        out.push(PriorityGroup {
            priority,
            shutdown_grace_period_seconds: secs(d),
        });
    }
    Ok(out)
}

/// The index of the group a pod of `priority` is killed in: the entry with the largest priority
/// ≤ the pod's; pods below the lowest entry go to the lowest group (nil priority = 0).
/// `table` must be non-empty and sorted.
pub fn group_index(table: &[PriorityGroup], priority: Option<i32>) -> usize {
    let p = priority.unwrap_or(DEFAULT_PRIORITY);
    table.iter().rposition(|g| g.priority <= p).unwrap_or(0)
}

/// The kill override of a pod in a group: the group's period, shortened by the pod's own
/// `terminationGracePeriodSeconds` when that is set and smaller.
pub fn override_grace(group_seconds: i64, tgps: Option<i64>) -> i64 {
    match tgps {
        Some(t) if t < group_seconds => t,
        _ => group_seconds,
    }
}

/// The status function applied to a pod killed for the shutdown: phase Failed unless the pod
/// had already Succeeded when it was killed (`phase_at_kill`), reason `Terminated`, the upstream
/// message, and `DisruptionTarget=True` (`TerminationByKubelet`, same message), whose transition
/// time is kept once set. Containers that exit 0 on SIGTERM do not make the pod Succeeded: the
/// function was applied at the kill, and a terminal phase is kept from then on.
pub fn apply_killed_status(status: &mut PodStatus, phase_at_kill: Option<&str>, now: &Time) {
    if phase_at_kill == Some("Succeeded") {
        status.phase = Some("Succeeded".into());
    } else {
        status.phase = Some("Failed".into());
    }
    status.reason = Some(KILLED_REASON.into());
    status.message = Some(KILLED_MESSAGE.into());
    set_disruption_target(status, KILLED_MESSAGE, now);
}

/// Sets `DisruptionTarget=True` (`TerminationByKubelet`, `message`), keeping the transition time
/// of one already set.
pub fn set_disruption_target(status: &mut PodStatus, message: &str, now: &Time) {
    let conds = status.conditions.get_or_insert_with(Vec::new);
    let cond = PodCondition {
        type_: names::POD_COND_DISRUPTION_TARGET.into(),
        status: "True".into(),
        reason: Some(REASON_TERMINATION_BY_KUBELET.into()),
        message: Some(message.into()),
        last_transition_time: Some(now.clone()),
        ..Default::default()
    };
    match conds.iter_mut().find(|c| c.type_ == cond.type_) {
        Some(c) if c.status == "True" && c.reason == cond.reason => {}
        Some(c) => *c = cond,
        None => conds.push(cond),
    }
}

/// logind as the node's kubelet sees it over D-Bus: whether a shutdown is being prepared
/// (`PrepareForShutdown(true)` sent and not cancelled) and whether a delay inhibitor lock is held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogindState {
    pub preparing_shutdown: bool,
    /// The kubelet holds a `delay` inhibitor lock for `shutdown`.
    pub inhibited: bool,
    /// `InhibitDelayMaxSec`, as the kubelet's override left it.
    pub inhibit_delay_max: Duration,
    /// Bumped by every `PrepareForShutdown` signal, so a stale power-off timer can tell.
    pub generation: u64,
}

/// The node's logind, shared by the machine (which signals and powers off) and its kubelet
/// (which takes and releases the inhibitor lock). Cheap to clone.
#[derive(Clone, Debug)]
pub struct Logind {
    tx: Arc<watch::Sender<LogindState>>,
}

impl Default for Logind {
    fn default() -> Self {
        Logind {
            tx: Arc::new(
                watch::channel(LogindState {
                    inhibit_delay_max: LOGIND_DEFAULT_INHIBIT_DELAY,
                    ..Default::default()
                })
                .0,
            ),
        }
    }
}

impl Logind {
    pub fn state(&self) -> LogindState {
        *self.tx.borrow()
    }

    pub fn subscribe(&self) -> watch::Receiver<LogindState> {
        self.tx.subscribe()
    }

    pub fn update(&self, f: impl FnOnce(&mut LogindState)) {
        self.tx.send_modify(f);
    }

    /// The kubelet takes its delay lock, first raising `InhibitDelayMaxSec` to what it needs
    /// (the `99-kubelet.conf` override; klab's logind always accepts it).
    pub fn inhibit(&self, period_requested: Duration) {
        self.update(|s| {
            s.inhibited = true;
            if s.inhibit_delay_max < period_requested {
                s.inhibit_delay_max = period_requested;
            }
        });
    }

    /// The lock is released (the kubelet is done, or its process ended).
    pub fn release(&self) {
        self.update(|s| s.inhibited = false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(total: u64, critical: u64) -> ShutdownConfig {
        ShutdownConfig {
            grace_period: Duration::from_secs(total),
            grace_period_critical_pods: Duration::from_secs(critical),
            by_pod_priority: Vec::new(),
        }
    }

    fn g(priority: i32, s: i64) -> PriorityGroup {
        PriorityGroup {
            priority,
            shutdown_grace_period_seconds: s,
        }
    }

    #[test]
    fn migrated_table_and_enablement() {
        // N-53: a zero shutdownGracePeriod disables the feature.
        assert!(cfg(0, 0).priority_table().is_empty());
        assert_eq!(cfg(0, 0).period_requested(), Duration::ZERO);
        // N-49: 30/10 → base group 20 s, critical group 10 s.
        assert_eq!(
            cfg(30, 10).priority_table(),
            vec![g(0, 20), g(SYSTEM_CRITICAL_PRIORITY, 10)]
        );
        assert_eq!(cfg(30, 10).period_requested(), Duration::from_secs(30));
        // N-50: 30/0 → 30 s and 0 s.
        assert_eq!(
            cfg(30, 0).priority_table(),
            vec![g(0, 30), g(SYSTEM_CRITICAL_PRIORITY, 0)]
        );
        // A critical share larger than the total disables it too.
        assert!(cfg(10, 20).priority_table().is_empty());
        // An explicit table is used as given, sorted.
        let c = ShutdownConfig {
            by_pod_priority: vec![g(100000, 120), g(0, 60), g(SYSTEM_CRITICAL_PRIORITY, 30)],
            ..Default::default()
        };
        assert_eq!(
            c.priority_table(),
            vec![g(0, 60), g(100000, 120), g(SYSTEM_CRITICAL_PRIORITY, 30)]
        );
        assert_eq!(c.period_requested(), Duration::from_secs(210));
    }

    #[test]
    fn pods_fall_into_the_largest_group_not_above_their_priority() {
        let table = vec![g(0, 60), g(10000, 20), g(SYSTEM_CRITICAL_PRIORITY, 10)];
        for (priority, want) in [
            (None, 0),
            (Some(0), 0),
            (Some(-5), 0), // below the lowest entry: lowest group
            (Some(9999), 0),
            (Some(10000), 1),
            (Some(1_000_000_000), 1),
            (Some(SYSTEM_CRITICAL_PRIORITY), 2),
            (Some(2_000_001_000), 2), // system-node-critical: above the highest entry
        ] {
            assert_eq!(group_index(&table, priority), want, "{priority:?}");
        }
    }

    #[test]
    fn kill_overrides_of_n49_and_n50() {
        // N-49 (30/10): normal nil → 20, critical nil → 10, normal TGPS 2 → 2, critical TGPS 2
        // → 2, normal TGPS 1000 → 20.
        let t = cfg(30, 10).priority_table();
        let grace = |p: Option<i32>, tgps: Option<i64>| {
            override_grace(t[group_index(&t, p)].shutdown_grace_period_seconds, tgps)
        };
        assert_eq!(grace(Some(0), None), 20);
        assert_eq!(grace(Some(SYSTEM_CRITICAL_PRIORITY), None), 10);
        assert_eq!(grace(Some(0), Some(2)), 2);
        assert_eq!(grace(Some(SYSTEM_CRITICAL_PRIORITY), Some(2)), 2);
        assert_eq!(grace(Some(0), Some(1000)), 20);
        // N-50 (30/0): normal → 30, critical → 0 (the pod worker raises it to 1).
        let t = cfg(30, 0).priority_table();
        assert_eq!(
            override_grace(t[group_index(&t, None)].shutdown_grace_period_seconds, None),
            30
        );
        assert_eq!(
            override_grace(
                t[group_index(&t, Some(SYSTEM_CRITICAL_PRIORITY))].shutdown_grace_period_seconds,
                Some(30)
            ),
            0
        );
    }

    #[test]
    fn configuration_errors_are_upstreams() {
        assert!(cfg(30, 10).validate().is_ok());
        assert!(cfg(0, 0).validate().is_ok());
        assert_eq!(
            cfg(1, 2).validate().unwrap_err(),
            "invalid configuration: shutdownGracePeriodCriticalPods {2s} must be <= shutdownGracePeriod {1s}"
        );
        let c = ShutdownConfig {
            grace_period: Duration::from_millis(1),
            ..Default::default()
        };
        assert_eq!(
            c.validate().unwrap_err(),
            "invalid configuration: shutdownGracePeriod {1ms} must be either zero or otherwise >= 1 sec"
        );
        let c = ShutdownConfig {
            grace_period: Duration::from_secs(30),
            by_pod_priority: vec![g(0, 10)],
            ..Default::default()
        };
        assert_eq!(
            c.validate().unwrap_err(),
            "invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"
        );
        assert_eq!(
            parse_by_pod_priority("0=20s, 2000000000=10s").unwrap(),
            vec![g(0, 20), g(SYSTEM_CRITICAL_PRIORITY, 10)]
        );
        assert!(parse_by_pod_priority("0:20s").is_err());
        assert!(parse_by_pod_priority("x=20s").is_err());
        assert!(parse_by_pod_priority("0=soon").is_err());
    }

    #[test]
    fn killed_status_keeps_succeeded_and_sets_disruption_target_once() {
        let t1 = Time(jiff::Timestamp::from_second(100).unwrap());
        let t2 = Time(jiff::Timestamp::from_second(105).unwrap());
        let mut s = PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        };
        apply_killed_status(&mut s, Some("Running"), &t1);
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        assert_eq!(s.reason.as_deref(), Some("Terminated"));
        assert_eq!(
            s.message.as_deref(),
            Some("Pod was terminated in response to imminent node shutdown.")
        );
        s.phase = Some("Succeeded".into()); // containers exited 0 on SIGTERM
        apply_killed_status(&mut s, Some("Running"), &t2);
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        let c = &s.conditions.as_ref().unwrap()[0];
        assert_eq!(c.type_, "DisruptionTarget");
        assert_eq!(c.reason.as_deref(), Some("TerminationByKubelet"));
        assert_eq!(c.message.as_deref(), Some(KILLED_MESSAGE));
        assert_eq!(c.last_transition_time, Some(t1));
        let mut done = PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        };
        apply_killed_status(&mut done, Some("Succeeded"), &t2);
        assert_eq!(done.phase.as_deref(), Some("Succeeded"));
    }
}
