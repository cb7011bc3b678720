//! Azure Scheduled Events, the pure side: what the VM's Instance Metadata Service says is about
//! to happen to it, how nodewright's node agent publishes that on the Node, how the controller
//! reads it back (also from AKS node-problem-detector's conditions), what the pool's policy
//! says about it, and what a workflow does about each event.
//!
//! # Expected Flow
//! 1. The agent (one per Node) polls IMDS, [`parse`]s the document, keeps the events naming
//!    its own VM ([`for_vm`]) and writes them on its Node: the condition [`condition_for`] and
//!    the annotation [`annotation_for`] (the events as IMDS sent them).
//! 2. The controller reads a Node's pending events with [`read_from_node`]: the agent's
//!    annotation, or, without one, node-problem-detector's `VMEventScheduled` and
//!    `PreemptionScheduled` conditions.
//! 3. Each event gets one workflow ([`workflow_id`]: `event/<cluster>/<EventId>`), which asks
//!    [`decide`] for an [`EventPlan`] under the pool's [`ScheduledEventsPolicy`] (pool file
//!    `spec.scheduledEvents`, [`ScheduledEventsSpec`]), drains as told (each pod's grace cut by
//!    [`grace_for`]), and, for a [`DrainThenAck`], asks the agent to acknowledge
//!    ([`with_ack`] on the Node's `nodewright.io/scheduled-event-ack`) once every VM the event
//!    names is ready ([`may_acknowledge`]) and when the maintenance window lets it ([`ack_at`]).
//! 4. The agent POSTs `StartRequests` for the ids it finds in that annotation
//!    ([`acks_requested`]) and for no other.
//!
//! # Guarantees
//! - Nothing here panics on any input: every value from IMDS or a Node is bounded before it is
//!   read ([`MAX_DOCUMENT_BYTES`], [`MAX_EVENTS`], [`MAX_EVENT_ID_LEN`] and the rest), and an
//!   over-long document is an error naming what was too long.
//! - An acknowledgement is never asked for later than the event's `NotBefore`, nor before every
//!   VM the event names is ready: Azure's acknowledgement starts the event on all of them.
//! - A `NotBefore` that cannot be read counts as now: the event is acted on at once, as
//!   Karpenter's Azure provider does.
//!
//! Times are Unix seconds, as everywhere in `model`; "now" is always a parameter.

mod condition;
mod decide;
mod document;
mod ids;
mod policy;

pub use condition::{
    ANNOTATION_ACK, ANNOTATION_EVENTS, CONDITION_TYPE, EventOrigin, MAX_ACKS, MAX_ANNOTATION_BYTES,
    MAX_CONDITION_MESSAGE_BYTES, NO_EVENT_REASON, NPD_PREEMPTION_CONDITION, NPD_VM_EVENT_CONDITION,
    NodeConditionView, PendingEvent, acks_requested, annotation_for, condition_for, read_from_node,
    synthetic_event_id, with_ack,
};
pub use decide::{
    AckTime, DEFAULT_POD_GRACE_SECONDS, DrainNow, DrainThenAck, EventPlan, MachineFacts,
    SKIP_VOLUME_REATTACH_BELOW_SECONDS, WindowView, ack_at, decide, grace_for, may_acknowledge,
};
pub use document::{
    Document, DocumentError, EventStatus, EventType, MAX_DESCRIPTION_CHARS, MAX_DOCUMENT_BYTES,
    MAX_EVENT_ID_LEN, MAX_EVENTS, MAX_RESOURCE_NAME_LEN, MAX_RESOURCES, MAX_TOKEN_LEN, RawEvent,
    ScheduledEvent, ScheduledEvents, for_vm, is_event_id, parse, parse_list,
};
pub use ids::{EVENT_WORKFLOW_PREFIX, MAX_PLAIN_EVENT_ID_LEN, workflow_id};
pub use policy::{
    DEFAULT_DRAIN_MARGIN, DEFAULT_FREEZE_IGNORE_BELOW, EventAction, EventRule, EventRuleSpec,
    MAX_DRAIN_MARGIN, MAX_IGNORE_BELOW, SPEC_FIELD, ScheduledEventsPolicy, ScheduledEventsSpec,
    validate,
};
