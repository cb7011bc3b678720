//! Rules for `spec.headroom` (what a batch of creates keeps free): [`buffer`] returns the
//! [`Buffer`] workflows take, nothing kept for a key left out.

use super::Problems;
use crate::headroom::Buffer;
use crate::limits::{MAX_HEADROOM_BUFFER_ADDRESSES, MAX_HEADROOM_BUFFER_VCPUS};
use crate::pool::spec::HeadroomSpec;

/// Checks `spec.headroom` (at `field`) and returns its buffer; a value past its maximum is a
/// problem (and keeps nothing).
pub(super) fn buffer(problems: &mut Problems, field: &str, spec: Option<&HeadroomSpec>) -> Buffer {
    let Some(written) = spec.and_then(|s| s.buffer.as_ref()) else {
        return Buffer::default();
    };
    let buffer = Buffer {
        addresses: u64::from(written.addresses.unwrap_or(0)),
        vcpus: u64::from(written.vcpus.unwrap_or(0)),
    };
    let mut checked = Problems::default();
    parsed_buffer(&mut checked, field, &buffer);
    if checked.0.is_empty() {
        buffer
    } else {
        problems.0.extend(checked.0);
        Buffer::default()
    }
}

/// The bounds of a parsed buffer (at `<field>.buffer`).
pub(super) fn parsed_buffer(problems: &mut Problems, field: &str, buffer: &Buffer) {
    if buffer.addresses > u64::from(MAX_HEADROOM_BUFFER_ADDRESSES) {
        problems.push(
            format!("{field}.buffer.addresses"),
            buffer.addresses.to_string(),
            format!("is more than {MAX_HEADROOM_BUFFER_ADDRESSES} (a /16's usable addresses)"),
            "keep at most the addresses the subnet has",
        );
    }
    if buffer.vcpus > u64::from(MAX_HEADROOM_BUFFER_VCPUS) {
        problems.push(
            format!("{field}.buffer.vcpus"),
            buffer.vcpus.to_string(),
            format!("is more than {MAX_HEADROOM_BUFFER_VCPUS}"),
            "keep at most the vCPUs the quota has",
        );
    }
}
