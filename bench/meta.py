#!/usr/bin/env python3
"""bench/meta.py — metadata and small-file workloads of bench/transport.sh.

  meta.py tree   DIR --files N [--seed S]   make a source-like tree under DIR
                                            (40 files per directory, sizes
                                            gamma-distributed, shape 1.5,
                                            mean 8 KiB); prints its size
  meta.py storm  DIR --files N              create (and close) N empty files,
                                            stat each, unlink each
  meta.py reread DIR [--passes P]           read every file under DIR P times
                                            (default 2); only the last pass
                                            is timed: re-reading unchanged
                                            files

Each timed command prints one JSON line:
  {"ops": N, "seconds": S, "ops_s": N/S, "bytes": B}
"""

import argparse
import json
import os
import random
import sys
import time


def tree(args):
    rng = random.Random(args.seed)
    total = 0
    for i in range(args.files):
        d = os.path.join(args.dir, "d%03d" % (i // 40), "s%02d" % (i % 40 // 10))
        os.makedirs(d, exist_ok=True)
        n = max(1, int(rng.gammavariate(1.5, 8192 / 1.5)))
        with open(os.path.join(d, "f%05d.c" % i), "wb") as f:
            f.write(rng.randbytes(n))
        total += n
    print(json.dumps({"files": args.files, "bytes": total}))


def storm(args):
    names = [os.path.join(args.dir, "s%06d" % i) for i in range(args.files)]
    t0 = time.perf_counter()
    for p in names:
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    for p in names:
        os.stat(p)
    for p in names:
        os.unlink(p)
    s = time.perf_counter() - t0
    ops = 3 * args.files
    print(json.dumps({"ops": ops, "seconds": s, "ops_s": ops / s, "bytes": 0}))


def files_under(d):
    out = []
    for root, _dirs, files in os.walk(d):
        out.extend(os.path.join(root, f) for f in files)
    out.sort()
    return out


def reread(args):
    paths = files_under(args.dir)
    buf = bytearray(1 << 20)
    for p in range(args.passes):
        t0 = time.perf_counter()
        total = 0
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            try:
                while True:
                    n = os.readv(fd, [buf])
                    if n == 0:
                        break
                    total += n
            finally:
                os.close(fd)
        s = time.perf_counter() - t0
    print(json.dumps({"ops": len(paths), "seconds": s, "ops_s": len(paths) / s, "bytes": total}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tree")
    t.add_argument("dir")
    t.add_argument("--files", type=int, required=True)
    t.add_argument("--seed", type=int, default=1)
    s = sub.add_parser("storm")
    s.add_argument("dir")
    s.add_argument("--files", type=int, required=True)
    r = sub.add_parser("reread")
    r.add_argument("dir")
    r.add_argument("--passes", type=int, default=2)
    args = ap.parse_args()
    {"tree": tree, "storm": storm, "reread": reread}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
