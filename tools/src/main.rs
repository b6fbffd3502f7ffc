//! The `am` command.
fn main() {}
