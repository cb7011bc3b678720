//! Scheduled Events, as the Instance Metadata Service announces them to the VMs they concern:
//! scheduled with a NotBefore ([`schedule`], [`evict`] for a Spot eviction's `Preempt`), started
//! at NotBefore or as soon as a VM's agent approves them ([`acknowledge`]), carried out by the
//! platform on each VM named (`platform.rs`), and gone from the documents when the platform's
//! action ends (or when cancelled, [`cancel`]), their history kept an hour for
//! `GET /sandbox/scheduled-events`. [`advance`] moves them on time, under the emulator's lock,
//! beside the operations' own advance.
//!
//! - `Preempt` evicts (deallocates or deletes, by the VM's `evictionPolicy`) a running VM;
//! - `Reboot` restarts a running VM; `Redeploy` redeploys the VM; `Terminate` deletes it with its
//!   `deleteOption` cascade;
//! - `Freeze` and any other type do nothing visible: the event stays `Started` for its
//!   `DurationInSeconds` (none when -1), then ends.
//!
//! An event whose action finds its VM busy waits (retried at every tick) until the VM is idle; an
//! event whose VMs are all deleted before it starts ends.

use chrono::{DateTime, Utc};

use super::engine::Core;
use super::platform::{self, Carried};
use super::sizes;
use super::state::events::{EndedBy, EventStatus, ScheduledEvent, StartedBy};
use super::state::{Kind, OpStatus, key};
use super::virtual_machines::spot;

/// How long ended events stay in `GET /sandbox/scheduled-events`.
const HISTORY_RETENTION: chrono::Duration = chrono::Duration::hours(1);

/// What a new event is.
#[derive(Debug, Clone)]
pub(crate) struct NewEvent {
    /// `EventType`.
    pub event_type: String,
    /// The ids of the VMs it concerns.
    pub resources: Vec<String>,
    /// When it starts unless approved earlier.
    pub not_before: DateTime<Utc>,
    /// `DurationInSeconds`.
    pub duration_seconds: i64,
    /// `Description`.
    pub description: String,
    /// `EventSource`.
    pub event_source: String,
}

/// Why an event could not be cancelled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CancelError {
    /// No event has that id.
    #[error("no scheduled event {0}")]
    NotFound(String),
    /// It started (or ended) already.
    #[error("the scheduled event {0} has started already and can no longer be cancelled")]
    Started(String),
}

/// The notice Azure gives at least for an event of `event_type` (Microsoft Learn, *Scheduled
/// Events*): Freeze and Reboot 15 min, Redeploy 10 min, Terminate 5 min (its default
/// `notBeforeTimeout`), Preempt the eviction notice in force; none for other types.
pub(crate) fn default_notice(core: &Core, event_type: &str) -> chrono::Duration {
    match event_type.to_ascii_lowercase().as_str() {
        "freeze" | "reboot" => chrono::Duration::minutes(15),
        "redeploy" => chrono::Duration::minutes(10),
        "terminate" => chrono::Duration::minutes(5),
        "preempt" => core.eviction_notice,
        _ => chrono::Duration::zero(),
    }
}

/// The sandbox's description of an event of `event_type`.
pub(crate) fn default_description(event_type: &str) -> String {
    match event_type.to_ascii_lowercase().as_str() {
        "preempt" => "The Azure Spot virtual machine is being evicted.",
        "reboot" => "Virtual machine is going to be restarted.",
        "redeploy" => "Virtual machine is going to be redeployed to a new host.",
        "freeze" => "Host server is undergoing memory-preserving maintenance.",
        "terminate" => "Virtual machine is going to be deleted.",
        _ => "Scheduled by the sandbox.",
    }
    .to_owned()
}

/// Schedules an event: it shows in the documents of the VMs it names (their incarnations go
/// up), and starts at once when its NotBefore has come.
pub(crate) fn schedule(core: &mut Core, new: NewEvent, now: DateTime<Utc>) -> ScheduledEvent {
    let event = ScheduledEvent {
        id: uuid::Uuid::new_v4().to_string(),
        event_type: new.event_type,
        resources: new.resources,
        status: EventStatus::Scheduled,
        not_before: new.not_before,
        duration_seconds: new.duration_seconds,
        description: new.description,
        event_source: new.event_source,
        scheduled_at: now,
        started_at: None,
        started_by: None,
        acknowledged_by: None,
        ended_at: None,
        ended_by: None,
        operations: Vec::new(),
        waiting: Vec::new(),
    };
    let id = event.id.clone();
    let events = &mut core.state.scheduled_events;
    events.bump(&event.resources);
    events.events.insert(id.clone(), event.clone());
    tracing::info!(event = %id, "scheduled event");
    if new.not_before <= now {
        start(core, &id, now, StartedBy::NotBefore, None);
    }
    current(core, &id).unwrap_or(event)
}

/// The event `id` as it is now.
fn current(core: &Core, id: &str) -> Option<ScheduledEvent> {
    core.state.scheduled_events.events.get(id).cloned()
}

/// Announces the eviction of the VM `vm_id`: a `Preempt` event whose NotBefore is the eviction
/// notice from now (the one already announced, when the VM has one that has not ended).
pub(crate) fn evict(core: &mut Core, vm_id: &str, now: DateTime<Utc>) -> ScheduledEvent {
    let pending = core.state.scheduled_events.events.values().find(|e| {
        e.status.visible() && e.event_type.eq_ignore_ascii_case("Preempt") && e.names(vm_id)
    });
    if let Some(event) = pending {
        return event.clone();
    }
    let new = NewEvent {
        event_type: "Preempt".into(),
        resources: vec![vm_id.to_owned()],
        not_before: now
            .checked_add_signed(core.eviction_notice)
            .unwrap_or(DateTime::<Utc>::MAX_UTC),
        duration_seconds: -1,
        description: default_description("Preempt"),
        event_source: "Platform".into(),
    };
    schedule(core, new, now)
}

/// Evicts every running Spot VM whose `maxPrice` is now below its size's Spot price (after a
/// price went up); returns how many evictions were announced.
pub(crate) fn evict_priced_out(core: &mut Core, now: DateTime<Utc>) -> usize {
    let priced_out: Vec<String> = core
        .state
        .resources
        .values()
        .filter(|r| r.kind == Kind::Vm && spot::is_spot(&r.body) && platform::running(r))
        .filter(|r| {
            let size = r.body["properties"]["hardwareProfile"]["vmSize"]
                .as_str()
                .and_then(sizes::find);
            let price = size.and_then(|s| core.spot_prices.price(s));
            matches!((spot::max_price(&r.body), price), (Some(max), Some(price)) if max < price)
        })
        .map(|r| r.id().to_owned())
        .collect();
    for vm in &priced_out {
        evict(core, vm, now);
    }
    priced_out.len()
}

/// Approves the events `ids` from the metadata service of the VM `vm_id`: each that is still
/// scheduled starts now, for every VM it names. Ids of events that started, ended or never
/// existed are ignored (IMDS answers 200 even when an event is approved already).
pub(crate) fn acknowledge(core: &mut Core, vm_id: &str, ids: &[String], now: DateTime<Utc>) {
    let vm_name = super::state::name_of(vm_id).to_owned();
    for id in ids {
        let scheduled = core
            .state
            .scheduled_events
            .events
            .get(id)
            .is_some_and(|e| e.status == EventStatus::Scheduled && e.names(vm_id));
        if scheduled {
            start(
                core,
                id,
                now,
                StartedBy::Acknowledged,
                Some(vm_name.clone()),
            );
        }
    }
}

/// Cancels the scheduled event `id`: it vanishes from the documents, as Azure's do.
pub(crate) fn cancel(
    core: &mut Core,
    id: &str,
    now: DateTime<Utc>,
) -> Result<ScheduledEvent, CancelError> {
    let event = current(core, id).ok_or_else(|| CancelError::NotFound(id.to_owned()))?;
    if event.status != EventStatus::Scheduled {
        return Err(CancelError::Started(id.to_owned()));
    }
    end(core, id, now, EventStatus::Canceled, EndedBy::Canceled);
    Ok(current(core, id).unwrap_or(event))
}

/// Starts the event `id`: `Started` in the documents, the platform's action on each VM it
/// names.
fn start(
    core: &mut Core,
    id: &str,
    now: DateTime<Utc>,
    by: StartedBy,
    acknowledged_by: Option<String>,
) {
    let Some(event) = core.state.scheduled_events.events.get_mut(id) else {
        return;
    };
    event.status = EventStatus::Started;
    event.started_at = Some(now);
    event.started_by = Some(by);
    event.acknowledged_by = acknowledged_by;
    let (event_type, resources) = (event.event_type.clone(), event.resources.clone());
    core.state.scheduled_events.bump(&resources);
    tracing::info!(event = %id, %event_type, "scheduled event starts");
    let mut operations = Vec::new();
    let mut waiting = Vec::new();
    for vm in &resources {
        match platform::carry_out(core, &event_type, vm, now) {
            Carried::Started(op) => operations.push(op),
            Carried::Busy => waiting.push(vm.clone()),
            Carried::Nothing => {}
        }
    }
    if let Some(event) = core.state.scheduled_events.events.get_mut(id) {
        event.operations = operations;
        event.waiting = waiting;
    }
    if finished(core, id, now) {
        end(core, id, now, EventStatus::Ended, EndedBy::Completed);
    }
}

/// Ends the event `id` now with `status`: it vanishes from the documents.
fn end(core: &mut Core, id: &str, now: DateTime<Utc>, status: EventStatus, by: EndedBy) {
    let events = &mut core.state.scheduled_events;
    let Some(event) = events.events.get_mut(id) else {
        return;
    };
    event.status = status;
    event.ended_at = Some(now);
    event.ended_by = Some(by);
    event.waiting.clear();
    let resources = event.resources.clone();
    events.bump(&resources);
    tracing::info!(event = %id, "scheduled event ends");
}

/// When a started event with no operation ends: after its duration (at once for -1).
fn quiet_end(event: &ScheduledEvent) -> Option<DateTime<Utc>> {
    let started = event.started_at?;
    let seconds = event.duration_seconds.max(0);
    Some(
        started
            .checked_add_signed(chrono::Duration::seconds(seconds))
            .unwrap_or(DateTime::<Utc>::MAX_UTC),
    )
}

/// Whether the started event `id` is done: no VM waiting, every operation ended, and, when it
/// started none, its duration passed.
fn finished(core: &Core, id: &str, now: DateTime<Utc>) -> bool {
    let Some(event) = core.state.scheduled_events.events.get(id) else {
        return true;
    };
    if !event.waiting.is_empty() {
        return false;
    }
    if event.operations.is_empty() {
        return quiet_end(event).is_none_or(|end| end <= now);
    }
    event.operations.iter().all(|op| {
        core.state
            .operations
            .get(op)
            .is_none_or(|o| o.status != OpStatus::InProgress)
    })
}

/// Moves the events on at `now`: due ones start, waiting actions are tried again, done ones end,
/// old history goes; true when anything changed.
pub(crate) fn advance(core: &mut Core, now: DateTime<Utc>) -> bool {
    let active: Vec<(String, EventStatus)> = core
        .state
        .scheduled_events
        .events
        .values()
        .filter(|e| e.status.visible())
        .map(|e| (e.id.clone(), e.status))
        .collect();
    let mut changed = false;
    for (id, status) in active {
        let Some(event) = current(core, &id) else {
            continue;
        };
        if status == EventStatus::Scheduled {
            if event
                .resources
                .iter()
                .all(|vm| core.state.get(vm).is_none())
            {
                end(core, &id, now, EventStatus::Ended, EndedBy::VmDeleted);
                changed = true;
            } else if event.not_before <= now {
                start(core, &id, now, StartedBy::NotBefore, None);
                changed = true;
            }
            continue;
        }
        let mut still = Vec::new();
        for vm in &event.waiting {
            match platform::carry_out(core, &event.event_type, vm, now) {
                Carried::Started(op) => {
                    if let Some(e) = core.state.scheduled_events.events.get_mut(&id) {
                        e.operations.push(op);
                    }
                    changed = true;
                }
                Carried::Busy => still.push(vm.clone()),
                Carried::Nothing => changed = true,
            }
        }
        if let Some(e) = core.state.scheduled_events.events.get_mut(&id) {
            e.waiting = still;
        }
        if finished(core, &id, now) {
            end(core, &id, now, EventStatus::Ended, EndedBy::Completed);
            changed = true;
        }
    }
    let before = core.state.scheduled_events.events.len();
    core.state
        .scheduled_events
        .events
        .retain(|_, e| e.ended_at.is_none_or(|end| now - end < HISTORY_RETENTION));
    changed || before != core.state.scheduled_events.events.len()
}

/// When an event is next due to move on its own: a NotBefore, or the end of a started event's
/// duration.
pub(crate) fn next_deadline(core: &Core) -> Option<DateTime<Utc>> {
    core.state
        .scheduled_events
        .events
        .values()
        .filter_map(|e| match e.status {
            EventStatus::Scheduled => Some(e.not_before),
            EventStatus::Started if e.operations.is_empty() && e.waiting.is_empty() => quiet_end(e),
            _ => None,
        })
        .min()
}

/// Whether the VM `vm_id` exists (its metadata service answers).
pub(crate) fn vm_exists(core: &Core, vm_id: &str) -> bool {
    core.state
        .resources
        .get(&key(vm_id))
        .is_some_and(|r| r.kind == Kind::Vm)
}
