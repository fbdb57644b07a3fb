//! The `klab` binary: parse the command line, call one library entry point, map errors to exit codes.

mod cli;
mod node_cmd;
mod why_cmd;

use clap::Parser;

/// mimalloc instead of glibc's malloc: components copy and drop many small JSON values and API
/// objects, and with glibc a third of a large sim's time went to malloc, free and consolidation
/// (`cargo bench -p klab-sim --bench sim -- large10`: 88 s → 67 s, same trace). Feature
/// `system-alloc` keeps the system's, for heap profilers (heaptrack) that see only malloc.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    klab_api::heap::tune_mimalloc();
    let args = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KLAB_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
