//! The one table the benchmark prints: each figure in the baseline window (the worker idle, no
//! controller) and the controller window, their difference, and the ceiling beside it
//! as a reference (nothing is asserted about speed).

use std::collections::BTreeSet;

use super::meters::{Counts, Window};

/// The ceiling on ARM requests per minute of a steady 200-machine pool.
const ARM_CEILING: &str = "<= 2/min";

/// Prints the table of `baseline` against `controller`.
pub fn print(replicas: usize, baseline: &Window, controller: &Window) {
    println!();
    println!(
        "pool controller steady state: {replicas} machines, observe interval 60s (the default), \
         windows of {:.1} min (baseline: worker idle, no controller) and {:.1} min (controller)",
        baseline.minutes, controller.minutes
    );
    println!(
        "{:<52} {:>10} {:>11} {:>11}  issue's ceiling",
        "figure", "baseline", "controller", "difference"
    );
    println!("{}", "-".repeat(104));
    section(
        "ARM requests/min, this worker",
        &baseline.arm_own,
        &controller.arm_own,
        ARM_CEILING,
    );
    section(
        "ARM requests/min, whole sandbox (shared stack)",
        &baseline.arm_all,
        &controller.arm_all,
        "",
    );
    section(
        "apiserver requests/min, this worker",
        &baseline.kube_own,
        &controller.kube_own,
        "watches only",
    );
    section(
        "apiserver requests/s, whole apiserver, Nodes+Leases",
        &baseline.apiserver,
        &controller.apiserver,
        "",
    );
    for resource in ["nodes", "leases"] {
        let open = |window: &Window| window.open_watches.get(resource).copied().unwrap_or(0.0);
        row(
            &format!("open WATCHes of {resource} at the window's end"),
            open(baseline),
            open(controller),
            "",
        );
    }
    row(
        "worker CPU seconds/min",
        baseline.cpu_per_minute,
        controller.cpu_per_minute,
        "near 0",
    );
    match controller.history_per_minute {
        Some((events, continued)) => {
            println!(
                "{:<52} {:>10} {:>11.2} {:>11}  {}",
                "controller history events/min",
                "-",
                events,
                "-",
                if continued {
                    "(continued as new in the window: events of the new run only)"
                } else {
                    ""
                }
            );
        }
        None => println!(
            "{:<52} {:>10} {:>11}",
            "controller history events/min", "-", "?"
        ),
    }
    println!();
    println!(
        "\"this worker\" counts only the benchmark's own worker: its ARM requests carry the \
         benchmark's own subscription (the sandbox's request log), its apiserver requests are \
         in its log (kube-client, debug level). \"whole\" figures include everything else on \
         the shared stack (kwok's Lease renewals, other tests), so only their difference says \
         something, and only on a quiet stack. The worker is the debug build (target/debug)."
    );
}

/// A total row for `baseline` and `controller`, then one row per name in either.
fn section(title: &str, baseline: &Counts, controller: &Counts, ceiling: &str) {
    let total = |counts: &Counts| counts.values().sum::<f64>();
    row(title, total(baseline), total(controller), ceiling);
    let names: BTreeSet<&String> = baseline.keys().chain(controller.keys()).collect();
    for name in names {
        let value = |counts: &Counts| counts.get(name).copied().unwrap_or(0.0);
        row(
            &format!("    {name}"),
            value(baseline),
            value(controller),
            "",
        );
    }
}

fn row(figure: &str, baseline: f64, controller: f64, ceiling: &str) {
    // `+ 0.0` turns a negative zero (an empty sum) into zero, so no "-0.00" is printed.
    let (baseline, controller) = (baseline + 0.0, controller + 0.0);
    println!(
        "{figure:<52} {baseline:>10.2} {controller:>11.2} {:>+11.2}  {ceiling}",
        controller - baseline
    );
}
