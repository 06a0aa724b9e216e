//! What the CLI shows a person on a terminal: text from a model, a tool, a client or a data
//! folder, with the control characters that could rewrite the terminal, or reorder what it
//! shows, replaced.

use std::borrow::Cow;

/// The character shown in place of a control character.
pub(crate) const REPLACEMENT: char = '\u{FFFD}';

/// `text` as it may be shown on a terminal: every C0 control character but `\n` and `\t`
/// (`ESC`, `\r`, `BEL`, backspace, …), `DEL` and every C1 control character (U+0080–U+009F,
/// among them the one-character `CSI` and `OSC`) replaced by U+FFFD (`�`), so no escape
/// sequence in it reaches the terminal: such text can move the cursor, rewrite what was
/// printed, set the window title or the clipboard, or forge a link. The bidirectional
/// embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069: the "Trojan Source"
/// characters, CVE-2021-42574) are replaced too, since they make a terminal show text in another
/// order than it has. Everything else is shown as is: the line breaks (a `\r\n` as `\n`) and
/// tabs a model writes, right-to-left text and its marks (U+200E, U+200F), and the zero-width
/// joiners that emoji and many scripts need. JSON output (`--json`) is machine output and is not
/// passed through this.
///
/// ```
/// use bootstrap::cli::terminal_safe;
/// assert_eq!(terminal_safe("a\tb\nc"), "a\tb\nc");
/// assert_eq!(terminal_safe("\u{1b}[2J\r\u{9b}1m"), "\u{FFFD}[2J\u{FFFD}\u{FFFD}1m");
/// ```
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // A Windows line end is a line end: the `\r` before `\n` rewrites nothing.
            '\r' if chars.peek() == Some(&'\n') => {}
            c if unsafe_char(c) => shown.push(REPLACEMENT),
            c => shown.push(c),
        }
    }
    Cow::Owned(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_c0_and_c1_control_but_line_break_and_tab_is_replaced() {
        for c in ('\u{0}'..='\u{1f}')
            .chain(['\u{7f}'])
            .chain('\u{80}'..='\u{9f}')
        {
            let expected = if c == '\n' || c == '\t' {
                c
            } else {
                REPLACEMENT
            };
            assert_eq!(
                terminal_safe(&format!("a{c}b")),
                format!("a{expected}b"),
                "U+{:04X}",
                c as u32
            );
        }
        assert_eq!(terminal_safe("one\r\ntwo\r\r\n"), "one\ntwo\u{FFFD}\n");
        assert!(matches!(
            terminal_safe("plain, ünïcode ✓"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn bidi_embeddings_overrides_and_isolates_are_replaced() {
        for c in ('\u{202A}'..='\u{202E}').chain('\u{2066}'..='\u{2069}') {
            assert_eq!(
                terminal_safe(&format!("a{c}b")),
                "a\u{FFFD}b",
                "U+{:04X}",
                c as u32
            );
        }
        // Right-to-left text with its marks, and emoji and scripts joined by zero-width
        // joiners, are shown as they are.
        for text in [
            "שלום \u{200F}world\u{200E}",
            "👩\u{200D}💻",
            "می\u{200C}خواهم",
        ] {
            assert!(matches!(terminal_safe(text), Cow::Borrowed(_)), "{text}");
        }
    }
}
