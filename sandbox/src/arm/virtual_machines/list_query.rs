//! The query parameters ARM documents for VM lists (`VirtualMachines_List`,
//! `VirtualMachines_ListAll`) besides `statusOnly`: `$filter`, whose one allowed value is
//! `virtualMachineScaleSet/id eq '<scale set id>'` (the key may be quoted, as the spec writes
//! it), and `$expand=instanceView`, allowed only with that filter: without it ARM answers 400
//! `BadRequest`, "Expand Instance View is only supported when Virtual Machine Scale Set resource
//! filter is applied". Any other `$filter` or `$expand` is refused with 400 `InvalidParameter`
//! naming the parameter (the wording of ARM's answer for a scale set VM list's filter).

use super::super::error::ArmError;
use super::super::state::{Resource, key};

/// The filter's one key.
const SCALE_SET_KEY: &str = "virtualMachineScaleSet/id";

/// What a VM list's `$filter` and `$expand` ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Only the VMs of this scale set (`properties.virtualMachineScaleSet.id`).
    pub scale_set: Option<String>,
    /// Each VM's instance view inline (`$expand=instanceView`).
    pub instance_view: bool,
}

impl ListQuery {
    /// Reads `$filter` and `$expand`, refusing what ARM refuses.
    pub fn parse(filter: Option<&str>, expand: Option<&str>) -> Result<Self, ArmError> {
        let scale_set = match filter {
            None => None,
            Some(filter) => Some(scale_set_of(filter).ok_or_else(|| {
                ArmError::invalid(
                    "$filter",
                    format!(
                        "The value '{filter}' of parameter '$filter' is not allowed. Allowed values are '{SCALE_SET_KEY} eq /subscriptions/{{subId}}/resourceGroups/{{resourceGroupName}}/providers/Microsoft.Compute/virtualMachineScaleSets/{{vmssName}}'."
                    ),
                )
            })?),
        };
        let instance_view = match expand {
            None => false,
            Some(e) if e.trim().eq_ignore_ascii_case("instanceView") => true,
            Some(e) => {
                return Err(ArmError::invalid(
                    "$expand",
                    format!(
                        "The value '{e}' of parameter '$expand' is not allowed. Allowed values are 'instanceView'."
                    ),
                ));
            }
        };
        if instance_view && scale_set.is_none() {
            return Err(ArmError::rejected(
                400,
                "BadRequest",
                "Expand Instance View is only supported when Virtual Machine Scale Set resource filter is applied",
            ));
        }
        Ok(Self {
            scale_set,
            instance_view,
        })
    }

    /// Whether the list holds `vm`.
    pub fn keeps(&self, vm: &Resource) -> bool {
        match &self.scale_set {
            None => true,
            Some(id) => vm.body["properties"]["virtualMachineScaleSet"]["id"]
                .as_str()
                .is_some_and(|own| key(own) == key(id)),
        }
    }
}

/// The scale set id of `virtualMachineScaleSet/id eq '<id>'` (key quoted or not, `eq` in any
/// case, the id quoted or not).
fn scale_set_of(filter: &str) -> Option<String> {
    let rest = filter.trim();
    let rest = rest
        .strip_prefix('\'')
        .and_then(|r| r.strip_prefix(SCALE_SET_KEY))
        .and_then(|r| r.strip_prefix('\''))
        .or_else(|| rest.strip_prefix(SCALE_SET_KEY))?;
    let (op, value) = rest.trim_start().split_once(char::is_whitespace)?;
    if !op.eq_ignore_ascii_case("eq") {
        return None;
    }
    let value = value.trim();
    let value = value
        .strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .unwrap_or(value);
    (value.starts_with('/') && !value.contains(['\'', ' '])).then(|| value.to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::arm::state::Kind;

    const SET: &str = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool";

    #[test]
    fn the_scale_set_filter_is_read_with_or_without_quotes() {
        for filter in [
            format!("virtualMachineScaleSet/id eq '{SET}'"),
            format!("'virtualMachineScaleSet/id' eq '{SET}'"),
            format!("virtualMachineScaleSet/id EQ {SET}"),
        ] {
            assert_eq!(scale_set_of(&filter).as_deref(), Some(SET), "{filter}");
        }
        for filter in [
            "resourceGroup eq 'rg'",
            "virtualMachineScaleSet/id ne '/x'",
            "name eq 'a'",
        ] {
            assert_eq!(scale_set_of(filter), None, "{filter}");
        }
    }

    #[test]
    fn arm_refuses_other_filters_and_an_instance_view_expand_without_the_filter() {
        let code = |r: Result<ListQuery, ArmError>| r.map_err(|e| e.code().to_owned());
        assert_eq!(
            code(ListQuery::parse(Some("name eq 'a'"), None)),
            Err("InvalidParameter".into())
        );
        assert_eq!(
            code(ListQuery::parse(None, Some("instanceView"))),
            Err("BadRequest".into())
        );
        assert_eq!(
            code(ListQuery::parse(None, Some("userData"))),
            Err("InvalidParameter".into())
        );
        let filter = format!("virtualMachineScaleSet/id eq '{SET}'");
        let query = ListQuery::parse(Some(&filter), Some("instanceview"));
        assert_eq!(
            query,
            Ok(ListQuery {
                scale_set: Some(SET.to_owned()),
                instance_view: true
            })
        );
        assert_eq!(ListQuery::parse(None, None), Ok(ListQuery::default()));
    }

    #[test]
    fn the_filter_keeps_the_scale_sets_vms_only() {
        let query = ListQuery {
            scale_set: Some(SET.to_ascii_uppercase()),
            instance_view: false,
        };
        let member = Resource::new(
            Kind::Vm,
            json!({"properties": {"virtualMachineScaleSet": {"id": SET}}}),
        );
        let alone = Resource::new(Kind::Vm, json!({"properties": {}}));
        assert!(query.keeps(&member));
        assert!(!query.keeps(&alone));
        assert!(ListQuery::default().keeps(&alone));
    }
}
