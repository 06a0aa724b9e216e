//! cogni-adapters' integration tests: the public API only, one binary.

mod bad_input;
mod blob;
mod crash;
mod read_only;
mod recording;
mod replay;
mod run_log;
mod sqlite;
mod support;
