#!/usr/bin/env python3
"""Compare a few flag sets of one `pageio scan`, cold or warm, in shuffled rounds.

    sudo bench/scan-ab.py DATA_DIR --kind index --temp cold --rounds 5 \\
        'defaults=' 'uring-direct=--io-method io_uring --direct-io on' ...

DATA_DIR holds `pageio gen --dataset uniform --rows 5000000 --out DATA_DIR`. The scans are
those of bench/defaults-matrix.py (seq; bitmap at 1%, `a between 50000 and 51000`; index at
0.1%, `a between 50000 and 50100`). Each configuration is NAME=FLAGS (FLAGS split on
spaces; empty for the defaults), or NAME@BINARY=FLAGS to run another build of pageio
(binaries of two commits, side by side). Each round runs every configuration once in a shuffled
order, with the page cache dropped first; warm runs the same scan once more before the
measured run, so the page cache holds what it reads (every run is a new process: the
buffer pool starts empty). Everything runs at nice -20; needs root.

Prints every run, then per configuration its best and median time and both as a ratio to
the first configuration's; --json writes them too. Every run must count the same rows.
"""

import argparse
import json
import random
import statistics
import subprocess
import sys

WHERE = {
    "seq": [],
    "bitmap": ["--where", "a between 50000 and 51000"],
    "index": ["--where", "a between 50000 and 50100"],
}


def drop_caches():
    """Writes back dirty pages and drops the page cache; exits with the fix when not root."""
    subprocess.run(["sync"], check=True)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except PermissionError:
        sys.exit("cannot drop the page cache (/proc/sys/vm/drop_caches needs root): run with sudo")


def run_scan(binary, data, kind, flags):
    """One `pageio scan` of KIND over DATA's uniform table with FLAGS at nice -20: (elapsed ms,
    rows). A failed run exits with pageio's own message."""
    cmd = [
        "nice", "-n", "-20", binary, "scan", "--dataset", "uniform",
        "--data-dir", data, "--kind", kind, *WHERE[kind], *flags, "--json",
    ]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        sys.exit(f"cannot run {binary}: {e}; build it with cargo build --release -p pageio-cli or pass --bin")
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stderr.strip()}")
    doc = json.loads(out.stdout)
    return doc["elapsed_ms"], doc["rows"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data")
    p.add_argument("configs", nargs="+", metavar="NAME=FLAGS")
    p.add_argument("--kind", choices=sorted(WHERE), required=True)
    p.add_argument("--temp", choices=["cold", "warm"], required=True)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--bin", default="target/release/pageio")
    p.add_argument("--json", help="also write the runs and the summary to this file")
    args = p.parse_args()

    configs = []
    for c in args.configs:
        name, sep, flags = c.partition("=")
        name, _, binary = name.partition("@")
        if not sep or not name:
            sys.exit(f"{c!r}: expected NAME=FLAGS or NAME@BINARY=FLAGS (FLAGS may be empty)")
        configs.append((name, binary or args.bin, flags.split()))
    if len({name for name, _, _ in configs}) != len(configs):
        sys.exit("every configuration needs a name of its own")
    runs = {name: [] for name, _, _ in configs}
    rows_seen = None
    for rnd in range(1, args.rounds + 1):
        order = configs[:]
        random.shuffle(order)
        for name, binary, flags in order:
            drop_caches()
            if args.temp == "warm":
                run_scan(binary, args.data, args.kind, flags)
            ms, rows = run_scan(binary, args.data, args.kind, flags)
            if rows_seen is None:
                rows_seen = rows
            elif rows != rows_seen:
                sys.exit(f"{name}: {rows} rows, expected {rows_seen}")
            runs[name].append(ms)
            print(f"round {rnd} {name:32} {ms:8.1f} ms", flush=True)

    first = configs[0][0]
    best0, med0 = min(runs[first]), statistics.median(runs[first])
    summary = []
    print()
    print(f"| configuration | best ms | median ms | best / {first}'s | median / {first}'s | runs (ms) |")
    print("|---|---:|---:|---:|---:|---|")
    for name, _, _ in configs:
        v = runs[name]
        best, med = min(v), statistics.median(v)
        summary.append({"name": name, "best_ms": best, "median_ms": med, "runs_ms": v})
        print(f"| {name} | {best:,.1f} | {med:,.1f} | {best / best0:.2f} | {med / med0:.2f} | "
              + ", ".join(f"{x:.0f}" for x in v) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"kind": args.kind, "temp": args.temp, "rows": rows_seen, "configs": summary}, f, indent=1)


if __name__ == "__main__":
    main()
