//! Grace-period accounting of pod termination: the pod worker's effective grace
//! (`calculateEffectiveGracePeriod`) and the per-container kill budget of `killContainer`
//! (preStop inside the budget, whole seconds deducted, 2 s SIGTERM→SIGKILL floor).

use std::time::Duration;

use crate::config::MINIMUM_GRACE_PERIOD_SECONDS;

/// The pod worker's grace (seconds, ≥ 1). `stored` is the value already in force (0 = none yet);
/// it only ever decreases.
pub fn effective_grace(
    stored: i64,
    deletion_grace: Option<i64>,
    kill_override: Option<i64>,
    tgps: Option<i64>,
) -> i64 {
    let mut g = stored.max(0);
    let mut taken = false;
    if let Some(d) = deletion_grace
        && (g == 0 || d < g)
    {
        g = d.max(0);
        taken = true;
    }
    if let Some(o) = kill_override
        && (g == 0 || o < g)
    {
        g = o.max(0);
        taken = true;
    }
    if !taken && g == 0 {
        g = tgps
            .unwrap_or(klab_api::names::DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS)
            .max(0);
    }
    g.max(1)
}

/// How long a preStop hook takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HookTime {
    /// Finishes after this long.
    After(Duration),
    /// Never finishes (abandoned at the end of the budget).
    Never,
}

/// When, relative to the start of `killContainer`, SIGTERM and SIGKILL happen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KillPlan {
    /// Time spent waiting for the preStop hook (= when SIGTERM is sent).
    pub sigterm_after: Duration,
    /// When SIGKILL is due.
    pub kill_after: Duration,
    /// The hook was cut off by the budget ("PreStop hook not completed in grace period").
    pub hook_abandoned: bool,
}

/// `killContainer` with budget `grace` seconds (the pod worker's grace, passed as override).
pub fn kill_plan(grace: i64, prestop: Option<HookTime>) -> KillPlan {
    let mut g = grace;
    let mut waited = Duration::ZERO;
    let mut abandoned = false;
    if let Some(hook) = prestop
        && g > 0
    {
        let budget = Duration::from_secs(g as u64);
        waited = match hook {
            HookTime::After(d) if d <= budget => d,
            _ => {
                abandoned = true;
                budget
            }
        };
        // Whole seconds elapsed are deducted (truncated).
        g -= waited.as_secs() as i64;
    }
    let g = g.max(MINIMUM_GRACE_PERIOD_SECONDS);
    KillPlan {
        sigterm_after: waited,
        kill_after: waited + Duration::from_secs(g as u64),
        hook_abandoned: abandoned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_grace_table() {
        // (stored, deletionGracePeriodSeconds, override, TGPS) → grace
        let cases = [
            (0, Some(30), None, Some(30), 30),   // normal delete
            (0, Some(0), None, Some(30), 1),     // grace 0 → 1 (N-41)
            (0, Some(1), None, Some(30), 1),     // --grace-period=1
            (0, None, Some(1), Some(30), 1),     // eviction override 1
            (0, None, None, None, 30),           // no TGPS → default 30
            (0, None, None, Some(45), 45),       // terminal phase, TGPS
            (60, Some(10), None, Some(60), 10),  // shortened (N-43)
            (10, Some(120), None, Some(60), 10), // longer: no change
            (30, None, Some(5), Some(30), 5),
        ];
        for (stored, del, ov, tgps, want) in cases {
            assert_eq!(
                effective_grace(stored, del, ov, tgps),
                want,
                "{stored} {del:?} {ov:?} {tgps:?}"
            );
        }
    }

    #[test]
    fn kill_plan_table() {
        let s = Duration::from_secs;
        // (grace, preStop) → (SIGTERM at, SIGKILL at, abandoned)
        let cases = [
            (30, None, s(0), s(30), false),                         // N-37
            (1, None, s(0), s(2), false),                           // N-41 floor
            (30, Some(HookTime::After(s(40))), s(30), s(32), true), // N-40
            (30, Some(HookTime::Never), s(30), s(32), true),        // hanging http hook
            (30, Some(HookTime::After(s(5))), s(5), s(30), false),  // shared budget
            (
                30,
                Some(HookTime::After(Duration::from_millis(5500))),
                Duration::from_millis(5500),
                Duration::from_millis(5500 + 25_000),
                false,
            ),
            (2, Some(HookTime::After(s(1))), s(1), s(3), false),
        ];
        for (g, hook, term, kill, abandoned) in cases {
            let p = kill_plan(g, hook);
            assert_eq!(
                p,
                KillPlan {
                    sigterm_after: term,
                    kill_after: kill,
                    hook_abandoned: abandoned
                },
                "{g} {hook:?}"
            );
        }
    }
}
