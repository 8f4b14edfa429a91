//! Whether the PostgreSQL binaries were built with liburing.
//!
//! PostgreSQL 18 accepts `io_method = io_uring` only when built `--with-liburing`; a server
//! built without it refuses to start with that setting. The `postgres` binary is found in
//! `--pg-bin` or on `PATH`, and its ELF dynamic section is read for `DT_NEEDED` entries: a
//! `liburing.so.*` among them means liburing support. The parser reads only the section
//! headers, the `SHT_DYNAMIC` section and the string table it links to, with every offset
//! and size checked against the file (a truncated or hostile file is an error naming it, not
//! a panic). When the binary cannot be parsed (statically linked, not ELF), `pg_config
//! --configure` is asked whether `--with-liburing` was given.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// The largest binary read: a `postgres` executable is 10–40 MB; one larger than this is not
/// a PostgreSQL server, and reading it whole would take that much memory.
pub const MAX_BINARY_BYTES: u64 = 512 << 20;

/// Most `DT_NEEDED` entries kept: a real server links a few dozen libraries.
pub const MAX_NEEDED: usize = 1024;

/// What the PostgreSQL binaries say about liburing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PgBinFacts {
    /// The `postgres` binary read.
    pub postgres: PathBuf,
    /// Its `DT_NEEDED` libraries (empty when it could not be parsed).
    pub needed: Vec<String>,
    /// Whether it was built with liburing; `None` when neither the ELF nor `pg_config`
    /// could tell.
    pub liburing: Option<bool>,
    /// How that was decided (`DT_NEEDED of …`, `pg_config --configure`), or why not.
    pub how: String,
}

/// Finds `postgres` in `pg_bin`, else on `PATH`.
pub fn find_postgres(pg_bin: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = pg_bin {
        let p = dir.join("postgres");
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("postgres"))
        .find(|p| p.is_file())
}

/// Reads what the `postgres` binary in `pg_bin` (or on `PATH`) links; `None` when there is
/// no such binary.
pub fn read_pg_bin(pg_bin: Option<&Path>) -> Option<PgBinFacts> {
    let postgres = find_postgres(pg_bin)?;
    let parsed = read_bounded(&postgres).and_then(|bytes| elf_needed(&bytes));
    let facts = match parsed {
        Ok(needed) if !needed.is_empty() => PgBinFacts {
            liburing: Some(needed.iter().any(|n| n.starts_with("liburing."))),
            how: format!("DT_NEEDED of {}", postgres.display()),
            needed,
            postgres,
        },
        other => {
            let why = match other {
                Err(e) => e,
                Ok(_) => "no DT_NEEDED entries (statically linked)".to_string(),
            };
            let pg_config = postgres.with_file_name("pg_config");
            match configure_has_liburing(&pg_config) {
                Some(yes) => PgBinFacts {
                    liburing: Some(yes),
                    how: format!("{} --configure ({why})", pg_config.display()),
                    needed: Vec::new(),
                    postgres,
                },
                None => PgBinFacts {
                    liburing: None,
                    how: format!("{}: {why}; no pg_config beside it", postgres.display()),
                    needed: Vec::new(),
                    postgres,
                },
            }
        }
    };
    Some(facts)
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_BINARY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_BINARY_BYTES {
        return Err(format!("larger than {MAX_BINARY_BYTES} bytes"));
    }
    Ok(bytes)
}

/// How long `pg_config --configure` may take: it prints a compiled-in string at once; one
/// that hangs (a wrapper script waiting on something) must not stall `advise`.
pub const PG_CONFIG_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether `pg_config --configure` lists `--with-liburing` (autoconf) or `-Dliburing=enabled`
/// (meson); `None` when it cannot be run or does not answer within [`PG_CONFIG_TIMEOUT`].
fn configure_has_liburing(pg_config: &Path) -> Option<bool> {
    use std::io::Read;
    if !pg_config.is_file() {
        return None;
    }
    let mut child = std::process::Command::new(pg_config)
        .arg("--configure")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + PG_CONFIG_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    let mut stdout = String::new();
    // The configure line is a few kilobytes; the pipe holds it whole once the child exited.
    child
        .stdout
        .take()?
        .take(1 << 20)
        .read_to_string(&mut stdout)
        .ok()?;
    status
        .success()
        .then(|| stdout.contains("--with-liburing") || stdout.contains("-Dliburing=enabled"))
}

/// The `DT_NEEDED` names of an ELF file (32- or 64-bit, either byte order).
pub fn elf_needed(bytes: &[u8]) -> Result<Vec<String>, String> {
    if bytes.len() < 16 || &bytes[..4] != b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    let is64 = match bytes[4] {
        1 => false,
        2 => true,
        c => return Err(format!("unknown ELF class {c}")),
    };
    let le = match bytes[5] {
        1 => true,
        2 => false,
        d => return Err(format!("unknown ELF data encoding {d}")),
    };
    let rd = Reader { bytes, le };
    let (shoff, shentsize, shnum) = if is64 {
        (rd.u64(0x28)?, rd.u16(0x3a)? as u64, rd.u16(0x3c)? as u64)
    } else {
        (
            rd.u32(0x20)? as u64,
            rd.u16(0x2e)? as u64,
            rd.u16(0x30)? as u64,
        )
    };
    let section = |i: u64| -> Result<(u32, u64, u64, u32), String> {
        let at = shoff
            .checked_add(i.checked_mul(shentsize).ok_or("section table overflows")?)
            .ok_or("section table overflows")?;
        if is64 {
            Ok((
                rd.u32(at + 4)?,
                rd.u64(at + 0x18)?,
                rd.u64(at + 0x20)?,
                rd.u32(at + 0x28)?,
            ))
        } else {
            Ok((
                rd.u32(at + 4)?,
                rd.u32(at + 0x10)? as u64,
                rd.u32(at + 0x14)? as u64,
                rd.u32(at + 0x18)?,
            ))
        }
    };
    const SHT_DYNAMIC: u32 = 6;
    const DT_NULL: u64 = 0;
    const DT_NEEDED: u64 = 1;
    let mut needed = Vec::new();
    for i in 0..shnum {
        let (kind, offset, size, link) = section(i)?;
        if kind != SHT_DYNAMIC {
            continue;
        }
        let (_, str_offset, str_size, _) = section(link as u64)?;
        let strtab = rd.slice(str_offset, str_size)?;
        let entry = if is64 { 16 } else { 8 };
        let mut at = 0;
        while at + entry <= size {
            let (tag, val) = if is64 {
                (rd.u64(offset + at)?, rd.u64(offset + at + 8)?)
            } else {
                (rd.u32(offset + at)? as u64, rd.u32(offset + at + 4)? as u64)
            };
            if tag == DT_NULL {
                break;
            }
            if tag == DT_NEEDED {
                let start = usize::try_from(val).map_err(|_| "string offset overflows")?;
                let rest = strtab
                    .get(start..)
                    .ok_or("DT_NEEDED outside the string table")?;
                let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
                needed.push(String::from_utf8_lossy(&rest[..end]).into_owned());
                if needed.len() >= MAX_NEEDED {
                    break;
                }
            }
            at += entry;
        }
        break;
    }
    Ok(needed)
}

struct Reader<'a> {
    bytes: &'a [u8],
    le: bool,
}

impl Reader<'_> {
    fn slice(&self, at: u64, len: u64) -> Result<&[u8], String> {
        let start = usize::try_from(at).map_err(|_| "offset overflows")?;
        let len = usize::try_from(len).map_err(|_| "size overflows")?;
        start
            .checked_add(len)
            .and_then(|end| self.bytes.get(start..end))
            .ok_or_else(|| format!("truncated ELF: {len} bytes at {start} past the end"))
    }
    fn u16(&self, at: u64) -> Result<u16, String> {
        let b: [u8; 2] = self.slice(at, 2)?.try_into().map_err(|_| "short read")?;
        Ok(if self.le {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        })
    }
    fn u32(&self, at: u64) -> Result<u32, String> {
        let b: [u8; 4] = self.slice(at, 4)?.try_into().map_err(|_| "short read")?;
        Ok(if self.le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }
    fn u64(&self, at: u64) -> Result<u64, String> {
        let b: [u8; 8] = self.slice(at, 8)?.try_into().map_err(|_| "short read")?;
        Ok(if self.le {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_test_binary_names_libc() {
        let exe = std::env::current_exe().unwrap();
        let needed = elf_needed(&std::fs::read(exe).unwrap()).unwrap();
        assert!(
            needed.iter().any(|n| n.starts_with("libc.so")),
            "{needed:?}"
        );
    }

    #[test]
    fn pg_config_is_asked_with_a_bound() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("pg_config");
        // Executing a file just written can fail with ETXTBSY while another test thread's
        // fork still holds the write descriptor; retry briefly.
        let ask = |body: &str| {
            std::fs::write(&script, body).unwrap();
            std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            (0..20).find_map(|_| {
                let r = configure_has_liburing(&script);
                if r.is_none() {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                r
            })
        };
        assert_eq!(
            ask("#!/bin/sh\necho \"'--prefix=/x' '--with-liburing'\"\n"),
            Some(true)
        );
        assert_eq!(ask("#!/bin/sh\necho \"'--prefix=/x'\"\n"), Some(false));
        assert_eq!(configure_has_liburing(&dir.path().join("none")), None);
    }

    #[test]
    fn truncated_and_foreign_files_are_errors_not_panics() {
        assert_eq!(elf_needed(b"#!/bin/sh\n").unwrap_err(), "not an ELF file");
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        for cut in [16, 64, 1000] {
            assert!(elf_needed(&exe[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = exe[..64].to_vec();
        bad[4] = 9;
        assert!(elf_needed(&bad).unwrap_err().contains("class 9"));
    }
}
