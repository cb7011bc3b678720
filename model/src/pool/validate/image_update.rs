//! Rules for `spec.imageUpdate` (what a newer version of the image does): [`image_update`]
//! returns the [`ImageUpdate`] workflows take, the defaults for every key left out.

use std::time::Duration;

use super::{Problems, quoted};
use crate::image::{ImageUpdate, ImageUpdatePolicy};
use crate::limits::{MAX_IMAGE_CHECK_INTERVAL, MIN_IMAGE_CHECK_INTERVAL};
use crate::pool::spec::{ImageUpdateSpec, MachineTemplate};

/// Checks `spec.imageUpdate` (at `field`) against the template's image and returns it checked;
/// an interval out of bounds is a problem (and the default is kept).
pub(super) fn image_update(
    problems: &mut Problems,
    field: &str,
    spec: Option<&ImageUpdateSpec>,
    template: &MachineTemplate,
) -> ImageUpdate {
    let Some(spec) = spec else {
        return ImageUpdate::default();
    };
    let mut checked = ImageUpdate::default();
    if let Some(policy) = spec.policy {
        checked.policy = policy;
    }
    if let Some(written) = spec.check_interval.as_deref() {
        let interval_field = format!("{field}.checkInterval");
        match humantime::parse_duration(written) {
            Err(error) => problems.push(
                interval_field,
                quoted(written),
                format!("is not a duration ({error})"),
                "write a duration such as \"1h\" or \"30m\"",
            ),
            Ok(interval) => {
                if let Some(problem) = bound_problem(interval) {
                    problems.push(interval_field, quoted(written), problem, BOUNDS_FIX);
                } else {
                    checked.check_interval = interval;
                }
            }
        }
    }
    let resolvable = template
        .image
        .to_ref()
        .is_some_and(|image| image.needs_resolution());
    if checked.policy == ImageUpdatePolicy::Auto && !resolvable {
        problems.push(
            format!("{field}.policy"),
            "auto",
            "needs an image written without a concrete version: this one names its version (or is a managed image, which has none)",
            "write spec.template.image.version: latest (marketplace) or the gallery image's id without /versions/..., or leave imageUpdate out",
        );
    }
    checked
}

const BOUNDS_FIX: &str = "give a checkInterval from 10s to 7d (default 1h)";

/// The bounds of a parsed interval (at `<field>.checkInterval`), for inputs received parsed.
pub(super) fn parsed(problems: &mut Problems, field: &str, update: &ImageUpdate) {
    if let Some(problem) = bound_problem(update.check_interval) {
        problems.push(
            format!("{field}.checkInterval"),
            format!("{}s", update.check_interval.as_secs()),
            problem,
            BOUNDS_FIX,
        );
    }
}

fn bound_problem(interval: Duration) -> Option<&'static str> {
    if interval < MIN_IMAGE_CHECK_INTERVAL {
        Some("is shorter than 10s")
    } else if interval > MAX_IMAGE_CHECK_INTERVAL {
        Some("is longer than 7d")
    } else {
        None
    }
}
