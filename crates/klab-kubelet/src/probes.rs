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
//! `tcpSocket` and `grpc` probes succeed (the simulated server always answers), unless the pod's
//! `probe.klab.dev/<container>.<readiness|liveness>` annotation scripts the result from now on
//! (`success`, `failure` or `failure: <output>`; a scenario's `probe` step sets it over time).

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

    /// The name in the scripting annotation (`readiness`, `liveness`).
    pub fn key(self) -> &'static str {
        match self {
            ProbeKind::Readiness => "readiness",
            ProbeKind::Liveness => "liveness",
        }
    }
}

/// Annotation prefix scripting a probe's result: `probe.klab.dev/<container>.<readiness|liveness>`.
pub const PROBE_ANNOTATION_PREFIX: &str = "probe.klab.dev/";

/// A scripted probe result: `success`, `failure`, or `failure: <output>` (the output the
/// `Unhealthy` event carries after `… probe failed: `, e.g. `HTTP probe failed with statuscode:
/// 503`). Returns whether the probe succeeds and its output.
pub fn parse_scripted(value: &str) -> Result<(bool, String), String> {
    let v = value.trim();
    match v {
        "success" => Ok((true, String::new())),
        "failure" => Ok((false, String::new())),
        _ => match v.strip_prefix("failure:") {
            Some(out) => Ok((false, out.trim().to_string())),
            None => Err(format!(
                "invalid probe result {value:?}: success, failure or failure: <output>"
            )),
        },
    }
}

/// The scripted result of one container's probe from its pod's annotations, if any and valid
/// (an invalid value scripts nothing: the probe answers as modelled).
pub fn scripted_result(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    container: &str,
    kind: ProbeKind,
) -> Option<(bool, String)> {
    let key = format!("{PROBE_ANNOTATION_PREFIX}{container}.{}", kind.key());
    annotations
        .and_then(|a| a.get(&key))
        .and_then(|v| parse_scripted(v).ok())
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

#[cfg(test)]
mod scripted_tests {
    use super::*;

    #[test]
    fn scripted_results_parse_and_are_found_by_container_and_kind() {
        // (value, Some((succeeds, output))) or None for a refused value.
        type Want = Option<(bool, &'static str)>;
        let table: &[(&str, Want)] = &[
            ("success", Some((true, ""))),
            ("failure", Some((false, ""))),
            (
                "failure: HTTP probe failed with statuscode: 503",
                Some((false, "HTTP probe failed with statuscode: 503")),
            ),
            (" failure ", Some((false, ""))),
            ("maybe", None),
            ("", None),
        ];
        for (v, want) in table {
            let got = parse_scripted(v).ok();
            assert_eq!(
                got.as_ref().map(|(ok, o)| (*ok, o.as_str())),
                *want,
                "{v:?}"
            );
        }
        let mut a = std::collections::BTreeMap::new();
        a.insert(
            "probe.klab.dev/web.readiness".to_string(),
            "failure".to_string(),
        );
        a.insert(
            "probe.klab.dev/web.liveness".to_string(),
            "bogus".to_string(),
        );
        assert_eq!(
            scripted_result(Some(&a), "web", ProbeKind::Readiness),
            Some((false, String::new()))
        );
        // Invalid: nothing scripted. Other containers: nothing.
        assert_eq!(scripted_result(Some(&a), "web", ProbeKind::Liveness), None);
        assert_eq!(scripted_result(Some(&a), "db", ProbeKind::Readiness), None);
        assert_eq!(scripted_result(None, "web", ProbeKind::Readiness), None);
    }
}
