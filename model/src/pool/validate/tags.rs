//! Rules for the Azure tags the pool's resources get: Azure's limits, minus what nodewright's
//! ownership tags take (architecture §2).

use std::collections::BTreeMap;

use super::{Problems, entry, quoted};
use crate::ownership::{
    MAX_TAG_VALUE_CHARS, TAG_CLUSTER, TAG_CREATE_RUN, TAG_CREATED, TAG_CREATION_DEADLINE,
    TAG_CREATION_ENDED, TAG_DRAIN, TAG_IMAGE_VERSION, TAG_KEPT, TAG_MACHINE, TAG_POOL,
    TAG_TEMPLATE,
};

/// Tags Azure allows on one resource.
const MAX_AZURE_TAGS: usize = 50;
/// The tags nodewright adds to the resources it creates: ownership and the create run on every
/// one, the drain settings on the VM, and the kept marker with the create's end on a machine a
/// failed create keeps (`--keep-on-failure`), and the image version.
const OWNERSHIP_TAGS: [&str; 11] = [
    TAG_CLUSTER,
    TAG_POOL,
    TAG_MACHINE,
    TAG_TEMPLATE,
    TAG_CREATED,
    TAG_CREATION_DEADLINE,
    TAG_CREATE_RUN,
    TAG_DRAIN,
    TAG_CREATION_ENDED,
    TAG_KEPT,
    TAG_IMAGE_VERSION,
];
/// Tags a pool may set itself.
const MAX_USER_TAGS: usize = MAX_AZURE_TAGS - OWNERSHIP_TAGS.len();
/// The longest tag name Azure accepts, in characters.
const MAX_TAG_NAME_CHARS: usize = 512;
/// Characters Azure refuses in tag names.
const REFUSED_NAME_CHARS: [char; 7] = ['<', '>', '%', '&', '\\', '?', '/'];
/// The prefix of nodewright's own tag names.
const RESERVED_PREFIX: &str = "nodewright.io-";

const NAME_FIX: &str = "use letters, digits, '.', '-' and '_' (e.g. team or cost-center)";

/// Checks the tag map at `field`.
pub(super) fn check(problems: &mut Problems, field: &str, tags: &BTreeMap<String, String>) {
    if tags.len() > MAX_USER_TAGS {
        problems.push(
            field,
            format!("{} tags", tags.len()),
            format!("has more than {MAX_USER_TAGS} tags"),
            format!(
                "remove some: Azure allows {MAX_AZURE_TAGS} tags per resource and nodewright \
                 adds up to {} ({})",
                OWNERSHIP_TAGS.len(),
                OWNERSHIP_TAGS.join(", ")
            ),
        );
    }
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for (name, value) in tags {
        let item = entry(field, name);
        if let Some((problem, fix)) = name_problem(name) {
            problems.push(&item, quoted(name), problem, fix);
        } else if name.to_ascii_lowercase().starts_with(RESERVED_PREFIX) {
            problems.push(
                &item,
                quoted(name),
                "name uses the prefix nodewright.io-, which nodewright keeps for its own",
                format!(
                    "choose another name; nodewright itself sets {}",
                    OWNERSHIP_TAGS.join(", ")
                ),
            );
        }
        if let Some(first) = seen.insert(name.to_lowercase(), name) {
            problems.push(
                &item,
                quoted(name),
                format!(
                    "name differs only in case from {}, and Azure tag names ignore case",
                    quoted(first)
                ),
                "keep one of the two",
            );
        }
        if value.chars().count() > MAX_TAG_VALUE_CHARS {
            problems.push(
                &item,
                quoted(value),
                "value is longer than 256 characters",
                "shorten the value to at most 256 characters",
            );
        }
    }
}

/// What is wrong with a tag name Azure would refuse, and its fix, if anything.
fn name_problem(name: &str) -> Option<(String, &'static str)> {
    if name.trim().is_empty() {
        return Some(("name is empty".to_owned(), NAME_FIX));
    }
    if name.chars().count() > MAX_TAG_NAME_CHARS {
        return Some((
            "name is longer than 512 characters".to_owned(),
            "shorten the name to at most 512 characters",
        ));
    }
    name.chars()
        .find(|c| REFUSED_NAME_CHARS.contains(c))
        .map(|c| {
            (
                format!("name contains '{c}', which Azure refuses in tag names"),
                NAME_FIX,
            )
        })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn accepts_up_to_39_plain_tags(count in 0usize..=60) {
            let tags: BTreeMap<String, String> =
                (0..count).map(|i| (format!("tag{i}"), format!("v{i}"))).collect();
            let mut problems = Problems::default();
            check(&mut problems, "tags", &tags);
            prop_assert_eq!(problems.0.is_empty(), count <= 39);
        }

        #[test]
        fn refuses_every_name_with_a_character_azure_refuses(
            before in "[a-z]{0,5}",
            refused in prop::sample::select(REFUSED_NAME_CHARS.to_vec()),
            after in "[a-z]{0,5}",
        ) {
            let name = format!("{before}{refused}{after}");
            prop_assert!(name_problem(&name).is_some());
        }
    }
}
