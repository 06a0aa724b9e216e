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
    use serde::{Deserialize, Deserializer};

    fn check<E: serde::de::Error>(field: &'static str, raw: String) -> Result<String, E> {
        super::check_ref(field, &raw).map_err(E::custom)?;
        Ok(raw)
    }

    macro_rules! fields {
        ($($required:ident)*; $($optional:ident)*) => {
            $(pub(super) fn $required<'de, D: Deserializer<'de>>(de: D) -> Result<String, D::Error> {
                check(stringify!($required), String::deserialize(de)?)
            })*
            $(pub(super) fn $optional<'de, D: Deserializer<'de>>(
                de: D,
            ) -> Result<Option<String>, D::Error> {
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
/// the request). An unknown key is refused when it is read, naming it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionGrant {
    /// Connections the actor may use.
    pub allowed_connection_ids: BTreeSet<ConnectionId>,
}

/// The run's checked references (1..=128 characters, no control character): built once per
/// run and shared, behind one `Arc`, by the run's context and every invocation's, so that an
/// invocation's context costs one reference count, not one per reference.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RunRefs {
    run_id: RunId,
    actor_id: String,
    tenant_id: String,
    subject_id: Option<String>,
    graph_id: Option<String>,
}

/// The run-wide context that policy, catalog and runner decide on.
///
/// The run, actor, tenant, subject and graph are checked references (1..=128 characters, no
/// control character) whether the context is built or deserialized, so they are read through
/// methods; they live behind one shared `Arc`, which each invocation's context shares instead of
/// copying them. Its JSON form is one flat object: `run_id`, `actor_id`, `tenant_id`,
/// `subject_id`, `graph_id`, then the public fields; reading it refuses an unknown key, naming
/// it, so that a mistyped one (`conection_id`) never leaves its setting unset unnoticed.
///
/// Every field is a reference. A secret never lives here (invariant NO_SECRETS_IN_CONTEXT):
/// credentials reach a tool only through a per-invocation [`crate::AuthCapability`].
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "wire::RunContextIn")]
pub struct RunContext {
    /// The run, the actor, the tenant, the subject and the graph.
    refs: Arc<RunRefs>,
    /// The connection the request selected for tools that need one.
    pub connection_id: Option<ConnectionId>,
    /// The connections the request asked to use.
    pub requested_connection_ids: BTreeSet<ConnectionId>,
    /// The connections the server granted the actor.
    pub grant: ConnectionGrant,
    /// Human approvals for this run: tool call id → the approved hash of its tool, its
    /// connection (for a tool that needs one) and its canonical arguments (the `args_hash` of
    /// [`crate::ToolOutcome::ApprovalRequired`]). A call whose tool needs approval runs only
    /// with a matching entry: one for the same id but another tool, another connection or
    /// other arguments refuses it.
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
            refs: Arc::new(RunRefs {
                run_id: RunId::new(run_id)?,
                actor_id,
                tenant_id,
                subject_id: None,
                graph_id: None,
            }),
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
        Arc::make_mut(&mut self.refs).subject_id = Some(subject_id);
        Ok(self)
    }

    /// Sets the graph that runs, for authorization; checked for length.
    pub fn with_graph(mut self, graph_id: impl Into<String>) -> Result<Self, Error> {
        let graph_id = graph_id.into();
        check_ref("graph_id", &graph_id)?;
        Arc::make_mut(&mut self.refs).graph_id = Some(graph_id);
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
///
/// Its JSON form is one flat object: `run_id`, `tool_call_id`, `actor_id`, `tenant_id`,
/// `subject_id`, `graph_id`, `connection_id`; reading it refuses an unknown key, naming it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "wire::InvocationIn")]
pub struct ToolInvocationContext {
    /// The run's references, shared with its [`RunContext`].
    refs: Arc<RunRefs>,
    /// The call being run.
    pub tool_call_id: ToolCallId,
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
            refs: Arc::clone(&run.refs),
            tool_call_id,
            connection_id,
        }
    }
}

/// The checked references both contexts carry, read-only.
macro_rules! reference_getters {
    ($($context:ty),*) => {$(
        impl $context {
            /// The run.
            pub fn run_id(&self) -> &RunId {
                &self.refs.run_id
            }

            /// Who acts: `user:<id>`, `agent:<id>` or `service:<name>`.
            pub fn actor_id(&self) -> &str {
                &self.refs.actor_id
            }

            /// The tenant or billing scope.
            pub fn tenant_id(&self) -> &str {
                &self.refs.tenant_id
            }

            /// On whose behalf the actor acts, when the server said so.
            pub fn subject_id(&self) -> Option<&str> {
                self.refs.subject_id.as_deref()
            }

            /// The graph that runs, when known.
            pub fn graph_id(&self) -> Option<&str> {
                self.refs.graph_id.as_deref()
            }
        }
    )*};
}
reference_getters!(RunContext, ToolInvocationContext);

// Debug shows the flat field list the contexts had when each held its references itself.
impl std::fmt::Debug for RunContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let RunRefs {
            run_id,
            actor_id,
            tenant_id,
            subject_id,
            graph_id,
        } = &*self.refs;
        f.debug_struct("RunContext")
            .field("run_id", run_id)
            .field("actor_id", actor_id)
            .field("tenant_id", tenant_id)
            .field("subject_id", subject_id)
            .field("graph_id", graph_id)
            .field("connection_id", &self.connection_id)
            .field("requested_connection_ids", &self.requested_connection_ids)
            .field("grant", &self.grant)
            .field("approvals", &self.approvals)
            .finish()
    }
}

impl std::fmt::Debug for ToolInvocationContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let RunRefs {
            run_id,
            actor_id,
            tenant_id,
            subject_id,
            graph_id,
        } = &*self.refs;
        f.debug_struct("ToolInvocationContext")
            .field("run_id", run_id)
            .field("tool_call_id", &self.tool_call_id)
            .field("actor_id", actor_id)
            .field("tenant_id", tenant_id)
            .field("subject_id", subject_id)
            .field("graph_id", graph_id)
            .field("connection_id", &self.connection_id)
            .finish()
    }
}

impl Serialize for RunContext {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let refs = &*self.refs;
        wire::RunContextOut {
            run_id: &refs.run_id,
            actor_id: &refs.actor_id,
            tenant_id: &refs.tenant_id,
            subject_id: refs.subject_id.as_deref(),
            graph_id: refs.graph_id.as_deref(),
            connection_id: &self.connection_id,
            requested_connection_ids: &self.requested_connection_ids,
            grant: &self.grant,
            approvals: &self.approvals,
        }
        .serialize(serializer)
    }
}

impl Serialize for ToolInvocationContext {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let refs = &*self.refs;
        wire::InvocationOut {
            run_id: &refs.run_id,
            tool_call_id: &self.tool_call_id,
            actor_id: &refs.actor_id,
            tenant_id: &refs.tenant_id,
            subject_id: refs.subject_id.as_deref(),
            graph_id: refs.graph_id.as_deref(),
            connection_id: &self.connection_id,
        }
        .serialize(serializer)
    }
}

/// The contexts' JSON forms: flat objects, the references first, as when each context held its
/// references as fields of its own. Deserializing puts every reference through its check. Each
/// form bears its context's name (`rename`, `expecting`), as the derived one did: a serializer
/// that writes the name writes the context's, and input of the wrong shape is refused naming the
/// context, not these types. An unknown key is refused, naming it.
mod wire {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    use serde::{Deserialize, Serialize};

    use super::{
        ConnectionGrant, ConnectionId, RunContext, RunRefs, ToolInvocationContext, checked,
    };
    use crate::{RunId, ToolCallId};

    #[derive(Serialize)]
    #[serde(rename = "RunContext")]
    pub(super) struct RunContextOut<'a> {
        pub(super) run_id: &'a RunId,
        pub(super) actor_id: &'a str,
        pub(super) tenant_id: &'a str,
        pub(super) subject_id: Option<&'a str>,
        pub(super) graph_id: Option<&'a str>,
        pub(super) connection_id: &'a Option<ConnectionId>,
        pub(super) requested_connection_ids: &'a BTreeSet<ConnectionId>,
        pub(super) grant: &'a ConnectionGrant,
        pub(super) approvals: &'a BTreeMap<ToolCallId, String>,
    }

    #[derive(Deserialize)]
    #[serde(
        rename = "RunContext",
        expecting = "struct RunContext",
        deny_unknown_fields
    )]
    pub(super) struct RunContextIn {
        run_id: RunId,
        #[serde(deserialize_with = "checked::actor_id")]
        actor_id: String,
        #[serde(deserialize_with = "checked::tenant_id")]
        tenant_id: String,
        #[serde(default, deserialize_with = "checked::subject_id")]
        subject_id: Option<String>,
        #[serde(default, deserialize_with = "checked::graph_id")]
        graph_id: Option<String>,
        connection_id: Option<ConnectionId>,
        requested_connection_ids: BTreeSet<ConnectionId>,
        grant: ConnectionGrant,
        #[serde(default)]
        approvals: BTreeMap<ToolCallId, String>,
    }

    impl From<RunContextIn> for RunContext {
        fn from(read: RunContextIn) -> Self {
            Self {
                refs: Arc::new(RunRefs {
                    run_id: read.run_id,
                    actor_id: read.actor_id,
                    tenant_id: read.tenant_id,
                    subject_id: read.subject_id,
                    graph_id: read.graph_id,
                }),
                connection_id: read.connection_id,
                requested_connection_ids: read.requested_connection_ids,
                grant: read.grant,
                approvals: read.approvals,
            }
        }
    }

    #[derive(Serialize)]
    #[serde(rename = "ToolInvocationContext")]
    pub(super) struct InvocationOut<'a> {
        pub(super) run_id: &'a RunId,
        pub(super) tool_call_id: &'a ToolCallId,
        pub(super) actor_id: &'a str,
        pub(super) tenant_id: &'a str,
        pub(super) subject_id: Option<&'a str>,
        pub(super) graph_id: Option<&'a str>,
        pub(super) connection_id: &'a Option<ConnectionId>,
    }

    #[derive(Deserialize)]
    #[serde(
        rename = "ToolInvocationContext",
        expecting = "struct ToolInvocationContext",
        deny_unknown_fields
    )]
    pub(super) struct InvocationIn {
        run_id: RunId,
        tool_call_id: ToolCallId,
        #[serde(deserialize_with = "checked::actor_id")]
        actor_id: String,
        #[serde(deserialize_with = "checked::tenant_id")]
        tenant_id: String,
        #[serde(default, deserialize_with = "checked::subject_id")]
        subject_id: Option<String>,
        #[serde(default, deserialize_with = "checked::graph_id")]
        graph_id: Option<String>,
        connection_id: Option<ConnectionId>,
    }

    impl From<InvocationIn> for ToolInvocationContext {
        fn from(read: InvocationIn) -> Self {
            Self {
                refs: Arc::new(RunRefs {
                    run_id: read.run_id,
                    actor_id: read.actor_id,
                    tenant_id: read.tenant_id,
                    subject_id: read.subject_id,
                    graph_id: read.graph_id,
                }),
                tool_call_id: read.tool_call_id,
                connection_id: read.connection_id,
            }
        }
    }
}

#[cfg(test)]
mod tests;
