#!/usr/bin/env bash
# bench/door-syscalls.sh — what the backing-store door costs, counted rather
# than timed: the daemon's system calls (strace -c -f) for one small-file
# storm (N creates of 100 bytes, N stats, N reads, a listing, N unlinks in
# one directory) on a default mount over /dev/fuse, for this build and for
# WARPFS_BASE_BIN side by side. Counts do not depend on how busy the
# machine is, so the result holds on a shared one.
#
#   sudo WARPFS_BASE_BIN=/path/to/old/warpfs bash bench/door-syscalls.sh [--files N] [--out DIR]
#
# Output: DIR (default bench/results/DATE-door-syscalls)/door-syscalls.json
# and .md (calls per file operation by system call, both builds).
set -euo pipefail
WF_NAME="door-syscalls"
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

FILES=1000
OUT=""
while (($#)); do
    case "$1" in
    --files) FILES="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) wf_die "unknown argument $1" ;;
    esac
done
wf_is_root || wf_die "needs root (strace of the daemon, mounts)"
NEW="$(wf_warpfs_bin)"
BASE="${WARPFS_BASE_BIN:-}"
[[ -x $BASE ]] || wf_die "set WARPFS_BASE_BIN to the warpfs to compare with"
wf_ensure strace
OUT="${OUT:-$WF_REPO/bench/results/$(date -u +%Y-%m-%d)-door-syscalls}"
mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/warpfs-door.XXXXXX)"
trap 'for m in "$WORK"/*/m; do umount "$m" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT

# run TAG BIN: the daemon's syscall summary for the storm in $WORK/TAG/strace.txt
run() {
    local tag="$1" bin="$2" d="$WORK/$1"
    mkdir -p "$d/c" "$d/m"
    echo pw >"$d/pw"
    "$bin" init --passfile "$d/pw" --quiet --kdf-memory 32768 --kdf-iterations 2 "$d/c" >/dev/null
    setsid "$bin" mount -f --passfile "$d/pw" --transport dev "$d/c" "$d/m" >"$d/log" 2>&1 &
    local pid=$!
    wf_wait_mounted "$d/m"
    mkdir "$d/m/d"
    strace -c -f -p "$pid" -o "$d/strace.txt" &
    local sp=$!
    sleep 1
    python3 - "$d/m/d" "$FILES" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(f"{d}/f{i}", "w") as f:
        f.write("x" * 100)
for i in range(n):
    os.stat(f"{d}/f{i}")
for i in range(n):
    with open(f"{d}/f{i}") as f:
        f.read()
os.listdir(d)
for i in range(n):
    os.unlink(f"{d}/f{i}")
PY
    sleep 1
    kill -INT "$sp"
    wait "$sp" 2>/dev/null || true
    umount "$d/m"
    wait "$pid" 2>/dev/null || true
}

run base "$BASE"
run new "$NEW"
python3 - "$WORK" "$OUT" "$FILES" "$("$BASE" --version | head -n1) at $BASE" "$("$NEW" --version | head -n1) at $NEW" "$(git -C "$WF_REPO" rev-parse --short HEAD)" <<'PY'
import json, sys, datetime
work, out, files, vbase, vnew, commit = sys.argv[1:7]
files = int(files)
def parse(tag):
    calls = {}
    for line in open(f"{work}/{tag}/strace.txt"):
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
            calls[f[-1]] = int(f[3])
    return calls
base, new = parse("base"), parse("new")
ops = 4 * files + 1
res = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "commit": commit, "files": files, "file_operations": ops,
    "transport": "dev", "mount": "default (backing directories kept open 1 s)",
    "base": {"version": vbase, "calls": base, "total": sum(base.values())},
    "new": {"version": vnew, "calls": new, "total": sum(new.values())},
}
json.dump(res, open(f"{out}/door-syscalls.json", "w"), indent=1)
names = sorted(set(base) | set(new), key=lambda k: -max(base.get(k, 0), new.get(k, 0)))
L = [f"# The backing-store door in system calls\n",
     f"The daemon's system calls (`strace -c -f`) for {files} creates, {files} stats, {files} reads, "
     f"one listing and {files} unlinks in one directory ({ops} file operations), default mount over "
     f"/dev/fuse, both builds in one run at {commit}. Base: {vbase} (`WARPFS_BASE_BIN`); new: {vnew}.\n",
     "Command: `sudo WARPFS_BASE_BIN=... bash bench/door-syscalls.sh`\n",
     "| system call | base per op | new per op | new/base |", "|---|---:|---:|---:|"]
for k in names:
    b, n = base.get(k, 0), new.get(k, 0)
    if max(b, n) < files // 10:
        continue
    L.append(f"| {k} | {b/ops:.2f} | {n/ops:.2f} | {n/b:.2f} |" if b else f"| {k} | 0 | {n/ops:.2f} | new |")
tb, tn = res["base"]["total"], res["new"]["total"]
L.append(f"| **all** | **{tb/ops:.2f}** | **{tn/ops:.2f}** | **{tn/tb:.2f}** |")
open(f"{out}/door-syscalls.md", "w").write("\n".join(L) + "\n")
print("\n".join(L))
PY
