//! Listings sent as changes, so that a workflow that looks at the same list again and again
//! (a rollout at its pool's VMs and Nodes, every few seconds) records in its history what
//! changed, not the whole list each time.
//!
//! The workflow holds the list it last saw and its [`digest`]; it asks for the list "since" that
//! digest. The worker that answers keeps the lists it sent lately under their digests: when it
//! still has the one asked about, it sends only the items new or changed since and the keys gone
//! ([`changes`]); otherwise (another worker, a restart, the first look) the whole list
//! ([`whole`]). The workflow applies the answer to what it holds ([`apply`]) and checks the
//! result against the answer's digest, so a worker and a workflow can never silently disagree:
//! a mismatch is an error, and the next look asks for the whole list.
//!
//! The digest is FNV-1a (64 bits) over each item's JSON in key order: stable across processes
//! and versions of the standard library (unlike `std`'s hasher), and cheap in a workflow task.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// An item of a listing: its key (a name) is unique in the list.
pub trait Keyed {
    /// The item's key.
    fn key(&self) -> &str;
}

/// A list, whole or as the changes since an earlier one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listing<T> {
    /// The digest of the whole list as it is now.
    pub digest: String,
    /// The digest of the list the changes apply to; none when `items` is the whole list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The whole list (no `base`), or the items new or changed since `base`; in key order.
    pub items: Vec<T>,
    /// The keys gone since `base`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
}

/// A request for a list (`of`), asking only for what changed since the list of digest `since`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Since<T> {
    /// What to list.
    #[serde(flatten)]
    pub of: T,
    /// The digest of the list the asker holds; none: it holds none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// Why a listing could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListingError {
    /// The changes apply to a list the workflow does not hold.
    #[error("the listing's changes apply to list {base}, but this run holds {held}")]
    OtherBase {
        /// The list the changes apply to.
        base: String,
        /// The list held (`none` when none).
        held: String,
    },
    /// The list after the changes is not the one the answer describes.
    #[error("the list after the changes has digest {got}, not {want}")]
    Digest {
        /// The digest computed.
        got: String,
        /// The digest announced.
        want: String,
    },
}

/// The digest of `items` (in key order): 16 hex digits.
pub fn digest<T: Serialize>(items: &[T]) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    let mut feed = |bytes: &[u8]| {
        for byte in bytes {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(PRIME);
        }
    };
    for item in items {
        // An item that cannot be written as JSON (none of ours) counts as empty.
        feed(&serde_json::to_vec(item).unwrap_or_default());
        feed(b"\n");
    }
    format!("{hash:016x}")
}

/// Sorts `items` by key, as every list here is kept.
pub fn sorted<T: Keyed>(mut items: Vec<T>) -> Vec<T> {
    items.sort_by(|a, b| a.key().cmp(b.key()));
    items
}

/// The whole list `now` (sorted) as a listing.
pub fn whole<T: Keyed + Serialize>(now: Vec<T>) -> Listing<T> {
    let items = sorted(now);
    Listing {
        digest: digest(&items),
        base: None,
        items,
        removed: Vec::new(),
    }
}

/// The changes from `base` (whose digest is `base_digest`) to `now`: the items of `now` that
/// are new or differ, and the keys of `base` gone.
pub fn changes<T: Keyed + Serialize + Clone + PartialEq>(
    base: &[T],
    base_digest: &str,
    now: Vec<T>,
) -> Listing<T> {
    let now = sorted(now);
    let digest = digest(&now);
    let before: BTreeMap<&str, &T> = base.iter().map(|b| (b.key(), b)).collect();
    let items = now
        .iter()
        .filter(|item| before.get(item.key()) != Some(item))
        .cloned()
        .collect();
    let keys: BTreeSet<&str> = now.iter().map(Keyed::key).collect();
    let removed = base
        .iter()
        .filter(|b| !keys.contains(b.key()))
        .map(|b| b.key().to_owned())
        .collect();
    Listing {
        digest,
        base: Some(base_digest.to_owned()),
        items,
        removed,
    }
}

/// The list `listing` describes, from what the workflow holds (`held`: the list and its digest,
/// if any), and the digest to ask "since" next time.
///
/// A whole list is taken as it is, and its digest is computed here: a worker of another build
/// (one that writes a field this code does not know) cannot make every look fail; its cache
/// then never matches this digest, so it keeps answering with whole lists, which is always
/// correct. Changes are applied to the list held and checked against the answer's digest.
///
/// # Errors
///
/// Changes to another list than the one held, or a result whose digest differs.
pub fn apply<T: Keyed + Serialize + Clone>(
    held: Option<(&str, &[T])>,
    listing: Listing<T>,
) -> Result<(Vec<T>, String), ListingError> {
    let Some(base) = &listing.base else {
        let list = sorted(listing.items);
        let digest = digest(&list);
        return Ok((list, digest));
    };
    let Some((_, held_items)) = held.filter(|(d, _)| d == base) else {
        return Err(ListingError::OtherBase {
            base: base.clone(),
            held: held.map_or_else(|| "none".to_owned(), |(d, _)| d.to_owned()),
        });
    };
    let mut list: Vec<T> = held_items
        .iter()
        .filter(|item| {
            !listing.removed.iter().any(|k| k == item.key())
                && !listing.items.iter().any(|n| n.key() == item.key())
        })
        .cloned()
        .collect();
    list.extend(listing.items);
    let list = sorted(list);
    let got = digest(&list);
    if got != listing.digest {
        return Err(ListingError::Digest {
            got,
            want: listing.digest,
        });
    }
    Ok((list, got))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    struct Item {
        name: String,
        state: u8,
    }

    impl Keyed for Item {
        fn key(&self) -> &str {
            &self.name
        }
    }

    fn item(name: &str, state: u8) -> Item {
        Item {
            name: name.to_owned(),
            state,
        }
    }

    #[test]
    fn the_digest_is_stable_and_depends_on_every_item() {
        let list = [item("a", 1), item("b", 2)];
        assert_eq!(digest(&list), digest(&list.clone()));
        assert_eq!(digest(&list).len(), 16);
        assert_ne!(digest(&list), digest(&[item("a", 1), item("b", 3)]));
        assert_ne!(digest(&list), digest(&[item("a", 1)]));
        assert_eq!(digest::<Item>(&[]), "cbf29ce484222325");
    }

    #[test]
    fn only_what_changed_is_sent_and_applying_it_gives_the_list() {
        let before = whole(vec![item("b", 1), item("a", 1), item("c", 1)]);
        let now = vec![item("a", 1), item("b", 2), item("d", 1)];
        let listing = changes(&before.items, &before.digest, now.clone());
        assert_eq!(listing.items, [item("b", 2), item("d", 1)]);
        assert_eq!(listing.removed, ["c"]);
        let applied = apply(Some((&before.digest, &before.items)), listing.clone());
        assert_eq!(applied, Ok((sorted(now), listing.digest)));
    }

    #[test]
    fn changes_to_a_list_not_held_are_refused_and_a_whole_list_always_applies() {
        let before = whole(vec![item("a", 1)]);
        let listing = changes(&before.items, &before.digest, vec![item("a", 2)]);
        assert!(matches!(
            apply::<Item>(None, listing.clone()),
            Err(ListingError::OtherBase { .. })
        ));
        assert!(matches!(
            apply(Some(("0000000000000000", &before.items)), listing),
            Err(ListingError::OtherBase { .. })
        ));
        let fresh = whole(vec![item("z", 1)]);
        assert_eq!(
            apply(Some(("x", &before.items)), fresh.clone()),
            Ok((vec![item("z", 1)], fresh.digest))
        );
    }

    #[test]
    fn changes_whose_digest_does_not_match_are_refused() {
        let before = whole(vec![item("a", 1)]);
        let mut listing = changes(&before.items, &before.digest, vec![item("a", 2)]);
        listing.digest = "0123456789abcdef".to_owned();
        assert!(matches!(
            apply(Some((&before.digest, &before.items)), listing),
            Err(ListingError::Digest { .. })
        ));
    }

    #[test]
    fn a_whole_list_is_taken_whatever_digest_its_worker_computed() {
        // A worker of another build writes a field this code does not know: its digest differs
        // from the one this code computes over the same items.
        let mut listing = whole(vec![item("b", 1), item("a", 1)]);
        listing.digest = "0123456789abcdef".to_owned();
        let (list, digest) = apply::<Item>(None, listing).unwrap_or_default();
        assert_eq!(list, [item("a", 1), item("b", 1)]);
        assert_eq!(
            digest,
            super::digest(&list),
            "the digest of record is this code's own"
        );
    }

    fn list() -> impl Strategy<Value = Vec<Item>> {
        proptest::collection::btree_map("[a-h]", 0u8..3, 0..8).prop_map(|m| {
            m.into_iter()
                .map(|(name, state)| Item { name, state })
                .collect()
        })
    }

    proptest! {
        /// From any list to any other, the changes applied to the first give the second.
        #[test]
        fn changes_applied_give_the_new_list(before in list(), now in list()) {
            let base = whole(before);
            let listing = changes(&base.items, &base.digest, now.clone());
            prop_assert!(listing.items.len() <= now.len());
            let want = listing.digest.clone();
            let applied = apply(Some((&base.digest, &base.items)), listing);
            prop_assert_eq!(applied, Ok((sorted(now), want)));
        }
    }
}
