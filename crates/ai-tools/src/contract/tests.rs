//! Spec derivation: determinism, the subset, connection ids.

use std::collections::BTreeMap;

use ai_core::{Capabilities, ExecPermit, ToolEffect, ToolError, ToolInvocationContext};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Error, ToolContract, schema_hash, tool_spec};

#[derive(Serialize, JsonSchema)]
struct Out {
    ok: bool,
}

/// A contract over input type `I`, for derivation tests.
struct Probe<I>(std::marker::PhantomData<I>);

#[async_trait::async_trait]
impl<I: serde::de::DeserializeOwned + JsonSchema + Send + Sync + 'static> ToolContract
    for Probe<I>
{
    type Input = I;
    type Output = Out;
    const ID: &'static str = "core__probe";
    const DESCRIPTION: &'static str = "probe";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;
    const REDACTION: &'static [&'static str] = &["ok"];
    async fn execute(
        &self,
        _: &ExecPermit,
        _: I,
        _: &ToolInvocationContext,
        _: &Capabilities,
    ) -> Result<Out, ToolError> {
        Ok(Out { ok: true })
    }
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Plain {
    /// The name.
    name: String,
    count: Option<u32>,
    tags: Vec<String>,
    extra: BTreeMap<String, String>,
}

#[test]
fn derivation_is_deterministic_and_hashed() {
    let a = tool_spec::<Probe<Plain>>().unwrap();
    let b = tool_spec::<Probe<Plain>>().unwrap();
    assert_eq!(
        serde_json::to_vec(&a.input_schema).unwrap(),
        serde_json::to_vec(&b.input_schema).unwrap()
    );
    assert_eq!(schema_hash(&a), schema_hash(&b));
    assert_eq!(schema_hash(&a).len(), 64);
    assert!(a.input_schema.get("$schema").is_none());
    assert_eq!(
        a.input_schema["properties"]["count"]["type"],
        serde_json::json!(["integer", "null"])
    );
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Camel {
    #[serde(rename = "connectionId")]
    connection: String,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Inner {
    connection_id: String,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Nested {
    inner: Inner,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)]
struct Kebab {
    connection_id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "PascalCase")]
#[allow(dead_code)]
struct Pascal {
    connection_id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(dead_code)]
struct Screaming {
    connection_id: String,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct NotAConnection {
    connection: String,
    connection_ids_seen: u32,
    id: String,
}

#[test]
fn connection_ids_are_refused_at_derivation() {
    for (err, pointer) in [
        (
            tool_spec::<Probe<Camel>>().unwrap_err(),
            "/properties/connectionId",
        ),
        (
            tool_spec::<Probe<Inner>>().unwrap_err(),
            "/properties/connection_id",
        ),
        (
            tool_spec::<Probe<Nested>>().unwrap_err(),
            "/definitions/Inner/properties/connection_id",
        ),
        // `rename_all` spells it other ways; each is still a connection id.
        (
            tool_spec::<Probe<Kebab>>().unwrap_err(),
            "/properties/connection-id",
        ),
        (
            tool_spec::<Probe<Pascal>>().unwrap_err(),
            "/properties/ConnectionId",
        ),
        (
            tool_spec::<Probe<Screaming>>().unwrap_err(),
            "/properties/CONNECTION_ID",
        ),
    ] {
        match err {
            Error::ConnectionIdInInput { pointer: at, .. } => assert_eq!(at, pointer),
            other => panic!("expected a connection id error, got {other}"),
        }
    }
    assert!(tool_spec::<Probe<NotAConnection>>().is_ok());
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
enum Shape {
    Circle { r: f64 },
    Square { side: f64 },
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct WithEnum {
    shape: Shape,
}

#[test]
fn schemas_outside_the_subset_are_refused() {
    let err = tool_spec::<Probe<WithEnum>>().unwrap_err().to_string();
    assert!(err.contains("outside the supported subset"), "{err}");
    assert!(err.contains("oneOf"), "{err}");
    assert!(err.contains("/definitions/Shape"), "{err}");
}
