//! wire-openai's integration tests: golden fixtures, encoder key sets, random chunkings.

mod chunking;
mod decode;
mod encode;
