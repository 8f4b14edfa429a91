//! The `postgresql.conf` snippet and the `/etc/sysctl.d/` snippet: file contents, part of
//! the [`Advice`] (and of its JSON) whatever front end shows them.
//!
//! The snippets can be applied as they are: the conf snippet holds every instance
//! recommendation (OK ones too, so including it pins the whole set), each line followed by a
//! comment saying why; the sysctl snippet holds only the kernel settings to change, each
//! preceded by its reason, as `key = value` lines `sysctl --system` reads.

use std::fmt::Write;

use super::{Advice, Group};

/// The `postgresql.conf` snippet.
pub(super) fn postgresql_conf(a: &Advice) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# pageio advise: {}", a.advised_for());
    let _ = writeln!(
        out,
        "# effective RAM {} ({}), {} CPUs ({})",
        a.effective_memory(),
        a.memory_limit,
        a.effective_cpus,
        a.cpu_limit
    );
    let _ = writeln!(
        out,
        "# Include it from postgresql.conf (include 'pageio.conf') and restart the server."
    );
    for item in a
        .items
        .iter()
        .filter(|i| matches!(i.group, Group::Instance | Group::Live))
    {
        if let Some((name, value)) = &item.conf {
            let _ = writeln!(out, "{name} = {value}\t# {}", one_line(&item.reason));
        }
    }
    out
}

/// The `/etc/sysctl.d/` snippet.
pub(super) fn sysctl_conf(a: &Advice) -> String {
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

/// `s` on one line, for a comment.
fn one_line(s: &str) -> String {
    s.replace('\n', " ")
}
