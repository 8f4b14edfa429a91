//! What a sample means: `pg_stat_io` counters and their rates between two samples, the
//! in-flight I/Os grouped by backend and by relation, the I/O workers, as one [`Report`]
//! (also the JSON document).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::{Map, Value};

use super::*;

/// The `pg_stat_io` counters summed per backend type (over every object and context).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(super) struct Counters {
    pub(super) reads: f64,
    pub(super) read_bytes: f64,
    pub(super) read_time_ms: f64,
    pub(super) writes: f64,
    pub(super) write_bytes: f64,
    pub(super) extends: f64,
    pub(super) hits: f64,
    pub(super) evictions: f64,
}

/// A column of a JSON row as a number (`null`, missing: 0 — pg_stat_io leaves counters of
/// impossible combinations NULL).
pub(super) fn number(row: &Map<String, Value>, column: &str) -> f64 {
    row.get(column).and_then(Value::as_f64).unwrap_or(0.0)
}

/// A column of a JSON row as text.
pub(super) fn text<'a>(row: &'a Map<String, Value>, column: &str) -> Option<&'a str> {
    row.get(column).and_then(Value::as_str)
}

pub(super) fn counters_by_backend_type(
    stat_io: &[Map<String, Value>],
) -> BTreeMap<String, Counters> {
    let mut sums: BTreeMap<String, Counters> = BTreeMap::new();
    for row in stat_io {
        let Some(backend_type) = text(row, "backend_type") else {
            continue;
        };
        let sum = sums.entry(backend_type.to_string()).or_default();
        sum.reads += number(row, "reads");
        sum.read_bytes += number(row, "read_bytes");
        sum.read_time_ms += number(row, "read_time");
        sum.writes += number(row, "writes");
        sum.write_bytes += number(row, "write_bytes");
        sum.extends += number(row, "extends");
        sum.hits += number(row, "hits");
        sum.evictions += number(row, "evictions");
    }
    sums
}

/// Per-second rates of one backend type over one interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rates {
    /// `pg_stat_io.backend_type`, or `total`.
    pub backend_type: String,
    /// Read I/Os per second.
    pub reads_per_s: f64,
    /// Megabytes (10^6 bytes) read per second.
    pub read_mb_per_s: f64,
    /// Milliseconds spent reading per second (needs track_io_timing; else 0).
    pub read_time_ms_per_s: f64,
    /// Shared-buffer hits per second.
    pub hits_per_s: f64,
    /// Write I/Os per second.
    pub writes_per_s: f64,
    /// Megabytes written per second.
    pub write_mb_per_s: f64,
    /// Relation extensions per second.
    pub extends_per_s: f64,
    /// Buffers evicted per second.
    pub evictions_per_s: f64,
}

/// Rates per backend type between two samples `elapsed_s` apart, and a `total` row.
/// A backend type whose counters went down (statistics reset) has no rate this interval.
pub(super) fn rates_between(
    before: &BTreeMap<String, Counters>,
    after: &BTreeMap<String, Counters>,
    elapsed_s: f64,
) -> Vec<Rates> {
    let elapsed_s = elapsed_s.max(1e-6);
    let mut total = Counters::default();
    let mut rates = Vec::new();
    let make = |backend_type: &str, d: &Counters| Rates {
        backend_type: backend_type.to_string(),
        reads_per_s: d.reads / elapsed_s,
        read_mb_per_s: d.read_bytes / 1e6 / elapsed_s,
        read_time_ms_per_s: d.read_time_ms / elapsed_s,
        hits_per_s: d.hits / elapsed_s,
        writes_per_s: d.writes / elapsed_s,
        write_mb_per_s: d.write_bytes / 1e6 / elapsed_s,
        extends_per_s: d.extends / elapsed_s,
        evictions_per_s: d.evictions / elapsed_s,
    };
    for (backend_type, now) in after {
        let then = before.get(backend_type).copied().unwrap_or_default();
        let d = Counters {
            reads: now.reads - then.reads,
            read_bytes: now.read_bytes - then.read_bytes,
            read_time_ms: now.read_time_ms - then.read_time_ms,
            writes: now.writes - then.writes,
            write_bytes: now.write_bytes - then.write_bytes,
            extends: now.extends - then.extends,
            hits: now.hits - then.hits,
            evictions: now.evictions - then.evictions,
        };
        let fields = [
            d.reads,
            d.read_bytes,
            d.read_time_ms,
            d.writes,
            d.write_bytes,
            d.extends,
            d.hits,
            d.evictions,
        ];
        if fields.iter().any(|&v| v < 0.0) {
            continue;
        }
        total.reads += d.reads;
        total.read_bytes += d.read_bytes;
        total.read_time_ms += d.read_time_ms;
        total.writes += d.writes;
        total.write_bytes += d.write_bytes;
        total.extends += d.extends;
        total.hits += d.hits;
        total.evictions += d.evictions;
        rates.push(make(backend_type, &d));
    }
    rates.push(make("total", &total));
    rates
}

/// One in-flight I/O: pg_aios's row as the server gave it, with names.
#[derive(Debug, Clone, Serialize)]
pub(super) struct InFlight {
    /// Every column of `pg_aios`, spelled as there.
    pub(super) pg_aios: Map<String, Value>,
    /// `pg_stat_activity.backend_type` of `pid` (null if the backend is gone).
    pub(super) backend_type: Option<String>,
    /// The file of `target_desc`, resolved.
    pub(super) relation: Option<RelationRef>,
}

/// In-flight I/Os of one backend.
#[derive(Debug, Clone, Serialize)]
pub(super) struct ByBackend {
    pub(super) pid: i64,
    pub(super) backend_type: Option<String>,
    pub(super) ios: u64,
    pub(super) bytes: u64,
    /// How many I/Os are in each pg_aios state.
    pub(super) states: BTreeMap<String, u64>,
    /// `pg_stat_activity.datname` of the backend.
    pub(super) database: Option<String>,
    /// `pg_stat_activity.state` (`active`, `idle in transaction`, …).
    pub(super) state: Option<String>,
    /// `wait_event_type:wait_event`, when it waits.
    pub(super) wait: Option<String>,
    /// The first line of its query (`pg_read_all_stats` shows other roles' queries).
    pub(super) query: Option<String>,
}

/// What `pg_stat_activity` says about one backend, for the in-flight view.
fn activity_of(
    row: &Map<String, Value>,
) -> (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
) {
    let owned = |column: &str| text(row, column).map(str::to_string);
    let wait = match (text(row, "wait_event_type"), text(row, "wait_event")) {
        (Some(kind), Some(event)) => Some(format!("{kind}:{event}")),
        _ => None,
    };
    let query = text(row, "query")
        .map(|q| {
            q.trim_start()
                .lines()
                .next()
                .unwrap_or_default()
                .trim_end()
                .to_string()
        })
        .filter(|q| !q.is_empty());
    (owned("datname"), owned("state"), wait, query)
}

/// In-flight I/Os on one relation (or unresolved file).
#[derive(Debug, Clone, Serialize)]
pub(super) struct ByRelation {
    pub(super) relation: String,
    pub(super) file: Option<String>,
    pub(super) ios: u64,
    pub(super) bytes: u64,
}

/// The I/O workers (`backend_type = 'io worker'`).
#[derive(Debug, Clone, Serialize)]
pub(super) struct IoWorkers {
    pub(super) count: u64,
    pub(super) busy: u64,
    /// pid and wait_event of each busy worker.
    pub(super) busy_pids: Vec<i64>,
}

/// Everything one sample shows; `--json` prints it as it is.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Report {
    pub(super) server: ServerFacts,
    /// `clock_timestamp()` on the server.
    pub(super) sampled_at: String,
    /// Seconds since the previous sample (null for the first).
    pub(super) interval_s: Option<f64>,
    /// `transaction_read_only` of the transaction the sample ran in.
    pub(super) transaction_read_only: bool,
    /// `--pid`, if given: only that backend's I/Os are listed.
    pub(super) pid_filter: Option<i32>,
    pub(super) in_flight: Vec<InFlight>,
    pub(super) in_flight_by_backend: Vec<ByBackend>,
    pub(super) in_flight_by_relation: Vec<ByRelation>,
    pub(super) io_workers: IoWorkers,
    /// Per backend type and `total`, from pg_stat_io deltas (null for the first sample).
    pub(super) rates: Option<Vec<Rates>>,
    /// pg_stat_io summed per backend type (cumulative since the last reset).
    pub(super) pg_stat_io_totals: BTreeMap<String, Counters>,
    /// The raw rows.
    pub(super) pg_stat_io: Vec<Map<String, Value>>,
    pub(super) pg_stat_activity: Vec<Map<String, Value>>,
}

pub(super) fn build_report(
    facts: &ServerFacts,
    rows: Rows,
    totals: BTreeMap<String, Counters>,
    rates: Option<Vec<Rates>>,
    interval_s: Option<f64>,
    pid_filter: Option<i32>,
) -> Report {
    let backend_types: HashMap<i64, String> = rows
        .activity
        .iter()
        .filter_map(|row| {
            Some((
                row.get("pid")?.as_i64()?,
                text(row, "backend_type")?.to_string(),
            ))
        })
        .collect();
    let activity_by_pid: HashMap<i64, &Map<String, Value>> = rows
        .activity
        .iter()
        .filter_map(|row| Some((row.get("pid")?.as_i64()?, row)))
        .collect();
    let in_flight: Vec<InFlight> = rows
        .aios
        .into_iter()
        .filter(|row| {
            pid_filter.is_none_or(|pid| row.get("pid").and_then(Value::as_i64) == Some(pid as i64))
        })
        .map(|row| {
            let pid = row.get("pid").and_then(Value::as_i64).unwrap_or(0);
            let relation = text(&row, "target_desc")
                .and_then(file_of_target_desc)
                .and_then(|file| rows.relations.get(file).cloned());
            InFlight {
                backend_type: backend_types.get(&pid).cloned(),
                relation,
                pg_aios: row,
            }
        })
        .collect();
    let mut by_backend: BTreeMap<i64, ByBackend> = BTreeMap::new();
    let mut by_relation: BTreeMap<String, ByRelation> = BTreeMap::new();
    for io in &in_flight {
        let pid = io.pg_aios.get("pid").and_then(Value::as_i64).unwrap_or(0);
        let length = io
            .pg_aios
            .get("length")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let entry = by_backend.entry(pid).or_insert_with(|| {
            let (database, state, wait, query) = activity_by_pid
                .get(&pid)
                .map(|row| activity_of(row))
                .unwrap_or_default();
            ByBackend {
                pid,
                backend_type: io.backend_type.clone(),
                ios: 0,
                bytes: 0,
                states: BTreeMap::new(),
                database,
                state,
                wait,
                query,
            }
        });
        entry.ios += 1;
        entry.bytes += length;
        let state = text(&io.pg_aios, "state").unwrap_or("?").to_string();
        *entry.states.entry(state).or_default() += 1;
        let label = match &io.relation {
            Some(relation) => relation.label(),
            None => text(&io.pg_aios, "target_desc")
                .filter(|s| !s.is_empty())
                .unwrap_or("(no target)")
                .to_string(),
        };
        let entry = by_relation
            .entry(label.clone())
            .or_insert_with(|| ByRelation {
                relation: label,
                file: io.relation.as_ref().map(|r| r.file.clone()),
                ios: 0,
                bytes: 0,
            });
        entry.ios += 1;
        entry.bytes += length;
    }
    let mut in_flight_by_relation: Vec<ByRelation> = by_relation.into_values().collect();
    in_flight_by_relation.sort_by(|a, b| b.ios.cmp(&a.ios).then(a.relation.cmp(&b.relation)));
    let workers: Vec<&Map<String, Value>> = rows
        .activity
        .iter()
        .filter(|row| text(row, "backend_type") == Some("io worker"))
        .collect();
    let busy_pids: Vec<i64> = workers
        .iter()
        .filter(|row| text(row, "wait_event") != Some(IO_WORKER_IDLE_WAIT_EVENT))
        .filter_map(|row| row.get("pid").and_then(Value::as_i64))
        .collect();
    Report {
        server: facts.clone(),
        sampled_at: rows.sampled_at,
        interval_s,
        transaction_read_only: rows.transaction_read_only,
        pid_filter,
        in_flight,
        in_flight_by_backend: by_backend.into_values().collect(),
        in_flight_by_relation,
        io_workers: IoWorkers {
            count: workers.len() as u64,
            busy: busy_pids.len() as u64,
            busy_pids,
        },
        rates,
        pg_stat_io_totals: totals,
        pg_stat_io: rows.stat_io,
        pg_stat_activity: rows.activity,
    }
}
