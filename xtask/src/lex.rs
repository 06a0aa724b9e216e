//! Just enough of a Rust lexer for the source rules: comments and the insides of string and
//! char literals are blanked out (so a rule never fires on prose or data), and what is left is
//! cut into identifier and punctuation tokens that remember their line.

/// One token of code: an identifier (or number), `::`, or a single punctuation character.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    /// The token's text; a raw identifier's without its `r#` (`r#exec` is `exec`).
    pub(crate) text: String,
    /// Whether it is a raw identifier, which is never a keyword (`r#use` is a name).
    pub(crate) raw: bool,
    /// Its 1-based line.
    pub(crate) line: usize,
    /// The index of its first char in the code, which is also its index in the original text
    /// ([`blank`] keeps every char in place).
    pub(crate) offset: usize,
}

/// `text` with every comment and the contents of every string, byte string, raw string and
/// char literal replaced by spaces; newlines stay, so lines keep their numbers. Quotes stay.
///
/// Fails with the 1-based line where an unterminated literal or block comment starts: valid
/// Rust never ends inside one, so that means the lexer lost track and the file was not checked.
pub(crate) fn blank(text: &str) -> Result<String, usize> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut line = 1;
    let mut i = 0;
    // Copies `chars[from..to]` as spaces (keeping newlines).
    let blank_range = |out: &mut String, line: &mut usize, from: usize, to: usize| {
        for &c in &chars[from..to] {
            if c == '\n' {
                *line += 1;
                out.push('\n');
            } else {
                out.push(' ');
            }
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let prev_is_ident = i > 0 && is_ident_char(chars[i - 1]);
        if c == '/' && next == Some('/') {
            let end = chars[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(chars.len(), |p| i + p);
            blank_range(&mut out, &mut line, i, end);
            i = end;
        } else if c == '/' && next == Some('*') {
            let start_line = line;
            let mut depth = 0_usize;
            let mut j = i;
            loop {
                match (chars.get(j), chars.get(j + 1)) {
                    (Some('/'), Some('*')) => {
                        depth += 1;
                        j += 2;
                    }
                    (Some('*'), Some('/')) => {
                        depth -= 1;
                        j += 2;
                        if depth == 0 {
                            break;
                        }
                    }
                    (Some(_), _) => j += 1,
                    (None, _) => return Err(start_line),
                }
            }
            blank_range(&mut out, &mut line, i, j);
            i = j;
        } else if let Some((hashes, quote)) = raw_string_start(&chars, i, prev_is_ident) {
            // `r"…"`, `br#"…"#`, `cr##"…"##`: no escapes, ends at `"` and as many `#`.
            let start_line = line;
            let body = quote + 1;
            let end = (body..chars.len())
                .find(|&j| {
                    chars[j] == '"'
                        && chars.len() >= j + 1 + hashes
                        && chars[j + 1..j + 1 + hashes].iter().all(|&c| c == '#')
                })
                .ok_or(start_line)?;
            out.extend(&chars[i..body]);
            blank_range(&mut out, &mut line, body, end);
            out.push('"');
            out.extend(std::iter::repeat_n('#', hashes));
            i = end + 1 + hashes;
        } else if c == '"' {
            let start_line = line;
            let mut j = i + 1;
            loop {
                match chars.get(j) {
                    Some('\\') => j += 2,
                    Some('"') => break,
                    Some(_) => j += 1,
                    None => return Err(start_line),
                }
            }
            out.push('"');
            blank_range(&mut out, &mut line, i + 1, j);
            out.push('"');
            i = j + 1;
        } else if c == '\'' {
            // A char literal (`'x'`, `'"'`, `'\n'`, `'\u{1F600}'`) or a lifetime/label (`'a`).
            let end = if next == Some('\\') {
                chars[i + 2..]
                    .iter()
                    .position(|&c| c == '\'')
                    .map(|p| i + 2 + p + usize::from(p == 0))
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    out.push('\'');
                    blank_range(&mut out, &mut line, i + 1, end);
                    out.push('\'');
                    i = end + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            if c == '\n' {
                line += 1;
            }
            out.push(c);
            i += 1;
        }
    }
    Ok(out)
}

/// At `i`, a raw string opener (`r`, `br` or `cr`, then `#`s, then `"`) that starts a token:
/// returns the number of `#`s and the index of the opening quote.
fn raw_string_start(chars: &[char], i: usize, prev_is_ident: bool) -> Option<(usize, usize)> {
    if prev_is_ident {
        return None;
    }
    let mut j = i;
    if matches!(chars.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|&&c| c == '#').count();
    j += hashes;
    (chars.get(j) == Some(&'"')).then_some((hashes, j))
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The tokens of already blanked code (see [`blank`]).
pub(crate) fn tokens(code: &str) -> Vec<Token> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if is_ident_char(c) {
            // `r#name` (a raw identifier) but not `r#"…"#` (a raw string, already blanked).
            let raw = c == 'r'
                && chars.get(i + 1) == Some(&'#')
                && chars.get(i + 2).is_some_and(|&c| is_ident_char(c));
            let start = if raw { i + 2 } else { i };
            let end = chars[start..]
                .iter()
                .position(|&c| !is_ident_char(c))
                .map_or(chars.len(), |p| start + p);
            tokens.push(Token {
                text: chars[start..end].iter().collect(),
                raw,
                line,
                offset: i,
            });
            i = end;
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push(Token {
                text: "::".into(),
                raw: false,
                line,
                offset: i,
            });
            i += 2;
        } else {
            tokens.push(Token {
                text: c.to_string(),
                raw: false,
                line,
                offset: i,
            });
            i += 1;
        }
    }
    tokens
}

#[cfg(test)]
mod tests;
