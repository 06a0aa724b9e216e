//! `cogni serve`: compose the runtime from the settings and serve it over HTTP.

use std::process::ExitCode;

use anyhow::Context;

use crate::{Overrides, Settings, server};

/// Loads and checks the settings, binds the listen address and serves until a shutdown signal.
pub(crate) async fn run(overrides: Overrides) -> anyhow::Result<ExitCode> {
    let settings = Settings::load(&overrides)?;
    settings.require_model()?;
    init_logging();
    let addr = settings.listen_addr()?;
    // Before anything is opened or bound: an exposed address without a token is refused.
    settings.require_server_auth(addr)?;
    let state = server::prepare(&settings).await?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("server.listen: cannot listen on {addr}"))?;
    let local = listener.local_addr().unwrap_or(addr);
    let auth = if settings.server.token.is_some() {
        ", bearer token required"
    } else {
        ""
    };
    // Its signal handlers are in place before the banner: a SIGTERM sent as soon as the banner
    // is read shuts the server down gracefully.
    let serving = server::serve(listener, state, settings.server.max_body_bytes);
    eprintln!(
        "cogni: listening on http://{local} (model {} at {}, {:?} wire{auth})",
        settings.llm.model,
        settings.llm.shown_base_url(),
        settings.llm.wire
    );
    serving.await.context("the server stopped")?;
    Ok(ExitCode::SUCCESS)
}

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings). Spans never carry arguments or
/// results unless the policy asks for the redacted ones.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // A second initialization (tests) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
