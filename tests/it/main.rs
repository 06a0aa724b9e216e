//! Cross-crate integration tests: one binary, one module per concern.

mod openai_http;
mod pipeline;
mod recorded_loop;
mod server;
mod server_props;
mod support;
mod threads;
