//! Identifiers whose rules are checked once, at construction.

use std::fmt::{self, Write as _};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::Error;

/// Maximum length of a [`ToolId`], the limit OpenAI puts on function names.
const TOOL_ID_MAX: usize = 64;
/// Maximum length of a [`ToolCallId`].
const TOOL_CALL_ID_MAX: usize = 128;

/// A namespaced tool id: `core__<name>` or `mcp__<server>__<tool>`, matching
/// `^[a-zA-Z0-9_-]{1,64}$`.
///
/// The double underscore keeps ids valid as provider function names while letting tools from
/// many sources live side by side without collisions.
///
/// ```
/// use ai_core::ToolId;
/// assert!(ToolId::parse("core__get_current_time").is_ok());
/// assert!(ToolId::parse("mcp__github__create_issue").is_ok());
/// assert!(ToolId::parse("get_current_time").is_err()); // no namespace
/// assert!(ToolId::parse("core__a.b").is_err()); // '.' is not allowed
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ToolId(Arc<str>); // Shared: cloned into every event, record and lookup of a call.

impl ToolId {
    /// Checks `raw` against the id rules and builds the id.
    pub fn parse(raw: &str) -> Result<Self, Error> {
        let reject = |reason| Error::InvalidToolId {
            id: raw.chars().take(80).collect(),
            reason,
        };
        if raw.is_empty() || raw.len() > TOOL_ID_MAX {
            return Err(reject("length must be 1..=64"));
        }
        if !raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(reject("only [a-zA-Z0-9_-] are allowed"));
        }
        if let Some(name) = raw.strip_prefix("core__") {
            if name.is_empty() || name.contains("__") {
                return Err(reject("core tools are core__<name> with a non-empty name"));
            }
        } else if let Some(rest) = raw.strip_prefix("mcp__") {
            match rest.split_once("__") {
                Some((server, tool)) if !server.is_empty() && !tool.is_empty() => {}
                _ => return Err(reject("mcp tools are mcp__<server>__<tool>")),
            }
        } else {
            return Err(reject("the namespace must be core__ or mcp__<server>__"));
        }
        Ok(Self(raw.into()))
    }

    /// The id as sent to providers.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

// Ids compare, order and hash exactly as their text does, so maps keyed by `ToolId` can be
// searched with a `&str` without parsing it first.
impl std::borrow::Borrow<str> for ToolId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ToolId {
    type Error = Error;
    fn try_from(raw: String) -> Result<Self, Error> {
        Self::parse(&raw)
    }
}

impl From<ToolId> for String {
    fn from(id: ToolId) -> String {
        id.0.as_ref().to_owned()
    }
}

/// The id a provider gave one tool call; the same id follows the call from start to result.
///
/// Any text of 1..=128 characters, control characters included: a decoder takes what the
/// provider sent. [`ToolCallId::as_str`] is that text, for the wire and the stores; `Display`
/// escapes it, for messages and logs.
///
/// ```
/// use ai_core::ToolCallId;
/// assert!(ToolCallId::new("call_abc123").is_ok());
/// assert!(ToolCallId::new("").is_err());
/// assert!(ToolCallId::new("x".repeat(129)).is_err());
/// let odd = ToolCallId::new("call\n1").unwrap();
/// assert_eq!(odd.as_str(), "call\n1");
/// assert_eq!(odd.to_string(), r"call\n1");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ToolCallId(Arc<str>); // Shared: one id is copied into every event and record of its call.

impl ToolCallId {
    /// Builds an id of 1..=128 characters.
    pub fn new(raw: impl Into<String>) -> Result<Self, Error> {
        let raw = raw.into();
        if raw.is_empty() {
            return Err(Error::InvalidToolCallId {
                reason: "it is empty",
            });
        }
        if raw.chars().count() > TOOL_CALL_ID_MAX {
            return Err(Error::InvalidToolCallId {
                reason: "it is longer than 128 characters",
            });
        }
        Ok(Self(raw.into()))
    }

    /// The id as the provider sent it, byte-exact: what the wire encoders and the stores take.
    /// (Its `Display`, for messages, escapes it.)
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ToolCallId {
    type Error = Error;
    fn try_from(raw: String) -> Result<Self, Error> {
        Self::new(raw)
    }
}

impl From<ToolCallId> for String {
    fn from(id: ToolCallId) -> String {
        id.0.as_ref().to_owned()
    }
}

/// The id of one run: one user turn driven to its finish.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(Arc<str>);

impl RunId {
    /// Builds a run id of 1..=128 characters, none of them a control character.
    pub fn new(raw: impl Into<String>) -> Result<Self, Error> {
        let raw = raw.into();
        crate::context::check_ref("run_id", &raw)?;
        Ok(Self(raw.into()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RunId {
    type Error = Error;
    fn try_from(raw: String) -> Result<Self, Error> {
        Self::new(raw)
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> String {
        id.0.as_ref().to_owned()
    }
}

macro_rules! display_as_str {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
        impl AsRef<str> for $t {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    )*};
}
display_as_str!(ToolId, RunId);

/// The most characters [`ToolCallId`]'s `Display` writes before it cuts the id with `…`: room
/// for every id of printable characters, which is shown whole.
const TOOL_CALL_ID_SHOWN_MAX: usize = 2 * TOOL_CALL_ID_MAX;

/// The id for a message or a log line: each character as [`char::escape_debug`] writes it, so
/// a control character (a newline, an escape sequence), a quote or a backslash never reaches
/// the text raw, cut with `…` past 256 characters (twice the longest id). An id of printable
/// characters shows as it is. Never use it for the wire or a store: they take
/// [`ToolCallId::as_str`], byte-exact.
impl fmt::Display for ToolCallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = 0;
        for c in self.0.chars() {
            let escaped = c.escape_debug();
            shown += escaped.len();
            if shown > TOOL_CALL_ID_SHOWN_MAX {
                return f.write_char('…');
            }
            for c in escaped {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for ToolCallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl AsRef<str> for ToolCallId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests;
