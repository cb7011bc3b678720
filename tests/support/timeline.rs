//! A timeline of what happens to a namespace's pods, to VolumeAttachments and to managed disks,
//! recorded while a test runs, for assertions on the order of things ("the old attachment was
//! gone before the new one was created") and for measuring how long each phase took.
//!
//! Pods and VolumeAttachments are followed with kube's watcher (each event is stamped when it
//! arrives, milliseconds after the API server made the change); disks are sampled through ARM at
//! an interval, so a `managedBy` value held for less than the interval may be missed. Every
//! stamp is the time since [`Timeline::start`] on one monotonic clock.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use nodewright_activities::azure::ArmClient;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::workloads::{CSI_DRIVER, vm_name_of};

/// Something that happened, as the recorder saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// A pod appeared (or was listed when the recorder started).
    PodCreated {
        /// The pod's name.
        pod: String,
    },
    /// A pod was bound to a node.
    PodScheduled {
        /// The pod's name.
        pod: String,
        /// The node.
        node: String,
    },
    /// A pod's phase became `Running`.
    PodRunning {
        /// The pod's name.
        pod: String,
        /// The node it runs on.
        node: String,
    },
    /// A pod's `deletionTimestamp` was set.
    PodDeleting {
        /// The pod's name.
        pod: String,
        /// Its node, if it was bound to one.
        node: Option<String>,
    },
    /// A pod is gone from the API.
    PodGone {
        /// The pod's name.
        pod: String,
        /// Its node, if it was bound to one.
        node: Option<String>,
    },
    /// A VolumeAttachment of the volume on the node appeared.
    AttachmentCreated {
        /// The PersistentVolume.
        volume: String,
        /// The node.
        node: String,
    },
    /// Its `status.attached` became true.
    Attached {
        /// The PersistentVolume.
        volume: String,
        /// The node.
        node: String,
    },
    /// Its `status.attached` became false again (after a detach, before the object goes).
    Detached {
        /// The PersistentVolume.
        volume: String,
        /// The node.
        node: String,
    },
    /// Its `attachError` or `detachError` changed to this message.
    AttachmentError {
        /// The PersistentVolume.
        volume: String,
        /// The node.
        node: String,
        /// `attach: <message>` or `detach: <message>`.
        message: String,
    },
    /// Its `deletionTimestamp` was set (the attach-detach controller decided to detach).
    AttachmentDeleting {
        /// The PersistentVolume.
        volume: String,
        /// The node.
        node: String,
    },
    /// The VolumeAttachment is gone from the API (the disk is detached).
    AttachmentGone {
        /// The PersistentVolume.
        volume: String,
        /// The node.
        node: String,
    },
    /// The sampler saw the disk's `managedBy` change.
    DiskManagedBy {
        /// The disk's name.
        disk: String,
        /// The VM's name (lower case), or `None` when not attached.
        vm: Option<String>,
    },
    /// A point the test marked itself, e.g. "cordoned node-1".
    Mark(String),
}

impl What {
    /// [`What::PodScheduled`].
    pub fn pod_scheduled(pod: &str, node: &str) -> Self {
        Self::PodScheduled {
            pod: pod.to_owned(),
            node: node.to_owned(),
        }
    }

    /// [`What::PodRunning`].
    pub fn pod_running(pod: &str, node: &str) -> Self {
        Self::PodRunning {
            pod: pod.to_owned(),
            node: node.to_owned(),
        }
    }

    /// [`What::PodDeleting`] of a pod bound to `node`.
    pub fn pod_deleting(pod: &str, node: &str) -> Self {
        Self::PodDeleting {
            pod: pod.to_owned(),
            node: Some(node.to_owned()),
        }
    }

    /// [`What::PodGone`] of a pod bound to `node`.
    pub fn pod_gone(pod: &str, node: &str) -> Self {
        Self::PodGone {
            pod: pod.to_owned(),
            node: Some(node.to_owned()),
        }
    }

    /// [`What::AttachmentCreated`].
    pub fn attachment_created(volume: &str, node: &str) -> Self {
        Self::AttachmentCreated {
            volume: volume.to_owned(),
            node: node.to_owned(),
        }
    }

    /// [`What::Attached`].
    pub fn attached(volume: &str, node: &str) -> Self {
        Self::Attached {
            volume: volume.to_owned(),
            node: node.to_owned(),
        }
    }

    /// [`What::Detached`].
    pub fn detached(volume: &str, node: &str) -> Self {
        Self::Detached {
            volume: volume.to_owned(),
            node: node.to_owned(),
        }
    }

    /// [`What::AttachmentDeleting`].
    pub fn attachment_deleting(volume: &str, node: &str) -> Self {
        Self::AttachmentDeleting {
            volume: volume.to_owned(),
            node: node.to_owned(),
        }
    }

    /// [`What::AttachmentGone`].
    pub fn attachment_gone(volume: &str, node: &str) -> Self {
        Self::AttachmentGone {
            volume: volume.to_owned(),
            node: node.to_owned(),
        }
    }

    /// [`What::DiskManagedBy`]: attached to the VM `vm`, or detached when `None`.
    pub fn disk_managed_by(disk: &str, vm: Option<&str>) -> Self {
        Self::DiskManagedBy {
            disk: disk.to_owned(),
            vm: vm.map(str::to_lowercase),
        }
    }
}

impl fmt::Display for What {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on = |node: &Option<String>| node.as_deref().unwrap_or("no node").to_owned();
        match self {
            Self::PodCreated { pod } => write!(f, "pod {pod} created"),
            Self::PodScheduled { pod, node } => write!(f, "pod {pod} scheduled to {node}"),
            Self::PodRunning { pod, node } => write!(f, "pod {pod} Running on {node}"),
            Self::PodDeleting { pod, node } => write!(f, "pod {pod} deleting (on {})", on(node)),
            Self::PodGone { pod, node } => write!(f, "pod {pod} gone (was on {})", on(node)),
            Self::AttachmentCreated { volume, node } => {
                write!(f, "VolumeAttachment {volume} on {node} created")
            }
            Self::Attached { volume, node } => {
                write!(f, "VolumeAttachment {volume} on {node} attached")
            }
            Self::Detached { volume, node } => {
                write!(f, "VolumeAttachment {volume} on {node} attached=false")
            }
            Self::AttachmentError {
                volume,
                node,
                message,
            } => write!(f, "VolumeAttachment {volume} on {node} error: {message}"),
            Self::AttachmentDeleting { volume, node } => {
                write!(f, "VolumeAttachment {volume} on {node} deleting")
            }
            Self::AttachmentGone { volume, node } => {
                write!(f, "VolumeAttachment {volume} on {node} gone")
            }
            Self::DiskManagedBy { disk, vm } => match vm {
                Some(vm) => write!(f, "disk {disk} managedBy {vm}"),
                None => write!(f, "disk {disk} managedBy none (detached)"),
            },
            Self::Mark(label) => write!(f, "-- {label}"),
        }
    }
}

/// One recorded event: when (since the recorder started) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Time since [`Timeline::start`].
    pub at: Duration,
    /// What happened.
    pub what: What,
}

struct Inner {
    start: Instant,
    started_at: DateTime<Utc>,
    events: Mutex<Vec<Event>>,
}

impl Inner {
    fn record(&self, what: What) -> Duration {
        let at = self.start.elapsed();
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Event { at, what });
        at
    }
}

/// The recorder: watches run in background tasks until it is dropped.
pub struct Timeline {
    inner: Arc<Inner>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Timeline {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Timeline {
    /// Starts watching the pods of `namespace` and the VolumeAttachments (of the CSI driver
    /// [`CSI_DRIVER`]) whose PersistentVolume's name starts with `volume_prefix`; returns once
    /// both watches have listed what exists, so nothing that happens afterwards is missed.
    pub async fn start(
        client: &kube::Client,
        namespace: &str,
        volume_prefix: &str,
    ) -> Result<Self> {
        let inner = Arc::new(Inner {
            start: Instant::now(),
            started_at: Utc::now(),
            events: Mutex::new(Vec::new()),
        });
        let (pods_ready, pods_listed) = oneshot::channel();
        let (attachments_ready, attachments_listed) = oneshot::channel();
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let attachments: Api<VolumeAttachment> = Api::all(client.clone());
        let prefix = volume_prefix.to_owned();
        let tasks = vec![
            tokio::spawn(follow(
                pods,
                inner.clone(),
                pods_ready,
                observe_pod,
                pod_gone,
            )),
            tokio::spawn(follow(
                attachments,
                inner.clone(),
                attachments_ready,
                move |seen, va| observe_attachment(&prefix, seen, va),
                attachment_gone,
            )),
        ];
        let timeline = Self { inner, tasks };
        let listed = async {
            pods_listed.await.context("the pod watch ended")?;
            attachments_listed
                .await
                .context("the VolumeAttachment watch ended")
        };
        tokio::time::timeout(Duration::from_secs(30), listed)
            .await
            .context("the watches did not list pods and VolumeAttachments within 30 s")??;
        Ok(timeline)
    }

    /// Also samples each disk's `managedBy` through ARM every `interval` (one task per disk),
    /// recording [`What::DiskManagedBy`] whenever it changes. Failed reads are skipped.
    pub fn sample_disks(&mut self, arm: &ArmClient, disks: &[String], interval: Duration) {
        for disk in disks {
            let (arm, disk, inner) = (arm.clone(), disk.clone(), self.inner.clone());
            self.tasks.push(tokio::spawn(async move {
                let mut last: Option<Option<String>> = None;
                loop {
                    if let Ok(found) = arm.get_disk(&disk).await {
                        let vm = found.managed_by().map(vm_name_of);
                        if last.as_ref() != Some(&vm) {
                            inner.record(What::DiskManagedBy {
                                disk: disk.clone(),
                                vm: vm.clone(),
                            });
                            last = Some(vm);
                        }
                    }
                    tokio::time::sleep(interval).await;
                }
            }));
        }
    }

    /// Records a mark (something the test did) now; returns its time.
    pub fn mark(&self, label: &str) -> Duration {
        self.inner.record(What::Mark(label.to_owned()))
    }

    /// The time since the recorder started.
    pub fn now(&self) -> Duration {
        self.inner.start.elapsed()
    }

    /// The wall-clock time the recorder started (to find the same moments in component logs).
    pub fn started_at(&self) -> DateTime<Utc> {
        self.inner.started_at
    }

    /// Every event so far, oldest first.
    pub fn events(&self) -> Vec<Event> {
        self.inner
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The first event at or after `after` for which `wanted` holds.
    pub fn find_after(&self, after: Duration, wanted: impl Fn(&What) -> bool) -> Option<Event> {
        self.events()
            .into_iter()
            .find(|event| event.at >= after && wanted(&event.what))
    }

    /// When `what` first happened.
    pub fn first(&self, what: &What) -> Option<Duration> {
        self.first_after(Duration::ZERO, what)
    }

    /// When `what` first happened at or after `after`.
    pub fn first_after(&self, after: Duration, what: &What) -> Option<Duration> {
        self.find_after(after, |seen| seen == what).map(|e| e.at)
    }

    /// Waits up to `timeout` for `what` to happen at or after `after`; returns when it did. The
    /// error names what was awaited and shows the timeline.
    pub async fn wait_for_after(
        &self,
        after: Duration,
        what: &What,
        timeout: Duration,
    ) -> Result<Duration> {
        self.wait_until(&what.to_string(), timeout, || self.first_after(after, what))
            .await
    }

    /// Waits up to `timeout` for `what` to have happened (at any time).
    pub async fn wait_for(&self, what: &What, timeout: Duration) -> Result<Duration> {
        self.wait_for_after(Duration::ZERO, what, timeout).await
    }

    /// Waits up to `timeout` until `check` answers `Some`; the error names `what` and shows the
    /// timeline.
    pub async fn wait_until<T>(
        &self,
        what: &str,
        timeout: Duration,
        check: impl Fn() -> Option<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(value) = check() {
                return Ok(value);
            }
            if Instant::now() >= deadline {
                bail!(
                    "timed out after {timeout:?} waiting for {what}; timeline:\n{}",
                    self.render()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Every event of the pods named `pod` (a StatefulSet pod keeps its name on another node).
    pub fn pod_events(&self, pod: &str) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|event| match &event.what {
                What::PodCreated { pod: p }
                | What::PodScheduled { pod: p, .. }
                | What::PodRunning { pod: p, .. }
                | What::PodDeleting { pod: p, .. }
                | What::PodGone { pod: p, .. } => p == pod,
                _ => false,
            })
            .collect()
    }

    /// Every event of the VolumeAttachments of `volume` and of the disk of the same name.
    pub fn volume_events(&self, volume: &str) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|event| match &event.what {
                What::AttachmentCreated { volume: v, .. }
                | What::Attached { volume: v, .. }
                | What::Detached { volume: v, .. }
                | What::AttachmentError { volume: v, .. }
                | What::AttachmentDeleting { volume: v, .. }
                | What::AttachmentGone { volume: v, .. }
                | What::DiskManagedBy { disk: v, .. } => v == volume,
                _ => false,
            })
            .collect()
    }

    /// The distinct `managedBy` values the sampler saw for `disk`, with when each began.
    pub fn disk_history(&self, disk: &str) -> Vec<(Duration, Option<String>)> {
        self.events()
            .into_iter()
            .filter_map(|event| match event.what {
                What::DiskManagedBy { disk: seen, vm } if seen == disk => Some((event.at, vm)),
                _ => None,
            })
            .collect()
    }

    /// The most VolumeAttachments of `volume` that reported `attached: true` at the same time
    /// (1 for a well-behaved `ReadWriteOnce` volume).
    pub fn most_attached_at_once(&self, volume: &str) -> usize {
        let mut attached: HashSet<String> = HashSet::new();
        let mut most = 0;
        for event in self.events() {
            match event.what {
                What::Attached { volume: v, node } if v == volume => {
                    attached.insert(node);
                }
                What::Detached { volume: v, node } | What::AttachmentGone { volume: v, node }
                    if v == volume =>
                {
                    attached.remove(&node);
                }
                _ => {}
            }
            most = most.max(attached.len());
        }
        most
    }

    /// The timeline as text, one event per line: `+12.345s  pod db-1 Running on node-b`.
    pub fn render(&self) -> String {
        let mut text = format!("timeline started {}\n", self.inner.started_at.to_rfc3339());
        for event in self.events() {
            text.push_str(&format!(
                "  +{:>8.3}s  {}\n",
                event.at.as_secs_f64(),
                event.what
            ));
        }
        text
    }
}

/// Follows one kind of object: `observe` turns an object (and what was seen of it before) into
/// what to remember and the events to record, or `None` when the object is not followed; `gone`
/// gives the events of an object that disappeared. Objects missing from a re-list count as gone.
async fn follow<K, S, O, G>(
    api: Api<K>,
    inner: Arc<Inner>,
    ready: oneshot::Sender<()>,
    observe: O,
    gone: G,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + fmt::Debug + Send + 'static,
    O: Fn(Option<&S>, &K) -> Option<(S, Vec<What>)>,
    G: Fn(&S) -> What,
{
    let mut ready = Some(ready);
    let mut known: HashMap<String, S> = HashMap::new();
    let mut listed: HashSet<String> = HashSet::new();
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let apply = |known: &mut HashMap<String, S>, object: &K| {
        let uid = object.meta().uid.clone().unwrap_or_default();
        if let Some((state, events)) = observe(known.get(&uid), object) {
            for what in events {
                inner.record(what);
            }
            known.insert(uid.clone(), state);
        }
        uid
    };
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => listed.clear(),
            Ok(watcher::Event::InitApply(object)) => {
                let uid = apply(&mut known, &object);
                listed.insert(uid);
            }
            Ok(watcher::Event::InitDone) => {
                let vanished: Vec<String> = known
                    .keys()
                    .filter(|uid| !listed.contains(*uid))
                    .cloned()
                    .collect();
                for uid in vanished {
                    if let Some(state) = known.remove(&uid) {
                        inner.record(gone(&state));
                    }
                }
                if let Some(ready) = ready.take() {
                    let _ = ready.send(());
                }
            }
            Ok(watcher::Event::Apply(object)) => {
                apply(&mut known, &object);
            }
            Ok(watcher::Event::Delete(object)) => {
                let uid = object.meta().uid.clone().unwrap_or_default();
                // Record what the last state says, after any change the deletion carried.
                apply(&mut known, &object);
                if let Some(state) = known.remove(&uid) {
                    inner.record(gone(&state));
                }
            }
            Err(error) => eprintln!("timeline: watch error (retrying): {error}"),
        }
    }
}

/// What the recorder remembers of a pod.
struct PodSeen {
    name: String,
    node: Option<String>,
    running: bool,
    deleting: bool,
}

fn observe_pod(seen: Option<&PodSeen>, pod: &Pod) -> Option<(PodSeen, Vec<What>)> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    let deleting = pod.metadata.deletion_timestamp.is_some();
    let mut events = Vec::new();
    if seen.is_none() {
        events.push(What::PodCreated { pod: name.clone() });
    }
    if let Some(node) = &node
        && seen.is_none_or(|s| s.node.as_ref() != Some(node))
    {
        events.push(What::pod_scheduled(&name, node));
    }
    if running && !seen.is_some_and(|s| s.running) {
        events.push(What::PodRunning {
            pod: name.clone(),
            node: node.clone().unwrap_or_default(),
        });
    }
    if deleting && !seen.is_some_and(|s| s.deleting) {
        events.push(What::PodDeleting {
            pod: name.clone(),
            node: node.clone(),
        });
    }
    Some((
        PodSeen {
            name,
            node,
            running,
            deleting,
        },
        events,
    ))
}

fn pod_gone(seen: &PodSeen) -> What {
    What::PodGone {
        pod: seen.name.clone(),
        node: seen.node.clone(),
    }
}

/// What the recorder remembers of a VolumeAttachment.
struct AttachmentSeen {
    volume: String,
    node: String,
    attached: bool,
    deleting: bool,
    error: Option<String>,
}

fn observe_attachment(
    prefix: &str,
    seen: Option<&AttachmentSeen>,
    attachment: &VolumeAttachment,
) -> Option<(AttachmentSeen, Vec<What>)> {
    let volume = attachment.spec.source.persistent_volume_name.clone()?;
    if attachment.spec.attacher != CSI_DRIVER || !volume.starts_with(prefix) {
        return None;
    }
    let node = attachment.spec.node_name.clone();
    let status = attachment.status.as_ref();
    let attached = status.is_some_and(|s| s.attached);
    let deleting = attachment.metadata.deletion_timestamp.is_some();
    let error = status.and_then(|s| {
        let attach = s.attach_error.as_ref().and_then(|e| e.message.clone());
        let detach = s.detach_error.as_ref().and_then(|e| e.message.clone());
        detach
            .map(|m| format!("detach: {m}"))
            .or(attach.map(|m| format!("attach: {m}")))
    });
    let mut events = Vec::new();
    if seen.is_none() {
        events.push(What::attachment_created(&volume, &node));
    }
    let was_attached = seen.is_some_and(|s| s.attached);
    if attached && !was_attached {
        events.push(What::attached(&volume, &node));
    }
    if !attached && was_attached {
        events.push(What::detached(&volume, &node));
    }
    if let Some(message) = &error
        && seen.is_none_or(|s| s.error.as_ref() != Some(message))
    {
        events.push(What::AttachmentError {
            volume: volume.clone(),
            node: node.clone(),
            message: message.clone(),
        });
    }
    if deleting && !seen.is_some_and(|s| s.deleting) {
        events.push(What::attachment_deleting(&volume, &node));
    }
    Some((
        AttachmentSeen {
            volume,
            node,
            attached,
            deleting,
            error,
        },
        events,
    ))
}

fn attachment_gone(seen: &AttachmentSeen) -> What {
    What::attachment_gone(&seen.volume, &seen.node)
}
