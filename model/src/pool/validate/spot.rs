//! Rules for a template's capacity types and Spot settings (`capacityTypes`, `spot`): what Azure
//! would refuse at the create (`MaxPriceValueInvalid`) is refused here, before anything starts.

use super::Problems;
use crate::pool::capacity_type::{
    CapacityType, MAX_MAX_PRICE, MAX_PRICE_DECIMALS, NO_MAX_PRICE, has_price_precision,
};
use crate::pool::spec::MachineTemplate;

/// Checks `capacityTypes` and `spot` of the template at `field` (`spec.template`).
pub(super) fn check(problems: &mut Problems, field: &str, template: &MachineTemplate) {
    let types_field = format!("{field}.capacityTypes");
    let types = &template.capacity_types;
    for (index, kind) in types.iter().enumerate() {
        if types[..index].contains(kind) {
            problems.push(
                format!("{types_field}[{index}]"),
                format!("\"{kind}\""),
                "is listed twice",
                "list each capacity type once, in order of preference (e.g. [spot, on-demand])",
            );
        }
    }
    let Some(spot) = &template.spot else {
        return;
    };
    let spot_field = format!("{field}.spot");
    if !types.contains(&CapacityType::Spot) {
        let written: Vec<&str> = template
            .allowed_capacity_types()
            .iter()
            .map(|kind| kind.as_str())
            .collect();
        problems.push(
            spot_field.as_str(),
            format!("capacityTypes [{}]", written.join(", ")),
            "has Spot settings, but capacityTypes does not include spot",
            format!("add spot to {types_field} (e.g. [spot, on-demand]), or remove {spot_field}"),
        );
    }
    if let Some(number) = &spot.max_price {
        let price_field = format!("{spot_field}.maxPrice");
        let written = number.to_string();
        const FIX: &str = "write -1 (never evicted for price, at most the on-demand price) or a \
             price in USD an hour above 0 with at most 5 decimals, e.g. 0.05";
        match number.as_f64() {
            Some(price) if price == NO_MAX_PRICE => {}
            Some(price) if price <= 0.0 => {
                problems.push(price_field, written, "is neither -1 nor above 0", FIX);
            }
            Some(price) if price > MAX_MAX_PRICE => problems.push(
                price_field,
                written,
                format!("is above {MAX_MAX_PRICE} USD an hour"),
                FIX,
            ),
            Some(price) if !has_price_precision(price) => problems.push(
                price_field,
                written,
                format!("has more than {MAX_PRICE_DECIMALS} decimals, which Azure refuses (MaxPriceValueInvalid)"),
                FIX,
            ),
            Some(_) => {}
            None => problems.push(price_field, written, "is not a number", FIX),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::pool::capacity_type::{CapacityType, SpotSpec};
    use crate::pool::spec::MachineTemplate;

    use super::*;

    fn template(types: &[CapacityType], spot: Option<SpotSpec>) -> MachineTemplate {
        let mut template: MachineTemplate = serde_json::from_value(serde_json::json!({
            "vmSize": "Standard_D2s_v5",
            "image": { "publisher": "Canonical", "offer": "o", "sku": "s", "version": "latest" },
            "subnetId": "/subscriptions/s/resourceGroups/r/providers/Microsoft.Network/virtualNetworks/v/subnets/n",
        }))
        .expect("a template");
        template.capacity_types = types.to_vec();
        template.spot = spot;
        template
    }

    fn price(text: &str) -> Option<SpotSpec> {
        Some(SpotSpec {
            max_price: Some(serde_json::from_str(text).expect("a number")),
            ..SpotSpec::default()
        })
    }

    fn problems(template: &MachineTemplate) -> Vec<String> {
        let mut problems = Problems::default();
        check(&mut problems, "spec.template", template);
        problems
            .0
            .iter()
            .map(|p| format!("{} {}: {}", p.field, p.value, p.problem))
            .collect()
    }

    #[test]
    fn capacity_types_and_spot_settings_are_checked_as_azure_would() {
        use CapacityType::{OnDemand, Spot};
        let cases: [(&str, MachineTemplate, Vec<&str>); 9] = [
            ("default on-demand", template(&[], None), vec![]),
            ("spot first", template(&[Spot, OnDemand], None), vec![]),
            ("-1", template(&[Spot], price("-1")), vec![]),
            ("five decimals", template(&[Spot], price("0.05123")), vec![]),
            (
                "twice",
                template(&[Spot, Spot], None),
                vec!["spec.template.capacityTypes[1] \"spot\": is listed twice"],
            ),
            (
                "settings without spot",
                template(&[OnDemand], price("-1")),
                vec![
                    "spec.template.spot capacityTypes [on-demand]: has Spot settings, but capacityTypes does not include spot",
                ],
            ),
            (
                "zero",
                template(&[Spot], price("0")),
                vec!["spec.template.spot.maxPrice 0: is neither -1 nor above 0"],
            ),
            (
                "six decimals",
                template(&[Spot], price("0.051234")),
                vec![
                    "spec.template.spot.maxPrice 0.051234: has more than 5 decimals, which Azure refuses (MaxPriceValueInvalid)",
                ],
            ),
            (
                "cents for dollars",
                template(&[Spot], price("5000")),
                vec!["spec.template.spot.maxPrice 5000: is above 1000 USD an hour"],
            ),
        ];
        for (name, template, expected) in cases {
            assert_eq!(problems(&template), expected, "{name}");
        }
    }
}
