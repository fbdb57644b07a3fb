//! Cron schedules as CronJobs write them (the standard five fields — minute, hour, day of month,
//! month, day of week — with lists, ranges, steps, `?`, month and weekday names, and the
//! `@yearly` … `@hourly` and `@every <duration>` descriptors), parsed and stepped in UTC or in
//! an IANA time zone (a CronJob's `spec.timeZone`, from the tz database bundled into the binary,
//! so every machine reads the same rules). The semantics follow the parser upstream's CronJob
//! controller uses: when both day fields are restricted a day matches either; when either is `*`
//! both must match; and across a DST change the next activation is found as that parser finds
//! it (hours stepped in absolute time), so a wall time skipped by a spring-forward does not
//! run that day and one repeated by a fall-back runs twice.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Span, Timestamp, Zoned};

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
        /// The zone whose wall time the fields are read in (UTC unless set).
        zone: TimeZone,
    },
    /// `@every <duration>`: every interval, counted from the reference time.
    Every(u64),
}

/// Go's `time.LoadLocation` over the bundled tz database: `""` and `UTC` are UTC, names are
/// matched exactly (case included, as on a Linux host), anything else is
/// `unknown time zone NAME`. (`Local` is left to validation, which refuses it.)
pub fn load_location(name: &str) -> Result<TimeZone, String> {
    if name.is_empty() || name == "UTC" {
        return Ok(TimeZone::UTC);
    }
    let unknown = || format!("unknown time zone {name}");
    let tz = jiff::tz::TimeZoneDatabase::bundled()
        .get(name)
        .map_err(|_| unknown())?;
    match tz.iana_name() {
        Some(n) if n == name => Ok(tz),
        _ => Err(unknown()),
    }
}

/// `validateTimeZone` of upstream's batch validation: the messages that follow
/// `spec.timeZone: Invalid value: "NAME": `, in upstream's order.
pub fn validate_time_zone(name: &str) -> Vec<String> {
    if name.is_empty() {
        return vec!["timeZone must be nil or non-empty string".into()];
    }
    // https://data.iana.org/time-zones/theory.html#naming, with digits and `+` tolerated.
    let part_ok = |p: &str| {
        (1..=14).contains(&p.len())
            && p != "."
            && p != ".."
            && !p.starts_with('-')
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'))
    };
    if !name.split('/').all(part_ok) {
        return vec![format!("unknown time zone {name}")];
    }
    let mut errs = Vec::new();
    if name.eq_ignore_ascii_case("Local") {
        errs.push(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
                .into(),
        );
    }
    // Go's LoadLocation takes "Local" itself; other spellings are looked up.
    if name != "Local"
        && let Err(e) = load_location(name)
    {
        errs.push(e);
    }
    errs
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
            zone: TimeZone::UTC,
        })
    }

    /// The same schedule read in `tz` (a CronJob's `spec.timeZone`).
    pub fn in_time_zone(mut self, tz: TimeZone) -> Schedule {
        if let Schedule::Fields { zone, .. } = &mut self {
            *zone = tz;
        }
        self
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

    /// The first activation strictly after `t` in the schedule's zone, within five years;
    /// `None` for a schedule that never fires (e.g. `0 0 30 2 *`).
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        match self {
            Schedule::Fields { zone, .. } => self.next_after_in(t, zone),
            Schedule::Every(_) => self.next_after_in(t, &TimeZone::UTC),
        }
    }

    /// The first activation strictly after `t` with the fields read as wall time in `tz`:
    /// the search of upstream's cron parser (`SpecSchedule.Next`): from the next whole second,
    /// months and days stepped on the calendar (resetting the smaller fields once), hours,
    /// minutes and seconds stepped in absolute time, starting over whenever a field wraps.
    /// `@every` ignores the zone.
    pub fn next_after_in(&self, t: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let (minute, hour) = match self {
            Schedule::Every(secs) => {
                let secs = i64::try_from(*secs).ok()?;
                return t.checked_add(SignedDuration::from_secs(secs)).ok();
            }
            Schedule::Fields { minute, hour, .. } => (*minute, *hour),
        };
        let at = |d: DateTime| d.to_zoned(tz.clone()).ok();
        let plus = |z: &Zoned, d: SignedDuration| z.checked_add(d).ok();
        let start = Timestamp::from_second(t.as_second().checked_add(1)?).ok()?;
        let mut z = start.to_zoned(tz.clone());
        let mut added = false;
        let year_limit = z.year().checked_add(5)?;
        'wrap: loop {
            if z.year() > year_limit {
                return None;
            }
            while self.month_bit(z.month()) == 0 {
                if !added {
                    added = true;
                    z = at(z
                        .date()
                        .first_of_month()
                        .to_datetime(jiff::civil::Time::midnight()))?;
                }
                z = z.checked_add(Span::new().months(1)).ok()?;
                if z.month() == 1 {
                    continue 'wrap;
                }
            }
            while !self.day_matches(z.datetime()) {
                if !added {
                    added = true;
                    z = at(z.date().to_datetime(jiff::civil::Time::midnight()))?;
                }
                z = z.checked_add(Span::new().days(1)).ok()?;
                // A midnight a DST change skipped: back to the day's first hour, as upstream.
                let h = i64::from(z.hour());
                if h != 0 {
                    let shift = if h > 12 {
                        24i64.saturating_sub(h)
                    } else {
                        h.saturating_neg()
                    };
                    z = plus(&z, SignedDuration::from_hours(shift))?;
                }
                if z.day() == 1 {
                    continue 'wrap;
                }
            }
            while hour & (1u64 << z.hour()) == 0 {
                if !added {
                    added = true;
                    z = at(z.date().at(z.hour(), 0, 0, 0))?;
                }
                z = plus(&z, SignedDuration::from_hours(1))?;
                if z.hour() == 0 {
                    continue 'wrap;
                }
            }
            while minute & (1u64 << z.minute()) == 0 {
                if !added {
                    added = true;
                    z = plus(
                        &z,
                        SignedDuration::from_secs(i64::from(z.second()).saturating_neg()),
                    )?;
                }
                z = plus(&z, SignedDuration::from_mins(1))?;
                if z.minute() == 0 {
                    continue 'wrap;
                }
            }
            // Field schedules fire at second 0.
            while z.second() != 0 {
                added = true;
                z = plus(&z, SignedDuration::from_secs(1))?;
                if z.second() == 0 {
                    continue 'wrap;
                }
            }
            return Some(z.timestamp());
        }
    }

    fn month_bit(&self, month: i8) -> u64 {
        match self {
            Schedule::Fields { month: m, .. } => m & (1u64 << month),
            Schedule::Every(_) => 1,
        }
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

    fn next_in(s: &str, zone: &str, after: &str) -> String {
        let tz = load_location(zone).unwrap();
        Schedule::parse(s)
            .unwrap()
            .next_after_in(ts(after), &tz)
            .map(|t| t.to_string())
            .unwrap_or_else(|| "never".into())
    }

    #[test]
    fn activations_in_a_time_zone_across_dst() {
        let cases = [
            // Wall time in the zone, whatever the offset of the season.
            (
                "0 9 * * *",
                "Europe/Berlin",
                "2026-01-01T00:00:00Z",
                "2026-01-01T08:00:00Z",
            ),
            (
                "0 9 * * *",
                "Europe/Berlin",
                "2026-07-01T00:00:00Z",
                "2026-07-01T07:00:00Z",
            ),
            (
                "0 0 * * *",
                "Asia/Kolkata",
                "2026-01-01T00:00:00Z",
                "2026-01-01T18:30:00Z",
            ),
            // New York springs forward on 2026-03-08 (02:00 EST -> 03:00 EDT): 02:30 does not
            // exist that day, so the next 02:30 is the day after.
            (
                "30 2 * * *",
                "America/New_York",
                "2026-03-07T12:00:00Z",
                "2026-03-09T06:30:00Z",
            ),
            // An hour after the change runs at its wall time in EDT.
            (
                "30 3 * * *",
                "America/New_York",
                "2026-03-08T05:00:00Z",
                "2026-03-08T07:30:00Z",
            ),
            // New York falls back on 2026-11-01 (02:00 EDT -> 01:00 EST): 01:30 happens twice
            // and the schedule runs at both.
            (
                "30 1 * * *",
                "America/New_York",
                "2026-11-01T04:00:00Z",
                "2026-11-01T05:30:00Z",
            ),
            (
                "30 1 * * *",
                "America/New_York",
                "2026-11-01T05:30:00Z",
                "2026-11-01T06:30:00Z",
            ),
            (
                "30 1 * * *",
                "America/New_York",
                "2026-11-01T06:30:00Z",
                "2026-11-02T06:30:00Z",
            ),
            // Every 15 minutes is unaffected by the change.
            (
                "*/15 * * * *",
                "America/New_York",
                "2026-03-08T06:50:00Z",
                "2026-03-08T07:00:00Z",
            ),
            // UTC is UTC.
            (
                "0 3 * * *",
                "UTC",
                "2026-01-01T03:00:00Z",
                "2026-01-02T03:00:00Z",
            ),
            // @every ignores the zone.
            (
                "@every 1h",
                "Asia/Tokyo",
                "2026-01-01T00:10:00Z",
                "2026-01-01T01:10:00Z",
            ),
        ];
        for (s, zone, after, want) in cases {
            assert_eq!(next_in(s, zone, after), want, "{s} in {zone} after {after}");
            // A schedule carrying its zone steps the same way.
            let zoned = Schedule::parse(s)
                .unwrap()
                .in_time_zone(load_location(zone).unwrap());
            assert_eq!(
                zoned
                    .next_after(ts(after))
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| "never".into()),
                want
            );
        }
    }

    #[test]
    fn time_zones_are_validated_as_upstream() {
        assert_eq!(load_location("").unwrap(), TimeZone::UTC);
        assert!(load_location("Europe/Berlin").is_ok());
        assert_eq!(
            load_location("europe/berlin").unwrap_err(),
            "unknown time zone europe/berlin"
        );
        assert_eq!(
            load_location("Mars/Olympus").unwrap_err(),
            "unknown time zone Mars/Olympus"
        );
        let cases: [(&str, &[&str]); 8] = [
            ("America/New_York", &[]),
            ("Etc/UTC", &[]),
            ("", &["timeZone must be nil or non-empty string"]),
            ("Mars/Olympus", &["unknown time zone Mars/Olympus"]),
            ("../etc/passwd", &["unknown time zone ../etc/passwd"]),
            (
                "America/Argentina_Buenos_Aires_Too_Long",
                &["unknown time zone America/Argentina_Buenos_Aires_Too_Long"],
            ),
            (
                "Local",
                &[
                    "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
                ],
            ),
            (
                "local",
                &[
                    "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
                    "unknown time zone local",
                ],
            ),
        ];
        for (name, want) in cases {
            assert_eq!(validate_time_zone(name), want, "{name:?}");
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
