//! The server's connections: accepted up to a bound, each served by hyper's HTTP/1 with a
//! header-read timeout, a bound on the time a request body takes to arrive, and a write timeout
//! (`StalledWrites`).
//!
//! `axum::serve` sets none of these (no timer, so not even hyper's default header timeout), so
//! a client could open connections and trickle headers or a body forever. This loop is axum's
//! own, with those limits: each connection gets TCP_NODELAY and `ConnectInfo<SocketAddr>` (the
//! loopback guard reads it), and at the shutdown signal the server stops accepting, asks each
//! connection to close once its response is done, and returns when all have.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use futures_util::StreamExt;

/// How long a client may take to send a request's headers: from the connection's start, and on
/// a connection kept alive from the end of the previous response (so it is also how long an
/// idle connection stays open). Past it the connection is closed.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a request body may take to arrive in full, from the end of its headers: past it the
/// request is refused with 408 `body_timeout` and its connection closed.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a connection's writes may stay stalled (its client reads nothing, so the socket
/// takes nothing more) before the connection is closed: a client that stops reading, even one
/// whose stream was cut (see `relay`), holds a connection no longer than this.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// The most connections served at once: past it the server accepts no more (they wait in the
/// system's queue) until one closes.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// What [`serve`](super::serve) allows a connection
/// ([`AppState::with_connection_limits`](super::AppState::with_connection_limits)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// How long a client may take to send a request's headers (and a kept-alive connection may
    /// stay idle): [`DEFAULT_HEADER_READ_TIMEOUT`].
    pub header_read_timeout: Duration,
    /// How long a request body may take to arrive in full: [`DEFAULT_BODY_READ_TIMEOUT`].
    pub body_read_timeout: Duration,
    /// How long a connection's writes may stay stalled before it is closed:
    /// [`DEFAULT_WRITE_TIMEOUT`].
    pub write_timeout: Duration,
    /// The most connections served at once: [`DEFAULT_MAX_CONNECTIONS`]. A number past what a
    /// semaphore holds (some 2^61) is that many.
    pub max_connections: std::num::NonZeroUsize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            max_connections: std::num::NonZeroUsize::new(DEFAULT_MAX_CONNECTIONS)
                .expect("1024 is not zero"),
        }
    }
}

/// Why a request body was refused: it did not arrive in time. Its text names no byte of it.
#[derive(Debug)]
pub(super) struct BodyTimeout(pub(super) Duration);

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request body did not arrive within the {} s this server waits for one",
            self.0.as_secs_f64()
        )
    }
}

impl std::error::Error for BodyTimeout {}

/// `body`, which fails with [`BodyTimeout`] when it has not ended within `limit` from now.
fn with_deadline(body: Body, limit: Duration) -> Body {
    let deadline = tokio::time::Instant::now() + limit;
    let frames = body.into_data_stream();
    let timed = futures_util::stream::unfold(Some(frames), move |frames| async move {
        let mut frames = frames?;
        match tokio::time::timeout_at(deadline, frames.next()).await {
            Ok(Some(Ok(data))) => Some((Ok(data), Some(frames))),
            Ok(Some(Err(error))) => Some((Err(axum::BoxError::from(error)), None)),
            Ok(None) => None,
            Err(_) => Some((Err(BodyTimeout(limit).into()), None)),
        }
    });
    Body::from_stream(timed)
}

/// Serves `app` on `listener` within `limits` until `shutdown` resolves, then waits for every
/// connection to finish its response and close.
pub(super) async fn serve_connections(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send,
) {
    let slots = limits
        .max_connections
        .get()
        .min(tokio::sync::Semaphore::MAX_PERMITS);
    let slots = Arc::new(tokio::sync::Semaphore::new(slots));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    // Dropped at the signal: each connection then closes once its response is done.
    let (stop, stopped) = tokio::sync::watch::channel(());
    // Each connection holds a receiver: all are gone once every connection closed.
    let (all_closed, open) = tokio::sync::watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot,
            () = &mut shutdown => break,
        };
        let Ok(slot) = slot else { break };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(error).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Streams are many small writes: without TCP_NODELAY, Nagle's algorithm holds each
        // frame until the client acknowledges the previous one (tens of ms per event on
        // loopback).
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY not set");
        }
        let router = hyper_util::service::TowerToHyperService::new(app.clone());
        let body_limit = limits.body_read_timeout;
        let service = hyper::service::service_fn(
            move |mut request: hyper::Request<hyper::body::Incoming>| {
                // The peer of each request, for the router's loopback guard.
                request
                    .extensions_mut()
                    .insert(ConnectInfo::<SocketAddr>(peer));
                let request = request.map(|body| with_deadline(Body::new(body), body_limit));
                hyper::service::Service::call(&router, request)
            },
        );
        let tcp = StalledWrites::new(tcp, limits.write_timeout);
        let connection = http.serve_connection(hyper_util::rt::TokioIo::new(tcp), service);
        let mut stopped = stopped.clone();
        let open = open.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let _open = open;
            let mut connection = std::pin::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                _ = stopped.changed() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = served {
                tracing::debug!(%error, "connection ended");
            }
        });
    }
    drop(listener);
    drop(stop);
    drop(open);
    all_closed.closed().await;
}

/// After a failed accept: a connection that failed before it was taken is skipped; any other
/// error (too many open files, say) is logged and the loop waits a second before it tries
/// again, as axum's does, rather than spinning.
async fn accept_failed(error: std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(%error, "accepting a connection failed");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// A connection whose writes fail with `TimedOut` once the socket has taken nothing for
/// `limit`: hyper then drops the connection, and with it the response it was writing.
struct StalledWrites {
    tcp: tokio::net::TcpStream,
    limit: Duration,
    /// Since the first write the socket did not take, until one it takes.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl StalledWrites {
    fn new(tcp: tokio::net::TcpStream, limit: Duration) -> Self {
        Self {
            tcp,
            limit,
            stalled: None,
        }
    }

    /// `written` as it is, but a write pending for `limit` becomes `TimedOut`.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if written.is_ready() {
            self.stalled = None;
            return written;
        }
        let limit = self.limit;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if stalled.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing of its response for too long",
            )));
        }
        Poll::Pending
    }
}

impl tokio::io::AsyncRead for StalledWrites {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for StalledWrites {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.tcp).poll_write(cx, buf);
        this.watch(cx, written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.tcp).poll_write_vectored(cx, bufs);
        this.watch(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = Pin::new(&mut this.tcp).poll_flush(cx);
        this.watch(cx, flushed)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}
