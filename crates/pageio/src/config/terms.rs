//! # What the library's messages call the caller's inputs
//!
//! An error often tells the user what to give instead: a sequential scan rather than an
//! index scan, fewer threads, another io_method, a data directory. The library knows these
//! as concepts — the WHERE condition, the select list, the thread count — while a front end
//! knows them by its own names: the `pageio` command by flags (`--where`, `--jobs`), an
//! engine embedding the library by its API. So a message never spells such an input itself:
//! it formats a [`Term`], and a [`Term`] prints as the front end spells it.
//!
//! ```text
//!   library:  format!("in {} \"{text}\": ...", Term::Where)
//!   default:  in WHERE "a = 1 or": ...          (the concept, for any caller)
//!   pageio:   in --where "a = 1 or": ...        (after set_term_spelling(flags))
//! ```
//!
//! The front end installs its spelling once, before the first message is made
//! ([`set_term_spelling`]); until then, and in every process that never installs one, terms
//! print as [`Term::concept`] says.

use std::fmt;
use std::sync::OnceLock;

/// An input of the caller that a message names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Term {
    /// The condition a table scan filters on (`a between 1 and 5`).
    Where,
    /// The list of aggregates a table scan computes (`count(*), sum(a)`).
    Select,
    /// Choosing a sequential scan instead of a bitmap or index scan.
    SeqScan,
    /// Choosing the index of a bitmap or index scan by its name.
    IndexByName,
    /// The number of threads a verify or checksum run uses.
    Jobs,
    /// A setting of [`crate::config::SETTING_NAMES`], by its PostgreSQL name (`io_method`).
    Setting(&'static str),
    /// Running the enabling of data checksums (again).
    EnableChecksums,
    /// Reading relation files as part of their cluster's data directory.
    DataDirectory,
    /// Advice for a cluster given by its data directory (read-only).
    AdviseDataDirectory,
    /// The directory a data set is written into.
    OutputDirectory,
    /// Checking the checksums of a running cluster (online), instead of a stopped one.
    OnlineCheck,
}

impl Term {
    /// The term as the library says it to any caller: the concept, in words.
    pub fn concept(self) -> &'static str {
        match self {
            Term::Where => "WHERE",
            Term::Select => "SELECT",
            Term::SeqScan => "a sequential scan",
            Term::IndexByName => "an index by name",
            Term::Jobs => "a thread count of",
            Term::Setting(name) => name,
            Term::EnableChecksums => "the enabling of checksums",
            Term::DataDirectory => "the data directory",
            Term::AdviseDataDirectory => "advice for the data directory",
            Term::OutputDirectory => "output",
            Term::OnlineCheck => "the online check",
        }
    }
}

/// How a front end spells a [`Term`].
pub type TermSpelling = fn(Term) -> String;

static SPELLING: OnceLock<TermSpelling> = OnceLock::new();

/// Installs the front end's spelling of terms for the rest of the process. Only the first
/// call counts (a process has one front end); returns whether this call installed it.
pub fn set_term_spelling(spelling: TermSpelling) -> bool {
    SPELLING.set(spelling).is_ok()
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match SPELLING.get() {
            Some(spelling) => f.write_str(&spelling(*self)),
            None => f.write_str(self.concept()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_print_as_concepts_without_a_front_end() {
        // The library's own tests never install a spelling.
        assert_eq!(format!("use {}", Term::SeqScan), "use a sequential scan");
        assert_eq!(
            format!("in {} \"a = 1\"", Term::Where),
            "in WHERE \"a = 1\""
        );
        assert_eq!(Term::Setting("io_method").to_string(), "io_method");
    }
}
