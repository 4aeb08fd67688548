#!/usr/bin/env python3
"""bench/macro.py — filebench-like macro workloads, without filebench.

filebench is not packaged in Debian, so this reproduces the two
personalities the papers use, from their published parameters:

fileserver (filebench fileserver.f): a fileset of NFILES files (mean size
  128 KiB, gamma-distributed with shape 1.5, 20 entries per directory, 80 %
  of the files present at start); every thread loops over
    create + write whole file (1 MiB writes) + close,
    open + append (mean 16 KiB, gamma) + close,
    open + read whole file (1 MiB reads) + close,
    delete a file, stat a file.
webserver (filebench webserver.f): a fileset of NFILES files (mean 16 KiB,
  gamma 1.5, all present) and one shared log file; every thread loops over
    10 x (open + read whole file + close), then append (mean 16 KiB) to the log.

Threads are processes here (Python's GIL would otherwise serialise the
client). Thread t of T owns the files whose index is t modulo T and tracks
which of them exist, so that, as in filebench, creates pick an absent file
and reads, appends, deletes and stats an existing one (filebench threads
share the whole fileset; here they never touch the same file). The
webserver log is emptied at the start of each run and whenever a thread has
appended 256/T MiB to it. Runs for a fixed
duration and prints one JSON line:
  {"ops": N, "ops_s": ..., "mib_s": ..., "bytes": ..., "seconds": ..., "errors": N}

  macro.py create  PERSONALITY DIR --nfiles N [--seed S]
  macro.py run     PERSONALITY DIR --nfiles N --threads T --seconds S [--seed S]
"""

import argparse
import json
import multiprocessing as mp
import os
import random
import sys
import time

IOSIZE = 1 << 20
DIRWIDTH = 20
GAMMA = 1.5
PERSONALITIES = {
    # mean file size, share of files present at start
    "fileserver": (128 << 10, 0.8),
    "webserver": (16 << 10, 1.0),
}
APPEND_MEAN = 16 << 10


def gamma_size(rng, mean):
    return max(1, int(rng.gammavariate(GAMMA, mean / GAMMA)))


def file_path(root, i):
    return os.path.join(root, "d%03d" % (i // DIRWIDTH), "f%06d" % i)


def write_file(path, size, buf, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    try:
        done = 0
        while done < size:
            done += os.write(fd, buf[: min(IOSIZE, size - done)])
    finally:
        os.close(fd)
    return size


def read_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        total = 0
        while True:
            chunk = os.read(fd, IOSIZE)
            if not chunk:
                return total
            total += len(chunk)
    finally:
        os.close(fd)


def create(pers, root, nfiles, seed):
    mean, present = PERSONALITIES[pers]
    rng = random.Random(seed)
    buf = os.urandom(IOSIZE)
    for d in range((nfiles + DIRWIDTH - 1) // DIRWIDTH):
        os.makedirs(os.path.join(root, "d%03d" % d), exist_ok=True)
    for i in range(nfiles):
        if rng.random() < present:
            write_file(file_path(root, i), gamma_size(rng, mean), buf)
    if pers == "webserver":
        write_file(os.path.join(root, "log"), 0, buf)
    fd = os.open(root, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def worker(pers, root, nfiles, threads, t, seconds, seed, start, out):
    mean, _ = PERSONALITIES[pers]
    rng = random.Random(seed)
    buf = os.urandom(IOSIZE)
    mine = range(t, nfiles, threads)
    present = [i for i in mine if os.path.exists(file_path(root, i))]
    absent = [i for i in mine if not os.path.exists(file_path(root, i))]
    ops = nbytes = errors = 0
    start.wait()
    deadline = time.monotonic() + seconds

    def step(fn):
        nonlocal ops, nbytes, errors
        try:
            nbytes += fn()
            ops += 1
        except OSError:
            errors += 1

    def take(lst):
        # remove and return a random element of lst (None when empty)
        if not lst:
            return None
        k = rng.randrange(len(lst))
        lst[k], lst[-1] = lst[-1], lst[k]
        return lst.pop()

    def pick():
        return file_path(root, present[rng.randrange(len(present))])

    log = os.path.join(root, "log")
    logged = 0
    while time.monotonic() < deadline:
        if pers == "fileserver":
            i = take(absent)
            if i is not None:
                step(lambda: write_file(file_path(root, i), gamma_size(rng, mean), buf))
                present.append(i)
            if not present:
                continue
            step(lambda: write_file(pick(), gamma_size(rng, APPEND_MEAN), buf, os.O_WRONLY | os.O_APPEND))
            step(lambda: read_file(pick()))
            i = take(present)
            step(lambda: os.unlink(file_path(root, i)) or 0)
            absent.append(i)
            if present:
                step(lambda: os.stat(pick()) and 0)
        else:
            for _ in range(10):
                step(lambda: read_file(pick()))
            n = gamma_size(rng, APPEND_MEAN)
            step(lambda: write_file(log, n, buf, os.O_WRONLY | os.O_APPEND))
            logged += n
            if logged > (256 << 20) // threads:  # keep the log (and tmpfs use) bounded
                logged = 0
                step(lambda: os.truncate(log, 0) or 0)
    out.put((ops, nbytes, errors))


def run(pers, root, nfiles, threads, seconds, seed):
    if pers == "webserver":
        write_file(os.path.join(root, "log"), 0, b"")
    ctx = mp.get_context("fork")
    start = ctx.Event()
    out = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(pers, root, nfiles, threads, t, seconds, seed * 1000 + t, start, out))
             for t in range(threads)]
    for p in procs:
        p.start()
    t0 = time.monotonic()
    start.set()
    res = [out.get() for _ in procs]
    elapsed = time.monotonic() - t0
    for p in procs:
        p.join()
    ops = sum(r[0] for r in res)
    nbytes = sum(r[1] for r in res)
    print(json.dumps({"ops": ops, "ops_s": round(ops / elapsed, 1), "bytes": nbytes,
                      "mib_s": round(nbytes / elapsed / 1048576, 2), "seconds": round(elapsed, 3),
                      "errors": sum(r[2] for r in res)}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["create", "run"])
    ap.add_argument("personality", choices=sorted(PERSONALITIES))
    ap.add_argument("dir")
    ap.add_argument("--nfiles", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.action == "create":
        create(a.personality, a.dir, a.nfiles, a.seed)
    else:
        run(a.personality, a.dir, a.nfiles, a.threads, a.seconds, a.seed)


if __name__ == "__main__":
    sys.exit(main())
