//! Every unit of the library stays one a reader can follow: no source file under
//! `crates/pageio/src` over [`FILE_LINES_MAX`] lines and no function outside test code over
//! [`FN_LINES_MAX`] lines, counted from its `fn` line to its closing brace. A unit may be
//! larger when the line above it (above its doc comment and attributes; for a file, its
//! first line) is a one-line comment `// size: <why it cannot be split>`.
//!
//! The test parses the sources with `syn` (span locations on), so braces in strings,
//! characters and comments never miscount; it lists every offender with file:line and length.

mod source_tree;

use source_tree::{is_test_only, library_sources, SourceFile};
use syn::visit::Visit;

/// The most lines a library source file may have.
const FILE_LINES_MAX: usize = 1_200;

/// The most lines a non-test function may have, from its `fn` line to its closing brace.
const FN_LINES_MAX: usize = 120;

/// The comment that, on the line above a unit, says why it is larger than the limit.
const SIZE_REASON: &str = "// size:";

/// One unit over its limit.
#[derive(Debug, PartialEq)]
struct Offender {
    /// `path:line` of the unit.
    at: String,
    /// What the unit is (`file`, `fn plan`).
    what: String,
    /// Its length in lines.
    lines: usize,
    /// The limit it is over.
    limit: usize,
}

impl std::fmt::Display for Offender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} is {} lines (limit {})",
            self.at, self.what, self.lines, self.limit
        )
    }
}

/// The offenders of one file: itself, then its non-test functions in source order.
fn offenders_in(file: &SourceFile) -> Vec<Offender> {
    let mut offenders = Vec::new();
    let file_lines = file.text.lines().count();
    if file_lines > FILE_LINES_MAX && !file.line(1).trim_start().starts_with(SIZE_REASON) {
        offenders.push(Offender {
            at: format!("{}:1", file.relative),
            what: "file".to_string(),
            lines: file_lines,
            limit: FILE_LINES_MAX,
        });
    }
    if !file.is_test_file {
        let mut visitor = FunctionSizes {
            file,
            offenders: &mut offenders,
        };
        visitor.visit_file(&file.syntax);
    }
    offenders
}

/// Walks a file's items, skipping test code, and records every function over the limit.
struct FunctionSizes<'a> {
    file: &'a SourceFile,
    offenders: &'a mut Vec<Offender>,
}

impl FunctionSizes<'_> {
    fn check(
        &mut self,
        attrs: &[syn::Attribute],
        fn_token: &syn::token::Fn,
        name: &syn::Ident,
        body: &syn::Block,
    ) {
        let fn_line = fn_token.span.start().line;
        let close_line = body.brace_token.span.close().start().line;
        let lines = close_line + 1 - fn_line;
        if lines <= FN_LINES_MAX {
            return;
        }
        let item_line = attrs
            .iter()
            .map(|attr| attr.pound_token.span.start().line)
            .chain(std::iter::once(fn_line))
            .min()
            .unwrap_or(fn_line);
        if self
            .file
            .line(item_line - 1)
            .trim_start()
            .starts_with(SIZE_REASON)
        {
            return;
        }
        self.offenders.push(Offender {
            at: format!("{}:{fn_line}", self.file.relative),
            what: format!("fn {name}"),
            lines,
            limit: FN_LINES_MAX,
        });
    }
}

impl<'ast> Visit<'ast> for FunctionSizes<'_> {
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if is_test_only(&item.attrs) {
            return;
        }
        self.check(
            &item.attrs,
            &item.sig.fn_token,
            &item.sig.ident,
            &item.block,
        );
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if is_test_only(&item.attrs) {
            return;
        }
        self.check(
            &item.attrs,
            &item.sig.fn_token,
            &item.sig.ident,
            &item.block,
        );
        syn::visit::visit_impl_item_fn(self, item);
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if is_test_only(&item.attrs) {
            return;
        }
        if let Some(body) = &item.default {
            self.check(&item.attrs, &item.sig.fn_token, &item.sig.ident, body);
        }
        syn::visit::visit_trait_item_fn(self, item);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_test_only(&item.attrs) {
            syn::visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if !is_test_only(&item.attrs) {
            syn::visit::visit_item_impl(self, item);
        }
    }
}

#[test]
fn no_library_file_or_function_is_over_its_size_limit() {
    let files = library_sources();
    let offenders: Vec<String> = files
        .iter()
        .flat_map(offenders_in)
        .map(|offender| offender.to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "{} unit(s) over their size limit; split them into named steps, or put a one-line \
         `{SIZE_REASON} <reason>` comment on the line above:\n{}",
        offenders.len(),
        offenders.join("\n")
    );
}

/// The checker itself on a known file: it finds the long function and the long file with
/// their lines, skips test code and units with a reason, and counts braces inside strings,
/// characters and comments as text.
#[test]
fn the_size_check_finds_long_units_and_honours_reasons_and_tests() {
    let long_body = |name: &str| {
        let mut body = format!("fn {name}() {{\n");
        for n in 0..FN_LINES_MAX - 1 {
            body.push_str(&format!("    let _x{n} = \"}}\"; // {{\n"));
        }
        body.push_str("}\n");
        body
    };
    let fits = long_body("fits").replacen("    let _x0 = \"}\"; // {\n", "", 1);
    let text = format!(
        "//! A module.\n\n/// Too long.\n#[inline]\n{}\n{}\n// size: one table, read top to bottom\n{}\n#[cfg(test)]\nmod tests {{\n{}}}\n#[test]\n{}",
        long_body("too_long"),
        fits,
        long_body("with_reason"),
        long_body("in_tests"),
        long_body("a_test"),
    ) + &"// filler\n".repeat(FILE_LINES_MAX);
    let file = SourceFile {
        relative: "m.rs".to_string(),
        syntax: syn::parse_file(&text).expect("the sample parses"),
        text: text.clone(),
        is_test_file: false,
    };
    let total_lines = text.lines().count();
    assert!(
        total_lines > FILE_LINES_MAX,
        "the sample is {total_lines} lines"
    );
    assert_eq!(
        offenders_in(&file),
        vec![
            Offender {
                at: "m.rs:1".to_string(),
                what: "file".to_string(),
                lines: total_lines,
                limit: FILE_LINES_MAX,
            },
            Offender {
                at: "m.rs:5".to_string(),
                what: "fn too_long".to_string(),
                lines: FN_LINES_MAX + 1,
                limit: FN_LINES_MAX,
            },
        ]
    );
    assert_eq!(
        offenders_in(&file)[1].to_string(),
        format!(
            "m.rs:5: fn too_long is {} lines (limit 120)",
            FN_LINES_MAX + 1
        )
    );
    let reasoned = SourceFile {
        text: format!("// size: a generated table\n{text}"),
        syntax: syn::parse_file(&text).expect("the sample parses"),
        relative: "m.rs".to_string(),
        is_test_file: true,
    };
    assert_eq!(offenders_in(&reasoned), vec![]);
}

#[test]
fn files_declared_by_a_test_module_are_test_code() {
    let files = library_sources();
    let visibility_tests = files
        .iter()
        .find(|f| f.relative == "visibility/tests.rs")
        .expect("visibility/tests.rs is a library source");
    assert!(visibility_tests.is_test_file);
    let lib = files
        .iter()
        .find(|f| f.relative == "lib.rs")
        .expect("lib.rs");
    assert!(!lib.is_test_file);
}
