//! The lexer keeps code and line numbers and drops prose and data.

/// Blanks `input` and compares the result with runs of spaces squeezed to one and trailing
/// spaces dropped; every line keeps its length, so columns and line numbers stay.
fn check(input: &str, expected: &str) {
    let blanked = super::blank(input).unwrap();
    let lengths = |text: &str| text.lines().map(|l| l.chars().count()).collect::<Vec<_>>();
    assert_eq!(lengths(&blanked), lengths(input), "{input}");
    let squeezed: Vec<String> = blanked
        .lines()
        .map(|line| {
            let mut out = String::new();
            for c in line.trim_end().chars() {
                if !(c == ' ' && out.ends_with(' ')) {
                    out.push(c);
                }
            }
            out
        })
        .collect();
    assert_eq!(squeezed.join("\n"), expected, "{input}");
}

#[test]
fn comments_and_literals_are_blanked() {
    let cases = [
        ("a(); // std::env", "a();"),
        ("/// doc .exec(\nb", "\nb"),
        ("a /* x /* nested */ y */ b", "a b"),
        ("/* one\ntwo */ c", "\n c"),
        (
            r#"let u = "http://x"; env::var()"#,
            r#"let u = " "; env::var()"#,
        ),
        (
            r#"let q = '"'; let u = "//"; k"#,
            r#"let q = ' '; let u = " "; k"#,
        ),
        (r#""a\"b // c" d"#, r#"" " d"#),
        ("r#\"say \"//\" ok\"# e", "r#\" \"# e"),
        ("br\"x\" f", "br\" \" f"),
        ("'\\'' g '\\n' h", "' ' g ' ' h"),
        ("fn f<'a>(x: &'a str) {}", "fn f<'a>(x: &'a str) {}"),
        ("\"two\nlines\" i", "\"\n \" i"),
        ("r#type: u8", "r#type: u8"),
    ];
    for (input, expected) in cases {
        check(input, expected);
    }
}

#[test]
fn an_unterminated_literal_or_comment_names_its_line() {
    let cases = [("a\nb \"open", 2), ("a\n\n/* open", 3), ("r#\"open\"", 1)];
    for (input, line) in cases {
        assert_eq!(super::blank(input), Err(line), "{input}");
    }
}

#[test]
fn tokens_keep_their_lines() {
    let tokens = super::tokens("use std::{\n    env,\n};");
    let got: Vec<(&str, usize)> = tokens.iter().map(|t| (t.text.as_str(), t.line)).collect();
    assert_eq!(
        got,
        [
            ("use", 1),
            ("std", 1),
            ("::", 1),
            ("{", 1),
            ("env", 2),
            (",", 2),
            ("}", 3),
            (";", 3)
        ]
    );
}

#[test]
fn token_offsets_index_the_original_text() {
    let text = "let s = \"é\"; // c\nf(\"../x/y.rs\")";
    let code = super::blank(text).unwrap();
    let chars: Vec<char> = text.chars().collect();
    let quotes: Vec<usize> = super::tokens(&code)
        .iter()
        .filter(|t| t.text == "\"")
        .map(|t| t.offset)
        .collect();
    let literal: String = chars[quotes[2] + 1..quotes[3]].iter().collect();
    assert_eq!(literal, "../x/y.rs");
}

#[test]
fn a_raw_identifier_is_one_token_without_its_prefix() {
    let code = super::blank("a.r#exec(r#\"s\"#, br#\"b\"#)").unwrap();
    let tokens = super::tokens(&code);
    let got: Vec<(&str, bool)> = tokens.iter().map(|t| (t.text.as_str(), t.raw)).collect();
    assert_eq!(
        got,
        [
            ("a", false),
            (".", false),
            ("exec", true),
            ("(", false),
            ("r", false),
            ("#", false),
            ("\"", false),
            ("\"", false),
            ("#", false),
            (",", false),
            ("br", false),
            ("#", false),
            ("\"", false),
            ("\"", false),
            ("#", false),
            (")", false),
        ]
    );
}
