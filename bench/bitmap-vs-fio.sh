#!/usr/bin/env bash
# The cold 1% bitmap heap scan against the device's random-read limit, in one run.
#
#   sudo bench/bitmap-vs-fio.sh DATA_DIR ROUNDS BIN [BIN ...]
#
# DATA_DIR holds `pageio gen --dataset uniform --rows 5000000 --out DATA_DIR` (277,778 heap
# pages in three segment files, a btree on a). Each round runs, page cache dropped before
# every run:
#   - fio, random 8 kB reads at queue depth 32 over the heap's segment files, O_DIRECT and
#     buffered (io_uring engine, 5 s each) — the device's random-read rate;
#   - every BIN, `pageio scan --kind bitmap --where 'a between 50000 and 51000'` (1%: 46,251
#     heap pages) with its defaults and with --io-method io_uring (or, with
#     METHODS="defaults worker io_uring", with its defaults and each method named).
# Everything runs at nice -20, fio and pageio alike, so that other work on
# the machine does not delay their wake-ups; needs root (for nice -20 and drop_caches).
# Prints one line per run: what ran, then elapsed ms and heap pages/s (pageio) or IOPS (fio).
set -euo pipefail
data=$1; rounds=$2; shift 2
files=$(ls "$data"/uniform/16384 "$data"/uniform/16384.[0-9]* 2>/dev/null | paste -sd:)
[ -n "$files" ] || { echo "no uniform heap under $data: run pageio gen first" >&2; exit 2; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
fio_run() {
  drop
  nice -n -20 fio --name=rand32 --filename="$files" --direct="$1" --readonly --time_based \
    --runtime=5 --rw=randread --bs=8192 --iodepth=32 --ioengine=io_uring --invalidate=1 \
    --output-format=json 2>/dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]['read']; print('fio randread 8k qd32 direct=$1 | iops', round(j['iops']))"
}
scan_run() {
  local bin=$1; shift
  drop
  nice -n -20 "$bin" scan --dataset uniform --data-dir "$data" --kind bitmap \
    --where 'a between 50000 and 51000' "$@" --json |
    python3 -c "import json,sys; d=json.load(sys.stdin); print('$bin $* | ms', round(d['elapsed_ms']), 'pages/s', round(d['heap_pages'] / d['elapsed_ms'] * 1000), 'rows', d['rows'])"
}
for round in $(seq "$rounds"); do
  echo "# round $round"
  fio_run 1
  fio_run 0
  for bin in "$@"; do
    for method in ${METHODS:-defaults io_uring}; do
      if [ "$method" = defaults ]; then scan_run "$bin"; else scan_run "$bin" --io-method "$method"; fi
    done
  done
done
