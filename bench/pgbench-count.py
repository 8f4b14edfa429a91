#!/usr/bin/env python3
"""The published PostgreSQL 18 AIO experiment, side by side: `SELECT count(abalance) FROM
pgbench_accounts` on a `pgbench -i -s N` database, cold, under every io_method, on PostgreSQL
18 and on pageio over the very same relation files, with the device limit measured in the
same run.

    sudo python3 bench/pgbench-count.py                      # scale sized to the machine
    sudo python3 bench/pgbench-count.py --scale 500 --repeats 5
    sudo python3 bench/pg18-bench.py --experiment pgbench-count --scale 1 --repeats 1

The published run (a 50M-row table, scale 500) showed 49 s with io_method=sync, ~40 s with
worker and < 25 s with io_uring for PostgreSQL's parallel seq scan (2 workers).

Steps:
  1. bench/setup-postgres.sh (or $PAGEIO_PG_BIN): PostgreSQL 18 and the unprivileged user
     (pgtest) it runs as, exactly as bench/pg18-bench.py does (this script reuses its code).
  2. The cluster: initdb -k at --pgdata, `pgbench -i -s N -q`, VACUUM (FREEZE, ANALYZE)
     pgbench_accounts, CHECKPOINT; a marker (pageio-pgbench.json in --pgdata) records the
     scale, the heap file and PostgreSQL's own count(abalance), so a later run at the same
     scale reuses the table. A different scale rebuilds it.
  3. PostgreSQL 18: for each io_method (sync, worker with io_workers=3, worker with one per
     core, io_uring when the build has it — else reported as skipped with the server's
     message) and each max_parallel_workers_per_gather (2, PostgreSQL's default and the
     published run's, and 0), every repeat cold: server stopped, sync, page cache dropped,
     server started; psql's \\timing of `SELECT count(abalance) FROM pgbench_accounts` gives
     the time, the SELECT gives the count.
  4. pageio on the same files (server stopped): `pageio scan --cold --drop-caches --json`
     with no I/O flag at all (its defaults: what a user who tunes nothing gets), and under
     sync, worker(3), worker(cores), the adaptive worker pool and io_uring, serial and
     parallel when the binary has `--parallel`. With `--table/--select` it asks
     count(abalance) by name; an older binary gets the heap file and column types and counts
     rows (count(*) — equal to count(abalance) because PostgreSQL's own count(*) and
     count(abalance) are checked equal when the table is built). A count different from
     PostgreSQL's is an error, never a row of the table.
     Steps 3 and 4 run interleaved (--order, the default): round after round, every
     configuration of both engines once per round in a shuffled order (--seed), so a slow
     spell of the device lands on all of them alike; pageio's defaults are then also
     compared with PostgreSQL's best configuration round by round.
  5. The device limit: fio sequential reads of the table's segment files, the best of
     O_DIRECT 1 MB at queue depth 16, O_DIRECT 128 kB at queue depth 32 and buffered 1 MB
     after dropping the page cache (or a built-in 1 MB reader when fio is missing) → the time
     the table takes at that rate.
  6. Output in --out: pgbench-count.md (one table: every configuration, median time, MB/s,
     share of the device limit, ratio to PostgreSQL's best; then pageio's defaults against
     PostgreSQL's best, by median and round by round, and pageio's slowest configuration),
     summary.json, runs.json (every timed run) and pgbench-count.svg (bar chart of the times,
     the device limit as a line).

Exit status: 0 done; 1 error (the message names the cause and the fix), including a pageio
count that differs from PostgreSQL's.
"""

import argparse
import html
import importlib.util
import json
import os
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def _load_pg18_bench():
    """bench/pg18-bench.py as a module: its PostgreSQL set-up, server control and eviction."""
    spec = importlib.util.spec_from_file_location("pg18_bench", os.path.join(HERE, "pg18-bench.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pgb = _load_pg18_bench()
BenchError = pgb.BenchError

MARKER = "pageio-pgbench.json"
# The table and column counted: pgbench_accounts.abalance unless --table/--column say
# otherwise (main sets these before anything runs).
TABLE = "pgbench_accounts"
COLUMN = "abalance"
QUERY = f"SELECT count({COLUMN}) FROM {TABLE}"


def is_pgbench():
    """Whether this run is the pgbench experiment (built here) or another table's count."""
    return TABLE == "pgbench_accounts"
# One pgbench scale unit: 100,000 pgbench_accounts rows in 1,640 heap pages (13.4 MB) plus
# its primary key (2.2 MB); the WAL the load writes is recycled within max_wal_size (4GB).
ROWS_PER_SCALE = 100_000
HEAP_BYTES_PER_SCALE = 1640 * 8192
CLUSTER_BYTES_PER_SCALE = 16 * 1024 * 1024
# Room the build needs beyond the cluster itself: WAL up to max_wal_size and the checkpoint.
BUILD_HEADROOM_BYTES = 5 * 1024 ** 3
# The default scale's cap: scale 300 (30M rows, 3.9 GB heap) is the table the project's
# earlier measurements used; building it takes a few minutes on 2 cores and one cold run a
# few seconds, so the whole experiment stays under half an hour. The published 50M-row table
# is --scale 500.
DEFAULT_SCALE_CAP = 300
# The default scale leaves half of the free disk to everything else.
DISK_SHARE = 0.5
# pgbench -i, VACUUM and CHECKPOINT of a large table may take long on a slow disk, but not
# forever: a build that runs past this is reported, not waited on.
BUILD_TIMEOUT_S = 3 * 3600
# One cold run of the query: far above any sane time for scales this script builds.
RUN_TIMEOUT_S = 3600
PARALLEL_DEFAULT = 2  # PostgreSQL's max_parallel_workers_per_gather default
OUT_HINT = "<out>/runs.json"


def say(msg):
    print(f"pgbench-count: {msg}", file=sys.stderr, flush=True)


pgb.say = say  # messages from the shared code carry this script's name


def cores():
    return os.cpu_count() or 1


def ram_bytes():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def free_disk_bytes(path):
    p = os.path.abspath(path)
    while not os.path.exists(p):
        p = os.path.dirname(p)
    st = os.statvfs(p)
    return st.f_bavail * st.f_frsize


def default_scale(pgdata):
    """min(2 × RAM, half the free disk, DEFAULT_SCALE_CAP) in pgbench scale units, and why."""
    ram_scale = max(1, 2 * ram_bytes() // HEAP_BYTES_PER_SCALE)
    disk_scale = max(1, int((free_disk_bytes(pgdata) * DISK_SHARE - BUILD_HEADROOM_BYTES)
                            // CLUSTER_BYTES_PER_SCALE))
    scale = max(1, min(ram_scale, disk_scale, DEFAULT_SCALE_CAP))
    why = (f"min(2 × RAM → {ram_scale}, half the free disk → {disk_scale}, "
           f"cap {DEFAULT_SCALE_CAP})")
    return scale, why


# ---------------------------------------------------------------------------------------------
# Arguments


def parse_pg_methods(p, text):
    out = []
    for m in [x.strip().lower() for x in text.split(",") if x.strip()]:
        if m in ("sync", "io_uring"):
            spec = (m, None)
        elif m == "worker" or m.startswith("worker:"):
            n = m.split(":", 1)[1] if ":" in m else "3"
            if n == "cores":
                workers = min(cores(), 32)
            else:
                try:
                    workers = int(n)
                except ValueError:
                    p.error(f"--pg-methods: \"{m}\": expected worker:N with N a count or \"cores\"")
                if not 1 <= workers <= 32:
                    p.error(f"--pg-methods: \"{m}\": PostgreSQL allows 1 to 32 io_workers")
            spec = ("worker", workers)
        else:
            p.error(f"unknown method \"{m}\" in --pg-methods: expected sync, worker:N, "
                    "worker:cores or io_uring")
        if spec not in out:
            out.append(spec)
    if not out:
        p.error("--pg-methods needs at least one method")
    return out


def parse_pageio_methods(p, text):
    out = []
    for m in [x.strip().lower() for x in text.split(",") if x.strip()]:
        if m in ("sync", "io_uring"):
            spec = (m, None)
        elif m == "defaults":
            spec = ("defaults", None)
        elif m == "adaptive":
            spec = ("worker", "adaptive")
        elif m == "worker" or m.startswith("worker:"):
            n = m.split(":", 1)[1] if ":" in m else "3"
            if n == "cores":
                workers = min(cores(), 32)
            else:
                try:
                    workers = int(n)
                except ValueError:
                    p.error(f"--pageio-methods: \"{m}\": expected worker:N with N a count or "
                            "\"cores\"")
                if not 1 <= workers <= 32:
                    p.error(f"--pageio-methods: \"{m}\": io_workers is 1 to 32")
            spec = ("worker", workers)
        else:
            p.error(f"unknown method \"{m}\" in --pageio-methods: expected defaults, sync, "
                    "worker:N, worker:cores, adaptive or io_uring")
        if spec not in out:
            out.append(spec)
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="pgbench-count.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The published PostgreSQL 18 AIO experiment: SELECT count(abalance) FROM "
                    "pgbench_accounts on a `pgbench -i -s N` database, cold, under every "
                    "io_method, on PostgreSQL 18 (parallel seq scan with 2 workers and without) "
                    "and on pageio over the same files, with the device limit from fio in the "
                    "same run; one table, JSON and chart under --out.",
        epilog=f"""examples:
  sudo python3 bench/pgbench-count.py
  sudo python3 bench/pgbench-count.py --scale 500 --repeats 5
  sudo python3 bench/pgbench-count.py --scale 1 --repeats 1 --out /tmp/pgbench-smoke
  sudo python3 bench/pgbench-count.py --engines pageio --reuse-postgres   # after rebuilding pageio

Another table of an existing cluster (for instance the 5M-row `uniform` table that
bench/pg18-bench.py builds): --table NAME [--column COL] --pgdata DIR. Then nothing is built;
the query is SELECT count(COL) FROM NAME (COL: the table's first column by default), and
pageio asks the same with --table NAME --select 'count(COL)':
  sudo python3 bench/pgbench-count.py --pgdata /var/tmp/pageio-pg18-bench --table uniform

The default scale is min(2 × RAM, half the free disk, {DEFAULT_SCALE_CAP}): the published
run sized the table at about twice RAM so that no cache could hold it, but every run here is
cold (server stopped, page cache dropped, server started), so a table smaller than RAM
measures the same thing; the cap keeps the build to minutes (scale {DEFAULT_SCALE_CAP} is 30M
rows, a 3.9 GB heap) and the disk term keeps the cluster within half of the free space. One
scale unit is 100,000 rows, 13.4 MB of heap.

Run as root: PostgreSQL then runs as the unprivileged user pgtest, cold runs drop the whole
page cache, and pageio can read the cluster's files.

Outputs: <out>/pgbench-count.md, summary.json, runs.json, pgbench-count.svg.
Exit status: 0 done, 1 error (including a pageio count that differs from PostgreSQL's).""")
    p.add_argument("--scale", type=int, metavar="N",
                   help="pgbench scale factor (100,000 rows each) [default: sized to the "
                        "machine, see below]")
    p.add_argument("--table", default="pgbench_accounts", metavar="NAME",
                   help="the table to count: pgbench_accounts (built here with pgbench -i) or "
                        "a table already in the cluster at --pgdata, which is then used as it "
                        "is [default: %(default)s]")
    p.add_argument("--column", metavar="COL",
                   help="the column of count(COL) [default: abalance for pgbench_accounts, "
                        "else the table's first column]")
    p.add_argument("--repeats", type=int, default=3, metavar="R",
                   help="cold runs per configuration; the table shows the median [default: 3]")
    p.add_argument("--pgdata", default="/var/tmp/pageio-pgbench", metavar="DIR",
                   help="the cluster's data directory; created when missing, reused when it "
                        "already holds pgbench_accounts at this scale [default: %(default)s]")
    p.add_argument("--port", type=int, default=5433,
                   help="server port (Unix socket in --pgdata only, no TCP) [default: 5433]")
    p.add_argument("--shared-buffers", default="128MB", metavar="SIZE",
                   help="shared_buffers, for PostgreSQL and pageio alike [default: 128MB]")
    p.add_argument("--pg-methods", default="sync,worker:3,worker:cores,io_uring", metavar="LIST",
                   help="PostgreSQL io_methods: sync, worker:N (N a count or \"cores\"), "
                        "io_uring (skipped, with the server's message, when the build lacks it) "
                        "[default: %(default)s]")
    p.add_argument("--pg-parallel", default=f"{PARALLEL_DEFAULT},0", metavar="LIST",
                   help="max_parallel_workers_per_gather values for PostgreSQL [default: "
                        "%(default)s: its default, as in the published run, and none]")
    p.add_argument("--pageio-methods",
                   default="defaults,sync,worker:3,worker:cores,adaptive,io_uring",
                   metavar="LIST",
                   help="pageio io_methods: defaults (no I/O flag at all: what `pageio scan` "
                        "picks by itself, run once, not per --pageio-parallel), sync, worker:N, "
                        "worker:cores, adaptive (the growing worker pool, when this pageio has "
                        "--io-min-workers), io_uring [default: %(default)s]")
    p.add_argument("--pageio-parallel", default=f"1,{cores()}", metavar="LIST",
                   help="pageio --parallel values (1 = a serial scan); values other than 1 "
                        "are skipped when this pageio has no --parallel [default: %(default)s]")
    p.add_argument("--order", default="interleaved", choices=["interleaved", "grouped"],
                   help="interleaved: round after round, every configuration once per round in "
                        "a shuffled order, and pageio's defaults compared with PostgreSQL's best "
                        "round by round; grouped: all repeats of one configuration, then the "
                        "next [default: %(default)s]")
    p.add_argument("--seed", type=int, metavar="N",
                   help="seed of the interleaved order, to run the same order again "
                        "[default: a new one each run, printed and saved]")
    p.add_argument("--engines", default="postgresql,pageio", metavar="LIST",
                   help="which engines to run: postgresql, pageio [default: both]")
    p.add_argument("--reuse-postgres", action="store_true",
                   help="with --engines pageio: take PostgreSQL's runs from <out>/runs.json of "
                        "an earlier run at the same scale")
    p.add_argument("--device", default="auto", choices=["auto", "fio", "builtin", "none"],
                   help="how the device limit is measured: fio, a built-in 1 MB reader, auto "
                        "(fio when installed) or none [default: auto]")
    p.add_argument("--pageio", metavar="PATH",
                   help="the pageio binary [default: target/release/pageio, built with cargo "
                        "when missing]")
    p.add_argument("--out", default="bench-results/pgbench-count", metavar="DIR",
                   help="output directory [default: %(default)s]")
    a = p.parse_args(argv)
    if a.repeats < 1:
        p.error("--repeats must be at least 1")
    if a.scale is not None and a.scale < 1:
        p.error("--scale must be at least 1")
    a.engines = [x.strip() for x in a.engines.split(",") if x.strip()]
    for e in a.engines:
        if e not in ("postgresql", "pageio"):
            p.error(f"unknown engine \"{e}\" in --engines: expected postgresql or pageio")
    if not a.engines:
        p.error("--engines needs postgresql, pageio or both")
    if a.reuse_postgres and "postgresql" in a.engines:
        p.error("--reuse-postgres takes PostgreSQL's runs from an earlier run: pass "
                "--engines pageio with it")
    a.pg_methods = parse_pg_methods(p, a.pg_methods)
    a.pageio_methods = parse_pageio_methods(p, a.pageio_methods)
    try:
        a.pg_parallel = [int(x) for x in a.pg_parallel.split(",") if x.strip()]
        a.pageio_parallel = [int(x) for x in a.pageio_parallel.split(",") if x.strip()]
    except ValueError:
        p.error("--pg-parallel and --pageio-parallel take numbers, comma-separated")
    if any(n < 0 or n > 1024 for n in a.pg_parallel):
        p.error("--pg-parallel: each value must be 0..1024")
    if any(n < 1 or n > 1024 for n in a.pageio_parallel):
        p.error("--pageio-parallel: each value must be 1..1024 (1 = serial)")
    a.pg_parallel = list(dict.fromkeys(a.pg_parallel))
    a.pageio_parallel = list(dict.fromkeys(a.pageio_parallel))
    a.pgdata = os.path.abspath(a.pgdata)
    a.out = os.path.abspath(a.out)
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1 << 31)
    return a


# ---------------------------------------------------------------------------------------------
# The cluster


def read_marker(pgdata):
    try:
        with open(os.path.join(pgdata, MARKER)) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return {}


def write_marker(pgdata, marker):
    path = os.path.join(pgdata, MARKER)
    with open(path + ".tmp", "w") as f:
        json.dump(marker, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
    if pgb.is_root():
        shutil.chown(path, pgb.PG_USER, pgb.PG_USER)


def table_facts(pg):
    out = pg.psql(f"SELECT pg_relation_filepath('{TABLE}'), "
                  f"coalesce((SELECT pg_relation_filepath(indexrelid) FROM pg_index "
                  f"WHERE indrelid = '{TABLE}'::regclass ORDER BY indexrelid LIMIT 1), ''), "
                  f"pg_relation_size('{TABLE}') / 8192, "
                  "current_setting('data_checksums');")
    heap, index, pages, checksums = out.strip().split("|")
    return {"heap": heap, "index": index, "pages": int(pages), "data_checksums": checksums}


def existing_table(pg):
    """--table NAME: a table already in the cluster, used as it is; its facts and counts."""
    exists = pg.psql(f"SELECT to_regclass('{TABLE}') IS NOT NULL;").strip()
    if exists != "t":
        raise BenchError(f"the cluster at {pg.pgdata} has no table {TABLE}: build it first "
                         "(the uniform table, for instance, with bench/pg18-bench.py --rows "
                         "5000000 --dataset uniform --pgdata DIR), or pass --table "
                         "pgbench_accounts to have pgbench build one")
    facts = table_facts(pg)
    out = pg.psql(f"SELECT count(*), count({COLUMN}) FROM {TABLE};")
    count_star, count = (int(x) for x in out.strip().split("|"))
    say(f"{TABLE}: {count_star:,} rows, count({COLUMN}) = {count:,}, {facts['pages']} heap "
        f"pages ({facts['pages'] * 8192 / 1e9:.2f} GB) in {facts['heap']}, "
        f"data_checksums={facts['data_checksums']}")
    return dict(facts, scale=None, rows=count_star, count_star=count_star, count=count)


def ensure_table(pg, scale):
    """pgbench_accounts at `scale`, built unless the marker says it is there; its facts."""
    if not is_pgbench():
        return existing_table(pg)
    marker = read_marker(pg.pgdata)
    if marker.get("scale") == scale:
        try:
            facts = table_facts(pg)
        except BenchError:
            facts = None
        if facts and facts["heap"] == marker.get("heap") and facts["pages"] == marker.get("pages"):
            say(f"reusing pgbench_accounts at scale {scale} ({marker['pages']} pages, "
                f"{marker['heap']})")
            return dict(marker, count=marker.get("count_abalance"))
    need = scale * CLUSTER_BYTES_PER_SCALE + BUILD_HEADROOM_BYTES
    free = free_disk_bytes(pg.pgdata)
    if free < need:
        raise BenchError(f"building scale {scale} needs about {need / 1e9:.1f} GB on "
                         f"{pg.pgdata}, {free / 1e9:.1f} GB are free: pass a smaller --scale "
                         "or a --pgdata on a larger file system")
    say(f"pgbench -i -s {scale} ({scale * ROWS_PER_SCALE:,} rows), VACUUM (FREEZE, ANALYZE), "
        "CHECKPOINT …")
    t0 = time.monotonic()
    # The marker goes first: an interrupted build must not look like a finished one.
    write_marker(pg.pgdata, {})
    r = pgb.run(pg.cmd("pgbench", "-i", "-q", "-s", str(scale), "-h", pg.pgdata,
                       "-p", str(pg.port), "-U", "postgres", "postgres"),
                check=False, what="pgbench -i")
    if r.returncode != 0:
        raise BenchError(f"pgbench -i -s {scale} failed (exit {r.returncode}):\n"
                         f"{(r.stdout + r.stderr).strip()[-3000:]}\nserver log:\n{pg.log_tail()}")
    pg.psql("VACUUM (FREEZE, ANALYZE) pgbench_accounts;\nCHECKPOINT;\n")
    facts = table_facts(pg)
    out = pg.psql("SELECT count(*), count(abalance) FROM pgbench_accounts;")
    count_star, count_abalance = (int(x) for x in out.strip().split("|"))
    if count_abalance != scale * ROWS_PER_SCALE or count_star != count_abalance:
        raise BenchError(f"pgbench_accounts holds count(*) = {count_star}, count(abalance) = "
                         f"{count_abalance} after pgbench -i -s {scale}, not "
                         f"{scale * ROWS_PER_SCALE}: remove {pg.pgdata} and run again")
    marker = dict(facts, scale=scale, rows=count_star, count_star=count_star,
                  count_abalance=count_abalance,
                  build_seconds=round(time.monotonic() - t0, 1))
    write_marker(pg.pgdata, marker)
    say(f"  built in {marker['build_seconds']} s: {facts['pages']} heap pages "
        f"({facts['pages'] * 8192 / 1e9:.2f} GB) in {facts['heap']}, "
        f"data_checksums={facts['data_checksums']}")
    return dict(marker, count=count_abalance)


def heap_segments(pgdata, relpath):
    """The main fork's segment files, in order (relpath, relpath.1, …)."""
    d, base = os.path.split(os.path.join(pgdata, relpath))
    segs = []
    for f in os.listdir(d):
        if f == base:
            segs.append((0, f))
        elif f.startswith(base + ".") and f[len(base) + 1:].isdigit():
            segs.append((int(f[len(base) + 1:]), f))
    return [os.path.join(d, f) for _, f in sorted(segs)]


def evict(files):
    """Cold: sync, then the whole page cache dropped (root) or the files evicted."""
    os.sync()
    if pgb.is_root():
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            return
        except OSError:
            pass
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# ---------------------------------------------------------------------------------------------
# PostgreSQL


def pg_label(method, workers):
    return f"worker({workers})" if method == "worker" else method


def timed_count(pg):
    """(count, seconds) of one QUERY, timed by psql's \\timing."""
    out = pg.psql(f"\\timing on\n{QUERY};\n")
    m = re.search(r"^Time: ([0-9.]+) ms", out, re.M)
    counts = [line for line in out.splitlines() if re.fullmatch(r"\d+", line.strip())]
    if not m or len(counts) != 1:
        raise BenchError(f"unexpected psql output for {QUERY}:\n{out[:2000]}")
    return int(counts[0]), float(m.group(1)) / 1000.0


def planned_workers(pg):
    """Workers Planned of the query's Gather (0 without one), from a plain EXPLAIN."""
    doc = json.loads(pg.psql(f"EXPLAIN (FORMAT JSON) {QUERY};"))[0]["Plan"]
    nodes = list(pgb.walk(doc))
    if not any(n.get("Node Type") == "Seq Scan" for n in nodes):
        shape = " -> ".join(n.get("Node Type", "?") for n in nodes)
        raise BenchError(f"PostgreSQL plans no Seq Scan for {QUERY}: {shape}")
    return max([int(n.get("Workers Planned", 0)) for n in nodes] + [0])


def pg_configs(pg, a, skipped):
    """PostgreSQL's configurations to run: every --pg-methods × --pg-parallel, io_uring
    reported as skipped (with the server's message) when the build refuses it."""
    uring_ok, uring_reason = pgb.io_uring_supported(pg)
    out = []
    for method, workers in a.pg_methods:
        if method == "io_uring" and not uring_ok:
            msg = f"this PostgreSQL build refuses io_method=io_uring: {uring_reason}"
            say(f"skipping PostgreSQL io_uring: {msg}")
            for par in a.pg_parallel:
                skipped.append({"engine": "postgresql", "io_method": method,
                                "parallel": par, "reason": msg})
            continue
        for par in a.pg_parallel:
            options = ["-c", f"io_method={method}",
                       "-c", f"max_parallel_workers_per_gather={par}"]
            if workers:
                options += ["-c", f"io_workers={workers}"]
            out.append({"engine": "postgresql", "io_method": method, "io_workers": workers,
                        "parallel": par, "options": options, "state": "new",
                        "name": f"PostgreSQL {pg_label(method, workers)}, "
                                f"max_parallel_workers_per_gather={par}"})
    return out


def pg_prepare(pg, cfg, skipped):
    """First use of a configuration: the server started with it once, its settings checked
    and its plan's workers noted. False when io_uring does not start (then skipped)."""
    pg.stop()
    try:
        pg.start(cfg["options"])
    except pgb.StartFailed as e:
        if cfg["io_method"] != "io_uring":
            raise
        msg = str(e).splitlines()[0]
        say(f"skipping PostgreSQL io_uring: the server does not start with it:\n{e}")
        skipped.append({"engine": "postgresql", "io_method": cfg["io_method"],
                        "parallel": cfg["parallel"], "reason": msg})
        cfg["state"] = "skipped"
        return False
    s = pgb.server_settings(pg)
    if s["io_method"] != cfg["io_method"]:
        raise BenchError(f"the server runs io_method={s['io_method']}, not {cfg['io_method']}")
    cfg["version"] = s["version"]
    cfg["planned"] = planned_workers(pg)
    say(f"{cfg['name']}: {s['version']}, {cfg['planned']} workers planned, shared_buffers="
        f"{s['shared_buffers_mb']}MB, effective_io_concurrency="
        f"{s['effective_io_concurrency']}, io_combine_limit={s['io_combine_limit_kb']}kB")
    cfg["state"] = "ready"
    return True


def run_postgres_once(pg, cfg, rep, table, files, runs, skipped, save):
    """One cold run of a PostgreSQL configuration: server stopped, page cache dropped, server
    started, the query timed; the server is stopped again after it (pageio reads the same
    files, and only ever with the server down)."""
    if cfg["state"] == "new" and not pg_prepare(pg, cfg, skipped):
        return
    if cfg["state"] != "ready":
        return
    pg.stop()
    evict(files)
    pg.start(cfg["options"])
    count, seconds = timed_count(pg)
    pg.stop()
    if count != table["count"]:
        raise BenchError(f"{cfg['name']} counted {count}, but {table['count']} "
                         f"when the table was built: the cluster changed; remove "
                         f"{pg.pgdata}/{MARKER} to rebuild it")
    runs.append({"engine": "postgresql", "version": cfg["version"],
                 "io_method": cfg["io_method"], "io_workers": cfg["io_workers"],
                 "parallel": cfg["parallel"], "workers_planned": cfg["planned"],
                 "repeat": rep, "seconds": seconds, "count": count,
                 "timing": "psql \\timing", "load_1m": load_1m()})
    save()
    say(f"  {cfg['name']} #{rep}: {seconds:.3f} s, count {count}")


# ---------------------------------------------------------------------------------------------
# pageio


def pageio_features(pageio):
    r = subprocess.run([pageio, "scan", "--help"], capture_output=True, text=True)
    h = r.stdout
    # The thread count is -j/--jobs; builds before it spelt it --parallel (still accepted).
    jobs = "--jobs" if "--jobs" in h else "--parallel" if "--parallel" in h else None
    return {"select": "--select" in h and "--table" in h, "parallel": jobs is not None,
            "jobs_flag": jobs, "adaptive": "--io-min-workers" in h}


def pageio_label(method, workers, parallel):
    if method is None:
        return "defaults"
    if method == "worker":
        m = "worker(adaptive)" if workers == "adaptive" else f"worker({workers})"
    else:
        m = method
    return f"{m}, {'serial' if parallel == 1 else f'parallel {parallel}'}"


def pageio_cmd(pageio, a, feats, table, method, workers, parallel):
    """The command of one cold pageio run; method None is pageio's defaults: no I/O flag at
    all (what `pageio scan` picks by itself is read back from its JSON)."""
    cmd = [pageio, "scan", "--pgdata", a.pgdata, "--kind", "seq", "--json", "--cold"]
    if pgb.is_root():
        cmd.append("--drop-caches")
    if feats["select"]:
        cmd += ["--table", TABLE, "--select", f"count({COLUMN})"]
    elif not is_pgbench():
        # Another table over its heap file: the shape pageio assumes without --columns is
        # the benchmark tables' (a double precision, b text), as bench/pg18-bench.py builds.
        cmd += ["--heap", table["heap"]]
    else:
        # pgbench_accounts (aid int4, bid int4, abalance int4, filler char(84)).
        cmd += ["--heap", table["heap"], "--columns", "int4,int4,int4,bpchar",
                "--key-column", "aid"]
    cmd += ["--shared-buffers", a.shared_buffers]
    if method is None:
        return cmd
    cmd += ["--io-method", method]
    if method == "worker":
        if workers == "adaptive":
            cmd += ["--io-min-workers", "2", "--io-max-workers", "8"]
        else:
            cmd += ["--io-workers", str(workers)]
    if feats["parallel"]:
        cmd += [feats["jobs_flag"], str(parallel)]
    return cmd


def pageio_count(doc, feats):
    if feats["select"]:
        aggs = doc.get("aggregates") or []
        if len(aggs) != 1 or aggs[0].get("expr") != f"count({COLUMN})":
            raise BenchError(f"pageio scan --select 'count({COLUMN})' printed no such "
                             f"aggregate: {json.dumps(aggs)[:500]}")
        return int(aggs[0]["value"])
    return int(doc["rows"])


def pageio_configs(pageio, a, skipped):
    """pageio's configurations to run (every --pageio-methods × --pageio-parallel; `defaults`
    once, with no I/O flag), and the features of the binary."""
    feats = pageio_features(pageio)
    say("pageio: " + (f"count({COLUMN}) by name (--table, --select)" if feats["select"] else
                      "count(*) over the heap file (no --select in this pageio; equal to "
                      f"count({COLUMN}), which has no NULLs)")
        + (f", {feats['jobs_flag']}" if feats["parallel"] else ", serial only (no --jobs)"))
    out = []
    for method, workers in a.pageio_methods:
        if method == "defaults":
            out.append({"engine": "pageio", "io_method": None, "io_workers": None,
                        "parallel": None, "mode": feats, "state": "ready",
                        "name": "pageio defaults"})
            continue
        if workers == "adaptive" and not feats["adaptive"]:
            skipped.append({"engine": "pageio", "io_method": "worker(adaptive)",
                            "parallel": None,
                            "reason": "this pageio has no adaptive worker pool (--io-min-workers)"})
            continue
        for par in a.pageio_parallel:
            if par != 1 and not feats["parallel"]:
                skipped.append({"engine": "pageio", "io_method": pg_label(method, workers),
                                "parallel": par, "reason": "this pageio has no --parallel"})
                continue
            out.append({"engine": "pageio", "io_method": method, "io_workers": workers,
                        "parallel": par, "mode": feats, "state": "ready",
                        "name": f"pageio {pageio_label(method, workers, par)}"})
    return out, feats


def run_pageio_once(pageio, a, cfg, rep, table, runs, skipped, save, pg_count):
    """One cold run of a pageio configuration (the server is down). A configuration whose
    io_uring is refused on its first run is skipped; one that runs another number of scan
    threads than asked is run over the heap file instead (`--table --select` may stay
    serial), or skipped: no row is ever recorded under a label it did not run with."""
    while cfg["state"] == "ready":
        method, workers, par, mode = (cfg["io_method"], cfg["io_workers"], cfg["parallel"],
                                      cfg["mode"])
        cmd = pageio_cmd(pageio, a, mode, table, method, workers, par)
        if not cfg.get("announced"):
            say(f"{cfg['name']}: " + " ".join(shlex.quote(c) for c in cmd))
            cfg["announced"] = True
        if not pgb.is_root():
            evict([])  # sync; pageio's --cold evicts the relation files itself
        t0 = time.monotonic()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BenchError(f"{cfg['name']} ran longer than {RUN_TIMEOUT_S} s: "
                             "stopped") from None
        wall = time.monotonic() - t0
        if r.returncode != 0:
            msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
            msg = msg[-1] if msg else f"exit {r.returncode}"
            if method == "io_uring" and not cfg.get("ran"):
                say(f"skipping pageio io_uring: {msg}")
                skipped.append({"engine": "pageio", "io_method": method, "parallel": par,
                                "reason": msg})
                cfg["state"] = "skipped"
                return
            raise BenchError(f"{cfg['name']} failed (exit {r.returncode}):\n"
                             f"{r.stderr.strip()}\ncommand: "
                             + " ".join(shlex.quote(c) for c in cmd))
        try:
            doc = json.loads(r.stdout)
        except json.JSONDecodeError as e:
            raise BenchError(f"{cfg['name']} printed no JSON ({e}):\n{r.stdout[:1000]}") from None
        count = pageio_count(doc, mode)
        if count != pg_count:
            raise BenchError(f"{cfg['name']} counted {count}, PostgreSQL counted {pg_count} on "
                             "the same files: pageio gives a wrong answer here (command: "
                             + " ".join(shlex.quote(c) for c in cmd) + ")")
        ran = doc.get("parallel_workers", 1)
        if par is not None and ran != par:
            if mode["select"]:
                # The by-name query path may run serially: the same configuration over the
                # heap file instead, counting count(*) (equal to count(abalance) here).
                say("  --table/--select ran serially: again over the heap file (count(*))")
                cfg["mode"] = dict(mode, select=False)
                cfg["announced"] = False
                continue
            msg = f"pageio ran {ran} scan thread(s), not the {par} asked for"
            say(f"skipping {cfg['name']}: {msg}")
            skipped.append({"engine": "pageio", "io_method": pg_label(method, workers),
                            "parallel": par, "reason": msg})
            cfg["state"] = "skipped"
            return
        cfg["ran"] = True
        row = {"engine": "pageio", "io_method": method, "io_workers": workers,
               "parallel": par, "repeat": rep,
               "seconds": float(doc["elapsed_ms"]) / 1000.0,
               "wall_seconds": wall, "count": count,
               "count_expr": f"count({COLUMN})" if mode["select"] else "count(*)",
               "shared_read": doc.get("shared_read"),
               "io_wait_ms": doc.get("io_wait_ms"),
               "timing": "pageio scan elapsed_ms", "load_1m": load_1m()}
        if method is None:
            # What the defaults chose on this machine.
            row["ran_io_method"] = doc.get("io_method")
            row["ran_parallel"] = ran
            row["ran_effective_io_concurrency"] = doc.get("effective_io_concurrency")
        runs.append(row)
        save()
        say(f"  {cfg['name']} #{rep}: {row['seconds']:.3f} s (process {wall:.3f} s), "
            f"count {count}")
        return


def schedule(configs, repeats, order, seed):
    """(configuration, repeat) in the order they run. grouped: every repeat of one
    configuration, then the next. interleaved: round after round, each running every
    configuration once in a shuffled order, so a slow spell of the device (this virtual disk
    has runs of seconds at half speed) lands on all configurations alike instead of on
    whichever ran then."""
    if order == "grouped":
        return [(cfg, rep) for cfg in configs for rep in range(1, repeats + 1)]
    rng = random.Random(seed)
    out = []
    for rep in range(1, repeats + 1):
        shuffled = list(configs)
        rng.shuffle(shuffled)
        out += [(cfg, rep) for cfg in shuffled]
    return out


# ---------------------------------------------------------------------------------------------
# The device limit


# The sequential reads the device limit is the best of (issue 15's list): O_DIRECT 1 MB at
# queue depth 16 (the published fio job), O_DIRECT 128 kB at 32 (io_combine_limit-sized
# reads, as both engines issue them) and buffered 1 MB (the kernel's read-ahead alone).
DEVICE_JOBS = [("O_DIRECT 1 MB QD16", True, "1M", 16), ("O_DIRECT 128 kB QD32", True, "128k", 32),
               ("buffered 1 MB", False, "1M", 1)]


def fio_seq(files, direct, engine, bs="1M", iodepth=16):
    cmd = ["fio", "--name=seq", "--rw=read", f"--bs={bs}", "--readonly",
           "--output-format=json", "--file_service_type=sequential",
           "--filename=" + ":".join(files), f"--direct={1 if direct else 0}",
           f"--ioengine={engine}" if direct else "--ioengine=psync"]
    if direct:
        cmd.append(f"--iodepth={iodepth}")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if r.returncode != 0:
        raise BenchError(f"fio failed: {(r.stderr or r.stdout).strip()[-500:]}")
    doc = json.loads(r.stdout[r.stdout.index("{"):])
    read = doc["jobs"][0]["read"]
    if read["io_bytes"] <= 0:
        raise BenchError("fio read nothing")
    return read["io_bytes"] / (read["runtime"] / 1000.0), doc.get("fio version", "fio")


def builtin_seq(files, direct):
    """A 1 MB sequential reader: buffered (kernel read-ahead) or O_DIRECT at queue depth 1."""
    import mmap
    buf = mmap.mmap(-1, 1 << 20)  # page-aligned, as O_DIRECT needs
    total = 0
    t0 = time.monotonic()
    for path in files:
        fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
        try:
            off = 0
            while True:
                n = os.preadv(fd, [buf], off)
                if n <= 0:
                    break
                total += n
                off += n
        finally:
            os.close(fd)
    return total / max(time.monotonic() - t0, 1e-9)


def device_limit(mode, files, table_bytes):
    """The best sequential read rate of the heap's segment files, and how it was measured."""
    if mode == "none":
        return None
    use_fio = mode == "fio" or (mode == "auto" and shutil.which("fio"))
    if mode == "fio" and not shutil.which("fio"):
        raise BenchError("--device fio: fio is not installed (apt-get install fio), or pass "
                         "--device builtin")
    results = []
    for label, direct, bs, iodepth in DEVICE_JOBS:
        evict(files)
        if use_fio:
            try:
                rate, version = fio_seq(files, direct, "io_uring", bs, iodepth)
            except BenchError:
                rate, version = fio_seq(files, direct, "libaio", bs, iodepth)
            source = f"{version} {label}"
        else:
            if bs != "1M":
                continue  # the built-in reader reads 1 MB at a time
            try:
                rate = builtin_seq(files, direct)
            except OSError as e:
                say(f"built-in reader, {label}: {e}")
                continue
            source = f"built-in reader {label.replace(' QD16', ' QD1')}"
        say(f"device: {source}: {rate / 1e6:.0f} MB/s")
        results.append({"source": source, "bytes_per_s": rate,
                        "seconds": table_bytes / rate})
    if not results:
        return None
    best = max(results, key=lambda r: r["bytes_per_s"])
    return {"best": best, "all": results}


# ---------------------------------------------------------------------------------------------
# Report


def summarize(a, table, runs, skipped, device, pg_version, feats, machine):
    table_bytes = table["pages"] * 8192
    groups = {}
    for r in runs:
        k = (r["engine"], r["io_method"], r["io_workers"], r["parallel"])
        groups.setdefault(k, []).append(r)
    rows = []
    for (engine, method, workers, par), rs in groups.items():
        secs = [r["seconds"] for r in rs]
        med = statistics.median(secs)
        if engine == "postgresql":
            label = f"{pg_label(method, workers)}, max_parallel_workers_per_gather={par}"
            planned = rs[0].get("workers_planned")
        elif method is None:
            planned = rs[0].get("ran_parallel")
            label = (f"defaults ({rs[0].get('ran_io_method')}, "
                     f"{'serial' if planned == 1 else f'parallel {planned}'})")
        else:
            label = pageio_label(method, workers, par)
            planned = par
        rows.append({"engine": engine, "configuration": label, "key": [engine, method, workers, par],
                     "io_method": method,
                     "io_workers": workers, "parallel": par, "parallel_planned": planned,
                     "runs_s": secs,
                     "median_s": med, "mb_per_s": table_bytes / med / 1e6,
                     "count": rs[0]["count"],
                     "count_expr": rs[0].get("count_expr", f"count({COLUMN})")})
    dev_s = device["best"]["seconds"] if device else None
    pg_rows = [r for r in rows if r["engine"] == "postgresql"]
    pio_rows = [r for r in rows if r["engine"] == "pageio"]
    pg_best = min(pg_rows, key=lambda r: r["median_s"]) if pg_rows else None
    pio_best = min(pio_rows, key=lambda r: r["median_s"]) if pio_rows else None
    for r in rows:
        r["share_of_device"] = dev_s / r["median_s"] if dev_s else None
        r["vs_postgresql_best"] = pg_best["median_s"] / r["median_s"] if pg_best else None
    ratio = pg_best["median_s"] / pio_best["median_s"] if pg_best and pio_best else None
    defaults = next((r for r in pio_rows if r["io_method"] is None), None)
    subject = defaults or pio_best
    slowest = max(pio_rows, key=lambda r: r["median_s"]) if pio_rows else None
    paired = None
    if a.order == "interleaved" and not a.reuse_postgres and pg_best and subject:
        paired = paired_rounds(runs, tuple(pg_best["key"]), tuple(subject["key"]))
        if paired:
            paired.update(pageio=subject["configuration"],
                          postgresql=pg_best["configuration"])
    return {
        "experiment": "pgbench-count" if is_pgbench() else "table-count",
        "table": TABLE,
        "query": QUERY,
        "scale": table["scale"],
        "rows": table["rows"],
        "count": table["count"],
        "heap": table["heap"],
        "heap_pages": table["pages"],
        "heap_bytes": table_bytes,
        "data_checksums": table["data_checksums"],
        "repeats": a.repeats,
        "order": a.order,
        "seed": a.seed if a.order == "interleaved" else None,
        "shared_buffers": a.shared_buffers,
        "postgresql_version": pg_version,
        "pageio_count_expr": (f"count({COLUMN})" if feats and feats["select"] else "count(*)")
        if feats else None,
        "machine": machine,
        "device": device,
        "results": rows,
        "skipped": skipped,
        "postgresql_best": pg_best and pg_best["configuration"],
        "pageio_best": pio_best and pio_best["configuration"],
        "pageio_vs_postgresql": ratio,
        "goal": "pageio's best >= 1.2x PostgreSQL 18's best",
        "goal_met": None if ratio is None else ratio >= 1.2,
        "pageio_defaults": defaults and defaults["configuration"],
        "pageio_defaults_vs_postgresql": (pg_best["median_s"] / defaults["median_s"]
                                          if pg_best and defaults else None),
        "pageio_slowest": slowest and slowest["configuration"],
        "paired": paired,
    }


def run_key(r):
    return (r["engine"], r["io_method"], r["io_workers"], r["parallel"])


def paired_rounds(runs, pg_key, pio_key):
    """pageio's defaults (or best) against PostgreSQL's best configuration round by round:
    in an interleaved run both ran within one round, minutes apart at most, so their ratio
    is far less at the mercy of the device's slow spells than a ratio of medians. Returns
    the per-round ratios (PostgreSQL's time ÷ pageio's: above 1, pageio was faster), their
    median and range, the rounds pageio was ahead of that configuration and the rounds it
    was ahead of every PostgreSQL configuration of the round; None without a common round."""
    rounds = {}
    for r in runs:
        rounds.setdefault(r["repeat"], {})[run_key(r)] = r["seconds"]
    ratios, ahead, ahead_of_all = [], 0, 0
    for rep in sorted(rounds):
        t = rounds[rep]
        if pg_key not in t or pio_key not in t:
            continue
        ratios.append(t[pg_key] / t[pio_key])
        ahead += t[pio_key] < t[pg_key]
        ahead_of_all += all(t[pio_key] < v for k, v in t.items() if k[0] == "postgresql")
    if not ratios:
        return None
    return {"rounds": len(ratios), "ratios": ratios, "ratio_median": statistics.median(ratios),
            "ratio_min": min(ratios), "ratio_max": max(ratios), "rounds_ahead": ahead,
            "rounds_ahead_of_every_postgresql_configuration": ahead_of_all}


def fmt_s(seconds):
    """Seconds with three significant digits at small scales, two decimals above 1 s."""
    return f"{seconds:.2f}" if seconds >= 1 else f"{seconds:.3g}"


def fmt_opt(v, f):
    return "—" if v is None else f.format(v)


def markdown(s):
    gb = s["heap_bytes"] / 1e9
    m = s["machine"]
    title = (f"pgbench count(abalance), scale {s['scale']}" if s["scale"] is not None
             else f"count({COLUMN}) over {s['table']}")
    out = [f"# {title}: PostgreSQL 18 and pageio on the same files, cold", "",
           f"`{s['query']}` over {s['table']}: {s['rows']:,} rows, {s['heap_pages']:,} heap "
           f"pages ({gb:.2f} GB, `{s['heap']}`), data_checksums={s['data_checksums']}. "
           f"Every run cold (server stopped, page cache dropped, server started; pageio "
           f"`--cold --drop-caches`); median of {s['repeats']} "
           + ("(rounds in a shuffled order)" if s.get("order") == "interleaved"
              else "(consecutive runs)") + f"; shared_buffers "
           f"{s['shared_buffers']} for both. {s['postgresql_version'] or 'PostgreSQL 18'}; "
           f"machine: {m['cores']} cores, {m['ram_gb']:.0f} GB RAM, kernel {m['kernel']}"
           + (f"; 1-minute load average {m['load_1m_min']:.1f}–{m['load_1m_max']:.1f} during "
              "the runs" if m.get("load_1m_min") is not None else "") + ".", ""]
    d = s["device"]
    if d:
        out.append("Device limit (same run, the heap's segment files): " + "; ".join(
            f"{x['source']} {x['bytes_per_s'] / 1e6:,.0f} MB/s" for x in d["all"])
            + f" → best {d['best']['bytes_per_s'] / 1e6:,.0f} MB/s = **{fmt_s(d['best']['seconds'])} s** "
            "for the table.")
        out.append("")
    out += ["| engine | configuration | parallel (planned) | median s | runs (s) | MB/s | "
            "share of device limit | vs PostgreSQL's best | count |",
            "|---|---|---:|---:|---|---:|---:|---:|---:|"]
    star = "¹"  # marks the rows that counted count(*) over the heap file
    for r in sorted(s["results"], key=lambda r: (r["engine"] != "postgresql", r["median_s"])):
        out.append(f"| {'PostgreSQL 18' if r['engine'] == 'postgresql' else 'pageio'} | "
                   f"{r['configuration']} | {fmt_opt(r['parallel_planned'], '{}')} | "
                   f"{fmt_s(r['median_s'])} | {', '.join(fmt_s(x) for x in r['runs_s'])} | "
                   f"{r['mb_per_s']:,.0f} | "
                   f"{fmt_opt(r['share_of_device'], '{:.2f}')} | "
                   f"{fmt_opt(r['vs_postgresql_best'], '{:.2f}×')} | {r['count']:,}"
                   f"{star if r['count_expr'] == 'count(*)' else ''} |")
    out.append("")
    if s["skipped"]:
        out.append("Skipped:")
        for k in s["skipped"]:
            par = "" if k["parallel"] is None else f", parallel {k['parallel']}"
            out.append(f"- {k['engine']} {k['io_method']}{par}: {k['reason']}")
        out.append("")
    if s["pageio_vs_postgresql"] is not None:
        out.append(f"pageio's best ({s['pageio_best']}) is **{s['pageio_vs_postgresql']:.2f}×** "
                   f"PostgreSQL 18's best ({s['postgresql_best']}); the goal is ≥ 1.2×: "
                   f"{'met' if s['goal_met'] else 'not met'}.")
    if s["pageio_defaults_vs_postgresql"] is not None:
        out.append(f"pageio's {s['pageio_defaults']} are "
                   f"**{s['pageio_defaults_vs_postgresql']:.2f}×** PostgreSQL 18's best by "
                   f"median.")
    if s["pageio_slowest"]:
        out.append(f"pageio's slowest configuration: {s['pageio_slowest']}.")
    pr = s.get("paired")
    if pr:
        out.append("")
        out.append(f"Round by round ({pr['rounds']} rounds, every configuration once per round "
                   f"in a shuffled order, --seed {s['seed']}): PostgreSQL's {pr['postgresql']} "
                   f"÷ pageio {pr['pageio']} = median **{pr['ratio_median']:.2f}×** (range "
                   f"{pr['ratio_min']:.2f}–{pr['ratio_max']:.2f}: "
                   + ", ".join(f"{x:.2f}" for x in pr["ratios"])
                   + f"); pageio ahead of that configuration in {pr['rounds_ahead']} of "
                   f"{pr['rounds']} rounds and of every PostgreSQL configuration of the round "
                   f"in {pr['rounds_ahead_of_every_postgresql_configuration']}.")
    if any(r["count_expr"] == "count(*)" for r in s["results"]):
        out.append(f"{star} count(*) over the heap file (`--heap --columns`): this pageio has "
                   "no --select, or runs it on one thread only; PostgreSQL's count(*) and "
                   f"count({COLUMN}) are equal on this table (checked before the runs)."
                   + (f" The other pageio rows asked `--table {s['table']} --select "
                      f"'count({COLUMN})'`." if any(r["engine"] == "pageio"
                                                   and r["count_expr"] != "count(*)"
                                                   for r in s["results"]) else ""))
    out.append("")
    return "\n".join(out)


def svg_chart(s):
    """Horizontal bars of the median times, the device limit as a dashed line."""
    rows = sorted(s["results"], key=lambda r: (r["engine"] != "postgresql", r["median_s"]))
    left, right, top, bar_h, gap = 420, 80, 50, 20, 6
    width = 1040
    plot_w = width - left - right
    height = top + len(rows) * (bar_h + gap) + 50
    dev = s["device"]["best"]["seconds"] if s["device"] else None
    tmax = max([r["median_s"] for r in rows] + ([dev] if dev else []) + [1e-9]) * 1.08
    x = lambda t: left + plot_w * t / tmax  # noqa: E731
    colour = {"postgresql": "#336791", "pageio": "#d9822b"}
    e = html.escape
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="15">'
             f'{e(s["query"])}' + (f', scale {s["scale"]}' if s["scale"] is not None else '')
             + f' ({s["heap_bytes"] / 1e9:.2f} GB), cold, '
             f'median of {s["repeats"]}</text>',
             f'<text x="{width / 2}" y="38" text-anchor="middle" fill="#555">seconds (shorter '
             f'is better); blue PostgreSQL 18, orange pageio</text>']
    for i, r in enumerate(rows):
        y = top + i * (bar_h + gap)
        name = ("PostgreSQL " if r["engine"] == "postgresql" else "pageio ") + r["configuration"]
        parts.append(f'<text x="{left - 8}" y="{y + bar_h * 0.7}" text-anchor="end">{e(name)}'
                     '</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{max(x(r["median_s"]) - left, 1):.1f}" '
                     f'height="{bar_h}" fill="{colour[r["engine"]]}"/>')
        parts.append(f'<text x="{x(r["median_s"]) + 4:.1f}" y="{y + bar_h * 0.7}">'
                     f'{fmt_s(r["median_s"])} s</text>')
    axis_y = top + len(rows) * (bar_h + gap)
    parts.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + plot_w}" y2="{axis_y}" '
                 'stroke="#333"/>')
    step = nice_step(tmax)
    t = 0.0
    while t <= tmax:
        parts.append(f'<line x1="{x(t):.1f}" y1="{axis_y}" x2="{x(t):.1f}" y2="{axis_y + 5}" '
                     'stroke="#333"/>')
        parts.append(f'<text x="{x(t):.1f}" y="{axis_y + 18}" text-anchor="middle">{t:g}</text>')
        t += step
    if dev:
        parts.append(f'<line x1="{x(dev):.1f}" y1="{top - 6}" x2="{x(dev):.1f}" y2="{axis_y}" '
                     'stroke="#c00" stroke-width="2" stroke-dasharray="6,4"/>')
        parts.append(f'<text x="{x(dev) + 4:.1f}" y="{axis_y + 34}" fill="#c00">device limit '
                     f'{fmt_s(dev)} s ({e(s["device"]["best"]["source"])})</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def nice_step(tmax):
    raw = tmax / 8
    mag = 10 ** int(f"{raw:e}".split("e")[1])
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def write_atomic(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def machine_facts(runs):
    """The machine, and how busy it was: cold runs on a shared machine are only comparable
    when other work left the cores alone, so every run records the load average."""
    loads = [r["load_1m"] for r in runs if r.get("load_1m") is not None]
    return {"cores": cores(), "ram_gb": ram_bytes() / 2 ** 30, "kernel": os.uname().release,
            "load_1m_min": min(loads) if loads else None,
            "load_1m_max": max(loads) if loads else None}


def load_1m():
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


# ---------------------------------------------------------------------------------------------


def main(argv):
    global OUT_HINT, TABLE, COLUMN, QUERY
    a = parse_args(argv)
    TABLE = a.table
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", TABLE) or (
            a.column and not re.fullmatch(r"[a-z_][a-z0-9_]*", a.column)):
        raise BenchError("--table and --column take plain lower-case SQL names "
                         "(letters, digits, _)")
    if not is_pgbench() and a.scale is not None:
        raise BenchError(f"--scale builds pgbench_accounts; --table {TABLE} uses the table as "
                         "it is in --pgdata: leave --scale out")
    os.makedirs(a.out, exist_ok=True)
    runs_path = os.path.join(a.out, "runs.json")
    OUT_HINT = runs_path
    if a.scale is None and is_pgbench():
        a.scale, why = default_scale(a.pgdata)
        say(f"scale {a.scale} ({a.scale * ROWS_PER_SCALE:,} rows): {why}")
    pageio = pgb.find_pageio(a.pageio) if "pageio" in a.engines else None
    bindir = pgb.setup_postgres()
    pg = pgb.Postgres(bindir, a.pgdata, a.port)
    created = pgb.prepare_pgdata(pg)
    pid = None if created else pg.status_pid()
    if pid is not None:
        raise BenchError(f"a PostgreSQL server is already running on {a.pgdata} (pid {pid}): "
                         "another run? Wait for it, or stop it with\n  "
                         + " ".join(shlex.quote(c) for c in pg.cmd("pg_ctl", "-D", a.pgdata,
                                                                   "-m", "fast", "stop")))
    pgb.write_conf(pg, types.SimpleNamespace(io_combine_limit="128kB",
                                             shared_buffers=a.shared_buffers, eics=[16],
                                             port=a.port))
    runs, skipped = [], []
    pg_version = None
    if a.reuse_postgres:
        try:
            with open(os.path.join(a.out, "summary.json")) as f:
                old = json.load(f)
            with open(runs_path) as f:
                old_runs = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise BenchError(f"--reuse-postgres: no earlier run in {a.out} ({e}): run without "
                             "it first") from None
        if old.get("scale") != a.scale:
            raise BenchError(f"--reuse-postgres: the earlier run in {a.out} is at scale "
                             f"{old.get('scale')}, not {a.scale}")
        runs = [r for r in old_runs if r["engine"] == "postgresql"]
        skipped = [k for k in old.get("skipped", []) if k["engine"] == "postgresql"]
        pg_version = old.get("postgresql_version")

    def save():
        write_atomic(runs_path, json.dumps(runs, indent=1) + "\n")

    save()
    try:
        pg.start(["-c", "io_method=worker"])
        if not is_pgbench():
            COLUMN = a.column or pg.psql(
                "SELECT attname FROM pg_attribute WHERE attrelid = "
                f"to_regclass('{TABLE}') AND attnum > 0 AND NOT attisdropped ORDER BY attnum "
                "LIMIT 1;").strip() or "*"
        elif a.column:
            COLUMN = a.column
        QUERY = f"SELECT count({COLUMN}) FROM {TABLE}"
        table = ensure_table(pg, a.scale)
        files = heap_segments(a.pgdata, table["heap"])
        configs = []
        if "postgresql" in a.engines:
            configs += pg_configs(pg, a, skipped)
        feats = None
        if pageio:
            for path in files:
                if not os.access(path, os.R_OK):
                    raise BenchError(f"pageio cannot read {path}: the cluster belongs to "
                                     f"{pgb.PG_USER}; run this script as root (sudo)")
            pio_configs, feats = pageio_configs(pageio, a, skipped)
            configs += pio_configs
        pg.stop()
        if a.order == "interleaved":
            say(f"{len(configs)} configurations, {a.repeats} rounds, each in a shuffled order "
                f"(--seed {a.seed})")
        # Every PostgreSQL run is checked against the count taken when the table was built,
        # and every pageio run against the same count.
        pg_count = table["count"]
        for cfg, rep in schedule(configs, a.repeats, a.order, a.seed):
            if cfg["engine"] == "postgresql":
                run_postgres_once(pg, cfg, rep, table, files, runs, skipped, save)
            else:
                pg.stop()
                run_pageio_once(pageio, a, cfg, rep, table, runs, skipped, save, pg_count)
        pg_version = next((c["version"] for c in configs if c.get("version")), pg_version)
    finally:
        if pg.running or pg.status_pid() is not None:
            say("stopping PostgreSQL (fast shutdown)")
            pg.stop()
    device = device_limit(a.device, files, table["pages"] * 8192)
    s = summarize(a, table, runs, skipped, device, pg_version, feats, machine_facts(runs))
    write_atomic(os.path.join(a.out, "summary.json"), json.dumps(s, indent=1) + "\n")
    md = markdown(s)
    write_atomic(os.path.join(a.out, "pgbench-count.md"), md)
    write_atomic(os.path.join(a.out, "pgbench-count.svg"), svg_chart(s))
    print(md)
    say(f"written: {a.out}/pgbench-count.md, summary.json, runs.json, pgbench-count.svg")
    return 0


if __name__ == "__main__":
    # Also SIGINT explicitly: a shell starts background jobs with it ignored.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, pgb._on_signal)
    try:
        sys.exit(main(sys.argv[1:]))
    except BenchError as e:
        say(f"error: {e}")
        sys.exit(1)
    except KeyboardInterrupt:
        say(f"interrupted; the runs so far are in {OUT_HINT}")
        sys.exit(130)
