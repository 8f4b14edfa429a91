//! Every relative link in the README and under `docs/` leads somewhere: the file (or
//! directory) exists, and a `#anchor` names a heading of the Markdown file it points into,
//! spelled as GitHub spells heading anchors. The README links to one page per command.
//!
//! Links to other sites (`https:`, `mailto:`) are not followed: the suite needs nothing
//! outside the clone.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// The repository's root (two levels above this crate).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root exists")
}

/// A Markdown file's links (destinations as written) and its headings' anchors.
struct Document {
    links: Vec<String>,
    anchors: HashSet<String>,
}

/// Reads `text` as GitHub renders it (tables on): the links and images, and the anchor of
/// every heading. Links inside code spans and code blocks are text, not links.
fn parse(text: &str) -> Document {
    let mut links = Vec::new();
    let mut anchors = HashSet::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(text, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                links.push(dest_url.to_string());
            }
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(h) = heading.take() {
                    let base = slug(&h);
                    let mut anchor = base.clone();
                    let mut n = 0;
                    while !anchors.insert(anchor.clone()) {
                        n += 1;
                        anchor = format!("{base}-{n}");
                    }
                }
            }
            _ => {}
        }
    }
    Document { links, anchors }
}

/// GitHub's anchor for a heading's text: lower case, every character that is not a letter,
/// a digit, a space, `-` or `_` dropped, spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// True for a link to another site or scheme (`https://…`, `mailto:…`), which is not checked.
fn is_external(dest: &str) -> bool {
    match dest.find(':') {
        Some(colon) => !dest[..colon].contains(['/', '#']),
        None => false,
    }
}

/// The Markdown files under `root` the test reads: `README.md` and every `.md` under `docs/`.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Every broken relative link in `files`, one line each naming the file, the link and what
/// is wrong; and how many relative links were checked.
fn broken_links(root: &Path, files: &[PathBuf]) -> (Vec<String>, usize) {
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in files {
        let name = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) => {
                problems.push(format!("{name}: cannot be read: {e}"));
                continue;
            }
        };
        for dest in parse(&text).links {
            if dest.is_empty() || is_external(&dest) {
                continue;
            }
            checked += 1;
            let (path, anchor) = match dest.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (dest.as_str(), None),
            };
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap_or(root).join(path)
            };
            if !target.exists() {
                problems.push(format!(
                    "{name}: link `{dest}`: {} does not exist; fix the link or add the file",
                    target.strip_prefix(root).unwrap_or(&target).display()
                ));
                continue;
            }
            let Some(anchor) = anchor.filter(|a| !a.is_empty()) else {
                continue;
            };
            if target.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let anchors = std::fs::read_to_string(&target)
                .map(|t| parse(&t).anchors)
                .unwrap_or_default();
            if !anchors.contains(anchor) {
                let mut known: Vec<&String> = anchors.iter().collect();
                known.sort();
                problems.push(format!(
                    "{name}: link `{dest}`: no heading of {} has the anchor `{anchor}`; fix the link or the heading (its anchors: {known:?})",
                    target.strip_prefix(root).unwrap_or(&target).display()
                ));
            }
        }
    }
    (problems, checked)
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let root = repo_root();
    let files = markdown_files(&root);
    let (problems, checked) = broken_links(&root, &files);
    assert!(
        problems.is_empty(),
        "{} broken link(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
    // The README alone links to a page per command: far more than this.
    assert!(checked >= 20, "only {checked} relative links found");
}

#[test]
fn the_readme_links_to_a_page_per_command() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let links: HashSet<String> = parse(&readme).links.into_iter().collect();
    for page in [
        "SCAN",
        "VERIFY",
        "CHECKSUMS",
        "TABLES",
        "ADVISE",
        "AIOS",
        "BENCH",
        "GEN",
        "IO-BENCH",
    ] {
        let link = format!("docs/{page}.md");
        assert!(links.contains(&link), "README.md does not link to {link}");
        assert!(root.join(&link).is_file(), "{link} is missing");
    }
}

#[test]
fn anchors_are_spelled_as_github_spells_them() {
    assert_eq!(
        slug("Publishing for `pageio aios` (`aio_publish` on vs off)"),
        "publishing-for-pageio-aios-aio_publish-on-vs-off"
    );
    assert_eq!(
        slug("A running PostgreSQL 18 (`--dsn`)"),
        "a-running-postgresql-18---dsn"
    );
    assert_eq!(slug("Exit status"), "exit-status");
    let doc = parse("# Exit status\n\n## Exit status\n\ntext `[x](nowhere.md)`\n");
    assert!(doc.anchors.contains("exit-status") && doc.anchors.contains("exit-status-1"));
    assert!(doc.links.is_empty(), "a link in a code span is text");
}

#[test]
fn a_missing_file_and_a_missing_anchor_are_reported() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path();
    std::fs::create_dir(root.join("docs")).unwrap();
    std::fs::write(
        root.join("README.md"),
        "[ok](docs/A.md#usage) [gone](docs/B.md) [anchor](docs/A.md#nowhere) \
         [self](#readme) [web](https://example.org/x.md)\n\n# README\n",
    )
    .unwrap();
    std::fs::write(root.join("docs/A.md"), "# A\n\n## Usage\n").unwrap();
    let files = markdown_files(root);
    let (problems, checked) = broken_links(root, &files);
    assert_eq!(checked, 4, "the https link is not checked");
    assert_eq!(
        problems,
        vec![
            "README.md: link `docs/B.md`: docs/B.md does not exist; fix the link or add the file"
                .to_string(),
            "README.md: link `docs/A.md#nowhere`: no heading of docs/A.md has the anchor `nowhere`; fix the link or the heading (its anchors: [\"a\", \"usage\"])"
                .to_string(),
        ]
    );
}
