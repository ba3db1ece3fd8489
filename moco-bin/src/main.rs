//! The `moco` command.
fn main() {}
