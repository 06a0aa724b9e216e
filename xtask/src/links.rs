//! `cargo xtask check-links`: every relative link of the repository's own Markdown names a file
//! that exists, and its `#anchor` a heading of that file.
//!
//! The pages are every `.md` file of the repository, skipping `target/`, `node_modules/` and
//! hidden folders as the source scan does ([`crate::sources::walk`]). A link is an inline link or
//! image (`[text](target)`, `![alt](target)`) or a reference definition (`[label]: target`),
//! outside fenced code blocks and code spans, within one line (the docs write one sentence a
//! line). A target with a scheme (`https:`, `mailto:`) or starting with `//` is not checked. The
//! rest resolve from the page's folder (from the repository root when they start with `/`), as
//! GitHub resolves them.
//!
//! An anchor is checked only in a Markdown file (a source's `#L12` is not a heading). The
//! anchors of a page are its ATX headings (`## Title`) as GitHub names them: the heading's text
//! (code spans without their backticks, links by their text), lowercased, with every character
//! but letters, digits, `-`, `_` and spaces dropped and each space made a `-`; a repeated one
//! gets `-1`, `-2`, … A heading written otherwise (`===` under it, an HTML anchor) is not seen,
//! so a link to it fails: the check errs loud, never silent.
//!
//! A link or a heading inside an HTML comment (from a line opening with `<!--` to the line
//! holding `-->`), which GitHub does not show, is not read either. A code fence or an HTML
//! comment a page never closes fails: the rest of the page is not prose, on GitHub as here, so
//! its links would go unchecked.
//!
//! Each finding reads `path:line: DOC_LINK: message`. A hand parser rather than pulldown-cmark:
//! the pages use no more Markdown than the above, and a new dependency (with its own) for them is
//! not worth it.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fs;
use std::path::{Component, Path};

use anyhow::Context;

/// What a scan saw: the pages read, the relative links checked, and those with an anchor.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) pages: usize,
    pub(crate) links: usize,
    pub(crate) anchors: usize,
}

/// Checks the repository at `root` and fails listing each broken link, or when it checked no
/// anchor at all (a parser that reads nothing would pass everything).
pub(crate) fn check_links(root: &Path) -> anyhow::Result<()> {
    let (violations, seen) = check_tree(root)?;
    if violations.is_empty() && seen.anchors > 0 {
        println!(
            "check-links: ok ({} Markdown files, {} relative links, {} of them with an anchor)",
            seen.pages, seen.links, seen.anchors
        );
        return Ok(());
    }
    for violation in &violations {
        eprintln!("{violation}");
    }
    if seen.anchors == 0 {
        eprintln!(
            "xtask/src/links.rs: SCANNER_SAW_NOTHING: DOC_LINK: no relative link with an anchor in {} Markdown files; the parser is broken",
            seen.pages
        );
    }
    anyhow::bail!("check-links: {} broken link(s)", violations.len())
}

/// Every broken relative link of the Markdown files under `root`, in path and line order, and
/// what was seen.
pub(crate) fn check_tree(root: &Path) -> anyhow::Result<(Vec<String>, Seen)> {
    let mut files = Vec::new();
    crate::sources::walk(root, root, "md", &mut files, &mut Vec::new())?;
    files.sort();
    let mut anchors = HashMap::new();
    let mut seen = Seen::default();
    let mut violations = Vec::new();
    for file in files {
        let text =
            fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
        let page = crate::sources::relative(root, &file);
        seen.pages += 1;
        let prose = prose_lines(&text);
        for (line, target) in links(&prose.lines) {
            let problem = check_link(root, &page, &target, &mut anchors, &mut seen)?;
            if let Some(problem) = problem {
                violations.push(format!("{page}:{line}: DOC_LINK: `{target}`: {problem}"));
            }
        }
        if let Some((line, block)) = prose.unclosed {
            violations.push(format!(
                "{page}:{line}: DOC_LINK: this {block} is never closed, so the rest of the page is not prose and its links go unchecked"
            ));
        }
    }
    Ok((violations, seen))
}

/// What is wrong with the link to `target` from `page` (relative to `root`), if anything;
/// `anchors` keeps those of each Markdown file read so far, by its path.
fn check_link(
    root: &Path,
    page: &str,
    target: &str,
    anchors: &mut HashMap<String, Vec<String>>,
    seen: &mut Seen,
) -> anyhow::Result<Option<String>> {
    if target.is_empty() || target.starts_with("//") || has_scheme(target) {
        return Ok(None);
    }
    seen.links += 1;
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() {
        page.to_owned()
    } else {
        let from = match path.strip_prefix('/') {
            Some(_) => Path::new(""),
            None => Path::new(page).parent().unwrap_or(Path::new("")),
        };
        let Some(file) = normalize(&from.join(path.trim_start_matches('/'))) else {
            return Ok(Some("leaves the repository".into()));
        };
        if !root.join(&file).exists() {
            return Ok(Some(format!("{file} does not exist")));
        }
        file
    };
    if anchor.is_empty() || !file.ends_with(".md") {
        return Ok(None);
    }
    seen.anchors += 1;
    let known = match anchors.entry(file.clone()) {
        Entry::Occupied(known) => known.into_mut(),
        Entry::Vacant(unread) => {
            let text = fs::read_to_string(root.join(&file))
                .with_context(|| format!("cannot read {file}"))?;
            unread.insert(headings(&text))
        }
    };
    let found = known.iter().any(|known| known == anchor);
    Ok((!found).then(|| format!("{file} has no heading whose anchor is `{anchor}`")))
}

/// Whether `target` starts with a URI scheme (`https:`, `mailto:`): letters, digits, `+`, `-`
/// or `.` after a letter, then `:`.
fn has_scheme(target: &str) -> bool {
    let Some((scheme, _)) = target.split_once(':') else {
        return false;
    };
    scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `path` with its `.` and `..` taken out, written with `/`; `None` if it climbs above its
/// start (the repository root).
fn normalize(path: &Path) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

/// The link targets of a Markdown text's prose lines ([`prose_lines`]), with their line numbers.
fn links(lines: &[(usize, &str)]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for &(number, line) in lines {
        if let Some(target) = definition(line) {
            found.push((number, target.to_owned()));
        }
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '\\' => i += 1,
                '`' => i = after_code_span(&chars, i) - 1,
                '[' => {
                    if let Some(link) = inline_link(&chars, i) {
                        found.push((number, link.target));
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    found
}

/// A Markdown text's prose: its lines outside the blocks that are not ([`prose_lines`]).
struct Prose<'a> {
    /// Each line, with its number (from 1).
    lines: Vec<(usize, &'a str)>,
    /// The line of a block the text never closes, which makes the rest of it not prose, and
    /// what the block is.
    unclosed: Option<(usize, &'static str)>,
}

/// A block whose lines are not prose.
#[derive(Clone, Copy)]
enum Block {
    /// A fenced code block: its fence's character and length.
    Fence(char, usize),
    /// An HTML comment (`<!--` opening a line), shown as nothing.
    Comment,
}

/// The lines of `text` outside fenced code blocks (```` ``` ```` or `~~~`, at any indent, closed
/// by a fence of the same character at least as long) and HTML comments (from a line opening
/// with `<!--` to the line holding `-->`, as CommonMark's HTML blocks), with their numbers (from
/// 1), and where such a block is never closed.
fn prose_lines(text: &str) -> Prose<'_> {
    let mut open: Option<(Block, usize)> = None;
    let mut lines = Vec::new();
    for (number, line) in (1..).zip(text.lines()) {
        let trimmed = line.trim();
        let run = |c: char| trimmed.chars().take_while(|&t| t == c).count();
        match open {
            Some((Block::Fence(c, length), _)) => {
                if run(c) >= length && trimmed.chars().all(|t| t == c) {
                    open = None;
                }
            }
            Some((Block::Comment, _)) => {
                if line.contains("-->") {
                    open = None;
                }
            }
            None if line.len() - line.trim_start_matches(' ').len() <= 3
                && trimmed.starts_with("<!--") =>
            {
                // The comment may close on its own line (`<!-- note -->`, `<!-->`).
                if !trimmed.contains("-->") {
                    open = Some((Block::Comment, number));
                }
            }
            None => {
                // A backtick fence's info string holds no backtick (```` ```a``` ```` is code).
                let opens = ['`', '~']
                    .into_iter()
                    .find(|&c| run(c) >= 3 && (c == '~' || !trimmed[run(c)..].contains('`')));
                open = opens.map(|c| (Block::Fence(c, run(c)), number));
                if open.is_none() {
                    lines.push((number, line));
                }
            }
        }
    }
    let unclosed = open.map(|(block, line)| match block {
        Block::Fence(..) => (line, "code fence"),
        Block::Comment => (line, "HTML comment"),
    });
    Prose { lines, unclosed }
}

/// The target of a reference definition (`[label]: target`), if `line` is one.
fn definition(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix('[')?;
    let (label, rest) = rest.split_once("]:")?;
    if label.is_empty() || label.contains(['[', ']']) {
        return None;
    }
    let target = rest.split_ascii_whitespace().next()?;
    Some(
        target
            .strip_prefix('<')
            .and_then(|t| t.strip_suffix('>'))
            .unwrap_or(target),
    )
}

/// The index after the code span whose opening backticks start at `start`; a run of backticks
/// no equal run closes is text, so the index after the run.
fn after_code_span(chars: &[char], start: usize) -> usize {
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let length = run_at(start);
    let mut i = start + length;
    while i < chars.len() {
        if chars[i] == '`' {
            let run = run_at(i);
            if run == length {
                return i + run;
            }
            i += run;
        } else {
            i += 1;
        }
    }
    start + length
}

/// An inline link (or image) of a line: where its text closes (`]`), where the link ends (after
/// its `)`), and its destination.
struct InlineLink {
    close: usize,
    end: usize,
    target: String,
}

/// The inline link whose text opens with the `[` at `open`, if it is one: the text's brackets
/// balance (code spans and escapes aside), `(` follows, and the destination is `<…>` or runs to
/// ASCII whitespace (a no-break space is part of it) or to the `)` that balances its
/// parentheses; a title may follow it.
fn inline_link(chars: &[char], open: usize) -> Option<InlineLink> {
    let mut depth = 0;
    let mut i = open;
    let close = loop {
        match chars.get(i)? {
            '\\' => i += 1,
            '`' => i = after_code_span(chars, i) - 1,
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    break i;
                }
            }
            _ => {}
        }
        i += 1;
    };
    if chars.get(close + 1) != Some(&'(') {
        return None;
    }
    let mut i = close + 2;
    while chars.get(i)?.is_ascii_whitespace() {
        i += 1;
    }
    let target: String = if chars[i] == '<' {
        let length = chars[i..].iter().position(|&c| c == '>')?;
        let target = chars[i + 1..i + length].iter().collect();
        i += length + 1;
        target
    } else {
        let start = i;
        let mut parens = 0_usize;
        while let Some(&c) = chars.get(i) {
            match c {
                ')' if parens == 0 => break,
                ')' => parens -= 1,
                '(' => parens += 1,
                c if c.is_ascii_whitespace() => break,
                _ => {}
            }
            i += 1;
        }
        chars[start..i].iter().collect()
    };
    let end = i + chars[i..].iter().position(|&c| c == ')')? + 1;
    Some(InlineLink { close, end, target })
}

/// The anchors GitHub gives the ATX headings of a Markdown text, in order, outside fenced code
/// blocks.
fn headings(text: &str) -> Vec<String> {
    let mut taken: HashMap<String, usize> = HashMap::new();
    let mut anchors = Vec::new();
    // A block the page never closes is its own finding, where the page is read for its links.
    for (_, line) in prose_lines(text).lines {
        let Some(title) = heading(line) else {
            continue;
        };
        let base = slug(&rendered(title));
        let mut anchor = base.clone();
        while taken.contains_key(&anchor) {
            let count = taken.entry(base.clone()).or_default();
            *count += 1;
            anchor = format!("{base}-{count}");
        }
        taken.insert(anchor.clone(), 0);
        anchors.push(anchor);
    }
    anchors
}

/// The text of an ATX heading (`## Title ##` is `Title`): at most three spaces of indent, one to
/// six `#`, then a space or the line's end.
fn heading(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = line[indent..].trim_end();
    let level = rest.len() - rest.trim_start_matches('#').len();
    let title = &rest[level..];
    if indent > 3
        || !(1..=6).contains(&level)
        || !(title.is_empty() || title.starts_with([' ', '\t']))
    {
        return None;
    }
    let closed = title.trim_end_matches('#');
    let title = if closed.is_empty() || closed.ends_with([' ', '\t']) {
        closed
    } else {
        title
    };
    Some(title.trim())
}

/// A heading's text as GitHub renders it: code spans without their backticks, a link or an
/// image by its text.
fn rendered(title: &str) -> String {
    let chars: Vec<char> = title.chars().collect();
    let mut text = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '`' => {
                let end = after_code_span(&chars, i);
                text.extend(chars[i..end].iter().filter(|&&c| c != '`'));
                i = end;
                continue;
            }
            '[' => {
                if let Some(link) = inline_link(&chars, i) {
                    let inner: String = chars[i + 1..link.close].iter().collect();
                    text.push_str(&rendered(&inner));
                    i = link.end;
                    continue;
                }
                text.push('[');
            }
            c => text.push(c),
        }
        i += 1;
    }
    text
}

/// GitHub's anchor for a heading's rendered text: lowercase, letters, digits, `-` and `_` kept,
/// each space a `-`, the rest dropped.
fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || matches!(c, '-' | '_') => Some(c),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests;
