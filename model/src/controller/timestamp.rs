//! Unix seconds as RFC 3339 text (`2026-11-27T22:55:00Z`) for messages, without a clock or chrono:
//! the civil date from a day count (Howard Hinnant's `civil_from_days`).

/// `unix` (seconds) as RFC 3339 in UTC, e.g. `2026-11-27T22:55:00Z`; clamped to
/// [`crate::time::EARLIEST`]..=[`crate::time::LATEST`] so that the year has four digits.
pub fn rfc3339(unix: i64) -> String {
    let unix = unix.clamp(crate::time::EARLIEST, crate::time::LATEST);
    let days = unix.div_euclid(86_400);
    let second_of_day = unix.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60
    )
}

/// The proleptic Gregorian (year, month, day) of `days` since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_known_instants() {
        let table = [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_795_820_100, "2026-11-27T22:55:00Z"),
            (-1, "1969-12-31T23:59:59Z"),
            (crate::time::LATEST, "9999-12-31T23:59:59Z"),
            (crate::time::EARLIEST, "0000-01-01T00:00:00Z"),
            (i64::MAX, "9999-12-31T23:59:59Z"),
        ];
        for (unix, expected) in table {
            assert_eq!(rfc3339(unix), expected, "{unix}");
        }
    }
}
