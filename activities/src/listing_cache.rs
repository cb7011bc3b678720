//! The lists a worker sent lately, kept under their digests, so that a workflow asking for a
//! list "since" one of them gets only the changes (`model::listing`). Bounded: the least
//! recently sent go first; a workflow whose list is no longer here (or that asks another worker) gets the whole
//! list, which is always correct.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use nodewright_model::listing::{Keyed, Listing, changes, sorted, whole};
use serde::Serialize;

/// How many lists a cache keeps (a few per pool being rolled out at once).
const KEPT: usize = 64;

/// Recent lists by digest.
pub struct ListingCache<T> {
    lists: Mutex<VecDeque<(String, Arc<Vec<T>>)>>,
}

impl<T> Default for ListingCache<T> {
    fn default() -> Self {
        Self {
            lists: Mutex::new(VecDeque::new()),
        }
    }
}

impl<T: Keyed + Serialize + Clone + PartialEq> ListingCache<T> {
    /// The lists, locked. A panic while holding the lock left them as they were: the entries
    /// are whole.
    fn lists(&self) -> std::sync::MutexGuard<'_, VecDeque<(String, Arc<Vec<T>>)>> {
        match self.lists.lock() {
            Ok(lists) => lists,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The list kept under `digest`, if it still is.
    pub fn kept(&self, digest: &str) -> Option<Arc<Vec<T>>> {
        self.lists()
            .iter()
            .find(|(d, _)| d == digest)
            .map(|(_, list)| Arc::clone(list))
    }

    /// The answer to "the list `now`, since `since`": the changes when the list of that digest
    /// is kept here, else the whole list. `now` is kept under its digest for the next ask.
    pub fn answer(&self, since: Option<&str>, now: Vec<T>) -> Listing<T> {
        let now = sorted(now);
        let kept = Arc::new(now.clone());
        let mut lists = self.lists();
        let base = since.and_then(|digest| {
            lists
                .iter()
                .find(|(d, _)| d == digest)
                .map(|(d, list)| (d.clone(), Arc::clone(list)))
        });
        let listing = match base {
            Some((digest, list)) => changes(&list, &digest, now),
            None => whole(now),
        };
        // The list sent goes to the back (the newest), so a steady pool's list, asked about at
        // every look, is never the oldest.
        if let Some(at) = lists.iter().position(|(d, _)| *d == listing.digest) {
            lists.remove(at);
        } else if lists.len() >= KEPT {
            lists.pop_front();
        }
        lists.push_back((listing.digest.clone(), kept));
        listing
    }
}

#[cfg(test)]
mod tests {
    use nodewright_model::listing::apply;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize)]
    struct Vm {
        name: String,
        state: String,
    }

    impl Keyed for Vm {
        fn key(&self) -> &str {
            &self.name
        }
    }

    fn vm(name: &str, state: &str) -> Vm {
        Vm {
            name: name.to_owned(),
            state: state.to_owned(),
        }
    }

    #[test]
    fn a_second_ask_gets_only_the_changes_and_an_unknown_base_the_whole_list() {
        let cache = ListingCache::default();
        let first = cache.answer(None, vec![vm("b", "Succeeded"), vm("a", "Creating")]);
        assert_eq!(first.base, None);
        assert_eq!(first.items.len(), 2);
        let (held, _) = apply(None, first.clone()).unwrap_or_default();

        let now = vec![vm("a", "Succeeded"), vm("b", "Succeeded")];
        let second = cache.answer(Some(&first.digest), now.clone());
        assert_eq!(second.base.as_deref(), Some(first.digest.as_str()));
        assert_eq!(second.items, [vm("a", "Succeeded")]);
        let (held, _) = apply(Some((&first.digest, &held)), second.clone()).unwrap_or_default();
        assert_eq!(held, now);

        let third = cache.answer(Some(&second.digest), now.clone());
        assert!(
            third.items.is_empty() && third.removed.is_empty(),
            "{third:?}"
        );

        let unknown = cache.answer(Some("feedfacefeedface"), now.clone());
        assert_eq!(unknown.base, None);
        assert_eq!(unknown.items, now);
    }

    #[test]
    fn a_list_sent_again_and_again_is_kept_while_others_come_and_go() {
        let cache = ListingCache::default();
        let steady = vec![vm("a", "Succeeded")];
        let first = cache.answer(None, steady.clone());
        for n in 0..KEPT * 3 {
            cache.answer(None, vec![vm("other", &n.to_string())]);
            if n % 10 == 0 {
                let again = cache.answer(Some(&first.digest), steady.clone());
                assert_eq!(
                    again.base.as_deref(),
                    Some(first.digest.as_str()),
                    "after {n} other lists"
                );
            }
        }
    }

    #[test]
    fn it_keeps_a_bounded_number_of_lists() {
        let cache = ListingCache::default();
        let first = cache.answer(None, vec![vm("a", "0")]);
        for n in 0..KEPT {
            cache.answer(None, vec![vm("a", &(n + 1).to_string())]);
        }
        let again = cache.answer(Some(&first.digest), vec![vm("a", "0")]);
        assert_eq!(again.base, None, "the oldest list was dropped");
    }
}
