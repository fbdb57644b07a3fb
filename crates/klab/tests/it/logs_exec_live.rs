//! `kubectl logs`, `exec`, `attach` and `port-forward` against a live `klab up --speed 10`,
//! with kubectl 1.27 (SPDY only), 1.30 and 1.33 (WebSocket, SPDY fallback), and the seed-000
//! table: with the kubelet stopped both verbs are refused at once; with the node powered off
//! both time out after the API server's dial timeout (30 s of cluster time, 3 s here); once the
//! node is back both work again.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::harness::{Klab, kubectl_binary};

const PODS: &str = "apiVersion: v1
kind: Pod
metadata:
  name: tick
spec:
  nodeName: klab-worker
  containers:
  - name: c
    image: busybox:1.36
    command: [\"sh\", \"-c\", \"while true; do echo tick; sleep 10; done\"]
---
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  nodeName: klab-worker2
  containers:
  - name: nginx
    image: nginx:1.27
---
apiVersion: v1
kind: Pod
metadata:
  name: done
spec:
  nodeName: klab-worker2
  restartPolicy: Never
  containers:
  - name: c
    image: busybox:1.36
    command: [\"sh\", \"-c\", \"echo bye\"]
";

fn out(o: &std::process::Output) -> (bool, String, String) {
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn phase(k: &Klab, pod: &str) -> String {
    k.ok(33, &["get", "pod", pod, "-o", "jsonpath={.status.phase}"])
}

/// Runs a kubectl that streams (logs -f, attach, port-forward) until `enough` lines of stdout
/// arrived, then kills it; returns those lines.
fn stream_lines(k: &Klab, minor: u32, args: &[&str], enough: usize) -> Vec<String> {
    let mut child = Command::new(kubectl_binary(minor))
        .arg("--kubeconfig")
        .arg(&k.kubeconfig)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kubectl");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = Vec::new();
    for l in BufReader::new(stdout).lines() {
        let Ok(l) = l else { break };
        lines.push(l);
        if lines.len() >= enough {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

/// `kubectl port-forward pod/web :80`, then one HTTP request through the forwarded port with a
/// plain TCP client.
fn port_forward_get(k: &Klab, minor: u32) -> String {
    let mut child = Command::new(kubectl_binary(minor))
        .arg("--kubeconfig")
        .arg(&k.kubeconfig)
        .args(["port-forward", "pod/web", ":80"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kubectl");
    let stdout = child.stdout.take().expect("stdout");
    let mut reader = BufReader::new(stdout);
    let mut first = String::new();
    reader.read_line(&mut first).expect("port-forward output");
    // Keep reading: kubectl writes a line per connection and dies on a closed pipe.
    std::thread::spawn(move || for _ in reader.lines() {});
    // `Forwarding from 127.0.0.1:PORT -> 80`
    let port = first
        .split_whitespace()
        .nth(2)
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("unexpected port-forward output {first:?}"));
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    conn.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    let _ = conn.read_to_string(&mut resp);
    let _ = child.kill();
    let _ = child.wait();
    resp
}

/// `kubectl exec -it` under a pseudo terminal (`script`), typing `hostname` and `exit 5`.
fn exec_tty(k: &Klab, minor: u32) -> (Option<i32>, String) {
    let cmd = format!(
        "{} --kubeconfig {} exec -it tick -- sh",
        kubectl_binary(minor).display(),
        k.kubeconfig.display()
    );
    let mut child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn script");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        let _ = stdin.write_all(b"hostname\r");
        std::thread::sleep(Duration::from_secs(1));
        let _ = stdin.write_all(b"exit 5\r");
        std::thread::sleep(Duration::from_secs(5));
    });
    let o = child.wait_with_output().expect("script");
    let _ = writer.join();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

// The seed-000 table is about how long a real kubectl waits: wall time of a real process.
#[allow(clippy::disallowed_methods)]
#[test]
fn logs_exec_attach_port_forward_and_the_seed_000_table() {
    let k = Klab::start(&["--speed", "10"]);
    let (ok, _, err) = out(&k.kubectl_stdin(33, &["create", "-f", "-"], Some(PODS)));
    assert!(ok, "{err}");
    let bound = Duration::from_secs(60);
    k.wait_for("pods running", bound, || {
        (phase(&k, "tick") == "Running"
            && phase(&k, "web") == "Running"
            && phase(&k, "done") == "Succeeded")
            .then_some(())
    });
    // A few lines of log first (one every 10 s of cluster time, 1 s here).
    k.wait_for("three lines of log", bound, || {
        (k.ok(33, &["logs", "tick"]).lines().count() >= 3).then_some(())
    });
    for minor in [27, 30, 33] {
        let kc = |args: &[&str]| out(&k.kubectl(minor, args));
        // logs: content, tail, timestamps, since, previous, follow.
        let (ok, logs, err) = kc(&["logs", "tick", "--tail=2", "--timestamps"]);
        assert!(ok, "1.{minor}: {err}");
        let lines: Vec<&str> = logs.lines().collect();
        assert_eq!(lines.len(), 2, "1.{minor}: {logs}");
        assert!(lines.iter().all(|l| l.ends_with("Z tick")), "{logs}");
        let (ok, logs, _) = kc(&["logs", "tick", "--since=1h"]);
        assert!(ok && logs.lines().all(|l| l == "tick") && !logs.is_empty());
        assert_eq!(kc(&["logs", "done"]).1, "bye\n");
        assert_eq!(
            kc(&["logs", "tick", "--previous"]).2.trim(),
            "Error from server (BadRequest): previous terminated container \"c\" in pod \"tick\" not found"
        );
        // kubectl checks the name itself (`error: …`), the API server would say the same.
        assert!(
            kc(&["logs", "tick", "-c", "nope"])
                .2
                .contains("container nope is not valid for pod tick")
        );
        let followed = stream_lines(&k, minor, &["logs", "-f", "tick", "--tail=1"], 3);
        assert_eq!(followed, vec!["tick", "tick", "tick"], "1.{minor}");
        // exec: output, exit codes, stdin.
        assert_eq!(kc(&["exec", "tick", "--", "hostname"]).1, "tick\n");
        let o = k.kubectl(
            minor,
            &["exec", "tick", "--", "sh", "-c", "echo out; exit 3"],
        );
        assert_eq!(o.status.code(), Some(3), "1.{minor}");
        assert_eq!(String::from_utf8_lossy(&o.stdout), "out\n");
        assert!(String::from_utf8_lossy(&o.stderr).contains("command terminated with exit code 3"));
        let o = k.kubectl(minor, &["exec", "tick", "--", "frobnicate"]);
        assert_eq!(
            o.status.code(),
            Some(127),
            "1.{minor}: stdout {:?}, stderr {:?}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(String::from_utf8_lossy(&o.stderr).contains("sh: frobnicate: not found"));
        let o = k.kubectl_stdin(
            minor,
            &["exec", "-i", "tick", "--", "sh"],
            Some("echo written > /tmp/f\ncat /tmp/f /etc/hostname\n"),
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "written\ntick\n",
            "1.{minor}"
        );
        let (code, screen) = exec_tty(&k, minor);
        assert_eq!(code, Some(5), "1.{minor}: {screen:?}");
        // kubectl's WebSocket client before 1.34 can drop what the shell prints first (its
        // prompt) when it arrives before the client has made its streams, and says so
        // (kubernetes/kubernetes#131189, fixed by #131203). Everything after it arrives.
        let dropped_prompt = screen.contains("Unknown stream id 1, discarding message");
        assert!(
            screen.contains("/ # hostname\r\ntick\r\n/ # exit 5")
                || (dropped_prompt && screen.contains("hostname\r\ntick\r\n/ # exit 5")),
            "1.{minor}: {screen:?}"
        );
        assert!(
            kc(&["exec", "done", "--", "ls"])
                .2
                .contains("cannot exec into a container in a completed pod")
        );
        // attach and port-forward.
        assert_eq!(
            stream_lines(&k, minor, &["attach", "tick"], 2),
            vec!["tick", "tick"]
        );
        let resp = port_forward_get(&k, minor);
        assert!(
            resp.starts_with("HTTP/1.1 200 OK\r\n"),
            "1.{minor}: {resp:?}"
        );
        assert!(resp.contains("<title>Welcome to nginx!</title>"), "{resp}");
    }
    // Bad options straight at the API: upstream's validation errors.
    let raw = |q: &str| {
        out(&k.kubectl(
            33,
            &[
                "get",
                "--raw",
                &format!("/api/v1/namespaces/default/pods/tick/log?{q}"),
            ],
        ))
        .2
    };
    assert!(
        raw("tailLines=-1")
            .contains("tailLines: Invalid value: -1: must be greater than or equal to 0")
    );
    assert!(
        raw("sinceSeconds=0").contains("sinceSeconds: Invalid value: 0: must be greater than 0")
    );

    // The seed-000 table.
    let logs_url = "https://10.0.0.10:10250/containerLogs/default/tick/c";
    let refused = "dial tcp 10.0.0.10:10250: connect: connection refused";
    let timeout = "dial tcp 10.0.0.10:10250: i/o timeout";
    k.klab(&["node", "stop-kubelet", "klab-worker"]);
    for minor in [27, 30, 33] {
        let start = std::time::Instant::now();
        let (_, _, err) = out(&k.kubectl(minor, &["exec", "tick", "--", "ls"]));
        assert_eq!(
            err.trim(),
            format!("Error from server: error dialing backend: {refused}")
        );
        let (_, _, err) = out(&k.kubectl(minor, &["logs", "tick"]));
        assert_eq!(
            err.trim(),
            format!("Error from server: Get \"{logs_url}\": {refused}")
        );
        assert!(start.elapsed() < Duration::from_secs(3), "refused at once");
    }
    k.klab(&["node", "start-kubelet", "klab-worker"]);
    k.wait_for("exec works again", bound, || {
        k.kubectl(33, &["exec", "tick", "--", "true"])
            .status
            .success()
            .then_some(())
    });
    k.klab(&["node", "power-off", "klab-worker"]);
    for minor in [27, 33] {
        let start = std::time::Instant::now();
        let (_, _, err) = out(&k.kubectl(minor, &["exec", "tick", "--", "ls"]));
        assert_eq!(
            err.trim(),
            format!("Error from server: error dialing backend: {timeout}")
        );
        let (_, _, err) = out(&k.kubectl(minor, &["logs", "tick"]));
        assert_eq!(
            err.trim(),
            format!("Error from server: Get \"{logs_url}\": {timeout}")
        );
        // 30 s of cluster time at --speed 10, for each of the two requests.
        assert!(
            start.elapsed() >= Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }
    k.klab(&["node", "power-on", "klab-worker"]);
    k.wait_for("both verbs work again", bound, || {
        let exec = k.kubectl(33, &["exec", "tick", "--", "hostname"]);
        let logs = k.kubectl(33, &["logs", "tick"]);
        (exec.status.success() && logs.status.success()).then_some(())
    });
}
