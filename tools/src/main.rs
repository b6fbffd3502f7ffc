//! The `am` command.

mod device;
mod info;
mod list;
mod serve;

use clap::Parser;

/// Userspace driver toolkit for AMD GPUs.
#[derive(Parser, Debug)]
#[command(name = "am", version)]
enum Cli {
    /// Identity, VRAM, IP versions, shader counts and boot state of a device (reads only).
    Info(info::InfoArgs),
    /// List the AMD GPUs on this machine's PCI bus (and on remote servers).
    List(list::ListArgs),
    /// Export devices over the remote PCI protocol (tinygrad's REMOTE=host:port).
    Serve(serve::ServeArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse() {
        Cli::Info(args) => info::run(args),
        Cli::List(args) => list::run(args),
        Cli::Serve(args) => serve::run(args),
    }
}
