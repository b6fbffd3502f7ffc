//! The `am` command.

mod device;
mod info;

use clap::{Parser, Subcommand};

/// A userspace AMD GPU driver toolkit.
#[derive(Debug, Parser)]
#[command(name = "am", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Identity, VRAM, IP versions, shader counts and boot state of a device (reads only).
    Info(info::InfoArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Info(args) => info::run(args),
    }
}
