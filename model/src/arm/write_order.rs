//! The order in which backlogged ARM writes leave the rate-limited ARM-write task queue.
//!
//! Every ARM write of a deployment waits in one task queue whose server-side rate limit is the
//! subscription's write budget. When more writes wait than the budget lets through, first in
//! first out makes a large rollout send every new machine's first write (its NIC) before any
//! machine's last one: all the machines are half made at once, and the last ones finish in a
//! tail where the budget is no longer the limit. Ordering the backlog by how close a write
//! brings its machine to done (the last write of a create, or a write that frees what a machine
//! held, before a VM create, before the first write of a new machine) finishes machines in the
//! order they were begun and keeps a rollout's surge slots cycling.
//!
//! The order is Temporal's task priority (`priority_key`, 1 first, the server's default 3): a
//! server that does not order by priority (Temporal before 1.31 without
//! `matching.useNewMatcher`) dispatches first in first out, as before, and the budget holds
//! either way.

/// Where an ARM write stands in its machine's life, for the write's place in the backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum WriteStage {
    /// Finishes a machine (the OS disk's tags, the last write of a create) or frees what one
    /// held (a VM delete, a leftover NIC or disk, a failed create's clean-up, a force detach
    /// that lets a drain end).
    Finishing,
    /// The VM create of a machine whose NIC exists.
    Building,
    /// The first write of a new machine (its NIC), or a write that makes no machine (tags,
    /// the controller's VM actions, the sweep).
    Starting,
}

impl WriteStage {
    /// Temporal's `priority_key` for the write: 1 for [`WriteStage::Finishing`], 2 for
    /// [`WriteStage::Building`], 3 (the server's default) for [`WriteStage::Starting`].
    pub fn priority_key(self) -> u32 {
        match self {
            WriteStage::Finishing => 1,
            WriteStage::Building => 2,
            WriteStage::Starting => 3,
        }
    }

    /// The stage a task of `priority_key` waits as (0, the key of a task sent without one, is
    /// the server's default, 3); none for a key nodewright never sends.
    pub fn from_priority_key(priority_key: i32) -> Option<WriteStage> {
        match priority_key {
            1 => Some(WriteStage::Finishing),
            2 => Some(WriteStage::Building),
            0 | 3 => Some(WriteStage::Starting),
            _ => None,
        }
    }

    /// Its name in metrics: `finishing`, `building`, `starting`.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteStage::Finishing => "finishing",
            WriteStage::Building => "building",
            WriteStage::Starting => "starting",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_closer_to_done_go_first_and_new_machines_keep_the_default() {
        let stages = [
            WriteStage::Finishing,
            WriteStage::Building,
            WriteStage::Starting,
        ];
        let keys: Vec<u32> = stages.iter().map(|stage| stage.priority_key()).collect();
        assert_eq!(keys, vec![1, 2, 3]);
        // The server's range is 1..=5 with 3 as the default: nothing is pushed behind writes
        // that carry no priority at all.
        assert!(keys.iter().all(|key| (1..=3).contains(key)));
        for stage in stages {
            let key = i32::try_from(stage.priority_key()).expect("small");
            assert_eq!(WriteStage::from_priority_key(key), Some(stage));
        }
        assert_eq!(WriteStage::from_priority_key(0), Some(WriteStage::Starting));
        assert_eq!(WriteStage::from_priority_key(5), None);
    }
}
