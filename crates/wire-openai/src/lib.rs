//! cogni-wire-openai (filled by its issue).
