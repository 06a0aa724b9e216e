//! cogni-ai-tools (filled by its issue).
