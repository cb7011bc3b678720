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

/// `NodewrightPool` of a run about one machine whose input names no pool (delete, drain,
/// uncordon): the pool its name says (`<pool>-<5 characters>`), so that a pool's runs are all
/// found by `NodewrightPool`. None for a name of another shape.
pub fn pool_of_machine(
    machine: &str,
) -> Option<temporalio_common::search_attributes::SearchAttributeUpdate> {
    let name = nodewright_model::MachineName::parse("machine", machine).ok()?;
    name.pool_of().map(|pool| POOL.value_set(pool.to_owned()))
}
