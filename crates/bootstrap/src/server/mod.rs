//! `cogni serve`: the HTTP server. It streams runs as AG-UI events (`POST /api/v1/agui`) and as
//! the AI SDK UI message stream (`POST /api/v1/chat`), both translated from one `AiEvent` stream
//! by `wire_ui`; it serves the catalog (`GET /api/v1/tools`), tool statistics
//! (`GET /api/v1/tools/stats`) and `GET /healthz`.
//!
//! Threads are the server's: a request names its thread, and when the server holds that thread
//! only the request's new user message is used (for an AI SDK edit or retry, also the texts of
//! the user messages before it, to find its place in the thread: `Resend`); the client's
//! replayed history (tool results included) is trusted only to start a thread the server has
//! never seen, and then only after `reconstruct_history` accepts it. A client that disconnects
//! cancels its run; the run still ends cleanly and saves a valid history. A client that stops
//! reading its stream has the stream cut, and its run goes on (`relay`): once more than
//! [`AppState::with_max_unsent_events`] events wait for it and it has taken none of them for
//! [`AppState::with_slow_client_grace`], or at once when what waits would pass
//! [`AppState::with_max_unsent_bytes`] (the hard bound of the memory a client holds). A client that
//! reads is not cut for a burst of events. A cut stream ends in its protocol's terminal error,
//! saying the run goes on, as do the answers it gives the tool calls it showed without a result.
//!
//! With a [`ServerToken`] (`COGNI_SERVER_TOKEN`), every path but `/healthz` asks for
//! `Authorization: Bearer <token>` (the `auth` middleware, which runs before any route); without
//! one, `cogni serve` listens only on a loopback address unless `server.allow_unauthenticated`
//! says otherwise ([`crate::Settings::require_server_auth`]), and there it answers only requests
//! addressed to a loopback host (the `host` guard: a web page cannot reach it by DNS rebinding).
//! The library entries keep the same rules without the settings: [`router`] without a token
//! answers only loopback clients addressing a loopback host, and [`serve`] refuses a listener
//! that is not loopback, unless the state allows serving unauthenticated.

mod agui;
mod auth;
mod chat;
mod conn;
mod host;
mod relay;
#[cfg(test)]
mod slow_clients;

pub use auth::ServerToken;
pub use conn::{
    ConnectionLimits, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_WRITE_TIMEOUT,
};
pub use relay::{DEFAULT_MAX_UNSENT_BYTES, DEFAULT_MAX_UNSENT_EVENTS, DEFAULT_SLOW_CLIENT_GRACE};

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ai_core::{AiEvent, CancellationToken, DoneReason, RunContext, ThreadId, ToolCatalog};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use graph::{AgentState, ApprovalDecision, HistoryItem, reconstruct_history};
use serde_json::json;

/// What every request handler shares.
pub struct AppState {
    runtime: crate::Runtime,
    stores: crate::Stores,
    busy: Mutex<HashSet<ThreadId>>,
    /// Without a run log, the ids of the runs this server started: an id is used once, as the
    /// run log has it (with a log, the log keeps them), within [`KEPT_ENDED_RUN_IDS`].
    run_ids: Mutex<UsedRunIds>,
    /// One permit per run in flight, up to `server.max_concurrent_runs`.
    run_slots: Arc<tokio::sync::Semaphore>,
    /// One permit per request for a run whose body is being read or whose run is being started,
    /// up to `server.max_concurrent_runs` too, taken before a byte of the body is read
    /// ([`take_run_request`]): the bodies buffered at once are bounded by the run limit, not by
    /// the connections served.
    run_requests: Arc<tokio::sync::Semaphore>,
    /// `server.max_concurrent_runs`, for the refusal's message.
    max_runs: usize,
    runs: AtomicU64,
    ai_sdk_version: u8,
    token: Option<ServerToken>,
    /// Serve without a token to any client and host (`server.allow_unauthenticated`).
    allow_unauthenticated: bool,
    /// The parent of every run's token: cancelled, it ends every run in flight.
    runs_cancel: CancellationToken,
    /// When a client that falls behind its stream is cut.
    unsent_bounds: relay::Bounds,
    /// The events of every run in flight waiting for their clients (at most
    /// `unsent_bounds.max_bytes` of them for each).
    unsent: Arc<relay::Unsent>,
    /// What [`serve`] allows a connection.
    connection_limits: ConnectionLimits,
    /// Each run in flight holds a receiver until its thread is saved: [`serve`] waits for none
    /// to be left before it returns, a run whose stream was cut (and so holds no connection)
    /// included.
    runs_in_flight: tokio::sync::watch::Sender<()>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

impl AppState {
    /// The server's state: the runtime (agent, tools, policy) and where threads and runs live.
    pub fn new(runtime: crate::Runtime, stores: crate::Stores) -> Self {
        Self {
            runtime,
            stores,
            busy: Mutex::new(HashSet::new()),
            run_ids: Mutex::new(UsedRunIds::new(KEPT_ENDED_RUN_IDS)),
            run_slots: Arc::new(tokio::sync::Semaphore::new(
                crate::settings::DEFAULT_MAX_CONCURRENT_RUNS.get(),
            )),
            run_requests: Arc::new(tokio::sync::Semaphore::new(
                crate::settings::DEFAULT_MAX_CONCURRENT_RUNS.get(),
            )),
            max_runs: crate::settings::DEFAULT_MAX_CONCURRENT_RUNS.get(),
            runs: AtomicU64::new(0),
            ai_sdk_version: crate::settings::OLDEST_AI_SDK,
            token: None,
            allow_unauthenticated: false,
            runs_cancel: CancellationToken::new(),
            unsent_bounds: relay::Bounds::default(),
            unsent: Arc::new(relay::Unsent::default()),
            connection_limits: ConnectionLimits::default(),
            runs_in_flight: tokio::sync::watch::Sender::new(()),
        }
    }

    /// What [`serve`] allows a connection: how long its client may take to send a request's
    /// headers (and the connection may stay idle between requests), how long a request's body
    /// may take to arrive, how long its writes may stall, and how many connections are served
    /// at once ([`ConnectionLimits::default`]: 30 s, 60 s, 60 s, 1,024). [`router`] served by
    /// other code keeps that code's limits.
    pub fn with_connection_limits(mut self, limits: ConnectionLimits) -> Self {
        self.connection_limits = limits;
        self
    }

    /// How many of a run's events may wait for its client, stored and not yet taken by its
    /// response stream, before a client that takes none of them for
    /// [`with_slow_client_grace`](Self::with_slow_client_grace) has its stream cut
    /// ([`DEFAULT_MAX_UNSENT_EVENTS`] by default). A client that keeps taking events is not cut
    /// for more waiting (a burst of a fast model), within
    /// [`with_max_unsent_bytes`](Self::with_max_unsent_bytes).
    ///
    /// A cut stream's waiting events are dropped, and its response ends in the protocol's
    /// terminal error (AG-UI `RUN_ERROR`, the AI SDK's `error` chunk then `[DONE]`) saying the
    /// stream was cut and the run goes on (after answering each tool call it showed without a
    /// result so, never as if the run had ended): the run is recorded and saves its thread as if
    /// the client were there. Without the bound, a client that never reads would leave every event
    /// of its run in the server's memory for as long as its connection stays open.
    pub fn with_max_unsent_events(mut self, max: std::num::NonZeroUsize) -> Self {
        self.unsent_bounds.max_events = max.get();
        self
    }

    /// How long a client may take none of its run's events while more than
    /// [`with_max_unsent_events`](Self::with_max_unsent_events) wait for it, counted from when
    /// they went over that number or from its last take, whichever is later, before its stream
    /// is cut ([`DEFAULT_SLOW_CLIENT_GRACE`], 10 s, by default). Zero cuts a client as soon as
    /// more than that number wait for it, as a bound of events alone would; a grace longer than
    /// the clock counts (`Duration::MAX`) never does, leaving only
    /// [`with_max_unsent_bytes`](Self::with_max_unsent_bytes) to cut it.
    pub fn with_slow_client_grace(mut self, grace: std::time::Duration) -> Self {
        self.unsent_bounds.grace = grace;
        self
    }

    /// The most bytes of a run's events (counted as JSON) that may wait for its client, whether
    /// it reads or not: an event that would take what waits past it cuts the client's stream at
    /// once ([`DEFAULT_MAX_UNSENT_BYTES`], 16 MiB, by default). The hard bound of the memory a
    /// stream holds in the server for its client; a single event larger than it is passed on
    /// when nothing else waits.
    pub fn with_max_unsent_bytes(mut self, max: std::num::NonZeroUsize) -> Self {
        self.unsent_bounds.max_bytes = max.get();
        self
    }

    /// Cancels every run in flight and every run started from now on: each ends `cancelled`
    /// on its stream and saves its thread, as when its client goes away; a run whose thread
    /// store has not yet answered its load has no stream yet and is answered 503 `cancelled`
    /// instead, nothing ran and nothing saved. [`serve`] calls it at a shutdown signal, so that
    /// the graceful shutdown, which waits for open responses, does not wait for runs to end on
    /// their own.
    pub fn cancel_runs(&self) {
        self.runs_cancel.cancel();
    }

    /// Asks every request but `GET /healthz` for `Authorization: Bearer <token>` (401 without
    /// it); `None`, the default, serves without authentication.
    pub fn with_token(mut self, token: Option<ServerToken>) -> Self {
        self.token = token;
        self
    }

    /// Without a token, answer clients on other machines and requests for any host
    /// (`server.allow_unauthenticated`; off by default): only for a server behind something
    /// that authenticates for it. Off, a server without a token answers only loopback clients
    /// that address a loopback host ([`router`]), and [`serve`] refuses a listener on an address
    /// that is not loopback.
    pub fn with_allow_unauthenticated(mut self, allow: bool) -> Self {
        self.allow_unauthenticated = allow;
        self
    }

    /// The major version of the `ai` package the AI SDK clients run (5 by default): from 6 on,
    /// calls that wait for approval are sent as `tool-approval-request`, and a cut answer's reason
    /// in `finish.finishReason` too (see `ServerSettings::ai_sdk_version`).
    pub fn with_ai_sdk_version(mut self, major: u8) -> Self {
        self.ai_sdk_version = major;
        self
    }

    /// The most runs in flight at once (AG-UI and AI SDK together; 32 by default): a run asked
    /// for beyond it is refused with 503 `too_many_runs` before anything of it starts (see
    /// `ServerSettings::max_concurrent_runs`). It bounds the requests for a run whose body is
    /// being read or whose run is being started too: one more is refused with the same 503
    /// before a byte of its body is read, so the bodies held at once are at most that many (each
    /// within the body limit), however many connections are served; a client slow to send its
    /// body holds its place meanwhile, under [`serve`] for at most the body-read bound
    /// ([`ConnectionLimits::body_read_timeout`]). A number past what a semaphore holds (some
    /// 2^61) is that many.
    pub fn with_max_concurrent_runs(mut self, max: std::num::NonZeroUsize) -> Self {
        let max = max.get().min(tokio::sync::Semaphore::MAX_PERMITS);
        self.run_slots = Arc::new(tokio::sync::Semaphore::new(max));
        self.run_requests = Arc::new(tokio::sync::Semaphore::new(max));
        self.max_runs = max;
        self
    }

    /// A fresh run id (clients of the AI SDK name none): `run-<ms>-<n>-<8 hex digits>`. The
    /// random part keeps an AG-UI client, which names its own run ids, from taking the id the
    /// next AI SDK run would get (its client could only see 409 `run_exists`).
    fn next_run_id(&self) -> String {
        let n = self.runs.fetch_add(1, Ordering::Relaxed) + 1;
        format!(
            "run-{}-{n}-{:08x}",
            self.runtime.clock.now_ms(),
            crate::nonce()
        )
    }

    fn context(&self, run_id: &str) -> Result<RunContext, ApiError> {
        RunContext::new(run_id, "user:http", "local")
            .map_err(|e| ApiError::bad_request("invalid_run_id", format!("runId: {e}")))
    }

    fn catalog(&self, ctx: &RunContext) -> Result<ToolCatalog, ApiError> {
        self.runtime
            .runner
            .catalog(ctx)
            .map_err(|e| ApiError::internal_logged("the tool catalog cannot be built", &e))
    }
}

/// `cogni serve` after its settings are loaded: [`prepare`], then [`serve`] on `listener` until a
/// shutdown signal. A listener on an address that is not loopback is refused without a token
/// unless the settings allow it ([`crate::Settings::require_server_auth`]).
pub async fn run(
    settings: &crate::Settings,
    listener: tokio::net::TcpListener,
) -> anyhow::Result<()> {
    settings.require_server_auth(listener.local_addr()?)?;
    let state = prepare(settings).await?;
    serve(listener, state, settings.server.max_body_bytes)
        .await
        .map_err(|e| anyhow::anyhow!("the server stopped: {e}"))
}

/// Composes the server's state from `settings` (LLM adapter, tools, policy, stores) and closes
/// the runs a crash left open, so a server that listens has a consistent run log.
///
/// A store that cannot be opened (or a database from a newer cogni) is fatal. A run that cannot
/// be closed (a corrupt row, the database busy past its timeout) is not: as `cogni chat` does,
/// the server warns in one line naming each such run and why (never its stored contents) and
/// starts; the run stays open and is tried again at the next start. A policy naming tools no
/// tool source has is warned about too, in one line naming them.
pub async fn prepare(settings: &crate::Settings) -> anyhow::Result<Arc<AppState>> {
    let stores = crate::create_stores(settings)?;
    let completion = crate::create_completion(&settings.llm)?;
    let completion = crate::record_completion(completion, &stores, &settings.llm);
    let runtime = crate::Runtime::build(settings, completion)?;
    if let Some(warning) =
        crate::compose::unknown_tools_warning(&runtime.policy, runtime.source.as_ref())
    {
        tracing::warn!("{warning}");
    }
    match crate::recover(&stores, runtime.clock.as_ref()).await {
        Ok(recovered) if !recovered.is_empty() => {
            tracing::warn!(runs = recovered.len(), "closed runs a crash left open");
        }
        Ok(_) => {}
        Err(error) => {
            // It names runs by their ids, which clients chose: one line, with no control
            // character or bidirectional override of theirs, as `cogni chat` shows it.
            let message = format!("{error:#}; the server starts anyway").replace('\n', "\u{FFFD}");
            tracing::warn!("{}", crate::cli::terminal_safe(&message));
        }
    }
    Ok(Arc::new(
        AppState::new(runtime, stores)
            .with_ai_sdk_version(settings.server.ai_sdk_version)
            .with_max_concurrent_runs(settings.server.max_concurrent_runs)
            .with_max_unsent_events(settings.server.max_unsent_events)
            .with_slow_client_grace(std::time::Duration::from_millis(
                settings.server.slow_client_grace_ms,
            ))
            .with_max_unsent_bytes(settings.server.max_unsent_bytes)
            .with_allow_unauthenticated(settings.server.allow_unauthenticated)
            .with_token(settings.server.token.clone()),
    ))
}

/// Serves `router(state)` on `listener` until Ctrl-C (SIGINT) or SIGTERM. At the signal it stops
/// accepting, cancels the runs in flight ([`AppState::cancel_runs`]), which end their streams
/// and save their threads (one still loading its thread is answered 503 `cancelled`), and
/// returns once every response is done and every run has saved its thread (a run whose stream
/// was cut included: it has no response to wait for).
///
/// Connections are served within the state's [`ConnectionLimits`]: a client that has not sent a
/// request's headers within 30 s (from the connection's start, or the end of the previous
/// response) has its connection closed, a request body not in within 60 s is refused with 408
/// `body_timeout`, a connection whose client reads nothing of its response for 60 s is closed
/// (its run is cancelled, as when a client leaves), and past 1,024 connections at once no more
/// are accepted until one closes.
///
/// Without a token, a listener on an address that is not loopback is refused (the future
/// resolves to an error at once) unless the state allows serving unauthenticated
/// ([`AppState::with_allow_unauthenticated`]); on a loopback listener every request (`/healthz`
/// too) must be addressed to a loopback host (`Host: localhost:…`, `127.0.0.1:…`, `[::1]:…`),
/// allowed or not: any other gets a JSON 403 (`host_not_allowed`) before the router sees it, so
/// a web page that re-points its own name at 127.0.0.1 (DNS rebinding) cannot use the server
/// from the user's browser.
///
/// The signal handlers are installed when this is called, not when the future is first polled:
/// call it (inside the Tokio runtime) before telling anyone the server listens, so a signal
/// sent as soon as they know is a graceful shutdown, never the default disposition's kill.
pub fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    max_body_bytes: usize,
) -> impl Future<Output = std::io::Result<()>> + Send {
    serve_until(listener, state, max_body_bytes, shutdown_signal())
}

/// [`serve`], until `signal` resolves rather than SIGINT or SIGTERM.
fn serve_until(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    max_body_bytes: usize,
    signal: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = std::io::Result<()>> + Send {
    let runs = state.clone();
    let loopback = listener
        .local_addr()
        .is_ok_and(|addr| addr.ip().to_canonical().is_loopback());
    let open = state.token.is_none();
    // Refused here as `run` refuses it from the settings, for a library caller that gets here
    // without them.
    let refused = (open && !loopback && !state.allow_unauthenticated).then(|| {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "a listener on an address that is not loopback needs a token, or a state that \
             allows serving unauthenticated",
        )
    });
    // With the override on, the router has no guard of its own: a loopback listener still
    // answers only requests for a loopback host.
    let loopback_hosts_only = open && loopback && state.allow_unauthenticated;
    let shutdown = async move {
        signal.await;
        runs.cancel_runs();
    };
    async move {
        if let Some(refused) = refused {
            return Err(refused);
        }
        let limits = state.connection_limits;
        let in_flight = state.runs_in_flight.clone();
        let mut app = router(state, max_body_bytes);
        if loopback_hosts_only {
            // Outermost: no route, fallback or body read before the host is checked.
            app = app.layer(axum::middleware::from_fn(host::require_loopback_host));
        }
        // TCP_NODELAY and each request's peer (`ConnectInfo`) are set there.
        conn::serve_connections(listener, app, limits, shutdown).await;
        // Every response is done, but a run whose stream was cut goes on without one: its
        // thread is saved before the server is done (cancelled, it ends soon).
        in_flight.closed().await;
        Ok(())
    }
}

/// Resolves at SIGINT or SIGTERM; both handlers are installed before this returns. A handler
/// that cannot be installed leaves that signal's default in place.
#[cfg(unix)]
fn shutdown_signal() -> impl Future<Output = ()> + Send {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    async fn received(signal: Option<Signal>) {
        match signal {
            Some(mut signal) => {
                signal.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
    let interrupt = signal(SignalKind::interrupt()).ok();
    let terminate = signal(SignalKind::terminate()).ok();
    async move {
        tokio::select! {
            () = received(interrupt) => {}
            () = received(terminate) => {}
        }
    }
}

/// Resolves at Ctrl-C.
#[cfg(not(unix))]
fn shutdown_signal() -> impl Future<Output = ()> + Send {
    async {
        // Without a signal handler the server runs until killed.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The routes, with the body limit applied to every request. An unknown path gets a JSON 404, a
/// known one with the wrong method a JSON 405 (with axum's `Allow` header). With the state's
/// token, a request to any path but `/healthz` without it gets a JSON 401 first (unknown paths
/// and wrong methods too, so no one learns the routes without the token).
///
/// Without a token (and unless the state allows serving unauthenticated,
/// [`AppState::with_allow_unauthenticated`]), the router answers only requests from a loopback
/// peer addressed to a loopback host, before any route sees them: anything else gets a JSON 403
/// (`client_not_allowed`, `host_not_allowed`). It learns the peer from axum's
/// `ConnectInfo<SocketAddr>`, so serve it with
/// `into_make_service_with_connect_info::<SocketAddr>()` (as [`serve`] does): served without
/// it, it cannot tell a peer on this machine from one elsewhere and refuses every request.
pub fn router(state: Arc<AppState>, max_body_bytes: usize) -> Router {
    // On the runs' routes only, for their method only: a wrong method gets its 405.
    let take_request = axum::middleware::from_fn_with_state(state.clone(), take_run_request);
    let router = Router::new()
        .route(
            "/healthz",
            get(|| async { json_response(StatusCode::OK, json!({"status": "ok"})) }),
        )
        .route("/api/v1/tools", get(list_tools))
        .route("/api/v1/tools/stats", get(tool_stats))
        .route(
            "/api/v1/agui",
            post(agui::run).route_layer(take_request.clone()),
        )
        .route("/api/v1/chat", post(chat::run).route_layer(take_request))
        .fallback(|| async {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint").into_response()
        })
        // After the routes: it applies to the routes added so far.
        .method_not_allowed_fallback(|method: Method| async move {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                format!("this endpoint does not answer {}", shown_method(&method)),
            )
            .into_response()
        })
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            BodyLimit(max_body_bytes),
            refuse_declared_oversize,
        ))
        // The handlers name the limit in a 413.
        .layer(axum::Extension(BodyLimit(max_body_bytes)))
        .with_state(state.clone());
    // A guard wraps the whole router, not each route (`Router::layer`): axum adds a path's
    // `Allow` to whatever its method fallback answers, a guard's 401 or 403 too, which would
    // tell a client the guard refuses which paths exist.
    let guarded = Router::new().fallback_service(router);
    match &state.token {
        // No route, fallback or body read without the token.
        Some(token) => guarded.layer(axum::middleware::from_fn_with_state(
            token.clone(),
            auth::require_token,
        )),
        // No route, fallback or body read before the client and host are checked.
        None if !state.allow_unauthenticated => {
            guarded.layer(axum::middleware::from_fn(host::require_loopback_client))
        }
        None => guarded,
    }
}

/// A request's method as a refusal names it: a standard method (RFC 9110, and `PATCH`) by its
/// name; any other is the client's own text, as long as a request line may be, and is not quoted.
fn shown_method(method: &Method) -> &str {
    match method.as_str() {
        standard @ ("GET" | "HEAD" | "POST" | "PUT" | "DELETE" | "CONNECT" | "OPTIONS"
        | "TRACE" | "PATCH") => standard,
        _ => "this method",
    }
}

async fn list_tools(State(state): State<Arc<AppState>>) -> Response {
    let result = state.context("catalog").and_then(|ctx| state.catalog(&ctx));
    match result {
        Ok(catalog) => {
            let specs: Vec<_> = catalog.specs().collect();
            json_response(StatusCode::OK, json!({ "tools": specs }))
        }
        Err(error) => error.into_response(),
    }
}

async fn tool_stats(State(state): State<Arc<AppState>>) -> Response {
    json_response(
        StatusCode::OK,
        json!({ "tools": state.runtime.runner.stats() }),
    )
}

fn json_response(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A request refused before its run starts: a status and a JSON body
/// `{"error":{"code":…,"message":…}}` naming what was wrong.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// A header the answer carries besides its body (a 415's `Accept-Encoding`), if any.
    header: Option<(header::HeaderName, &'static str)>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            header: None,
        }
    }

    /// This refusal, answered with the header `name: value` as well.
    fn with_header(self, name: header::HeaderName, value: &'static str) -> Self {
        Self {
            header: Some((name, value)),
            ..self
        }
    }

    fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// A 500 whose cause (a store's or the catalog's error, which may name the client's ids, a
    /// path or a database detail) goes to the server's log only; the client gets `summary`.
    fn internal_logged(summary: &str, cause: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "{summary}");
        Self::internal(format!("{summary} (the server's log says why)"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = json_response(
            self.status,
            json!({"error": {"code": self.code, "message": self.message}}),
        );
        if let Some((name, value)) = self.header {
            response
                .headers_mut()
                .insert(name, HeaderValue::from_static(value));
        }
        response
    }
}

/// The largest request body the router takes, in bytes (`server.max_body_bytes`), as the
/// handlers learn it to name it in a 413.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BodyLimit(pub(crate) usize);

impl BodyLimit {
    /// The 413 for a body over the limit, naming it and its setting.
    fn refusal(self) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!(
                "the request body is larger than the {} bytes this server takes \
                 (server.max_body_bytes)",
                self.0
            ),
        )
    }
}

/// Refuses a request whose `Content-Length` is over the limit before a byte of its body is read
/// (413, as [`parse_body`] refuses one found larger as it is read, which would first take the
/// limit's worth of it). A body of no stated length (chunked) is left to that limit. A
/// `Content-Length` that is not a number never gets here: hyper refuses the request.
async fn refuse_declared_oversize(
    State(limit): State<BodyLimit>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|length| length.to_str().ok()?.parse::<u64>().ok());
    match declared {
        Some(length) if length > u64::try_from(limit.0).unwrap_or(u64::MAX) => {
            limit.refusal().into_response()
        }
        _ => next.run(request).await,
    }
}

/// Lets a request for a run read its body only while fewer than `max_concurrent_runs` others are
/// being read or started ([`AppState::run_requests`]); one more is refused with the run limit's
/// 503 `too_many_runs` before a byte of its body is read, so what the server buffers is bounded
/// by the run limit, not by the connections it serves. The permit is held until the handler
/// answers: its run has taken a run slot of its own by then, or was refused. A client slow to
/// send its body holds it meanwhile: under [`serve`], for at most the body-read bound
/// ([`ConnectionLimits::body_read_timeout`]); served by other code, for as long as that code
/// lets a body take.
async fn take_run_request(
    State(state): State<Arc<AppState>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Ok(_reading) = state.run_requests.clone().try_acquire_owned() else {
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_runs",
            format!(
                "the server already reads or starts its most runs at once ({}); nothing ran and \
                 the request body was not read: try again shortly",
                state.max_runs
            ),
        )
        .into_response();
    };
    next.run(request).await
}

/// The body as JSON of type `T`: larger than `limit` → 413 naming the limit, not JSON or in a
/// content coding (gzip, say) → 415 (the latter with `Accept-Encoding: identity`), in a transfer
/// coding but chunked → 501, malformed or not matching the protocol's shape → 400, each naming
/// the fault (and where it is) without quoting the body or the headers it came with.
fn parse_body<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    limit: BodyLimit,
) -> Result<T, ApiError> {
    let body = body.map_err(|rejection| {
        let status = rejection.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            // axum's own text ("Failed to buffer the request body: length limit exceeded")
            // names neither the limit nor the setting.
            return limit.refusal();
        }
        // A body that did not arrive in time (`conn`): its own status and code.
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&rejection);
        while let Some(error) = cause {
            if let Some(timeout) = error.downcast_ref::<conn::BodyTimeout>() {
                return ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "body_timeout",
                    timeout.to_string(),
                );
            }
            cause = error.source();
        }
        ApiError::new(status, "unreadable_body", rejection.body_text())
    })?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !is_json(content_type) {
        // The header is the client's text: the refusal names what is accepted, not what came.
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the request body must be sent as content-type application/json (parameters such \
             as `; charset=utf-8` allowed)",
        ));
    }
    // The codings are the client's text: the refusals name what is accepted, not what came.
    if !lists_only(headers, header::CONTENT_ENCODING, "identity") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_content_encoding",
            "the request body must be sent without a content coding: this server decodes none \
             (no content-encoding, or identity)",
        )
        // RFC 9110 §12.5.3: what the request could have been sent in (RFC 7694: `identity`
        // alone, no content coding), which tells this 415 from one for the media type.
        .with_header(header::ACCEPT_ENCODING, "identity"));
    }
    if !lists_only(headers, header::TRANSFER_ENCODING, "chunked") {
        return Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "unsupported_transfer_coding",
            "the request body must be sent without a transfer coding but chunked: this server \
             decodes no other",
        ));
    }
    serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(
            "invalid_body",
            format!("the request body is invalid: {}", describe_body_error(&e)),
        )
    })
}

/// Why a body did not decode, without quoting it: serde_json's own message for a syntax error
/// (a fixed text and a position), and for a body of the wrong shape `describe_json_error`'s,
/// since serde's would quote the value it refused (an unknown role, a string where a list
/// belongs): a client's text, of any length, sent back in the error.
fn describe_body_error(e: &serde_json::Error) -> String {
    match e.classify() {
        serde_json::error::Category::Data => ai_core::describe_json_error(e),
        _ => e.to_string(),
    }
}

/// Whether a `Content-Type` names JSON: the media type `application/json` in any case, with or
/// without parameters (`; charset=utf-8`).
fn is_json(content_type: &str) -> bool {
    let media_type = content_type.split(';').next().unwrap_or_default();
    media_type.trim().eq_ignore_ascii_case("application/json")
}

/// Whether every coding the `name` lines of `headers` list (comma-separated, in any case) is
/// `only`, or they list none: the server decodes no content coding (`Content-Encoding`, RFC 9110
/// §8.4) and no transfer coding but `chunked` (`Transfer-Encoding`, RFC 9112 §6.1), which hyper
/// takes off; a body in another (gzip, say) is not its JSON, whatever its bytes happen to be.
fn lists_only(headers: &HeaderMap, name: header::HeaderName, only: &str) -> bool {
    headers.get_all(name).iter().all(|line| {
        line.to_str().is_ok_and(|codings| {
            codings
                .split(',')
                .map(str::trim)
                .all(|coding| coding.is_empty() || coding.eq_ignore_ascii_case(only))
        })
    })
}

/// The conversation a request brings: its history, and what begins the run.
pub(crate) struct Incoming {
    /// The client's history, used only when the server has no state for the thread.
    pub(crate) history: Vec<HistoryItem>,
    /// For each item of `history`, the position of the client's message it came from, so a
    /// refusal names the message rather than quoting an id in it.
    pub(crate) history_at: Vec<usize>,
    /// Why the client's history cannot be read (`history` then holds what was read before the
    /// fault): refused only when the server holds no thread to continue, since with one the
    /// history is not used, and the client's copy may hold what no history could be read with
    /// (a call id longer than any thread holds, say), which would otherwise refuse every next
    /// message of the chat.
    pub(crate) unreadable_history: Option<ApiError>,
    /// What begins the run.
    pub(crate) turn: IncomingTurn,
    /// For a user message the client sends again rather than for the first time (an AI SDK
    /// retry): where it stands in the client's copy, to find it in the thread the server holds.
    pub(crate) resend: Option<Resend>,
    /// Over AG-UI: the user messages the client's copy holds before the run's turn (its new
    /// message, if any), as [`Resend::before`]. Before a new message they must be the thread's
    /// latest ([`check_latest`]); either way they say whether the copy holds the thread's last
    /// turn ([`StartedRun::copy_holds_turn`]).
    pub(crate) follows: Option<Vec<(String, bool)>>,
}

impl Incoming {
    /// What begins a run on a thread the server holds: no history, which it would not read.
    pub(crate) fn without_history(turn: IncomingTurn) -> Self {
        Self {
            history: Vec::new(),
            history_at: Vec::new(),
            unreadable_history: None,
            turn,
            resend: None,
            follows: None,
        }
    }
}

/// A user message the client sends again, last in its copy of the conversation: the AI SDK's
/// `regenerate()` (`trigger: "regenerate-message"`), which a client calls to retry a message
/// refused before it ran (a 503 `too_many_runs`, a 409), and its stock Regenerate button calls to
/// have a message it answered answered again (the history cut before that answer, whatever
/// `messageId` names), or its edit of a message (`sendMessage({text, messageId})`:
/// `submit-message` naming the last message, the edited one, where the client cut its history).
///
/// On a thread the server holds, the message is found by its place among the user messages:
/// those the client's copy holds before it must be the thread's, in order (one the client holds
/// no answer to, a message refused before any run took it, may be missing from the thread; a
/// retry read several ways so is placed where the thread holds its text, if any reading does).
/// A message the thread does not hold yet is run as a new one. Otherwise the thread is rewound
/// to before the message at its place, whatever followed it (the run log keeps the runs that
/// made what is rewound away), and the message runs there: an edit's text in place of the one it
/// replaces, a retry's own, which must be the text the thread holds there. Any other request is
/// refused as not matching the thread.
#[derive(Debug)]
pub(crate) struct Resend {
    /// An edit or a retry.
    pub(crate) kind: ResendKind,
    /// The user messages the client's copy holds before this one, in order: each one's text,
    /// and whether the client holds an answer to it (an assistant message after it, before the
    /// next user message).
    pub(crate) before: Vec<(String, bool)>,
}

/// The most readings of a client's copy `Resend::rewind` follows at once. Each user message of
/// the copy without an answer that the thread may hold adds one (it is the thread's, or one no
/// run took), and each reading is tried against every later message of the copy: bounded, the
/// work is linear in the copy's length, where a copy of thousands of such messages on a thread
/// of thousands (each within a request body) would cost their product. A chat holds that many
/// only if that many of its messages were refused or failed; a copy with more is refused.
const MAX_READINGS: usize = 256;

/// Why a client sends a user message again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ResendKind {
    /// An edit: the message replaces the one at its place, and what followed it.
    Edit,
    /// A retry (ai's `regenerate()`): the message runs again in its place, the answer it had
    /// (if any) and what followed it rewound away.
    Retry,
}

impl Resend {
    /// `state` ready for `message` sent again: as it is when it does not hold the message yet,
    /// rewound to before the one it replaces (an edit) or to before it (a retry, of the message
    /// the thread holds at its place); refused otherwise (409 `history_mismatch`).
    fn rewind(&self, state: AgentState, message: &str) -> Result<AgentState, ApiError> {
        let conflict = |code, message: &str| ApiError::new(StatusCode::CONFLICT, code, message);
        let mismatch = || {
            conflict(
                "history_mismatch",
                "the conversation sent does not match the thread's: the user messages before the \
                 last are not the ones the thread holds; nothing ran; send the message as a new \
                 one, or start a new thread to go on from another history",
            )
        };
        let users = user_messages(&state);
        // Every count of the thread's user messages the client's copy can hold before this one.
        let places = readings(&self.before, |at, text| {
            users.get(at).is_some_and(|(_, held)| *held == text)
        })?;
        // A retry names its message by its text too: the furthest reading that finds that text
        // in the thread at its place is the one meant (a copy holding a refused message typed
        // again reads several ways, and only one puts the retried message where the thread holds
        // it). Otherwise, and for an edit, the furthest reading: a message the thread holds is
        // not taken for one it never held.
        let matching = places.iter().rev().copied().find(|&at| {
            self.kind == ResendKind::Retry
                && users.get(at).is_some_and(|(_, held)| *held == message)
        });
        let Some(found) = matching.or_else(|| places.last().copied()) else {
            return Err(mismatch());
        };
        let Some(&(at, held)) = users.get(found) else {
            // The thread holds every message before it, and not it: it runs as a new one.
            return Ok(state);
        };
        // A retry names the message by its text too: another message at its place is another
        // conversation. An edit replaces whatever the thread holds there.
        if self.kind == ResendKind::Retry && held != message {
            return Err(conflict(
                "history_mismatch",
                "the message sent again is not the one the thread holds at its place; nothing \
                 ran; send it as a new message, or start a new thread to go on from another \
                 history",
            ));
        }
        // Rewound to before the message, whatever followed it (its answer, later turns): the
        // message runs in its place. The run log keeps the runs that made what is rewound away.
        state
            .with_history(state.messages()[..at].to_vec())
            .map_err(|e| ApiError::internal_logged("the thread cannot be rewound", &e))
    }
}

/// A message of a client's copy of a conversation, as [`users_before`] reads it.
enum Said {
    /// The user's, with its text.
    User(String),
    /// An assistant's: an answer to the user message before it.
    Assistant,
    /// Any other (instructions, a tool's result, the frontend's own).
    Other,
}

/// The user messages of a client's copy (its messages before the new one, in order): each one's
/// text, and whether the client holds an answer to it (an assistant message after it, before
/// the next user message).
fn users_before(copy: impl IntoIterator<Item = Said>) -> Vec<(String, bool)> {
    let mut users: Vec<(String, bool)> = Vec::new();
    for said in copy {
        match said {
            Said::User(text) => users.push((text, false)),
            Said::Assistant => {
                if let Some((_, answered)) = users.last_mut() {
                    *answered = true;
                }
            }
            Said::Other => {}
        }
    }
    users
}

/// The thread's user messages, in order: each one's place in its messages, and its text.
fn user_messages(state: &AgentState) -> Vec<(usize, &str)> {
    state
        .messages()
        .iter()
        .enumerate()
        .filter_map(|(at, m)| match m {
            ai_core::Message::User { content } => Some((at, content.as_str())),
            _ => None,
        })
        .collect()
}

/// Every count of a thread's user messages that a client's copy of them can stand for, read in
/// the order `copy` gives (each message's text, and whether the client holds an answer to it),
/// where `held(n, text)` says whether the thread's `n`th user message in that order is `text`.
/// An answered message is the thread's next; one without an answer may be, or may be a message
/// no run took (refused before it ran), which the thread never held: both readings are followed,
/// since taking the first that fits would misread a refused message the user then typed again
/// (the same text twice, only the second the thread's). No reading: the copy is not the
/// thread's. More than `MAX_READINGS`: refused (409 `history_mismatch`).
fn readings<'a>(
    copy: impl IntoIterator<Item = &'a (String, bool)>,
    held: impl Fn(usize, &str) -> bool,
) -> Result<Vec<usize>, ApiError> {
    let mut places = vec![0];
    for (text, answered) in copy {
        let mut next: Vec<usize> = places
            .iter()
            .filter(|&&at| held(at, text))
            .map(|at| at + 1)
            .collect();
        if !answered {
            next.extend_from_slice(&places);
            next.sort_unstable();
            next.dedup();
        }
        if next.len() > MAX_READINGS {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "history_mismatch",
                "the conversation sent holds too many user messages without an answer that the \
                 thread may hold before the last to tell which it holds; nothing ran; send the \
                 message as a new one",
            ));
        }
        places = next;
    }
    Ok(places)
}

/// Whether an AG-UI client's copy fits the thread it continues: the user messages it holds
/// before its new one (`before`, as [`Resend::before`]) must be the thread's latest, in order
/// (one without an answer may be missing from the thread: a message no run took). A client
/// may send fewer than the thread holds, down to the new message alone. AG-UI has no edit or
/// retry, so a copy whose earlier messages differ from the thread's (one edited, or the history
/// cut before an answer to have it again) would otherwise run its last message after turns
/// the client no longer shows, its change silently lost: refused (409 `history_mismatch`).
fn check_latest(state: &AgentState, before: &[(String, bool)]) -> Result<(), ApiError> {
    let users = user_messages(state);
    let latest = |n: usize, text: &str| {
        users
            .len()
            .checked_sub(n + 1)
            .is_some_and(|at| users[at].1 == text)
    };
    if readings(before.iter().rev(), latest)?.is_empty() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "history_mismatch",
            "the conversation sent does not match the thread's: the user messages before the \
             last are not the latest the thread holds (a message edited or sent again is not \
             run over AG-UI, which has no edit or retry); nothing ran; start a new thread to \
             go on from another history",
        ));
    }
    Ok(())
}

/// What a request asks the run to begin with.
pub(crate) enum IncomingTurn {
    /// A new user message.
    Message(String),
    /// Answers to the approvals the thread waits for. A call the thread waits for with no
    /// answer is denied.
    Approvals(Vec<Answer>),
}

/// A client's answer to one approval request.
pub(crate) struct Answer {
    /// The call answered, as the client names it.
    pub(crate) call_id: String,
    /// Whether the client approved it.
    pub(crate) approved: bool,
    /// The reason the client gave, passed on to the model with a denial.
    pub(crate) reason: Option<String>,
}

/// A started run: its events, the token that cancels it when the stream is dropped, and, for a
/// run that resumes from approval answers, every call the thread waited for with its decision
/// (answered or not: an unanswered call is denied).
pub(crate) struct StartedRun {
    events: relay::ClientEvents,
    cancel: CancellationToken,
    resumed: Vec<(ai_core::ToolCallId, bool)>,
    /// For a user message: the open calls of the thread's last turn that it answers, which an
    /// earlier run showed and this run ends (a start without arguments and the result each),
    /// each with whether it may have run (see [`superseded_calls`]).
    superseded: Vec<(ai_core::ToolCallId, bool)>,
    /// Whether the client's copy of the conversation ([`Incoming::follows`]) holds the user
    /// message the thread's last turn began with, and so, after it, all the client was shown
    /// of that turn: a call of that turn (`resumed`, `superseded`) that none of the copy's
    /// assistant messages names, and that the request answers no interrupt of (an interrupt
    /// follows the call's start, so answering one shows the client saw the call), never reached
    /// the client (its stream was cut before the call's start). A copy without that message (a
    /// client that sends only its new one) says nothing of the calls the client holds.
    copy_holds_turn: bool,
}

/// The calls a user message on `state` answers, all of them shown by an earlier run: those
/// waiting for approval, cancelled (`false`: they never ran), or those a resume left out with
/// the runner when its closing save was lost, answered as calls that may have run (`true`:
/// `graph::lost_result`).
fn superseded_calls(state: &AgentState) -> Vec<(ai_core::ToolCallId, bool)> {
    match state.phase() {
        graph::Phase::AwaitingApproval { pending, .. } => pending
            .iter()
            .map(|p| (p.tool_call_id.clone(), false))
            .collect(),
        graph::Phase::AwaitingTools { calls, answered } => calls
            .iter()
            .filter(|call| !answered.iter().any(|a| a.tool_call_id == call.id))
            .map(|call| (call.id.clone(), true))
            .collect(),
        _ => Vec::new(),
    }
}

/// Starts a run on a thread: loads the server's state (or rebuilds the client's history when
/// there is none), spawns the loop, and saves the thread when the run ends. One run per thread
/// at a time: a second one is refused with 409; and at most `max_concurrent_runs` in all: one
/// more on a thread that is not busy is refused with 503 before its thread is read. A cancel of
/// the server's runs while the thread store has not answered the load abandons it: 503
/// `cancelled`, nothing ran.
async fn start_run(
    state: &Arc<AppState>,
    thread: &str,
    run_id: &str,
    mut incoming: Incoming,
) -> Result<StartedRun, ApiError> {
    let thread = ThreadId::new(thread)
        .map_err(|e| ApiError::bad_request("invalid_thread_id", format!("thread id: {e}")))?;
    let ctx = state.context(run_id)?;
    let catalog = state.catalog(&ctx)?;
    let busy = BusyGuard::acquire(state.clone(), thread.clone())?;
    // Raced against the server's cancel (its shutdown), as the loop races its own loads: a load
    // only reads, so abandoning it is safe, and a store that never answers must not hold the
    // request, and the graceful shutdown that waits for it, for ever. The load goes first, so a
    // store that answers at once is still taken once the cancel has come, as before.
    let loaded = tokio::select! {
        biased;
        loaded = state.stores.threads.load(&thread) => loaded,
        () = state.runs_cancel.cancelled() => return Err(cancelled_while_loading()),
    };
    let saved = loaded.map_err(|e| ApiError::internal_logged("the thread cannot be read", &e))?;
    let agent_state = match saved.clone() {
        // The decoder's own message would quote the state (the conversation): never shown, nor
        // logged. The fault is the server's, so its log says so too, as for every other 500.
        Some(saved) => {
            let held: AgentState = serde_json::from_value(saved).map_err(|e| {
                let fault = ai_core::describe_json_error(&e);
                tracing::error!(%fault, "a thread holds a state this build cannot read");
                ApiError::internal(format!("the thread holds an unreadable state: {fault}"))
            })?;
            if let (Some(before), IncomingTurn::Message(_)) = (&incoming.follows, &incoming.turn) {
                check_latest(&held, before)?;
            }
            match (&incoming.resend, &incoming.turn) {
                (Some(resend), IncomingTurn::Message(message)) => resend.rewind(held, message)?,
                _ => held,
            }
        }
        None => {
            // Only a history that starts a thread is read: one the server holds goes on from
            // its own state whatever the client's copy holds.
            if let Some(unreadable) = incoming.unreadable_history.take() {
                return Err(unreadable);
            }
            let invalid = |fault: String| ApiError::bad_request("invalid_history", fault);
            let messages = reconstruct_history(&incoming.history)
                .map_err(|e| invalid(history_fault(&incoming, &e)))?;
            state
                .runtime
                .agent
                .state_from_history(messages)
                .map_err(|e| invalid(history_fault(&incoming, &e.into())))?
        }
    };
    let copy_holds_turn = holds_last_turn(&agent_state, incoming.follows.as_deref());
    let mut resumed = Vec::new();
    let mut superseded = Vec::new();
    let turn = match incoming.turn {
        IncomingTurn::Message(message) => {
            superseded = superseded_calls(&agent_state);
            crate::Turn::UserMessage(message)
        }
        IncomingTurn::Approvals(answers) => {
            let decisions = decisions(&agent_state, answers)?;
            resumed = decisions
                .iter()
                .map(|d| (d.tool_call_id.clone(), d.approved))
                .collect();
            crate::Turn::ApprovalDecisions(decisions)
        }
    };
    // The run log refuses a run id it holds already (`start_run` below): without one, the
    // server keeps the ids itself, so a runId means one run with a data folder or without (but
    // for an id older than the last `KEPT_ENDED_RUN_IDS` ended runs).
    let run_id = match state.stores.log {
        None => Some(RunIdGuard::claim(state.clone(), ctx.run_id().clone())?),
        Some(_) => None,
    };
    let cancel = state.runs_cancel.child_token();
    let request = crate::RunRequest {
        thread,
        state: agent_state,
        saved_state: saved,
        turn,
        ctx,
        catalog,
        cancel: cancel.clone(),
    };
    // The thread and the run's slot are freed once its new state is saved, before `Done`
    // reaches the client.
    let claimed = run_id.as_ref().map(|guard| guard.id.clone());
    let in_flight = state.runs_in_flight.subscribe();
    let on_saved = move || drop((busy, run_id, in_flight));
    // Begun in a task of its own: beginning a run writes to the log (its row, then for a resume
    // or a rewind the thread), and a client that leaves meanwhile drops this future at any of
    // those writes, which would leave the run half begun: its row `running` with no task to
    // close it, or a thread saved past its pause with nothing to run its approved calls. The
    // task begins it whole; the guard, left armed by a client that left, cancels it, and it
    // ends and saves its thread as a run whose client leaves does.
    let left = cancel.clone().drop_guard();
    let begin = {
        let state = state.clone();
        tokio::spawn(async move { begin_run(&state, request, on_saved, claimed).await })
    };
    let events = begin.await.map_err(|e| {
        ApiError::internal_logged(
            "the run cannot start",
            &format_args!("its task failed: {e}"),
        )
    })??;
    left.disarm();
    Ok(StartedRun {
        events: relay::relay(events, state.unsent_bounds, state.unsent.clone()),
        cancel,
        resumed,
        superseded,
        copy_holds_turn,
    })
}

/// Whether a client's copy, whose user messages before the run's turn are `users` (as
/// [`Incoming::follows`]), holds the user message `state`'s last turn began with: one of them
/// has its text. A copy sent with a new message is the thread's latest messages
/// ([`check_latest`]), so one that holds that message holds all it was shown after it. A
/// resume's copy is not checked: one that holds the message but not the turn's calls is stale,
/// and was not shown them either.
fn holds_last_turn(state: &AgentState, users: Option<&[(String, bool)]>) -> bool {
    let Some((_, last)) = user_messages(state).pop() else {
        return false;
    };
    users.is_some_and(|users| users.iter().any(|(text, _)| text == last))
}

/// [`crate::start_run`] for the server: a run store's refusal as the client's error, and, without
/// a run log, a run that never began gives its `claimed` id back.
async fn begin_run(
    state: &AppState,
    request: crate::RunRequest,
    on_saved: impl FnOnce() + Send + 'static,
    claimed: Option<ai_core::RunId>,
) -> Result<tokio::sync::mpsc::UnboundedReceiver<AiEvent>, ApiError> {
    crate::start_run(&state.runtime, &state.stores, request, on_saved)
        .await
        .inspect_err(|_| {
            // Nothing of the run ran: its id is free again, as with a run log that never
            // began the run, rather than refused until `KEPT_ENDED_RUN_IDS` more runs end.
            if let Some(id) = &claimed {
                let mut ids = state.run_ids.lock().unwrap_or_else(|p| p.into_inner());
                ids.forget(id);
            }
        })
        .map_err(|e| refusal_to_begin(&e))
}

/// What a client is told of a run [`crate::start_run`] could not begin: a run store's refusal
/// as the client's error (409), anything else as the server's (500, its cause logged). A thread
/// another run changed is said so in words true of both protocols: the AI SDK runs a new message
/// from the thread whatever the client's copy holds, but AG-UI refuses a copy that lacks a user
/// message the thread holds (409 `history_mismatch`, [`check_latest`]), as one that lacks the
/// other run's does when that run began with one.
fn refusal_to_begin(e: &anyhow::Error) -> ApiError {
    let changed = matches!(
        e.downcast_ref::<ai_core::RunStoreError>(),
        Some(ai_core::RunStoreError::ThreadChanged { .. })
    ) || matches!(
        e.downcast_ref::<ai_core::ThreadStoreError>(),
        Some(ai_core::ThreadStoreError::Changed)
    );
    match e.downcast_ref::<ai_core::RunStoreError>() {
        Some(ai_core::RunStoreError::AlreadyExists(_)) => run_exists(),
        // The store's message names the thread and the run, the client's ids: not repeated.
        _ if changed => ApiError::new(
            StatusCode::CONFLICT,
            "thread_changed",
            "the thread changed since this run was asked for: another run stored a turn on it \
             meanwhile, which this conversation may not show; nothing ran; a new message goes on \
             from the thread as that run left it, but over AG-UI one whose conversation lacks a \
             user message that turn began with is refused (409 `history_mismatch`): start a new \
             thread then",
        ),
        _ => ApiError::internal_logged("the run cannot start", &format_args!("{e:#}")),
    }
}

/// A run cancelled (the server's shutdown, [`AppState::cancel_runs`]) while its thread store had
/// not answered its load: 503 `cancelled`, a cancel rather than a failure; nothing ran.
fn cancelled_while_loading() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "cancelled",
        "the run was cancelled before it started: the server is stopping its runs and its \
         thread was still being read; nothing ran",
    )
}

/// Why a client's history cannot start a thread, named by the position of the client's message
/// that holds the fault (`messages[3]: …`) and the kind of fault. The errors of
/// `reconstruct_history` name tool call ids, which are the client's text (a model chose them,
/// but the client sent them back, of any length): a refusal never quotes them.
fn history_fault(incoming: &Incoming, error: &graph::ReconstructError) -> String {
    use ai_core::HistoryError;
    use graph::ReconstructError;
    let message_of = |item: usize| incoming.history_at.get(item).copied();
    // The first item naming `id`: its call, or a result when no call has it.
    let message_naming = |id: &ai_core::ToolCallId| {
        let call = incoming
            .history
            .iter()
            .position(|item| matches!(item, HistoryItem::ToolCall { id: call, .. } if call == id));
        let result = || {
            incoming.history.iter().position(|item| {
                matches!(item, HistoryItem::ToolResult { tool_call_id, .. } if tool_call_id == id)
            })
        };
        call.or_else(result).and_then(message_of)
    };
    let unpaired = "its tool calls and results do not pair";
    let (at, fault) = match error {
        ReconstructError::Orphan { index, .. } => (
            message_of(*index),
            "a tool result answers no tool call of its assistant turn",
        ),
        ReconstructError::Duplicate { index, .. } => (
            message_of(*index),
            "a tool call id is used a second time (by two calls or two results)",
        ),
        ReconstructError::Unanswered { tool_call_id } => (
            message_naming(tool_call_id),
            "a tool call has no result before the next user or system message or the end of \
             the history",
        ),
        ReconstructError::EmptyUserMessage { index } => (message_of(*index), NO_TEXT),
        ReconstructError::EmptySystemMessage { index } => (
            message_of(*index),
            "a system message holds no text (only its text parts are read)",
        ),
        ReconstructError::Invalid(invalid) => {
            let id = match invalid {
                HistoryError::OrphanToolMessage { tool_call_id, .. }
                | HistoryError::Unanswered { tool_call_id, .. }
                | HistoryError::DuplicateToolCallId { tool_call_id, .. } => Some(tool_call_id),
                HistoryError::OutOfOrder { found, .. } => Some(found),
                _ => None,
            };
            (id.and_then(message_naming), unpaired)
        }
        _ => (None, unpaired),
    };
    match at {
        Some(at) => format!("the message history is invalid: messages[{at}]: {fault}"),
        None => format!("the message history is invalid: {fault}"),
    }
}

/// What the model is told of a call in a client's history that waited for an approval never
/// sent, since a new message came instead: a history that starts a thread (the server lost the
/// one it held) answers it so, as the server answers such calls when it holds the thread.
const NEVER_RAN_APPROVAL_UNSENT: &str =
    "the call never ran: a new message came before its approval was sent";

/// What the model is told of a call in a client's history that has no result and did not wait
/// for an approval (its run was cut off before its result arrived, say): the server that could
/// answer it no longer holds the thread, and the client has nothing to send back, so the chat
/// goes on without the model being told the call ran.
const NO_RESULT_REACHED: &str =
    "no result reached this conversation for this call, so it may not have run";

/// The result content of a call that did not run or whose result never arrived: the model reads
/// it as a failed call.
fn unanswered_result(message: &str) -> String {
    serde_json::json!({"error": {"message": message}}).to_string()
}

/// Why a user message is refused that holds no text a model can read: none, whitespace only,
/// or only parts cogni does not read (parts it does not know are skipped, so a message that also
/// holds text is read).
const NO_TEXT: &str = "a user message holds no text (only its text parts are read)";

/// The refusal of a new user message (at `index` of the request's `messages`) that holds no
/// text: there is nothing in it for a model to answer.
fn no_text(index: usize) -> ApiError {
    ApiError::bad_request("invalid_history", format!("messages[{index}]: {NO_TEXT}"))
}

/// The refusal of a run whose id was used already. The id is the client's (an AG-UI `runId`):
/// not repeated.
fn run_exists() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "run_exists",
        "this runId was used already: a new run needs a new runId",
    )
}

/// The decisions that resume a thread in `state`: one per call it waits for, approved only when the
/// client approved that call id, and bound to the arguments hash the server holds for it (the
/// arguments the client was shown). An answer for a call the thread does not wait for is
/// refused (409, naming the calls it waits for, not the one answered), and so are two answers
/// for one call (400), so a stale, mistaken or contradictory answer never runs anything.
fn decisions(state: &AgentState, answers: Vec<Answer>) -> Result<Vec<ApprovalDecision>, ApiError> {
    let conflict =
        |message: String| ApiError::new(StatusCode::CONFLICT, "nothing_to_resume", message);
    let graph::Phase::AwaitingApproval { pending, .. } = state.phase() else {
        return Err(conflict(
            "the thread waits for no approval: send a user message instead".into(),
        ));
    };
    // An answer is the client's text, of any length: a refusal names the calls the thread
    // waits for (the server's own ids), never the one answered.
    if answers.iter().any(|answer| {
        !pending
            .iter()
            .any(|p| p.tool_call_id.as_str() == answer.call_id)
    }) {
        // Shown escaped (`ToolCallId`'s `Display`): a model's id may hold control characters.
        let waiting: Vec<String> = pending.iter().map(|p| p.tool_call_id.to_string()).collect();
        return Err(conflict(format!(
            "the thread does not wait for an approval of a call answered; it waits for {}",
            waiting.join(", ")
        )));
    }
    // Two answers for one call are a contradiction at worst: nothing runs on one. (Each names a
    // call the thread waits for, checked above: the refusal shows the server's id, escaped.)
    if let Some(twice) = pending.iter().find(|p| {
        answers
            .iter()
            .filter(|answer| p.tool_call_id.as_str() == answer.call_id)
            .count()
            > 1
    }) {
        return Err(ApiError::bad_request(
            "invalid_resume",
            format!("call {} is answered more than once", twice.tool_call_id),
        ));
    }
    Ok(pending
        .iter()
        .map(|waiting| {
            let answer = answers
                .iter()
                .find(|answer| waiting.tool_call_id.as_str() == answer.call_id);
            ApprovalDecision {
                tool_call_id: waiting.tool_call_id.clone(),
                approved: answer.is_some_and(|answer| answer.approved),
                args_hash: waiting.args_hash.clone(),
                reason: answer.and_then(|answer| answer.reason.clone()),
            }
        })
        .collect())
}

/// How many ids of ended runs a server without a run log keeps, besides those of its runs in
/// flight, to refuse them again: about 2 MB at most (ids of 128 bytes), where a set of every id
/// would grow for the life of the process. A client that retries a run does so long before ten
/// thousand other runs have ended.
pub(crate) const KEPT_ENDED_RUN_IDS: usize = 10_000;

/// The run ids a server without a run log refuses to run again: those of its runs in flight (at
/// most `max_concurrent_runs`, never forgotten while they run) and of its last `keep` ended
/// ones. An older id is forgotten, and may run again.
#[derive(Debug)]
struct UsedRunIds {
    active: HashSet<ai_core::RunId>,
    /// The ids of ended runs, in the order they ended, at most `keep`; `ended_set` holds the same.
    ended: std::collections::VecDeque<ai_core::RunId>,
    ended_set: HashSet<ai_core::RunId>,
    keep: usize,
}

impl UsedRunIds {
    fn new(keep: usize) -> Self {
        Self {
            active: HashSet::new(),
            ended: std::collections::VecDeque::new(),
            ended_set: HashSet::new(),
            keep,
        }
    }

    /// Takes `id` for a run that starts: `false` when a run in flight or a kept ended one has it.
    fn claim(&mut self, id: &ai_core::RunId) -> bool {
        !self.ended_set.contains(id) && self.active.insert(id.clone())
    }

    /// Forgets `id`, in flight or ended, for a run that never started: it may run again.
    fn forget(&mut self, id: &ai_core::RunId) {
        self.active.remove(id);
        if self.ended_set.remove(id) {
            self.ended.retain(|ended| ended != id);
        }
    }

    /// Records that `id`'s run ended: its id is kept among the ended ones, and the one that
    /// ended first is forgotten when more than `keep` are.
    fn end(&mut self, id: &ai_core::RunId) {
        if !self.active.remove(id) || self.keep == 0 {
            return;
        }
        if self.ended.len() >= self.keep
            && let Some(oldest) = self.ended.pop_front()
        {
            self.ended_set.remove(&oldest);
        }
        self.ended_set.insert(id.clone());
        self.ended.push_back(id.clone());
    }
}

/// Holds a run's id as in flight, without a run log, until the run's thread is saved (or the
/// run fails to start): then the id joins the ended runs' ids (for a run that never started,
/// `start_run` then forgets it).
struct RunIdGuard {
    state: Arc<AppState>,
    id: ai_core::RunId,
}

impl RunIdGuard {
    fn claim(state: Arc<AppState>, id: ai_core::RunId) -> Result<Self, ApiError> {
        let mut ids = state.run_ids.lock().unwrap_or_else(|p| p.into_inner());
        if !ids.claim(&id) {
            return Err(run_exists());
        }
        drop(ids);
        Ok(Self { state, id })
    }
}

impl Drop for RunIdGuard {
    fn drop(&mut self) {
        let mut ids = self.state.run_ids.lock().unwrap_or_else(|p| p.into_inner());
        ids.end(&self.id);
    }
}

/// Marks a thread busy while a run holds it, holds the run's slot (one of
/// `max_concurrent_runs`), and, in threads kept in memory, keeps the thread from being
/// forgotten meanwhile.
struct BusyGuard {
    state: Arc<AppState>,
    thread: ThreadId,
    _slot: tokio::sync::OwnedSemaphorePermit,
    _kept: Option<crate::ThreadHold>,
}

impl BusyGuard {
    /// Claims `thread` and a run slot: a busy thread is refused (409 `thread_busy`) before the
    /// slots are counted (503 `too_many_runs`), since its conflict does not depend on the
    /// load. Both are decided under the busy lock, so a thread refused for want of a slot was
    /// never marked busy, and another request on it is answered by whether a run holds it.
    fn acquire(state: Arc<AppState>, thread: ThreadId) -> Result<Self, ApiError> {
        let mut busy = state.busy.lock().unwrap_or_else(|p| p.into_inner());
        if busy.contains(&thread) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "thread_busy",
                "this thread already has a run in progress: send again once it has ended",
            ));
        }
        let slot = state.run_slots.clone().try_acquire_owned().map_err(|_| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_runs",
                format!(
                    "the server already runs its most runs at once ({}); nothing ran: try \
                     again when one has ended",
                    state.max_runs
                ),
            )
        })?;
        busy.insert(thread.clone());
        drop(busy);
        let kept = state
            .stores
            .memory_threads
            .as_ref()
            .map(|m| m.hold(&thread));
        Ok(Self {
            state,
            thread,
            _slot: slot,
            _kept: kept,
        })
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        let mut busy = self.state.busy.lock().unwrap_or_else(|p| p.into_inner());
        busy.remove(&self.thread);
    }
}

/// The SSE frames of what a translator made of one event. An event it dropped because it reuses
/// a call's id (it names a call its stream has answered, starts one it has started, or brings
/// arguments to one whose arguments it has closed) is logged and sends nothing (the stream stays
/// valid): the loop renames a call id an endpoint reuses before any event names it, so this is a
/// bug.
fn frames_of<T: serde::Serialize>(pushed: Result<Vec<T>, wire_ui::ReusedCallId>) -> String {
    match pushed {
        Ok(frames) => frames.iter().map(wire_ui::sse::frame).collect(),
        Err(dropped) => {
            tracing::warn!(%dropped, "a UI stream dropped an event");
            String::new()
        }
    }
}

/// A protocol's translator, as the stream needs it.
pub(crate) trait Translate: Send + 'static {
    /// The frames for one event.
    fn frames(&mut self, event: &AiEvent) -> String;
    /// The frames that end a stream the server cut while its run goes on: the protocol's
    /// terminal error carrying `message`, after the calls the stream leaves open are told so.
    fn cut(&mut self, message: &str) -> String;
    /// Whether the terminal frame has been produced.
    fn finished(&self) -> bool;
    /// Frames after the terminal one (the AI SDK's `[DONE]`).
    fn trailer(&self) -> &'static str {
        ""
    }
}

/// How long a run's stream may stay silent before it carries a comment frame.
///
/// Proxies and load balancers close a response that sends nothing for a while (nginx's
/// `proxy_read_timeout` and AWS ALB's idle timeout default to 60 s), and a tool or a model may
/// well think longer than that. Both protocols' clients ignore SSE comments.
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// What a stream cut for its client falling behind ends with, as the protocol's error.
const CUT_MESSAGE: &str = "this stream was cut: the client fell too far behind it; the run goes \
                           on in the server and saves its thread, which the next message goes \
                           on from once the run has ended";

/// The comment frame a silent stream carries every [`KEEP_ALIVE`].
const KEEP_ALIVE_FRAME: &str = ": keep-alive\n\n";

/// The SSE response for a run: the translator's frames, event by event, until the terminal one,
/// with a comment frame whenever the stream has sent nothing for [`KEEP_ALIVE`] (events the
/// translator sends nothing for do not count).
/// Dropping the body (the client went away) cancels the run. A client that falls too far behind
/// has its stream cut (see `relay`): what waited for it is dropped, the body ends with the
/// protocol's terminal error saying so ([`CUT_MESSAGE`]), and the run goes on.
///
/// Nothing of the `unshown` calls reaches the translator: calls of an earlier run whose answer
/// the client holds already, or cannot be shown (see the routes), which the run answers in the
/// thread alone.
fn sse_response<T: Translate>(
    first: String,
    run: StartedRun,
    translator: T,
    unshown: Vec<ai_core::ToolCallId>,
    extra_headers: &[(&'static str, &'static str)],
) -> Response {
    struct Streaming<T> {
        events: relay::ClientEvents,
        translator: T,
        unshown: Vec<ai_core::ToolCallId>,
        cancel: CancellationToken,
        first: Option<String>,
        done: bool,
        /// When the last frame went out: the keep-alive counts from it, not from the last
        /// event (retries, usage and the like send nothing).
        last_frame: tokio::time::Instant,
    }
    impl<T> Drop for Streaming<T> {
        fn drop(&mut self) {
            // A client cut for falling behind did not leave: its run goes on.
            if !self.events.was_cut() {
                self.cancel.cancel();
            }
        }
    }
    let streaming = Streaming {
        events: run.events,
        translator,
        unshown,
        cancel: run.cancel,
        first: Some(first),
        done: false,
        last_frame: tokio::time::Instant::now(),
    };
    let stream = futures_util::stream::unfold(streaming, |mut s| async move {
        if let Some(first) = s.first.take() {
            s.last_frame = tokio::time::Instant::now();
            return Some((Ok::<_, std::io::Error>(Bytes::from(first)), s));
        }
        if s.done {
            return None;
        }
        loop {
            let quiet_until = s.last_frame + KEEP_ALIVE;
            let Ok(event) = tokio::time::timeout_at(quiet_until, s.events.recv()).await else {
                s.last_frame = tokio::time::Instant::now();
                return Some((Ok(Bytes::from_static(KEEP_ALIVE_FRAME.as_bytes())), s));
            };
            let mut frames = match event {
                Some(event)
                    if event
                        .tool_call_id()
                        .is_some_and(|id| s.unshown.contains(id)) =>
                {
                    String::new()
                }
                Some(event) => s.translator.frames(&event),
                // Not the run's end, but the stream's: the protocol's terminal error, saying so
                // and that the run goes on, rather than a body that breaks off (a client shows
                // that as a broken response). Made only when the client reads this far: the cut
                // holds no memory for it. The calls it leaves open are told the run goes on,
                // not that it ended.
                None if s.events.was_cut() => s.translator.cut(CUT_MESSAGE),
                // The run ended without its Done (its task failed): close the protocol anyway.
                None => {
                    let mut frames = s.translator.frames(&AiEvent::Error {
                        message: "the run ended unexpectedly".into(),
                    });
                    frames.push_str(&s.translator.frames(&AiEvent::Done {
                        reason: DoneReason::Error,
                    }));
                    frames
                }
            };
            if s.translator.finished() {
                frames.push_str(s.translator.trailer());
                s.done = true;
            }
            if !frames.is_empty() {
                s.last_frame = tokio::time::Instant::now();
                return Some((Ok(Bytes::from(frames)), s));
            }
            if s.done {
                return None;
            }
        }
    });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    for (name, value) in extra_headers {
        headers.insert(*name, HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests;
