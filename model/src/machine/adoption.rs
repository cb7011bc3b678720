//! Whether a create may adopt the NIC or VM it finds under its machine's name (issue 32, item 6).
//!
//! A create adopts only what its own run made: a retry of its NIC or VM step finds what the
//! first attempt created and goes on with it. Every VM and NIC a create makes carries the
//! [`TAG_CREATE_RUN`] tag (`<workflow id>/<first run id>`), so a resource made by another run —
//! a machine name drawn twice, a `machine create --name` of a name in use, a kept machine of an
//! earlier failed create — is told apart and refused, untouched: adopting it would put the new
//! template's labels, taints and drain annotation on an old VM.
//!
//! Resources made before the tag existed have none: they are adopted as before when their
//! cluster, machine, pool and template tags all equal the create's (the only way such a
//! resource is this create's own earlier attempt), and refused otherwise.

use std::collections::BTreeMap;

use crate::ClusterName;
use crate::ownership::{TAG_CREATE_RUN, TAG_MACHINE, TAG_POOL, TAG_TEMPLATE, is_owned_by};

/// The identity a create tags its VM and NIC with: its workflow ID and the run ID of its first
/// run (stable across the run's retries and any continue-as-new).
pub fn create_run(workflow_id: &str, first_run_id: &str) -> String {
    format!("{workflow_id}/{first_run_id}")
}

/// What a create does with a NIC or VM it finds under its machine's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Existing {
    /// It is this create's own (an earlier attempt of the step made it): go on with it.
    Adopt,
    /// It is not this cluster's machine's at all (another cluster's tag, or none): refused as
    /// not owned, as before.
    NotOwned,
    /// It is this cluster's, under this name, but another create made it: `by` says which, for
    /// [`name_taken`]. Refused, and nothing of it is touched.
    Taken {
        /// `create run <id> (template <hash>)`, or the template and pool of a resource made
        /// before create-run tags.
        by: String,
    },
}

/// What a create whose resources carry `wanted` (every tag it writes, its run's
/// [`TAG_CREATE_RUN`] among them) does with a resource of its machine's name tagged `found`, in
/// `cluster`. Without a run tag in `wanted` (a run started before the tag), the resource is
/// adopted as before on the cluster and machine tags alone.
pub fn decide_existing(
    found: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, String>,
    cluster: &ClusterName,
) -> Existing {
    let tag = |tags: &'_ BTreeMap<String, String>, name: &str| tags.get(name).cloned();
    if !is_owned_by(found, cluster) || tag(found, TAG_MACHINE) != tag(wanted, TAG_MACHINE) {
        return Existing::NotOwned;
    }
    let Some(run) = tag(wanted, TAG_CREATE_RUN) else {
        return Existing::Adopt;
    };
    let template = tag(found, TAG_TEMPLATE).unwrap_or_default();
    match tag(found, TAG_CREATE_RUN) {
        Some(theirs) if theirs == run => Existing::Adopt,
        Some(theirs) => Existing::Taken {
            by: format!(
                "create run {} (template {})",
                crate::text::quoted(&theirs),
                crate::text::quoted(&template)
            ),
        },
        None if tag(found, TAG_TEMPLATE) == tag(wanted, TAG_TEMPLATE)
            && tag(found, TAG_POOL) == tag(wanted, TAG_POOL) =>
        {
            Existing::Adopt
        }
        None => Existing::Taken {
            by: format!(
                "an earlier create of template {} in pool {} (before create-run tags)",
                crate::text::quoted(&template),
                crate::text::quoted(&tag(found, TAG_POOL).unwrap_or_default())
            ),
        },
    }
}

/// The words every name-taken failure carries, which a rollout looks for ([`is_name_taken`]).
const TAKEN_BY: &str = " is taken by a ";

/// The failure of a create whose machine name is taken: `machine name <name> is taken by a
/// <kind> made by <by>; nothing of it was touched; ...` (`kind`: `VM` or `network interface`).
pub fn name_taken(machine: &str, kind: &str, resource: &str, by: &str) -> String {
    format!(
        "machine name {machine}{TAKEN_BY}{kind} made by {by} ({resource} carries this cluster's tags but another create's); nothing of it was touched; create the machine under another name, or delete the other one first"
    )
}

/// Whether a create's failure `reason` says its machine name was taken ([`name_taken`]): a
/// rollout books it as a name collision, not a failure, and draws another name.
pub fn is_name_taken(reason: &str) -> bool {
    reason.contains("machine name ") && reason.contains(TAKEN_BY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ownership::TAG_CLUSTER;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    const RUN: &str = "nodewright/prod/create/web-abc12/run-1";

    /// A case: its name, the tags found, the create's run tag, what it does.
    type AdoptionCase<'a> = (&'a str, BTreeMap<String, String>, Option<&'a str>, &'a str);

    fn wanted(run: Option<&str>) -> BTreeMap<String, String> {
        let mut wanted = tags(&[
            (TAG_CLUSTER, "prod"),
            (TAG_POOL, "web"),
            (TAG_MACHINE, "web-abc12"),
            (TAG_TEMPLATE, "new"),
            ("team", "a"),
        ]);
        if let Some(run) = run {
            wanted.insert(TAG_CREATE_RUN.to_owned(), run.to_owned());
        }
        wanted
    }

    #[test]
    fn only_what_this_run_made_is_adopted() {
        let cluster = ClusterName::parse("cluster", "prod").expect("a valid cluster name");
        let ours = [
            (TAG_CLUSTER, "prod"),
            (TAG_POOL, "web"),
            (TAG_MACHINE, "web-abc12"),
            (TAG_TEMPLATE, "new"),
        ];
        let with = |extra: &[(&str, &str)]| {
            let mut found = tags(&ours);
            found.extend(tags(extra));
            found
        };
        // case, found, the create's run tag, what it does ("taken" for Taken)
        let table: Vec<AdoptionCase> = vec![
            (
                "this run's, a retry",
                with(&[(TAG_CREATE_RUN, RUN)]),
                Some(RUN),
                "adopt",
            ),
            (
                "another run's, same template",
                with(&[(TAG_CREATE_RUN, "nodewright/prod/create/web-abc12/run-0")]),
                Some(RUN),
                "taken",
            ),
            (
                "another run's, old template",
                with(&[(TAG_CREATE_RUN, "other"), (TAG_TEMPLATE, "old")]),
                Some(RUN),
                "taken",
            ),
            (
                "no run tag, same template and pool",
                with(&[]),
                Some(RUN),
                "adopt",
            ),
            (
                "no run tag, another template",
                with(&[(TAG_TEMPLATE, "old")]),
                Some(RUN),
                "taken",
            ),
            (
                "no run tag, another pool",
                with(&[(TAG_POOL, "db")]),
                Some(RUN),
                "taken",
            ),
            (
                "a run without run tags adopts as before",
                with(&[(TAG_CREATE_RUN, "other"), (TAG_TEMPLATE, "old")]),
                None,
                "adopt",
            ),
            (
                "another cluster's",
                with(&[(TAG_CLUSTER, "staging"), (TAG_CREATE_RUN, RUN)]),
                Some(RUN),
                "not owned",
            ),
            (
                "another machine's",
                with(&[(TAG_MACHINE, "web-zzz99"), (TAG_CREATE_RUN, RUN)]),
                Some(RUN),
                "not owned",
            ),
            ("untagged", tags(&[]), Some(RUN), "not owned"),
            ("untagged, old run", tags(&[]), None, "not owned"),
        ];
        for (case, found, run, expected) in table {
            let got = match decide_existing(&found, &wanted(run), &cluster) {
                Existing::Adopt => "adopt",
                Existing::NotOwned => "not owned",
                Existing::Taken { .. } => "taken",
            };
            assert_eq!(got, expected, "{case}");
        }
    }

    #[test]
    fn a_taken_name_says_by_whom_and_a_rollout_recognises_it() {
        let cluster = ClusterName::parse("cluster", "prod").expect("a valid cluster name");
        let found = tags(&[
            (TAG_CLUSTER, "prod"),
            (TAG_POOL, "web"),
            (TAG_MACHINE, "web-abc12"),
            (TAG_TEMPLATE, "old"),
            (TAG_CREATE_RUN, "their-run"),
        ]);
        let Existing::Taken { by } = decide_existing(&found, &wanted(Some(RUN)), &cluster) else {
            panic!("expected taken");
        };
        assert_eq!(by, "create run \"their-run\" (template \"old\")");
        let message = name_taken("web-abc12", "VM", "VM web-abc12", &by);
        assert_eq!(
            message,
            "machine name web-abc12 is taken by a VM made by create run \"their-run\" (template \"old\") (VM web-abc12 carries this cluster's tags but another create's); nothing of it was touched; create the machine under another name, or delete the other one first"
        );
        assert!(is_name_taken(&format!(
            "creating machine web-abc12 failed at step create-vm: {message}"
        )));
        assert!(!is_name_taken(
            "VM web-abc12 exists but its tag nodewright.io-cluster is \"x\", not \"prod\""
        ));
        assert_eq!(create_run("wf", "r1"), "wf/r1");
    }
}
