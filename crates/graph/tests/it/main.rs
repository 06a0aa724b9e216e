//! The driver end to end with a scripted model and real bound tools.

mod approvals;
mod driver;
mod history;
mod properties;
mod reducer;
mod support;
