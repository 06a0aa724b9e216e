//! Cross-crate integration tests for cogni-tools; the tests live in `it/`.
//!
//! The library holds what tests share: [`fake_llm`], a scripted OpenAI-compatible HTTP server.

pub mod fake_llm;
