//! What the encoders send of a history that a provider would refuse as stored: call ids over the
//! length its wire accepts. One rule for both wires, so a thread keeps the same ids whichever
//! wire sends it.

use std::collections::{HashMap, HashSet};

use ai_core::{Message, ToolCallId};

use crate::assembly::Fnv1a;

/// The call id each call of a history is sent under, on its call and on its result alike.
///
/// An id of at most `max_bytes` bytes is sent as is. A longer one is sent as `call_` and 16 hex
/// digits of FNV-1a over it (21 bytes), rehashed with a counter until it differs from every id
/// the history uses and every other short form. The same history always gets the same ids, so a
/// thread's requests keep one prefix. Results answer calls of the history (`validate_history`),
/// so the calls' ids are all there are.
pub(crate) struct WireCallIds<'a> {
    short: HashMap<&'a str, String>,
}

impl<'a> WireCallIds<'a> {
    /// The ids of `messages`' calls, shortened where they are over `max_bytes` (at least 21: the
    /// short form's length).
    pub(crate) fn new(messages: &'a [Message], max_bytes: usize) -> Self {
        let ids: Vec<&'a str> = messages
            .iter()
            .flat_map(|message| match message {
                Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
                _ => &[],
            })
            .map(|call| call.id.as_str())
            .collect();
        let mut taken: HashSet<String> = ids
            .iter()
            .filter(|id| id.len() <= max_bytes)
            .map(|id| (*id).to_owned())
            .collect();
        let mut short = HashMap::new();
        for id in ids.into_iter().filter(|id| id.len() > max_bytes) {
            if short.contains_key(id) {
                continue;
            }
            let mut attempt = 0u64;
            let wire = loop {
                let mut hash = Fnv1a::default();
                hash.write(id.as_bytes());
                if attempt > 0 {
                    hash.write(&attempt.to_le_bytes());
                }
                let wire = format!("call_{:016x}", hash.0);
                if !taken.contains(&wire) {
                    break wire;
                }
                attempt += 1;
            };
            taken.insert(wire.clone());
            short.insert(id, wire);
        }
        Self { short }
    }

    /// The id `id` is sent under.
    pub(crate) fn get<'s>(&'s self, id: &'s ToolCallId) -> &'s str {
        self.short
            .get(id.as_str())
            .map_or(id.as_str(), String::as_str)
    }
}
