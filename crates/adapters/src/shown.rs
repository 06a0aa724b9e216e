//! Values as errors, logs and banners may show them: [`shown_url`], an endpoint's URL without
//! what may be a secret, and [`shown_cut`], a value a damaged store may hold at any length.

use std::borrow::Cow;

/// The most characters of a value [`shown_cut`] shows: more than the 64 of every valid blob
/// address or hash, so one a character too long or short is shown whole too.
const SHOWN_CUT_CHARS: usize = 80;

/// The longest path segment [`shown_url`] shows as it is.
const MAX_SHOWN_SEGMENT: usize = 16;

/// The most digits a path segment [`shown_url`] shows as it is may hold.
const MAX_SHOWN_DIGITS: usize = 3;

/// What [`shown_url`] shows in place of a path segment that may be a secret.
const HIDDEN_SEGMENT: &str = "***";

/// `url` as it may be shown (an error naming the endpoint, a log line, a start banner): its
/// scheme, host and port; no credentials (`user:password@`), query or fragment, which may carry
/// a key; and of its path only the segments that look like names, not secrets. Some gateways
/// take the key in the path (`https://gw.example/v1/<key>/chat/completions`): a segment is shown
/// only when it is at most 16 characters of ASCII letters, digits, `-`, `_` and `.`, with at
/// most 3 digits (`v1`, `openai`, `deployments`, `gpt-4o-mini`, `chat`, `completions`); any
/// other (a key, a long id, anything percent-encoded) is shown as `***`.
///
/// It reads the text as it is, so it works on a URL that does not parse too. A backslash
/// separates path segments as a slash does, since URL parsers read `\` as `/` in `http` and
/// `https` URLs (`https://gw.example\<key>/v1` sends the key in the path). A password holding
/// an unencoded `/`, `\`, `?` or `#` (`https://user:pa/ss@host`) ends the authority before its
/// `@` for a parser, so an authority with a `:` and no `@`, followed by an `@` anywhere, is
/// shown as `***` too: it may be a user name and the start of a password, even when what
/// follows the `:` could be a port (`https://user:123/ss@host` is a password `123/ss` to the
/// one who wrote it). So is every path segment up to the one holding that `@` (all of them,
/// when the `@` is past the path): they may be the rest of it. bootstrap's settings refuse
/// such a base URL for the same reason, so a URL cogni takes is never shown this way.
///
/// ```
/// use adapters::shown_url;
/// assert_eq!(
///     shown_url("https://user:pw@gw.example:8443/v1/sk-live-0123456789abcdef/chat?key=k#f"),
///     "https://gw.example:8443/v1/***/chat"
/// );
/// assert_eq!(shown_url("http://localhost:11434/v1"), "http://localhost:11434/v1");
/// ```
pub fn shown_url(url: &str) -> String {
    let whole = url.trim();
    let url = whole.split(['?', '#']).next().unwrap_or_default();
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    // `http(s)://host\path` is `http(s)://host/path` to a URL parser: the path starts at
    // either.
    let (authority, path) = match rest.split_once(['/', '\\']) {
        Some((authority, path)) => (authority, Some(path)),
        None => (rest, None),
    };
    // Credentials come before the last `@` of the authority. A password holding a `/`, `\`,
    // `?` or `#` unencoded ends the authority early, before its `@`: then the authority reads
    // `user:start-of-password`. So one with a `:` (past an opening IPv6 address) and no `@`,
    // followed by an `@` somewhere, is not shown, whether it is that or a host and port.
    // `url` begins `whole`, and `rest` ends `url`, so this is `rest` with what was cut.
    let past_authority = &whole[url.len() - rest.len() + authority.len()..];
    // Digits after the `:` do not settle it: a password may begin with them. Only an authority
    // that opens with `[` and an IPv6 address holds one, whose `:`s are none: a `]` elsewhere
    // (in a password) ends nothing.
    let password_start = past_ipv6_address(authority).contains(':');
    let maybe_password =
        authority.rsplit_once('@').is_none() && password_start && past_authority.contains('@');
    let host = match authority.rsplit_once('@') {
        Some((_, host)) => host,
        None if maybe_password => HIDDEN_SEGMENT,
        None => authority,
    };
    // Then the path up to the segment holding the `@` (all of it, when the `@` is past the
    // path) may be the rest of that password: none of it is shown.
    let mut in_password = maybe_password;
    let mut shown = String::with_capacity(url.len());
    if let Some(scheme) = scheme {
        shown.push_str(scheme);
        shown.push_str("://");
    }
    shown.push_str(host);
    if let Some(path) = path {
        for segment in path.split(['/', '\\']) {
            shown.push('/');
            let hidden = in_password;
            in_password &= !segment.contains('@');
            shown.push_str(if !hidden && looks_like_a_name(segment) {
                segment
            } else {
                HIDDEN_SEGMENT
            });
        }
    }
    shown
}

/// What follows the IPv6 address that opens `authority` (`[::1]:8443` gives `:8443`), or all of
/// it when it opens with none: a `]` that no opening `[` goes with is text like any other, and
/// so are brackets that hold no IPv6 address (`[user:pa]ss`, a user name and a password).
fn past_ipv6_address(authority: &str) -> &str {
    authority
        .strip_prefix('[')
        .and_then(|address| address.split_once(']'))
        .filter(|(address, _)| address.parse::<std::net::Ipv6Addr>().is_ok())
        .map_or(authority, |(_, after)| after)
}

/// Whether a path segment may be shown: short, plain, and with few digits.
fn looks_like_a_name(segment: &str) -> bool {
    segment.len() <= MAX_SHOWN_SEGMENT
        && segment
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && segment.chars().filter(char::is_ascii_digit).count() <= MAX_SHOWN_DIGITS
}

/// A value a run log names (a blob address, a hash, a provider's or a model's name), as a
/// message or a view shows it: whole when it is at most 80 characters long, as every valid blob
/// address or hash (64 hex digits) and most names are, else its first 80 and `…`. A damaged or
/// hand-edited run log may hold anything in its place, a megabyte say, which would flood what
/// names it. Only the length is bounded: where it is shown on a terminal, it is made safe for
/// one there.
///
/// ```
/// let address = "ab".repeat(32);
/// assert_eq!(adapters::shown_cut(&address), address);
/// assert_eq!(adapters::shown_cut(&"f".repeat(1 << 20)), format!("{}…", "f".repeat(80)));
/// ```
pub fn shown_cut(value: &str) -> Cow<'_, str> {
    match value.char_indices().nth(SHOWN_CUT_CHARS) {
        None => Cow::Borrowed(value),
        Some((cut, _)) => Cow::Owned(format!("{}…", &value[..cut])),
    }
}

#[cfg(test)]
mod tests {
    use super::shown_url;

    #[test]
    fn names_are_shown_and_whatever_may_be_a_secret_is_not() {
        for (url, shown) in [
            ("https://api.openai.com/v1", "https://api.openai.com/v1"),
            ("https://api.openai.com/v1/", "https://api.openai.com/v1/"),
            (
                "http://127.0.0.1:8000/v1/chat/completions",
                "http://127.0.0.1:8000/v1/chat/completions",
            ),
            (
                "https://x.openai.azure.com/openai/deployments/gpt-4o-mini",
                "https://x.openai.azure.com/openai/deployments/gpt-4o-mini",
            ),
            // A key in the path, in whatever form.
            (
                "https://gw.example/v1/sk-proj-AbCdEfGhIjKlMnOp/chat/completions",
                "https://gw.example/v1/***/chat/completions",
            ),
            (
                "https://gw.example/0123456789abcdef0123456789abcdef/openai",
                "https://gw.example/***/openai",
            ),
            (
                "https://gw.example/k3y9x7w5/v1",
                "https://gw.example/***/v1",
            ),
            ("https://gw.example/a%2Fb/v1", "https://gw.example/***/v1"),
            // A backslash is a slash to a URL parser: what follows it is the path.
            (
                "https://gw.example\\sk-live-0123456789abcdef/v1",
                "https://gw.example/***/v1",
            ),
            (
                "https://gw.example/v1\\sk-live-0123456789abcdef",
                "https://gw.example/v1/***",
            ),
            (
                "https://gw.example/sk-abc_def=/v1",
                "https://gw.example/***/v1",
            ),
            // Credentials, queries and fragments never.
            (
                "https://user:pw@gw.example/v1?key=secret#frag",
                "https://gw.example/v1",
            ),
            ("https://a@b@gw.example", "https://gw.example"),
            // A password holding `/`, `\\`, `?` or `#` unencoded ends the authority early for
            // a URL parser: none of it is shown, nor the host that would have been its prefix.
            ("https://user:pa/ss@gw.example/v1", "https://***/***/v1"),
            ("https://user:pa\\ss@gw.example/v1", "https://***/***/v1"),
            ("https://user:pa?ss@gw.example/v1", "https://***"),
            ("https://user:pa#ss@gw.example/v1", "https://***"),
            ("user:pa/ss@gw.example/v1", "***/***/v1"),
            // Digits a port can be may begin a password all the same.
            ("https://user:123/ss@gw.example/v1", "https://***/***/v1"),
            ("https://user:65536/ss@gw.example/v1", "https://***/***/v1"),
            ("https://user:+1/ss@gw.example/v1", "https://***/***/v1"),
            // Nor any more of it: a password with more than one `/`, or a `/` and then a `?`.
            (
                "https://user:ab/cd/ef@gw.example/v1",
                "https://***/***/***/v1",
            ),
            (
                "https://user:ab\\cd/ef@gw.example/v1",
                "https://***/***/***/v1",
            ),
            ("https://user:pa/ss?x@gw.example/v1", "https://***/***"),
            // A `]` is an IPv6 address's end only after a `[` that opens the authority: in a
            // password it hides nothing of what comes before it.
            ("https://user:pa]ss/x@gw.example/v1", "https://***/***/v1"),
            ("https://user:a]b:c/x@gw.example/v1", "https://***/***/v1"),
            // A `[` that opens a user name opens no address: what the brackets hold is one only
            // when it reads as an IPv6 address.
            ("https://[user:pa]ss/x@gw.example/v1", "https://***/***/v1"),
            ("https://[user:pa]/x@gw.example/v1", "https://***/***/v1"),
            ("https://[::1]:8443/v1", "https://[::1]:8443/v1"),
            (
                "https://[::ffff:10.0.0.1]/v1",
                "https://[::ffff:10.0.0.1]/v1",
            ),
            // An `@` past a plain host, or an IPv6 address, is no credentials' end; past a host
            // and port it may be, so the host is not shown.
            ("https://[::1]/v1?to=a@b", "https://[::1]/v1"),
            ("http://localhost:8000/v1?to=a@b", "http://***/***"),
            ("http://host:8000/v1?x=a@b", "http://***/***"),
            ("https://[::1]:8443/v1/@org", "https://***/***/***"),
            // Not a URL it knows: read as text all the same.
            ("ftp://x/v1?key=pw@", "ftp://x/v1"),
            (
                "localhost:8000/v1/0123456789abcdef",
                "localhost:8000/v1/***",
            ),
            ("", ""),
        ] {
            assert_eq!(shown_url(url), shown, "{url}");
        }
    }
}
