#!/usr/bin/env python3
"""bench/readcost_report.py — the results of bench/readcost.sh.

  readcost_report.py --build RUNS.tsv OUT.json --meta JSON   build OUT.json, then render
  readcost_report.py --render OUT.json                       redo OUT.md

RUNS.tsv has a line per run (peer, block size, repetition, base path):
base.json is fio's output and base.tsv perf report's samples by command,
object and symbol (sample count, comm, dso, sym, tab-separated). Each
sample goes to one bucket (see bucket()); a bucket's cost per MiB is its
samples / Hz over the MiB fio read in the run. The Markdown gives, per
block size and peer, the medians over the repetitions, then warpfs's extra
cost per MiB over the passthrough, bucket by bucket.
"""

import json
import statistics
import sys

BUCKETS = ["cipher", "copies", "daemon", "daemon kernel", "client", "other", "idle"]
IDLE = ("swapper",)
COPY_WORDS = ("copy_user", "rep_movs", "copy_page", "_copy_to_iter", "_copy_from_iter", "copy_mc", "memcpy",
              "memmove", "fuse_copy", "copy_to_user", "copy_from_user")
CIPHER_WORDS = ("warpfs_crypto::", "aes", "ghash", "gcm", "clmul", "chacha", "poly1305", "twofish", "xts")
OTHER_COMMS = ("perf", "kworker", "ksoftirqd", "rcu_", "migration", "kcompactd", "khugepaged", "jbd2", "kswapd")


def bucket(comm, dso, sym):
    """The bucket of one sampled place."""
    s = sym.split("] ", 1)[-1].lower()
    if comm.startswith(IDLE):
        return "idle"
    if any(w in s for w in COPY_WORDS):
        return "copies"
    if dso != "[kernel.kallsyms]" and any(w in s for w in CIPHER_WORDS):
        return "cipher"
    if comm == "fio":
        return "client"
    if comm.startswith(OTHER_COMMS):
        return "other"
    return "daemon kernel" if dso == "[kernel.kallsyms]" else "daemon"


def one_run(base, hz):
    fio = json.load(open(base + ".json"))["jobs"][0]["read"]
    mib = fio["io_bytes"] / 1048576
    samples = {b: 0 for b in BUCKETS}
    top = {}
    with open(base + ".tsv") as f:
        for line in f:
            parts = [x.strip() for x in line.rstrip("\n").split("\t")]
            if len(parts) < 4 or not parts[0].isdigit():
                continue
            n, comm, dso, sym = int(parts[0]), parts[1], parts[2], parts[3]
            b = bucket(comm, dso, sym)
            samples[b] += n
            if b in ("cipher", "copies"):
                key = "%s: %s" % (b, sym.split("] ", 1)[-1])
                top[key] = top.get(key, 0) + n
    us = {b: samples[b] / hz * 1e6 / mib for b in BUCKETS}
    busy = sum(v for b, v in us.items() if b != "idle")
    return {"mib_s": fio["bw_bytes"] / 1048576, "mib": mib, "samples": samples, "us_per_mib": us,
            "busy_us_per_mib": busy, "wall_us_per_mib": 1e6 / (fio["bw_bytes"] / 1048576),
            "top": sorted(top.items(), key=lambda kv: -kv[1])[:8]}


def build(runs_tsv, out, meta):
    doc = json.loads(meta)
    hz = doc["settings"]["perf_hz"]
    runs = {}
    with open(runs_tsv) as f:
        for line in f:
            peer, bs, rep, base = line.rstrip("\n").split("\t")
            r = one_run(base, hz)
            r["rep"] = int(rep)
            runs.setdefault((peer, bs), []).append(r)
    doc["benchmark"] = "readcost"
    doc["buckets"] = BUCKETS
    doc["results"] = [{"peer": p, "bs": bs, "version": doc["versions"].get(p), "runs": rs}
                      for (p, bs), rs in runs.items()]
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    render(out)


def med(xs):
    return statistics.median(xs) if xs else None


def render(path):
    doc = json.load(open(path))
    m, s = doc["machine"], doc["settings"]
    out = ["# Where a sequential read's time goes, per MiB", ""]
    out.append("%s · %s, %s cores, kernel %s · CPUs %s%% busy just before · git %s%s · %s backing, %s MiB file, "
               "%s x %s s, perf cpu-clock at %s Hz on every CPU · %s" % (
                   doc["date"], m["cpu_model"], m["cores"], m["kernel"], m["cpu_busy_pct_before"],
                   doc["git"]["commit"][:12], " (dirty)" if doc["git"]["dirty"] else "", s["backing"],
                   s["file_mib"], s["repetitions"], s["runtime_s"], s["perf_hz"], s["fio"]))
    out.append("")
    out.append("Versions: " + "; ".join("%s: %s" % kv for kv in doc["versions"].items()) + ".")
    out.append("")
    out.append("Microseconds per MiB read, medians over the repetitions. Buckets: the cipher "
               "(warpfs-crypto's functions), copies (the kernel's and libc's copy routines), the rest of the "
               "daemon in user space and in the kernel, the client (fio, user and kernel), other threads "
               "(kworkers, perf), idle. busy = all but idle; wall = 1 / throughput.")
    by = {(r["peer"], r["bs"]): r for r in doc["results"]}
    bses = []
    for r in doc["results"]:
        if r["bs"] not in bses:
            bses.append(r["bs"])
    peers = []
    for r in doc["results"]:
        if r["peer"] not in peers:
            peers.append(r["peer"])
    for bs in bses:
        out += ["", "## seqread %s" % bs, ""]
        out.append("| peer | MiB/s | wall | busy | " + " | ".join(doc["buckets"]) + " |")
        out.append("|---|---:|---:|---:|" + "---:|" * len(doc["buckets"]))
        meds = {}
        for p in peers:
            r = by.get((p, bs))
            if not r:
                continue
            rs = r["runs"]
            row = {"mib_s": med([x["mib_s"] for x in rs]), "wall": med([x["wall_us_per_mib"] for x in rs]),
                   "busy": med([x["busy_us_per_mib"] for x in rs])}
            for b in doc["buckets"]:
                row[b] = med([x["us_per_mib"][b] for x in rs])
            meds[p] = row
            out.append("| %s | %.0f | %.0f | %.0f | %s |" % (
                p, row["mib_s"], row["wall"], row["busy"], " | ".join("%.0f" % row[b] for b in doc["buckets"])))
        ps = list(meds)
        if len(ps) >= 2:
            a, b = ps[0], ps[1]
            out += ["", "%s minus %s, µs per MiB: wall %+.0f, busy %+.0f; %s" % (
                a, b, meds[a]["wall"] - meds[b]["wall"], meds[a]["busy"] - meds[b]["busy"],
                ", ".join("%s %+.0f" % (k, meds[a][k] - meds[b][k]) for k in doc["buckets"]))]
            out.append("%s / %s throughput: %.2f" % (a, b, meds[a]["mib_s"] / meds[b]["mib_s"]))
        for p in ps:
            top = {}
            for x in by[(p, bs)]["runs"]:
                for k, n in x["top"]:
                    top[k] = top.get(k, 0) + n
            if top:
                best = sorted(top.items(), key=lambda kv: -kv[1])[:6]
                tot = sum(n for _, n in best)
                out += ["", "%s, largest cipher and copy symbols (share of those listed): %s" % (
                    p, "; ".join("%s %.0f%%" % (k, 100 * n / tot) for k, n in best))]
    md = path[:-5] + ".md" if path.endswith(".json") else path + ".md"
    with open(md, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s" % md)


def main(argv):
    if len(argv) >= 3 and argv[0] == "--build":
        meta = argv[argv.index("--meta") + 1] if "--meta" in argv else "{}"
        build(argv[1], argv[2], meta)
    elif len(argv) == 2 and argv[0] == "--render":
        render(argv[1])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
