//! The guards of a server without a token: it answers only requests from a loopback peer
//! (`require_loopback_client`, unless serving unauthenticated is allowed) addressed to a
//! loopback host (`localhost`, or a loopback IP), with any port.
//!
//! Listening on loopback keeps other machines out, but not web pages open in the user's
//! browser: a page on a name whose DNS its owner re-points at 127.0.0.1 (DNS rebinding) is
//! same-origin with the server, so the browser sends it `application/json` requests without a
//! CORS preflight and lets it read the answers: it could run the model and the tools and read
//! what they return. Such a request still names the page's host in `Host`, which this guard
//! refuses. With a token the token guards the server (a page cannot learn it), and a server on
//! another address is reached under whatever name its proxy gives, so neither is checked.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;

/// The middleware: a request whose `Host` (or absolute request target) names anything but a
/// loopback host is answered 403 with the server's JSON error `host_not_allowed`, which does not
/// quote the host. A request naming no host at all (which no browser sends) goes on.
pub(crate) async fn require_loopback_host(request: Request, next: Next) -> Response {
    if addressed_to_loopback(&request) {
        return next.run(request).await;
    }
    tracing::debug!("request for a host that is not loopback refused");
    ApiError::new(
        StatusCode::FORBIDDEN,
        "host_not_allowed",
        "this server answers only requests for localhost or a loopback address; to serve it \
         under another name, set COGNI_SERVER_TOKEN",
    )
    .into_response()
}

/// The guard [`super::router`] puts in front of a server without a token (unless the state
/// allows serving unauthenticated): a request must come from a loopback peer, as the axum
/// `ConnectInfo<SocketAddr>` of `into_make_service_with_connect_info` tells it (a request with
/// none, whose peer is not known, is refused: this fails closed), and be addressed to a loopback
/// host ([`require_loopback_host`]). A refusal is a JSON 403 (`client_not_allowed`,
/// `host_not_allowed`) that quotes neither address.
pub(crate) async fn require_loopback_client(request: Request, next: Next) -> Response {
    match peer_is_loopback(&request) {
        Some(true) => require_loopback_host(request, next).await,
        Some(false) => {
            tracing::debug!("request from a peer that is not loopback refused");
            ApiError::new(
                StatusCode::FORBIDDEN,
                "client_not_allowed",
                "without a token this server answers only clients on this machine; to serve \
                 others, set COGNI_SERVER_TOKEN",
            )
            .into_response()
        }
        None => {
            tracing::warn!(
                "request refused: the server cannot tell where it comes from (serve the router \
                 with into_make_service_with_connect_info::<SocketAddr>(), or give it a token)"
            );
            ApiError::new(
                StatusCode::FORBIDDEN,
                "client_not_allowed",
                "without a token this server answers only clients on this machine, and it \
                 cannot tell where this request comes from",
            )
            .into_response()
        }
    }
}

/// Whether the request's peer is a loopback address; `None` when the server was not told the
/// peer (no `ConnectInfo<SocketAddr>`).
fn peer_is_loopback(request: &Request) -> Option<bool> {
    let ConnectInfo(peer) = request.extensions().get::<ConnectInfo<SocketAddr>>()?;
    Some(peer.ip().to_canonical().is_loopback())
}

/// Whether every host the request names is a loopback one: the one `Host` header and the
/// request target's authority, when it has one.
fn addressed_to_loopback(request: &Request) -> bool {
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let header = match (hosts.next(), hosts.next()) {
        (None, _) => None,
        (Some(value), None) => match value.to_str() {
            Ok(value) => Some(value),
            Err(_) => return false,
        },
        (Some(_), Some(_)) => return false,
    };
    let authority = request.uri().authority().map(|a| a.as_str());
    header
        .into_iter()
        .chain(authority)
        .all(is_loopback_authority)
}

/// Whether `authority` (`host` or `host:port`, an IPv6 host in brackets) names a loopback host:
/// `localhost` in any case (or `localhost.`, its fully qualified form), or an IP address that is
/// loopback (`127.0.0.0/8`, `::1`, and `::ffff:127.0.0.1`). `0.0.0.0`, which some browsers send to
/// the local machine, is not one.
fn is_loopback_authority(authority: &str) -> bool {
    let Ok(authority) = authority.parse::<axum::http::uri::Authority>() else {
        return false;
    };
    if authority.as_str().contains('@') {
        return false;
    }
    let host = authority.host();
    let ip = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match ip.parse::<IpAddr>() {
        Ok(ip) => ip.to_canonical().is_loopback(),
        // `localhost.` is the same name, fully qualified; no one can serve a page under it.
        Err(_) => {
            let name = host.strip_suffix('.').unwrap_or(host);
            name.eq_ignore_ascii_case("localhost")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_loopback_authority;

    #[test]
    fn only_loopback_peers_are_known_to_be_loopback() {
        let with_peer = |peer: Option<&str>| {
            let mut request = axum::extract::Request::new(axum::body::Body::empty());
            if let Some(peer) = peer {
                let peer: std::net::SocketAddr = peer.parse().unwrap();
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
            }
            super::peer_is_loopback(&request)
        };
        for peer in [
            "127.0.0.1:5000",
            "127.3.2.1:1",
            "[::1]:5000",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert_eq!(with_peer(Some(peer)), Some(true), "{peer}");
        }
        for peer in [
            "192.168.1.10:5000",
            "[::ffff:10.0.0.1]:1",
            "0.0.0.0:1",
            "[2001:db8::1]:1",
        ] {
            assert_eq!(with_peer(Some(peer)), Some(false), "{peer}");
        }
        assert_eq!(
            with_peer(None),
            None,
            "an unknown peer is not taken for loopback"
        );
    }

    #[test]
    fn only_loopback_hosts_pass() {
        for host in [
            "localhost",
            "LOCALHOST:8787",
            "127.0.0.1",
            "127.0.0.1:8787",
            "127.9.8.7:1",
            "[::1]:8787",
            "[::1]",
            "[::ffff:127.0.0.1]:8787",
            // The fully qualified name (a browser sends it as typed: `http://localhost.:8787/`).
            "localhost.",
            "LocalHost.:8787",
        ] {
            assert!(is_loopback_authority(host), "{host}");
        }
        for host in [
            "",
            "attacker.example",
            "attacker.example:8787",
            "localhost.attacker.example",
            "attacker.localhost.example:8787",
            "0.0.0.0:8787",
            "[::]:8787",
            "192.168.1.10:8787",
            "user@localhost:8787",
            "localhost:8787/path",
            "local host",
            "localhost..:8787",
            ".:8787",
            "attacker.example.:8787",
            "localhost.attacker.example.",
        ] {
            assert!(!is_loopback_authority(host), "{host}");
        }
    }
}
