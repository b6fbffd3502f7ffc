//! The `am` command.

mod serve;

use clap::Parser;

/// Userspace driver toolkit for AMD GPUs.
#[derive(Parser, Debug)]
#[command(name = "am", version)]
enum Cli {
    /// Export devices over the remote PCI protocol (tinygrad's REMOTE=host:port).
    Serve(serve::ServeArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse() {
        Cli::Serve(args) => serve::run(args),
    }
}
