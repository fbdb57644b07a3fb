//! Typed durations written the way upstream flags write them (`40s`, `5m0s`, `1h30m`, `100ms`).

use std::fmt::Write as _;

pub use std::time::Duration;

/// Parses a Go `time.Duration` string (`300ms`, `40s`, `5m`, `1h2m3.5s`). A bare `0` is zero.
/// Negative durations are refused: no klab knob takes one.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err(format!("invalid duration {s:?}: empty"));
    }
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(format!("invalid duration {s:?}: expected a number"));
        }
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("invalid duration {s:?}: bad number {:?}", &rest[..num_len]))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("invalid duration {s:?}: missing unit")),
            u => return Err(format!("invalid duration {s:?}: unknown unit {u:?}")),
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    Duration::try_from_secs_f64(total).map_err(|e| format!("invalid duration {s:?}: {e}"))
}

/// Formats like Go's `time.Duration.String()` (`5m0s`, `40s`, `1h0m0s`, `100ms`).
pub fn format_go_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".into();
    }
    if d < Duration::from_secs(1) {
        let ns = d.as_nanos();
        return if ns.is_multiple_of(1_000_000) {
            format!("{}ms", ns / 1_000_000)
        } else if ns.is_multiple_of(1_000) {
            format!("{}µs", ns / 1_000)
        } else {
            format!("{ns}ns")
        };
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        let _ = write!(out, "{h}h");
    }
    if h > 0 || m > 0 {
        let _ = write!(out, "{m}m");
    }
    let nanos = d.subsec_nanos();
    if nanos == 0 {
        let _ = write!(out, "{s}s");
    } else {
        let frac = format!("{:09}", nanos);
        let _ = write!(out, "{s}.{}s", frac.trim_end_matches('0'));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        for (s, ms) in [
            ("40s", 40_000),
            ("5m", 300_000),
            ("5m0s", 300_000),
            ("1h30m", 5_400_000),
            ("100ms", 100),
            ("1.5s", 1_500),
            ("0", 0),
        ] {
            assert_eq!(parse_duration(s).unwrap(), Duration::from_millis(ms), "{s}");
        }
        for bad in ["", "10", "s", "10x", "-5s", "1..2s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should fail");
        }
    }

    #[test]
    fn formats_like_go() {
        for (ms, s) in [
            (300_000, "5m0s"),
            (40_000, "40s"),
            (3_600_000, "1h0m0s"),
            (100, "100ms"),
            (1_500, "1.5s"),
        ] {
            assert_eq!(format_go_duration(Duration::from_millis(ms)), s);
        }
    }
}
