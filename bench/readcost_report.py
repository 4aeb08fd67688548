#!/usr/bin/env python3
"""bench/readcost_report.py — the results of bench/readcost.sh.

  readcost_report.py --build RUNS.tsv OUT.json --meta JSON   build OUT.json, then render
  readcost_report.py --render OUT.json                       redo OUT.md

RUNS.tsv has a line per run (peer, job, block size, repetition, base
path): base.json is fio's output (or bench/macro.py's last line for the
fileserver mix) and base.tsv perf report's samples by command, object and
symbol (sample count, comm, dso, sym, tab-separated). Each sample goes to
one bucket (see bucket()); a bucket's cost per unit is its samples / Hz
over the units of the run: MiB fio read, or operations of the mix. The
Markdown gives, per job and block size and peer, the medians over the
repetitions, then the first peer's extra cost per unit over the second's,
bucket by bucket.
"""

import json
import statistics
import sys

BUCKETS = ["cipher", "copies", "daemon", "daemon kernel", "client", "other", "idle"]
IDLE = ("swapper",)
COPY_WORDS = ("copy_user", "rep_movs", "copy_page", "_copy_to_iter", "_copy_from_iter", "copy_mc", "memcpy",
              "memmove", "fuse_copy", "copy_to_user", "copy_from_user")
CIPHER_WORDS = ("warpfs_crypto::", "aes", "ghash", "gcm", "clmul", "chacha", "poly1305", "twofish", "xts")
CLIENT_COMMS = ("fio", "python3")
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
    if comm in CLIENT_COMMS:
        return "client"
    if comm.startswith(OTHER_COMMS):
        return "other"
    return "daemon kernel" if dso == "[kernel.kallsyms]" else "daemon"


def one_run(base, hz):
    """One run's costs per unit: per MiB for fio, per operation for the mix."""
    doc = json.load(open(base + ".json"))
    if "jobs" in doc:
        fio = doc["jobs"][0]["read"]
        units, rate, unit = fio["io_bytes"] / 1048576, fio["bw_bytes"] / 1048576, "MiB"
    else:
        units, rate, unit = doc["ops"], doc["ops_s"], "op"
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
    us = {b: samples[b] / hz * 1e6 / units for b in BUCKETS}
    busy = sum(v for b, v in us.items() if b != "idle")
    return {"unit": unit, "rate": rate, "units": units, "samples": samples, "us_per_unit": us,
            "busy_us_per_unit": busy, "wall_us_per_unit": 1e6 / rate,
            "top": sorted(top.items(), key=lambda kv: -kv[1])[:8]}


def build(runs_tsv, out, meta):
    doc = json.loads(meta)
    hz = doc["settings"]["perf_hz"]
    runs = {}
    with open(runs_tsv) as f:
        for line in f:
            peer, job, bs, rep, base = line.rstrip("\n").split("\t")
            r = one_run(base, hz)
            r["rep"] = int(rep)
            runs.setdefault((peer, job, bs), []).append(r)
    doc["benchmark"] = "readcost"
    doc["buckets"] = BUCKETS
    doc["results"] = [{"peer": p, "job": job, "bs": bs, "version": doc["versions"].get(p), "runs": rs}
                      for (p, job, bs), rs in runs.items()]
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    render(out)


def med(xs):
    return statistics.median(xs) if xs else None


def upgrade(r):
    """A result of the first version of the tool (seqread only, per MiB)."""
    r.setdefault("job", "seqread")
    for x in r["runs"]:
        if "us_per_mib" in x:
            x.update(unit="MiB", rate=x.pop("mib_s"), units=x.pop("mib"), us_per_unit=x.pop("us_per_mib"),
                     busy_us_per_unit=x.pop("busy_us_per_mib"), wall_us_per_unit=x.pop("wall_us_per_mib"))
    return r


def render(path):
    doc = json.load(open(path))
    m, s = doc["machine"], doc["settings"]
    out = ["# Where a read's or a file server operation's time goes", ""]
    out.append("%s · %s, %s cores, kernel %s · CPUs %s%% busy just before · git %s%s · %s backing, %s MiB file, "
               "%s x %s s, perf cpu-clock at %s Hz on every CPU · %s" % (
                   doc["date"], m["cpu_model"], m["cores"], m["kernel"], m["cpu_busy_pct_before"],
                   doc["git"]["commit"][:12], " (dirty)" if doc["git"]["dirty"] else "", s["backing"],
                   s["file_mib"], s["repetitions"], s["runtime_s"], s["perf_hz"], s["fio"]))
    out.append("")
    out.append("Versions: " + "; ".join("%s: %s" % kv for kv in doc["versions"].items()) + ".")
    out.append("")
    out.append("Microseconds of CPU per unit (a MiB read by fio, or one operation of the fileserver mix), "
               "medians over the repetitions. Buckets: the cipher (warpfs-crypto's functions), copies (the "
               "kernel's and libc's copy routines), the rest of the daemon in user space and in the kernel, the "
               "client (fio or Python, user and kernel), other threads (kworkers, perf), idle. busy = all but "
               "idle; wall = 1 / throughput.")
    res = [upgrade(r) for r in doc["results"]]
    by = {(r["peer"], r["job"], r["bs"]): r for r in res}
    cases, peers = [], []
    for r in res:
        if (r["job"], r["bs"]) not in cases:
            cases.append((r["job"], r["bs"]))
        if r["peer"] not in peers:
            peers.append(r["peer"])
    for job, bs in cases:
        unit = next(by[(p, job, bs)]["runs"][0]["unit"] for p in peers if (p, job, bs) in by)
        rate = "MiB/s" if unit == "MiB" else "ops/s"
        out += ["", "## %s%s (µs per %s)" % (job, "" if bs == "-" else " " + bs, unit), ""]
        out.append("| peer | %s | wall | busy | " % rate + " | ".join(doc["buckets"]) + " |")
        out.append("|---|---:|---:|---:|" + "---:|" * len(doc["buckets"]))
        meds = {}
        for p in peers:
            r = by.get((p, job, bs))
            if not r:
                continue
            rs = r["runs"]
            row = {"rate": med([x["rate"] for x in rs]), "wall": med([x["wall_us_per_unit"] for x in rs]),
                   "busy": med([x["busy_us_per_unit"] for x in rs])}
            for b in doc["buckets"]:
                row[b] = med([x["us_per_unit"][b] for x in rs])
            meds[p] = row
            out.append("| %s | %.0f | %.0f | %.0f | %s |" % (
                p, row["rate"], row["wall"], row["busy"], " | ".join("%.0f" % row[b] for b in doc["buckets"])))
        ps = list(meds)
        if len(ps) >= 2:
            a, b = ps[0], ps[1]
            out += ["", "%s minus %s, µs per %s: wall %+.0f, busy %+.0f; %s" % (
                a, b, unit, meds[a]["wall"] - meds[b]["wall"], meds[a]["busy"] - meds[b]["busy"],
                ", ".join("%s %+.0f" % (k, meds[a][k] - meds[b][k]) for k in doc["buckets"]))]
            out.append("%s / %s throughput: %.2f" % (a, b, meds[a]["rate"] / meds[b]["rate"]))
        for p in ps:
            top = {}
            for x in by[(p, job, bs)]["runs"]:
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
