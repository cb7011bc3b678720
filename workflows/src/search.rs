//! Typed keys for nodewright's search attributes (names in `nodewright_model::SearchAttribute`).

use nodewright_model::SearchAttribute;
use temporalio_common::search_attributes::SearchAttributeKey;

/// `NodewrightCluster`.
pub const CLUSTER: SearchAttributeKey<String> =
    SearchAttributeKey::keyword(SearchAttribute::Cluster.name());
/// `NodewrightPool`.
pub const POOL: SearchAttributeKey<String> =
    SearchAttributeKey::keyword(SearchAttribute::Pool.name());
/// `NodewrightMachine`.
pub const MACHINE: SearchAttributeKey<String> =
    SearchAttributeKey::keyword(SearchAttribute::Machine.name());
/// `NodewrightOperation`.
pub const OPERATION: SearchAttributeKey<String> =
    SearchAttributeKey::keyword(SearchAttribute::Operation.name());
/// `NodewrightPhase`.
pub const PHASE: SearchAttributeKey<String> =
    SearchAttributeKey::keyword(SearchAttribute::Phase.name());
