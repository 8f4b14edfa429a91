#!/usr/bin/env bash
# A cold sequential scan against the device's sequential-read limit, in one run.
#
#   sudo bench/seq-vs-fio.sh DATA_DIR ROUNDS BIN [BIN ...]
#
# DATA_DIR holds `pageio gen --dataset uniform --rows 5000000 --out DATA_DIR` (277,778 heap
# pages, 2.27 GB in three segment files). Each round, page cache dropped before every run:
#   - fio sequential reads of the heap's segment files, the three the issue names: O_DIRECT
#     128 kB at queue depth 32, O_DIRECT 1 MB at queue depth 16, buffered 1 MB (io_uring
#     engine, one pass over the files);
#   - every BIN, `pageio scan --kind seq` with its defaults, then with each io_method.
# Everything runs at nice -20 so that other work on the machine does not delay wake-ups;
# needs root (for nice -20 and drop_caches). One line per run: MB/s (fio) or elapsed ms and
# MB/s of heap read (pageio).
set -euo pipefail
data=$1; rounds=$2; shift 2
files=$(ls "$data"/uniform/16384 "$data"/uniform/16384.[0-9]* 2>/dev/null | paste -sd:)
[ -n "$files" ] || { echo "no uniform heap under $data: run pageio gen first" >&2; exit 2; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
fio_run() { # direct bs iodepth
  drop
  nice -n -20 fio --name=seq --filename="$files" --direct="$1" --readonly --rw=read \
    --bs="$2" --iodepth="$3" --ioengine=io_uring --invalidate=1 --output-format=json 2>/dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]['read']; print('fio seq direct=$1 bs=$2 qd=$3 | MB/s', round(j['bw_bytes'] / 1e6))"
}
scan_run() {
  local bin=$1; shift
  drop
  nice -n -20 "$bin" scan --dataset uniform --data-dir "$data" --kind seq "$@" --json |
    python3 -c "import json,sys; d=json.load(sys.stdin); print('$bin $* | ms', round(d['elapsed_ms']), 'MB/s', round(d['heap_pages'] * 8192 / d['elapsed_ms'] / 1000), 'rows', d['rows'])"
}
for round in $(seq "$rounds"); do
  echo "# round $round"
  fio_run 1 128k 32
  fio_run 1 1m 16
  fio_run 0 1m 1
  for bin in "$@"; do
    scan_run "$bin"
    for m in sync worker io_uring; do scan_run "$bin" --io-method "$m"; done
  done
done
