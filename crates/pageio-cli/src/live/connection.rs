//! The connection string: `--dsn` and libpq's defaults (environment, password file), the
//! session settings that make every connection read-only and quick to give up, and the
//! bounds on the connect itself.

use std::time::Duration;

use postgres::config::Host;
use postgres::Config;

use super::{ServerError, SessionLimits, DEFAULT_CONNECT_TIMEOUT};
use super::{IDLE_IN_TRANSACTION_TIMEOUT_MS, LOCK_TIMEOUT_MS};

/// Parses `dsn` (libpq key=value pairs) and fills what it leaves out as libpq does: from
/// `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`, `PGCONNECT_TIMEOUT`, else
/// the local socket directory and the login name. Then adds the session settings that make
/// the connection read-only and fast to give up (see the module docs), with `limits`'
/// application name and statement timeout.
pub(crate) fn parse_dsn(
    dsn: &str,
    env: &dyn Fn(&str) -> Option<String>,
    limits: SessionLimits,
) -> Result<Config, ServerError> {
    let mut config: Config = dsn.parse().map_err(|e: postgres::Error| ServerError::Dsn {
        cause: error_text(&e),
    })?;
    if config.get_hosts().is_empty() {
        let host = env("PGHOST").unwrap_or_else(|| {
            // libpq's default socket directory is a build option: Debian's packages use
            // /var/run/postgresql, the source default is /tmp.
            if std::path::Path::new("/var/run/postgresql").is_dir() {
                "/var/run/postgresql".to_string()
            } else {
                "/tmp".to_string()
            }
        });
        for one in host.split(',') {
            config.host(one);
        }
    }
    if config.get_ports().is_empty() {
        if let Some(port) = env("PGPORT") {
            let port: u16 = port.parse().map_err(|_| ServerError::Dsn {
                cause: format!("PGPORT={port} is not a port number"),
            })?;
            config.port(port);
        }
    }
    if config.get_user().is_none() {
        let user = env("PGUSER")
            .or_else(|| env("USER"))
            .unwrap_or_else(|| "postgres".to_string());
        config.user(&user);
    }
    if config.get_password().is_none() {
        if let Some(password) = env("PGPASSWORD") {
            config.password(password);
        }
    }
    if config.get_dbname().is_none() {
        if let Some(dbname) = env("PGDATABASE") {
            config.dbname(&dbname);
        }
    }
    if config.get_password().is_none() {
        // As libpq: the password file, when nothing else gave a password.
        if let Ok(password) = password_from_file(&config, env) {
            config.password(password);
        }
    }
    if config.get_connect_timeout().is_none() {
        let from_env = env("PGCONNECT_TIMEOUT")
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|&secs| secs > 0)
            .map(Duration::from_secs);
        config.connect_timeout(from_env.unwrap_or(DEFAULT_CONNECT_TIMEOUT));
    }
    if config.get_application_name().is_none() {
        config.application_name(limits.application_name);
    }
    let session = format!(
        "-c default_transaction_read_only=on -c statement_timeout={} \
         -c lock_timeout={LOCK_TIMEOUT_MS} \
         -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_TIMEOUT_MS}",
        limits.statement_timeout_ms
    );
    let options = match config.get_options() {
        Some(given) if !given.trim().is_empty() => format!("{given} {session}"),
        _ => session,
    };
    config.options(&options);
    Ok(config)
}

/// The most bytes of a password file read: a few lines per server; more is not one.
pub(crate) const PASSFILE_MAX_BYTES: u64 = 1 << 20;

/// The password file libpq reads: `PGPASSFILE`, else `~/.pgpass`.
pub(crate) fn passfile_path(env: &dyn Fn(&str) -> Option<String>) -> std::path::PathBuf {
    match env("PGPASSFILE") {
        Some(p) => p.into(),
        None => std::path::Path::new(&env("HOME").unwrap_or_else(|| "~".into())).join(".pgpass"),
    }
}

/// The password for `config`'s first host from the password file, as libpq matches it:
/// `host:port:database:user:password` lines, `*` matching anything, `\:` and `\\`
/// escaped, a socket directory matched as `localhost` when it is the default one; a file
/// others may read is ignored, as libpq ignores it. `Err` says why there is none.
pub(crate) fn password_from_file(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let path = passfile_path(env);
    let meta =
        std::fs::metadata(&path).map_err(|e| format!("{} cannot be read: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "{} may be read by others (mode {:o}), so it is ignored, as libpq ignores it: chmod 600 it",
            path.display(),
            meta.permissions().mode() & 0o777
        ));
    }
    let bytes = pageio::storage::read_small_file(&path, PASSFILE_MAX_BYTES)
        .map_err(|e| format!("{} cannot be read: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(dir))
            if dir == std::path::Path::new("/var/run/postgresql")
                || dir == std::path::Path::new("/tmp") =>
        {
            "localhost".into()
        }
        Some(Host::Unix(dir)) => dir.display().to_string(),
        None => "localhost".into(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default().to_string();
    let dbname = config
        .get_dbname()
        .map_or_else(|| user.clone(), str::to_string);
    let wanted = [host.as_str(), port.as_str(), dbname.as_str(), user.as_str()];
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = split_passfile_line(line);
        if fields.len() < 5 {
            continue;
        }
        if fields[..4]
            .iter()
            .zip(wanted)
            .all(|(field, want)| field == "*" || field == want)
        {
            return Ok(fields[4..].join(":"));
        }
    }
    Err(format!(
        "{} has no line for {host}:{port}:{dbname}:{user}",
        path.display()
    ))
}

/// The fields of a password-file line: `:` separates, `\` escapes the next character.
pub(crate) fn split_passfile_line(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(f)) = (chars.next(), fields.last_mut()) {
                    f.push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => {
                if let Some(f) = fields.last_mut() {
                    f.push(c)
                }
            }
        }
    }
    fields
}

/// The error for a failed connection: a missing password says how to give one.
pub(crate) fn connect_error(e: &postgres::Error, config: &Config, target: String) -> ServerError {
    let cause = error_text(e);
    if config.get_password().is_none() && cause.contains("password missing") {
        let env = |name: &str| std::env::var(name).ok();
        let note = match password_from_file(config, &env) {
            Err(why) => format!(" ({why})"),
            Ok(_) => String::new(),
        };
        return ServerError::PasswordMissing {
            target,
            passfile: passfile_path(&env).display().to_string(),
            note,
        };
    }
    ServerError::Connect { target, cause }
}

/// Host, port, database and user of `config`, for messages (never the password).
pub(crate) fn describe_target(config: &Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let mut text = format!("host={}", hosts.join(","));
    if let Some(port) = config.get_ports().first() {
        text.push_str(&format!(" port={port}"));
    }
    let user = config.get_user().unwrap_or("?");
    text.push_str(&format!(
        " dbname={} user={user}",
        config.get_dbname().unwrap_or(user)
    ));
    text
}

/// The most the main thread waits for the connection: like libpq's `connect_timeout`, it
/// covers the TCP connect and the startup exchange (authentication), once per host tried
/// (the client library's own timeout covers only the TCP connect).
pub(crate) fn connect_bound(config: &Config) -> Duration {
    config
        .get_connect_timeout()
        .copied()
        .unwrap_or(DEFAULT_CONNECT_TIMEOUT)
        .saturating_mul(config.get_hosts().len().max(1) as u32)
        + CONNECT_SLACK
}

/// Slack on top of `connect_timeout` for the startup exchange on a server that answered
/// the TCP connect.
pub(crate) const CONNECT_SLACK: Duration = Duration::from_secs(1);

/// The server's message with its SQLSTATE (the client library's `Display` hides the
/// detail behind "db error").
pub(crate) fn error_text(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        ),
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(cause) = source {
                let more = cause.to_string();
                if !text.contains(&more) {
                    text.push_str(": ");
                    text.push_str(&more);
                }
                source = cause.source();
            }
            text
        }
    }
}
