//! `kubectl exec`/`attach` sessions on the kubelet: the simulated shell bound to a container,
//! run over stdin/stdout/stderr channels, and the remotecommand WebSocket transport
//! (`v5.channel.k8s.io`, `v4.channel.k8s.io`). The SPDY transport is in [`crate::spdy`].
//!
//! A session is transport-independent: bytes in on stdin, `(channel, bytes)` out, and an exit
//! code at the end, which the transport reports on the error channel as upstream's `Status`
//! (`Success`, or `Failure` with reason `NonZeroExitCode` and an `ExitCode` cause that kubectl
//! turns into `command terminated with exit code N`).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

use crate::runtime::{EXIT_SIGKILL, Machine};
use crate::server::KubeletEndpoint;
use crate::shell::{Container, Shell};

pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const ERROR: u8 = 3;
pub const RESIZE: u8 = 4;
/// v5: "this channel is closed" (`[255, channel]`): kubectl's stdin EOF.
pub const CLOSE: u8 = 255;

/// The options of an exec or attach request (`PodExecOptions` as query parameters).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExecOptions {
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

impl ExecOptions {
    pub fn from_query(query: &[(String, String)]) -> ExecOptions {
        let flag = |v: &str| matches!(v, "true" | "1");
        let mut o = ExecOptions::default();
        for (k, v) in query {
            match k.as_str() {
                "command" => o.command.push(v.clone()),
                "stdin" => o.stdin = flag(v),
                "stdout" => o.stdout = flag(v),
                "stderr" => o.stderr = flag(v),
                "tty" => o.tty = flag(v),
                _ => {}
            }
        }
        o
    }
}

/// The container an exec runs in.
#[derive(Clone)]
pub struct ExecTarget {
    pub endpoint: KubeletEndpoint,
    pub pod: Arc<Pod>,
    pub uid: String,
    pub container: String,
}

/// The longest input line the simulated shell keeps (a tty's canonical-mode buffer).
const MAX_LINE: usize = 4096;

fn lock(m: &Mutex<Machine>) -> std::sync::MutexGuard<'_, Machine> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ExecTarget {
    fn machine(&self) -> Arc<Mutex<Machine>> {
        self.endpoint.machine.clone()
    }

    /// Whether the container still runs (an exec'd process dies with its container).
    pub fn running(&self) -> bool {
        let now = self.endpoint.clock.now();
        let m = self.machine();
        let mut m = lock(&m);
        m.advance(now);
        m.pods
            .get(&self.uid)
            .and_then(|p| p.containers.get(&self.container))
            .is_some_and(|c| c.is_running())
    }

    fn pod_ip(&self) -> String {
        self.pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default()
    }

    fn name(&self) -> String {
        self.pod.metadata.name.clone().unwrap_or_default()
    }
}

impl Container for ExecTarget {
    fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            (
                "PATH".to_string(),
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
            ),
            ("HOSTNAME".into(), self.hostname()),
        ];
        let spec = self.pod.spec.clone().unwrap_or_default();
        if let Some(c) = spec.containers.iter().find(|c| c.name == self.container) {
            for e in c.env.iter().flatten() {
                env.push((e.name.clone(), e.value.clone().unwrap_or_default()));
            }
        }
        // The service variables of the `kubernetes` Service every namespace sees.
        for (k, v) in [
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
            ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
            ("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
            ("KUBERNETES_PORT_443_TCP", "tcp://10.96.0.1:443"),
            ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
            ("KUBERNETES_PORT_443_TCP_PORT", "443"),
            ("KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"),
        ] {
            env.push((k.into(), v.into()));
        }
        env.push(("HOME".into(), "/root".into()));
        env
    }

    fn hostname(&self) -> String {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.hostname.clone())
            .unwrap_or_else(|| self.name())
    }

    fn read(&self, path: &str) -> Option<String> {
        let ns = self.pod.metadata.namespace.clone().unwrap_or_default();
        match path {
            "/etc/hostname" => Some(format!("{}\n", self.hostname())),
            "/etc/hosts" => Some(format!(
                "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n{}\t{}\n",
                self.pod_ip(),
                self.hostname()
            )),
            "/etc/resolv.conf" => Some(format!(
                "search {ns}.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
            )),
            p => {
                let m = self.machine();
                let m = lock(&m);
                m.pods
                    .get(&self.uid)
                    .and_then(|pod| pod.containers.get(&self.container))
                    .and_then(|c| c.files.get(p).cloned())
            }
        }
    }

    fn write(&mut self, path: &str, text: &str, append: bool) {
        let m = self.machine();
        let mut m = lock(&m);
        if let Some(c) = m
            .pods
            .get_mut(&self.uid)
            .and_then(|pod| pod.containers.get_mut(&self.container))
        {
            let f = c.files.entry(path.to_string()).or_default();
            if !append {
                f.clear();
            }
            f.push_str(text);
        }
    }

    fn files(&self) -> Vec<String> {
        let mut out: Vec<String> = ["/etc/hostname", "/etc/hosts", "/etc/resolv.conf"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let m = self.machine();
        let m = lock(&m);
        if let Some(c) = m
            .pods
            .get(&self.uid)
            .and_then(|pod| pod.containers.get(&self.container))
        {
            out.extend(c.files.keys().cloned());
        }
        out
    }

    fn pid1(&self) -> String {
        let spec = self.pod.spec.clone().unwrap_or_default();
        let Some(c) = spec.containers.iter().find(|c| c.name == self.container) else {
            return String::new();
        };
        let argv: Vec<String> = c
            .command
            .iter()
            .flatten()
            .chain(c.args.iter().flatten())
            .cloned()
            .collect();
        if argv.is_empty() {
            let image = c.image.clone().unwrap_or_default();
            let repo = image.rsplit('/').next().unwrap_or(&image);
            let repo = repo.split(':').next().unwrap_or(repo);
            return match repo {
                "nginx" => "nginx: master process nginx -g daemon off;".into(),
                "mysql" => "mysqld".into(),
                "redis" => "redis-server *:6379".into(),
                other => other.to_string(),
            };
        }
        argv.join(" ")
    }

    fn signal_pid1(&mut self, signal: &str) -> bool {
        let now = self.now();
        let m = self.machine();
        let mut m = lock(&m);
        m.signal_pid1(&self.uid, &self.container, signal, now);
        m.changes = m.changes.wrapping_add(1);
        true
    }

    fn now(&self) -> Timestamp {
        self.endpoint.clock.now()
    }
}

/// The streams of a session, from the session's side.
pub struct Streams {
    /// Stdin chunks; the channel closes at EOF. `None` when the exec has no stdin.
    pub stdin: Option<mpsc::UnboundedReceiver<Bytes>>,
    /// Output as `(channel, bytes)`.
    pub out: mpsc::Sender<(u8, Bytes)>,
    pub tty: bool,
}

impl Streams {
    async fn write(&self, channel: u8, text: &str) {
        if text.is_empty() {
            return;
        }
        let (channel, text) = if self.tty {
            // A terminal has one output stream, and its line discipline turns LF into CR LF.
            (STDOUT, text.replace('\n', "\r\n"))
        } else {
            (channel, text.to_string())
        };
        let _ = self.out.send((channel, Bytes::from(text))).await;
    }

    async fn read(&mut self) -> Option<Bytes> {
        match &mut self.stdin {
            Some(rx) => rx.recv().await,
            None => None,
        }
    }
}

fn is_shell(argv: &[String]) -> bool {
    argv.first().is_some_and(|b| {
        matches!(
            b.rsplit('/').next().unwrap_or(b),
            "sh" | "bash" | "ash" | "dash"
        )
    }) && !argv.iter().any(|a| a == "-c")
}

/// Runs `argv` in the container; returns its exit code.
pub async fn run(mut target: ExecTarget, argv: Vec<String>, mut io: Streams) -> i32 {
    let clock = target.endpoint.clock.clone();
    if argv.is_empty() {
        return attach(&target, &mut io).await;
    }
    if is_shell(&argv) {
        return interactive(&mut target, &mut io).await;
    }
    if argv.len() == 1 && argv[0] == "cat" {
        // `cat` copies its stdin.
        while let Some(chunk) = io.read().await {
            let _ = io.out.send((STDOUT, chunk)).await;
        }
        return 0;
    }
    let probe = target.clone();
    if let [sh, c, script, ..] = argv.as_slice()
        && c == "-c"
        && matches!(
            sh.rsplit('/').next().unwrap_or(sh),
            "sh" | "bash" | "ash" | "dash"
        )
    {
        // A script's output arrives statement by statement, as its sleeps pass.
        let mut shell = Shell::new(&mut target);
        for (op, words) in crate::shell::statements(script) {
            let Some(o) = shell.run_statement(&op, &words) else {
                continue;
            };
            io.write(STDOUT, &o.stdout).await;
            io.write(STDERR, &o.stderr).await;
            if !o.sleep.is_zero() && !sleep_while_running(&probe, &clock, o.sleep).await {
                return EXIT_SIGKILL;
            }
            if !probe.running() {
                return EXIT_SIGKILL;
            }
            if o.exit {
                return o.status;
            }
        }
        return shell.status;
    }
    let out = {
        let mut shell = Shell::new(&mut target);
        shell.run(&argv)
    };
    io.write(STDOUT, &out.stdout).await;
    io.write(STDERR, &out.stderr).await;
    if !out.sleep.is_zero() && !sleep_while_running(&probe, &clock, out.sleep).await {
        return EXIT_SIGKILL;
    }
    if !probe.running() {
        return EXIT_SIGKILL;
    }
    out.status
}

/// `attach`: the container's output from now on, until it ends (its exit code is not the
/// attach's: the attach itself succeeded). Stdin is read and dropped (no simulated program reads
/// it).
async fn attach(target: &ExecTarget, io: &mut Streams) -> i32 {
    let clock = target.endpoint.clock.clone();
    let spec = target.pod.spec.clone().unwrap_or_default();
    let Some(c) = spec.containers.iter().find(|c| c.name == target.container) else {
        return 0;
    };
    let started = {
        let m = target.machine();
        let m = lock(&m);
        m.pods
            .get(&target.uid)
            .and_then(|p| p.containers.get(&target.container))
            .and_then(|rc| match &rc.state {
                crate::runtime::RtState::Running { started_at, .. } => Some(*started_at),
                _ => None,
            })
    };
    let Some(started) = started else {
        return 0;
    };
    let script = crate::logs::LogScript::from_container(
        c.command.as_deref().unwrap_or_default(),
        c.args.as_deref().unwrap_or_default(),
        c.image.as_deref().unwrap_or_default(),
    );
    let mut lines = script.lines(started);
    let now = clock.now();
    let mut next = lines.by_ref().find(|(at, _)| *at > now);
    let mut stdin_open = io.stdin.is_some();
    loop {
        if !target.running() {
            return 0;
        }
        let now = clock.now();
        if let Some((at, line)) = &next
            && *at <= now
        {
            io.write(STDOUT, &format!("{line}\n")).await;
            next = lines.next();
            continue;
        }
        let poll = klab_api::clock::saturating_add(now, std::time::Duration::from_secs(1));
        let wake = next.as_ref().map_or(poll, |(at, _)| (*at).min(poll));
        tokio::select! {
            biased;
            chunk = io.read(), if stdin_open => {
                if chunk.is_none() {
                    stdin_open = false;
                }
            }
            _ = clock.sleep_until(wake) => {}
        }
    }
}

/// Sleeps in cluster time; false if the container stopped meanwhile (the process was killed).
async fn sleep_while_running(
    target: &ExecTarget,
    clock: &klab_api::Clock,
    d: std::time::Duration,
) -> bool {
    let end = klab_api::clock::saturating_add(clock.now(), d);
    loop {
        if !target.running() {
            return false;
        }
        let now = clock.now();
        if now >= end {
            return true;
        }
        let step = klab_api::clock::saturating_add(now, std::time::Duration::from_secs(1));
        clock.sleep_until(step.min(end)).await;
    }
}

/// A shell reading commands from stdin; with a terminal it prompts and echoes as a pty does.
async fn interactive(target: &mut ExecTarget, io: &mut Streams) -> i32 {
    let clock = target.endpoint.clock.clone();
    let probe = target.clone();
    let mut status = 0;
    let mut line: Vec<u8> = Vec::new();
    let prompt = "/ # ";
    if io.tty {
        io.write(STDOUT, prompt).await;
    }
    loop {
        let Some(chunk) = io.read().await else {
            // EOF: a script read from stdin ends with its last line.
            if !line.is_empty() {
                let text = String::from_utf8_lossy(&line).into_owned();
                let mut shell = Shell::new(target);
                shell.status = status;
                let o = shell.run_line(&text);
                io.write(STDOUT, &o.stdout).await;
                io.write(STDERR, &o.stderr).await;
                status = o.status;
            }
            return status;
        };
        for &b in chunk.iter() {
            match b {
                b'\r' | b'\n' => {
                    if io.tty {
                        io.write(STDOUT, "\n").await;
                    }
                    let text = String::from_utf8_lossy(&line).into_owned();
                    line.clear();
                    // A blank line (or the `\n` of `\r\n`) runs nothing and keeps `$?`.
                    if text.trim().is_empty() {
                        if io.tty {
                            io.write(STDOUT, prompt).await;
                        }
                        continue;
                    }
                    let o = {
                        let mut shell = Shell::new(target);
                        shell.status = status;
                        shell.run_line(&text)
                    };
                    io.write(STDOUT, &o.stdout).await;
                    io.write(STDERR, &o.stderr).await;
                    status = o.status;
                    if !o.sleep.is_zero() && !sleep_while_running(&probe, &clock, o.sleep).await {
                        return EXIT_SIGKILL;
                    }
                    if o.exit {
                        return status;
                    }
                    if !probe.running() {
                        return EXIT_SIGKILL;
                    }
                    if io.tty {
                        io.write(STDOUT, prompt).await;
                    }
                }
                // Ctrl-D on an empty line ends a terminal session.
                0x04 if io.tty && line.is_empty() => {
                    io.write(STDOUT, "\n").await;
                    return status;
                }
                0x03 if io.tty => {
                    line.clear();
                    io.write(STDOUT, "^C\n").await;
                    io.write(STDOUT, prompt).await;
                }
                0x7f | 0x08 if io.tty => {
                    if line.pop().is_some() {
                        io.write(STDOUT, "\x08 \x08").await;
                    }
                }
                // A terminal's line buffer is bounded (4096 bytes in canonical mode): input
                // past it is dropped, so a client streaming bytes without a newline cannot
                // grow the session's memory.
                _ if line.len() >= MAX_LINE => {}
                _ => {
                    line.push(b);
                    if io.tty {
                        let _ = io.out.send((STDOUT, Bytes::copy_from_slice(&[b]))).await;
                    }
                }
            }
        }
    }
}

/// The error-channel Status for an exit code (remotecommand v4+).
pub fn exit_status(code: i32, argv: &[String]) -> String {
    if code == 0 {
        return r#"{"metadata":{},"status":"Success"}"#.to_string();
    }
    serde_json::json!({
        "metadata": {},
        "status": "Failure",
        "message": format!(
            "command terminated with non-zero exit code: error executing command [{}], exit code {code}",
            argv.join(" ")
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]}
    })
    .to_string()
}

/// Serves a session over an upgraded WebSocket: binary messages whose first byte is the channel.
pub async fn websocket_session(
    ws: axum::extract::ws::WebSocket,
    v5: bool,
    target: ExecTarget,
    opts: ExecOptions,
    cut: impl std::future::Future<Output = ()>,
) {
    use axum::extract::ws::Message;
    let _open = crate::server::StreamGuard::new(&target.endpoint.open_streams);
    let (mut sink, mut stream) = ws.split();
    let (stdin_tx, stdin_rx) = mpsc::unbounded_channel();
    let (out_tx, mut out_rx) = mpsc::channel::<(u8, Bytes)>(16);
    let argv = opts.command.clone();
    let streams = Streams {
        stdin: opts.stdin.then_some(stdin_rx),
        out: out_tx,
        tty: opts.tty,
    };
    let session = run(target, argv.clone(), streams);
    tokio::pin!(session);
    tokio::pin!(cut);
    let mut stdin_tx = Some(stdin_tx);
    let frame = |ch: u8, data: &[u8]| {
        let mut v = Vec::with_capacity(data.len() + 1);
        v.push(ch);
        v.extend_from_slice(data);
        Message::Binary(Bytes::from(v))
    };
    let code = loop {
        tokio::select! {
            biased;
            _ = &mut cut => return,
            Some((ch, data)) = out_rx.recv() => {
                if sink.send(frame(ch, &data)).await.is_err() {
                    return;
                }
            }
            code = &mut session => break code,
            msg = stream.next() => match msg {
                Some(Ok(Message::Binary(b))) => match b.first() {
                    Some(&STDIN) => {
                        if let Some(tx) = &stdin_tx {
                            let _ = tx.send(b.slice(1..));
                        }
                    }
                    Some(&CLOSE) if v5 && b.get(1) == Some(&STDIN) => stdin_tx = None,
                    _ => {}
                },
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
        }
    };
    while let Some((ch, data)) = out_rx.recv().await {
        if sink.send(frame(ch, &data)).await.is_err() {
            return;
        }
    }
    let _ = sink
        .send(frame(ERROR, exit_status(code, &argv).as_bytes()))
        .await;
    // A normal closure (1000): kubectl reads it as the end of every stream; a close frame
    // without a code (1005) is an error to it.
    let _ = sink
        .send(Message::Close(Some(axum::extract::ws::CloseFrame {
            code: axum::extract::ws::close_code::NORMAL,
            reason: "".into(),
        })))
        .await;
}
