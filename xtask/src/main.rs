//! Repository chores.

fn main() {}
