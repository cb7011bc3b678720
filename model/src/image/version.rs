//! An image version as Azure names it: dot-separated numbers (`1.0.12`, `22.04.202411010`),
//! ordered part by part as numbers, never as text.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::limits::MAX_IMAGE_VERSION_LEN;

/// The most dot-separated parts a version may have (Azure uses three).
const MAX_PARTS: usize = 8;

/// A concrete image version. Ordered by its numbers part by part (`1.0.9` < `1.0.10`); a
/// version that is a prefix of another comes first (`1.0` < `1.0.0`), and equal numbers written
/// differently (`1.01` and `1.1`) are ordered by their text, so the order is total and agrees
/// with equality.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ImageVersion {
    parts: Vec<u64>,
    text: String,
}

/// Why a text is not an image version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "image version {shown} is not dot-separated numbers such as \"1.0.12\" (at most {MAX_PARTS} parts, each at most 18 digits)"
)]
pub struct InvalidVersion {
    /// The text, quoted and shortened.
    pub shown: String,
}

impl ImageVersion {
    /// Reads `text` as a version; `latest` and anything not made of numbers and dots is refused.
    pub fn parse(text: &str) -> Result<Self, InvalidVersion> {
        let invalid = || InvalidVersion {
            shown: crate::text::quoted(
                &text.chars().take(MAX_IMAGE_VERSION_LEN).collect::<String>(),
            ),
        };
        if text.is_empty() || text.len() > MAX_IMAGE_VERSION_LEN {
            return Err(invalid());
        }
        let mut parts = Vec::new();
        for part in text.split('.') {
            if part.is_empty() || part.len() > 18 || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            parts.push(part.parse::<u64>().map_err(|_| invalid())?);
        }
        if parts.len() > MAX_PARTS {
            return Err(invalid());
        }
        Ok(Self {
            parts,
            text: text.to_owned(),
        })
    }

    /// The version as Azure writes it.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl Ord for ImageVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.parts
            .cmp(&other.parts)
            .then_with(|| self.text.cmp(&other.text))
    }
}

impl PartialOrd for ImageVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for ImageVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl TryFrom<String> for ImageVersion {
    type Error = InvalidVersion;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::parse(&text)
    }
}

impl From<ImageVersion> for String {
    fn from(version: ImageVersion) -> Self {
        version.text
    }
}
