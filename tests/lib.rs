//! Cross-crate integration tests for cogni-tools; the tests live in `it/`.
