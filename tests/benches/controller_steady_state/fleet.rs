//! The pool the benchmark measures, seeded instead of created (200 CreateMachine runs would take
//! far longer than the measurement): a cluster, subscription and resource group of its own on the
//! shared stack, a pool file of `replicas` machines, and per machine
//!
//! - a VM written straight into the sandbox (`POST /sandbox/seed`) with exactly the tags
//!   CreateMachine gives its VMs (ownership, create run, drain settings, the template's tags),
//!   then restarted through ARM so that its guest boots and the sandbox's node joiner registers
//!   its Node as a kubelet would (kwok heartbeats it, so it stays Ready);
//! - on that Node, what CreateMachine's `label-node` step writes, through the same function
//!   (`apply_metadata`: the ownership and template labels, the drain-policy annotations, the
//!   template's taints).
//!
//! [`Fleet::remove`] takes all of it away again, best effort: the VMs by their name prefix (the
//! pool's unique name), the Nodes and their Leases by name.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use chrono::{SecondsFormat, Utc};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use nodewright_activities::kube::nodes::apply_metadata;
use nodewright_activities::kube::{NodeMetadata, NodeTaint};
use nodewright_model::drain::{
    ANNOTATION_DRAIN_POLICY, ANNOTATION_DRAIN_POLICY_STAMP, TAG_DRAIN, policy_to_annotation,
    policy_to_tag,
};
use nodewright_model::machine::adoption::create_run;
use nodewright_model::ownership::{LABEL_POOL, Ownership, TAG_CREATE_RUN};
use nodewright_model::pool::{ValidPool, from_yaml};
use nodewright_model::{ClusterName, MachineName, Operation, WorkflowId};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::{is_node_ready, unique_suffix};
use nodewright_tests::machines::{Sandbox, vm_action, write_pool_file};
use serde_json::{Value, json};

/// How many ARM restarts or Node writes run at once while seeding.
const CONCURRENCY: usize = 16;
/// How long the seeded machines may take to register Ready Nodes.
const JOIN_TIMEOUT: Duration = Duration::from_secs(600);
/// How often the Nodes are listed while waiting for them.
const POLL: Duration = Duration::from_secs(3);
/// How long ago the seeded machines were "created" (their `nodewright.io-created` tag).
const AGE: chrono::Duration = chrono::Duration::hours(1);

/// The seeded pool and where it lives.
pub struct Fleet {
    /// The stack, with the benchmark's own cluster name, subscription and resource group.
    pub stack: Stack,
    /// The cluster name, `bench-<suffix>`.
    pub cluster: ClusterName,
    /// The pool file `pool apply` is given.
    pub pool_file: PathBuf,
    /// The pool as the controller reads it (template hash, drain settings, labels, taints).
    pub pool: ValidPool,
    /// The machines' names (VM name = Node name), `<pool>-<suffix>`.
    pub machines: Vec<String>,
}

impl Fleet {
    /// Names everything (nothing is written to the stack yet) and writes the pool file of
    /// `replicas` machines.
    pub fn plan(stack: &Stack, replicas: u32) -> Result<Self> {
        let suffix = unique_suffix();
        let mut stack = stack.clone();
        stack.cluster = format!("bench-{suffix}");
        stack.arm.subscription_id = uuid::Uuid::new_v4().to_string();
        stack.arm.resource_group = format!("nodewright-bench-{suffix}");
        let cluster = ClusterName::parse("cluster", &stack.cluster)?;
        let pool_name = format!("bn{}", &suffix[..6]);
        let base = write_pool_file(&stack, &pool_name, "20m")?;
        let text = std::fs::read_to_string(&base)?;
        if !text.contains("  replicas: 2\n") {
            bail!("the support pool file changed shape (no `replicas: 2`):\n{text}");
        }
        let text = text.replace("  replicas: 2\n", &format!("  replicas: {replicas}\n"));
        let pool_file = base.with_file_name(format!("{pool_name}-bench.yaml"));
        std::fs::write(&pool_file, &text)?;
        let pool = from_yaml(&text).context("the benchmark's pool file does not validate")?;
        // Distinct randoms below the suffix space give distinct names.
        let machines = (0..u64::from(replicas))
            .map(|index| MachineName::generate(&pool.name, 1 + index * 53_003).to_string())
            .collect();
        Ok(Self {
            stack,
            cluster,
            pool_file,
            pool,
            machines,
        })
    }

    /// Seeds the VMs, boots them and waits until every Node is registered, labelled as
    /// CreateMachine labels it and Ready.
    pub async fn seed(&self) -> Result<()> {
        let sandbox = Sandbox::new(&self.stack)?;
        let resources: Vec<Value> = self
            .machines
            .iter()
            .map(|machine| json!({ "type": "vm", "name": machine, "tags": self.vm_tags(machine) }))
            .collect();
        let seeded = sandbox.seed(json!({ "resources": resources })).await?;
        if seeded != self.machines.len() as u64 {
            bail!(
                "the sandbox seeded {seeded} VMs, {} asked for",
                self.machines.len()
            );
        }
        // A seeded VM runs but never booted: a restart boots it, and the joiner registers it.
        futures::stream::iter(&self.machines)
            .map(|machine| vm_action(&self.stack, machine, "restart"))
            .buffer_unordered(CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await
            .context("restarting the seeded VMs through ARM")?;
        self.await_nodes("registered", |_| true).await?;
        let client = self.stack.kube_client().await?;
        futures::stream::iter(&self.machines)
            .map(|machine| {
                let client = client.clone();
                let metadata = self.node_metadata(machine);
                async move {
                    apply_metadata(&client, &metadata)
                        .await
                        .with_context(|| format!("labelling Node {machine}"))
                }
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;
        self.await_nodes("labelled with the pool and Ready", |node| {
            is_node_ready(node)
                && node
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(LABEL_POOL))
                    .is_some_and(|pool| *pool == self.pool.name)
        })
        .await
    }

    /// Removes the VMs (straight from the sandbox's state), the Nodes and their Leases; every
    /// failure is printed, none stops the rest.
    pub async fn remove(&self) {
        match Sandbox::new(&self.stack) {
            Ok(sandbox) => match sandbox.remove_seeded(&format!("{}-", self.pool.name)).await {
                Ok(removed) => println!("clean-up: {removed} seeded VMs removed"),
                Err(error) => eprintln!("clean-up: removing the seeded VMs: {error:#}"),
            },
            Err(error) => eprintln!("clean-up: the sandbox: {error:#}"),
        }
        let client = match self.stack.kube_client().await {
            Ok(client) => client,
            Err(error) => {
                eprintln!("clean-up: no Kubernetes client, Nodes left: {error:#}");
                return;
            }
        };
        let nodes: Api<Node> = Api::all(client.clone());
        let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
        let mut failures = 0;
        for machine in &self.machines {
            for deleted in [
                nodes
                    .delete(machine, &DeleteParams::default())
                    .await
                    .map(|_| ()),
                leases
                    .delete(machine, &DeleteParams::default())
                    .await
                    .map(|_| ()),
            ] {
                match deleted {
                    Ok(()) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(error) => {
                        failures += 1;
                        if failures <= 3 {
                            eprintln!("clean-up: deleting {machine}: {error}");
                        }
                    }
                }
            }
        }
        println!(
            "clean-up: {} Nodes and their Leases deleted ({failures} failures)",
            self.machines.len()
        );
    }

    /// The tags CreateMachine gives the VM of `machine` (steps 3 and 4 of its runbook).
    fn vm_tags(&self, machine: &str) -> BTreeMap<String, String> {
        let created = Utc::now() - AGE;
        let deadline =
            created + chrono::Duration::from_std(self.pool.timeouts.creation).unwrap_or(AGE);
        let created = created.to_rfc3339_opts(SecondsFormat::Secs, true);
        let deadline = deadline.to_rfc3339_opts(SecondsFormat::Secs, true);
        let ownership = Ownership {
            cluster: &self.cluster,
            pool: &self.pool.name,
            machine,
            template: &self.pool.template_hash,
            created: &created,
            creation_deadline: &deadline,
            image_version: None,
        };
        let mut tags = ownership.tags(&self.pool.template.tags);
        let workflow_id = WorkflowId::for_subject(Operation::Create, &self.cluster, machine);
        let run_id = uuid::Uuid::new_v4().to_string();
        tags.insert(
            TAG_CREATE_RUN.to_owned(),
            create_run(workflow_id.as_str(), &run_id),
        );
        tags.insert(TAG_DRAIN.to_owned(), policy_to_tag(&self.pool.drain));
        tags
    }

    /// What CreateMachine's `label-node` step writes on the Node of `machine`.
    fn node_metadata(&self, machine: &str) -> NodeMetadata {
        let created = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
        let ownership = Ownership {
            cluster: &self.cluster,
            pool: &self.pool.name,
            machine,
            template: &self.pool.template_hash,
            created: &created,
            creation_deadline: &created,
            image_version: None,
        };
        let settings = policy_to_annotation(&self.pool.drain);
        NodeMetadata {
            node: machine.to_owned(),
            labels: ownership.labels(&self.pool.template.labels),
            taints: self
                .pool
                .template
                .taints
                .iter()
                .map(|taint| NodeTaint {
                    key: taint.key.clone(),
                    value: taint.value.clone(),
                    effect: taint.effect.clone(),
                })
                .collect(),
            annotations: BTreeMap::from([
                (ANNOTATION_DRAIN_POLICY.to_owned(), settings.clone()),
                (ANNOTATION_DRAIN_POLICY_STAMP.to_owned(), settings),
            ]),
        }
    }

    /// Waits until every machine has a Node for which `done` holds (Nodes listed whole, then
    /// filtered by name: the joiner's Nodes carry no pool label before they are labelled).
    async fn await_nodes(&self, what: &str, done: impl Fn(&Node) -> bool) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.stack.kube_client().await?);
        let deadline = tokio::time::Instant::now() + JOIN_TIMEOUT;
        let prefix = format!("{}-", self.pool.name);
        loop {
            let listed = nodes.list(&ListParams::default()).await?;
            let matching = listed
                .items
                .iter()
                .filter(|node| {
                    node.metadata
                        .name
                        .as_deref()
                        .is_some_and(|name| name.starts_with(&prefix))
                })
                .filter(|node| done(node))
                .count();
            if matching == self.machines.len() {
                println!("seeded: {matching} Nodes {what}");
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "only {matching} of {} seeded machines have a Node {what} after {}s \
                     (is the sandbox's node joiner running, and kwok?)",
                    self.machines.len(),
                    JOIN_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }
}
