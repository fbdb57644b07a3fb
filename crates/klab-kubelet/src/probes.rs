//! Readiness and liveness probes on the simulated runtime (`pkg/kubelet/prober/worker.go`).
//!
//! A probe worker ticks every `periodSeconds` from the moment the pod was added (the first tick is
//! immediate; right after a kubelet start it is delayed by a random fraction of the period); a
//! readiness worker also probes a container as soon as it starts (upstream's manual trigger). A tick
//! is skipped while the container is not running or younger than `initialDelaySeconds`. The
//! result changes after `failureThreshold` consecutive failures / `successThreshold` consecutive
//! successes. Readiness starts as Failure, liveness as Success; a new container instance resets the
//! result. After a liveness failure the worker holds until the container is replaced.
//!
//! What a probe returns: an `exec` probe runs the simulated program of its command (see
//! [`crate::program`]): exit 0 within `timeoutSeconds` succeeds, anything else fails. `httpGet`,
//! `tcpSocket` and `grpc` probes succeed (the simulated server always answers).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Probe;

use crate::program::Program;
use crate::runtime::after;

/// Which probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProbeKind {
    Readiness,
    Liveness,
}

impl ProbeKind {
    pub fn label(self) -> &'static str {
        match self {
            ProbeKind::Readiness => "Readiness",
            ProbeKind::Liveness => "Liveness",
        }
    }
}

/// A probe's parameters after upstream defaulting, and its (static) simulated outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeParams {
    pub initial_delay_seconds: i64,
    pub period: Duration,
    pub success_threshold: i32,
    pub failure_threshold: i32,
    /// Probe-level `terminationGracePeriodSeconds` (liveness kills).
    pub termination_grace_period_seconds: Option<i64>,
    pub succeeds: bool,
}

impl ProbeParams {
    pub fn from_probe(p: &Probe) -> ProbeParams {
        let timeout = Duration::from_secs(p.timeout_seconds.unwrap_or(1).max(1) as u64);
        let succeeds = match &p.exec {
            Some(e) => {
                matches!(Program::hook_outcome(e.command.as_deref().unwrap_or(&[])), (Some(d), 0) if d <= timeout)
            }
            None => true,
        };
        ProbeParams {
            initial_delay_seconds: p.initial_delay_seconds.unwrap_or(0).max(0) as i64,
            period: Duration::from_secs(p.period_seconds.unwrap_or(10).max(1) as u64),
            success_threshold: p.success_threshold.unwrap_or(1).max(1),
            failure_threshold: p.failure_threshold.unwrap_or(3).max(1),
            termination_grace_period_seconds: p.termination_grace_period_seconds,
            succeeds,
        }
    }
}

/// The container instance a tick looks at.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    pub container_id: String,
    pub started_at: Timestamp,
    /// When it stopped running (`None`: still running).
    pub finished_at: Option<Timestamp>,
}

/// What one tick did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TickOutcome {
    pub at: Timestamp,
    /// The probe ran and failed (an `Unhealthy` event).
    pub failed: bool,
    /// The result changed to this value at this tick.
    pub flipped_to: Option<bool>,
}

/// One probe worker.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeWorker {
    pub kind: ProbeKind,
    pub next_tick: Timestamp,
    pub result: bool,
    run: i32,
    last_result: Option<bool>,
    on_hold: bool,
    container_id: Option<String>,
}

impl ProbeWorker {
    fn initial(kind: ProbeKind) -> bool {
        kind == ProbeKind::Liveness
    }

    /// A worker whose first tick is at `first_tick`.
    pub fn new(kind: ProbeKind, first_tick: Timestamp) -> Self {
        ProbeWorker {
            kind,
            next_tick: first_tick,
            result: Self::initial(kind),
            run: 0,
            last_result: None,
            on_hold: false,
            container_id: None,
        }
    }

    /// Runs every tick due at or before `now`. A readiness worker also probes a newly started
    /// container at once (the prober manager's manual trigger from `UpdatePodStatus`, which fires
    /// while a running container's readiness has no result yet), not at the next period tick.
    pub fn advance(
        &mut self,
        p: &ProbeParams,
        now: Timestamp,
        inst: Option<&Instance>,
    ) -> Vec<TickOutcome> {
        let mut out = Vec::new();
        if self.kind == ProbeKind::Readiness
            && let Some(i) = inst
            && i.started_at <= now
            && i.started_at < self.next_tick
            && i.finished_at.is_none_or(|f| f > i.started_at)
            && self.container_id.as_deref() != Some(i.container_id.as_str())
        {
            self.tick(i.started_at, p, i, &mut out);
        }
        while self.next_tick <= now {
            let t = self.next_tick;
            self.next_tick = after(t, p.period);
            if let Some(inst) = inst {
                self.tick(t, p, inst, &mut out);
            }
        }
        out
    }

    /// One probe at `t` against `inst`.
    fn tick(&mut self, t: Timestamp, p: &ProbeParams, inst: &Instance, out: &mut Vec<TickOutcome>) {
        if inst.started_at > t {
            return; // the instance did not exist yet at this tick
        }
        if self.container_id.as_deref() != Some(inst.container_id.as_str()) {
            // A new container instance: back to the initial result.
            self.container_id = Some(inst.container_id.clone());
            self.result = Self::initial(self.kind);
            self.run = 0;
            self.last_result = None;
            self.on_hold = false;
        }
        if inst.finished_at.is_some_and(|f| f <= t) {
            if self.result {
                self.result = false;
                out.push(TickOutcome {
                    at: t,
                    failed: false,
                    flipped_to: Some(false),
                });
            }
            return;
        }
        if self.on_hold || t.duration_since(inst.started_at).as_secs() < p.initial_delay_seconds {
            return;
        }
        let r = p.succeeds;
        self.run = if self.last_result == Some(r) {
            self.run.saturating_add(1)
        } else {
            1
        };
        self.last_result = Some(r);
        let threshold = if r {
            p.success_threshold
        } else {
            p.failure_threshold
        };
        let mut flipped = None;
        if self.run >= threshold && self.result != r {
            self.result = r;
            flipped = Some(r);
        }
        if !r && self.run >= threshold && self.kind == ProbeKind::Liveness {
            self.on_hold = true;
            self.run = 0;
        }
        out.push(TickOutcome {
            at: t,
            failed: !r,
            flipped_to: flipped,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ExecAction, HTTPGetAction};

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + s).unwrap()
    }

    fn exec(cmd: &[&str]) -> Probe {
        Probe {
            exec: Some(ExecAction {
                command: Some(cmd.iter().map(|s| s.to_string()).collect()),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn params_defaults_and_outcomes() {
        let p = ProbeParams::from_probe(&Probe {
            http_get: Some(HTTPGetAction::default()),
            ..Default::default()
        });
        assert_eq!(
            (
                p.initial_delay_seconds,
                p.period,
                p.success_threshold,
                p.failure_threshold,
                p.succeeds
            ),
            (0, Duration::from_secs(10), 1, 3, true)
        );
        assert!(ProbeParams::from_probe(&exec(&["true"])).succeeds);
        assert!(!ProbeParams::from_probe(&exec(&["sh", "-c", "exit 1"])).succeeds);
        assert!(
            !ProbeParams::from_probe(&exec(&["sleep", "5"])).succeeds,
            "longer than timeoutSeconds 1"
        );
    }

    #[test]
    fn readiness_is_probed_as_soon_as_the_container_starts() {
        // N-34: pod added at 10, container started at 13.5 → probed (and Ready) at 13.5, not at
        // the 20 s tick; the period ticks go on from the pod's addition.
        let p = ProbeParams::from_probe(&exec(&["true"]));
        let mut w = ProbeWorker::new(ProbeKind::Readiness, t(10));
        let started = t(13) + jiff::SignedDuration::from_millis(500);
        let inst = Instance {
            container_id: "a".into(),
            started_at: started,
            finished_at: None,
        };
        assert!(w.advance(&p, t(13), Some(&inst)).is_empty());
        let o = w.advance(&p, started, Some(&inst));
        assert_eq!(
            o,
            vec![TickOutcome {
                at: started,
                failed: false,
                flipped_to: Some(true)
            }]
        );
        assert!(w.result);
        assert_eq!(w.next_tick, t(20));
        let o = w.advance(&p, t(20), Some(&inst));
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].flipped_to, None);
        // With initialDelaySeconds the immediate probe is skipped; the period ticks take over.
        let mut p5 = p.clone();
        p5.initial_delay_seconds = 5;
        let mut w = ProbeWorker::new(ProbeKind::Readiness, t(10));
        assert!(w.advance(&p5, started, Some(&inst)).is_empty());
        assert!(!w.result);
        let o = w.advance(&p5, t(20), Some(&inst));
        assert_eq!(o[0].flipped_to, Some(true));
        // Liveness has no manual trigger: its first probe is the next tick.
        let mut w = ProbeWorker::new(ProbeKind::Liveness, t(10));
        assert!(w.advance(&p, started, Some(&inst)).is_empty());
    }

    #[test]
    fn initial_delay_and_thresholds() {
        let mut probe = exec(&["true"]);
        probe.initial_delay_seconds = Some(15);
        probe.success_threshold = Some(2);
        let p = ProbeParams::from_probe(&probe);
        let mut w = ProbeWorker::new(ProbeKind::Readiness, t(0));
        let inst = Instance {
            container_id: "a".into(),
            started_at: t(0),
            finished_at: None,
        };
        w.advance(&p, t(20), Some(&inst)); // ticks 0, 10 skipped (delay), 20 success #1
        assert!(!w.result);
        let o = w.advance(&p, t(30), Some(&inst));
        assert_eq!(o[0].flipped_to, Some(true));
    }

    #[test]
    fn liveness_fails_after_three_and_holds_until_new_instance() {
        let p = ProbeParams::from_probe(&exec(&["false"]));
        let mut w = ProbeWorker::new(ProbeKind::Liveness, t(0));
        let inst = Instance {
            container_id: "a".into(),
            started_at: t(0),
            finished_at: None,
        };
        let o = w.advance(&p, t(40), Some(&inst));
        let failed: Vec<_> = o.iter().filter(|x| x.failed).map(|x| x.at).collect();
        assert_eq!(
            failed,
            vec![t(0), t(10), t(20)],
            "on hold after the third failure"
        );
        assert_eq!(
            o.iter().find_map(|x| x.flipped_to.map(|v| (x.at, v))),
            Some((t(20), false))
        );
        // A new instance resets to Success and probing resumes.
        let inst2 = Instance {
            container_id: "b".into(),
            started_at: t(45),
            finished_at: None,
        };
        let o = w.advance(&p, t(50), Some(&inst2));
        assert!(w.result || o.iter().any(|x| x.failed));
        assert_eq!(o.len(), 1);
    }
}
