//! The OpenAI-compatible HTTP completion client: [`OpenAiCompletion`] behind
//! [`ai_core::CompletionPort`], over reqwest (rustls on ring, HTTP/1.1) and the sans-IO codecs of
//! `wire_openai`.
//!
//! One call is one streamed request (`stream: true`; chat also asks for `include_usage`) to
//! `{base_url}/chat/completions` or `{base_url}/responses`. Every decoded fragment goes to the
//! [`DeltaSink`] as soon as its bytes arrive; the decoder's assembled result is the completion.
//! A 200 in JSON (`application/json`) is a server that ignores `stream: true` (some proxies and
//! local servers), unless its first bytes (past a BOM and whitespace) are an SSE field or
//! comment: then it is the stream asked for, mislabelled (Foundry Local labels its streams so),
//! and read as one. A JSON answer's whole chat completion or Responses `response` is decoded by
//! `wire_openai::chat::decode_completion` or `wire_openai::responses::decode_response` into the
//! same completion a stream of it would give (its deltas go to the sink at once), under the same
//! limits; a JSON error body is the provider's error, and any other JSON is reported as neither
//! an event stream nor a whole answer (a body that opens as no JSON object or array, a page
//! labelled JSON, as soon as its first bytes show it). A body of another type, or of none, is
//! read as a stream all the same when its first bytes are an SSE field or comment (some servers
//! label their streams `text/plain`, or not at all), or `{`: the decoders read a body that opens
//! with `{`, whatever its label, as a whole answer (decolua/9router#3492: a whole
//! `chat.completion` labelled `text/event-stream`). One that opens otherwise (a web page where
//! the API was expected, a JSON array) is refused by its content type as soon as those bytes
//! arrive, rather than waited on until it stalls. Either is reported by its content type when
//! it fails to decode. A body labelled `text/event-stream` is refused the same way only when it
//! opens as a web page or a JSON array (`<` or `[`), since the SSE rules let a stream open with
//! any field. No compression is asked for or decoded: a 2xx body whose `Content-Encoding`, on
//! any of its lines, lists a coding but `identity` is refused by it at once, and an error
//! answer's so encoded is not read, only its codings named. An error answer is named by its
//! status and the provider's message: from a JSON body (also one labelled `text/event-stream`;
//! one cut before its value closes is read to its last whole member, so a message that arrived
//! whole is kept), the JSON of the first event of a `text/event-stream` one (as it stands when
//! the read stops before its blank line), or the first line of a `text/plain` one.
//!
//! **Timeouts.** [`OpenAiConfig::request_timeout`] bounds the wait for the first body byte,
//! and within it [`OpenAiConfig::connect_timeout`] the connection's (shared among a host's
//! addresses, so one that never answers gives way to the next); from the first byte on,
//! [`OpenAiConfig::idle_timeout`] bounds the wait for progress: a complete SSE event,
//! not any byte, so keep-alive comments or an event trickled byte by byte do not hold a stalled
//! stream open. [`OpenAiConfig::max_call`] bounds the whole call, retries and their waits
//! included, so a stream that keeps sending events but never ends cannot hold it forever
//! either. An error answer's body is read for at most the idle timeout, and no more than 5 s,
//! from its status, and never past the call's limit: one the server holds open past that is
//! reported by what was read of it, said to be cut (`its body cut: not ended within 5 s`, or
//! `its body cut at the call's time limit of …`), not minutes later. So is one whose read
//! stops short of what it shows otherwise, saying why: `the connection broke`, `it ended before
//! its JSON value closed`, or `not ended within 64 KiB` (the read's bound).
//!
//! **Retries.** A connection error, a request timeout, or a 408, 409, 429 or 5xx answer that
//! happens *before the first body byte* is retried, up to [`OpenAiConfig::max_retries`] times,
//! after exponential backoff with full jitter, or after the server's `retry-after-ms` /
//! `Retry-After` (seconds) when it sends one. A server that asks for a longer wait than
//! [`OpenAiConfig::max_retry_after`] gets no retry: the call fails at once, its error naming the
//! wait asked for and the limit. Neither is the wait cut to the limit nor the header ignored for
//! the backoff (as OpenAI's SDKs do past 60 s): a server that asks for an hour (a spent quota)
//! would refuse an earlier retry again, and the caller, told how long, can decide. Nothing is
//! retried once a body byte has arrived: the caller may already have shown the deltas. Nor is a
//! call that reached its time limit, and a retry whose wait would end past it is not made. Nor is a
//! connection TLS refused for what another attempt would meet again: the server's certificate
//! (untrusted, expired, for another name, none), or no TLS version or cipher suite in common
//! ([`fails_again`]). Other 4xx are not retried. As in OpenAI's own SDKs, a server's
//! `x-should-retry: true` or `false` overrides the status either way.
//!
//! **The key.** The API key stays inside the adapter: it is sent only as the `Authorization`
//! header (marked sensitive), and every error message is scrubbed of it (a provider's message
//! before it is shortened, so a cut never leaves part of the key; a message past 64 KiB, a
//! whole answer's or a stream's error, is cut there first, a secret that starts before that
//! cut still cut whole, so the scrub's memory stays bounded), of the base URL's secrets
//! (its password, or a user name without one, and the values of its query parameters named like
//! a key), which a server may echo in its error, and of the `Basic` credentials sent for the
//! user and password (also without their `=` padding, and in base64url, padded or not). Each
//! is found as written, and a URL's secret percent-decoded too; escaped otherwise (`%2f` for
//! `%2F`, `%21` for `!`, `+` for a space); quoted by any JSON writer (`\"`, `\/`, `\u002b` or
//! any other character as a `\u` escape, in either case); percent-escaped and then JSON-quoted
//! (a URL echoed inside a JSON error: `ab\/cd%2Bef`, `\u00252B`); and, for a URL's secret
//! holding a line break, line by line. A URL's secret is looked for only in forms at least 4
//! characters long (a shorter one is no real secret, and replacing it would mangle messages:
//! `?code=1` would turn `HTTP 401` into `HTTP 40[redacted]`), and the key in escaped forms only
//! when that long; a shorter key is replaced only where it stands alone, not next to a letter,
//! digit or `_` (`bad key x1`, not `max_x1`). Not caught: a secret escaped twice over
//! otherwise (JSON inside JSON, JSON escapes inside percent escapes), in HTML entities, cut
//! short, in another case, or encoded otherwise (the key or a query value in base64). Neither
//! the adapter's nor the config's `Debug` prints the key (nor the base URL's credentials or
//! query). It is never sent in clear to another machine: a key (or a base URL's
//! `user:password@`, or a query parameter of it named like a key, `?api-key=…`) with an
//! `http://` base URL whose host is not loopback (`localhost`, `127.0.0.1`, `::1`) is refused
//! ([`OpenAiConfigError::KeyOverHttp`]) unless [`OpenAiConfig::allow_key_over_http`] says so;
//! a `localhost` name (or one under it) is connected to on the loopback addresses, never looked
//! up, since a resolver may ask DNS for it.
//! Redirects are not followed, so the key goes only to the configured host.

mod error_body;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod timing_tests;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use ai_core::{
    CancellationToken, CompletionDelta, CompletionError, CompletionPort, DeltaSink, LlmCompletion,
    LlmRequest, Secret,
};
use async_trait::async_trait;
use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderValue,
};
use reqwest::{StatusCode, Url};
use rustls_platform_verifier::BuilderVerifierExt;
use tokio::time::Instant;
use wire_openai::{DecodeError, Delivery, Limits};

/// How many characters of a provider's error message an error keeps.
pub const MAX_PROVIDER_MESSAGE_CHARS: usize = 300;

/// How many bytes of an error response body are read to find the provider's message.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// The longest an error response body is read for, from its status (less when the idle timeout
/// is shorter): an error body is small, and a server that holds it open is not waited on.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(5);

/// How many bytes of a message [`OpenAiCompletion::scrub`] keeps (a provider's message in a
/// whole answer or a stream may be as long as the answer, megabytes): a longer one is cut there.
const MAX_SCRUBBED_BYTES: usize = 64 * 1024;

/// Which OpenAI wire format the endpoint speaks. More may come, so a match needs a catch-all
/// arm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenAiWire {
    /// Chat completions: `POST {base_url}/chat/completions`.
    #[default]
    Chat,
    /// The Responses API: `POST {base_url}/responses`.
    Responses,
}

impl OpenAiWire {
    /// The path segments joined to the base URL.
    fn segments(self) -> &'static [&'static str] {
        match self {
            Self::Chat => &["chat", "completions"],
            Self::Responses => &["responses"],
        }
    }
}

/// Where and how [`OpenAiCompletion`] calls a model. Plain data: the composition root fills it
/// from its configuration; [`OpenAiConfig::new`] gives the defaults.
///
/// Its `Debug` never prints the key, nor the base URL's credentials or query.
///
/// ```
/// use std::time::Duration;
/// use adapters::{OpenAiConfig, OpenAiWire};
/// let config = OpenAiConfig {
///     api_key: Some(ai_core::Secret::new("sk-…")),
///     wire: OpenAiWire::Responses,
///     max_retries: 3,
///     ..OpenAiConfig::new("https://api.openai.com/v1", "gpt-4.1")
/// };
/// assert!(!format!("{config:?}").contains("sk-"));
/// ```
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API root, e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`; the wire's
    /// path (`/chat/completions`, `/responses`) is joined to it after one slash, however many
    /// end it, and its query is kept.
    pub base_url: String,
    /// The model name sent in every request.
    pub model: String,
    /// The bearer key; `None` for local servers that need none (no `Authorization` header).
    pub api_key: Option<Secret>,
    /// Send the key over plain `http://` to a host that is not loopback, where anyone on the
    /// path can read it. Off by default: such a config is refused
    /// ([`OpenAiConfigError::KeyOverHttp`]); turn it on only for a network you trust (a
    /// container network, say). A loopback host (`localhost`, `*.localhost`, `127.0.0.0/8`,
    /// `::1`) never needs it, nor does a config without a key or credentials in the base URL
    /// (`http://user:password@host`, sent as a `Basic` header, or a query parameter named like a
    /// key: `key`, `api-key`, `api_key`, `apikey`, `token`, `access_token`, `code`, `sig`, or a
    /// name ending in `-key`, `_key`, `-token` or `_token`), which are held to the same rule.
    pub allow_key_over_http: bool,
    /// The wire format.
    pub wire: OpenAiWire,
    /// On the Responses wire, carry a reasoning model's reasoning between the requests of a
    /// thread without the provider storing it: each request says `"store": false` and
    /// `"include": ["reasoning.encrypted_content"]`, and sends each call's reasoning items back
    /// just before it ([`wire_openai::responses::RequestOptions::stateless_reasoning`]). Off by
    /// default: a model that does not reason refuses that request (400). Chat ignores it.
    pub stateless_reasoning: bool,
    /// Send the history's call ids as nine letters and digits, on either wire
    /// ([`wire_openai::chat::RequestOptions::mistral_call_ids`],
    /// [`wire_openai::responses::RequestOptions::mistral_call_ids`]): Mistral's API refuses any
    /// other, and so do its open models' chat templates whichever server runs them (mistral.rs
    /// serves the Responses API too).
    /// [`OpenAiConfig::new`] turns it on for a base URL on `mistral.ai` and for a model whose
    /// name names a Mistral model family (`mistral`, `magistral`, `devstral`, `codestral`,
    /// `ministral`, `mixtral`, `pixtral`, in any case); set it to say otherwise.
    pub mistral_call_ids: bool,
    /// The longest wait from sending a request to the first body byte (connecting, sending, the
    /// response head and the first chunk).
    pub request_timeout: Duration,
    /// The longest wait to connect (TCP, then TLS), within the request timeout. A host with
    /// several addresses of one family shares it among them, each tried in turn for its share,
    /// so an address that never answers (a blackholed route) gives way to the next one instead
    /// of holding the whole request timeout; the other family (IPv6 or IPv4) is tried beside
    /// them after 300 ms (Happy Eyeballs). A connection that times out is retried as any
    /// connection error; its error names this timeout and its length.
    pub connect_timeout: Duration,
    /// The longest wait for progress once the body has begun: from its first byte, then from
    /// each complete SSE event (whatever the decoder makes of it, an event type it ignores
    /// included). Comments (`: keep-alive`), blank lines and the bytes of an event not yet ended
    /// are not progress, so they do not hold a stalled stream open. A whole JSON answer (a server
    /// that ignores `stream: true`) has no events: any chunk of it is progress, and nothing is
    /// waited for once its JSON closes. Nothing is waited for after the stream's end marker
    /// (`[DONE]`, or a Responses terminal event): the answer is whole there, whether or not the
    /// body then ends. It also bounds, at most 5 s of it, the read of an error answer's body
    /// from its status.
    pub idle_timeout: Duration,
    /// The longest a whole call may take, from its start to its answer: every attempt, every
    /// wait between them and the whole stream, however steadily the server sends events. Past
    /// it the call ends with a transport error naming the limit and `llm.max_call_ms` (the
    /// `cogni.toml` key that sets it), and is never retried: once the stream has begun, the deltas
    /// may have been shown, and before it, the call's time is spent. A retry whose wait would end
    /// past it is not made.
    pub max_call: Duration,
    /// Retries after the first attempt (0: never retry).
    pub max_retries: u32,
    /// The first backoff's upper bound; it doubles with each retry (full jitter: the wait is
    /// uniform between zero and the bound).
    pub base_backoff: Duration,
    /// The largest backoff bound.
    pub max_backoff: Duration,
    /// The longest `Retry-After` the client waits; a server that asks for longer gets no retry,
    /// and the error names the wait it asked for and this limit.
    pub max_retry_after: Duration,
    /// The decoder's memory limits.
    pub limits: Limits,
}

impl OpenAiConfig {
    /// A config with the defaults: chat wire (no stateless reasoning; Mistral's call ids when
    /// the base URL or the model is Mistral's: [`OpenAiConfig::mistral_call_ids`]), no key,
    /// 120 s request and idle timeouts, 10 s to connect, a call limited to 10 minutes, 2
    /// retries, 500 ms base backoff up to 8 s, `Retry-After` honoured up to 60 s, default decoder
    /// limits.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        let (base_url, model) = (base_url.into(), model.into());
        Self {
            mistral_call_ids: takes_mistral_call_ids(&base_url, &model),
            base_url,
            model,
            api_key: None,
            allow_key_over_http: false,
            wire: OpenAiWire::Chat,
            stateless_reasoning: false,
            request_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_call: Duration::from_secs(600),
            max_retries: 2,
            base_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
            limits: Limits::default(),
        }
    }
}

/// Whether a server at `base_url` running `model` takes back only Mistral's call ids: its host
/// is `mistral.ai` or under it, or the model's name names a Mistral model family.
fn takes_mistral_call_ids(base_url: &str, model: &str) -> bool {
    let host = Url::parse(base_url.trim())
        .ok()
        .and_then(|url| url.host_str().map(str::to_ascii_lowercase));
    let model = model.to_ascii_lowercase();
    host.is_some_and(|host| host == "mistral.ai" || host.ends_with(".mistral.ai"))
        || MISTRAL_FAMILIES.iter().any(|family| model.contains(family))
}

/// The names of Mistral's model families, as model names (`mistral-large-latest`,
/// `mistralai/Devstral-Small-2505`, `magistral:24b`, `Mixtral-8x22B-Instruct-v0.1`) hold them.
const MISTRAL_FAMILIES: [&str; 7] = [
    "mistral",
    "magistral",
    "devstral",
    "codestral",
    "ministral",
    "mixtral",
    "pixtral",
];

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &redacted_url_text(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("allow_key_over_http", &self.allow_key_over_http)
            .field("wire", &self.wire)
            .field("stateless_reasoning", &self.stateless_reasoning)
            .field("mistral_call_ids", &self.mistral_call_ids)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_call", &self.max_call)
            .field("max_retries", &self.max_retries)
            .field("base_backoff", &self.base_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("max_retry_after", &self.max_retry_after)
            .field("limits", &self.limits)
            .finish()
    }
}

/// Why an [`OpenAiConfig`] cannot make a client. Messages never hold the key, nor the base
/// URL's credentials or query.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenAiConfigError {
    /// The base URL is not an absolute `http` or `https` URL.
    #[error("invalid LLM base URL: {0}")]
    BaseUrl(String),
    /// The model name is empty.
    #[error("the LLM model name is empty")]
    EmptyModel,
    /// The key cannot be sent as a bearer token: it is empty, or holds whitespace (in it or
    /// around it: a `.env` line's trailing space, a pasted line break) or other characters an
    /// HTTP header cannot carry.
    #[error(
        "the LLM API key is not a valid bearer token (empty, or it holds whitespace or control \
         characters)"
    )]
    ApiKey,
    /// A key (or the base URL's credentials) would be sent in clear: the base URL is `http://`
    /// and its host is not loopback, and [`OpenAiConfig::allow_key_over_http`] is off.
    #[error(
        "the LLM API key would be sent unencrypted: the base URL is http:// to a host that is not \
         loopback; use https://, or allow it for a trusted network (llm.allow_key_over_http)"
    )]
    KeyOverHttp,
    /// The HTTP client (TLS roots, settings) could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// An OpenAI-compatible model endpoint over HTTP, for chat completions or the Responses API.
///
/// ```no_run
/// # async fn demo(request: ai_core::LlmRequest) -> Result<(), Box<dyn std::error::Error>> {
/// use ai_core::{CancellationToken, CompletionDelta, CompletionPort, Secret};
/// use adapters::{OpenAiCompletion, OpenAiConfig};
/// let model = OpenAiCompletion::new(OpenAiConfig {
///     api_key: Some(Secret::new("sk-…")),
///     ..OpenAiConfig::new("https://api.openai.com/v1", "gpt-4.1")
/// })?;
/// let mut print = |delta: CompletionDelta| {
///     if let CompletionDelta::Text { delta } = delta { print!("{delta}") }
/// };
/// let completion = model.complete(&request, &mut print, &CancellationToken::new()).await?;
/// # let _ = completion; Ok(()) }
/// ```
pub struct OpenAiCompletion {
    client: reqwest::Client,
    url: Url,
    endpoint: String,
    model: String,
    api_key: Option<Secret>,
    /// What messages never show besides the key: the base URL's credentials and key-named query
    /// values ([`url_secrets`]).
    url_secrets: UrlSecrets,
    wire: OpenAiWire,
    /// The Responses request's options ([`OpenAiConfig::stateless_reasoning`],
    /// [`OpenAiConfig::mistral_call_ids`]).
    responses: wire_openai::responses::RequestOptions,
    /// The chat request's options ([`OpenAiConfig::mistral_call_ids`]).
    chat: wire_openai::chat::RequestOptions,
    request_timeout: Duration,
    connect_timeout: Duration,
    idle_timeout: Duration,
    max_call: Duration,
    max_retries: u32,
    base_backoff: Duration,
    max_backoff: Duration,
    max_retry_after: Duration,
    limits: Limits,
}

impl fmt::Debug for OpenAiCompletion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompletion")
            .field("endpoint", &self.endpoint)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("wire", &self.wire)
            .field("responses", &self.responses)
            .field("chat", &self.chat)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_call", &self.max_call)
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

impl OpenAiCompletion {
    /// Checks the config and builds the client (TLS with the platform's roots, no proxy: the
    /// adapter reads nothing from the environment).
    pub fn new(config: OpenAiConfig) -> Result<Self, OpenAiConfigError> {
        let mut url = Url::parse(config.base_url.trim())
            .map_err(|e| OpenAiConfigError::BaseUrl(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(OpenAiConfigError::BaseUrl(format!(
                "the scheme must be http or https, not {:?}",
                url.scheme()
            )));
        }
        // The wire's path follows one slash, however many end the base URL (`…/v1//`).
        let trimmed = url.path().trim_end_matches('/').to_owned();
        url.set_path(&trimmed);
        {
            let Ok(mut segments) = url.path_segments_mut() else {
                return Err(OpenAiConfigError::BaseUrl(
                    "the URL cannot have a path".into(),
                ));
            };
            segments.pop_if_empty().extend(config.wire.segments());
        }
        url.set_fragment(None);
        if config.model.trim().is_empty() {
            return Err(OpenAiConfigError::EmptyModel);
        }
        if let Some(key) = &config.api_key {
            let valid = !key.expose().is_empty()
                && !key.expose().chars().any(char::is_whitespace)
                && HeaderValue::from_str(&format!("Bearer {}", key.expose())).is_ok();
            if !valid {
                return Err(OpenAiConfigError::ApiKey);
            }
        }
        // The URL's user and password go as a `Basic` header when there is no key; a key in its
        // query (`?api-key=…`, as Azure-style gateways take it) goes in the request line.
        let credentials = config.api_key.is_some()
            || !url.username().is_empty()
            || url.password().is_some()
            || url.query_pairs().any(|(name, _)| names_a_key(&name));
        if credentials && url.scheme() == "http" && !is_loopback(&url) {
            if !config.allow_key_over_http {
                return Err(OpenAiConfigError::KeyOverHttp);
            }
            tracing::warn!(
                endpoint = %redacted_url(&url),
                "the LLM API key is sent unencrypted over http:// to a host that is not \
                 loopback (allowed by llm.allow_key_over_http)"
            );
        }
        Ok(Self {
            client: http_client(&url, config.connect_timeout)?,
            endpoint: redacted_url(&url),
            url_secrets: url_secrets(&url, config.api_key.as_ref()),
            url,
            model: config.model,
            api_key: config.api_key,
            wire: config.wire,
            responses: wire_openai::responses::RequestOptions::default()
                .with_stateless_reasoning(config.stateless_reasoning)
                .with_mistral_call_ids(config.mistral_call_ids),
            chat: wire_openai::chat::RequestOptions::default()
                .with_mistral_call_ids(config.mistral_call_ids),
            request_timeout: config.request_timeout,
            connect_timeout: config.connect_timeout,
            idle_timeout: config.idle_timeout,
            max_call: config.max_call,
            max_retries: config.max_retries,
            base_backoff: config.base_backoff,
            max_backoff: config.max_backoff,
            max_retry_after: config.max_retry_after,
            limits: config.limits,
        })
    }

    /// The URL requests go to, without credentials or query and with the path segments that
    /// may be a key hidden ([`crate::shown_url`]): the name errors use.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn encode(&self, request: &LlmRequest) -> Result<Vec<u8>, CompletionError> {
        let body = match self.wire {
            OpenAiWire::Chat => wire_openai::chat::encode_request_with(
                request,
                &self.model,
                Delivery::Stream,
                self.chat,
            ),
            OpenAiWire::Responses => wire_openai::responses::encode_request_with(
                request,
                &self.model,
                Delivery::Stream,
                self.responses,
            ),
        }
        .map_err(|e| self.not_sent(e.into()))?;
        serde_json::to_vec(&body).map_err(|e| {
            self.not_sent(CompletionError::Request(format!(
                "the request does not serialize: {e}"
            )))
        })
    }

    /// A request refused before it was sent ([`CompletionError::Request`], as wire-openai maps
    /// an encode failure to it), the endpoint named first.
    fn not_sent(&self, error: CompletionError) -> CompletionError {
        match error {
            CompletionError::Request(what) => {
                CompletionError::Request(format!("POST {}: {what}", self.endpoint))
            }
            other => other,
        }
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(key) = &self.api_key
            && let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {}", key.expose()))
        {
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        headers
    }

    /// Removes every occurrence of the key, and of the base URL's secrets ([`url_secrets`]),
    /// from a message (a server may echo the request's header or URL). A key shorter than
    /// [`MIN_SECRET_CHARS`] is removed only where it stands alone ([`standalone_cuts`]). Every
    /// form is looked for in the message as it came, and the stretches found are cut out
    /// together ([`redacted`]): a secret replaced first cannot break another that holds it
    /// (the key inside a longer query value), leaving the rest of that one to show.
    ///
    /// A message longer than [`MAX_SCRUBBED_BYTES`] (a whole answer's or a stream's error,
    /// which may be megabytes) is cut there, with `…`: the search keeps a record of 16 bytes
    /// per byte for each of its views of the message. It looks past the cut by as far as one
    /// echo of a secret may reach, so a secret that starts before the cut is still cut whole,
    /// not left showing its first part.
    fn scrub(&self, message: String) -> String {
        let shown_to = message.floor_char_boundary(MAX_SCRUBBED_BYTES);
        if shown_to == message.len() {
            let cuts = self.secret_cuts(&message);
            if cuts.is_empty() {
                return message;
            }
            return redacted(&message, cuts, message.len());
        }
        let text =
            &message[..message.floor_char_boundary(shown_to.saturating_add(self.echo_reach()))];
        let mut shown = redacted(text, self.secret_cuts(text), shown_to);
        shown.push('…');
        shown
    }

    /// The stretches of `message` that show the key or a base URL's secret, in any form
    /// [`Self::scrub`] looks for, in no order and perhaps overlapping.
    fn secret_cuts(&self, message: &str) -> Vec<std::ops::Range<usize>> {
        let mut cuts = Vec::new();
        match self.api_key.as_ref().map(Secret::expose) {
            Some(key) if key.chars().count() >= MIN_SECRET_CHARS => {
                literal_cuts(message, key, &mut cuts);
            }
            Some(key) if !key.is_empty() => standalone_cuts(message, key, &mut cuts),
            _ => {}
        }
        for secret in &self.url_secrets.literal {
            literal_cuts(message, secret, &mut cuts);
        }
        // Escapes the URL does not write (`%2f` for its `%2F`, `%21` for its `!`), or a JSON
        // writer's (`\/`, `\u002b`).
        if message.contains('%') || message.contains('\\') {
            escaped_cuts(message, &self.url_secrets.decoded, &mut cuts);
        }
        cuts
    }

    /// How many bytes of a message one echo of a secret may take, and the character after it
    /// that tells whether a short key stands alone: the longest literal form, or 18 bytes for
    /// each byte of a form found escaped (a byte percent-escaped, and each character of that
    /// escape JSON-quoted as a `\u` escape: `\u0025\u0032\u0042`).
    fn echo_reach(&self) -> usize {
        let key = self.api_key.as_ref().map_or(0, |key| key.expose().len());
        let literal = self.url_secrets.literal.iter().map(String::len).max();
        let decoded = self.url_secrets.decoded.iter().map(Vec::len).max();
        key.max(literal.unwrap_or(0))
            .max(decoded.unwrap_or(0).saturating_mul(18))
            .saturating_add(4)
    }

    /// A provider's or decoder's text as an error shows it (and the retry log logs it): the key
    /// scrubbed out, its control characters replaced (a line break or tab by a space, any other
    /// by U+FFFD: `error_body::one_safe_line`), *then* cut to [`MAX_PROVIDER_MESSAGE_CHARS`]
    /// characters with `…`. The order matters: a cut through the key leaves a prefix that no
    /// longer matches it, so scrubbing afterwards would show that prefix. Outside text is
    /// shortened and made safe only here, so no caller can get the order wrong or show a
    /// server's escape sequence on the operator's terminal.
    fn shown(&self, text: &str) -> String {
        let text = self.scrub(text.to_owned());
        let text = error_body::one_safe_line(&text);
        let text = text.trim();
        match text.char_indices().nth(MAX_PROVIDER_MESSAGE_CHARS) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.to_owned(),
        }
    }

    fn scrubbed(&self, error: CompletionError) -> CompletionError {
        match error {
            CompletionError::Transport(m) => CompletionError::Transport(self.scrub(m)),
            CompletionError::Provider(m) => CompletionError::Provider(self.scrub(m)),
            CompletionError::Decode(m) => CompletionError::Decode(self.scrub(m)),
            CompletionError::Request(m) => CompletionError::Request(self.scrub(m)),
            other => other,
        }
    }

    /// The wait before retry number `retry` (0-based): full jitter under a doubling bound.
    fn backoff(&self, retry: u32) -> Duration {
        let bound = self
            .base_backoff
            .saturating_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX))
            .min(self.max_backoff);
        bound.mul_f64(jitter_fraction())
    }

    async fn run(
        &self,
        body: &[u8],
        deltas: &mut dyn DeltaSink,
        cancel: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        let limit = after(self.max_call);
        let mut retry = 0u32;
        loop {
            let (error, retry_after) = match self.attempt(body, deltas, cancel, limit).await {
                Ok(completion) => return Ok(completion),
                Err(Failure::Final(error)) => return Err(error),
                Err(Failure::Retryable { error, retry_after }) => (error, retry_after),
            };
            if retry >= self.max_retries {
                return Err(if self.max_retries == 0 {
                    error
                } else {
                    append(error, &format!(" (gave up after {} attempts)", retry + 1))
                });
            }
            let wait = match retry_after {
                Some(wait) if wait > self.max_retry_after => {
                    return Err(append(
                        error,
                        &format!(
                            " (not retried: the server asks to wait {} s, more than the {} s limit)",
                            wait.as_secs_f64(),
                            self.max_retry_after.as_secs_f64()
                        ),
                    ));
                }
                Some(wait) => wait,
                None => self.backoff(retry),
            };
            if after(wait) >= limit {
                return Err(append(
                    error,
                    &format!(
                        " (not retried: the wait of {} s would end past the call's time limit of {})",
                        wait.as_secs_f64(),
                        self.limit_name()
                    ),
                ));
            }
            tracing::warn!(
                endpoint = %self.endpoint,
                retry = retry + 1,
                wait_ms = wait.as_millis() as u64,
                error = %self.scrubbed(error),
                "model call failed before the first byte; retrying"
            );
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(CompletionError::Cancelled),
                () = tokio::time::sleep(wait) => {}
            }
            retry += 1;
        }
    }

    /// One request, to end by `limit` (the call's). Failures before the first body byte may be
    /// retried, but for the call's limit; none after.
    async fn attempt(
        &self,
        body: &[u8],
        deltas: &mut dyn DeltaSink,
        cancel: &CancellationToken,
        limit: Instant,
    ) -> Result<LlmCompletion, Failure> {
        let deadline = after(self.request_timeout).min(limit);
        let send = self
            .client
            .post(self.url.clone())
            .headers(self.headers())
            .body(body.to_vec())
            .send();
        let response = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(Failure::Final(CompletionError::Cancelled)),
            sent = tokio::time::timeout_at(deadline, send) => match sent {
                Err(_) if deadline >= limit => return Err(Failure::Final(self.past_limit(0))),
                Err(_) => return Err(self.retryable(self.no_first_byte())),
                Ok(Err(error)) if error.is_builder() => {
                    return Err(Failure::Final(self.transport(&format!(
                        "the request could not be built: {}",
                        describe(error)
                    ))));
                }
                Ok(Err(error)) if error.is_connect() && error.is_timeout() => {
                    return Err(self.retryable(self.timed_out(
                        "connection",
                        self.connect_timeout,
                        "connect timeout",
                    )));
                }
                Ok(Err(error)) if fails_again(&error) => {
                    let error = format!("{} (not retried)", describe(error));
                    return Err(Failure::Final(self.transport(&error)));
                }
                Ok(Err(error)) => {
                    return Err(self.retryable(self.transport(&describe(error))));
                }
                Ok(Ok(response)) => response,
            },
        };

        let status = response.status();
        if !status.is_success() {
            return Err(self.http_error(response, limit, cancel).await);
        }
        // No `Accept-Encoding` is sent and none is decoded: a compressed body would reach the
        // decoder as bytes that never make an event, and stall.
        if let Some(encoding) = self.compression(response.headers()) {
            return Err(Failure::Final(CompletionError::Decode(format!(
                "POST {}: HTTP {}: the server compressed its answer (content-encoding: \
                 {encoding}), though the request asked for none",
                self.endpoint,
                status_text(status),
            ))));
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_ascii_lowercase());
        let json_answer = content_type
            .as_deref()
            .is_some_and(|v| v.starts_with("application/json"));
        let mut body = Peeked::new(response);
        // A body labelled JSON may still be the stream asked for (Foundry Local labels its
        // streams so): its first bytes tell.
        if json_answer
            && !self
                .opens_as_sse(&mut body, deadline, limit, cancel)
                .await?
        {
            return self
                .json_answer(body, status, deltas, deadline, limit, cancel)
                .await;
        }
        // Another type than an event stream, or none, is read as one all the same (a server
        // may label its stream `text/plain` or `application/json`, or not at all); it is named
        // when decoding fails.
        let not_a_stream = match content_type {
            Some(v) if v.starts_with("text/event-stream") => None,
            other => Some(other),
        };
        self.stream(status, body, deltas, deadline, limit, cancel, not_a_stream)
            .await
    }

    /// Reads the body (of a `status` answer) as the wire's event stream, each fragment to
    /// `deltas` as it decodes. `not_a_stream` is the response's content type (`None` inside: it
    /// had none) when it is not `text/event-stream`: such a body must open as SSE (past a BOM
    /// and whitespace, a field or a comment) or as a whole answer (`{`, which the decoder reads
    /// whole; [`StreamOpening`]) or is refused once its first bytes show it does not, and a body
    /// that then fails to decode is reported by that type and its size, never by its contents,
    /// rather than only as a stream that went wrong. A body labelled `text/event-stream` is
    /// refused by its first bytes only when they open a web page or a JSON array (`<`, `[`),
    /// which no stream or whole answer does.
    ///
    /// Nothing is awaited past `limit`, the call's. The first byte is awaited until `deadline`;
    /// from it on, the idle timeout runs from the last progress: the first byte, then each
    /// complete SSE event, whatever the decoder made of it (a role-only or usage chunk, an event
    /// type it ignores is still the server answering). Comments (`: keep-alive`), blank lines and
    /// the bytes of an event not yet ended are not progress, so a server or proxy that only keeps
    /// the connection alive, or trickles an event byte by byte, stalls as one that sends nothing.
    #[allow(clippy::too_many_arguments)] // The answer, where it goes, and its clocks, named.
    async fn stream(
        &self,
        status: StatusCode,
        mut body: impl ChunkSource,
        deltas: &mut dyn DeltaSink,
        deadline: Instant,
        limit: Instant,
        cancel: &CancellationToken,
        not_a_stream: Option<Option<String>>,
    ) -> Result<LlmCompletion, Failure> {
        // The content type as errors name it, when it is not `text/event-stream`.
        let shown_type = not_a_stream.as_ref().map(|content_type| {
            content_type
                .as_deref()
                .map_or_else(|| "no content type".to_owned(), |t| self.shown(t))
        });
        let not_a_stream_error = |what: &str, size: String, detail: &str| {
            CompletionError::Decode(format!(
                "POST {}: HTTP {}: the server answered with {what} ({size}), not an event stream{detail}",
                self.endpoint,
                status_text(status),
            ))
        };
        let labelled = |error: DecodeError, received: usize, whole: bool, decoded: bool| {
            match (&error, &shown_type) {
                // An error event is the provider's answer, decoded: its label does not matter.
                (DecodeError::ProviderError { .. }, _) | (_, None) => self.decode_error(error),
                (_, Some(what)) => {
                    let size = match whole {
                        true => format!("{received} bytes"),
                        false => format!("at least {received} bytes"),
                    };
                    // A body in which nothing decoded and which simply ended is no stream at
                    // all: the decoder's word for it (cut short) would mislead.
                    let detail = match error {
                        DecodeError::Truncated { .. } if !decoded => String::new(),
                        other => format!(": {}", self.decode_detail(other)),
                    };
                    not_a_stream_error(what, size, &detail)
                }
            }
        };
        // A body is told by its first bytes: one that opens neither as SSE nor as a whole
        // answer (`{`: a proxy's page, a JSON array) is refused at once, not waited on until it
        // stalls, since the SSE rules would ignore every line of it as an unknown field. A body
        // labelled an event stream is refused only when it opens as neither a stream nor a whole
        // answer can (`<`, `[`): SSE lets a stream open with any field, even one no decoder
        // reads.
        let mut opening = Some(StreamOpening::new(shown_type.is_none()));
        let opening_what = shown_type
            .clone()
            .unwrap_or_else(|| "a body labelled text/event-stream".to_owned());
        let mut decoder = Decoder::new(self.wire, self.limits);
        let mut received = 0usize;
        let mut decoded = false;
        // The events decoded so far, and when the stream stalls unless another completes.
        let mut events = 0u64;
        let mut idle_until = deadline;
        loop {
            let wait = if received == 0 { deadline } else { idle_until };
            let chunk = match self
                .next_chunk(&mut body, received, wait, limit, cancel, "stream")
                .await?
            {
                Next::Chunk(chunk) => chunk,
                Next::End => break,
                // The stream said how the turn ended before its end marker: a connection that
                // then stalls or breaks has lost at most a usage report.
                Next::Failed(_) if received > 0 && decoder.has_finished() => {
                    tracing::debug!(
                        endpoint = %self.endpoint,
                        received,
                        "the stream ended after its finish reason without its end marker"
                    );
                    break;
                }
                Next::Failed(failure) => return Err(failure),
            };
            if chunk.is_empty() {
                continue;
            }
            if received == 0 {
                idle_until = after(self.idle_timeout);
            }
            received += chunk.len();
            let fragments = decoder
                .feed(&chunk)
                .map_err(|e| Failure::Final(labelled(e, received, false, decoded)))?;
            if let Some(start) = &mut opening {
                match start.read(&chunk) {
                    Some(true) => opening = None,
                    Some(false) => {
                        let why = if start.labelled {
                            ": it opens as a web page or a JSON array (`<` or `[`), as no SSE \
                             field or comment, nor a whole answer (`{`), does"
                        } else {
                            ": it does not open with an SSE field (`data:`, `event:`, `id:`, \
                             `retry:`) or comment (`:`), nor as a whole answer (`{`)"
                        };
                        return Err(Failure::Final(not_a_stream_error(
                            &opening_what,
                            format!("at least {received} bytes"),
                            why,
                        )));
                    }
                    None => {}
                }
            }
            if decoder.events() > events {
                events = decoder.events();
                idle_until = after(self.idle_timeout);
            }
            decoded |= !fragments.is_empty();
            for fragment in fragments {
                deltas.delta(fragment);
            }
            // The end marker arrived (`[DONE]`, or Responses' terminal event), or an error in
            // the stream came in the same read as the deltas just shown: the decoder would
            // ignore any later byte, so none is waited for. A server or proxy that holds the
            // body open after the marker, or breaks the connection, costs nothing.
            if decoder.is_ended() || decoder.is_failed() {
                break;
            }
        }
        // Read to its end, unless the end marker or an error in the stream stopped the read.
        let whole = !decoder.is_ended() && !decoder.is_failed();
        decoder
            .finish()
            .map_err(|e| Failure::Final(labelled(e, received, whole, decoded)))
    }

    /// A non-2xx answer: the status and the provider's message (from a JSON body, the JSON of
    /// the first event of a `text/event-stream` one, read as a JSON body is, or the first line
    /// of a `text/plain` one; a web page is not quoted, nor a compressed body, which is not
    /// read: its encoding is named), retryable as [`should_retry`] says. The body is read for
    /// [`Self::error_body_wait`] at most, never past `limit`, the call's: one held open past
    /// that is said to be cut, by which of the two, and named by what was read of it; so is one
    /// whose read stopped short otherwise ([`BodyCut`]), saying why.
    async fn http_error(
        &self,
        response: reqwest::Response,
        limit: Instant,
        cancel: &CancellationToken,
    ) -> Failure {
        let status = response.status();
        let retry_after = error_body::retry_after(response.headers(), SystemTime::now());
        let retryable = should_retry(status, response.headers());
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_ascii_lowercase());
        let labelled = |label: &str| {
            content_type
                .as_deref()
                .is_some_and(|v| v.starts_with(label))
        };
        let (plain_text, event_stream) = (labelled("text/plain"), labelled("text/event-stream"));
        // A compressed body is no text to quote (none is asked for, and none decoded).
        let compression = self.compression(response.headers());
        let wait_ends = after(self.error_body_wait());
        let deadline = wait_ends.min(limit);
        let read = match compression {
            Some(_) => Ok(ErrorBody::default()),
            None if event_stream => self.first_event_data(response, deadline, cancel).await,
            None => {
                self.read_bounded(response, plain_text, deadline, cancel)
                    .await
            }
        };
        let ErrorBody { bytes: body, cut } = match read {
            Ok(body) => body,
            Err(cancelled) => return Failure::Final(cancelled),
        };
        let mut message = format!("POST {}: HTTP {}", self.endpoint, status_text(status));
        if status.is_redirection() {
            // Resolved against the request URL, shown without credentials or query.
            let target = location
                .and_then(|l| self.url.join(&l).ok())
                .map_or_else(|| "an unnamed location".into(), |u| redacted_url(&u));
            message.push_str(&format!(" (redirect to {target}, not followed)"));
        }
        if let Some(encoding) = compression {
            message.push_str(&format!(" (its body compressed: {encoding}, not read)"));
        }
        match cut {
            None => {}
            Some(BodyCut::TimedOut) if wait_ends < limit => message.push_str(&format!(
                " (its body cut: not ended within {})",
                seconds(self.error_body_wait())
            )),
            Some(BodyCut::TimedOut) => message.push_str(&format!(
                " (its body cut at the call's time limit of {})",
                self.limit_name()
            )),
            Some(BodyCut::Broke) => message.push_str(" (its body cut: the connection broke)"),
            Some(BodyCut::Ended) => {
                message.push_str(" (its body cut: it ended before its JSON value closed)");
            }
            Some(BodyCut::Bound) => message.push_str(&format!(
                " (its body cut: not ended within {} KiB)",
                MAX_ERROR_BODY_BYTES / 1024
            )),
        }
        let provider = error_body::provider_message(&body)
            .or_else(|| plain_text.then(|| error_body::first_line(&body)).flatten());
        if let Some(provider) = provider {
            message.push_str(": ");
            message.push_str(&self.shown(&provider));
        }
        let error = CompletionError::Transport(message);
        if retryable {
            Failure::Retryable { error, retry_after }
        } else {
            Failure::Final(error)
        }
    }

    /// A 2xx JSON answer where a stream was asked for: a server that ignores `stream: true` and
    /// answers with the whole completion (a chat completion, or a Responses `response`), decoded by
    /// the wire's whole-answer decoder into the same completion a stream of it would give, its
    /// display deltas sent to `deltas` at once; or the provider's error; or anything else, reported
    /// as JSON that is neither an event stream nor a whole answer, saying what is wrong with it but
    /// never quoting it (a body too large, or a whole answer that breaks a limit or a call rule, is
    /// reported as read as one, with what it broke). The body is read under the decoder's
    /// [`Limits::max_total_bytes`], as a stream is.
    async fn json_answer(
        &self,
        response: impl ChunkSource,
        status: StatusCode,
        deltas: &mut dyn DeltaSink,
        deadline: Instant,
        limit: Instant,
        cancel: &CancellationToken,
    ) -> Result<LlmCompletion, Failure> {
        let body = self.read_whole(response, deadline, limit, cancel).await?;
        let decoded = match self.wire {
            OpenAiWire::Chat => wire_openai::chat::decode_completion(&body, self.limits),
            OpenAiWire::Responses => wire_openai::responses::decode_response(&body, self.limits),
        };
        let error = match decoded {
            Ok(answer) => {
                for delta in answer.deltas {
                    deltas.delta(delta);
                }
                return Ok(answer.completion);
            }
            Err(error) => error,
        };
        // An error body in any of the forms providers use (`{"error": …}`, `{"detail": …}`, …),
        // or a failed response without a message (then the decoder's word for it).
        let provider = match &error {
            DecodeError::ProviderError { message } => {
                Some(error_body::provider_message(&body).unwrap_or_else(|| message.clone()))
            }
            DecodeError::InvalidBody { .. } => error_body::provider_message(&body),
            _ => None,
        };
        if let Some(provider) = provider {
            return Err(Failure::Final(CompletionError::Provider(format!(
                "POST {}: HTTP {}: {}",
                self.endpoint,
                status_text(status),
                self.shown(&provider)
            ))));
        }
        let what = match self.wire {
            OpenAiWire::Chat => "a chat completion",
            OpenAiWire::Responses => "a Responses response",
        };
        // Only a body of another shape is "not a whole answer"; one that is, but breaks a limit
        // or a call rule, is named as read.
        let read_as = if matches!(error, DecodeError::InvalidBody { .. }) {
            format!("not an event stream nor {what}")
        } else {
            format!("in place of an event stream, read as {what}")
        };
        // A body that opens as no JSON object or array, past JSON's whitespace (ASCII's also
        // holds the form feed), was read only as far as its first bytes ([`JsonBody`]).
        let opening = body
            .iter()
            .find(|byte| !matches!(byte, b' ' | b'\t' | b'\n' | b'\r'));
        let size = match opening {
            Some(b'{' | b'[') | None => format!("{} bytes", body.len()),
            Some(_) => format!("at least {} bytes", body.len()),
        };
        Err(Failure::Final(CompletionError::Decode(format!(
            "POST {}: HTTP {}: the server answered with JSON ({size}), {read_as}: {}",
            self.endpoint,
            status_text(status),
            self.decode_detail(error)
        ))))
    }

    /// Whether a 2xx body labelled JSON opens as an event stream all the same (past a BOM and
    /// whitespace, an SSE field or comment: [`StreamOpening`]), as a server that streams as
    /// asked but labels its stream `application/json` sends it (Foundry Local:
    /// microsoft/foundry-dev-tools#195). Its first chunks are read into `body`, which gives them
    /// back, until they tell: under the first byte's `deadline`, then the idle timeout, as a
    /// whole answer's are. A body that opens with `{` (a whole answer) or otherwise, or ends
    /// first, is not a stream; nor is one still only whitespace past the decoder's byte limit:
    /// it is read ahead no further than the read that passes that limit, and then refused by it
    /// as a whole answer ([`Self::read_whole`]).
    async fn opens_as_sse<B: ChunkSource>(
        &self,
        body: &mut Peeked<B>,
        deadline: Instant,
        limit: Instant,
        cancel: &CancellationToken,
    ) -> Result<bool, Failure> {
        let mut opening = StreamOpening::new(false);
        loop {
            let received = body.head.len();
            let wait = if received == 0 {
                deadline
            } else {
                after(self.idle_timeout)
            };
            match self
                .next_chunk(&mut body.rest, received, wait, limit, cancel, "answer")
                .await?
            {
                Next::Chunk(chunk) => {
                    body.head.extend_from_slice(&chunk);
                    if let Some(sse) = opening.read(&chunk) {
                        let head = body.head.strip_prefix(UTF8_BOM).unwrap_or(&body.head);
                        return Ok(sse && !head.trim_ascii_start().starts_with(b"{"));
                    }
                    if body.head.len() > self.limits.max_total_bytes {
                        return Ok(false);
                    }
                }
                Next::End => {
                    body.ended = true;
                    return Ok(false);
                }
                Next::Failed(failure) => return Err(failure),
            }
        }
    }

    /// Reads a whole 2xx body under the decoder's stream limit: at most one byte over it is
    /// read, so the decoder refuses the body by that limit without its rest being waited for.
    /// The read ends where the body's JSON object (or array) closes ([`JsonBody`]): a server
    /// that holds the connection open after it is not waited on until the idle timeout, and
    /// what it sends after the value is not read; nor is anything after the first bytes of a body
    /// that opens as no JSON object or array (past a BOM and whitespace: a web page), which is no
    /// answer. A UTF-8 BOM opening the body is dropped, as a stream's is.
    /// Timeouts, breaks and cancellation are those of a stream: before the first byte a timeout
    /// or a broken connection may be retried, after it nothing is. A whole answer has no events:
    /// each chunk is progress, so the idle timeout runs from the last one.
    async fn read_whole(
        &self,
        mut response: impl ChunkSource,
        deadline: Instant,
        limit: Instant,
        cancel: &CancellationToken,
    ) -> Result<Vec<u8>, Failure> {
        let cap = self.limits.max_total_bytes.saturating_add(1);
        let mut body = Vec::new();
        let mut json = JsonBody::default();
        while body.len() < cap {
            let wait = if body.is_empty() {
                deadline
            } else {
                after(self.idle_timeout)
            };
            match self
                .next_chunk(&mut response, body.len(), wait, limit, cancel, "answer")
                .await?
            {
                Next::Chunk(chunk) => {
                    let room = cap - body.len();
                    let closed = json
                        .append(&mut body, &chunk[..chunk.len().min(room)])
                        .is_some();
                    // Closed, or opened as no object or array (a web page): no answer either
                    // way, so nothing more is waited for.
                    if closed || !json.may_be_json() {
                        break;
                    }
                }
                Next::End => break,
                Next::Failed(failure) => return Err(failure),
            }
        }
        json.finish(&mut body);
        Ok(body)
    }

    /// Waits until `wait` for the next chunk of a body (`what`: "stream" or "answer")
    /// `received` bytes in: the request's deadline for the first byte, then the caller's idle
    /// deadline, never past `limit`, the call's. Cancellation is the error; a stall or a broken
    /// connection is [`Next::Failed`], retryable only before the first byte; the call's limit
    /// reached is never retried.
    async fn next_chunk<B: ChunkSource>(
        &self,
        body: &mut B,
        received: usize,
        wait: Instant,
        limit: Instant,
        cancel: &CancellationToken,
        what: &str,
    ) -> Result<Next<B::Chunk>, Failure> {
        let wait = wait.min(limit);
        let chunk = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(Failure::Final(CompletionError::Cancelled)),
            chunk = tokio::time::timeout_at(wait, body.chunk()) => chunk,
        };
        // A stream progresses by events, a whole answer by any bytes.
        let progress = if what == "stream" { "event" } else { "data" };
        Ok(match chunk {
            Ok(Ok(Some(chunk))) => Next::Chunk(chunk),
            Ok(Ok(None)) => Next::End,
            Err(_) if wait >= limit => Next::Failed(Failure::Final(self.past_limit(received))),
            Err(_) if received == 0 => Next::Failed(self.retryable(self.no_first_byte())),
            Err(_) => Next::Failed(Failure::Final(self.transport(&format!(
                "the {what} stalled: no {progress} for {} after {received} bytes (idle timeout; not retried)",
                seconds(self.idle_timeout)
            )))),
            Ok(Err(error)) if received == 0 => Next::Failed(self.retryable(self.transport(&format!(
                "the connection broke before the first byte of the {what}: {error}"
            )))),
            Ok(Err(error)) => Next::Failed(Failure::Final(self.transport(&format!(
                "the connection broke after {received} bytes of the {what} (not retried): {error}"
            )))),
        })
    }

    /// Reads at most [`MAX_ERROR_BODY_BYTES`] of an error body, and only what an error may
    /// show of it, so a body held open is not waited on: up to where its JSON object (or array)
    /// closes ([`JsonBody`], past a BOM, which is dropped) when that value names the provider's
    /// message; of a `text/plain` one (`plain_text`) otherwise, up to its first line holding
    /// text (a line `[error] upstream timed out` is not cut where its bracket closes); of any
    /// other, its first bytes only (they tell it is no JSON, and a web page is not quoted).
    /// Nothing is awaited past `deadline`: a read that reaches it first is cut there. A read
    /// stopped by that, a broken connection or the bound before it had what it shows says so
    /// ([`ErrorBody::cut`]), as does a body that ended inside the JSON value it shows; a read
    /// failure is no error of its own (the status is the error), cancellation is.
    async fn read_bounded(
        &self,
        mut response: impl ChunkSource,
        plain_text: bool,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<ErrorBody, CompletionError> {
        let mut cut = None;
        let mut body = Vec::new();
        let mut json = JsonBody::default();
        // How far a text body was looked at for a line end, and whether its line so far holds
        // text.
        let (mut scanned, mut line_has_text) = (0, false);
        let (mut read, mut ended) = (0, false);
        loop {
            if read >= MAX_ERROR_BODY_BYTES {
                cut = Some(BodyCut::Bound);
                break;
            }
            match error_body_chunk(&mut response, deadline, cancel).await? {
                BodyRead::Chunk(chunk) => {
                    // Only the bytes within the bound are looked at, so what ends within it is
                    // whole, however the chunks fall.
                    let chunk = &chunk[..chunk.len().min(MAX_ERROR_BODY_BYTES - read)];
                    read += chunk.len();
                    match json.append(&mut body, chunk) {
                        // A closed JSON value is all that is shown of the body when it names the
                        // provider's message. A text body's that does not (a log line's
                        // `[error] upstream timed out`) is shown by its first line: read on.
                        Some(rest) => {
                            if !plain_text || error_body::provider_message(&body).is_some() {
                                break;
                            }
                            body.extend_from_slice(&chunk[rest..]);
                        }
                        None if json.may_be_json() => continue,
                        None if !plain_text => break,
                        None => {}
                    }
                    let line_ended = body[scanned..].iter().any(|&byte| {
                        if byte == b'\n' {
                            return line_has_text;
                        }
                        line_has_text |= !byte.is_ascii_whitespace();
                        false
                    });
                    if line_ended {
                        break;
                    }
                    scanned = body.len();
                }
                BodyRead::End => {
                    ended = true;
                    break;
                }
                BodyRead::Cut(why) => {
                    cut = Some(why);
                    break;
                }
            }
        }
        json.finish(&mut body);
        // A body that ended inside its JSON value stopped short of the message read from it, but
        // for a text body shown by its first line: that line is whole, a bracket it opens and
        // never closes (`[error upstream timed out`) included.
        if ended
            && error_body::unclosed_json(&body)
            && (!plain_text || error_body::provider_message(&body).is_some())
        {
            cut = Some(BodyCut::Ended);
        }
        Ok(ErrorBody { bytes: body, cut })
    }

    /// The data of the first event of an error body labelled `text/event-stream` (a server that
    /// reports its refusal as a stream's error event, `data: {"error": {"message": …}}`), for
    /// its JSON to be read as a JSON error body is. Read as [`Self::read_bounded`] reads a body:
    /// at most [`MAX_ERROR_BODY_BYTES`], and only up to the end of that event (comments and
    /// events without data before it passed over), so a body held open after it is not waited
    /// on; a read that stops (the body's end, its bound, its time) before the blank line that
    /// would end that event gives the event as it stands, cut short. A body that opens (past a
    /// BOM and whitespace) with `{` or `[`, which no SSE field does, is a JSON error under the
    /// stream's label: it is read as [`JsonBody`] reads one, to where its value closes, and when
    /// the read stops before it closes, it is what was read of it (a JSON error body cut short,
    /// read as one). Empty when those bytes hold no event with data. Nothing is awaited past
    /// `deadline`, and a read stopped short is said cut, as in [`Self::read_bounded`].
    async fn first_event_data(
        &self,
        mut response: impl ChunkSource,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<ErrorBody, CompletionError> {
        let mut cut = None;
        let mut parser = wire_openai::sse::SseParser::new();
        let (mut json, mut body) = (JsonBody::default(), Vec::new());
        let mut data = None;
        let (mut read, mut ended) = (0, false);
        while data.is_none() {
            if read >= MAX_ERROR_BODY_BYTES {
                cut = Some(BodyCut::Bound);
                break;
            }
            let chunk = match error_body_chunk(&mut response, deadline, cancel).await? {
                BodyRead::Chunk(chunk) => chunk,
                BodyRead::End => {
                    ended = true;
                    break;
                }
                BodyRead::Cut(why) => {
                    cut = Some(why);
                    break;
                }
            };
            let chunk = &chunk[..chunk.len().min(MAX_ERROR_BODY_BYTES - read)];
            read += chunk.len();
            if json.may_be_json() && json.append(&mut body, chunk).is_some() {
                return Ok(ErrorBody { bytes: body, cut });
            }
            // The first event with data stops the parser: nothing after it is looked at.
            let _ = parser.feed(chunk, |event| first_data(&event, &mut data));
        }
        if data.is_none() {
            // The body ended (or its bound did) inside its first event with data, before the
            // blank line that would end it: a stream's reader drops such an event, but it is
            // what the server said, so it names the error too.
            let _ = parser.feed(b"\n\n", |event| first_data(&event, &mut data));
        }
        // A JSON value still open holds no event: what was read of it is the error body.
        let bytes = match data {
            Some(data) => data,
            None if json.may_be_json() => body,
            None => Vec::new(),
        };
        // The body ended inside that event, or inside a JSON value under the stream's label: cut
        // short when what it holds is a JSON value that does not close. A whole event's data is
        // as the server sent it.
        if ended && error_body::unclosed_json(&bytes) {
            cut = Some(BodyCut::Ended);
        }
        Ok(ErrorBody { bytes, cut })
    }

    /// How long an error body is read for, from its status: the idle timeout, at most
    /// [`ERROR_BODY_WAIT`] (the call's limit may end it sooner).
    fn error_body_wait(&self) -> Duration {
        self.idle_timeout.min(ERROR_BODY_WAIT)
    }

    /// The codings of the answer's `Content-Encoding` but `identity`, shown safely, when there
    /// are any: the request asks for none and the client decodes none, so such a body's bytes
    /// are no text an event stream, a JSON answer or an error message can be read from. The
    /// header is a list, and may be sent on several lines (a proxy adds its own): all are read.
    fn compression(&self, headers: &HeaderMap) -> Option<String> {
        let lines = headers.get_all(CONTENT_ENCODING).iter();
        let codings: Vec<String> = lines
            .flat_map(|line| {
                String::from_utf8_lossy(line.as_bytes())
                    .split(',')
                    .map(str::trim)
                    .filter(|c| !c.is_empty() && !c.eq_ignore_ascii_case("identity"))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        (!codings.is_empty()).then(|| self.shown(&codings.join(", ")))
    }

    fn transport(&self, what: &str) -> CompletionError {
        CompletionError::Transport(format!("POST {}: {what}", self.endpoint))
    }

    fn no_first_byte(&self) -> CompletionError {
        self.timed_out("response", self.request_timeout, "request timeout")
    }

    /// No `what` came within `limit`, the timeout `name`d: the limit and the setting are named,
    /// never the HTTP client's own wording.
    fn timed_out(&self, what: &str, limit: Duration, name: &str) -> CompletionError {
        self.transport(&format!("no {what} within {} ({name})", seconds(limit)))
    }

    /// The call's time limit, as errors name it: its length and the setting.
    fn limit_name(&self) -> String {
        format!("{} (llm.max_call_ms)", seconds(self.max_call))
    }

    /// The call ran out of its time, `received` bytes into a body (0: before the first byte).
    fn past_limit(&self, received: usize) -> CompletionError {
        let when = match received {
            0 => "before the first byte of the answer".to_owned(),
            n => format!("after {n} bytes of the answer"),
        };
        self.transport(&format!(
            "the call reached its time limit of {} {when} (not retried)",
            self.limit_name()
        ))
    }

    fn retryable(&self, error: CompletionError) -> Failure {
        Failure::Retryable {
            error,
            retry_after: None,
        }
    }

    /// A stream (or whole answer) that failed to decode, as wire-openai maps it to a
    /// [`CompletionError`], the endpoint named first and the text shown safely.
    fn decode_error(&self, error: DecodeError) -> CompletionError {
        match CompletionError::from(error) {
            CompletionError::Provider(message) => CompletionError::Provider(format!(
                "POST {}: error in the stream: {}",
                self.endpoint,
                self.shown(&message)
            )),
            other => CompletionError::Decode(format!(
                "POST {}: {}",
                self.endpoint,
                self.completion_detail(other)
            )),
        }
    }

    /// What went wrong in a stream that failed to decode, without the endpoint: the text of
    /// wire-openai's mapping of it to a [`CompletionError`], shown safely.
    fn decode_detail(&self, error: DecodeError) -> String {
        self.completion_detail(CompletionError::from(error))
    }

    /// The text of an error mapped from a decode error, shown safely.
    fn completion_detail(&self, error: CompletionError) -> String {
        match error {
            CompletionError::Provider(text) | CompletionError::Decode(text) => self.shown(&text),
            other => self.shown(&other.to_string()),
        }
    }
}

#[async_trait]
impl CompletionPort for OpenAiCompletion {
    async fn complete(
        &self,
        request: &LlmRequest,
        deltas: &mut dyn DeltaSink,
        cancel: &CancellationToken,
    ) -> Result<LlmCompletion, CompletionError> {
        if cancel.is_cancelled() {
            return Err(CompletionError::Cancelled);
        }
        let result = match self.encode(request) {
            Ok(body) => self.run(&body, deltas, cancel).await,
            Err(error) => Err(error),
        };
        result.map_err(|error| self.scrubbed(error))
    }
}

/// Keeps the data of `event` in `data` when it holds any but whitespace, and then stops the
/// parser (`Err`): the first event with data of an error body labelled `text/event-stream` is
/// the one that names the error ([`OpenAiCompletion::first_event_data`]).
fn first_data(
    event: &wire_openai::sse::SseEvent<'_>,
    data: &mut Option<Vec<u8>>,
) -> Result<(), ()> {
    if event.data.trim().is_empty() {
        return Ok(());
    }
    *data = Some(event.data.as_bytes().to_vec());
    Err(())
}

/// An error body as far as it was read for its message.
#[derive(Debug, Default)]
struct ErrorBody {
    /// What of it is read for the message.
    bytes: Vec<u8>,
    /// What stopped the read before what it shows of the body ended, if anything did.
    cut: Option<BodyCut>,
}

/// What cut an error body's read short of what it shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BodyCut {
    /// No chunk came before the read's deadline (a server that held the body open).
    TimedOut,
    /// The connection broke: an error body is read only for its message, and the status is
    /// the error, so the read ends quietly, with what came.
    Broke,
    /// The body ended inside the JSON value it shows ([`error_body::unclosed_json`]).
    Ended,
    /// The read reached [`MAX_ERROR_BODY_BYTES`].
    Bound,
}

/// What reading an error body's next chunk gave.
enum BodyRead<C> {
    /// Its next bytes.
    Chunk(C),
    /// Its end.
    End,
    /// No next chunk, for this reason: the read's deadline came first
    /// ([`BodyCut::TimedOut`]) or the connection broke ([`BodyCut::Broke`]).
    Cut(BodyCut),
}

/// The next chunk of an error body, awaited until `deadline`. Cancellation is the error.
async fn error_body_chunk<B: ChunkSource>(
    body: &mut B,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<BodyRead<B::Chunk>, CompletionError> {
    let chunk = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(CompletionError::Cancelled),
        chunk = tokio::time::timeout_at(deadline, body.chunk()) => chunk,
    };
    Ok(match chunk {
        Err(_) => BodyRead::Cut(BodyCut::TimedOut),
        Ok(Ok(Some(chunk))) => BodyRead::Chunk(chunk),
        Ok(Ok(None)) => BodyRead::End,
        Ok(Err(_)) => BodyRead::Cut(BodyCut::Broke),
    })
}

/// A response body read chunk by chunk: reqwest's, or a test's script.
trait ChunkSource: Send {
    /// One chunk of the body.
    type Chunk: std::ops::Deref<Target = [u8]> + Send;

    /// The next chunk, `None` at the body's end, or what broke the connection (described
    /// without the URL).
    fn chunk(&mut self) -> impl Future<Output = Result<Option<Self::Chunk>, String>> + Send;
}

impl ChunkSource for reqwest::Response {
    type Chunk = Vec<u8>;

    async fn chunk(&mut self) -> Result<Option<Vec<u8>>, String> {
        match reqwest::Response::chunk(self).await {
            Ok(chunk) => Ok(chunk.map(Vec::from)),
            Err(error) => Err(describe(error)),
        }
    }
}

/// A body whose first chunks were read ahead to tell what it holds
/// ([`OpenAiCompletion::opens_as_sse`]): they come first, as one chunk, then the rest.
struct Peeked<B> {
    /// The bytes read ahead and not yet given back.
    head: Vec<u8>,
    /// Whether the read ahead reached the body's end.
    ended: bool,
    rest: B,
}

impl<B> Peeked<B> {
    /// `body`, nothing read ahead yet.
    fn new(body: B) -> Self {
        Self {
            head: Vec::new(),
            ended: false,
            rest: body,
        }
    }
}

impl<B: ChunkSource<Chunk = Vec<u8>>> ChunkSource for Peeked<B> {
    type Chunk = Vec<u8>;

    async fn chunk(&mut self) -> Result<Option<Vec<u8>>, String> {
        if !self.head.is_empty() {
            return Ok(Some(std::mem::take(&mut self.head)));
        }
        if self.ended {
            return Ok(None);
        }
        self.rest.chunk().await
    }
}

/// The UTF-8 byte order mark a body may open with (the SSE rules skip it).
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// What a body the decoders read may open with, past a BOM and blank lines: a field the
/// decoders read, a comment, or `{`, a whole answer sent in place of the stream (the decoders
/// tell it by that byte and read it whole: `wire_openai::chat::StreamDecoder`).
const SSE_OPENINGS: [&[u8]; 6] = [b"data:", b"event:", b"id:", b"retry:", b":", b"{"];

/// The first bytes (past a BOM and whitespace) that no body the decoders read opens with: a web
/// page (`<`) or a JSON array (`[`). As SSE, each would be a line naming a field no server
/// sends.
const NOT_SSE_OPENINGS: [u8; 2] = [b'<', b'['];

/// Tells from its first bytes, as they arrive, whether a body opens as an event stream (or a
/// whole answer in its place): past a UTF-8 BOM and whitespace, with a field, a comment or `{`
/// ([`SSE_OPENINGS`]). A body labelled `text/event-stream` is held to less: the SSE rules let a
/// stream open with any field, even one no decoder reads, so only an opening no stream has
/// ([`NOT_SSE_OPENINGS`]) tells it is not one. Keeps only the few bytes of a start not yet told
/// (a BOM or a field name split over reads).
#[derive(Debug)]
struct StreamOpening {
    /// Whether the body is labelled `text/event-stream`.
    labelled: bool,
    /// The bytes since the last whitespace, while they may still begin an opening.
    head: Vec<u8>,
    /// Whether the body's first bytes were seen, and so a BOM skipped.
    past_bom: bool,
}

impl StreamOpening {
    /// A body not read yet; `labelled` when it is labelled `text/event-stream`.
    fn new(labelled: bool) -> Self {
        Self {
            labelled,
            head: Vec::new(),
            past_bom: false,
        }
    }

    /// Reads the next chunk: `Some(true)` once the body opens as an event stream,
    /// `Some(false)` once it does not, `None` while it cannot be told yet.
    fn read(&mut self, chunk: &[u8]) -> Option<bool> {
        self.head.extend_from_slice(chunk);
        if !self.past_bom {
            if self.head.len() < UTF8_BOM.len() && UTF8_BOM.starts_with(&self.head) {
                return None;
            }
            if self.head.starts_with(UTF8_BOM) {
                self.head.drain(..UTF8_BOM.len());
            }
            self.past_bom = true;
        }
        let start = self.head.trim_ascii_start();
        if self.labelled {
            let Some(first) = start.first() else {
                self.head.clear();
                return None;
            };
            return Some(!NOT_SSE_OPENINGS.contains(first));
        }
        if SSE_OPENINGS.iter().any(|field| start.starts_with(field)) {
            return Some(true);
        }
        if SSE_OPENINGS.iter().any(|field| field.starts_with(start)) {
            // Empty (only whitespace so far) or the start of a field name.
            self.head = start.to_vec();
            return None;
        }
        Some(false)
    }
}

/// What [`OpenAiCompletion::next_chunk`] got.
enum Next<B> {
    /// More of the body.
    Chunk(B),
    /// The body's end.
    End,
    /// A stall or a broken connection, as the failure to report.
    Failed(Failure),
}

/// How one attempt failed.
enum Failure {
    /// Before the first body byte, of a kind worth another attempt.
    Retryable {
        error: CompletionError,
        retry_after: Option<Duration>,
    },
    /// Anything else: returned as is.
    Final(CompletionError),
}

/// The decoder of the configured wire.
enum Decoder {
    Chat(wire_openai::chat::StreamDecoder),
    Responses(wire_openai::responses::StreamDecoder),
}

impl Decoder {
    fn new(wire: OpenAiWire, limits: Limits) -> Self {
        match wire {
            OpenAiWire::Chat => Self::Chat(wire_openai::chat::StreamDecoder::new(limits)),
            OpenAiWire::Responses => {
                Self::Responses(wire_openai::responses::StreamDecoder::new(limits))
            }
        }
    }

    fn feed(&mut self, bytes: &[u8]) -> Result<Vec<CompletionDelta>, DecodeError> {
        match self {
            Self::Chat(decoder) => decoder.feed(bytes),
            Self::Responses(decoder) => decoder.feed(bytes),
        }
    }

    fn is_ended(&self) -> bool {
        match self {
            Self::Chat(decoder) => decoder.is_ended(),
            Self::Responses(decoder) => decoder.is_ended(),
        }
    }

    fn is_failed(&self) -> bool {
        match self {
            Self::Chat(decoder) => decoder.is_failed(),
            Self::Responses(decoder) => decoder.is_failed(),
        }
    }

    fn events(&self) -> u64 {
        match self {
            Self::Chat(decoder) => decoder.events(),
            Self::Responses(decoder) => decoder.events(),
        }
    }

    fn has_finished(&self) -> bool {
        match self {
            Self::Chat(decoder) => decoder.has_finished(),
            Self::Responses(decoder) => decoder.has_finished(),
        }
    }

    fn finish(self) -> Result<LlmCompletion, DecodeError> {
        match self {
            Self::Chat(decoder) => decoder.finish(),
            Self::Responses(decoder) => decoder.finish(),
        }
    }
}

/// reqwest over rustls with ring and the platform's certificate roots; HTTP/1.1 only; no proxy
/// from the environment; redirects are not followed (a moved endpoint is a configuration error,
/// reported with its status and target, and the key never follows a redirect). A `url` whose
/// host is a `localhost` name ([`localhost_name`]), which [`is_loopback`] takes for this
/// machine, is reached on the loopback addresses without asking a resolver, which may ask DNS
/// for the name (glibc does, without `nss-myhostname`) and so send the key elsewhere.
fn http_client(url: &Url, connect_timeout: Duration) -> Result<reqwest::Client, OpenAiConfigError> {
    let mut client = client_builder(connect_timeout)?;
    if let Some(host) = localhost_name(url) {
        use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
        // Port 0: the URL's own port is used. IPv4 first, where curl and glibc list `::1` first
        // when IPv6 works: the local servers this is for (Ollama, llama.cpp, LM Studio) listen
        // on IPv4 by default, and either order reaches a server on one family only, since a
        // refused address gives way to the other at once (and a silent one after 300 ms: Happy
        // Eyeballs). Only two servers on one port, one per family, tell the orders apart.
        let loopback = [
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
        ];
        client = client.resolve_to_addrs(host, &loopback);
    }
    client
        .build()
        .map_err(|e| OpenAiConfigError::Client(describe(e)))
}

/// The builder of every client [`http_client`] makes: its TLS, no proxy, no redirects, and
/// `connect_timeout` ([`OpenAiConfig::connect_timeout`]), which reqwest's connector shares among
/// the addresses of one family and bounds TLS's handshake with.
fn client_builder(connect_timeout: Duration) -> Result<reqwest::ClientBuilder, OpenAiConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| OpenAiConfigError::Client(e.to_string()))?
        .with_platform_verifier()
        .map_err(|e| OpenAiConfigError::Client(e.to_string()))?
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(connect_timeout)
        .user_agent(concat!("cogni-tools/", env!("CARGO_PKG_VERSION"))))
}

/// Whether the URL's host is this machine: `localhost` or a name under it (RFC 6761), or a
/// loopback IP address (an IPv4-mapped one included). Read from the URL alone, never resolved.
fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    // The URL parser writes an IPv6 address in brackets and an IPv4 one in dotted decimal.
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        return ip.to_canonical().is_loopback();
    }
    localhost_name(url).is_some()
}

/// The URL's host when it is a `localhost` name: `localhost` or a name under it (RFC 6761), in
/// any case, with or without a final dot.
fn localhost_name(url: &Url) -> Option<&str> {
    let host = url.host_str()?;
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    (name == "localhost" || name.ends_with(".localhost")).then_some(host)
}

/// A whole body read as JSON: a UTF-8 BOM opening it is dropped (serde_json reads none, and
/// the decoders drop a stream's), and its value followed with [`wire_openai::JsonShape`], so the
/// read can end where the value closes.
#[derive(Debug, Default)]
struct JsonBody {
    shape: wire_openai::JsonShape,
    /// How many bytes of a BOM opened the body so far.
    bom: usize,
    /// Whether the body's first bytes told whether a BOM opens it.
    told: bool,
}

impl JsonBody {
    /// Appends `chunk`, the body's next bytes, to `body`, less a BOM opening the body. When the
    /// JSON value closed in it, where in `chunk` the bytes after it start: those are left out.
    fn append(&mut self, body: &mut Vec<u8>, mut chunk: &[u8]) -> Option<usize> {
        let whole = chunk.len();
        while !self.told
            && let Some((&byte, rest)) = chunk.split_first()
        {
            if byte == UTF8_BOM[self.bom] {
                self.bom += 1;
                chunk = rest;
                self.told = self.bom == UTF8_BOM.len();
            } else {
                self.finish(body);
            }
        }
        match self.shape.push(chunk) {
            Some(at) => {
                body.extend_from_slice(&chunk[..=at]);
                Some(whole - chunk.len() + at + 1)
            }
            None => {
                body.extend_from_slice(chunk);
                None
            }
        }
    }

    /// Whether the body may still be a JSON object or array: nothing but a BOM and whitespace
    /// yet, or one not yet closed.
    fn may_be_json(&self) -> bool {
        self.shape.is_open()
    }

    /// Ends the BOM's check: the start of one that did not go on (then the body's own bytes) is
    /// given back to `body`. For the end of the body, and for a byte that is not the BOM's.
    fn finish(&mut self, body: &mut Vec<u8>) {
        if !self.told {
            self.told = true;
            let held = &UTF8_BOM[..self.bom];
            body.extend_from_slice(held);
            self.shape.push(held);
        }
    }
}

/// The query parameters taken for a key (compared in any case, once percent-decoded): `key`,
/// `api-key`, `api_key`, `apikey`, `token`, `access_token`, `code` (Azure Functions), `sig`
/// (a shared access signature), and any name ending in `-key`, `_key`, `-token` or `_token`
/// (`subscription-key`, `auth_token`).
const KEY_PARAMETERS: &[&str] = &[
    "key",
    "api-key",
    "api_key",
    "apikey",
    "token",
    "access_token",
    "code",
    "sig",
];

/// Whether a base URL's query parameter named `name` carries a key ([`KEY_PARAMETERS`]).
fn names_a_key(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    KEY_PARAMETERS.contains(&name.as_str())
        || ["-key", "_key", "-token", "_token"]
            .iter()
            .any(|suffix| name.ends_with(suffix))
}

/// The shortest base-URL secret [`url_secrets`] keeps, and the shortest key
/// [`OpenAiCompletion::scrub`] replaces wherever it stands: a shorter value is no real secret,
/// and replacing it everywhere would mangle messages (a `?code=40` would hide `HTTP 401`'s
/// digits).
const MIN_SECRET_CHARS: usize = 4;

/// Adds to `cuts` the stretch of each occurrence of `secret` in `message` (leftmost, none
/// overlapping, as `str::replace` finds them), found with `memchr::memmem` in linear time.
fn literal_cuts(message: &str, secret: &str, cuts: &mut Vec<std::ops::Range<usize>>) {
    if secret.is_empty() {
        return;
    }
    cuts.extend(
        memchr::memmem::find_iter(message.as_bytes(), secret.as_bytes())
            .map(|at| at..at + secret.len()),
    );
}

/// Adds to `cuts` the stretch of each occurrence of `secret` in `message` that stands alone:
/// one neither preceded nor followed by a letter, a digit or `_` (`x1` in `bad key x1.`, not in
/// `max_x1` or `x1y`). An occurrence that does not stand alone is passed by one character, so
/// one that overlaps it and does is still found; with a secret of a few characters, as this is
/// used for, the search stays linear in the message.
fn standalone_cuts(message: &str, secret: &str, cuts: &mut Vec<std::ops::Range<usize>>) {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut search = 0;
    while let Some(found) = message[search..].find(secret) {
        let at = search + found;
        let end = at + secret.len();
        if word(message[..at].chars().next_back()) || word(message[end..].chars().next()) {
            search = at + message[at..].chars().next().map_or(1, char::len_utf8);
            continue;
        }
        cuts.push(at..end);
        search = end;
    }
}

/// A base URL's secrets as [`OpenAiCompletion::scrub`] looks for them ([`url_secrets`]). Its
/// `Debug` shows only how many it holds, never them.
#[derive(Default)]
struct UrlSecrets {
    /// Texts replaced where a message shows them as they are: each secret as written in the URL
    /// and percent-decoded, each line of one that holds a line break (trimmed; a message may
    /// show only the first), and the `Basic` credentials sent for the URL's user and password
    /// ([`basic_credentials`]).
    literal: Vec<String>,
    /// Each secret's bytes once percent-decoded (and with a space written `+`), the `Basic`
    /// credentials, and the API key, replaced also where a message writes them with escapes of
    /// its own, percent or JSON ([`escaped_cuts`]: a server may show a JSON value it was sent,
    /// quoted by any JSON writer).
    decoded: Vec<Vec<u8>>,
}

impl fmt::Debug for UrlSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UrlSecrets")
            .field("literal", &self.literal.len())
            .field("decoded", &self.decoded.len())
            .finish()
    }
}

/// The texts of a base URL that carry a key, which no message may show: its password, or its
/// user name when it has no password (a token alone, `https://<token>@host`), and the values of
/// its query parameters named like a key ([`names_a_key`]), each as [`UrlSecrets`] keeps it.
/// Forms shorter than [`MIN_SECRET_CHARS`] are left out. The API key, which
/// [`OpenAiCompletion::scrub`] looks for as it is itself (a shorter one only where it stands
/// alone), is kept to be found escaped too, when that long.
fn url_secrets(url: &Url, key: Option<&Secret>) -> UrlSecrets {
    let mut secrets = UrlSecrets::default();
    let mut keep = |raw: &str, form_encoded: bool| {
        let mut decoded = vec![percent_decoded_bytes(raw)];
        if form_encoded {
            // A form-encoded value writes a space as `+`.
            decoded.push(percent_decoded_bytes(&raw.replace('+', " ")));
        }
        for bytes in decoded.clone() {
            if bytes.contains(&b' ') {
                decoded.push(
                    bytes
                        .iter()
                        .map(|&b| if b == b' ' { b'+' } else { b })
                        .collect(),
                );
            }
        }
        let mut literal = vec![raw.to_owned()];
        for bytes in &decoded {
            let text = String::from_utf8_lossy(bytes).into_owned();
            // A `text/plain` error shows only its first line holding text, which may cut a
            // secret holding a line break: each of its lines is a secret too.
            if text.contains('\n') {
                literal.extend(text.split('\n').map(|line| line.trim().to_owned()));
            }
            literal.push(text);
        }
        for text in literal {
            if text.chars().count() >= MIN_SECRET_CHARS && !secrets.literal.contains(&text) {
                secrets.literal.push(text);
            }
        }
        for bytes in decoded {
            let long = String::from_utf8_lossy(&bytes).chars().count() >= MIN_SECRET_CHARS;
            if long && !secrets.decoded.contains(&bytes) {
                secrets.decoded.push(bytes);
            }
        }
    };
    match url.password() {
        Some(password) => keep(password, false),
        None => keep(url.username(), false),
    }
    for pair in url.query().unwrap_or_default().split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if names_a_key(&percent_decoded(name)) {
            keep(value, true);
        }
    }
    for basic in basic_credentials(url) {
        if basic.len() >= MIN_SECRET_CHARS {
            secrets.decoded.push(basic.clone().into_bytes());
            secrets.literal.push(basic);
        }
    }
    if let Some(key) = key.map(Secret::expose)
        && key.chars().count() >= MIN_SECRET_CHARS
        && !secrets.decoded.iter().any(|known| known == key.as_bytes())
    {
        secrets.decoded.push(key.as_bytes().to_vec());
    }
    secrets
}

/// The base64 text of the `Basic` header reqwest sends for a base URL's user name and password
/// (`user:password`, each percent-decoded, as reqwest's `extract_authority` and `basic_auth`
/// build it), and the other forms a server may echo it in: without its `=` padding, and in
/// base64url (`-` and `_` for `+` and `/`), padded or not. None when the URL has neither a user
/// nor a password, or reqwest would send no header. A server that echoes its request's headers
/// shows it, and it decodes to the password.
fn basic_credentials(url: &Url) -> Vec<String> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    if url.username().is_empty() && url.password().is_none() {
        return Vec::new();
    }
    let Ok(user) = String::from_utf8(percent_decoded_bytes(url.username())) else {
        return Vec::new();
    };
    let password = url
        .password()
        .and_then(|password| String::from_utf8(percent_decoded_bytes(password)).ok())
        .unwrap_or_default();
    let credentials = format!("{user}:{password}");
    let mut forms = Vec::new();
    for engine in [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD] {
        let form = engine.encode(&credentials);
        if !forms.contains(&form) {
            forms.push(form);
        }
    }
    forms
}

/// The byte a valid `%XX` escape at `at` in `bytes` stands for (hex digits in either case).
fn escaped_byte(bytes: &[u8], at: usize) -> Option<u8> {
    if bytes.get(at) != Some(&b'%') {
        return None;
    }
    let hex = std::str::from_utf8(bytes.get(at + 1..at + 3)?).ok()?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// `text` with its `%XX` escapes decoded (an invalid escape left as it is), as bytes.
fn percent_decoded_bytes(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        match escaped_byte(bytes, at) {
            Some(byte) => {
                decoded.push(byte);
                at += 3;
            }
            None => {
                decoded.push(bytes[at]);
                at += 1;
            }
        }
    }
    decoded
}

/// `text` with its `%XX` escapes decoded (an invalid escape left as it is, bytes that do not
/// make UTF-8 replaced).
fn percent_decoded(text: &str) -> String {
    String::from_utf8_lossy(&percent_decoded_bytes(text)).into_owned()
}

/// A text with one layer of escapes decoded, and for each of its bytes the stretch of the
/// text it was decoded from that it stands for (a `%XX` or `\uXXXX` escape, or the byte
/// itself), so that a match in it can be cut out of that text.
struct Unescaped {
    bytes: Vec<u8>,
    spans: Vec<std::ops::Range<usize>>,
}

impl Unescaped {
    /// This text with a further layer of escapes decoded by `layer`, each byte's span still
    /// in the text this one was decoded from.
    fn then(&self, layer: fn(&[u8]) -> Unescaped) -> Unescaped {
        let inner = layer(&self.bytes);
        let spans = inner
            .spans
            .into_iter()
            .map(|span| self.spans[span.start].start..self.spans[span.end - 1].end)
            .collect();
        Unescaped {
            bytes: inner.bytes,
            spans,
        }
    }
}

/// `text` with its `%XX` escapes decoded (in either case; an invalid escape left as it is).
fn percent_unescaped(text: &[u8]) -> Unescaped {
    let mut plain = Unescaped {
        bytes: Vec::with_capacity(text.len()),
        spans: Vec::with_capacity(text.len()),
    };
    let mut at = 0;
    while at < text.len() {
        let width = match escaped_byte(text, at) {
            Some(byte) => {
                plain.bytes.push(byte);
                3
            }
            None => {
                plain.bytes.push(text[at]);
                1
            }
        };
        plain.spans.push(at..at + width);
        at += width;
    }
    plain
}

/// The four hex digits at `at` in `text` (in either case), as a number.
fn hex4(text: &[u8], at: usize) -> Option<u32> {
    let hex = std::str::from_utf8(text.get(at..at + 4)?).ok()?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

/// The character a JSON string escape at `at` in `text` stands for, and the escape's length:
/// `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, or `\uXXXX` (hex digits in either case;
/// a surrogate pair's two escapes are one character, a lone surrogate none).
fn json_escape(text: &[u8], at: usize) -> Option<(char, usize)> {
    if text.get(at) != Some(&b'\\') {
        return None;
    }
    let plain = match text.get(at + 1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let high = hex4(text, at + 2)?;
            if let Some(plain) = char::from_u32(high) {
                return Some((plain, 6));
            }
            if !(0xD800..0xDC00).contains(&high) || text.get(at + 6..at + 8) != Some(&b"\\u"[..]) {
                return None;
            }
            let low = hex4(text, at + 8).filter(|low| (0xDC00..0xE000).contains(low))?;
            let plain = char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))?;
            return Some((plain, 12));
        }
        _ => return None,
    };
    Some((plain, 2))
}

/// `text` with its JSON string escapes decoded ([`json_escape`]; anything else left as it is),
/// as any JSON writer may have escaped a secret it quotes: serde_json's `\"`, PHP's `\/`, Go's
/// `\u003c`, or any character as a `\u` escape.
fn json_unescaped(text: &[u8]) -> Unescaped {
    let mut plain = Unescaped {
        bytes: Vec::with_capacity(text.len()),
        spans: Vec::with_capacity(text.len()),
    };
    let mut at = 0;
    while at < text.len() {
        let width = match json_escape(text, at) {
            Some((escaped, width)) => {
                let mut utf8 = [0; 4];
                let bytes = escaped.encode_utf8(&mut utf8).as_bytes();
                plain.bytes.extend_from_slice(bytes);
                plain.spans.extend(bytes.iter().map(|_| at..at + width));
                width
            }
            None => {
                plain.bytes.push(text[at]);
                plain.spans.push(at..at + 1);
                1
            }
        };
        at += width;
    }
    plain
}

/// Adds to `cuts` every stretch of `message` that reads as one of `secrets` once its `%XX`
/// escapes, or its JSON string escapes ([`json_unescaped`]), or the JSON escapes and then the
/// percent escapes they leave, are decoded: a server may echo a URL's secret escaped otherwise
/// than the URL writes it (`%2f` for `%2F`, `%21` for `!`), a secret quoted by a JSON writer
/// (`\/` for `/`, `\u002b` for `+`), or a URL inside a JSON string (`ab\/cd%2Bef`). The message
/// is decoded at most three ways and each secret searched for in each decoding with
/// `memchr::memmem`, whose worst case is linear in the text and the secret, so the work is
/// bounded by the message's length times the number of secrets, plus their lengths.
fn escaped_cuts(message: &str, secrets: &[Vec<u8>], cuts: &mut Vec<std::ops::Range<usize>>) {
    if secrets.iter().all(Vec::is_empty) {
        return;
    }
    let bytes = message.as_bytes();
    let mut views = vec![percent_unescaped(bytes)];
    if message.contains('\\') {
        let json = json_unescaped(bytes);
        if json.bytes.contains(&b'%') {
            // A URL echoed inside a JSON string: its percent escapes, quoted.
            views.push(json.then(percent_unescaped));
        }
        views.push(json);
    }
    for view in &views {
        for secret in secrets.iter().filter(|secret| !secret.is_empty()) {
            // Leftmost matches, none overlapping.
            for at in memchr::memmem::find_iter(&view.bytes, secret) {
                cuts.push(view.spans[at].start..view.spans[at + secret.len() - 1].end);
            }
        }
    }
}

/// `message` up to byte `to` (a character boundary) with each of `cuts` (stretches of it, in
/// any order, overlapping or not) that starts before `to` replaced by `[redacted]`, stretches
/// that overlap cut as one. A stretch that starts or ends within a character (a secret's bytes
/// that do not make UTF-8 may match part of one) cuts it whole.
fn redacted(message: &str, mut cuts: Vec<std::ops::Range<usize>>, to: usize) -> String {
    cuts.sort_by_key(|cut| cut.start);
    let mut shown = String::with_capacity(to);
    let mut from = 0;
    for cut in cuts {
        let mut start = cut.start.min(message.len());
        while !message.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = cut.end.min(message.len());
        while !message.is_char_boundary(end) {
            end += 1;
        }
        if start < from {
            // Overlaps the cut before it, which grows.
            from = from.max(end);
            continue;
        }
        if start >= to {
            break;
        }
        shown.push_str(&message[from..start]);
        shown.push_str("[redacted]");
        from = end;
    }
    if from < to {
        shown.push_str(&message[from..to]);
    }
    shown
}

/// A URL without credentials, query or fragment, and without the path segments that may be a
/// key ([`crate::shown_url`]).
fn redacted_url(url: &Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    crate::shown_url(url.as_str())
}

/// [`redacted_url`] of a text that may not parse (then only a placeholder is shown).
fn redacted_url_text(text: &str) -> String {
    match Url::parse(text.trim()) {
        Ok(url) => redacted_url(&url),
        Err(_) => "<unparsable URL>".into(),
    }
}

/// A reqwest error and its causes, without the URL (it may hold credentials or a query), as
/// [`describe_chain`] shows them.
fn describe(error: reqwest::Error) -> String {
    describe_chain(&error.without_url())
}

/// Whether a request that failed with `error` fails again however often it is sent: TLS refused
/// the server's certificate (untrusted, expired, for another name, revoked, or none sent), or
/// the two sides share no TLS version or cipher suite. rustls reports these as a
/// [`rustls::Error`] inside the connector's [`std::io::Error`]s, whose `source` skips the error
/// they wrap (it gives that error's own source), so each one's inner error is looked into.
fn fails_again(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return matches!(
                tls,
                rustls::Error::InvalidCertificate(_)
                    | rustls::Error::InvalidCertRevocationList(_)
                    | rustls::Error::NoCertificatesPresented
                    | rustls::Error::UnsupportedNameType
                    | rustls::Error::PeerIncompatible(_)
            );
        }
        cause = match error
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(wrapped) => Some(wrapped),
            None => error.source(),
        };
    }
    false
}

/// An error and its causes in one line (`error: cause: cause`, a cause whose text is already
/// shown left out), cleaned as a provider's text is (`error_body::one_safe_line`): a cause may
/// carry what a server sent (a certificate's names, a malformed answer), so no control
/// character of it reaches a log line or a terminal.
fn describe_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    error_body::one_safe_line(&parts.join(": ")).into_owned()
}

/// `429 Too Many Requests`.
fn status_text(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// Whether a failed answer is worth another attempt, decided as OpenAI's own SDKs decide: the
/// server's `x-should-retry: true|false` when it sends one, else 408 (request timeout), 409 (lock
/// timeout), 429 and 5xx.
fn should_retry(status: StatusCode, headers: &reqwest::header::HeaderMap) -> bool {
    match headers.get("x-should-retry").map(|v| v.as_bytes()) {
        Some(b"true") => true,
        Some(b"false") => false,
        _ => {
            matches!(
                status,
                StatusCode::REQUEST_TIMEOUT | StatusCode::CONFLICT | StatusCode::TOO_MANY_REQUESTS
            ) || status.is_server_error()
        }
    }
}

/// The instant `wait` from now. A wait past what the clock holds (a caller's `Duration::MAX` for
/// "no limit") is thirty years away, as tokio does for its own sleeps, instead of overflowing.
fn after(wait: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(wait)
        .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400))
}

fn seconds(duration: Duration) -> String {
    format!("{} s", duration.as_secs_f64())
}

fn append(error: CompletionError, note: &str) -> CompletionError {
    match error {
        CompletionError::Transport(m) => CompletionError::Transport(m + note),
        CompletionError::Provider(m) => CompletionError::Provider(m + note),
        CompletionError::Decode(m) => CompletionError::Decode(m + note),
        other => other,
    }
}

/// A uniform fraction in `[0, 1)`, from the standard library's randomly keyed hasher.
fn jitter_fraction() -> f64 {
    use std::hash::BuildHasher;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let bits = std::collections::hash_map::RandomState::new().hash_one(n);
    (bits >> 11) as f64 / (1u64 << 53) as f64
}
