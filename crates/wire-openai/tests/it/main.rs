//! wire-openai's integration tests: golden fixtures, encoder key sets, random chunkings, mangled streams.

mod chunking;
mod decode;
mod encode;
mod mutations;
mod styles;
