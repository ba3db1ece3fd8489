//! Kubernetes resource quantities (`10Gi`, `500M`, `1.5Gi`, `100m`, `1e3`).
//!
//! Storage requests and memory limits arrive as quantity text. Comparing them needs the exact
//! value (`1Gi` equals `1024Mi`), so a [`Quantity`] keeps the value in nano-units (the finest
//! precision Kubernetes keeps) next to the text it was written as, which is what gets shown and
//! written back.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// Nano-units per unit.
const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// More significant digits than this cannot be held exactly.
const MAX_DIGITS: usize = 38;

/// A Kubernetes quantity: the exact value plus the text it was written as.
///
/// Equality, ordering and hashing use the value only, like Kubernetes' semantic equality:
/// `1Gi == 1024Mi` and `1k == 1000`.
#[derive(Clone, Debug)]
pub struct Quantity {
    nanos: i128,
    text: String,
}

/// Quantity text that Kubernetes would reject (or that is too large to hold exactly).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("invalid quantity {text:?}: {kind}")]
pub struct QuantityError {
    /// The text as given.
    pub text: String,
    /// What is wrong with it.
    pub kind: QuantityErrorKind,
}

/// The ways quantity text can be wrong.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum QuantityErrorKind {
    /// Nothing to parse.
    #[error("empty")]
    Empty,
    /// No digits before the suffix (`Gi`, `-`, `.`).
    #[error("no digits")]
    NoDigits,
    /// The text after the number is neither a suffix nor an exponent.
    #[error("unknown suffix {0:?}")]
    UnknownSuffix(String),
    /// `e`/`E` followed by something that is not an integer.
    #[error("malformed exponent")]
    BadExponent,
    /// The value does not fit 128-bit nano-units.
    #[error("value out of range")]
    OutOfRange,
}

impl Quantity {
    /// Parses Kubernetes quantity text: an optionally signed decimal number followed by a
    /// binary suffix (`Ki`…`Ei`), a decimal suffix (`n`, `u`, `m`, `k`, `M`…`E`) or a decimal
    /// exponent (`e3`, `E-2`). Precision below one nano-unit is rounded up, as Kubernetes does.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let err = |kind| QuantityError {
            text: text.to_owned(),
            kind,
        };
        if text.is_empty() {
            return Err(err(QuantityErrorKind::Empty));
        }
        let (negative, rest) = split_sign(text);
        let int_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (int_part, after_int) = rest.split_at(int_len);
        let (frac_part, suffix) = match after_int.strip_prefix('.') {
            Some(after_dot) => {
                let frac_len = after_dot
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(after_dot.len());
                after_dot.split_at(frac_len)
            }
            None => ("", after_int),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err(QuantityErrorKind::NoDigits));
        }
        let digits: String = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > MAX_DIGITS {
            return Err(err(QuantityErrorKind::OutOfRange));
        }
        let mantissa: u128 = if digits.is_empty() {
            0
        } else {
            digits
                .parse()
                .map_err(|_| err(QuantityErrorKind::OutOfRange))?
        };
        let frac_len =
            i64::try_from(frac_part.len()).map_err(|_| err(QuantityErrorKind::OutOfRange))?;

        let (binary_shift, decimal_exp) = parse_suffix(suffix).map_err(err)?;
        let magnitude = if mantissa == 0 {
            0
        } else {
            let scaled = mantissa
                .checked_mul(1u128 << binary_shift)
                .ok_or_else(|| err(QuantityErrorKind::OutOfRange))?;
            // value = scaled * 10^(decimal_exp - frac_len); in nanos add 9.
            let pow = decimal_exp
                .checked_sub(frac_len)
                .and_then(|p| p.checked_add(9))
                .ok_or_else(|| err(QuantityErrorKind::OutOfRange))?;
            scale_pow10(scaled, pow).ok_or_else(|| err(QuantityErrorKind::OutOfRange))?
        };
        let magnitude =
            i128::try_from(magnitude).map_err(|_| err(QuantityErrorKind::OutOfRange))?;
        Ok(Quantity {
            nanos: if negative { -magnitude } else { magnitude },
            text: text.to_owned(),
        })
    }

    /// A whole number of units (bytes for storage and memory), written as plain digits.
    pub fn from_units(units: u64) -> Self {
        Quantity {
            nanos: i128::from(units) * NANOS_PER_UNIT,
            text: units.to_string(),
        }
    }

    /// The value in nano-units (`1` is `1_000_000_000`).
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The value in whole units, rounded up like Kubernetes' `Quantity.Value()`: `100m` is 1.
    pub fn units_ceil(&self) -> i128 {
        let unit = NANOS_PER_UNIT;
        let q = self.nanos.div_euclid(unit);
        if self.nanos.rem_euclid(unit) == 0 {
            q
        } else {
            q + 1
        }
    }

    /// True for any spelling of zero (`0`, `0Gi`, `0.0`).
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// The text this quantity was written as.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

fn split_sign(text: &str) -> (bool, &str) {
    if let Some(rest) = text.strip_prefix('-') {
        (true, rest)
    } else if let Some(rest) = text.strip_prefix('+') {
        (false, rest)
    } else {
        (false, text)
    }
}

/// Returns (binary shift, decimal exponent) for a suffix.
fn parse_suffix(suffix: &str) -> Result<(u32, i64), QuantityErrorKind> {
    let table: Option<(u32, i64)> = match suffix {
        "" => Some((0, 0)),
        "Ki" => Some((10, 0)),
        "Mi" => Some((20, 0)),
        "Gi" => Some((30, 0)),
        "Ti" => Some((40, 0)),
        "Pi" => Some((50, 0)),
        "Ei" => Some((60, 0)),
        "n" => Some((0, -9)),
        "u" => Some((0, -6)),
        "m" => Some((0, -3)),
        "k" => Some((0, 3)),
        "M" => Some((0, 6)),
        "G" => Some((0, 9)),
        "T" => Some((0, 12)),
        "P" => Some((0, 15)),
        "E" => Some((0, 18)),
        _ => None,
    };
    if let Some(found) = table {
        return Ok(found);
    }
    let exponent = suffix
        .strip_prefix('e')
        .or_else(|| suffix.strip_prefix('E'))
        .ok_or_else(|| QuantityErrorKind::UnknownSuffix(suffix.to_owned()))?;
    let (negative, digits) = split_sign(exponent);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(QuantityErrorKind::BadExponent);
    }
    let value: i64 = digits.parse().map_err(|_| QuantityErrorKind::OutOfRange)?;
    Ok((0, if negative { -value } else { value }))
}

/// `value * 10^pow`, rounding a fractional result up; `None` on overflow.
fn scale_pow10(value: u128, pow: i64) -> Option<u128> {
    if pow >= 0 {
        let p = u32::try_from(pow).ok()?;
        value.checked_mul(10u128.checked_pow(p)?)
    } else {
        let p = u32::try_from(pow.checked_neg()?).ok()?;
        match 10u128.checked_pow(p) {
            Some(divisor) => Some(value.div_ceil(divisor)),
            // The divisor exceeds any u128, so the (non-zero) value rounds up to one nano.
            None => Some(1),
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.nanos.hash(state);
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Kubernetes quantity such as \"10Gi\" or a number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Quantity, E> {
                Quantity::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quantity, E> {
                Ok(Quantity::from_units(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Quantity, E> {
                Quantity::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Quantity, E> {
                Quantity::parse(&v.to_string()).map_err(E::custom)
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl schemars::JsonSchema for Quantity {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Quantity".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "anyOf": [{ "type": "string" }, { "type": "number" }],
            "description": "Kubernetes quantity: `10Gi`, `500M`, `1.5Gi`, `100m`, `1e3`"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GI: i128 = 1 << 30;
    const N: i128 = NANOS_PER_UNIT;

    #[test]
    fn parses_kubernetes_spellings() {
        let cases: &[(&str, i128)] = &[
            ("0", 0),
            ("10Gi", 10 * GI * N),
            ("1.5Gi", 3 * (GI / 2) * N),
            ("1G", 1_000_000_000 * N),
            ("500M", 500_000_000 * N),
            ("1Ki", 1024 * N),
            ("1Mi", (1 << 20) * N),
            ("2Ti", 2 * (1 << 40) * N),
            ("1Pi", (1 << 50) * N),
            ("1Ei", (1 << 60) * N),
            ("1E", 1_000_000_000_000_000_000 * N),
            ("1T", 1_000_000_000_000 * N),
            ("1P", 1_000_000_000_000_000 * N),
            ("100m", N / 10),
            ("1e3", 1000 * N),
            ("1E3", 1000 * N),
            ("1e-3", N / 1000),
            ("+5k", 5000 * N),
            ("-5k", -5000 * N),
            (".5", N / 2),
            ("5.", 5 * N),
            ("0.000000001", 1),
            ("1n", 1),
            ("1u", 1000),
            ("007", 7 * N),
            ("0e99999", 0),
        ];
        for (text, nanos) in cases {
            let q = Quantity::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(q.nanos(), *nanos, "{text}");
            assert_eq!(q.as_str(), *text);
        }
    }

    #[test]
    fn rounds_sub_nano_precision_up() {
        assert_eq!(Quantity::parse("0.0000000001").map(|q| q.nanos()), Ok(1));
        assert_eq!(Quantity::parse("1e-30").map(|q| q.nanos()), Ok(1));
        assert_eq!(Quantity::parse("15e-10").map(|q| q.nanos()), Ok(2));
    }

    #[test]
    fn rejects_bad_text_naming_it() {
        let cases: &[(&str, QuantityErrorKind)] = &[
            ("", QuantityErrorKind::Empty),
            ("Gi", QuantityErrorKind::NoDigits),
            ("-", QuantityErrorKind::NoDigits),
            (".", QuantityErrorKind::NoDigits),
            ("10Gb", QuantityErrorKind::UnknownSuffix("Gb".into())),
            ("10 Gi", QuantityErrorKind::UnknownSuffix(" Gi".into())),
            ("1.2.3", QuantityErrorKind::UnknownSuffix(".3".into())),
            ("1e", QuantityErrorKind::BadExponent),
            ("1ex", QuantityErrorKind::BadExponent),
            ("1e+", QuantityErrorKind::BadExponent),
            ("1e400", QuantityErrorKind::OutOfRange),
            ("1e99999999999999999999", QuantityErrorKind::OutOfRange),
            (
                "99999999999999999999999999999999999999999Ei",
                QuantityErrorKind::OutOfRange,
            ),
        ];
        for (text, kind) in cases {
            let err = Quantity::parse(text).err();
            assert_eq!(
                err,
                Some(QuantityError {
                    text: (*text).to_owned(),
                    kind: kind.clone()
                }),
                "{text}"
            );
        }
        let msg = Quantity::parse("10Gb").err().map(|e| e.to_string());
        assert_eq!(
            msg.as_deref(),
            Some("invalid quantity \"10Gb\": unknown suffix \"Gb\"")
        );
    }

    #[test]
    fn compares_by_value() {
        let q = |t: &str| Quantity::parse(t).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(q("1Gi"), q("1024Mi"));
        assert_eq!(q("1k"), q("1000"));
        assert!(q("1G") < q("1Gi"));
        assert!(q("1.5Gi") > q("1Gi"));
        assert_eq!(q("1Gi").units_ceil(), GI);
        assert_eq!(q("100m").units_ceil(), 1);
        assert_eq!(q("-100m").units_ceil(), 0);
        assert!(q("0Gi").is_zero());
        assert_eq!(Quantity::from_units(1024), q("1Ki"));
    }

    #[test]
    fn serde_round_trips_text_and_accepts_numbers() {
        let q: Quantity = serde_json::from_str("\"1.5Gi\"").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(serde_json::to_string(&q).ok().as_deref(), Some("\"1.5Gi\""));
        let n: Quantity = serde_json::from_str("2048").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(n, Quantity::from_units(2048));
        let bad = serde_json::from_str::<Quantity>("\"ten\"");
        assert!(bad.is_err_and(|e| e.to_string().contains("\"ten\"")));
        // Neither a string nor a number: the message says what is expected.
        let wrong_type = serde_json::from_str::<Quantity>("[]");
        assert!(
            wrong_type.is_err_and(|e| e.to_string().contains("a Kubernetes quantity")),
            "the error names what was expected"
        );
    }

    /// 38 significant digits are the most a quantity may have (u128 holds every 38-digit
    /// number); the 39th is out of range even when the value itself is small.
    #[test]
    fn thirty_eight_significant_digits_are_the_most() {
        let digits = |n: usize| format!("1{}e-30", "0".repeat(n - 1));
        assert_eq!(MAX_DIGITS, 38);
        assert_eq!(
            Quantity::parse(&digits(38)).map(|q| q.nanos()),
            Ok(10_000_000 * N)
        );
        assert_eq!(
            Quantity::parse(&digits(39)).map_err(|e| e.kind),
            Err(QuantityErrorKind::OutOfRange)
        );
    }
}
