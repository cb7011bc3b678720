//! A fresh look before "drained": after the last tier (and the waits for pods a `WaitCompleted`
//! rule or a do-not-disrupt mark kept) the drain lists the Node's pods again and drains what
//! arrived since (a pod bound late after its WaitForFirstConsumer volume was provisioned, one
//! created with `nodeName`). The looks are bounded, so a controller that keeps placing pods
//! cannot hold the drain for ever; a DaemonSet's pods are skipped by the plan anyway.

/// How many times a drain looks again and drains what arrived before it reports "drained" with
/// a warning.
pub const MAX_FRESH_LOOKS: u32 = 3;

/// What a fresh look leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreshLook {
    /// Nothing arrived: the node is drained.
    Drained,
    /// Pods arrived: drain them (tiers, lanes and waits as before), then look again.
    DrainAgain,
    /// Pods arrived after [`MAX_FRESH_LOOKS`] drains of late pods: stop with a warning.
    GiveUp,
}

/// What a look that found `arrived` pods to evict or wait for leads to, after `drained_again`
/// drains of late pods.
pub fn fresh_look(arrived: usize, drained_again: u32) -> FreshLook {
    if arrived == 0 {
        FreshLook::Drained
    } else if drained_again < MAX_FRESH_LOOKS {
        FreshLook::DrainAgain
    } else {
        FreshLook::GiveUp
    }
}

/// The warning of a drain that stops looking while `arrived` (`namespace/name`) keep arriving
/// on `node`.
pub fn fresh_look_warning(node: &str, arrived: &[String]) -> String {
    format!(
        "pods kept arriving on {node} after {MAX_FRESH_LOOKS} fresh looks; left running: {} (something places pods on the cordoned node: a controller setting nodeName, or a toleration of nodewright.io/draining)",
        arrived.join(", ")
    )
}

/// The detail of a look that found `arrived` pods, the `look`-th.
pub fn fresh_look_detail(look: u32, arrived: &[String]) -> String {
    format!(
        "fresh look {look}: {} arrived since the pods were listed: {}",
        arrived.len(),
        arrived.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_fresh_look_drains_what_arrived_a_bounded_number_of_times() {
        use FreshLook::*;
        let table = [
            (0, 0, Drained),
            (0, MAX_FRESH_LOOKS, Drained),
            (1, 0, DrainAgain),
            (5, MAX_FRESH_LOOKS - 1, DrainAgain),
            (1, MAX_FRESH_LOOKS, GiveUp),
            (2, MAX_FRESH_LOOKS + 4, GiveUp),
        ];
        for (arrived, again, expected) in table {
            assert_eq!(fresh_look(arrived, again), expected, "{arrived} {again}");
        }
    }

    #[test]
    fn the_words_name_the_pods() {
        let arrived = ["shop/late".to_owned(), "shop/later".to_owned()];
        assert_eq!(
            fresh_look_detail(1, &arrived),
            "fresh look 1: 2 arrived since the pods were listed: shop/late, shop/later"
        );
        assert!(fresh_look_warning("web-abcde", &arrived).contains("shop/late, shop/later"));
        assert!(
            fresh_look_warning("web-abcde", &arrived)
                .starts_with("pods kept arriving on web-abcde after 3 fresh looks")
        );
    }

    proptest! {
        #[test]
        fn looks_end(arrived in proptest::collection::vec(0usize..5, 0..20)) {
            // Whatever arrives, the drain drains again at most MAX_FRESH_LOOKS times.
            let mut again = 0u32;
            for found in arrived {
                match fresh_look(found, again) {
                    FreshLook::DrainAgain => again += 1,
                    FreshLook::Drained | FreshLook::GiveUp => break,
                }
            }
            prop_assert!(again <= MAX_FRESH_LOOKS);
        }
    }
}
