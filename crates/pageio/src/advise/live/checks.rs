//! The live checks: one function per check, each a pure function of [`LiveFacts`], each
//! giving items of the `live` group. The thresholds are named constants with where they come
//! from; docs/ADVISE.md maps postgresqltuner's checks to these items.

use super::{
    duration_words, item, unavailable, Connections, DatabaseStats, IndexFacts, LiveFacts,
    LiveInputs, LiveSetting, Reading, TableVacuum,
};
use crate::advise::units::human_bytes;
use crate::advise::{Item, Status, Workload};

/// A database's cache hit ratio at or above this is OK (postgresqltuner's "very good" bound
/// for the index hit rate, 98%).
pub const HIT_RATIO_OK: f64 = 0.98;

/// Fewer block accesses than this since the reset say nothing about the cache: a database
/// that was barely used.
pub const HIT_RATIO_MIN_ACCESSES: i64 = 10_000;

/// Requested checkpoints above this share of all checkpoints mean WAL fills `max_wal_size`
/// before `checkpoint_timeout` passes: checkpoints come early and more full-page images are
/// written (PostgreSQL's documentation, "WAL Configuration": checkpoints should be timed).
pub const REQUESTED_CHECKPOINT_SHARE_WARN: f64 = 0.10;

/// A table's dead tuples above this many times its autovacuum threshold: autovacuum is far
/// behind (or off for it), not merely about to start.
pub const AUTOVACUUM_FAR_PAST_FACTOR: f64 = 2.0;

/// PostgreSQL's default `autovacuum_vacuum_threshold`, used when the setting was not read.
const DEFAULT_VACUUM_THRESHOLD: f64 = 50.0;

/// PostgreSQL's default `autovacuum_vacuum_scale_factor`.
const DEFAULT_VACUUM_SCALE_FACTOR: f64 = 0.2;

/// Connection use at or above this share of the slots is a warning, and at or above
/// [`CONNECTIONS_BAD`] bad (postgresqltuner's 70% and 90%).
pub const CONNECTIONS_WARN: f64 = 0.70;

/// See [`CONNECTIONS_WARN`].
pub const CONNECTIONS_BAD: f64 = 0.90;

/// Backends writing more than this share of the shared buffers written in the `normal`
/// context clean buffers themselves: the background writer does not keep up.
pub const BACKEND_WRITE_SHARE_WARN: f64 = 0.25;

/// Statistics younger than this cover too little time to judge by (postgresqltuner warns
/// below one day of uptime).
pub const STATS_MIN_AGE_SECONDS: f64 = 86_400.0;

/// Most tables or indexes an item lists by name; the JSON facts hold all of them.
pub const MAX_LISTED: usize = 10;

/// Where the checks' thresholds and formulas come from.
const CITE_TUNER: &str = "postgresqltuner.pl (jfcoz/postgresqltuner)";
const CITE_WAL: &str = "PostgreSQL 18 docs, 28.5 WAL Configuration; pg_stat_checkpointer";
const CITE_VACUUM: &str = "PostgreSQL 18 docs, 24.1.6 The Autovacuum Daemon (vacuum threshold)";
const CITE_STATS: &str = "PostgreSQL 18 docs, 27.2 The Cumulative Statistics System";
const CITE_RELIABILITY: &str =
    "PostgreSQL 18 docs, 19.5.1 Settings (fsync, full_page_writes, synchronous_commit)";
const CITE_PGTUNE: &str = "pgtune (le0pard/pgtune): jit, wal_compression";

/// Every live item, in report order.
pub fn live_items(facts: &LiveFacts, inputs: &LiveInputs) -> Vec<Item> {
    let mut items = Vec::new();
    items.extend(privilege(facts));
    items.extend(pending_restart(facts));
    items.extend(reliability(facts));
    items.extend(jit_and_wal_compression(facts, inputs.workload));
    items.extend(autovacuum(facts));
    items.push(autovacuum_backlog(facts));
    items.extend(hit_ratios(facts));
    items.push(checkpoints(facts));
    items.push(temp_files(facts));
    items.push(buffer_writes(facts));
    items.push(stat_io(facts));
    items.extend(connections(facts));
    items.extend(indexes(facts));
    items.push(prepared_xacts(facts));
    items.push(stats_age(facts));
    items
}

/// The role's reach: without `pg_read_all_stats` other sessions are hidden, without
/// `pg_read_all_settings` the files behind the live values are.
fn privilege(facts: &LiveFacts) -> Option<Item> {
    let mut missing = Vec::new();
    if !facts.read_all_stats {
        missing.push("pg_read_all_stats (other sessions' activity and wait events)");
    }
    if !facts.read_all_settings {
        missing.push("pg_read_all_settings (the file and line of each live setting)");
    }
    if missing.is_empty() {
        return None;
    }
    Some(item(
        "privilege",
        Status::Warn,
        format!("role \"{}\" lacks {}", facts.role, missing.join(" and ")),
        "pg_has_role (live)".into(),
        "a role with pg_read_all_stats and pg_read_all_settings".into(),
        "some live figures are hidden from this role, so the items that need them say less".into(),
        format!(
            "as a superuser: GRANT pg_read_all_stats, pg_read_all_settings TO \"{}\"",
            facts.role
        ),
        CITE_STATS,
    ))
}

/// Settings the files changed that wait for a restart.
fn pending_restart(facts: &LiveFacts) -> Option<Item> {
    let settings = match facts.settings.read() {
        Ok(s) => s,
        Err(why) => return Some(unavailable("pending_restart", why, CITE_STATS)),
    };
    let pending: Vec<&LiveSetting> = settings.iter().filter(|s| s.pending_restart).collect();
    let names: Vec<String> = pending.iter().map(|s| s.name.clone()).collect();
    Some(if pending.is_empty() {
        item(
            "pending_restart",
            Status::Ok,
            "no setting waits for a restart".into(),
            "pg_settings.pending_restart (live)".into(),
            "—".into(),
            String::new(),
            String::new(),
            CITE_STATS,
        )
    } else {
        item(
            "pending_restart",
            Status::Warn,
            names.join(", "),
            "pg_settings.pending_restart (live)".into(),
            "restart the server".into(),
            format!(
                "the configuration files set {} to a new value that takes effect only at a restart; until then the server runs with the old one",
                names.join(", ")
            ),
            "restart the server (pg_ctl restart, or systemctl restart postgresql)".into(),
            CITE_STATS,
        )
    })
}

/// A Boolean-like live setting as `on`/`off` (`None` when unread).
fn on(facts: &LiveFacts, name: &str) -> Option<bool> {
    crate::advise::guc::parse_bool(facts.value(name)?)
}

/// `fsync`, `full_page_writes`, `synchronous_commit`, `wal_level`: settings that trade
/// safety for speed, each named with its risk.
fn reliability(facts: &LiveFacts) -> Vec<Item> {
    let mut items = Vec::new();
    let risky = [
        (
            "fsync",
            Status::Bad,
            "with fsync off an operating-system crash or power loss can corrupt the whole cluster, not only lose the last transactions",
        ),
        (
            "full_page_writes",
            Status::Bad,
            "with full_page_writes off a crash during a page write leaves a torn page that recovery cannot repair (unless the file system guarantees atomic 8 kB writes)",
        ),
    ];
    for (name, bad, risk) in risky {
        let Some(setting) = facts.setting(name) else {
            items.push(unavailable(
                name,
                "pg_settings was not read",
                CITE_RELIABILITY,
            ));
            continue;
        };
        let is_on = on(facts, name) == Some(true);
        items.push(item(
            name,
            if is_on { Status::Ok } else { bad },
            setting.setting.clone(),
            setting.origin(),
            "on".into(),
            if is_on { String::new() } else { risk.into() },
            if is_on {
                String::new()
            } else {
                format!("{name} = on in postgresql.conf, then reload")
            },
            CITE_RELIABILITY,
        ));
        if let Some(last) = items.last_mut() {
            if !is_on {
                last.conf = Some((name.to_string(), "on".into()));
            }
        }
    }
    if let Some(setting) = facts.setting("synchronous_commit") {
        let off = setting.setting == "off";
        items.push(item(
            "synchronous_commit",
            if off { Status::Warn } else { Status::Ok },
            setting.setting.clone(),
            setting.origin(),
            "on (or off only where losing the last transactions is acceptable)".into(),
            if off {
                "with synchronous_commit off a crash loses the transactions committed in the last moments (up to 3 × wal_writer_delay), though it never corrupts data".into()
            } else {
                String::new()
            },
            if off {
                "synchronous_commit = on, or SET it off only in the sessions that may lose work"
                    .into()
            } else {
                String::new()
            },
            CITE_RELIABILITY,
        ));
    }
    if let Some(setting) = facts.setting("wal_level") {
        let minimal = setting.setting == "minimal";
        items.push(item(
            "wal_level",
            if minimal { Status::Warn } else { Status::Ok },
            setting.setting.clone(),
            setting.origin(),
            "replica".into(),
            if minimal {
                "wal_level minimal allows neither point-in-time recovery nor replication".into()
            } else {
                String::new()
            },
            if minimal {
                "wal_level = replica, then restart".into()
            } else {
                String::new()
            },
            CITE_TUNER,
        ));
    }
    items
}

/// `jit` for the workload and `wal_compression` (pgtune sets both).
fn jit_and_wal_compression(facts: &LiveFacts, workload: Workload) -> Vec<Item> {
    let mut items = Vec::new();
    if let Some(setting) = facts.setting("jit") {
        let short_queries = matches!(workload, Workload::Oltp | Workload::Web);
        let warn = short_queries && on(facts, "jit") == Some(true);
        let mut it = item(
            "jit",
            if warn { Status::Warn } else { Status::Ok },
            setting.setting.clone(),
            setting.origin(),
            if short_queries { "off" } else { "on" }.into(),
            if warn {
                format!("a {} workload runs many short queries; compiling them costs more than it saves whenever the planner's estimate crosses jit_above_cost", workload.name())
            } else {
                String::new()
            },
            if warn {
                "jit = off, then reload".into()
            } else {
                String::new()
            },
            CITE_PGTUNE,
        );
        if warn {
            it.conf = Some(("jit".into(), "off".into()));
        }
        items.push(it);
    }
    if let Some(setting) = facts.setting("wal_compression") {
        let best = match &setting.enumvals {
            Some(vals) if vals.iter().any(|v| v == "lz4") => "lz4",
            _ => "pglz",
        };
        let off = on(facts, "wal_compression") == Some(false) || setting.setting == "off";
        let mut it = item(
            "wal_compression",
            if off { Status::Warn } else { Status::Ok },
            setting.setting.clone(),
            setting.origin(),
            best.into(),
            if off {
                "full-page images make most of the WAL after each checkpoint; compressing them costs a little CPU and writes, archives and replicates less".into()
            } else {
                String::new()
            },
            if off {
                format!("wal_compression = {best}, then reload")
            } else {
                String::new()
            },
            CITE_PGTUNE,
        );
        if off {
            it.conf = Some(("wal_compression".into(), best.into()));
        }
        items.push(it);
    }
    items
}

/// `autovacuum` on, and its settings.
fn autovacuum(facts: &LiveFacts) -> Option<Item> {
    let setting = facts.setting("autovacuum")?;
    let is_on = on(facts, "autovacuum") == Some(true);
    let shown: Vec<String> = [
        "autovacuum_max_workers",
        "autovacuum_naptime",
        "autovacuum_vacuum_threshold",
        "autovacuum_vacuum_scale_factor",
        "autovacuum_vacuum_cost_limit",
    ]
    .iter()
    .filter_map(|n| {
        let s = facts.setting(n)?;
        Some(format!(
            "{n} {}{}",
            s.setting,
            s.unit.as_deref().unwrap_or("")
        ))
    })
    .collect();
    let mut it = item(
        "autovacuum",
        if is_on { Status::Ok } else { Status::Bad },
        format!("{} ({})", setting.setting, shown.join(", ")),
        setting.origin(),
        "on".into(),
        if is_on {
            String::new()
        } else {
            "without autovacuum dead rows pile up, tables and indexes bloat, and transaction IDs run towards wraparound, where the server stops accepting writes".into()
        },
        if is_on {
            String::new()
        } else {
            "autovacuum = on, then reload".into()
        },
        CITE_TUNER,
    );
    if !is_on {
        it.conf = Some(("autovacuum".into(), "on".into()));
    }
    Some(it)
}

/// The dead tuples at which autovacuum vacuums `t`: `threshold + scale_factor × reltuples`
/// with the table's reloptions over the settings, capped by PostgreSQL 18's
/// `autovacuum_vacuum_max_threshold` (-1: no cap).
pub fn vacuum_threshold(t: &TableVacuum, facts: &LiveFacts) -> f64 {
    let setting = |name: &str, default: f64| {
        facts
            .setting(name)
            .and_then(LiveSetting::number)
            .unwrap_or(default)
    };
    let base = t
        .vacuum_threshold
        .unwrap_or_else(|| setting("autovacuum_vacuum_threshold", DEFAULT_VACUUM_THRESHOLD));
    let scale = t.vacuum_scale_factor.unwrap_or_else(|| {
        setting(
            "autovacuum_vacuum_scale_factor",
            DEFAULT_VACUUM_SCALE_FACTOR,
        )
    });
    // reltuples is -1 until the first VACUUM or ANALYZE; autovacuum then counts it as 0.
    let threshold = base + scale * t.reltuples.max(0.0);
    match facts
        .setting("autovacuum_vacuum_max_threshold")
        .and_then(LiveSetting::number)
    {
        Some(cap) if cap >= 0.0 => threshold.min(cap),
        _ => threshold,
    }
}

/// Tables whose dead tuples are far past their autovacuum threshold.
fn autovacuum_backlog(facts: &LiveFacts) -> Item {
    const NAME: &str = "autovacuum backlog";
    let tables = match facts.tables.read() {
        Ok(t) => t,
        Err(why) => return unavailable(NAME, why, CITE_VACUUM),
    };
    let mut behind: Vec<(&TableVacuum, f64)> = tables
        .iter()
        .map(|t| (t, vacuum_threshold(t, facts)))
        .filter(|(t, threshold)| t.n_dead_tup as f64 > AUTOVACUUM_FAR_PAST_FACTOR * threshold)
        .collect();
    behind.sort_by_key(|b| std::cmp::Reverse(b.0.n_dead_tup));
    let source = format!(
        "pg_stat_user_tables of database \"{}\" (live)",
        facts.database
    );
    if behind.is_empty() {
        return item(
            NAME,
            Status::Ok,
            format!(
                "{} table(s), none past {AUTOVACUUM_FAR_PAST_FACTOR}× its threshold",
                tables.len()
            ),
            source,
            "—".into(),
            String::new(),
            String::new(),
            CITE_VACUUM,
        );
    }
    let listed: Vec<String> = behind
        .iter()
        .take(MAX_LISTED)
        .map(|(t, threshold)| {
            let off = if t.autovacuum_enabled == Some(false) {
                ", autovacuum_enabled = false"
            } else {
                ""
            };
            format!(
                "{} ({} dead, threshold {:.0}{off})",
                t.table, t.n_dead_tup, threshold
            )
        })
        .collect();
    let first = behind[0].0;
    item(
        NAME,
        Status::Warn,
        format!(
            "{} table(s) past {AUTOVACUUM_FAR_PAST_FACTOR}× the threshold: {}",
            behind.len(),
            listed.join("; ")
        ),
        source,
        "dead tuples below the threshold: autovacuum keeping up".into(),
        "dead tuples far past autovacuum_vacuum_threshold + autovacuum_vacuum_scale_factor × reltuples mean autovacuum is off for the table, blocked (a long transaction, a lock) or too slow (autovacuum_vacuum_cost_limit, autovacuum_max_workers); the table and its indexes bloat".into(),
        format!(
            "VACUUM (VERBOSE) {}; then find what holds autovacuum back (pg_stat_activity's oldest xact_start, the table's reloptions)",
            first.table
        ),
        CITE_VACUUM,
    )
}

/// The cache hit ratio of each database.
fn hit_ratios(facts: &LiveFacts) -> Vec<Item> {
    let databases = match facts.databases.read() {
        Ok(d) => d,
        Err(why) => return vec![unavailable("cache hit ratio", why, CITE_TUNER)],
    };
    databases.iter().map(hit_ratio).collect()
}

/// One database's share of block accesses found in shared buffers.
pub fn hit_ratio(db: &DatabaseStats) -> Item {
    let name = format!("cache hit ratio ({})", db.datname);
    let accesses = db.blks_hit.saturating_add(db.blks_read);
    let source = "pg_stat_database (live)".to_string();
    if accesses < HIT_RATIO_MIN_ACCESSES {
        return item(
            &name,
            Status::Ok,
            format!("{accesses} block accesses: too few to judge"),
            source,
            format!("≥ {:.0}%", HIT_RATIO_OK * 100.0),
            String::new(),
            String::new(),
            CITE_TUNER,
        );
    }
    let ratio = db.blks_hit as f64 / accesses as f64;
    let ok = ratio >= HIT_RATIO_OK;
    item(
        &name,
        if ok { Status::Ok } else { Status::Warn },
        format!(
            "{:.2}% ({} hits, {} reads)",
            ratio * 100.0,
            db.blks_hit,
            db.blks_read
        ),
        source,
        format!("≥ {:.0}%", HIT_RATIO_OK * 100.0),
        if ok {
            String::new()
        } else {
            "blocks not found in shared buffers are read from the kernel's page cache or the disk; a working set larger than shared_buffers shows as a low ratio (a large sequential scan lowers it too, through its ring buffer)".into()
        },
        if ok {
            String::new()
        } else {
            "raise shared_buffers towards 25% of RAM (see the shared_buffers item), or find the queries reading the most blocks (pg_stat_statements)".into()
        },
        CITE_TUNER,
    )
}

/// Requested against timed checkpoints.
pub fn checkpoints(facts: &LiveFacts) -> Item {
    const NAME: &str = "checkpoints";
    let stats = match facts.checkpointer.read() {
        Ok(s) => s,
        Err(why) => return unavailable(NAME, why, CITE_WAL),
    };
    let total = stats.num_timed.saturating_add(stats.num_requested);
    let source = "pg_stat_checkpointer (live)".to_string();
    let max_wal = facts.setting("max_wal_size");
    let max_wal_bytes = max_wal.and_then(LiveSetting::bytes);
    let found = format!(
        "{} requested, {} timed{}",
        stats.num_requested,
        stats.num_timed,
        max_wal_bytes
            .map(|b| format!(" (max_wal_size {})", human_bytes(b)))
            .unwrap_or_default()
    );
    let share = if total > 0 {
        stats.num_requested as f64 / total as f64
    } else {
        0.0
    };
    if share <= REQUESTED_CHECKPOINT_SHARE_WARN {
        return item(
            NAME,
            Status::Ok,
            found,
            source,
            format!(
                "requested ≤ {:.0}% of all",
                REQUESTED_CHECKPOINT_SHARE_WARN * 100.0
            ),
            String::new(),
            String::new(),
            CITE_WAL,
        );
    }
    let doubled = max_wal_bytes
        .and_then(|b| b.checked_mul(2))
        .map(|b| format!("{}MB", b >> 20));
    item(
        NAME,
        Status::Warn,
        found,
        source,
        match &doubled {
            Some(v) => format!("max_wal_size = '{v}' (twice the live value)"),
            None => "a larger max_wal_size".into(),
        },
        format!(
            "{:.0}% of the checkpoints were requested, most likely because WAL reached max_wal_size before checkpoint_timeout: checkpoints come early, write more, and every page changed after each writes a full-page image again",
            share * 100.0
        ),
        match &doubled {
            Some(v) => format!(
                "ALTER SYSTEM SET max_wal_size = '{v}'; SELECT pg_reload_conf(); (no restart needed)"
            ),
            None => "raise max_wal_size, then reload".into(),
        },
        CITE_WAL,
    )
}

/// Temporary files: sorts and hashes that did not fit in `work_mem`.
pub fn temp_files(facts: &LiveFacts) -> Item {
    const NAME: &str = "temp files";
    let databases = match facts.databases.read() {
        Ok(d) => d,
        Err(why) => return unavailable(NAME, why, CITE_TUNER),
    };
    let files: i64 = databases.iter().map(|d| d.temp_files).sum();
    let bytes: i64 = databases.iter().map(|d| d.temp_bytes).sum();
    let work_mem = facts.setting("work_mem").and_then(LiveSetting::bytes);
    let mut per_db: Vec<&DatabaseStats> = databases.iter().filter(|d| d.temp_files > 0).collect();
    per_db.sort_by_key(|b| std::cmp::Reverse(b.temp_bytes));
    let listed: Vec<String> = per_db
        .iter()
        .take(MAX_LISTED)
        .map(|d| {
            format!(
                "{} {} files {}",
                d.datname,
                d.temp_files,
                human_bytes(d.temp_bytes.max(0) as u64)
            )
        })
        .collect();
    let wm = work_mem
        .map(|b| format!(" (work_mem {})", human_bytes(b)))
        .unwrap_or_default();
    let source = "pg_stat_database.temp_files, temp_bytes (live)".to_string();
    if files == 0 {
        return item(
            NAME,
            Status::Ok,
            format!("none{wm}"),
            source,
            "—".into(),
            String::new(),
            String::new(),
            CITE_TUNER,
        );
    }
    let doubled = work_mem.and_then(|b| b.checked_mul(2)).map(|b| b >> 10);
    item(
        NAME,
        Status::Warn,
        format!(
            "{files} files, {} since the reset{wm}: {}",
            human_bytes(bytes.max(0) as u64),
            listed.join(", ")
        ),
        source,
        match doubled {
            Some(kb) => format!("work_mem = '{kb}kB' where these queries run"),
            None => "a larger work_mem where these queries run".into(),
        },
        "a sort or hash larger than work_mem spills to temporary files, written and read back through the disk".into(),
        "set log_temp_files = 0 to log the queries that spill, then raise work_mem for them (ALTER ROLE … SET work_mem, or SET in the session); raising it for everyone multiplies by every connection".into(),
        CITE_TUNER,
    )
}

/// Who writes dirty shared buffers: the checkpointer, the background writer, or backends.
fn buffer_writes(facts: &LiveFacts) -> Item {
    const NAME: &str = "buffer writes";
    let (checkpointer, bgwriter, io) = match (
        facts.checkpointer.read(),
        facts.bgwriter.read(),
        facts.stat_io.read(),
    ) {
        (Ok(c), Ok(b), Ok(io)) => (c, b, io),
        (Err(why), _, _) | (_, Err(why), _) | (_, _, Err(why)) => {
            return unavailable(NAME, why, CITE_STATS)
        }
    };
    let backends: i64 = io
        .iter()
        .filter(|r| r.backend_type != "checkpointer" && r.backend_type != "background writer")
        .map(|r| r.normal_writes)
        .sum();
    let total = checkpointer
        .buffers_written
        .saturating_add(bgwriter.buffers_clean)
        .saturating_add(backends);
    let share = if total > 0 {
        backends as f64 / total as f64
    } else {
        0.0
    };
    let found = format!(
        "checkpointer {}, background writer {} (stopped at bgwriter_lru_maxpages {} times), backends {} ({:.0}%)",
        checkpointer.buffers_written,
        bgwriter.buffers_clean,
        bgwriter.maxwritten_clean,
        backends,
        share * 100.0
    );
    let source = "pg_stat_checkpointer, pg_stat_bgwriter, pg_stat_io (live)".to_string();
    if share <= BACKEND_WRITE_SHARE_WARN {
        return item(
            NAME,
            Status::Ok,
            found,
            source,
            format!(
                "backends ≤ {:.0}% of the writes",
                BACKEND_WRITE_SHARE_WARN * 100.0
            ),
            String::new(),
            String::new(),
            CITE_STATS,
        );
    }
    item(
        NAME,
        Status::Warn,
        found,
        source,
        format!(
            "backends ≤ {:.0}% of the writes",
            BACKEND_WRITE_SHARE_WARN * 100.0
        ),
        "a backend that must write a dirty buffer before it can reuse it waits for that write; the background writer is meant to have cleaned it".into(),
        "raise bgwriter_lru_maxpages (and bgwriter_lru_multiplier) so the background writer cleans ahead; with checkpoints frequent too, raise max_wal_size".into(),
        CITE_STATS,
    )
}

/// `pg_stat_io`: reads per backend type, hits, and I/O times when `track_io_timing` is on.
fn stat_io(facts: &LiveFacts) -> Item {
    const NAME: &str = "pg_stat_io";
    let rows = match facts.stat_io.read() {
        Ok(r) => r,
        Err(why) => return unavailable(NAME, why, CITE_STATS),
    };
    let timing = on(facts, "track_io_timing") == Some(true);
    let mut sorted: Vec<_> = rows.iter().filter(|r| r.reads > 0 || r.hits > 0).collect();
    sorted.sort_by_key(|b| std::cmp::Reverse(b.reads));
    let shown: Vec<String> = sorted
        .iter()
        .take(MAX_LISTED)
        .map(|r| {
            let accesses = r.reads.saturating_add(r.hits);
            let hit = if accesses > 0 {
                format!(", hit {:.1}%", r.hits as f64 * 100.0 / accesses as f64)
            } else {
                String::new()
            };
            let time = if timing && r.reads > 0 {
                format!(", {:.3} ms/read", r.read_time_ms / r.reads as f64)
            } else {
                String::new()
            };
            format!("{} {} reads{hit}{time}", r.backend_type, r.reads)
        })
        .collect();
    let mut found = if shown.is_empty() {
        "no reads yet".to_string()
    } else {
        shown.join("; ")
    };
    if !timing {
        found.push_str(" (track_io_timing is off: no I/O times)");
    }
    item(
        NAME,
        Status::Ok,
        found,
        "pg_stat_io (live)".into(),
        if timing {
            "—".into()
        } else {
            "track_io_timing = on to see I/O times (see the track_io_timing item for its cost here)"
                .into()
        },
        String::new(),
        String::new(),
        CITE_STATS,
    )
}

/// Connection slots in use, and the slots kept for superusers.
fn connections(facts: &LiveFacts) -> Vec<Item> {
    let conn: &Connections = match facts.connections.read() {
        Ok(c) => c,
        Err(why) => return vec![unavailable("connections", why, CITE_TUNER)],
    };
    let number = |n: &str| facts.setting(n).and_then(LiveSetting::number);
    let (Some(max), Some(reserved)) = (
        number("max_connections"),
        number("superuser_reserved_connections"),
    ) else {
        return vec![unavailable(
            "connections",
            "max_connections was not read from pg_settings",
            CITE_TUNER,
        )];
    };
    let reserved_roles = number("reserved_connections").unwrap_or(0.0);
    vec![
        connection_use(conn, max, reserved, reserved_roles),
        superuser_reserved(max, reserved),
    ]
}

/// Client backends against the slots open to ordinary roles.
pub fn connection_use(conn: &Connections, max: f64, reserved: f64, reserved_roles: f64) -> Item {
    let slots = (max - reserved - reserved_roles).max(1.0);
    let used = conn.client_backends as f64;
    let share = used / slots;
    let status = if share >= CONNECTIONS_BAD {
        Status::Bad
    } else if share >= CONNECTIONS_WARN {
        Status::Warn
    } else {
        Status::Ok
    };
    item(
        "connections",
        status,
        format!(
            "{} of {:.0} ({:.0}%; max_connections {max:.0} − {reserved:.0} superuser_reserved_connections − {reserved_roles:.0} reserved_connections)",
            conn.client_backends,
            slots,
            share * 100.0
        ),
        "pg_stat_activity (live)".into(),
        format!("below {:.0}%", CONNECTIONS_WARN * 100.0),
        if status == Status::Ok {
            String::new()
        } else {
            "when every slot is taken new connections fail with \"too many clients already\"".into()
        },
        if status == Status::Ok {
            String::new()
        } else {
            "put a connection pooler (PgBouncer) in front of the server, or raise max_connections (a restart; each slot costs memory)".into()
        },
        CITE_TUNER,
    )
}

/// `superuser_reserved_connections`: none kept means no way in when the slots are full;
/// more than a fifth of the slots is slots taken from everyone else.
pub fn superuser_reserved(max: f64, reserved: f64) -> Item {
    let share = reserved / max.max(1.0);
    let (status, reason) = if reserved <= 0.0 {
        (Status::Bad, "with no slot kept for superusers, a server whose connections are all taken cannot be entered to see why or end sessions")
    } else if share > 0.20 {
        (
            Status::Warn,
            "more than a fifth of the slots kept for superusers is slots taken from the applications",
        )
    } else {
        (Status::Ok, "")
    };
    item(
        "superuser_reserved_connections",
        status,
        format!("{reserved:.0} of {max:.0}"),
        "pg_settings (live)".into(),
        "3 (PostgreSQL's default)".into(),
        reason.into(),
        if status == Status::Ok {
            String::new()
        } else {
            "superuser_reserved_connections = 3, then restart".into()
        },
        CITE_TUNER,
    )
}

/// Unused, duplicate and invalid indexes of the connected database.
fn indexes(facts: &LiveFacts) -> Vec<Item> {
    let all = match facts.indexes.read() {
        Ok(i) => i,
        Err(why) => {
            return ["unused indexes", "duplicate indexes", "invalid indexes"]
                .iter()
                .map(|n| unavailable(n, why, CITE_TUNER))
                .collect()
        }
    };
    let age = facts
        .databases
        .read()
        .ok()
        .and_then(|d| d.iter().find(|d| d.datname == facts.database))
        .and_then(|d| d.stats_age_seconds)
        .map(|s| format!(" over {}", duration_words(s)))
        .unwrap_or_default();
    vec![
        unused_indexes(all, &facts.database, &age),
        duplicate_indexes(all, &facts.database),
        invalid_indexes(all, &facts.database),
    ]
}

/// Indexes never scanned since the statistics were reset, that no constraint needs.
pub fn unused_indexes(all: &[IndexFacts], database: &str, age: &str) -> Item {
    let mut unused: Vec<&IndexFacts> = all
        .iter()
        .filter(|i| i.idx_scan == 0 && !i.unique && !i.primary && !i.constraint)
        .collect();
    unused.sort_by_key(|b| std::cmp::Reverse(b.size_bytes));
    let source = format!("pg_stat_user_indexes of database \"{database}\" (live)");
    if unused.is_empty() {
        return item(
            "unused indexes",
            Status::Ok,
            format!("none of {} indexes", all.len()),
            source,
            "—".into(),
            String::new(),
            String::new(),
            CITE_TUNER,
        );
    }
    let total: i64 = unused.iter().map(|i| i.size_bytes).sum();
    let listed: Vec<String> = unused
        .iter()
        .take(MAX_LISTED)
        .map(|i| {
            format!(
                "{} on {} ({})",
                i.index,
                i.table,
                human_bytes(i.size_bytes.max(0) as u64)
            )
        })
        .collect();
    item(
        "unused indexes",
        Status::Warn,
        format!(
            "{} never scanned{age}, {}: {}",
            unused.len(),
            human_bytes(total.max(0) as u64),
            listed.join(", ")
        ),
        source,
        "drop the indexes no query uses".into(),
        "every insert and update maintains each index, and each takes space in shared buffers and on disk; these were not scanned since the statistics were reset (check the replicas too: their scans are counted there)".into(),
        format!(
            "DROP INDEX CONCURRENTLY {}; (after checking that no query on a replica or a rare report needs it)",
            unused[0].index
        ),
        CITE_TUNER,
    )
}

/// Indexes with the same table, method, keys, operator classes, expressions and predicate.
pub fn duplicate_indexes(all: &[IndexFacts], database: &str) -> Item {
    let mut groups: std::collections::BTreeMap<(&str, &str), Vec<&IndexFacts>> =
        std::collections::BTreeMap::new();
    for i in all {
        groups
            .entry((i.table.as_str(), i.key.as_str()))
            .or_default()
            .push(i);
    }
    let mut dups: Vec<Vec<&IndexFacts>> = groups.into_values().filter(|g| g.len() > 1).collect();
    for group in &mut dups {
        group.sort_by(|a, b| a.index.cmp(&b.index));
    }
    let source = format!("pg_index of database \"{database}\" (live)");
    if dups.is_empty() {
        return item(
            "duplicate indexes",
            Status::Ok,
            format!("none of {} indexes", all.len()),
            source,
            "—".into(),
            String::new(),
            String::new(),
            CITE_TUNER,
        );
    }
    let listed: Vec<String> = dups
        .iter()
        .take(MAX_LISTED)
        .map(|g| {
            let names: Vec<&str> = g.iter().map(|i| i.index.as_str()).collect();
            format!("{} on {}", names.join(" = "), g[0].table)
        })
        .collect();
    // Keep the one a constraint needs (or the first); drop another.
    let drop = dups[0]
        .iter()
        .find(|i| !i.constraint && !i.primary)
        .unwrap_or(&dups[0][dups[0].len() - 1]);
    item(
        "duplicate indexes",
        Status::Warn,
        format!("{} set(s): {}", dups.len(), listed.join("; ")),
        source,
        "one index per definition".into(),
        "indexes with the same table, method, keys, operator classes, expressions and predicate answer the same queries; each extra one costs every write and its space".into(),
        format!("DROP INDEX CONCURRENTLY {}; (keep the one a constraint uses)", drop.index),
        CITE_TUNER,
    )
}

/// Indexes left invalid by a failed `CREATE INDEX CONCURRENTLY` or `REINDEX`.
pub fn invalid_indexes(all: &[IndexFacts], database: &str) -> Item {
    let invalid: Vec<&str> = all
        .iter()
        .filter(|i| !i.valid)
        .map(|i| i.index.as_str())
        .collect();
    let source = format!("pg_index.indisvalid of database \"{database}\" (live)");
    if invalid.is_empty() {
        return item(
            "invalid indexes",
            Status::Ok,
            "none".into(),
            source,
            "—".into(),
            String::new(),
            String::new(),
            CITE_TUNER,
        );
    }
    item(
        "invalid indexes",
        Status::Warn,
        invalid.join(", "),
        source,
        "none".into(),
        "an invalid index (a CREATE INDEX CONCURRENTLY or REINDEX that failed) is maintained on every write but never used by a query".into(),
        format!("REINDEX INDEX CONCURRENTLY {}; or DROP INDEX CONCURRENTLY it", invalid[0]),
        CITE_TUNER,
    )
}

/// Prepared transactions hold locks and the xmin horizon until committed.
fn prepared_xacts(facts: &LiveFacts) -> Item {
    const NAME: &str = "prepared transactions";
    let p = match facts.prepared_xacts.read() {
        Ok(p) => p,
        Err(why) => return unavailable(NAME, why, CITE_TUNER),
    };
    let source = "pg_prepared_xacts (live)".to_string();
    if p.count == 0 {
        return item(
            NAME,
            Status::Ok,
            "none".into(),
            source,
            "—".into(),
            String::new(),
            String::new(),
            CITE_TUNER,
        );
    }
    item(
        NAME,
        Status::Warn,
        format!(
            "{}, the oldest prepared {} ago",
            p.count,
            duration_words(p.oldest_age_seconds.unwrap_or(0.0))
        ),
        source,
        "none left behind".into(),
        "a prepared transaction keeps its locks and holds back the xmin horizon (so VACUUM cannot remove dead rows) until it is committed or rolled back, even across restarts".into(),
        "COMMIT PREPARED 'gid' or ROLLBACK PREPARED 'gid' (SELECT gid FROM pg_prepared_xacts) once the transaction manager that made it is known to be done with it".into(),
        CITE_TUNER,
    )
}

/// How long the statistics behind the items above cover.
pub fn stats_age(facts: &LiveFacts) -> Item {
    const NAME: &str = "statistics age";
    let db_age = match &facts.databases {
        Reading::Read(d) => d
            .iter()
            .find(|d| d.datname == facts.database)
            .and_then(|d| d.stats_age_seconds),
        Reading::Unavailable(_) => None,
    };
    // Statistics never reset are as old as the server (they survive a clean restart, and
    // uptime is the least they cover).
    let age = db_age.or(facts.uptime_seconds);
    let Some(age) = age else {
        return unavailable(
            NAME,
            "neither stats_reset nor the uptime was read",
            CITE_STATS,
        );
    };
    let young = age < STATS_MIN_AGE_SECONDS;
    item(
        NAME,
        if young { Status::Warn } else { Status::Ok },
        format!(
            "{}{}",
            duration_words(age),
            facts
                .uptime_seconds
                .map(|u| format!(" (server up {})", duration_words(u)))
                .unwrap_or_default()
        ),
        "pg_stat_database.stats_reset, pg_postmaster_start_time() (live)".into(),
        format!("at least {}", duration_words(STATS_MIN_AGE_SECONDS)),
        if young {
            "the run-time figures above cover less than a day: a daily peak, a nightly batch or a weekly report may not be in them".into()
        } else {
            String::new()
        },
        if young {
            "run advise again after a full day of normal load".into()
        } else {
            String::new()
        },
        CITE_TUNER,
    )
}
