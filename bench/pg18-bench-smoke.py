#!/usr/bin/env python3
"""Smoke test of bench/pg18-bench.py on a small table (about a minute on 2 cores).

    sudo python3 bench/pg18-bench-smoke.py                 # PostgreSQL side only
    sudo python3 bench/pg18-bench-smoke.py --with-pageio   # and the final `pageio bench`

Runs the driver at 20000 rows with --quick, then checks <out>/pg-runs.json:
  - one record per planned query × method × cache state × repeat, every RunRecord field set;
  - the methods sync, worker(3) and worker(<cores>) all present;
  - each query returns the same rows under every method and cache state, close to the rows
    its predicate was sized for (uniform: Poisson noise only; the 1% step ≈ 200 rows);
  - cold runs read from outside shared buffers, warm runs hit only shared buffers.
With --with-pageio also <out>/runs.json: pageio's records of every query return exactly
PostgreSQL's rows, and runs.csv, summary.md and charts/ exist.
Prints "N passed, N failed" last; exits non-zero on any failure.
"""

import argparse
import json
import math
import os
import subprocess
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ROWS = 20000
FIELDS = ["engine", "version", "dataset", "table_rows", "table_pages", "scan", "step",
          "target_rows", "selectivity", "lo", "hi", "io_method", "io_workers", "direct_io",
          "cache", "repeat", "rows", "seconds", "shared_hit", "shared_read", "io_wait_seconds",
          "effective_io_concurrency", "io_combine_limit_kb", "shared_buffers_mb",
          "device_seconds", "vs_device"]

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}", file=sys.stderr)


def label(r):
    return f"worker({r['io_workers']})" if r["io_method"] == "worker" else r["io_method"]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="/tmp/pg18-smoke")
    p.add_argument("--pgdata", default="/tmp/pg18-smoke-data")
    p.add_argument("--with-pageio", action="store_true",
                   help="also run the final `pageio bench` (buffered, cold and warm, no "
                        "device measurement) and compare its rows with PostgreSQL's")
    a = p.parse_args()

    cmd = [sys.executable, os.path.join(HERE, "pg18-bench.py"), "--rows", str(ROWS), "--quick",
           "--out", a.out, "--pgdata", a.pgdata]
    if a.with_pageio:
        cmd += ["--pageio-args=--methods sync,worker:3,io_uring --io buffered --device none"]
    else:
        cmd.append("--skip-pageio")
    print("running " + " ".join(cmd), file=sys.stderr)
    rc = subprocess.run(cmd).returncode
    check(rc == 0, f"pg18-bench.py exited {rc}")

    pageio = os.path.join(REPO, "target", "release", "pageio")
    plan = json.loads(subprocess.run([pageio, "bench", "--plan", "--json", "--rows", str(ROWS),
                                      "--quick"], capture_output=True, text=True,
                                     check=True).stdout)
    queries = {(q["dataset"], q["scan"], q["step"]): q for q in plan["queries"]}
    cores = min(os.cpu_count() or 1, 32)
    methods = {"sync", "worker(3)", f"worker({cores})"}

    with open(os.path.join(a.out, "pg-runs.json")) as f:
        runs = json.load(f)
    check(len(runs) == len(queries) * len(methods) * 2,
          f"{len(runs)} records, expected {len(queries)} queries × {len(methods)} methods × "
          "2 cache states × 1 repeat")
    for r in runs:
        missing = [k for k in FIELDS if k not in r]
        check(not missing, f"record lacks {missing}: {r}")
    check(all(r["engine"] == "postgresql" and r["version"].startswith("PostgreSQL 18")
              for r in runs), "engine/version not postgresql / PostgreSQL 18.x")
    check({label(r) for r in runs} == methods,
          f"methods {sorted({label(r) for r in runs})}, expected {sorted(methods)}")
    check({r["cache"] for r in runs} == {"cold", "warm"}, "cache states not cold and warm")

    rows = defaultdict(set)
    for r in runs:
        key = (r["dataset"], r["scan"], r["step"])
        rows[key].add(r["rows"])
        q = queries.get(key)
        check(q is not None, f"record of an unplanned query {key}")
        if q is None:
            continue
        check((r["lo"], r["hi"]) == (q["lo"], q["hi"]), f"{key}: predicate differs from plan")
        check(r["table_rows"] == ROWS and r["table_pages"] == math.ceil(ROWS / 18),
              f"{key}: table_rows {r['table_rows']}, table_pages {r['table_pages']}")
        if r["cache"] == "cold":
            check(r["shared_read"] > 0, f"{key} cold {label(r)}: nothing read")
        else:
            check(r["shared_read"] == 0, f"{key} warm {label(r)}: {r['shared_read']} reads")
        if r["scan"] == "seq":
            check(r["shared_read"] + r["shared_hit"] >= r["table_pages"],
                  f"{key}: seq scan touched fewer pages than the heap has")
    for key, seen in rows.items():
        check(len(seen) == 1, f"{key}: rows differ between runs: {sorted(seen)}")
        n, target = min(seen), queries[key]["target_rows"]
        check(abs(n - target) <= 4 * math.sqrt(target) + 3,
              f"{key}: {n} rows for a predicate sized to {target}")
    one_pct = [min(v) for k, v in rows.items() if queries[k]["target_rows"] >= ROWS / 100
               and queries[k]["target_rows"] < ROWS / 50]
    check(one_pct and all(150 <= n <= 260 for n in one_pct), f"1% step rows: {one_pct}")

    if a.with_pageio:
        for name in ("runs.csv", "summary.md"):
            check(os.path.exists(os.path.join(a.out, name)), f"{a.out}/{name} missing")
        charts = os.path.join(a.out, "charts")
        check(os.path.isdir(charts) and any(f.endswith(".svg") for f in os.listdir(charts)),
              f"no charts in {charts}")
        with open(os.path.join(a.out, "runs.json")) as f:
            merged = json.load(f)
        by = defaultdict(lambda: defaultdict(set))
        for r in merged:
            by[(r["dataset"], r["scan"], r["step"])][r["engine"]].add(r["rows"])
        for key in queries:
            e = by.get(key, {})
            check(set(e) == {"pageio", "postgresql"}, f"{key}: engines {sorted(e)}")
            check(e.get("pageio") == e.get("postgresql"),
                  f"{key}: pageio rows {sorted(e.get('pageio', []))} vs PostgreSQL "
                  f"{sorted(e.get('postgresql', []))}")

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
