//! The system wall clock.

use std::time::{SystemTime, UNIX_EPOCH};

/// [`ai_core::Clock`] over the operating system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl ai_core::Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        // A clock set before 1970 reads as the epoch rather than failing.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}
