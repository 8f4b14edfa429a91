//! The files against the running server: a setting changed in `postgresql.conf` or
//! `postgresql.auto.conf` but not reloaded (the file's value is not the live one), and one
//! reloaded that waits for a restart (`pending_restart`).
//!
//! Values are compared as PostgreSQL would hold them: a size in the file (`'16MB'`) against
//! the live `setting` times its `unit` (`2048` × `8kB`), a time in milliseconds, a Boolean
//! in any spelling, a number as a number, anything else as text ignoring case. A live value
//! that does not come from a configuration file (the command line, the environment, a
//! default the file does not set) is not the file's to decide and is not compared.

use std::collections::BTreeMap;

use super::{item, LiveFacts, LiveSetting};
use crate::advise::units::parse_size;
use crate::advise::{Item, Status};
use crate::host::SettingSource;

/// Where the comparison's rules come from.
const CITE: &str = "PostgreSQL 18 docs, 19.1.2 Parameter Interaction via the Configuration File (pg_reload_conf, pending_restart)";

/// Live sources a configuration file decides (`default` too: a line added to the file and
/// not reloaded leaves the live value at its default).
const FILE_DECIDED_SOURCES: [&str; 2] = ["configuration file", "default"];

/// One setting whose file value is not the live one.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// The setting.
    pub name: String,
    /// The file's value and where (`file:line`).
    pub file_value: String,
    /// Where the file sets it.
    pub file_location: String,
    /// The live value with its unit.
    pub live_value: String,
    /// The live setting waits for a restart.
    pub pending_restart: bool,
    /// The setting needs a restart to change (`context = postmaster`).
    pub needs_restart: bool,
}

/// Milliseconds in a time value as written (`30s`, `5min`, `1h`, a bare number in
/// `unit_ms`).
fn parse_ms(value: &str, unit_ms: u64) -> Option<f64> {
    let v = value.trim();
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(v.len());
    let (number, unit) = v.split_at(split);
    let number: f64 = number.parse().ok()?;
    let per = match unit.trim() {
        "" => unit_ms as f64,
        "us" => 0.001,
        "ms" => 1.0,
        "s" => 1000.0,
        "min" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => return None,
    };
    Some(number * per)
}

/// Whether the file's `value` means the live setting's value.
pub fn same_value(file_value: &str, live: &LiveSetting) -> bool {
    let file_value = file_value.trim().trim_matches('\'');
    let live_value = live.setting.as_str();
    if let Some(unit_bytes) = live.unit_bytes() {
        // -1 and other sentinels are compared as numbers.
        if let (Ok(a), Ok(b)) = (file_value.parse::<i64>(), live_value.parse::<i64>()) {
            return a == b;
        }
        if let (Some(file_bytes), Ok(count)) = (
            parse_size(file_value, unit_bytes),
            live_value.parse::<u64>(),
        ) {
            // PostgreSQL rounds a size to its unit (100kB of 8 kB blocks is 13 blocks).
            return (file_bytes as f64 / unit_bytes as f64).round() as u64 == count;
        }
    }
    if let Some(unit_ms) = live.unit_ms() {
        if let (Some(a), Some(b)) = (parse_ms(file_value, unit_ms), parse_ms(live_value, unit_ms)) {
            return (a - b).abs() < 0.5;
        }
    }
    if let (Some(a), Some(b)) = (
        crate::advise::guc::parse_bool(file_value),
        crate::advise::guc::parse_bool(live_value),
    ) {
        return a == b;
    }
    if let (Ok(a), Ok(b)) = (file_value.parse::<f64>(), live_value.parse::<f64>()) {
        return (a - b).abs() <= f64::EPSILON * a.abs().max(1.0);
    }
    file_value.eq_ignore_ascii_case(live_value)
}

/// Every setting the files set to another value than the live one, and every live setting
/// waiting for a restart.
pub fn differences(file: &BTreeMap<String, SettingSource>, live: &LiveFacts) -> Vec<Difference> {
    let Ok(settings) = live.settings.read() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for setting in settings {
        let Some(in_file) = file.get(&setting.name.to_ascii_lowercase()) else {
            if setting.pending_restart {
                out.push(Difference {
                    name: setting.name.clone(),
                    file_value: "(not in the files read)".into(),
                    file_location: String::new(),
                    live_value: live_text(setting),
                    pending_restart: true,
                    needs_restart: true,
                });
            }
            continue;
        };
        if !FILE_DECIDED_SOURCES.contains(&setting.source.as_str()) && !setting.pending_restart {
            continue;
        }
        if same_value(&in_file.value, setting) && !setting.pending_restart {
            continue;
        }
        out.push(Difference {
            name: setting.name.clone(),
            file_value: in_file.value.clone(),
            file_location: in_file.location(),
            live_value: live_text(setting),
            pending_restart: setting.pending_restart,
            needs_restart: setting.context == "postmaster",
        });
    }
    out
}

/// The live value with its unit (`2048 × 8kB`).
fn live_text(s: &LiveSetting) -> String {
    match &s.unit {
        Some(unit) => format!("{} × {unit}", s.setting),
        None => s.setting.clone(),
    }
}

/// The `configuration reloaded` item: the files against the running server.
pub fn file_differences(file: &BTreeMap<String, SettingSource>, live: &LiveFacts) -> Item {
    const NAME: &str = "configuration reloaded";
    if let Err(why) = live.settings.read() {
        return super::unavailable(NAME, why, CITE);
    }
    let diffs = differences(file, live);
    if diffs.is_empty() {
        return item(
            NAME,
            Status::Ok,
            format!("the {} settings the files set are live", file.len()),
            "the configuration files and pg_settings (live)".into(),
            "—".into(),
            String::new(),
            String::new(),
            CITE,
        );
    }
    let listed: Vec<String> = diffs
        .iter()
        .map(|d| {
            let state = if d.pending_restart {
                "pending restart"
            } else if d.needs_restart {
                "not reloaded; needs a restart"
            } else {
                "not reloaded"
            };
            format!(
                "{}: file {}{} vs live {} ({state})",
                d.name,
                d.file_value,
                if d.file_location.is_empty() {
                    String::new()
                } else {
                    format!(" at {}", d.file_location)
                },
                d.live_value
            )
        })
        .collect();
    let restart = diffs.iter().any(|d| d.pending_restart || d.needs_restart);
    item(
        NAME,
        Status::Warn,
        listed.join("; "),
        "the configuration files and pg_settings (live)".into(),
        "the files and the server agree".into(),
        "the server runs with other values than its configuration files say: what this report reads in the files is not what the server does yet, and a restart will change its behaviour at once".into(),
        if restart {
            "SELECT pg_reload_conf(); then restart the server for the settings that need it".into()
        } else {
            "SELECT pg_reload_conf(); (or pg_ctl reload)".into()
        },
        CITE,
    )
}
