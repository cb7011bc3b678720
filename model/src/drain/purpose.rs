//! Why a node is drained: the one fact every other drain decision may depend on, in a module
//! that depends on nothing else of the drain.

use serde::{Deserialize, Serialize};

/// Why a node is drained, which decides what the drain leaves behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DrainPurpose {
    /// Maintenance: the node stays cordoned (and tainted) until `machine uncordon`; the VM stays.
    Maintenance,
    /// The machine is deleted next (DeleteMachine): also marks the Node `Terminating`.
    Deletion,
}
