#!/usr/bin/env python3
"""Are `pageio scan`'s defaults within 10% of the best flag combination, on every scan kind,
cold and warm?

    sudo bench/defaults-matrix.py DATA_DIR [--rounds 3] [--bin target/release/pageio]

DATA_DIR holds `pageio gen --dataset uniform --rows 5000000 --out DATA_DIR`. For each scan
kind (seq; bitmap at 1%, `a between 50000 and 51000`; index at 0.1%, `a between 50000 and
50100`) and each temperature (cold: page cache dropped first; warm: right after a run of
the same scan, so the page cache holds what it reads; every run is a new process, so the
buffer pool starts empty), it runs the defaults and every combination of
--io-method {sync, worker, io_uring} x --effective-io-concurrency {16, 64, 128} x
--direct-io {off, on}. Each round runs every configuration once, in a shuffled order, so
that the disk's drift spreads over all of them; a configuration's time is its best (and its median) over the
rounds. Everything runs at nice -20; needs root (nice -20, drop_caches).

Prints one line per run as it goes, then a table: per cell the defaults' best time, the
best combination and its time, and best / defaults (>= 0.90 means the defaults are within
10%), once with each configuration's best run and once with its median run (the best of
many configurations' best runs favours whichever drew the luckiest run; medians do not).
--json writes the table, with every run, as JSON too.
"""

import argparse
import importlib.util
import json
import os
import random
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_scan_ab():
    """bench/scan-ab.py as a module: the scans, running one, dropping the page cache."""
    spec = importlib.util.spec_from_file_location("scan_ab", os.path.join(HERE, "scan-ab.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


scan_ab = _load_scan_ab()
drop_caches = scan_ab.drop_caches


def combos():
    yield "defaults", []
    for method in ["sync", "worker", "io_uring"]:
        for eic in ["16", "64", "128"]:
            for direct in ["off", "on"]:
                yield (
                    f"{method} eic={eic} direct={direct}",
                    [
                        "--io-method",
                        method,
                        "--effective-io-concurrency",
                        eic,
                        "--direct-io",
                        direct,
                    ],
                )


def scan(args, kind, flags):
    return scan_ab.run_scan(args.bin, args.data, kind, flags)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--bin", default="target/release/pageio")
    p.add_argument("--kinds", default="seq,bitmap,index")
    p.add_argument("--json", help="also write the table to this file")
    args = p.parse_args()
    kinds = args.kinds.split(",")
    unknown = [k for k in kinds if k not in scan_ab.WHERE]
    if unknown:
        sys.exit(f"--kinds: unknown scan kind {', '.join(unknown)}; choose from {', '.join(scan_ab.WHERE)}")

    configs = list(combos())
    best = {}  # (kind, temp, name) -> best ms
    rows_seen = {}
    for rnd in range(1, args.rounds + 1):
        for kind in kinds:
            order = configs[:]
            random.shuffle(order)
            for name, flags in order:
                drop_caches()
                cold_ms, rows = scan(args, kind, flags)
                warm_ms, warm_rows = scan(args, kind, flags)
                if rows_seen.setdefault(kind, rows) != rows or warm_rows != rows:
                    sys.exit(f"{kind} {name}: {rows}/{warm_rows} rows, expected {rows_seen[kind]}")
                print(f"round {rnd} {kind:6} {name:32} cold {cold_ms:8.0f} ms  warm {warm_ms:8.0f} ms", flush=True)
                for temp, ms in (("cold", cold_ms), ("warm", warm_ms)):
                    key = (kind, temp, name)
                    best.setdefault(key, []).append(ms)

    table = []
    print()
    print("| scan | temp | defaults ms | best combination | its ms | best / defaults "
          "| median: defaults ms | best combination | its ms | best / defaults |")
    print("|---|---|---:|---|---:|---:|---:|---|---:|---:|")
    for kind in kinds:
        for temp in ("cold", "warm"):
            runs = {name: best[(kind, temp, name)] for name, _ in configs}
            row = {"kind": kind, "temp": temp, "runs_ms": runs}
            line = f"| {kind} | {temp} "
            for stat, fn in (("best", min), ("median", statistics.median)):
                cell = {n: fn(v) for n, v in runs.items()}
                d = cell["defaults"]
                top = min((n for n in cell if n != "defaults"), key=lambda n: cell[n])
                row[stat] = {"defaults_ms": d, "top": top, "top_ms": cell[top],
                             "ratio": cell[top] / d}
                line += f"| {d:,.0f} | {top} | {cell[top]:,.0f} | {cell[top] / d:.2f} "
            table.append(row)
            print(line + "|")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
