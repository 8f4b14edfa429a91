//! The library speaks in settings and concepts, never in the command line's flags: no string
//! literal in its non-test code (messages, `#[error(...)]` texts, `format!` arguments) holds
//! a flag such as `--where` or `--io-method`. Errors carry kinds and fields instead, and the
//! command-line tool names its flags when it prints them, so another front end (an embedding
//! engine, a different CLI) gets messages that fit it.
//!
//! Strings that hold `--` followed by a letter without being one of our flags are listed in
//! [`NOT_OUR_FLAGS`] with the reason.

mod source_tree;

use source_tree::{is_test_only, library_sources, SourceFile};
use syn::visit::Visit;

/// String literals of non-test code that hold `--<letter>` without naming one of pageio's
/// flags: (file, a fragment of the literal, why it is not a flag of ours).
const NOT_OUR_FLAGS: &[(&str, &str, &str)] = &[
    (
        "host/pgbin.rs",
        "--configure",
        "pg_config's own option, passed to the program and named in where a fact came from",
    ),
    (
        "host/pgbin.rs",
        "--with-liburing",
        "a configure option in pg_config's output, which the code looks for",
    ),
    (
        "page/control.rs",
        "pg_checksums --enable",
        "pg_checksums' and initdb's options, for the cluster's own tools",
    ),
    (
        "advise/rules/instance.rs",
        "pg_checksums --enable",
        "pg_checksums' option, the fix for a cluster without checksums",
    ),
    (
        "advise/rules/io_uring.rs",
        "docker run --security-opt",
        "docker's option, the fix for a container whose seccomp profile refuses io_uring",
    ),
    (
        "advise/rules/io_uring.rs",
        "--with-liburing",
        "PostgreSQL's configure option, the build that io_method = io_uring needs",
    ),
    (
        "advise/rules/mod.rs",
        "--with-liburing",
        "PostgreSQL's configure option, named in the rule's source",
    ),
    (
        "advise/rules/storage.rs",
        "blockdev --setra",
        "blockdev's option, the fix for a device's read-ahead",
    ),
    (
        "advise/snippets.rs",
        "sysctl --system",
        "sysctl's option, how the written sysctl.d file is loaded",
    ),
];

/// One literal holding what looks like a flag.
#[derive(Debug, PartialEq)]
struct Finding {
    /// `path:line`.
    at: String,
    /// The literal as written.
    literal: String,
}

/// Whether a literal's text holds `--` followed by an ASCII lowercase letter.
fn holds_flag(text: &str) -> bool {
    text.as_bytes()
        .windows(3)
        .any(|w| w[0] == b'-' && w[1] == b'-' && w[2].is_ascii_lowercase())
}

/// Whether the allow-list excuses this literal of this file.
fn is_allowed(relative: &str, literal: &str) -> bool {
    NOT_OUR_FLAGS
        .iter()
        .any(|(file, fragment, _)| *file == relative && literal.contains(fragment))
}

/// Walks the non-test code of a file and records the literals that hold a flag.
struct Flags<'a> {
    file: &'a SourceFile,
    findings: Vec<Finding>,
}

impl Flags<'_> {
    fn check(&mut self, line: usize, literal: String) {
        if holds_flag(&literal) && !is_allowed(&self.file.relative, &literal) {
            self.findings.push(Finding {
                at: format!("{}:{line}", self.file.relative),
                literal,
            });
        }
    }

    fn check_tokens(&mut self, tokens: proc_macro2::TokenStream) {
        for tree in tokens {
            match tree {
                proc_macro2::TokenTree::Literal(literal) => {
                    self.check(literal.span().start().line, literal.to_string())
                }
                proc_macro2::TokenTree::Group(group) => self.check_tokens(group.stream()),
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for Flags<'_> {
    fn visit_lit_str(&mut self, literal: &'ast syn::LitStr) {
        self.check(literal.span().start().line, literal.value());
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.check_tokens(mac.tokens.clone());
    }

    /// Doc comments and other attributes are documentation, not messages; `#[error(...)]`
    /// is a message.
    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        if attr.path().is_ident("error") {
            if let syn::Meta::List(list) = &attr.meta {
                self.check_tokens(list.tokens.clone());
            }
        }
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if !is_test_only(&item.attrs) {
            syn::visit::visit_item_fn(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if !is_test_only(&item.attrs) {
            syn::visit::visit_impl_item_fn(self, item);
        }
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

fn findings_in(file: &SourceFile) -> Vec<Finding> {
    if file.is_test_file {
        return Vec::new();
    }
    let mut flags = Flags {
        file,
        findings: Vec::new(),
    };
    flags.visit_file(&file.syntax);
    flags.findings
}

#[test]
fn no_library_message_names_a_command_line_flag() {
    let findings: Vec<String> = library_sources()
        .iter()
        .flat_map(findings_in)
        .map(|f| format!("{}: {}", f.at, f.literal))
        .collect();
    assert!(
        findings.is_empty(),
        "{} library string(s) name a command-line flag; give the error a kind or field the \
         CLI turns into its flag, or (for another program's option) add it to NOT_OUR_FLAGS \
         with the reason:\n{}",
        findings.len(),
        findings.join("\n")
    );
}

#[test]
fn the_flag_check_reads_messages_and_skips_docs_tests_and_listed_strings() {
    let text = r#"
/// Use --kind seq (documentation).
#[derive(thiserror::Error, Debug)]
pub enum E {
    #[error("use --kind seq")]
    A,
}
fn f() -> String {
    let _sql = "-- a comment, then -1";
    let _configure = "--configure";
    format!("in --where {}", 1)
}
fn g() -> &'static str {
    "--io-method"
}
#[cfg(test)]
mod tests {
    fn h() -> &'static str { "--select" }
}
#[test]
fn t() { let _ = "--jobs"; }
"#;
    let file = |relative: &str| SourceFile {
        relative: relative.to_string(),
        syntax: syn::parse_file(text).expect("the sample parses"),
        text: text.to_string(),
        is_test_file: false,
    };
    let found = |relative: &str| {
        findings_in(&file(relative))
            .into_iter()
            .map(|f| f.at)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        found("m.rs"),
        vec!["m.rs:5", "m.rs:10", "m.rs:11", "m.rs:14"]
    );
    assert_eq!(
        found("host/pgbin.rs"),
        vec!["host/pgbin.rs:5", "host/pgbin.rs:11", "host/pgbin.rs:14"]
    );
    assert!(!holds_flag("-- SQL comment and -1"));
    assert!(holds_flag("\"--x\""));
}
