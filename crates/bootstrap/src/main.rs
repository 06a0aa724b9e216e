//! The `cogni` binary.

fn main() {}
