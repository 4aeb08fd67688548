#!/usr/bin/env python3
"""bench/xchacha_report.py — the tables of bench/xchacha.sh.

    python3 bench/xchacha_report.py DIR/xchacha.json        (or xchacha-policy.json)

Writes the Markdown beside the JSON (same name, .md) and adds an
"evaluation" object to the JSON: each goal row with its measurement, its
limit and "met" or "unmet". MB/s are 10^6 bytes per second, medians over the
repetitions (min-max beside them). The goals are judged on paired ratios:
each repetition's result against that repetition's limit (the per-core
rate from `warpfs speed` run at the start of the repetition, the AES-NI
job of the same repetition) or peer, then the median of the ratios; on a
shared machine the load moves between repetitions, much less within one. A row's reason, when one is known, comes
from DIR/reasons.json ({"PEER JOB": "why"}), written by whoever analysed the
run.
"""

import json
import os
import statistics
import sys

SLOW = {
    "warpfs-xchacha": ("XChaCha20-Poly1305", "gcm XChaCha20-256 row of `warpfs speed`"),
    "warpfs-twofish": ("Twofish-GCM", "gcm Twofish-256 row of `warpfs speed`"),
    "warpfs-softaes": ("AES-GCM, software AES", "cpu backend, software AES masks (GHASH not counted)"),
}
SEQ_JOBS = ["seqread-128k", "seqwrite-128k"]
ORDER = [
    "warpfs-xchacha",
    "gocryptfs-xchacha",
    "warpfs-softaes",
    "warpfs-twofish",
    "warpfs",
    "warpfs-xchacha-specon",
    "warpfs-xchacha-specoff",
    "warpfs-twofish-specoff",
    "warpfs-softaes-specoff",
]
JOBS = ["seqread-128k", "seqwrite-128k", "randread-4k", "randwrite-4k", "untar"]


def per_core(speed, peer):
    """The single-core MB/s of a peer's cipher, from `warpfs speed --json`."""
    if peer == "warpfs-softaes":
        for b in speed["backends"]:
            if b["engine"] == "cpu" and b.get("cipher") == "AES" and "software" in b["name"] and b["available"]:
                return b["mb_per_s"]
        return None
    cipher = {"warpfs-xchacha": "XChaCha20", "warpfs-twofish": "Twofish"}[peer]
    for m in speed["modes"]:
        if m["mode"] == "gcm" and m["cipher"] == cipher and m["key_bits"] == 256:
            return m["mb_per_s"]
    return None


def fmt(x):
    return "–" if x is None else f"{x:.1f}"


def policy_of(cell):
    """The policy a warpfs peer ran with, from its engine counters."""
    if not cell or not cell.get("engine"):
        return "–"
    e = [x for x in cell["engine"] if x][-1]
    spec = "speculation" if e.get("speculation") else ""
    ahead = "decrypt-ahead" if (e.get("ahead_threads") or 0) > 0 and (e.get("read_ahead") or 0) > 0 else ""
    return " + ".join(x for x in (spec, ahead) if x) or "none"


def hit_rate(cell):
    if not cell or not cell.get("engine"):
        return None
    e = [x for x in cell["engine"] if x][-1]
    total = e["applies"] + e["ahead_served"] + e["ahead_inline"]
    return None if total == 0 else (e["ready_hits"] + e["ahead_served"]) / total


def main(path):
    d = json.load(open(path))
    reasons = {}
    rpath = os.path.join(os.path.dirname(path), "reasons.json")
    if os.path.exists(rpath):
        reasons = json.load(open(rpath))
    cells = {(r["peer"], r["job"]): r for r in d["results"]}
    peers = [p for p in ORDER if any(k[0] == p for k in cells)]
    jobs = [j for j in JOBS if any(k[1] == j for k in cells)]

    def med(p, j):
        c = cells.get((p, j))
        return statistics.median(c["mb_s"]) if c else None

    def spread(p, j):
        c = cells.get((p, j))
        return f"{min(c['mb_s']):.0f}–{max(c['mb_s']):.0f}" if c else "–"

    cores = d["machine"]["cores"]
    speeds = d.get("speed_per_rep") or []

    def reps(p, j):
        c = cells.get((p, j))
        return c["mb_s"] if c else []

    def pc_rep(p, i):
        s = speeds[i] if i < len(speeds) else d["speed"]
        return per_core(s, p)

    def median_ratio(xs):
        xs = [x for x in xs if x is not None]
        return statistics.median(xs) if xs else None
    ev = {"throughput_goal": [], "gocryptfs_goal": []}
    out = []
    # The policy run has no AES-NI ceiling peer.
    policy = "warpfs" not in peers
    out.append(f"# {'Policy: auto vs --speculation off' if policy else 'Ciphers without AES hardware'} ({d['date']})\n")
    out.append(f"Command: `{d['command']}` (commit {d['git']['commit'][:12]}{', dirty tree' if d['git']['dirty'] else ''}).\n")
    m = d["machine"]
    s = d["settings"]
    out.append(
        f"Machine: {m['cpu_model']}, {cores} cores, kernel {m['kernel']}, AES-NI {m['cpu_flags']['aes']}, "
        f"AVX2 {m['cpu_flags']['avx2']}; CPUs {m['cpu_busy_pct_before']}% busy before the run, load average "
        f"{m['loadavg_before']} before and {m['loadavg_after']} after (a shared machine: compare ratios within "
        f"this run only). Backing {s['backing']}; {s['repetitions']} interleaved repetitions x {s['runtime_s']} s; "
        f"fio {s['fio']} psync, iodepth 1, {s['file_mib']} MiB file; no CPU placement; "
        f"enable_uring {s['enable_uring']['before']} (after: {s['enable_uring']['after']}); untar: "
        f"{s['untar']['tree']} ({s['untar']['entries']} entries, {s['untar']['tar_bytes'] / 1e6:.0f} MB). "
        f"MB/s = 10^6 bytes/s, median of the repetitions (min–max).\n"
    )
    if not policy:
        out.append("## Goal 1: sequential I/O of the ciphers without AES hardware\n")
        out.append(
            "Limit = min((a) one core's rate of the cipher (`warpfs speed` at the start of each repetition) x "
            f"{cores} cores, (b) the same job on warpfs AES-GCM with AES-NI). % of limit: the median over the "
            "repetitions of each one's result / its own limit (paired). Met: >= 80%. (a) and (b) below are medians.\n"
        )
        out.append("| volume | job | MB/s | (a) per core x cores | (b) AES-NI gcm | % of limit (per rep) | goal | policy | reason |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for p, (label, src) in SLOW.items():
            if p not in peers:
                continue
            pc = statistics.median([x for x in (pc_rep(p, i) for i in range(len(reps(p, "seqread-128k")))) if x]
                                   or [per_core(d["speed"], p)])
            for j in SEQ_JOBS:
                v, b = med(p, j), med("warpfs", j)
                a = pc * cores if pc is not None else None
                lim = min(x for x in (a, b) if x is not None) if (a or b) else None
                fr = []
                for i, (x, y) in enumerate(zip(reps(p, j), reps("warpfs", j))):
                    ai = pc_rep(p, i)
                    li = min(ai * cores, y) if ai else y
                    fr.append(x / li if li else None)
                pct = median_ratio(fr)
                met = pct is not None and pct >= 0.8
                why = reasons.get(f"{p} {j}", "" if met else "see README.md")
                ev["throughput_goal"].append(
                    {"peer": p, "cipher": label, "job": j, "mb_s": v, "per_core_mb_s": pc, "per_core_source": src,
                     "limit_a": a, "limit_b": b, "fraction_of_limit_per_rep": fr,
                     "fraction_of_limit": pct, "met": met, "reason": why or None}
                )
                per = ", ".join("–" if x is None else f"{x * 100:.0f}" for x in fr)
                out.append(
                    f"| {label} | {j} | {fmt(v)} ({spread(p, j)}) | {fmt(a)} | {fmt(b)} | "
                    f"{'–' if pct is None else f'{pct * 100:.0f}%'} ({per}) | {'met' if met else 'unmet'} | "
                    f"{policy_of(cells.get((p, j)))} | {why} |"
                )
        if "gocryptfs-xchacha" in peers:
            out.append("\n## Goal 2: warpfs XChaCha20-Poly1305 vs gocryptfs -xchacha\n")
            out.append("Met: warpfs >= 1.5x gocryptfs on the row (median of the repetitions' paired ratios).\n")
            out.append("| job | warpfs xchacha20 | gocryptfs -xchacha | warpfs software-AES gcm | warpfs / gocryptfs (per rep) | goal | reason |")
            out.append("|---|---|---|---|---|---|---|")
            for j in jobs:
                w, g, sa = med("warpfs-xchacha", j), med("gocryptfs-xchacha", j), med("warpfs-softaes", j)
                pr = [x / y if y else None for x, y in zip(reps("warpfs-xchacha", j), reps("gocryptfs-xchacha", j))]
                r = median_ratio(pr)
                met = r is not None and r >= 1.5
                why = reasons.get(f"warpfs-xchacha {j}", "" if met else "see README.md")
                ev["gocryptfs_goal"].append({"job": j, "warpfs_mb_s": w, "gocryptfs_mb_s": g, "ratio_per_rep": pr,
                                             "ratio": r, "met": met, "reason": why or None})
                out.append(
                    f"| {j} | {fmt(w)} ({spread('warpfs-xchacha', j)}) | {fmt(g)} ({spread('gocryptfs-xchacha', j)}) | "
                    f"{fmt(sa)} ({spread('warpfs-softaes', j)}) | {'–' if r is None else f'{r:.2f}x'} "
                    f"({', '.join('–' if x is None else f'{x:.2f}' for x in pr)}) | "
                    f"{'met' if met else 'unmet'} | {why} |"
                )
    out.append("\n## Every peer and job\n")
    out.append("| peer | " + " | ".join(jobs) + " | policy (stats) |")
    out.append("|---|" + "---|" * (len(jobs) + 1))
    for p in peers:
        row = [f"{fmt(med(p, j))} ({spread(p, j)})" for j in jobs]
        pol = policy_of(next((cells[(p, j)] for j in jobs if (p, j) in cells), None))
        out.append(f"| {p} | " + " | ".join(row) + f" | {pol} |")
    if policy:
        out.append("\n## Speculation on / off (decrypt-ahead in both)\n")
        out.append("| cipher | job | on | off | on / off | auto picks | hit rate on | hit rate off |")
        out.append("|---|---|---|---|---|---|---|---|")
        for p, (label, _) in SLOW.items():
            # The auto peer is one of the two; the other is -specon or -specoff.
            on_p, off_p = (p + "-specon", p) if (p + "-specon") in peers else (p, p + "-specoff")
            auto = "off" if on_p != p else "on"
            for j in jobs:
                a, o = med(on_p, j), med(off_p, j)
                ha, ho = hit_rate(cells.get((on_p, j))), hit_rate(cells.get((off_p, j)))
                out.append(
                    f"| {label} | {j} | {fmt(a)} ({spread(on_p, j)}) | {fmt(o)} ({spread(off_p, j)}) | "
                    f"{'–' if not (a and o) else f'{a / o:.2f}'} | {auto} | "
                    f"{'–' if ha is None else f'{ha * 100:.0f}%'} | {'–' if ho is None else f'{ho * 100:.0f}%'} |"
                )
    out.append("\nPer-core rates (`warpfs speed --json`, one thread, this run): " + "; ".join(
        f"{x['mode']} {x['cipher']}-{x['key_bits']} {x['mb_per_s']:.0f}" for x in d["speed"]["modes"]
        if x["key_bits"] == 256) + "; masks: " + "; ".join(
        f"{b['cipher']} {b['name']} {b['mb_per_s']:.0f}" for b in d["speed"]["backends"]
        if b["engine"] == "cpu" and b["available"]) + ".")
    out.append("\nVersions: " + "; ".join(f"{k}: {v}" for k, v in sorted(d["versions"].items())) + ".")
    out.append("\n" + ("Panics in daemon logs:\n" + "\n".join("- " + x for x in d["panics"]) if d["panics"]
                       else "No panic in any daemon log."))
    d["evaluation"] = ev
    json.dump(d, open(path, "w"), indent=1)
    open(path[:-5] + ".md", "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
