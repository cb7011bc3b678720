//! The ARM emulator: VMs, managed disks and NICs under
//! `/subscriptions/{sub}/resourceGroups/{rg}/providers/...`, async operations, latency profiles,
//! fault injection, request statistics, a request log and an admin API, served by axum (see the shared
//! `arm-contract.md`); and beside it the Key Vault secrets data plane under `/keyvault/{vault}`
//! ([`key_vault`]).
//!
//! [`Emulator`] is the state (cheap to clone); [`app`] serves it. Time-based transitions (an
//! operation's latency, a guest's boot) are applied lazily on every request and by a background
//! task that wakes at the next deadline, so [`crate::compute::Compute::changes`] fires on time.

mod admin;
mod compute_impl;
mod config;
mod data_disks;
mod disks;
mod error;
mod faults;
mod force_detach;
mod http;
pub mod key_vault;
mod latency;
mod network_interfaces;
mod operations;
mod paths;
mod persist;
mod requests;
mod seed;
mod state;
mod stats;
mod virtual_machines;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::HeaderValue;
use chrono::{DateTime, Utc};
use tokio::sync::{Notify, watch};

pub use config::{ConfigError, EmulatorConfig};
pub use error::ArmError;
pub use faults::{ActiveRule, FaultKind, FaultRule, FaultSet, InvalidRule, Target, glob};
pub use latency::{Latency, LatencyProfile, Step};
pub use requests::{REQUEST_LOG_CAPACITY, RequestFilter, RequestLog, RequestRecord};
pub use stats::{Stats, operation_name};

use operations::{Action, OpError, OpStatus, Operation};
use persist::Persister;
use state::{Kind, State};

/// How long finished operation records stay pollable.
const OPERATION_RETENTION: chrono::Duration = chrono::Duration::hours(1);

/// How often finished operations are checked for expiry (not on every request: there may be
/// tens of thousands of them).
const EXPIRY_CHECK_INTERVAL: chrono::Duration = chrono::Duration::seconds(10);

/// The longest the background task sleeps between checks.
const MAX_TICK: Duration = Duration::from_secs(1);

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
}

/// Everything behind the emulator's lock.
pub(crate) struct Core {
    pub state: State,
    pub faults: FaultSet,
    pub latency: Latency,
    pub page_size: usize,
    /// When finished operations were last checked for expiry.
    pub expiry_checked: Option<DateTime<Utc>>,
}

/// What a request starts: the description an operation record is made from.
pub(crate) struct OpSpec<'a> {
    pub name: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub vm: Option<&'a str>,
    pub kind: Kind,
    pub action: Action,
    pub resource: String,
    pub subscription: &'a str,
    pub location: String,
    pub api_version: &'a str,
    pub steps: Vec<Step>,
    pub attach: Vec<String>,
    pub detach: Vec<String>,
    pub force_detach: Vec<String>,
    pub created: Vec<String>,
    pub fingerprint: Option<String>,
}

impl<'a> OpSpec<'a> {
    /// What a request to `ctx` starts on `resource`: no VM name filter, no disk work, no
    /// fingerprint (callers set those fields when they apply). `force_detach` lists the disks of
    /// `detach` detached with `detachOption: ForceDetach`.
    pub fn for_request(
        ctx: &'a http::Ctx,
        subscription: &'a str,
        kind: Kind,
        action: Action,
        resource: String,
        location: String,
        steps: Vec<Step>,
    ) -> Self {
        Self {
            name: &ctx.operation,
            method: ctx.method.as_str(),
            path: &ctx.path,
            vm: None,
            kind,
            action,
            resource,
            subscription,
            location,
            api_version: &ctx.api_version,
            steps,
            attach: Vec::new(),
            detach: Vec::new(),
            force_detach: Vec::new(),
            created: Vec::new(),
            fingerprint: None,
        }
    }
}

impl Core {
    /// Starts an operation: draws its latency, applies `fail_operation`/`hang_detach` rules,
    /// marks its resources busy, and records it. `hang_detach` rules are checked only when it
    /// detaches a disk without `ForceDetach`: a force detach is never held.
    pub fn begin(&mut self, spec: OpSpec<'_>, now: DateTime<Utc>) -> Operation {
        let target = Target {
            operation: spec.name,
            method: spec.method,
            path: spec.path,
            vm: spec.vm,
        };
        let fail_with = self
            .faults
            .fire(&[FaultKind::FailOperation], target)
            .map(|r| OpError {
                code: r
                    .rule
                    .code
                    .unwrap_or_else(|| "InternalOperationError".into()),
                message: r
                    .rule
                    .message
                    .unwrap_or_else(|| "The operation failed (injected fault).".into()),
                status: r.rule.status.unwrap_or(400),
            });
        let force_detach: Vec<String> = spec
            .force_detach
            .iter()
            .filter(|f| spec.detach.iter().any(|d| state::key(d) == state::key(f)))
            .cloned()
            .collect();
        let normal_detach = spec
            .detach
            .iter()
            .any(|d| !force_detach.iter().any(|f| state::key(f) == state::key(d)));
        let hang_rule = if !normal_detach {
            None
        } else {
            self.faults
                .fire(&[FaultKind::HangDetach], target)
                .map(|r| r.id)
        };
        let duration = self.latency.sample_max(&spec.steps);
        let op = Operation {
            id: uuid::Uuid::new_v4().to_string(),
            name: spec.name.to_owned(),
            kind: spec.kind,
            action: spec.action,
            resource: spec.resource,
            subscription: spec.subscription.to_owned(),
            location: spec.location,
            api_version: spec.api_version.to_owned(),
            status: OpStatus::InProgress,
            start_time: now,
            end_time: None,
            due: state::after(now, duration),
            error: None,
            fail_with,
            hang_rule,
            attach: spec.attach,
            detach: spec.detach,
            force_detach,
            waits_for: Vec::new(),
            created: spec.created,
            fingerprint: spec.fingerprint,
            retry_after: latency::retry_after(duration),
        };
        let touched = std::iter::once(&op.resource)
            .chain(&op.attach)
            .chain(&op.detach)
            .chain(&op.created);
        for id in touched {
            if let Some(r) = self.state.get_mut(id) {
                r.busy = Some(op.id.clone());
            }
        }
        self.state.operations.insert(op.id.clone(), op.clone());
        self.state.in_progress.insert(op.id.clone());
        op
    }

    /// Whether the operation is held: by a `hang_detach` rule that still exists, or by an
    /// operation it waits for that is still in progress.
    fn held(&self, op: &Operation) -> bool {
        op.hang_rule.is_some_and(|id| self.faults.contains(id))
            || op.waits_for.iter().any(|id| {
                self.state
                    .operations
                    .get(id)
                    .is_some_and(|o| o.status == OpStatus::InProgress)
            })
    }

    /// Completes every operation that is due and notes finished boots; true when anything
    /// changed.
    fn advance(&mut self, now: DateTime<Utc>) -> bool {
        let mut changed = false;
        // Completing one operation can release another that waited for it: repeat until none
        // is due (each round completes at least one operation, so this ends).
        loop {
            let mut due: Vec<(DateTime<Utc>, String)> = self
                .state
                .in_progress
                .iter()
                .filter_map(|id| self.state.operations.get(id))
                .filter(|o| o.status == OpStatus::InProgress && o.due <= now && !self.held(o))
                .map(|o| (o.due, o.id.clone()))
                .collect();
            if due.is_empty() {
                break;
            }
            due.sort();
            changed = true;
            for (_, id) in due {
                let boot = self.latency.sample(Step::Boot);
                operations::complete(&mut self.state, &id, now, boot);
            }
        }
        let State {
            resources,
            operations,
            pending_boots,
            in_progress,
            ..
        } = &mut self.state;
        in_progress.retain(|id| {
            operations
                .get(id)
                .is_some_and(|o| o.status == OpStatus::InProgress)
        });
        pending_boots.retain(|k| {
            let Some(r) = resources.get_mut(k) else {
                return false;
            };
            if r.kind != Kind::Vm || r.boot_signalled {
                return false;
            }
            match r.boot_at {
                None => false,
                Some(t) if t <= now => {
                    r.boot_signalled = true;
                    changed = true;
                    false
                }
                Some(_) => true,
            }
        });
        let before = self.state.operations.len();
        if self
            .expiry_checked
            .is_none_or(|checked| now - checked >= EXPIRY_CHECK_INTERVAL)
        {
            self.expiry_checked = Some(now);
            self.state
                .operations
                .retain(|_, o| o.end_time.is_none_or(|end| now - end < OPERATION_RETENTION));
        }
        changed || before != self.state.operations.len()
    }

    /// When the next time-based transition is due.
    fn next_deadline(&self) -> Option<DateTime<Utc>> {
        let ops = self
            .state
            .in_progress
            .iter()
            .filter_map(|id| self.state.operations.get(id))
            .filter(|o| o.status == OpStatus::InProgress && !self.held(o))
            .map(|o| o.due);
        let boots = self
            .state
            .pending_boots
            .iter()
            .filter_map(|k| self.state.resources.get(k))
            .filter(|r| !r.boot_signalled)
            .filter_map(|r| r.boot_at);
        ops.chain(boots).min()
    }
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
            expiry_checked: None,
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
    fn record(&self, answered: RequestRecord) {
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

    fn authorized(&self, header: Option<&HeaderValue>) -> bool {
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
    fn request_fault(&self, target: Target<'_>) -> Option<ArmError> {
        let kinds = [
            FaultKind::Throttle,
            FaultKind::ServerError,
            FaultKind::Conflict,
        ];
        let fired = self.inner.lock().faults.fire(&kinds, target)?;
        tracing::info!(rule = fired.id, kind = ?fired.rule.kind, path = target.path, "injected fault");
        http::fault_error(fired.rule.kind, &fired.rule, target.path)
    }

    /// How long a `stall` rule that fires for `target` holds the request, if one fires.
    fn stall(&self, target: Target<'_>) -> Option<std::time::Duration> {
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
        http::vm_in_path(&operation.resource).map(str::to_owned)
    }

    /// Runs `f` on the state after applying due transitions.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Core) -> R) -> R {
        let mut core = self.inner.lock();
        if core.advance(Utc::now()) {
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
        let advanced = core.advance(now);
        let result = f(&mut core, now);
        if advanced || result.is_ok() {
            self.inner.changed(&core);
        }
        drop(core);
        self.inner.wake.notify_one();
        result
    }

    /// Starts the background task that applies transitions on time (once, inside a runtime).
    fn ensure_ticker(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.inner.ticker_started.swap(true, Ordering::SeqCst) {
            return;
        }
        runtime.spawn(tick(Arc::downgrade(&self.inner)));
        if self.inner.persister.is_some() {
            runtime.spawn(persist_behind(Arc::downgrade(&self.inner)));
        }
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

/// Writes the state file behind the changes while it is large (see `persist.rs`).
async fn persist_behind(inner: Weak<Inner>) {
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let Some(persister) = &strong.persister else {
            return;
        };
        match persister.due(Instant::now()) {
            Some(wait) if wait.is_zero() => {
                let started = Instant::now();
                let (snapshot, generation) = {
                    let core = strong.lock();
                    (core.state.clone(), persister.snapshot_taken())
                };
                let cloned = started.elapsed();
                persister.write_behind(snapshot, generation).await;
                tracing::debug!(
                    ?cloned,
                    total = ?started.elapsed(),
                    "sandbox state written behind"
                );
            }
            Some(wait) => tokio::time::sleep(wait.min(MAX_TICK)).await,
            None => {
                tokio::select! {
                    () = tokio::time::sleep(MAX_TICK) => {}
                    () = persister.wake.notified() => {}
                }
            }
        }
    }
}

async fn tick(inner: Weak<Inner>) {
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let now = Utc::now();
        let next = {
            let mut core = strong.lock();
            if core.advance(now) {
                strong.changed(&core);
            }
            core.next_deadline()
        };
        let wait = next
            .map(|t| (t - now).to_std().unwrap_or(Duration::ZERO))
            .unwrap_or(MAX_TICK)
            .min(MAX_TICK);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = strong.wake.notified() => {}
        }
    }
}

/// The emulator's HTTP API: ARM routes, the Key Vault data plane under `/keyvault`, `/sandbox/*`
/// admin routes and `/healthz`.
pub fn app(emulator: Emulator) -> Router {
    emulator.ensure_ticker();
    let routes = Router::new()
        .merge(virtual_machines::routes())
        .merge(disks::routes())
        .merge(network_interfaces::routes())
        .merge(operations::routes())
        .merge(admin::routes())
        .merge(key_vault::routes(emulator.clone()))
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .fallback(|uri: axum::http::Uri| async move { ArmError::NoRoute(uri.path().to_owned()) })
        .layer(axum::middleware::from_fn_with_state(
            emulator.clone(),
            http::layer,
        ))
        .with_state(emulator);
    // Routing is exact but ARM paths are case-insensitive: respell before routing.
    Router::new().fallback_service(tower::ServiceExt::map_request(
        routes,
        paths::canonicalize as fn(axum::extract::Request) -> axum::extract::Request,
    ))
}
