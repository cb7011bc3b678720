//! ARM conformance suite for the sandbox emulator, written from the shared `arm-contract.md` with
//! raw HTTP (reqwest), not with any nodewright client. Each test starts `arm::app()` on
//! `127.0.0.1:0` in-process, mostly with the instant latency profile (every operation completes
//! on the next request) and a few with a scaled-down short profile to observe transitions.

mod async_protocol;
mod capacity_faults;
mod compute;
mod disks;
mod errors;
mod faults;
mod force_detach;
mod galleries;
mod images;
mod key_vault;
mod listings;
mod networks;
mod nics;
mod periodic;
mod persistence;
mod quota;
mod requests;
mod resend;
mod reservations;
mod resource_graph;
mod scheduled_events;
mod seed;
mod skus;
mod spot;
mod stats;
mod support;
mod vm_actions;
mod vms;
mod zone_faults;
