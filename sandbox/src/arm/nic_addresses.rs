//! The private IP addresses a NIC's IP configurations get when the NIC is PUT, as Azure gives
//! them out: in a subnet the emulator holds, dynamic ones the next free address after the four
//! Azure reserves (or the one they had), static ones checked (in the subnet, not reserved,
//! free); see [`assign`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::cidr::{Cidr, parse_ip, show};
use super::error::ArmError;
use super::networks::{find_subnet, in_use, prefixes, split_holder, split_subnet_id};
use super::state::{Kind, State, key, obj_at};

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
/// holds is 400 `InvalidResourceReference`. Every named IP configuration gets its `id`.
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
        let mut taken: BTreeMap<u32, String> = in_use(state, vnet, &subnet_name)
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
            if let Some(name) = config["name"].as_str().filter(|n| !n.is_empty()) {
                let id = format!("{nic_id}/ipConfigurations/{name}");
                config["id"] = Value::from(id);
                config["type"] =
                    Value::from("Microsoft.Network/networkInterfaces/ipConfigurations");
            }
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
    use crate::arm::networks::{refuse_if_in_use, render, stamp_subnets, usages};
    use crate::arm::state::Resource;

    const VNET: &str =
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v";

    fn code(result: Result<(), ArmError>) -> String {
        result
            .err()
            .map(|e| e.code().to_owned())
            .unwrap_or_default()
    }

    fn state_with_vnet(prefix: &str) -> State {
        let mut state = State::default();
        let mut body = json!({
            "id": VNET,
            "properties": {
                "addressSpace": { "addressPrefixes": ["10.0.0.0/16"] },
                "subnets": [{"name": "s", "properties": {"addressPrefix": prefix}}],
            },
        });
        stamp_subnets(&mut body, VNET).unwrap();
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
