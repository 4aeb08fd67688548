#!/usr/bin/env python3
"""Medians of bench/twofish.sh's JSON lines -> PREFIX.json and PREFIX.md.

usage: report.py LINES PREFIX [--meta key=value ...]
"""
import json
import statistics
import sys


def main():
    lines, prefix = sys.argv[1], sys.argv[2]
    meta = {}
    if "--meta" in sys.argv:
        for kv in sys.argv[sys.argv.index("--meta") + 1:]:
            k, _, v = kv.partition("=")
            meta[k] = v
    runs = {}
    for line in open(lines):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        impl = r["impl"].split(" 1.")[0] if r["impl"].startswith("libgcrypt") else r["impl"]
        runs.setdefault((r["cipher"], impl, r["impl"]), []).append(r)
    rows = []
    for (cipher, impl, full), rs in sorted(runs.items()):
        rows.append({
            "cipher": cipher,
            "impl": full,
            "cpu_mbps": statistics.median(x["cpu_mbps"] for x in rs),
            "wall_mbps": statistics.median(x["wall_mbps"] for x in rs),
            "cpu_mbps_all": [x["cpu_mbps"] for x in rs],
            "wall_mbps_all": [x["wall_mbps"] for x in rs],
        })
    ratios = {}
    for c in sorted({r["cipher"] for r in rows}):
        by = {r["impl"].split(" ")[0]: r for r in rows if r["cipher"] == c}
        if "warpfs-crypto" in by and "libgcrypt" in by:
            ours, theirs = by["warpfs-crypto"], by["libgcrypt"]
            ratios[c] = {
                "vs_libgcrypt_cpu": round(ours["cpu_mbps"] / theirs["cpu_mbps"], 2),
                "vs_libgcrypt_wall": round(ours["wall_mbps"] / theirs["wall_mbps"], 2),
            }
            if "twofish" in by:
                ratios[c]["vs_twofish_crate_cpu"] = round(ours["cpu_mbps"] / by["twofish"]["cpu_mbps"], 1)
    out = {"meta": meta, "rows": rows, "ratios": ratios}
    with open(prefix + ".json", "w") as f:
        json.dump(out, f, indent=1)
    md = ["# Twofish on one core, 4 KiB units", ""]
    md.append(f"{meta.get('date', '')}, commit {meta.get('git_commit', '')[:10]}, {meta.get('cpu_model', '')}, "
              f"{meta.get('cores', '')} cores (shared machine: load average before {meta.get('loadavg_before', '')}), "
              f"pinned to CPU {meta.get('cpu', '')}, {meta.get('reps', '')} alternating rounds of "
              f"{meta.get('seconds', '')} s per case, medians. MB/s = 10^6 bytes/s.")
    md.append("")
    md.append("| cipher | implementation | MB/s per CPU-second | MB/s wall | ours / libgcrypt (CPU) |")
    md.append("|---|---|---:|---:|---:|")
    for r in rows:
        ratio = ratios.get(r["cipher"], {}).get("vs_libgcrypt_cpu", "") if r["impl"] == "warpfs-crypto" else ""
        md.append(f"| {r['cipher']} | {r['impl']} | {r['cpu_mbps']:.1f} | {r['wall_mbps']:.1f} | {ratio} |")
    md.append("")
    md.append("Reproduce: `flock /work/bench.lock bash bench/twofish.sh` (or without flock on a quiet machine).")
    with open(prefix + ".md", "w") as f:
        f.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
