//! CronJob decisions (pure), after upstream's cronjob controller v2: which scheduled time is due,
//! whether it is too late, already processed or blocked by the concurrency policy, the Job's
//! name, and which finished Jobs fall out of the history limits.

use jiff::{SignedDuration, Timestamp};

use klab_api::cron::Schedule;

/// A CronJob is synced again this long after its next scheduled time (upstream's
/// `nextScheduleDelta`), so that the time has surely passed.
pub const NEXT_SCHEDULE_DELTA: SignedDuration = SignedDuration::from_millis(100);
/// More missed start times than this are warned about (`TooManyMissedTimes`).
pub const TOO_MANY_MISSED: i64 = 100;
/// The annotation a created Job carries (`batch.kubernetes.io/cronjob-scheduled-timestamp`).
pub const SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// `mostRecentScheduleTime`: the latest scheduled time at or before `now` since `earliest`, and
/// about how many were missed. `Err` for a schedule whose activations are less than a second
/// apart (upstream's guard against impossible dates).
pub fn most_recent(
    sched: &Schedule,
    earliest: Timestamp,
    now: Timestamp,
) -> Result<(Option<Timestamp>, i64), String> {
    let Some(t1) = sched.next_after(earliest) else {
        return Ok((None, 0));
    };
    if now < t1 {
        return Ok((None, 0));
    }
    let Some(t2) = sched.next_after(t1) else {
        return Ok((Some(t1), 1));
    };
    if now < t2 {
        return Ok((Some(t1), 1));
    }
    let between = t2.duration_since(t1).as_secs();
    if between < 1 {
        return Err("time difference between two schedules is less than 1 second".into());
    }
    let elapsed = now.duration_since(t1).as_secs();
    let approx = elapsed.checked_div(between).unwrap_or(0).saturating_add(1);
    // Count the activations exactly; after a long outage, only the last thousand intervals are
    // walked (the count is then upstream's approximation, far above the warning threshold).
    const WALK: i64 = 1000;
    let walk = |from: Timestamp| {
        let mut latest = None;
        let mut count: i64 = 0;
        let mut t = from;
        while let Some(n) = sched.next_after(t) {
            if n > now {
                break;
            }
            latest = Some(n);
            count = count.saturating_add(1);
            t = n;
        }
        (latest, count)
    };
    let (most_recent, missed) = if approx > WALK {
        let from = klab_api::clock::saturating_add_secs(
            now,
            WALK.saturating_mul(between).saturating_neg(),
        )
        .max(earliest);
        match walk(from) {
            (Some(t), _) => (t, approx),
            (None, _) => match walk(earliest) {
                (Some(t), n) => (t, n),
                (None, _) => (t1, 1),
            },
        }
    } else {
        match walk(earliest) {
            (Some(t), n) => (t, n),
            (None, _) => (t1, 1),
        }
    };
    Ok((Some(most_recent), missed))
}

/// Where scheduling starts from: the last scheduled time, else the creation time; moved up to
/// `now − startingDeadlineSeconds` when that is later.
pub fn earliest(
    created: Timestamp,
    last_schedule: Option<Timestamp>,
    starting_deadline: Option<i64>,
    now: Timestamp,
) -> Timestamp {
    let base = last_schedule.unwrap_or(created);
    match starting_deadline {
        Some(d) => {
            let limit = klab_api::clock::saturating_add_secs(now, d.saturating_neg());
            base.max(limit)
        }
        None => base,
    }
}

/// When to look again: just after the next activation following the most recent one.
pub fn requeue_at(
    sched: &Schedule,
    created: Timestamp,
    last_schedule: Option<Timestamp>,
    now: Timestamp,
) -> Option<Timestamp> {
    let base = last_schedule.unwrap_or(created);
    let from = match most_recent(sched, base, now) {
        Ok((Some(t), _)) => t,
        _ => base,
    };
    let next = sched.next_after(from)?;
    next.checked_add(NEXT_SCHEDULE_DELTA).ok()
}

/// The scheduled-timestamp annotation's value: RFC 3339 in the CronJob's zone (`Z` in UTC,
/// else the zone's offset at that instant), as upstream formats `scheduledTime.In(location)`.
pub fn scheduled_timestamp(scheduled: Timestamp, time_zone: Option<&str>) -> String {
    let tz = time_zone
        .and_then(|n| klab_api::cron::load_location(n).ok())
        .unwrap_or(jiff::tz::TimeZone::UTC);
    let z = scheduled.to_zoned(tz);
    if z.offset().seconds() == 0 {
        z.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        z.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }
}

/// The Job for one scheduled time: `<cronjob>-<minutes since the epoch>`.
pub fn job_name(cronjob: &str, scheduled: Timestamp) -> String {
    format!("{cronjob}-{}", scheduled.as_second().div_euclid(60))
}

/// What a sync does about the schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Nothing due.
    Wait,
    /// A time was due but its window passed (`MissSchedule`).
    TooLate(Timestamp),
    /// The due time was already handled.
    AlreadyProcessed,
    /// Forbid, and a Job is still running (`JobAlreadyActive`).
    Forbidden,
    /// Start the Job of this time; with Replace, after deleting the active ones.
    Start { scheduled: Timestamp, replace: bool },
}

/// The inputs of a sync's schedule decision.
pub struct Inputs<'a> {
    pub name: &'a str,
    pub sched: &'a Schedule,
    pub created: Timestamp,
    pub last_schedule: Option<Timestamp>,
    pub starting_deadline: Option<i64>,
    pub concurrency: &'a str,
    /// Names of the Jobs in `status.active`.
    pub active: &'a [String],
    pub now: Timestamp,
}

/// `syncCronJob` after the active list is reconciled and suspension checked: the plan and the
/// number of missed times (for `TooManyMissedTimes`). `Err` is an invalid schedule.
pub fn plan(i: &Inputs<'_>) -> Result<(Plan, i64), String> {
    let from = earliest(i.created, i.last_schedule, i.starting_deadline, i.now);
    let (scheduled, missed) = most_recent(i.sched, from, i.now)?;
    let Some(scheduled) = scheduled else {
        return Ok((Plan::Wait, missed));
    };
    if let Some(d) = i.starting_deadline
        && klab_api::clock::saturating_add_secs(scheduled, d) < i.now
    {
        return Ok((Plan::TooLate(scheduled), missed));
    }
    let name = job_name(i.name, scheduled);
    if i.active.contains(&name) || i.last_schedule == Some(scheduled) {
        return Ok((Plan::AlreadyProcessed, missed));
    }
    if i.concurrency == "Forbid" && !i.active.is_empty() {
        return Ok((Plan::Forbidden, missed));
    }
    Ok((
        Plan::Start {
            scheduled,
            replace: i.concurrency == "Replace" && !i.active.is_empty(),
        },
        missed,
    ))
}

/// A finished Job for the history: name, start time (None sorts last, as upstream), succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub name: String,
    pub start: Option<Timestamp>,
    pub succeeded: bool,
}

/// `cleanupFinishedJobs`: the oldest succeeded and failed Jobs beyond their limits.
pub fn history_to_delete(
    jobs: &[Finished],
    succeeded_limit: i64,
    failed_limit: i64,
) -> Vec<String> {
    let mut out = Vec::new();
    for (succeeded, limit) in [(false, failed_limit), (true, succeeded_limit)] {
        let mut of_kind: Vec<&Finished> =
            jobs.iter().filter(|j| j.succeeded == succeeded).collect();
        // Oldest first; Jobs without a start time after those with one, then by name.
        of_kind.sort_by_key(|j| (j.start.is_none(), j.start, j.name.clone()));
        let limit = usize::try_from(limit.max(0)).unwrap_or(usize::MAX);
        let excess = of_kind.len().saturating_sub(limit);
        out.extend(of_kind.iter().take(excess).map(|j| j.name.clone()));
    }
    out
}

/// `Missed scheduled time to start a job: <RFC 1123 with numeric zone>` (Go's RFC1123Z, UTC).
pub fn miss_message(t: Timestamp) -> String {
    format!(
        "Missed scheduled time to start a job: {}",
        t.strftime("%a, %d %b %Y %H:%M:%S +0000")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn inputs<'a>(
        sched: &'a Schedule,
        last: Option<Timestamp>,
        deadline: Option<i64>,
        concurrency: &'a str,
        active: &'a [String],
        now: &str,
    ) -> Inputs<'a> {
        Inputs {
            name: "backup",
            sched,
            created: ts("2026-01-01T00:00:30Z"),
            last_schedule: last,
            starting_deadline: deadline,
            concurrency,
            active,
            now: ts(now),
        }
    }

    #[test]
    fn schedule_table() {
        let every5 = Schedule::parse("*/5 * * * *").unwrap();
        let none: Vec<String> = vec![];
        let running = vec![job_name("backup", ts("2026-01-01T00:05:00Z"))];
        let cases: Vec<(Inputs, Plan, i64)> = vec![
            // Before the first time: wait.
            (
                inputs(&every5, None, None, "Allow", &none, "2026-01-01T00:04:59Z"),
                Plan::Wait,
                0,
            ),
            // The first time is due.
            (
                inputs(&every5, None, None, "Allow", &none, "2026-01-01T00:05:00Z"),
                Plan::Start {
                    scheduled: ts("2026-01-01T00:05:00Z"),
                    replace: false,
                },
                1,
            ),
            // Long after: the most recent time, the others missed.
            (
                inputs(&every5, None, None, "Allow", &none, "2026-01-01T00:21:00Z"),
                Plan::Start {
                    scheduled: ts("2026-01-01T00:20:00Z"),
                    replace: false,
                },
                4,
            ),
            // Already processed.
            (
                inputs(
                    &every5,
                    Some(ts("2026-01-01T00:05:00Z")),
                    None,
                    "Allow",
                    &none,
                    "2026-01-01T00:06:00Z",
                ),
                Plan::Wait,
                0,
            ),
            (
                inputs(
                    &every5,
                    None,
                    None,
                    "Allow",
                    &running,
                    "2026-01-01T00:06:00Z",
                ),
                Plan::AlreadyProcessed,
                1,
            ),
            // Forbid with a running Job.
            (
                inputs(
                    &every5,
                    Some(ts("2026-01-01T00:05:00Z")),
                    None,
                    "Forbid",
                    &running,
                    "2026-01-01T00:10:00Z",
                ),
                Plan::Forbidden,
                1,
            ),
            // Replace with a running Job.
            (
                inputs(
                    &every5,
                    Some(ts("2026-01-01T00:05:00Z")),
                    None,
                    "Replace",
                    &running,
                    "2026-01-01T00:10:00Z",
                ),
                Plan::Start {
                    scheduled: ts("2026-01-01T00:10:00Z"),
                    replace: true,
                },
                1,
            ),
            // A starting deadline that has passed.
            (
                inputs(
                    &every5,
                    None,
                    Some(10),
                    "Allow",
                    &none,
                    "2026-01-01T00:05:11Z",
                ),
                Plan::Wait,
                0,
            ),
            (
                inputs(
                    &every5,
                    Some(ts("2026-01-01T00:00:00Z")),
                    Some(400),
                    "Allow",
                    &none,
                    "2026-01-01T00:05:30Z",
                ),
                Plan::Start {
                    scheduled: ts("2026-01-01T00:05:00Z"),
                    replace: false,
                },
                1,
            ),
        ];
        for (i, want, missed) in cases {
            assert_eq!(plan(&i).unwrap(), (want.clone(), missed), "now {}", i.now);
        }
    }

    #[test]
    fn too_late_when_the_window_closed_between_syncs() {
        let hourly = Schedule::parse("0 * * * *").unwrap();
        let none: Vec<String> = vec![];
        // Due at 01:00, deadline 100 s, looked at 01:01:00 with earliest moved to 00:59:20.
        let i = inputs(
            &hourly,
            Some(ts("2026-01-01T00:00:00Z")),
            Some(100),
            "Allow",
            &none,
            "2026-01-01T01:01:00Z",
        );
        assert_eq!(
            plan(&i).unwrap().0,
            Plan::Start {
                scheduled: ts("2026-01-01T01:00:00Z"),
                replace: false
            }
        );
        let i = inputs(
            &hourly,
            Some(ts("2026-01-01T00:00:00Z")),
            Some(30),
            "Allow",
            &none,
            "2026-01-01T01:00:40Z",
        );
        assert_eq!(plan(&i).unwrap().0, Plan::Wait);
        assert_eq!(
            miss_message(ts("2026-01-01T01:00:00Z")),
            "Missed scheduled time to start a job: Thu, 01 Jan 2026 01:00:00 +0000"
        );
    }

    #[test]
    fn names_requeues_and_history() {
        assert_eq!(
            job_name("backup", ts("2026-01-01T00:05:00Z")),
            "backup-29453765"
        );
        let every5 = Schedule::parse("*/5 * * * *").unwrap();
        assert_eq!(
            requeue_at(
                &every5,
                ts("2026-01-01T00:00:30Z"),
                Some(ts("2026-01-01T00:05:00Z")),
                ts("2026-01-01T00:05:00Z")
            ),
            Some(ts("2026-01-01T00:10:00.1Z"))
        );
        let irregular = Schedule::parse("0 8-9 * * *").unwrap();
        assert_eq!(
            most_recent(
                &irregular,
                ts("2026-01-01T00:00:00Z"),
                ts("2026-01-03T12:00:00Z")
            )
            .unwrap()
            .0,
            Some(ts("2026-01-03T09:00:00Z"))
        );
        // A zoned schedule: 09:00 in Berlin is 08:00Z in winter and 07:00Z in summer, and the
        // annotation carries the zone's offset.
        let berlin = Schedule::parse("0 9 * * *")
            .unwrap()
            .in_time_zone(klab_api::cron::load_location("Europe/Berlin").unwrap());
        assert_eq!(
            most_recent(
                &berlin,
                ts("2026-03-27T00:00:00Z"),
                ts("2026-03-30T12:00:00Z")
            )
            .unwrap(),
            (Some(ts("2026-03-30T07:00:00Z")), 4)
        );
        assert_eq!(
            requeue_at(
                &berlin,
                ts("2026-03-27T00:00:00Z"),
                None,
                ts("2026-03-28T12:00:00Z")
            ),
            Some(ts("2026-03-29T07:00:00.1Z")),
            "the day the clocks change"
        );
        assert_eq!(
            scheduled_timestamp(ts("2026-03-30T07:00:00Z"), Some("Europe/Berlin")),
            "2026-03-30T09:00:00+02:00"
        );
        assert_eq!(
            scheduled_timestamp(ts("2026-03-30T07:00:00Z"), None),
            "2026-03-30T07:00:00Z"
        );
        assert_eq!(
            scheduled_timestamp(ts("2026-03-30T07:00:00Z"), Some("Etc/UTC")),
            "2026-03-30T07:00:00Z"
        );
        let f = |n: &str, s: Option<&str>, ok| Finished {
            name: n.into(),
            start: s.map(ts),
            succeeded: ok,
        };
        let jobs = [
            f("a", Some("2026-01-01T00:01:00Z"), true),
            f("b", Some("2026-01-01T00:02:00Z"), true),
            f("c", None, true),
            f("d", Some("2026-01-01T00:03:00Z"), true),
            f("e", Some("2026-01-01T00:01:00Z"), false),
            f("g", Some("2026-01-01T00:04:00Z"), false),
        ];
        assert_eq!(history_to_delete(&jobs, 3, 1), ["e", "a"]);
        assert_eq!(
            history_to_delete(&jobs, 0, 0),
            ["e", "g", "a", "b", "d", "c"]
        );
    }
}
