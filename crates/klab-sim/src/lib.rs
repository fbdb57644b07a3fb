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
pub mod kubectl;
pub mod manifest;
pub mod runner;
pub mod scenario;
pub mod summary;
pub mod swarm;
pub mod trace;

#[cfg(test)]
mod scenario_tests;

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
    let outcome = match runner::run_blocking(
        &sc,
        &RunOptions {
            seed,
            until,
            ..RunOptions::default()
        },
    ) {
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
