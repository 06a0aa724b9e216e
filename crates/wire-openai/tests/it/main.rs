//! wire-openai's integration tests: golden fixtures, encoder key sets, random chunkings, mangled
//! streams.

mod chunking;
mod decode;
mod encode;
mod item_identity;
mod kept_depth;
mod message_text;
mod mutations;
mod reasoning;
mod styles;
