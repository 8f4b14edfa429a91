//! The library's own sources, parsed, for the tests that hold their shape
//! (`unit_sizes.rs`, `library_messages.rs`): every `.rs` file under `crates/pageio/src`, with
//! its text, its syntax tree and whether it is test code as a whole (a file a
//! `#[cfg(test)] mod name;` declaration pulls in).
#![allow(dead_code)] // each test file uses its own subset

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One source file of the library.
pub struct SourceFile {
    /// The path below `crates/pageio/src`, with `/` separators (`scan/query.rs`).
    pub relative: String,
    /// The file's text.
    pub text: String,
    /// The parsed file.
    pub syntax: syn::File,
    /// Whether the whole file is test code (declared by `#[cfg(test)] mod name;`).
    pub is_test_file: bool,
}

impl SourceFile {
    /// The text of line `line` (1-based), or "" past the end.
    pub fn line(&self, line: usize) -> &str {
        line.checked_sub(1)
            .and_then(|index| self.text.lines().nth(index))
            .unwrap_or("")
    }
}

/// The library's source directory.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under the library's source directory, sorted by path, parsed.
pub fn library_sources() -> Vec<SourceFile> {
    let root = source_dir();
    let mut paths = Vec::new();
    collect_rs_files(&root, &mut paths);
    paths.sort();
    let mut files: Vec<SourceFile> = paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            let syntax = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()));
            let relative = path
                .strip_prefix(&root)
                .expect("collected below the root")
                .to_string_lossy()
                .replace('\\', "/");
            SourceFile {
                relative,
                text,
                syntax,
                is_test_file: false,
            }
        })
        .collect();
    let mut test_files = BTreeSet::new();
    for file in &files {
        for item in &file.syntax.items {
            if let syn::Item::Mod(module) = item {
                if module.content.is_none() && is_test_only(&module.attrs) {
                    for candidate in child_module_paths(&file.relative, &module.ident.to_string()) {
                        test_files.insert(candidate);
                    }
                }
            }
        }
    }
    for file in &mut files {
        file.is_test_file = test_files.contains(&file.relative);
    }
    assert!(
        files.iter().any(|f| f.relative == "lib.rs"),
        "no lib.rs under {}: the source tree moved; point source_dir at it",
        root.display()
    );
    files
}

fn collect_rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            collect_rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Where `mod name;` in `parent` (a path below src) finds its file: `dir/name.rs` or
/// `dir/name/mod.rs`, where `dir` is the parent's directory for `lib.rs` and `mod.rs`, and
/// the parent's path without `.rs` otherwise (`config.rs` → `config/name.rs`).
fn child_module_paths(parent: &str, name: &str) -> [String; 2] {
    let (dir, file) = parent.rsplit_once('/').unwrap_or(("", parent));
    let base = if file == "mod.rs" || file == "lib.rs" {
        dir.to_string()
    } else {
        let stem = parent.strip_suffix(".rs").unwrap_or(parent);
        stem.to_string()
    };
    let prefix = if base.is_empty() {
        String::new()
    } else {
        format!("{base}/")
    };
    [
        format!("{prefix}{name}.rs"),
        format!("{prefix}{name}/mod.rs"),
    ]
}

/// Whether attributes make an item test-only: `#[test]`, or a `#[cfg(...)]` that names
/// `test` outside a `not(...)`.
pub fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        if attr.path().is_ident("test") {
            return true;
        }
        if !attr.path().is_ident("cfg") {
            return false;
        }
        match &attr.meta {
            syn::Meta::List(list) => cfg_requires_test(list.tokens.clone()),
            _ => false,
        }
    })
}

/// Whether a cfg predicate holds only under `test`: `test`, `all(.., test, ..)`; `not(..)`
/// and `any(..)` never make an item test-only here.
fn cfg_requires_test(tokens: proc_macro2::TokenStream) -> bool {
    let mut trees = tokens.into_iter().peekable();
    while let Some(tree) = trees.next() {
        if let proc_macro2::TokenTree::Ident(ident) = &tree {
            let group = match trees.peek() {
                Some(proc_macro2::TokenTree::Group(group)) => Some(group.stream()),
                _ => None,
            };
            match (ident.to_string().as_str(), group) {
                ("test", None) => return true,
                ("all", Some(inner)) => {
                    trees.next();
                    if cfg_requires_test(inner) {
                        return true;
                    }
                }
                (_, Some(_)) => {
                    trees.next();
                }
                _ => {}
            }
        }
    }
    false
}
