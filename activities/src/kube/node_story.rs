//! The story of a Node as `kubectl describe node` and `kubectl get events` tell it: Kubernetes
//! Events (events.k8s.io/v1, reported by [`REPORTING_CONTROLLER`]) about what nodewright does to
//! the Node and why — joined, cordoned, an eviction blocked by a PodDisruptionBudget, a pod
//! evicted or force-deleted, a volume moved, a remediation, the Node deleted.
//!
//! An occurrence that repeats (the same Node, reason, action and subject, e.g. one pod held by
//! one budget round after round) is one Event whose `series` counts the occurrences, as
//! Kubernetes' own recorder does: the Event is created once, its series written at the second
//! occurrence and then at most every [`SERIES_WRITE_INTERVAL`], so a drain waiting on a budget
//! costs the apiserver no request per round. The Event's name comes from what it is about, so a
//! restarted worker finds the series again and goes on counting from it.
//!
//! Telling is best effort: an Event that cannot be written is logged and never fails the
//! activity that does the work.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

pub use super::events::Occurrence;
use super::events::{NODE_EVENTS_NAMESPACE, new_event};

/// How often a repeating occurrence's count is written, after its second occurrence (Kubernetes'
/// own recorder: every 30 minutes). 200 drains held by budgets cost 0.7 writes a second.
pub const SERIES_WRITE_INTERVAL: Duration = Duration::from_secs(300);

/// How long a series is remembered without a new occurrence (Kubernetes keeps Events an hour).
const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// What is known of a series this worker wrote.
#[derive(Debug, Clone)]
struct Series {
    /// Occurrences counted.
    count: i32,
    /// The count last written to the Event.
    written: i32,
    /// When it was last written.
    written_at: Instant,
    /// The last occurrence.
    seen_at: Instant,
}

/// The series this worker has written, by Event name.
#[derive(Debug, Default)]
pub struct NodeStory {
    series: Mutex<HashMap<String, Series>>,
}

/// The Event's name for `occurrence`: `<node>.<16 hex digits>` of its reason, action and
/// subject (FNV-1a, the same in every build).
pub fn event_name(occurrence: &Occurrence<'_>) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [occurrence.reason, occurrence.action, occurrence.subject] {
        for byte in part.bytes().chain(std::iter::once(0)) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{}.{hash:016x}", occurrence.node)
}

/// What to do about an occurrence, from what is known of its series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Not seen by this worker: create the Event (or find it).
    Create,
    /// Write the series with this count.
    WriteSeries(i32),
    /// Counted; written later.
    Nothing,
}

impl NodeStory {
    /// Records `occurrence` as an Event about its Node (see the module's documentation); logs
    /// instead of failing.
    pub async fn tell(&self, client: &kube::Client, occurrence: Occurrence<'_>) {
        let name = event_name(&occurrence);
        if let Err(error) = self.tell_named(client, &occurrence, &name).await {
            tracing::warn!(
                node = occurrence.node,
                reason = occurrence.reason,
                event = %name,
                error = %error,
                "cannot record an Event about the Node"
            );
        }
    }

    /// [`Self::tell`] about a Node just deleted: the Event names it without its uid.
    pub async fn tell_gone(&self, client: &kube::Client, occurrence: Occurrence<'_>) {
        let name = event_name(&occurrence);
        let events: Api<Event> = Api::namespaced(client.clone(), NODE_EVENTS_NAMESPACE);
        let event = new_event(&occurrence, &name, None);
        match events.create(&PostParams::default(), &event).await {
            Ok(_) => crate::metrics::node_event(occurrence.reason),
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => tracing::warn!(
                node = occurrence.node,
                reason = occurrence.reason,
                event = %name,
                error = %error,
                "cannot record an Event about the Node"
            ),
        }
    }

    fn step(&self, name: &str, now: Instant) -> Step {
        let Ok(mut series) = self.series.lock() else {
            return Step::Nothing;
        };
        let Some(known) = series.get_mut(name) else {
            return Step::Create;
        };
        known.count = known.count.saturating_add(1);
        known.seen_at = now;
        let due =
            known.written < 2 || now.duration_since(known.written_at) >= SERIES_WRITE_INTERVAL;
        if due {
            known.written = known.count;
            known.written_at = now;
            Step::WriteSeries(known.count)
        } else {
            Step::Nothing
        }
    }

    fn remember(&self, name: &str, count: i32, now: Instant) {
        if let Ok(mut series) = self.series.lock() {
            // Pruned as a series is added, not at every repeat (a held drain repeats each round).
            series.retain(|_, known| now.duration_since(known.seen_at) < FORGET_AFTER);
            series.insert(
                name.to_owned(),
                Series {
                    count,
                    written: count,
                    written_at: now,
                    seen_at: now,
                },
            );
        }
    }

    async fn tell_named(
        &self,
        client: &kube::Client,
        occurrence: &Occurrence<'_>,
        name: &str,
    ) -> Result<(), kube::Error> {
        let now = Instant::now();
        let events: Api<Event> = Api::namespaced(client.clone(), NODE_EVENTS_NAMESPACE);
        match self.step(name, now) {
            Step::Nothing => {}
            Step::WriteSeries(count) => write_series(&events, name, count).await?,
            Step::Create => {
                let Some(node) = Api::<Node>::all(client.clone())
                    .get_opt(occurrence.node)
                    .await?
                else {
                    return Ok(());
                };
                let event = new_event(occurrence, name, node.metadata.uid);
                match events.create(&PostParams::default(), &event).await {
                    Ok(_) => self.remember(name, 1, now),
                    // Written before this worker started: go on counting from its series.
                    Err(kube::Error::Api(status)) if status.code == 409 => {
                        let earlier = events
                            .get_opt(name)
                            .await?
                            .and_then(|event| event.series.map(|series| series.count))
                            .unwrap_or(1);
                        let count = earlier.saturating_add(1);
                        write_series(&events, name, count).await?;
                        self.remember(name, count, now);
                    }
                    Err(error) => return Err(error),
                }
            }
        }
        crate::metrics::node_event(occurrence.reason);
        Ok(())
    }
}

async fn write_series(events: &Api<Event>, name: &str, count: i32) -> Result<(), kube::Error> {
    let observed = chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    let patch = json!({ "series": { "count": count, "lastObservedTime": observed } });
    events
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occurrence<'a>(reason: &'a str, subject: &'a str) -> Occurrence<'a> {
        Occurrence {
            node: "blue-bcdfg",
            reason,
            action: "Drain",
            subject,
            note: String::new(),
            warning: false,
        }
    }

    #[test]
    fn a_name_is_the_same_for_the_same_occurrence_and_differs_for_another() {
        let blocked = event_name(&occurrence("EvictionBlocked", "shop/web-0"));
        assert_eq!(
            blocked,
            event_name(&occurrence("EvictionBlocked", "shop/web-0"))
        );
        assert!(blocked.starts_with("blue-bcdfg."));
        assert_eq!(blocked.len(), "blue-bcdfg.".len() + 16);
        assert_ne!(
            blocked,
            event_name(&occurrence("EvictionBlocked", "shop/web-1"))
        );
        assert_ne!(blocked, event_name(&occurrence("Evicted", "shop/web-0")));
        // The parts are separated: moving a character from one to the next is another name.
        assert_ne!(
            event_name(&occurrence("Ab", "c")),
            event_name(&occurrence("A", "bc"))
        );
    }

    #[test]
    fn a_repeat_writes_its_series_at_once_then_at_most_every_interval() {
        let story = NodeStory::default();
        let start = Instant::now();
        assert_eq!(story.step("e", start), Step::Create);
        story.remember("e", 1, start);
        assert_eq!(story.step("e", start), Step::WriteSeries(2));
        assert_eq!(
            story.step("e", start + Duration::from_secs(1)),
            Step::Nothing
        );
        assert_eq!(
            story.step("e", start + Duration::from_secs(2)),
            Step::Nothing
        );
        assert_eq!(
            story.step("e", start + SERIES_WRITE_INTERVAL),
            Step::WriteSeries(5)
        );
    }
}
