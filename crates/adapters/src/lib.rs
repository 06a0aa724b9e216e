//! cogni-adapters (filled by its issue).
