//! The server's optional bearer token: [`ServerToken`], read from `COGNI_SERVER_TOKEN` by the
//! composition root's settings, and the middleware that asks every request but `GET /healthz`
//! for it (`Authorization: Bearer <token>`, RFC 6750).
//!
//! The token is hashed with SHA-256 as it is read, and only the digest is kept: no `Debug` prints
//! it, no error or log line names it or what a client presented, and the comparison takes the
//! same time wherever the presented token differs (the presented token is hashed too and the
//! digests compared without an early exit).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::ApiError;

/// The paths served without a token: the health check, for load balancers and probes.
const OPEN_PATHS: &[&str] = &["/healthz"];

/// The bearer token clients of `cogni serve` must send (`Authorization: Bearer <token>`).
///
/// It comes only from `COGNI_SERVER_TOKEN` or the hidden `--server-token` (see
/// [`crate::Overrides`]), never from a config file.
/// Only the token's SHA-256 digest is kept, so the token itself is not in the server's memory
/// after start; its `Debug` prints `ServerToken([redacted])`, and it has no `Display`, no
/// `Serialize` and no way to read it back: the server only asks whether a presented token
/// matches it.
#[derive(Clone)]
pub struct ServerToken {
    digest: [u8; 32],
    sendable: bool,
}

impl ServerToken {
    /// The token the server will require; only its digest is kept.
    pub fn new(token: impl AsRef<str>) -> Self {
        let token = token.as_ref();
        Self {
            digest: Sha256::digest(token.as_bytes()).into(),
            sendable: !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic()),
        }
    }

    /// Whether a client can send the token as it is: one or more visible ASCII characters, no
    /// spaces (an HTTP header value loses its surrounding spaces and cannot carry other
    /// characters reliably, so a token with them could never match; nor could an empty one,
    /// which no `Bearer` header carries).
    pub(crate) fn is_sendable(&self) -> bool {
        self.sendable
    }

    /// Whether `presented` is the token: its SHA-256 digest compared with the token's in
    /// constant time, so neither the token's length nor the place of the first differing byte
    /// shows in how long the answer takes.
    pub(crate) fn matches(&self, presented: &str) -> bool {
        let presented: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        digests_equal(&self.digest, &presented)
    }
}

impl std::fmt::Debug for ServerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerToken([redacted])")
    }
}

/// Equality of two digests that looks at every byte: the differences are OR-ed together and
/// tested once, at the end.
fn digests_equal(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let difference = a
        .iter()
        .zip(b)
        .fold(0u8, |difference, (x, y)| difference | (x ^ y));
    std::hint::black_box(difference) == 0
}

/// Why a request is refused; the message a client reads (it never quotes what the client sent).
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// No `Authorization` header.
    Missing,
    /// A header that is not one `Bearer <token>` (another scheme, no token, several headers).
    Malformed,
    /// A bearer token that is not the server's.
    Wrong,
}

impl Refusal {
    fn message(&self) -> &'static str {
        match self {
            Refusal::Missing => "this endpoint needs `Authorization: Bearer <token>`",
            Refusal::Malformed => {
                "the Authorization header is not one `Bearer <token>`: this endpoint needs a bearer token"
            }
            Refusal::Wrong => "the bearer token is not accepted",
        }
    }
}

/// The credentials of the request's one `Authorization: Bearer <token>` header. The scheme is
/// matched in any case (RFC 7235 §2.1) and may be followed by several spaces.
fn bearer_credentials(headers: &HeaderMap) -> Result<&str, Refusal> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => return Err(Refusal::Missing),
        (Some(value), None) => value,
        (Some(_), Some(_)) => return Err(Refusal::Malformed),
    };
    let value = value.to_str().map_err(|_| Refusal::Malformed)?;
    let (scheme, credentials) = value.split_once(' ').ok_or(Refusal::Malformed)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(Refusal::Malformed);
    }
    let credentials = credentials.trim_matches(' ');
    if credentials.is_empty() {
        return Err(Refusal::Malformed);
    }
    Ok(credentials)
}

/// Checks a request's headers against `token`.
fn check(token: &ServerToken, headers: &HeaderMap) -> Result<(), Refusal> {
    let presented = bearer_credentials(headers)?;
    if token.matches(presented) {
        Ok(())
    } else {
        Err(Refusal::Wrong)
    }
}

/// The middleware: a request to any path but [`OPEN_PATHS`] goes on only with the token;
/// otherwise it is answered 401 with the server's JSON error (`unauthorized`) and
/// `WWW-Authenticate: Bearer`, before its body is read.
pub(crate) async fn require_token(
    State(token): State<ServerToken>,
    request: Request,
    next: Next,
) -> Response {
    if OPEN_PATHS.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    match check(&token, request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            tracing::debug!(path = request.uri().path(), ?refusal, "request refused");
            unauthorized(refusal.message())
        }
    }
}

/// The 401 answer: the server's JSON error with code `unauthorized`, and the challenge.
fn unauthorized(message: &'static str) -> Response {
    let mut response =
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue, header};

    use super::{Refusal, ServerToken, check, digests_equal};

    const TOKEN: &str = "s3cret-token_value.42";

    fn headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn the_token_matches_itself_only() {
        let token = ServerToken::new(TOKEN);
        assert!(token.matches(TOKEN));
        for other in [
            "",
            "s3cret-token_value.4",
            "s3cret-token_value.420",
            "S3CRET-TOKEN_VALUE.42",
        ] {
            assert!(!token.matches(other), "{other}");
        }
    }

    #[test]
    fn digests_are_equal_only_when_every_byte_is() {
        let a = [7u8; 32];
        assert!(digests_equal(&a, &a));
        for at in [0, 15, 31] {
            let mut b = a;
            b[at] ^= 0x80;
            assert!(!digests_equal(&a, &b), "byte {at}");
        }
    }

    #[test]
    fn the_bearer_scheme_is_matched_in_any_case_and_nothing_else_passes() {
        let token = ServerToken::new(TOKEN);
        for accepted in [
            format!("Bearer {TOKEN}"),
            format!("bearer {TOKEN}"),
            format!("BEARER {TOKEN}"),
            format!("Bearer   {TOKEN}"),
        ] {
            assert_eq!(check(&token, &headers(&[&accepted])), Ok(()), "{accepted}");
        }
        let refused = [
            (vec![], Refusal::Missing),
            (vec!["Bearer wrong".to_owned()], Refusal::Wrong),
            (vec![format!("Basic {TOKEN}")], Refusal::Malformed),
            (vec![format!("Token {TOKEN}")], Refusal::Malformed),
            (vec![TOKEN.to_owned()], Refusal::Malformed),
            (vec!["Bearer".to_owned()], Refusal::Malformed),
            (vec!["Bearer ".to_owned()], Refusal::Malformed),
            (vec![format!("Bearer{TOKEN}")], Refusal::Malformed),
            (
                vec![format!("Bearer {TOKEN}"), format!("Bearer {TOKEN}")],
                Refusal::Malformed,
            ),
        ];
        for (values, refusal) in refused {
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            assert_eq!(check(&token, &headers(&values)), Err(refusal), "{values:?}");
        }
    }

    #[test]
    fn no_refusal_message_quotes_the_token() {
        for refusal in [Refusal::Missing, Refusal::Malformed, Refusal::Wrong] {
            assert!(!refusal.message().contains(TOKEN));
        }
    }

    #[test]
    fn the_debug_of_a_token_is_redacted() {
        let token = ServerToken::new(TOKEN);
        assert_eq!(format!("{token:?}"), "ServerToken([redacted])");
        assert_eq!(format!("{token:#?}"), "ServerToken([redacted])");
        assert!(!format!("{:?}", Some(token)).contains(TOKEN));
    }

    #[test]
    fn a_token_with_spaces_or_non_ascii_cannot_be_sent() {
        assert!(ServerToken::new(TOKEN).is_sendable());
        assert!(ServerToken::new("abc+/=~").is_sendable());
        for unsendable in ["", " abc", "abc ", "a b", "a\tb", "tökén", "a\nb"] {
            assert!(
                !ServerToken::new(unsendable).is_sendable(),
                "{unsendable:?}"
            );
        }
    }
}
