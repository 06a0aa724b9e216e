//! [`describe_json_error`]: what a JSON decode error says, without the data it was decoding.

/// Describes why JSON did not decode, and where, without quoting any of the input.
///
/// serde_json's own messages quote the value they refused (`invalid type: string "…", expected
/// u64`), so a run's text or a tool's result read back from a store would end up in an error and
/// in the logs. This keeps the error's category, the rule from the type being decoded (a missing
/// field's name, what was expected) and the line and column, and drops the value:
///
/// ```
/// #[derive(Debug, serde::Deserialize)]
/// struct Row { #[allow(dead_code)] count: u64 }
/// let e = serde_json::from_str::<Row>(r#"{"count": "SECRET TEXT"}"#).unwrap_err();
/// assert!(e.to_string().contains("SECRET TEXT"));
/// let described = ai_core::describe_json_error(&e);
/// assert_eq!(described, "a value of the wrong type (a string; expected u64) at line 1 column 23");
/// assert!(!described.contains("SECRET"));
/// ```
pub fn describe_json_error(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let what = match e.classify() {
        Category::Io => "a read error".to_owned(),
        Category::Syntax => unreadable(&message_of(e))
            .unwrap_or("not valid JSON")
            .to_owned(),
        Category::Eof => "JSON that ends too early".to_owned(),
        Category::Data => {
            let message = message_of(e);
            match unreadable(&message) {
                Some(what) => what.to_owned(),
                None => describe_data_error(&message),
            }
        }
    };
    if e.line() == 0 {
        what
    } else {
        format!("{what} at line {} column {}", e.line(), e.column())
    }
}

/// What valid JSON held that serde_json could not read, which it reports as a syntax error (or,
/// passed on by a reader of a value on its own, a data error) rather than as a value of the
/// wrong type. The one reading of serde_json's messages for it: [`describe_json_error`] and the
/// runner's refusal of such tool arguments both name it from here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unreadable {
    /// A string holding a lone surrogate escape (`"\ud800"`), which no Rust string can hold.
    LoneSurrogate,
    /// A number out of the range of the number type that reads it (`1e400` for an f64;
    /// serde_json says the same of `1e39` for an `f32` or `-1` for a `u128`).
    OutOfRange,
    /// Nesting past serde_json's recursion limit of 128 levels.
    TooDeep,
}

impl Unreadable {
    /// Which one serde_json's `message` (without its position) says, if any.
    pub(crate) fn of(message: &str) -> Option<Self> {
        if message.starts_with("lone leading surrogate in hex escape")
            || message.starts_with("unexpected end of hex escape")
        {
            Some(Self::LoneSurrogate)
        } else if message.starts_with("number out of range") {
            Some(Self::OutOfRange)
        } else if message.starts_with("recursion limit exceeded") {
            Some(Self::TooDeep)
        } else {
            None
        }
    }
}

/// What serde_json's `message` says when it refused valid JSON it cannot read ([`Unreadable`]),
/// named for what it is, never as "not valid JSON".
fn unreadable(message: &str) -> Option<&'static str> {
    Unreadable::of(message).map(|what| match what {
        Unreadable::LoneSurrogate => {
            "a lone surrogate escape (\\ud800 to \\udfff without its pair) in a string"
        }
        Unreadable::OutOfRange => {
            "a number out of range (past what its number type holds: about ±1.8e308 for f64)"
        }
        Unreadable::TooDeep => "JSON nested deeper than 128 levels",
    })
}

/// The error's message without serde_json's ` at line … column …` suffix.
fn message_of(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match full.strip_suffix(&suffix) {
        Some(message) if e.line() != 0 => message.to_owned(),
        _ => full,
    }
}

/// The kinds serde names for an unexpected value (`serde::de::Unexpected`'s display), longest
/// first so that `unit variant` is not read as `unit value`.
const KINDS: &[&str] = &[
    "floating point",
    "newtype variant",
    "newtype struct",
    "tuple variant",
    "struct variant",
    "unit variant",
    "unit value",
    "byte array",
    "sequence",
    "boolean",
    "integer",
    "string",
    "option",
    "bytes",
    "char",
    "null",
    "enum",
    "map",
];

/// What serde says a derived type expects, in words rather than by the Rust type's name (`struct
/// RecordFields` is an object, `internally tagged enum AiEvent` an object with its tag): the name
/// is the program's, not the data's, and tells a reader nothing about what to write. Anything
/// else (`u64`, `a string`, `` one of `a`, `b` ``) is kept as it is.
fn in_words(expected: &str) -> String {
    let fields = |rest: &str| {
        rest.rsplit_once(" with ")
            .and_then(|(_, n)| n.strip_suffix(" elements"))
            .map(str::to_owned)
    };
    let words = [
        ("struct variant ", "an object"),
        ("tuple variant ", "an array"),
        ("tuple struct ", "an array"),
        ("unit struct ", "null"),
        ("newtype struct ", "a value"),
        ("internally tagged enum ", "an object with its type tag"),
        ("adjacently tagged enum ", "an object with its type tag"),
        ("struct ", "an object"),
        ("enum ", "a variant"),
    ];
    for (prefix, what) in words {
        if let Some(rest) = expected.strip_prefix(prefix) {
            return match fields(rest) {
                Some(n) if what == "an object" => format!("an object of {n} fields"),
                Some(n) if what == "an array" => format!("an array of {n} elements"),
                _ => what.to_owned(),
            };
        }
    }
    expected.to_owned()
}

/// A data error (the JSON is valid, the type does not take it) from the parts of serde's message
/// that come from the type, never from the data.
fn describe_data_error(message: &str) -> String {
    // What follows the last ", expected " is the type's own description: the value, which comes
    // first, may contain that text too, but never after it.
    let expected = message
        .rfind(", expected ")
        .map(|at| in_words(&message[at + ", expected ".len()..]));
    let with_expected = |what: &str| match expected {
        Some(expected) => format!("{what}; expected {expected}"),
        None => what.to_owned(),
    };
    for (prefix, what) in [
        ("missing field `", "missing field"),
        ("duplicate field `", "duplicate field"),
    ] {
        // The field's name is the type's (it is missing or doubled, so it was looked for).
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some(end) = rest.find('`')
        {
            return format!("{what} `{}`", &rest[..end]);
        }
    }
    for (prefix, what) in [
        ("invalid type: ", "a value of the wrong type"),
        ("invalid value: ", "a value that is not allowed"),
    ] {
        if let Some(rest) = message.strip_prefix(prefix) {
            let kind = KINDS.iter().find(|kind| rest.starts_with(*kind));
            return match kind {
                Some(kind) => {
                    let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
                        "an"
                    } else {
                        "a"
                    };
                    format!("{what} ({})", with_expected(&format!("{article} {kind}")))
                }
                None => what.to_owned(),
            };
        }
    }
    if message.starts_with("invalid length ") {
        return format!(
            "a sequence or map of the wrong length ({})",
            with_expected("length not shown")
        );
    }
    if message.starts_with("unknown variant ") {
        return format!("an unknown variant ({})", with_expected("name not shown"));
    }
    if message.starts_with("unknown field ") {
        return format!("an unknown field ({})", with_expected("name not shown"));
    }
    // A message of the type's own (e.g. an id's constructor) may quote the value: none is kept.
    "a value the type does not take".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    const CANARY: &str = "CANARY, expected 7 \u{1F426}";

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Row {
        count: u64,
        kind: Kind,
        #[serde(default)]
        pair: Option<(u8, u8)>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        Plain,
    }

    fn described(json: &str) -> String {
        let e = serde_json::from_str::<Row>(json).unwrap_err();
        let described = describe_json_error(&e);
        assert!(!described.contains("CANARY"), "{described}");
        described
    }

    #[test]
    fn no_message_quotes_the_input() {
        let c = serde_json::to_string(CANARY).unwrap();
        let cases = [
            (
                format!(r#"{{"count": {c}, "kind": "plain"}}"#),
                "a value of the wrong type (a string; expected u64) at line 1 column 35",
            ),
            (
                format!(r#"{{"count": 1, "kind": {c}}}"#),
                "an unknown variant (name not shown; expected `plain`) at line 1 column 46",
            ),
            (
                format!(r#"{{"count": 1, "kind": "plain", {c}: 1}}"#),
                "an unknown field (name not shown; expected one of `count`, `kind`, `pair`) \
                 at line 1 column 55",
            ),
            (
                r#"{"count": 1, "kind": "plain", "pair": [1]}"#.to_owned(),
                "a sequence or map of the wrong length (length not shown; expected a tuple of \
                 size 2) at line 1 column 41",
            ),
            (
                r#"{"count": -1, "kind": "plain"}"#.to_owned(),
                "a value that is not allowed (an integer; expected u64) at line 1 column 12",
            ),
            (
                r#"{"kind": "plain"}"#.to_owned(),
                "missing field `count` at line 1 column 17",
            ),
            (
                format!(r#"{{"count": 1 {c}"#),
                "not valid JSON at line 1 column 13",
            ),
            (
                r#"{"count": 1"#.to_owned(),
                "JSON that ends too early at line 1 column 11",
            ),
            // Valid JSON serde_json cannot read, named for what it is.
            (
                r#"{"count": 1, "kind": "\ud800"}"#.to_owned(),
                "a lone surrogate escape (\\ud800 to \\udfff without its pair) in a string at \
                 line 1 column 29",
            ),
            (
                r#"{"count": 1e400, "kind": "plain"}"#.to_owned(),
                "a number out of range (past what its number type holds: about ±1.8e308 for \
                 f64) at line 1 column 15",
            ),
        ];
        for (json, expected) in cases {
            assert_eq!(described(&json), expected, "{json}");
        }
        let deep = serde_json::from_str::<serde_json::Value>(&"[".repeat(200)).unwrap_err();
        assert_eq!(
            describe_json_error(&deep),
            "JSON nested deeper than 128 levels at line 1 column 128"
        );
    }

    /// serde_json says "number out of range" of a number an `f32` or a 128-bit integer cannot
    /// hold too (`1e39`, `-1` for a `u128`), both well within f64's range: what is said is true
    /// of them as of a number past f64's.
    #[test]
    fn a_number_out_of_a_narrower_types_range_is_not_said_to_be_past_f64s() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Narrow {
            #[serde(default)]
            ratio: f32,
            #[serde(default)]
            nanos: u128,
        }
        let out_of_range = "a number out of range (past what its number type holds: about \
                            ±1.8e308 for f64)";
        for (json, column) in [(r#"{"ratio": 1e39}"#, 14), (r#"{"nanos": -1}"#, 11)] {
            let e = serde_json::from_str::<Narrow>(json).unwrap_err();
            assert_eq!(
                describe_json_error(&e),
                format!("{out_of_range} at line 1 column {column}"),
                "{json}"
            );
        }
    }

    /// What a derived type expects is said in words, never by the type's Rust name.
    #[test]
    fn a_derived_type_is_expected_in_words() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Inner {
            a: u8,
            b: u8,
        }
        #[derive(Debug, Deserialize)]
        #[serde(tag = "type")]
        #[allow(dead_code)]
        enum Tagged {
            One { a: u8 },
        }
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Pair(u8, u8);
        let wrong = |e: serde_json::Error| describe_json_error(&e);
        assert_eq!(
            wrong(serde_json::from_str::<Inner>("5").unwrap_err()),
            "a value of the wrong type (an integer; expected an object) at line 1 column 1"
        );
        assert_eq!(
            wrong(serde_json::from_str::<Inner>("[1]").unwrap_err()),
            "a sequence or map of the wrong length (length not shown; expected an object of 2 \
             fields) at line 1 column 3"
        );
        assert_eq!(
            wrong(serde_json::from_str::<Pair>("[1]").unwrap_err()),
            "a sequence or map of the wrong length (length not shown; expected an array of 2 \
             elements) at line 1 column 3"
        );
        let tagged = wrong(serde_json::from_str::<Tagged>("5").unwrap_err());
        assert!(
            tagged.starts_with(
                "a value of the wrong type (an integer; expected an object with its type tag)"
            ),
            "{tagged}"
        );
    }

    #[test]
    fn a_message_of_the_type_s_own_is_dropped() {
        #[derive(Debug)]
        struct Id;
        impl<'de> Deserialize<'de> for Id {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                Err(serde::de::Error::custom(format!("bad id {raw}")))
            }
        }
        let e = serde_json::from_str::<Id>(r#""CANARY""#).unwrap_err();
        assert!(e.to_string().contains("CANARY"));
        assert!(
            describe_json_error(&e).starts_with("a value the type does not take"),
            "{e}"
        );
    }
}
