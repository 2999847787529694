//! The `dsh` binary: argument parsing, rendering and exit codes. Thin by design.

use std::process::ExitCode;

use clap::Parser;

/// dsh — a terminal coding agent whose every tool call passes one fixed, journaled pipeline
/// of gates: journal, pre-policy votes, one-shot approval, deny-only guards, execution
/// wrappers, disposition, normalization, freeze.
#[derive(Debug, Parser)]
#[command(name = "dsh", version, about, long_about = None)]
struct Cli {}

/// Exit codes (DESIGN §4), defined once.
mod exit {
    /// A harness error.
    pub const HARNESS: u8 = 1;
}

fn main() -> ExitCode {
    let _cli = Cli::parse();
    eprintln!(
        "dsh: the interactive REPL is not implemented yet; this build has the tool pipeline \
         (dsh-core) only. Run `dsh --help` for what exists."
    );
    ExitCode::from(exit::HARNESS)
}
