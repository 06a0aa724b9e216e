//! `core__get_current_time`: the current time from the clock capability.

use std::sync::Arc;

use ai_core::{Capabilities, Clock, ExecPermit, ToolEffect, ToolError, ToolInvocationContext};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ToolContract;

/// The tool; built with the clock it reads.
pub struct GetCurrentTime {
    clock: Arc<dyn Clock>,
}

impl GetCurrentTime {
    /// The tool over `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self { clock }
    }
}

impl std::fmt::Debug for GetCurrentTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GetCurrentTime").finish_non_exhaustive()
    }
}

/// No arguments.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetCurrentTimeInput {}

/// The current time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct CurrentTime {
    /// Milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// The same instant as an ISO 8601 UTC timestamp, e.g. `2026-11-22T15:21:12.000Z`.
    pub iso8601: String,
}

#[async_trait::async_trait]
impl ToolContract for GetCurrentTime {
    type Input = GetCurrentTimeInput;
    type Output = CurrentTime;
    const ID: &'static str = "core__get_current_time";
    const DESCRIPTION: &'static str = "Get the current date and time (UTC).";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["unix_ms", "iso8601"];

    async fn execute(
        &self,
        _: &ExecPermit,
        _: GetCurrentTimeInput,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<CurrentTime, ToolError> {
        let unix_ms = self.clock.now_ms();
        Ok(CurrentTime {
            unix_ms,
            iso8601: iso8601(unix_ms),
        })
    }
}

/// Formats milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (proleptic Gregorian,
/// Howard Hinnant's civil-from-days).
pub(crate) fn iso8601(unix_ms: u64) -> String {
    let days = unix_ms / 86_400_000;
    let ms_of_day = unix_ms % 86_400_000;
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000
    )
}
