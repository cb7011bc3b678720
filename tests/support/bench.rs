//! What every benchmark's `main` does: run only under `cargo bench` (which passes `--bench`;
//! `cargo test --benches` only says how to run it), on a multi-threaded tokio runtime, and exit
//! non-zero with the reason when the run fails.

use std::future::Future;
use std::process::ExitCode;

/// Runs the benchmark `name` (`run`) when invoked with `--bench`, else prints how to run it
/// (`needs`: what it needs and how long it takes, e.g. "the local stack and about 10 minutes").
pub fn main(name: &str, needs: &str, run: impl Future<Output = anyhow::Result<()>>) -> ExitCode {
    if !std::env::args().any(|argument| argument == "--bench") {
        println!(
            "{name}: not run (it needs {needs}); run it with \
             `cargo bench -p nodewright-tests --bench {name}`"
        );
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("{name} FAILED: no tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("\n{name} FAILED: {error:#}");
            ExitCode::FAILURE
        }
    }
}
