//! Resource quantities (`100m`, `1.5`, `128Mi`, `1e3`, `2k`) as the scheduler reads them: CPU in
//! millicores and memory/pods as integers, both rounded up like upstream `MilliValue()`/`Value()`.

/// A parsed quantity as an exact rational `num / den` (den a power of ten), so `0.1` stays exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Exact {
    num: i128,
    den: i128,
}

fn parse_exact(s: &str) -> Option<Exact> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let (sign, rest) = match s.as_bytes()[0] {
        b'-' => (-1i128, &s[1..]),
        b'+' => (1, &s[1..]),
        _ => (1, s),
    };
    let num_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (digits, suffix) = rest.split_at(num_len);
    if digits.is_empty() || digits.matches('.').count() > 1 || digits == "." {
        return None;
    }
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    let mut num: i128 = 0;
    let mut den: i128 = 1;
    for c in int_part.chars().chain(frac_part.chars()) {
        num = num
            .checked_mul(10)?
            .checked_add(i128::from(c.to_digit(10)?))?;
    }
    for _ in 0..frac_part.len() {
        den = den.checked_mul(10)?;
    }
    let (mul, div): (i128, i128) = match suffix {
        "" => (1, 1),
        "n" => (1, 1_000_000_000),
        "u" => (1, 1_000_000),
        "m" => (1, 1_000),
        "k" => (1_000, 1),
        "M" => (1_000_000, 1),
        "G" => (1_000_000_000, 1),
        "T" => (1_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000, 1),
        "Ki" => (1 << 10, 1),
        "Mi" => (1 << 20, 1),
        "Gi" => (1 << 30, 1),
        "Ti" => (1 << 40, 1),
        "Pi" => (1 << 50, 1),
        "Ei" => (1 << 60, 1),
        e if e.starts_with(['e', 'E']) => {
            let exp: i32 = e[1..].parse().ok()?;
            let p = 10i128.checked_pow(exp.unsigned_abs())?;
            if exp >= 0 { (p, 1) } else { (1, p) }
        }
        _ => return None,
    };
    Some(Exact {
        num: sign.checked_mul(num.checked_mul(mul)?)?,
        den: den.checked_mul(div)?,
    })
}

fn ceil_div(n: i128, d: i128) -> i128 {
    let (q, r) = (n.checked_div(d).unwrap_or(0), n.checked_rem(d).unwrap_or(0));
    if r != 0 && ((n < 0) == (d < 0)) {
        q.saturating_add(1)
    } else {
        q
    }
}

fn clamp(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// Thousandths of the quantity, rounded up (upstream `Quantity.MilliValue()`); `None` if unparsable.
pub fn milli_value(s: &str) -> Option<i64> {
    let e = parse_exact(s)?;
    Some(clamp(ceil_div(e.num.checked_mul(1000)?, e.den)))
}

/// The quantity rounded up to an integer (upstream `Quantity.Value()`); `None` if unparsable.
pub fn value(s: &str) -> Option<i64> {
    let e = parse_exact(s)?;
    Some(clamp(ceil_div(e.num, e.den)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_table() {
        let cases: &[(&str, Option<i64>, Option<i64>)] = &[
            ("100m", Some(100), Some(1)),
            ("1", Some(1000), Some(1)),
            ("1.5", Some(1500), Some(2)),
            ("0.1", Some(100), Some(1)),
            ("2k", Some(2_000_000), Some(2000)),
            ("128Mi", Some(134_217_728_000), Some(134_217_728)),
            ("1Gi", Some(1_073_741_824_000), Some(1_073_741_824)),
            ("1e3", Some(1_000_000), Some(1000)),
            ("1E-3", Some(1), Some(1)),
            ("250u", Some(1), Some(1)),
            ("0", Some(0), Some(0)),
            ("110", Some(110_000), Some(110)),
            ("", None, None),
            ("abc", None, None),
            ("1.2.3", None, None),
            ("5Qi", None, None),
        ];
        for (s, milli, val) in cases {
            assert_eq!(milli_value(s), *milli, "milli {s:?}");
            assert_eq!(value(s), *val, "value {s:?}");
        }
    }
}
