#!/usr/bin/env bash
# bench/xchacha.sh — ciphers without AES hardware on a default mount, side
# by side in one run: warpfs XChaCha20-Poly1305 vs gocryptfs -xchacha
# (Debian's gocryptfs) vs warpfs AES-GCM with software AES
# (WARPFS_NO_AESNI=1) vs warpfs Twofish-GCM, with warpfs AES-GCM on AES-NI
# as the transport's ceiling, and warpfs XChaCha20-Poly1305 with
# `--speculation on` (the policy auto does not pick below 4 cores).
#
#   sudo bash bench/xchacha.sh [--reps N] [--runtime S] [--size-mib M] [--out DIR] [--policy]
#   python3 bench/xchacha_report.py DIR      (redo DIR/xchacha*.md from the JSON)
#
# No hand placement: fio and every daemon may run on every CPU (taskset
# over all of them, i.e. none), each daemon in a session of its own
# (bench/lib-peers.sh), every mount as `warpfs mount` makes it without
# options, on the transport this machine gives a default mount (FUSE over
# io_uring when /sys/module/fuse/parameters/enable_uring is Y, which this
# script leaves as it finds it and records). Jobs (fio psync, iodepth 1,
# time based, cold cache before each: unmount, drop caches, mount):
#   seqread-128k, randread-4k on a read file of --size-mib;
#   seqwrite-128k to a new file, randwrite-4k over the read file (end_fsync);
#   untar: `tar -xf` of an uncompressed tar of /usr/include (on tmpfs,
#   outside the mount) into the mount, then `sync`, timed; MB/s = the
#   tar's size / seconds.
# Repetitions interleave the peers. The per-core rates come from `warpfs
# speed --json` run at the start of each repetition (DIR/speed-REP.json;
# DIR/speed.json before the first).
# Goals (bench/xchacha_report.py marks each row met or unmet):
#   seqread/seqwrite of warpfs-xchacha, warpfs-twofish and warpfs-softaes
#   >= 80% of min(per-core rate x cores, the same job on warpfs AES-NI gcm);
#   every job of warpfs-xchacha >= 1.5x gocryptfs-xchacha.
# --policy: instead, speculation on against off (decrypt-ahead on in both,
#   as on any 2+ core mount) for the three slow ciphers, each policy the
#   auto one or the one it did not pick (peers warpfs-xchacha and
#   -xchacha-specon, warpfs-{twofish,softaes} and -specoff), sequential
#   jobs only -> DIR/xchacha-policy.{json,md}.
# Defaults: 3 reps x 5 s, a 256 MiB file; about 25 minutes on 2 cores
# (--policy: about 8). Output: DIR (default bench/results/DATE-xchacha)/
# xchacha.{json,md} with the command line; raw fio JSON and daemon logs in
# target/bench/xchacha-raw/.
set -euo pipefail
WF_NAME=xchacha
# shellcheck source=bench/lib-peers.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-peers.sh"

CMDLINE="sudo bash bench/xchacha.sh $*"
PEERS="warpfs-xchacha,gocryptfs-xchacha,warpfs-softaes,warpfs-twofish,warpfs,warpfs-xchacha-specon" REPS=3 RUNTIME=5 SIZE_MIB=256
OUT="$BENCH/results/$(date -u +%F)-xchacha" RENDER="" POLICY=false
while (($#)); do
    case "$1" in
    --policy) POLICY=true; shift ;;
    *) parse_common "$@"; shift "$NARGS" ;;
    esac
done
NAME=xchacha
JOBLIST=("seqread-128k read 128k read.dat" "seqwrite-128k write 128k seq.dat"
    "randread-4k randread 4k read.dat" "randwrite-4k randwrite 4k read.dat" "untar untar - tree.tar")
if $POLICY; then
    NAME=xchacha-policy
    PEERS="warpfs-xchacha,warpfs-xchacha-specon,warpfs-twofish,warpfs-twofish-specoff,warpfs-softaes,warpfs-softaes-specoff"
    JOBLIST=("seqread-128k read 128k read.dat" "seqwrite-128k write 128k seq.dat")
fi

# No hand placement.
ALL_CPUS="0-$(($(nproc) - 1))"
FIO_CPU="$ALL_CPUS" FS_CPUS="$ALL_CPUS" ENGINE_CPUS=none
export WARPFS_MODE=gcm
preflight "tmpfs mounts, drop_caches, warpfs stats"
load_peers "$PEERS" peer_missing_die
work_setup xchacha
URING_BEFORE="$(cat /sys/module/fuse/parameters/enable_uring 2>/dev/null || echo absent)"
measure_busy_before
git_state
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"

TREE_SRC=/usr/include
tar -cf "$WORK/tree.tar" -C "$(dirname "$TREE_SRC")" "$(basename "$TREE_SRC")"
TREE_BYTES=$(stat -c %s "$WORK/tree.tar")
TREE_FILES=$(tar -tf "$WORK/tree.tar" | wc -l)

for p in "${ACTIVE[@]}"; do peer_setup "$p"; done
mkdir -p "$OUT"
"$WARPFS_PEER_BIN" speed --json --time-ms 300 >"$OUT/speed.json"

engine_stats() {
    case "$1" in
    warpfs*) t "$WARPFS_PEER_BIN" stats --json "$WORK/$1/mnt" 2>/dev/null || echo null ;;
    *) echo null ;;
    esac
}

ROWS="$WORK/rows.jsonl"
: >"$ROWS"
T0=$SECONDS
# one_job P REP NAME RW BS FILE — one measurement, a line in $ROWS. The
# first job of a repetition measures the per-core rates first
# ($OUT/speed-REP.json), so each repetition is judged against the load it
# ran under.
one_job() {
    local p="$1" rep="$2" jname="$3" rw="$4" bs="$5" file="$6" json s0 s1 dir mbs cpu0 cpu1 t0 t1
    if [[ $p == "${ACTIVE[0]}" && $jname == "${JOBLIST[0]%% *}" ]]; then
        "$WARPFS_PEER_BIN" speed --json --time-ms 200 >"$OUT/speed-$rep.json"
    fi
    s0="$(engine_stats "$p")"
    if [[ $rw == untar ]]; then
        cpu0=$(cpu_seconds "${PID[$p]}")
        t0=$(date +%s.%N)
        t tar -xf "$WORK/$file" -C "$WORK/$p/mnt" || wf_die "$p: untar failed"
        # sync(1) of everything: `sync -f` (syncfs) of a warpfs mount fails
        # with ENOENT after an untar (a bug of its own), and every peer gets
        # the same.
        t sync
        t1=$(date +%s.%N)
        cpu1=$(cpu_seconds "${PID[$p]}")
        JOB_CPU=$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { printf "%.2f", b - a }')
        mbs=$(awk -v n="$TREE_BYTES" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", n / (b - a) / 1e6 }')
        t rm -rf "$WORK/$p/mnt/$(basename "$TREE_SRC")"
    else
        local extra=()
        [[ $rw == write || $rw == randwrite ]] && extra=(--end_fsync=1)
        [[ $jname == seqwrite-* ]] && t rm -f "$WORK/$p/mnt/$file"
        json="$RAW/$p-$jname-$rep.json"
        fio_job "$p" "$jname" "$rw" "$bs" "$file" "$json" $((RUNTIME + 180)) "${extra[@]}"
        dir=read
        [[ $rw == *write ]] && dir=write
        mbs=$(jq -r --arg d "$dir" '.jobs[0][$d].bw_bytes / 1e6 * 10 | round / 10' "$json")
    fi
    s1="$(engine_stats "$p")"
    jq -c -n --arg peer "$p" --arg job "$jname" --argjson rep "$rep" --argjson mbs "$mbs" \
        --argjson cpu "$JOB_CPU" --argjson s0 "$s0" --argjson s1 "$s1" '
        {peer: $peer, job: $job, rep: $rep, mb_s: $mbs, daemon_cpu_s: $cpu,
         engine: (if $s0 == null or $s1 == null then null else
           {speculation: $s1.speculation, speculation_why: $s1.speculation_why,
            ahead_threads: ($s1.ahead_threads // null), read_ahead: ($s1.read_ahead // null),
            ready_hits: ($s1.ready_hits - $s0.ready_hits), applies: ($s1.applies - $s0.applies),
            inline: ($s1.inline - $s0.inline), waits: ($s1.waits - $s0.waits),
            ahead_served: (($s1.ahead_served // 0) - ($s0.ahead_served // 0)),
            ahead_inline: (($s1.ahead_inline // 0) - ($s0.ahead_inline // 0))} end)}' >>"$ROWS"
    printf '[xchacha] rep %d/%d %-14s %-24s %8.1f MB/s  (daemon CPU %ss)\n' "$rep" "$REPS" "$jname" "$p" "$mbs" "$JOB_CPU" >&2
}
run_jobs one_job "${JOBLIST[@]}"
wf_log "measured in $((SECONDS - T0))s"

PANICS="$WORK/panics.txt"
: >"$PANICS"
for p in "${ACTIVE[@]}"; do
    for f in "$WORK/$p"/daemon.log*; do
        [[ -f $f ]] && { grep -h -i "panick" "$f" | sed "s|^|$p: |" >>"$PANICS" || true; }
    done
done
URING_AFTER="$(cat /sys/module/fuse/parameters/enable_uring 2>/dev/null || echo absent)"
jq -s \
    --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg cmd "$CMDLINE" \
    --arg cpu "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)" \
    --argjson cores "$NCPU" --arg kernel "$(uname -r)" --argjson busy0 "$BUSY_BEFORE" --arg load0 "$LOAD_BEFORE" \
    --arg load1 "$(cut -d' ' -f1-3 /proc/loadavg)" \
    --argjson aes "$(flag aes)" --argjson avx2 "$(flag avx2)" \
    --arg commit "$GIT_COMMIT" --argjson dirty "$GIT_DIRTY" --arg fio "$(fio --version)" \
    --argjson runtime "$RUNTIME" --argjson reps "$REPS" --argjson size "$SIZE_MIB" \
    --arg uring0 "$URING_BEFORE" --arg uring1 "$URING_AFTER" --arg margs "${WARPFS_MOUNT_ARGS:-}" \
    --arg tree "$TREE_SRC" --argjson tree_bytes "$TREE_BYTES" --argjson tree_files "$TREE_FILES" \
    --arg session "$(daemon_session)" --argjson versions "$(versions_json)" \
    --slurpfile speed "$OUT/speed.json" --rawfile panics "$PANICS" \
    --slurpfile speeds <(for ((r = 1; r <= REPS; r++)); do cat "$OUT/speed-$r.json"; done) '
    . as $rows | {
        benchmark: "xchacha", date: $date, command: $cmd,
        machine: {cpu_model: $cpu, cores: $cores, kernel: $kernel, cpu_flags: {aes: $aes, avx2: $avx2},
                  cpu_busy_pct_before: $busy0, loadavg_before: $load0, loadavg_after: $load1},
        git: {commit: $commit, dirty: $dirty},
        settings: {backing: "tmpfs", file_mib: $size, runtime_s: $runtime, repetitions: $reps, fio: $fio,
                   ioengine: "psync", iodepth: 1, direct: 0, pinning: "none (fio and daemons on every CPU)",
                   daemon_session: $session, warpfs_mount_args: $margs,
                   enable_uring: {before: $uring0, after: $uring1},
                   untar: {tree: $tree, tar_bytes: $tree_bytes, entries: $tree_files},
                   cold_cache: "unmount + drop_caches + mount before every job"},
        speed: $speed[0], speed_per_rep: $speeds, versions: $versions,
        panics: ($panics | split("\n") | map(select(length > 0))),
        results: ($rows | group_by([.peer, .job]) | map({
            peer: .[0].peer, job: .[0].job, mb_s: map(.mb_s), daemon_cpu_s: map(.daemon_cpu_s),
            engine: (map(.engine) | if all(. == null) then null else . end)}))
    }' "$ROWS" >"$OUT/$NAME.json"
python3 "$BENCH/xchacha_report.py" "$OUT/$NAME.json"
cat "$OUT/$NAME.md"
wf_log "wrote ${OUT#"$WF_REPO"/}/$NAME.json and $NAME.md"
