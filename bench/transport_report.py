#!/usr/bin/env python3
"""bench/transport_report.py — the Markdown table and the plot of a
bench/transport.sh run.

  transport_report.py RESULTS.json OUT.md     (also writes RESULTS.png when
                                              matplotlib is there)

Medians of the repetitions (min-max in brackets); ratios of medians:
io_uring over /dev/fuse, over the best of gocryptfs and securefs, over
bindfs, and caches on over off (--shared-storage); the daemon's CPU per
operation.
"""

import json
import statistics
import sys

ORDER = ["warpfs-uring", "warpfs-uring-base", "warpfs-dev", "warpfs-uring-shared", "warpfs-dev-shared", "warpfs-uring-specon",
         "warpfs-uring-farwake", "gocryptfs", "securefs", "bindfs"]
JOBS = ["randread-4k", "randread-4k-4j", "seqread-128k", "seqread-1m", "seqwrite-1m", "randwrite-4k",
        "storm", "untar", "ls-lR", "reread", "rm-rf", "fileserver", "webserver"]


def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def fmt(x):
    if x is None:
        return "–"
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def ratio(a, b):
    return "–" if a is None or not b else f"{a / b:.2f}"


def paired(cells, a, b, j):
    """Median over the repetitions of a's value over b's in the same one."""
    ca, cb = cells.get((a, j)), cells.get((b, j))
    if ca is None or cb is None:
        return None
    rs = [x / y for x, y in zip(ca["value"], cb["value"]) if x is not None and y]
    return statistics.median(rs) if rs else None


READS = {"randread-4k", "randread-4k-4j", "seqread-128k", "seqread-1m", "reread"}


def goals(jobs, cells, d):
    """The speed goals, each row met or unmet: warpfs on /dev/fuse >= 1.5x
    the better of gocryptfs and securefs; the ring >= 0.97x /dev/fuse
    (ratios paired per repetition); read rows >= bindfs."""
    if not any(k[0] == "warpfs-dev" for k in cells):
        return []
    mark = lambda r, goal: "–" if r is None else f"{r:.2f} {'met' if r >= goal else 'unmet'}"
    L = ["\nGoals (ratios paired per repetition, their median): /dev/fuse over the better of gocryptfs and "
         "securefs >= 1.5; io_uring over /dev/fuse >= 0.97; reads on /dev/fuse over bindfs >= 1.\n",
         "| job | dev / best peer (>= 1.5) | uring / dev (>= 0.97) | dev / bindfs, reads (>= 1) |",
         "|---|---|---|---|"]
    for j in jobs:
        best = None
        for peer in ("gocryptfs", "securefs"):
            r = paired(cells, "warpfs-dev", peer, j)
            if r is not None:
                best = r if best is None else min(best, r)
        bind = paired(cells, "warpfs-dev", "bindfs", j) if j in READS else None
        L.append(f"| {j} | {mark(best, 1.5)} | {mark(paired(cells, 'warpfs-uring', 'warpfs-dev', j), 0.97)} | "
                 f"{mark(bind, 1.0)} |")
    return L


def main():
    src, out = sys.argv[1], sys.argv[2]
    d = json.load(open(src))
    cells = {(r["peer"], r["job"]): r for r in d["results"]}
    # Known peers in their order, then any other peer of the run (never dropped).
    peers = [p for p in ORDER if any(k[0] == p for k in cells)]
    peers += sorted({k[0] for k in cells} - set(peers))
    jobs = [j for j in JOBS if any(k[1] == j for k in cells)]
    val = lambda p, j: med(cells[(p, j)]["value"]) if (p, j) in cells else None
    cpu = lambda p, j: med(cells[(p, j)]["cpu_us_per_op"]) if (p, j) in cells else None
    unit = lambda j: next(r["unit"] for (p, jj), r in cells.items() if jj == j)
    s, m = d["settings"], d["machine"]
    far = "warpfs-uring-farwake" in peers
    L = [
        "# FUSE transports and kernel caches: warpfs io_uring vs /dev/fuse vs peers\n",
        f"{d['date']} · {m['cpu_model']}, {m['cores']} cores, kernel {m['kernel']} · "
        f"CPUs {m['cpu_busy_pct_before']}% busy just before the run",
        f"git {d['git']['commit'][:12]}{' (dirty)' if d['git']['dirty'] else ''} · {s.get('backing', 'tmpfs')} backing · "
        f"fio psync iodepth 1, {s['file_mib']} MiB file, {s['runtime_s']} s per job · "
        f"{s['repetitions']} repetitions, peers interleaved, cold (unmount, drop caches, mount) before every job · "
        f"daemons on CPUs {s['pinning']['daemon_cpus']}, clients on {s['pinning']['client_cpus']}"
        + (f" · each daemon started in {s['daemon_session']}" if s.get("daemon_session") else
           " · daemons started in the benchmark's session") + "\n",
        "Median (min–max). fio jobs in MiB/s; storm, fileserver, webserver in operations/s; the tree steps "
        f"(a tree of {s['tree']['files']} files, {s['tree']['bytes'] / 1048576:.0f} MiB) in files/s. "
        "uring/dev: warpfs io_uring over warpfs /dev/fuse; /best: over the better of gocryptfs and securefs; "
        "/bindfs: over bindfs (FUSE pass-through, no crypto); caches: warpfs io_uring with its kernel caches "
        "over --shared-storage (all off)"
        + ("; local wake: warpfs io_uring over --uring-local-wake off (readers may be woken on another CPU)"
           if far else "") + ".\n",
        "| job | unit | " + " | ".join(peers) + " | uring/dev | /best | /bindfs | caches on/off |"
        + (" local wake on/off |" if far else ""),
        "|---|---|" + "---:|" * len(peers) + "---:|---:|---:|---:|" + ("---:|" if far else ""),
    ]
    for j in jobs:
        row = []
        for p in peers:
            c = cells.get((p, j))
            if c is None:
                row.append("–")
            else:
                v = c["value"]
                row.append(f"{fmt(med(v))} ({fmt(min(v))}–{fmt(max(v))})")
        u = val("warpfs-uring", j)
        best = max([x for x in (val("gocryptfs", j), val("securefs", j)) if x is not None], default=None)
        L.append(f"| {j} | {unit(j)} | " + " | ".join(row) + f" | {ratio(u, val('warpfs-dev', j))} | "
                 f"{ratio(u, best)} | {ratio(u, val('bindfs', j))} | {ratio(u, val('warpfs-uring-shared', j))} |"
                 + (f" {ratio(u, val('warpfs-uring-farwake', j))} |" if far else ""))
    L += goals(jobs, cells, d)
    L += ["\nDaemon CPU per operation (µs, median; a fio operation is one request of its block size; "
          "the tree steps count files):\n",
          "| job | " + " | ".join(peers) + " |", "|---|" + "---:|" * len(peers)]
    for j in jobs:
        L.append(f"| {j} | " + " | ".join(fmt(cpu(p, j)) for p in peers) + " |")
    L.append("\nVersions: " + "; ".join(sorted({f"{r['peer']}: {r['version']}" for r in d["results"]})) + ".")
    if d.get("notes"):
        L.append("\nFrom the daemon logs:\n\n" + "\n".join("- " + n for n in d["notes"]))
    open(out, "w").write("\n".join(L) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing (apt-get install python3-matplotlib): no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(14, 5))
    w = 0.8 / max(1, len(peers))
    for i, p in enumerate(peers):
        ys = []
        for j in jobs:
            u = val("warpfs-dev", j)
            v = val(p, j)
            ys.append(v / u if v is not None and u else 0)
        ax.bar([k + i * w for k in range(len(jobs))], ys, w, label=p)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks([k + 0.4 - w / 2 for k in range(len(jobs))], jobs, rotation=30, ha="right")
    ax.set_ylabel("relative to warpfs /dev/fuse (higher is better)")
    ax.set_title("warpfs io_uring vs /dev/fuse vs peers (median of repetitions)")
    ax.legend(fontsize=8, ncol=4)
    fig.tight_layout()
    fig.savefig(src[: -len(".json")] + ".png", dpi=110)


if __name__ == "__main__":
    main()
