//! Resource quantities as the kubelet needs them: parse pod requests (`500m`, `1.5`, `128Mi`, `1G`,
//! `1e3`) to integers (millicores, bytes) and print node capacity the way upstream does.

/// Parses a quantity into an integer count of `1/scale` units, rounding up like upstream's
/// `MilliValue()`/`Value()`. `scale` is 1000 for millicores, 1 for bytes. `None` on malformed input.
pub fn parse_scaled(q: &str, scale: u64) -> Option<u64> {
    let q = q.trim();
    if q.is_empty() {
        return None;
    }
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let mult: f64 = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        s if s.starts_with('e') || s.starts_with('E') => 10f64.powi(s[1..].parse::<i32>().ok()?),
        _ => return None,
    };
    let n: f64 = num.parse().ok()?;
    if n < 0.0 || !n.is_finite() {
        return None;
    }
    let v = n * mult * scale as f64;
    // Round up (upstream rounds fractional milli/byte values up); tolerate float noise.
    let r = v.round();
    Some(if (v - r).abs() < 1e-6 {
        r as u64
    } else {
        v.ceil() as u64
    })
}

/// CPU quantity → millicores.
pub fn cpu_millis(q: &str) -> Option<u64> {
    parse_scaled(q, 1000)
}

/// Memory / storage quantity → bytes.
pub fn bytes(q: &str) -> Option<u64> {
    parse_scaled(q, 1)
}

/// Millicores as a quantity string: `4` for whole cores, else `3500m`.
pub fn format_cpu(millis: u64) -> String {
    if millis.is_multiple_of(1000) {
        (millis / 1000).to_string()
    } else {
        format!("{millis}m")
    }
}

/// Bytes in the largest binary suffix that divides them exactly (`16Gi`, `16284Mi`, `1000`).
pub fn format_bytes(b: u64) -> String {
    const SUFFIXES: [(&str, u32); 6] = [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ];
    if b == 0 {
        return "0".into();
    }
    for (s, shift) in SUFFIXES {
        let unit = 1u64 << shift;
        if b.is_multiple_of(unit) {
            return format!("{}{s}", b / unit);
        }
    }
    b.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_table() {
        let cases: &[(&str, Option<u64>, Option<u64>)] = &[
            ("500m", Some(500), Some(1)),
            ("1", Some(1000), Some(1)),
            ("1.5", Some(1500), Some(2)),
            ("128Mi", Some(134_217_728_000), Some(134_217_728)),
            ("1G", Some(1_000_000_000_000), Some(1_000_000_000)),
            ("1e3", Some(1_000_000), Some(1000)),
            ("bad", None, None),
            ("", None, None),
        ];
        for (q, cpu, b) in cases {
            assert_eq!(cpu_millis(q), *cpu, "{q}");
            assert_eq!(bytes(q), *b, "{q}");
        }
    }

    #[test]
    fn formats() {
        assert_eq!(format_cpu(4000), "4");
        assert_eq!(format_cpu(3500), "3500m");
        assert_eq!(format_bytes(16 << 30), "16Gi");
        assert_eq!(format_bytes((16 << 30) - (100 << 20)), "16284Mi");
        assert_eq!(format_bytes(90 << 30), "90Gi");
        assert_eq!(format_bytes(1000), "1000");
    }
}
