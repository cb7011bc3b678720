//! The request log (`GET /sandbox/requests`): the last [`REQUEST_LOG_CAPACITY`] ARM requests
//! the emulator answered, oldest first, each with a sequence number that keeps growing across
//! clears, so a client can poll with `since`.

use std::collections::VecDeque;

use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};

/// How many requests the log keeps; older ones are dropped.
pub const REQUEST_LOG_CAPACITY: usize = 20_000;

/// One answered ARM request. JSON shape:
/// `{"seq":7,"time":"2025-01-01T12:00:00.123Z","method":"PUT","path":"/subscriptions/…",
/// "operation":"vm.put","status":429,"retry_after":2,"code":"OperationNotAllowed"}`
/// (`retry_after` only when the answer carried a `Retry-After`, `code` only when it carried an
/// ARM error code, `x-ms-error-code`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Sequence number, from 1, assigned when the answer is recorded.
    pub seq: u64,
    /// When the answer was made (emulator clock), RFC 3339 with milliseconds.
    #[serde(with = "millis")]
    pub time: DateTime<Utc>,
    /// HTTP method.
    pub method: String,
    /// Request path, without the query.
    pub path: String,
    /// Operation name as the stats count it, e.g. `vm.put`.
    pub operation: String,
    /// HTTP status of the answer.
    pub status: u16,
    /// `Retry-After` seconds of the answer, when it carried one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
    /// The ARM error code of the answer (`x-ms-error-code`), when it carried one, e.g.
    /// `NicReservedForAnotherVm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The subscriptions a request names outside its path (a Resource Graph query's body),
    /// comma-separated; a `contains` filter matches them as it matches the path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// The scope a handler gives its request, for the log ([`RequestRecord::scope`]); carried to
/// the middleware as a response extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestScope(pub String);

/// Which records `GET /sandbox/requests` returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestFilter {
    /// Only paths containing this, case-insensitively.
    pub contains: Option<String>,
    /// Only records with a larger sequence number.
    pub since: Option<u64>,
}

/// A bounded ring of answered requests.
#[derive(Debug, Clone)]
pub struct RequestLog {
    entries: VecDeque<RequestRecord>,
    capacity: usize,
    last_seq: u64,
}

impl Default for RequestLog {
    fn default() -> Self {
        Self::with_capacity(REQUEST_LOG_CAPACITY)
    }
}

impl RequestLog {
    /// An empty log keeping the last `capacity` records (at least 1).
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            capacity: capacity.max(1),
            last_seq: 0,
        }
    }

    /// Appends `record` with the next sequence number and its time truncated to milliseconds,
    /// dropping the oldest record when full; returns the sequence number.
    pub fn push(&mut self, mut record: RequestRecord) -> u64 {
        self.last_seq += 1;
        record.seq = self.last_seq;
        record.time = record.time.trunc_subsecs(3);
        if self.entries.len() >= self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back(record);
        self.last_seq
    }

    /// The records `filter` selects, oldest first.
    pub fn query(&self, filter: &RequestFilter) -> Vec<RequestRecord> {
        let start = filter
            .since
            .map_or(0, |since| self.entries.partition_point(|r| r.seq <= since));
        let needle = filter.contains.as_deref().map(str::to_lowercase);
        self.entries
            .range(start..)
            .filter(|r| {
                needle.as_deref().is_none_or(|n| {
                    r.path.to_lowercase().contains(n)
                        || r.scope
                            .as_ref()
                            .is_some_and(|s| s.to_lowercase().contains(n))
                })
            })
            .cloned()
            .collect()
    }

    /// Drops every record; sequence numbers go on from where they were.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

/// RFC 3339 with milliseconds and `Z`.
mod millis {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(time: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&time.to_rfc3339_opts(SecondsFormat::Millis, true))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let text = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(path: &str) -> RequestRecord {
        RequestRecord {
            seq: 0,
            time: DateTime::parse_from_rfc3339("2025-03-04T05:06:07.123456Z")
                .unwrap()
                .with_timezone(&Utc),
            method: "PUT".into(),
            path: path.into(),
            operation: "vm.put".into(),
            status: 429,
            retry_after: Some(2),
            code: None,
            scope: None,
        }
    }

    #[test]
    fn the_log_keeps_the_last_records_with_growing_sequence_numbers() {
        let mut log = RequestLog::with_capacity(3);
        for i in 1..=5 {
            assert_eq!(log.push(record(&format!("/p/{i}"))), i);
        }
        let seqs: Vec<u64> = log
            .query(&RequestFilter::default())
            .iter()
            .map(|r| r.seq)
            .collect();
        assert_eq!(seqs, [3, 4, 5]);
        log.clear();
        assert!(log.query(&RequestFilter::default()).is_empty());
        assert_eq!(log.push(record("/p/6")), 6, "numbers go on after a clear");
    }

    #[test]
    fn filters_select_by_path_substring_and_sequence_number() {
        let mut log = RequestLog::default();
        for path in ["/a/VirtualMachines/x", "/a/disks/y", "/a/virtualmachines/z"] {
            log.push(record(path));
        }
        let select = |contains: Option<&str>, since: Option<u64>| -> Vec<u64> {
            let filter = RequestFilter {
                contains: contains.map(str::to_owned),
                since,
            };
            log.query(&filter).iter().map(|r| r.seq).collect()
        };
        let cases: [(Option<&str>, Option<u64>, &[u64]); 6] = [
            (None, None, &[1, 2, 3]),
            (Some("virtualMACHINES"), None, &[1, 3]),
            (None, Some(1), &[2, 3]),
            (Some("virtualmachines"), Some(1), &[3]),
            (None, Some(3), &[]),
            (Some("nics"), None, &[]),
        ];
        for (contains, since, expected) in cases {
            assert_eq!(select(contains, since), expected, "{contains:?} {since:?}");
        }
    }

    #[test]
    fn a_record_serializes_with_millisecond_time_and_optional_retry_after() {
        let mut log = RequestLog::default();
        log.push(record("/p"));
        let mut plain = record("/q");
        plain.retry_after = None;
        log.push(plain);
        let json = serde_json::to_value(log.query(&RequestFilter::default())).unwrap();
        assert_eq!(
            json[0],
            serde_json::json!({"seq": 1, "time": "2025-03-04T05:06:07.123Z", "method": "PUT",
                "path": "/p", "operation": "vm.put", "status": 429, "retry_after": 2})
        );
        assert!(json[1].get("retry_after").is_none());
        let back: RequestRecord = serde_json::from_value(json[0].clone()).unwrap();
        assert_eq!(back.seq, 1);
    }
}
