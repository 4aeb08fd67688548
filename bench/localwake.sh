#!/usr/bin/env bash
# bench/localwake.sh — FUSE over io_uring with readers kept on their CPU
# (`--uring-local-wake on`, the default) against `off` and against
# /dev/fuse, in one run, on tmpfs: fio psync 4 KiB random reads of a
# 256 MiB file through the page cache,
#   randread-1j      one job, unpinned (the case the option is for)
#   randread-4j      four jobs, unpinned (more readers than CPUs)
#   randread-hog     one job pinned to CPU 0 beside a busy loop pinned there
#                    (a CPU shared with another task: the case it can cost)
#   seqread-128k     one job, sequential 128 KiB reads (answers over 32 KiB
#                    are committed at normal priority either way)
# Peers interleaved in every repetition, each job on a fresh mount after
# drop_caches. MiB/s, and fio's 99th and 99.9th percentile completion
# latency. Writes bench/results/DATE-localwake/localwake.{json,md}, DATE
# the UTC day (OUT to change).
#
#   flock /work/bench.lock bash bench/localwake.sh
#
# Environment: REPS (3), RUNTIME (4 s), WARPFS (target/release/warpfs),
# OUT (bench/results/DATE-localwake). Needs root (drop_caches) and fio.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=$(realpath "${WARPFS:-target/release/warpfs}")
REPS=${REPS:-3}
RUNTIME=${RUNTIME:-4}
OUT=${OUT:-bench/results/$(date -u +%F)-localwake}
command -v fio >/dev/null || { echo "needs fio (apt-get install fio)" >&2; exit 1; }
command -v jq >/dev/null || { echo "needs jq (apt-get install jq)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (drop_caches)" >&2; exit 1; }

D=$(mktemp -d /dev/shm/warpfs-localwake.XXXX)
HOG=""
cleanup() {
    [ -n "$HOG" ] && kill "$HOG" 2>/dev/null
    mountpoint -q "$D/m" && umount -l "$D/m"
    rm -rf "$D"
}
trap cleanup EXIT
mkdir -p "$D/c" "$D/m"
echo "correct horse battery staple" >"$D/pw"
"$B" init --passfile "$D/pw" "$D/c" >/dev/null

declare -A ARGS=(
    [uring-local]="--transport uring --uring-enable --uring-local-wake on"
    [uring-far]="--transport uring --uring-enable --uring-local-wake off"
    [dev]="--transport dev"
)
PEERS=(uring-local uring-far dev)

mnt() {
    # shellcheck disable=SC2086 # ARGS values are lists of words
    "$B" mount --passfile "$D/pw" ${ARGS[$1]} "$D/c" "$D/m"
}
umnt() {
    umount "$D/m"
    for _ in $(seq 50); do mountpoint -q "$D/m" || return 0; sleep 0.1; done
}

mnt dev
fio --name=layout --filename="$D/m/f" --rw=write --bs=1m --size=256m --ioengine=psync --end_fsync=1 \
    --output=/dev/null
umnt

ROWS="$D/rows.jsonl"
: >"$ROWS"
run() { # PEER REP JOB
    local p="$1" rep="$2" job="$3" pin=() extra=() rw=randread bs=4k json="$D/fio.json"
    case "$job" in
    randread-4j) extra=(--numjobs=4 --group_reporting) ;;
    randread-hog) pin=(taskset -c 0) ;;
    seqread-128k) rw=read bs=128k ;;
    esac
    mnt "$p"
    sync
    echo 3 >/proc/sys/vm/drop_caches
    if [ "$job" = randread-hog ]; then
        taskset -c 0 bash -c 'while :; do :; done' &
        HOG=$!
    fi
    "${pin[@]}" fio --name="$job" --filename="$D/m/f" --rw="$rw" --bs="$bs" --size=256m --ioengine=psync \
        --invalidate=1 --time_based --runtime="$RUNTIME" "${extra[@]}" --output-format=json --output="$json"
    if [ -n "$HOG" ]; then kill "$HOG"; wait "$HOG" 2>/dev/null || true; HOG=""; fi
    umnt
    jq -c --arg peer "$p" --argjson rep "$rep" --arg job "$job" '.jobs[0].read |
        {peer: $peer, rep: $rep, job: $job, mib_s: (.bw_bytes / 1048576 * 10 | round / 10),
         p99_us: (.clat_ns.percentile["99.000000"] / 1000 | round),
         p999_us: (.clat_ns.percentile["99.900000"] / 1000 | round)}' "$json" >>"$ROWS"
    tail -n 1 "$ROWS" >&2
}

JOBS=(randread-1j randread-4j randread-hog seqread-128k)
for rep in $(seq "$REPS"); do
    for job in "${JOBS[@]}"; do
        for p in "${PEERS[@]}"; do run "$p" "$rep" "$job"; done
    done
done

mkdir -p "$OUT"
jq -s --arg date "$(date -u +%FT%TZ)" --arg git "$(git rev-parse --short=12 HEAD)" \
    --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
    --argjson cores "$(nproc)" --arg kernel "$(uname -r)" --argjson reps "$REPS" --argjson runtime "$RUNTIME" \
    '{benchmark: "localwake", date: $date, git: $git, machine: {cpu: $cpu, cores: $cores, kernel: $kernel},
      settings: {reps: $reps, runtime_s: $runtime, file_mib: 256, backing: "tmpfs"}, results: .}' \
    "$ROWS" >"$OUT/localwake.json"

python3 - "$OUT/localwake.json" "$OUT/localwake.md" <<'EOF'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
rows = d["results"]
peers = ["uring-local", "uring-far", "dev"]
jobs = ["randread-1j", "randread-4j", "randread-hog", "seqread-128k"]
def cell(p, j, k):
    v = [r[k] for r in rows if r["peer"] == p and r["job"] == j]
    return statistics.median(v) if v else None
L = ["# FUSE over io_uring: readers kept on their CPU (`--uring-local-wake`)\n",
     f"{d['date']} · {d['machine']['cpu']}, {d['machine']['cores']} cores, kernel {d['machine']['kernel']} · "
     f"git {d['git']} · tmpfs · fio psync, 256 MiB file, {d['settings']['runtime_s']} s per job · "
     f"{d['settings']['reps']} repetitions, peers interleaved, fresh mount and drop_caches before each job\n",
     "Median MiB/s (p99 / p99.9 completion latency in µs). uring-local: `--transport uring` (default "
     "`--uring-local-wake on`); uring-far: `--uring-local-wake off`; dev: `--transport dev`. randread-hog: fio "
     "and a busy loop both pinned to CPU 0.\n",
     "| job | uring-local | uring-far | dev | local/far | local/dev |", "|---|---:|---:|---:|---:|---:|"]
for j in jobs:
    c = [f"{cell(p, j, 'mib_s'):.1f} ({cell(p, j, 'p99_us'):.0f} / {cell(p, j, 'p999_us'):.0f})" for p in peers]
    l, f, v = (cell(p, j, "mib_s") for p in peers)
    L.append(f"| {j} | " + " | ".join(c) + f" | {l / f:.2f} | {l / v:.2f} |")
open(sys.argv[2], "w").write("\n".join(L) + "\n")
print("\n".join(L))
EOF
