//! How a sample is shown: the one-snapshot table, the plain line per sample, and the full
//! screen of `--watch`.

use serde_json::Value;

use super::*;
use crate::aios::term::View;

/// What one sample shows, on a screen or as lines.
pub struct ServerView {
    pub(super) report: Report,
}

/// The columns of the in-flight table, in pg_aios's spelling.
pub(super) const IN_FLIGHT_COLUMNS: [&str; 8] = [
    "pid",
    "backend_type",
    "state",
    "operation",
    "off",
    "length",
    "relation",
    "target_desc",
];

impl ServerView {
    /// The in-flight rows as text cells, in [`IN_FLIGHT_COLUMNS`] order.
    pub(super) fn in_flight_cells(&self) -> Vec<[String; 8]> {
        self.report
            .in_flight
            .iter()
            .map(|io| {
                let column = |name: &str| match io.pg_aios.get(name) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                [
                    column("pid"),
                    io.backend_type.clone().unwrap_or_default(),
                    column("state"),
                    column("operation"),
                    column("off"),
                    column("length"),
                    io.relation
                        .as_ref()
                        .map(RelationRef::label)
                        .unwrap_or_default(),
                    column("target_desc"),
                ]
            })
            .collect()
    }

    /// The header line: server, version, time.
    pub(super) fn header(&self) -> String {
        let r = &self.report;
        format!(
            "PostgreSQL {} at {} (io_method={}), sampled {}",
            r.server.version, r.server.target, r.server.io_method, r.sampled_at
        )
    }

    /// The one-snapshot text: header, I/O workers, the in-flight I/Os as a table.
    pub(super) fn snapshot_lines(&self) -> Vec<String> {
        let r = &self.report;
        let mut lines = vec![self.header(), self.workers_text()];
        let cells = self.in_flight_cells();
        if cells.is_empty() {
            lines.push(match r.pid_filter {
                Some(pid) => format!("no I/O in flight for pid {pid}"),
                None => "no I/O in flight".to_string(),
            });
            return lines;
        }
        lines.push(format!("{} I/O(s) in flight:", cells.len()));
        let mut widths = IN_FLIGHT_COLUMNS.map(str::len);
        for row in &cells {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let numeric = [true, false, false, false, true, true, false, false];
        let format_row = |row: &[String]| {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else if numeric[i] {
                    line.push_str(&format!("{cell:>w$}  ", w = widths[i]));
                } else {
                    line.push_str(&format!("{cell:<w$}  ", w = widths[i]));
                }
            }
            line.trim_end().to_string()
        };
        let header: Vec<String> = IN_FLIGHT_COLUMNS.iter().map(|s| s.to_string()).collect();
        lines.push(format_row(&header));
        for row in &cells {
            lines.push(format_row(row));
        }
        lines.push("by backend:".to_string());
        for b in &r.in_flight_by_backend {
            let known = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".into());
            lines.push(format!(
                "{} {}  database {}  {}  wait {}  {}",
                b.pid,
                known(&b.backend_type),
                known(&b.database),
                known(&b.state),
                b.wait.as_deref().unwrap_or("-"),
                b.query.as_deref().unwrap_or("")
            ));
        }
        lines
    }

    /// `io workers 3 (1 busy)`.
    pub(super) fn workers_text(&self) -> String {
        let w = &self.report.io_workers;
        format!("io workers {} ({} busy)", w.count, w.busy)
    }

    /// The `total` rates, if this sample has rates.
    pub(super) fn total_rates(&self) -> Option<&Rates> {
        self.report
            .rates
            .as_ref()
            .and_then(|rates| rates.iter().find(|r| r.backend_type == "total"))
    }
}

/// Seconds-resolution time of a server timestamp (`2026-11-23 15:52:01.123+00` → `15:52:01`).
pub(super) fn clock_of(timestamp: &str) -> &str {
    timestamp
        .split(' ')
        .nth(1)
        .and_then(|t| t.get(..8))
        .unwrap_or(timestamp)
}

/// Columns the in-flight table's fixed columns take (pid to length, with the spaces
/// between them and the border).
const IN_FLIGHT_FIXED_WIDTH: u16 = 8 + 16 + 16 + 9 + 11 + 7 + 7 + 2;

/// The least `target_desc` keeps: enough for `blocks 1..3 in file` to show what it is.
const TARGET_DESC_MIN_WIDTH: u16 = 20;

/// The relation column's width: the longest name shown (at least the header), within what
/// the screen leaves after the fixed columns and the least of target_desc.
pub(super) fn relation_column_width(cells: &[[String; 8]], screen_width: u16) -> u16 {
    let longest = cells
        .iter()
        .map(|row| row[6].chars().count())
        .max()
        .unwrap_or(0)
        .max("relation".len());
    let room = screen_width
        .saturating_sub(IN_FLIGHT_FIXED_WIDTH)
        .saturating_sub(TARGET_DESC_MIN_WIDTH)
        .max("relation".len() as u16);
    u16::try_from(longest).unwrap_or(u16::MAX).min(room)
}

/// Bold, for table headers.
fn bold() -> ratatui::style::Style {
    use ratatui::style::{Modifier, Style};
    Style::default().add_modifier(Modifier::BOLD)
}

/// A bordered block titled `title`.
fn titled(title: &str) -> ratatui::widgets::Block<'_> {
    use ratatui::widgets::{Block, Borders};
    Block::default().borders(Borders::ALL).title(title)
}

/// The `pg_stat_io` rates of `rates`' backend types, per second, in `area`.
fn draw_rates(
    frame: &mut ratatui::Frame,
    area: ratatui::layout::Rect,
    rates: &[&Rates],
    track_io_timing: bool,
) {
    use ratatui::layout::Constraint;
    use ratatui::widgets::{Row, Table};

    let number = |v: f64| format!("{v:.1}");
    let rate_rows: Vec<Row> = if rates.is_empty() {
        vec![Row::new(vec![
            "(rates from the second sample on)".to_string()
        ])]
    } else {
        rates
            .iter()
            .map(|rate| {
                Row::new(vec![
                    rate.backend_type.clone(),
                    number(rate.reads_per_s),
                    number(rate.read_mb_per_s),
                    number(rate.hits_per_s),
                    number(rate.writes_per_s),
                    number(rate.write_mb_per_s),
                    number(rate.extends_per_s),
                    if track_io_timing {
                        number(rate.read_time_ms_per_s)
                    } else {
                        "—".to_string()
                    },
                ])
            })
            .collect()
    };
    frame.render_widget(
        Table::new(
            rate_rows,
            [
                Constraint::Length(28),
                Constraint::Length(10),
                Constraint::Length(10),
                Constraint::Length(10),
                Constraint::Length(10),
                Constraint::Length(10),
                Constraint::Length(10),
                Constraint::Length(14),
            ],
        )
        .header(
            Row::new(vec![
                "backend_type",
                "reads/s",
                "read MB/s",
                "hits/s",
                "writes/s",
                "write MB/s",
                "extends/s",
                "read ms/s",
            ])
            .style(bold()),
        )
        .block(titled(if track_io_timing {
            " pg_stat_io, per second "
        } else {
            TIMING_OFF_TITLE
        })),
        area,
    );
}

/// The rates' title when `track_io_timing` is off: read ms/s would be a 0 that says nothing.
const TIMING_OFF_TITLE: &str =
    " pg_stat_io, per second — read ms/s: — (track_io_timing is off: SET it on to see I/O times) ";

impl ServerView {
    /// Only the backend types that did I/O this interval (and the total): a server has
    /// fifteen, most of them idle, and the screen is for what moves.
    fn moving_rates(&self) -> Vec<&Rates> {
        self.report
            .rates
            .iter()
            .flatten()
            .filter(|rate| {
                rate.backend_type == "total"
                    || [
                        rate.reads_per_s,
                        rate.hits_per_s,
                        rate.writes_per_s,
                        rate.extends_per_s,
                        rate.evictions_per_s,
                    ]
                    .iter()
                    .any(|&v| v > 0.0)
            })
            .collect()
    }

    /// The in-flight I/Os grouped by backend, in `area`: who (type, database, state, wait
    /// event) and what (the first line of the query, cut to the screen).
    fn draw_backends(&self, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        use ratatui::layout::Constraint;
        use ratatui::widgets::{Row, Table};

        let backend_rows: Vec<Row> = self
            .report
            .in_flight_by_backend
            .iter()
            .map(|b| {
                Row::new(vec![
                    b.pid.to_string(),
                    b.backend_type.clone().unwrap_or_default(),
                    b.database.clone().unwrap_or_default(),
                    b.state.clone().unwrap_or_default(),
                    b.wait.clone().unwrap_or_default(),
                    b.ios.to_string(),
                    (b.bytes / 1024).to_string(),
                    b.query.clone().unwrap_or_default(),
                ])
            })
            .collect();
        frame.render_widget(
            Table::new(
                backend_rows,
                [
                    Constraint::Length(8),
                    Constraint::Length(16),
                    Constraint::Length(10),
                    Constraint::Length(8),
                    Constraint::Length(20),
                    Constraint::Length(4),
                    Constraint::Length(7),
                    Constraint::Min(10),
                ],
            )
            .header(
                Row::new(vec![
                    "pid",
                    "backend_type",
                    "database",
                    "state",
                    "wait",
                    "ios",
                    "kB",
                    "query",
                ])
                .style(bold()),
            )
            .block(titled(" in flight by backend ")),
            area,
        );
    }

    /// The in-flight I/Os grouped by relation, in `area`.
    fn draw_relations(&self, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        use ratatui::layout::Constraint;
        use ratatui::widgets::{Row, Table};

        let relation_rows: Vec<Row> = self
            .report
            .in_flight_by_relation
            .iter()
            .map(|rel| {
                Row::new(vec![
                    rel.relation.clone(),
                    rel.ios.to_string(),
                    (rel.bytes / 1024).to_string(),
                ])
            })
            .collect();
        frame.render_widget(
            Table::new(
                relation_rows,
                [
                    Constraint::Min(20),
                    Constraint::Length(4),
                    Constraint::Length(7),
                ],
            )
            .header(Row::new(vec!["relation", "ios", "kB"]).style(bold()))
            .block(titled(" in flight by relation ")),
            area,
        );
    }

    /// Every in-flight I/O, in pg_aios's columns, in `area`.
    fn draw_in_flight(&self, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        use ratatui::layout::Constraint;
        use ratatui::widgets::{Row, Table};

        let cells = self.in_flight_cells();
        let relation_width = relation_column_width(&cells, area.width);
        let io_rows: Vec<Row> = cells
            .into_iter()
            .map(|cells| Row::new(cells.to_vec()))
            .collect();
        frame.render_widget(
            Table::new(
                io_rows,
                [
                    Constraint::Length(8),
                    Constraint::Length(16),
                    Constraint::Length(16),
                    Constraint::Length(9),
                    Constraint::Length(11),
                    Constraint::Length(7),
                    Constraint::Length(relation_width),
                    Constraint::Min(TARGET_DESC_MIN_WIDTH),
                ],
            )
            .header(Row::new(IN_FLIGHT_COLUMNS.to_vec()).style(bold()))
            .block(titled(" pg_aios ")),
            area,
        );
    }
}

impl View for ServerView {
    fn draw(&self, frame: &mut ratatui::Frame) {
        use ratatui::layout::{Constraint, Layout};
        use ratatui::widgets::Paragraph;

        let r = &self.report;
        let rates = self.moving_rates();
        let rates_height = (rates.len() as u16).max(1) + 3;
        let backends_height = (r.in_flight_by_backend.len() as u16).clamp(1, 8) + 3;
        let relations_height = (r.in_flight_by_relation.len() as u16).clamp(1, 8) + 3;
        let [head, rates_area, middle, ios_area] = Layout::vertical([
            Constraint::Length(2),
            Constraint::Length(rates_height),
            Constraint::Length(backends_height.max(relations_height)),
            Constraint::Min(3),
        ])
        .areas(frame.area());
        let [backends_area, relations_area] =
            Layout::horizontal([Constraint::Percentage(70), Constraint::Percentage(30)])
                .areas(middle);

        frame.render_widget(
            Paragraph::new(vec![
                self.header().into(),
                format!(
                    "{} · {} I/O(s) in flight · q quits",
                    self.workers_text(),
                    r.in_flight.len()
                )
                .into(),
            ]),
            head,
        );
        draw_rates(frame, rates_area, &rates, r.server.track_io_timing);
        self.draw_backends(frame, backends_area);
        self.draw_relations(frame, relations_area);
        self.draw_in_flight(frame, ios_area);
    }

    /// One line per sample, in the field order and spelling of `pageio aios --watch`'s line
    /// for a pageio process (`pid=… io_method=… ios_per_s=… mb_per_s=… depth=… avg_io_kb=…
    /// wait_ms_per_s=… workers=… busy=…`), then what only a server has: the time, read
    /// ms/s, hits, the backends and relations with I/O in flight.
    fn plain_lines(&self) -> Vec<String> {
        let r = &self.report;
        let total = self.total_rates();
        let rate = |f: &dyn Fn(&Rates) -> String| total.map(f).unwrap_or_else(|| "-".into());
        let read_ms = if r.server.track_io_timing {
            rate(&|t| format!("{:.1}", t.read_time_ms_per_s))
        } else {
            "-(track_io_timing=off)".to_string()
        };
        let bytes_in_flight: u64 = r.in_flight_by_backend.iter().map(|b| b.bytes).sum();
        let avg_io_kb = if r.in_flight.is_empty() {
            "-".to_string()
        } else {
            format!(
                "{:.1}",
                bytes_in_flight as f64 / 1024.0 / r.in_flight.len() as f64
            )
        };
        let backends: Vec<String> = r
            .in_flight_by_backend
            .iter()
            .map(|b| {
                format!(
                    "{} {} {}",
                    b.pid,
                    b.backend_type.as_deref().unwrap_or("?"),
                    b.ios
                )
            })
            .collect();
        let relations: Vec<String> = r
            .in_flight_by_relation
            .iter()
            .map(|rel| format!("{} {}", rel.relation, rel.ios))
            .collect();
        vec![format!(
            "pid=server io_method={} ios_per_s={} mb_per_s={} depth={} avg_io_kb={avg_io_kb} read_ms_per_s={read_ms} workers={} busy={} reads_per_s={} hits_per_s={} writes_per_s={} time={} backends=[{}] relations=[{}]",
            r.server.io_method,
            rate(&|t| format!("{:.0}", t.reads_per_s + t.writes_per_s)),
            rate(&|t| format!("{:.1}", t.read_mb_per_s + t.write_mb_per_s)),
            r.in_flight.len(),
            r.io_workers.count,
            r.io_workers.busy,
            rate(&|t| format!("{:.0}", t.reads_per_s)),
            rate(&|t| format!("{:.0}", t.hits_per_s)),
            rate(&|t| format!("{:.0}", t.writes_per_s)),
            clock_of(&r.sampled_at),
            backends.join(", "),
            relations.join(", "),
        )]
    }
}
