//! The template hash: a short, stable, label-safe name for one version of a machine template.
//!
//! Machines record the hash of the template they were built from (`nodewright.io-template` tag,
//! `nodewright.io/template` label); a rolling update replaces every machine whose hash differs
//! from the pool's. Like Kubernetes' `pod-template-hash`, it covers the template only: changing
//! `replicas`, the strategy, drain settings or timeouts never replaces a machine.
//!
//! **Stability:** the hash is FNV-1a (64-bit) over the template's JSON as serialized by
//! `serde_json` — struct fields in declaration order, map keys sorted (they are `BTreeMap`s) and
//! unset options and empty collections skipped. Renaming, reordering or retyping a field of
//! [`MachineTemplate`] or its parts therefore changes every hash and makes the next rollout
//! replace every machine; adding an optional field that is skipped when unset does not. The
//! `golden_hash_is_stable` test pins one value so such a change is never made by accident.

use std::io;

use super::spec::MachineTemplate;
use crate::machine_name::SUFFIX_ALPHABET;

/// The length of a template hash.
pub const TEMPLATE_HASH_LEN: usize = 10;

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The hash of `template`: [`TEMPLATE_HASH_LEN`] characters from [`SUFFIX_ALPHABET`] (lowercase
/// consonants and digits, so it is a valid label value, tag value and name part, and never spells
/// a word).
pub fn template_hash(template: &MachineTemplate) -> String {
    let mut hasher = Fnv1a(FNV_OFFSET_BASIS);
    match serde_json::to_writer(&mut hasher, template) {
        Ok(()) => {}
        // Infallible: the writer never fails, and every part of the template is a string, a
        // number, a list or a map with string keys, which JSON always represents.
        Err(error) => unreachable!("a machine template always serializes to JSON: {error}"),
    }
    render(hasher.0)
}

/// Writes `hash` as base-27 digits, least significant first; 27¹⁰ ≈ 2⁴⁷ values.
fn render(hash: u64) -> String {
    let base = SUFFIX_ALPHABET.len() as u64;
    let mut rest = hash;
    (0..TEMPLATE_HASH_LEN)
        .map(|_| {
            // `rest % base` is below 27, a valid index.
            let digit = SUFFIX_ALPHABET[(rest % base) as usize];
            rest /= base;
            char::from(digit)
        })
        .collect()
}

/// FNV-1a, fed through `io::Write` so the JSON never has to be held in memory.
struct Fnv1a(u64);

impl io::Write for Fnv1a {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(FNV_PRIME);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::pool::{
        BootstrapKeyVaultSecret, BootstrapSecretRef, BootstrapTokenSpec, ImageSource, OsDiskSpec,
        TaintSpec,
    };

    fn template() -> MachineTemplate {
        MachineTemplate {
            vm_size: "Standard_D2s_v5".to_owned(),
            image: ImageSource {
                id: None,
                publisher: Some("Canonical".to_owned()),
                offer: Some("ubuntu-24_04-lts".to_owned()),
                sku: Some("server".to_owned()),
                version: Some("latest".to_owned()),
            },
            os_disk: OsDiskSpec {
                size_gb: Some(64),
                storage_account_type: "Premium_LRS".to_owned(),
            },
            subnet_id: "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/nodewright-local/providers/Microsoft.Network/virtualNetworks/nodes/subnets/nodes".to_owned(),
            zones: vec!["1".to_owned(), "2".to_owned()],
            labels: [("role".to_owned(), "worker".to_owned())].into(),
            taints: vec![],
            tags: [("team".to_owned(), "platform".to_owned())].into(),
            admin_username: "nodewright".to_owned(),
            ssh_public_key: None,
            bootstrap: Some("#!/bin/bash\n".to_owned()),
            bootstrap_secret_ref: None,
            bootstrap_key_vault_secret: None,
            bootstrap_token: None,
            capacity_types: Vec::new(),
            spot: None,
        }
    }

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        for (input, expected) in [
            ("", 0xcbf2_9ce4_8422_2325_u64),
            ("a", 0xaf63_dc4c_8601_ec8c),
            ("foobar", 0x8594_4171_f739_67e8),
        ] {
            let mut hasher = Fnv1a(FNV_OFFSET_BASIS);
            hasher
                .write_all(input.as_bytes())
                .unwrap_or_else(|err| panic!("{err}"));
            assert_eq!(hasher.0, expected, "{input:?}");
        }
    }

    #[test]
    fn golden_hash_is_stable() {
        // If this fails, the template's serde shape changed: every machine of every pool would
        // be replaced by the next rollout. Change the shape compatibly instead (see module doc).
        assert_eq!(template_hash(&template()), "fv95qxgbws");
    }

    #[test]
    fn hash_is_label_safe() {
        let hash = template_hash(&template());
        assert_eq!(hash.len(), TEMPLATE_HASH_LEN);
        assert!(hash.bytes().all(|b| SUFFIX_ALPHABET.contains(&b)), "{hash}");
    }

    #[test]
    fn hash_changes_with_every_part_of_the_template() {
        let base = template_hash(&template());
        type Change = (&'static str, fn(&mut MachineTemplate));
        let changes: [Change; 12] = [
            ("vm size", |t| t.vm_size = "Standard_D4s_v5".to_owned()),
            ("image version", |t| {
                t.image.version = Some("24.04.202411030".to_owned())
            }),
            ("image id", |t| {
                t.image = ImageSource {
                    id: Some(
                        "/subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/images/i"
                            .to_owned(),
                    ),
                    ..ImageSource::default()
                }
            }),
            ("disk size", |t| t.os_disk.size_gb = Some(128)),
            ("a label", |t| {
                t.labels.insert("tier".to_owned(), "batch".to_owned());
            }),
            ("a label value", |t| {
                t.labels.insert("role".to_owned(), "batch".to_owned());
            }),
            ("a taint", |t| {
                t.taints.push(TaintSpec {
                    key: "dedicated".to_owned(),
                    value: String::new(),
                    effect: "NoSchedule".to_owned(),
                })
            }),
            ("zones", |t| t.zones.push("3".to_owned())),
            ("bootstrap", |t| t.bootstrap = None),
            ("a bootstrap Secret reference", |t| {
                t.bootstrap = None;
                t.bootstrap_secret_ref = Some(BootstrapSecretRef {
                    namespace: "nodewright".to_owned(),
                    name: "workers-bootstrap-v2".to_owned(),
                    key: "bootstrap".to_owned(),
                });
            }),
            ("a minted bootstrap token", |t| {
                t.bootstrap_token = Some(BootstrapTokenSpec::default());
            }),
            ("the minted token's groups", |t| {
                t.bootstrap_token = Some(BootstrapTokenSpec {
                    extra_groups: vec!["system:bootstrappers:workers".to_owned()],
                    ..BootstrapTokenSpec::default()
                });
            }),
        ];
        for (what, change) in changes {
            let mut changed = template();
            change(&mut changed);
            assert_ne!(template_hash(&changed), base, "{what} must change the hash");
        }
    }

    #[test]
    fn a_key_vault_secret_uri_is_hashed_so_pinning_another_version_rolls() {
        let by_uri = |uri: &str| {
            let mut template = template();
            template.bootstrap = None;
            template.bootstrap_key_vault_secret = Some(BootstrapKeyVaultSecret {
                secret_uri: uri.to_owned(),
            });
            template_hash(&template)
        };
        let latest = by_uri("https://contoso-boot.vault.azure.net/secrets/workers");
        let v1 = by_uri(
            "https://contoso-boot.vault.azure.net/secrets/workers/4387e9f3d6e14c459867679a90fd0f79",
        );
        let v2 = by_uri(
            "https://contoso-boot.vault.azure.net/secrets/workers/0a1b2c3d4e5f60718293a4b5c6d7e8f9",
        );
        assert_ne!(latest, template_hash(&template()));
        assert_ne!(latest, v1);
        assert_ne!(v1, v2);
        assert_eq!(
            latest,
            by_uri("https://contoso-boot.vault.azure.net/secrets/workers")
        );
    }

    #[test]
    fn hash_does_not_depend_on_map_insertion_order() {
        let mut forward = template();
        let mut backward = template();
        for (key, value) in [("a", "1"), ("b", "2"), ("c", "3")] {
            forward.labels.insert(key.to_owned(), value.to_owned());
        }
        for (key, value) in [("c", "3"), ("b", "2"), ("a", "1")] {
            backward.labels.insert(key.to_owned(), value.to_owned());
        }
        assert_eq!(template_hash(&forward), template_hash(&backward));
    }
}
