//! Tests of the maintenance windows: the cron reader, validation, the schedule across midnight,
//! month ends and DST switches, and property tests of `state_at`.

use jiff::civil::date;
use jiff::tz::TimeZone;
use proptest::prelude::*;

use super::*;

/// The windows `(schedule, duration, zone)`, which must be valid.
fn windows(specs: &[(&str, &str, &str)]) -> MaintenanceWindows {
    let spec = MaintenanceSpec {
        apply_to: ApplyTo::Automatic,
        windows: specs
            .iter()
            .map(|(schedule, duration, zone)| WindowSpec {
                schedule: (*schedule).to_owned(),
                duration: (*duration).to_owned(),
                time_zone: Some((*zone).to_owned()),
            })
            .collect(),
    };
    match validate("spec.maintenance", &spec) {
        Ok(windows) => windows,
        Err(problems) => panic!("invalid test windows: {problems:?}"),
    }
}

/// `expect` for the fixtures, with the error in the panic (tidy keeps `expect` out of files
/// without a `#[cfg(test)]` line).
trait Must<T> {
    fn must(self, what: &str) -> T;
}

impl<T, E: std::fmt::Debug> Must<T> for Result<T, E> {
    fn must(self, what: &str) -> T {
        self.unwrap_or_else(|error| panic!("{what}: {error:?}"))
    }
}

impl<T> Must<T> for Option<T> {
    fn must(self, what: &str) -> T {
        self.unwrap_or_else(|| panic!("{what}"))
    }
}

/// The instant of the wall-clock time `y-m-d h:mi` in `zone` (its first occurrence).
fn at(zone: &str, y: i16, m: i8, d: i8, h: i8, mi: i8) -> i64 {
    let zone = TimeZone::get(zone).must("known zone");
    zone.to_ambiguous_timestamp(date(y, m, d).at(h, mi, 0, 0))
        .earlier()
        .must("representable")
        .as_second()
}

fn utc(y: i16, m: i8, d: i8, h: i8, mi: i8) -> i64 {
    at("UTC", y, m, d, h, mi)
}

const HOUR: i64 = 3600;

/// `(what, windows, now, expected)`.
type Case = (
    &'static str,
    Vec<(&'static str, &'static str, &'static str)>,
    i64,
    WindowState,
);

fn check(cases: Vec<Case>) {
    for (what, specs, now, expected) in cases {
        assert_eq!(windows(&specs).state_at(now), expected, "{what}");
    }
}

fn open(closes_at: i64) -> WindowState {
    WindowState::Open {
        closes_at: Some(closes_at),
    }
}

fn closed(opens_at: i64) -> WindowState {
    WindowState::Closed {
        opens_at: Some(opens_at),
    }
}

#[test]
fn weekday_ranges_lists_and_steps_open_when_they_say() {
    // 2026-11-28 is a Saturday, 2026-11-30 a Monday.
    check(vec![
        (
            "a weekday window is closed on Saturday and opens on Monday",
            vec![("0 2 * * 1-5", "4h", "UTC")],
            utc(2026, 11, 28, 3, 0),
            closed(utc(2026, 11, 30, 2, 0)),
        ),
        (
            "a weekday window is open on Monday until its duration ends",
            vec![("0 2 * * 1-5", "4h", "UTC")],
            utc(2026, 11, 30, 3, 0),
            open(utc(2026, 11, 30, 6, 0)),
        ),
        (
            "it opens exactly at the start and is closed exactly at the end",
            vec![("0 2 * * 1-5", "4h", "UTC")],
            utc(2026, 11, 30, 6, 0),
            closed(utc(2026, 12, 1, 2, 0)),
        ),
        (
            "a list of weekdays skips the days not listed",
            vec![("30 1 * * mon,wed,fri", "1h", "UTC")],
            utc(2026, 12, 1, 0, 0),
            closed(utc(2026, 12, 2, 1, 30)),
        ),
        (
            "a step opens every quarter hour",
            vec![("*/15 * * * *", "5m", "UTC")],
            utc(2026, 11, 28, 10, 7),
            closed(utc(2026, 11, 28, 10, 15)),
        ),
        (
            "a step inside a range stops at the range's end",
            vec![("0 8-12/2 * * *", "30m", "UTC")],
            utc(2026, 11, 28, 12, 45),
            closed(utc(2026, 11, 29, 8, 0)),
        ),
        (
            "day 7 is Sunday like 0",
            vec![("0 0 * * 7", "1h", "UTC")],
            utc(2026, 11, 28, 12, 0),
            closed(utc(2026, 11, 29, 0, 0)),
        ),
        (
            "both day fields restricted: either one matches (Vixie cron)",
            vec![("0 0 1 * 1", "1h", "UTC")],
            utc(2026, 11, 28, 12, 0),
            closed(utc(2026, 11, 30, 0, 0)),
        ),
        (
            "a window crossing midnight is open after midnight",
            vec![("0 22 * * *", "4h", "UTC")],
            utc(2026, 11, 29, 1, 0),
            open(utc(2026, 11, 29, 2, 0)),
        ),
        (
            "a window on the 31st skips months without one",
            vec![("0 0 31 * *", "1h", "UTC")],
            utc(2026, 11, 1, 0, 0),
            closed(utc(2026, 12, 31, 0, 0)),
        ),
        (
            "a window crossing a month end and a year end stays open",
            vec![("0 20 31 12 *", "8h", "UTC")],
            utc(2027, 1, 1, 3, 0),
            open(utc(2027, 1, 1, 4, 0)),
        ),
        (
            "29 February waits for the leap year",
            vec![("0 0 29 2 *", "1h", "UTC")],
            utc(2026, 3, 1, 0, 0),
            closed(utc(2028, 2, 29, 0, 0)),
        ),
        (
            "overlapping windows close when the last of them closes",
            vec![("0 2 * * *", "2h", "UTC"), ("0 3 * * *", "2h", "UTC")],
            utc(2026, 11, 28, 2, 30),
            open(utc(2026, 11, 28, 5, 0)),
        ),
        (
            "touching windows are one",
            vec![("0 2 * * *", "1h", "UTC"), ("0 3 * * *", "1h", "UTC")],
            utc(2026, 11, 28, 2, 30),
            open(utc(2026, 11, 28, 4, 0)),
        ),
        (
            "a window opening again before it closes runs on",
            vec![("0 * * * *", "90m", "UTC")],
            utc(2026, 11, 28, 2, 30),
            WindowState::Open { closes_at: None },
        ),
        (
            "the zone's wall clock decides: 02:00 in Berlin in winter is 01:00 UTC",
            vec![("0 2 * * *", "1h", "Europe/Berlin")],
            utc(2026, 11, 28, 0, 30),
            closed(utc(2026, 11, 28, 1, 0)),
        ),
        (
            "the zone's wall clock decides: 02:00 in Berlin in summer is 00:00 UTC",
            vec![("0 2 * * *", "1h", "Europe/Berlin")],
            utc(2026, 7, 1, 0, 30),
            open(utc(2026, 7, 1, 1, 0)),
        ),
        (
            "the next of several windows is the earliest",
            vec![("0 5 * * *", "1h", "UTC"), ("0 3 * * *", "1h", "UTC")],
            utc(2026, 11, 28, 0, 0),
            closed(utc(2026, 11, 28, 3, 0)),
        ),
    ]);
}

#[test]
fn dst_switches_open_in_the_gap_once_in_the_overlap_and_last_absolute_time() {
    // Berlin: 2026-03-29 02:00 CET → 03:00 CEST (01:00 UTC); 2026-10-25 03:00 CEST → 02:00 CET
    // (01:00 UTC). New York: 2026-03-08 02:00 EST → 03:00 EDT (07:00 UTC); 2026-11-01 02:00
    // EDT → 01:00 EST (06:00 UTC). Lord Howe: 2026-10-04 02:00 → 02:30 (+10:30 → +11, 15:30
    // UTC the day before); 2026-04-05 02:00 → 01:30 (15:00 UTC the day before).
    check(vec![
        (
            "a start in Berlin's spring gap opens at the end of the gap",
            vec![("30 2 * * *", "2h", "Europe/Berlin")],
            utc(2026, 3, 29, 0, 0),
            closed(utc(2026, 3, 29, 1, 0)),
        ),
        (
            "the duration is absolute time after the gap",
            vec![("30 2 * * *", "2h", "Europe/Berlin")],
            utc(2026, 3, 29, 1, 30),
            open(utc(2026, 3, 29, 3, 0)),
        ),
        (
            "a start in Berlin's autumn overlap opens at its first occurrence",
            vec![("30 2 * * *", "20m", "Europe/Berlin")],
            utc(2026, 10, 25, 0, 0),
            closed(utc(2026, 10, 25, 0, 30)),
        ),
        (
            "and does not open again at its second occurrence",
            vec![("30 2 * * *", "20m", "Europe/Berlin")],
            utc(2026, 10, 25, 0, 55),
            closed(utc(2026, 10, 26, 1, 30)),
        ),
        (
            "a window over the autumn switch lasts its hours of absolute time",
            vec![("0 1 * * *", "3h", "Europe/Berlin")],
            utc(2026, 10, 24, 23, 30),
            open(utc(2026, 10, 25, 2, 0)),
        ),
        (
            "a start in New York's spring gap opens at the end of the gap",
            vec![("15 2 * * *", "1h", "America/New_York")],
            utc(2026, 3, 8, 6, 0),
            closed(utc(2026, 3, 8, 7, 0)),
        ),
        (
            "a gap made by the zone's rule, past its listed transitions, opens at its end",
            vec![("30 2 * * *", "1h", "America/New_York")],
            utc(2029, 3, 11, 5, 0),
            closed(utc(2029, 3, 11, 7, 0)),
        ),
        (
            "a start in New York's autumn overlap opens once",
            vec![("30 1 * * *", "10m", "America/New_York")],
            utc(2026, 11, 1, 5, 50),
            closed(utc(2026, 11, 2, 6, 30)),
        ),
        (
            "Lord Howe's half-hour spring gap opens at its end",
            vec![("10 2 * * *", "1h", "Australia/Lord_Howe")],
            utc(2026, 10, 3, 15, 0),
            closed(utc(2026, 10, 3, 15, 30)),
        ),
        (
            "Lord Howe's half-hour autumn overlap opens once",
            vec![("40 1 * * *", "10m", "Australia/Lord_Howe")],
            utc(2026, 4, 4, 14, 55),
            closed(utc(2026, 4, 5, 15, 10)),
        ),
    ]);
}

#[test]
fn no_windows_gate_nothing_and_apply_to_chooses_what_is_gated() {
    let none = validate("spec.maintenance", &MaintenanceSpec::default()).must("valid");
    assert!(none.is_empty());
    assert_eq!(none.state_at(0), WindowState::Open { closes_at: None });
    let kinds = [
        DisruptionKind::AutomaticRollout,
        DisruptionKind::OperatorRollout,
        DisruptionKind::ScaleDown,
        DisruptionKind::Remediation,
    ];
    let gated: Vec<bool> = kinds
        .iter()
        .map(|kind| ApplyTo::Automatic.gates(*kind))
        .collect();
    assert_eq!(gated, [true, false, false, false]);
    assert!(kinds.iter().all(|kind| ApplyTo::All.gates(*kind)));
}

#[test]
fn instants_at_the_ends_of_time_answer_without_panicking() {
    let windows = windows(&[("0 2 * * *", "1h", "Europe/Berlin")]);
    for now in [
        i64::MIN,
        i64::MIN + 1,
        -1,
        0,
        253_402_300_799,
        i64::MAX - 1,
        i64::MAX,
    ] {
        let state = windows.state_at(now);
        assert!(!state.words().is_empty());
    }
    assert_eq!(
        windows.state_at(i64::MAX),
        WindowState::Closed { opens_at: None }
    );
}

#[test]
fn the_state_reads_as_words_in_utc() {
    assert_eq!(
        open(utc(2026, 11, 30, 6, 0)).words(),
        "open until 2026-11-30 06:00 UTC"
    );
    assert_eq!(
        closed(utc(2026, 11, 30, 2, 0)).words(),
        "closed; opens 2026-11-30 02:00 UTC"
    );
    assert_eq!(
        open(utc(2026, 11, 30, 6, 0) + 5).words(),
        "open until 2026-11-30 06:00:05 UTC"
    );
}

#[test]
fn the_pool_file_reads_into_the_spec_and_refuses_unknown_fields() {
    let yaml = "applyTo: all\nwindows:\n  - schedule: \"0 2 * * 1-5\"\n    duration: 4h\n    timeZone: Europe/Berlin\n";
    let spec: MaintenanceSpec = serde_saphyr::from_str(yaml).must("reads");
    assert_eq!(spec.apply_to, ApplyTo::All);
    assert_eq!(spec.windows[0].time_zone.as_deref(), Some("Europe/Berlin"));
    let defaulted: MaintenanceSpec = serde_saphyr::from_str("windows: []").must("reads");
    assert_eq!(defaulted.apply_to, ApplyTo::Automatic);
    let unknown = serde_saphyr::from_str::<MaintenanceSpec>(
        "windows:\n  - schedule: x\n    duration: 1h\n    zone: UTC\n",
    );
    assert!(unknown.is_err());
}

#[test]
fn validation_names_each_field_and_its_fix() {
    let cases: Vec<(&str, WindowSpec, &str, &str)> = vec![
        (
            "a 4-field schedule",
            WindowSpec {
                schedule: "0 2 * *".into(),
                duration: "1h".into(),
                time_zone: None,
            },
            "spec.maintenance.windows[0].schedule",
            "has 4 fields",
        ),
        (
            "a minute out of range",
            WindowSpec {
                schedule: "60 2 * * *".into(),
                duration: "1h".into(),
                time_zone: None,
            },
            "spec.maintenance.windows[0].schedule",
            "minute value \"60\"",
        ),
        (
            "a backwards range",
            WindowSpec {
                schedule: "0 5-2 * * *".into(),
                duration: "1h".into(),
                time_zone: None,
            },
            "spec.maintenance.windows[0].schedule",
            "runs backwards",
        ),
        (
            "a zero step",
            WindowSpec {
                schedule: "*/0 * * * *".into(),
                duration: "1h".into(),
                time_zone: None,
            },
            "spec.maintenance.windows[0].schedule",
            "step \"0\"",
        ),
        (
            "30 February",
            WindowSpec {
                schedule: "0 0 30 2 *".into(),
                duration: "1h".into(),
                time_zone: None,
            },
            "spec.maintenance.windows[0].schedule",
            "never opens",
        ),
        (
            "31 April",
            WindowSpec {
                schedule: "0 0 31 4,6 *".into(),
                duration: "1h".into(),
                time_zone: None,
            },
            "spec.maintenance.windows[0].schedule",
            "never opens",
        ),
        (
            "a zero duration",
            WindowSpec {
                schedule: "0 0 * * *".into(),
                duration: "0s".into(),
                time_zone: None,
            },
            "spec.maintenance.windows[0].duration",
            "shorter than 1s",
        ),
        (
            "eight days",
            WindowSpec {
                schedule: "0 0 * * *".into(),
                duration: "8days".into(),
                time_zone: None,
            },
            "spec.maintenance.windows[0].duration",
            "longer than 7days",
        ),
        (
            "not a duration",
            WindowSpec {
                schedule: "0 0 * * *".into(),
                duration: "soon".into(),
                time_zone: None,
            },
            "spec.maintenance.windows[0].duration",
            "is not a duration",
        ),
        (
            "an unknown zone",
            WindowSpec {
                schedule: "0 0 * * *".into(),
                duration: "1h".into(),
                time_zone: Some("Europe/Atlantis".into()),
            },
            "spec.maintenance.windows[0].timeZone",
            "not a time zone",
        ),
    ];
    for (what, window, field, problem) in cases {
        let spec = MaintenanceSpec {
            apply_to: ApplyTo::Automatic,
            windows: vec![window],
        };
        let problems = validate("spec.maintenance", &spec).expect_err(what);
        assert_eq!(problems.len(), 1, "{what}: {problems:?}");
        assert_eq!(problems[0].field, field, "{what}");
        assert!(
            problems[0].problem.contains(problem),
            "{what}: {}",
            problems[0].problem
        );
        assert!(!problems[0].fix.is_empty(), "{what}");
    }
    let too_many = MaintenanceSpec {
        apply_to: ApplyTo::All,
        windows: vec![
            WindowSpec {
                schedule: "0 0 * * *".into(),
                duration: "1h".into(),
                time_zone: None
            };
            17
        ],
    };
    let problems = validate("spec.maintenance", &too_many).expect_err("17 windows");
    assert_eq!(problems[0].field, "spec.maintenance.windows");
    let named = WindowSpec {
        schedule: "0 2 * jan-mar MON-fri".into(),
        duration: "1h 30m".into(),
        time_zone: None,
    };
    assert!(
        validate(
            "spec.maintenance",
            &MaintenanceSpec {
                apply_to: ApplyTo::All,
                windows: vec![named]
            }
        )
        .is_ok()
    );
}

const ZONES: [&str; 8] = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Sao_Paulo",
    "Pacific/Chatham",
    "Asia/Kolkata",
    "America/St_Johns",
];

fn field(values: std::ops::RangeInclusive<u32>) -> impl Strategy<Value = String> {
    let (low, high) = (*values.start(), *values.end());
    prop_oneof![
        Just("*".to_owned()),
        (low..=high).prop_map(|value| value.to_string()),
        (low..=high, 0..=3u32)
            .prop_map(move |(from, span)| format!("{from}-{}", (from + span).min(high))),
        (2..=high.clamp(2, 15)).prop_map(|step| format!("*/{step}")),
        (low..=high, low..=high).prop_map(|(a, b)| format!("{a},{b}")),
    ]
}

fn any_window() -> impl Strategy<Value = (String, String, &'static str)> {
    (
        field(0..=59),
        field(0..=23),
        field(1..=28),
        field(1..=12),
        field(0..=6),
        prop_oneof![60u64..=3600, 3600u64..=7 * 24 * 3600],
        proptest::sample::select(&ZONES[..]),
    )
        .prop_map(|(minute, hour, day, month, weekday, secs, zone)| {
            (
                format!("{minute} {hour} {day} {month} {weekday}"),
                format!("{secs}s"),
                zone,
            )
        })
}

/// Instants from 2020 to 2040, half of them near a DST switch of some zone.
fn any_instant() -> impl Strategy<Value = i64> {
    let start = utc(2020, 1, 1, 0, 0);
    let end = utc(2040, 1, 1, 0, 0);
    prop_oneof![
        start..end,
        (
            proptest::sample::select(&ZONES[..]),
            start..end,
            -7200i64..7200
        )
            .prop_map(|(zone, near, offset)| {
                let zone = TimeZone::get(zone).must("known zone");
                let near = jiff::Timestamp::from_second(near).must("in range");
                zone.following(near)
                    .next()
                    .map_or(near.as_second(), |transition| {
                        transition.timestamp().as_second()
                    })
                    + offset
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn open_closes_later_and_closed_opens_later(
        specs in proptest::collection::vec(any_window(), 1..=3),
        now in any_instant(),
    ) {
        let specs: Vec<(&str, &str, &str)> = specs
            .iter()
            .map(|(schedule, duration, zone)| (schedule.as_str(), duration.as_str(), *zone))
            .collect();
        let windows = windows(&specs);
        match windows.state_at(now) {
            WindowState::Open { closes_at: Some(closes_at) } => {
                prop_assert!(closes_at > now);
                prop_assert!(windows.state_at(closes_at - 1).is_open());
                prop_assert!(!windows.state_at(closes_at).is_open());
            }
            WindowState::Open { closes_at: None } => {
                // Open past the look-ahead: still open a while later.
                prop_assert!(windows.state_at(now + HOUR).is_open());
            }
            WindowState::Closed { opens_at: Some(opens_at) } => {
                prop_assert!(opens_at > now);
                prop_assert!(windows.state_at(opens_at).is_open());
                let gap = opens_at - now;
                for sample in 1..16 {
                    let instant = now + gap * sample / 16;
                    prop_assert!(!windows.state_at(instant).is_open(), "open at {instant}");
                }
                prop_assert!(!windows.state_at(opens_at - 1).is_open());
            }
            WindowState::Closed { opens_at: None } => {
                // Next open past the look-ahead (rare schedules, e.g. a day of February that
                // must be a Thursday): closed all along it.
                let horizon = i64::from(LOOK_AHEAD_DAYS) * 24 * 3600;
                for sample in 0..16 {
                    let instant = now + horizon * sample / 16;
                    prop_assert!(!windows.state_at(instant).is_open(), "open at {instant}");
                }
            }
        }
    }

    #[test]
    fn a_start_in_a_fall_back_overlap_opens_once(
        zone in proptest::sample::select(&["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/St_Johns"][..]),
        year in 2021i16..2038,
        into_the_overlap in 0i64..30,
    ) {
        let tz = TimeZone::get(zone).must("known zone");
        let from = jiff::Timestamp::from_second(utc(year, 1, 1, 0, 0)).must("in range");
        // The first transition that turns the clocks back.
        let transition = tz
            .following(from)
            .take(4)
            .find(|transition| {
                let before = tz.to_offset(jiff::Timestamp::from_second(transition.timestamp().as_second() - 1).must("in range"));
                transition.offset() < before
            })
            .must("a fall-back every year");
        let switch = transition.timestamp().as_second();
        // A wall-clock minute inside the overlap (its second pass starts at the switch).
        let local = tz.to_datetime(jiff::Timestamp::from_second(switch + into_the_overlap * 60).must("in range"));
        let schedule = format!("{} {} * * *", local.minute(), local.hour());
        let windows = windows(&[(schedule.as_str(), "5m", zone)]);
        // Walk the openings from a day before to a day after the switch.
        let mut openings = Vec::new();
        let mut instant = switch - 20 * HOUR;
        for _ in 0..16 {
            match windows.state_at(instant) {
                WindowState::Closed { opens_at: Some(opens_at) } if opens_at < switch + 20 * HOUR => {
                    openings.push(opens_at);
                    instant = opens_at;
                }
                WindowState::Open { closes_at: Some(closes_at) } => instant = closes_at,
                _ => break,
            }
        }
        prop_assert_eq!(openings.len(), 1, "openings {:?}", openings);
        prop_assert!(openings[0] < switch, "the first occurrence, before the switch");
    }

    #[test]
    fn any_schedule_text_is_read_or_refused_without_panicking(text in "[0-9a-z*/,\\- ]{0,40}") {
        let _ = CronSchedule::parse(&text);
    }
}

#[test]
fn a_window_that_next_opens_past_the_look_ahead_is_closed_with_no_opening() {
    // February's 1st, 8th, 15th, 22nd or 29th that is a Thursday: after Thursday 22 February
    // 2035, the next is 1 February 2046, past the eight years looked ahead.
    let windows = windows(&[("* * */7 2 4", "60s", "UTC")]);
    let friday = utc(2035, 2, 23, 0, 0);
    assert!(matches!(
        windows.state_at(friday),
        WindowState::Closed { opens_at: None }
    ));
    assert!(windows.state_at(utc(2035, 2, 22, 12, 0)).is_open());
}
