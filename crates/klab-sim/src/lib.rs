//! klab sim: scenario files, the virtual-time runner, traces and expectations.
//!
//! A run is a pure function of (binary, scenario, seed):
//! - [`scenario`] parses and validates the YAML before anything starts (errors name the line);
//! - [`runner`] starts `klab_cluster::Cluster` on a `MemoryStore`, a virtual `Clock` and a seeded
//!   `DetRng` on a paused current-thread runtime, watches nodes, pods, Events and workloads through
//!   the admin client (no private hooks), applies the manifests and the fault plan, and records
//!   each observation with its virtual time and store revision;
//! - [`trace`], [`expect`] and [`summary`] are pure replays of those records: trace lines ordered
//!   by revision, expectations checked "as of" their virtual time, and the per-workload summary.
//!
//! Golden traces of the shipped scenarios (`scenarios/<area>/<behaviour>.yaml` + `.trace`) are
//! compared by `tests/scenarios.rs`; `KLAB_UPDATE_GOLDEN=1` rewrites them.

pub mod drain;
pub mod expect;
pub mod jsonpath;
pub mod kubectl;
pub mod manifest;
pub mod project;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod summary;
pub mod swarm;
pub mod trace;

#[cfg(test)]
mod scenario_tests;

#[cfg(test)]
mod control_plane_tests;
#[cfg(test)]
mod progress_tests {
    use super::*;

    #[test]
    fn progress_frames() {
        let run = Duration::from_secs(480);
        assert_eq!(
            progress_line(0, run, 0),
            "[------------------------------] 0.0s / 480.0s  0 events/s"
        );
        assert_eq!(
            progress_line(240_000, run, 5210),
            "[###############---------------] 240.0s / 480.0s  5210 events/s"
        );
        // Past the end (a run stopping late) and a zero-length run stay within the bar.
        assert_eq!(
            progress_line(u64::MAX, run, 1),
            "[##############################] 480.0s / 480.0s  1 events/s"
        );
        assert!(
            progress_line(5, Duration::ZERO, 0).starts_with("[##############################]")
        );
    }

    /// With the bar on, the run and everything it prints are the same (the bar only reads).
    #[test]
    fn the_progress_bar_does_not_change_the_run() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/actions.yaml");
        let run = |progress| {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let extras = CliExtras {
                report: None,
                progress,
            };
            let code = cli_with(&path, None, Format::Text, None, &extras, &mut out, &mut err);
            (code, String::from_utf8(out).unwrap())
        };
        let (with_bar, without) = (run(true), run(false));
        assert_eq!(with_bar.0, 0);
        assert_eq!(with_bar, without);
    }
}
#[cfg(test)]
mod why_tests;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

pub use runner::{RunOptions, RunOutcome, SimError, StartHook, run, run_blocking};
pub use scenario::{Scenario, ScenarioError, load, parse};

/// Output format of the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Text,
    Json,
}

/// `klab sim FILE [--seed N] [--format text|json] [--until T]`: runs the scenario, prints the
/// trace and the summary to `out`, problems to `err`. Returns the process exit code: 0 when every
/// expectation held, 1 when one failed, 2 when the scenario could not be run.
pub fn cli(
    path: &Path,
    seed: Option<u64>,
    format: Format,
    until: Option<&str>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    cli_with(path, seed, format, until, &CliExtras::default(), out, err)
}

/// The optional outputs of `klab sim`.
#[derive(Debug, Clone, Default)]
pub struct CliExtras {
    /// `--report FILE.html`: the HTML timeline of the run.
    pub report: Option<std::path::PathBuf>,
    /// Draw a progress bar on stderr (the caller decides: a terminal, and no `--quiet`).
    pub progress: bool,
}

/// One frame of the progress bar: `[#####-----] 123.4s / 480.0s  5210 events/s`.
pub fn progress_line(virtual_ms: u64, run_for: Duration, events_per_s: u64) -> String {
    const WIDTH: u64 = 30;
    let total = u64::try_from(run_for.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let done = virtual_ms.min(total);
    let filled = done.saturating_mul(WIDTH) / total;
    format!(
        "[{}{}] {:.1}s / {:.1}s  {events_per_s} events/s",
        "#".repeat(usize::try_from(filled).unwrap_or(0)),
        "-".repeat(usize::try_from(WIDTH.saturating_sub(filled)).unwrap_or(0)),
        done as f64 / 1000.0,
        total as f64 / 1000.0
    )
}

/// Redraws the progress bar on stderr every 250 ms of wall time until `stop` is set, then
/// clears it. Events per second are counted over each 250 ms sleep: no clock is read.
fn spawn_progress(
    p: std::sync::Arc<runner::Progress>,
    run_for: Duration,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    use std::sync::atomic::Ordering::Relaxed;
    std::thread::spawn(move || {
        let mut last = 0u64;
        while !stop.load(Relaxed) {
            std::thread::sleep(Duration::from_millis(250));
            let n = p.records.load(Relaxed);
            let rate = n.saturating_sub(last).saturating_mul(4);
            last = n;
            let line = progress_line(p.virtual_ms.load(Relaxed), run_for, rate);
            let _ = write!(std::io::stderr(), "\r{line}\x1b[K");
        }
        let _ = write!(std::io::stderr(), "\r\x1b[K");
    })
}

/// [`cli`] with the optional outputs.
pub fn cli_with(
    path: &Path,
    seed: Option<u64>,
    format: Format,
    until: Option<&str>,
    extras: &CliExtras,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let until: Option<Duration> = match until.map(klab_api::parse_duration).transpose() {
        Ok(u) => u,
        Err(e) => {
            let _ = writeln!(err, "error: --until: {e}");
            return 2;
        }
    };
    let sc = match scenario::load(path) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return 2;
        }
    };
    let progress = extras
        .progress
        .then(|| std::sync::Arc::new(runner::Progress::default()));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let bar = progress.clone().map(|p| {
        let run_for = until.map_or(sc.run_for, |u| u.min(sc.run_for));
        spawn_progress(p, run_for, stop.clone())
    });
    let result = runner::run_blocking(
        &sc,
        &RunOptions {
            seed,
            until,
            progress,
            ..RunOptions::default()
        },
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(b) = bar {
        let _ = b.join();
    }
    let outcome = match result {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            let _ = writeln!(
                err,
                "replay: {}",
                replay_command(&sc, seed.unwrap_or(sc.seed))
            );
            return 2;
        }
    };
    let _ = match format {
        Format::Text => out.write_all(trace::format_text(&outcome.lines).as_bytes()),
        Format::Json => out.write_all(trace::format_json(&outcome.lines).as_bytes()),
    };
    // In JSON mode stdout stays pure JSON lines; the human summary goes to stderr.
    let human: &mut dyn Write = if format == Format::Json { err } else { out };
    let _ = writeln!(human);
    let _ = human.write_all(outcome.summary.as_bytes());
    if let Some(file) = &extras.report
        && let Err(e) = std::fs::write(file, report::html(&sc, &outcome))
    {
        let _ = writeln!(err, "error: --report {}: {e}", file.display());
        return 2;
    }
    let v = &outcome.verdict;
    let _ = writeln!(
        human,
        "expectations: {} passed, {} failed, {} skipped (seed {}, trace hash {:016x})",
        v.passed,
        v.failures.len(),
        v.skipped,
        outcome.seed,
        outcome.trace_hash()
    );
    if v.failures.is_empty() {
        return 0;
    }
    let _ = writeln!(err, "{}", failure_report(&sc, &outcome));
    1
}

/// The command that replays a run exactly.
pub fn replay_command(sc: &Scenario, seed: u64) -> String {
    format!("klab sim {} --seed {seed}", sc.path.display())
}

/// Failed expectations: each with its line, what was found, the time, the seed and the replay.
pub fn failure_report(sc: &Scenario, o: &RunOutcome) -> String {
    let mut s = String::new();
    for f in &o.verdict.failures {
        s.push_str(&format!(
            "FAILED {}:{}: `{}` at {} (seed {}): {}\n",
            sc.path.display(),
            f.line,
            f.text,
            klab_api::clock::format_elapsed(f.at),
            o.seed,
            f.detail
        ));
    }
    s.push_str(&format!("replay: {}", replay_command(sc, o.seed)));
    s
}
