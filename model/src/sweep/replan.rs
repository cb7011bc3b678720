//! A fresh plan after waiting for approval: the approved plan is acted on only where a fresh
//! listing, classified again, still makes the same removal.
//!
//! An approval wait may last an hour; in that time a Node may join, a VM get a workflow, a NIC
//! be attached or a resource go. Every planned removal whose subject is no longer listed, or is
//! now decided by another rule or action (or, for a Node, is another object of the same name),
//! is kept and reported; the removals the fresh plan adds were never approved and wait for the
//! next sweep.

use super::audit::{AuditEntry, Outcome};
use super::classify::Decision;

/// The planned removals of `entries` (those without an outcome yet) that `fresh`, the
/// decisions about a new listing, does not make the same way: their index in `entries` and the
/// outcome that keeps them.
pub fn changed_while_waiting(entries: &[AuditEntry], fresh: &[Decision]) -> Vec<(usize, Outcome)> {
    entries
        .iter()
        .enumerate()
        .filter(|(_, entry)| entry.decision.action.removes() && entry.outcome.is_none())
        .filter_map(|(index, entry)| {
            let planned = &entry.decision;
            let now = fresh
                .iter()
                .find(|d| d.kind == planned.kind && d.name == planned.name);
            let change = match now {
                None => "no longer listed".to_owned(),
                Some(now) if now.uid != planned.uid => {
                    format!("{} {} is another object now", now.kind, now.name)
                }
                Some(now) if now.action != planned.action || now.rule != planned.rule => {
                    let detail = if now.detail.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", now.detail)
                    };
                    format!("now {} by rule {}{detail}", now.action, now.rule)
                }
                Some(_) => return None,
            };
            Some((
                index,
                Outcome::Skipped {
                    reason: format!("changed while waiting for approval: {change}"),
                },
            ))
        })
        .collect()
}
