#!/usr/bin/env bash
# pageio checksums --enable vs pg_checksums --enable, cold, on identical copies of one
# PostgreSQL 18 cluster of at least 4 GB made without data checksums, with the device's
# read and write bandwidth measured by fio on the same file system in the same run.
#
#   sudo bench/checksums-bench.sh          # needs root: drops the page cache before each run
#
# Environment: BENCH_DIR (default /var/tmp/pageio-checksums-bench, on the disk under test,
# not tmpfs), SCALE (pgbench scale, default 300 ≈ 4.5 GB), PAGEIO_VARIANTS (pageio flag
# sets separated by ";", each one timed run; default: the defaults, and --direct-io on). The template cluster is created once (initdb --no-data-checksums,
# pgbench -i) and copied before each run, so both tools rewrite every page.
# Timing runs hold `flock /tmp/pageio-bench.lock`.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
BENCH_DIR="${BENCH_DIR:-/var/tmp/pageio-checksums-bench}"
SCALE="${SCALE:-300}"
PG_USER="${PAGEIO_PG_USER:-pgtest}"
PAGEIO_VARIANTS="${PAGEIO_VARIANTS:- ;--direct-io on}"

[ "$(id -u)" = 0 ] || { echo "checksums-bench: run as root (cold runs drop the page cache)" >&2; exit 1; }
bin="$("$here/setup-postgres.sh")"
asuser() { runuser -u "$PG_USER" -- "$@"; }

cargo build --release --manifest-path "$repo/Cargo.toml" -p pageio-cli >&2
pageio="$repo/target/release/pageio"

template="$BENCH_DIR/template"
if [ ! -f "$template/PG_VERSION" ]; then
    mkdir -p "$BENCH_DIR"; chmod 755 "$BENCH_DIR"; chown "$PG_USER" "$BENCH_DIR"
    asuser "$bin/initdb" --no-data-checksums -U postgres -D "$template" >&2
    asuser "$bin/pg_ctl" -D "$template" -o "-k $BENCH_DIR -c listen_addresses='' -c max_wal_size=8GB" \
        -l "$BENCH_DIR/log" -w start >&2
    asuser "$bin/pgbench" -h "$BENCH_DIR" -U postgres -i -s "$SCALE" -q postgres >&2
    asuser "$bin/psql" -h "$BENCH_DIR" -U postgres -qc "CHECKPOINT" postgres >&2
    asuser "$bin/pg_ctl" -D "$template" -m fast -w stop >&2
fi
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0

size_bytes=$(find "$template/global" "$template/base" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
size_mb=$(awk -v b="$size_bytes" 'BEGIN {printf "%.0f", b/1e6}')
data="$BENCH_DIR/data"
fresh_copy() { rm -rf "$data"; cp -a "$template" "$data"; sync; }
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
now() { date +%s.%N; }

exec 9>/tmp/pageio-bench.lock
flock 9

# Device limits on the same file system: 1 MB O_DIRECT sequential reads and writes at queue
# depth 32 over a 2 GB file, and a 50/50 mix (what --enable does: read a page, write it back).
fio_file="$BENCH_DIR/fio.dat"
fio_bw() {
    fio --name=dev --filename="$fio_file" --size=2G --bs=1M --direct=1 --ioengine=libaio \
        --iodepth=32 --rw="$1" --output-format=terse --terse-version=3 \
        | awk -F';' '{printf "%.0f", ($7+$48)*1024/1e6}'
}
read_mbs=$(fio_bw read); write_mbs=$(fio_bw write); mixed_mbs=$(fio_bw rw)
rm -f "$fio_file"

fresh_copy; drop_caches
t0=$(now); asuser "$bin/pg_checksums" --enable -D "$data" > "$BENCH_DIR/pg.out"; t1=$(now)
pg_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b-a}')
rows=("pg_checksums --enable:$pg_s")
IFS=';' read -r -a variants <<< "$PAGEIO_VARIANTS"
for args in "${variants[@]}"; do
    fresh_copy; drop_caches
    # shellcheck disable=SC2086
    t0=$(now); "$pageio" checksums --enable -D "$data" $args > "$BENCH_DIR/pageio.out"; t1=$(now)
    rows+=("pageio checksums --enable $args:$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b-a}')")
    diff "$BENCH_DIR/pg.out" "$BENCH_DIR/pageio.out" >&2 || { echo "outputs differ" >&2; exit 1; }
    asuser "$bin/pg_checksums" --check -D "$data" >&2
done
# pg_checksums again after pageio: a virtual disk's speed drifts, so it brackets the runs,
# and the speed-up is taken against its faster run.
fresh_copy; drop_caches
t0=$(now); asuser "$bin/pg_checksums" --enable -D "$data" > "$BENCH_DIR/pg.out"; t1=$(now)
pg2_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b-a}')
rows+=("pg_checksums --enable (again):$pg2_s")
pg_s=$(awk -v a="$pg_s" -v b="$pg2_s" 'BEGIN {printf "%.2f", (a < b) ? a : b}')
rm -rf "$data"

# --enable reads every byte and writes (nearly) every byte back.
rw_mb() { awk -v b="$size_bytes" 'BEGIN {printf "%.0f", 2*b/1e6}'; }
echo "Cluster: $size_mb MB (pgbench -i -s $SCALE, initdb --no-data-checksums), $(nproc) CPUs, kernel $(uname -r)"
echo "Device (fio, O_DIRECT 1 MB qd32): read $read_mbs MB/s, write $write_mbs MB/s, 50/50 read+write $mixed_mbs MB/s"
echo "| tool | time (s) | read+write MB/s | share of fio 50/50 |"
echo "|---|---|---|---|"
for row in "${rows[@]}"; do
    name="${row%:*}"; s="${row##*:}"
    rate=$(awk -v m="$(rw_mb)" -v s="$s" 'BEGIN {printf "%.0f", m/s}')
    share=$(awk -v r="$rate" -v d="$mixed_mbs" 'BEGIN {printf "%.0f%%", 100*r/d}')
    echo "| $name | $s | $rate | $share |"
done
for row in "${rows[@]:1:${#variants[@]}}"; do
    awk -v n="${row%:*}" -v a="$pg_s" -v b="${row##*:}" 'BEGIN {printf "Speed-up of %s: %.2fx\n", n, a/b}'
done
