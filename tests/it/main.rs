//! Cross-crate integration tests: one binary, one module per concern.

mod pipeline;
mod recorded_loop;
