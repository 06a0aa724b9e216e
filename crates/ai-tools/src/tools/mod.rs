//! The core tools. Each reaches the world only through a capability port it was built with.
//!
//! Nothing here is bound: a composition root builds each contract with its capabilities and
//! passes it to [`crate::bind`] (invariant NO_DEFAULT_EXECUTABLE_CATALOG).

mod time;
mod workspace;

pub use time::{CurrentTime, GetCurrentTime, GetCurrentTimeInput};
pub use workspace::{
    ListEntry, ListInput, ListOutput, ReadInput, ReadOutput, WorkspaceList, WorkspaceRead,
    WorkspaceWrite, WriteInput, WriteOutput,
};

#[cfg(test)]
mod tests;
