//! The pure parts of the headroom reads: which network a subnet id names.

use super::subnet::network_of;

#[test]
fn a_subnet_id_names_its_network_and_its_name() {
    let id = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/workers";
    assert_eq!(
        network_of(id),
        Some((
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v",
            "workers"
        ))
    );
    let upper = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/SUBNETS/w";
    assert_eq!(network_of(upper).map(|(_, name)| name), Some("w"));
    for bad in [
        "",
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v",
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/",
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/a/b",
    ] {
        assert_eq!(network_of(bad), None, "{bad}");
    }
}

#[test]
fn an_ipv4_prefix_gives_its_length_and_anything_else_none() {
    use super::subnet::ipv4_prefix_len;
    let table = [
        ("10.0.0.0/24", Some(24)),
        ("10.9.0.0/29", Some(29)),
        ("0.0.0.0/0", Some(0)),
        ("10.0.0.0/33", None),
        ("fd00::/64", None),
        ("10.0.0.0", None),
        ("ten/24", None),
    ];
    for (prefix, len) in table {
        assert_eq!(ipv4_prefix_len(prefix), len, "{prefix}");
    }
}
