//! Image versions.
