#!/usr/bin/env bash
# bench/transport.sh — warpfs through FUSE over io_uring vs through /dev/fuse,
# with its kernel caches on and off (--shared-storage), vs gocryptfs, securefs
# and bindfs (a FUSE pass-through without crypto), side by side in one run:
# reads, writes, metadata, small files, the filebench-like mixes.
#
#   sudo bash bench/transport.sh [--quick] [--reps N] [--runtime S] [--size-mib M]
#        [--peers warpfs-uring,warpfs-dev,warpfs-uring-shared,warpfs-uring-farwake,warpfs-dev-shared,gocryptfs,securefs,bindfs]
#        [--jobs randread-4k,...] [--backing tmpfs|disk] [--out DIR]
#   bash bench/transport.sh --render bench/results/DATE-transport/transport.json     (redo .md and plot)
#
# Per peer: a tmpfs backing dir (--backing disk: a directory under DISK_DIR,
# default /var/tmp, which must not be a tmpfs), a new volume, a mount, a round trip check
# (bench/lib-peers.sh), a read file of --size-mib. Jobs, each after
# unmount + drop_caches + mount, peers interleaved within every repetition:
#   fio (psync, iodepth 1, direct=0, time based, --runtime s):
#     randread-4k, randread-4k-4j (4 jobs), seqread-128k, seqread-1m on the
#     read file; seqwrite-1m to a new file and randwrite-4k over the read
#     file (end_fsync);
#   storm: create+close, stat, unlink of 3,000 files (bench/meta.py);
#   tree: a source-like tree of 4,000 files (mean 8 KiB, 40 per directory,
#     made once by bench/meta.py, tarred on a tmpfs): untar, then
#     (remounted cold each) ls -lR, reread (read every file twice, time the
#     second pass: re-reading unchanged files), rm-rf;
#   fileserver, webserver: bench/macro.py (filebench's personalities),
#     1 thread, MACRO_SECS (default 5) s.
# Numbers: MiB/s (fio) or operations per second (files per second for the
# tree steps), median of the repetitions; daemon CPU per operation from
# /proc/PID/stat (all threads).
# Placement: no pinning by default. FUSE over io_uring serves each request on
# the CPU of its caller (one queue thread per CPU); pinning the daemons to one
# CPU (the other benchmarks' default) would defeat it, so every peer's daemon
# and every client may run on any CPU here (FS_CPUS, CLIENT_CPUS: taskset
# lists to pin them anyway; recorded in the JSON).
# enable_uring: the warpfs-uring peers mount with --transport uring, served
# only while /sys/module/fuse/parameters/enable_uring is on; this script
# turns it on for its run (as root) and puts it back as it found it at exit.
# Defaults: 3 repetitions x 5 s per fio job, 512 MiB read file; --quick: 3 x 3 s,
# 256 MiB. Output: --out (default bench/results/DATE-transport, DATE the UTC day)/transport.json, .md and
# transport.png (bench/transport_report.py; plots need python3-matplotlib);
# raw fio JSON and daemon logs in target/bench/transport-raw/.
set -euo pipefail

WF_NAME="transport"
# shellcheck source=bench/lib-peers.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-peers.sh"

PY=/usr/bin/python3 # Debian's, where python3-matplotlib is
render_md() { "$PY" "$BENCH/transport_report.py" "$1" "$2"; }

PEERS="warpfs-uring,warpfs-dev,warpfs-uring-shared,warpfs-uring-farwake,gocryptfs,securefs,bindfs"
REPS=3 RUNTIME=5 SIZE_MIB=512 OUT="" RENDER="" JOBS=""
MACRO_SECS="${MACRO_SECS:-5}"
while (($#)); do
    case "$1" in
    --jobs) JOBS="$2"; shift 2 ;;
    --quick) RUNTIME=3 SIZE_MIB=256; shift ;;
    *) parse_common "$@"; shift "$NARGS" ;;
    esac
done
[[ -z $RENDER ]] || render_only "$RENDER"
OUT="${OUT:-$BENCH/results/$(date -u +%F)-transport}"

# No pinning unless asked (see the header).
export FS_CPUS="${FS_CPUS:-0-$(($(nproc) - 1))}"
CLIENT_CPUS="${CLIENT_CPUS:-0-$(($(nproc) - 1))}"
preflight "tmpfs mounts, drop_caches, enable_uring"
FIO_PIN=(taskset -c "$CLIENT_CPUS")
CPIN=(taskset -c "$CLIENT_CPUS")
wf_ensure python3-matplotlib || wf_warn "no python3-matplotlib: tables and JSON only, no plot"

wf_uring_on
# Put it back if anything below dies before the full EXIT trap is set.
trap wf_uring_restore EXIT

load_peers "$PEERS" peer_missing_warn

ALL_JOBS=(
    "randread-4k fio randread 4k 1" "randread-4k-4j fio randread 4k 4" "seqread-128k fio read 128k 1"
    "seqread-1m fio read 1m 1" "seqwrite-1m fio write 1m 1" "randwrite-4k fio randwrite 4k 1"
    "storm meta - - -" "tree meta - - -" "fileserver macro - - -" "webserver macro - - -"
)
JOBLIST=()
for j in "${ALL_JOBS[@]}"; do
    if [[ -z $JOBS || ",$JOBS," == *",${j%% *},"* ]]; then JOBLIST+=("$j"); fi
done
((${#JOBLIST[@]})) || wf_die "no job selected"

work_setup transport
restore_uring() {
    local rc=$?
    set +e
    wf_uring_restore
    umount "$WORK/tree-src" 2>/dev/null
    (exit "$rc")
    cleanup
}
trap restore_uring EXIT

measure_busy_before
git_state
TREE_FILES=4000 STORM_FILES=3000
TREE="$WORK/tree-src"
mkdir -p "$TREE"
mount -t tmpfs -o size=256m "transport-tree" "$TREE"
"$PY" "$BENCH/meta.py" tree "$TREE/t" --files "$TREE_FILES" --seed 1 >"$WORK/tree.json"
tar -C "$TREE" -cf "$TREE/tree.tar" t
rm -rf "${TREE:?}/t"
wf_log "peers: ${ACTIVE[*]}; ${#JOBLIST[@]} jobs x $REPS rep(s); fio ${RUNTIME}s, file ${SIZE_MIB} MiB; daemons on CPUs $FS_CPUS, clients on $CLIENT_CPUS"

for p in "${ACTIVE[@]}"; do peer_setup "$p"; done

mkdir -p "$OUT"
ROWS="$WORK/rows.jsonl"
: >"$ROWS"

# row P REP JOB VALUE UNIT OPS CPU — one measurement into $ROWS.
row() {
    jq -c -n --arg peer "$1" --argjson rep "$2" --arg job "$3" --argjson value "$4" --arg unit "$5" \
        --argjson ops "$6" --argjson cpu "$7" \
        '{peer: $peer, rep: $rep, job: $job, value: ($value * 10 | round / 10), unit: $unit, ops: $ops,
          daemon_cpu_s: $cpu, cpu_us_per_op: (if $ops > 0 then ($cpu / $ops * 1e6 | round) else null end)}' >>"$ROWS"
    printf '[transport] rep %d/%d %-16s %-20s %10.1f %s (daemon %ss)\n' "$2" "$REPS" "$3" "$1" "$4" "$5" "$7" >&2
}

# timed P REP JOB UNIT OPS CMD... — run CMD on P's mount, time it; the row's
# value is OPS per second.
timed() {
    local p="$1" rep="$2" job="$3" unit="$4" ops="$5" c0 c1 t0 t1
    shift 5
    c0=$(cpu_seconds "${PID[$p]}")
    t0=$(date +%s.%N)
    t "${CPIN[@]}" "$@" >/dev/null || wf_die "$p: $job failed"
    t1=$(date +%s.%N)
    c1=$(cpu_seconds "${PID[$p]}")
    row "$p" "$rep" "$job" "$(awk -v o="$ops" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", o / (b - a) }')" \
        "$unit" "$ops" "$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')"
}

# py_timed P REP JOB UNIT CMD... — CMD prints {"ops", "ops_s"}; that is the row.
py_timed() {
    local p="$1" rep="$2" job="$3" unit="$4" c0 c1 out
    shift 4
    c0=$(cpu_seconds "${PID[$p]}")
    out="$(t "${CPIN[@]}" "$@")" || wf_die "$p: $job failed"
    c1=$(cpu_seconds "${PID[$p]}")
    out="$(tail -n 1 <<<"$out")"
    row "$p" "$rep" "$job" "$(jq .ops_s <<<"$out")" "$unit" "$(jq .ops <<<"$out")" \
        "$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')"
}

fio_run() {
    local p="$1" rep="$2" job="$3" rw="$4" bs="$5" nj="$6" file=read.dat extra=() json c0 c1 dir mib ops
    [[ $rw == write ]] && { file=write.dat; t rm -f "$WORK/$p/mnt/$file"; }
    [[ $rw == *write ]] && extra=(--end_fsync=1)
    json="$RAW/$p-$job-$rep.json"
    c0=$(cpu_seconds "${PID[$p]}")
    timeout -k 5 $((RUNTIME + 180)) "${FIO_PIN[@]}" fio --name="$job" --filename="$WORK/$p/mnt/$file" \
        --rw="$rw" --bs="$bs" --size="${SIZE_MIB}m" --ioengine=psync --iodepth=1 --numjobs="$nj" \
        --group_reporting --direct=0 --invalidate=1 --fallocate=none --time_based --runtime="$RUNTIME" \
        "${extra[@]}" --output-format=json --output="$json" ||
        wf_die "$p: fio $job failed"
    c1=$(cpu_seconds "${PID[$p]}")
    dir=read
    [[ $rw == *write ]] && dir=write
    mib=$(jq ".jobs[0].$dir.bw_bytes / 1048576" "$json")
    ops=$(jq ".jobs[0].$dir.total_ios" "$json")
    row "$p" "$rep" "$job" "$mib" "MiB/s" "$ops" "$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')"
}

tree_steps() {
    local p="$1" rep="$2" m="$WORK/$1/mnt"
    t rm -rf "$m/t"
    remount_cold "$p"
    timed "$p" "$rep" untar files/s "$TREE_FILES" tar -xf "$TREE/tree.tar" -C "$m"
    remount_cold "$p"
    timed "$p" "$rep" ls-lR files/s "$TREE_FILES" ls -lR "$m/t"
    remount_cold "$p"
    py_timed "$p" "$rep" reread files/s "$PY" "$BENCH/meta.py" reread "$m/t"
    remount_cold "$p"
    timed "$p" "$rep" rm-rf files/s "$TREE_FILES" rm -rf "$m/t"
}

macro_run() {
    local p="$1" rep="$2" pers="$3" m="$WORK/$1/mnt" n
    n=500
    [[ $pers == webserver ]] && n=200
    t rm -rf "$m/$pers"
    t "${CPIN[@]}" "$PY" "$BENCH/macro.py" create "$pers" "$m/$pers" --nfiles "$n" --seed "$rep" >/dev/null ||
        wf_die "$p: $pers setup failed"
    remount_cold "$p"
    py_timed "$p" "$rep" "$pers" ops/s "$PY" "$BENCH/macro.py" run "$pers" "$m/$pers" --nfiles "$n" \
        --threads 1 --seconds "$MACRO_SECS" --seed "$rep"
    t rm -rf "$m/$pers"
}

one_job() {
    local p="$1" rep="$2" job="$3" kind="$4" rw="$5" bs="$6" nj="$7"
    case "$kind" in
    fio) fio_run "$p" "$rep" "$job" "$rw" "$bs" "$nj" ;;
    meta)
        if [[ $job == storm ]]; then
            mkdir -p "$WORK/$p/mnt/storm"
            py_timed "$p" "$rep" storm ops/s "$PY" "$BENCH/meta.py" storm "$WORK/$p/mnt/storm" --files "$STORM_FILES"
        else
            tree_steps "$p" "$rep"
        fi
        ;;
    macro) macro_run "$p" "$rep" "$job" ;;
    esac
}

T0=$SECONDS
for ((rep = 1; rep <= REPS; rep++)); do
    for j in "${JOBLIST[@]}"; do
        read -r job kind rw bs nj <<<"$j"
        for p in "${ACTIVE[@]}"; do
            remount_cold "$p"
            one_job "$p" "$rep" "$job" "$kind" "$rw" "$bs" "$nj"
        done
    done
done
wf_log "measured in $((SECONDS - T0))s"

# Transport each warpfs peer reported (its log's mount line) and any panic.
NOTES="$WORK/notes.txt"
: >"$NOTES"
for p in "${ACTIVE[@]}"; do
    for f in "$WORK/$p"/daemon.log*; do
        [[ -f $f ]] || continue
        grep -h -o 'transport: [^)]*)' "$f" | sort -u | sed "s|^|$p: |" >>"$NOTES" || true
        grep -h -i 'panick' "$f" | sed "s|^|$p: PANIC: |" >>"$NOTES" || true
    done
done
umount "$TREE" 2>/dev/null || true

jq -s \
    --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    --arg cpu "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)" \
    --argjson cores "$NCPU" --arg kernel "$(uname -r)" --argjson busy0 "$BUSY_BEFORE" \
    --arg commit "$GIT_COMMIT" --argjson dirty "$GIT_DIRTY" --arg fio "$(fio --version)" \
    --argjson runtime "$RUNTIME" --argjson reps "$REPS" --argjson size "$SIZE_MIB" \
    --argjson tree "$(cat "$WORK/tree.json")" --argjson storm "$STORM_FILES" --argjson msecs "$MACRO_SECS" \
    --arg fs_cpus "$FS_CPUS" --arg client_cpus "$CLIENT_CPUS" --arg margs "${WARPFS_MOUNT_ARGS:-}" \
    --arg backing "$BACKING_DESC" --arg session "$(daemon_session)" \
    --argjson versions "$(versions_json)" --rawfile notes "$NOTES" '
    . as $rows | {
        benchmark: "transport", date: $date,
        machine: {cpu_model: $cpu, cores: $cores, kernel: $kernel, cpu_busy_pct_before: $busy0},
        git: {commit: $commit, dirty: $dirty},
        settings: {backing: $backing, file_mib: $size, runtime_s: $runtime, repetitions: $reps, fio: $fio,
                   tree: $tree, storm_files: $storm, macro_seconds: $msecs, warpfs_mount_args: $margs,
                   cold: "unmount + drop_caches + mount before every job and tree step",
                   pinning: {daemon_cpus: $fs_cpus, client_cpus: $client_cpus, tool: "taskset"},
                   daemon_session: $session},
        notes: ($notes | split("\n") | map(select(length > 0))),
        results: ($rows | group_by([.peer, .job]) | map({
            peer: .[0].peer, version: $versions[.[0].peer], job: .[0].job, unit: .[0].unit,
            value: map(.value), daemon_cpu_s: map(.daemon_cpu_s), cpu_us_per_op: map(.cpu_us_per_op)}))
    }' "$ROWS" >"$OUT/transport.json"
render_md "$OUT/transport.json" "$OUT/transport.md"
cat "$OUT/transport.md"
wf_log "wrote ${OUT#"$WF_REPO"/}/transport.json, .md and .png"
