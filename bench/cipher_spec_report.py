#!/usr/bin/env python3
"""One table from several bench/spec-fio.sh results (bench/cipher-spec.sh).

usage: cipher_spec_report.py cipher-spec|xts-split PREFIX RESULT.json...
"""
import json
import statistics
import sys


# Full speed, then capped below what the workers make (fio --rate): the
# hit rate when there is CPU to spare.
JOBS = ("seqread-128k", "seqwrite-128k", "seqread-128k@80m", "seqwrite-128k@80m")


def med(v):
    return statistics.median(v) if v else None


def main():
    kind, prefix, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    runs = [json.load(open(f)) for f in files]
    rows = []
    for r in runs:
        s = r["settings"]
        volume = s["mode"] + (" (software AES)" if s.get("software_aes") else "")
        by = {}
        for x in r["results"]:
            by[(x["peer"], x["job"])] = x
        for job in JOBS:
            row = {"volume": volume, "job": job, "date": r["date"],
                   "cpu_busy_pct_before": r["machine"]["cpu_busy_pct_before"]}
            for (peer, j), x in by.items():
                if j != job:
                    continue
                row[peer] = med(x["mib_s"])
                eng = x.get("engine") or []
                hits = [e["hit_rate"] for e in eng if e.get("hit_rate") is not None]
                row[peer + "_hit"] = med(hits)
                row[peer + "_all"] = x["mib_s"]
                for k in ("split_requests", "split_parts_workers", "split_parts_caller"):
                    vals = [e.get(k, 0) for e in eng]
                    if any(vals):
                        row[peer + "_" + k] = med(vals)
            if any(k.startswith("warpfs-") for k in row):
                rows.append(row)
    out = {"benchmark": kind, "runs": [{"file": f, "date": r["date"], "git": r["git"], "machine": r["machine"],
                                        "settings": r["settings"]} for f, r in zip(files, runs)], "rows": rows}
    json.dump(out, open(prefix + ".json", "w"), indent=1)
    m = runs[0]["machine"]
    s = runs[0]["settings"]
    md = []
    f1 = lambda v: "–" if v is None else f"{v:.1f}"
    pct = lambda v: "–" if v is None else f"{100 * v:.1f}%"
    ratio = lambda a, b: "–" if a is None or not b else f"{a / b:.2f}"
    head = (f"{m['cpu_model']}, {m['cores']} cores (shared machine: {', '.join(str(r['machine']['cpu_busy_pct_before']) for r in runs)}% "
            f"busy just before each run), git {runs[0]['git']['commit'][:10]}, tmpfs backing, fio psync 128 KiB, "
            f"{s['file_mib']} MiB file, {s['runtime_s']} s per job, {s['repetitions']} interleaved reps per mode, medians, "
            f"MiB/s. fio on CPU {s['pinning']['fio_cpu']}, daemons on CPU {s['pinning']['daemon_cpus']}."
            + (f" Every warpfs mount with `{s['warpfs_mount_args']}`." if s.get("warpfs_mount_args") else
               " Default transport (FUSE over io_uring where the kernel offers it: a request is served on the CPU"
               " that issued it, so FUSE work also runs on fio's CPU)."))
    if s.get("bdi_max_bytes"):
        head += (f" Every mount's dirty limit (bdi `max_bytes`) set to {int(s['bdi_max_bytes']) >> 20} MiB"
                 " after mounting (BDI_MAX_BYTES), in place of warpfs's 128 MiB.")
    if kind == "cipher-spec":
        md += ["# Speculation where the cipher is the bottleneck: on vs off", "", head,
               f"warpfs-specon's keystream workers on CPU {s['pinning']['engine_cpus'] or s['pinning']['daemon_cpus']}.", "",
               "| volume | job | off | on | on/off | hit (on) |", "|---|---|---:|---:|---:|---:|"]
        for r in rows:
            on, off = r.get("warpfs-specon"), r.get("warpfs-specoff")
            md.append(f"| {r['volume']} | {r['job']} | {f1(off)} | {f1(on)} | {ratio(on, off)} | {pct(r.get('warpfs-specon_hit'))} |")
        md += ["", "Jobs `@80m`: capped at 80 MiB/s (fio `--rate`), below what the workers make: where both peers "
               "reach the cap the ratio is 1 and the hit rate shows whether the masks were made ahead of need."]
    else:
        md += ["# XTS split across the engine's workers", "", head,
               "warpfs-specoff: no workers (the FUSE thread alone); split1: `--engine-threads 1 --engine-cpus 0`; "
               "split2: `--engine-threads 2 --engine-cpus 0-1`; both `--speculation on --read-ahead 0`.", "",
               "| volume | job | FUSE thread alone | 1 worker | 2 workers | 1 worker / alone | 2 workers / alone | parts by workers / by the caller (2 workers) |",
               "|---|---|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            a, t1, t2 = r.get("warpfs-specoff"), r.get("warpfs-split1"), r.get("warpfs-split2")
            pw, pc = r.get("warpfs-split2_split_parts_workers"), r.get("warpfs-split2_split_parts_caller")
            parts = "–" if pw is None and pc is None else f"{pw or 0:.0f} / {pc or 0:.0f}"
            md.append(f"| {r['volume']} | {r['job']} | {f1(a)} | {f1(t1)} | {f1(t2)} | {ratio(t1, a)} | {ratio(t2, a)} | {parts} |")
    env = f"WARPFS_MOUNT_ARGS=\"{s['warpfs_mount_args']}\" " if s.get("warpfs_mount_args") else ""
    env += f"BDI_MAX_BYTES={s['bdi_max_bytes']} " if s.get("bdi_max_bytes") else ""
    tag = prefix.rsplit("/", 1)[-1][len(kind):]
    tag = f" --tag {tag[1:]}" if tag.startswith("-") else ""
    md += ["", f"Reproduce: `sudo {env}flock /work/bench.lock bash bench/cipher-spec.sh{' --split' if kind == 'xts-split' else ''}{tag}`."]
    open(prefix + ".md", "w").write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
