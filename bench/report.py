#!/usr/bin/env python3
"""bench/report.py — results of bench/run.sh: JSON, Markdown table, PNG plots.

  report.py --build RAWDIR OUT.json   build OUT.json from run.sh's raw TSVs, then render
  report.py OUT.json                  render OUT.md and OUT-*.png again from OUT.json
  report.py --readme OUT.json         print the README's results table from OUT.json

The Markdown has, per suite and backing: medians with min–max of the
repetitions; ratios of medians to gocryptfs and to EncFS; CPU (daemon, client,
total CPU-seconds and the papers' efficiency: MiB moved per daemon CPU-second);
and, when warpfs ran, a goals table with ratios paired per repetition (their
median), each met or unmet: warpfs on /dev/fuse (the warpfs-dev peer, else
warpfs) over the best crypto peer of that repetition >= 1.5, warpfs-uring
over it >= 0.97, and on read rows over bindfs >= 1.
Plots (needs matplotlib; Debian: python3-matplotlib) follow the papers'
figures: bars per request size, one per peer, and warpfs's percentage gain
over EncFS on a second axis; macro: bars per thread count, and the canonical
benchmark's step times. The plain backing dir is left out of the plots (it
would flatten every other bar) and kept in the tables.
"""

import json
import os
import statistics
import sys

ORDER = ["plain", "bindfs", "warpfs-nocrypto", "warpfs", "warpfs-dev", "warpfs-uring", "warpfs-specon", "gocryptfs",
         "encfs", "cryfs", "securefs"]
REFS = ["gocryptfs", "encfs"]
# The goals table: warpfs on /dev/fuse against the best of these, the ring
# against /dev/fuse, and reads against the passthrough.
CRYPTO_PEERS = ["gocryptfs", "securefs", "cryfs", "encfs"]
GOAL_LEAD, GOAL_RING, GOAL_PASS = 1.5, 0.97, 1.0
SIZES = ["4k", "64k", "128k", "1m"]
FIELDS = ["suite", "peer", "backing", "workload", "bs", "jobs", "rep", "value", "unit", "bytes",
          "wall_s", "daemon_cpu_s", "client_cpu_s"]


NUMERIC = {"cores", "memory_gib", "cpu_busy_pct_before", "repetitions", "file_mib", "runtime_cap_s",
           "macro_seconds", "fileserver_nfiles", "webserver_nfiles", "dd_mib", "elapsed_s"}


def num(v):
    """v as an int or float when it is one, else the string."""
    for f in (int, float):
        try:
            return f(v)
        except ValueError:
            pass
    return v


def build(raw, out):
    meta = {}
    with open(os.path.join(raw, "meta.tsv")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("\t")
            meta[k] = num(v) if k in NUMERIC else v
    versions = {k[8:]: v for k, v in meta.items() if k.startswith("version.")}
    rows = []
    with open(os.path.join(raw, "results.tsv")) as f:
        for line in f:
            r = dict(zip(FIELDS, line.rstrip("\n").split("\t")))
            for k in ("value", "wall_s", "daemon_cpu_s", "client_cpu_s"):
                r[k] = float(r[k])
            for k in ("jobs", "rep", "bytes"):
                r[k] = int(r[k])
            rows.append(r)
    skips = []
    with open(os.path.join(raw, "skips.tsv")) as f:
        for line in f:
            p, what, why = line.rstrip("\n").split("\t", 2)
            skips.append({"peer": p, "where": what, "reason": why})
    groups = {}
    for r in rows:
        key = (r["suite"], r["peer"], r["backing"], r["workload"])
        g = groups.setdefault(key, {
            "suite": r["suite"], "peer": r["peer"], "version": versions.get(r["peer"], "?"),
            "backing": r["backing"], "workload": r["workload"], "bs": r["bs"], "jobs": r["jobs"],
            "unit": r["unit"], "repetitions": []})
        g["repetitions"].append({k: r[k] for k in ("rep", "value", "bytes", "wall_s", "daemon_cpu_s",
                                                   "client_cpu_s")})
    settings_keys = ["mode", "repetitions", "file_mib", "runtime_cap_s", "macro_seconds", "fileserver_nfiles",
                     "webserver_nfiles", "dd_mib", "tree", "pinning", "daemon_session", "fio", "elapsed_s"]
    doc = {
        "benchmark": "warpfs bench/run.sh",
        "date": meta.get("date"),
        "machine": {k: meta.get(k) for k in ("cpu_model", "cores", "memory_gib", "kernel", "os", "cpu_flags",
                                             "cpu_busy_pct_before", "disk")},
        "git": {"commit": meta.get("git_commit"), "dirty": meta.get("git_dirty") == "true"},
        "settings": {k: meta.get(k) for k in settings_keys},
        "versions": versions,
        "skipped": skips,
        "results": list(groups.values()),
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x):
    if x is None:
        return "–"
    if abs(x) >= 100:
        return "%.0f" % x
    if abs(x) >= 10:
        return "%.1f" % x
    return "%.2f" % x


def peers_of(results):
    seen = {r["peer"] for r in results}
    return [p for p in ORDER if p in seen] + sorted(seen - set(ORDER))


def wl_key(w):
    # order: family, then size, then jobs / threads
    base, _, rest = w.partition("-")
    fam = ["seqwrite", "randwrite", "seqread", "randread", "fileserver", "webserver", "dd", "untar", "md5sum",
           "ls", "rm"].index(base) if base in ("seqwrite", "randwrite", "seqread", "randread", "fileserver",
                                                "webserver", "dd", "untar", "md5sum", "ls", "rm") else 99
    parts = rest.split("-")
    if base == "dd":
        return (fam, "", 0 if rest == "write" else 1, w)
    size = SIZES.index(parts[0]) if parts and parts[0] in SIZES else 0
    return (fam, parts[-1] if parts else "", size, w)


def render(path):
    doc = json.load(open(path))
    res = doc["results"]
    peers = peers_of(res)
    cell = {(r["suite"], r["backing"], r["workload"], r["peer"]): r for r in res}
    m, s = doc["machine"], doc["settings"]
    out = ["# warpfs benchmark suite — %s mode" % s.get("mode"), ""]
    out.append("%s · %s, %s cores, %s GiB, kernel %s, %s · %s" % (
        doc["date"], m["cpu_model"], m["cores"], m["memory_gib"], m["kernel"], m["os"], m["cpu_flags"]))
    out.append("git %s%s · CPUs %s%% busy just before the run · pinning: %s%s · disk backing: %s" % (
        (doc["git"]["commit"] or "?")[:12], " (dirty)" if doc["git"]["dirty"] else "", m["cpu_busy_pct_before"],
        s["pinning"], " · daemons in %s" % s["daemon_session"] if s.get("daemon_session") else "", m["disk"]))
    out.append("%s repetitions · micro: fio psync, iodepth 1, direct=0, %s MiB per job (capped at %s s), caches "
               "dropped before every job, remount between write and read phases · macro: %s s per run, "
               "fileserver %s files, webserver %s files, dd %s MiB, tree: %s · whole run %s s" % (
                   s["repetitions"], s["file_mib"], s["runtime_cap_s"], s["macro_seconds"],
                   s["fileserver_nfiles"], s["webserver_nfiles"], s["dd_mib"], s.get("tree") or "–",
                   s["elapsed_s"]))
    out.append("")
    out.append("Versions: " + "; ".join("%s: %s" % (p, doc["versions"][p]) for p in peers_of(
        [{"peer": p} for p in doc["versions"]])) + ".")
    if doc["skipped"]:
        out.append("")
        out.append("Skipped or failed:")
        for k in doc["skipped"]:
            out.append("- %s (%s): %s" % (k["peer"], k["where"], k["reason"]))
    for suite in ("micro", "macro"):
        for backing in ("memory", "disk"):
            wls = sorted({r["workload"] for r in res if r["suite"] == suite and r["backing"] == backing},
                         key=wl_key)
            if not wls:
                continue
            ps = [p for p in peers if any((suite, backing, w, p) in cell for w in wls)]
            out += ["", "## %s, %s backing" % (suite, backing), ""]
            out.append("Median (min–max) of the repetitions; MiB/s and ops/s: higher is better, s: lower is "
                       "better.")
            out.append("")
            out.append("| workload | unit | " + " | ".join(ps) + " |")
            out.append("|---|---|" + "---:|" * len(ps))
            for w in wls:
                unit = next(cell[(suite, backing, w, p)]["unit"] for p in ps if (suite, backing, w, p) in cell)
                cs = []
                for p in ps:
                    r = cell.get((suite, backing, w, p))
                    if not r:
                        cs.append("–")
                        continue
                    v = [x["value"] for x in r["repetitions"]]
                    cs.append("%s (%s–%s)" % (fmt(med(v)), fmt(min(v)), fmt(max(v))))
                out.append("| %s | %s | %s |" % (w, unit, " | ".join(cs)))
            refs = [q for q in REFS if q in ps]
            if refs:
                out += ["", "Ratio of medians to %s (for s, a ratio below 1 is better):" % " and ".join(refs), ""]
                out.append("| workload | " + " | ".join("%s ÷ %s" % (p, q) for q in refs for p in ps if p != q) + " |")
                out.append("|---|" + "---:|" * sum(1 for q in refs for p in ps if p != q))
                for w in wls:
                    cs = []
                    for q in refs:
                        rq = cell.get((suite, backing, w, q))
                        for p in ps:
                            if p == q:
                                continue
                            rp = cell.get((suite, backing, w, p))
                            if rp and rq:
                                a = med([x["value"] for x in rp["repetitions"]])
                                b = med([x["value"] for x in rq["repetitions"]])
                                cs.append("%.2f" % (a / b) if b else "–")
                            else:
                                cs.append("–")
                    out.append("| %s | %s |" % (w, " | ".join(cs)))
            out += goals(cell, suite, backing, wls, ps)
            out += ["", "CPU, medians: efficiency (MiB per daemon CPU-second) · daemon / client / total CPU-s:", ""]
            out.append("| workload | " + " | ".join(ps) + " |")
            out.append("|---|" + "---:|" * len(ps))
            for w in wls:
                cs = []
                for p in ps:
                    r = cell.get((suite, backing, w, p))
                    if not r:
                        cs.append("–")
                        continue
                    reps = r["repetitions"]
                    d = med([x["daemon_cpu_s"] for x in reps])
                    c = med([x["client_cpu_s"] for x in reps])
                    t = med([x["daemon_cpu_s"] + x["client_cpu_s"] for x in reps])
                    effs = [x["bytes"] / 1048576 / x["daemon_cpu_s"] for x in reps
                            if x["daemon_cpu_s"] > 0 and x["bytes"] > 0]
                    e = fmt(med(effs)) if effs else "–"
                    cs.append("%s · %s / %s / %s" % (e, fmt(d), fmt(c), fmt(t)))
                out.append("| %s | %s |" % (w, " | ".join(cs)))
    base = path[:-5] if path.endswith(".json") else path
    plots = plot(doc, base)
    if plots:
        out += ["", "## Plots", ""]
        out += ["![%s](%s)" % (os.path.basename(p), os.path.basename(p)) for p in plots]
    with open(base + ".md", "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s.md%s" % (base, "".join(", " + os.path.basename(p) for p in plots)))


def paired(cell, key, num, dens, lower_better):
    """Median over repetitions of num's value over the best of dens's values
    in the same repetition (for s, lower is better: the ratio is inverted so
    that above 1 is always better for num); None without a common one."""
    a = cell.get(key + (num,))
    if not a:
        return None
    ratios = []
    for x in a["repetitions"]:
        vs = [y["value"] for d in dens if cell.get(key + (d,))
              for y in cell[key + (d,)]["repetitions"] if y["rep"] == x["rep"]]
        if not vs or x["value"] <= 0:
            continue
        if lower_better:
            ratios.append(min(vs) / x["value"])
        else:
            ratios.append(x["value"] / max(vs))
    return med(ratios)


def goals(cell, suite, backing, wls, ps):
    """The goals table of one suite and backing (empty when warpfs did not run)."""
    dev = "warpfs-dev" if "warpfs-dev" in ps else ("warpfs" if "warpfs" in ps else None)
    if not dev:
        return []
    crypto = [q for q in CRYPTO_PEERS if q in ps]
    ring = "warpfs-uring" if "warpfs-uring" in ps and dev != "warpfs-uring" else None
    # (title, numerator peer, denominator peers, goal, read rows only)
    cols = []
    if crypto:
        cols.append(("%s / best of %s (>= %s)" % (dev, ", ".join(crypto), GOAL_LEAD), dev, crypto, GOAL_LEAD, False))
    if ring:
        cols.append(("%s / %s (>= %s)" % (ring, dev, GOAL_RING), ring, [dev], GOAL_RING, False))
    if "bindfs" in ps:
        cols.append(("%s / bindfs, reads (>= %s)" % (dev, GOAL_PASS), dev, ["bindfs"], GOAL_PASS, True))
    if not cols:
        return []
    out = ["", "Goals (ratios paired per repetition, their median; above 1 is better for the first peer "
           "named, also for s):", ""]
    out.append("| workload | " + " | ".join(c[0] for c in cols) + " |")
    out.append("|---|" + "---|" * len(cols))
    met = [[0, 0] for _ in cols]
    for w in wls:
        key = (suite, backing, w)
        unit = next((cell[key + (p,)]["unit"] for p in ps if key + (p,) in cell), "")
        is_read = w.startswith("seqread") or w.startswith("randread") or w == "dd-read"
        cs = []
        for i, (_, num, dens, goal, reads_only) in enumerate(cols):
            if reads_only and not is_read:
                cs.append("–")
                continue
            r = paired(cell, key, num, dens, unit == "s")
            if r is None:
                cs.append("–")
                continue
            ok = r >= goal
            met[i][0] += ok
            met[i][1] += 1
            shown = "%.2f" % r
            if not ok and float(shown) >= goal:
                shown = "%.3f" % r
            cs.append("%s %s" % (shown, "met" if ok else "unmet"))
        out.append("| %s | %s |" % (w, " | ".join(cs)))
    out.append("| met | " + " | ".join("%d of %d" % tuple(m) for m in met) + " |")
    return out


def plot(doc, base):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing (apt-get install python3-matplotlib): no plots", file=sys.stderr)
        return []
    res = doc["results"]
    # plain (no FUSE) is one to two orders of magnitude above every FUSE file
    # system and would flatten the bars: it stays in the tables only.
    peers = [p for p in peers_of(res) if p != "plain"]
    cell = {(r["suite"], r["backing"], r["workload"], r["peer"]): r for r in res}
    written = []

    def medv(key):
        r = cell.get(key)
        return med([x["value"] for x in r["repetitions"]]) if r else None

    def bars(ax, groups, keyf, ylabel, title):
        # groups: x labels; keyf(group, peer) -> cell key. Bars per peer; warpfs's
        # gain over encfs (percent) as points on a second axis.
        ps = [p for p in peers if any(keyf(g, p) in cell for g in groups)]
        width = 0.8 / max(1, len(ps))
        for k, p in enumerate(ps):
            ys = [medv(keyf(g, p)) or 0 for g in groups]
            ax.bar([i + (k - (len(ps) - 1) / 2) * width for i in range(len(groups))], ys, width, label=p)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(groups)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        if "encfs" in ps and "warpfs" in ps:
            gains = []
            for g in groups:
                a, b = medv(keyf(g, "warpfs")), medv(keyf(g, "encfs"))
                gains.append((a / b - 1) * 100 if a and b else float("nan"))
            ax2 = ax.twinx()
            ax2.plot(range(len(groups)), gains, "kD--", label="warpfs gain over EncFS")
            ax2.set_ylabel("warpfs gain over EncFS (%)")
            ax2.axhline(0, color="grey", lw=0.5)
            return ax2
        return None

    for backing in ("memory", "disk"):
        fams = []
        for fam in ("seqwrite", "randwrite", "seqread", "randread"):
            for j in (1, 4):
                if any(r["suite"] == "micro" and r["backing"] == backing and r["workload"].startswith(fam + "-")
                       and r["jobs"] == j for r in res):
                    fams.append((fam, j))
        if not fams:
            continue
        ncol = 2
        nrow = (len(fams) + 1) // ncol
        fig, axes = plt.subplots(nrow, ncol, figsize=(12, 3.6 * nrow), squeeze=False)
        for ax, (fam, j) in zip(axes.flat, fams):
            sizes = [z for z in SIZES if any(("micro", backing, "%s-%s-j%d" % (fam, z, j), p) in cell
                                              for p in peers)]
            ax2 = bars(ax, sizes, lambda g, p: ("micro", backing, "%s-%s-j%d" % (fam, g, j), p), "MiB/s",
                       "%s, %d job%s, %s backing" % (fam, j, "s" if j > 1 else "", backing))
            ax.set_xlabel("request size")
            if ax is axes.flat[0]:
                h, lab = ax.get_legend_handles_labels()
                if ax2:
                    h2, l2 = ax2.get_legend_handles_labels()
                    h, lab = h + h2, lab + l2
                ax.legend(h, lab, fontsize=7, loc="upper left")
        for ax in list(axes.flat)[len(fams):]:
            ax.axis("off")
        fig.suptitle("micro (fio), %s backing — medians of %s repetitions (plain, no FUSE: see the tables)" % (
            backing, doc["settings"]["repetitions"]))
        fig.tight_layout()
        p = "%s-micro-%s.png" % (base, backing)
        fig.savefig(p, dpi=90)
        plt.close(fig)
        written.append(p)
    for backing in ("memory", "disk"):
        mres = [r for r in res if r["suite"] == "macro" and r["backing"] == backing]
        if not mres:
            continue
        fig, axes = plt.subplots(1, 3, figsize=(15, 3.8), squeeze=False)
        for ax, pers in zip(axes.flat[:2], ("fileserver", "webserver")):
            ths = sorted({r["jobs"] for r in mres if r["workload"].startswith(pers + "-")})
            bars(ax, ["%d" % t for t in ths], lambda g, p: ("macro", backing, "%s-t%s" % (pers, g), p), "ops/s",
                 "%s (filebench-like), %s backing" % (pers, backing))
            ax.set_xlabel("threads")
        steps = [w for w in ("untar", "md5sum", "ls-lR", "rm-rf") if any(r["workload"] == w for r in mres)]
        ax = axes.flat[2]
        if steps:
            ps = [p for p in peers if any(("macro", backing, w, p) in cell for w in steps)]
            width = 0.8 / max(1, len(ps))
            for k, p in enumerate(ps):
                ax.bar([i + (k - (len(ps) - 1) / 2) * width for i in range(len(steps))],
                       [medv(("macro", backing, w, p)) or 0 for w in steps], width, label=p)
            ax.set_xticks(range(len(steps)))
            ax.set_xticklabels(steps)
            ax.set_ylabel("seconds (lower is better)")
            ax.set_title("gocryptfs canonical benchmark, %s" % backing, fontsize=9)
            ax.legend(fontsize=7)
        else:
            ax.axis("off")
        axes.flat[0].legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        p = "%s-macro-%s.png" % (base, backing)
        fig.savefig(p, dpi=90)
        plt.close(fig)
        written.append(p)
    return written


# The README's rows: (suite, backing, workload, label).
README_ROWS = [
    ("micro", "memory", "seqwrite-4k-j1", "sequential write 4 KiB"),
    ("micro", "memory", "seqwrite-1m-j1", "sequential write 1 MiB"),
    ("micro", "memory", "randwrite-4k-j1", "random write 4 KiB"),
    ("micro", "memory", "seqread-128k-j1", "sequential read 128 KiB"),
    ("micro", "memory", "seqread-1m-j1", "sequential read 1 MiB"),
    ("micro", "memory", "randread-4k-j1", "random read 4 KiB"),
    ("micro", "memory", "randread-4k-j4", "random read 4 KiB, 4 jobs"),
    ("micro", "disk", "seqwrite-1m-j1", "sequential write 1 MiB, ext4"),
    ("micro", "disk", "seqread-1m-j1", "sequential read 1 MiB, ext4"),
    ("micro", "disk", "randread-4k-j1", "random read 4 KiB, ext4"),
    ("macro", "memory", "fileserver-t1", "fileserver, 1 thread"),
    ("macro", "memory", "webserver-t1", "webserver, 1 thread"),
    ("macro", "memory", "untar", "untar of a source tree"),
    ("macro", "memory", "ls-lR", "`ls -lR` of it"),
    ("macro", "memory", "rm-rf", "`rm -rf` of it"),
]
README_PEERS = ["warpfs-dev", "warpfs-uring", "gocryptfs", "securefs", "cryfs", "encfs", "bindfs"]


def readme(path):
    """The README's table: medians of the rows above, and the goals."""
    doc = json.load(open(path))
    cell = {(r["suite"], r["backing"], r["workload"], r["peer"]): r for r in doc["results"]}
    ps = [p for p in README_PEERS if any(k[3] == p for k in cell)]
    names = {"warpfs-dev": "warpfs /dev/fuse", "warpfs-uring": "warpfs io_uring"}
    crypto = [q for q in CRYPTO_PEERS if q in ps]
    out = ["| workload | unit | " + " | ".join(names.get(p, p) for p in ps) + " | /dev/fuse ÷ best peer | "
           "io_uring ÷ /dev/fuse |", "|---|---|" + "---:|" * (len(ps) + 2)]
    for suite, backing, w, label in README_ROWS:
        key = (suite, backing, w)
        rs = [cell.get(key + (p,)) for p in ps]
        if not any(rs):
            continue
        unit = next(r["unit"] for r in rs if r)
        vals = [fmt(med([x["value"] for x in r["repetitions"]])) if r else "–" for r in rs]
        lead = paired(cell, key, "warpfs-dev", crypto, unit == "s")
        ring = paired(cell, key, "warpfs-uring", ["warpfs-dev"], unit == "s")
        out.append("| %s | %s | %s | %s | %s |" % (
            label, unit, " | ".join(vals), "%.2f" % lead if lead is not None else "–",
            "%.2f" % ring if ring is not None else "–"))
    print("\n".join(out))


def main(argv):
    if len(argv) == 3 and argv[1] == "--readme":
        readme(argv[2])
        return 0
    if len(argv) == 4 and argv[1] == "--build":
        build(argv[2], argv[3])
        render(argv[3])
    elif len(argv) == 2 and argv[1].endswith(".json"):
        render(argv[1])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
