//! Kubernetes resource quantities (`10Gi`, `500M`, `1.5e3`), parsed exactly enough to compare
//! storage requests.

use std::cmp::Ordering;

use thiserror::Error;

/// A parsed quantity: `sign * mantissa * 10^exp10 * 2^exp2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    negative: bool,
    mantissa: u128,
    exp10: i32,
    exp2: u32,
}

/// Why a quantity string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("quantity {0:?} is not a valid Kubernetes quantity (e.g. \"10Gi\", \"500M\")")]
pub struct QuantityError(pub String);

impl Quantity {
    /// Parses the canonical Kubernetes quantity syntax:
    /// `[+-]digits[.digits](Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|e[+-]digits|E[+-]digits)?`.
    pub fn parse(input: &str) -> Result<Self, QuantityError> {
        let err = || QuantityError(input.to_owned());
        let mut rest = input;
        let mut negative = false;
        if let Some(r) = rest.strip_prefix('-') {
            negative = true;
            rest = r;
        } else if let Some(r) = rest.strip_prefix('+') {
            rest = r;
        }
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(r) = rest.strip_prefix('.') {
            let frac_len = r.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &r[..frac_len];
            rest = &r[frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err());
        }
        let digits: String = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        // Keep at most 38 significant digits; quantities that precise do not occur in practice.
        if digits.len() > 38 {
            return Err(err());
        }
        let mantissa: u128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| err())?
        };
        let frac_len = i32::try_from(frac_part.len()).map_err(|_| err())?;
        let mut exp10 = -frac_len;
        let mut exp2 = 0;
        match rest {
            "" => {}
            "Ki" => exp2 = 10,
            "Mi" => exp2 = 20,
            "Gi" => exp2 = 30,
            "Ti" => exp2 = 40,
            "Pi" => exp2 = 50,
            "Ei" => exp2 = 60,
            "n" => exp10 -= 9,
            "u" => exp10 -= 6,
            "m" => exp10 -= 3,
            "k" => exp10 += 3,
            "M" => exp10 += 6,
            "G" => exp10 += 9,
            "T" => exp10 += 12,
            "P" => exp10 += 15,
            "E" => exp10 += 18,
            suffix => {
                let exp = suffix
                    .strip_prefix('e')
                    .or_else(|| suffix.strip_prefix('E'))
                    .ok_or_else(err)?;
                let body = exp.strip_prefix(['+', '-']).unwrap_or(exp);
                if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(err());
                }
                let e: i32 = exp.parse().map_err(|_| err())?;
                exp10 = exp10.checked_add(e).ok_or_else(err)?;
            }
        }
        Ok(Quantity {
            negative: negative && mantissa != 0,
            mantissa,
            exp10,
            exp2,
        })
    }

    /// Whether the quantity is zero.
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// Approximate value as a float (used only when exact comparison would overflow).
    fn approx(&self) -> f64 {
        let v = self.mantissa as f64 * 10f64.powi(self.exp10) * 2f64.powi(self.exp2 as i32);
        if self.negative { -v } else { v }
    }

    /// Exact magnitude as `(m, e)` meaning `m * 10^e`, if it fits.
    fn decimal(&self) -> Option<(u128, i32)> {
        let m = self.mantissa.checked_mul(1u128.checked_shl(self.exp2)?)?;
        Some((m, self.exp10))
    }

    fn cmp_magnitude(&self, other: &Self) -> Ordering {
        let exact = || {
            let (m1, e1) = self.decimal()?;
            let (m2, e2) = other.decimal()?;
            let e = e1.min(e2);
            let scale = |m: u128, from: i32| {
                10u128
                    .checked_pow(u32::try_from(from - e).ok()?)
                    .and_then(|p| m.checked_mul(p))
            };
            Some(scale(m1, e1)?.cmp(&scale(m2, e2)?))
        };
        exact().unwrap_or_else(|| {
            self.approx()
                .abs()
                .partial_cmp(&other.approx().abs())
                .unwrap_or(Ordering::Equal)
        })
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.negative, other.negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.cmp_magnitude(other),
            (true, true) => other.cmp_magnitude(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        match Quantity::parse(s) {
            Ok(q) => q,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn compares_across_suffixes() {
        assert_eq!(q("1Gi").cmp(&q("1073741824")), Ordering::Equal);
        assert_eq!(q("1G").cmp(&q("1Gi")), Ordering::Less);
        assert_eq!(q("1.5Gi").cmp(&q("1536Mi")), Ordering::Equal);
        assert_eq!(q("1e3").cmp(&q("1k")), Ordering::Equal);
        assert_eq!(q("500m").cmp(&q("0.5")), Ordering::Equal);
        assert_eq!(q("-1").cmp(&q("0")), Ordering::Less);
        assert_eq!(q("2Ei").cmp(&q("1E")), Ordering::Greater);
        assert_eq!(q("0Gi").cmp(&q("-0")), Ordering::Equal);
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "", "Gi", "1GB", "1 Gi", "1e", "1e+", "--1", ".", "1.2.3", "1i",
        ] {
            assert!(Quantity::parse(bad).is_err(), "{bad}");
        }
    }
}
