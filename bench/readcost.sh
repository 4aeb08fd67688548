#!/usr/bin/env bash
# bench/readcost.sh — where a read's (or a fileserver operation's) time
# goes: warpfs on /dev/fuse beside bindfs (a FUSE passthrough without a
# cipher) on the same backing, with every CPU sampled while the job runs.
#
#   sudo bash bench/readcost.sh [--reps N] [--runtime S] [--size-mib M]
#        [--peers warpfs-dev,bindfs] [--jobs seqread,randread,fileserver] [--bs 1m,128k]
#        [--backing tmpfs|disk] [--out DIR]
#   bash bench/readcost.sh --render bench/results/DATE-readcost/readcost.json   (redo the .md)
#
# Per peer: a backing dir, a volume, a mount and a read file of --size-mib
# (bench/lib-peers.sh). Per repetition, job, block size and peer
# (interleaved): unmount + drop_caches + mount, then the job under
# `perf record -a` (the cpu-clock event at $PERF_HZ Hz on every CPU, idle
# included): seqread and randread are fio reads of the file (psync,
# iodepth 1, direct=0, one job, time based, --runtime s) in requests of
# each --bs; fileserver is bench/macro.py's mix (500 files, one thread,
# --runtime s; its fileset made before the mount is cycled, untimed).
# bench/readcost_report.py puts each sample in one bucket by its command
# and symbol: the cipher (warpfs-crypto's functions), copies (the kernel's
# and libc's copy routines: copy_to_user and kin, memcpy, memmove), the
# rest of the daemon, the rest of the kernel, the client (fio, or Python
# for the mix), other threads and idle; a bucket's cost per unit is its
# samples / PERF_HZ over the MiB fio read (per operation for the mix).
# The sum over the buckets but idle is the CPU time a unit takes; wall
# time per unit is 1 / throughput. No pinning (FS_CPUS, CLIENT_CPUS pin
# anyway). Defaults: seqread, 3 repetitions x 5 s, 512 MiB read file.
# Output: --out (default bench/results/DATE-readcost)/readcost.json and
# .md; perf samples and job output in target/bench/readcost-raw/.
set -euo pipefail

WF_NAME="readcost"
# shellcheck source=bench/lib-peers.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-peers.sh"

PY=/usr/bin/python3
render_md() { "$PY" "$BENCH/readcost_report.py" --render "$1"; }

PEERS="warpfs-dev,bindfs"
REPS=3 RUNTIME=5 SIZE_MIB=512 OUT="" RENDER="" BSES="1m,128k" JOBS="seqread"
PERF_HZ="${PERF_HZ:-1999}"
while (($#)); do
    case "$1" in
    --bs) BSES="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
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
IFS=, read -ra JOB_LIST <<<"$JOBS"
# sampled P BASE CMD... — CMD under perf on every CPU; its samples by
# command, object and symbol into BASE.tsv.
sampled() {
    local p="$1" base="$2"
    shift 2
    timeout -k 5 $((RUNTIME + 180)) perf record -q -a -F "$PERF_HZ" -o "$base.perf" -- "$@" \
        2>"$base.perf.err" || wf_die "$p: the job under perf failed ($(tail -n 3 "$base.perf.err"))"
    perf report -i "$base.perf" --stdio --no-children --sort comm,dso,sym -F sample,comm,dso,sym \
        -t $'\t' --percent-limit 0 2>/dev/null | grep -v '^#' | grep -v '^$' >"$base.tsv" || true
    rm -f "$base.perf"
}
for ((rep = 1; rep <= REPS; rep++)); do
    for job in "${JOB_LIST[@]}"; do
        case "$job" in
        seqread | randread) sizes=("${BS_LIST[@]}") ;;
        fileserver) sizes=(-) ;;
        *) wf_die "unknown job $job (seqread, randread, fileserver)" ;;
        esac
        for bs in "${sizes[@]}"; do
            for p in "${ACTIVE[@]}"; do
                m="$WORK/$p/mnt"
                if [[ $job == fileserver ]]; then
                    t rm -rf "$m/fs"
                    t "$PY" "$BENCH/macro.py" create fileserver "$m/fs" --nfiles 500 --seed "$rep" >/dev/null ||
                        wf_die "$p: fileserver setup failed"
                fi
                remount_cold "$p"
                base="$RAW/$p-$job-$bs-$rep"
                if [[ $job == fileserver ]]; then
                    sampled "$p" "$base" "${FIO_PIN[@]}" "$PY" "$BENCH/macro.py" run fileserver "$m/fs" \
                        --nfiles 500 --threads 1 --seconds "$RUNTIME" --seed "$rep" >"$base.out"
                    tail -n 1 "$base.out" >"$base.json"
                    t rm -rf "$m/fs"
                    wf_log "rep $rep/$REPS $p fileserver: $(jq '.ops_s | floor' "$base.json") ops/s"
                else
                    rw=read
                    [[ $job == randread ]] && rw=randread
                    sampled "$p" "$base" "${FIO_PIN[@]}" fio --name="$job-$bs" --filename="$m/read.dat" \
                        --rw="$rw" --bs="$bs" --size="${SIZE_MIB}m" --ioengine=psync --iodepth=1 --numjobs=1 \
                        --direct=0 --invalidate=1 --time_based --runtime="$RUNTIME" --output-format=json \
                        --output="$base.json" >/dev/null
                    wf_log "rep $rep/$REPS $p $job-$bs: $(jq '.jobs[0].read.bw_bytes / 1048576 | floor' "$base.json") MiB/s"
                fi
                printf '%s\t%s\t%s\t%s\t%s\n' "$p" "$job" "$bs" "$rep" "$base" >>"$LIST"
            done
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
