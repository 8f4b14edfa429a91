#!/usr/bin/env bash
# pageio verify vs pg_checksums --check, cold and warm, on one PostgreSQL 18 cluster of at
# least 4 GB, with the device's sequential-read limit measured in the same run.
#
#   sudo bench/verify-bench.sh            # needs root: drops the page cache before cold runs
#
# Environment: BENCH_DIR (default /var/tmp/pageio-verify-bench, must be on the disk under
# test, not tmpfs), SCALE (pgbench scale, default 300 ≈ 4.5 GB), RUNS (default 1 per cell).
# The cluster is created once (initdb -k, pgbench -i) and reused by later runs.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
BENCH_DIR="${BENCH_DIR:-/var/tmp/pageio-verify-bench}"
SCALE="${SCALE:-300}"
RUNS="${RUNS:-1}"
PG_USER="${PAGEIO_PG_USER:-pgtest}"

[ "$(id -u)" = 0 ] || { echo "verify-bench: run as root (cold runs drop the page cache)" >&2; exit 1; }
bin="$("$here/setup-postgres.sh")"
asuser() { runuser -u "$PG_USER" -- "$@"; }

cargo build --release --manifest-path "$repo/Cargo.toml" -p pageio-cli >&2
pageio="$repo/target/release/pageio"

data="$BENCH_DIR/data"
if [ ! -f "$data/PG_VERSION" ]; then
    mkdir -p "$BENCH_DIR"; chmod 755 "$BENCH_DIR"; chown "$PG_USER" "$BENCH_DIR"
    asuser "$bin/initdb" -k -U postgres -D "$data" >&2
    asuser "$bin/pg_ctl" -D "$data" -o "-k $BENCH_DIR -c listen_addresses='' -c max_wal_size=8GB" \
        -l "$BENCH_DIR/log" -w start >&2
    asuser "$bin/pgbench" -h "$BENCH_DIR" -U postgres -i -s "$SCALE" -q postgres >&2
    asuser "$bin/psql" -h "$BENCH_DIR" -U postgres -qc "CHECKPOINT" postgres >&2
    asuser "$bin/pg_ctl" -D "$data" -m fast -w stop >&2
fi

# Bytes pg_checksums reads: relation files under global/, base/, pg_tblspc/.
size_bytes=$(find "$data/global" "$data/base" "$data/pg_tblspc" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
size_mb=$(awk -v b="$size_bytes" 'BEGIN {printf "%.0f", b/1e6}')

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
now() { date +%s.%N; }

# Device limit: sequential O_DIRECT reads of the cluster's 1 GB segments, 1 MB at queue
# depth 32, read-only. fio if present, else dd (queue depth 1, so a lower bound). Measured
# before and after the runs (a virtual disk's limit drifts); "vs device" uses the higher.
segs=$(find "$data/base" -type f -size +1000M | head -8 | paste -sd:)
measure_device() {
    if command -v fio >/dev/null && [ -n "$segs" ]; then
        fio --name=seqread --readonly --filename="$segs" --rw=read --bs=1M --direct=1 \
            --ioengine=libaio --iodepth=32 --output-format=terse --terse-version=3 \
            | awk -F';' '{printf "%.0f", $7*1024/1e6}'
    else
        local f t0 t1
        f=$(find "$data/base" -type f -size +1000M | head -1)
        t0=$(now); dd if="$f" of=/dev/null bs=1M iflag=direct status=none; t1=$(now)
        awk -v s="$(stat -c %s "$f")" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", s/(b-a)/1e6}'
    fi
}
if command -v fio >/dev/null && [ -n "$segs" ]; then
    device_how="fio, O_DIRECT, 1 MB sequential reads, iodepth 32, $(echo "$segs" | tr ':' '\n' | wc -l) × 1 GB segments"
else
    device_how="dd, O_DIRECT, 1 MB reads, queue depth 1, one 1 GB segment"
fi
device_mbps_before=$(measure_device)

declare -A secs
run() { # name, cold|warm, command...
    local name=$1 mode=$2; shift 2
    local best=""
    for _ in $(seq "$RUNS"); do
        if [ "$mode" = cold ]; then drop_caches; else "$@" >/dev/null 2>&1 || true; fi
        local t0 t1 rc=0
        t0=$(now); "$@" >/dev/null 2>"$BENCH_DIR/last.err" || rc=$?; t1=$(now)
        if [ "$rc" != 0 ]; then echo "verify-bench: $name failed ($rc):" >&2; cat "$BENCH_DIR/last.err" >&2; exit 1; fi
        local s; s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b-a}')
        if [ -z "$best" ] || awk -v x="$s" -v y="$best" 'BEGIN {exit !(x<y)}'; then best=$s; fi
    done
    secs["$name/$mode"]=$best
    echo "  $name $mode: $best s" >&2
}

# "pageio" is the default configuration (no flags: io_method=auto, mapped reads on, one
# scanner per CPU); the other rows change one thing each.
tools=("pg_checksums" "pageio" "pageio --mapped-reads off" "pageio --io-method worker"
       "pageio --direct-io on" "pageio --direct-io on --io-method worker")
cmd_for() {
    case "$1" in
        "pg_checksums") echo asuser "$bin/pg_checksums" -c "$data" ;;
        pageio*) echo "$pageio" verify ${1#pageio} "$data" ;;
    esac
}
default_method=$("$pageio" verify --json "$data" 2>/dev/null | awk -F'"' '/"io_method"/ {print $4}')
for mode in cold warm; do
    for t in "${tools[@]}"; do
        # shellcheck disable=SC2046
        run "$t" "$mode" $(cmd_for "$t")
    done
done

device_mbps_after=$(measure_device)
device_mbps=$(( device_mbps_before > device_mbps_after ? device_mbps_before : device_mbps_after ))

echo
echo "Cluster: $size_mb MB checked (pgbench -i -s $SCALE, initdb -k), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), kernel $(uname -r)"
echo "Device limit: $device_mbps MB/s ($device_how; $device_mbps_before MB/s before the runs, $device_mbps_after after)"
echo "pageio default io_method here: $default_method"
echo
echo "| tool | cache | seconds | MB/s | vs pg_checksums | vs device |"
echo "|---|---|---:|---:|---:|---:|"
for mode in cold warm; do
    base=${secs["pg_checksums/$mode"]}
    for t in "${tools[@]}"; do
        s=${secs["$t/$mode"]}
        awk -v t="$t" -v m="$mode" -v s="$s" -v b="$base" -v mb="$size_mb" -v d="$device_mbps" \
            'BEGIN {r=mb/s; printf "| %s | %s | %.2f | %.0f | %.2f× | %.0f%% |\n", t, m, s, r, b/s, 100*r/d}'
    done
done
