//! The shapes of the ARM resource ids a pool file names: subnets and OS images.
//!
//! Only the shape is checked (fixed segments case-insensitively, as ARM compares them, and
//! non-empty names); whether the resource exists is the preflight's and Azure's business.

/// One segment of an ARM id pattern.
#[derive(Debug, Clone, Copy)]
pub(super) enum Segment {
    /// This exact word, in any case.
    Fixed(&'static str),
    /// A subscription id: a GUID (`8-4-4-4-12` hexadecimal digits).
    Subscription,
    /// Any non-empty name without whitespace.
    Name,
}

use Segment::{Fixed, Name, Subscription};

/// `/subscriptions/<guid>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>`.
pub(super) const SUBNET: &[Segment] = &[
    Fixed("subscriptions"),
    Subscription,
    Fixed("resourceGroups"),
    Name,
    Fixed("providers"),
    Fixed("Microsoft.Network"),
    Fixed("virtualNetworks"),
    Name,
    Fixed("subnets"),
    Name,
];

/// `/subscriptions/<guid>/resourceGroups/<rg>/providers/Microsoft.Compute/galleries/<g>/images/<i>/versions/<v>`.
pub(super) const GALLERY_IMAGE_VERSION: &[Segment] = &[
    Fixed("subscriptions"),
    Subscription,
    Fixed("resourceGroups"),
    Name,
    Fixed("providers"),
    Fixed("Microsoft.Compute"),
    Fixed("galleries"),
    Name,
    Fixed("images"),
    Name,
    Fixed("versions"),
    Name,
];

/// `/subscriptions/<guid>/resourceGroups/<rg>/providers/Microsoft.Compute/galleries/<g>/images/<i>`:
/// an image definition, whose newest version nodewright resolves.
pub(super) const GALLERY_IMAGE: &[Segment] = &[
    Fixed("subscriptions"),
    Subscription,
    Fixed("resourceGroups"),
    Name,
    Fixed("providers"),
    Fixed("Microsoft.Compute"),
    Fixed("galleries"),
    Name,
    Fixed("images"),
    Name,
];

/// `/CommunityGalleries/<public gallery name>/Images/<i>`: an image definition.
pub(super) const COMMUNITY_GALLERY_DEFINITION: &[Segment] =
    &[Fixed("CommunityGalleries"), Name, Fixed("Images"), Name];

/// `/SharedGalleries/<gallery unique name>/Images/<i>`: an image definition.
pub(super) const SHARED_GALLERY_DEFINITION: &[Segment] =
    &[Fixed("SharedGalleries"), Name, Fixed("Images"), Name];

/// `/subscriptions/<guid>/resourceGroups/<rg>/providers/Microsoft.Compute/images/<name>`.
pub(super) const MANAGED_IMAGE: &[Segment] = &[
    Fixed("subscriptions"),
    Subscription,
    Fixed("resourceGroups"),
    Name,
    Fixed("providers"),
    Fixed("Microsoft.Compute"),
    Fixed("images"),
    Name,
];

/// `/CommunityGalleries/<public gallery name>/Images/<i>/Versions/<v>`.
pub(super) const COMMUNITY_GALLERY_IMAGE: &[Segment] = &[
    Fixed("CommunityGalleries"),
    Name,
    Fixed("Images"),
    Name,
    Fixed("Versions"),
    Name,
];

/// `/SharedGalleries/<gallery unique name>/Images/<i>/Versions/<v>`.
pub(super) const SHARED_GALLERY_IMAGE: &[Segment] = &[
    Fixed("SharedGalleries"),
    Name,
    Fixed("Images"),
    Name,
    Fixed("Versions"),
    Name,
];

/// Whether `id` has the shape `pattern` describes.
pub(super) fn matches(id: &str, pattern: &[Segment]) -> bool {
    let Some(rest) = id.strip_prefix('/') else {
        return false;
    };
    let segments: Vec<&str> = rest.split('/').collect();
    segments.len() == pattern.len()
        && segments
            .iter()
            .zip(pattern)
            .all(|(segment, expected)| match expected {
                Fixed(word) => segment.eq_ignore_ascii_case(word),
                Subscription => is_guid(segment),
                Name => !segment.is_empty() && !segment.contains(char::is_whitespace),
            })
}

/// Whether `value` is a GUID: `8-4-4-4-12` hexadecimal digits.
fn is_guid(value: &str) -> bool {
    let groups: Vec<&str> = value.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(group, len)| group.len() == len && group.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUB: &str = "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/rg";

    #[test]
    fn matches_ids_by_shape_with_fixed_segments_in_any_case() {
        let table: &[(&str, &[Segment], bool)] = &[
            (
                &format!("{SUB}/providers/Microsoft.Network/virtualNetworks/v/subnets/s"),
                SUBNET,
                true,
            ),
            (
                "/SUBSCRIPTIONS/0B1F6471-1BF0-4DDA-AEC3-111122223333/resourcegroups/rg/providers/microsoft.network/virtualnetworks/v/subnets/s",
                SUBNET,
                true,
            ),
            (
                "/subscriptions/not-a-guid/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s",
                SUBNET,
                false,
            ),
            (
                &format!("{SUB}/providers/Microsoft.Network/virtualNetworks/v/subnets/s/"),
                SUBNET,
                false,
            ),
            (
                &format!("{SUB}/providers/Microsoft.Network/virtualNetworks/v"),
                SUBNET,
                false,
            ),
            (
                &format!(
                    "{}/providers/Microsoft.Network/virtualNetworks/v/subnets/s",
                    &SUB[1..]
                ),
                SUBNET,
                false,
            ),
            (
                &format!("{SUB}/providers/Microsoft.Network/virtualNetworks/v/subnets/my subnet"),
                SUBNET,
                false,
            ),
            (
                &format!("{SUB}/providers/Microsoft.Compute/galleries/g/images/i/versions/1.0.0"),
                GALLERY_IMAGE_VERSION,
                true,
            ),
            (
                &format!("{SUB}/providers/Microsoft.Compute/galleries/g/images/i"),
                GALLERY_IMAGE_VERSION,
                false,
            ),
            (
                &format!("{SUB}/providers/Microsoft.Compute/images/ubuntu"),
                MANAGED_IMAGE,
                true,
            ),
            (
                "/CommunityGalleries/flatcar-1f2a/Images/flatcar/Versions/latest",
                COMMUNITY_GALLERY_IMAGE,
                true,
            ),
            (
                "/SharedGalleries/abc-def/Images/i/Versions/1.0.0",
                SHARED_GALLERY_IMAGE,
                true,
            ),
            ("", SUBNET, false),
        ];
        for (id, pattern, expected) in table {
            assert_eq!(matches(id, pattern), *expected, "{id}");
        }
    }
}
