//! Draining a node: which pods go and in what order, when a PodDisruptionBudget is
//! misconfigured, when the drain turns to force mode, which settings it uses, the order of its
//! lanes, and what the `status` query and its result report.
//!
//! The DrainNode workflow observes (activities), asks this module (pure), acts (activities).
//! Behaviour follows machine-controller-manager (`mcm-behaviour.md` §3): pods without persistent
//! volumes are evicted in parallel; pods with them one at a time, highest priority first, each
//! followed by a wait for its volumes to detach here and attach elsewhere. Only volumes that
//! attach to this node alone are waited on (`attach.rs`): a pod whose volumes need no attach
//! (Azure Files, NFS) or are used from other nodes too goes with the parallel lane. Drain rules
//! (`rules`, Cluster API's MachineDrainRule) leave pods, wait for them, or drain them in tiers.

mod annotation;
mod answer;
mod attach;
mod entries;
mod force;
mod fresh;
mod hard;
mod interleave;
mod lanes;
mod local_data;
mod pdb;
mod pods;
mod progress;
mod purpose;
mod report;
mod request;
mod rounds;
mod rules;
mod settings;
mod stamp;
mod status;
mod waits;

pub use annotation::{
    BoundedPolicy, RefusalReason, RefusedField, TAG_DRAIN, bound_annotation, policy_from_tag,
    policy_to_tag,
};
pub use answer::{
    AfterRefusal, NO_ANSWER, REASON_NAMESPACE_TERMINATING, Refusal, after_refusal,
    is_not_permitted, is_several_budgets, refusal_detail, refusal_of,
};
pub use attach::{AttachFacts, VolumeWait, volume_wait};
pub use force::{ConditionFacts, ForceReason, HardDeadline, NodeHealth, force_reason};
pub use fresh::{FreshLook, MAX_FRESH_LOOKS, fresh_look, fresh_look_detail, fresh_look_warning};
pub use hard::{
    capped_deadline, hard_deadline, not_held_because, overridden_mark, overrides_marks,
    trimmed_grace,
};
pub use interleave::{AfterLanes, Lane, LanePod, LaneStage, after_lanes, round_evictions};
pub use lanes::{
    AfterEviction, DrainPhase, EvictionAnswer, FORCE_DETACH_BUDGET, LaneEnd, MIN_WAIT, RoundEnd,
    after_eviction, after_round, first_phase, next_phase, wait_within_deadline,
};
pub use local_data::{LocalDataPod, LocalDataPolicy, refusal};
pub use pdb::{PdbFacts, is_misconfigured};
pub use pods::{
    DrainPlan, PodFacts, PodRef, SkipReason, SkippedPod, TrackedVolume, UnwaitedVolume,
    VolumeFacts, VolumePod, detach_budget, local_data_of, plan_drain, pod_disappearance_budget,
};
pub use progress::ForceRelease;
pub use purpose::DrainPurpose;
pub use report::{
    InFlightEnd, cordoned, describe_plan, describe_ruled_plan, drained_summary, given_back,
    in_flight_kept, kept_after_cancel, next_continuation, not_this_machine, purpose_word,
    volumes_moved_detail,
};
pub use request::{
    AnnotationError, DrainRequest, DrainResume, DrainedNode, policy_from_annotation,
    policy_to_annotation, salvage_policy,
};
pub use rounds::{LONGEST_ROUND, MAX_ROUND_FACTOR, RoundPause};
pub use rules::{
    DecidedBy, DrainBehavior, DrainRule, DrainRuleSpec, DrainTier, LABEL_CAPI_DRAIN, LABEL_DRAIN,
    LabelRequirement, LabelSelector, MAX_RULE_ORDER, MIN_RULE_ORDER, PodDecision, RuleSelector,
    RuledPlan, RuledPod, SELECTOR_OPERATORS, decide_pod, plan_with_rules, read_rules,
};
pub use settings::{
    AnnotationTrust, DrainSettings, SettingsSources, TagRead, asks_salvage, describe_policy,
    drain_settings,
};
pub use stamp::{
    ANNOTATION_DRAIN_POLICY_STAMP, Restamped, StampRecord, Wishes, operator_wishes, restamp,
    stamp_digest,
};
pub use status::{
    DrainMode, DrainStatus, PdbBlock, PodProgress, PodState, VolumeProgress, VolumeState,
};
pub use waits::{
    AfterLook, MIN_DRAIN_HISTORY_LIMIT, WAIT_LOOK, WaitKind, after_look, history_is_long,
    look_length,
};

/// The taint a draining node carries so nothing new lands on it.
pub const TAINT_DRAINING: &str = "nodewright.io/draining";

/// The node condition type set while a node is drained for deletion (as MCM does).
pub const CONDITION_TERMINATING: &str = "Terminating";

/// The node condition a node-problem-detector sets when the root filesystem turned read-only.
pub const CONDITION_READONLY_FILESYSTEM: &str = "ReadonlyFilesystem";

/// The Node annotation carrying the pool's drain settings, written when the machine is created,
/// so a drain of the machine later follows its pool without the pool file.
pub const ANNOTATION_DRAIN_POLICY: &str = "nodewright.io/drain-policy";

/// The annotation of a static pod's mirror pod.
pub const ANNOTATION_MIRROR_POD: &str = "kubernetes.io/config.mirror";

/// The Azure Disk CSI driver: its volume handle is the managed disk's ARM id.
pub const AZURE_DISK_CSI_DRIVER: &str = "disk.csi.azure.com";
