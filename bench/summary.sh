#!/usr/bin/env bash
# bench/summary.sh — the cost of file summaries (FORMAT.md 12): warpfs gcm
# with `--file-summary on` (the default) and `off`, side by side in one run.
#
#   sudo bash bench/summary.sh [--reps 3] [--runtime 8] [--size-mib 256] [--backing tmpfs|disk]
#                              [--peers gocryptfs,securefs|none]
#
# Per configuration: a backing dir (a tmpfs, or with --backing disk a
# directory on the disk file system of /var/tmp, where every fdatasync
# costs a journal commit), `warpfs init --file-summary on|off`,
# a mount (fio on CPU $FIO_CPU, default 0; the daemon on CPU $FS_CPUS,
# default 1), and these fio jobs (psync, iodepth 1, one job, direct=0):
#   randwrite-4k          random 4 KiB writes over a --size-mib file, time
#                         based, end_fsync=1 (one commit at the end)
#   randwrite-4k-fsync32  the same with an fsync every 32 writes (a commit each)
#   seqwrite-128k         sequential 128 KiB writes of a new file, end_fsync=1
#   randwrite-4k-fsync1   the same with an fsync after every write
#   seqwrite-1m           sequential 1 MiB writes of a new file, end_fsync=1
#   seqwrite-4k           sequential 4 KiB writes of a new file, end_fsync=1
#   smallfiles-5k         create, write 5,000 bytes, close; 4,000 files
#                         (reported as MiB/s of file data)
#   untar                 `tar xf` of a tarball of 3,000 files of 1-24 KiB
#                         in 60 directories (made once, outside the
#                         mounts; MiB/s of file data)
#   sqlite-wal-full       SQLite, journal_mode=WAL, synchronous=FULL: 400
#                         transactions of one 200-byte row each (commits/s)
# The same jobs run on each peer of --peers (default gocryptfs and securefs,
# Debian's packages, installed when missing; bench/peers/NAME.sh, default
# settings, the daemon on the same CPU), for the ratio of warpfs with
# summaries to each. Each job runs on a fresh mount (unmount, drop_caches,
# mount). Repetitions interleave the configurations (on, off, peers, on,
# off, ...) so drift on a shared machine hits all alike; the table gives
# medians, the ratio on/off and on/peer. Output: bench/results/DATE-summary/summary.json and summary.md (DATE
# the UTC day; DATE-summary-disk/summary-disk.* with --backing disk; --out
# DIR elsewhere). Needs root, fio, fuse3.
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
REPS=3 RUNTIME=8 SIZE_MIB=256 OUT="" BACKING=tmpfs PEERS=gocryptfs,securefs
while (($#)); do
    case "$1" in
    --reps) REPS=$2 && shift 2 ;;
    --runtime) RUNTIME=$2 && shift 2 ;;
    --size-mib) SIZE_MIB=$2 && shift 2 ;;
    --out) OUT=$2 && shift 2 ;;
    --backing) BACKING=$2 && shift 2 ;;
    --peers) PEERS=$2 && shift 2 ;;
    *) echo "summary.sh: unknown argument $1" >&2 && exit 2 ;;
    esac
done
[[ $(id -u) == 0 ]] || { echo "summary.sh: needs root" >&2; exit 1; }
command -v fio >/dev/null || { echo "summary.sh: needs fio" >&2; exit 1; }
BIN=${WARPFS_BIN:-$repo/target/release/warpfs}
[[ -n ${WARPFS_BIN:-} ]] || (cd "$repo" && cargo build --release -p warpfs -q)
FIO_CPU=${FIO_CPU:-0} FS_CPUS=${FS_CPUS:-1}
[[ $(nproc) -gt 1 ]] || FS_CPUS=0

[[ $BACKING == tmpfs || $BACKING == disk ]] || { echo "summary.sh: --backing tmpfs|disk" >&2; exit 2; }
if [[ -z $OUT ]]; then
    OUT="$repo/bench/results/$(date -u +%F)-summary"
    [[ $BACKING == tmpfs ]] || OUT="$OUT-$BACKING"
fi
# Peers: bench/peers/NAME.sh (their _available installs the package).
WF_NAME=summary
# shellcheck source=bench/lib-measure.sh
. "$here/lib-measure.sh"
peer_skip() { echo "summary.sh: peer $1 is not available${2:+: $2}; left out" >&2; }
ACTIVE=()
[[ $PEERS == none ]] || load_peers "$PEERS" peer_skip
CONFIGS=(on off "${ACTIVE[@]}")
PIN=(setsid taskset -c "$FS_CPUS")
declare -A PID=()
is_peer() { [[ $1 != on && $1 != off ]]; }
work=$(mktemp -d "$([[ $BACKING == disk ]] && echo /var/tmp || echo /tmp)/warpfs-bench-summary.XXXXXX")
mounts=()
cleanup() {
    for m in "${mounts[@]}"; do
        mountpoint -q "$m" && { fusermount3 -u "$m" 2>/dev/null || umount -l "$m"; }
    done
    for c in "${ACTIVE[@]}"; do wf_stop_daemon "${PID[$c]:-}" 5; done
    for c in "${CONFIGS[@]}"; do mountpoint -q "$work/$c/back" && umount "$work/$c/back"; done
    rm -rf "$work"
}
trap cleanup EXIT

echo pw >"$work/pass"
for c in on off; do
    mkdir -p "$work/$c/back" "$work/$c/mnt"
    [[ $BACKING == tmpfs ]] && mount -t tmpfs -o size=4g tmpfs "$work/$c/back"
    "$BIN" init --passfile "$work/pass" --quiet --file-summary "$c" "$work/$c/back/cipher" >/dev/null
    mounts+=("$work/$c/mnt")
done
for c in "${ACTIVE[@]}"; do
    mkdir -p "$work/$c/back/cipher" "$work/$c/mnt"
    [[ $BACKING == tmpfs ]] && mount -t tmpfs -o size=4g tmpfs "$work/$c/back" && mkdir "$work/$c/back/cipher"
    "$(fn "$c")_init" "$work/$c/back/cipher" "$work/pass" >"$work/$c.init.log" 2>&1 ||
        { cat "$work/$c.init.log" >&2; exit 1; }
    mounts+=("$work/$c/mnt")
done

mount_c() {
    local c=$1
    if is_peer "$c"; then
        PEER_PID=""
        "$(fn "$c")_mount" "$work/$c/back/cipher" "$work/$c/mnt" "$work/pass" "$work/$c.log"
        PID[$c]=$PEER_PID
        wf_wait_mounted "$work/$c/mnt" 30 "$PEER_PID" || { tail -n 20 "$work/$c.log" >&2; exit 1; }
        return
    fi
    taskset -c "$FS_CPUS" "$BIN" mount --passfile "$work/pass" --log-file "$work/$c.log" \
        "$work/$c/back/cipher" "$work/$c/mnt"
}
umount_c() {
    if is_peer "$1"; then
        if declare -F "$(fn "$1")_umount" >/dev/null; then "$(fn "$1")_umount" "$work/$1/mnt"; else wf_unmount "$work/$1/mnt"; fi
        wf_stop_daemon "${PID[$1]:-}" 5
        return
    fi
    fusermount3 -u "$work/$1/mnt" 2>/dev/null || umount "$work/$1/mnt"
}

# Round trip once per configuration.
for c in "${CONFIGS[@]}"; do
    mount_c "$c"
    head -c 3000000 /dev/urandom >"$work/rt"
    cp "$work/rt" "$work/$c/mnt/rt"
    umount_c "$c"
    sync && echo 3 >/proc/sys/vm/drop_caches
    mount_c "$c"
    cmp "$work/rt" "$work/$c/mnt/rt" || { echo "summary.sh: round trip failed ($c)" >&2; exit 1; }
    rm "$work/$c/mnt/rt"
    head -c $((SIZE_MIB << 20)) /dev/zero >"$work/$c/mnt/rand"
    umount_c "$c"
done

job() { # NAME -> fio arguments
    local common=(--ioengine=psync --iodepth=1 --numjobs=1 --direct=0 --time_based
        --runtime="$RUNTIME" --group_reporting --output-format=json)
    case $1 in
    randwrite-4k) echo "${common[*]} --rw=randwrite --bs=4k --filename=rand --size=${SIZE_MIB}m --end_fsync=1" ;;
    randwrite-4k-fsync32) echo "${common[*]} --rw=randwrite --bs=4k --filename=rand --size=${SIZE_MIB}m --fsync=32" ;;
    seqwrite-128k) echo "${common[*]} --rw=write --bs=128k --filename=seq --size=${SIZE_MIB}m --end_fsync=1" ;;
    randwrite-4k-fsync1) echo "${common[*]} --rw=randwrite --bs=4k --filename=rand --size=${SIZE_MIB}m --fsync=1" ;;
    seqwrite-1m) echo "${common[*]} --rw=write --bs=1m --filename=seq --size=${SIZE_MIB}m --end_fsync=1" ;;
    seqwrite-4k) echo "${common[*]} --rw=write --bs=4k --filename=seq --size=${SIZE_MIB}m --end_fsync=1" ;;
    esac
}
WORKLOADS=(randwrite-4k randwrite-4k-fsync32 randwrite-4k-fsync1 seqwrite-128k seqwrite-1m seqwrite-4k
    smallfiles-5k untar sqlite-wal-full)
# SUMMARY_JOBS="untar smallfiles-5k" runs those alone (a quick look).
[[ -z ${SUMMARY_JOBS:-} ]] || read -r -a WORKLOADS <<<"$SUMMARY_JOBS"
smallfiles() { # DIR -> MiB/s of file data written as 4,000 new 5,000-byte files
    taskset -c "$FIO_CPU" python3 - "$1" <<'PY'
import os, sys, time
d = os.path.join(sys.argv[1], "small")
os.makedirs(d, exist_ok=True)
data = b"s" * 5000
t = time.monotonic()
for i in range(4000):
    with open(os.path.join(d, f"f{i}"), "wb") as f:
        f.write(data)
print(4000 * 5000 / (time.monotonic() - t) / 1048576)
PY
}
# The tarball of the untar job, made once.
python3 - "$work/tree.tar" <<'PY'
import io, random, sys, tarfile
rng = random.Random(39)
with tarfile.open(sys.argv[1], "w") as t:
    for i in range(3000):
        data = bytes(rng.getrandbits(8) for _ in range(rng.randint(1024, 24 * 1024)))
        ti = tarfile.TarInfo(f"tree/d{i % 60}/f{i}")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
PY
TAR_MIB=$(tar tvf "$work/tree.tar" | awk '{s += $3} END {print s / 1048576}')
untar() { # DIR -> MiB/s of file data extracted
    local t0 t1
    t0=$(date +%s.%N)
    taskset -c "$FIO_CPU" tar xf "$work/tree.tar" -C "$1"
    t1=$(date +%s.%N)
    echo "$TAR_MIB $t0 $t1" | awk '{print $1 / ($3 - $2)}'
}
sqlite_wal() { # DIR -> commits/s
    taskset -c "$FIO_CPU" python3 - "$1" <<'PY'
import os, sqlite3, sys, time
p = os.path.join(sys.argv[1], "db.sqlite")
c = sqlite3.connect(p, isolation_level=None)
c.execute("PRAGMA journal_mode=WAL")
c.execute("PRAGMA synchronous=FULL")
c.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
row = b"r" * 200
t = time.monotonic()
for i in range(400):
    c.execute("BEGIN")
    c.execute("INSERT INTO t (v) VALUES (?)", (row,))
    c.execute("COMMIT")
print(400 / (time.monotonic() - t))
c.close()
PY
}
busy=$(awk '/^cpu /{print $2+$3+$4+$6+$7+$8, $5}' /proc/stat)
sleep 1
busy2=$(awk '/^cpu /{print $2+$3+$4+$6+$7+$8, $5}' /proc/stat)
busy_pct=$(echo "$busy $busy2" | awk '{u=$3-$1; i=$4-$2; printf "%.0f", (u+i) ? 100*u/(u+i) : 0}')

results="$work/results.tsv"
: >"$results"
for ((r = 1; r <= REPS; r++)); do
    for w in "${WORKLOADS[@]}"; do
        for c in "${CONFIGS[@]}"; do
            sync && echo 3 >/proc/sys/vm/drop_caches
            mount_c "$c"
            [[ $w == seqwrite* ]] && rm -f "$work/$c/mnt/seq"
            rm -rf "$work/$c/mnt/small" "$work/$c/mnt/tree" "$work/$c/mnt"/db.sqlite*
            if [[ $w == smallfiles-5k ]]; then
                mibs=$(smallfiles "$work/$c/mnt")
            elif [[ $w == untar ]]; then
                mibs=$(untar "$work/$c/mnt")
            elif [[ $w == sqlite-wal-full ]]; then
                mibs=$(sqlite_wal "$work/$c/mnt")
            else
                # shellcheck disable=SC2046 # job prints words
                (cd "$work/$c/mnt" && taskset -c "$FIO_CPU" fio --name="$w" $(job "$w")) >"$work/fio.json"
                mibs=$(jq '.jobs[0].write.bw_bytes / 1048576' "$work/fio.json")
            fi
            umount_c "$c"
            printf '%s\t%s\t%s\t%s\n' "$r" "$w" "$c" "$mibs" | tee -a "$results"
        done
    done
done

mkdir -p "$OUT"
versions=()
for c in "${ACTIVE[@]}"; do versions+=("$c=$("$(fn "$c")_version")"); done
python3 - "$results" "$OUT" "$BACKING" "$REPS" "$RUNTIME" "$SIZE_MIB" "$busy_pct" "$FIO_CPU" "$FS_CPUS" \
    "$(git -C "$repo" rev-parse HEAD)" "$(git -C "$repo" status --porcelain | grep -q . && echo 1 || echo 0)" \
    "$(IFS='|' && echo "${versions[*]}")" <<'EOF'
import json, statistics, sys, platform, datetime
res, out, backing, reps, runtime, size, busy, fcpu, dcpu, commit, dirty, vers = sys.argv[1:]
peers = dict(v.split("=", 1) for v in vers.split("|") if v)
name = "summary" if backing == "tmpfs" else f"summary-{backing}"
where = "tmpfs backing" if backing == "tmpfs" else "ext4 backing (/var/tmp on the VM's disk)"
rows = [l.rstrip("\n").split("\t") for l in open(res) if l.strip()]
data = {}
for r, w, c, v in rows:
    data.setdefault(w, {}).setdefault(c, []).append(float(v))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
doc = {
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "machine": {"cpu_model": cpu, "kernel": platform.release(), "cpu_busy_pct_before": int(busy)},
    "git": {"commit": commit, "dirty": dirty == "1"},
    "peers": peers,
    "settings": {"repetitions": int(reps), "runtime_s": int(runtime), "file_mib": int(size),
                 "fio_cpu": fcpu, "daemon_cpus": dcpu, "backing": backing, "mode": "gcm"},
    "results": [{"workload": w, "summary": c, "value": v,
                 "unit": "commits/s" if w.startswith("sqlite") else "MiB/s"}
                for w in data for c in data[w] for v in data[w][c]],
}
json.dump(doc, open(f"{out}/{name}.json", "w"), indent=2)
md = [f"# File summary cost (gcm, --file-summary on vs off, {backing})", "",
      f"{doc['date']} · {cpu}, kernel {platform.release()} · CPUs {busy}% busy just before the run (shared machine)",
      f"git {commit[:12]}{' (dirty)' if dirty == '1' else ''} · {where} · fio psync, iodepth 1, direct=0, {size} MiB file, {runtime} s per job, {reps} repetitions interleaved, cold cache and fresh mount per job · fio on CPU {fcpu}, daemon on CPU {dcpu}",
      "", "| workload | unit | summaries on, median (min–max) | off | on / off | goal |"
      + "".join(f" {p} | on / {p} |" for p in peers), "|---|---|---|---|---|---|" + "---|---|" * len(peers)]
for w in data:
    on, off = data[w].get("on", []), data[w].get("off", [])
    mon, moff = statistics.median(on), statistics.median(off)
    unit = "commits/s" if w.startswith("sqlite") else "MiB/s"
    goal = 0.75 if w == "randwrite-4k-fsync1" else 0.90
    met = "met" if mon / moff >= goal else "unmet"
    row = f"| {w} | {unit} | {mon:.1f} ({min(on):.1f}–{max(on):.1f}) | {moff:.1f} ({min(off):.1f}–{max(off):.1f}) | {mon / moff:.2f} | ≥ {goal:.2f}: {met} |"
    for p in peers:
        v = data[w].get(p, [])
        row += f" {statistics.median(v):.1f} | {mon / statistics.median(v):.2f} |" if v else " – | – |"
    md.append(row)
md += [""] + [f"{p}: {v}" for p, v in peers.items()]
md += ["", f"Produced by `bash bench/summary.sh --backing {backing}` (as root; the machine was shared with other work)."]
open(f"{out}/{name}.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
EOF
