#!/usr/bin/env bash
# Cold scans of a generated table against the device limit, measured in one run.
#
#   bench/scan-bench.sh [ROWS]      (default 5000000 rows ≈ 2.3 GB heap; run as root)
#
# 1. pageio gen writes `uniform` (ROWS rows, btree on a) under $WORK (default /var/tmp/pageio-scan-bench).
# 2. fio measures the device on the heap file itself: sequential 128 kB reads at queue depth 32,
#    random 8 kB reads at depth 32 and at depth 1 (io_uring engine, O_DIRECT).
# 3. Every scan runs cold: sync; drop_caches; then `pageio scan --cold --json`.
#      seq scan, every io_method, buffered and direct
#      bitmap heap scan, 1% selectivity, every io_method (effective_io_concurrency 32, the
#        fio queue depth)
#      index scan, 0.1% selectivity, effective_io_concurrency 16 vs 0
# Prints a markdown table with MB/s or pages/s and the ratio to the device.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS="${1:-5000000}"
WORK="${WORK:-/var/tmp/pageio-scan-bench}"
PAGEIO=target/release/pageio
[ "$(id -u)" = 0 ] || { echo "scan-bench: run as root (it drops the page cache)" >&2; exit 2; }
command -v fio >/dev/null || { apt-get update -qq && apt-get install -y -qq fio; }
cargo build --release -q -p pageio-cli

mkdir -p "$WORK"
if [ ! -f "$WORK/uniform/manifest.json" ] || [ "$(python3 -c "import json;print(json.load(open('$WORK/uniform/manifest.json'))['rows'])")" != "$ROWS" ]; then
  $PAGEIO gen --dataset uniform --rows "$ROWS" --out "$WORK" --force --quiet
fi
HEAP="$WORK/uniform/16384"
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

fio_json() { fio --output-format=json --name=x --filename="$HEAP" --direct=1 --ioengine=io_uring --readonly --runtime=8 --time_based "$@"; }
drop; SEQ_MBS=$(fio_json --rw=read --bs=128k --iodepth=32 | python3 -c "import json,sys;print(json.load(sys.stdin)['jobs'][0]['read']['bw_bytes']/1e6)")
drop; RND32=$(fio_json --rw=randread --bs=8k --iodepth=32 | python3 -c "import json,sys;print(json.load(sys.stdin)['jobs'][0]['read']['iops'])")
drop; RND1=$(fio_json --rw=randread --bs=8k --iodepth=1 | python3 -c "import json,sys;print(json.load(sys.stdin)['jobs'][0]['read']['iops'])")

scan() { drop; $PAGEIO scan --dataset uniform --data-dir "$WORK" --cold --json "$@"; }
field() { python3 -c "import json,sys;d=json.load(sys.stdin);print($1)"; }

echo "| scan | settings | time s | rows | result | vs device |"
echo "|---|---|---:|---:|---:|---:|"
echo "| fio | seq 128kB QD32 | | | $(printf %.0f "$SEQ_MBS") MB/s | 100% |"
echo "| fio | rand 8kB QD32 | | | $(printf %.0f "$RND32") IOPS | 100% |"
echo "| fio | rand 8kB QD1 | | | $(printf %.0f "$RND1") IOPS | |"
for m in sync worker io_uring; do
  for d in off on; do
    out=$(scan --kind seq --io-method "$m" --direct-io "$d" --io-workers 2)
    s=$(echo "$out" | field "d['elapsed_ms']/1e3"); r=$(echo "$out" | field "d['rows']")
    mbs=$(echo "$out" | field "d['shared_read']*8192/(d['elapsed_ms']/1e3)/1e6")
    echo "| seq | $m direct=$d | $(printf %.2f "$s") | $r | $(printf %.0f "$mbs") MB/s | $(python3 -c "print(f'{$mbs/$SEQ_MBS*100:.0f}%')") |"
  done
done
# 1% of uniform's range [0, 100000).
for cfg in "sync --direct-io off" "worker --io-workers 2 --direct-io off" "worker --io-workers 32 --direct-io off" \
           "io_uring --direct-io off" "io_uring --direct-io on"; do
  out=$(scan --kind bitmap --where 'a between 10000 and 11000' --effective-io-concurrency 32 --io-method $cfg)
  s=$(echo "$out" | field "d['elapsed_ms']/1e3"); r=$(echo "$out" | field "d['rows']")
  pps=$(echo "$out" | field "d['shared_read']/(d['elapsed_ms']/1e3)")
  echo "| bitmap 1% | $cfg eic=32 | $(printf %.2f "$s") | $r | $(printf %.0f "$pps") pages/s | $(python3 -c "print(f'{$pps/$RND32*100:.0f}%')") |"
done
for e in 16 0; do
  out=$(scan --kind index --where 'a between 20000 and 20100' --io-method worker --effective-io-concurrency "$e")
  s=$(echo "$out" | field "d['elapsed_ms']/1e3"); r=$(echo "$out" | field "d['rows']")
  pps=$(echo "$out" | field "d['shared_read']/(d['elapsed_ms']/1e3)")
  echo "| index 0.1% | worker eic=$e | $(printf %.2f "$s") | $r | $(printf %.0f "$pps") pages/s | |"
done

# Look-ahead policies side by side: PostgreSQL 18's (x2 on miss, -1 on hit) and the adaptive one.
echo
echo "| scan | policy | time s | I/Os | avg I/O blocks | stalls | distance avg | distance max |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for kind in "seq" "bitmap --where 'a between 10000 and 11000'" "index --where 'a between 20000 and 20100'"; do
  for pol in pg18 adaptive; do
    out=$(eval scan --kind $kind --io-method io_uring --distance-policy $pol)
    echo "$out" | python3 -c "import json,sys;d=json.load(sys.stdin);s=d['stream'];print(f\"| {d['scan']} | $pol | {d['elapsed_ms']/1e3:.2f} | {s['ios']} | {s['avg_io_blocks']:.1f} | {s['stalls']} | {s['distance_avg']:.1f} | {s['distance_max']} |\")"
  done
done
