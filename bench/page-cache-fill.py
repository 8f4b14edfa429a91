#!/usr/bin/env python3
"""How the way a table enters the page cache changes later scans of it from the cache.

    sudo python3 bench/page-cache-fill.py DATA_DIR --rounds 5 --bin target/release/pageio

DATA_DIR holds `pageio gen --dataset uniform --rows 5000000 --out DATA_DIR`. Each round
fills the page cache with the table's heap in each of these ways, in a shuffled order, the
page cache dropped first:

  read              1 MB sequential reads: the kernel's own read-ahead (what `cat` does)
  willneed          posix_fadvise(WILLNEED) per 2 MB piece, then waits until all is cached
  sendfile          --sendfile-threads threads (8) send --sendfile-piece-mb pieces (8), in
                    order, to /dev/null (read by the kernel's own read-ahead path, no copy
                    to user space)
  pageio            a cold `pageio scan --kind seq` advising 64 MB ahead (--seq-read-ahead 64MB)
  pageio-no-advice  the same with --seq-read-ahead 0

then reports how long the fill took, what share of the cached pages belong to large folios
(/proc/self/pagemap and /proc/kpageflags: the compound-page bits), and the times of
--warm-scans scans of the same table with the defaults, from the page cache, one new
process each. Needs root (drop_caches, kpageflags).
"""

import argparse
import ctypes
import importlib.util
import json
import os
import random
import statistics
import struct
import subprocess
import sys
import threading
import time

PIECE = 2 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")
KPF_COMPOUND_HEAD = 1 << 15
KPF_COMPOUND_TAIL = 1 << 16
FILLS = ["read", "willneed", "sendfile", "pageio", "pageio-no-advice"]
HERE = os.path.dirname(os.path.abspath(__file__))


def _load_scan_ab():
    """bench/scan-ab.py as a module, for dropping the page cache."""
    spec = importlib.util.spec_from_file_location("scan_ab", os.path.join(HERE, "scan-ab.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


drop_caches = _load_scan_ab().drop_caches

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def resident_pages(files):
    """Pages of `files` in the page cache with their data read (mincore on a mapping; unlike
    cachestat, it does not count pages whose read is still in flight)."""
    total = 0
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        size = os.fstat(fd).st_size
        addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        os.close(fd)
        if addr in (None, ctypes.c_void_p(-1).value):
            sys.exit(f"page-cache-fill: mmap failed on {path}")
        vec = ctypes.create_string_buffer((size + PAGE - 1) // PAGE)
        libc.mincore(addr, size, vec)
        total += len(vec.raw) - vec.raw.count(0)
        libc.munmap(addr, size)
    return total


def folio_share(files):
    """(cached pages, of them in large folios) over `files`: maps each file, touches only the
    pages mincore says are cached (no I/O), and reads their flags through the PFNs."""
    total = large = 0
    try:
        pm = open("/proc/self/pagemap", "rb", buffering=0)
        kf = open("/proc/kpageflags", "rb", buffering=0)
    except OSError as e:
        sys.exit(f"page-cache-fill: cannot read page flags ({e.filename}: {e.strerror}); it "
                 "needs root and a kernel with CONFIG_PROC_PAGE_MONITOR")
    with pm, kf:
        for path in files:
            fd = os.open(path, os.O_RDONLY)
            size = os.fstat(fd).st_size
            npages = (size + PAGE - 1) // PAGE
            addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
            os.close(fd)
            if addr in (None, ctypes.c_void_p(-1).value):
                sys.exit(f"page-cache-fill: mmap failed on {path}")
            try:
                vec = ctypes.create_string_buffer(npages)
                libc.mincore(addr, size, vec)
                resident = vec.raw
                for i in range(npages):
                    if resident[i] & 1:
                        ctypes.string_at(addr + i * PAGE, 1)  # map it: cached, so no I/O
                pm.seek(addr // PAGE * 8)
                entries = struct.unpack(f"<{npages}Q", pm.read(npages * 8))
                for i, entry in enumerate(entries):
                    if not resident[i] & 1 or not entry >> 63:
                        continue
                    kf.seek((entry & ((1 << 55) - 1)) * 8)
                    (flags,) = struct.unpack("<Q", kf.read(8))
                    total += 1
                    if flags & (KPF_COMPOUND_HEAD | KPF_COMPOUND_TAIL):
                        large += 1
            finally:
                libc.munmap(addr, size)
    return total, large


def fill_read(files):
    buf = bytearray(1 << 20)
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


def fill_willneed(files):
    want = 0
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        size = os.fstat(fd).st_size
        want += (size + PAGE - 1) // PAGE
        for off in range(0, size, PIECE):
            os.posix_fadvise(fd, off, PIECE, os.POSIX_FADV_WILLNEED)
        os.close(fd)
    deadline = time.monotonic() + 120
    while resident_pages(files) < want:
        if time.monotonic() > deadline:
            sys.exit("page-cache-fill: WILLNEED did not bring the table in within 120 s")
        time.sleep(0.005)


def fill_sendfile(files, threads, piece):
    null = os.open("/dev/null", os.O_WRONLY)
    for path in files:
        size = os.path.getsize(path)
        pieces = list(range(0, size, piece))
        lock = threading.Lock()

        def helper():
            fd = os.open(path, os.O_RDONLY)
            while True:
                with lock:
                    if not pieces:
                        break
                    off = pieces.pop(0)
                end = min(size, off + piece)
                while off < end:
                    n = os.sendfile(null, fd, off, end - off)
                    if n <= 0:
                        break
                    off += n
            os.close(fd)

        workers = [threading.Thread(target=helper) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    os.close(null)


def scan(args, extra):
    cmd = ["nice", "-n", "-20", args.bin, "scan", "--dataset", "uniform", "--data-dir",
           args.data_dir, "--kind", "seq", "--json"] + extra
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"page-cache-fill: {' '.join(cmd)} failed:\n{out.stderr}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data_dir")
    ap.add_argument("--bin", default="target/release/pageio")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warm-scans", type=int, default=3)
    ap.add_argument("--fills", default=",".join(FILLS),
                    help="comma-separated, of: " + ", ".join(FILLS))
    ap.add_argument("--sendfile-threads", type=int, default=8)
    ap.add_argument("--sendfile-piece-mb", type=int, default=8)
    ap.add_argument("--json", help="write every measurement here")
    args = ap.parse_args()
    fills = args.fills.split(",")
    for f in fills:
        if f not in FILLS:
            sys.exit(f"page-cache-fill: unknown fill {f!r}; one of {', '.join(FILLS)}")
    with open(os.path.join(args.data_dir, "uniform", "manifest.json")) as f:
        node = json.load(f)["heap_relfilenode"]
    heap = os.path.join(args.data_dir, "uniform", str(node))
    files = [heap] + sorted((f"{heap}.{i}" for i in range(1, 1000)
                             if os.path.exists(f"{heap}.{i}")), key=lambda p: int(p.rsplit(".", 1)[1]))
    total_bytes = sum(os.path.getsize(p) for p in files)
    results = {f: {"fill_s": [], "cached_pages": [], "large_share": [], "warm_ms": []} for f in fills}
    for r in range(args.rounds):
        order = fills[:]
        random.shuffle(order)
        for fill in order:
            drop_caches()
            t0 = time.monotonic()
            if fill == "read":
                fill_read(files)
            elif fill == "willneed":
                fill_willneed(files)
            elif fill == "sendfile":
                fill_sendfile(files, args.sendfile_threads, args.sendfile_piece_mb << 20)
            elif fill == "pageio":
                scan(args, ["--seq-read-ahead", "64MB"])
            else:
                scan(args, ["--seq-read-ahead", "0"])
            fill_s = time.monotonic() - t0
            pages, large = folio_share(files)
            warm = [scan(args, [])["elapsed_ms"] for _ in range(args.warm_scans)]
            res = results[fill]
            res["fill_s"].append(fill_s)
            res["cached_pages"].append(pages)
            res["large_share"].append(large / pages if pages else 0.0)
            res["warm_ms"].append(warm)
            print(f"round {r + 1} {fill:17s} fill {fill_s:6.2f} s ({total_bytes / fill_s / 1e6:5.0f} MB/s)"
                  f"  {pages} pages cached, {100 * large / max(pages, 1):5.1f}% in large folios"
                  f"  warm scans {' '.join(f'{w:.0f}' for w in warm)} ms", flush=True)
    print()
    print(f"{'fill':17s} {'fill s':>7s} {'large %':>8s} " +
          " ".join(f"{'warm ' + str(i + 1) + ' ms':>10s}" for i in range(args.warm_scans)))
    for fill in fills:
        res = results[fill]
        cols = [statistics.median(w[i] for w in res["warm_ms"]) for i in range(args.warm_scans)]
        print(f"{fill:17s} {statistics.median(res['fill_s']):7.2f} "
              f"{100 * statistics.median(res['large_share']):8.1f} " +
              " ".join(f"{c:10.0f}" for c in cols))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bytes": total_bytes, "pages": total_bytes // PAGE, "results": results}, f,
                  indent=1)


if __name__ == "__main__":
    main()
