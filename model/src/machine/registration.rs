//! The template's taints at the Node's registration (issue 32, item 9): a bootstrap that says
//! [`PLACEHOLDER`] where the kubelet's flags go gets `--register-with-taints=<taints>` there, so
//! the kubelet registers its Node with the template's taints and a dedicated pool's Node never
//! takes a pod before they are set. CreateMachine's label step still merges the taints into the
//! Node afterwards (`crate::taints`), which covers a bootstrap without the placeholder: its Node
//! is untainted from its registration until that step, a few seconds.

use crate::pool::TaintSpec;

/// Where the bootstrap text wants the kubelet flag: replaced by `--register-with-taints=...`
/// (or by nothing when the template has no taints) in `azure.begin_vm_create`.
pub const PLACEHOLDER: &str = "<<REGISTER_WITH_TAINTS>>";

/// The kubelet flag that registers a Node with `taints`: `--register-with-taints=k=v:Effect,...`
/// (`k:Effect` for an empty value); empty when there are none.
pub fn kubelet_flag(taints: &[TaintSpec]) -> String {
    if taints.is_empty() {
        return String::new();
    }
    let list: Vec<String> = taints
        .iter()
        .map(|t| {
            if t.value.is_empty() {
                format!("{}:{}", t.key, t.effect)
            } else {
                format!("{}={}:{}", t.key, t.value, t.effect)
            }
        })
        .collect();
    format!("--register-with-taints={}", list.join(","))
}

/// `text` with every [`PLACEHOLDER`] replaced by [`kubelet_flag`] of `taints`.
pub fn fill(text: &str, taints: &[TaintSpec]) -> String {
    if !text.contains(PLACEHOLDER) {
        return text.to_owned();
    }
    text.replace(PLACEHOLDER, &kubelet_flag(taints))
}

/// A warning for a template with taints whose inline `bootstrap` neither says [`PLACEHOLDER`]
/// nor passes `--register-with-taints` itself: its Nodes take pods until the taints are set.
/// `None` otherwise (a bootstrap by reference cannot be read here).
pub fn warning(taints: &[TaintSpec], bootstrap: Option<&str>) -> Option<String> {
    let text = bootstrap?;
    if taints.is_empty() || text.contains(PLACEHOLDER) || text.contains("--register-with-taints") {
        return None;
    }
    Some(format!(
        "spec.template.taints are set only after each Node registered, so a Node may take pods they should keep away for a few seconds; put {PLACEHOLDER} on the kubelet's command line in spec.template.bootstrap, which nodewright replaces with --register-with-taints=<the taints> (README: Pools)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> TaintSpec {
        TaintSpec {
            key: key.to_owned(),
            value: value.to_owned(),
            effect: effect.to_owned(),
        }
    }

    #[test]
    fn the_placeholder_becomes_the_kubelet_flag_with_every_taint() {
        let taints = [
            taint("dedicated", "gpu", "NoSchedule"),
            taint("nodewright.example/maintenance", "", "NoExecute"),
        ];
        // bootstrap, taints, filled
        let table: [(&str, &[TaintSpec], &str); 4] = [
            (
                "exec kubelet --v=2 <<REGISTER_WITH_TAINTS>>",
                &taints,
                "exec kubelet --v=2 --register-with-taints=dedicated=gpu:NoSchedule,nodewright.example/maintenance:NoExecute",
            ),
            (
                "exec kubelet <<REGISTER_WITH_TAINTS>>",
                &[],
                "exec kubelet ",
            ),
            ("exec kubelet --v=2", &taints, "exec kubelet --v=2"),
            (
                "A=<<REGISTER_WITH_TAINTS>>\nB=<<REGISTER_WITH_TAINTS>>",
                &taints[..1],
                "A=--register-with-taints=dedicated=gpu:NoSchedule\nB=--register-with-taints=dedicated=gpu:NoSchedule",
            ),
        ];
        for (text, taints, filled) in table {
            assert_eq!(fill(text, taints), filled, "{text}");
        }
    }

    #[test]
    fn a_tainted_pool_whose_bootstrap_does_not_register_them_is_warned_about() {
        let taints = [taint("dedicated", "gpu", "NoSchedule")];
        // taints, bootstrap, warned
        let table: [(&[TaintSpec], Option<&str>, bool); 5] = [
            (&taints, Some("exec kubelet"), true),
            (
                &taints,
                Some("exec kubelet <<REGISTER_WITH_TAINTS>>"),
                false,
            ),
            (
                &taints,
                Some("exec kubelet --register-with-taints=a:NoSchedule"),
                false,
            ),
            (&[], Some("exec kubelet"), false),
            (&taints, None, false),
        ];
        for (taints, bootstrap, warned) in table {
            assert_eq!(
                warning(taints, bootstrap).is_some(),
                warned,
                "{bootstrap:?}"
            );
        }
    }
}
