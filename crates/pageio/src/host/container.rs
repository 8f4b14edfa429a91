//! Whether the process runs in a container, and the evidence.
//!
//! A container shares the host's kernel: `vm.*` sysctls, `kernel.sched_*`, transparent huge
//! pages, huge page counts and block queue settings are the host's, and a fix for them is
//! made there, not inside the container. The markers, each read under the sysroot:
//!
//! * `/.dockerenv` (Docker) and `/run/.containerenv` (Podman) exist;
//! * `/proc/1/cgroup` names a container runtime's hierarchy (`docker`, `kubepods`,
//!   `containerd`, `libpod`, `lxc`);
//! * `/proc/1/environ` holds `container=…` (systemd-nspawn, LXC, Podman set it) — read only
//!   when readable (it is root's), and never noted as a problem when it is not.

use serde::Serialize;

use super::Sysroot;

/// Files whose existence marks a container.
pub const MARKER_FILES: [&str; 2] = ["/.dockerenv", "/run/.containerenv"];

/// Words in `/proc/1/cgroup` that name a container runtime's hierarchy.
pub const CGROUP_MARKERS: [&str; 5] = ["docker", "kubepods", "containerd", "libpod", "lxc"];

/// The most of `/proc/1/environ` read: an environment is a few kB, and the variable looked
/// for is set first by the runtimes that set it.
pub const MAX_ENVIRON_BYTES: u64 = 64 << 10;

/// What marks this process as running in a container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ContainerFacts {
    /// Every marker found (`/.dockerenv`, `container=podman in /proc/1/environ`); empty when
    /// none is.
    pub markers: Vec<String>,
}

impl ContainerFacts {
    /// Whether any marker was found.
    pub fn detected(&self) -> bool {
        !self.markers.is_empty()
    }
}

/// Reads the container markers under `sys`.
pub fn read(sys: &Sysroot) -> ContainerFacts {
    let mut markers: Vec<String> = MARKER_FILES
        .iter()
        .filter(|f| sys.path(f).symlink_metadata().is_ok())
        .map(|f| f.to_string())
        .collect();
    if let Some(cgroup) = sys.text("/proc/1/cgroup") {
        if let Some(m) = CGROUP_MARKERS.iter().find(|m| cgroup.contains(*m)) {
            markers.push(format!("{m} in /proc/1/cgroup"));
        }
    }
    // Root's file: a process of another user may not read it, which is no problem.
    if let Ok(bytes) =
        crate::storage::read_small_file(&sys.path("/proc/1/environ"), MAX_ENVIRON_BYTES)
    {
        let found = bytes
            .split(|b| *b == 0)
            .filter_map(|v| std::str::from_utf8(v).ok())
            .find_map(|v| v.strip_prefix("container="));
        if let Some(kind) = found {
            markers.push(format!("container={kind} in /proc/1/environ"));
        }
    }
    ContainerFacts { markers }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_marker_is_found_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let sys = Sysroot::new(dir.path());
        assert!(!read(&sys).detected());
        std::fs::write(dir.path().join(".dockerenv"), "").unwrap();
        std::fs::create_dir_all(dir.path().join("proc/1")).unwrap();
        std::fs::write(dir.path().join("proc/1/cgroup"), "0::/kubepods/pod1/ctr\n").unwrap();
        std::fs::write(
            dir.path().join("proc/1/environ"),
            b"PATH=/bin\0container=podman\0",
        )
        .unwrap();
        assert_eq!(
            read(&sys).markers,
            [
                "/.dockerenv",
                "kubepods in /proc/1/cgroup",
                "container=podman in /proc/1/environ"
            ]
        );
    }
}
