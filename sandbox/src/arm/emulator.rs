//! [`Emulator`], the handle every route and the node joiner hold: cheap to clone, one lock
//! around the engine's [`Core`], the request stats and log beside it, the state persisted and a
//! change counter bumped after every change. [`ticker`] applies time-based transitions on time.

mod ticker;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::http::HeaderValue;
use chrono::{DateTime, Utc};
use tokio::sync::{Notify, watch};

use super::config::{ConfigError, EmulatorConfig};
use super::engine::Core;
use super::error::ArmError;
use super::faults::{self, ActiveRule, FaultKind, FaultRule, FaultSet, Target};
use super::latency::Latency;
use super::paths;
use super::persist::Persister;
use super::requests::{RequestFilter, RequestLog, RequestRecord};
use super::scheduled_events;
use super::spot_prices::SpotPrices;
use super::state::State;
use super::stats::Stats;

/// Azure Resource Graph's default quota: queries per window per caller.
pub const GRAPH_QUOTA: usize = 15;

/// Azure Resource Graph's quota window.
pub const GRAPH_QUOTA_WINDOW: std::time::Duration = std::time::Duration::from_secs(5);

/// The emulator's state. Clones share it.
#[derive(Clone)]
pub struct Emulator {
    inner: Arc<Inner>,
}

struct Inner {
    core: Mutex<Core>,
    stats: Mutex<Stats>,
    requests: Mutex<RequestLog>,
    token: Option<String>,
    persister: Option<Persister>,
    changes: watch::Sender<u64>,
    wake: Notify,
    ticker_started: AtomicBool,
    /// When the Resource Graph queries of the current quota window were answered.
    graph_queries: Mutex<std::collections::VecDeque<std::time::Instant>>,
}

impl Emulator {
    /// An emulator with `config`, loading `config.state_file` when it exists.
    pub fn new(config: EmulatorConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let mut state = match &config.state_file {
            Some(path) => State::load(path).map_err(|source| ConfigError::Io {
                path: path.clone(),
                source,
            })?,
            None => State::default(),
        };
        // Fault rules are not persisted and this config's rules get fresh ids from 1, so a
        // persisted `hang_rule` would name an unrelated rule and hold its operation forever.
        // The rule that held it went with the old process: let the operation complete.
        for operation in state.operations.values_mut() {
            operation.hang_rule = None;
        }
        // The built-in marketplace catalog and the configuration's images are offered on top of
        // what the state file holds (versions published while it ran).
        let configured = config.images.iter().flat_map(|image| image.images());
        for image in super::state::images::default_catalog()
            .into_iter()
            .chain(configured)
        {
            state.images.publish(image);
        }
        let mut faults = FaultSet::default();
        for rule in config.faults {
            faults.add(rule);
        }
        let core = Core {
            state,
            faults,
            latency: Latency {
                profile: config.latency,
                scale: config.latency_scale,
            },
            page_size: config.page_size,
            nic_reservation: i64::try_from(config.nic_reservation_seconds)
                .ok()
                .and_then(chrono::Duration::try_seconds)
                .unwrap_or(chrono::Duration::MAX),
            expiry_checked: None,
            quota: config.quota,
            spot_prices: SpotPrices::default(),
            eviction_notice: notice(config.eviction_notice_seconds),
        };
        let emulator = Self {
            inner: Arc::new(Inner {
                core: Mutex::new(core),
                stats: Mutex::new(Stats::default()),
                requests: Mutex::new(RequestLog::default()),
                token: config.token.filter(|t| !t.is_empty()),
                persister: config.state_file.map(Persister::new),
                changes: watch::Sender::new(0),
                wake: Notify::new(),
                ticker_started: AtomicBool::new(false),
                graph_queries: Mutex::new(std::collections::VecDeque::new()),
            }),
        };
        emulator.ensure_ticker();
        Ok(emulator)
    }

    /// The fault rules in force.
    pub fn faults(&self) -> Vec<ActiveRule> {
        self.inner.lock().faults.list().to_vec()
    }

    /// Adds a fault rule.
    pub fn add_fault(&self, rule: FaultRule) -> ActiveRule {
        let added = self.inner.lock().faults.add(rule);
        self.inner.wake.notify_one();
        added
    }

    /// Replaces every fault rule.
    pub fn set_faults(&self, rules: Vec<FaultRule>) -> Vec<ActiveRule> {
        let mut core = self.inner.lock();
        core.faults.clear();
        let added = rules.into_iter().map(|r| core.faults.add(r)).collect();
        drop(core);
        self.inner.wake.notify_one();
        added
    }

    /// Removes one fault rule (releasing operations it held); false when absent.
    pub fn remove_fault(&self, id: u64) -> bool {
        let removed = self.inner.lock().faults.remove(id);
        self.inner.wake.notify_one();
        removed
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.inner.lock().faults.clear();
        self.inner.wake.notify_one();
    }

    /// The latency profile and scale in force.
    pub fn latency(&self) -> Latency {
        self.inner.lock().latency
    }

    /// Changes the latency profile and scale (for operations started from now on).
    pub fn set_latency(&self, latency: Latency) {
        self.inner.lock().latency = latency;
    }

    /// Takes one Resource Graph query from the quota ([`GRAPH_QUOTA`] per
    /// [`GRAPH_QUOTA_WINDOW`], Azure's default): the queries left and the time until
    /// the window resets, or, over the quota, the time until a query is allowed again.
    pub fn take_graph_quota(&self) -> Result<(usize, std::time::Duration), std::time::Duration> {
        let now = std::time::Instant::now();
        let mut queries = self
            .inner
            .graph_queries
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        while queries
            .front()
            .is_some_and(|at| now.duration_since(*at) >= GRAPH_QUOTA_WINDOW)
        {
            queries.pop_front();
        }
        let resets_after = |queries: &std::collections::VecDeque<std::time::Instant>| {
            queries.front().map_or(GRAPH_QUOTA_WINDOW, |first| {
                GRAPH_QUOTA_WINDOW.saturating_sub(now.duration_since(*first))
            })
        };
        if queries.len() >= GRAPH_QUOTA {
            return Err(resets_after(&queries));
        }
        queries.push_back(now);
        Ok((GRAPH_QUOTA - queries.len(), resets_after(&queries)))
    }

    /// Request counts so far.
    pub fn stats(&self) -> Stats {
        self.inner
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Resets the request counts.
    pub fn reset_stats(&self) {
        *self.inner.stats.lock().unwrap_or_else(|e| e.into_inner()) = Stats::default();
    }

    /// The logged ARM requests `filter` selects, oldest first.
    pub fn requests(&self, filter: &RequestFilter) -> Vec<RequestRecord> {
        self.inner
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .query(filter)
    }

    /// Empties the request log (sequence numbers go on; the stats are kept).
    pub fn clear_requests(&self) {
        self.inner
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Counts an answered ARM request in the stats and appends it to the request log.
    pub(super) fn record(&self, answered: RequestRecord) {
        self.inner
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(&answered.operation, answered.status);
        self.inner
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(answered);
    }

    pub(super) fn authorized(&self, header: Option<&HeaderValue>) -> bool {
        let Some(token) = &self.inner.token else {
            return true;
        };
        let Some(value) = header.and_then(|h| h.to_str().ok()) else {
            return false;
        };
        match value.split_once(' ') {
            Some((scheme, given)) => scheme.eq_ignore_ascii_case("bearer") && given.trim() == token,
            None => false,
        }
    }

    /// The answer of a request-level fault rule that fires for `target`, if any.
    pub(super) fn request_fault(&self, target: Target<'_>) -> Option<ArmError> {
        let kinds = [
            FaultKind::Throttle,
            FaultKind::ServerError,
            FaultKind::Conflict,
        ];
        let fired = self.inner.lock().faults.fire(&kinds, target)?;
        tracing::info!(rule = fired.id, kind = ?fired.rule.kind, path = target.path, "injected fault");
        faults::fault_error(fired.rule.kind, &fired.rule, target.path)
    }

    /// How long a `stall` rule that fires for `target` holds the request, if one fires.
    pub(super) fn stall(&self, target: Target<'_>) -> Option<std::time::Duration> {
        let fired = self.inner.lock().faults.fire(&[FaultKind::Stall], target)?;
        let seconds = fired
            .rule
            .seconds
            .unwrap_or(faults::DEFAULT_STALL_SECONDS)
            .min(faults::MAX_STALL_SECONDS);
        tracing::info!(
            rule = fired.id,
            path = target.path,
            seconds,
            "injected fault: holding the request"
        );
        Some(std::time::Duration::from_secs(seconds))
    }

    /// Whether a `repeat_next_link` rule fires for the list request `target`: its page then
    /// links back to itself.
    pub(crate) fn repeats_page(&self, target: Target<'_>) -> bool {
        let Some(fired) = self
            .inner
            .lock()
            .faults
            .fire(&[FaultKind::RepeatNextLink], target)
        else {
            return false;
        };
        tracing::info!(
            rule = fired.id,
            path = target.path,
            "injected fault: the page links back to itself"
        );
        true
    }

    /// The name of the VM the operation of a polling URL (`…/operations/{id}` or
    /// `…/operationResults/{id}`) works on, when it works on a VM.
    pub(crate) fn operation_vm(&self, path: &str) -> Option<String> {
        let id = path.trim_end_matches('/').rsplit('/').next()?;
        let core = self.inner.lock();
        let operation = core.state.operations.get(id)?;
        paths::vm_in_path(&operation.resource).map(str::to_owned)
    }

    /// A receiver of the change counter, bumped after every change (starting the ticker, so
    /// time-based changes are announced on time).
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.ensure_ticker();
        self.inner.changes.subscribe()
    }

    /// Runs `f` on the state after applying due transitions.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Core) -> R) -> R {
        let mut core = self.inner.lock();
        if advance(&mut core, Utc::now()) {
            self.inner.changed(&core);
        }
        f(&core)
    }

    /// Runs a mutation after applying due transitions; persists and announces it when it
    /// succeeds.
    pub(crate) fn write<R>(
        &self,
        f: impl FnOnce(&mut Core, DateTime<Utc>) -> Result<R, ArmError>,
    ) -> Result<R, ArmError> {
        let now = Utc::now();
        let mut core = self.inner.lock();
        let advanced = advance(&mut core, now);
        let result = f(&mut core, now);
        if advanced || result.is_ok() {
            self.inner.changed(&core);
        }
        drop(core);
        self.inner.wake.notify_one();
        result
    }

    /// Writes the state file now when changes are waiting to be written behind (a large state,
    /// see `persist.rs`); without a state file, or with nothing pending, does nothing. Dropping
    /// the last clone of the emulator does the same.
    pub fn flush(&self) {
        if let Some(persister) = &self.inner.persister {
            persister.flush(&self.inner.lock().state);
        }
    }
}

/// Applies every due transition at `now`: operations (and boots), then Scheduled Events (which
/// may start operations, or end when theirs did); true when anything changed.
pub(crate) fn advance(core: &mut Core, now: DateTime<Utc>) -> bool {
    let operations = core.advance(now);
    let events = scheduled_events::advance(core, now);
    operations || events
}

/// When the next time-based transition is due: an operation's, a boot's or an event's.
pub(crate) fn next_deadline(core: &Core) -> Option<DateTime<Utc>> {
    match (core.next_deadline(), scheduled_events::next_deadline(core)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `seconds` as a notice (saturating).
pub(crate) fn notice(seconds: u64) -> chrono::Duration {
    i64::try_from(seconds)
        .ok()
        .and_then(chrono::Duration::try_seconds)
        .unwrap_or(chrono::Duration::MAX)
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Persists the state (now, or behind the changes when it is large) and bumps the change
    /// counter.
    fn changed(&self, core: &Core) {
        if let Some(persister) = &self.persister {
            persister.changed(&core.state, self.ticker_started.load(Ordering::SeqCst));
        }
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(persister) = &self.persister {
            let core = self.core.get_mut().unwrap_or_else(|e| e.into_inner());
            persister.flush(&core.state);
        }
    }
}
