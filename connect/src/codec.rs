//! Encrypted payloads: a Temporal payload codec (AES-256-GCM) that the worker and the CLI install
//! when keys are configured, so that run inputs, results, signals, queries, heartbeats and memos
//! reach the Temporal server — and its histories — encrypted. Search attributes never pass
//! through a codec (Temporal indexes them) and hold nothing sensitive.
//!
//! The format is the Temporal samples' (wire-compatible with their Go and Python codecs): the
//! whole original payload, protobuf-encoded, sealed with AES-256-GCM under a 12-byte random
//! nonce; the new payload's metadata says `encoding: binary/encrypted` and
//! `encryption-key-id: <id>`; its data is the nonce followed by the ciphertext and tag. The key
//! id is also the additional authenticated data, so a payload cannot be passed off under another
//! key's id.
//!
//! Keys rotate: a key ring holds several keys, encodes with the first and decodes with whichever
//! a payload names. Keep an old key while any history in the namespace's retention still uses
//! it (replay decodes histories again). A payload that is not encrypted decodes as it is (runs
//! recorded before encryption was switched on); a payload naming a key the ring does not hold
//! is an error naming the key id, never a silent fallback. No error carries payload data.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine;
use futures::future::BoxFuture;
use nodewright_model::text::quoted;
use prost::Message;
use temporalio_common::data_converters::{
    PayloadCodec, PayloadConversionError, SerializationContextData,
};
use temporalio_common::protos::temporal::api::common::v1::Payload;

/// The `encoding` of an encrypted payload.
pub const ENCODING_ENCRYPTED: &str = "binary/encrypted";
/// The metadata key naming the key a payload is encrypted with.
pub const METADATA_KEY_ID: &str = "encryption-key-id";
/// The metadata key of a payload's encoding.
const METADATA_ENCODING: &str = "encoding";
/// An AES-256 key's length in bytes.
pub const KEY_LEN: usize = 32;
/// The longest key id.
const MAX_KEY_ID_LEN: usize = 64;
/// GCM's tag length in bytes.
const TAG_LEN: usize = 16;

/// Why a key ring could not be read. Never carries key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyRingError {
    /// No key at all.
    #[error(
        "{source_name} holds no key: write one `<key id>=<base64 of 32 random bytes>` per line (e.g. `2026-11=$(head -c32 /dev/urandom | base64)`), the key to encrypt with first"
    )]
    Empty {
        /// Where the keys came from (a file path or a variable).
        source_name: String,
    },
    /// A line that is not `id=base64`.
    #[error(
        "{source_name} line {line}: {problem}; write `<key id>=<base64 of 32 random bytes>`, the id of letters, digits, '.', '_' or '-' (at most 64)"
    )]
    Line {
        /// Where the keys came from.
        source_name: String,
        /// The 1-based line number.
        line: usize,
        /// What is wrong (never the key).
        problem: String,
    },
}

/// Why a payload could not be encoded or decoded. Never carries payload data or key material:
/// Temporal writes the message into histories.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// The payload names a key this process does not hold.
    #[error(
        "a payload is encrypted with key {}, which this process does not hold: add that key to the key file (keep old keys while histories use them)",
        quoted(id)
    )]
    UnknownKey {
        /// The key id the payload names.
        id: String,
    },
    /// The payload is encrypted and this process has no keys at all.
    #[error(
        "a payload is encrypted (key {}) and this process has no payload encryption keys: give it the namespace's key file (temporal.encryption_keys_file, NODEWRIGHT_ENCRYPTION_KEYS_FILE, or NODEWRIGHT_ENCRYPTION_KEYS)",
        quoted(id)
    )]
    NoKeys {
        /// The key id the payload names.
        id: String,
    },
    /// The payload does not open with the key it names.
    #[error(
        "a payload does not decrypt with key {}: the key of that id differs from the one that encrypted it, or the payload was altered",
        quoted(id)
    )]
    DoesNotOpen {
        /// The key id.
        id: String,
    },
    /// The encrypted payload is malformed.
    #[error("an encrypted payload is malformed: {0}")]
    Malformed(&'static str),
    /// The system's random source failed.
    #[error("no random nonce for a payload: the system's random source failed")]
    Random,
}

/// The keys: the first encrypts, all decrypt.
pub struct KeyRing {
    current: String,
    keys: BTreeMap<String, LessSafeKey>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRing")
            .field("current", &self.current)
            .field("ids", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl KeyRing {
    /// Reads `text`: one `<key id>=<base64 of 32 bytes>` per line, blank lines and `#` comments
    /// ignored, the first key the one to encrypt with. `source_name` names the file or variable
    /// in errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, KeyRingError> {
        let mut current = None;
        let mut keys = BTreeMap::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let problem = |problem: String| KeyRingError::Line {
                source_name: source_name.to_owned(),
                line: index + 1,
                problem,
            };
            let (id, encoded) = line
                .split_once('=')
                .ok_or_else(|| problem("no `=` between the key id and the key".to_owned()))?;
            let id = id.trim();
            if !is_key_id(id) {
                return Err(problem(format!("the key id {} is not valid", quoted(id))));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .map_err(|_| problem(format!("the key of {} is not base64", quoted(id))))?;
            if bytes.len() != KEY_LEN {
                return Err(problem(format!(
                    "the key of {} is {} bytes, not 32",
                    quoted(id),
                    bytes.len()
                )));
            }
            let key = UnboundKey::new(&AES_256_GCM, &bytes)
                .map_err(|_| problem(format!("the key of {} is not an AES-256 key", quoted(id))))?;
            if keys.insert(id.to_owned(), LessSafeKey::new(key)).is_some() {
                return Err(problem(format!("the key id {} is given twice", quoted(id))));
            }
            current.get_or_insert_with(|| id.to_owned());
        }
        let current = current.ok_or_else(|| KeyRingError::Empty {
            source_name: source_name.to_owned(),
        })?;
        Ok(Self { current, keys })
    }

    /// The id payloads are encrypted with.
    pub fn current(&self) -> &str {
        &self.current
    }

    /// Encrypts `payload` with the current key.
    pub fn seal(&self, payload: &Payload) -> Result<Payload, CodecError> {
        let key = self
            .keys
            .get(&self.current)
            .ok_or_else(|| CodecError::UnknownKey {
                id: self.current.clone(),
            })?;
        let mut nonce = [0_u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| CodecError::Random)?;
        let mut sealed = payload.encode_to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(self.current.as_bytes()),
            &mut sealed,
        )
        .map_err(|_| CodecError::Malformed("it does not seal"))?;
        let mut data = Vec::with_capacity(NONCE_LEN + sealed.len());
        data.extend_from_slice(&nonce);
        data.extend_from_slice(&sealed);
        Ok(Payload {
            metadata: [
                (
                    METADATA_ENCODING.to_owned(),
                    ENCODING_ENCRYPTED.as_bytes().to_vec(),
                ),
                (METADATA_KEY_ID.to_owned(), self.current.as_bytes().to_vec()),
            ]
            .into_iter()
            .collect(),
            data,
            ..Payload::default()
        })
    }

    /// Decrypts `payload` when it is encrypted; returns it unchanged otherwise.
    pub fn open(&self, payload: Payload) -> Result<Payload, CodecError> {
        if !is_encrypted(&payload) {
            return Ok(payload);
        }
        let id = payload
            .metadata
            .get(METADATA_KEY_ID)
            .and_then(|id| std::str::from_utf8(id).ok())
            .ok_or(CodecError::Malformed("it names no key id"))?
            .to_owned();
        let key = self
            .keys
            .get(&id)
            .ok_or_else(|| CodecError::UnknownKey { id: id.clone() })?;
        if payload.data.len() < NONCE_LEN + TAG_LEN {
            return Err(CodecError::Malformed(
                "it is shorter than a nonce and a tag",
            ));
        }
        let (nonce, sealed) = payload.data.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce)
            .map_err(|_| CodecError::Malformed("its nonce is not 12 bytes"))?;
        let mut buffer = sealed.to_vec();
        let plain = key
            .open_in_place(nonce, Aad::from(id.as_bytes()), &mut buffer)
            .map_err(|_| CodecError::DoesNotOpen { id: id.clone() })?;
        Payload::decode(&*plain).map_err(|_| CodecError::Malformed("it holds no payload"))
    }
}

/// A key id: letters, digits, `.`, `_`, `-`; at most 64.
fn is_key_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_KEY_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The codec the SDK calls: with keys, every payload out is sealed and every payload in opened;
/// without, payloads go out as they are and an encrypted one coming in is refused, naming its
/// key and the setting (a process without the key never passes encrypted bytes on as data).
#[derive(Clone, Debug)]
pub struct EncryptionCodec {
    keys: Option<Arc<KeyRing>>,
}

impl EncryptionCodec {
    /// A codec over `keys`.
    pub fn new(keys: Arc<KeyRing>) -> Self {
        Self { keys: Some(keys) }
    }

    /// A codec without keys: plain payloads pass both ways, encrypted ones are refused.
    pub fn without_keys() -> Self {
        Self { keys: None }
    }
}

/// Opens `payload` with `keys`, or, without keys, passes a plain one and refuses an encrypted
/// one naming its key.
fn open_with(keys: Option<&KeyRing>, payload: Payload) -> Result<Payload, CodecError> {
    match keys {
        Some(keys) => keys.open(payload),
        None if is_encrypted(&payload) => Err(CodecError::NoKeys {
            id: payload
                .metadata
                .get(METADATA_KEY_ID)
                .map(|id| String::from_utf8_lossy(id).into_owned())
                .unwrap_or_default(),
        }),
        None => Ok(payload),
    }
}

/// Whether `payload` is one this codec (or a compatible one) encrypted.
pub fn is_encrypted(payload: &Payload) -> bool {
    payload.metadata.get(METADATA_ENCODING).map(Vec::as_slice)
        == Some(ENCODING_ENCRYPTED.as_bytes())
}

impl PayloadCodec for EncryptionCodec {
    fn encode(
        &self,
        _context: &SerializationContextData,
        payloads: Vec<Payload>,
    ) -> BoxFuture<'static, Result<Vec<Payload>, PayloadConversionError>> {
        let keys = self.keys.clone();
        Box::pin(async move {
            match keys {
                None => Ok(payloads),
                Some(keys) => payloads
                    .iter()
                    .map(|payload| keys.seal(payload).map_err(conversion_error))
                    .collect(),
            }
        })
    }

    fn decode(
        &self,
        _context: &SerializationContextData,
        payloads: Vec<Payload>,
    ) -> BoxFuture<'static, Result<Vec<Payload>, PayloadConversionError>> {
        let keys = self.keys.clone();
        Box::pin(async move {
            payloads
                .into_iter()
                .map(|payload| open_with(keys.as_deref(), payload).map_err(conversion_error))
                .collect()
        })
    }
}

fn conversion_error(error: CodecError) -> PayloadConversionError {
    PayloadConversionError::EncodingError(Box::new(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> String {
        base64::engine::general_purpose::STANDARD.encode([byte; KEY_LEN])
    }

    fn json_payload(text: &str) -> Payload {
        Payload {
            metadata: [("encoding".to_owned(), b"json/plain".to_vec())]
                .into_iter()
                .collect(),
            data: text.as_bytes().to_vec(),
            ..Payload::default()
        }
    }

    #[test]
    fn a_sealed_payload_opens_to_the_original_and_shows_nothing_of_it() {
        let ring = KeyRing::parse(&format!("k1={}\n", key(1)), "keys").expect("ring");
        let original =
            json_payload(r#"{"bootstrap":"kubeadm join --token abcdef.0123456789abcdef"}"#);
        let sealed = ring.seal(&original).expect("sealed");
        assert_eq!(
            sealed.metadata.get("encoding").map(Vec::as_slice),
            Some(&b"binary/encrypted"[..])
        );
        assert_eq!(
            sealed.metadata.get("encryption-key-id").map(Vec::as_slice),
            Some(&b"k1"[..])
        );
        let data = String::from_utf8_lossy(&sealed.data);
        assert!(!data.contains("abcdef") && !data.contains("json/plain"));
        assert_eq!(ring.open(sealed.clone()).expect("opened"), original);
        // A fresh nonce each time.
        assert_ne!(ring.seal(&original).expect("sealed").data, sealed.data);
    }

    #[test]
    fn keys_rotate_and_old_payloads_still_open() {
        let old = KeyRing::parse(&format!("k1={}", key(1)), "keys").expect("ring");
        let rotated = KeyRing::parse(
            &format!("k2={}\n# the old one\nk1={}\n", key(2), key(1)),
            "keys",
        )
        .expect("ring");
        assert_eq!(rotated.current(), "k2");
        let by_old = old.seal(&json_payload("1")).expect("sealed");
        assert_eq!(rotated.open(by_old).expect("opened"), json_payload("1"));
        let by_new = rotated.seal(&json_payload("2")).expect("sealed");
        assert_eq!(
            old.open(by_new),
            Err(CodecError::UnknownKey {
                id: "k2".to_owned()
            })
        );
    }

    #[test]
    fn plain_payloads_pass_and_altered_or_misnamed_ones_are_refused() {
        let ring = KeyRing::parse(&format!("k1={}", key(1)), "keys").expect("ring");
        assert_eq!(
            ring.open(json_payload("x")).expect("plain"),
            json_payload("x")
        );
        let mut altered = ring.seal(&json_payload("x")).expect("sealed");
        if let Some(last) = altered.data.last_mut() {
            *last ^= 1;
        }
        assert_eq!(
            ring.open(altered),
            Err(CodecError::DoesNotOpen {
                id: "k1".to_owned()
            })
        );
        // Same key bytes under another id: the id is authenticated.
        let other = KeyRing::parse(&format!("k9={}", key(1)), "keys").expect("ring");
        let mut renamed = other.seal(&json_payload("x")).expect("sealed");
        renamed
            .metadata
            .insert("encryption-key-id".to_owned(), b"k1".to_vec());
        assert_eq!(
            ring.open(renamed),
            Err(CodecError::DoesNotOpen {
                id: "k1".to_owned()
            })
        );
        let mut short = ring.seal(&json_payload("x")).expect("sealed");
        short.data.truncate(10);
        assert!(matches!(ring.open(short), Err(CodecError::Malformed(_))));
    }

    #[test]
    fn without_keys_plain_payloads_pass_and_encrypted_ones_are_refused_by_key_id() {
        let ring = KeyRing::parse(&format!("k1={}", key(1)), "keys").expect("ring");
        let sealed = ring.seal(&json_payload("x")).expect("sealed");
        assert_eq!(
            open_with(None, sealed),
            Err(CodecError::NoKeys {
                id: "k1".to_owned()
            })
        );
        assert_eq!(open_with(None, json_payload("x")), Ok(json_payload("x")));
    }

    #[test]
    fn a_bad_key_file_is_refused_by_line_without_showing_a_key() {
        let secret = key(7);
        let cases = [
            ("", "keys holds no key"),
            ("# only a comment\n", "keys holds no key"),
            ("k1", "keys line 1: no `=`"),
            (
                "bad id!=AAAA",
                "keys line 1: the key id \"bad id!\" is not valid",
            ),
            (
                "k1=not base64!",
                "keys line 1: the key of \"k1\" is not base64",
            ),
            (
                "k1=AAAA",
                "keys line 1: the key of \"k1\" is 3 bytes, not 32",
            ),
        ];
        for (text, expected) in cases {
            let message = KeyRing::parse(text, "keys").expect_err(text).to_string();
            assert!(message.starts_with(expected), "{text:?}: {message}");
        }
        let twice = format!("k1={secret}\n\nk1={secret}\n");
        let message = KeyRing::parse(&twice, "keys")
            .expect_err("twice")
            .to_string();
        assert!(
            message.starts_with("keys line 3: the key id \"k1\" is given twice"),
            "{message}"
        );
        assert!(!message.contains(&secret));
    }
}
