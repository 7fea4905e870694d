//! Number: a JSON number's text as the double nearest to it, read from its digits once.
//!
//! Most firmware prints a value with a few digits (`1523.4`, `-3.25`, `271`). For those the
//! nearest double is one exact operation away (Clinger's fast path): an integer of at most 15
//! digits is exact in a double, so is every power of ten up to 10^22, and IEEE division or
//! multiplication of two exact doubles rounds correctly. Every other text goes to the standard
//! library's parser, which is correctly rounded for all inputs. So the answer is always the
//! standard library's, bit for bit (property-tested below); only the cost differs.

/// Powers of ten that are exact doubles.
const EXACT_POWERS: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Most digits whose integer is exact in a double whatever they are (10^15 < 2^53).
const EXACT_DIGITS: usize = 15;

/// The double nearest to a number's text, as `text.parse::<f64>()` gives it (None where that
/// fails). `text` is expected in JSON's grammar; other texts are answered by the standard parser.
#[inline]
fn parse_f64(text: &str) -> Option<f64> {
    match fast(text.as_bytes()) {
        Some(v) => Some(v),
        None => text.parse().ok(),
    }
}

/// The double PostgreSQL's `float8` input gives for a JSON number's text, or None where it
/// refuses the text as out of range: past the largest double, or so close to zero that it
/// rounds to zero although its digits are not all zero (`1e-400`; PostgreSQL's `float8in`
/// refuses a result of zero or infinity that `strtod` flags as out of range, and keeps the
/// subnormal ones). The standard parser alone would give infinity or zero for those.
#[inline]
pub fn parse_float8(text: &str) -> Option<f64> {
    let v = parse_f64(text)?;
    if !v.is_finite() {
        return None;
    }
    if v == 0.0 {
        let mantissa = text.split(['e', 'E']).next().unwrap_or_default();
        if mantissa.bytes().any(|b| matches!(b, b'1'..=b'9')) {
            return None;
        }
    }
    Some(v)
}

/// The fast path: `-`? digits (`.` digits)? with at most 15 digits in all; None for anything
/// else (an exponent, more digits, a stray byte), which the caller hands to the full parser.
#[inline]
fn fast(b: &[u8]) -> Option<f64> {
    let (negative, b) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, b),
    };
    let mut mantissa: u64 = 0;
    let mut digits = 0usize;
    let mut fraction_digits = 0usize;
    let mut seen_point = false;
    for &c in b {
        match c {
            b'0'..=b'9' => {
                digits += 1;
                if digits > EXACT_DIGITS {
                    return None;
                }
                mantissa = mantissa * 10 + u64::from(c - b'0');
                if seen_point {
                    fraction_digits += 1;
                }
            }
            b'.' if !seen_point => seen_point = true,
            _ => return None,
        }
    }
    // No digits, or a point with none after it, is not a number the fast path reads.
    if digits == 0 || (seen_point && fraction_digits == 0) {
        return None;
    }
    // Exact: mantissa < 10^15 < 2^53, and fraction_digits <= 15 < 23.
    let value = mantissa as f64 / EXACT_POWERS[fraction_digits];
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn same(text: &str) {
        let std = text.parse::<f64>().ok();
        let ours = parse_f64(text);
        assert_eq!(
            ours.map(f64::to_bits),
            std.map(f64::to_bits),
            "{text:?}: ours {ours:?}, std {std:?}"
        );
    }

    #[test]
    fn edges_match_the_standard_parser() {
        for t in [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "1523.4",
            "-3.25",
            "271",
            "0.1",
            "0.3",
            "9.95",
            "999999999999999",
            "999999999999999.0",
            "9999999999999999",
            "0.000000000000001",
            "123456789012345",
            "12345678901234.5",
            "1.7976931348623157e308",
            "5e-324",
            "1e23",
            "1E5",
            "1e+5",
            "",
            "-",
            ".",
            "1.",
            ".5",
            "-.5",
            "1.2.3",
            "1..2",
            "+1",
            "1e",
            "01",
            "00.5",
            "0.1234567890123456789",
            "NaN",
            "inf",
            "1_0",
            " 1",
            "1 ",
        ] {
            same(t);
        }
    }

    #[test]
    fn what_postgresql_refuses_as_out_of_range_is_refused() {
        for t in [
            "1e400",
            "-1e400",
            "1e-400",
            "-1e-400",
            "2.4703282292062327e-324",
            "0.1e-400",
        ] {
            assert_eq!(parse_float8(t), None, "{t}");
        }
        // Zero written as zero, and the subnormals, are taken.
        for (t, v) in [
            ("0", 0.0),
            ("-0", -0.0),
            ("0e-400", 0.0),
            ("0.000e5", 0.0),
            ("2.4703282292062328e-324", 5e-324),
            ("5e-324", 5e-324),
            ("2.2250738585072011e-308", 2.225_073_858_507_201e-308),
            ("1.7976931348623157e308", f64::MAX),
        ] {
            assert_eq!(
                parse_float8(t).map(f64::to_bits),
                Some(f64::to_bits(v)),
                "{t}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// Decimals as firmware prints them, up to 20 digits: the fast path's edge (15) and past.
        #[test]
        fn decimals_match_the_standard_parser(
            negative in any::<bool>(),
            int in "[0-9]{1,12}",
            frac in proptest::option::of("[0-9]{0,10}"),
        ) {
            let text = format!(
                "{}{int}{}",
                if negative { "-" } else { "" },
                frac.map(|f| format!(".{f}")).unwrap_or_default()
            );
            same(&text);
        }

        #[test]
        fn any_short_text_matches_the_standard_parser(text in "[-+.0-9eE]{0,20}") {
            same(&text);
        }

        /// Texts printed from random doubles (shortest round trip), the common and the odd.
        #[test]
        fn printed_doubles_match(v in any::<f64>().prop_filter("finite", |v| v.is_finite())) {
            same(&v.to_string());
            same(&format!("{v:.3}"));
            same(&format!("{v:e}"));
        }
    }
}
