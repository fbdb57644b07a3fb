//! Cron schedules as CronJobs write them (the standard five fields — minute, hour, day of month,
//! month, day of week — with lists, ranges, steps, `?`, month and weekday names, and the
//! `@yearly` … `@hourly` and `@every <duration>` descriptors), parsed and stepped in UTC. The
//! semantics follow the parser upstream's CronJob controller uses: when both day fields are
//! restricted a day matches either; when either is `*` both must match.

use jiff::Timestamp;
use jiff::civil::DateTime;

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    Fields {
        minute: u64,
        hour: u64,
        dom: u64,
        month: u64,
        dow: u64,
        /// Day-of-month or day-of-week written as `*` (or `?`): both day fields must match.
        day_star: bool,
    },
    /// `@every <duration>`: every interval, counted from the reference time.
    Every(u64),
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

fn parse_value(s: &str, names: &[&str], offset: u64) -> Result<u64, String> {
    let lower = s.to_ascii_lowercase();
    if let Some(i) = names.iter().position(|n| *n == lower) {
        return Ok((i as u64).saturating_add(offset));
    }
    s.parse::<u64>().map_err(|_| {
        format!("failed to parse int from {s}: strconv.Atoi: parsing {s:?}: invalid syntax")
    })
}

/// One field as a bit set of allowed values in `[lo, hi]`, and whether it was a bare `*`/`?`.
fn parse_field(
    field: &str,
    lo: u64,
    hi: u64,
    names: &[&str],
    name_offset: u64,
) -> Result<(u64, bool), String> {
    let mut bits = 0u64;
    let mut star = false;
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step = s.parse::<u64>().map_err(|_| {
                    format!(
                        "failed to parse int from {s}: strconv.Atoi: parsing {s:?}: invalid syntax"
                    )
                })?;
                (r, Some(step))
            }
            None => (part, None),
        };
        let (start, end) = if range == "*" || range == "?" {
            if step.is_none() {
                star = true;
            }
            (lo, hi)
        } else if let Some((a, b)) = range.split_once('-') {
            (
                parse_value(a, names, name_offset)?,
                parse_value(b, names, name_offset)?,
            )
        } else {
            let v = parse_value(range, names, name_offset)?;
            // `5/10` means from 5 to the end in steps of 10.
            (v, if step.is_some() { hi } else { v })
        };
        if start < lo {
            return Err(format!(
                "beginning of range ({start}) below minimum ({lo}): {part}"
            ));
        }
        if end > hi {
            return Err(format!("end of range ({end}) above maximum ({hi}): {part}"));
        }
        if start > end {
            return Err(format!(
                "beginning of range ({start}) beyond end of range ({end}): {part}"
            ));
        }
        let step = step.unwrap_or(1);
        if step == 0 {
            return Err(format!("step of range should be a positive number: {part}"));
        }
        let mut v = start;
        while v <= end {
            bits |= 1 << v;
            v = v.saturating_add(step);
        }
    }
    Ok((bits, star))
}

impl Schedule {
    /// Parses a schedule; the error is the message upstream's validation shows after
    /// `Invalid value: "<schedule>": `.
    pub fn parse(s: &str) -> Result<Schedule, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("empty spec string".into());
        }
        if let Some(d) = s.strip_prefix('@') {
            let fields = |f: &str| Schedule::parse(f);
            return match d {
                "yearly" | "annually" => fields("0 0 1 1 *"),
                "monthly" => fields("0 0 1 * *"),
                "weekly" => fields("0 0 * * 0"),
                "daily" | "midnight" => fields("0 0 * * *"),
                "hourly" => fields("0 * * * *"),
                _ => match d.strip_prefix("every ") {
                    Some(dur) => {
                        let d = crate::duration::parse_duration(dur.trim()).map_err(|_| {
                            format!(
                                "failed to parse duration @{d}: time: invalid duration {:?}",
                                dur.trim()
                            )
                        })?;
                        // Rounded to whole seconds, at least one (as upstream's parser).
                        Ok(Schedule::Every(d.as_secs().max(1)))
                    }
                    None => Err(format!("unrecognized descriptor: @{d}")),
                },
            };
        }
        let f: Vec<&str> = s.split_whitespace().collect();
        if f.len() != 5 {
            return Err(format!("expected exactly 5 fields, found {}: {s}", f.len()));
        }
        let (minute, _) = parse_field(f[0], 0, 59, &[], 0)?;
        let (hour, _) = parse_field(f[1], 0, 23, &[], 0)?;
        let (dom, dom_star) = parse_field(f[2], 1, 31, &[], 0)?;
        let (month, _) = parse_field(f[3], 1, 12, &MONTHS, 1)?;
        // Sunday may be written 7 as well as 0.
        let (mut dow, dow_star) = parse_field(f[4], 0, 7, &DAYS, 0)?;
        if dow & (1 << 7) != 0 {
            dow = (dow | 1) & !(1 << 7);
        }
        Ok(Schedule::Fields {
            minute,
            hour,
            dom,
            month,
            dow,
            day_star: dom_star || dow_star,
        })
    }

    fn day_matches(&self, d: DateTime) -> bool {
        let Schedule::Fields {
            dom,
            month,
            dow,
            day_star,
            ..
        } = self
        else {
            return true;
        };
        if month & (1 << d.month()) == 0 {
            return false;
        }
        let dom_ok = dom & (1 << d.day()) != 0;
        let dow_ok = dow & (1 << d.weekday().to_sunday_zero_offset()) != 0;
        if *day_star {
            dom_ok && dow_ok
        } else {
            dom_ok || dow_ok
        }
    }

    /// The first activation strictly after `t` (UTC, whole minutes for field schedules), within
    /// five years; `None` for a schedule that never fires (e.g. `0 0 30 2 *`).
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let (minute, hour) = match self {
            Schedule::Every(secs) => {
                let secs = i64::try_from(*secs).ok()?;
                return t.checked_add(jiff::SignedDuration::from_secs(secs)).ok();
            }
            Schedule::Fields { minute, hour, .. } => (*minute, *hour),
        };
        let start = t.to_zoned(jiff::tz::TimeZone::UTC).datetime();
        let first_day = start.date();
        for day_offset in 0..(366 * 5) {
            let day = first_day
                .checked_add(jiff::Span::new().days(day_offset))
                .ok()?;
            if !self.day_matches(day.to_datetime(jiff::civil::Time::midnight())) {
                continue;
            }
            for h in 0..24i8 {
                if hour & (1 << h) == 0 {
                    continue;
                }
                for m in 0..60i8 {
                    if minute & (1 << m) == 0 {
                        continue;
                    }
                    let candidate = day.at(h, m, 0, 0);
                    if candidate > start {
                        return candidate
                            .to_zoned(jiff::tz::TimeZone::UTC)
                            .ok()
                            .map(|z| z.timestamp());
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn next(s: &str, after: &str) -> String {
        Schedule::parse(s)
            .unwrap()
            .next_after(ts(after))
            .map(|t| t.to_string())
            .unwrap_or_else(|| "never".into())
    }

    #[test]
    fn next_activations() {
        let cases = [
            (
                "*/5 * * * *",
                "2026-01-01T00:00:00Z",
                "2026-01-01T00:05:00Z",
            ),
            (
                "*/5 * * * *",
                "2026-01-01T00:03:10Z",
                "2026-01-01T00:05:00Z",
            ),
            ("* * * * *", "2026-01-01T00:00:30Z", "2026-01-01T00:01:00Z"),
            ("0 3 * * *", "2026-01-01T03:00:00Z", "2026-01-02T03:00:00Z"),
            ("30 2 1 * *", "2026-01-15T00:00:00Z", "2026-02-01T02:30:00Z"),
            // Both day fields restricted: either matches (the 13th or a Friday).
            ("0 0 13 * 5", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"),
            // Weekday restricted, day-of-month `*`: only Mondays.
            (
                "0 9 * * mon",
                "2026-01-01T00:00:00Z",
                "2026-01-05T09:00:00Z",
            ),
            ("0 0 * * 7", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z"),
            (
                "0 0 1 jan *",
                "2026-03-01T00:00:00Z",
                "2027-01-01T00:00:00Z",
            ),
            ("@hourly", "2026-01-01T10:59:59Z", "2026-01-01T11:00:00Z"),
            ("@weekly", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z"),
            ("@every 90s", "2026-01-01T00:00:00Z", "2026-01-01T00:01:30Z"),
            (
                "5-10/2 1,2 * * *",
                "2026-01-01T01:06:00Z",
                "2026-01-01T01:07:00Z",
            ),
            ("0 0 30 2 *", "2026-01-01T00:00:00Z", "never"),
        ];
        for (s, after, want) in cases {
            assert_eq!(next(s, after), want, "{s} after {after}");
        }
    }

    #[test]
    fn bad_schedules_say_why() {
        let cases = [
            ("", "empty spec string"),
            ("* * * *", "expected exactly 5 fields, found 4: * * * *"),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            (
                "5-1 * * * *",
                "beginning of range (5) beyond end of range (1): 5-1",
            ),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ];
        for (s, want) in cases {
            assert_eq!(Schedule::parse(s), Err(want.to_string()), "{s}");
        }
        assert!(
            Schedule::parse("x * * * *")
                .unwrap_err()
                .starts_with("failed to parse int from x")
        );
    }
}
