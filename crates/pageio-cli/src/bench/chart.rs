//! Charts of `pageio bench`: execution time against selectivity, one line per engine, method
//! and I/O mode, as SVG and PNG.
//!
//! # Problem
//!
//! The PostgreSQL 18 io_method results were published as charts: for one data set, one scan
//! type and one cache state, the execution time of every io_method over the selectivity
//! sweep, both axes logarithmic, because the sweep runs from one row to the whole table and
//! the times from microseconds to minutes. `pageio bench` has to draw the same charts from its
//! [`RunRecord`]s — pageio and PostgreSQL 18 side by side, with the device limit under them —
//! without a plotting tool on the machine, and the PNG must look the same on every machine, so
//! it cannot depend on the fonts installed there.
//!
//! # Mechanism
//!
//! ```text
//!  runs ─► group by (dataset, scan, cache) ─────────────── one chart per group
//!           │
//!           ├─► by series (engine method mode), by step: median of the repeats
//!           │     seconds ≤ 0 or NaN dropped    ─► one line + markers per series
//!           ├─► by step: median device_seconds  ─► black "device limit" line
//!           │
//!           ▼
//!  ┌──────────────────────────────────────────────┬─────────────────────────┐
//!  │ uniform: bitmap heap scan, cold (1,000,000 rows)                       │
//!  │ s (log) ┊                         __--       │ ●── pageio sync buffered│
//!  │         ┊              ___---‾‾‾‾            │ ▲── pageio sync direct  │
//!  │         ┊ ___---‾‾‾‾‾‾‾    - - - - - -       │ ●- - postgresql sync …  │
//!  │         ┊ ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━  │ ━━━ device limit        │
//!  │         └──────────────────────────────────  │                         │
//!  │            % of table rows (log)             │   legend, outside plot  │
//!  └──────────────────────────────────────────────┴─────────────────────────┘
//!         same picture twice: SVGBackend ─► .svg, BitMapBackend ─► .png
//! ```
//!
//! Colour encodes the method (`sync`, `worker(3)`, `io_uring`, other worker counts from a
//! palette by a stable hash of the label), so a method has the same colour in every chart.
//! The engine is the line: pageio solid, every other engine dashed. The I/O mode is the
//! marker: buffered a circle, direct a triangle. Text is drawn with DejaVu Sans, embedded in
//! the binary and registered with plotters as `sans-serif` on first use.
//!
//! # Worked example
//!
//! Three cold repeats of the `uniform` bitmap scan step that matches 10,000 of 1,000,000
//! rows took 0.30, 0.10 and 0.20 s on pageio io_uring direct: the point is (1%, 0.20 s) on
//! the line `pageio io_uring direct` of `uniform-bitmap-cold.svg` and `.png` (1200×750). The
//! same step on PostgreSQL 18 io_uring direct is on a dashed line of the same green, and if
//! the records carry `device_seconds` of 0.08 s, the black device limit passes through
//! (1%, 0.08 s).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::record::{Cache, RunRecord};

/// Width of every chart, in pixels.
pub const CHART_WIDTH: u32 = 1200;
/// Height of every chart, in pixels.
pub const CHART_HEIGHT: u32 = 750;
/// Width of the legend column on the right of the plot, in pixels.
const LEGEND_WIDTH: u32 = 330;
/// Font family of all chart text (DejaVu Sans, registered under this name).
const FONT: &str = "sans-serif";
/// DejaVu Sans, so that PNG text does not depend on the fonts of the machine.
const FONT_BYTES: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// Why charts could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// The output directory could not be created.
    #[error("cannot create chart directory {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Drawing or writing one chart file failed.
    #[error("cannot write chart {}: {message}", path.display())]
    Draw {
        /// The chart file.
        path: PathBuf,
        /// The cause, as plotters reports it.
        message: String,
    },
    /// The embedded font could not be loaded.
    #[error("cannot write charts: the embedded font DejaVuSans.ttf does not load")]
    Font,
}

/// One point of a chart line: the median of the repeats of one step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChartPoint {
    /// Step of the sweep.
    pub step: u32,
    /// Fraction of the table's rows the predicate matches (0..1).
    pub selectivity: f64,
    /// Median over the repeats, in seconds.
    pub seconds: f64,
}

/// `true` for a value a log axis can show.
fn plottable(v: f64) -> bool {
    v.is_finite() && v > 0.0
}

/// Medians per step of `(step, selectivity, value)` triples, in step order. Values and
/// selectivities that a log axis cannot show (zero, negative, NaN, infinite) are dropped.
fn medians_by_step(items: impl IntoIterator<Item = (u32, f64, f64)>) -> Vec<ChartPoint> {
    let mut steps: BTreeMap<u32, (f64, Vec<f64>)> = BTreeMap::new();
    for (step, selectivity, value) in items {
        if !plottable(selectivity) || !plottable(value) {
            continue;
        }
        steps
            .entry(step)
            .or_insert_with(|| (selectivity, Vec::new()))
            .1
            .push(value);
    }
    steps
        .into_iter()
        .filter_map(|(step, (selectivity, values))| {
            Some(super::report::median(&values))
                .filter(|m| m.is_finite())
                .map(|seconds| ChartPoint {
                    step,
                    selectivity,
                    seconds,
                })
        })
        .collect()
}

/// Median execution time per `(series, step)`: for each [`RunRecord::series`], its points in
/// step order. Runs whose seconds or selectivity cannot go on a log axis (zero, negative,
/// NaN) are skipped; a series left without points is absent.
pub fn series_medians<'a>(
    runs: impl IntoIterator<Item = &'a RunRecord>,
) -> BTreeMap<String, Vec<ChartPoint>> {
    let mut by_series: BTreeMap<String, Vec<&RunRecord>> = BTreeMap::new();
    for r in runs {
        by_series.entry(r.series()).or_default().push(r);
    }
    by_series
        .into_iter()
        .map(|(series, runs)| {
            let points = medians_by_step(runs.iter().map(|r| (r.step, r.selectivity, r.seconds)));
            (series, points)
        })
        .filter(|(_, points)| !points.is_empty())
        .collect()
}

/// Median `device_seconds` per step over the runs that carry it.
fn device_medians<'a>(runs: impl IntoIterator<Item = &'a RunRecord>) -> Vec<ChartPoint> {
    medians_by_step(
        runs.into_iter()
            .filter_map(|r| r.device_seconds.map(|d| (r.step, r.selectivity, d))),
    )
}

/// How one series is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
struct SeriesStyle {
    colour: RGBColor,
    dashed: bool,
    triangle: bool,
}

/// Method colours: sync, worker(3) and io_uring fixed, other labels from the palette.
const SYNC_COLOUR: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const WORKER3_COLOUR: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
const IO_URING_COLOUR: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
const PALETTE: [RGBColor; 6] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0xbc, 0xbd, 0x22),
];

/// The colour of a method label, the same in every chart and every run of the program.
fn method_colour(label: &str) -> RGBColor {
    match label {
        "sync" => SYNC_COLOUR,
        "worker(3)" => WORKER3_COLOUR,
        "io_uring" => IO_URING_COLOUR,
        other => {
            // FNV-1a: stable across runs and platforms, unlike the std hasher.
            let hash = other.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            });
            PALETTE[(hash % PALETTE.len() as u64) as usize]
        }
    }
}

fn style_of(r: &RunRecord) -> SeriesStyle {
    SeriesStyle {
        colour: method_colour(&r.method_label()),
        dashed: r.engine != "pageio",
        triangle: r.direct_io,
    }
}

/// Legend order: pageio first, then by method (sync, workers by count, io_uring), buffered
/// before direct.
fn series_order(r: &RunRecord) -> (u8, String, u8, u32, String, bool) {
    let engine = match r.engine.as_str() {
        "pageio" => 0,
        "postgresql" => 1,
        _ => 2,
    };
    let method = match r.io_method.as_str() {
        "sync" => 0,
        "worker" => 1,
        "io_uring" => 2,
        _ => 3,
    };
    (
        engine,
        r.engine.clone(),
        method,
        r.io_workers.unwrap_or(0),
        r.io_method.clone(),
        r.direct_io,
    )
}

/// One line of a chart.
#[derive(Debug, Clone)]
struct Line {
    series: String,
    style: SeriesStyle,
    points: Vec<ChartPoint>,
}

/// Everything one chart shows, before drawing.
#[derive(Debug, Clone)]
struct ChartData {
    title: String,
    lines: Vec<Line>,
    device: Vec<ChartPoint>,
}

/// `seq` → `sequential scan`, `bitmap` → `bitmap heap scan`, `index` → `index scan`.
fn scan_name(scan: &str) -> String {
    match scan {
        "seq" => "sequential scan".to_string(),
        "bitmap" => "bitmap heap scan".to_string(),
        "index" => "index scan".to_string(),
        other => format!("{other} scan"),
    }
}

/// 1000000 → `1,000,000`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let head = match digits.len() % 3 {
        0 => 3,
        r => r,
    };
    let mut out = digits[..head].to_string();
    for group in digits.as_bytes()[head..].chunks(3) {
        out.push(',');
        out.extend(group.iter().map(|&b| char::from(b)));
    }
    out
}

fn chart_data(dataset: &str, scan: &str, cache: Cache, runs: &[&RunRecord]) -> ChartData {
    let table_rows = runs.iter().map(|r| r.table_rows).max().unwrap_or(0);
    let title = format!(
        "{dataset}: {}, {} ({} rows)",
        scan_name(scan),
        cache.as_str(),
        thousands(table_rows)
    );
    let mut firsts: BTreeMap<String, &RunRecord> = BTreeMap::new();
    for r in runs {
        firsts.entry(r.series()).or_insert(r);
    }
    let mut lines: Vec<(_, Line)> = series_medians(runs.iter().copied())
        .into_iter()
        .map(|(series, points)| {
            let first = firsts[&series];
            (
                series_order(first),
                Line {
                    series,
                    style: style_of(first),
                    points,
                },
            )
        })
        .collect();
    lines.sort_by(|a, b| a.0.cmp(&b.0));
    ChartData {
        title,
        lines: lines.into_iter().map(|(_, l)| l).collect(),
        device: device_medians(runs.iter().copied()),
    }
}

/// A log-axis range covering `values` with a margin and at least one decade (so at least one
/// power of ten is labelled); `default` when there are no values.
fn log_range(values: impl Iterator<Item = f64>, default: (f64, f64)) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !(lo.is_finite() && hi.is_finite()) {
        return default;
    }
    let (lo, hi) = (lo / 1.4, hi * 1.4);
    if hi / lo >= 10.0 {
        (lo, hi)
    } else {
        let centre = (lo * hi).sqrt();
        let half = 10f64.sqrt();
        (centre / half, centre * half)
    }
}

/// An axis label: `0.0001`, `0.25`, `3`, `1500`, `1e-6`.
fn short_number(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let exponent = v.abs().log10().floor();
    if !(-4.0..6.0).contains(&exponent) {
        return format!("{v:.0e}");
    }
    let decimals = (1.0 - exponent).max(0.0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The marker of a series at `at`.
fn marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    at: (i32, i32),
    style: SeriesStyle,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    if style.triangle {
        area.draw(&TriangleMarker::new(at, 6, style.colour.filled()))
    } else {
        area.draw(&Circle::new(at, 4, style.colour.filled()))
    }
}

/// Draws one chart on `root` (plot on the left, legend on the right).
fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    data: &ChartData,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let (plot_area, legend_area) = root.split_horizontally(CHART_WIDTH - LEGEND_WIDTH);

    let to_pct = |p: &ChartPoint| (p.selectivity * 100.0, p.seconds);
    let all_points = || {
        data.lines
            .iter()
            .flat_map(|l| l.points.iter())
            .chain(data.device.iter())
            .map(to_pct)
    };
    let x = log_range(all_points().map(|p| p.0), (1e-4, 100.0));
    let y = log_range(all_points().map(|p| p.1), (1e-3, 10.0));

    let mut chart = ChartBuilder::on(&plot_area)
        .caption(&data.title, (FONT, 24))
        .margin(20)
        .x_label_area_size(55)
        .y_label_area_size(80)
        .build_cartesian_2d((x.0..x.1).log_scale(), (y.0..y.1).log_scale())?;
    chart
        .configure_mesh()
        .x_labels(12)
        .y_labels(12)
        .x_label_formatter(&|v| format!("{}%", short_number(*v)))
        .y_label_formatter(&|v| short_number(*v))
        .x_desc("selectivity, % of the table's rows (log scale)")
        .y_desc("execution time, seconds (log scale)")
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 17))
        .light_line_style(RGBColor(0xee, 0xee, 0xee))
        .bold_line_style(RGBColor(0xcc, 0xcc, 0xcc))
        .draw()?;

    if !data.device.is_empty() {
        let points: Vec<_> = data.device.iter().map(to_pct).collect();
        chart.draw_series(LineSeries::new(points.clone(), BLACK.stroke_width(3)))?;
        chart.draw_series(
            points
                .into_iter()
                .map(|p| Cross::new(p, 4, BLACK.stroke_width(2))),
        )?;
    }
    for line in &data.lines {
        let points: Vec<_> = line.points.iter().map(to_pct).collect();
        let stroke = line.style.colour.stroke_width(2);
        if line.style.dashed {
            chart.draw_series(DashedLineSeries::new(points.clone(), 9, 6, stroke))?;
        } else {
            chart.draw_series(LineSeries::new(points.clone(), stroke))?;
        }
        let fill = line.style.colour.filled();
        if line.style.triangle {
            chart.draw_series(points.into_iter().map(|p| TriangleMarker::new(p, 6, fill)))?;
        } else {
            chart.draw_series(points.into_iter().map(|p| Circle::new(p, 4, fill)))?;
        }
    }
    if data.lines.is_empty() && data.device.is_empty() {
        let (w, h) = plot_area.dim_in_pixel();
        plot_area.draw(&Text::new(
            "no valid timings",
            (w as i32 / 2 - 70, h as i32 / 2),
            (FONT, 20),
        ))?;
    }

    // Legend: one entry per series, then the device limit, sized to fit the height.
    let entries = data.lines.len() + usize::from(!data.device.is_empty());
    let top = 70;
    let step = if entries == 0 {
        24
    } else {
        ((CHART_HEIGHT as i32 - top - 20) / entries as i32).clamp(8, 24)
    };
    let text_style =
        TextStyle::from((FONT, 15).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    let (x0, x1, tx) = (10, 55, 65);
    for (i, line) in data.lines.iter().enumerate() {
        let y = top + i as i32 * step;
        let stroke = line.style.colour.stroke_width(2);
        if line.style.dashed {
            legend_area.draw(&DashedPathElement::new(
                vec![(x0, y), (x1, y)],
                9,
                6,
                stroke,
            ))?;
        } else {
            legend_area.draw(&PathElement::new(vec![(x0, y), (x1, y)], stroke))?;
        }
        marker(&legend_area, ((x0 + x1) / 2, y), line.style)?;
        legend_area.draw(&Text::new(
            line.series.as_str(),
            (tx, y),
            text_style.clone(),
        ))?;
    }
    if !data.device.is_empty() {
        let y = top + data.lines.len() as i32 * step;
        legend_area.draw(&PathElement::new(
            vec![(x0, y), (x1, y)],
            BLACK.stroke_width(3),
        ))?;
        legend_area.draw(&Text::new("device limit", (tx, y), text_style))?;
    }
    root.present()
}

/// Registers DejaVu Sans as `sans-serif`, once per process; `false` if it does not load.
fn font_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY
        .get_or_init(|| plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES).is_ok())
}

/// Keeps a data set or scan name usable as part of a file name.
fn file_part(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Writes one chart per `(dataset, scan, cache)` group of `runs` into `dir` (created if
/// missing), as `<dataset>-<scan>-<cache>.svg` and `.png`, [`CHART_WIDTH`]×[`CHART_HEIGHT`]:
/// median execution time against selectivity, log-log, one line per [`RunRecord::series`],
/// and the device limit when the runs carry `device_seconds`. Returns the files written, in
/// group order (SVG before PNG); nothing for no runs.
pub fn write_charts(runs: &[RunRecord], dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    if !font_ready() {
        return Err(ChartError::Font);
    }
    std::fs::create_dir_all(dir).map_err(|source| ChartError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;

    let scan_rank = |s: &str| match s {
        "seq" => 0,
        "bitmap" => 1,
        "index" => 2,
        _ => 3,
    };
    let mut groups: BTreeMap<(&str, u8, &str, Cache), Vec<&RunRecord>> = BTreeMap::new();
    for r in runs {
        groups
            .entry((&r.dataset, scan_rank(&r.scan), &r.scan, r.cache))
            .or_default()
            .push(r);
    }

    let mut written = Vec::with_capacity(groups.len() * 2);
    for ((dataset, _, scan, cache), group) in groups {
        let data = chart_data(dataset, scan, cache, &group);
        let stem = format!(
            "{}-{}-{}",
            file_part(dataset),
            file_part(scan),
            cache.as_str()
        );
        let size = (CHART_WIDTH, CHART_HEIGHT);
        let draw_error = |path: &Path, e: &dyn std::fmt::Display| ChartError::Draw {
            path: path.to_path_buf(),
            message: e.to_string(),
        };

        let svg = dir.join(format!("{stem}.svg"));
        draw(SVGBackend::new(&svg, size).into_drawing_area(), &data)
            .map_err(|e| draw_error(&svg, &e))?;
        written.push(svg);

        let png = dir.join(format!("{stem}.png"));
        draw(BitMapBackend::new(&png, size).into_drawing_area(), &data)
            .map_err(|e| draw_error(&png, &e))?;
        written.push(png);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    fn record(
        engine: &str,
        dataset: &str,
        scan: &str,
        cache: Cache,
        method: (&str, Option<u32>),
        direct_io: bool,
        step: u32,
        repeat: u32,
        seconds: f64,
    ) -> RunRecord {
        let table_rows = 1_000_000;
        let target_rows = 10u64.pow(step);
        RunRecord {
            engine: engine.to_string(),
            version: "test".to_string(),
            dataset: dataset.to_string(),
            table_rows,
            table_pages: 55_556,
            scan: scan.to_string(),
            step,
            target_rows,
            selectivity: target_rows as f64 / table_rows as f64,
            lo: 0.0,
            hi: 1.0,
            io_method: method.0.to_string(),
            io_workers: method.1,
            direct_io,
            cache,
            repeat,
            rows: target_rows,
            seconds,
            shared_hit: 0,
            shared_read: 0,
            io_wait_seconds: None,
            ios: None,
            effective_io_concurrency: 16,
            io_combine_limit_kb: 128,
            shared_buffers_mb: 128,
            device_seconds: None,
            vs_device: None,
        }
    }

    /// Two data sets × seq/bitmap × cold/warm, pageio and PostgreSQL, three methods, two
    /// modes, steps 0..=5, three repeats with different times.
    fn sweep() -> Vec<RunRecord> {
        let mut runs = Vec::new();
        let methods = [("sync", None), ("worker", Some(3)), ("io_uring", None)];
        for dataset in ["uniform", "linear_10"] {
            for scan in ["seq", "bitmap"] {
                for cache in [Cache::Cold, Cache::Warm] {
                    for engine in ["pageio", "postgresql"] {
                        for (m, method) in methods.iter().enumerate() {
                            for direct in [false, true] {
                                for step in 0..=5 {
                                    for repeat in 1..=3 {
                                        let base = 1e-4
                                            * 3f64.powi(step as i32)
                                            * (1.0 + m as f64 * 0.3)
                                            * if engine == "pageio" { 1.0 } else { 1.2 };
                                        let mut r = record(
                                            engine,
                                            dataset,
                                            scan,
                                            cache,
                                            *method,
                                            direct,
                                            step,
                                            repeat,
                                            base * f64::from(repeat),
                                        );
                                        if dataset == "uniform" && cache == Cache::Cold {
                                            r.device_seconds = Some(base / 2.0);
                                        }
                                        runs.push(r);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        runs
    }

    fn png_size(bytes: &[u8]) -> (u32, u32) {
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
        assert_eq!(&bytes[12..16], b"IHDR", "first chunk is IHDR");
        let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        (be(&bytes[16..20]), be(&bytes[20..24]))
    }

    #[test]
    fn series_medians_per_series_and_step() {
        let c = Cache::Cold;
        let runs = vec![
            record("pageio", "u", "seq", c, ("sync", None), false, 1, 1, 3.0),
            record("pageio", "u", "seq", c, ("sync", None), false, 1, 2, 1.0),
            record("pageio", "u", "seq", c, ("sync", None), false, 1, 3, 2.0),
            record("pageio", "u", "seq", c, ("sync", None), false, 0, 1, 0.5),
            record(
                "postgresql",
                "u",
                "seq",
                c,
                ("worker", Some(3)),
                true,
                1,
                1,
                9.0,
            ),
            record(
                "postgresql",
                "u",
                "seq",
                c,
                ("worker", Some(3)),
                true,
                1,
                2,
                5.0,
            ),
        ];
        let m = series_medians(&runs);
        assert_eq!(
            m.keys().collect::<Vec<_>>(),
            ["pageio sync buffered", "postgresql worker(3) direct"]
        );
        let pageio = &m["pageio sync buffered"];
        assert_eq!(pageio.len(), 2);
        assert_eq!((pageio[0].step, pageio[0].seconds), (0, 0.5));
        assert_eq!((pageio[1].step, pageio[1].seconds), (1, 2.0));
        assert_eq!(pageio[1].selectivity, 10.0 / 1e6);
        assert_eq!(m["postgresql worker(3) direct"][0].seconds, 7.0);
    }

    #[test]
    fn unplottable_seconds_are_skipped() {
        let c = Cache::Warm;
        let runs = vec![
            record(
                "pageio",
                "u",
                "seq",
                c,
                ("sync", None),
                false,
                0,
                1,
                f64::NAN,
            ),
            record("pageio", "u", "seq", c, ("sync", None), false, 0, 2, 0.0),
            record("pageio", "u", "seq", c, ("sync", None), false, 0, 3, -1.0),
            record("pageio", "u", "seq", c, ("sync", None), false, 1, 1, 0.25),
            record(
                "pageio",
                "u",
                "seq",
                c,
                ("sync", None),
                false,
                1,
                2,
                f64::NAN,
            ),
            record(
                "pageio",
                "u",
                "seq",
                c,
                ("io_uring", None),
                false,
                1,
                1,
                0.0,
            ),
        ];
        let m = series_medians(&runs);
        assert_eq!(m.len(), 1, "a series with no valid time has no line");
        let points = &m["pageio sync buffered"];
        assert_eq!(points.len(), 1);
        assert_eq!((points[0].step, points[0].seconds), (1, 0.25));

        let dir = tempfile::tempdir().unwrap();
        let written = write_charts(&runs, dir.path()).unwrap();
        assert_eq!(written.len(), 2);
        let svg = std::fs::read_to_string(&written[0]).unwrap();
        assert!(svg.contains("pageio sync buffered"));
        assert!(!svg.contains("pageio io_uring buffered"));
    }

    #[test]
    fn every_group_gets_an_svg_and_a_png() {
        let runs = sweep();
        let dir = tempfile::tempdir().unwrap();
        let written = write_charts(&runs, dir.path()).unwrap();
        assert_eq!(written.len(), 2 * 2 * 2 * 2);
        for dataset in ["uniform", "linear_10"] {
            for scan in ["seq", "bitmap"] {
                for cache in ["cold", "warm"] {
                    let stem = format!("{dataset}-{scan}-{cache}");
                    let svg_path = dir.path().join(format!("{stem}.svg"));
                    let png_path = dir.path().join(format!("{stem}.png"));
                    assert!(written.contains(&svg_path) && written.contains(&png_path));

                    let svg = std::fs::read_to_string(&svg_path).unwrap();
                    let title = format!("{dataset}: {}, {cache} (1,000,000 rows)", scan_name(scan));
                    assert!(svg.contains(&title), "{stem}: title {title:?}");
                    for engine in ["pageio", "postgresql"] {
                        for method in ["sync", "worker(3)", "io_uring"] {
                            for mode in ["buffered", "direct"] {
                                let series = format!("{engine} {method} {mode}");
                                assert!(svg.contains(&series), "{stem}: {series}");
                            }
                        }
                    }
                    let device = dataset == "uniform" && cache == "cold";
                    assert_eq!(svg.contains("device limit"), device, "{stem}");

                    let png = std::fs::read(&png_path).unwrap();
                    assert_eq!(png_size(&png), (CHART_WIDTH, CHART_HEIGHT), "{stem}");
                }
            }
        }
    }

    #[test]
    fn device_limit_is_the_median_per_step() {
        let c = Cache::Cold;
        let mut runs = vec![
            record("pageio", "u", "seq", c, ("sync", None), false, 2, 1, 1.0),
            record(
                "pageio",
                "u",
                "seq",
                c,
                ("io_uring", None),
                false,
                2,
                1,
                1.0,
            ),
            record(
                "postgresql",
                "u",
                "seq",
                c,
                ("sync", None),
                false,
                2,
                1,
                1.0,
            ),
            record(
                "postgresql",
                "u",
                "seq",
                c,
                ("sync", None),
                false,
                3,
                1,
                1.0,
            ),
        ];
        runs[0].device_seconds = Some(0.3);
        runs[1].device_seconds = Some(0.1);
        runs[2].device_seconds = Some(0.2);
        let device = device_medians(&runs);
        assert_eq!(device.len(), 1);
        assert_eq!((device[0].step, device[0].seconds), (2, 0.2));
    }

    #[test]
    fn empty_input_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("charts");
        assert!(write_charts(&[], &out).unwrap().is_empty());
        assert!(!out.exists());
    }

    #[test]
    fn single_step_and_all_invalid_groups_still_draw() {
        let runs = vec![
            record(
                "pageio",
                "u",
                "index",
                Cache::Cold,
                ("sync", None),
                true,
                0,
                1,
                0.002,
            ),
            record(
                "pageio",
                "u",
                "index",
                Cache::Warm,
                ("sync", None),
                true,
                0,
                1,
                f64::NAN,
            ),
        ];
        let dir = tempfile::tempdir().unwrap();
        let written = write_charts(&runs, dir.path()).unwrap();
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "u-index-cold.svg",
                "u-index-cold.png",
                "u-index-warm.svg",
                "u-index-warm.png"
            ]
        );
        for p in written.iter().filter(|p| p.extension().unwrap() == "png") {
            assert_eq!(
                png_size(&std::fs::read(p).unwrap()),
                (CHART_WIDTH, CHART_HEIGHT)
            );
        }
        let warm = std::fs::read_to_string(&written[2]).unwrap();
        assert!(warm.contains("no valid timings"));
    }

    #[test]
    fn unwritable_directory_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, b"x").unwrap();
        let runs = vec![record(
            "pageio",
            "u",
            "seq",
            Cache::Cold,
            ("sync", None),
            false,
            0,
            1,
            1.0,
        )];
        let err = write_charts(&runs, &blocker.join("charts")).unwrap_err();
        assert!(err.to_string().contains("file/charts"), "{err}");
    }

    #[test]
    fn colours_follow_the_method() {
        assert_eq!(method_colour("worker(8)"), method_colour("worker(8)"));
        assert_ne!(method_colour("sync"), method_colour("io_uring"));
        let a = record(
            "pageio",
            "u",
            "seq",
            Cache::Cold,
            ("worker", Some(8)),
            false,
            0,
            1,
            1.0,
        );
        let b = record(
            "postgresql",
            "v",
            "index",
            Cache::Warm,
            ("worker", Some(8)),
            true,
            0,
            1,
            1.0,
        );
        let (sa, sb) = (style_of(&a), style_of(&b));
        assert_eq!(sa.colour, sb.colour);
        assert!(!sa.dashed && sb.dashed);
        assert!(!sa.triangle && sb.triangle);
    }

    #[test]
    fn axis_labels_and_titles() {
        assert_eq!(short_number(0.0001), "0.0001");
        assert_eq!(short_number(0.00030000000000000003), "0.0003");
        assert_eq!(short_number(100.0), "100");
        assert_eq!(short_number(2.5), "2.5");
        assert_eq!(short_number(1e-6), "1e-6");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(12_345), "12,345");
        assert_eq!(log_range(std::iter::empty(), (1.0, 10.0)), (1.0, 10.0));
        let (lo, hi) = log_range([2.0].into_iter(), (1.0, 10.0));
        assert!(lo < 2.0 && hi > 2.0 && hi / lo >= 9.999);
    }
}
