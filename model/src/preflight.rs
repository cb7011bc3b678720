//! What the preflight job reports: can this worker reach and use everything it needs, and how
//! much room the pools given have ([`PreflightPool`], [`PoolHeadroom`]).

use serde::{Deserialize, Serialize};

use crate::headroom::{Buffer, Cut, HeadroomQuestion, HeadroomReading, cut};

/// The most pool files one preflight run checks.
pub const MAX_PREFLIGHT_POOLS: usize = 32;

/// The worker's view of the Kubernetes cluster it manages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesReport {
    /// The apiserver's version, e.g. `v1.36.3`.
    pub server_version: String,
    /// Nodes registered.
    pub nodes: usize,
    /// Nodes whose `Ready` condition is `True`.
    pub ready_nodes: usize,
}

/// A pool file's placement, for its headroom: no template beyond where machines go (no
/// bootstrap, no key: nothing secret enters the run's input).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreflightPool {
    /// The pool's name.
    pub pool: String,
    /// Its replicas.
    pub replicas: u32,
    /// Its rollout's surge, resolved to machines.
    pub surge: u32,
    /// Where its machines go.
    pub question: HeadroomQuestion,
    /// What it keeps free (`spec.headroom.buffer`).
    #[serde(default)]
    pub buffer: Buffer,
}

/// The headroom of one pool, as preflight found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolHeadroom {
    /// The pool's name.
    pub pool: String,
    /// What ARM said; none when it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reading: Option<HeadroomReading>,
    /// Why it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Machines wanted at once: `replicas + surge`.
    pub wanted: u32,
    /// How many of them fit now, and the limit when not all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<Cut>,
}

impl PoolHeadroom {
    /// The headroom of `pool` from what ARM said (`Ok`) or why it could not be read.
    pub fn of(pool: &PreflightPool, read: Result<HeadroomReading, String>) -> Self {
        let wanted = pool.replicas.saturating_add(pool.surge);
        match read {
            Ok(reading) => Self {
                pool: pool.pool.clone(),
                fit: Some(cut(wanted, &pool.question, &reading, pool.buffer, 0)),
                reading: Some(reading),
                error: None,
                wanted,
            },
            Err(error) => Self {
                pool: pool.pool.clone(),
                reading: None,
                error: Some(error),
                wanted,
                fit: None,
            },
        }
    }
}

/// The result of a preflight run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreflightReport {
    /// The cluster the worker is configured for.
    pub cluster: String,
    /// The Kubernetes side.
    pub kubernetes: KubernetesReport,
    /// The headroom of each pool given, in their order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headroom: Vec<PoolHeadroom>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headroom::SubnetRoom;

    #[test]
    fn a_pool_that_fits_whole_or_in_part_or_not_read_is_reported_so() {
        let pool = PreflightPool {
            pool: "workers".to_owned(),
            replicas: 4,
            surge: 1,
            question: HeadroomQuestion {
                subnet_id: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/workers".to_owned(),
                vm_size: "Standard_D2s_v5".to_owned(),
                zones: Vec::new(),
            },
            buffer: Buffer::default(),
        };
        let reading = |free: u64| HeadroomReading {
            location: "westeurope".to_owned(),
            subnet: Some(SubnetRoom {
                name: "workers".to_owned(),
                usable: 11,
                used: 11 - free,
            }),
            quotas: Vec::new(),
            vcpus: 2,
            restrictions: Vec::new(),
        };
        let whole = PoolHeadroom::of(&pool, Ok(reading(8)));
        assert_eq!(whole.wanted, 5);
        assert_eq!(
            whole.fit.as_ref().map(|f| (f.machines, f.limit.is_none())),
            Some((5, true))
        );
        let part = PoolHeadroom::of(&pool, Ok(reading(3)));
        assert_eq!(
            part.fit
                .and_then(|f| f.limit)
                .map(|l| l.message())
                .as_deref(),
            Some("subnet workers: 3 free addresses, 5 needed")
        );
        let unread = PoolHeadroom::of(&pool, Err("403 AuthorizationFailed".to_owned()));
        assert_eq!(
            (unread.fit, unread.error.as_deref()),
            (None, Some("403 AuthorizationFailed"))
        );
    }
}
