#!/usr/bin/env bash
# bench/scaling.sh — how each peer scales with parallel clients: random 4 KiB
# reads, sequential 1 MiB reads and a create/stat/unlink storm at 1, 2, 4, 8
# and 16 jobs on warpfs (FUSE over io_uring and /dev/fuse), bindfs (a FUSE
# pass-through without crypto) and the backing store itself (plain), in one
# run, peers interleaved. No CPU placement: daemons and clients run where the
# scheduler puts them.
#
#   sudo bash bench/scaling.sh [--jobs-list 1,2,4,8,16] [--reps N] [--runtime S]
#        [--size-mib M] [--peers warpfs-uring,warpfs-dev,bindfs,plain]
#        [--backing tmpfs|disk] [--out DIR]
#   bash bench/scaling.sh --render DIR/scaling.json     (redo the .md)
#
# Jobs, each after unmount + drop_caches + mount:
#   randread-4k   fio randread 4 KiB, N jobs on the read file (psync, iodepth 1)
#   seqread-1m    fio read 1 MiB, N jobs on the read file
#   storm         N processes, each a create+close, stat, unlink storm of
#                 STORM_FILES (default 1000) files in a directory of its own
# Numbers: throughput T(n) (MiB/s or operations/s), median of the
# repetitions; efficiency T(n) / (n * T(1)); daemon CPU per operation in µs
# (/proc/PID/stat, all threads; plain has no daemon). The read file is
# --size-mib (default 256). enable_uring is turned on for the run (as root)
# and put back at exit, as bench/transport.sh does.
# Output: --out (default bench/results/DATE-scaling)/scaling.json and .md;
# raw fio JSON and daemon logs in target/bench/scaling-raw/.
set -euo pipefail

WF_NAME="scaling"
# shellcheck source=bench/lib-peers.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-peers.sh"

PY=/usr/bin/python3
render_md() { "$PY" - "$1" "$2" <<'PY'
import json, statistics, sys
src, dst = sys.argv[1], sys.argv[2]
d = json.load(open(src))
rows = d["rows"]
peers = d["peers"]
jobs = [j for j in ("randread-4k", "seqread-1m", "storm") if any(r["job"] == j for r in rows)]
ns = sorted({r["n"] for r in rows})
def med(p, j, n, k="value"):
    v = [r[k] for r in rows if r["peer"] == p and r["job"] == j and r["n"] == n and r[k] is not None]
    return statistics.median(v) if v else None
L = [f"# Scaling with parallel clients ({d['date']})\n",
     f"Command: `{d['command']}` (commit {d['commit'][:12]}{', dirty tree' if d['dirty'] else ''}).\n",
     f"Machine: {d['machine']}; {d['cpus']} CPUs, busy {d['busy_before']}% before the run; backing {d['backing']}; "
     f"{d['reps']} repetition(s), fio {d['runtime']} s per job, read file {d['size_mib']} MiB, storm {d['storm_files']} files per process; "
     "no CPU placement. Throughput is the median of the repetitions; efficiency = T(n) / (n · T(1)); "
     "CPU: the daemon's CPU time per operation (µs).\n"]
for j in jobs:
    unit = next(r["unit"] for r in rows if r["job"] == j)
    L += [f"## {j} ({unit})\n", "| peer | " + " | ".join(f"{n} job{'s' if n > 1 else ''}" for n in ns) + " |",
          "|---|" + "---:|" * len(ns)]
    for p in peers:
        t1 = med(p, j, ns[0])
        cells = []
        for n in ns:
            t = med(p, j, n)
            if t is None:
                cells.append("–")
                continue
            eff = f" ({t / (n / ns[0] * t1):.2f})" if t1 else ""
            cpu = med(p, j, n, "cpu_us_per_op")
            cells.append(f"{t:,.0f}{eff}" + (f", {cpu:.0f} µs" if cpu is not None else ""))
        L.append(f"| {p} | " + " | ".join(cells) + " |")
    L.append("")
L.append("Each cell: throughput (efficiency), daemon CPU per operation.\n")
L.append("Versions: " + "; ".join(f"{p}: {v}" for p, v in d["versions"].items()) + ".")
open(dst, "w").write("\n".join(L) + "\n")
PY
}

PEERS="warpfs-uring,warpfs-dev,bindfs,plain"
REPS=3 RUNTIME=5 SIZE_MIB=256 OUT="" RENDER="" JOBS_LIST="1,2,4,8,16"
STORM_FILES="${STORM_FILES:-1000}"
while (($#)); do
    case "$1" in
    --jobs-list) JOBS_LIST="$2"; shift 2 ;;
    *) parse_common "$@"; shift "$NARGS" ;;
    esac
done
[[ -z $RENDER ]] || render_only "$RENDER"
OUT="${OUT:-$BENCH/results/$(date -u +%Y-%m-%d)-scaling}"
IFS=, read -r -a NS <<<"$JOBS_LIST"
((${#NS[@]})) || wf_die "--jobs-list is empty"

# No placement: every CPU for daemons and clients.
export FS_CPUS="0-$(($(nproc) - 1))"
export ENGINE_CPUS=none
preflight "tmpfs mounts, drop_caches, enable_uring"
FIO_PIN=(taskset -c "$FS_CPUS")
wf_uring_on
# Put it back if anything below dies before the full EXIT trap is set.
trap wf_uring_restore EXIT
load_peers "$PEERS" peer_missing_warn
work_setup scaling
restore_uring() {
    local rc=$?
    set +e
    wf_uring_restore
    (exit "$rc")
    cleanup
}
trap restore_uring EXIT
measure_busy_before
git_state
# plain: the backing store itself, no FUSE (no mount, no daemon: only the
# page cache is dropped between jobs).
plain_setup() {
    local p="$1"
    mkdir -p "$WORK/$p/backing"
    mount -t tmpfs -o "size=$((SIZE_MIB * 2 + 1024))m" "$PEER_TAG-$p" "$WORK/$p/backing"
    mkdir "$WORK/$p/backing/vol"
    ln -s "$WORK/$p/backing/vol" "$WORK/$p/mnt"
    VERSION[$p]="$(plain_version)"
    fio --name=layout --filename="$WORK/$p/mnt/read.dat" --rw=write --bs=1m --size="${SIZE_MIB}m" \
        --ioengine=psync --fallocate=none --end_fsync=1 --output=/dev/null || wf_die "$p: could not write the read file"
}
[[ ${BACKING:-tmpfs} == tmpfs ]] || [[ " ${ACTIVE[*]} " != *" plain "* ]] ||
    wf_die "the plain peer runs on tmpfs only here (bench/run.sh measures a disk)"
for p in "${ACTIVE[@]}"; do
    if [[ $p == plain ]]; then plain_setup "$p"; else peer_setup "$p"; fi
done
ROWS="$WORK/rows.jsonl"
: >"$ROWS"

# row P REP JOB N VALUE UNIT OPS CPU
row() {
    local cpu="$8"
    [[ -n ${PID[$1]:-} ]] || cpu=null
    jq -c -n --arg peer "$1" --argjson rep "$2" --arg job "$3" --argjson n "$4" --argjson value "$5" \
        --arg unit "$6" --argjson ops "$7" --argjson cpu "$cpu" \
        '{peer: $peer, rep: $rep, job: $job, n: $n, value: ($value * 10 | round / 10), unit: $unit, ops: $ops,
          daemon_cpu_s: $cpu, cpu_us_per_op: (if $cpu != null and $ops > 0 then ($cpu / $ops * 1e6 | round) else null end)}' >>"$ROWS"
    printf '[scaling] rep %d/%d %-12s n=%-2d %-14s %10.1f %s\n' "$2" "$REPS" "$3" "$4" "$1" "$5" "$6" >&2
}

cpu_of() { if [[ -n ${PID[$1]:-} ]]; then cpu_seconds "${PID[$1]}"; else echo 0; fi; }

measure() {
    local p="$1" rep="$2" job="$3" n="$4" c0 c1 cpu json
    c0=$(cpu_of "$p")
    case "$job" in
    randread-4k | seqread-1m)
        local rw=randread bs=4k
        [[ $job == seqread-1m ]] && rw=read bs=1m
        json="$RAW/$p-$job-$n-$rep.json"
        timeout -k 5 $((RUNTIME + 120)) "${FIO_PIN[@]}" fio --name="$job" --filename="$WORK/$p/mnt/read.dat" \
            --rw="$rw" --bs="$bs" --size="${SIZE_MIB}m" --ioengine=psync --iodepth=1 --numjobs="$n" \
            --group_reporting --direct=0 --invalidate=1 --fallocate=none --time_based --runtime="$RUNTIME" \
            --output-format=json --output="$json" || wf_die "$p: fio $job x$n failed"
        c1=$(cpu_of "$p")
        cpu=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')
        local mib ios
        mib=$(jq '.jobs[0].read.bw_bytes / 1048576' "$json")
        ios=$(jq '.jobs[0].read.total_ios' "$json")
        row "$p" "$rep" "$job" "$n" "$mib" MiB/s "$ios" "$cpu"
        ;;
    storm)
        local i t0 t1 ops=0 pids=()
        for ((i = 0; i < n; i++)); do mkdir -p "$WORK/$p/mnt/storm$i"; done
        t0=$(date +%s.%N)
        for ((i = 0; i < n; i++)); do
            timeout -k 5 300 "$PY" "$BENCH/meta.py" storm "$WORK/$p/mnt/storm$i" --files "$STORM_FILES" \
                >"$WORK/storm$i.json" &
            pids+=($!)
        done
        for i in "${pids[@]}"; do wait "$i" || wf_die "$p: storm x$n failed"; done
        t1=$(date +%s.%N)
        c1=$(cpu_of "$p")
        cpu=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')
        for ((i = 0; i < n; i++)); do
            ops=$((ops + $(jq '.ops' "$WORK/storm$i.json")))
            rmdir "$WORK/$p/mnt/storm$i" 2>/dev/null || true
        done
        row "$p" "$rep" storm "$n" "$(awk -v o="$ops" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", o / (b - a) }')" \
            ops/s "$ops" "$cpu"
        ;;
    esac
}

wf_log "peers: ${ACTIVE[*]}; jobs at ${NS[*]}; $REPS rep(s); no CPU placement"
for ((rep = 1; rep <= REPS; rep++)); do
    for job in randread-4k seqread-1m storm; do
        for n in "${NS[@]}"; do
            for p in "${ACTIVE[@]}"; do
                if [[ $p == plain ]]; then drop_caches; else remount_cold "$p"; fi
                measure "$p" "$rep" "$job" "$n"
            done
        done
    done
done

mkdir -p "$OUT"
jq -n --slurpfile rows "$ROWS" --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    --arg command "sudo bash bench/scaling.sh --jobs-list $JOBS_LIST --reps $REPS --runtime $RUNTIME --size-mib $SIZE_MIB --peers ${PEERS}" \
    --arg commit "$GIT_COMMIT" --argjson dirty "$GIT_DIRTY" \
    --arg machine "$(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), kernel $(uname -r)" \
    --argjson cpus "$(nproc)" --arg busy "${BUSY_BEFORE:-?}" --arg backing "$BACKING_DESC" \
    --argjson reps "$REPS" --argjson runtime "$RUNTIME" --argjson size "$SIZE_MIB" --argjson storm "$STORM_FILES" \
    --argjson peers "$(printf '%s\n' "${ACTIVE[@]}" | jq -R . | jq -s .)" --argjson versions "$(versions_json)" \
    '{benchmark: "scaling", date: $date, command: $command, commit: $commit, dirty: $dirty, machine: $machine,
      cpus: $cpus, busy_before: $busy, backing: $backing, reps: $reps, runtime: $runtime, size_mib: $size,
      storm_files: $storm, peers: $peers, versions: $versions, rows: $rows}' >"$OUT/scaling.json"
render_md "$OUT/scaling.json" "$OUT/scaling.md"
cat "$OUT/scaling.md"
