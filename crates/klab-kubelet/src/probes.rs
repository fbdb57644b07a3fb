//! Startup, readiness and liveness probes on the simulated runtime (`pkg/kubelet/prober/worker.go`).
//!
//! A probe worker ticks every `periodSeconds` from the moment the pod was added (the first tick is
//! immediate; right after a kubelet start it is delayed by a random fraction of the period); a
//! readiness worker also probes a container as soon as it has started (upstream's manual trigger).
//! A tick is skipped while the container is not running or younger than `initialDelaySeconds`,
//! and — while a startup probe has not succeeded — liveness and readiness ticks are skipped too;
//! a startup worker stops probing once it succeeded. The result changes after `failureThreshold`
//! consecutive failures / `successThreshold` consecutive successes. Readiness starts as Failure,
//! liveness as Success, startup as Unknown; a new container instance resets the result. After a
//! liveness or startup failure the worker holds until the container is replaced.
//!
//! A probe takes time: its answer arrives when the handler answered, `timeoutSeconds` after the
//! tick for a timeout. A probe still running when the next tick comes delays that tick (Go's
//! ticker keeps one tick and drops the rest).
//!
//! What a probe answers ([`answer`]): an `exec` probe runs the simulated program of its command
//! (see [`crate::program`]); `httpGet`, `tcpSocket` and `grpc` probes succeed (the simulated
//! server always answers) — unless the pod's `probe.klab.dev/<container>.<kind>` annotation
//! scripts the answer from now on ([`klab_api::probe_script`]: an exit code, an HTTP status, a
//! gRPC health status, a refused connection or a timeout; a scenario's `probe` step sets it over
//! time). The output is upstream's text for that handler and outcome.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use klab_api::duration::format_go_duration;
use klab_api::probe_script::{self, Handler, Scripted};

use crate::program::Program;
use crate::runtime::after;

pub use klab_api::probe_script::PROBE_ANNOTATION_PREFIX;

/// Which probe. The order is the order a sync runs them in: startup first, since its result
/// gates the other two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProbeKind {
    Startup,
    Readiness,
    Liveness,
}

impl ProbeKind {
    pub fn label(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Readiness => "Readiness",
            ProbeKind::Liveness => "Liveness",
        }
    }

    /// The name in the scripting annotation (`startup`, `readiness`, `liveness`).
    pub fn key(self) -> &'static str {
        match self {
            ProbeKind::Startup => "startup",
            ProbeKind::Readiness => "readiness",
            ProbeKind::Liveness => "liveness",
        }
    }

    /// Whether a failure beyond the threshold kills the container.
    fn kills(self) -> bool {
        matches!(self, ProbeKind::Liveness | ProbeKind::Startup)
    }
}

/// The scripted answer of one container's probe from its pod's annotations, if any and valid
/// (an invalid value scripts nothing: the probe answers as modelled).
pub fn scripted_result(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    container: &str,
    kind: ProbeKind,
) -> Option<Scripted> {
    let key = format!("{PROBE_ANNOTATION_PREFIX}{container}.{}", kind.key());
    annotations
        .and_then(|a| a.get(&key))
        .and_then(|v| probe_script::parse(v).ok())
}

/// Where a probe goes, resolved from its handler, the container's ports and the pod's IP.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Exec { command: Vec<String> },
    Http { url: String, addr: String },
    Tcp { addr: String },
    Grpc { addr: String },
}

impl Target {
    pub fn handler(&self) -> Handler {
        match self {
            Target::Exec { .. } => Handler::Exec,
            Target::Http { .. } => Handler::HttpGet,
            Target::Tcp { .. } => Handler::TcpSocket,
            Target::Grpc { .. } => Handler::Grpc,
        }
    }

    /// The probe's target; `None` for a probe without a handler (the API server refuses those).
    pub fn of(probe: &Probe, container: &Container, pod_ip: &str) -> Option<Target> {
        // Go's net.JoinHostPort: an IPv6 host in brackets.
        let join = |host: &str, port: &str| {
            if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            }
        };
        if let Some(e) = &probe.exec {
            return Some(Target::Exec {
                command: e.command.clone().unwrap_or_default(),
            });
        }
        if let Some(h) = &probe.http_get {
            let host = h
                .host
                .as_deref()
                .filter(|h| !h.is_empty())
                .unwrap_or(pod_ip);
            let addr = join(host, &port_of(&h.port, container));
            let scheme = h.scheme.as_deref().unwrap_or("HTTP").to_ascii_lowercase();
            let path = match h.path.as_deref().unwrap_or("") {
                "" => String::new(),
                p if p.starts_with('/') => p.to_string(),
                p => format!("/{p}"),
            };
            return Some(Target::Http {
                url: format!("{scheme}://{addr}{path}"),
                addr,
            });
        }
        if let Some(t) = &probe.tcp_socket {
            let host = t
                .host
                .as_deref()
                .filter(|h| !h.is_empty())
                .unwrap_or(pod_ip);
            return Some(Target::Tcp {
                addr: join(host, &port_of(&t.port, container)),
            });
        }
        probe.grpc.as_ref().map(|g| Target::Grpc {
            addr: join(pod_ip, &g.port.to_string()),
        })
    }
}

/// A named port is the container's port of that name (upstream's findPortByName).
fn port_of(port: &IntOrString, container: &Container) -> String {
    match port {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .map_or_else(|| name.clone(), |p| p.container_port.to_string()),
    }
}

/// `pkg/probe`'s result: a warning counts as a success but records a `ProbeWarning` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Success,
    Warning,
    Failure,
}

/// What one probe answered, after how long.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub verdict: Verdict,
    pub output: String,
    pub took: Duration,
}

impl Answer {
    fn new(verdict: Verdict, output: impl Into<String>, took: Duration) -> Answer {
        Answer {
            verdict,
            output: output.into(),
            took,
        }
    }
}

/// What a probe to `target` answers: the scripted answer when there is one that fits the
/// handler, else the model's (exec: the command's program; the others: a healthy server).
pub fn answer(target: &Target, scripted: Option<&Scripted>, timeout: Duration) -> Answer {
    use Verdict::*;
    let zero = Duration::ZERO;
    let timeout_text = format_go_duration(timeout);
    let scripted = scripted.filter(|s| s.fits(target.handler()).is_ok());
    match (scripted, target) {
        (None, Target::Exec { command }) => match Program::hook_outcome(command) {
            (Some(d), 0) if d <= timeout => Answer::new(Success, "", d),
            (Some(d), _) if d <= timeout => Answer::new(Failure, "", d),
            _ => answer(target, Some(&Scripted::Timeout), timeout),
        },
        (None, _) | (Some(Scripted::Success), _) => Answer::new(Success, "", zero),
        (Some(Scripted::Failure(o)), _) => Answer::new(Failure, o.clone(), zero),
        (Some(Scripted::Exit(0)), _) => Answer::new(Success, "", zero),
        (Some(Scripted::Exit(_)), _) => Answer::new(Failure, "", zero),
        (Some(Scripted::Http(c)), _) => match c {
            200..=299 => Answer::new(Success, "", zero),
            // A redirect the prober does not follow (to another host): success, with a warning.
            300..=399 => Answer::new(Warning, "Probe terminated redirects, Response body: ", zero),
            _ => Answer::new(
                Failure,
                format!("HTTP probe failed with statuscode: {c}"),
                zero,
            ),
        },
        (Some(Scripted::Grpc(s)), _) if s == "SERVING" => {
            Answer::new(Success, "service healthy", zero)
        }
        (Some(Scripted::Grpc(s)), _) => Answer::new(
            Failure,
            format!("service unhealthy (responded with {s:?})"),
            zero,
        ),
        (Some(Scripted::Refused), Target::Http { url, addr }) => Answer::new(
            Failure,
            format!("Get {url:?}: dial tcp {addr}: connect: connection refused"),
            zero,
        ),
        (Some(Scripted::Refused), Target::Tcp { addr }) => Answer::new(
            Failure,
            format!("dial tcp {addr}: connect: connection refused"),
            zero,
        ),
        // A blocking gRPC dial retries a refused connection until the probe's deadline.
        (Some(Scripted::Refused), Target::Grpc { addr }) => Answer::new(
            Failure,
            format!(
                "timeout: failed to connect service {addr:?} within {timeout_text}: context deadline exceeded"
            ),
            timeout,
        ),
        (Some(Scripted::Refused), Target::Exec { .. }) => Answer::new(Success, "", zero),
        (Some(Scripted::Timeout), t) => {
            let out = match t {
                Target::Exec { command } => format!("command {:?} timed out", command.join(" ")),
                Target::Http { url, .. } => format!(
                    "Get {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                ),
                Target::Tcp { addr } => format!("dial tcp {addr}: i/o timeout"),
                Target::Grpc { .. } => {
                    format!("timeout: health rpc did not complete within {timeout_text}")
                }
            };
            Answer::new(Failure, out, timeout)
        }
    }
}

/// A probe's parameters after upstream defaulting.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeParams {
    pub initial_delay_seconds: i64,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: i32,
    pub failure_threshold: i32,
    /// Probe-level `terminationGracePeriodSeconds` (liveness and startup kills).
    pub termination_grace_period_seconds: Option<i64>,
}

impl ProbeParams {
    pub fn from_probe(p: &Probe) -> ProbeParams {
        ProbeParams {
            initial_delay_seconds: p.initial_delay_seconds.unwrap_or(0).max(0) as i64,
            period: Duration::from_secs(p.period_seconds.unwrap_or(10).max(1) as u64),
            timeout: Duration::from_secs(p.timeout_seconds.unwrap_or(1).max(1) as u64),
            success_threshold: p.success_threshold.unwrap_or(1).max(1),
            failure_threshold: p.failure_threshold.unwrap_or(3).max(1),
            termination_grace_period_seconds: p.termination_grace_period_seconds,
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
    /// When the probe's answer arrived.
    pub at: Timestamp,
    /// The probe ran and failed (an `Unhealthy` event).
    pub failed: bool,
    /// The probe ran and succeeded with a warning (a `ProbeWarning` event).
    pub warned: bool,
    /// The result changed to this value at this tick.
    pub flipped_to: Option<bool>,
}

/// One probe worker.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeWorker {
    pub kind: ProbeKind,
    /// The next instant of the period grid.
    pub next_tick: Timestamp,
    /// `None`: Unknown (a startup probe before its first verdict).
    pub result: Option<bool>,
    /// When the result last became Success for the current instance (a startup probe's
    /// success is when the container counts as started).
    pub success_at: Option<Timestamp>,
    run: i32,
    last_result: Option<bool>,
    on_hold: bool,
    container_id: Option<String>,
    /// A probe in flight keeps the next one waiting until its answer.
    busy_until: Timestamp,
    /// How long the current answer takes (for [`ProbeWorker::next_wake`]).
    took: Duration,
    /// A readiness manual trigger seen but whose answer is still to come.
    pending_trigger: Option<Timestamp>,
}

impl ProbeWorker {
    fn initial(kind: ProbeKind) -> Option<bool> {
        match kind {
            ProbeKind::Startup => None,
            ProbeKind::Readiness => Some(false),
            ProbeKind::Liveness => Some(true),
        }
    }

    /// A worker whose first tick is at `first_tick`.
    pub fn new(kind: ProbeKind, first_tick: Timestamp) -> Self {
        ProbeWorker {
            kind,
            next_tick: first_tick,
            result: Self::initial(kind),
            success_at: None,
            run: 0,
            last_result: None,
            on_hold: false,
            container_id: None,
            busy_until: first_tick,
            took: Duration::ZERO,
            pending_trigger: None,
        }
    }

    /// Whether the result is Success.
    pub fn succeeded(&self) -> bool {
        self.result == Some(true)
    }

    /// Whether this worker's result is Success for this container instance.
    pub fn succeeded_for(&self, container_id: &str) -> bool {
        self.succeeded() && self.container_id.as_deref() == Some(container_id)
    }

    /// The next instant this worker has something to do: the next answer due.
    pub fn next_wake(&self) -> Timestamp {
        let grid = after(self.next_tick.max(self.busy_until), self.took);
        match self.pending_trigger {
            Some(t) => grid.min(after(t, self.took)),
            None => grid,
        }
    }

    /// Runs every probe whose answer is due at or before `now`. `started_since` is when the
    /// container counts as started (its startup probe succeeded; its start when it has none):
    /// liveness and readiness do not probe before. A readiness worker also probes a newly started
    /// container at once (the prober manager's manual trigger from `UpdatePodStatus`, which fires
    /// while a started container's readiness has no result yet), not at the next period tick.
    pub fn advance(
        &mut self,
        p: &ProbeParams,
        ans: &Answer,
        now: Timestamp,
        inst: Option<&Instance>,
        started_since: Option<Timestamp>,
    ) -> Vec<TickOutcome> {
        self.took = ans.took;
        let mut out = Vec::new();
        self.pending_trigger = None;
        if self.kind == ProbeKind::Readiness
            && let Some(i) = inst
            && let Some(trig) = started_since
            && i.started_at <= trig
            && trig < self.next_tick
            && i.finished_at.is_none_or(|f| f > trig)
            && self.container_id.as_deref() != Some(i.container_id.as_str())
        {
            if trig > now {
                self.pending_trigger = Some(trig);
            } else if self.observe(trig, p, i, started_since, &mut out) {
                let done = after(trig, ans.took);
                if done <= now {
                    self.record(done, p, ans, &mut out);
                    self.busy_until = done;
                } else {
                    // Seen (the instance is now this worker's), answered later: keep waiting.
                    self.pending_trigger = Some(trig);
                    self.container_id = None;
                }
            }
        }
        loop {
            let start = self.next_tick.max(self.busy_until);
            if start > now {
                break;
            }
            let probes = match inst {
                Some(i) => self.observe(start, p, i, started_since, &mut out),
                None => false,
            };
            let done = if probes {
                after(start, ans.took)
            } else {
                start
            };
            if done > now {
                break;
            }
            while self.next_tick <= start {
                self.next_tick = after(self.next_tick, p.period);
            }
            if probes {
                self.record(done, p, ans, &mut out);
                self.busy_until = done;
            }
        }
        out
    }

    /// The state at `t` against `inst`: resets for a new instance, reports a stopped one, and says
    /// whether a probe runs at `t`.
    fn observe(
        &mut self,
        t: Timestamp,
        p: &ProbeParams,
        inst: &Instance,
        started_since: Option<Timestamp>,
        out: &mut Vec<TickOutcome>,
    ) -> bool {
        if inst.started_at > t {
            return false; // the instance did not exist yet at this tick
        }
        if self.container_id.as_deref() != Some(inst.container_id.as_str()) {
            // A new container instance: back to the initial result.
            self.container_id = Some(inst.container_id.clone());
            self.result = Self::initial(self.kind);
            self.success_at = None;
            self.run = 0;
            self.last_result = None;
            self.on_hold = false;
        }
        if inst.finished_at.is_some_and(|f| f <= t) {
            if self.result != Some(false) && self.result.is_some() {
                self.result = Some(false);
                out.push(TickOutcome {
                    at: t,
                    failed: false,
                    warned: false,
                    flipped_to: Some(false),
                });
            }
            return false;
        }
        if self.on_hold || t.duration_since(inst.started_at).as_secs() < p.initial_delay_seconds {
            return false;
        }
        match self.kind {
            // A startup probe has done its job once it succeeded.
            ProbeKind::Startup => !self.succeeded(),
            _ => started_since.is_some_and(|s| s <= t),
        }
    }

    /// The probe's answer arrived at `at`.
    fn record(&mut self, at: Timestamp, p: &ProbeParams, ans: &Answer, out: &mut Vec<TickOutcome>) {
        let r = ans.verdict != Verdict::Failure;
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
        if self.run >= threshold && self.result != Some(r) {
            self.result = Some(r);
            flipped = Some(r);
            if r {
                self.success_at = Some(at);
            }
        }
        if !r && self.run >= threshold && self.kind.kills() {
            self.on_hold = true;
            self.run = 0;
        }
        out.push(TickOutcome {
            at,
            failed: !r,
            warned: ans.verdict == Verdict::Warning,
            flipped_to: flipped,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerPort, ExecAction, GRPCAction, HTTPGetAction, TCPSocketAction,
    };

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + s).unwrap()
    }

    fn ms(v: i64) -> Timestamp {
        t(0) + jiff::SignedDuration::from_millis(v)
    }

    fn exec(cmd: &[&str]) -> Probe {
        Probe {
            exec: Some(ExecAction {
                command: Some(cmd.iter().map(|s| s.to_string()).collect()),
            }),
            ..Default::default()
        }
    }

    fn ok() -> Answer {
        Answer::new(Verdict::Success, "", Duration::ZERO)
    }

    fn fail() -> Answer {
        Answer::new(Verdict::Failure, "", Duration::ZERO)
    }

    fn running(id: &str, at: Timestamp) -> Instance {
        Instance {
            container_id: id.into(),
            started_at: at,
            finished_at: None,
        }
    }

    fn container() -> Container {
        Container {
            name: "app".into(),
            ports: Some(vec![ContainerPort {
                name: Some("http".into()),
                container_port: 8080,
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn params_defaults() {
        let p = ProbeParams::from_probe(&Probe::default());
        assert_eq!(
            (
                p.initial_delay_seconds,
                p.period,
                p.timeout,
                p.success_threshold,
                p.failure_threshold
            ),
            (0, Duration::from_secs(10), Duration::from_secs(1), 1, 3)
        );
    }

    #[test]
    fn targets_resolve_ports_hosts_and_paths() {
        let http = |port: IntOrString, path: Option<&str>, host: Option<&str>| Probe {
            http_get: Some(HTTPGetAction {
                port,
                path: path.map(String::from),
                host: host.map(String::from),
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = container();
        let table: &[(Probe, Target)] = &[
            (
                http(IntOrString::String("http".into()), Some("/healthz"), None),
                Target::Http {
                    url: "http://10.244.1.5:8080/healthz".into(),
                    addr: "10.244.1.5:8080".into(),
                },
            ),
            (
                http(IntOrString::Int(80), Some("ready"), Some("example.com")),
                Target::Http {
                    url: "http://example.com:80/ready".into(),
                    addr: "example.com:80".into(),
                },
            ),
            (
                http(IntOrString::Int(80), None, None),
                Target::Http {
                    url: "http://10.244.1.5:80".into(),
                    addr: "10.244.1.5:80".into(),
                },
            ),
            (
                Probe {
                    tcp_socket: Some(TCPSocketAction {
                        port: IntOrString::Int(5432),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                Target::Tcp {
                    addr: "10.244.1.5:5432".into(),
                },
            ),
            (
                Probe {
                    grpc: Some(GRPCAction {
                        port: 9090,
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                Target::Grpc {
                    addr: "10.244.1.5:9090".into(),
                },
            ),
            (
                exec(&["cat", "/tmp/healthy"]),
                Target::Exec {
                    command: vec!["cat".into(), "/tmp/healthy".into()],
                },
            ),
        ];
        for (probe, want) in table {
            assert_eq!(Target::of(probe, &c, "10.244.1.5").as_ref(), Some(want));
        }
        assert_eq!(Target::of(&Probe::default(), &c, "10.244.1.5"), None);
        // An IPv6 pod address is bracketed, as Go's JoinHostPort does.
        assert_eq!(
            Target::of(&http(IntOrString::Int(80), Some("/"), None), &c, "fd00::5"),
            Some(Target::Http {
                url: "http://[fd00::5]:80/".into(),
                addr: "[fd00::5]:80".into()
            })
        );
    }

    #[test]
    fn answers_carry_upstreams_output_per_handler() {
        let http = Target::Http {
            url: "http://10.244.1.5:8080/healthz".into(),
            addr: "10.244.1.5:8080".into(),
        };
        let tcp = Target::Tcp {
            addr: "10.244.1.5:5432".into(),
        };
        let grpc = Target::Grpc {
            addr: "10.244.1.5:9090".into(),
        };
        let ex = |c: &[&str]| Target::Exec {
            command: c.iter().map(|s| s.to_string()).collect(),
        };
        let s1 = Duration::from_secs(1);
        let s3 = Duration::from_secs(3);
        use Verdict::*;
        // (target, script, timeout, verdict, output, took)
        type Row = (
            Target,
            Option<Scripted>,
            Duration,
            Verdict,
            &'static str,
            Duration,
        );
        let table: Vec<Row> = vec![
            (http.clone(), None, s1, Success, "", Duration::ZERO),
            (
                http.clone(),
                Some(Scripted::Http(200)),
                s1,
                Success,
                "",
                Duration::ZERO,
            ),
            (
                http.clone(),
                Some(Scripted::Http(204)),
                s1,
                Success,
                "",
                Duration::ZERO,
            ),
            (
                http.clone(),
                Some(Scripted::Http(302)),
                s1,
                Warning,
                "Probe terminated redirects, Response body: ",
                Duration::ZERO,
            ),
            (
                http.clone(),
                Some(Scripted::Http(500)),
                s1,
                Failure,
                "HTTP probe failed with statuscode: 500",
                Duration::ZERO,
            ),
            (
                http.clone(),
                Some(Scripted::Http(101)),
                s1,
                Failure,
                "HTTP probe failed with statuscode: 101",
                Duration::ZERO,
            ),
            (
                http.clone(),
                Some(Scripted::Refused),
                s1,
                Failure,
                "Get \"http://10.244.1.5:8080/healthz\": dial tcp 10.244.1.5:8080: connect: connection refused",
                Duration::ZERO,
            ),
            (
                http.clone(),
                Some(Scripted::Timeout),
                s3,
                Failure,
                "Get \"http://10.244.1.5:8080/healthz\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                s3,
            ),
            (
                tcp.clone(),
                Some(Scripted::Refused),
                s1,
                Failure,
                "dial tcp 10.244.1.5:5432: connect: connection refused",
                Duration::ZERO,
            ),
            (
                tcp.clone(),
                Some(Scripted::Timeout),
                s1,
                Failure,
                "dial tcp 10.244.1.5:5432: i/o timeout",
                s1,
            ),
            (
                grpc.clone(),
                Some(Scripted::Grpc("NOT_SERVING".into())),
                s1,
                Failure,
                "service unhealthy (responded with \"NOT_SERVING\")",
                Duration::ZERO,
            ),
            (
                grpc.clone(),
                Some(Scripted::Grpc("SERVING".into())),
                s1,
                Success,
                "service healthy",
                Duration::ZERO,
            ),
            (
                grpc.clone(),
                Some(Scripted::Timeout),
                s1,
                Failure,
                "timeout: health rpc did not complete within 1s",
                s1,
            ),
            (
                grpc.clone(),
                Some(Scripted::Refused),
                s1,
                Failure,
                "timeout: failed to connect service \"10.244.1.5:9090\" within 1s: context deadline exceeded",
                s1,
            ),
            // exec: the modelled command, then scripted exit codes and a timeout.
            (ex(&["true"]), None, s1, Success, "", Duration::ZERO),
            (
                ex(&["sh", "-c", "exit 1"]),
                None,
                s1,
                Failure,
                "",
                Duration::ZERO,
            ),
            (
                ex(&["sleep", "5"]),
                None,
                s1,
                Failure,
                "command \"sleep 5\" timed out",
                s1,
            ),
            (
                ex(&["true"]),
                Some(Scripted::Exit(0)),
                s1,
                Success,
                "",
                Duration::ZERO,
            ),
            (
                ex(&["true"]),
                Some(Scripted::Exit(2)),
                s1,
                Failure,
                "",
                Duration::ZERO,
            ),
            (
                ex(&["cat", "/tmp/healthy"]),
                Some(Scripted::Timeout),
                s3,
                Failure,
                "command \"cat /tmp/healthy\" timed out",
                s3,
            ),
            (
                ex(&["true"]),
                Some(Scripted::Failure("cat: can't open '/tmp/healthy'".into())),
                s1,
                Failure,
                "cat: can't open '/tmp/healthy'",
                Duration::ZERO,
            ),
            // A script that does not fit the handler is ignored: the model answers.
            (
                ex(&["true"]),
                Some(Scripted::Http(500)),
                s1,
                Success,
                "",
                Duration::ZERO,
            ),
            (
                http.clone(),
                Some(Scripted::Exit(1)),
                s1,
                Success,
                "",
                Duration::ZERO,
            ),
        ];
        for (target, script, timeout, verdict, output, took) in table {
            let a = answer(&target, script.as_ref(), timeout);
            assert_eq!(
                a,
                Answer::new(verdict, output, took),
                "{target:?} {script:?}"
            );
        }
    }

    /// Failed / warned / flip instants (ms) from a run of ticks.
    fn summary(o: &[TickOutcome]) -> Vec<(i64, &'static str)> {
        o.iter()
            .map(|x| {
                let at = x.at.duration_since(t(0)).as_millis() as i64;
                let what = match (x.failed, x.warned, x.flipped_to) {
                    (true, _, Some(false)) => "fail->false",
                    (true, _, _) => "fail",
                    (false, true, Some(true)) => "warn->true",
                    (false, true, _) => "warn",
                    (false, false, Some(true)) => "ok->true",
                    (false, false, Some(false)) => "stopped->false",
                    (false, false, None) => "ok",
                };
                (at, what)
            })
            .collect()
    }

    #[test]
    fn worker_state_machine() {
        struct Case {
            name: &'static str,
            kind: ProbeKind,
            probe: Probe,
            answer: Answer,
            started_since: Option<i64>,
            until: i64,
            want: Vec<(i64, &'static str)>,
            result: Option<bool>,
        }
        let with = |f: &dyn Fn(&mut Probe)| {
            let mut p = exec(&["true"]);
            f(&mut p);
            p
        };
        let timeout = |s: u64| Answer::new(Verdict::Failure, "", Duration::from_secs(s));
        let cases = vec![
            Case {
                name: "readiness: manual trigger at start, then the grid",
                kind: ProbeKind::Readiness,
                probe: exec(&["true"]),
                answer: ok(),
                started_since: Some(0),
                until: 20,
                want: vec![(0, "ok->true"), (10_000, "ok"), (20_000, "ok")],
                result: Some(true),
            },
            Case {
                name: "readiness: initialDelaySeconds skips the trigger and early ticks",
                kind: ProbeKind::Readiness,
                probe: with(&|p| p.initial_delay_seconds = Some(15)),
                answer: ok(),
                started_since: Some(0),
                until: 30,
                want: vec![(20_000, "ok->true"), (30_000, "ok")],
                result: Some(true),
            },
            Case {
                name: "readiness: successThreshold 2 needs two successes",
                kind: ProbeKind::Readiness,
                probe: with(&|p| p.success_threshold = Some(2)),
                answer: ok(),
                started_since: Some(0),
                until: 10,
                want: vec![(0, "ok"), (10_000, "ok->true")],
                result: Some(true),
            },
            Case {
                name: "readiness: failures never flip (already false), no hold",
                kind: ProbeKind::Readiness,
                probe: exec(&["true"]),
                answer: fail(),
                started_since: Some(0),
                until: 40,
                want: vec![
                    (0, "fail"),
                    (10_000, "fail"),
                    (20_000, "fail"),
                    (30_000, "fail"),
                    (40_000, "fail"),
                ],
                result: Some(false),
            },
            Case {
                name: "liveness: failureThreshold 3 then hold",
                kind: ProbeKind::Liveness,
                probe: exec(&["true"]),
                answer: fail(),
                started_since: Some(0),
                until: 60,
                want: vec![(0, "fail"), (10_000, "fail"), (20_000, "fail->false")],
                result: Some(false),
            },
            Case {
                name: "liveness: periodSeconds 5, failureThreshold 2",
                kind: ProbeKind::Liveness,
                probe: with(&|p| {
                    p.period_seconds = Some(5);
                    p.failure_threshold = Some(2)
                }),
                answer: fail(),
                started_since: Some(0),
                until: 60,
                want: vec![(0, "fail"), (5_000, "fail->false")],
                result: Some(false),
            },
            Case {
                name: "liveness: a timeout answers timeoutSeconds after the tick",
                kind: ProbeKind::Liveness,
                probe: with(&|p| p.timeout_seconds = Some(3)),
                answer: timeout(3),
                started_since: Some(0),
                until: 60,
                want: vec![(3_000, "fail"), (13_000, "fail"), (23_000, "fail->false")],
                result: Some(false),
            },
            Case {
                name: "liveness: a timeout longer than the period delays the next tick",
                kind: ProbeKind::Liveness,
                probe: with(&|p| {
                    p.timeout_seconds = Some(25);
                    p.failure_threshold = Some(4)
                }),
                answer: timeout(25),
                started_since: Some(0),
                until: 100,
                want: vec![
                    (25_000, "fail"),
                    (50_000, "fail"),
                    (75_000, "fail"),
                    (100_000, "fail->false"),
                ],
                result: Some(false),
            },
            Case {
                name: "liveness: not started (startup probe pending) never probes",
                kind: ProbeKind::Liveness,
                probe: exec(&["true"]),
                answer: fail(),
                started_since: None,
                until: 60,
                want: vec![],
                result: Some(true),
            },
            Case {
                name: "liveness: started at 25 probes from the 30 s tick",
                kind: ProbeKind::Liveness,
                probe: exec(&["true"]),
                answer: fail(),
                started_since: Some(25),
                until: 50,
                want: vec![(30_000, "fail"), (40_000, "fail"), (50_000, "fail->false")],
                result: Some(false),
            },
            Case {
                // The worker saw the container at its 0 s tick (not started: skipped, readiness
                // Failure recorded), so the status update finds a result and does not trigger.
                name: "readiness: started at 25 after ticks saw the container: the 30 s tick",
                kind: ProbeKind::Readiness,
                probe: exec(&["true"]),
                answer: ok(),
                started_since: Some(25),
                until: 30,
                want: vec![(30_000, "ok->true")],
                result: Some(true),
            },
            Case {
                name: "startup: Unknown until a verdict, fails at the threshold and holds",
                kind: ProbeKind::Startup,
                probe: exec(&["true"]),
                answer: fail(),
                started_since: None,
                until: 60,
                want: vec![(0, "fail"), (10_000, "fail"), (20_000, "fail->false")],
                result: Some(false),
            },
            Case {
                name: "startup: stops probing once it succeeded",
                kind: ProbeKind::Startup,
                probe: exec(&["true"]),
                answer: ok(),
                started_since: None,
                until: 60,
                want: vec![(0, "ok->true")],
                result: Some(true),
            },
            Case {
                name: "startup: a warning (HTTP redirect) counts as success",
                kind: ProbeKind::Startup,
                probe: exec(&["true"]),
                answer: Answer::new(Verdict::Warning, "x", Duration::ZERO),
                started_since: None,
                until: 10,
                want: vec![(0, "warn->true")],
                result: Some(true),
            },
        ];
        for c in cases {
            let p = ProbeParams::from_probe(&c.probe);
            let mut w = ProbeWorker::new(c.kind, t(0));
            let inst = running("a", t(0));
            // Advance second by second: every instant the kubelet could wake at.
            let mut out = Vec::new();
            for s in 0..=c.until {
                out.extend(w.advance(&p, &c.answer, t(s), Some(&inst), c.started_since.map(t)));
            }
            assert_eq!(summary(&out), c.want, "{}", c.name);
            assert_eq!(w.result, c.result, "{}", c.name);
        }
    }

    #[test]
    fn a_timeout_is_answered_at_its_instant_not_before() {
        // The kubelet wakes at next_wake: the tick at 0 answers at 3 s, not at 0.
        let mut probe = exec(&["true"]);
        probe.timeout_seconds = Some(3);
        let p = ProbeParams::from_probe(&probe);
        let ans = Answer::new(Verdict::Failure, "", Duration::from_secs(3));
        let mut w = ProbeWorker::new(ProbeKind::Liveness, t(0));
        let inst = running("a", t(0));
        assert!(
            w.advance(&p, &ans, t(0), Some(&inst), Some(t(0)))
                .is_empty()
        );
        assert_eq!(w.next_wake(), t(3));
        let o = w.advance(&p, &ans, t(3), Some(&inst), Some(t(0)));
        assert_eq!(summary(&o), vec![(3_000, "fail")]);
        assert_eq!(w.next_wake(), t(13));
    }

    #[test]
    fn readiness_is_probed_as_soon_as_the_container_starts() {
        // N-34: pod added at 10, container started at 13.5 → probed (and Ready) at 13.5, not at
        // the 20 s tick; the period ticks go on from the pod's addition.
        let p = ProbeParams::from_probe(&exec(&["true"]));
        let mut w = ProbeWorker::new(ProbeKind::Readiness, t(10));
        let started = ms(13_500);
        let inst = running("a", started);
        assert!(
            w.advance(&p, &ok(), t(13), Some(&inst), Some(started))
                .is_empty()
        );
        let o = w.advance(&p, &ok(), started, Some(&inst), Some(started));
        assert_eq!(summary(&o), vec![(13_500, "ok->true")]);
        assert!(w.succeeded());
        assert_eq!(w.next_tick, t(20));
        let o = w.advance(&p, &ok(), t(20), Some(&inst), Some(started));
        assert_eq!(summary(&o), vec![(20_000, "ok")]);
        // Liveness has no manual trigger: its first probe is the next tick.
        let mut w = ProbeWorker::new(ProbeKind::Liveness, t(10));
        assert!(
            w.advance(&p, &fail(), started, Some(&inst), Some(started))
                .is_empty()
        );
    }

    #[test]
    fn a_new_instance_resets_and_resumes() {
        let p = ProbeParams::from_probe(&exec(&["false"]));
        let mut w = ProbeWorker::new(ProbeKind::Startup, t(0));
        let a = running("a", t(0));
        w.advance(&p, &fail(), t(40), Some(&a), None);
        assert_eq!(w.result, Some(false));
        // The killed instance stops at 45; a new one runs from 50: Unknown again, probed at 50.
        let stopped = Instance {
            finished_at: Some(t(45)),
            ..a.clone()
        };
        assert!(
            w.advance(&p, &fail(), t(45), Some(&stopped), None)
                .is_empty()
        );
        let b = running("b", t(50));
        let o = w.advance(&p, &ok(), t(50), Some(&b), None);
        assert_eq!(summary(&o), vec![(50_000, "ok->true")]);
        assert!(w.succeeded_for("b"));
        assert!(!w.succeeded_for("a"));
        assert_eq!(w.success_at, Some(t(50)));
    }

    #[test]
    fn scripted_answers_are_found_by_container_and_kind() {
        let mut a = std::collections::BTreeMap::new();
        a.insert(
            "probe.klab.dev/web.readiness".to_string(),
            "http: 503".to_string(),
        );
        a.insert(
            "probe.klab.dev/web.startup".to_string(),
            "timeout".to_string(),
        );
        a.insert(
            "probe.klab.dev/web.liveness".to_string(),
            "bogus".to_string(),
        );
        assert_eq!(
            scripted_result(Some(&a), "web", ProbeKind::Readiness),
            Some(Scripted::Http(503))
        );
        assert_eq!(
            scripted_result(Some(&a), "web", ProbeKind::Startup),
            Some(Scripted::Timeout)
        );
        // Invalid: nothing scripted. Other containers: nothing.
        assert_eq!(scripted_result(Some(&a), "web", ProbeKind::Liveness), None);
        assert_eq!(scripted_result(Some(&a), "db", ProbeKind::Readiness), None);
        assert_eq!(scripted_result(None, "web", ProbeKind::Readiness), None);
    }
}
