#!/usr/bin/env python3
"""Sequential scans, PostgreSQL 18 against pageio on the same files: warm and cold, serial
and two workers, five alternating rounds, with fio's sequential rate measured in the same
rounds; an optional baseline pageio binary runs alongside for A/B.

    sudo python3 bench/seq-ab.py                                   # both tables, 5 rounds
    sudo python3 bench/seq-ab.py --bin target/release/pageio --baseline /work/pageio-base
    sudo python3 bench/seq-ab.py --tables uniform --rounds 3

Tables (each skipped with a message when its data is missing):
  uniform   `SELECT count(*), sum(octet_length(b)) FROM uniform`. The heap is the one
            `pageio gen --dataset uniform --rows 5000000` wrote under --dataset
            (/var/tmp/sb/data: 2.28 GB, fillfactor 25). It is copied once into a
            PostgreSQL 18 cluster of its own (--uniform-pgdata, /var/tmp/pageio-seq-ab; 2.3 GB
            more on disk) as the files of table `uniform (a float8, b text)`, so both engines
            read the very same files; a marker file there records what was copied.
  pgbench   `SELECT count(abalance) FROM pgbench_accounts` on the scale 300 cluster
            bench/pgbench-count.py builds (--pgbench-pgdata, /var/tmp/pageio-pgbench).

Every round runs, in an order that alternates from round to round (PostgreSQL first in odd
rounds, pageio first in even ones):
  PostgreSQL 18 (jit off, shared_buffers 128MB, max_parallel_workers_per_gather 0 or 2):
    cold under io_method worker and io_uring: server stopped, `sync; echo 3 >
    /proc/sys/vm/drop_caches`, server started, the query timed by psql's \\timing;
    warm (worker): the query once untimed, then timed, serial and two workers.
  pageio (--bin, then --baseline if given), the whole process timed from fork to exit:
    cold: page cache dropped, then `pageio scan --pgdata D --table T --select ... --json`
    with its defaults (no flag) and with --jobs 1; warm: the same scan once untimed, then
    timed, with --jobs 1 and --jobs 2.
  fio: sequential reads of the heap's segment files, O_DIRECT 1 MB at queue depth 16,
    O_DIRECT 128 kB at queue depth 32 and buffered 1 MB, page cache dropped before each: the
    device's best rate this round (which O_DIRECT shape is faster changes from run to run).
  kernel: the page cache filled with the heap by WILLNEED advice alone (see "cold vs
    page-cache fill" below), after a drop of the page cache.
Every answer is compared with PostgreSQL's; a difference ends the run with an error.
--settle S waits S seconds after each drop of the page cache, for every engine alike: on a
virtual machine that hands free memory back to its host (free page reporting), memory
freed a moment ago is still the guest's, while memory freed S seconds ago has gone back and
costs a fault on its first touch; a table gone cold on a long-running machine meets the
latter (docs/bench-notes/SCANS.md, "Read-ahead chosen by measurement").

Ratios (above 1: pageio is faster), per round, then min–max and median over the rounds:
  warm serial     PostgreSQL warm serial query time / pageio --jobs 1 warm process time
  warm 2 workers  PostgreSQL warm 2-worker query time / pageio --jobs 2 warm process time
  cold            the round's limit / pageio defaults' cold process time, where the limit is
                  the faster of PostgreSQL's best cold time that round and the heap's size at
                  fio's best rate that round
  cold --jobs 1   the same limit / pageio --jobs 1 cold
  cold vs PostgreSQL  PostgreSQL's best cold time that round / pageio defaults' cold
  cold vs page-cache fill  the time the kernel alone takes to fill the page cache with the
                  heap that round (WILLNEED advice over all of it, then mincore until every
                  page is resident; nothing reads the data) / pageio defaults' cold: how close
                  a scan through the page cache comes to the rate such a scan can have
and a verdict per target of pageio's defaults (warm serial >= 1.5x and 2 workers >= 1.3x by
median; cold >= 1.0x the limit in 4 of 5 rounds and never under 0.9x);
and for --baseline, each of pageio's times against the baseline's in the same round.

Output: a Markdown table on stdout and in --out (seq-ab.md), every run in runs.json. Takes
/tmp/pageio-bench.lock itself (flock; other benchmarks use the same lock). Needs root (cold
runs drop the page cache; PostgreSQL runs as the user pgtest, bench/setup-postgres.sh).
Bounded: a round is not started once --max-minutes (default 12) have passed, and every
command has a timeout. Exit status 0 done, 1 error (the message names the cause and the fix).
"""

import argparse
import fcntl
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LOCK = "/tmp/pageio-bench.lock"
MARKER = "pageio-seq-ab.json"
RUN_TIMEOUT_S = 300


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pgb = _load("pg18_bench", "pg18-bench.py")
pcf = _load("page_cache_fill", "page-cache-fill.py")
BenchError = pgb.BenchError

TABLES = {
    "uniform": {
        "query": "SELECT count(*), sum(octet_length(b)) FROM uniform",
        "table": "uniform",
        "select": "count(*), sum(octet_length(b))",
    },
    "pgbench": {
        "query": "SELECT count(abalance) FROM pgbench_accounts",
        "table": "pgbench_accounts",
        "select": "count(abalance)",
    },
}


def say(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="PostgreSQL 18 against pageio, sequential scans, cold and warm, "
                    "serial and two workers, alternating rounds (see the file's header).")
    p.add_argument("--bin", default=os.path.join(REPO, "target", "release", "pageio"),
                   help="the pageio binary measured [default: target/release/pageio]")
    p.add_argument("--baseline", help="a second pageio binary, run alongside for A/B")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds [default: 5]")
    p.add_argument("--tables", default="uniform,pgbench",
                   help="uniform, pgbench or both, comma-separated [default: both]")
    p.add_argument("--dataset", default="/var/tmp/sb/data",
                   help="the `pageio gen --dataset uniform` directory whose heap the uniform "
                        "cluster holds [default: /var/tmp/sb/data]")
    p.add_argument("--uniform-pgdata", default="/var/tmp/pageio-seq-ab",
                   help="the PostgreSQL 18 cluster holding uniform, built on first use "
                        "[default: /var/tmp/pageio-seq-ab]")
    p.add_argument("--pgbench-pgdata", default="/var/tmp/pageio-pgbench",
                   help="the scale 300 pgbench cluster of bench/pgbench-count.py "
                        "[default: /var/tmp/pageio-pgbench]")
    p.add_argument("--port", type=int, default=5497, help="PostgreSQL's port [default: 5497]")
    p.add_argument("--max-minutes", type=float, default=12.0,
                   help="start no round after this many minutes [default: 12]")
    p.add_argument("--settle", type=float, default=0.0,
                   help="seconds to wait after each drop of the page cache, every engine "
                        "alike (see the file's header) [default: 0]")
    p.add_argument("--out", default=None,
                   help="where seq-ab.md and runs.json go [default: /tmp/seq-ab-<time>]")
    a = p.parse_args(argv)
    a.tables = [t.strip() for t in a.tables.split(",") if t.strip()]
    for t in a.tables:
        if t not in TABLES:
            p.error(f"--tables {t}: expected uniform or pgbench")
    if a.rounds < 1:
        p.error("--rounds must be at least 1")
    if not 0 <= a.settle <= 600:
        p.error("--settle must be between 0 and 600 seconds")
    for b in [a.bin] + ([a.baseline] if a.baseline else []):
        if not os.access(b, os.X_OK):
            p.error(f"{b}: no such executable (build it with `cargo build --release -p "
                    "pageio-cli`, or pass --bin PATH)")
    a.bin = os.path.abspath(a.bin)
    if a.baseline:
        a.baseline = os.path.abspath(a.baseline)
    if a.out is None:
        a.out = time.strftime("/tmp/seq-ab-%Y%m%d-%H%M%S")
    a.pg_io_uring = True
    return a


def drop_caches(settle=0.0):
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")
    if settle > 0:
        time.sleep(settle)


def pg_options(pg, port, io_method):
    settings = [f"port={port}", "listen_addresses=", f"unix_socket_directories={pg.pgdata}",
                "jit=off", "shared_buffers=128MB", f"io_method={io_method}", "autovacuum=off"]
    return [x for s in settings for x in ("-c", s)]


def pg_query(pg, sql, workers):
    """Runs sql with max_parallel_workers_per_gather = workers; (answer, query ms)."""
    script = (f"SET max_parallel_workers_per_gather = {workers};\n\\timing on\n{sql};\n")
    out = pg.psql(script)
    times = re.findall(r"Time: ([0-9.]+) ms", out)
    rows = [line for line in out.splitlines() if line and not line.startswith("Time:")
            and line != "SET" and not line.startswith("Timing")]
    if not times or not rows:
        raise BenchError(f"psql gave no time or no answer for {sql}:\n{out}")
    return rows[-1].strip(), float(times[-1])


def relation_path(pg, table):
    return pg.psql(f"SELECT pg_relation_filepath('{table}');").strip()


def segment_files(pgdata, relpath):
    base = os.path.join(pgdata, relpath)
    files, n = [], 0
    while os.path.exists(base if n == 0 else f"{base}.{n}"):
        files.append(base if n == 0 else f"{base}.{n}")
        n += 1
    return files


def ensure_uniform(a, pg):
    """The uniform cluster: initdb, CREATE TABLE, the dataset's heap copied over its files."""
    src_dir = os.path.join(a.dataset, "uniform")
    manifest_path = os.path.join(src_dir, "manifest.json")
    if not os.path.exists(manifest_path):
        raise BenchError(f"{manifest_path} is missing: generate the table with `pageio gen "
                         f"--dataset uniform --rows 5000000 --out {a.dataset}`, or pass "
                         "--dataset DIR, or --tables pgbench")
    with open(manifest_path) as f:
        manifest = json.load(f)
    marker_path = os.path.join(pg.pgdata, MARKER)
    if os.path.exists(marker_path):
        with open(marker_path) as f:
            marker = json.load(f)
        if marker.get("manifest") == manifest:
            return marker
        raise BenchError(f"{pg.pgdata} holds a copy of another uniform data set: remove "
                         "that directory (it is rebuilt), or pass another --uniform-pgdata")
    if os.path.exists(pg.pgdata) and os.listdir(pg.pgdata):
        raise BenchError(f"{pg.pgdata} exists, is not empty and was not built by this "
                         "script: pass another --uniform-pgdata, or remove it")
    heap_src = segment_files(src_dir, str(manifest["heap_relfilenode"]))
    need = sum(os.path.getsize(f) for f in heap_src)
    free = shutil.disk_usage(os.path.dirname(os.path.abspath(pg.pgdata))).free
    if free < need + (2 << 30):
        raise BenchError(f"copying the uniform heap needs {need >> 20} MB and 2 GB to spare "
                         f"at {pg.pgdata}; {free >> 20} MB are free: free space or pass "
                         "another --uniform-pgdata")
    pgb.prepare_pgdata(pg)
    pg.start(pg_options(pg, a.port, "worker"))
    pg.psql("CREATE TABLE uniform (a double precision, b text) WITH (fillfactor = 25);"
            "CHECKPOINT;")
    relpath = relation_path(pg, "uniform")
    pg.stop()
    say(f"copying {len(heap_src)} heap segment files of {src_dir} to {pg.pgdata}/{relpath}")
    dst = os.path.join(pg.pgdata, relpath)
    for i, src in enumerate(heap_src):
        target = dst if i == 0 else f"{dst}.{i}"
        shutil.copyfile(src, target + ".tmp")
        os.replace(target + ".tmp", target)
        shutil.chown(target, pgb.PG_USER, pgb.PG_USER)
        os.chmod(target, 0o600)
    pg.start(pg_options(pg, a.port, "worker"))
    # Planner statistics for the copied heap, so PostgreSQL plans a parallel scan as it
    # would for a table it had filled itself.
    pg.psql("ANALYZE uniform;")
    answer, _ = pg_query(pg, TABLES["uniform"]["query"], 0)
    pg.stop()
    marker = {"manifest": manifest, "relpath": relpath, "postgres_answer": answer}
    with open(marker_path + ".tmp", "w") as f:
        json.dump(marker, f, indent=2)
    os.replace(marker_path + ".tmp", marker_path)
    return marker


def pageio_run(binary, pgdata, spec, jobs):
    cmd = [binary, "scan", "--pgdata", pgdata, "--table", spec["table"],
           "--select", spec["select"], "--json"]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    seconds = time.monotonic() - t0
    if r.returncode != 0:
        raise BenchError(f"{' '.join(cmd)} failed (exit {r.returncode}):\n{r.stderr.strip()}")
    doc = json.loads(r.stdout)
    answer = "|".join(str(x["text"]) for x in doc["aggregates"])
    return answer, seconds, doc


# fio's sequential reads of the heap, each after a drop of the page cache; the round's
# device rate is the best of them (the same three as bench/pgbench-count.py: which O_DIRECT
# shape is faster changes from run to run on a virtual disk, by up to 2x).
FIO_CONFIGS = [
    ("direct 1M qd16", True, "1M", 16),
    ("direct 128k qd32", True, "128k", 32),
    ("buffered 1M", False, "1M", 1),
]


def fio_rate(files, direct, bs, iodepth):
    cmd = ["fio", "--name=seq", "--rw=read", f"--bs={bs}", "--readonly",
           "--output-format=json", "--file_service_type=sequential",
           "--filename=" + ":".join(files), f"--direct={1 if direct else 0}"]
    cmd += ["--ioengine=io_uring", f"--iodepth={iodepth}"] if direct else ["--ioengine=psync"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if r.returncode != 0:
        raise BenchError(f"fio failed ({' '.join(cmd)}): {(r.stderr or r.stdout).strip()[-300:]}"
                         "\nFix: install fio (apt-get install fio)")
    read = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]["read"]
    return read["io_bytes"] / (read["runtime"] / 1000.0)


FILL_PIECE = 2 << 20  # bytes of WILLNEED advice per call, as pageio's scan advises
FILL_TIMEOUT_S = 60.0
STALL_S = 0.25


def page_cache_fill_rate(files):
    """The rate at which the kernel alone fills the page cache with `files`: WILLNEED advice
    over all of them in 2 MB pieces, then the time until every page is resident. No process
    reads the data, so this is the device's rate for page-cache reads, without any copy or
    first touch: the limit of a reader through the page cache.

    WILLNEED is a hint the kernel may drop in part (its read-ahead allocations give up under
    memory pressure, and on a machine handing memory back to its host they do): when nothing
    more has arrived for STALL_S, the missing part is advised again; None when the page cache
    does not hold every page within FILL_TIMEOUT_S (the round then has no fill figure)."""
    sizes = [os.path.getsize(f) for f in files]
    total = sum(sizes)
    fds = [os.open(f, os.O_RDONLY) for f in files]

    def advise():
        for fd, size in zip(fds, sizes):
            for off in range(0, size, FILL_PIECE):
                os.posix_fadvise(fd, off, FILL_PIECE, os.POSIX_FADV_WILLNEED)

    try:
        t0 = time.monotonic()
        advise()
        last, last_change, readvised = -1, time.monotonic(), 0
        while True:
            now_resident = pcf.resident_pages(files) * pcf.PAGE
            now = time.monotonic()
            if now_resident >= total:
                return total / (now - t0), readvised
            if now - t0 > FILL_TIMEOUT_S:
                return None, readvised
            if now_resident != last:
                last, last_change = now_resident, now
            elif now - last_change > STALL_S:
                advise()  # pieces already resident cost the kernel a lookup each, no I/O
                readvised += 1
                last_change = now
            time.sleep(0.005)
    finally:
        for fd in fds:
            os.close(fd)


def one_round(a, name, pg, files, heap_bytes, pg_answer, rnd, runs):
    spec = TABLES[name]
    bins = [("pageio", a.bin)] + ([("baseline", a.baseline)] if a.baseline else [])

    def record(engine, mode, config, seconds, answer, extra=None):
        if answer != pg_answer:
            raise BenchError(f"{name}: {engine} {mode} {config} answered {answer}, PostgreSQL "
                             f"answered {pg_answer}: the answers must be equal")
        run = {"table": name, "round": rnd, "engine": engine, "mode": mode,
               "config": config, "seconds": seconds}
        run.update(extra or {})
        runs.append(run)
        say(f"  {name} round {rnd}: {engine:8} {mode} {config:14} {seconds * 1e3:9.1f} ms")

    def postgres():
        for method in ["worker", "io_uring"]:
            for workers in [0, 2]:
                pg.stop()
                drop_caches(a.settle)
                if method == "io_uring" and not a.pg_io_uring:
                    break
                try:
                    pg.start(pg_options(pg, a.port, method))
                except pgb.StartFailed as e:
                    if method == "io_uring":
                        a.pg_io_uring = False
                        say("  PostgreSQL refuses io_method=io_uring (a build without "
                            f"liburing?): its cold runs use worker only. {str(e)[-160:]}")
                        break
                    raise
                answer, ms = pg_query(pg, spec["query"], workers)
                record("postgres", "cold", f"{method} w{workers}", ms / 1e3, answer)
        pg.stop()
        pg.start(pg_options(pg, a.port, "worker"))
        for workers in [0, 2]:
            pg_query(pg, spec["query"], workers)
            answer, ms = pg_query(pg, spec["query"], workers)
            record("postgres", "warm", f"w{workers}", ms / 1e3, answer)
        pg.stop()

    def pageio():
        for label, binary in bins:
            for jobs in [None, 1]:
                drop_caches(a.settle)
                answer, s, doc = pageio_run(binary, pg.pgdata, spec, jobs)
                record(label, "cold", "defaults" if jobs is None else f"jobs {jobs}", s,
                       answer, {"pages_in_place": doc.get("pages_in_place"),
                                "read_ahead_choice": doc.get("read_ahead_choice")})
            for jobs in [1, 2]:
                pageio_run(binary, pg.pgdata, spec, jobs)
                answer, s, doc = pageio_run(binary, pg.pgdata, spec, jobs)
                record(label, "warm", f"jobs {jobs}", s, answer,
                       {"pages_in_place": doc.get("pages_in_place")})

    def fio():
        for config, direct, bs, iodepth in FIO_CONFIGS:
            drop_caches(a.settle)
            rate = fio_rate(files, direct, bs, iodepth)
            runs.append({"table": name, "round": rnd, "engine": "fio", "mode": "cold",
                         "config": config, "seconds": heap_bytes / rate,
                         "mb_per_s": rate / 1e6})
            say(f"  {name} round {rnd}: fio      {config:16} {rate / 1e6:8.0f} MB/s")

    def fill():
        drop_caches(a.settle)
        rate, readvised = page_cache_fill_rate(files)
        again = f" (advised again {readvised}x: the kernel dropped part of it)" if readvised else ""
        if rate is None:
            say(f"  {name} round {rnd}: kernel   page-cache fill  not complete within "
                f"{FILL_TIMEOUT_S:.0f} s{again}: no fill figure this round")
            return
        runs.append({"table": name, "round": rnd, "engine": "kernel", "mode": "cold",
                     "config": "page-cache fill", "seconds": heap_bytes / rate,
                     "mb_per_s": rate / 1e6, "readvised": readvised})
        say(f"  {name} round {rnd}: kernel   page-cache fill  {rate / 1e6:8.0f} MB/s{again}")

    steps = [postgres, pageio] if rnd % 2 == 1 else [pageio, postgres]
    for step in steps + [fio, fill]:
        step()


def seconds_of(runs, table, rnd, engine, mode, config=None):
    xs = [r["seconds"] for r in runs if r["table"] == table and r["round"] == rnd
          and r["engine"] == engine and r["mode"] == mode
          and (config is None or r["config"] == config)]
    return min(xs) if xs else None


def ratios(runs, table, rounds, baseline):
    """{metric: [ratio per round]} (see the header)."""
    out = {}

    def add(metric, value):
        if value is not None:
            out.setdefault(metric, []).append(value)

    for rnd in rounds:
        pg_warm0 = seconds_of(runs, table, rnd, "postgres", "warm", "w0")
        pg_warm2 = seconds_of(runs, table, rnd, "postgres", "warm", "w2")
        pg_cold = seconds_of(runs, table, rnd, "postgres", "cold")
        fio_s = seconds_of(runs, table, rnd, "fio", "cold")
        fill_s = seconds_of(runs, table, rnd, "kernel", "cold", "page-cache fill")
        limits = [x for x in [pg_cold, fio_s] if x is not None]
        limit = min(limits) if limits else None
        for engine in ["pageio"] + (["baseline"] if baseline else []):
            w1 = seconds_of(runs, table, rnd, engine, "warm", "jobs 1")
            w2 = seconds_of(runs, table, rnd, engine, "warm", "jobs 2")
            cd = seconds_of(runs, table, rnd, engine, "cold", "defaults")
            c1 = seconds_of(runs, table, rnd, engine, "cold", "jobs 1")
            div = lambda x, y: x / y if x and y else None  # noqa: E731
            add(f"{engine}: warm serial vs PostgreSQL", div(pg_warm0, w1))
            add(f"{engine}: warm 2 workers vs PostgreSQL", div(pg_warm2, w2))
            add(f"{engine}: cold defaults vs limit", div(limit, cd))
            add(f"{engine}: cold defaults vs PostgreSQL", div(pg_cold, cd))
            add(f"{engine}: cold defaults vs page-cache fill", div(fill_s, cd))
            add(f"{engine}: cold --jobs 1 vs limit", div(limit, c1))
        if baseline:
            for mode, config in [("warm", "jobs 1"), ("warm", "jobs 2"), ("cold", "defaults"),
                                 ("cold", "jobs 1")]:
                p = seconds_of(runs, table, rnd, "pageio", mode, config)
                b = seconds_of(runs, table, rnd, "baseline", mode, config)
                if p and b:
                    add(f"pageio vs baseline: {mode} {config}", b / p)
    return out


# pageio's sequential-scan targets for its defaults (see the header): warm, by the median
# of the rounds; cold, round by round.
WARM_TARGETS = [("pageio: warm serial vs PostgreSQL", 1.5),
                ("pageio: warm 2 workers vs PostgreSQL", 1.3)]
COLD_METRIC = "pageio: cold defaults vs limit"
COLD_TARGET, COLD_FLOOR, COLD_SHARE = 1.0, 0.9, 0.8


def verdicts(by_metric):
    """One line per target: the figure, the target and met / not met."""
    out = []
    for metric, target in WARM_TARGETS:
        xs = by_metric.get(metric)
        if xs:
            m = statistics.median(xs)
            out.append(f"- {metric.split(': ', 1)[1]}: median {m:.2f}× against ≥ {target}×: "
                       f"**{'met' if m >= target else 'not met'}**")
    xs = by_metric.get(COLD_METRIC)
    if xs:
        at = sum(x >= COLD_TARGET for x in xs)
        ok = at >= COLD_SHARE * len(xs) and min(xs) >= COLD_FLOOR
        out.append(f"- cold defaults vs limit: ≥ {COLD_TARGET}× in {at} of {len(xs)} rounds, "
                   f"lowest {min(xs):.2f}× (target: ≥ {COLD_TARGET}× in {COLD_SHARE:.0%} of "
                   f"the rounds, none under {COLD_FLOOR}×): **{'met' if ok else 'not met'}**")
    return out


def markdown(a, runs, done_rounds, machine):
    lines = ["# Sequential scans: PostgreSQL 18 against pageio", "",
             f"`{' '.join(sys.argv)}` — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             f"{machine}", "",
             "Ratios above 1 mean pageio is faster: PostgreSQL's query time (psql \\timing) "
             "over pageio's whole process; cold: the faster of PostgreSQL's best cold time and "
             "the heap at fio's best rate that round, over pageio's time.", ""]
    for table in a.tables:
        rounds = done_rounds.get(table, [])
        if not rounds:
            continue
        lines += [f"## {table}: `{TABLES[table]['query']}`", "",
                  "| | median | min–max | per round |", "|---|---|---|---|"]
        for metric, xs in ratios(runs, table, rounds, a.baseline).items():
            lines.append(f"| {metric} | {statistics.median(xs):.2f}× | {min(xs):.2f}–"
                         f"{max(xs):.2f}× | {' '.join(f'{x:.2f}' for x in xs)} |")
        lines += [""] + verdicts(ratios(runs, table, rounds, a.baseline))
        lines += ["", "| times (ms), min–max over rounds | |", "|---|---|"]
        keys = sorted({(r["engine"], r["mode"], r["config"]) for r in runs
                       if r["table"] == table})
        for engine, mode, config in keys:
            xs = [r["seconds"] * 1e3 for r in runs if r["table"] == table
                  and (r["engine"], r["mode"], r["config"]) == (engine, mode, config)]
            lines.append(f"| {engine} {mode} {config} | {min(xs):.0f}–{max(xs):.0f} "
                         f"(median {statistics.median(xs):.0f}) |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv):
    a = parse_args(argv)
    if os.geteuid() != 0:
        raise BenchError("cold runs drop the page cache and PostgreSQL runs as the user "
                         "pgtest: run this as root (sudo python3 bench/seq-ab.py ...)")
    if not shutil.which("fio"):
        raise BenchError("fio is not on PATH: install it (apt-get install fio); the device "
                         "limit is measured with it in every round")
    lock = open(LOCK, "a")
    say(f"waiting for {LOCK} (other benchmarks hold it while they run)…")
    fcntl.flock(lock, fcntl.LOCK_EX)
    bindir = pgb.setup_postgres()
    os.makedirs(a.out, exist_ok=True)
    started = time.monotonic()
    runs, done_rounds, answers, clusters = [], {}, {}, {}
    for table in a.tables:
        pgdata = a.uniform_pgdata if table == "uniform" else a.pgbench_pgdata
        pg = pgb.Postgres(bindir, pgdata, a.port)
        if table == "pgbench" and not os.path.exists(os.path.join(pgdata, "PG_VERSION")):
            say(f"skipping pgbench: {pgdata} holds no cluster (build it with sudo python3 "
                f"bench/pgbench-count.py --scale 300 --pgdata {pgdata})")
            continue
        if pg.status_pid() is not None:
            raise BenchError(f"a PostgreSQL server is running on {pgdata}: stop it first "
                             f"(pg_ctl -D {pgdata} stop), this script starts its own")
        if table == "uniform":
            ensure_uniform(a, pg)
        pg.start(pg_options(pg, a.port, "worker"))
        relpath = relation_path(pg, TABLES[table]["table"])
        answers[table], _ = pg_query(pg, TABLES[table]["query"], 0)
        pg.stop()
        files = segment_files(pgdata, relpath)
        clusters[table] = (pg, files, sum(os.path.getsize(f) for f in files))
        say(f"{table}: {len(files)} segment files, {clusters[table][2] / 1e9:.2f} GB, "
            f"PostgreSQL answers {answers[table]}")
    try:
        for rnd in range(1, a.rounds + 1):
            if (time.monotonic() - started) / 60 > a.max_minutes:
                say(f"--max-minutes {a.max_minutes} passed: no round {rnd}")
                break
            for table, (pg, files, heap_bytes) in clusters.items():
                say(f"# {table}, round {rnd} of {a.rounds}")
                one_round(a, table, pg, files, heap_bytes, answers[table], rnd, runs)
                done_rounds.setdefault(table, []).append(rnd)
    finally:
        for pg, _, _ in clusters.values():
            pg.stop()
        with open(os.path.join(a.out, "runs.json"), "w") as f:
            json.dump(runs, f, indent=1)
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    machine = (f"{os.cpu_count()} CPUs, 1-minute load {load} at the end, kernel "
               f"{os.uname().release}")
    md = markdown(a, runs, done_rounds, machine)
    with open(os.path.join(a.out, "seq-ab.md"), "w") as f:
        f.write(md)
    print(md)
    say(f"wrote {a.out}/seq-ab.md and runs.json")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BenchError as e:
        print(f"seq-ab: {e}", file=sys.stderr)
        sys.exit(1)
    except subprocess.TimeoutExpired as e:
        print(f"seq-ab: {' '.join(map(str, e.cmd))} took over {e.timeout} s: the machine is "
              "too busy or the command hangs; run again on a quieter machine", file=sys.stderr)
        sys.exit(1)
