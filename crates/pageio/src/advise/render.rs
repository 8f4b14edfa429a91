//! The report, the `postgresql.conf` snippet and the `/etc/sysctl.d/` snippet.
//!
//! The snippets can be applied as they are: the conf snippet holds every instance
//! recommendation (OK ones too, so including it pins the whole set), each line followed by a
//! comment saying why; the sysctl snippet holds only the kernel settings to change, each
//! preceded by its reason, as `key = value` lines `sysctl --system` reads.

use std::fmt::Write;

use super::units::human_bytes;
use super::{Advice, Group, Status};

/// The `postgresql.conf` snippet.
pub fn postgresql_conf(a: &Advice) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# pageio advise: PostgreSQL {}, workload {}, {} connections ({})",
        a.pg_version,
        a.workload.name(),
        a.max_connections,
        a.max_connections_source
    );
    let _ = writeln!(
        out,
        "# effective RAM {} ({}), {} CPUs ({})",
        a.effective_memory_bytes
            .map(human_bytes)
            .unwrap_or_else(|| "unknown".into()),
        a.memory_limit,
        a.effective_cpus,
        a.cpu_limit
    );
    let _ = writeln!(
        out,
        "# Include it from postgresql.conf (include 'pageio.conf') and restart the server."
    );
    for item in a.items.iter().filter(|i| i.group == Group::Instance) {
        if let Some((name, value)) = &item.conf {
            let _ = writeln!(out, "{name} = {value}\t# {}", one_line(&item.reason));
        }
    }
    out
}

/// The `/etc/sysctl.d/` snippet.
pub fn sysctl_conf(a: &Advice) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# pageio advise: kernel settings for PostgreSQL {} (save as /etc/sysctl.d/90-postgresql.conf, then sysctl --system)",
        a.pg_version
    );
    let mut seen = std::collections::BTreeSet::new();
    for item in a.items.iter().filter(|i| !i.sysctl.is_empty()) {
        let _ = writeln!(out, "# {}: {}", item.name, one_line(&item.reason));
        for (key, value) in &item.sysctl {
            if seen.insert(key.clone()) {
                let _ = writeln!(out, "{key} = {value}");
            }
        }
    }
    if seen.is_empty() {
        let _ = writeln!(out, "# nothing to change");
    }
    out
}

fn one_line(s: &str) -> String {
    s.replace('\n', " ")
}

/// The human report: grouped items with `OK/WARN/BAD` markers, then both snippets.
pub fn report(a: &Advice) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "pageio advise — PostgreSQL {}, workload {}, {} connections ({})",
        a.pg_version,
        a.workload.name(),
        a.max_connections,
        a.max_connections_source
    );
    let _ = writeln!(
        out,
        "effective RAM {} ({}); effective CPUs {} ({})",
        a.effective_memory_bytes
            .map(human_bytes)
            .unwrap_or_else(|| "unknown".into()),
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
