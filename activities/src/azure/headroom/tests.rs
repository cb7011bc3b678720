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
