//! IPv4 address prefixes in CIDR notation (`10.0.0.0/24`) as Azure reads them in address
//! spaces and subnets: parsing (the host bits must be zero), containment, overlap, and the
//! addresses a subnet can give out (Azure reserves the first four and the last one).

use std::fmt;
use std::net::Ipv4Addr;

/// How many addresses Azure reserves in every subnet: the network address, three for the
/// gateway and DNS at the start, and the broadcast address at the end.
pub const RESERVED_PER_SUBNET: u64 = 5;

/// An IPv4 prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The first address.
    pub base: u32,
    /// The prefix length, 0 to 32.
    pub len: u8,
}

/// Why a prefix was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CidrError {
    /// Not `a.b.c.d/n` (Azure's `InvalidAddressPrefixFormat`).
    Format,
    /// Host bits set (Azure's `InvalidCIDRNotation`): the prefix it should be.
    HostBits(Cidr),
}

impl Cidr {
    /// Parses `a.b.c.d/n` with zero host bits.
    pub fn parse(text: &str) -> Result<Self, CidrError> {
        let (address, len) = text.trim().split_once('/').ok_or(CidrError::Format)?;
        let address: Ipv4Addr = address.parse().map_err(|_| CidrError::Format)?;
        let len: u8 = len.parse().map_err(|_| CidrError::Format)?;
        if len > 32 {
            return Err(CidrError::Format);
        }
        let base = u32::from(address);
        let masked = base & mask(len);
        if masked != base {
            return Err(CidrError::HostBits(Self { base: masked, len }));
        }
        Ok(Self { base, len })
    }

    /// How many addresses it spans.
    pub fn size(self) -> u64 {
        1u64 << (32 - u32::from(self.len))
    }

    /// The last address.
    pub fn last(self) -> u32 {
        self.base | !mask(self.len)
    }

    /// Whether `ip` is in it.
    pub fn contains(self, ip: u32) -> bool {
        ip & mask(self.len) == self.base
    }

    /// Whether `other` lies wholly inside it.
    pub fn covers(self, other: Cidr) -> bool {
        other.len >= self.len && self.contains(other.base)
    }

    /// Whether the two share an address.
    pub fn overlaps(self, other: Cidr) -> bool {
        self.covers(other) || other.covers(self)
    }

    /// How many addresses a subnet of this prefix can give out (its size less Azure's five).
    pub fn usable(self) -> u64 {
        self.size().saturating_sub(RESERVED_PER_SUBNET)
    }

    /// The addresses a subnet of this prefix gives out, in order: after the four reserved at
    /// the start, before the broadcast address.
    pub fn assignable(self) -> impl Iterator<Item = u32> {
        let (first, last) = if self.usable() == 0 {
            (1, 0)
        } else {
            (self.base + 4, self.last() - 1)
        };
        (u64::from(first)..=u64::from(last)).filter_map(|ip| u32::try_from(ip).ok())
    }

    /// Whether `ip` is one a subnet of this prefix can give out.
    pub fn is_assignable(self, ip: u32) -> bool {
        self.usable() > 0 && self.contains(ip) && ip >= self.base + 4 && ip < self.last()
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.base), self.len)
    }
}

/// The address as Azure writes it.
pub fn show(ip: u32) -> String {
    Ipv4Addr::from(ip).to_string()
}

/// Parses a dotted IPv4 address.
pub fn parse_ip(text: &str) -> Option<u32> {
    text.trim().parse::<Ipv4Addr>().ok().map(u32::from)
}

fn mask(len: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Cidr {
        Cidr::parse(text).unwrap()
    }

    #[test]
    fn prefixes_parse_and_host_bits_are_refused_with_the_right_prefix() {
        assert_eq!(cidr("10.0.0.0/16").size(), 65536);
        assert_eq!(cidr("0.0.0.0/0").size(), 1 << 32);
        assert_eq!(
            Cidr::parse("10.0.0.5/24"),
            Err(CidrError::HostBits(cidr("10.0.0.0/24")))
        );
        for bad in [
            "10.0.0.0",
            "10.0.0/24",
            "10.0.0.0/33",
            "x/8",
            "10.0.0.0/-1",
            "",
        ] {
            assert_eq!(Cidr::parse(bad), Err(CidrError::Format), "{bad}");
        }
        assert_eq!(cidr("10.1.0.0/16").to_string(), "10.1.0.0/16");
    }

    #[test]
    fn containment_and_overlap() {
        let space = cidr("10.0.0.0/16");
        assert!(space.covers(cidr("10.0.4.0/24")));
        assert!(!space.covers(cidr("10.1.0.0/24")));
        assert!(!cidr("10.0.0.0/24").covers(space));
        assert!(cidr("10.0.0.0/24").overlaps(cidr("10.0.0.128/25")));
        assert!(!cidr("10.0.0.0/25").overlaps(cidr("10.0.0.128/25")));
    }

    #[test]
    fn a_subnet_gives_out_its_size_less_five_from_the_fifth_address() {
        let subnet = cidr("10.0.0.0/29");
        assert_eq!(subnet.usable(), 3);
        let given: Vec<String> = subnet.assignable().map(show).collect();
        assert_eq!(given, ["10.0.0.4", "10.0.0.5", "10.0.0.6"]);
        assert!(!subnet.is_assignable(parse_ip("10.0.0.3").unwrap()));
        assert!(!subnet.is_assignable(parse_ip("10.0.0.7").unwrap()));
        assert_eq!(cidr("10.0.0.0/30").usable(), 0);
        assert_eq!(cidr("10.0.0.0/30").assignable().count(), 0);
        assert_eq!(cidr("10.0.0.0/32").assignable().count(), 0);
        assert_eq!(cidr("10.0.0.0/24").usable(), 251);
    }
}
