//! Unit checks of the core tools' private helpers.

use super::time::iso8601;

#[test]
fn iso8601_formats_utc() {
    let cases = [
        (0, "1970-01-01T00:00:00.000Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"),
        (1_795_360_872_123, "2026-11-22T15:21:12.123Z"),
        (4_102_444_799_999, "2099-12-31T23:59:59.999Z"),
    ];
    for (ms, expected) in cases {
        assert_eq!(iso8601(ms), expected, "{ms}");
    }
}

fn entries(names: impl IntoIterator<Item = String>) -> Vec<ai_core::WorkspaceEntry> {
    names
        .into_iter()
        .map(|path| ai_core::WorkspaceEntry {
            path,
            is_dir: false,
            size: 3,
        })
        .collect()
}

/// A listing keeps its first entries while its compact JSON (escapes counted) fits the cap: the
/// next one would not have, and `truncated` says some were left out.
#[test]
fn a_listing_keeps_the_first_entries_that_fit_the_byte_cap() {
    use super::workspace::{MAX_LIST_BYTES, fit_listing};
    // Quotes and control characters take more bytes in JSON than in the name.
    let names: Vec<String> = (0..400)
        .map(|i| format!("{i:03}-\"\u{1}{}", "x".repeat(200)))
        .collect();
    let listing = ai_core::WorkspaceListing {
        entries: entries(names.clone()),
        truncated: false,
    };
    let output = fit_listing(listing);
    assert!(output.truncated);
    let kept = output.entries.len();
    assert!(kept > 0 && kept < names.len(), "{kept}");
    let kept_paths: Vec<&str> = output.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(kept_paths, names[..kept]);
    let len = |output: &super::ListOutput| serde_json::to_string(output).unwrap().len();
    assert!(len(&output) <= MAX_LIST_BYTES, "{}", len(&output));
    let mut with_next = output.clone();
    with_next.entries.push(super::ListEntry {
        path: names[kept].clone(),
        is_dir: false,
        size: 3,
    });
    with_next.truncated = false;
    assert!(len(&with_next) > MAX_LIST_BYTES, "{}", len(&with_next));
}

/// A listing that fits is passed on whole, with the workspace's own `truncated`.
#[test]
fn a_listing_that_fits_is_kept_whole_with_the_workspaces_truncated() {
    use super::workspace::fit_listing;
    for truncated in [false, true] {
        let names: Vec<String> = (0..10).map(|i| format!("{i}.txt")).collect();
        let output = fit_listing(ai_core::WorkspaceListing {
            entries: entries(names.clone()),
            truncated,
        });
        assert_eq!(output.entries.len(), names.len());
        assert_eq!(output.truncated, truncated);
    }
}

/// The JSON length counted for each character is what serde_json writes for it in a string.
#[test]
fn a_characters_json_length_is_what_serde_json_writes() {
    use super::workspace::json_len;
    let chars = (0..0x800)
        .chain([0xFFFD, 0xFEFF, 0x1F426, 0x10FFFF])
        .filter_map(char::from_u32);
    for c in chars {
        let written = serde_json::to_string(&c.to_string()).unwrap().len() - 2;
        assert_eq!(json_len(c), written, "{:?}", c);
    }
}

/// A read whose path alone fills the answer still gets one character further each time.
#[test]
fn a_read_always_gets_further() {
    use super::workspace::{MAX_READ_BYTES, fit_text};
    let path = "p".repeat(MAX_READ_BYTES);
    let answer = fit_text(path, "ab", 0, false);
    assert_eq!(answer.content, "a");
    assert_eq!(answer.next_offset, Some(1));
    let answer = fit_text("p".into(), "b", 1, false);
    assert_eq!(answer.content, "b");
    assert_eq!(answer.next_offset, None);
}
