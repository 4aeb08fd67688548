#!/usr/bin/env bash
# bench/readcost.sh — where a sequential read's time goes, per MiB read:
# warpfs on /dev/fuse beside bindfs (a FUSE passthrough without a cipher) on
# the same backing, with every CPU sampled while fio reads.
#
#   sudo bash bench/readcost.sh [--reps N] [--runtime S] [--size-mib M]
#        [--peers warpfs-dev,bindfs] [--bs 1m,128k] [--backing tmpfs|disk] [--out DIR]
#   bash bench/readcost.sh --render bench/results/DATE-readcost/readcost.json   (redo the .md)
#
# Per peer: a backing dir, a volume, a mount and a read file of --size-mib
# (bench/lib-peers.sh). Per repetition, block size and peer (interleaved):
# unmount + drop_caches + mount, then fio reads the file sequentially (psync,
# iodepth 1, direct=0, one job, time based, --runtime s) under
# `perf record -a` (the cpu-clock event at $PERF_HZ Hz on every CPU, idle
# included). bench/readcost_report.py puts each sample in one bucket by its
# command and symbol: the cipher (warpfs-crypto's functions), copies (the
# kernel's and libc's copy routines: copy_to_user and kin, memcpy, memmove),
# the rest of the daemon, the rest of the kernel, the client (fio) and idle;
# a bucket's cost per MiB is its samples / PERF_HZ over the MiB fio read.
# The sum over the buckets but idle is the CPU time one MiB takes; wall time
# per MiB is 1 / throughput. No pinning (FS_CPUS, CLIENT_CPUS pin anyway).
# Defaults: 3 repetitions x 5 s, 512 MiB read file. Output: --out (default
# bench/results/DATE-readcost)/readcost.json and .md; perf data and fio JSON
# in target/bench/readcost-raw/.
set -euo pipefail

WF_NAME="readcost"
# shellcheck source=bench/lib-peers.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-peers.sh"

PY=/usr/bin/python3
render_md() { "$PY" "$BENCH/readcost_report.py" --render "$1"; }

PEERS="warpfs-dev,bindfs"
REPS=3 RUNTIME=5 SIZE_MIB=512 OUT="" RENDER="" BSES="1m,128k"
PERF_HZ="${PERF_HZ:-1999}"
while (($#)); do
    case "$1" in
    --bs) BSES="$2"; shift 2 ;;
    *) parse_common "$@"; shift "$NARGS" ;;
    esac
done
[[ -z $RENDER ]] || render_only "$RENDER"
OUT="${OUT:-$BENCH/results/$(date -u +%F)-readcost}"

export FS_CPUS="${FS_CPUS:-0-$(($(nproc) - 1))}"
CLIENT_CPUS="${CLIENT_CPUS:-0-$(($(nproc) - 1))}"
preflight "tmpfs mounts, drop_caches, perf"
FIO_PIN=(taskset -c "$CLIENT_CPUS")
wf_ensure perf:linux-perf || wf_die "perf is missing"
load_peers "$PEERS" peer_missing_warn
work_setup readcost
measure_busy_before
git_state

for p in "${ACTIVE[@]}"; do peer_setup "$p"; done
mkdir -p "$OUT"
LIST="$RAW/runs.tsv"
: >"$LIST"

IFS=, read -ra BS_LIST <<<"$BSES"
for ((rep = 1; rep <= REPS; rep++)); do
    for bs in "${BS_LIST[@]}"; do
        for p in "${ACTIVE[@]}"; do
            remount_cold "$p"
            base="$RAW/$p-$bs-$rep"
            timeout -k 5 $((RUNTIME + 180)) perf record -q -a -F "$PERF_HZ" -o "$base.perf" -- \
                "${FIO_PIN[@]}" fio --name="seqread-$bs" --filename="$WORK/$p/mnt/read.dat" --rw=read \
                --bs="$bs" --size="${SIZE_MIB}m" --ioengine=psync --iodepth=1 --numjobs=1 --direct=0 \
                --invalidate=1 --time_based --runtime="$RUNTIME" --output-format=json --output="$base.json" \
                >/dev/null 2>"$base.perf.err" || wf_die "$p: fio under perf failed ($(tail -n 3 "$base.perf.err"))"
            # comm, dso, symbol and sample count of every sampled place.
            perf report -i "$base.perf" --stdio --no-children --sort comm,dso,sym -F sample,comm,dso,sym \
                -t $'\t' --percent-limit 0 2>/dev/null | grep -v '^#' | grep -v '^$' >"$base.tsv" || true
            rm -f "$base.perf"
            printf '%s\t%s\t%s\t%s\n' "$p" "$bs" "$rep" "$base" >>"$LIST"
            wf_log "rep $rep/$REPS $p seqread-$bs: $(jq '.jobs[0].read.bw_bytes / 1048576 | floor' "$base.json") MiB/s"
        done
    done
done

"$PY" "$BENCH/readcost_report.py" --build "$LIST" "$OUT/readcost.json" \
    --meta "$(jq -c -n \
        --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
        --arg cpu "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)" \
        --argjson cores "$NCPU" --arg kernel "$(uname -r)" --argjson busy0 "$BUSY_BEFORE" \
        --arg commit "$GIT_COMMIT" --argjson dirty "$GIT_DIRTY" --arg fio "$(fio --version)" \
        --argjson runtime "$RUNTIME" --argjson reps "$REPS" --argjson size "$SIZE_MIB" --argjson hz "$PERF_HZ" \
        --arg backing "$BACKING_DESC" --arg fs_cpus "$FS_CPUS" --arg client_cpus "$CLIENT_CPUS" \
        --arg margs "${WARPFS_MOUNT_ARGS:-}" --argjson versions "$(versions_json)" '
        {date: $date, machine: {cpu_model: $cpu, cores: $cores, kernel: $kernel, cpu_busy_pct_before: $busy0},
         git: {commit: $commit, dirty: $dirty},
         settings: {backing: $backing, file_mib: $size, runtime_s: $runtime, repetitions: $reps, fio: $fio,
                    perf_hz: $hz, warpfs_mount_args: $margs,
                    pinning: {daemon_cpus: $fs_cpus, client_cpus: $client_cpus}},
         versions: $versions}')"
cat "$OUT/readcost.md"
wf_log "wrote ${OUT#"$WF_REPO"/}/readcost.json and .md"
