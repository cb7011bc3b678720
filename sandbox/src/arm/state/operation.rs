//! Operation records: what an async operation is, does and ended with, as the state stores them
//! and the polling URLs and bodies render them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Kind, timestamp};

/// An operation's status as the operation resource reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpStatus {
    /// Still running.
    InProgress,
    /// Done.
    Succeeded,
    /// Done, with `error`.
    Failed,
    /// Cancelled (the emulator never cancels, but clients must handle it).
    Canceled,
}

/// What an operation does to its resource when it completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// A PUT that created the resource.
    Create,
    /// A PUT, PATCH or data-disk change on an existing resource.
    Update,
    /// A DELETE.
    Delete,
    /// VM deallocate.
    Deallocate,
    /// VM powerOff.
    PowerOff,
    /// VM start.
    Start,
    /// VM restart: the guest reboots (a running VM only).
    Restart,
    /// VM redeploy: shut down, moved to a new host, powered on (the guest boots again).
    Redeploy,
    /// VM reimage: the OS disk replaced from the image (a running VM's guest boots again).
    Reimage,
}

/// An ARM error an operation ended with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpError {
    /// ARM code, e.g. `AllocationFailed`.
    pub code: String,
    /// ARM message.
    pub message: String,
    /// Status of the `Location` result.
    pub status: u16,
}

/// One operation record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Operation {
    /// Operation id (a UUID).
    pub id: String,
    /// Operation name, e.g. `vm.put`, `csi.attach`.
    pub name: String,
    /// The kind of the resource it works on.
    pub kind: Kind,
    /// What completion does.
    pub action: Action,
    /// The resource id.
    pub resource: String,
    /// Subscription, for the polling URLs.
    pub subscription: String,
    /// Region, for the polling URLs.
    pub location: String,
    /// api-version the client used.
    pub api_version: String,
    /// Current status.
    pub status: OpStatus,
    /// When it started.
    pub start_time: DateTime<Utc>,
    /// When it ended.
    pub end_time: Option<DateTime<Utc>>,
    /// When it is due to complete.
    pub due: DateTime<Utc>,
    /// The error it ended with.
    pub error: Option<OpError>,
    /// The error it will end with (a `fail_operation` fault).
    pub fail_with: Option<OpError>,
    /// A `hang_detach` rule holding it while that rule exists.
    pub hang_rule: Option<u64>,
    /// Disks (ids) it attaches to the VM.
    pub attach: Vec<String>,
    /// Disks (ids) it detaches from the VM.
    pub detach: Vec<String>,
    /// The disks of `detach` it detaches with `detachOption: ForceDetach` (never held by a
    /// `hang_detach` rule).
    #[serde(default)]
    pub force_detach: Vec<String>,
    /// Operations it waits for: it does not complete while one of them is in progress (an
    /// operation whose disk a force detach took over ends with that force detach).
    #[serde(default)]
    pub waits_for: Vec<String>,
    /// Resources (ids) created along with the resource (a VM's OS disk).
    pub created: Vec<String>,
    /// Identifies the request, so an identical repeated PUT gets the same operation.
    pub fingerprint: Option<String>,
    /// `Retry-After` seconds of the answer that accepted it (none: no header).
    #[serde(default)]
    pub retry_after: Option<u64>,
    /// `Retry-After` seconds of each poll's answer while it runs (none: no header).
    #[serde(default)]
    pub poll_retry_after: Option<u64>,
}

impl Operation {
    /// The polling URLs of this operation, absolute under `base` (`http://host`), with the
    /// accepting answer's `Retry-After`.
    pub fn links(&self, base: &str) -> Links {
        let prefix = format!(
            "{base}/subscriptions/{}/providers/{}/locations/{}",
            self.subscription,
            self.kind.provider(),
            self.location
        );
        Links {
            async_operation: format!(
                "{prefix}/operations/{}?api-version={}",
                self.id, self.api_version
            ),
            location: format!(
                "{prefix}/operationResults/{}?api-version={}",
                self.id, self.api_version
            ),
            retry_after: self.retry_after,
        }
    }

    /// The operation resource body.
    pub fn body(&self) -> serde_json::Value {
        let mut body = json!({
            "name": self.id,
            "status": self.status,
            "startTime": timestamp(self.start_time),
        });
        if let Some(end) = self.end_time {
            body["endTime"] = json!(timestamp(end));
        }
        if let Some(error) = &self.error {
            body["error"] = json!({ "code": error.code, "message": error.message });
        }
        body
    }
}

/// The polling URLs of an accepted operation.
#[derive(Debug, Clone)]
pub struct Links {
    /// The `Azure-AsyncOperation` URL.
    pub async_operation: String,
    /// The `Location` URL.
    pub location: String,
    /// `Retry-After` seconds, if the answer carries one.
    pub retry_after: Option<u64>,
}
