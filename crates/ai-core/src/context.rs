//! Who is running a tool, and on whose behalf: references only, never secrets.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{Error, RunId, ToolCallId};

const REF_MAX: usize = 128;

/// Checks a reference (a run, thread, connection, actor, tenant, subject or graph id): 1..=128
/// characters, none of them a control character.
pub(crate) fn check_ref(field: &'static str, raw: &str) -> Result<(), Error> {
    if raw.is_empty() {
        return Err(Error::InvalidContext {
            field,
            reason: "it is empty",
        });
    }
    if raw.chars().count() > REF_MAX {
        return Err(Error::InvalidContext {
            field,
            reason: "it is longer than 128 characters",
        });
    }
    // An id is shown in logs, spans, file names' neighbours and terminals: a line break or an
    // escape sequence in one could forge a log line or rewrite a terminal.
    if raw.chars().any(char::is_control) {
        return Err(Error::InvalidContext {
            field,
            reason: "it contains a control character",
        });
    }
    Ok(())
}

/// Deserializers that put each reference field through the constructors' check, so a context
/// cannot be deserialized around it.
mod checked {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer};

    fn check<E: serde::de::Error>(field: &'static str, raw: String) -> Result<Arc<str>, E> {
        super::check_ref(field, &raw).map_err(E::custom)?;
        Ok(raw.into())
    }

    macro_rules! fields {
        ($($required:ident)*; $($optional:ident)*) => {
            $(pub(super) fn $required<'de, D: Deserializer<'de>>(de: D) -> Result<Arc<str>, D::Error> {
                check(stringify!($required), String::deserialize(de)?)
            })*
            $(pub(super) fn $optional<'de, D: Deserializer<'de>>(
                de: D,
            ) -> Result<Option<Arc<str>>, D::Error> {
                Option::<String>::deserialize(de)?
                    .map(|raw| check(stringify!($optional), raw))
                    .transpose()
            })*
        };
    }
    fields!(actor_id tenant_id; subject_id graph_id);
}

/// An opaque reference to an external account connection; the broker resolves it to credentials.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ConnectionId(String);

impl ConnectionId {
    /// Builds a connection reference of 1..=128 characters, none of them a control character.
    pub fn new(raw: impl Into<String>) -> Result<Self, Error> {
        let raw = raw.into();
        check_ref("connection_id", &raw)?;
        Ok(Self(raw))
    }

    /// The reference as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ConnectionId {
    type Error = Error;
    fn try_from(raw: String) -> Result<Self, Error> {
        Self::new(raw)
    }
}

impl From<ConnectionId> for String {
    fn from(id: ConnectionId) -> String {
        id.0
    }
}

/// The connections the server has granted this actor (from the server's own records, never from
/// the request).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionGrant {
    /// Connections the actor may use.
    pub allowed_connection_ids: BTreeSet<ConnectionId>,
}

/// The run-wide context that policy, catalog and runner decide on.
///
/// The actor, tenant, subject and graph are checked references (1..=128 characters, no control
/// character) whether the context is built or deserialized, so they are read through methods; they
/// are `Arc<str>` inside, so each invocation's context shares them instead of copying.
///
/// Every field is a reference. A secret never lives here (invariant NO_SECRETS_IN_CONTEXT):
/// credentials reach a tool only through a per-invocation [`crate::AuthCapability`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunContext {
    /// The run.
    pub run_id: RunId,
    /// Who acts: `user:<id>`, `agent:<id>` or `service:<name>`.
    #[serde(deserialize_with = "checked::actor_id")]
    actor_id: Arc<str>,
    /// The tenant or billing scope.
    #[serde(deserialize_with = "checked::tenant_id")]
    tenant_id: Arc<str>,
    /// On whose behalf the actor acts; set by the server only.
    #[serde(default, deserialize_with = "checked::subject_id")]
    subject_id: Option<Arc<str>>,
    /// The graph that runs, for authorization.
    #[serde(default, deserialize_with = "checked::graph_id")]
    graph_id: Option<Arc<str>>,
    /// The connection the request selected for tools that need one.
    pub connection_id: Option<ConnectionId>,
    /// The connections the request asked to use.
    pub requested_connection_ids: BTreeSet<ConnectionId>,
    /// The connections the server granted the actor.
    pub grant: ConnectionGrant,
    /// Human approvals for this run: tool call id → the approved hash of its canonical
    /// arguments. A call whose tool needs approval runs only with a matching entry.
    #[serde(default)]
    pub approvals: BTreeMap<ToolCallId, String>,
}

impl RunContext {
    /// A context with no subject, graph or connections; fields are checked for length.
    pub fn new(
        run_id: impl Into<String>,
        actor_id: impl Into<String>,
        tenant_id: impl Into<String>,
    ) -> Result<Self, Error> {
        let actor_id = actor_id.into();
        let tenant_id = tenant_id.into();
        check_ref("actor_id", &actor_id)?;
        check_ref("tenant_id", &tenant_id)?;
        Ok(Self {
            run_id: RunId::new(run_id)?,
            actor_id: actor_id.into(),
            tenant_id: tenant_id.into(),
            subject_id: None,
            graph_id: None,
            connection_id: None,
            requested_connection_ids: BTreeSet::new(),
            grant: ConnectionGrant::default(),
            approvals: BTreeMap::new(),
        })
    }

    /// Sets on whose behalf the actor acts (the server's decision, never the request's); checked
    /// for length like the other references.
    pub fn with_subject(mut self, subject_id: impl Into<String>) -> Result<Self, Error> {
        let subject_id = subject_id.into();
        check_ref("subject_id", &subject_id)?;
        self.subject_id = Some(subject_id.into());
        Ok(self)
    }

    /// Sets the graph that runs, for authorization; checked for length.
    pub fn with_graph(mut self, graph_id: impl Into<String>) -> Result<Self, Error> {
        let graph_id = graph_id.into();
        check_ref("graph_id", &graph_id)?;
        self.graph_id = Some(graph_id.into());
        Ok(self)
    }

    /// `grant ∩ requested`: the only connections a tool of this run may use (invariant 30).
    pub fn effective_connection_ids(&self) -> impl Iterator<Item = &ConnectionId> {
        self.grant
            .allowed_connection_ids
            .intersection(&self.requested_connection_ids)
    }

    /// Whether `id` is in `grant ∩ requested`.
    pub fn may_use_connection(&self, id: &ConnectionId) -> bool {
        self.grant.allowed_connection_ids.contains(id) && self.requested_connection_ids.contains(id)
    }
}

/// The context one tool invocation sees: the run's references plus its own call id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInvocationContext {
    /// The run.
    pub run_id: RunId,
    /// The call being run.
    pub tool_call_id: ToolCallId,
    /// Who acts.
    #[serde(deserialize_with = "checked::actor_id")]
    actor_id: Arc<str>,
    /// The tenant or billing scope.
    #[serde(deserialize_with = "checked::tenant_id")]
    tenant_id: Arc<str>,
    /// On whose behalf.
    #[serde(default, deserialize_with = "checked::subject_id")]
    subject_id: Option<Arc<str>>,
    /// The graph that runs.
    #[serde(default, deserialize_with = "checked::graph_id")]
    graph_id: Option<Arc<str>>,
    /// The connection this invocation may use, already checked against `grant ∩ requested`.
    pub connection_id: Option<ConnectionId>,
}

impl ToolInvocationContext {
    pub(crate) fn new(
        run: &RunContext,
        tool_call_id: ToolCallId,
        connection_id: Option<ConnectionId>,
    ) -> Self {
        Self {
            run_id: run.run_id.clone(),
            tool_call_id,
            actor_id: run.actor_id.clone(),
            tenant_id: run.tenant_id.clone(),
            subject_id: run.subject_id.clone(),
            graph_id: run.graph_id.clone(),
            connection_id,
        }
    }
}

/// The checked references both contexts carry, read-only.
macro_rules! reference_getters {
    ($($context:ty),*) => {$(
        impl $context {
            /// Who acts: `user:<id>`, `agent:<id>` or `service:<name>`.
            pub fn actor_id(&self) -> &str {
                &self.actor_id
            }

            /// The tenant or billing scope.
            pub fn tenant_id(&self) -> &str {
                &self.tenant_id
            }

            /// On whose behalf the actor acts, when the server said so.
            pub fn subject_id(&self) -> Option<&str> {
                self.subject_id.as_deref()
            }

            /// The graph that runs, when known.
            pub fn graph_id(&self) -> Option<&str> {
                self.graph_id.as_deref()
            }
        }
    )*};
}
reference_getters!(RunContext, ToolInvocationContext);

#[cfg(test)]
mod tests;
