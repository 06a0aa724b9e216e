//! IO implementations of the cogni-tools ports.
//!
//! [`SystemClock`] is the wall clock behind [`ai_core::Clock`]; [`FsWorkspace`] is a folder on
//! disk behind [`ai_core::Workspace`], confined to its root: `..`, absolute paths and symlinks
//! that lead out of the root are refused. Adapters say their technology in their names.
//!
//! This crate implements ports; it never decides policy, never validates or redacts tool data,
//! and never binds tools (that is the composition root's job).

mod clock;
mod workspace;

pub use clock::SystemClock;
pub use workspace::FsWorkspace;
