//! Machine names: `<pool>-<5 characters>`, which is also the VM name, the computer name and the
//! Node name (architecture §2).
//!
//! The suffix is drawn from the alphabet Kubernetes uses for generated names: lowercase
//! consonants and digits without vowels or look-alikes, so no suffix spells a word or reads
//! ambiguously. The random number comes from the caller (a workflow's deterministic randomness):
//! this crate has no randomness of its own.
//!
//! The suffix space is 27⁵ = 14,348,907. A rollout of a pool of `n` machines draws `n` names,
//! each while about `n` names are in use, so without a check some draw matches a name in use
//! with probability `1 - exp(-n²/27⁵)`: 6.7% at 1,000 machines, 0.07% at 100. [`draw_free_name`]
//! draws again (up to [`MAX_NAME_DRAWS`] times) while the name is one the rollout observed, so a
//! rollout's draw collides only with a VM it could not see; the create refuses that one
//! ([`crate::machine::adoption`]).

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::InvalidName;
use crate::limits::MAX_POOL_NAME_LEN;

/// The characters of a machine name's suffix (Kubernetes' `SafeEncodeString` alphabet).
pub const SUFFIX_ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// The length of a machine name's suffix.
pub const SUFFIX_LEN: usize = 5;

/// How many different suffixes there are: 27⁵ = 14,348,907.
pub const SUFFIX_SPACE: u64 = 14_348_907;

/// The longest machine name a valid pool produces: pool name, `-`, suffix.
pub const MAX_GENERATED_LEN: usize = MAX_POOL_NAME_LEN + 1 + SUFFIX_LEN;

/// The longest machine name accepted: a DNS label, so it is also a valid Node name and
/// Kubernetes label value (63), Azure VM name (64) and Linux computer name (64).
pub const MAX_MACHINE_NAME_LEN: usize = 63;

// Generated names must fit every place the name goes; the pool name limit is what ensures it.
const _: () = assert!(MAX_GENERATED_LEN <= MAX_MACHINE_NAME_LEN);
const _: () = assert!((SUFFIX_ALPHABET.len() as u64).pow(SUFFIX_LEN as u32) == SUFFIX_SPACE);

/// A machine's name: a DNS label of at most 63 characters of lowercase letters, digits and `-`,
/// starting with a letter and not ending with `-`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MachineName(String);

impl MachineName {
    /// The name of a new machine of `pool`: `<pool>-<suffix>`, the suffix chosen by
    /// `random % SUFFIX_SPACE`, so two randoms below [`SUFFIX_SPACE`] never give the same name.
    ///
    /// `pool` must be a validated pool name (as in [`crate::pool::ValidPool`]); the result is then
    /// at most [`MAX_GENERATED_LEN`] (46) characters.
    pub fn generate(pool: &str, random: u64) -> MachineName {
        let mut name = String::with_capacity(pool.len() + 1 + SUFFIX_LEN);
        name.push_str(pool);
        name.push('-');
        let base = SUFFIX_ALPHABET.len() as u64;
        let mut rest = random % SUFFIX_SPACE;
        for _ in 0..SUFFIX_LEN {
            // `rest % base` is below 27, a valid index.
            let index = (rest % base) as usize;
            name.push(char::from(SUFFIX_ALPHABET[index]));
            rest /= base;
        }
        MachineName(name)
    }

    /// Validates `value` as a machine name given in `field` (used in the error message).
    ///
    /// # Errors
    ///
    /// [`InvalidName`] when `value` is not a DNS label starting with a letter.
    pub fn parse(field: &str, value: &str) -> Result<Self, InvalidName> {
        let invalid = |problem, fix| InvalidName {
            field: field.to_owned(),
            value: value.to_owned(),
            problem,
            fix,
        };
        const FIX: &str = "use a machine name such as \"workers-x7k2q\": up to 63 lowercase letters, digits and '-', starting with a letter";
        match crate::cluster::label_problem(
            value,
            MAX_MACHINE_NAME_LEN,
            "is longer than 63 characters",
        ) {
            Some(problem) => Err(invalid(problem, FIX)),
            None => Ok(Self(value.to_owned())),
        }
    }

    /// The pool the name belongs to, when it has the `<pool>-<5 suffix characters>` shape.
    pub fn pool_of(&self) -> Option<&str> {
        let (pool, suffix) = self.0.rsplit_once('-')?;
        let is_suffix =
            suffix.len() == SUFFIX_LEN && suffix.bytes().all(|b| SUFFIX_ALPHABET.contains(&b));
        (is_suffix && !pool.is_empty()).then_some(pool)
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How many names [`draw_free_name`] draws before it gives up: the chance that all of them
/// are taken in a pool of 1,000 machines is (1,000 / 27⁵)⁸, about 10⁻³⁷.
pub const MAX_NAME_DRAWS: usize = 8;

/// The first name of `pool` drawn from `randoms` ([`MachineName::generate`]) that is not in
/// `taken` (the names of every machine the caller observed and of those it is creating),
/// drawing at most [`MAX_NAME_DRAWS`] times; `None` when every draw was taken (or `randoms`
/// ran out).
pub fn draw_free_name(
    pool: &str,
    taken: &BTreeSet<String>,
    randoms: impl IntoIterator<Item = u64>,
) -> Option<MachineName> {
    randoms
        .into_iter()
        .take(MAX_NAME_DRAWS)
        .map(|random| MachineName::generate(pool, random))
        .find(|name| !taken.contains(name.as_str()))
}

impl fmt::Display for MachineName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for MachineName {
    type Error = InvalidName;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse("machine", &value)
    }
}

impl From<MachineName> for String {
    fn from(name: MachineName) -> Self {
        name.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(value: &str, expected_problem: Option<&str>) {
        match (MachineName::parse("machine", value), expected_problem) {
            (Ok(name), None) => assert_eq!(name.as_str(), value),
            (Err(err), Some(problem)) => {
                assert_eq!(err.problem, problem, "for {value:?}");
                assert!(err.to_string().starts_with("machine: "), "{err}");
            }
            (result, expected) => panic!("{value:?}: got {result:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn accepts_dns_labels_that_start_with_a_letter() {
        let table: &[(&str, Option<&str>)] = &[
            ("workers-x7k2q", None),
            ("a", None),
            ("gpu-a100-bcdfg", None),
            (&"a".repeat(63), None),
            ("", Some("is empty")),
            (&"a".repeat(64), Some("is longer than 63 characters")),
            ("7workers", Some("does not start with a lowercase letter")),
            (
                "Workers-x7k2q",
                Some("does not start with a lowercase letter"),
            ),
            ("workers-", Some("ends with '-'")),
            (
                "workers_x7k2q",
                Some("contains a character other than a-z, 0-9 and '-'"),
            ),
            (
                "workers.x7k2q",
                Some("contains a character other than a-z, 0-9 and '-'"),
            ),
        ];
        for (value, expected) in table {
            check(value, *expected);
        }
    }

    #[test]
    fn generates_the_same_name_for_the_same_random() {
        assert_eq!(
            MachineName::generate("workers", 0).as_str(),
            "workers-bbbbb"
        );
        assert_eq!(
            MachineName::generate("workers", 1).as_str(),
            "workers-cbbbb"
        );
        assert_eq!(
            MachineName::generate("workers", 26).as_str(),
            "workers-9bbbb"
        );
        assert_eq!(
            MachineName::generate("workers", 27).as_str(),
            "workers-bcbbb"
        );
        assert_eq!(
            MachineName::generate("workers", SUFFIX_SPACE - 1).as_str(),
            "workers-99999"
        );
        assert_eq!(
            MachineName::generate("workers", SUFFIX_SPACE),
            MachineName::generate("workers", 0)
        );
    }

    #[test]
    fn a_drawn_name_is_never_one_in_use_and_the_draws_are_bounded() {
        let taken: BTreeSet<String> = ["workers-bbbbb", "workers-cbbbb"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        // randoms, the name drawn (None: every draw taken)
        let table: [(&[u64], Option<&str>); 6] = [
            (&[2], Some("workers-dbbbb")),
            (&[0, 2], Some("workers-dbbbb")),
            (&[0, 1, 0, 3], Some("workers-fbbbb")),
            (&[0; MAX_NAME_DRAWS], None),
            (&[0, 0, 0, 0, 0, 0, 0, 0, 2], None),
            (&[], None),
        ];
        for (randoms, expected) in table {
            let drawn = draw_free_name("workers", &taken, randoms.iter().copied());
            assert_eq!(
                drawn.as_ref().map(MachineName::as_str),
                expected,
                "{randoms:?}"
            );
        }
        // The same randoms give the same name: a replay draws what the run drew.
        assert_eq!(
            draw_free_name("workers", &taken, [0, 1, 5]),
            draw_free_name("workers", &taken, [0, 1, 5])
        );
    }

    #[test]
    fn the_collision_odds_the_module_documents_hold() {
        let odds = |n: f64| 1.0 - (-(n * n) / SUFFIX_SPACE as f64).exp();
        assert!((odds(1000.0) - 0.067).abs() < 0.001, "{}", odds(1000.0));
        assert!((odds(100.0) - 0.0007).abs() < 0.0001, "{}", odds(100.0));
    }

    #[test]
    fn finds_the_pool_of_a_generated_name_only() {
        let table = [
            ("workers-bcdfg", Some("workers")),
            ("gpu-a100-x7k2q", Some("gpu-a100")),
            ("workers-bcdf", None),
            ("workers-bcdfgh", None),
            ("workers-abcde", None),
            ("workers", None),
        ];
        for (value, expected) in table {
            let name = MachineName::parse("machine", value).unwrap_or_else(|err| panic!("{err}"));
            assert_eq!(name.pool_of(), expected, "{value}");
        }
    }

    #[test]
    fn serializes_as_a_string_and_validates_when_deserializing() {
        let name = MachineName::generate("workers", 42);
        let json = serde_json::to_string(&name).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(json, format!("\"{name}\""));
        let back: MachineName = serde_json::from_str(&json).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(back, name);
        let err = serde_json::from_str::<MachineName>("\"Workers-x\"")
            .err()
            .map(|err| err.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|m| m.contains("does not start with a lowercase letter")),
            "{err:?}"
        );
    }

    proptest! {
        #[test]
        fn every_generated_name_parses_fits_and_belongs_to_its_pool(
            pool in "[a-z]([a-z0-9-]{0,38}[a-z0-9])?",
            random in any::<u64>(),
        ) {
            let name = MachineName::generate(&pool, random);
            prop_assert!(name.as_str().len() <= MAX_GENERATED_LEN);
            prop_assert!(name.as_str().len() <= 46);
            let parsed = MachineName::parse("machine", name.as_str());
            prop_assert_eq!(parsed.as_ref(), Ok(&name));
            prop_assert_eq!(name.pool_of(), Some(pool.as_str()));
        }

        #[test]
        fn a_free_name_is_drawn_whenever_one_draw_is_free(
            taken_randoms in proptest::collection::vec(0..SUFFIX_SPACE, 0..20),
            randoms in proptest::collection::vec(any::<u64>(), 1..12),
        ) {
            let taken: BTreeSet<String> = taken_randoms
                .iter()
                .map(|r| MachineName::generate("workers", *r).to_string())
                .collect();
            let drawn = draw_free_name("workers", &taken, randoms.iter().copied());
            let free_within_bound = randoms
                .iter()
                .take(MAX_NAME_DRAWS)
                .any(|r| !taken.contains(MachineName::generate("workers", *r).as_str()));
            prop_assert_eq!(drawn.is_some(), free_within_bound);
            if let Some(name) = drawn {
                prop_assert!(!taken.contains(name.as_str()));
            }
        }

        #[test]
        fn different_randoms_in_the_suffix_space_give_different_names(
            a in 0..SUFFIX_SPACE,
            b in 0..SUFFIX_SPACE,
        ) {
            prop_assume!(a != b);
            prop_assert_ne!(
                MachineName::generate("workers", a),
                MachineName::generate("workers", b)
            );
        }
    }
}
