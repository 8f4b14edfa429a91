//! The process's security context that decides whether io_uring may be used: the seccomp
//! mode from `/proc/self/status`.
//!
//! `Seccomp: 0` is no filter, `1` strict mode, `2` a BPF filter (Docker's and Kubernetes'
//! default profiles, systemd's `SystemCallFilter=`). A filter may or may not refuse
//! `io_uring_setup`: the mode says a filter exists, only a live probe (see
//! [`super::probe::Probes`]) says what it does. `NoNewPrivs` is read beside it because a
//! filter installed without privileges requires it, which tells a container's profile from
//! one set by the service manager.

use serde::Serialize;

use super::Sysroot;

/// `/proc/self/status`.
pub const PROC_SELF_STATUS: &str = "/proc/self/status";

/// The process's seccomp state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SeccompFacts {
    /// `Seccomp:` — 0 none, 1 strict, 2 filter; `None` when the kernel has no seccomp.
    pub mode: Option<u64>,
    /// `Seccomp_filters:` — how many filters are stacked (Linux 5.9+).
    pub filters: Option<u64>,
    /// `NoNewPrivs:` — 1 when the process may not gain privileges.
    pub no_new_privs: Option<u64>,
}

impl SeccompFacts {
    /// A name for the mode, as `seccomp(2)` calls them.
    pub fn mode_name(&self) -> &'static str {
        match self.mode {
            Some(0) => "disabled",
            Some(1) => "strict",
            Some(2) => "filter",
            Some(_) => "unknown",
            None => "not reported",
        }
    }
}

/// The value of a `Name:\tvalue` line of a status file.
pub fn status_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == key).then(|| v.trim())
    })
}

/// Reads the seccomp lines of `/proc/self/status`.
pub fn read_seccomp(sys: &Sysroot) -> SeccompFacts {
    let Some(text) = sys.text(PROC_SELF_STATUS) else {
        return SeccompFacts::default();
    };
    let get = |key: &str| {
        let value = status_value(&text, key)?;
        sys.parse::<u64>(PROC_SELF_STATUS.as_ref(), value, "an unsigned integer")
    };
    SeccompFacts {
        mode: get("Seccomp"),
        filters: get("Seccomp_filters"),
        no_new_privs: get("NoNewPrivs"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_are_found_by_exact_key() {
        let text = "Name:\tpageio\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n";
        assert_eq!(status_value(text, "Seccomp"), Some("2"));
        assert_eq!(status_value(text, "Seccomp_filters"), Some("1"));
        assert_eq!(status_value(text, "NoNewPrivs"), Some("1"));
        assert_eq!(status_value(text, "Secc"), None);
    }
}
