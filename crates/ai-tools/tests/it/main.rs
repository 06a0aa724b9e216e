//! ai-tools' integration tests: contracts bound and run through the real `ai_core::ToolRunner`.

mod bind;
mod core_tools;
mod specs;
mod support;
mod unique_props;
