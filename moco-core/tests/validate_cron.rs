//! Table tests of the robfig/cron `ParseStandard`-compatible schedule parser.

use moco_core::validate::cron::{CronError, FieldError, ScheduleKind, parse_standard};

#[test]
fn accepted_schedules() {
    let ok = [
        "* * * * *",
        "*/5 * * * *",
        "0 0 * * *",
        "0 3 * * 0",
        "15,45 */2 1-15 * mon-fri",
        "0 0 1 JAN,jul ?",
        "0 0 1 1-12/3 *",
        "5 4 * * sun",
        "0 22 * * 1-5",
        "59 23 31 12 6",
        "30/10 * * * *",
        "0 +3 * * *",
        "  0   1 * *  *  ",
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
        "@every 10s",
        "@every 1h30m",
        "@every 0s",
        "@every 1.5m",
        "TZ=Asia/Tokyo 0 3 * * *",
        "CRON_TZ=UTC @daily",
    ];
    for spec in ok {
        assert!(
            parse_standard(spec).is_ok(),
            "{spec:?} should parse: {:?}",
            parse_standard(spec)
        );
    }
}

#[test]
fn rejected_schedules() {
    let bad: [(&str, &str); 25] = [
        ("", "empty spec string"),
        ("* * * *", "expected exactly 5 fields, found 4"),
        ("0 * * * * *", "expected exactly 5 fields, found 6"),
        ("60 * * * *", "end of range (60) above maximum (59)"),
        ("* 24 * * *", "end of range (24) above maximum (23)"),
        ("* * 0 * *", "beginning of range (0) below minimum (1)"),
        ("* * 32 * *", "end of range (32) above maximum (31)"),
        ("* * * 13 *", "end of range (13) above maximum (12)"),
        ("* * * 0 *", "beginning of range (0) below minimum (1)"),
        ("* * * * 7", "end of range (7) above maximum (6)"),
        (
            "5-1 * * * *",
            "beginning of range (5) beyond end of range (1)",
        ),
        ("1-2-3 * * * *", "too many hyphens"),
        ("*/2/3 * * * *", "too many slashes"),
        ("*/0 * * * *", "step of range should be a positive number"),
        ("*/-1 * * * *", "negative number (-1) not allowed"),
        ("a * * * *", "failed to parse int from \"a\""),
        ("1,,2 * * * *", "failed to parse int from \"\""),
        ("* * * foo *", "failed to parse int from \"foo\""),
        ("* * * * monday", "failed to parse int from \"monday\""),
        ("* * * jan-mon *", "failed to parse int from \"mon\""),
        ("@often", "unrecognized descriptor: @often"),
        ("@daily ", "unrecognized descriptor"),
        ("@every", "unrecognized descriptor"),
        ("@every 10", "failed to parse duration @every 10"),
        ("TZ=Asia/Tokyo", "provided bad location"),
    ];
    for (spec, want) in bad {
        match parse_standard(spec) {
            Ok(s) => panic!("{spec:?} should be rejected, parsed as {s:?}"),
            Err(e) => assert!(
                e.to_string().contains(want),
                "{spec:?}: {e} does not contain {want:?}"
            ),
        }
    }
}

#[test]
fn error_values_are_typed() {
    assert_eq!(
        parse_standard("* * * * 9"),
        Err(CronError::Field {
            field: "day-of-week",
            expr: "9".into(),
            reason: FieldError::AboveMaximum { end: 9, max: 6 },
        })
    );
    assert!(matches!(
        parse_standard("1 2 3"),
        Err(CronError::FieldCount { found: 3, .. })
    ));
}

#[test]
fn every_rounds_like_robfig() {
    let every = |s: &str| match parse_standard(s).map(|s| s.kind) {
        Ok(ScheduleKind::Every { seconds }) => seconds,
        other => panic!("{s}: {other:?}"),
    };
    assert_eq!(every("@every 10s"), 10);
    assert_eq!(every("@every 1h"), 3600);
    assert_eq!(every("@every 1500ms"), 1);
    assert_eq!(every("@every 100ms"), 1);
    assert_eq!(every("@every 2m30s"), 150);
}

#[test]
fn descriptors_expand_to_calendar_fields() {
    let cal = |s: &str| match parse_standard(s).map(|s| s.kind) {
        Ok(ScheduleKind::Calendar(c)) => c,
        other => panic!("{s}: {other:?}"),
    };
    let daily = cal("@daily");
    assert_eq!((daily.minute, daily.hour), (1, 1));
    assert!(daily.day_of_month_any && daily.day_of_week_any);
    let weekly = cal("@weekly");
    assert_eq!(weekly.day_of_week, 1);
    assert!(!weekly.day_of_week_any);
    let yearly = cal("@yearly");
    assert_eq!((yearly.day_of_month, yearly.month), (1 << 1, 1 << 1));
    assert_eq!(cal("@hourly").hour, (1u64 << 24) - 1);
    assert_eq!(cal("0 0 * * *"), daily);
}
