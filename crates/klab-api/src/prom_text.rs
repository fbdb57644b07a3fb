//! Sample values in the Prometheus text format as client_golang's encoder writes them
//! (`strconv.AppendFloat(f, 'g', -1, 64)`), appended to a buffer without allocating: kubelets
//! render every pod's samples at each metrics scrape.

use std::fmt::Write as _;

/// A float as Go's `strconv.FormatFloat(f, 'g', -1, 64)` writes it: the shortest digits that
/// read back as `f`, in exponent form when the decimal exponent is below -4 or at least 6
/// (`4.194304e+07`, `1e-05`, `1e+06`; but `0.5`, `0.0001`, `123456`).
pub fn push_float(out: &mut String, f: f64) {
    if f == 0.0 {
        // Both zeros: Go writes `-0` for negative zero, Prometheus' encoder `0` for either.
        out.push('0');
        return;
    }
    if f.is_nan() {
        out.push_str("NaN");
        return;
    }
    if f.is_infinite() {
        out.push_str(if f > 0.0 { "+Inf" } else { "-Inf" });
        return;
    }
    // Rust's `{:e}` is the shortest round-trip form too (`-1.225e1`): take its digits and
    // exponent and lay them out as Go does.
    let mut sci = Stack::default();
    if write!(sci, "{f:e}").is_err() {
        // Unreachable: an f64 in `{:e}` is at most 24 bytes.
        let _ = write!(out, "{f}");
        return;
    }
    let text = sci.as_str();
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exp) = text.split_once('e').unwrap_or((text, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (lead, rest) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if negative {
        out.push('-');
    }
    if !(-4..6).contains(&exp) {
        out.push_str(lead);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let _ = write!(out, "{:02}", exp.unsigned_abs());
    } else if exp >= 0 {
        // `exp` digits after the leading one belong to the integer part, zero-padded.
        let whole = exp.unsigned_abs() as usize;
        out.push_str(lead);
        out.push_str(&rest[..whole.min(rest.len())]);
        for _ in rest.len()..whole {
            out.push('0');
        }
        if rest.len() > whole {
            out.push('.');
            out.push_str(&rest[whole..]);
        }
    } else {
        out.push_str("0.");
        for _ in 1..exp.unsigned_abs() {
            out.push('0');
        }
        out.push_str(lead);
        out.push_str(rest);
    }
}

/// [`push_float`] into a new string.
pub fn float(f: f64) -> String {
    let mut s = String::new();
    push_float(&mut s, f);
    s
}

/// A formatting buffer on the stack, large enough for any `f64` in `{:e}`.
#[derive(Default)]
struct Stack {
    bytes: [u8; 32],
    len: usize,
}

impl Stack {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or("")
    }
}

impl std::fmt::Write for Stack {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(std::fmt::Error)?;
        self.bytes
            .get_mut(self.len..end)
            .ok_or(std::fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values as Go's `strconv.FormatFloat(f, 'g', -1, 64)` prints them.
    #[test]
    fn floats_as_go_formats_them() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "0"),
            (0.5, "0.5"),
            (1.0, "1"),
            (-1.0, "-1"),
            (10.0, "10"),
            (100.0, "100"),
            (12.25, "12.25"),
            (-12.25, "-12.25"),
            (123456.0, "123456"),
            (999999.0, "999999"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (41943040.0, "4.194304e+07"),
            (1_767_225_601.0, "1.767225601e+09"),
            (1_767_225_601.25, "1.76722560125e+09"),
            (1e21, "1e+21"),
            (1e100, "1e+100"),
            (0.0001, "0.0001"),
            (0.000123, "0.000123"),
            (0.00001, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (1e-8, "1e-08"),
            (0.1 + 0.2, "0.30000000000000004"),
            (f64::MAX, "1.7976931348623157e+308"),
            (-f64::MIN_POSITIVE, "-2.2250738585072014e-308"),
            (5e-324, "5e-324"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
        ];
        for (f, want) in cases {
            assert_eq!(float(*f), *want, "{f:e}");
        }
    }

    /// Every value reads back as itself, and appending leaves what was there.
    #[test]
    fn floats_read_back_and_append() {
        let mut x = 1.0e-12_f64;
        while x < 1e30 {
            for v in [x, -x, x * 3.7, x / 7.0] {
                let s = float(v);
                assert_eq!(s.parse::<f64>().unwrap(), v, "{s}");
            }
            x *= 9.3;
        }
        let mut out = String::from("x ");
        push_float(&mut out, 2.5);
        assert_eq!(out, "x 2.5");
    }
}
