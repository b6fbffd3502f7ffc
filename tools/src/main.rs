//! The `am` command.

mod list;
mod serve;

use clap::Parser;

/// Userspace driver toolkit for AMD GPUs.
#[derive(Parser, Debug)]
#[command(name = "am", version)]
enum Cli {
    /// List the AMD GPUs on this machine's PCI bus (and on remote servers).
    List(list::ListArgs),
    /// Export devices over the remote PCI protocol (tinygrad's REMOTE=host:port).
    Serve(serve::ServeArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse() {
        Cli::List(args) => list::run(args),
        Cli::Serve(args) => serve::run(args),
    }
}
