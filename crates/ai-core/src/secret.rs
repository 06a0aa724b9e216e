//! A string that never prints.

use std::fmt;

/// A credential handed out by an [`crate::AuthCapability`].
///
/// It is neither `Display` nor `Serialize`, and its `Debug` prints `Secret([redacted])`, so it
/// cannot leak into events, records, errors or logs by accident. Call [`Secret::expose`] at the
/// one place that must send it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The credential itself, for the one call that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}
