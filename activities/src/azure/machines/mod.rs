//! The Azure side of a machine's life: NIC, VM, OS disk tags, the kept marker, deletion and
//! leftovers, as Temporal activities.
//!
//! Writes (PUT, PATCH, DELETE) are on [`ArmWriteActivities`], registered on the ARM-write task
//! queue whose server-side rate limit keeps the whole deployment under the subscription's write
//! budget; reads and waits are on [`ArmReadActivities`]. Every activity is idempotent: it reads
//! before it writes, adopts what an earlier attempt created, and refuses to touch a resource
//! without this cluster's ownership tag.

pub mod body;
mod data_disks;
mod error;
pub mod pool;
pub mod pool_graph;
pub mod power;
mod recent_reads;
mod tags;
pub mod types;
mod wait;

use std::sync::Arc;

use nodewright_model::ClusterName;
use nodewright_model::arm::Disposition;
use nodewright_model::arm::poll_schedule::OperationKind;
use nodewright_model::listing::{Listing, Since};
use nodewright_model::machine::adoption::{Existing, decide_existing, name_taken};
use nodewright_model::machine::create::may_adopt;
use nodewright_model::machine::leftovers::{LeftoverDisk, decide_leftover_os_disk};
use nodewright_model::machine::owner::VmOwnerTags;
use nodewright_model::machine::registration;
use nodewright_model::machine::{nic_name, os_disk_name};
use nodewright_model::ownership::{
    MAX_TAG_VALUE_CHARS, TAG_CLUSTER, TAG_DRAIN, TAG_MACHINE, is_owned_by,
};
use nodewright_model::rollout::PoolVm;
use nodewright_model::sweep::{Recheck, recheck_disk, recheck_nic};
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

pub use data_disks::{
    AwaitDisksReleased, AwaitForceDetach, DisksReleased, ForceDetachDisks, ForceDetachStarted,
};
pub use error::{DELETE_TO_RESEND, MachineError};
pub use pool::{ListPoolVms, VmSource};
pub use power::{VmAction, VmActionDone};
pub use types::*;

use crate::azure::inventory::{InventoryPage, ListInventoryPage, list_inventory_page};
use crate::azure::virtual_machines::VirtualMachine;
use crate::azure::virtual_machines::client::is_already_there;
use crate::azure::{ArmClient, Deletion, Error as ArmError};
use crate::kube::bootstrap::BootstrapSource;
use crate::kube::join_token::JoinTokens;
use crate::lifetime;

/// How long an ARM write's own short operation (a NIC, a disk's tags) may take inside the
/// activity that started it.
const SHORT_OPERATION_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// ARM writes: registered on the ARM-write task queue.
pub struct ArmWriteActivities {
    client: ArmClient,
    location: String,
    bootstrap: BootstrapSource,
    join_tokens: JoinTokens,
    /// Where remediations are told as Events about the machine's Node, when set.
    node_events: Option<(kube::Client, crate::kube::node_story::NodeStory)>,
}

/// ARM reads and waits: registered on the main task queue.
pub struct ArmReadActivities {
    client: ArmClient,
    /// The pool listings sent lately, for answers "since" one of them.
    vm_listings: crate::listing_cache::ListingCache<PoolVm>,
    /// The VM the owner read GOT, for the drain-tag read that follows it.
    recent_vms: recent_reads::RecentVmReads,
}

impl ArmWriteActivities {
    /// Writes through `client`, creating resources in `location`.
    pub fn new(client: ArmClient, location: impl Into<String>) -> Self {
        Self {
            client,
            location: location.into(),
            bootstrap: BootstrapSource::none(),
            join_tokens: JoinTokens::none(),
            node_events: None,
        }
    }

    /// Tells each remediation (restart, redeploy) as an Event about the machine's Node in the
    /// cluster behind `client`.
    pub fn with_node_events(mut self, client: kube::Client) -> Self {
        self.node_events = Some((client, crate::kube::node_story::NodeStory::default()));
        self
    }

    /// Tells that the remediation rung `rung` was carried out on `machine`.
    async fn tell_remediation(&self, machine: &str, rung: &str, done: &str) {
        let Some((client, story)) = &self.node_events else {
            return;
        };
        let occurrence = crate::kube::node_story::Occurrence {
            node: machine,
            reason: "Remediated",
            action: "Remediate",
            subject: rung,
            note: format!("remediation rung {rung}: {done}"),
            warning: true,
        };
        story.tell(client, occurrence).await;
    }

    /// Reads the bootstrap Secrets templates name from `source` (without one, a template that
    /// names its bootstrap by reference fails its create).
    pub fn with_bootstrap(mut self, source: BootstrapSource) -> Self {
        self.bootstrap = source;
        self
    }

    /// Mints the join tokens of templates with `bootstrapToken` with `tokens` (without, such a
    /// template fails its create).
    pub fn with_join_tokens(mut self, tokens: JoinTokens) -> Self {
        self.join_tokens = tokens;
        self
    }
}

impl ArmReadActivities {
    /// Reads through `client`.
    pub fn new(client: ArmClient) -> Self {
        Self {
            client,
            vm_listings: crate::listing_cache::ListingCache::default(),
            recent_vms: recent_reads::RecentVmReads::default(),
        }
    }
}

/// Where the template's bootstrap text comes from, for messages: its Secret reference, or the
/// inline field.
fn bootstrap_source(template: &nodewright_model::pool::MachineTemplate) -> String {
    template
        .bootstrap_secret_ref
        .as_ref()
        .map_or_else(|| "spec.template.bootstrap".to_owned(), ToString::to_string)
}

/// Whether an ARM error means "not there".
fn is_gone(error: &ArmError) -> bool {
    error.disposition() == Disposition::Gone
}

/// Refuses a resource that is not this cluster's machine's.
fn check_owned(
    kind: &'static str,
    name: &str,
    tags: &std::collections::BTreeMap<String, String>,
    cluster: &ClusterName,
    machine: &str,
) -> Result<(), MachineError> {
    if may_adopt(tags, cluster, machine) {
        Ok(())
    } else {
        Err(MachineError::NotOwned {
            kind,
            name: name.to_owned(),
            cluster: cluster.to_string(),
            found: tags.get(TAG_CLUSTER).cloned(),
        })
    }
}

/// Refuses a resource of the machine's name that this create may not adopt: not this
/// cluster's machine's ([`MachineError::NotOwned`]), or made by another create under the same
/// name ([`MachineError::NameTaken`]); `wanted` are the tags the create writes.
fn check_adoptable(
    kind: &'static str,
    name: &str,
    found: &std::collections::BTreeMap<String, String>,
    wanted: &std::collections::BTreeMap<String, String>,
    cluster: &ClusterName,
    machine: &str,
) -> Result<(), MachineError> {
    match decide_existing(found, wanted, cluster) {
        Existing::Adopt => Ok(()),
        Existing::NotOwned => check_owned(kind, name, found, cluster, machine),
        Existing::Taken { by } => Err(MachineError::NameTaken(name_taken(
            machine,
            kind,
            &format!("{kind} {name}"),
            &by,
        ))),
    }
}

#[activities]
impl ArmWriteActivities {
    /// Creates the machine's NIC, or adopts the one an earlier attempt created.
    ///
    /// # Idempotency
    /// GET before PUT: an existing NIC this create made (its `nodewright.io-create-run` tag, see
    /// `model::machine::adoption`) is adopted; one without this cluster's and machine's tags, or
    /// made by another create, is refused, never changed.
    #[activity(name = "azure.ensure_nic")]
    pub async fn ensure_nic(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: EnsureNic,
    ) -> Result<NicReady, ActivityError> {
        lifetime::heartbeating(&ctx, async {
            self.ensure_nic_inner(&input)
                .await
                .map_err(MachineError::into_activity_error)
        })
        .await
    }

    /// Starts creating the machine's VM, or adopts the one an earlier attempt started; with
    /// `resend`, sends the PUT again to a VM of this machine whose create ended `Failed`.
    ///
    /// # Idempotency
    /// GET before PUT: a VM of that name this create made is adopted (never a second
    /// PUT, unless `resend` and the VM's provisioning state is `Failed`: then the same body is
    /// PUT again, which a rerun finds `Creating` and adopts); one without this cluster's tags,
    /// or made by another create (`model::machine::adoption`), is refused, never changed.
    #[activity(name = "azure.begin_vm_create")]
    pub async fn begin_vm_create(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: BeginVmCreate,
    ) -> Result<VmCreateStarted, ActivityError> {
        lifetime::heartbeating(&ctx, async {
            self.begin_vm_create_inner(&input)
                .await
                .map_err(MachineError::into_activity_error)
        })
        .await
    }

    /// Merges the ownership tags into the OS disk the VM created, with one PATCH of its tags
    /// (the disk's own tags and ours: ARM's PATCH replaces the whole tags object). Returns
    /// whether it wrote.
    ///
    /// # Idempotency
    /// GET, merge, PATCH only when a tag differs: a rerun finds the tags set and writes nothing;
    /// an absent disk is not an error (nothing to tag).
    #[activity(name = "azure.tag_os_disk")]
    pub async fn tag_os_disk(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: TagOsDisk,
    ) -> Result<bool, ActivityError> {
        lifetime::heartbeating(&ctx, async {
            self.tag_os_disk_inner(&input)
                .await
                .map_err(MachineError::into_activity_error)
        })
        .await
    }

    /// Merges tags into the machine's VM, NIC and OS disk — the kept marker and the create's end,
    /// when a failed create keeps the machine for debugging — each only when it carries this
    /// cluster's and the machine's tags.
    ///
    /// # Idempotency
    /// GET, merge, write only when a tag differs: a rerun finds the tags set and writes nothing;
    /// an absent resource is reported absent, a resource of someone else is left alone.
    #[activity(name = "azure.tag_machine")]
    pub async fn tag_machine(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: TagMachine,
    ) -> Result<MachineTagged, ActivityError> {
        lifetime::heartbeating(&ctx, async {
            tags::tag_machine(&self.client, &input)
                .await
                .map_err(MachineError::into_activity_error)
        })
        .await
    }

    /// Sets the `nodewright.io-drain` tag of machines' VMs to the pool's drain settings: a
    /// rollout that changed only them restamps its machines (the tag is a maintenance drain's
    /// trusted settings).
    ///
    /// # Idempotency
    /// GET, then PATCH of the tags only when the value differs: a rerun writes nothing. An
    /// absent VM is reported absent; a VM of someone else is left alone.
    #[activity(name = "azure.retag_drain")]
    pub async fn retag_drain(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: RetagDrain,
    ) -> Result<DrainRetagged, ActivityError> {
        lifetime::heartbeating(&ctx, async {
            tags::retag_drain(&self.client, &input)
                .await
                .map_err(MachineError::into_activity_error)
        })
        .await
    }

    /// Starts deleting the machine's VM (NIC and OS disk go with it).
    ///
    /// # Idempotency
    /// A VM already gone is reported as such; a VM without this cluster's and machine's tags is
    /// reported as not owned and left alone.
    #[activity(name = "azure.begin_vm_delete")]
    pub async fn begin_vm_delete(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: BeginVmDelete,
    ) -> Result<VmDeleteStarted, ActivityError> {
        lifetime::heartbeating(&ctx, async {
            self.begin_vm_delete_inner(&input)
                .await
                .map_err(MachineError::into_activity_error)
        })
        .await
    }

    /// Deletes one leftover NIC or disk, after checking again that it is this cluster's and
    /// attached to nothing.
    ///
    /// # Idempotency
    /// Gone is success; attached or foreign is left alone.
    #[activity(name = "azure.delete_leftover")]
    pub async fn delete_leftover(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: DeleteLeftover,
    ) -> Result<LeftoverDeleted, ActivityError> {
        let deleted = lifetime::heartbeating(&ctx, async {
            self.delete_leftover_inner(&input)
                .await
                .map_err(MachineError::into_activity_error)
        })
        .await;
        // The sweep's own deletions name no machine (a failed create's clean-up does).
        if input.machine.is_none()
            && let Ok(LeftoverDeleted::Deleted) = deleted
        {
            crate::metrics::sweep_deletion(match input.leftover.kind {
                LeftoverKind::Nic => "nic",
                LeftoverKind::Disk => "disk",
            });
        }
        deleted
    }

    /// Force-detaches every data disk of the machine's VM (drain force mode: releases volumes a
    /// dead or stuck node holds, so they can attach elsewhere).
    ///
    /// # Idempotency
    /// Reads the VM first: no data disk or no VM is reported as such; a VM without this
    /// cluster's and machine's tags is refused. A repeated force detach of the same disks is
    /// harmless in ARM.
    #[activity(name = "azure.force_detach_data_disks")]
    pub async fn force_detach_data_disks(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: ForceDetachDisks,
    ) -> Result<ForceDetachStarted, ActivityError> {
        lifetime::heartbeating(&ctx, async {
            data_disks::force_detach(&self.client, &input)
                .await
                .map_err(MachineError::into_activity_error)
        })
        .await
    }

    /// Restarts the machine's VM (`POST …/restart`: the guest reboots on its host) and waits
    /// for the operation to end `Succeeded`; a remediation rung of the pool controller.
    ///
    /// # Idempotency
    /// Reads the VM first: a VM gone (`VmGone`) or without this cluster's and the machine's tags
    /// (`NotOwned`) is refused, not retried, and nothing is sent. The operation's handle is the
    /// heartbeat detail, so a retried attempt waits for the restart already sent instead of
    /// restarting again; only after that operation failed is the restart sent anew.
    #[activity(name = "azure.restart_vm")]
    pub async fn restart_vm(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: VmAction,
    ) -> Result<VmActionDone, ActivityError> {
        let done = power::run(&self.client, &ctx, power::PowerAction::Restart, &input).await;
        if done.is_ok() {
            crate::metrics::remediation(&crate::metrics::pool_label(&input.machine), "restart");
            self.tell_remediation(&input.machine, "restart", "the VM was restarted")
                .await;
        }
        done.map_err(MachineError::into_activity_error)
    }

    /// Redeploys the machine's VM (`POST …/redeploy`: shut down, moved to another host, booted
    /// there) and waits for the operation to end `Succeeded`; a remediation rung of the pool
    /// controller.
    ///
    /// # Idempotency
    /// As `azure.restart_vm`: reads the VM first and refuses one gone or not this cluster's
    /// machine's; a retried attempt waits for the redeploy already sent (the heartbeat detail)
    /// and sends a new one only after that operation failed.
    #[activity(name = "azure.redeploy_vm")]
    pub async fn redeploy_vm(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: VmAction,
    ) -> Result<VmActionDone, ActivityError> {
        let done = power::run(&self.client, &ctx, power::PowerAction::Redeploy, &input).await;
        if done.is_ok() {
            crate::metrics::remediation(&crate::metrics::pool_label(&input.machine), "redeploy");
            self.tell_remediation(
                &input.machine,
                "redeploy",
                "the VM was redeployed to another host",
            )
            .await;
        }
        done.map_err(MachineError::into_activity_error)
    }
}

impl ArmWriteActivities {
    async fn ensure_nic_inner(&self, input: &EnsureNic) -> Result<NicReady, MachineError> {
        let name = nic_name(&input.machine);
        match self.client.get_nic(&name).await {
            Ok(existing) => {
                check_adoptable(
                    "network interface",
                    &name,
                    &existing.tags,
                    &input.tags,
                    &input.cluster,
                    &input.machine,
                )?;
                let id = existing.id.unwrap_or_else(|| self.client.nic_id(&name));
                return Ok(NicReady { id, created: false });
            }
            Err(error) if is_gone(&error) => {}
            Err(error) => return Err(error.into()),
        }
        let body = body::nic_body(&self.location, &input.subnet_id, &input.tags)
            .map_err(|e| MachineError::Unexpected(format!("building the NIC body: {e}")))?;
        let submitted = self.client.put_nic(&name, &body).await?;
        if let Some(operation) = &submitted.operation {
            self.client
                .wait(operation, OperationKind::Nic, SHORT_OPERATION_WAIT)
                .await?;
        }
        let id = submitted
            .resource
            .and_then(|nic| nic.id)
            .unwrap_or_else(|| self.client.nic_id(&name));
        Ok(NicReady { id, created: true })
    }

    async fn begin_vm_create_inner(
        &self,
        input: &BeginVmCreate,
    ) -> Result<VmCreateStarted, MachineError> {
        // A first send creates only (`If-None-Match: *`): no GET before it. Azure answers 412
        // when the VM exists (an earlier attempt's, or a name taken), and the look below decides.
        if !input.resend {
            let body = self.vm_body(input).await?;
            match self.client.create_vm(&input.machine, &body).await {
                Ok(submitted) => {
                    return Ok(VmCreateStarted::Started {
                        operation: submitted.operation,
                    });
                }
                Err(error) if is_already_there(&error) => {}
                Err(error) => return Err(error.into()),
            }
        }
        match self.client.get_vm(&input.machine).await {
            Ok(existing) => {
                check_adoptable(
                    "VM",
                    &input.machine,
                    &existing.tags,
                    &input.tags,
                    &input.cluster,
                    &input.machine,
                )?;
                let failed = existing
                    .properties
                    .provisioning_state
                    .as_deref()
                    .is_some_and(|state| state.trim().eq_ignore_ascii_case("Failed"));
                // Sent again: the same body goes to the VM whose create ended Failed.
                if !(input.resend && failed) {
                    return Ok(VmCreateStarted::Adopted {
                        provisioning_state: existing.properties.provisioning_state,
                    });
                }
            }
            Err(error) if is_gone(&error) => {}
            Err(error) => return Err(error.into()),
        }
        let body = self.vm_body(input).await?;
        let submitted = self.client.put_vm(&input.machine, &body).await?;
        Ok(VmCreateStarted::Started {
            operation: submitted.operation,
        })
    }

    /// The VM's body, with the bootstrap text read (and its placeholders filled) only now, held
    /// only in this activity's memory and the PUT.
    async fn vm_body(&self, input: &BeginVmCreate) -> Result<VirtualMachine, MachineError> {
        let bootstrap = self.bootstrap.text(&input.template).await?;
        // Fill placeholders: the machine's join token, minted (or found again) only now.
        let bootstrap = self
            .join_tokens
            .fill(
                &input.template,
                &input.cluster,
                &input.machine,
                bootstrap,
                &bootstrap_source(&input.template),
            )
            .await?;
        // The template's taints where the text asks for them (`--register-with-taints`).
        let bootstrap = bootstrap.map(|text| registration::fill(&text, &input.template.taints));
        body::vm_body(
            &self.location,
            &input.machine,
            &input.template,
            bootstrap.as_deref(),
            &input.nic_id,
            input.zone.as_deref(),
            input
                .capacity_type
                .unwrap_or_else(|| input.template.preferred_capacity_type()),
            &input.tags,
        )
        .map_err(|e| MachineError::Unexpected(format!("building the VM body: {e}")))
    }

    async fn tag_os_disk_inner(&self, input: &TagOsDisk) -> Result<bool, MachineError> {
        let disk = match self.client.get_disk(&input.disk).await {
            Ok(disk) => disk,
            Err(error) if is_gone(&error) => return Ok(false),
            Err(error) => return Err(error.into()),
        };
        let missing = input
            .tags
            .iter()
            .any(|(name, value)| disk.tags.get(name) != Some(value));
        if !missing {
            return Ok(false);
        }
        // PATCH replaces the tags object whole: the disk's own tags go with ours.
        let mut tags = disk.tags;
        tags.extend(input.tags.clone());
        let submitted = self.client.patch_disk_tags(&input.disk, &tags).await?;
        if let Some(operation) = &submitted.operation {
            self.client
                .wait(operation, OperationKind::Disk, SHORT_OPERATION_WAIT)
                .await?;
        }
        Ok(true)
    }

    async fn begin_vm_delete_inner(
        &self,
        input: &BeginVmDelete,
    ) -> Result<VmDeleteStarted, MachineError> {
        let existing = match self.client.get_vm(&input.machine).await {
            Ok(vm) => vm,
            Err(error) if is_gone(&error) => return Ok(VmDeleteStarted::AlreadyGone),
            Err(error) => return Err(error.into()),
        };
        if check_owned(
            "VM",
            &input.machine,
            &existing.tags,
            &input.cluster,
            &input.machine,
        )
        .is_err()
        {
            return Ok(VmDeleteStarted::NotOwned {
                found: existing.tags.get(TAG_CLUSTER).cloned(),
            });
        }
        let os_disk_under_vm = os_disk_under(&input.machine, &existing);
        Ok(match self.client.delete_vm(&input.machine, false).await? {
            Deletion::Deleted => VmDeleteStarted::Started {
                operation: None,
                os_disk_under_vm,
            },
            Deletion::Started(handle) => VmDeleteStarted::Started {
                operation: Some(handle),
                os_disk_under_vm,
            },
            Deletion::AlreadyGone => VmDeleteStarted::AlreadyGone,
        })
    }

    async fn delete_leftover_inner(
        &self,
        input: &DeleteLeftover,
    ) -> Result<LeftoverDeleted, MachineError> {
        let name = &input.leftover.name;
        let deletion = match input.leftover.kind {
            LeftoverKind::Nic => {
                let nic = match self.client.get_nic(name).await {
                    Ok(nic) => nic,
                    Err(error) if is_gone(&error) => return Ok(LeftoverDeleted::AlreadyGone),
                    Err(error) => return Err(error.into()),
                };
                if let Recheck::LeaveAlone(_) =
                    recheck_nic(&nic.tags, &input.cluster, nic.attached_vm())
                {
                    return Ok(LeftoverDeleted::LeftAlone);
                }
                self.client.delete_nic(name).await?
            }
            LeftoverKind::Disk => {
                let disk = match self.client.get_disk(name).await {
                    Ok(disk) => disk,
                    Err(error) if is_gone(&error) => return Ok(LeftoverDeleted::AlreadyGone),
                    Err(error) => return Err(error.into()),
                };
                // Only a machine's OS disk, as nodewright names and tags it (or, in a removal,
                // as it was seen under the machine's VM): never a volume.
                let leave_alone = match &input.machine {
                    Some(machine) => {
                        decide_leftover_os_disk(
                            machine,
                            name,
                            &disk.tags,
                            &input.cluster,
                            disk.managed_by(),
                            input.os_disk_under_vm.as_deref() == Some(name.as_str()),
                        ) != LeftoverDisk::Delete
                    }
                    None => matches!(
                        recheck_disk(name, &disk.tags, &input.cluster, disk.managed_by()),
                        Recheck::LeaveAlone(_)
                    ),
                };
                if leave_alone {
                    return Ok(LeftoverDeleted::LeftAlone);
                }
                self.client.delete_disk(name).await?
            }
        };
        match deletion {
            Deletion::Deleted => Ok(LeftoverDeleted::Deleted),
            Deletion::AlreadyGone => Ok(LeftoverDeleted::AlreadyGone),
            Deletion::Started(operation) => {
                self.client
                    .wait(&operation, OperationKind::Disk, SHORT_OPERATION_WAIT)
                    .await?;
                Ok(LeftoverDeleted::Deleted)
            }
        }
    }
}

#[activities]
impl ArmReadActivities {
    /// The subscription and resource group this worker manages (from its configuration), so
    /// that workflows can name VMs by ARM id.
    ///
    /// # Idempotency
    /// Reads the worker's configuration only.
    #[activity(name = "azure.scope")]
    pub async fn scope(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _input: (),
    ) -> Result<ArmScope, ActivityError> {
        Ok(ArmScope {
            subscription_id: self.client.subscription_id().to_owned(),
            resource_group: self.client.resource_group().to_owned(),
        })
    }

    /// Waits until the VM's provisioning ends (polling its async operation, or the VM itself),
    /// heartbeating, until the deadline.
    ///
    /// # Idempotency
    /// Read-only; a rerun polls again.
    #[activity(name = "azure.await_vm")]
    pub async fn await_vm(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: AwaitVm,
    ) -> Result<VmProvisioned, ActivityError> {
        lifetime::until_cancelled(&ctx, async {
            wait::await_vm(&self.client, &ctx, &input)
                .await
                .map_err(MachineError::into_activity_error)
        })
        .await
    }

    /// Waits until the VM is gone (its delete operation done, or a GET answers 404).
    ///
    /// # Idempotency
    /// Read-only; a rerun polls again.
    #[activity(name = "azure.await_vm_deletion")]
    pub async fn await_vm_deletion(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: AwaitDeletion,
    ) -> Result<(), ActivityError> {
        lifetime::until_cancelled(&ctx, async {
            wait::await_vm_deletion(&self.client, &ctx, &input)
                .await
                .map_err(MachineError::into_activity_error)
        })
        .await
    }

    /// Waits until the managed disks are no longer `managedBy` the VM (a moved volume's disk
    /// really detached in Azure), heartbeating, until the deadline; returns those still held.
    ///
    /// # Idempotency
    /// Read-only; a rerun polls again.
    #[activity(name = "azure.await_disks_released")]
    pub async fn await_disks_released(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: AwaitDisksReleased,
    ) -> Result<DisksReleased, ActivityError> {
        lifetime::until_cancelled(&ctx, async {
            data_disks::await_disks_released(&self.client, &ctx, &input)
                .await
                .map_err(MachineError::into_activity_error)
        })
        .await
    }

    /// Waits until a force detach's operation ends and the VM lists no data disk, heartbeating,
    /// until the deadline; returns the disks still listed.
    ///
    /// # Idempotency
    /// Read-only; a rerun polls again.
    #[activity(name = "azure.await_force_detach")]
    pub async fn await_force_detach(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: AwaitForceDetach,
    ) -> Result<DisksReleased, ActivityError> {
        lifetime::until_cancelled(&ctx, async {
            data_disks::await_force_detach(&self.client, &ctx, &input)
                .await
                .map_err(MachineError::into_activity_error)
        })
        .await
    }

    /// The machine's NIC and OS disk (read by name, `<machine>-nic` and `<machine>-osdisk`: two
    /// GETs, not a list of the resource group) when they are attached to nothing and carry this
    /// cluster's tag and the machine's tag; the OS disk also without tags when it was seen under
    /// the machine's VM (`os_disk_under_vm`, `model::machine::leftovers`).
    ///
    /// # Idempotency
    /// Read-only.
    #[activity(name = "azure.find_leftovers")]
    pub async fn find_leftovers(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: FindLeftovers,
    ) -> Result<Vec<Leftover>, ActivityError> {
        self.find_leftovers_inner(&input)
            .await
            .map_err(MachineError::into_activity_error)
    }

    /// Lists VMs, NICs or disks of the resource group from a `nextLink` for up to
    /// `max_items` resources (whole pages), each reduced to its `nodewright.io-*` tags, state,
    /// attachment and creation time, for the orphan sweep.
    ///
    /// # Idempotency
    /// Read-only.
    #[activity(name = "azure.inventory_page")]
    pub async fn inventory_page(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: ListInventoryPage,
    ) -> Result<InventoryPage, ActivityError> {
        lifetime::heartbeating(&ctx, list_inventory_page(&self.client, &input))
            .await
            .map_err(|error| MachineError::from(error).into_activity_error())
    }

    /// The machine's trusted drain settings: its VM's `nodewright.io-drain` tag (written at VM
    /// create; a Node cannot write it), only from a VM with this cluster's and machine's tags.
    ///
    /// # Idempotency
    /// Read-only: one GET of the VM, or none when this worker's owner read GOT it a moment ago
    /// (`recent_reads`).
    #[activity(name = "azure.read_drain_tag")]
    pub async fn read_drain_tag(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ReadDrainTag,
    ) -> Result<DrainTag, ActivityError> {
        let read = match self.recent_vms.take(&input.machine) {
            Some(vm) => Ok(vm),
            None => self.client.get_vm(&input.machine).await,
        };
        let vm = match read {
            Ok(vm) => vm,
            Err(error) if is_gone(&error) => return Ok(DrainTag::NoVm),
            Err(error) => return Err(MachineError::from(error).into_activity_error()),
        };
        if check_owned(
            "VM",
            &input.machine,
            &vm.tags,
            &input.cluster,
            &input.machine,
        )
        .is_err()
        {
            return Ok(DrainTag::NotOwned);
        }
        Ok(match vm.tags.get(TAG_DRAIN) {
            Some(value) => DrainTag::Tagged {
                value: value.chars().take(MAX_TAG_VALUE_CHARS).collect(),
            },
            None => DrainTag::Untagged,
        })
    }

    /// The machine's VM's ownership tags (`nodewright.io-cluster`, `nodewright.io-machine`), for
    /// DeleteMachine's look before anything is cordoned (`model::machine::owner::before_cordon`
    /// decides).
    ///
    /// # Idempotency
    /// Read-only: one GET of the VM.
    #[activity(name = "azure.read_vm_owner")]
    pub async fn read_vm_owner(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ReadVmOwner,
    ) -> Result<VmOwnerTags, ActivityError> {
        let vm = match self.client.get_vm(&input.machine).await {
            Ok(vm) => vm,
            Err(error) if is_gone(&error) => return Ok(VmOwnerTags::NoVm),
            Err(error) => return Err(MachineError::from(error).into_activity_error()),
        };
        self.recent_vms.keep(&input.machine, &vm);
        let tag = |name: &str| {
            vm.tags
                .get(name)
                .map(|value| value.chars().take(MAX_TAG_VALUE_CHARS).collect())
        };
        Ok(VmOwnerTags::Found {
            cluster: tag(TAG_CLUSTER),
            machine: tag(TAG_MACHINE),
        })
    }

    /// Lists the pool's VMs (every page of the resource group's list), sorted by name: those
    /// tagged with exactly this cluster and `nodewright.io-pool=<pool>`, with their template
    /// hash, creation time (from the `nodewright.io-created` tag) and provisioning state.
    ///
    /// # Idempotency
    /// Read-only.
    #[activity(name = "azure.list_pool_vms")]
    pub async fn list_pool_vms(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: ListPoolVms,
    ) -> Result<Vec<PoolVm>, ActivityError> {
        lifetime::heartbeating(&ctx, self.list_pool(&input, &[]))
            .await
            .map_err(MachineError::into_activity_error)
    }

    /// [`Self::list_pool_vms`] as the changes since the list the workflow holds
    /// (`model::listing`): only the VMs new or changed and the names gone when this worker sent
    /// that list lately, else the whole list.
    ///
    /// # Idempotency
    /// Read-only.
    #[activity(name = "azure.list_pool_vms_since")]
    pub async fn list_pool_vms_since(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: Since<ListPoolVms>,
    ) -> Result<Listing<PoolVm>, ActivityError> {
        // The VMs of the list held are expected too: one the index drops is read with a GET.
        let held: Vec<String> = input
            .since
            .as_deref()
            .and_then(|digest| self.vm_listings.kept(digest))
            .map(|list| list.iter().map(|vm| vm.name.clone()).collect())
            .unwrap_or_default();
        let vms = lifetime::heartbeating(&ctx, self.list_pool(&input.of, &held))
            .await
            .map_err(MachineError::into_activity_error)?;
        Ok(self.vm_listings.answer(input.since.as_deref(), vms))
    }
}

impl ArmReadActivities {
    /// The pool's VMs from the source `input` names; with Resource Graph, `held` (the VMs of
    /// the list the caller holds) are expected too.
    async fn list_pool(
        &self,
        input: &ListPoolVms,
        held: &[String],
    ) -> Result<Vec<PoolVm>, MachineError> {
        match input.source {
            VmSource::ResourceGroup => pool::list_pool_vms(&self.client, input).await,
            VmSource::ResourceGraph => pool_graph::list_pool_vms(&self.client, input, held).await,
        }
    }

    async fn find_leftovers_inner(
        &self,
        input: &FindLeftovers,
    ) -> Result<Vec<Leftover>, MachineError> {
        let ours = |tags: &std::collections::BTreeMap<String, String>| {
            is_owned_by(tags, &input.cluster)
                && tags.get(TAG_MACHINE).map(String::as_str) == Some(input.machine.as_str())
        };
        let mut leftovers = Vec::new();
        let nic = nic_name(&input.machine);
        match self.client.get_nic(&nic).await {
            Ok(found) if ours(&found.tags) && found.attached_vm().is_none() => {
                leftovers.push(Leftover {
                    kind: LeftoverKind::Nic,
                    name: nic,
                });
            }
            Ok(_) => {}
            Err(error) if is_gone(&error) => {}
            Err(error) => return Err(error.into()),
        }
        let disk = os_disk_name(&input.machine);
        match self.client.get_disk(&disk).await {
            Ok(found)
                if decide_leftover_os_disk(
                    &input.machine,
                    &disk,
                    &found.tags,
                    &input.cluster,
                    found.managed_by(),
                    input.os_disk_under_vm.as_deref() == Some(disk.as_str()),
                ) == LeftoverDisk::Delete =>
            {
                leftovers.push(Leftover {
                    kind: LeftoverKind::Disk,
                    name: disk,
                });
            }
            Ok(_) => {}
            Err(error) if is_gone(&error) => {}
            Err(error) => return Err(error.into()),
        }
        Ok(leftovers)
    }
}

/// The machine's OS disk (`<machine>-osdisk`) when the VM `vm`, read just before its DELETE,
/// names it as its OS disk: the VM's own body says what is under it, no disk read needed.
fn os_disk_under(machine: &str, vm: &VirtualMachine) -> Option<String> {
    let name = os_disk_name(machine);
    vm.properties
        .storage_profile
        .as_ref()
        .and_then(|storage| storage.os_disk.as_ref())
        .and_then(|disk| disk.name.as_deref())
        .is_some_and(|found| found.eq_ignore_ascii_case(&name))
        .then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm_with_os_disk(name: Option<&str>) -> VirtualMachine {
        let os_disk = name.map_or(serde_json::json!({}), |n| serde_json::json!({ "name": n }));
        serde_json::from_value(serde_json::json!({
            "id": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/web-a1",
            "location": "westeurope",
            "properties": { "storageProfile": { "osDisk": os_disk } },
        }))
        .expect("a VM body")
    }

    #[test]
    fn the_os_disk_under_the_vm_is_read_from_the_vms_own_body() {
        let table = [
            (Some("web-a1-osdisk"), Some("web-a1-osdisk")),
            (Some("WEB-A1-OSDISK"), Some("web-a1-osdisk")),
            (Some("someone-elses-disk"), None),
            (None, None),
        ];
        for (named, expected) in table {
            let vm = vm_with_os_disk(named);
            assert_eq!(
                os_disk_under("web-a1", &vm).as_deref(),
                expected,
                "{named:?}"
            );
        }
    }
}
