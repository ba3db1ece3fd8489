//! A schedule parser with the semantics of robfig/cron v3 `ParseStandard`, which MOCO uses for
//! `spec.logRotationSchedule` and `BackupPolicy.spec.schedule`.
//!
//! Accepted forms:
//!
//! * five whitespace-separated fields `minute hour day-of-month month day-of-week`; each field is
//!   a comma-separated list of `*`, `?`, `N`, `N-M`, optionally followed by `/STEP`
//!   (`N/STEP` means `N-max/STEP`); months accept `jan`..`dec` and weekdays `sun`..`sat`
//!   (case-insensitive); weekdays run 0 (Sunday) to 6;
//! * the descriptors `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
//!   `@hourly` and `@every <Go duration>`;
//! * either of the above preceded by `TZ=<zone> ` or `CRON_TZ=<zone> `.

use thiserror::Error;

use super::duration::{DurationError, parse_go_duration};
use crate::time::{Timestamp, civil_from_days};

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The time zone given with a `TZ=`/`CRON_TZ=` prefix, if any.
    pub time_zone: Option<String>,
    /// When the schedule fires.
    pub kind: ScheduleKind,
}

/// The two kinds of schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleKind {
    /// A calendar schedule: one bit per allowed value of each field.
    Calendar(CalendarSpec),
    /// `@every <duration>`: a fixed interval in whole seconds (at least one second, as in robfig/cron).
    Every {
        /// The interval in seconds.
        seconds: u64,
    },
}

/// Allowed values of each calendar field as bit sets (bit `n` set = value `n` allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CalendarSpec {
    /// Minutes 0–59.
    pub minute: u64,
    /// Hours 0–23.
    pub hour: u64,
    /// Days of month 1–31.
    pub day_of_month: u64,
    /// Months 1–12.
    pub month: u64,
    /// Weekdays 0 (Sunday)–6.
    pub day_of_week: u64,
    /// Day of month was `*` or `?` (robfig/cron then lets the weekday alone decide).
    pub day_of_month_any: bool,
    /// Day of week was `*` or `?`.
    pub day_of_week_any: bool,
}

/// Why a schedule string was rejected; the messages follow robfig/cron's.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CronError {
    /// The schedule is empty.
    #[error("empty spec string")]
    Empty,
    /// A `TZ=`/`CRON_TZ=` prefix is malformed.
    #[error("provided bad location {0:?}")]
    BadLocation(String),
    /// A descriptor starting with `@` is not known.
    #[error("unrecognized descriptor: {0}")]
    UnknownDescriptor(String),
    /// The duration of `@every` does not parse.
    #[error("failed to parse duration {descriptor}: {source}")]
    BadDuration {
        /// The whole descriptor.
        descriptor: String,
        /// The duration error.
        source: DurationError,
    },
    /// Not exactly five fields.
    #[error("expected exactly 5 fields, found {found}: {spec:?}")]
    FieldCount {
        /// Number of fields found.
        found: usize,
        /// The schedule.
        spec: String,
    },
    /// A field could not be parsed.
    #[error("{field} field {expr:?}: {reason}")]
    Field {
        /// `minute`, `hour`, `day-of-month`, `month` or `day-of-week`.
        field: &'static str,
        /// The offending list element.
        expr: String,
        /// What is wrong with it.
        reason: FieldError,
    },
}

/// What is wrong inside one field of a calendar schedule.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FieldError {
    /// Not a number (and not a name valid for this field).
    #[error("failed to parse int from {0:?}")]
    NotANumber(String),
    /// A negative number.
    #[error("negative number ({0}) not allowed")]
    Negative(i64),
    /// More than one `-`.
    #[error("too many hyphens")]
    TooManyHyphens,
    /// More than one `/`.
    #[error("too many slashes")]
    TooManySlashes,
    /// Range start below the field minimum.
    #[error("beginning of range ({start}) below minimum ({min})")]
    BelowMinimum {
        /// Range start.
        start: u32,
        /// Field minimum.
        min: u32,
    },
    /// Range end above the field maximum.
    #[error("end of range ({end}) above maximum ({max})")]
    AboveMaximum {
        /// Range end.
        end: u32,
        /// Field maximum.
        max: u32,
    },
    /// Range start after range end.
    #[error("beginning of range ({start}) beyond end of range ({end})")]
    StartAfterEnd {
        /// Range start.
        start: u32,
        /// Range end.
        end: u32,
    },
    /// A step of zero.
    #[error("step of range should be a positive number")]
    ZeroStep,
}

struct Bounds {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
    /// Value of `names[0]`.
    names_base: u32,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

const FIELDS: [Bounds; 5] = [
    Bounds {
        name: "minute",
        min: 0,
        max: 59,
        names: &[],
        names_base: 0,
    },
    Bounds {
        name: "hour",
        min: 0,
        max: 23,
        names: &[],
        names_base: 0,
    },
    Bounds {
        name: "day-of-month",
        min: 1,
        max: 31,
        names: &[],
        names_base: 0,
    },
    Bounds {
        name: "month",
        min: 1,
        max: 12,
        names: &MONTHS,
        names_base: 1,
    },
    Bounds {
        name: "day-of-week",
        min: 0,
        max: 6,
        names: &WEEKDAYS,
        names_base: 0,
    },
];

/// Parses `spec` like robfig/cron v3 `ParseStandard`.
pub fn parse_standard(spec: &str) -> Result<Schedule, CronError> {
    if spec.is_empty() {
        return Err(CronError::Empty);
    }
    let mut rest = spec;
    let mut time_zone = None;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let (Some(eq), Some(space)) = (spec.find('='), spec.find(' ')) else {
            return Err(CronError::BadLocation(spec.to_owned()));
        };
        let zone = &spec[eq + 1..space];
        if !valid_zone_name(zone) {
            return Err(CronError::BadLocation(zone.to_owned()));
        }
        time_zone = Some(zone.to_owned());
        rest = spec[space..].trim();
    }
    if rest.starts_with('@') {
        return parse_descriptor(rest).map(|kind| Schedule { time_zone, kind });
    }
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(CronError::FieldCount {
            found: fields.len(),
            spec: spec.to_owned(),
        });
    }
    let mut bits = [0u64; 5];
    let mut any = [false; 5];
    for (i, (field, bounds)) in fields.iter().zip(FIELDS.iter()).enumerate() {
        let (b, star) = parse_field(field, bounds)?;
        bits[i] = b;
        any[i] = star;
    }
    Ok(Schedule {
        time_zone,
        kind: ScheduleKind::Calendar(CalendarSpec {
            minute: bits[0],
            hour: bits[1],
            day_of_month: bits[2],
            month: bits[3],
            day_of_week: bits[4],
            day_of_month_any: any[2],
            day_of_week_any: any[4],
        }),
    })
}

impl Schedule {
    /// The first time the schedule fires strictly after `after`, in UTC (the zone of a
    /// `TZ=` prefix is not applied: there is no zone database here). Calendar schedules fire
    /// at the start of a minute; `@every` fires `seconds` after `after`. `None` when a
    /// calendar schedule never fires (e.g. `0 0 31 2 *`) within eight years.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.kind {
            ScheduleKind::Every { seconds } => {
                Some(Timestamp(after.0 + i64::try_from(*seconds).ok()?))
            }
            ScheduleKind::Calendar(spec) => spec.next_after(after),
        }
    }
}

impl CalendarSpec {
    fn day_matches(&self, day: i64) -> bool {
        let (_, month, dom) = civil_from_days(day);
        // 1970-01-01 was a Thursday (4).
        let dow = (day + 4).rem_euclid(7);
        let bit = |set: u64, v: i64| set & (1u64 << v) != 0;
        if !bit(self.month, month) {
            return false;
        }
        let by_dom = bit(self.day_of_month, dom);
        let by_dow = bit(self.day_of_week, dow);
        // robfig/cron: when either day field is `*`, both must match; else either may.
        if self.day_of_month_any || self.day_of_week_any {
            by_dom && by_dow
        } else {
            by_dom || by_dow
        }
    }

    fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        // The first whole minute after `after`.
        let start = (after.0.div_euclid(60) + 1) * 60;
        let first_day = start.div_euclid(86_400);
        for day in first_day..first_day + 8 * 366 {
            if !self.day_matches(day) {
                continue;
            }
            let from = if day == first_day {
                start.rem_euclid(86_400) / 60
            } else {
                0
            };
            let minute_of_day = (from..24 * 60).find(|m| {
                self.hour & (1u64 << (m / 60)) != 0 && self.minute & (1u64 << (m % 60)) != 0
            });
            if let Some(m) = minute_of_day {
                return Some(Timestamp(day * 86_400 + m * 60));
            }
        }
        None
    }
}

/// Time zone names are checked for shape only (IANA names such as `Asia/Tokyo`, `UTC`,
/// `Etc/GMT+9`, `Local`); there is no zone database here.
fn valid_zone_name(zone: &str) -> bool {
    !zone.is_empty()
        && !zone.starts_with('/')
        && !zone.ends_with('/')
        && !zone.contains("..")
        && zone
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '+'))
}

fn parse_descriptor(descriptor: &str) -> Result<ScheduleKind, CronError> {
    let calendar = |minute: u64, hour: u64, dom: u64, month: u64, dow: u64| {
        ScheduleKind::Calendar(CalendarSpec {
            minute,
            hour,
            day_of_month: dom,
            month,
            day_of_week: dow,
            day_of_month_any: dom == all_bits(1, 31),
            day_of_week_any: dow == all_bits(0, 6),
        })
    };
    let all_hours = all_bits(0, 23);
    let all_days = all_bits(1, 31);
    let all_months = all_bits(1, 12);
    let all_weekdays = all_bits(0, 6);
    match descriptor {
        "@yearly" | "@annually" => Ok(calendar(1, 1, 1 << 1, 1 << 1, all_weekdays)),
        "@monthly" => Ok(calendar(1, 1, 1 << 1, all_months, all_weekdays)),
        "@weekly" => Ok(calendar(1, 1, all_days, all_months, 1)),
        "@daily" | "@midnight" => Ok(calendar(1, 1, all_days, all_months, all_weekdays)),
        "@hourly" => Ok(calendar(1, all_hours, all_days, all_months, all_weekdays)),
        _ => {
            let Some(duration) = descriptor.strip_prefix("@every ") else {
                return Err(CronError::UnknownDescriptor(descriptor.to_owned()));
            };
            let nanos = parse_go_duration(duration).map_err(|source| CronError::BadDuration {
                descriptor: descriptor.to_owned(),
                source,
            })?;
            // robfig/cron: `Every` truncates to whole seconds and raises anything below 1s to 1s.
            let seconds = u64::try_from(nanos / 1_000_000_000).unwrap_or(0).max(1);
            Ok(ScheduleKind::Every { seconds })
        }
    }
}

fn all_bits(min: u32, max: u32) -> u64 {
    (min..=max).fold(0, |acc, v| acc | (1u64 << v))
}

fn parse_field(field: &str, bounds: &Bounds) -> Result<(u64, bool), CronError> {
    let mut bits = 0;
    let mut star = false;
    for expr in field.split(',') {
        let (b, s) = parse_range(expr, bounds).map_err(|reason| CronError::Field {
            field: bounds.name,
            expr: expr.to_owned(),
            reason,
        })?;
        bits |= b;
        star |= s;
    }
    Ok((bits, star))
}

fn parse_range(expr: &str, bounds: &Bounds) -> Result<(u64, bool), FieldError> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end, mut star) = if low_and_high[0] == "*" || low_and_high[0] == "?" {
        (bounds.min, bounds.max, true)
    } else {
        let start = parse_int_or_name(low_and_high[0], bounds)?;
        let end = match low_and_high.len() {
            1 => start,
            2 => parse_int_or_name(low_and_high[1], bounds)?,
            _ => return Err(FieldError::TooManyHyphens),
        };
        (start, end, false)
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = parse_int(range_and_step[1])?;
            if single {
                end = bounds.max;
            }
            if step > 1 {
                star = false;
            }
            step
        }
        _ => return Err(FieldError::TooManySlashes),
    };
    if start < bounds.min {
        return Err(FieldError::BelowMinimum {
            start,
            min: bounds.min,
        });
    }
    if end > bounds.max {
        return Err(FieldError::AboveMaximum {
            end,
            max: bounds.max,
        });
    }
    if start > end {
        return Err(FieldError::StartAfterEnd { start, end });
    }
    if step == 0 {
        return Err(FieldError::ZeroStep);
    }
    let bits = (start..=end)
        .step_by(step as usize)
        .fold(0u64, |acc, v| acc | (1u64 << v));
    Ok((bits, star))
}

fn parse_int_or_name(expr: &str, bounds: &Bounds) -> Result<u32, FieldError> {
    let lower = expr.to_ascii_lowercase();
    if let Some(pos) = bounds.names.iter().position(|n| *n == lower) {
        return Ok(bounds.names_base + pos as u32);
    }
    parse_int(expr)
}

/// Go `strconv.Atoi` followed by robfig's "negative number not allowed" check.
fn parse_int(expr: &str) -> Result<u32, FieldError> {
    let digits = expr.strip_prefix('+').unwrap_or(expr);
    let (negative, digits) = match digits.strip_prefix('-') {
        Some(d) if !expr.starts_with('+') => (true, d),
        _ => (false, digits),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FieldError::NotANumber(expr.to_owned()));
    }
    let value: i64 = digits
        .parse()
        .map_err(|_| FieldError::NotANumber(expr.to_owned()))?;
    if negative && value != 0 {
        return Err(FieldError::Negative(-value));
    }
    // Values above u32 are out of every field's range anyway.
    Ok(u32::try_from(value).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }

    fn next(spec: &str, after: &str) -> String {
        parse_standard(spec)
            .unwrap()
            .next_after(at(after))
            .map(|t| t.to_string())
            .unwrap_or_else(|| "never".to_owned())
    }

    #[test]
    fn next_firing_times() {
        // MOCO's default rotation: every five minutes.
        assert_eq!(
            next("*/5 * * * *", "2026-11-23T21:02:59Z"),
            "2026-11-23T21:05:00Z"
        );
        assert_eq!(
            next("*/5 * * * *", "2026-11-23T21:05:00Z"),
            "2026-11-23T21:10:00Z"
        );
        assert_eq!(
            next("0 0 * * *", "2026-12-31T23:59:00Z"),
            "2027-01-01T00:00:00Z"
        );
        // 2028 is a leap year.
        assert_eq!(
            next("30 6 29 2 *", "2026-03-01T00:00:00Z"),
            "2028-02-29T06:30:00Z"
        );
        // Both day fields restricted: either matches (2026-11-24 is a Tuesday).
        assert_eq!(
            next("0 12 1 * tue", "2026-11-23T13:00:00Z"),
            "2026-11-24T12:00:00Z"
        );
        // Weekday alone (day-of-month `*`): only Sundays.
        assert_eq!(
            next("0 3 * * 0", "2026-11-23T00:00:00Z"),
            "2026-11-29T03:00:00Z"
        );
        assert_eq!(
            next("@hourly", "2026-11-23T21:00:00Z"),
            "2026-11-23T22:00:00Z"
        );
        assert_eq!(
            next("@every 90s", "2026-11-23T21:00:00Z"),
            "2026-11-23T21:01:30Z"
        );
        assert_eq!(next("0 0 31 2 *", "2026-11-23T21:00:00Z"), "never");
    }

    #[test]
    fn bits_of_simple_fields() {
        let Ok(Schedule {
            kind: ScheduleKind::Calendar(c),
            ..
        }) = parse_standard("*/15 1-3 * jan,MAR mon-fri")
        else {
            panic!("should parse");
        };
        assert_eq!(c.minute, (1 << 0) | (1 << 15) | (1 << 30) | (1 << 45));
        assert_eq!(c.hour, 0b1110);
        assert_eq!(c.month, (1 << 1) | (1 << 3));
        assert_eq!(c.day_of_week, 0b11_1110);
        assert!(c.day_of_month_any);
        assert!(!c.day_of_week_any);
    }

    #[test]
    fn single_value_with_step_runs_to_max() {
        let Ok(Schedule {
            kind: ScheduleKind::Calendar(c),
            ..
        }) = parse_standard("50/5 * * * *")
        else {
            panic!("should parse");
        };
        assert_eq!(c.minute, (1 << 50) | (1 << 55));
    }
}
