//! Starting a real `klab up` on a free port with a temporary data directory, and running the real
//! kubectl binaries against it. Waits are for conditions, with bounds; never fixed sleeps.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A running `klab up` child process, killed on drop.
pub struct Klab {
    child: Child,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
}

impl Klab {
    /// Starts `klab up` with extra arguments and waits until it serves.
    pub fn start(extra: &[&str]) -> Klab {
        let dir = tempfile::tempdir().expect("tempdir");
        Self::start_in(dir, extra)
    }

    /// Starts `klab up` on an existing data directory (restarts).
    pub fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Klab {
        let data = dir.path().join("data");
        let mut child = Command::new(env!("CARGO_BIN_EXE_klab"))
            .arg("up")
            .arg("--data-dir")
            .arg(&data)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn klab");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = lines
            .next()
            .expect("klab printed nothing")
            .expect("read stdout");
        assert!(
            first
                .rsplit(' ')
                .next()
                .is_some_and(|s| s.starts_with("https://")),
            "unexpected first line: {first}"
        );
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let kubeconfig = data.join("kubeconfig");
        Klab {
            child,
            dir,
            kubeconfig,
        }
    }

    /// Stops the process and hands back its data directory.
    pub fn stop(mut self) -> tempfile::TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let dir = tempfile::tempdir().expect("tempdir");
        std::mem::replace(&mut self.dir, dir)
    }

    /// Runs `kubectl.1.<minor>` with this cluster's kubeconfig and a private discovery cache.
    /// kubectl 1.33 with only a bearer token (no kubeconfig credentials, no client certificate).
    pub fn kubectl_with_token(&self, token: &str, args: &[&str]) -> Output {
        let server = self.ok(
            33,
            &[
                "config",
                "view",
                "-o",
                "jsonpath={.clusters[0].cluster.server}",
            ],
        );
        Command::new(kubectl_binary(33))
            .args([
                "--kubeconfig=/dev/null",
                "--server",
                &server,
                "--insecure-skip-tls-verify",
                "--token",
                token,
            ])
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache-token"))
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    pub fn kubectl(&self, minor: u32, args: &[&str]) -> Output {
        self.kubectl_stdin(minor, args, None)
    }

    pub fn kubectl_stdin(&self, minor: u32, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new(kubectl_binary(minor));
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join(format!("cache-{minor}")))
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn kubectl");
        if let Some(input) = stdin {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes())
                .expect("write stdin");
        }
        child.wait_with_output().expect("kubectl output")
    }

    /// Runs kubectl and returns stdout, failing the test with stderr when it fails.
    pub fn ok(&self, minor: u32, args: &[&str]) -> String {
        let out = self.kubectl(minor, args);
        assert!(
            out.status.success(),
            "kubectl 1.{minor} {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Fails the test if the authorizer refused any of the cluster's own components (the
    /// `klab_component_authorization_denials_total` series on `/metrics`).
    pub fn assert_no_component_denials(&self) {
        let metrics = self.ok(33, &["get", "--raw", "/metrics"]);
        assert!(
            metrics.contains("# TYPE klab_component_authorization_denials_total counter"),
            "the denial counter is served"
        );
        let refused: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with("klab_component_authorization_denials_total{"))
            .collect();
        assert!(refused.is_empty(), "components refused: {refused:#?}");
    }

    /// Runs the `klab` binary against this cluster (`klab node …`, `klab component …`) and returns
    /// its stdout, failing the test with stderr when it fails.
    pub fn klab(&self, args: &[&str]) -> String {
        let o = Command::new(env!("CARGO_BIN_EXE_klab"))
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .output()
            .expect("run klab");
        assert!(
            o.status.success(),
            "klab {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Runs the `klab` binary against this cluster expecting it to fail; returns its stderr.
    pub fn klab_fails(&self, args: &[&str]) -> String {
        let o = Command::new(env!("CARGO_BIN_EXE_klab"))
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .output()
            .expect("run klab");
        assert!(!o.status.success(), "klab {args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).into_owned()
    }

    /// Polls `check` until it returns Some, or fails after `bound`. End-to-end tests run a real
    /// process on the wall clock, so the bound is wall time.
    #[allow(clippy::disallowed_methods)]
    pub fn wait_for<T>(
        &self,
        what: &str,
        bound: Duration,
        mut check: impl FnMut() -> Option<T>,
    ) -> T {
        let start = Instant::now();
        loop {
            if let Some(v) = check() {
                return v;
            }
            assert!(
                start.elapsed() < bound,
                "timed out after {bound:?} waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Klab {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The real kubectl binary for a minor version: `kubectl.1.<minor>` beside the binary `kubectl`
/// on PATH resolves to.
pub fn kubectl_binary(minor: u32) -> PathBuf {
    let on_path = which("kubectl").expect("kubectl on PATH");
    let real = std::fs::canonicalize(&on_path).unwrap_or(on_path);
    let dir = real.parent().unwrap_or(Path::new("/"));
    let bin = dir.join(format!("kubectl.1.{minor}"));
    assert!(bin.exists(), "{} is missing", bin.display());
    bin
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// Normalises a kubectl table for comparison: AGE-like cells (`5s`, `2m3s`) become `AGE` and
/// runs of spaces one space, since column widths follow the ages' lengths.
pub fn mask_ages(s: &str) -> String {
    // `<invalid>` is how kubectl prints an age in the future: with `--speed` above 1 the
    // cluster's clock runs ahead of the machine's, and `kubectl describe` computes Event ages
    // against the machine's clock.
    let is_age = |t: &str| {
        t == "<invalid>"
            || !t.is_empty()
                && t.chars().all(|c| c.is_ascii_digit() || "smhdy".contains(c))
                && t.starts_with(|c: char| c.is_ascii_digit())
                && t.ends_with(|c: char| "smhdy".contains(c))
    };
    // `<invalid>` is the age kubectl computes on its own wall clock (describe's event ages) for
    // a timestamp more than a second ahead of it: with `--speed 30` cluster time runs ahead.
    s.lines()
        .map(|l| {
            l.split_whitespace()
                .map(|t| {
                    if is_age(t) || t == "<invalid>" {
                        "AGE"
                    } else {
                        t
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}
