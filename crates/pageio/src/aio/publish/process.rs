//! Processes behind areas: start time, command line, staleness; listing and removing
//! areas in the publish directory.

use super::*;

/// A process's start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`), or
/// `None` when no such process is visible.
pub fn process_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces and ')': the fields
    // after the last ')' are space-separated, field 3 first.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// Whether an area's publisher is gone, and why.
pub fn stale_reason(header: &AreaHeader) -> Option<StaleReason> {
    match process_start_time(header.pid) {
        // 0: the publisher could not read its own start time; only a missing pid counts.
        Some(t) if t == header.start_time_ticks || header.start_time_ticks == 0 => None,
        Some(t) => Some(StaleReason::PidReused {
            start_time_ticks: t,
        }),
        None => {
            // /proc may hide other users' processes (hidepid); kill(pid, 0) tells whether
            // the pid exists at all. EPERM: it exists, but is not ours to read — not stale.
            // SAFETY: signal 0 only checks for existence and permission; nothing is sent.
            let r = unsafe { libc::kill(header.pid, 0) };
            let gone =
                r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            gone.then_some(StaleReason::ProcessGone)
        }
    }
}

/// The pid and instance in an area's file name, when the name has the exact pattern
/// `pageio-aios.<pid>.<n>` (digits only).
pub fn parse_area_name(name: &str) -> Option<(i32, u64)> {
    let rest = name.strip_prefix(AREA_FILE_PREFIX)?;
    let (pid, instance) = rest.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(pid) || !digits(instance) {
        return None;
    }
    Some((pid.parse().ok()?, instance.parse().ok()?))
}

/// Most directory entries examined in the publish directory: `/dev/shm` is shared with
/// everything else on the machine, and a directory with millions of files must not turn one
/// `pageio aios` into a long walk.
pub const MAX_DIR_ENTRIES: usize = 100_000;

/// Every area in `dir`: live, stale or unreadable, sorted by pid and instance, with the
/// default trust ([`AreaTrust::OwnerOnly`]). Files whose names do not match the pattern are
/// not looked at.
pub fn list_areas(dir: &Path) -> std::io::Result<Vec<AreaEntry>> {
    list_areas_trusting(dir, AreaTrust::OwnerOnly)
}

/// [`list_areas`] reading the areas `trust` accepts; the others are
/// [`AreaEntry::Unreadable`] with [`PublishError::Untrusted`].
pub fn list_areas_trusting(dir: &Path, trust: AreaTrust) -> std::io::Result<Vec<AreaEntry>> {
    let mut found: Vec<((i32, u64), PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir)?.take(MAX_DIR_ENTRIES) {
        let entry = entry?;
        let name = entry.file_name();
        let Some(key) = name.to_str().and_then(parse_area_name) else {
            continue;
        };
        found.push((key, entry.path()));
    }
    found.sort();
    Ok(found
        .into_iter()
        .map(|((pid, _), path)| match read_area_trusting(&path, trust) {
            Err(error) => AreaEntry::Unreadable { path, error },
            Ok(area) if area.header.pid != pid => AreaEntry::Unreadable {
                error: PublishError::Garbled {
                    path: path.clone(),
                    what: format!(
                        "the header's pid {} is not the file name's {pid}",
                        area.header.pid
                    ),
                },
                path,
            },
            Ok(area) => match stale_reason(&area.header) {
                Some(reason) => AreaEntry::Stale { area, reason },
                None => AreaEntry::Live(area),
            },
        })
        .collect())
}

/// Removes a stale area, checking again first that the file has an area's name, starts with
/// the magic, holds the same publisher as `area`, that this publisher is still gone, and that
/// the file passes the default trust ([`AreaTrust::OwnerOnly`]: another user's file is
/// never removed). Returns whether it removed the file.
pub fn remove_stale(area: &PublishedArea) -> Result<bool, PublishError> {
    let path = &area.path;
    let name_ok = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_area_name)
        .is_some();
    if !name_ok {
        return Ok(false);
    }
    let now = read_area(path)?;
    if now.header != area.header || stale_reason(&now.header).is_none() {
        return Ok(false);
    }
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(PublishError::Io {
            path: path.clone(),
            source,
        }),
    }
}
