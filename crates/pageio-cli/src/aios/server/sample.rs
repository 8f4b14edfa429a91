//! One sample: the connection thread that owns the client and answers each request with
//! the rows of `pg_aios`, `pg_stat_activity` and `pg_stat_io` (in a read-only transaction),
//! and the naming of the files in flight (`target_desc` → relation, cached per file).

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pageio::catalog::DEFAULT_TABLESPACE_OID;
use postgres::{Client, Config, NoTls};
use serde::Serialize;
use serde_json::{Map, Value};

use super::*;

/// The rows of one sample, as the connection thread read them.
pub(super) struct Rows {
    /// `pg_aios`, every column, as `row_to_json` gave them.
    pub(super) aios: Vec<Map<String, Value>>,
    /// `pg_stat_io`, every column.
    pub(super) stat_io: Vec<Map<String, Value>>,
    /// `pg_stat_activity`: pid, backend_type, datname, usename, state, wait_event_type,
    /// wait_event, query_start, backend_start.
    pub(super) activity: Vec<Map<String, Value>>,
    /// Each file named in `aios`, resolved.
    pub(super) relations: HashMap<String, RelationRef>,
    /// `clock_timestamp()` on the server when the sample started.
    pub(super) sampled_at: String,
    /// `transaction_read_only` inside the sample's transaction (always `on`).
    pub(super) transaction_read_only: bool,
    /// When the rows arrived (this side's monotonic clock).
    pub(super) taken: Instant,
}

/// What the connection thread sends back.
pub(super) enum Answer {
    /// The startup exchange finished.
    Connected,
    /// The checks passed; the server's facts.
    Ready(ServerFacts),
    /// One sample.
    Sample(Box<Rows>),
}

/// The main thread's end of the connection: asks for samples, waits with a bound, and
/// turns consecutive samples into views.
pub(super) struct Sampler {
    pub(super) requests: mpsc::Sender<()>,
    pub(super) answers: mpsc::Receiver<Result<Answer, ServerError>>,
    pub(super) facts: ServerFacts,
    pub(super) pid: Option<i32>,
    pub(super) previous: Option<(Instant, BTreeMap<String, Counters>)>,
}

impl Sampler {
    /// Connects on a new thread and waits (bounded) until the server is known to have
    /// `pg_aios` readable by this role.
    pub(super) fn connect(config: Config, pid: Option<i32>) -> Result<Sampler, ServerError> {
        let target = describe_target(&config);
        let bound = connect_bound(&config);
        let (request_tx, request_rx) = mpsc::channel::<()>();
        let (answer_tx, answer_rx) = mpsc::channel();
        let thread_target = target.clone();
        std::thread::Builder::new()
            .name("pg-connection".into())
            .spawn(move || serve(config, thread_target, request_rx, answer_tx))
            .map_err(|e| ServerError::Connect {
                target: target.clone(),
                cause: format!("cannot start the connection thread: {e}"),
            })?;
        let mut facts = None;
        for (bound, doing) in [
            (bound, "connecting"),
            (check_bound(), "checking the version and privileges"),
        ] {
            match wait_answer(&answer_rx, bound, &target, doing)? {
                Answer::Connected => {}
                Answer::Ready(ready) => facts = Some(ready),
                Answer::Sample(_) => {}
            }
        }
        let facts = facts.ok_or_else(|| ServerError::Query {
            target: target.clone(),
            doing: "connecting",
            cause: "the connection thread answered out of order".into(),
        })?;
        Ok(Sampler {
            requests: request_tx,
            answers: answer_rx,
            facts,
            pid,
            previous: None,
        })
    }

    /// Takes one sample and makes its view (rates against the previous sample, if any).
    pub(super) fn sample(&mut self) -> Result<ServerView, ServerError> {
        let target = self.facts.target.clone();
        self.requests.send(()).map_err(|_| ServerError::Query {
            target: target.clone(),
            doing: "sampling",
            cause: "the connection closed".into(),
        })?;
        let rows = match wait_answer(&self.answers, answer_bound(), &target, "sampling")? {
            Answer::Sample(rows) => rows,
            Answer::Connected | Answer::Ready(_) => {
                return Err(ServerError::Query {
                    target,
                    doing: "sampling",
                    cause: "the connection thread answered out of order".into(),
                })
            }
        };
        let counters = counters_by_backend_type(&rows.stat_io);
        let rates = self.previous.as_ref().map(|(when, before)| {
            let elapsed_s = rows.taken.duration_since(*when).as_secs_f64();
            rates_between(before, &counters, elapsed_s)
        });
        let interval_s = self
            .previous
            .as_ref()
            .map(|(when, _)| rows.taken.duration_since(*when).as_secs_f64());
        self.previous = Some((rows.taken, counters.clone()));
        Ok(ServerView {
            report: build_report(&self.facts, *rows, counters, rates, interval_s, self.pid),
        })
    }
}

/// Waits up to `bound` for the connection thread's next answer.
pub(super) fn wait_answer(
    answers: &mpsc::Receiver<Result<Answer, ServerError>>,
    bound: Duration,
    target: &str,
    doing: &'static str,
) -> Result<Answer, ServerError> {
    match answers.recv_timeout(bound) {
        Ok(answer) => answer,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(ServerError::Timeout {
            target: target.to_string(),
            doing,
            bound_secs: bound.as_secs_f64().ceil() as u64,
            fix: timeout_fix(doing),
        }),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(ServerError::Query {
            target: target.to_string(),
            doing,
            cause: "the connection thread ended without an answer".into(),
        }),
    }
}

/// The connection thread: connect, check, then one sample per request until the main
/// thread hangs up.
pub(super) fn serve(
    config: Config,
    target: String,
    requests: mpsc::Receiver<()>,
    answers: mpsc::Sender<Result<Answer, ServerError>>,
) {
    let mut client = match config.connect(NoTls) {
        Ok(client) => client,
        Err(e) => {
            let _ = answers.send(Err(connect_error(&e, &config, target)));
            return;
        }
    };
    if answers.send(Ok(Answer::Connected)).is_err() {
        return;
    }
    let facts = match check_server(&mut client, &target) {
        Ok(facts) => facts,
        Err(e) => {
            let _ = answers.send(Err(e));
            return;
        }
    };
    let mut cache = RelationCache::default();
    let database_oid = facts.database_oid;
    if answers.send(Ok(Answer::Ready(facts))).is_err() {
        return;
    }
    while requests.recv().is_ok() {
        let answer = take_rows(&mut client, &target, database_oid, &mut cache)
            .map(|rows| Answer::Sample(Box::new(rows)));
        let failed = answer.is_err();
        if answers.send(answer).is_err() || failed {
            return;
        }
    }
}

/// Every row of `sql` (which selects one `row_to_json(…)::text` column) as a JSON object.
pub(super) fn json_rows(
    transaction: &mut postgres::Transaction<'_>,
    sql: &str,
    target: &str,
    doing: &'static str,
) -> Result<Vec<Map<String, Value>>, ServerError> {
    let rows = transaction
        .query(sql, &[])
        .map_err(|e| ServerError::Query {
            target: target.to_string(),
            doing,
            cause: error_text(&e),
        })?;
    rows.iter()
        .map(|row| {
            let text: String = row.get(0);
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(map)) => Ok(map),
                _ => Err(ServerError::Query {
                    target: target.to_string(),
                    doing,
                    cause: format!("row_to_json gave something that is not an object: {text}"),
                }),
            }
        })
        .collect()
}

/// One sample: pg_aios, pg_stat_activity and pg_stat_io in one read-only transaction, and
/// the relation of every file pg_aios names.
pub(super) fn take_rows(
    client: &mut Client,
    target: &str,
    database_oid: u32,
    cache: &mut RelationCache,
) -> Result<Rows, ServerError> {
    let query_error = |doing: &'static str| {
        move |e: postgres::Error| ServerError::Query {
            target: target.to_string(),
            doing,
            cause: error_text(&e),
        }
    };
    let mut transaction = client
        .build_transaction()
        .read_only(true)
        .start()
        .map_err(query_error("starting a read-only transaction"))?;
    let head = transaction
        .query_one(
            "SELECT clock_timestamp()::text, current_setting('transaction_read_only') = 'on'",
            &[],
        )
        .map_err(query_error("reading the clock"))?;
    // pg_aios first: its rows are the most transient.
    let aios = json_rows(
        &mut transaction,
        "SELECT row_to_json(a)::text FROM pg_catalog.pg_aios a ORDER BY a.pid, a.io_id",
        target,
        "reading pg_aios",
    )?;
    let activity = json_rows(
        &mut transaction,
        "SELECT row_to_json(s)::text FROM (SELECT pid, backend_type, datname, usename, state, \
             wait_event_type, wait_event, query_start, backend_start, \
             left(query, 2000) AS query \
             FROM pg_catalog.pg_stat_activity ORDER BY pid) s",
        target,
        "reading pg_stat_activity",
    )?;
    let stat_io = json_rows(
        &mut transaction,
        "SELECT row_to_json(s)::text FROM pg_catalog.pg_stat_io s",
        target,
        "reading pg_stat_io",
    )?;
    let relations = cache.resolve(&mut transaction, &aios, database_oid, target)?;
    let sampled_at: String = head.get(0);
    let transaction_read_only: bool = head.get(1);
    transaction
        .commit()
        .map_err(query_error("ending the read-only transaction"))?;
    Ok(Rows {
        aios,
        stat_io,
        activity,
        relations,
        sampled_at,
        transaction_read_only,
        taken: Instant::now(),
    })
}

/// A file named by `pg_aios.target_desc` and, where the catalog could say, its relation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RelationRef {
    /// The path relative to the data directory, as pg_aios gives it (`base/5/16384`).
    pub file: String,
    /// The fork: `main`, `fsm`, `vm` or `init`.
    pub fork: &'static str,
    /// The tablespace OID (`0`: the database's default tablespace, `1664`: pg_global).
    pub tablespace_oid: u32,
    /// The database OID (`0` for shared relations).
    pub database_oid: u32,
    /// The file's number (`pg_class.relfilenode`, or the relation mapper's).
    pub relfilenode: u32,
    /// True for a temporary relation's file (`t3_16384`).
    pub temporary: bool,
    /// The database's name, if it still exists.
    pub database: Option<String>,
    /// The relation's OID, when resolved.
    pub oid: Option<u32>,
    /// Its schema, when resolved.
    pub schema: Option<String>,
    /// Its name, when resolved.
    pub name: Option<String>,
    /// Why the name is missing, when it is.
    pub note: Option<String>,
}

impl RelationRef {
    /// `schema.name` when resolved, else the file (and its database, when known: a file
    /// of another database is the usual reason for no name).
    pub fn label(&self) -> String {
        match (&self.schema, &self.name, &self.database) {
            (Some(schema), Some(name), _) => format!("{schema}.{name}"),
            (_, _, Some(database)) => format!("file {} (database {database})", self.file),
            _ => format!("file {}", self.file),
        }
    }
}

/// The file path inside `target_desc` (`blocks 0..15 in file "base/5/16384"`).
pub fn file_of_target_desc(target_desc: &str) -> Option<&str> {
    let start = target_desc.find("in file \"")? + "in file \"".len();
    let rest = &target_desc[start..];
    let end = rest.rfind('"')?;
    Some(&rest[..end])
}

/// Tablespace, database, relfilenode, fork and temporariness of a relation path as
/// PostgreSQL's `relpath()` writes it ([`pageio::catalog::parse_relpath`]), or `None` for a
/// path of another shape. The default tablespace is given as 0, as
/// `pg_filenode_relation()` takes it.
pub fn parse_relation_path(file: &str) -> Option<RelationRef> {
    let parts = pageio::catalog::parse_relpath(file)?;
    Some(RelationRef {
        file: file.to_string(),
        fork: parts.fork.name(),
        tablespace_oid: match parts.tablespace_oid {
            DEFAULT_TABLESPACE_OID => 0,
            spc => spc,
        },
        database_oid: parts.database_oid,
        relfilenode: parts.relfilenode,
        temporary: parts.temp_proc_number.is_some(),
        database: None,
        oid: None,
        schema: None,
        name: None,
        note: None,
    })
}

/// Relations already looked up, by file path, and database names by OID.
#[derive(Default)]
pub(super) struct RelationCache {
    pub(super) by_file: HashMap<String, RelationRef>,
    pub(super) databases: HashMap<u32, String>,
}

impl RelationCache {
    /// The relation of every file that `aios` names: from the cache, else looked up in one
    /// query for all new files of the connected database (or shared).
    pub(super) fn resolve(
        &mut self,
        transaction: &mut postgres::Transaction<'_>,
        aios: &[Map<String, Value>],
        connected_database_oid: u32,
        target: &str,
    ) -> Result<HashMap<String, RelationRef>, ServerError> {
        let query_error = |doing: &'static str| {
            move |e: postgres::Error| ServerError::Query {
                target: target.to_string(),
                doing,
                cause: error_text(&e),
            }
        };
        let files: Vec<&str> = aios
            .iter()
            .filter_map(|row| row.get("target_desc").and_then(Value::as_str))
            .filter_map(file_of_target_desc)
            .collect();
        let mut new: Vec<RelationRef> = Vec::new();
        for file in &files {
            if self.by_file.contains_key(*file) || new.iter().any(|r| r.file == *file) {
                continue;
            }
            match parse_relation_path(file) {
                Some(relation) => new.push(relation),
                None => {
                    // A path of a shape this version does not know: shown as it is.
                    self.by_file.insert(
                        file.to_string(),
                        RelationRef {
                            file: file.to_string(),
                            fork: "main",
                            tablespace_oid: 0,
                            database_oid: 0,
                            relfilenode: 0,
                            temporary: false,
                            database: None,
                            oid: None,
                            schema: None,
                            name: None,
                            note: Some("not a relation path pageio knows".into()),
                        },
                    );
                }
            }
        }
        if !new.is_empty() {
            if new
                .iter()
                .any(|r| r.database_oid != 0 && !self.databases.contains_key(&r.database_oid))
            {
                let rows = transaction
                    .query(
                        "SELECT oid::int8, datname::text FROM pg_catalog.pg_database",
                        &[],
                    )
                    .map_err(query_error("reading pg_database"))?;
                self.databases = rows
                    .iter()
                    .map(|row| (row.get::<_, i64>(0) as u32, row.get::<_, String>(1)))
                    .collect();
            }
            name_relations(transaction, &mut new, connected_database_oid)
                .map_err(query_error("resolving relations with pg_filenode_relation"))?;
            let connected_name = self.databases.get(&connected_database_oid).cloned();
            for mut relation in new {
                relation.database = self.databases.get(&relation.database_oid).cloned();
                if relation.name.is_none() {
                    relation.note = Some(unresolved_note(
                        &relation,
                        connected_database_oid,
                        connected_name.as_deref(),
                    ));
                }
                if self.by_file.len() >= RELATION_CACHE_ENTRIES {
                    self.by_file.clear();
                }
                self.by_file.insert(relation.file.clone(), relation);
            }
        }
        let found: HashMap<String, RelationRef> = files
            .iter()
            .filter_map(|file| {
                self.by_file
                    .get(*file)
                    .map(|r| (file.to_string(), r.clone()))
            })
            .collect();
        // Unresolved files of the connected database are not kept: a relation created in a
        // transaction that has not committed yet gets its name once it has.
        self.by_file
            .retain(|_, r| r.name.is_some() || r.database_oid != connected_database_oid);
        Ok(found)
    }
}

/// Names the relations of `new` whose files belong to the connected database (or are
/// shared) with one `pg_filenode_relation()` query; the others cannot be named from here.
fn name_relations(
    transaction: &mut postgres::Transaction<'_>,
    new: &mut [RelationRef],
    connected_database_oid: u32,
) -> Result<(), postgres::Error> {
    let here: Vec<usize> = (0..new.len())
        .filter(|&i| new[i].database_oid == connected_database_oid || new[i].database_oid == 0)
        .collect();
    if here.is_empty() {
        return Ok(());
    }
    let tablespaces: Vec<i64> = here.iter().map(|&i| new[i].tablespace_oid as i64).collect();
    let nodes: Vec<i64> = here.iter().map(|&i| new[i].relfilenode as i64).collect();
    let rows = transaction.query(
        "SELECT f.ord::int8, c.oid::int8, n.nspname::text, c.relname::text \
         FROM unnest($1::int8[], $2::int8[]) WITH ORDINALITY AS f(spc, node, ord) \
         LEFT JOIN pg_catalog.pg_class c \
           ON c.oid = pg_catalog.pg_filenode_relation(f.spc::oid, f.node::oid) \
         LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace",
        &[&tablespaces, &nodes],
    )?;
    for row in rows {
        let ord = row.get::<_, i64>(0) as usize;
        let Some(&i) = ord.checked_sub(1).and_then(|o| here.get(o)) else {
            continue;
        };
        let relation = &mut new[i];
        relation.oid = row.get::<_, Option<i64>>(1).map(|oid| oid as u32);
        relation.schema = row.get(2);
        relation.name = row.get(3);
    }
    Ok(())
}

/// Why a file's relation has no name.
pub(super) fn unresolved_note(
    relation: &RelationRef,
    connected_database_oid: u32,
    connected_name: Option<&str>,
) -> String {
    if relation.database_oid != 0 && relation.database_oid != connected_database_oid {
        let database = match &relation.database {
            Some(name) => format!("database \"{name}\" (OID {})", relation.database_oid),
            None => format!("database OID {} (dropped?)", relation.database_oid),
        };
        return format!(
            "relfilenode {} in {database}, not the connected database \"{}\": a catalog can only be read from its own database, so it is shown by file; connect to that database to see its name",
            relation.relfilenode,
            connected_name.unwrap_or("?")
        );
    }
    if relation.temporary {
        return format!(
            "temporary relfilenode {} of another session: not in pg_filenode_relation's reach",
            relation.relfilenode
        );
    }
    format!(
        "relfilenode {} has no relation in pg_class now (created by a transaction not yet committed, or dropped or rewritten since)",
        relation.relfilenode
    )
}
