//! The library's layers, held by a test: no module imports one that imports it back.
//!
//! Every top-level module of `crates/pageio/src` has a rank in [`RANKS`]. A module may refer
//! to modules of a *lower* rank only; a reference to a module of the same rank (a sibling) or
//! of a higher rank fails the test with the file, the line and the rule broken. With every
//! edge pointing strictly down, the module graph cannot hold a cycle.
//!
//! What counts as a reference: every `crate::<module>` path in code — `use` lines, grouped
//! `use crate::{a, b::{c, d}}` forms, inline paths such as `crate::scan::foo(...)` — and the
//! crate root's re-exports (`crate::Aio` is `aio`'s, read from `lib.rs`'s `pub use` lines). A
//! `super::` chain that climbs out of the module's own tree to the crate root counts too.
//!
//! What does not count:
//!
//! * comments, doc comments included: an intra-doc link such as ``[`crate::stream`]`` in a
//!   header comment points a reader at another layer without compiling against it;
//! * string literals;
//! * test code: an inline `#[cfg(test)] mod … { … }` and a file declared by
//!   `#[cfg(test)] mod …;`. Tests build their fixtures with whatever layer makes them
//!   shortest (a visibility test may write pages with `gen`'s builder) and are not part of
//!   the library a caller links, so they cannot close a cycle in it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// The rank of every top-level module of the library, lowest first, with the reason for its
/// place. A module may use only modules of a lower rank.
const RANKS: &[(&str, u32, &str)] = &[
    (
        "storage",
        0,
        "files and bytes: relations to 1 GB segments, the fd cache, direct-I/O alignment, \
         small-file reads, the one memory-mapping type, the page cache; knows no page format",
    ),
    (
        "sql",
        0,
        "PostgreSQL's lexer rules for names and literals: pure text, no other module",
    ),
    (
        "page",
        1,
        "PostgreSQL's on-disk formats: pages, tuples, varlena and its decompression, btree \
         pages, checksums, pg_control and CRC-32C, float8 ordering; reads pg_control through \
         storage's small-file reader, so it sits just above storage",
    ),
    (
        "config",
        2,
        "the settings under PostgreSQL's names; reads its file through storage's small-file \
         reader",
    ),
    (
        "aio",
        3,
        "handles, batching, the io_methods, the in-flight view, the I/O pipeline and the \
         write stream built on it: over storage and config, no pages, no buffers",
    ),
    (
        "buffer",
        4,
        "the shared buffer pool: I/O through aio, pages verified with page; flushes dirty \
         buffers through aio's write stream",
    ),
    (
        "stream",
        5,
        "read streams over the buffer pool, and the read-ahead advice they give the kernel",
    ),
    (
        "visibility",
        6,
        "one visibility rule (pg_xact, pg_multixact, hint bits) for the catalog and the scans",
    ),
    (
        "catalog",
        7,
        "a stopped cluster's catalog read through streams, deciding visibility with \
         visibility, detoasting with page's varlena",
    ),
    (
        "scan",
        8,
        "table and index scans: the catalog names the relations, streams read them",
    ),
    (
        "verify",
        8,
        "pg_checksums: a sibling of scan, neither uses the other",
    ),
    (
        "gen",
        8,
        "the benchmark data sets: writes pages through aio; a sibling of scan and verify",
    ),
    (
        "host",
        8,
        "facts of the machine read through a sysroot; a sibling of the engine's users",
    ),
    (
        "measure",
        9,
        "measures a cluster's device and the engine on it: uses verify's cluster walk",
    ),
    (
        "advise",
        10,
        "advice from host's facts and measure's numbers: the top, nothing uses it",
    ),
];

/// One reference that breaks the layering.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Violation {
    /// The file, relative to `src`.
    file: String,
    /// 1-based line.
    line: usize,
    /// The module the file belongs to.
    from: String,
    /// The module it refers to.
    to: String,
    /// What breaks the rule.
    rule: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "src/{}:{}: `{}` refers to `crate::{}`: {}",
            self.file, self.line, self.from, self.to, self.rule
        )
    }
}

/// One reference to another top-level module found in code.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reference {
    /// 1-based line.
    line: usize,
    /// The first path segment after `crate::` (a module, or a root re-export).
    target: String,
}

/// Replaces comments and the contents of string and character literals by spaces, keeping
/// newlines, so that what remains is code with its line numbers intact.
fn strip_comments_and_strings(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            // Block comments nest in Rust.
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !ends_in_identifier(&chars[..i])
        {
            // A raw string r"…" or r#"…"# (or an identifier such as `r#type`).
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.push('r');
            for _ in 0..hashes {
                out.push('#');
            }
            out.push('"');
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                    out.push('"');
                    for _ in 0..hashes {
                        out.push('#');
                    }
                    j += 1 + hashes;
                    break;
                }
                out.push(blank(chars[j]));
                j += 1;
            }
            i = j;
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    out.push(' ');
                    out.push(blank(chars[i + 1]));
                    i += 2;
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\'', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                // Skip the escaped character itself when it is a quote: '\''.
                if j == i + 2 {
                    j = i + 3;
                    while j < chars.len() && chars[j] != '\'' {
                        j += 1;
                    }
                }
                out.push_str("' '");
                for _ in i + 3..=j.min(chars.len() - 1) {
                    out.push(' ');
                }
                i = j + 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                out.push_str("' '");
                i += 3;
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether the code before a `r` ends in an identifier, so that the `r` is part of it (as in
/// `for"` … or `bar#`); a lone `b` is a byte-string prefix (`br"…"`), not an identifier.
fn ends_in_identifier(before: &[char]) -> bool {
    let ident = |c: &char| c.is_alphanumeric() || *c == '_';
    match before {
        [.., p, 'b'] if !ident(p) => false,
        ['b'] => false,
        [.., last] => ident(last),
        [] => false,
    }
}

/// A token of stripped code: an identifier (or keyword), or one punctuation character.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    text: String,
    line: usize,
}

fn tokenize(code: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut line = 1;
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token {
                text: chars[start..i].iter().collect(),
                line,
            });
        } else {
            tokens.push(Token {
                text: c.to_string(),
                line,
            });
            i += 1;
        }
    }
    tokens
}

fn is_ident(text: &str) -> bool {
    text.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// What one file of the library holds: its references to top-level modules (outside test
/// code), and the files it declares as test modules (`#[cfg(test)] mod name;`).
#[derive(Debug, Default)]
struct Scanned {
    references: Vec<Reference>,
    test_module_files: Vec<String>,
}

/// Finds the references of one file's code. `depth` is the number of module levels between
/// the file and the crate root (`scan/mod.rs` is 1, `aio/method/uring.rs` is 3), so that a
/// `super::` chain climbing to the root is seen.
fn scan_source(source: &str, depth: usize) -> Scanned {
    let code = strip_comments_and_strings(source);
    let tokens = tokenize(&code);
    let mut scanned = Scanned::default();
    // Brace nesting, and for each open brace whether it opened an inline module.
    let mut braces: Vec<bool> = Vec::new();
    let mut i = 0;
    let is = |k: usize, s: &str| tokens.get(k).is_some_and(|t| t.text == s);
    let path_sep = |k: usize| is(k, ":") && is(k + 1, ":");
    while i < tokens.len() {
        // `#[cfg(test)]` before an item: skip the item.
        if is(i, "#")
            && is(i + 1, "[")
            && is(i + 2, "cfg")
            && is(i + 3, "(")
            && is(i + 4, "test")
            && is(i + 5, ")")
            && is(i + 6, "]")
        {
            let mut j = i + 7;
            // Further attributes and visibility before the item.
            while is(j, "#") {
                while j < tokens.len() && !is(j, "]") {
                    j += 1;
                }
                j += 1;
            }
            if is(j, "pub") {
                j += 1;
                if is(j, "(") {
                    while j < tokens.len() && !is(j, ")") {
                        j += 1;
                    }
                    j += 1;
                }
            }
            if is(j, "mod") && is(j + 2, ";") {
                scanned.test_module_files.push(tokens[j + 1].text.clone());
                i = j + 3;
                continue;
            }
            // Any other item: skip to the end of its body or its `;`.
            let mut level = 0usize;
            while j < tokens.len() {
                match tokens[j].text.as_str() {
                    "{" => level += 1,
                    "}" => {
                        level -= 1;
                        if level == 0 {
                            break;
                        }
                    }
                    ";" if level == 0 => break,
                    _ => {}
                }
                j += 1;
            }
            i = j + 1;
            continue;
        }
        match tokens[i].text.as_str() {
            "{" => {
                let opens_module = i >= 2 && is(i - 2, "mod") && is_ident(&tokens[i - 1].text);
                braces.push(opens_module);
                i += 1;
                continue;
            }
            "}" => {
                braces.pop();
                i += 1;
                continue;
            }
            _ => {}
        }
        // `crate::…`, not as part of a longer path such as `$crate::` or `foo::crate`.
        if is(i, "crate") && path_sep(i + 1) && !(i >= 1 && is(i - 1, "$")) {
            collect_path_heads(&tokens, i + 3, &mut scanned.references);
            i += 3;
            continue;
        }
        // A `super::` chain: count it, and when it reaches the root, read what follows.
        if is(i, "super") && path_sep(i + 1) && !(i >= 2 && path_sep(i - 2)) {
            let mut j = i;
            let mut climbs = 0;
            while is(j, "super") && path_sep(j + 1) {
                climbs += 1;
                j += 3;
            }
            let inline_modules = braces.iter().filter(|&&m| m).count();
            if climbs >= depth + inline_modules {
                collect_path_heads(&tokens, j, &mut scanned.references);
            }
            i = j;
            continue;
        }
        i += 1;
    }
    scanned
}

/// Reads the path (or brace group) starting at token `k`, right after `crate::`, and records
/// the first segment of each path it names.
fn collect_path_heads(tokens: &[Token], k: usize, out: &mut Vec<Reference>) {
    let Some(first) = tokens.get(k) else { return };
    if first.text == "{" {
        // `{a, b::{c, d}, e as f}`: the first segment of every top-level entry.
        let mut level = 0usize;
        let mut expect_head = true;
        let mut j = k;
        while j < tokens.len() {
            let t = &tokens[j];
            match t.text.as_str() {
                "{" => {
                    level += 1;
                    if level == 1 {
                        expect_head = true;
                    }
                }
                "}" => {
                    level -= 1;
                    if level == 0 {
                        return;
                    }
                }
                "," if level == 1 => expect_head = true,
                text if level == 1 && expect_head && is_ident(text) => {
                    if text != "self" {
                        out.push(Reference {
                            line: t.line,
                            target: text.to_string(),
                        });
                    }
                    expect_head = false;
                }
                _ => {}
            }
            j += 1;
        }
    } else if is_ident(&first.text) {
        out.push(Reference {
            line: first.line,
            target: first.text.clone(),
        });
    }
}

/// The names the crate root re-exports (`pub use aio::{Aio, Backend};` in `lib.rs`), each
/// mapped to the module it comes from.
fn root_reexports(lib_rs: &str) -> BTreeMap<String, String> {
    let code = strip_comments_and_strings(lib_rs);
    let tokens = tokenize(&code);
    let mut map = BTreeMap::new();
    let is = |k: usize, s: &str| tokens.get(k).is_some_and(|t| t.text == s);
    for i in 0..tokens.len() {
        if !(is(i, "pub") && is(i + 1, "use")) {
            continue;
        }
        let module = tokens[i + 2].text.clone();
        let mut j = i + 3;
        let mut names = Vec::new();
        let mut last_ident = None;
        while j < tokens.len() && !is(j, ";") {
            let t = &tokens[j].text;
            if is_ident(t) {
                last_ident = Some(t.clone());
            } else if t == "," || t == "}" {
                names.extend(last_ident.take());
            }
            j += 1;
        }
        names.extend(last_ident);
        for name in names {
            map.insert(name, module.clone());
        }
    }
    map
}

/// The modules `lib.rs` declares (`pub mod x;`, `mod x;`).
fn declared_modules(lib_rs: &str) -> BTreeSet<String> {
    let code = strip_comments_and_strings(lib_rs);
    let tokens = tokenize(&code);
    let mut set = BTreeSet::new();
    for i in 0..tokens.len() {
        if tokens[i].text == "mod"
            && tokens.get(i + 2).is_some_and(|t| t.text == ";")
            && tokens.get(i + 1).is_some_and(|t| is_ident(&t.text))
        {
            set.insert(tokens[i + 1].text.clone());
        }
    }
    set
}

/// Checks one file's references against the rank table. `file` is relative to `src`.
fn check_file(
    file: &str,
    source: &str,
    ranks: &BTreeMap<&str, u32>,
    reexports: &BTreeMap<String, String>,
) -> (Scanned, Vec<Violation>) {
    let components: Vec<&str> = file.split('/').collect();
    let module = components[0].trim_end_matches(".rs").to_string();
    // `scan/mod.rs` is at depth 1, `scan/query.rs` at 2, `sql.rs` at 1.
    let depth = match components.last() {
        Some(&"mod.rs") => components.len() - 1,
        _ => components.len(),
    };
    let scanned = scan_source(source, depth);
    let mut violations = Vec::new();
    let from_rank = ranks.get(module.as_str()).copied();
    for reference in &scanned.references {
        let target = reexports
            .get(&reference.target)
            .cloned()
            .unwrap_or_else(|| reference.target.clone());
        if target == module {
            continue;
        }
        let violation = |rule: String| Violation {
            file: file.to_string(),
            line: reference.line,
            from: module.clone(),
            to: reference.target.clone(),
            rule,
        };
        match (from_rank, ranks.get(target.as_str())) {
            (None, _) => violations.push(violation(format!(
                "module `{module}` has no rank: add it to RANKS with the reason for its place"
            ))),
            (_, None) => violations.push(violation(format!(
                "`{target}` is neither a ranked module nor a re-export of lib.rs: add it to RANKS"
            ))),
            (Some(from), Some(&to)) if to >= from => {
                let direction = if to == from { "sideways" } else { "up" };
                violations.push(violation(format!(
                    "points {direction}: `{module}` has rank {from}, `{target}` rank {to}; a module \
                     may use only lower ranks — move the item it needs down to a lower module, or \
                     the using code up"
                )));
            }
            _ => {}
        }
    }
    (scanned, violations)
}

fn rank_map() -> BTreeMap<&'static str, u32> {
    RANKS.iter().map(|&(m, r, _)| (m, r)).collect()
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, relative to `root`, sorted.
fn rust_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path.strip_prefix(root).expect("under src");
            out.push(relative.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The path of the file a `#[cfg(test)] mod name;` in `file` declares.
fn test_module_paths(file: &str, name: &str) -> [String; 2] {
    let dir = match file.rsplit_once('/') {
        Some((dir, "mod.rs")) => dir.to_string(),
        Some((dir, base)) => format!("{dir}/{}", base.trim_end_matches(".rs")),
        None => file.trim_end_matches(".rs").to_string(),
    };
    [format!("{dir}/{name}.rs"), format!("{dir}/{name}/mod.rs")]
}

#[test]
fn no_module_uses_one_of_the_same_or_a_higher_rank() {
    let src = src_dir();
    let lib_rs = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let ranks = rank_map();
    let declared = declared_modules(&lib_rs);
    let ranked: BTreeSet<String> = ranks.keys().map(|m| m.to_string()).collect();
    assert_eq!(
        declared, ranked,
        "the modules lib.rs declares and the modules RANKS ranks differ: give every module a \
         rank (with the reason), and drop the ranks of modules that are gone"
    );
    let reexports = root_reexports(&lib_rs);
    assert!(
        reexports.get("Aio").is_some_and(|m| m == "aio")
            && reexports.get("IoConfig").is_some_and(|m| m == "config"),
        "lib.rs's re-exports were not read: {reexports:?}"
    );

    let mut files = Vec::new();
    rust_files(&src, &src, &mut files);
    files.retain(|f| f != "lib.rs");
    let mut sources = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(src.join(file)).expect("read source");
        sources.insert(file.clone(), text);
    }
    // Files declared as test modules are test code.
    let mut test_files = BTreeSet::new();
    for (file, text) in &sources {
        for name in scan_source(text, 1).test_module_files {
            test_files.extend(test_module_paths(file, &name));
        }
    }
    let mut references = 0usize;
    let mut checked_files = 0usize;
    let mut modules_seen = BTreeSet::new();
    let mut violations = Vec::new();
    for (file, text) in &sources {
        if test_files.contains(file) {
            continue;
        }
        checked_files += 1;
        let (scanned, found) = check_file(file, text, &ranks, &reexports);
        references += scanned
            .references
            .iter()
            .filter(|r| {
                let target = reexports.get(&r.target).unwrap_or(&r.target);
                !file.starts_with(&format!("{target}/")) && *file != format!("{target}.rs")
            })
            .count();
        modules_seen.insert(file.split('/').next().unwrap().trim_end_matches(".rs"));
        violations.extend(found);
    }
    // Not vacuous: the walk saw the library and its cross-module references.
    assert!(
        checked_files >= 80,
        "only {checked_files} library files checked"
    );
    assert!(
        references >= 200,
        "only {references} references between modules found: is the parser still reading \
         `use crate::` lines?"
    );
    assert_eq!(
        modules_seen.len(),
        ranks.len(),
        "files of some ranked module were not checked: {modules_seen:?}"
    );
    assert!(
        !test_files.is_empty(),
        "no `#[cfg(test)] mod name;` file found: the exemption of test files is not working"
    );
    let report: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
    assert!(
        violations.is_empty(),
        "{} references break the layering:\n{}",
        violations.len(),
        report.join("\n")
    );
}

fn check_synthetic(file: &str, source: &str) -> Vec<String> {
    let lib_rs =
        "pub mod aio; pub use aio::{Aio, Backend};\npub use config::{IoConfig, IoMethodKind};";
    check_file(file, source, &rank_map(), &root_reexports(lib_rs))
        .1
        .iter()
        .map(|v| format!("{}:{} {}->{}", v.file, v.line, v.from, v.to))
        .collect()
}

#[test]
fn an_upward_use_line_is_caught_with_file_and_line() {
    let source = "use std::fmt;\nuse crate::storage::RelFile;\nuse crate::scan::Scan;\n";
    assert_eq!(
        check_synthetic("buffer/x.rs", source),
        ["buffer/x.rs:3 buffer->scan"]
    );
    let lib_rs = "pub use aio::{Aio, Backend};";
    let (_, violations) = check_file("buffer/x.rs", source, &rank_map(), &root_reexports(lib_rs));
    assert_eq!(
        violations[0].to_string(),
        "src/buffer/x.rs:3: `buffer` refers to `crate::scan`: points up: `buffer` has rank 4, \
         `scan` rank 8; a module may use only lower ranks — move the item it needs down to a \
         lower module, or the using code up"
    );
}

#[test]
fn grouped_and_nested_use_lines_are_read() {
    let source = "use crate::{\n    page::BLCKSZ,\n    stream::{ReadStream, StreamOptions},\n    aio,\n    self,\n};\n";
    assert_eq!(
        check_synthetic("buffer/mod.rs", source),
        ["buffer/mod.rs:3 buffer->stream"]
    );
}

#[test]
fn inline_paths_and_root_reexports_count() {
    let source =
        "fn f() {\n    let x = crate::verify::ControlFile::read(p);\n    let a: crate::Aio;\n}\n";
    assert_eq!(
        check_synthetic("storage/a.rs", source),
        [
            "storage/a.rs:2 storage->verify",
            "storage/a.rs:3 storage->Aio"
        ]
    );
}

#[test]
fn a_sibling_is_sideways_and_refused() {
    let source = "use crate::verify::walk_cluster;\n";
    assert_eq!(
        check_synthetic("scan/query.rs", source),
        ["scan/query.rs:1 scan->verify"]
    );
}

#[test]
fn a_super_chain_climbing_to_the_root_counts() {
    // page/heap.rs is two levels below the root: there `super::super::` is the root.
    let source = "use super::super::catalog::Relation;\nuse super::value::Value;\n";
    assert_eq!(
        check_synthetic("page/heap.rs", source),
        ["page/heap.rs:1 page->catalog"]
    );
    // Inside an inline module, one more level is needed to reach the root.
    let nested = "mod tests2 {\n    use super::super::Foo;\n}\n";
    assert!(check_synthetic("page/heap.rs", nested).is_empty());
}

#[test]
fn comments_strings_and_test_code_do_not_count() {
    let source = concat!(
        "//! See [`crate::scan`].\n",
        "/// Uses [`crate::advise::Report`].\n",
        "/* crate::measure::run /* nested */ crate::gen */\n",
        "const S: &str = \"crate::scan::x\";\n",
        "const R: &str = r#\"crate::scan::\"y\"\"#;\n",
        "const C: char = '\"'; fn f<'a>(x: &'a u8) {}\n",
        "#[cfg(test)]\nmod tests {\n    use crate::scan::Scan;\n    fn g() { let _ = crate::advise::x(); }\n}\n",
        "#[cfg(test)]\nmod more_tests;\n",
        "use crate::storage::RelFile;\n",
    );
    assert!(check_synthetic("page/x.rs", source).is_empty());
    let scanned = scan_source(source, 2);
    assert_eq!(scanned.test_module_files, ["more_tests"]);
    assert_eq!(
        scanned.references,
        [Reference {
            line: 14,
            target: "storage".into()
        }]
    );
}

#[test]
fn an_unranked_target_is_refused() {
    assert_eq!(
        check_synthetic("scan/a.rs", "use crate::newthing::X;\n"),
        ["scan/a.rs:1 scan->newthing"]
    );
}
