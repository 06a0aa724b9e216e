//! Translator tests: typical runs turned into each protocol's events, snapshotted, and checked
//! against the protocol's ordering rules, and random event sequences.

mod agui;
mod ai_sdk;
mod properties;
mod scenarios;
