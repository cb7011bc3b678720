//! The agent's loop: every poll it reads the VM's Scheduled Events, keeps its own VM's, writes
//! them on the Node when they changed (and every 10 minutes), announces each new one with an Event,
//! and acknowledges those the controller asked for.
//!
//! # Expected Flow (one tick)
//! 1. GET the IMDS document; on failure log (rate-limited) and wait for the next tick.
//! 2. Keep the events naming this VM (`for_vm`).
//! 3. When [`Memory::is_due`]: read the Node, write the condition (its transition time kept
//!    while its status stays) and the annotation.
//! 4. Announce each event not announced yet with a Warning Event.
//! 5. While an event of this VM is `Scheduled` and not acknowledged: read the Node's
//!    acknowledgement annotation and POST a StartRequest for each id it asks for
//!    ([`Acknowledged::to_acknowledge`]).
//!
//! # Guarantees
//! - Nothing is acknowledged that the Node's `nodewright.io/scheduled-event-ack` does not name.
//! - The Node is read only when something is to be written or a request may be waiting: with no
//!   event pending, one GET and two patches every 10 minutes.
//! - No failure ends the loop; it is logged and the tick is tried again at the next poll.

use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use k8s_openapi::api::core::v1::Node;
use nodewright_model::scheduled_events::{
    ANNOTATION_ACK, ANNOTATION_EVENTS, CONDITION_TYPE, ScheduledEvent, acks_requested,
    annotation_for, condition_for, for_vm,
};
use nodewright_model::text::error_chain;
use tokio::time::MissedTickBehavior;

use crate::ack::Acknowledged;
use crate::error::Result;
use crate::imds::Imds;
use crate::node::NodeApi;
use crate::publish::{self, Memory};
use crate::throttle::Throttled;

/// The agent of one Node.
pub struct Agent {
    imds: Imds,
    node: NodeApi,
    vm_name: String,
    memory: Memory,
    acknowledged: Acknowledged,
    node_uid: Option<String>,
    imds_log: Throttled,
    kube_log: Throttled,
    ack_log: Throttled,
}

impl Agent {
    /// The agent of `node`, whose VM IMDS names `vm_name`, reading `imds`.
    pub fn new(imds: Imds, node: NodeApi, vm_name: &str) -> Self {
        Self {
            imds,
            node,
            vm_name: vm_name.to_owned(),
            memory: Memory::default(),
            acknowledged: Acknowledged::default(),
            node_uid: None,
            imds_log: Throttled::default(),
            kube_log: Throttled::default(),
            ack_log: Throttled::default(),
        }
    }

    /// Polls every `interval` until `shutdown` completes.
    pub async fn run(
        mut self,
        interval: Duration,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                _ = ticker.tick() => self.tick().await,
            }
        }
    }

    /// One poll (the module's Expected Flow).
    async fn tick(&mut self) {
        let document = match self.imds.document().await {
            Ok(document) => {
                if self.imds_log.success() {
                    tracing::info!(url = %self.imds.url(), "the metadata service answers again");
                }
                document
            }
            Err(error) => {
                let message = error_chain(&error);
                if let Some(left_out) = self.imds_log.failure(&message, Instant::now()) {
                    tracing::warn!(left_out, "{message}; polling on");
                }
                return;
            }
        };
        let events = for_vm(&document.events, &self.vm_name);
        self.memory.forget_all_but(&events);
        self.acknowledged.forget_all_but(&events);
        let result = self.step(document.incarnation, &events).await;
        match result {
            Ok(()) => {
                if self.kube_log.success() {
                    tracing::info!(node = %self.node.name(), "the Kubernetes API answers again");
                }
            }
            Err(error) => {
                let message = error_chain(&error);
                if let Some(left_out) = self.kube_log.failure(&message, Instant::now()) {
                    tracing::warn!(left_out, "{message}; trying again at the next poll");
                }
            }
        }
    }

    /// Steps 3 to 5 for the VM's `events` of document `incarnation`.
    async fn step(&mut self, incarnation: i64, events: &[ScheduledEvent]) -> Result<()> {
        let node = self.publish(incarnation, events).await?;
        self.announce(events).await?;
        self.acknowledge(events, node).await
    }

    /// Writes the condition and the annotation when due; the Node read, if it was.
    async fn publish(
        &mut self,
        incarnation: i64,
        events: &[ScheduledEvent],
    ) -> Result<Option<Node>> {
        let annotation = annotation_for(events);
        if !self.memory.is_due(incarnation, &annotation, Instant::now()) {
            return Ok(None);
        }
        let node = self.node.get().await?;
        self.node_uid.clone_from(&node.metadata.uid);
        let existing = node
            .status
            .as_ref()
            .and_then(|status| status.conditions.as_ref())
            .and_then(|conditions| conditions.iter().find(|c| c.type_ == CONDITION_TYPE));
        let view = condition_for(events);
        let now = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
        self.node
            .patch_condition(&publish::condition_patch(&view, existing, &now))
            .await?;
        let written_before = node
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(ANNOTATION_EVENTS))
            .is_some_and(|before| *before == annotation);
        self.node
            .patch_annotation(&publish::annotation_patch(&annotation))
            .await?;
        if !written_before {
            tracing::info!(
                node = %self.node.name(),
                incarnation,
                events = events.len(),
                status = %view.status,
                reason = %view.reason,
                "published the VM's Scheduled Events: {}",
                view.message
            );
        }
        self.memory
            .published(incarnation, &annotation, Instant::now());
        Ok(Some(node))
    }

    /// Sends an Event for each event not announced yet.
    async fn announce(&mut self, events: &[ScheduledEvent]) -> Result<()> {
        let pending: Vec<ScheduledEvent> = self
            .memory
            .to_announce(events)
            .into_iter()
            .cloned()
            .collect();
        for event in pending {
            let now = Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true);
            let object =
                publish::event_object(self.node.name(), self.node_uid.as_deref(), &event, &now);
            let created = self.node.create_event(object, &event.id).await?;
            if created {
                tracing::info!(
                    node = %self.node.name(),
                    event_id = %event.id,
                    event_type = %event.event_type,
                    "announced Scheduled Event {} with reason {}",
                    event.id,
                    publish::event_reason(&event)
                );
            }
            self.memory.announced(&event.id);
        }
        Ok(())
    }

    /// Acknowledges the events the Node's annotation asks for (`node`: the Node if this tick
    /// read it already).
    async fn acknowledge(&mut self, events: &[ScheduledEvent], node: Option<Node>) -> Result<()> {
        if !self.acknowledged.awaits_request(events) {
            return Ok(());
        }
        let node = match node {
            Some(node) => node,
            None => self.node.get().await?,
        };
        let annotation = node
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(ANNOTATION_ACK))
            .map(String::as_str);
        for event_id in self
            .acknowledged
            .to_acknowledge(&acks_requested(annotation), events)
        {
            match self.imds.start(&event_id).await {
                Ok(()) => {
                    tracing::info!(
                        node = %self.node.name(),
                        event_id = %event_id,
                        "acknowledged Scheduled Event {event_id}, as {ANNOTATION_ACK} asks: it starts now"
                    );
                    self.acknowledged.record(&event_id);
                    self.ack_log.success();
                }
                Err(error) => {
                    let message = error_chain(&error);
                    if let Some(left_out) = self.ack_log.failure(&message, Instant::now()) {
                        tracing::warn!(left_out, "{message}; trying again at the next poll");
                    }
                }
            }
        }
        Ok(())
    }
}
