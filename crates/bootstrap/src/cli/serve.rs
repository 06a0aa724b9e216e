//! `cogni serve`: compose the runtime from the settings and serve it over HTTP.

use std::process::ExitCode;

use anyhow::Context;

use crate::{Overrides, Settings, server};

/// Loads and checks the settings, binds the listen address and serves until a shutdown signal.
pub(crate) async fn run(overrides: Overrides) -> anyhow::Result<ExitCode> {
    let settings = Settings::load(&overrides)?;
    settings.require_model()?;
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
    // The settings come from a file or the environment: no control character of them (an
    // escape sequence) reaches the terminal.
    let banner = format!(
        "cogni: listening on http://{local} (model {} at {}, {:?} wire{auth})",
        settings.llm.model,
        settings.llm.shown_base_url(),
        settings.llm.wire
    );
    super::say_on_stderr(&super::terminal_safe(&banner));
    serving.await.context("the server stopped")?;
    Ok(ExitCode::SUCCESS)
}
