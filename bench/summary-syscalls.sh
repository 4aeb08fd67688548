#!/usr/bin/env bash
# bench/summary-syscalls.sh — where a file summary's cost comes from,
# counted rather than timed: for each write workload, the daemon's system
# calls (strace -c -f) and the bytes it hands to write calls (/proc/PID/io
# wchar) on a gcm volume with `--file-summary on` and one with `off`, side
# by side. Counts do not depend on how busy the machine is, so the result
# holds on a shared one; what a call costs in time is for bench/summary.sh.
#
#   sudo bash bench/summary-syscalls.sh [--mib M] [--out DIR] [--transport dev|auto]
#
# Workloads (one file of M MiB, default 64, written through a default mount):
#   seq-1m       M MiB in 1 MiB writes, then close
#   seq-128k     M MiB in 128 KiB writes, then close
#   rand-4k      M*64 random 4 KiB writes into the written file, then close
#   fsync-4k     1024 random 4 KiB writes into it, each followed by fsync
# Output: DIR (default bench/results/DATE-summary-syscalls)/summary-syscalls.json
# and .md (per workload: calls per client write by system call, wchar per
# client byte, on and off and on/off).
set -euo pipefail
WF_NAME="summary-syscalls"
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

MIB=64
OUT=""
TRANSPORT=dev
while (($#)); do
    case "$1" in
    --mib) MIB="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --transport) TRANSPORT="$2"; shift 2 ;;
    *) wf_die "unknown argument $1" ;;
    esac
done
wf_is_root || wf_die "needs root (strace of the daemon, mounts)"
BIN="$(wf_warpfs_bin)"
wf_ensure strace
OUT="${OUT:-$WF_REPO/bench/results/$(date -u +%Y-%m-%d)-summary-syscalls}"
mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/warpfs-sumsys.XXXXXX)"
trap 'for m in "$WORK"/*/m; do umount "$m" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT
WORKLOADS=(seq-1m seq-128k rand-4k fsync-4k)

# run SUMMARY WORKLOAD: the daemon's counts in $WORK/SUMMARY-WORKLOAD/
run() {
    local sum="$1" job="$2" d="$WORK/$1-$2"
    mkdir -p "$d/c" "$d/m"
    echo pw >"$d/pw"
    "$BIN" init --passfile "$d/pw" --quiet --kdf-memory 32768 --kdf-iterations 2 \
        --file-summary "$sum" "$d/c" >/dev/null
    setsid "$BIN" mount -f --passfile "$d/pw" --transport "$TRANSPORT" "$d/c" "$d/m" >"$d/log" 2>&1 &
    local pid=$!
    wf_wait_mounted "$d/m" 30 "$pid"
    # The file the random jobs write into exists before counting starts.
    if [[ $job != seq-* ]]; then
        head -c "$((MIB << 20))" /dev/zero >"$d/m/f"
        sync "$d/m/f"
    fi
    local w0
    w0="$(awk '/^wchar/ {print $2}' "/proc/$pid/io")"
    strace -c -f -p "$pid" -o "$d/strace.txt" &
    local sp=$!
    sleep 1
    python3 - "$d/m/f" "$job" "$MIB" >"$d/client.json" <<'PY'
import json, os, random, sys
path, job, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
size = mib << 20
rng = random.Random(1)
writes = byts = syncs = 0
if job.startswith("seq-"):
    bs = (1 << 20) if job == "seq-1m" else (128 << 10)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    buf = os.urandom(bs)
    for off in range(0, size, bs):
        os.pwrite(fd, buf, off)
        writes += 1
        byts += bs
else:
    fd = os.open(path, os.O_WRONLY)
    buf = os.urandom(4096)
    n = 1024 if job == "fsync-4k" else mib * 64
    for _ in range(n):
        os.pwrite(fd, buf, rng.randrange(size // 4096) * 4096)
        writes += 1
        byts += 4096
        if job == "fsync-4k":
            os.fsync(fd)
            syncs += 1
os.close(fd)
json.dump({"writes": writes, "bytes": byts, "fsyncs": syncs}, sys.stdout)
PY
    # Let the writeback cache flush what close left dirty.
    sync "$d/m"
    sleep 1
    kill -INT "$sp"
    wait "$sp" 2>/dev/null || true
    awk -v w0="$w0" '/^wchar/ {print $2 - w0}' "/proc/$pid/io" >"$d/wchar"
    wf_unmount "$d/m"
    wait "$pid" 2>/dev/null || true
}

for job in "${WORKLOADS[@]}"; do
    # Interleaved: off then on for each workload.
    run off "$job"
    run on "$job"
done

python3 - "$WORK" "$OUT" "$MIB" "$TRANSPORT" "$(stat -f -c %T "$WORK")" "$("$BIN" --version | head -n1)" \
    "$(git -C "$WF_REPO" rev-parse --short HEAD)" "${WORKLOADS[@]}" <<'PY'
import datetime, json, sys
work, out, mib, transport, fstype, version, commit, *jobs = sys.argv[1:]
def parse(d):
    calls = {}
    for line in open(f"{d}/strace.txt"):
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
            calls[f[-1]] = int(f[3])
    return calls
res = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "commit": commit, "version": version, "mib": int(mib), "transport": transport,
       "mount": "default", "backing": fstype, "workloads": {}}
for j in jobs:
    res["workloads"][j] = {}
    for s in ("off", "on"):
        d = f"{work}/{s}-{j}"
        res["workloads"][j][s] = {"client": json.load(open(f"{d}/client.json")), "calls": parse(d),
                                  "wchar": int(open(f"{d}/wchar").read())}
json.dump(res, open(f"{out}/summary-syscalls.json", "w"), indent=1)
L = ["# Where a file summary's cost comes from, in system calls\n",
     f"The daemon's system calls (`strace -c -f`) and the bytes it hands to write calls "
     f"(`wchar` of /proc/PID/io) per client write, gcm volumes with `--file-summary off` and `on`, "
     f"default mount over {transport}, one {mib} MiB file, backing on {fstype}; at {commit} ({version}).\n",
     "Command: `sudo bash bench/summary-syscalls.sh`\n"]
KEY = ["pwrite64", "pwritev", "fsync", "fdatasync", "pread64", "preadv", "sync_file_range", "futex"]
for j in jobs:
    w = res["workloads"][j]
    c = w["off"]["client"]
    n = c["writes"]
    L += [f"## {j}: {n} writes of {c['bytes'] // n} bytes" + (f", {c['fsyncs']} fsyncs" if c["fsyncs"] else "") + "\n",
          "| per client write | off | on | on/off |", "|---|---:|---:|---:|"]
    off, on = w["off"]["calls"], w["on"]["calls"]
    names = [k for k in KEY if off.get(k) or on.get(k)]
    names += sorted((k for k in set(off) | set(on) if k not in KEY and max(off.get(k, 0), on.get(k, 0)) >= n // 10),
                    key=lambda k: -max(off.get(k, 0), on.get(k, 0)))
    for k in names:
        a, b = off.get(k, 0) / n, on.get(k, 0) / n
        L.append(f"| {k} | {a:.2f} | {b:.2f} | {b / a:.2f} |" if a else f"| {k} | 0 | {b:.2f} | new |")
    ta, tb = sum(off.values()) / n, sum(on.values()) / n
    L.append(f"| all system calls | {ta:.2f} | {tb:.2f} | {tb / ta:.2f} |")
    wa, wb = w["off"]["wchar"] / c["bytes"], w["on"]["wchar"] / c["bytes"]
    L.append(f"| bytes written per client byte | {wa:.3f} | {wb:.3f} | {wb / wa:.2f} |\n")
open(f"{out}/summary-syscalls.md", "w").write("\n".join(L))
print("\n".join(L))
PY
