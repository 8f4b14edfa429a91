//! `pageio tables`: a stopped cluster's tables, like psql's `\dt+`, read offline.
//!
//! ```text
//!   pageio tables [-D] DIR [--database NAME] [--json]
//! ```
//!
//! The library's catalog reader (`pageio::catalog`) reads the cluster's catalogs through
//! the buffer pool — checksums verified when the cluster has them — and lists every table
//! and partitioned table (partitions included) outside the system schemas, what `\dt+ *.*`
//! lists: schema, name, kind, owner (`pg_authid.rolname` of `relowner`), persistence,
//! access method (`pg_am.amname` of `relam`: `heap`; none for a partitioned table), rows
//! (`reltuples`; "unknown" before the first VACUUM or ANALYZE, where `reltuples` is -1),
//! pages (`relpages`), size (`pg_table_size`: every fork of the table and of its TOAST
//! table, from the files), the file (`pg_relation_filepath`) and its indexes with their key
//! columns. `--json` prints one object with the same fields, sizes in bytes, `rows` null
//! when unknown, and `owner` null for an owner the cluster has no role for (the text says
//! `unknown (OID=n)`, as `pg_get_userbyid` does).

use std::path::PathBuf;

use clap::Args;
use pageio::catalog::{Catalog, Relation};
use pageio::Aio;

use crate::datadir::DataDirArgs;
use crate::settings::SettingsArgs;
use crate::CliResult;

/// Arguments of `pageio tables`.
#[derive(Debug, Args)]
pub struct TablesArgs {
    /// The data directory of a cleanly stopped PostgreSQL 18 cluster: -D DIR, --pgdata DIR,
    /// a directory argument, or $PGDATA
    #[command(flatten)]
    location: DataDirArgs,
    /// The data directory `location` names, set by `run`.
    #[arg(skip)]
    pgdata: PathBuf,
    /// The database whose tables to list
    #[arg(long, value_name = "NAME", default_value = "postgres")]
    database: String,
    /// Print one JSON object instead of a table ("rows" is null for a table never vacuumed
    /// or analysed)
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    settings: SettingsArgs,
}

#[derive(serde::Serialize)]
struct IndexRow {
    name: String,
    access_method: String,
    key_columns: Vec<Option<String>>,
    /// The key columns for the text table (`a, (expression)`).
    #[serde(skip)]
    key_list: String,
    path: Option<String>,
    pages: i32,
    unique: bool,
    primary: bool,
}

#[derive(serde::Serialize)]
struct TableRow {
    schema: String,
    name: String,
    kind: &'static str,
    owner: Option<String>,
    owner_oid: u32,
    persistence: &'static str,
    access_method: Option<String>,
    /// `reltuples`; `None` where it is -1, never vacuumed or analysed.
    rows: Option<f32>,
    pages: i32,
    size_bytes: u64,
    path: Option<String>,
    tablespace_oid: u32,
    toast_path: Option<String>,
    indexes: Vec<IndexRow>,
}

#[derive(serde::Serialize)]
struct Report {
    pgdata: String,
    database: String,
    tables: Vec<TableRow>,
}

fn row(
    pgdata: &std::path::Path,
    catalog: &Catalog<'_>,
    r: &Relation,
) -> Result<TableRow, pageio::catalog::CatalogError> {
    Ok(TableRow {
        schema: r.schema.clone(),
        name: r.name.clone(),
        kind: r.kind.describe(),
        owner: catalog.role_name(r.owner_oid)?.map(str::to_string),
        owner_oid: r.owner_oid,
        persistence: match r.persistence {
            'p' => "permanent",
            'u' => "unlogged",
            't' => "temporary",
            _ => "unknown",
        },
        access_method: r.access_method.clone(),
        // PostgreSQL 14 and later store -1 for "not yet known"; no other value is negative.
        rows: (r.reltuples >= 0.0).then_some(r.reltuples),
        pages: r.relpages,
        size_bytes: r.table_size_bytes(pgdata),
        path: r.path.clone(),
        tablespace_oid: r.tablespace_oid,
        toast_path: r.toast.as_ref().and_then(|t| t.path.clone()),
        indexes: r
            .indexes
            .iter()
            .map(|i| IndexRow {
                name: i.name.clone(),
                access_method: i.access_method.clone(),
                key_columns: i.key_columns.clone(),
                key_list: i.key_list(),
                path: i.path.clone(),
                pages: i.relpages,
                unique: i.is_unique,
                primary: i.is_primary,
            })
            .collect(),
    })
}

/// `pg_size_pretty`: bytes below 10240, then kB, MB, GB, TB, PB, each rounded half up and
/// switched to the next unit at 10240.
fn size_pretty(bytes: u64) -> String {
    if bytes < 10 * 1024 {
        return format!("{bytes} bytes");
    }
    // In half-units, so the last shift can round half up.
    let mut half_units = bytes >> 9;
    let units = ["kB", "MB", "GB", "TB", "PB"];
    for (i, unit) in units.iter().enumerate() {
        let rounded = half_units.div_ceil(2);
        if rounded < 10 * 1024 || i == units.len() - 1 {
            return format!("{rounded} {unit}");
        }
        half_units >>= 10;
    }
    unreachable!("the last unit always returns")
}

/// Runs the subcommand.
pub fn run(mut args: TablesArgs) -> CliResult {
    let dir = args.location.resolve().map_err(|e| e.line())?;
    dir.check()?;
    args.pgdata = dir.path;
    let settings = args.settings.build()?;
    let mut config = settings.config().clone();
    // The catalogs of a small cluster are a few MB; a smaller pool maps less memory.
    if !settings.is_set("shared_buffers") {
        config.shared_buffers_bytes = 32 << 20;
    }
    let aio = Aio::new(config)?;
    if let Some(reason) = aio.fallback_reason() {
        eprintln!("pageio: {reason}");
    }
    let catalog = Catalog::open_cluster(&args.pgdata, &aio)?;
    let db = catalog.database(&args.database)?;
    let tables: Vec<TableRow> = db
        .tables()?
        .iter()
        .map(|r| row(&args.pgdata, &catalog, r))
        .collect::<Result<_, _>>()?;
    let report = Report {
        pgdata: args.pgdata.display().to_string(),
        database: args.database.clone(),
        tables,
    };
    if args.json {
        return print(format!("{}\n", serde_json::to_string_pretty(&report)?));
    }
    let header = [
        "Schema",
        "Name",
        "Type",
        "Owner",
        "Persistence",
        "Access method",
        "Rows",
        "Pages",
        "Size",
        "File",
        "Indexes",
    ];
    let lines: Vec<[String; 11]> = report
        .tables
        .iter()
        .map(|t| {
            [
                t.schema.clone(),
                t.name.clone(),
                t.kind.to_string(),
                // pg_get_userbyid's words for a role that is gone.
                t.owner
                    .clone()
                    .unwrap_or_else(|| format!("unknown (OID={})", t.owner_oid)),
                t.persistence.to_string(),
                t.access_method.clone().unwrap_or_default(),
                t.rows
                    .map_or_else(|| "unknown".to_string(), |rows| rows.to_string()),
                t.pages.to_string(),
                size_pretty(t.size_bytes),
                t.path.clone().unwrap_or_default(),
                t.indexes
                    .iter()
                    .map(|i| format!("{} {}({})", i.name, i.access_method, i.key_list))
                    .collect::<Vec<_>>()
                    .join("; "),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for l in &lines {
        for (w, cell) in widths.iter_mut().zip(l) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = format!("List of tables in database \"{}\"\n", report.database);
    let fmt_line = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!(" {c:<w$} "))
            .collect::<Vec<_>>()
            .join("|")
            .trim_end()
            .to_string()
    };
    out += &fmt_line(header.to_vec());
    out.push('\n');
    out += &format!(
        "{}\n",
        widths
            .iter()
            .map(|w| "-".repeat(w + 2))
            .collect::<Vec<_>>()
            .join("+")
    );
    for l in &lines {
        out += &fmt_line(l.iter().map(String::as_str).collect());
        out.push('\n');
    }
    out += &format!(
        "({} row{})\n",
        lines.len(),
        if lines.len() == 1 { "" } else { "s" }
    );
    print(out)
}

/// Writes the output at once; a reader that went away (`| head`) is not an error.
fn print(text: String) -> CliResult {
    crate::write_stdout(&text)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn size_pretty_is_pg_size_pretty() {
        assert_eq!(super::size_pretty(0), "0 bytes");
        assert_eq!(super::size_pretty(10239), "10239 bytes");
        assert_eq!(super::size_pretty(10240), "10 kB");
        assert_eq!(super::size_pretty(9109504), "8896 kB");
        assert_eq!(super::size_pretty(10 * 1024 * 1024), "10 MB");
        assert_eq!(super::size_pretty(1536), "1536 bytes");
    }
}
