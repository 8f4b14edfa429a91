#!/usr/bin/env python3
"""Builds the pg18-small fixture: a real PostgreSQL 18 data directory and the facts the tests
check against, both made here from the repository's own SQL.

    python3 scripts/build-fixture.py            # builds target/fixtures/pg18-small if needed
    python3 scripts/build-fixture.py --force    # rebuilds it

What it does, in order:

  1. takes an exclusive lock on target/fixtures/pg18-small.lock (test binaries and their
     threads may all ask for the fixture at once; the wait is bounded by LOCK_WAIT_SECONDS);
  2. returns at once when target/fixtures/pg18-small/stamp holds the hash of this script and
     of tests/fixtures/pg18-small.sql (a changed SQL or builder rebuilds);
  3. finds PostgreSQL 18 through $PAGEIO_PG_BIN or bench/setup-postgres.sh (which installs it
     and the unprivileged user `pgtest`: PostgreSQL refuses to run as root);
  4. runs `initdb -k` (data checksums on) in a fresh directory under the system temporary
     directory, starts the server on a private socket directory with TCP off and
     autovacuum off (so nothing but the SQL touches the tables), and runs the SQL;
  5. asks PostgreSQL for the facts the tests rely on — the 12 query answers and the range of
     linear_10.a (asserted equal to KNOWN_ANSWERS / KNOWN_LINEAR_10_RANGE: the SQL seeds its
     random numbers, so these never change, and a mismatch fails the build loudly), the
     relation file paths and page counts, the btree metapages (pageinspect's bt_metap), the
     header, checksum and first tuple of uniform's blocks 0 and 7 (page_header,
     page_checksum, heap_page_items) — then stops the server cleanly and runs
     `pg_checksums -c` for the totals it prints;
  6. writes data/ and facts.json into target/fixtures/.pg18-small.tmp-<pid>, the stamp last,
     and renames that directory to target/fixtures/pg18-small: an interrupted build leaves a
     temporary directory that is never mistaken for a good fixture (and is removed by the next
     build).

Facts that depend on the build (LSNs, checksums, transaction ids) are read by the tests from
facts.json and never written into the tests. Prints the fixture directory on stdout.
Standard library only.
"""

import argparse
import fcntl
import hashlib
import json
import os
import pwd
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SQL = os.path.join(REPO, "tests", "fixtures", "pg18-small.sql")
NAME = "pg18-small"
PG_USER = os.environ.get("PAGEIO_PG_USER", "pgtest")

# A build takes well under a minute on 2 cores; another process holding the lock for longer
# than this is stuck, and waiting on it forever would hang the test suite.
LOCK_WAIT_SECONDS = 900
# initdb, pg_ctl, psql and pg_checksums each finish in seconds on this 40 MB cluster; the bound
# only turns a hung PostgreSQL into an error.
COMMAND_TIMEOUT_SECONDS = 600

# `SELECT count(*), sum(length(b)) FROM <table> WHERE a BETWEEN lo AND hi`, as PostgreSQL 18
# answers it on this SQL. The tests carry the same constants; the build fails if PostgreSQL
# disagrees with them.
KNOWN_ANSWERS = [
    ("uniform", 0, 1000, 20000, 1320000),
    ("uniform", 0, 10, 207, 13662),
    ("uniform", 100, 200, 1984, 130944),
    ("uniform", 250, 750, 9917, 654522),
    ("uniform", 500, 500.5, 14, 924),
    ("uniform", 990, 1000, 227, 14982),
    ("linear_10", 0, 1000, 19847, 1309902),
    ("linear_10", -100, 10, 226, 14916),
    ("linear_10", 100, 200, 2000, 132000),
    ("linear_10", 250, 750, 10018, 661188),
    ("linear_10", 500, 500.5, 7, 462),
    ("linear_10", 990, 1100, 212, 13992),
]
# min(a), max(a) of linear_10, as PostgreSQL prints them (shortest exact decimal).
KNOWN_LINEAR_10_RANGE = ("-23.754288905933002", "1025.248542729012")

RELATIONS = ["uniform", "linear_10", "uniform_a", "linear_10_a"]
BTREES = ["uniform_a", "linear_10_a"]
# Blocks of uniform whose header, checksum and first tuple the tests compare byte for byte.
HEAP_BLOCKS = [0, 7]


def log(msg):
    print(f"build-fixture: {msg}", file=sys.stderr, flush=True)


def fail(msg):
    log(f"error: {msg}")
    sys.exit(1)


def stamp_of():
    """The hash of everything that decides the fixture's contents."""
    h = hashlib.sha256()
    for path in (os.path.abspath(__file__), SQL):
        with open(path, "rb") as f:
            h.update(os.path.basename(path).encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


def lock(path):
    """An exclusive flock on `path`, waited for at most LOCK_WAIT_SECONDS."""
    f = open(path, "a+")
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return f
        except BlockingIOError:
            if time.monotonic() > deadline:
                fail(f"{path} is still locked after {LOCK_WAIT_SECONDS} s: another build is "
                     "stuck; end it (see `fuser {path}`) and run again")
            time.sleep(0.2)


def as_pg_user():
    """Commands run as the unprivileged user when we are root (PostgreSQL refuses root)."""
    return ["runuser", "-u", PG_USER, "--"] if os.geteuid() == 0 else []


def run(argv, what, stdin=None):
    try:
        out = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                             cwd="/", timeout=COMMAND_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        fail(f"{what} did not finish within {COMMAND_TIMEOUT_SECONDS} s")
    if out.returncode != 0:
        fail(f"{what} failed (exit {out.returncode}):\n{out.stdout}{out.stderr}")
    return out.stdout


def pg_bin():
    b = os.environ.get("PAGEIO_PG_BIN")
    if not b:
        b = run(["bash", os.path.join(REPO, "bench", "setup-postgres.sh")],
                "bench/setup-postgres.sh").strip()
    if not os.path.exists(os.path.join(b, "initdb")):
        fail(f"no initdb in {b}: set PAGEIO_PG_BIN to PostgreSQL 18's bin directory or run "
             "bench/setup-postgres.sh")
    return b


class Server:
    """A server on `root`/data with its socket in `root`; stopped (fast, cleanly) on exit."""

    def __init__(self, bin_dir, root):
        self.bin, self.root, self.running = bin_dir, root, False
        self.data = os.path.join(root, "data")

    def pg(self, program, *args, stdin=None):
        return run(as_pg_user() + [os.path.join(self.bin, program), *args],
                   f"{program} {' '.join(args)}", stdin=stdin)

    def start(self):
        opts = f"-k {self.root} -c listen_addresses='' -c port=5432 -c autovacuum=off"
        self.pg("pg_ctl", "-D", self.data, "-o", opts,
                "-l", os.path.join(self.root, "log"), "-w", "start")
        self.running = True

    def stop(self):
        if self.running:
            self.running = False
            self.pg("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def psql(self, sql):
        return self.pg("psql", "-h", self.root, "-U", "postgres", "-d", "postgres", "-X",
                       "-qAt", "-v", "ON_ERROR_STOP=1", stdin=sql)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


# The query answers, asked in the session that ran the SQL (reading the rows may set hint
# bits; the checkpoint after them puts every such change on disk before the page facts).
ANSWERS_SQL = """
select json_build_object(
  'queries', (select json_agg(json_build_object(
       'table', q.t, 'lo', q.lo, 'hi', q.hi, 'count', q.c, 'sum_length_b', q.s) order by q.i)
     from ({queries}) q),
  'linear_10_a_min', (select min(a)::text from linear_10),
  'linear_10_a_max', (select max(a)::text from linear_10));
checkpoint;
"""

# The page facts, asked after a restart so every page comes from disk: a buffer's copy of
# pd_checksum is stale once the page has been written (PostgreSQL checksums a copy at write
# time), and the restart makes get_raw_page return exactly the bytes on disk. Nothing here
# changes a page of the tables, and the builder checks the recorded LSNs and checksums against
# the files after the final shutdown.
PAGE_FACTS_SQL = """
create extension pageinspect;
select json_build_object(
  'postgres_version', current_setting('server_version'),
  'database_oid', (select oid from pg_database where datname = current_database())::bigint,
  'relations', (select json_object_agg(relname, json_build_object(
       'path', pg_relation_filepath(oid),
       'pages', pg_relation_size(oid) / current_setting('block_size')::int))
     from pg_class where relname in ({relations})),
  'btrees', (select json_object_agg(name, (select json_build_object(
       'magic', magic, 'version', version, 'root', root, 'level', level,
       'fastroot', fastroot, 'fastlevel', fastlevel) from bt_metap(name)))
     from unnest(array[{btrees}]) name),
  'heap_blocks', (select json_agg(json_build_object(
       'relation', 'uniform',
       'block', blk,
       'lsn', h.lsn::text,
       'checksum', h.checksum::int & 65535,
       'computed_checksum', page_checksum(p, blk)::int & 65535,
       'flags', h.flags, 'lower', h.lower, 'upper', h.upper, 'special', h.special,
       'pagesize', h.pagesize, 'version', h.version, 'prune_xid', h.prune_xid::text::bigint,
       'items', (select count(*) from heap_page_items(p)),
       'first_tuple', (select json_build_object(
            't_ctid', t_ctid::text, 't_infomask', t_infomask, 't_infomask2', t_infomask2,
            't_hoff', t_hoff, 'lp_len', lp_len)
          from heap_page_items(p) where lp = 1)) order by blk)
     from unnest(array[{heap_blocks}]) blk,
          lateral (select get_raw_page('uniform', blk) p) r,
          lateral page_header(p) h));
drop extension pageinspect;
"""


def answers_sql():
    queries = " union all ".join(
        f"select {i} i, '{t}' t, {lo}::float8 lo, {hi}::float8 hi, "
        f"(select count(*) from {t} where a between {lo} and {hi}) c, "
        f"(select coalesce(sum(length(b)), 0) from {t} where a between {lo} and {hi}) s"
        for i, (t, lo, hi, _, _) in enumerate(KNOWN_ANSWERS))
    return ANSWERS_SQL.format(queries=queries)


def page_facts_sql():
    return PAGE_FACTS_SQL.format(
        relations=", ".join(f"'{r}'" for r in RELATIONS),
        btrees=", ".join(f"'{b}'" for b in BTREES),
        heap_blocks=", ".join(str(b) for b in HEAP_BLOCKS))


def check_pages_on_disk(data, facts):
    """The LSN and checksum recorded for each block are the ones in the file after the final
    shutdown (so nothing changed the page after PostgreSQL described it)."""
    path = os.path.join(data, facts["relations"]["uniform"]["path"])
    with open(path, "rb") as f:
        for b in facts["heap_blocks"]:
            f.seek(b["block"] * 8192)
            header = f.read(24)
            xlogid, xrecoff, checksum = struct.unpack_from("<IIH", header)
            hi, lo = (int(part, 16) for part in b["lsn"].split("/"))
            if (xlogid, xrecoff, checksum) != (hi, lo, b["checksum"]):
                fail(f"{path} block {b['block']}: on disk lsn {xlogid:X}/{xrecoff:X} "
                     f"checksum {checksum}, "
                     f"PostgreSQL reported lsn {b['lsn']} checksum {b['checksum']}")


def check_known_answers(facts):
    """Fails the build when PostgreSQL's answers differ from the ones the tests carry."""
    wrong = []
    for (t, lo, hi, count, total), got in zip(KNOWN_ANSWERS, facts["queries"]):
        if (got["table"], got["count"], got["sum_length_b"]) != (t, count, total):
            wrong.append(f"{t} a between {lo} and {hi}: PostgreSQL says count "
                         f"{got['count']} sum {got['sum_length_b']}, the tests expect "
                         f"{count} {total}")
    if len(facts["queries"]) != len(KNOWN_ANSWERS):
        wrong.append(f"{len(facts['queries'])} answers for {len(KNOWN_ANSWERS)} queries")
    got_range = (facts["linear_10_a_min"], facts["linear_10_a_max"])
    if got_range != KNOWN_LINEAR_10_RANGE:
        wrong.append(f"linear_10 range: PostgreSQL says {got_range}, the tests expect "
                     f"{KNOWN_LINEAR_10_RANGE}")
    if wrong:
        fail("PostgreSQL's answers on tests/fixtures/pg18-small.sql are not the known "
             "answers:\n  " + "\n  ".join(wrong)
             + "\nIf the SQL changed on purpose, update KNOWN_ANSWERS here and the same "
               "constants in the tests.")


# The files a fresh initdb gives the SQL's relations (the first user OIDs, in creation
# order). Some tests name them directly, as a user of the CLI would (`--heap base/5/16384`),
# so the build fails loudly if PostgreSQL ever places them elsewhere.
KNOWN_PATHS = {
    "uniform": "base/5/16384",
    "linear_10": "base/5/16389",
    "uniform_a": "base/5/16394",
    "linear_10_a": "base/5/16395",
}


def check_relations(facts):
    if sorted(facts["relations"] or {}) != sorted(RELATIONS):
        fail(f"relations found: {facts['relations']}, expected {RELATIONS}")
    for name, path in KNOWN_PATHS.items():
        got = facts["relations"][name]["path"]
        if got != path:
            fail(f"{name} is at {got}, but the tests name it {path}: update KNOWN_PATHS "
                 f"here and the tests that name it")
    for b in facts["heap_blocks"]:
        if b["checksum"] != b["computed_checksum"]:
            fail(f"uniform block {b['block']}: stored checksum {b['checksum']}, PostgreSQL "
                 f"computes {b['computed_checksum']}")


def pg_checksums_totals(server):
    out = server.pg("pg_checksums", "-c", "-D", server.data)
    totals = {}
    for key, field in [("Files scanned", "files_scanned"), ("Blocks scanned", "blocks_scanned"),
                       ("Bad checksums", "bad_checksums"),
                       ("Data checksum version", "data_checksum_version")]:
        m = re.search(rf"^{key}:\s*(\d+)$", out, re.M)
        if not m:
            fail(f"pg_checksums -c printed no '{key}:' line:\n{out}")
        totals[field] = int(m.group(1))
    if totals["bad_checksums"] != 0:
        fail(f"pg_checksums -c found bad checksums in a fresh cluster:\n{out}")
    return totals


def build(bin_dir, staging):
    """Builds the cluster in a private directory PostgreSQL's user can reach, then copies the
    stopped data directory and the facts into `staging`."""
    root = tempfile.mkdtemp(prefix="pageio-fixture-")
    try:
        # The server's user must reach the directory (and the socket in it).
        os.chmod(root, 0o755)
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam(PG_USER)
            except KeyError:
                fail(f"user {PG_USER} does not exist: run bench/setup-postgres.sh")
            os.chown(root, pw.pw_uid, pw.pw_gid)
        server = Server(bin_dir, root)
        log(f"initdb -k in {server.data}")
        server.pg("initdb", "-k", "-U", "postgres", "-D", server.data)
        with server:
            log(f"running {os.path.relpath(SQL, REPO)}")
            with open(SQL) as f:
                server.psql(f.read())
            answers = json.loads(server.psql(answers_sql()))
        check_known_answers(answers)
        with server:
            facts = json.loads(server.psql(page_facts_sql()))
        facts.update(answers)
        check_relations(facts)
        check_pages_on_disk(server.data, facts)
        facts["pg_checksums"] = pg_checksums_totals(server)
        facts["fixture"] = NAME
        facts["sql"] = os.path.relpath(SQL, REPO)
        shutil.copytree(server.data, os.path.join(staging, "data"), symlinks=True)
        with open(os.path.join(staging, "facts.json"), "w") as f:
            json.dump(facts, f, indent=2)
            f.write("\n")
        return facts
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(REPO, "target", "fixtures"),
                   help="directory holding the cached fixture (default: target/fixtures)")
    p.add_argument("--force", action="store_true", help="rebuild even when up to date")
    a = p.parse_args()

    os.makedirs(a.out, exist_ok=True)
    final = os.path.join(a.out, NAME)
    stamp = stamp_of()
    lock_file = lock(os.path.join(a.out, f"{NAME}.lock"))
    try:
        stamp_path = os.path.join(final, "stamp")
        if not a.force and os.path.exists(stamp_path):
            with open(stamp_path) as f:
                if f.read().strip() == stamp:
                    print(final)
                    return
        # Leftovers of interrupted builds: never complete, never used.
        for entry in os.listdir(a.out):
            if entry.startswith(f".{NAME}.tmp-") or entry.startswith(f".{NAME}.old-"):
                shutil.rmtree(os.path.join(a.out, entry), ignore_errors=True)
        staging = os.path.join(a.out, f".{NAME}.tmp-{os.getpid()}")
        os.makedirs(staging)
        started = time.monotonic()
        try:
            facts = build(pg_bin(), staging)
        except BaseException:
            # Nothing half-built stays behind (a later build would remove it anyway).
            shutil.rmtree(staging, ignore_errors=True)
            raise
        with open(os.path.join(staging, "stamp"), "w") as f:
            f.write(stamp + "\n")
        if os.path.exists(final):
            old = os.path.join(a.out, f".{NAME}.old-{os.getpid()}")
            os.rename(final, old)
            os.rename(staging, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(staging, final)
        log(f"built {final} in {time.monotonic() - started:.0f} s "
            f"(PostgreSQL {facts['postgres_version']}, "
            f"{facts['pg_checksums']['blocks_scanned']} blocks)")
        print(final)
    finally:
        lock_file.close()


if __name__ == "__main__":
    main()
