#!/usr/bin/env python3
"""What exact numeric and PostgreSQL's float aggregates cost a warm scan, against an older build.

    sudo bench/values-cost.py --old-bin /path/to/pageio-before --rows 10000000 --rounds 5

Builds (once, under --root) a PostgreSQL 18 cluster (data checksums on, autovacuum off)
holding `t(n numeric(12,2), f float8)` with --rows rows of random cents and doubles,
checkpointed and stopped cleanly (nothing vacuumed: the scans judge the rows as the insert
left them). Then `pageio scan --table t --select 'sum(n)'` and `--select 'avg(f)'` run
warm (one unmeasured scan first, so the table is in the page cache) with this build (--bin)
and with --old-bin, in shuffled rounds, `--parallel 1` by default so the per-row cost is not
hidden behind other threads. Prints every run with its answer and, per query, the median
`elapsed_ms` of each build and their ratio; the two builds' answers are printed side by
side (they must agree: the values fit the old 38-digit path and print the same).
Needs root (PostgreSQL runs as the unprivileged user bench/setup-postgres.sh makes).
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PG_USER = os.environ.get("PAGEIO_PG_USER", "pgtest")
QUERIES = ["sum(n)", "avg(f)"]


def as_pg(bin_dir, args):
    """Runs a PostgreSQL program as the unprivileged user; exits with its output on failure."""
    cmd = ["runuser", "-u", PG_USER, "--", os.path.join(bin_dir, args[0]), *args[1:]]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stdout}{out.stderr}")
    return out.stdout


def build_cluster(bin_dir, root, rows):
    """The cluster under ROOT (made once per --rows)."""
    data = os.path.join(root, "data")
    stamp = os.path.join(root, f"built-{rows}")
    if os.path.exists(stamp):
        return data
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    shutil.chown(root, PG_USER)
    os.chmod(root, 0o755)
    as_pg(bin_dir, ["initdb", "-k", "-U", "postgres", "-D", data])
    with open(os.path.join(data, "postgresql.conf"), "a") as f:
        f.write(f"autovacuum = off\nlisten_addresses = ''\nunix_socket_directories = '{root}'\n"
                "shared_buffers = '256MB'\nmax_wal_size = '4GB'\n")
    print(f"building the cluster under {root}: {rows:,} rows", flush=True)
    as_pg(bin_dir, ["pg_ctl", "-D", data, "-l", os.path.join(root, "log"), "-w", "start"])
    try:
        as_pg(bin_dir, ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", root, "-U", "postgres",
                        "-d", "postgres",
                        "-c", "SELECT setseed(0.5)",
                        "-c", "CREATE TABLE t (n numeric(12,2), f float8)",
                        "-c", "INSERT INTO t SELECT round((random() * 2e6 - 1e6)::numeric, 2), "
                              f"random() * 1000 FROM generate_series(1, {rows})",
                        "-c", "CHECKPOINT"])
    finally:
        as_pg(bin_dir, ["pg_ctl", "-D", data, "-m", "fast", "-w", "stop"])
    open(stamp, "w").close()
    return data


def run_scan(binary, data, select, parallel):
    cmd = ["nice", "-n", "-20", binary, "scan", "--pgdata", data, "--table", "t",
           "--select", select, "--parallel", str(parallel), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stderr.strip()}")
    doc = json.loads(out.stdout)
    return doc["elapsed_ms"], doc["aggregates"][0]["text"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "target/release/pageio"))
    ap.add_argument("--old-bin", required=True, help="a pageio built from an older commit")
    ap.add_argument("--root", default="/var/tmp/pageio-values-cost")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--parallel", type=int, default=1,
                    help="--parallel of every scan (1: serial, so the per-row cost shows)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: PostgreSQL runs as another user")
    bin_dir = subprocess.run(["bash", os.path.join(HERE, "setup-postgres.sh")], check=True,
                             capture_output=True, text=True).stdout.strip()
    data = build_cluster(bin_dir, args.root, args.rows)
    builds = {"new": args.bin, "old": args.old_bin}
    rng = random.Random(args.seed)
    times, answers = {}, {}
    for r in range(args.rounds):
        cells = [(q, b) for q in QUERIES for b in builds]
        rng.shuffle(cells)
        for query, build in cells:
            run_scan(builds[build], data, query, args.parallel)  # warm the page cache
            ms, text = run_scan(builds[build], data, query, args.parallel)
            print(f"round {r + 1}: {query:7} {build}: {ms:9.1f} ms  {text}", flush=True)
            times.setdefault((query, build), []).append(ms)
            answers[(query, build)] = text
    print("\nquery    new median ms  old median ms  new/old  answers (new | old)")
    for query in QUERIES:
        new = statistics.median(times[(query, "new")])
        old = statistics.median(times[(query, "old")])
        print(f"{query:7}  {new:13.1f}  {old:13.1f}  {new / old:7.3f}  "
              f"{answers[(query, 'new')]} | {answers[(query, 'old')]}")


if __name__ == "__main__":
    main()
