//! Turning runs into results: device time per query, medians, files, and the claims.
//!
//! # Problem
//!
//! Hundreds of runs from two engines must become something a reader can check: every run
//! kept (JSON and CSV, for scripts), one markdown table per scan and cache state with both
//! engines side by side, each cell against the device limit, and a direct answer for each
//! published claim — reproduced here or not, with the numbers that decide it.
//!
//! # Mechanism
//!
//! ```text
//!  records ─► device time per (dataset, scan, step): from pageio's cold runs of that query
//!             (bytes read, I/Os), or PostgreSQL's when pageio did not run it
//!          ─► vs_device = device time / seconds, per record
//!          ─► medians per (dataset, scan, cache, step, series)
//!          ─► runs.json · runs.csv · summary.md (tables + claims) · device.json
//! ```
//!
//! # Worked example
//!
//! Three cold repeats of `pageio io_uring direct` on the 1% bitmap step took 0.31, 0.29 and
//! 0.30 s; pageio's cold runs of that step read 5400 pages in 5100 I/Os; on a 60000-IOPS
//! device the device time is 0.085 s, so the table shows `0.300 (28%)`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use super::device::DeviceLimit;
use super::record::{Cache, RunRecord};
use super::runner::Skipped;

/// Median of a non-empty slice (mean of the middle two for even lengths); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

type QueryKey = (String, String, u32);

fn query_key(r: &RunRecord) -> QueryKey {
    (r.dataset.clone(), r.scan.clone(), r.step)
}

/// Fills `device_seconds` and `vs_device` of every record from the device limit.
pub fn fill_device(records: &mut [RunRecord], device: &DeviceLimit) {
    let mut per_query: BTreeMap<QueryKey, (Vec<f64>, Vec<f64>, bool)> = BTreeMap::new();
    // pageio's cold runs first: they report I/O counts.
    for pass in ["pageio", "postgresql"] {
        for r in records
            .iter()
            .filter(|r| r.cache == Cache::Cold && r.engine == pass)
        {
            let entry = per_query
                .entry(query_key(r))
                .or_insert_with(|| (Vec::new(), Vec::new(), r.engine == "pageio"));
            if entry.2 != (r.engine == "pageio") {
                continue;
            }
            entry.0.push(r.shared_read as f64);
            let ios = match r.scan.as_str() {
                "seq" => 0.0,
                _ => r.ios.unwrap_or(r.shared_read) as f64,
            };
            entry.1.push(ios);
        }
    }
    let times: BTreeMap<QueryKey, f64> = per_query
        .into_iter()
        .map(|(k, (pages, ios, _))| {
            let t = device.device_seconds((median(&pages) * 8192.0) as u64, median(&ios) as u64);
            (k, t)
        })
        .collect();
    for r in records.iter_mut() {
        if let Some(&t) = times.get(&query_key(r)) {
            r.device_seconds = Some(t);
            r.vs_device = (r.seconds > 0.0).then(|| t / r.seconds);
        }
    }
}

/// Median per (dataset, scan, cache, step, series).
#[derive(Debug, Clone)]
pub struct Cell {
    /// Median seconds.
    pub seconds: f64,
    /// Median rows returned.
    pub rows: f64,
    /// Median fraction of the device limit.
    pub vs_device: Option<f64>,
    /// Median I/O wait seconds, when reported.
    pub io_wait: Option<f64>,
}

/// (dataset, scan, cache).
pub type GroupKey = (String, String, Cache);

/// (dataset, scan, cache) → step → series → cell.
pub type Medians = BTreeMap<GroupKey, BTreeMap<u32, BTreeMap<String, Cell>>>;

/// Groups the records and takes medians.
pub fn medians(records: &[RunRecord]) -> Medians {
    type Grouped<'r> = BTreeMap<GroupKey, BTreeMap<u32, BTreeMap<String, Vec<&'r RunRecord>>>>;
    let mut groups: Grouped<'_> = BTreeMap::new();
    for r in records {
        groups
            .entry((r.dataset.clone(), r.scan.clone(), r.cache))
            .or_default()
            .entry(r.step)
            .or_default()
            .entry(r.series())
            .or_default()
            .push(r);
    }
    groups
        .into_iter()
        .map(|(g, steps)| {
            let steps = steps
                .into_iter()
                .map(|(step, series)| {
                    let series = series
                        .into_iter()
                        .map(|(name, runs)| {
                            let secs: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
                            let rows: Vec<f64> = runs.iter().map(|r| r.rows as f64).collect();
                            let vs: Vec<f64> = runs.iter().filter_map(|r| r.vs_device).collect();
                            let wait: Vec<f64> =
                                runs.iter().filter_map(|r| r.io_wait_seconds).collect();
                            let cell = Cell {
                                seconds: median(&secs),
                                rows: median(&rows),
                                vs_device: (!vs.is_empty()).then(|| median(&vs)),
                                io_wait: (!wait.is_empty()).then(|| median(&wait)),
                            };
                            (name, cell)
                        })
                        .collect();
                    (step, series)
                })
                .collect();
            (g, steps)
        })
        .collect()
}

/// Writes runs.json and runs.csv.
pub fn write_runs(records: &[RunRecord], dir: &Path) -> Result<(), String> {
    let json = dir.join("runs.json");
    let text = serde_json::to_string_pretty(records).map_err(|e| e.to_string())?;
    std::fs::write(&json, text)
        .map_err(|e| format!("could not write \"{}\": {e}", json.display()))?;
    let csv_path = dir.join("runs.csv");
    let mut w = csv::Writer::from_path(&csv_path)
        .map_err(|e| format!("could not write \"{}\": {e}", csv_path.display()))?;
    for r in records {
        w.serialize(r)
            .map_err(|e| format!("could not write \"{}\": {e}", csv_path.display()))?;
    }
    w.flush()
        .map_err(|e| format!("could not write \"{}\": {e}", csv_path.display()))?;
    Ok(())
}

/// Reads records another engine wrote (a JSON array of [`RunRecord`]).
pub fn read_runs(path: &Path) -> Result<Vec<RunRecord>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("could not read --pg-results \"{}\": {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "\"{}\" is not a JSON array of benchmark runs: {e} (it is written by bench/pg18-bench.py)",
            path.display()
        )
    })
}

fn scan_title(scan: &str) -> &str {
    match scan {
        "seq" => "sequential scan",
        "bitmap" => "bitmap heap scan",
        "index" => "index scan",
        other => other,
    }
}

fn fmt_secs(s: f64) -> String {
    if !s.is_finite() {
        "—".into()
    } else if s >= 10.0 {
        format!("{s:.1} s")
    } else if s >= 0.1 {
        format!("{s:.3} s")
    } else {
        format!("{:.2} ms", s * 1e3)
    }
}

/// The cell of `series` at the step with the largest selectivity ≤ `max_sel` (or the last).
fn pick<'m>(
    m: &'m Medians,
    records: &[RunRecord],
    group: &(String, String, Cache),
    series: &str,
    choose: impl Fn(&[(u32, f64)]) -> Option<u32>,
) -> Option<(u32, f64, &'m Cell)> {
    let steps = m.get(group)?;
    let sel: BTreeMap<u32, f64> = records
        .iter()
        .filter(|r| {
            (r.dataset.as_str(), r.scan.as_str(), r.cache)
                == (group.0.as_str(), group.1.as_str(), group.2)
        })
        .map(|r| (r.step, r.selectivity))
        .collect();
    let avail: Vec<(u32, f64)> = steps
        .iter()
        .filter(|(_, s)| s.contains_key(series))
        .filter_map(|(st, _)| sel.get(st).map(|&x| (*st, x)))
        .collect();
    let step = choose(&avail)?;
    Some((step, sel[&step], steps.get(&step)?.get(series)?))
}

fn last_step(avail: &[(u32, f64)]) -> Option<u32> {
    avail.last().map(|a| a.0)
}

/// The step closest to 1% selectivity at or below 2%, excluding the single-row step.
fn low_selectivity(avail: &[(u32, f64)]) -> Option<u32> {
    avail
        .iter()
        .filter(|a| a.1 <= 0.02 && a.0 > 0)
        .min_by(|a, b| (a.1 - 0.01).abs().total_cmp(&(b.1 - 0.01).abs()))
        .map(|a| a.0)
}

fn engines(records: &[RunRecord]) -> Vec<String> {
    let set: BTreeSet<String> = records.iter().map(|r| r.engine.clone()).collect();
    set.into_iter().collect()
}

fn engine_name(e: &str) -> &str {
    match e {
        "postgresql" => "PostgreSQL 18",
        "pageio" => "pageio",
        other => other,
    }
}

/// The published claims, answered from these runs.
pub fn claims(records: &[RunRecord], m: &Medians) -> String {
    let mut s = String::new();
    let datasets: BTreeSet<String> = records.iter().map(|r| r.dataset.clone()).collect();
    let Some(ds) = datasets.iter().next().cloned() else {
        return s;
    };
    let series_of = |engine: &str, label: &str, direct: bool, eic: Option<u32>| -> Vec<String> {
        let set: BTreeSet<String> = records
            .iter()
            .filter(|r| {
                r.engine == engine
                    && r.method_label() == label
                    && r.direct_io == direct
                    && eic.is_none_or(|e| r.effective_io_concurrency == e)
            })
            .map(|r| r.series())
            .collect();
        set.into_iter().collect()
    };
    let methods_of = |engine: &str, direct: bool| -> Vec<String> {
        let set: BTreeSet<String> = records
            .iter()
            .filter(|r| {
                r.engine == engine
                    && r.direct_io == direct
                    && r.effective_io_concurrency == super::record::DEFAULT_EIC
            })
            .map(|r| r.method_label())
            .collect();
        set.into_iter().collect()
    };
    let eic = Some(super::record::DEFAULT_EIC);
    let _ = writeln!(
        s,
        "Answers from the `{ds}` runs (medians; ratios > 1 mean the first is faster).\n"
    );

    // 1. worker faster than sync on cold sequential scans.
    let _ = writeln!(
        s,
        "**1. Worker is faster than sync on cold sequential scans.**\n"
    );
    let g = (ds.clone(), "seq".to_string(), Cache::Cold);
    for e in engines(records) {
        let sync = series_of(&e, "sync", false, eic);
        let workers: Vec<String> = methods_of(&e, false)
            .into_iter()
            .filter(|l| l.starts_with("worker"))
            .collect();
        for w in workers {
            let ws = series_of(&e, &w, false, eic);
            if let (Some(a), Some(b)) = (sync.first(), ws.first()) {
                if let (Some((_, sel, cs)), Some((_, _, cw))) = (
                    pick(m, records, &g, a, last_step),
                    pick(m, records, &g, b, last_step),
                ) {
                    let ratio = cs.seconds / cw.seconds;
                    let _ = writeln!(
                        s,
                        "- {}: sync {} vs {w} {} at {:.1}% → **{ratio:.2}×** — {}.",
                        engine_name(&e),
                        fmt_secs(cs.seconds),
                        fmt_secs(cw.seconds),
                        sel * 100.0,
                        verdict(ratio > 1.05, ratio < 0.95)
                    );
                }
            }
        }
    }
    // 2. io_workers = 3 too few for bitmap scans at low selectivity.
    let _ = writeln!(
        s,
        "\n**2. io_workers = 3 is too few for bitmap heap scans at low selectivity.**\n"
    );
    let g = (ds.clone(), "bitmap".to_string(), Cache::Cold);
    for e in engines(records) {
        let w3 = series_of(&e, "worker(3)", false, eic);
        let Some(w3) = w3.first() else { continue };
        let Some((step, sel, c3)) = pick(m, records, &g, w3, low_selectivity) else {
            continue;
        };
        let mut best: Option<(String, f64)> = None;
        for label in methods_of(&e, false) {
            if label == "worker(3)" {
                continue;
            }
            for sname in series_of(&e, &label, false, eic) {
                if let Some(c) = m
                    .get(&g)
                    .and_then(|st| st.get(&step))
                    .and_then(|st| st.get(&sname))
                {
                    if best.as_ref().is_none_or(|b| c.seconds < b.1) {
                        best = Some((label.clone(), c.seconds));
                    }
                }
            }
        }
        if let Some((label, secs)) = best {
            let ratio = c3.seconds / secs;
            let _ = writeln!(
                s,
                "- {}: worker(3) {} vs {label} {} at {:.2}% → worker(3) is **{ratio:.2}×** slower — {}.",
                engine_name(&e),
                fmt_secs(c3.seconds),
                fmt_secs(secs),
                sel * 100.0,
                verdict(ratio > 1.1, ratio < 0.95)
            );
        }
    }
    // 3. index scans unaffected by io_method.
    let _ = writeln!(s, "\n**3. Index scans are unaffected by io_method (PostgreSQL 18 does not prefetch them).**\n");
    let g = (ds.clone(), "index".to_string(), Cache::Cold);
    for e in engines(records) {
        let mut spreads = Vec::new();
        if let Some(steps) = m.get(&g) {
            for (step, series) in steps {
                let t: Vec<(String, f64)> = series
                    .iter()
                    .filter(|(name, _)| {
                        name.starts_with(&format!("{e} ")) && name.ends_with("buffered")
                    })
                    .map(|(n, c)| (n.clone(), c.seconds))
                    .collect();
                if t.len() >= 2 {
                    let max = t.iter().map(|x| x.1).fold(f64::MIN, f64::max);
                    let min = t.iter().map(|x| x.1).fold(f64::MAX, f64::min);
                    spreads.push((*step, max / min));
                }
            }
        }
        // The largest step reads the most pages, so timer noise matters least there.
        if let Some(&(step, last)) = spreads.last() {
            let sel = records
                .iter()
                .find(|r| r.scan == "index" && r.step == step)
                .map_or(f64::NAN, |r| r.selectivity);
            let med = median(&spreads.iter().map(|x| x.1).collect::<Vec<_>>());
            let _ = writeln!(
                s,
                "- {}: slowest / fastest io_method (buffered) at {:.2}%: **{last:.2}×** (median over all steps {med:.2}×) — {}.",
                engine_name(&e),
                sel * 100.0,
                if e == "pageio" {
                    "pageio prefetches index scans through its read stream, so the method matters by design".to_string()
                } else if last < 1.15 {
                    "reproduces".to_string()
                } else {
                    "does not reproduce".to_string()
                }
            );
        }
    }
    // 4. prefetch window 1 vs 128 on bitmap-heap-scan I/O wait.
    let _ = writeln!(
        s,
        "\n**4. Prefetch window 1 vs 128 on bitmap-heap-scan I/O wait.**\n"
    );
    let mut any = false;
    for e in engines(records) {
        for label in methods_of(&e, false)
            .into_iter()
            .chain(
                records
                    .iter()
                    .filter(|r| r.engine == e)
                    .map(|r| r.method_label())
                    .collect::<BTreeSet<_>>(),
            )
            .collect::<BTreeSet<_>>()
        {
            let a = series_of(&e, &label, false, Some(1));
            let b = series_of(&e, &label, false, Some(128));
            if let (Some(a), Some(b)) = (a.first(), b.first()) {
                if let (Some((step, sel, ca)), Some(steps)) = (
                    pick(m, records, &g_bitmap(&ds), a, low_selectivity),
                    m.get(&g_bitmap(&ds)),
                ) {
                    if let Some(cb) = steps.get(&step).and_then(|x| x.get(b)) {
                        any = true;
                        let wait = match (ca.io_wait, cb.io_wait) {
                            (Some(x), Some(y)) => {
                                format!(", I/O wait {} vs {}", fmt_secs(x), fmt_secs(y))
                            }
                            _ => String::new(),
                        };
                        let ratio = ca.seconds / cb.seconds;
                        let _ = writeln!(
                            s,
                            "- {} {label}: window 1 {} vs 128 {} at {:.2}%{wait} → **{ratio:.2}×** — {}.",
                            engine_name(&e),
                            fmt_secs(ca.seconds),
                            fmt_secs(cb.seconds),
                            sel * 100.0,
                            verdict(ratio > 1.1, ratio < 0.95)
                        );
                    }
                }
            }
        }
    }
    if !any {
        let _ = writeln!(
            s,
            "- not measured in this run (run with `--eic 1,128 --scans bitmap`)."
        );
    }
    // 5. direct vs buffered.
    let _ = writeln!(s, "\n**5. Direct I/O vs buffered I/O (cold).**\n");
    let mut any = false;
    for e in engines(records) {
        for scan in ["seq", "bitmap", "index"] {
            let g = (ds.clone(), scan.to_string(), Cache::Cold);
            for label in methods_of(&e, true) {
                let (Some(d), Some(b)) = (
                    series_of(&e, &label, true, eic).first().cloned(),
                    series_of(&e, &label, false, eic).first().cloned(),
                ) else {
                    continue;
                };
                let choose = if scan == "seq" {
                    last_step as fn(&[(u32, f64)]) -> Option<u32>
                } else {
                    low_selectivity
                };
                if let (Some((step, sel, cd)), Some(steps)) =
                    (pick(m, records, &g, &d, choose), m.get(&g))
                {
                    if let Some(cb) = steps.get(&step).and_then(|x| x.get(&b)) {
                        any = true;
                        let ratio = cb.seconds / cd.seconds;
                        let _ = writeln!(
                            s,
                            "- {} {label} {scan} at {:.2}%: buffered {} vs direct {} → direct is **{ratio:.2}×** as fast.",
                            engine_name(&e),
                            sel * 100.0,
                            fmt_secs(cb.seconds),
                            fmt_secs(cd.seconds),
                        );
                    }
                }
            }
        }
    }
    if !any {
        let _ = writeln!(
            s,
            "- not measured in this run (add `--io buffered,direct`)."
        );
    }
    s
}

/// The fastest series of `engine` in a step (default prefetch window only).
fn fastest<'c>(series: &'c BTreeMap<String, Cell>, engine: &str) -> Option<(&'c String, &'c Cell)> {
    series
        .iter()
        .filter(|(name, c)| {
            name.starts_with(&format!("{engine} "))
                && !name.contains(" eic=")
                && c.seconds.is_finite()
        })
        .min_by(|a, b| a.1.seconds.total_cmp(&b.1.seconds))
}

/// Per query: the fastest PostgreSQL 18 configuration against the fastest pageio one.
pub fn versus(m: &Medians) -> String {
    let mut s = String::new();
    let mut ratios = Vec::new();
    for ((ds, scan, cache), steps) in m {
        for series in steps.values() {
            let (Some((pn, pc)), Some((gn, gc))) =
                (fastest(series, "pageio"), fastest(series, "postgresql"))
            else {
                continue;
            };
            if s.is_empty() {
                let _ = writeln!(
                    s,
                    "Each query's fastest configuration of each engine (median time); ratio > 1: pageio is faster.\n"
                );
                let _ = writeln!(
                    s,
                    "| table | scan | cache | rows | PostgreSQL 18 | pageio | ratio |"
                );
                let _ = writeln!(s, "|---|---|---|---:|---|---|---:|");
            }
            let ratio = gc.seconds / pc.seconds;
            ratios.push(ratio);
            let _ = writeln!(
                s,
                "| {ds} | {scan} | {} | {:.0} | {} ({}) | {} ({}) | **{ratio:.2}×** |",
                cache.as_str(),
                pc.rows,
                fmt_secs(gc.seconds),
                gn.trim_start_matches("postgresql "),
                fmt_secs(pc.seconds),
                pn.trim_start_matches("pageio "),
            );
        }
    }
    if !ratios.is_empty() {
        let geo = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
        let _ = writeln!(
            s,
            "\nGeometric mean over {} queries: pageio **{geo:.2}×** PostgreSQL 18's speed.",
            ratios.len()
        );
    }
    s
}

fn g_bitmap(ds: &str) -> (String, String, Cache) {
    (ds.to_string(), "bitmap".to_string(), Cache::Cold)
}

fn verdict(yes: bool, opposite: bool) -> &'static str {
    if yes {
        "reproduces"
    } else if opposite {
        "the opposite here"
    } else {
        "does not reproduce (within 5–10%)"
    }
}

/// Machine facts for the summary header.
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mem = super::total_memory() as f64 / (1u64 << 30) as f64;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} CPUs ({model}), {mem:.0} GiB RAM, Linux {kernel}")
}

/// What the summary needs besides the records.
pub struct SummaryInput<'a> {
    /// The command line.
    pub command: String,
    /// The device limit, if measured.
    pub device: Option<&'a DeviceLimit>,
    /// Cells that could not run.
    pub skipped: &'a [Skipped],
    /// Chart files written (relative names).
    pub charts: Vec<String>,
}

/// The markdown summary: set-up, device, one table per (dataset, scan, cache), claims.
pub fn summary(records: &[RunRecord], m: &Medians, input: &SummaryInput<'_>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# pageio bench\n");
    let _ = writeln!(s, "```\n{}\n```\n", input.command);
    let _ = writeln!(s, "Machine: {}.\n", machine());
    let tables: BTreeMap<String, (u64, u64)> = records
        .iter()
        .map(|r| (r.dataset.clone(), (r.table_rows, r.table_pages)))
        .collect();
    for (name, (rows, pages)) in &tables {
        let _ = writeln!(
            s,
            "- `{name}`: {rows} rows, {pages} heap pages ({:.0} MB)",
            *pages as f64 * 8192.0 / 1e6
        );
    }
    let versions: BTreeSet<String> = records.iter().map(|r| r.version.clone()).collect();
    let _ = writeln!(
        s,
        "- engines: {}",
        versions.into_iter().collect::<Vec<_>>().join(", ")
    );
    match input.device {
        Some(d) => {
            let _ = writeln!(
                s,
                "- device limit ({}, {} s each, on `{}`): sequential 128 kB QD32 **{:.0} MB/s**, random 8 kB QD1 **{:.0} IOPS**, QD32 **{:.0} IOPS**",
                d.source, d.seconds, d.file, d.seq_mb_s, d.rand_iops_qd1, d.rand_iops_qd32
            );
        }
        None => {
            let _ = writeln!(s, "- device limit: not measured (`--device none`)");
        }
    }
    for sk in input.skipped {
        let _ = writeln!(s, "- skipped {}: {}", sk.cell, sk.reason);
    }
    let _ = writeln!(
        s,
        "\nCells: median execution time and, in parentheses, the \
         device limit's time for the same reads as a share of it (100% = at the device limit; \
         warm runs can exceed it).\n"
    );
    let _ = writeln!(s, "## Claims\n\n{}", claims(records, m));
    let vs = versus(m);
    if !vs.is_empty() {
        let _ = writeln!(s, "## pageio vs PostgreSQL 18\n\n{vs}");
    }
    for ((ds, scan, cache), steps) in m {
        let _ = writeln!(s, "\n## {ds}: {}, {}\n", scan_title(scan), cache.as_str());
        let series: BTreeSet<&String> = steps.values().flat_map(|x| x.keys()).collect();
        let sel: BTreeMap<u32, (f64, u64)> = records
            .iter()
            .filter(|r| &r.dataset == ds && &r.scan == scan)
            .map(|r| (r.step, (r.selectivity, r.target_rows)))
            .collect();
        let _ = write!(s, "| selectivity | rows |");
        for name in &series {
            let _ = write!(s, " {name} |");
        }
        let _ = write!(s, "\n|---:|---:|");
        for _ in &series {
            let _ = write!(s, "---:|");
        }
        let _ = writeln!(s);
        for (step, cells) in steps {
            let (selectivity, _) = sel.get(step).copied().unwrap_or((f64::NAN, 0));
            let rows = cells.values().next().map_or(0.0, |c| c.rows);
            let _ = write!(s, "| {:.4}% | {rows:.0} |", selectivity * 100.0);
            for name in &series {
                match cells.get(*name) {
                    Some(c) => {
                        let vs = c
                            .vs_device
                            .map(|v| format!(" ({:.0}%)", v * 100.0))
                            .unwrap_or_default();
                        let _ = write!(s, " {}{vs} |", fmt_secs(c.seconds));
                    }
                    None => {
                        let _ = write!(s, " |");
                    }
                }
            }
            let _ = writeln!(s);
        }
    }
    if !input.charts.is_empty() {
        let _ = writeln!(s, "\n## Charts\n");
        for c in &input.charts {
            let _ = writeln!(s, "- [{c}]({c})");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn rec(
        engine: &str,
        method: &str,
        workers: Option<u32>,
        scan: &str,
        step: u32,
        cache: Cache,
        secs: f64,
    ) -> RunRecord {
        RunRecord {
            engine: engine.into(),
            version: format!("{engine} 1"),
            dataset: "uniform".into(),
            table_rows: 1000,
            table_pages: 56,
            scan: scan.into(),
            step,
            target_rows: u64::from(step) + 1,
            selectivity: f64::from(step + 1) / 1000.0,
            lo: 0.0,
            hi: 1.0,
            io_method: method.into(),
            io_workers: workers,
            direct_io: false,
            cache,
            repeat: 1,
            rows: u64::from(step) + 1,
            seconds: secs,
            shared_hit: 0,
            shared_read: 100,
            io_wait_seconds: Some(secs / 2.0),
            ios: Some(50),
            effective_io_concurrency: 16,
            io_combine_limit_kb: 128,
            shared_buffers_mb: 128,
            device_seconds: None,
            vs_device: None,
        }
    }

    #[test]
    fn median_of_odd_even_and_nan() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[f64::NAN, 5.0]), 5.0);
    }

    #[test]
    fn device_time_comes_from_pageio_cold_runs() {
        let mut rs = vec![
            rec("pageio", "sync", None, "bitmap", 3, Cache::Cold, 0.01),
            rec("postgresql", "sync", None, "bitmap", 3, Cache::Cold, 0.02),
            rec("pageio", "sync", None, "bitmap", 3, Cache::Warm, 0.001),
        ];
        rs[1].shared_read = 1_000_000; // ignored: pageio ran the query
        let d = DeviceLimit {
            source: String::new(),
            file: String::new(),
            seq_mb_s: 1000.0,
            rand_iops_qd1: 1.0,
            rand_iops_qd32: 10_000.0,
            seconds: 1,
        };
        fill_device(&mut rs, &d);
        // 50 I/Os at 10000 IOPS = 5 ms (100 pages at 1000 MB/s = 0.8 ms is smaller).
        for r in &rs {
            assert!((r.device_seconds.unwrap() - 0.005).abs() < 1e-12);
        }
        assert!((rs[0].vs_device.unwrap() - 0.5).abs() < 1e-9);
        assert!((rs[1].vs_device.unwrap() - 0.25).abs() < 1e-9);
    }

    #[test]
    fn medians_group_by_series_and_claims_answer() {
        let mut rs = Vec::new();
        for (secs, rep) in [(3.0, 1), (1.0, 2), (2.0, 3)] {
            let mut r = rec("pageio", "sync", None, "seq", 9, Cache::Cold, secs);
            r.repeat = rep;
            rs.push(r);
        }
        rs.push(rec("pageio", "worker", Some(3), "seq", 9, Cache::Cold, 1.0));
        rs.push(rec("postgresql", "sync", None, "seq", 9, Cache::Cold, 4.0));
        rs.push(rec(
            "postgresql",
            "worker",
            Some(3),
            "seq",
            9,
            Cache::Cold,
            4.0,
        ));
        let m = medians(&rs);
        let cell = &m[&("uniform".into(), "seq".into(), Cache::Cold)][&9]["pageio sync buffered"];
        assert_eq!(cell.seconds, 2.0);
        let c = claims(&rs, &m);
        assert!(
            c.contains("pageio: sync 2.000 s vs worker(3) 1.000 s"),
            "{c}"
        );
        assert!(c.contains("**2.00×** — reproduces"), "{c}");
        assert!(
            c.contains("PostgreSQL 18: sync 4.000 s vs worker(3) 4.000 s"),
            "{c}"
        );
        assert!(c.contains("does not reproduce"), "{c}");
        let md = summary(
            &rs,
            &m,
            &SummaryInput {
                command: "pageio bench".into(),
                device: None,
                skipped: &[],
                charts: vec![],
            },
        );
        assert!(
            md.contains(
                "| selectivity | rows | pageio sync buffered | pageio worker(3) buffered |"
            ),
            "{md}"
        );
    }

    #[test]
    fn runs_round_trip_through_json_and_csv() {
        let dir = tempfile::tempdir().unwrap();
        let rs = vec![rec(
            "pageio",
            "io_uring",
            None,
            "index",
            0,
            Cache::Warm,
            0.5,
        )];
        write_runs(&rs, dir.path()).unwrap();
        let back = read_runs(&dir.path().join("runs.json")).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].cache, Cache::Warm);
        let csv = std::fs::read_to_string(dir.path().join("runs.csv")).unwrap();
        assert!(csv
            .lines()
            .next()
            .unwrap()
            .starts_with("engine,version,dataset"));
        assert!(csv.contains(",warm,"));
        std::fs::write(dir.path().join("bad.json"), "{").unwrap();
        let e = read_runs(&dir.path().join("bad.json")).unwrap_err();
        assert!(e.contains("not a JSON array of benchmark runs"), "{e}");
    }
}
