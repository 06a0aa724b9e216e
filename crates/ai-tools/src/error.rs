//! The crate's error type: why a contract cannot become a spec or a bound tool.

/// Why a contract was refused at derivation or binding time.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The tool id breaks the id rules.
    #[error(transparent)]
    Id(#[from] ai_core::Error),
    /// The derived input schema leaves the supported subset. The message says what an input
    /// may be, and how to write the usual causes: a tool without parameters (`()` or a unit
    /// struct, whose schema is `null`) and an enum with data.
    #[error(
        "tool {tool}: input schema is outside the supported subset: {violations}; an input is a \
         struct with named fields (`struct NoArgs {{}}` for a tool without any), built of \
         structs, `Option`s, `Vec`s, maps with string or integer keys and unit enums (an enum with data \
         derives `oneOf` or `anyOf`: write it as a unit enum beside optional fields)"
    )]
    UnsupportedSchema {
        /// The tool.
        tool: String,
        /// Each violation, `pointer: reason`, joined by `; `.
        violations: String,
    },
    /// The input schema declares a connection id, which must come from the context instead.
    #[error(
        "tool {tool}: input property {pointer} is a connection id; connections come from the invocation context, never from arguments"
    )]
    ConnectionIdInInput {
        /// The tool.
        tool: String,
        /// Where the property is declared.
        pointer: String,
    },
    /// Two different types of the input or the output take one schemars schema id (two types of
    /// one module that serde names alike, or hand-written impls whose `schema_id` is the same),
    /// so the schema of one would stand in for the other's.
    #[error(
        "tool {tool}: two different {which} types are both named `{name}` for schemars (types of one module that serde names alike, or hand-written `JsonSchema` impls with one `schema_id`), so one's schema would stand in for the other's; give one of them its own name with `#[schemars(rename = \"…\")]`"
    )]
    NameClash {
        /// The tool.
        tool: String,
        /// `input` or `output`.
        which: &'static str,
        /// The name both types take.
        name: String,
    },
    /// Two fields of one type of the input or the output take one name for serde (a `rename`
    /// or `rename_all` gives one the other's name): serde reads only one of them, and writes
    /// both, a key repeated. Found where schemars requires the name twice, that is when neither
    /// field may be left out.
    #[error(
        "tool {tool}: two fields of the {which} type `{ty}` are both named `{name}` for serde (a `rename` or `rename_all` gives one the other's name), so serde reads or writes them as one; give each a name of its own"
    )]
    FieldNameClash {
        /// The tool.
        tool: String,
        /// `input` or `output`.
        which: &'static str,
        /// The type's schemars name.
        ty: String,
        /// The name both fields take.
        name: String,
    },
    /// The redaction allowlist is empty, names a path the output does not have (said with where
    /// the path leaves the output and the fields there, the first 20 of them, so a misspelt one
    /// is seen), or names a field the output may leave out beside a flattened map (whose key of
    /// that name would be shown in its place).
    #[error("tool {tool}: invalid redaction allowlist: {reason}")]
    Redaction {
        /// The tool.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// jsonschema could not compile a derived schema.
    #[error("tool {tool}: cannot compile the {which} schema: {reason}")]
    SchemaCompile {
        /// The tool.
        tool: String,
        /// `input` or `output`.
        which: &'static str,
        /// The compiler's message.
        reason: String,
    },
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
