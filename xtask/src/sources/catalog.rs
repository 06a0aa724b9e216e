//! NO_DEFAULT_EXECUTABLE_CATALOG (DESIGN.md invariant 33): no crate but the composition root
//! exports tools that run without being handed their capabilities.
//!
//! ai-tools exports contracts (each built with the capability ports it reaches the world
//! through) and `bind`, which turns a contract into a `BoundTool`; only a composition root
//! (`crates/bootstrap/`) builds the capabilities and binds. A *default executable catalog* is
//! a public item that hands out bound tools, or a source of them, from nothing. Precisely, in
//! `crates/*/src/` outside `crates/bootstrap/`, the rule fires on:
//!
//! - a `pub fn` (also `const`, `async`, `unsafe`, `extern`) that takes no parameter at all and
//!   whose return type names an *executable* type (`pub fn default_tools() -> Vec<Arc<dyn
//!   BoundTool>>`, `pub fn catalog() -> StaticToolSource`, or `-> Self` in the `impl` of one);
//! - a `pub static` or `pub const` whose type names one (`pub static TOOL_CATALOG:
//!   LazyLock<StaticToolSource>`);
//! - `Default` for an executable type, by `impl Default for X` or `#[derive(Default)]`, and any
//!   `impl Default` whose body names an executable type (it builds bound tools from nothing).
//!
//! The *executable* types of a crate are `BoundTool`, `ToolSource` and `StaticToolSource`
//! ([`EXECUTABLE`]), every name an import of the crate binds to one (`use ai_core::BoundTool as
//! Tool;`), every type alias of the crate whose right side names one (`type Tools =
//! Vec<Arc<dyn BoundTool>>;`), and every type of the crate that implements one (`impl
//! ToolSource for MySource`), to a fixed point. Identifiers are compared, not paths, so
//! `ai_core::StaticToolSource` and a glob import's `StaticToolSource` are the same. A crate's
//! aliases and implementors are executable in every crate (`pub fn tools() ->
//! ai_core::Tools`) but one that defines a type of that name (its own `struct Tools`), its
//! imports only in its own.
//!
//! Why this shape: what makes a catalog *default* is that nobody hands it capabilities, and
//! the one thing the tokens tell for sure is whether a function takes any parameter. A
//! parameter is taken for capabilities whatever its type (`StaticToolSource::new(tools)` and
//! `ai_tools::bind(contract)` are handed what they bind, and pass); a no-argument function, a
//! static, a constant and `Default` cannot have been. Visibility is read as written: a bare
//! `pub` counts wherever it is (a `pub` item of a private module may be re-exported), while
//! `pub(crate)`, `pub(super)` and private items are not exported. Contracts (`GetCurrentTime`)
//! are not executable: they run only once bound. A `pub fn`, `static` or `const` that a macro
//! makes of what it is handed (`pub fn $n() -> $t`) is each item an invocation's names could
//! make, where it is invoked ([`made_items`]). Not looked at: a trait's provided method, and
//! `Default` that a macro makes of what it is handed.
//!
//! On the real repository the scan must also see the public functions that *are* handed what
//! they bind ([`Seen::tool_builders`]: `ai_tools::bind`, `StaticToolSource::new`; an accessor
//! handed only its receiver, `Runner::source(&self)`, binds nothing and is not counted), and
//! among them one whose return type names a tool source as `Self`
//! ([`Seen::self_tool_builders`]: `StaticToolSource::new`), so a broken return-type or `Self`
//! reading cannot pass silently.

use super::{
    Finding, Invocation, MACRO_SEGMENT, MacroJoins, Seen, closing, closing_angle, expansions,
    is_ident, is_keyword, macro_around, segment_at, written,
};
use crate::lex::Token;

/// The types that run tools: a bound tool, a source of bound tools, and ai-core's fixed one.
pub(super) const EXECUTABLE: &[&str] = &["BoundTool", "ToolSource", "StaticToolSource"];

/// The composition root, where capabilities are built and tools are bound.
const COMPOSITION_ROOT: &str = "crates/bootstrap/";

/// Types that wrap another: `impl BoundTool for Arc<T>` makes `T` a tool, not `Arc`.
const WRAPPERS: &[&str] = &["Arc", "Box", "Rc", "Cow"];

/// What one source file of a crate tells the rule.
#[derive(Debug, Default)]
pub(super) struct FileFacts {
    /// The file, relative to the repository.
    path: String,
    /// `(name, last segment of the path)` of each import that binds a name.
    imports: Vec<(String, String)>,
    /// `(name, identifiers on the right)` of each type alias.
    aliases: Vec<(String, Vec<String>)>,
    /// `(trait, type)` of each `impl Trait for Type`.
    impls: Vec<(String, String)>,
    /// The name of each `struct`, `enum`, `union` and `trait` it defines.
    types: Vec<String>,
    /// The public items that could be a default catalog.
    items: Vec<Item>,
}

/// A public item whose types decide whether it is a default executable catalog.
#[derive(Debug)]
struct Item {
    /// Its line.
    line: usize,
    /// How it reads in a message (`pub fn default_tools`).
    what: String,
    /// Whether it is handed something: a function with a parameter.
    handed: bool,
    /// Whether all it is handed is its receiver (`&self`): an accessor, which binds nothing.
    receiver_only: bool,
    /// The type its return type's `Self` was read as (in the `impl` of that type).
    returns_self: Option<String>,
    /// The identifiers of its type (a function's return type, with `Self` read as the type of
    /// its `impl`; the type and body of `impl Default`), a macro variable as [`MACRO_SEGMENT`].
    names: Vec<String>,
    /// The `macro_rules!` whose rules make it of what an invocation hands in (a macro variable
    /// in its name or its type: `pub fn $n`, `-> $t`), so that it is an item only where the
    /// macro is invoked ([`made_items`]).
    made_by: Option<String>,
}

/// Whether the file at `path` (under `crates/*/src/`) is checked by the rule.
pub(super) fn applies(path: &str) -> bool {
    !path.starts_with(COMPOSITION_ROOT)
}

/// The facts of one file, from its code tokens.
pub(super) fn facts(path: &str, tokens: &[Token]) -> FileFacts {
    let text = |k: usize| tokens.get(k).map_or("", |t| t.text.as_str());
    let imports = written(tokens)
        .imports
        .iter()
        .filter_map(|import| {
            Some((
                (*import.name?).to_owned(),
                (*import.path.last()?).to_owned(),
            ))
        })
        .collect();
    let impls = impl_blocks(tokens);
    let mut facts = FileFacts {
        path: path.to_owned(),
        imports,
        impls: impls
            .iter()
            .filter_map(|block| Some((block.trait_name.clone()?, block.target.clone())))
            .collect(),
        ..FileFacts::default()
    };
    for block in impls
        .iter()
        .filter(|b| b.trait_name.as_deref() == Some("Default"))
    {
        let mut names = vec![block.target.clone()];
        names.extend(idents(&tokens[block.open..block.close]));
        facts.items.push(Item {
            line: block.line,
            what: format!("`impl Default for {}`", block.target),
            handed: false,
            receiver_only: false,
            returns_self: None,
            names,
            made_by: None,
        });
    }
    for (i, token) in tokens.iter().enumerate() {
        let defines = ["struct", "enum", "union", "trait"];
        if defines.iter().any(|k| is_keyword(token, k)) && is_ident(text(i + 1)) {
            facts.types.push(text(i + 1).to_owned());
        }
        if is_keyword(token, "type")
            && is_ident(text(i + 1))
            && let Some(end) = find(tokens, i, ";")
            && let Some(eq) = find(&tokens[..end], i, "=")
        {
            facts
                .aliases
                .push((text(i + 1).to_owned(), idents(&tokens[eq + 1..end])));
        } else if is_keyword(token, "fn")
            && is_ident(text(name_at(tokens, i + 1)))
            && exported_fn(tokens, i)
        {
            facts
                .items
                .push(made(tokens, i, function(tokens, i, &impls)));
        } else if is_keyword(token, "pub")
            && (is_keyword_at(tokens, i + 1, "static") || is_keyword_at(tokens, i + 1, "const"))
            && let Some(item) = static_item(tokens, i)
        {
            facts.items.push(made(tokens, i, item));
        } else if token.text == "derive"
            && i >= 2
            && text(i - 1) == "["
            && text(i - 2) == "#"
            && text(i + 1) == "("
            && idents(&tokens[i + 1..closing(tokens, i + 1)])
                .iter()
                .any(|n| n == "Default")
            && let Some(name) = derived_type(tokens, closing(tokens, i + 1))
        {
            facts.items.push(Item {
                line: token.line,
                what: format!("`#[derive(Default)]` of `{name}`"),
                handed: false,
                receiver_only: false,
                returns_self: None,
                names: vec![name],
                made_by: None,
            });
        }
    }
    facts
}

/// Where the name of the item whose keyword ends before `tokens[k]` is: `k`, or past the `$`
/// of a macro variable (`fn $n`).
fn name_at(tokens: &[Token], k: usize) -> usize {
    k + usize::from(tokens.get(k).is_some_and(|t| t.text == "$"))
}

/// `item`, whose keyword is `tokens[i]`, with the macro that makes it when a macro variable is
/// in its name (which `what` spells `$n`) or its type ([`Item::made_by`]).
fn made(tokens: &[Token], i: usize, mut item: Item) -> Item {
    if item.what.contains('$') || item.names.iter().any(|n| n == MACRO_SEGMENT) {
        item.made_by = macro_around(tokens, i);
    }
    item
}

/// The items macros make where they are invoked, each with its file: each item of `files` that
/// a macro makes ([`Item::made_by`]), for each invocation of that macro or of one that hands
/// what it is handed on to it, at the invocation, with each macro variable of its type taken
/// for every name the invocation hands in.
fn made_items(
    files: &[FileFacts],
    invocations: &[Invocation],
    macros: &[&MacroJoins],
) -> Vec<(String, Item)> {
    let templates: Vec<(&str, &Item)> = (files.iter())
        .flat_map(|f| &f.items)
        .filter_map(|item| Some((item.made_by.as_deref()?, item)))
        .collect();
    let mut made = Vec::new();
    for (invocation, template) in expansions(&templates, invocations, macros) {
        let names = (template.names.iter()).flat_map(|name| invocation.each(name));
        let item = Item {
            line: invocation.line,
            what: template.what.clone(),
            handed: template.handed,
            receiver_only: template.receiver_only,
            returns_self: template.returns_self.clone(),
            names: names.collect(),
            made_by: None,
        };
        made.push((invocation.path.clone(), item));
    }
    made
}

/// NO_DEFAULT_EXECUTABLE_CATALOG over every crate's `files` and the items macros make in them
/// where they are invoked ([`made_items`]; see the module's docs).
pub(super) fn no_default_executable_catalog(
    files: &[FileFacts],
    invocations: &[Invocation],
    macros: &[&MacroJoins],
    seen: &mut Seen,
    found: &mut Vec<Finding>,
) {
    let made = made_items(files, invocations, macros);
    let mut crates: Vec<&str> = files.iter().map(|f| super::crate_dir(&f.path)).collect();
    crates.sort_unstable();
    crates.dedup();
    let crates: Vec<(&str, Vec<&FileFacts>)> = (crates.into_iter())
        .map(|krate| {
            let files = (files.iter()).filter(|f| super::crate_dir(&f.path) == krate);
            (krate, files.collect())
        })
        .collect();
    let exported = exported_names(&crates);
    for (krate, files) in crates {
        let executable = executable_names(&files, &exported);
        let written = (files.iter())
            .flat_map(|file| file.items.iter().map(|item| (file.path.as_str(), item)))
            .filter(|(_, item)| item.made_by.is_none());
        let made = (made.iter())
            .filter(|(path, _)| super::crate_dir(path) == krate)
            .map(|(path, item)| (path.as_str(), item));
        for (path, item) in written.chain(made) {
            let Some(name) = item.names.iter().find(|n| executable.contains(n)) else {
                continue;
            };
            if item.handed {
                if !item.receiver_only {
                    seen.tool_builders += 1;
                    if item.returns_self.as_ref() == Some(name) {
                        seen.self_tool_builders += 1;
                    }
                }
                continue;
            }
            found.push((
                path.to_owned(),
                item.line,
                "NO_DEFAULT_EXECUTABLE_CATALOG",
                format!(
                    "{} gives bound tools (`{name}`) without being handed capabilities: a default executable catalog; export contracts and bind them to capabilities in the composition root (cogni-bootstrap)",
                    item.what
                ),
            ));
        }
    }
}

/// The executable types every crate names as its items: each crate's type aliases and
/// implementors of an executable type (`ai_core::Tools`, `ai_core::Fixed`), which another crate
/// may name too, to a fixed point. Imports stay their crate's own: a name one crate gives
/// `BoundTool` may be another's own type (the wire's `Tool`); and a crate that defines a type
/// of an exported name names its own ([`executable_names`]).
fn exported_names(crates: &[(&str, Vec<&FileFacts>)]) -> Vec<String> {
    let mut exported: Vec<String> = Vec::new();
    loop {
        let before = exported.len();
        for (_, files) in crates {
            let items = |name: &String| {
                (files.iter()).any(|f| {
                    f.aliases.iter().any(|(alias, _)| alias == name)
                        || f.impls.iter().any(|(_, target)| target == name)
                })
            };
            for name in executable_names(files, &exported) {
                if items(&name) && !exported.contains(&name) {
                    exported.push(name);
                }
            }
        }
        if exported.len() == before {
            return exported;
        }
    }
}

/// The executable types of one crate: [`EXECUTABLE`] and those other crates export
/// ([`exported_names`]) but for a name the crate gives a type of its own (`struct Tools`), and
/// the crate's imports, type aliases and implementors of them, to a fixed point.
fn executable_names(files: &[&FileFacts], exported: &[String]) -> Vec<String> {
    let mut names: Vec<String> = EXECUTABLE.iter().map(|&n| n.to_owned()).collect();
    let own = |name: &&String| files.iter().any(|f| f.types.contains(name));
    names.extend(exported.iter().filter(|n| !own(n)).cloned());
    loop {
        let before = names.len();
        for file in files {
            let imports = (file.imports.iter()).filter(|(_, last)| names.contains(last));
            let aliases =
                (file.aliases.iter()).filter(|(_, rhs)| rhs.iter().any(|n| names.contains(n)));
            let impls = (file.impls.iter()).filter(|(t, _)| names.contains(t));
            let new: Vec<String> = imports
                .map(|(name, _)| name)
                .chain(aliases.map(|(name, _)| name))
                .chain(impls.map(|(_, target)| target))
                .filter(|n| !names.contains(n))
                .cloned()
                .collect();
            for name in new {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        if names.len() == before {
            return names;
        }
    }
}

/// An `impl` block: its trait (last segment) if any, its type, and its body.
#[derive(Debug)]
pub(super) struct ImplBlock {
    /// The trait it implements (its last segment); `None` for an inherent `impl`.
    pub(super) trait_name: Option<String>,
    /// The type it is for.
    target: String,
    /// The line of its `impl`.
    line: usize,
    /// The index of the token that opens its body.
    pub(super) open: usize,
    /// The index of the token that closes its body.
    pub(super) close: usize,
}

/// Every `impl … {…}` of the file with a named type (`impl<T> Trait for Type<T>`; the type
/// inside a wrapper of [`WRAPPERS`] or a reference; none for a generic parameter).
pub(super) fn impl_blocks(tokens: &[Token]) -> Vec<ImplBlock> {
    let mut blocks = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if !is_keyword(token, "impl") {
            continue;
        }
        let (start, generics) = match tokens.get(i + 1) {
            Some(t) if t.text == "<" => {
                let close = closing_angle(tokens, i + 1);
                (close + 1, idents(&tokens[i + 2..close.min(tokens.len())]))
            }
            _ => (i + 1, Vec::new()),
        };
        // The header ends at the body's `{` or a `where`, outside `<…>`.
        let (mut k, mut depth, mut split) = (start, 0_usize, None);
        while let Some(t) = tokens.get(k) {
            match t.text.as_str() {
                "<" => depth += 1,
                ">" if k > 0 && tokens[k - 1].text != "-" => depth = depth.saturating_sub(1),
                "{" | ";" if depth == 0 => break,
                _ if depth == 0 && is_keyword(t, "where") => break,
                _ if depth == 0 && is_keyword(t, "for") => split = Some(k),
                _ => {}
            }
            k += 1;
        }
        let Some(open) = tokens[k..]
            .iter()
            .position(|t| t.text == "{" || t.text == ";")
            .map(|p| k + p)
        else {
            continue;
        };
        if tokens[open].text != "{" {
            continue;
        }
        let (trait_part, type_part) = match split {
            Some(f) => (Some(&tokens[start..f]), &tokens[f + 1..k]),
            None => (None, &tokens[start..k]),
        };
        let Some(target) = type_name(type_part).filter(|n| !generics.contains(n)) else {
            continue;
        };
        blocks.push(ImplBlock {
            trait_name: trait_part.and_then(head_name),
            target,
            line: token.line,
            open,
            close: closing(tokens, open),
        });
    }
    blocks
}

/// The name a type is known by: the last segment before its first `<` (`a::B<C>` is `B`), or
/// for a wrapper of [`WRAPPERS`], what it wraps (`Arc<T>` is `T`); `&` and `dyn` are skipped.
fn type_name(tokens: &[Token]) -> Option<String> {
    let name = head_name(tokens)?;
    if WRAPPERS.contains(&name.as_str()) {
        let open = tokens.iter().position(|t| t.text == "<")?;
        return type_name(&tokens[open + 1..closing_angle(tokens, open).min(tokens.len())]);
    }
    Some(name)
}

/// The last identifier before the first `<` (`fmt::Debug` is `Debug`), skipping keywords.
fn head_name(tokens: &[Token]) -> Option<String> {
    tokens
        .iter()
        .take_while(|t| t.text != "<")
        .filter(|t| is_ident(&t.text) && !["dyn", "mut", "const"].iter().any(|k| is_keyword(t, k)))
        .last()
        .map(|t| t.text.clone())
}

/// Whether the `fn` at `i` is a bare `pub` one (`pub const unsafe extern "C" fn`), not
/// `pub(crate)` or private.
fn exported_fn(tokens: &[Token], i: usize) -> bool {
    let mut k = i;
    while k > 0 {
        k -= 1;
        let token = &tokens[k];
        if ["const", "async", "unsafe", "extern"]
            .iter()
            .any(|q| is_keyword(token, q))
            || token.text == "\""
        {
            continue;
        }
        return is_keyword(token, "pub");
    }
    false
}

/// The item of the exported `fn` at `i`, whose `Self` is the type of the innermost `impl`
/// around it.
fn function(tokens: &[Token], i: usize, impls: &[ImplBlock]) -> Item {
    let at = name_at(tokens, i + 1);
    let name = &tokens[at];
    let mut open = at + 1;
    if tokens.get(open).is_some_and(|t| t.text == "<") {
        open = closing_angle(tokens, open) + 1;
    }
    let close = closing(tokens, open).min(tokens.len());
    let handed = tokens
        .get(open + 1)
        .is_some_and(|t| tokens[open].text == "(" && t.text != ")");
    let arrow = tokens.get(close + 1).is_some_and(|t| t.text == "-")
        && tokens.get(close + 2).is_some_and(|t| t.text == ">");
    // The parameters, up to the first `,` outside `<…>` and brackets: `self`, `&self`,
    // `&'a mut self`, `self: Arc<Self>` and nothing else is a receiver only.
    let params = &tokens[(open + 1).min(close)..close];
    let receiver_only = handed && {
        let (mut depth, mut first) = (0_usize, params.len());
        for (k, t) in params.iter().enumerate() {
            match t.text.as_str() {
                "<" | "(" | "[" => depth += 1,
                ">" if k == 0 || params[k - 1].text != "-" => depth = depth.saturating_sub(1),
                ")" | "]" => depth = depth.saturating_sub(1),
                "," if depth == 0 => {
                    first = k;
                    break;
                }
                _ => {}
            }
        }
        let rest_empty = params.get(first + 1..).is_none_or(<[Token]>::is_empty);
        (params[..first].iter()).any(|t| is_keyword(t, "self")) && rest_empty
    };
    let mut names = Vec::new();
    let mut returns_self = None;
    if arrow {
        let end = tokens[close + 3..]
            .iter()
            .position(|t| matches!(t.text.as_str(), "{" | ";") || is_keyword(t, "where"))
            .map_or(tokens.len(), |p| close + 3 + p);
        let itself = impls
            .iter()
            .filter(|b| b.open < i && i < b.close)
            .max_by_key(|b| b.open);
        for ident in idents(&tokens[close + 3..end]) {
            match itself {
                Some(block) if ident == "Self" => {
                    names.push(block.target.clone());
                    returns_self = Some(block.target.clone());
                }
                _ => names.push(ident),
            }
        }
    }
    Item {
        line: name.line,
        what: format!("`pub fn {}`", spelled(tokens, at)),
        handed,
        receiver_only,
        returns_self,
        names,
        made_by: None,
    }
}

/// The item of `pub static NAME: T = …;` or `pub const NAME: T = …;` at `i` (not a
/// `pub const fn`).
fn static_item(tokens: &[Token], i: usize) -> Option<Item> {
    let kind = &tokens[i + 1].text;
    let mut k = i + 2;
    if is_keyword_at(tokens, k, "mut") {
        k += 1;
    }
    k = name_at(tokens, k);
    let name = tokens
        .get(k)
        .filter(|t| is_ident(&t.text) && !is_keyword(t, "fn"))?;
    let colon = k + 1;
    if tokens.get(colon)?.text != ":" {
        return None;
    }
    let end = tokens[colon..]
        .iter()
        .position(|t| matches!(t.text.as_str(), "=" | ";"))
        .map_or(tokens.len(), |p| colon + p);
    Some(Item {
        line: name.line,
        what: format!("`pub {kind} {}`", spelled(tokens, k)),
        handed: false,
        receiver_only: false,
        returns_self: None,
        names: idents(&tokens[colon + 1..end]),
        made_by: None,
    })
}

/// The name of the `struct`, `enum` or `union` that the attribute closing at `close` is on.
fn derived_type(tokens: &[Token], close: usize) -> Option<String> {
    let keyword = tokens[close..]
        .iter()
        .position(|t| {
            ["struct", "enum", "union", "fn", "impl"]
                .iter()
                .any(|k| is_keyword(t, k))
        })
        .map(|p| close + p)?;
    let item = &tokens[keyword];
    (!is_keyword(item, "fn") && !is_keyword(item, "impl"))
        .then(|| tokens.get(keyword + 1))
        .flatten()
        .filter(|t| is_ident(&t.text))
        .map(|t| t.text.clone())
}

/// The identifiers among `tokens`, a macro variable as [`MACRO_SEGMENT`].
fn idents(tokens: &[Token]) -> Vec<String> {
    (0..tokens.len())
        .filter(|&k| is_ident(&tokens[k].text))
        .map(|k| segment_at(tokens, k).to_owned())
        .collect()
}

/// The name at `tokens[k]` as written: `$n` for a macro variable.
fn spelled(tokens: &[Token], k: usize) -> String {
    let name = &tokens[k].text;
    if segment_at(tokens, k) == MACRO_SEGMENT {
        format!("${name}")
    } else {
        name.clone()
    }
}

/// Whether `tokens[k]` is the keyword `word`.
fn is_keyword_at(tokens: &[Token], k: usize, word: &str) -> bool {
    tokens.get(k).is_some_and(|t| is_keyword(t, word))
}

/// The index of the first `text` token at or after `from`.
fn find(tokens: &[Token], from: usize, text: &str) -> Option<usize> {
    (tokens.get(from..)?.iter())
        .position(|t| t.text == text)
        .map(|p| from + p)
}
