//! Rules on virtual networks and their subnets, as Azure's network provider applies them: the
//! shape of the subnets a network holds inline, the validation of address spaces and subnet
//! prefixes, which IP configurations a subnet holds, and its usage. The addresses NICs take are
//! given out by `nic_addresses.rs`.
//!
//! A subnet is stored inside its network's body (`properties.subnets[]`, as Azure returns the
//! network) and its addresses in the network's [`Allocations`](super::state::networks::Allocations).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::cidr::{Cidr, CidrError, parse_ip};
use super::error::ArmError;
use super::state::{Kind, Resource, State, key, name_of, obj_at};

/// The ARM type of a subnet.
pub const SUBNET_TYPE: &str = "Microsoft.Network/virtualNetworks/subnets";

/// The name Azure gives a subnet's usage.
const USAGE_NAME: &str = "Subnet size and usage";

/// The subnets of a network body.
pub fn subnets(body: &Value) -> &[Value] {
    body["properties"]["subnets"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The subnet `name` (any casing) of a network body.
pub fn find_subnet<'a>(body: &'a Value, name: &str) -> Option<&'a Value> {
    subnets(body).iter().find(|s| {
        s["name"]
            .as_str()
            .is_some_and(|n| n.eq_ignore_ascii_case(name))
    })
}

/// The id of subnet `name` of network `vnet_id`.
pub fn subnet_id(vnet_id: &str, name: &str) -> String {
    format!("{vnet_id}/subnets/{name}")
}

/// The network id and subnet name of a subnet id, when it names one.
pub fn split_subnet_id(id: &str) -> Option<(&str, &str)> {
    let lower = id.to_ascii_lowercase();
    let at = lower.rfind("/subnets/")?;
    let vnet = &id[..at];
    let name = &id[at + "/subnets/".len()..];
    let is_vnet = vnet
        .to_ascii_lowercase()
        .contains("/providers/microsoft.network/virtualnetworks/");
    (is_vnet && !name.is_empty() && !name.contains('/')).then_some((vnet, name))
}

/// A subnet's prefixes as written: `addressPrefix`, else `addressPrefixes`.
fn prefix_texts(subnet: &Value) -> Vec<String> {
    let p = &subnet["properties"];
    match p["addressPrefix"].as_str() {
        Some(one) => vec![one.to_owned()],
        None => p["addressPrefixes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
    }
}

/// A subnet's prefixes (those that parse: a stored subnet was validated).
pub fn prefixes(subnet: &Value) -> Vec<Cidr> {
    prefix_texts(subnet)
        .iter()
        .filter_map(|t| Cidr::parse(t).ok())
        .collect()
}

/// Parses the prefix `text` of resource `id`, refused in Azure's words.
fn parse_prefix(text: &str, id: &str) -> Result<Cidr, ArmError> {
    Cidr::parse(text).map_err(|e| match e {
        CidrError::Format => ArmError::rejected(
            400,
            "InvalidAddressPrefixFormat",
            format!(
                "Address prefix {text} of resource {id} is not formatted correctly. It should follow CIDR notation, for example 10.0.0.0/24."
            ),
        ),
        CidrError::HostBits(fixed) => ArmError::rejected(
            400,
            "InvalidCIDRNotation",
            format!(
                "The address prefix {text} in resource {id} has an invalid CIDR notation. For the given prefix length, the address prefix should be {fixed}."
            ),
        ),
    })
}

/// A subnet as stored, from a request's subnet body: `id`, `name` and `type` written, the
/// read-only fields dropped (`ipConfigurations` is computed when read).
pub fn stamp_subnet(mut subnet: Value, vnet_id: &str, name: &str) -> Value {
    if !subnet.is_object() {
        subnet = json!({});
    }
    subnet["id"] = Value::from(subnet_id(vnet_id, name));
    subnet["name"] = Value::from(name);
    subnet["type"] = Value::from(SUBNET_TYPE);
    if let Some(o) = subnet.as_object_mut() {
        o.remove("etag");
    }
    let p = obj_at(&mut subnet, "properties");
    for field in [
        "provisioningState",
        "ipConfigurations",
        "ipConfigurationProfiles",
    ] {
        p.remove(field);
    }
    p.entry("privateEndpointNetworkPolicies")
        .or_insert_with(|| json!("Disabled"));
    p.entry("privateLinkServiceNetworkPolicies")
        .or_insert_with(|| json!("Enabled"));
    subnet
}

/// Stamps every subnet of a network body (see [`stamp_subnet`]); a subnet without a name, or
/// two with the same name, is refused.
pub fn stamp_subnets(body: &mut Value, vnet_id: &str) -> Result<(), ArmError> {
    let listed = body["properties"]["subnets"].take();
    let mut stamped = Vec::new();
    let mut names = BTreeSet::new();
    for (i, subnet) in listed.as_array().into_iter().flatten().enumerate() {
        let name = subnet["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| {
                ArmError::invalid(
                    &format!("properties.subnets[{i}].name"),
                    "The subnet name is required.",
                )
            })?;
        if !names.insert(name.to_ascii_lowercase()) {
            return Err(ArmError::rejected(
                400,
                "DuplicateResourceName",
                format!("Resource {vnet_id} has two child resources with the same name ({name})."),
            ));
        }
        stamped.push(stamp_subnet(subnet.clone(), vnet_id, &name));
    }
    obj_at(body, "properties").insert("subnets".into(), Value::Array(stamped));
    Ok(())
}

/// Azure's checks of a network body: every address-space prefix and subnet prefix in CIDR
/// notation, every subnet with a prefix, inside the address space, and overlapping no other.
pub fn validate(body: &Value) -> Result<(), ArmError> {
    let vnet_id = body["id"].as_str().unwrap_or_default();
    let vnet_name = name_of(vnet_id);
    let space = body["properties"]["addressSpace"]["addressPrefixes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|t| parse_prefix(t, vnet_id))
        .collect::<Result<Vec<Cidr>, _>>()?;
    let mut seen: Vec<Cidr> = Vec::new();
    for subnet in subnets(body) {
        let id = subnet["id"].as_str().unwrap_or_default();
        let name = subnet["name"].as_str().unwrap_or_default();
        let texts = prefix_texts(subnet);
        if texts.is_empty() {
            return Err(ArmError::rejected(
                400,
                "NoAddressPrefixOrPoolProvided",
                format!("No address prefix or IPAM pool is provided for subnet {id}."),
            ));
        }
        for text in texts {
            let prefix = parse_prefix(&text, id)?;
            if !space.iter().any(|s| s.covers(prefix)) {
                return Err(ArmError::rejected(
                    400,
                    "NetcfgSubnetRangeOutsideVnet",
                    format!(
                        "Subnet '{name}' is not valid because its IP address range is outside the IP address range of virtual network '{vnet_name}'."
                    ),
                ));
            }
            if seen.iter().any(|s| s.overlaps(prefix)) {
                return Err(ArmError::rejected(
                    400,
                    "NetcfgSubnetRangesOverlap",
                    format!(
                        "Subnet '{name}' is not valid because its IP address range overlaps with that of an existing subnet in virtual network '{vnet_name}'."
                    ),
                ));
            }
            seen.push(prefix);
        }
    }
    Ok(())
}

/// The NIC id of an IP configuration id (`{nic}/ipConfigurations/{name}`) and the name.
pub fn split_holder(holder: &str) -> Option<(&str, &str)> {
    let at = holder.to_ascii_lowercase().rfind("/ipconfigurations/")?;
    Some((&holder[..at], &holder[at + "/ipConfigurations/".len()..]))
}

/// Whether the IP configuration `holder` still holds `ip` in the subnet whose key is
/// `subnet_key`: its NIC exists and names that subnet and address.
fn holds(state: &State, subnet_key: &str, ip: u32, holder: &str) -> bool {
    let Some((nic_id, config)) = split_holder(holder) else {
        return false;
    };
    let Some(nic) = state.get(nic_id).filter(|r| r.kind == Kind::Nic) else {
        return false;
    };
    nic.body["properties"]["ipConfigurations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c["name"]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case(config))
                && c["properties"]["subnet"]["id"]
                    .as_str()
                    .is_some_and(|s| key(s) == subnet_key)
                && c["properties"]["privateIPAddress"]
                    .as_str()
                    .and_then(parse_ip)
                    == Some(ip)
        })
}

/// The addresses of subnet `name` of `vnet` in use, with the IP configurations holding them,
/// in address order.
pub fn in_use(state: &State, vnet: &Resource, name: &str) -> Vec<(u32, String)> {
    let subnet_key = key(&subnet_id(vnet.id(), name));
    vnet.addresses
        .of(name)
        .into_iter()
        .filter(|(ip, holder)| holds(state, &subnet_key, *ip, holder))
        .map(|(ip, holder)| (ip, holder.to_owned()))
        .collect()
}

/// Azure's refusal to delete subnet `name` of `vnet` (alone, or with its network) while an
/// IP configuration is in it.
pub fn refuse_if_in_use(state: &State, vnet: &Resource, name: &str) -> Result<(), ArmError> {
    match in_use(state, vnet, name).first() {
        None => Ok(()),
        Some((_, holder)) => Err(ArmError::rejected(
            400,
            "InUseSubnetCannotBeDeleted",
            format!(
                "Subnet {name} is in use by {holder} and cannot be deleted. In order to delete the subnet, delete all the resources within the subnet. See aka.ms/deletesubnet."
            ),
        )),
    }
}

/// A subnet as GET returns it: its IP configurations listed, its provisioning state its
/// network's.
pub fn render_subnet(state: &State, vnet: &Resource, subnet: &Value) -> Value {
    let mut out = subnet.clone();
    let name = subnet["name"].as_str().unwrap_or_default();
    let configs: Vec<Value> = in_use(state, vnet, name)
        .into_iter()
        .map(|(_, holder)| json!({ "id": holder }))
        .collect();
    out["etag"] = vnet.body["etag"].clone();
    let p = obj_at(&mut out, "properties");
    p.insert(
        "provisioningState".into(),
        Value::from(vnet.provisioning_state()),
    );
    if !configs.is_empty() {
        p.insert("ipConfigurations".into(), Value::Array(configs));
    }
    out
}

/// A network as GET returns it: each subnet rendered ([`render_subnet`]).
pub fn render(state: &State, vnet: &Resource) -> Value {
    let mut out = vnet.body.clone();
    let rendered: Vec<Value> = subnets(&vnet.body)
        .iter()
        .map(|s| render_subnet(state, vnet, s))
        .collect();
    obj_at(&mut out, "properties").insert("subnets".into(), Value::Array(rendered));
    out
}

/// `GET …/virtualNetworks/{vnet}/usages`: per subnet, the IP configurations in it and the
/// addresses it can give out (its size less Azure's five reserved).
pub fn usages(state: &State, vnet: &Resource) -> Vec<Value> {
    subnets(&vnet.body)
        .iter()
        .map(|subnet| {
            let name = subnet["name"].as_str().unwrap_or_default();
            let limit: u64 = prefixes(subnet).iter().map(|p| p.usable()).sum();
            json!({
                "currentValue": in_use(state, vnet, name).len(),
                "limit": limit,
                "id": subnet["id"],
                "name": { "value": USAGE_NAME, "localizedValue": USAGE_NAME },
                "unit": "Count",
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const VNET: &str =
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v";

    fn vnet(space: &[&str], subnets: Value) -> Value {
        let mut body = json!({
            "id": VNET,
            "properties": { "addressSpace": { "addressPrefixes": space }, "subnets": subnets },
        });
        stamp_subnets(&mut body, VNET).unwrap();
        body
    }

    fn code(result: Result<(), ArmError>) -> String {
        result
            .err()
            .map(|e| e.code().to_owned())
            .unwrap_or_default()
    }

    #[test]
    fn subnet_ids_split_into_network_and_name() {
        let id = format!("{VNET}/subnets/nodes");
        assert_eq!(split_subnet_id(&id), Some((VNET, "nodes")));
        assert_eq!(split_subnet_id("/subscriptions/x/subnets/s"), None);
        assert_eq!(split_subnet_id(&format!("{VNET}/subnets/")), None);
    }

    #[test]
    fn subnets_must_lie_in_the_space_apart_and_in_cidr_notation() {
        let ok = vnet(
            &["10.0.0.0/16"],
            json!([{"name": "a", "properties": {"addressPrefix": "10.0.0.0/24"}},
                   {"name": "b", "properties": {"addressPrefixes": ["10.0.1.0/24"]}}]),
        );
        assert!(validate(&ok).is_ok());
        let outside = vnet(
            &["10.0.0.0/16"],
            json!([{"name": "a", "properties": {"addressPrefix": "10.1.0.0/24"}}]),
        );
        assert_eq!(code(validate(&outside)), "NetcfgSubnetRangeOutsideVnet");
        let overlap = vnet(
            &["10.0.0.0/16"],
            json!([{"name": "a", "properties": {"addressPrefix": "10.0.0.0/24"}},
                   {"name": "b", "properties": {"addressPrefix": "10.0.0.128/25"}}]),
        );
        assert_eq!(code(validate(&overlap)), "NetcfgSubnetRangesOverlap");
        let host_bits = vnet(
            &["10.0.0.0/16"],
            json!([{"name": "a", "properties": {"addressPrefix": "10.0.0.1/24"}}]),
        );
        let err = validate(&host_bits).unwrap_err();
        assert_eq!(err.code(), "InvalidCIDRNotation");
        assert!(err.to_string().contains("should be 10.0.0.0/24"), "{err}");
        let garbage = vnet(&["ten/8"], json!([]));
        assert_eq!(code(validate(&garbage)), "InvalidAddressPrefixFormat");
        let none = vnet(&["10.0.0.0/16"], json!([{"name": "a", "properties": {}}]));
        assert_eq!(code(validate(&none)), "NoAddressPrefixOrPoolProvided");
    }

    #[test]
    fn duplicate_or_unnamed_subnets_are_refused() {
        let mut twice = json!({"properties": {"subnets": [{"name": "a"}, {"name": "A"}]}});
        assert_eq!(
            code(stamp_subnets(&mut twice, VNET)),
            "DuplicateResourceName"
        );
        let mut unnamed = json!({"properties": {"subnets": [{"properties": {}}]}});
        assert_eq!(code(stamp_subnets(&mut unnamed, VNET)), "InvalidParameter");
    }
}
