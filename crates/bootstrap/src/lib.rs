//! The cogni-tools composition root.
