//! ai-core's integration tests: the public API only, one binary.

mod canary;
mod catalog;
mod history;
mod manager;
mod permit;
mod policy;
mod runner;
mod schema;
mod support;
