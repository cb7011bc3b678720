//! Rules on virtual networks and their subnets, as Azure's network provider applies them: the
//! shape of the subnets a network holds inline, the validation of address spaces and subnet
//! prefixes, the private IP addresses a NIC's IP configurations get from a subnet (dynamic: the
//! next free one after the four Azure reserves; static: in range and free), which IP
//! configurations a subnet holds, and its usage.
//!
//! A subnet is stored inside its network's body (`properties.subnets[]`, as Azure returns the
//! network) and its addresses in the network's [`Allocations`](super::state::networks::Allocations).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::cidr::{Cidr, CidrError, parse_ip, show};
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
fn split_holder(holder: &str) -> Option<(&str, &str)> {
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

/// One address a NIC PUT takes.
struct Take {
    index: usize,
    vnet: String,
    subnet: String,
    ip: u32,
    holder: String,
}

/// Gives the IP configurations of the NIC `nic_id` (its new `body`; `old` its stored body when
/// it exists) their private addresses in the subnets the emulator holds, as Azure does:
/// `Dynamic` (the default) keeps the address it had in that subnet or takes the next free one
/// (400 `SubnetIsFull` when none is left); `Static` takes `privateIPAddress`, which must be
/// in the subnet (`PrivateIPAddressNotInSubnet`), not one of the five Azure reserves
/// (`PrivateIPAddressInReservedRange`), and free (`PrivateIPAddressIsAllocated`). A subnet of a network the emulator does not hold is
/// accepted as it is (the sandbox's leniency: no address); a missing subnet of a network it
/// holds is 400 `InvalidResourceReference`. Every IP configuration gets its `id`.
pub fn assign(
    state: &mut State,
    nic_id: &str,
    old: Option<&Value>,
    body: &mut Value,
) -> Result<(), ArmError> {
    let owned = format!("{}/ipconfigurations/", key(nic_id));
    let configs: Vec<Value> = body["properties"]["ipConfigurations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut takes: Vec<Take> = Vec::new();
    for (index, config) in configs.iter().enumerate() {
        let name = config["name"].as_str().unwrap_or_default();
        let holder = format!("{nic_id}/ipConfigurations/{name}");
        let Some(subnet_ref) = config["properties"]["subnet"]["id"].as_str() else {
            continue;
        };
        let Some((vnet_id, subnet_name)) = split_subnet_id(subnet_ref) else {
            continue;
        };
        let Some(vnet) = state
            .get(vnet_id)
            .filter(|r| r.kind == Kind::VirtualNetwork)
        else {
            continue;
        };
        let Some(subnet) = find_subnet(&vnet.body, subnet_name) else {
            return Err(ArmError::rejected(
                400,
                "InvalidResourceReference",
                format!(
                    "Resource {subnet_ref} referenced by resource {nic_id} was not found. Please make sure that the referenced resource exists, and that both resources are in the same region."
                ),
            ));
        };
        let vnet_key = key(vnet_id);
        let subnet_name = subnet_name.to_ascii_lowercase();
        let ranges = prefixes(subnet);
        let mut taken: std::collections::BTreeMap<u32, String> = in_use(state, vnet, &subnet_name)
            .into_iter()
            .filter(|(_, h)| !key(h).starts_with(&owned))
            .collect();
        for t in takes
            .iter()
            .filter(|t| t.vnet == vnet_key && t.subnet == subnet_name)
        {
            taken.insert(t.ip, t.holder.clone());
        }
        let p = &config["properties"];
        let is_static = p["privateIPAllocationMethod"]
            .as_str()
            .is_some_and(|m| m.eq_ignore_ascii_case("static"));
        let ip = if is_static {
            let target =
                format!("properties.ipConfigurations[{index}].properties.privateIPAddress");
            let text = p["privateIPAddress"].as_str().unwrap_or_default();
            let ip = parse_ip(text).ok_or_else(|| {
                ArmError::invalid(
                    &target,
                    format!("IP configuration {holder} has a static allocation method but no valid private IP address ('{text}')."),
                )
            })?;
            if let Some(range) = ranges
                .iter()
                .find(|r| r.contains(ip) && !r.is_assignable(ip))
            {
                return Err(ArmError::rejected(
                    400,
                    "PrivateIPAddressInReservedRange",
                    format!(
                        "Private static IP address {text} falls within reserved IP range of subnet prefix {range}."
                    ),
                ));
            }
            if !ranges.iter().any(|r| r.is_assignable(ip)) {
                return Err(ArmError::rejected(
                    400,
                    "PrivateIPAddressNotInSubnet",
                    format!(
                        "IP configuration {holder} is using the private IP address {text} which is not in the range of subnet {subnet_ref}."
                    ),
                ));
            }
            if let Some(other) = taken.get(&ip) {
                let other_nic = split_holder(other).map_or(other.as_str(), |(n, _)| n);
                return Err(ArmError::rejected(
                    400,
                    "PrivateIPAddressIsAllocated",
                    format!(
                        "IP configuration {holder} is using the private IP address {text} which is already allocated to resource {other_nic}."
                    ),
                ));
            }
            ip
        } else {
            let kept = old
                .and_then(|o| o["properties"]["ipConfigurations"].as_array())
                .into_iter()
                .flatten()
                .filter(|c| {
                    c["name"]
                        .as_str()
                        .is_some_and(|n| n.eq_ignore_ascii_case(name))
                })
                .filter(|c| {
                    c["properties"]["subnet"]["id"]
                        .as_str()
                        .is_some_and(|s| key(s) == key(subnet_ref))
                })
                .find_map(|c| {
                    c["properties"]["privateIPAddress"]
                        .as_str()
                        .and_then(parse_ip)
                })
                .filter(|ip| {
                    !taken.contains_key(ip) && ranges.iter().any(|r| r.is_assignable(*ip))
                });
            let next = || {
                ranges
                    .iter()
                    .flat_map(|r| r.assignable())
                    .find(|ip| !taken.contains_key(ip))
            };
            kept.or_else(next).ok_or_else(|| {
                let shown: Vec<String> = ranges.iter().map(Cidr::to_string).collect();
                ArmError::rejected(
                    400,
                    "SubnetIsFull",
                    format!(
                        "Subnet {subnet_ref} with address prefix {} does not have enough capacity for 1 IP addresses.",
                        shown.join(",")
                    ),
                )
            })?
        };
        takes.push(Take {
            index,
            vnet: vnet_key,
            subnet: subnet_name,
            ip,
            holder,
        });
    }
    // Checked: now write. This NIC's old entries go (from every network it named), stale
    // entries of the subnets it takes from go, its new ones come.
    let old_vnets = old
        .and_then(|o| o["properties"]["ipConfigurations"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|c| c["properties"]["subnet"]["id"].as_str())
        .filter_map(split_subnet_id)
        .map(|(v, _)| key(v));
    let touched: BTreeSet<String> = old_vnets
        .chain(takes.iter().map(|t| t.vnet.clone()))
        .collect();
    for vnet_key in &touched {
        if let Some(vnet) = state.resources.get_mut(vnet_key) {
            for entries in vnet.addresses.0.values_mut() {
                entries.retain(|_, h| !key(h).starts_with(&owned));
            }
        }
    }
    for t in &takes {
        let live: Vec<u32> = state
            .resources
            .get(&t.vnet)
            .map(|v| {
                in_use(state, v, &t.subnet)
                    .into_iter()
                    .map(|(ip, _)| ip)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(vnet) = state.resources.get_mut(&t.vnet) {
            let entries = vnet.addresses.of_mut(&t.subnet);
            entries.retain(|ip, _| live.contains(ip));
            entries.insert(t.ip, t.holder.clone());
        }
    }
    if let Some(list) = body["properties"]["ipConfigurations"].as_array_mut() {
        for (index, config) in list.iter_mut().enumerate() {
            let name = config["name"].as_str().unwrap_or_default().to_owned();
            config["id"] = Value::from(format!("{nic_id}/ipConfigurations/{name}"));
            config["type"] = Value::from("Microsoft.Network/networkInterfaces/ipConfigurations");
            let Some(t) = takes.iter().find(|t| t.index == index) else {
                continue;
            };
            let p = obj_at(config, "properties");
            p.insert("privateIPAddress".into(), Value::from(show(t.ip)));
            p.insert("privateIPAddressVersion".into(), Value::from("IPv4"));
            p.entry("privateIPAllocationMethod")
                .or_insert_with(|| json!("Dynamic"));
        }
    }
    Ok(())
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

    fn state_with_vnet(prefix: &str) -> State {
        let mut state = State::default();
        let mut body = vnet(
            &["10.0.0.0/16"],
            json!([{"name": "s", "properties": {"addressPrefix": prefix}}]),
        );
        body["id"] = json!(VNET);
        state
            .resources
            .insert(key(VNET), Resource::new(Kind::VirtualNetwork, body));
        state
    }

    fn put_nic(state: &mut State, name: &str, ip: Option<&str>) -> Result<String, ArmError> {
        let id = format!(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/{name}"
        );
        let mut props = json!({"subnet": {"id": format!("{VNET}/subnets/s")}});
        if let Some(ip) = ip {
            props["privateIPAllocationMethod"] = json!("Static");
            props["privateIPAddress"] = json!(ip);
        }
        let mut body = json!({"id": id, "properties": {"ipConfigurations": [{"name": "ip1", "properties": props}]}});
        let old = state.get(&id).map(|r| r.body.clone());
        assign(state, &id, old.as_ref(), &mut body)?;
        let ip = body["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        state
            .resources
            .insert(key(&id), Resource::new(Kind::Nic, body));
        Ok(ip)
    }

    #[test]
    fn dynamic_addresses_fill_the_subnet_then_it_is_full_and_a_freed_one_is_reused() {
        let mut state = state_with_vnet("10.0.0.0/29");
        assert_eq!(put_nic(&mut state, "a", None).unwrap(), "10.0.0.4");
        assert_eq!(put_nic(&mut state, "b", None).unwrap(), "10.0.0.5");
        // An update keeps the address.
        assert_eq!(put_nic(&mut state, "a", None).unwrap(), "10.0.0.4");
        assert_eq!(put_nic(&mut state, "c", None).unwrap(), "10.0.0.6");
        let full = put_nic(&mut state, "d", None).unwrap_err();
        assert_eq!(full.code(), "SubnetIsFull");
        assert!(full.to_string().contains("10.0.0.0/29"), "{full}");
        // A NIC removed without visiting the network (a VM delete's cascade) frees its address.
        let b =
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/b";
        state.resources.remove(&key(b));
        assert_eq!(put_nic(&mut state, "d", None).unwrap(), "10.0.0.5");
        let vnet = state.get(VNET).unwrap();
        assert_eq!(in_use(&state, vnet, "S").len(), 3);
        assert_eq!(usages(&state, vnet)[0]["limit"], 3);
        assert_eq!(usages(&state, vnet)[0]["currentValue"], 3);
    }

    #[test]
    fn static_addresses_must_be_assignable_and_free() {
        let mut state = state_with_vnet("10.0.0.0/24");
        assert_eq!(
            put_nic(&mut state, "a", Some("10.0.0.10")).unwrap(),
            "10.0.0.10"
        );
        let taken = put_nic(&mut state, "b", Some("10.0.0.10")).unwrap_err();
        assert_eq!(taken.code(), "PrivateIPAddressIsAllocated");
        assert!(
            taken.to_string().ends_with("networkInterfaces/a."),
            "{taken}"
        );
        let outside = put_nic(&mut state, "b", Some("10.0.1.4")).unwrap_err();
        assert_eq!(outside.code(), "PrivateIPAddressNotInSubnet");
        for reserved in ["10.0.0.0", "10.0.0.3", "10.0.0.255"] {
            let err = put_nic(&mut state, "b", Some(reserved)).unwrap_err();
            assert_eq!(err.code(), "PrivateIPAddressInReservedRange", "{reserved}");
            assert!(
                err.to_string().ends_with("subnet prefix 10.0.0.0/24."),
                "{err}"
            );
        }
        assert_eq!(
            code(put_nic(&mut state, "b", Some("x")).map(drop)),
            "InvalidParameter"
        );
        // Dynamic ones step over the static one.
        assert_eq!(put_nic(&mut state, "c", None).unwrap(), "10.0.0.4");
    }

    #[test]
    fn a_subnet_in_use_cannot_be_deleted() {
        let mut state = state_with_vnet("10.0.0.0/24");
        put_nic(&mut state, "a", None).unwrap();
        let vnet = state.get(VNET).unwrap();
        let err = refuse_if_in_use(&state, vnet, "s").unwrap_err();
        assert_eq!(err.code(), "InUseSubnetCannotBeDeleted");
        assert!(
            err.to_string()
                .contains("networkInterfaces/a/ipConfigurations/ip1"),
            "{err}"
        );
        let rendered = render(&state, vnet);
        assert_eq!(
            rendered["properties"]["subnets"][0]["properties"]["ipConfigurations"][0]["id"],
            json!(format!(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/a/ipConfigurations/ip1"
            ))
        );
    }
}
