//! cogni-graph (filled by its issue).
