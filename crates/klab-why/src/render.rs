//! The text form of an explanation: one heading line, one line per cause, parts indented below.

use std::fmt::Write as _;

use jiff::SignedDuration;

use crate::{About, Explanation, Kind};

/// `Pod default/web-1: Terminating (stuck)` then the causes, each on its own line.
pub fn render_text(e: &Explanation) -> String {
    let mut out = String::new();
    write_one(&mut out, e, 0, false);
    out
}

fn write_one(out: &mut String, e: &Explanation, depth: usize, under_node: bool) {
    let pad = "  ".repeat(depth);
    let id = if e.namespace.is_empty() {
        e.name.clone()
    } else {
        format!("{}/{}", e.namespace, e.name)
    };
    let flag = if e.stuck { " (stuck)" } else { "" };
    let _ = writeln!(out, "{pad}{} {id}: {}{flag}", e.kind.name(), e.state);
    for c in &e.causes {
        // Under a node's heading its pods need not repeat the node's health.
        if under_node && c.about == About::Node {
            continue;
        }
        let mark = if c.about == About::Next { "→" } else { "-" };
        let _ = writeln!(out, "{pad}  {mark} {}", c.text);
    }
    for u in &e.unreadable {
        let _ = writeln!(out, "{pad}  ! could not read {u}");
    }
    for p in &e.parts {
        write_one(out, p, depth.saturating_add(1), e.kind == Kind::Node);
    }
}

/// A span as people write it: `45s`, `3m12s`, `1h2m5s`, `2d3h`.
pub fn format_span(d: SignedDuration) -> String {
    let secs = d.as_secs().unsigned_abs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (h, rest) = (rest / 3600, rest % 3600);
    let (m, s) = (rest / 60, rest % 60);
    let mut out = String::new();
    if days > 0 {
        let _ = write!(out, "{days}d");
        if h > 0 {
            let _ = write!(out, "{h}h");
        }
        return out;
    }
    if h > 0 {
        let _ = write!(out, "{h}h");
    }
    if h > 0 || m > 0 {
        let _ = write!(out, "{m}m");
    }
    let _ = write!(out, "{s}s");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans() {
        for (secs, want) in [
            (0, "0s"),
            (45, "45s"),
            (192, "3m12s"),
            (3600, "1h0m0s"),
            (3725, "1h2m5s"),
            (-30, "30s"),
            (97_200, "1d3h"),
            (i64::MAX, "106751991167300d15h"),
        ] {
            assert_eq!(format_span(SignedDuration::from_secs(secs)), want, "{secs}");
        }
    }
}
