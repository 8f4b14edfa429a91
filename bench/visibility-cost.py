#!/usr/bin/env python3
"""What deciding visibility from pg_xact costs a scan, against deciding it from hint bits alone.

    sudo bench/visibility-cost.py --old-bin /path/to/pageio-before --rows 3000000 --rounds 5

Builds (once, under --root) two copies of one PostgreSQL 18 cluster (autovacuum off, data
checksums on) holding `t(a int, b int, c text)` with --rows rows, checkpointed, then updated
in full (`UPDATE t SET b = b + 1`) and stopped cleanly:

  never-read  the files as the update left them: the old versions carry an xmax and the new
              versions an xmin that no hint bit decides, so every tuple asks pg_xact;
  vacuumed    the same cluster after `VACUUM t; CHECKPOINT`: dead versions gone, every
              live tuple hinted, so no tuple asks pg_xact.

Then `pageio scan --table t --select 'count(*)'` runs on both, cold (page cache dropped) and
warm, with this build (--bin) and with a build from before the visibility rule (--old-bin,
hint bits only), in shuffled rounds. Prints every run and, per cluster and temperature, the
median time of each build and their ratio. The new build must count --rows rows on both
clusters; the old one's count on the never-read cluster is printed as it comes (it counts
both versions of every row). Needs root (the page cache is dropped; PostgreSQL runs as the
unprivileged user bench/setup-postgres.sh makes).
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


def drop_caches():
    subprocess.run(["sync"], check=True)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except PermissionError:
        sys.exit("cannot drop the page cache (/proc/sys/vm/drop_caches needs root): run with sudo")


def as_pg(bin_dir, args):
    """Runs a PostgreSQL program as the unprivileged user; exits with its output on failure."""
    cmd = ["runuser", "-u", PG_USER, "--", os.path.join(bin_dir, args[0]), *args[1:]]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stdout}{out.stderr}")
    return out.stdout


def build_clusters(bin_dir, root, rows):
    """The never-read and vacuumed clusters under ROOT (made once per --rows)."""
    never, vacuumed = os.path.join(root, "never-read"), os.path.join(root, "vacuumed")
    stamp = os.path.join(root, f"built-{rows}")
    if os.path.exists(stamp):
        return never, vacuumed
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    shutil.chown(root, PG_USER)
    os.chmod(root, 0o755)
    sock = root
    as_pg(bin_dir, ["initdb", "-k", "-U", "postgres", "-D", never])
    with open(os.path.join(never, "postgresql.conf"), "a") as f:
        f.write(f"autovacuum = off\nlisten_addresses = ''\nunix_socket_directories = '{sock}'\n"
                "shared_buffers = '256MB'\nmax_wal_size = '4GB'\n")

    def psql(data, sql):
        # One -c per statement: each its own transaction (VACUUM refuses a transaction block).
        commands = [a for stmt in sql.split(";") if stmt.strip() for a in ("-c", stmt.strip())]
        as_pg(bin_dir, ["pg_ctl", "-D", data, "-l", os.path.join(root, "log"), "-w", "start"])
        try:
            as_pg(bin_dir, ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", sock, "-U",
                            "postgres", "-d", "postgres", *commands])
        finally:
            as_pg(bin_dir, ["pg_ctl", "-D", data, "-m", "fast", "-w", "stop"])

    print(f"building the clusters under {root}: {rows:,} rows, then UPDATE of every row", flush=True)
    psql(never, "CREATE TABLE t (a int, b int, c text);"
                f"INSERT INTO t SELECT g, g, repeat('x', 40) FROM generate_series(1, {rows}) g;"
                "CHECKPOINT; UPDATE t SET b = b + 1; CHECKPOINT")
    subprocess.run(["cp", "-a", never, vacuumed], check=True)
    psql(vacuumed, "VACUUM t; CHECKPOINT")
    open(stamp, "w").close()
    return never, vacuumed


def run_scan(binary, data, parallel):
    cmd = ["nice", "-n", "-20", binary, "scan", "--pgdata", data, "--table", "t",
           "--select", "count(*)", "--parallel", str(parallel), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stderr.strip()}")
    doc = json.loads(out.stdout)
    return doc["elapsed_ms"], int(doc["aggregates"][0]["text"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "target/release/pageio"))
    ap.add_argument("--old-bin", required=True,
                    help="a pageio built from a commit before the visibility rule (hint bits only)")
    ap.add_argument("--root", default="/var/tmp/pageio-visibility-cost")
    ap.add_argument("--rows", type=int, default=3_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--parallel", type=int, default=1,
                    help="--parallel of every scan (1: serial, so the per-tuple cost shows)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: cold runs drop the page cache and PostgreSQL runs as another user")
    bin_dir = subprocess.run(["bash", os.path.join(HERE, "setup-postgres.sh")], check=True,
                             capture_output=True, text=True).stdout.strip()
    never, vacuumed = build_clusters(bin_dir, args.root, args.rows)
    clusters = {"never-read": never, "vacuumed": vacuumed}
    builds = {"new": args.bin, "old": args.old_bin}
    rng = random.Random(args.seed)
    times = {}
    for r in range(args.rounds):
        cells = [(c, t, b) for c in clusters for t in ("cold", "warm") for b in builds]
        rng.shuffle(cells)
        for cluster, temp, build in cells:
            data = clusters[cluster]
            drop_caches()
            if temp == "warm":
                run_scan(builds[build], data, args.parallel)
            ms, count = run_scan(builds[build], data, args.parallel)
            if build == "new" and count != args.rows:
                sys.exit(f"the new build counted {count} rows on {cluster}, not {args.rows}")
            print(f"round {r + 1}: {cluster:10} {temp} {build}: {ms:9.1f} ms, count {count}", flush=True)
            times.setdefault((cluster, temp, build), []).append(ms)
    print("\ncluster     temp  new median ms  old median ms  new/old")
    for cluster in clusters:
        for temp in ("cold", "warm"):
            new = statistics.median(times[(cluster, temp, "new")])
            old = statistics.median(times[(cluster, temp, "old")])
            print(f"{cluster:10}  {temp}  {new:13.1f}  {old:13.1f}  {new / old:7.3f}")


if __name__ == "__main__":
    main()
