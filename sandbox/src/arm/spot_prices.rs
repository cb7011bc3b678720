//! The Spot prices in force: each size's catalog price (`sizes.rs`) unless a test raised or
//! lowered it through `PUT /sandbox/spot-prices`. A Spot create whose `maxPrice` is below the
//! price in force is refused (`virtual_machines/spot.rs`); raising a price above a running Spot
//! VM's `maxPrice` evicts it (`scheduled_events.rs`). Not persisted: a restart goes back to the
//! catalog.

use std::collections::BTreeMap;

use serde::Serialize;

use super::sizes::{self, Size};

/// Prices set over the catalog's, by size name as the catalog spells it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpotPrices {
    overrides: BTreeMap<&'static str, f64>,
}

/// One size's prices as `GET /sandbox/spot-prices` lists them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SizePrice {
    /// The size, `Standard_D4s_v5`.
    pub size: &'static str,
    /// Whether the size is offered as Spot.
    pub spot_supported: bool,
    /// The Spot price in force, USD per hour (absent without Spot).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spot_price: Option<f64>,
    /// The on-demand price, USD per hour.
    pub on_demand_price: f64,
}

/// Why a price could not be set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    /// The catalog has no such size.
    #[error("the size {0} is not in the catalog")]
    UnknownSize(String),
    /// The size is not offered as Spot.
    #[error("the size {0} does not support Azure Spot")]
    NoSpot(String),
    /// The price is not a positive number.
    #[error("a Spot price must be a positive number of USD per hour, not {0}")]
    NotPositive(String),
}

impl SpotPrices {
    /// The Spot price of `size` in force, `None` when it has no Spot.
    pub fn price(&self, size: &Size) -> Option<f64> {
        let catalog = size.spot_price()?;
        Some(self.overrides.get(size.name).copied().unwrap_or(catalog))
    }

    /// Sets the Spot price of the size named `name` (any casing); returns the catalog's size.
    pub fn set(&mut self, name: &str, price: f64) -> Result<&'static Size, PriceError> {
        let size = sizes::find(name).ok_or_else(|| PriceError::UnknownSize(name.to_owned()))?;
        if !size.supports_spot() {
            return Err(PriceError::NoSpot(size.name.to_owned()));
        }
        if !price.is_finite() || price <= 0.0 {
            return Err(PriceError::NotPositive(price.to_string()));
        }
        self.overrides.insert(size.name, sizes::round5(price));
        Ok(size)
    }

    /// Back to the catalog's prices.
    pub fn reset(&mut self) {
        self.overrides.clear();
    }

    /// Every size's prices, in catalog order.
    pub fn list(&self) -> Vec<SizePrice> {
        sizes::CATALOG
            .iter()
            .map(|size| SizePrice {
                size: size.name,
                spot_supported: size.supports_spot(),
                spot_price: self.price(size),
                on_demand_price: size.on_demand_price(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_price_overrides_the_catalog_until_reset() {
        let mut prices = SpotPrices::default();
        let d4 = sizes::find("Standard_D4s_v5").unwrap();
        assert_eq!(prices.price(d4), Some(0.0384));
        assert_eq!(prices.set("standard_d4s_v5", 0.5).unwrap().name, d4.name);
        assert_eq!(prices.price(d4), Some(0.5));
        prices.reset();
        assert_eq!(prices.price(d4), Some(0.0384));
    }

    #[test]
    fn unknown_sizes_sizes_without_spot_and_non_positive_prices_are_refused() {
        let mut prices = SpotPrices::default();
        assert!(matches!(
            prices.set("Standard_Huge", 1.0),
            Err(PriceError::UnknownSize(_))
        ));
        assert!(matches!(
            prices.set("Standard_B2s", 1.0),
            Err(PriceError::NoSpot(_))
        ));
        assert!(matches!(
            prices.set("Standard_D2s_v5", 0.0),
            Err(PriceError::NotPositive(_))
        ));
        assert!(matches!(
            prices.set("Standard_D2s_v5", f64::NAN),
            Err(PriceError::NotPositive(_))
        ));
        let listed = prices.list();
        assert_eq!(listed.len(), sizes::CATALOG.len());
        assert!(
            listed
                .iter()
                .any(|p| p.size == "Standard_B2s" && p.spot_price.is_none())
        );
    }
}
