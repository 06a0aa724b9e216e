//! check-links fed small trees: each broken link fires with its file and line, sound ones pass;
//! and the repository's own links hold.

/// What the check reports of a tree holding only `files` (each a path and its text).
fn violations(files: &[(&str, &str)]) -> Vec<String> {
    let root = crate::tests::tree(files);
    super::check_tree(root.path()).unwrap().0
}

/// `cargo test` keeps the links true too.
#[test]
fn the_repositorys_links_hold() {
    let (violations, seen) = super::check_tree(&crate::repo_root()).unwrap();
    assert!(
        violations.is_empty(),
        "check-links found {} broken link(s):\n{}",
        violations.len(),
        violations.join("\n")
    );
    assert!(seen.pages > 10 && seen.anchors > 10, "{seen:?}");
}

/// Links between pages, to folders, to sources and to headings as GitHub names them, and what
/// is not a link (code, other sites), pass.
#[test]
fn sound_links_pass() {
    let readme = "\
# cogni: the `cogni` tool (v1) ##
See [the docs](docs/a.md), [a folder](docs/), [code](src/x.rs#L3 \"title\").
An image ![logo](<docs/a.md>) and a [site](https://example.com/#nowhere), [mail](mailto:a@b).
Here: [top](#cogni-the-cogni-tool-v1), [again](#again-1), [third](#again-2), [C#](#c).
`[not](a link)` and ``[nor `this`](one)``, \\[nor](escaped).
[defined]: docs/a.md#b-and-c
## Again
## Again
## Again
## C#
```sh
# Not a heading
[not](checked.md)
```
";
    let page = "# A\n## `b` and [c](../README.md)\nBack to [the top](../README.md#again).\n";
    let (violations, seen) = {
        let root =
            crate::tests::tree(&[("README.md", readme), ("docs/a.md", page), ("src/x.rs", "")]);
        super::check_tree(root.path()).unwrap()
    };
    assert_eq!(violations, Vec::<String>::new());
    let expected = super::Seen {
        pages: 2,
        links: 11,
        anchors: 6,
    };
    assert_eq!(seen, expected);
}

/// A link to a file that does not exist names the page, the line and the file it looked for.
#[test]
fn a_missing_file_fires() {
    let text = "# Title\n\nSee [the policy](policy.md) and [this](#title).\n";
    assert_eq!(
        violations(&[("docs/a.md", text)]),
        ["docs/a.md:3: DOC_LINK: `policy.md`: docs/policy.md does not exist"]
    );
}

/// An anchor no heading of its page gives fires, on its own page and on another, and so does
/// one in GitHub's spelling for a heading that is inside a code block or a second duplicate
/// that does not exist.
#[test]
fn a_missing_anchor_fires() {
    let a = "# A\n## Twice\n## Twice\n```\n## Fenced\n```\n[x](#twice-2)\n";
    let b = "[a](a.md#Twice)\n[b](a.md#fenced)\n[c](a.md#twice-1) [d](#nowhere)\n";
    assert_eq!(
        violations(&[("a.md", a), ("b.md", b)]),
        [
            "a.md:7: DOC_LINK: `#twice-2`: a.md has no heading whose anchor is `twice-2`",
            "b.md:1: DOC_LINK: `a.md#Twice`: a.md has no heading whose anchor is `Twice`",
            "b.md:2: DOC_LINK: `a.md#fenced`: a.md has no heading whose anchor is `fenced`",
            "b.md:3: DOC_LINK: `#nowhere`: b.md has no heading whose anchor is `nowhere`",
        ]
    );
}

/// A link that climbs out of the repository fires, since it leads nowhere on GitHub.
#[test]
fn a_link_out_of_the_repository_fires() {
    assert_eq!(
        violations(&[("docs/a.md", "[design](../../shared/DESIGN.md)\n")]),
        ["docs/a.md:1: DOC_LINK: `../../shared/DESIGN.md`: leaves the repository"]
    );
}

/// Markdown under `target/`, `node_modules/` or a hidden folder is not the repository's own,
/// and is not read.
#[test]
fn build_output_and_vendored_pages_are_skipped() {
    let broken = "[x](nowhere.md)\n";
    assert_eq!(
        violations(&[
            ("target/doc/a.md", broken),
            ("tests/protocol/node_modules/ai/README.md", broken),
            (".github/a.md", broken),
            ("fixtures/README.md", broken),
        ]),
        ["fixtures/README.md:1: DOC_LINK: `nowhere.md`: fixtures/nowhere.md does not exist"]
    );
}

/// GitHub's anchors: lowercase, punctuation dropped, spaces to `-`, code spans without their
/// backticks, links by their text, duplicates numbered.
#[test]
fn headings_are_named_as_github_names_them() {
    let text = "\
# Bird's-eye view
## The server's token: `Bearer` (v2)
### `runs list`, `runs show` and `replay`
## Über Straße
## Twice
## Twice
## Twice-1
## [Linked](x.md) heading ##
#### max_tokens
####### seven
#no-space
    # indented four
";
    assert_eq!(
        super::headings(text),
        [
            "birds-eye-view",
            "the-servers-token-bearer-v2",
            "runs-list-runs-show-and-replay",
            "über-straße",
            "twice",
            "twice-1",
            "twice-1-1",
            "linked-heading",
            "max_tokens",
        ]
    );
}

/// A fence the page never closes (here one closed by a shorter run) makes the rest of the page
/// code, on GitHub as here: it fires at the fence, since the links after it go unchecked.
#[test]
fn an_unclosed_fence_fires() {
    let text = "# A\n````sh\nls\n```\nSee [the policy](policy.md).\n";
    assert_eq!(
        violations(&[("a.md", text)]),
        [
            "a.md:2: DOC_LINK: this code fence is never closed, so the rest of the page is not prose and its links go unchecked"
        ]
    );
}

/// A link's destination ends at ASCII whitespace only, as CommonMark has it: a no-break space
/// (typed for a space, or pasted) is part of the file's name, so the link is broken.
#[test]
fn a_no_break_space_is_part_of_the_destination() {
    let text = "# A\n[a](a.md\u{a0}\"title\")\n[b](\u{a0}a.md)\n[c]: a.md\u{a0}#a\n";
    assert_eq!(
        violations(&[("a.md", text)]),
        [
            "a.md:2: DOC_LINK: `a.md\u{a0}\"title\"`: a.md\u{a0}\"title\" does not exist",
            "a.md:3: DOC_LINK: `\u{a0}a.md`: \u{a0}a.md does not exist",
            "a.md:4: DOC_LINK: `a.md\u{a0}#a`: a.md\u{a0} does not exist",
        ]
    );
}

/// A heading or a link inside an HTML comment is not shown, on GitHub as here: a link to the
/// heading fires, the link is not checked; a comment never closed fires where it opens.
#[test]
fn html_comments_are_not_prose() {
    let a = "# A\n<!--\n## Ghost\n[x](nope.md)\n-->\n[a](#ghost)\n<!-- [y](nope.md) -->\n[b](#a)\n";
    let b = "# B\n<!-- an unclosed\n[z](nope.md)\n";
    assert_eq!(
        violations(&[("a.md", a), ("b.md", b)]),
        [
            "a.md:6: DOC_LINK: `#ghost`: a.md has no heading whose anchor is `ghost`",
            "b.md:2: DOC_LINK: this HTML comment is never closed, so the rest of the page is not prose and its links go unchecked",
        ]
    );
}
