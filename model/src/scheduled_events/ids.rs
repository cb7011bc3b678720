//! The workflow id of one Scheduled Event: `event/<cluster>/<EventId>` ([`workflow_id`]), the
//! house's `<operation>/<cluster>/<subject>` form. Temporal refuses a second start of the same
//! id, so an event is handled once whichever worker sees it first and however often workers
//! restart.
//!
//! An `EventId` is a GUID, used as it is (lowercase: GUIDs ignore case, and the same event must
//! give the same id whether it was read from the agent's annotation or node-problem-detector's
//! message). Anything else — longer than [`MAX_PLAIN_EVENT_ID_LEN`], or holding a character
//! other than letters, digits and `-` — is replaced by `h-` and 16 hex digits of its FNV-1a, so
//! the id stays short and plain whatever the event says. The longest id is
//! `event/` + 40 + `/` + 64 = 111 characters, far inside Temporal's limit.

use crate::ClusterName;

/// The first segment of an event's workflow id.
pub const EVENT_WORKFLOW_PREFIX: &str = "event";

/// The longest `EventId` used as it is in a workflow id; longer ones are hashed.
pub const MAX_PLAIN_EVENT_ID_LEN: usize = 64;

/// The workflow id handling the event `event_id` in `cluster`: `event/<cluster>/<EventId>`.
pub fn workflow_id(cluster: &ClusterName, event_id: &str) -> String {
    let id = event_id.trim().to_ascii_lowercase();
    let plain = !id.is_empty()
        && id.len() <= MAX_PLAIN_EVENT_ID_LEN
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !id.starts_with("h-");
    let subject = if plain {
        id
    } else {
        format!("h-{}", fnv1a_hex(event_id.as_bytes()))
    };
    format!("{EVENT_WORKFLOW_PREFIX}/{cluster}/{subject}")
}

/// 64-bit FNV-1a of `bytes` as 16 hex digits: stable across processes and releases of the
/// standard library (as `crate::listing`'s digest).
pub(super) fn fnv1a_hex(bytes: &[u8]) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = bytes.iter().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    });
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn cluster() -> ClusterName {
        ClusterName::parse("cluster", "prod-weu").unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn guids_are_used_as_they_are_in_lowercase() {
        let table = [
            (
                "602d9444-d2cd-49c7-8624-8643e7171297",
                "event/prod-weu/602d9444-d2cd-49c7-8624-8643e7171297",
            ),
            (
                "602D9444-D2CD-49C7-8624-8643E7171297",
                "event/prod-weu/602d9444-d2cd-49c7-8624-8643e7171297",
            ),
            (
                " 602d9444-d2cd-49c7-8624-8643e7171297 ",
                "event/prod-weu/602d9444-d2cd-49c7-8624-8643e7171297",
            ),
            (
                "synthetic-0123456789abcdef",
                "event/prod-weu/synthetic-0123456789abcdef",
            ),
        ];
        for (event_id, expected) in table {
            assert_eq!(workflow_id(&cluster(), event_id), expected, "{event_id}");
        }
    }

    #[test]
    fn odd_ids_are_hashed() {
        let table = [
            "{602d9444-d2cd-49c7-8624-8643e7171297}",
            "a/b",
            "",
            "h-0123",
            &"x".repeat(65),
        ];
        for event_id in table {
            let id = workflow_id(&cluster(), event_id);
            let subject = id.strip_prefix("event/prod-weu/h-").unwrap_or_default();
            assert_eq!(subject.len(), 16, "{event_id:?} gave {id}");
        }
        assert_ne!(
            workflow_id(&cluster(), "a/b"),
            workflow_id(&cluster(), "a/c")
        );
    }

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(fnv1a_hex(b""), "cbf29ce484222325");
        assert_eq!(fnv1a_hex(b"a"), "af63dc4c8601ec8c");
        assert_eq!(fnv1a_hex(b"foobar"), "85944171f73967e8");
    }

    proptest! {
        #[test]
        fn every_id_is_short_plain_and_stable(event_id in ".{0,200}") {
            let id = workflow_id(&cluster(), &event_id);
            prop_assert!(id.len() <= 6 + 40 + 1 + MAX_PLAIN_EVENT_ID_LEN);
            prop_assert!(id.starts_with("event/prod-weu/"));
            prop_assert!(id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '/'));
            prop_assert_eq!(id, workflow_id(&cluster(), &event_id));
        }
    }
}
