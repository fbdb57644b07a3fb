//! Scripted probe results: the value of a pod's `probe.klab.dev/<container>.<kind>` annotation.
//!
//! The kubelet reads it to decide what a probe answers from its next tick on; `klab sim` writes it
//! from a scenario's `probe` step and checks at load time that the result fits the probe's handler
//! (an exit code only means something to an `exec` probe, a status code to an `httpGet` one).
//! Shared here so both sides parse the same text the same way.

/// Annotation prefix scripting a probe's result: `probe.klab.dev/<container>.<kind>`.
pub const PROBE_ANNOTATION_PREFIX: &str = "probe.klab.dev/";

/// The probe kinds a result can be scripted for, as the annotation names them.
pub const PROBE_KINDS: [&str; 3] = ["startup", "readiness", "liveness"];

/// gRPC health statuses a `grpc:` result may name (`grpc.health.v1.HealthCheckResponse`).
pub const GRPC_STATUSES: [&str; 4] = ["SERVING", "NOT_SERVING", "UNKNOWN", "SERVICE_UNKNOWN"];

/// What a probe answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scripted {
    /// `success`: whatever the handler, the probe succeeds.
    Success,
    /// `failure` / `failure: <output>`: the probe fails with this output (any handler).
    Failure(String),
    /// `exit: N`: the exec probe's command exits with N (0 succeeds).
    Exit(i32),
    /// `http: N`: the HTTP server answers status N (200–399 succeed, 3xx with a warning).
    Http(u16),
    /// `grpc: STATUS`: the gRPC health service answers STATUS (only SERVING succeeds).
    Grpc(String),
    /// `refused`: nothing listens on the port (httpGet, tcpSocket, grpc).
    Refused,
    /// `timeout`: no answer within `timeoutSeconds` (any handler).
    Timeout,
}

/// A probe's handler, as the pod spec names the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handler {
    Exec,
    HttpGet,
    TcpSocket,
    Grpc,
}

impl Handler {
    pub fn field(self) -> &'static str {
        match self {
            Handler::Exec => "exec",
            Handler::HttpGet => "httpGet",
            Handler::TcpSocket => "tcpSocket",
            Handler::Grpc => "grpc",
        }
    }
}

const EXPECTED: &str = "success, failure, failure: <output>, exit: <code>, http: <status>, grpc: <status>, refused or timeout";

/// Parses an annotation value.
pub fn parse(value: &str) -> Result<Scripted, String> {
    let v = value.trim();
    match v {
        "success" => return Ok(Scripted::Success),
        "failure" => return Ok(Scripted::Failure(String::new())),
        "refused" => return Ok(Scripted::Refused),
        "timeout" => return Ok(Scripted::Timeout),
        _ => {}
    }
    let Some((key, arg)) = v.split_once(':') else {
        return Err(format!("invalid probe result {value:?}: {EXPECTED}"));
    };
    let arg = arg.trim();
    match key.trim() {
        "failure" => Ok(Scripted::Failure(arg.to_string())),
        "exit" => arg
            .parse::<i32>()
            .ok()
            .filter(|c| (0..=255).contains(c))
            .map(Scripted::Exit)
            .ok_or_else(|| format!("invalid exit code {arg:?}: an integer from 0 to 255")),
        "http" => arg
            .parse::<u16>()
            .ok()
            .filter(|c| (100..=599).contains(c))
            .map(Scripted::Http)
            .ok_or_else(|| format!("invalid HTTP status code {arg:?}: an integer from 100 to 599")),
        "grpc" if GRPC_STATUSES.contains(&arg) => Ok(Scripted::Grpc(arg.to_string())),
        "grpc" => Err(format!(
            "invalid gRPC health status {arg:?}: one of {}",
            GRPC_STATUSES.join(", ")
        )),
        _ => Err(format!("invalid probe result {value:?}: {EXPECTED}")),
    }
}

impl Scripted {
    /// Whether this result can come from a probe with this handler; the error says why not.
    pub fn fits(&self, handler: Handler) -> Result<(), String> {
        let (what, ok) = match self {
            Scripted::Success | Scripted::Failure(_) | Scripted::Timeout => return Ok(()),
            Scripted::Exit(_) => ("an exit code", handler == Handler::Exec),
            Scripted::Http(_) => ("an HTTP status code", handler == Handler::HttpGet),
            Scripted::Grpc(_) => ("a gRPC health status", handler == Handler::Grpc),
            Scripted::Refused => ("a refused connection", handler != Handler::Exec),
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{what} ({}) does not fit the probe's handler {}",
                self.annotation_value(),
                handler.field()
            ))
        }
    }

    /// The annotation value that scripts this result.
    pub fn annotation_value(&self) -> String {
        match self {
            Scripted::Success => "success".into(),
            Scripted::Failure(o) if o.is_empty() => "failure".into(),
            Scripted::Failure(o) => format!("failure: {o}"),
            Scripted::Exit(c) => format!("exit: {c}"),
            Scripted::Http(c) => format!("http: {c}"),
            Scripted::Grpc(s) => format!("grpc: {s}"),
            Scripted::Refused => "refused".into(),
            Scripted::Timeout => "timeout".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_and_print_back() {
        let table: &[(&str, Result<Scripted, &str>)] = &[
            ("success", Ok(Scripted::Success)),
            (" failure ", Ok(Scripted::Failure(String::new()))),
            (
                "failure: HTTP probe failed with statuscode: 503",
                Ok(Scripted::Failure(
                    "HTTP probe failed with statuscode: 503".into(),
                )),
            ),
            ("exit: 1", Ok(Scripted::Exit(1))),
            ("exit:0", Ok(Scripted::Exit(0))),
            (
                "exit: 256",
                Err("invalid exit code \"256\": an integer from 0 to 255"),
            ),
            (
                "exit: -1",
                Err("invalid exit code \"-1\": an integer from 0 to 255"),
            ),
            ("http: 500", Ok(Scripted::Http(500))),
            ("http: 302", Ok(Scripted::Http(302))),
            (
                "http: 99999",
                Err("invalid HTTP status code \"99999\": an integer from 100 to 599"),
            ),
            (
                "grpc: NOT_SERVING",
                Ok(Scripted::Grpc("NOT_SERVING".into())),
            ),
            (
                "grpc: DOWN",
                Err(
                    "invalid gRPC health status \"DOWN\": one of SERVING, NOT_SERVING, UNKNOWN, SERVICE_UNKNOWN",
                ),
            ),
            ("refused", Ok(Scripted::Refused)),
            ("timeout", Ok(Scripted::Timeout)),
            (
                "maybe",
                Err(
                    "invalid probe result \"maybe\": success, failure, failure: <output>, exit: <code>, http: <status>, grpc: <status>, refused or timeout",
                ),
            ),
            (
                "",
                Err(
                    "invalid probe result \"\": success, failure, failure: <output>, exit: <code>, http: <status>, grpc: <status>, refused or timeout",
                ),
            ),
        ];
        for (v, want) in table {
            let got = parse(v);
            assert_eq!(got, want.clone().map_err(String::from), "{v:?}");
            if let Ok(s) = got {
                assert_eq!(parse(&s.annotation_value()), Ok(s), "round trip of {v:?}");
            }
        }
    }

    #[test]
    fn results_fit_their_handlers_only() {
        use Handler::*;
        let table: &[(Scripted, &[Handler])] = &[
            (Scripted::Success, &[Exec, HttpGet, TcpSocket, Grpc]),
            (
                Scripted::Failure("x".into()),
                &[Exec, HttpGet, TcpSocket, Grpc],
            ),
            (Scripted::Timeout, &[Exec, HttpGet, TcpSocket, Grpc]),
            (Scripted::Exit(1), &[Exec]),
            (Scripted::Http(500), &[HttpGet]),
            (Scripted::Grpc("NOT_SERVING".into()), &[Grpc]),
            (Scripted::Refused, &[HttpGet, TcpSocket, Grpc]),
        ];
        for (s, fitting) in table {
            for h in [Exec, HttpGet, TcpSocket, Grpc] {
                assert_eq!(s.fits(h).is_ok(), fitting.contains(&h), "{s:?} on {h:?}");
            }
        }
        assert_eq!(
            Scripted::Exit(1).fits(HttpGet),
            Err("an exit code (exit: 1) does not fit the probe's handler httpGet".into())
        );
        assert_eq!(
            Scripted::Http(500).fits(Exec),
            Err("an HTTP status code (http: 500) does not fit the probe's handler exec".into())
        );
    }
}
