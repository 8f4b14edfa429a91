//! `pageio advise`'s text report: the advice grouped as the rule table orders it, each item
//! with its `OK` / `WARN` / `BAD` marker, the value found and where, and for anything to
//! change the recommendation, why and the fix; then the counts, the facts that could not
//! be read, and both snippets as the library wrote them.
//!
//! ```text
//! pageio advise — PostgreSQL 18, workload mixed, 100 connections (...)
//! effective RAM 4.0 GiB (...); effective CPUs 2 (...)
//!
//! host
//!   [WARN] vm.swappiness: 60  (/proc/sys/vm/swappiness)
//!          recommended: 10
//!          why: ...
//!          fix: sysctl -w vm.swappiness=10
//! ...
//! 20 OK, 9 WARN, 0 BAD
//!
//! ---- postgresql.conf ----
//! ```

use std::fmt::Write;

use pageio::advise::{Advice, Status};

/// The human report: grouped items with `OK/WARN/BAD` markers, then both snippets.
pub fn report(a: &Advice) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "pageio advise — {}", a.advised_for());
    let _ = writeln!(
        out,
        "effective RAM {} ({}); effective CPUs {} ({})",
        a.effective_memory(),
        a.memory_limit,
        a.effective_cpus,
        a.cpu_limit
    );
    let mut group = None;
    for item in &a.items {
        if group != Some(item.group) {
            group = Some(item.group);
            let _ = writeln!(out, "\n{}", item.group.name());
        }
        let _ = writeln!(
            out,
            "  [{:<4}] {}: {}  ({})",
            item.status.marker(),
            item.name,
            item.found,
            item.source
        );
        if item.status != Status::Ok {
            let _ = writeln!(out, "         recommended: {}", item.recommended);
            let _ = writeln!(out, "         why: {}", item.reason);
            let _ = writeln!(out, "         fix: {}", item.fix);
        } else if !item.recommended.is_empty() && item.recommended != "—" {
            let _ = writeln!(out, "         recommended: {}", item.recommended);
        }
    }
    let count = |s: Status| a.items.iter().filter(|i| i.status == s).count();
    let _ = writeln!(
        out,
        "\n{} OK, {} WARN, {} BAD",
        count(Status::Ok),
        count(Status::Warn),
        count(Status::Bad)
    );
    if !a.problems.is_empty() {
        let _ = writeln!(
            out,
            "\nnot read (the items that needed these are missing or say unknown):"
        );
        for p in &a.problems {
            let _ = writeln!(out, "  {p}");
        }
    }
    let _ = writeln!(out, "\n---- postgresql.conf ----\n{}", a.postgresql_conf);
    let _ = writeln!(
        out,
        "---- /etc/sysctl.d/90-postgresql.conf ----\n{}",
        a.sysctl_conf
    );
    out
}
