#!/usr/bin/env bash
# pageio verify --online on a running PostgreSQL 18 cluster under pgbench load, against
# pageio verify on the same cluster stopped, and against pg_basebackup (PostgreSQL's own
# online checksum check, streamed to /dev/null), all cold; with pgbench's TPS during each
# online check beside its TPS without one, a run paced to half the device's rate, and one
# with a single scanner at idle I/O priority.
#
#   sudo bench/verify-online-bench.sh     # root: drops the page cache before each run
#
# Environment: BENCH_DIR (default /var/tmp/pageio-verify-bench; its data/ is a PostgreSQL 18
# cluster of >= 4 GB with data checksums, made by bench/verify-bench.sh if absent), PORT
# (default 5499), CLIENTS (pgbench clients, default 4), TPS_SECS (seconds of the baseline
# pgbench run, default 20), WARM_SECS (seconds pgbench runs alone after the page cache is
# dropped and before each check, so it has its own pages back, default 10), PAGEIO_BIN (a pageio binary to use instead of building the
# release one). Takes /tmp/pageio-bench.lock; never leaves the server running.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
BENCH_DIR="${BENCH_DIR:-/var/tmp/pageio-verify-bench}"
PORT="${PORT:-5499}"
CLIENTS="${CLIENTS:-4}"
TPS_SECS="${TPS_SECS:-20}"
WARM_SECS="${WARM_SECS:-10}"
PG_USER="${PAGEIO_PG_USER:-pgtest}"

[ "$(id -u)" = 0 ] || { echo "verify-online-bench: run as root (cold runs drop the page cache)" >&2; exit 1; }
exec 9>/tmp/pageio-bench.lock
flock 9

bin="$("$here/setup-postgres.sh")"
asuser() { runuser -u "$PG_USER" -- "$@"; }
data="$BENCH_DIR/data"
if [ ! -f "$data/PG_VERSION" ]; then
    "$here/verify-bench.sh" >/dev/null   # makes the cluster (pgbench -i -s 300, initdb -k)
fi
if "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    echo "verify-online-bench: a server already runs on $data; stop it first" >&2; exit 1
fi

if [ -n "${PAGEIO_BIN:-}" ]; then
    pageio="$PAGEIO_BIN"
else
    cargo build --release --manifest-path "$repo/Cargo.toml" -p pageio-cli >&2
    pageio="${CARGO_TARGET_DIR:-$repo/target}/release/pageio"
fi

log="$BENCH_DIR/online-bench.log"
start_server() {
    asuser "$bin/pg_ctl" -D "$data" -l "$log" -w \
        -o "-k $BENCH_DIR -c listen_addresses='' -c port=$PORT -c max_wal_size=8GB" start >/dev/null
}
stop_server() { asuser "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true; }
load_pid=""
cleanup() {
    [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null && wait "$load_pid" 2>/dev/null
    stop_server
}
trap cleanup EXIT

psql_() { asuser "$bin/psql" -X -h "$BENCH_DIR" -p "$PORT" -U postgres -qAt -c "$1" postgres; }
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
now() { date +%s.%N; }
secs_since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.3f", b-a}'; }

# The pgbench tables the load needs; a small scale when the cluster has none (its size
# stays what it was, >= 4 GB).
start_server
if [ "$(psql_ "SELECT count(*) FROM pg_class WHERE relname = 'pgbench_accounts'")" = 0 ]; then
    asuser "$bin/pgbench" -h "$BENCH_DIR" -p "$PORT" -U postgres -i -s 10 -q postgres >&2
fi
stop_server

size_bytes=$(find "$data/global" "$data/base" "$data/pg_tblspc" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
size_mb=$(awk -v b="$size_bytes" 'BEGIN {printf "%.0f", b/1e6}')

# The device's sequential-read limit: O_DIRECT reads of one 1 GB segment.
seg=$(find "$data/base" -type f -size +1000M | head -1)
device_mbps() {
    local t0; t0=$(now)
    dd if="$seg" of=/dev/null bs=1M iflag=direct status=none
    awk -v s="$(stat -c %s "$seg")" -v t="$(secs_since "$t0")" 'BEGIN {printf "%.0f", s/t/1e6}'
}

# 1. pageio verify on the stopped cluster, cold.
drop_caches
t0=$(now); "$pageio" verify "$data" >/dev/null; offline_s=$(secs_since "$t0")
device=$(device_mbps)

start_server
# pgbench with per-second progress stamped in epoch seconds; TPS over a window is the mean
# of the lines inside it.
pgbench_bg() {
    asuser "$bin/pgbench" -h "$BENCH_DIR" -p "$PORT" -U postgres -n -c "$CLIENTS" -T 3600 \
        -P 1 --progress-timestamp postgres 2>"$BENCH_DIR/pgbench.progress" >/dev/null &
    load_pid=$!
    sleep 3
}
pgbench_stop() { kill "$load_pid" 2>/dev/null || true; wait "$load_pid" 2>/dev/null || true; load_pid=""; }
tps_between() { # epoch start, epoch end
    awk -v a="$1" -v b="$2" '/^progress:/ {t=$2+0; if (t>=a && t<=b) {s+=$4; n++}} END {printf "%.0f", n ? s/n : 0}' \
        "$BENCH_DIR/pgbench.progress"
}

# 2. pgbench alone.
pgbench_bg
t0=$(date +%s.%N); sleep "$TPS_SECS"; tps_alone=$(tps_between "$t0" "$(now)")
pgbench_stop

# 3. A checker under pgbench, cold: prints seconds and the TPS while it ran. The page cache
# is dropped first (the check reads cold), then pgbench runs WARM_SECS alone to read its own
# pages back in, so the TPS during the check is not that of a cold pgbench.
under_load() {
    drop_caches
    pgbench_bg
    sleep "$WARM_SECS"
    local t0 s; t0=$(now)
    "$@" >/dev/null 2>"$BENCH_DIR/last.err" || { echo "failed: $*" >&2; cat "$BENCH_DIR/last.err" >&2; exit 1; }
    s=$(secs_since "$t0")
    echo "$s $(tps_between "$t0" "$(now)")"
    pgbench_stop
}
# The same start with no check at all: what pgbench does in those conditions alone.
read -r idle3_s idle3_tps < <(under_load sleep 3)
read -r idle8_s idle8_tps < <(under_load sleep 8)
read -r online_s online_tps < <(under_load "$pageio" verify --online "$data")
read -r bb_s bb_tps < <(under_load asuser "$bin/pg_basebackup" -h "$BENCH_DIR" -p "$PORT" -U postgres \
    --checkpoint=fast -Ft -D - -X none)
half=$(( device / 2 > 1024 ? 1024 : (device / 2 < 1 ? 1 : device / 2) ))
read -r paced_s paced_tps < <(under_load "$pageio" verify --online --max-rate "${half}M" "$data")
read -r gentle_s gentle_tps < <(under_load "$pageio" verify --online --jobs 1 --ionice idle "$data")
stop_server

rate() { awk -v mb="$size_mb" -v s="$1" 'BEGIN {printf "%.0f", mb/s}'; }
echo
echo "Cluster: $size_mb MB of relation files, $(nproc) CPUs, kernel $(uname -r); device (dd O_DIRECT 1 MB, one segment): $device MB/s"
echo "pgbench -c $CLIENTS alone: $tps_alone TPS"
echo
echo "| check | seconds | MB/s | pgbench TPS during |"
echo "|---|---:|---:|---:|"
echo "| no check, 3 s (same start: cache dropped, pgbench ${WARM_SECS} s alone) | $idle3_s | — | $idle3_tps |"
echo "| no check, 8 s (same start) | $idle8_s | — | $idle8_tps |"
echo "| pageio verify (stopped cluster) | $offline_s | $(rate "$offline_s") | — |"
echo "| pageio verify --online | $online_s | $(rate "$online_s") | $online_tps |"
echo "| pg_basebackup -Ft -D - -X none | $bb_s | $(rate "$bb_s") | $bb_tps |"
echo "| pageio verify --online --max-rate ${half}M | $paced_s | $(rate "$paced_s") | $paced_tps |"
echo "| pageio verify --online --jobs 1 --ionice idle | $gentle_s | $(rate "$gentle_s") | $gentle_tps |"
echo
awk -v on="$online_s" -v off="$offline_s" -v bb="$bb_s" \
    'BEGIN {printf "online / offline rate: %.2f×; online / pg_basebackup rate: %.2f×\n", off/on, bb/on}'
