#!/usr/bin/env bash
# bench/run.sh — the benchmark suite: warpfs against real peers, micro (fio)
# and macro (filebench-like personalities, gocryptfs's canonical benchmark)
# workloads, in one run. See bench/README.md.
#
#   sudo bash bench/run.sh quick|full [--peers LIST] [--reps N] [--out DIR]
#                         [--suites micro,macro] [--backings memory,disk]
#   python3 bench/report.py bench/results/DATE-quick/quick.json     (redo the .md and plots)
#
# Modes (everything in one run; quick fits in about 15 minutes on 2 cores):
#   quick  3 reps; micro on memory: seq write/read at 4k/64k/128k/1m, rand
#          write 4k, rand read 4k, 4-job seq read 1m and rand read 4k; on disk:
#          seq write/read 1m, rand read 4k; 128 MiB per job, capped at 1 s;
#          macro on memory: fileserver (500 files) and webserver (200 files)
#          at 1/2/4 threads, 1 s each; canonical benchmark with 50 MiB dd and a
#          1,100-file (18 MiB) subset of the Linux tree (kernel/ and lib/).
#   full   5 reps; micro on memory and disk: seq and rand, read and write, at
#          4k/64k/128k/1m, reads with 1 and 4 jobs; 1 GiB per job, capped at
#          20 s; macro on memory and disk: fileserver (10,000 files),
#          webserver (1,000 files), 1/2/4 threads, 30 s each; canonical
#          benchmark with 250 MiB dd and the whole Linux tree. Needs ~12 GiB
#          of free memory (tmpfs backings) and takes many hours (~8-12 h for
#          8 peers on 2 cores).
# Peers (bench/peers/NAME.sh; the interface is described in quick-fio.sh):
#   plain (the backing dir itself, no FUSE), bindfs, warpfs, warpfs-nocrypto
#   (WARPFS_NOCRYPTO_BIN), gocryptfs, encfs, cryfs, securefs. A peer that is
#   unavailable or fails its setup or a workload is skipped for the rest of
#   the run, and the reason is recorded in the results (never a silent gap).
# Per peer and backing ("memory": a tmpfs; "disk": a directory under
# $BENCH_DISK_DIR, default /var/tmp): a new volume, a mount, a 4 MiB random
# probe and a marker file, the read file, unmount. Every later mount is
# verified before anything is measured on it: caches dropped before it, the
# probe and marker read back intact (a round trip through unmount and a cold
# cache), and, the first time, for crypto peers, the marker must not appear
# in plaintext in the backing dir.
# Micro: per repetition and backing, for each peer (interleaved, so drift
#   hits all alike): write jobs, unmount, drop caches, mount, read jobs; the
#   mount then stays up for macro and the next repetition's write phase.
#   Caches are dropped before every job. fio psync, iodepth 1, direct=0; each
#   job moves the file size once (no looping over cached data) or stops at
#   the runtime cap; writes go to a new file (random writes overwrite the read
#   file in place) and end with fsync; 4-job reads split the file in quarters.
# Macro (memory in quick, both backings in full): bench/macro.py's fileserver
#   and webserver personalities at 1/2/4 threads (fileset created, untimed,
#   before each), then gocryptfs's canonical benchmark: dd write (conv=fsync)
#   and read of 128 KiB blocks, untar, md5sum -c, ls -lR, rm -rf of a tree
#   from Debian's linux-source (an uncompressed tar on a tmpfs, so untar is
#   not bound by decompression); caches dropped before every step.
# CPU: FS daemon CPU seconds (utime + stime of all its threads, from
#   /proc/PID/stat, before and after the job), client CPU seconds (the
#   children's rusage of the client: fio, the Python workers, tar...), total.
#   Efficiency = MiB moved per daemon CPU-second (the papers' "CPU utilisation
#   efficiency"; not defined for plain, which has no daemon).
# Pinning: none by default (every process where the scheduler puts it, as a
#   user runs it). BENCH_PIN=1 pins with taskset: clients on CPU $CLIENT_CPU
#   (default 0), daemons on $FS_CPUS (default 1; 0 on a 1-CPU machine).
# FUSE over io_uring: a peer named warpfs-uring* turns the kernel's
#   enable_uring on for the run and puts it back at the end.
# Output in --out (default bench/results/DATE-MODE, DATE the UTC day): MODE.json (machine, commit,
#   settings, skips, every repetition), MODE.md (medians, min–max, ratios to
#   gocryptfs and encfs), MODE-*.png; raw fio JSON and daemon logs in
#   target/bench/MODE-raw/ (not committed). Always unmounts (trap on EXIT).
set -euo pipefail

# shellcheck disable=SC2034 # read by scripts/lib.sh
WF_NAME=bench
# shellcheck source=bench/lib-measure.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-measure.sh"

MODE="${1:-}"
[[ $MODE == quick || $MODE == full ]] || {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 2
}
shift
PEERS="plain,bindfs,warpfs,warpfs-specon,warpfs-nocrypto,gocryptfs,encfs,cryfs,securefs"
OUT="" SUITES="micro,macro" BACKINGS="" REPS=""
while (($#)); do
    case "$1" in
    --peers) PEERS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --suites) SUITES="$2"; shift 2 ;;
    --backings) BACKINGS="$2"; shift 2 ;;
    *) wf_die "unknown argument $1 (see: bash bench/run.sh)" ;;
    esac
done
OUT="${OUT:-$BENCH/results/$(date -u +%F)-$MODE}"

# ---- mode settings -------------------------------------------------------------
# micro job: "name rw bs jobs" (name = workload id in the results)
if [[ $MODE == quick ]]; then
    REPS="${REPS:-3}" SIZE_MIB="${SIZE_MIB:-128}" RUNTIME="${RUNTIME:-1}"
    BACKINGS="${BACKINGS:-memory,disk}" MACRO_BACKINGS="memory"
    MACRO_SECS="${MACRO_SECS:-1}" FS_NFILES=500 WS_NFILES=200 DD_COUNT=400
    TREE_DIRS="kernel lib"
    MICRO_MEMORY=(
        "seqwrite write 4k 1" "seqwrite write 64k 1" "seqwrite write 128k 1" "seqwrite write 1m 1"
        "randwrite randwrite 4k 1"
        "seqread read 4k 1" "seqread read 64k 1" "seqread read 128k 1" "seqread read 1m 1"
        "randread randread 4k 1"
        "seqread read 1m 4" "randread randread 4k 4"
    )
    MICRO_DISK=("seqwrite write 1m 1" "seqread read 1m 1" "randread randread 4k 1")
else
    REPS="${REPS:-5}" SIZE_MIB="${SIZE_MIB:-1024}" RUNTIME="${RUNTIME:-20}"
    BACKINGS="${BACKINGS:-memory,disk}" MACRO_BACKINGS="memory disk"
    MACRO_SECS="${MACRO_SECS:-30}" FS_NFILES=10000 WS_NFILES=1000 DD_COUNT=2000
    TREE_DIRS=""
    MICRO_MEMORY=()
    for rw in write randwrite; do
        for bs in 4k 64k 128k 1m; do MICRO_MEMORY+=("${rw/#write/seqwrite} $rw $bs 1"); done
    done
    for j in 1 4; do
        for rw in read randread; do
            for bs in 4k 64k 128k 1m; do MICRO_MEMORY+=("${rw/#read/seqread} $rw $bs $j"); done
        done
    done
    MICRO_DISK=("${MICRO_MEMORY[@]}")
fi
THREADS=(1 2 4)
IFS=, read -ra BACKING_LIST <<<"$BACKINGS"
[[ ,$SUITES, == *,macro,* ]] || MACRO_BACKINGS=""
[[ ,$SUITES, == *,micro,* ]] || BACKING_LIST=()
# Backings that any suite needs (micro's list plus macro's).
NEEDED=()
for b in "${BACKING_LIST[@]}" $MACRO_BACKINGS; do
    [[ $b == memory || $b == disk ]] || wf_die "unknown backing $b"
    [[ " ${NEEDED[*]} " == *" $b "* ]] || NEEDED+=("$b")
done

wf_is_root || wf_die "needs root (tmpfs mounts, drop_caches, apt)"
[[ -c /dev/fuse ]] || wf_die "/dev/fuse is missing"

# ---- install -------------------------------------------------------------------
wf_ensure fio:fio jq:jq taskset:util-linux fusermount3:fuse3 md5sum:coreutils xz:xz-utils \
    || wf_die "missing tools"
wf_ensure python3-matplotlib || wf_warn "no python3-matplotlib: tables and JSON only, no plots"
PY=/usr/bin/python3 # Debian's, where python3-matplotlib is
TARBALL=""
if [[ ,$SUITES, == *,macro,* ]]; then
    shopt -s nullglob
    tb=(/usr/src/linux-source-*.tar.xz)
    if ((${#tb[@]} == 0)); then wf_ensure linux-source || wf_warn "could not install linux-source"; tb=(/usr/src/linux-source-*.tar.xz); fi
    shopt -u nullglob
    ((${#tb[@]})) && TARBALL="${tb[-1]}"
fi

NCPU=$(nproc)
CLIENT_CPU="${CLIENT_CPU:-0}"
if ((NCPU > 1)); then FS_CPUS="${FS_CPUS:-1}"; else FS_CPUS="${FS_CPUS:-0}"; fi
# Each daemon starts in a session of its own (setsid), as one that
# daemonizes or runs under systemd does: with autogroup scheduling a session
# is a scheduling group, and a daemon in the benchmark's session would share
# its client's (docs/decisions/0071-ring-readers-stay-on-their-cpu.md).
if [[ -z ${BENCH_PIN:-} ]]; then
    # shellcheck disable=SC2034 # PIN is used by bench/peers/*.sh
    PIN=(setsid) CPIN=() PINNING="none"
else
    # shellcheck disable=SC2034 # PIN is used by bench/peers/*.sh
    PIN=(setsid taskset -c "$FS_CPUS")
    CPIN=(taskset -c "$CLIENT_CPU")
    PINNING="taskset: clients on CPU $CLIENT_CPU, FS daemons on CPU(s) $FS_CPUS"
fi

# ---- work dirs, results, cleanup -------------------------------------------------
WORK="$(mktemp -d /tmp/warpfs-bench.XXXXXX)"
DISK="$(mktemp -d "${BENCH_DISK_DIR:-/var/tmp}/warpfs-bench.XXXXXX")"
RAW="$WF_REPO/target/bench/$MODE-raw"
rm -rf "$RAW"
mkdir -p "$RAW" "$OUT"
TSV="$RAW/results.tsv" SKIPS="$RAW/skips.tsv" META="$RAW/meta.tsv"
: >"$TSV"
: >"$SKIPS"
: >"$META"
meta() { printf '%s\t%s\n' "$1" "$2" >>"$META"; }

declare -A PID=() MNT=() VOL=() VERSION=() DEAD=() UP=() CHECKED=()
INSTANCES=() # "peer@backing"

# Anything touching a mount runs under a timeout: a stuck daemon must not hang
# the run (the EXIT trap then unmounts and kills it).
t() { timeout -k 5 300 "$@"; }

is_nofuse() { declare -F "$(fn "$1")_nofuse" >/dev/null && "$(fn "$1")_nofuse"; }

inst_umount() {
    local i="$1" p="${1%@*}"
    if declare -F "$(fn "$p")_umount" >/dev/null; then "$(fn "$p")_umount" "${MNT[$i]}"; else wf_unmount "${MNT[$i]}"; fi
    wf_stop_daemon "${PID[$i]:-}" 5
    PID[$i]=""
    UP[$i]=""
}

# inst_mount I — mount instance I; returns 1 (with the daemon's log) on failure.
inst_mount() {
    local i="$1" p="${1%@*}" d="$WORK/${1/@/.}"
    PEER_PID=""
    "$(fn "$p")_mount" "${VOL[$i]}" "${MNT[$i]}" "$d/passfile" "$d/daemon.log"
    PID[$i]="$PEER_PID"
    is_nofuse "$p" && return 0
    if ! wf_wait_mounted "${MNT[$i]}" 60 "$PEER_PID" || ! t stat "${MNT[$i]}" >/dev/null; then
        tail -n 20 "$d"/daemon.log* >&2 2>/dev/null || true
        return 1
    fi
}

# verify I — the round trip, on every mount before anything is measured: the
# random probe and the marker written at setup (through an earlier mount) read
# back intact after unmount + drop_caches; on the first check of a crypto
# peer, the plaintext marker must not appear in the backing dir.
verify() {
    local i="$1" p="${1%@*}" d="$WORK/${1/@/.}"
    t cmp -s "$d/probe" "${MNT[$i]}/probe" || { fail "$i" "round trip (probe data differs)"; return 1; }
    t grep -qx "$(cat "$d/marker.txt")" "${MNT[$i]}/marker.txt" || { fail "$i" "round trip (marker file)"; return 1; }
    if [[ -z ${CHECKED[$i]:-} ]] && "$(fn "$p")_crypto" && grep -rqaF "$(cat "$d/marker.txt")" "${VOL[$i]}"; then
        fail "$i" "plaintext check (marker found in the backing dir)"
        return 1
    fi
    CHECKED[$i]=1
}

# up I — make sure I is mounted (cold: caches dropped first) and verified.
up() {
    local i="$1"
    [[ -n ${UP[$i]:-} ]] && return 0
    drop_caches
    inst_mount "$1" || { fail "$i" mount; return 1; }
    UP[$i]=1
    verify "$i"
}

# remount I — unmount, drop caches, mount, verify.
remount() {
    inst_umount "$1"
    up "$1"
}

# skip PEER WHAT REASON — record why a peer (or one of its instances) left the run.
skip() {
    printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$SKIPS"
    wf_warn "$1: $2: $3 — skipped from now on"
}

# fail I WHAT — instance I failed: unmount, record, never use it again.
fail() {
    local i="$1"
    set +e
    inst_umount "$i"
    set -e
    DEAD[$i]=1
    skip "${i%@*}" "${i#*@}" "$2 failed (log: ${RAW#"$WF_REPO"/}/${i/@/.}-daemon.log)"
}

cleanup() {
    local rc=$? i d f
    set +e
    for i in "${INSTANCES[@]}"; do
        inst_umount "$i"
        d="$WORK/${i/@/.}"
        for f in "$d"/daemon.log* "$d"/init.log; do [[ -f $f ]] && cp "$f" "$RAW/${i/@/.}-${f##*/}"; done
        wf_unmount "$d/backing"
    done
    wf_unmount "$WORK/src"
    rm -rf "$WORK" "$DISK"
    wf_uring_restore
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[[ ,$PEERS, != *,warpfs-uring* ]] || wf_uring_on

# timed I CMD... — run CMD (pinned to the client CPU, under a timeout) against
# instance I; sets WALL (s), CLIENT (CPU s of CMD and its children) and DAEMON
# (CPU s of the FS daemon). The client's CPU is the rusage of the children a
# subshell waited for, read from its own /proc/PID/stat (cutime + cstime).
timed() {
    local i="$1" d0 d1 rc=0
    shift
    mounted "$i" || return 1
    d0=$(cpu_seconds "${PID[$i]}" 3)
    (
        s=$EPOCHREALTIME rc=0
        "${CPIN[@]}" timeout -k 5 $((RUNTIME * 4 + 600)) "$@" || rc=$?
        e=$EPOCHREALTIME
        read -r st <"/proc/$BASHPID/stat"
        st="${st##*) }"
        awk -v s="$s" -v e="$e" -v hz="$(getconf CLK_TCK)" \
            '{ printf "%.4f %.3f\n", e - s, ($14 + $15) / hz }' <<<"$st" >"$WORK/timed"
        exit "$rc"
    ) || rc=$?
    d1=$(cpu_seconds "${PID[$i]}" 3)
    read -r WALL CLIENT <"$WORK/timed"
    DAEMON=$(awk -v a="$d0" -v b="$d1" 'BEGIN { printf "%.3f", b - a }')
    # A daemon that died (or a mount that went away) during the step makes
    # its numbers meaningless: the step fails.
    mounted "$i" || return 1
    return "$rc"
}

# mounted I — I's mount is still there and its daemon alive (always true for
# peers without FUSE).
mounted() {
    local i="$1"
    is_nofuse "${i%@*}" && return 0
    wf_is_mounted "${MNT[$i]}" && [[ -n ${PID[$i]} ]] && kill -0 "${PID[$i]}" 2>/dev/null && return 0
    wf_warn "$i: the mount or its daemon is gone"
    return 1
}

# row SUITE I WORKLOAD BS JOBS REP VALUE UNIT BYTES — one result line.
row() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "${2%@*}" "${2#*@}" "$3" "$4" "$5" "$6" \
        "$7" "$8" "$9" "$WALL" "$DAEMON" "$CLIENT" >>"$TSV"
}

# ---- peers ---------------------------------------------------------------------
peer_missing() { skip "$1" setup "${2:-not available (package missing or binary not buildable; see the warnings above)}"; }
load_peers "$PEERS" peer_missing
for p in "${ACTIVE[@]}"; do
    VERSION[$p]="$("$(fn "$p")_version")"
    wf_log "$p: ${VERSION[$p]}"
done
# What else is using the CPUs now (after any warpfs build), before we start.
measure_busy_before

# ---- instances: volume, round trip, read file ------------------------------------
# setup_instance P B — sets up P on backing B; returns 1 on failure (recorded).
setup_instance() {
    local p="$1" b="$2" i="$1@$2" d="$WORK/$1.$2" base
    mkdir -p "$d/mnt"
    if [[ $b == memory ]]; then
        mkdir -p "$d/backing"
        mount -t tmpfs -o "size=$((SIZE_MIB * 3 + 4096))m" "bench-$p" "$d/backing"
        base="$d/backing"
    else
        base="$DISK/$p"
        mkdir -p "$base"
        ln -s "$base" "$d/disk"
    fi
    INSTANCES+=("$i")
    mkdir "$base/vol"
    VOL[$i]="$base/vol"
    if is_nofuse "$p"; then MNT[$i]="$base/vol"; else MNT[$i]="$d/mnt"; fi
    printf 'bench-%s-%s\n' "$p" "$RANDOM$RANDOM" >"$d/passfile"
    chmod 0600 "$d/passfile"
    "$(fn "$p")_init" "$base/vol" "$d/passfile" >"$d/init.log" 2>&1 || {
        cat "$d/init.log" >&2
        skip "$p" "$b" "init failed: $(tail -n 1 "$d/init.log")"
        DEAD[$i]=1
        return 1
    }
    inst_mount "$i" || { fail "$i" mount; return 1; }
    UP[$i]=1
    # Round-trip files, checked after every later mount (see verify).
    head -c $((4 << 20)) /dev/urandom >"$d/probe"
    printf 'warpfs-bench-plaintext-marker-%s\n' "$RANDOM$RANDOM$RANDOM" >"$d/marker.txt"
    t cp "$d/probe" "$d/marker.txt" "${MNT[$i]}/" || { fail "$i" "writing the round-trip files"; return 1; }
    if ((${#BACKING_LIST[@]})); then
        timeout -k 5 1200 "${CPIN[@]}" fio --name=layout --filename="${MNT[$i]}/rd.0" --rw=write --bs=1m \
            --size="${SIZE_MIB}m" --ioengine=psync --fallocate=none --end_fsync=1 \
            --output=/dev/null || { fail "$i" "writing the read file"; return 1; }
    fi
    inst_umount "$i"
    wf_log "$i: volume ready${BACKING_LIST[*]:+, ${SIZE_MIB} MiB read file written}"
}

for b in "${NEEDED[@]}"; do
    for p in "${ACTIVE[@]}"; do
        setup_instance "$p" "$b" || true
    done
done

alive() { [[ -z ${DEAD[$1]:-} ]] && [[ " ${INSTANCES[*]} " == *" $1 "* ]]; }

# ---- micro ---------------------------------------------------------------------
# fio_job I REP "name rw bs jobs"
fio_job() {
    local i="$1" rep="$2" name rw bs jobs wl json dir extra=() mib bytes
    read -r name rw bs jobs <<<"$3"
    wl="$name-$bs-j$jobs"
    json="$RAW/${i/@/.}-$wl-$rep.json"
    dir="read"
    if [[ $rw == write ]]; then
        dir="write"
        t rm -f "${MNT[$i]}/wr.0"
        extra=(--filename="${MNT[$i]}/wr.0" --end_fsync=1)
    elif [[ $rw == randwrite ]]; then
        dir="write"
        extra=(--filename="${MNT[$i]}/rd.0" --end_fsync=1)
    else
        extra=(--filename="${MNT[$i]}/rd.0")
    fi
    # 4 jobs: each one its own quarter of the file.
    ((jobs > 1)) && extra+=(--offset_increment=$((SIZE_MIB / jobs))m)
    drop_caches
    timed "$i" fio --name="$wl" "${extra[@]}" --rw="$rw" --bs="$bs" --size=$((SIZE_MIB / jobs))m \
        --numjobs="$jobs" --group_reporting --ioengine=psync --iodepth=1 --direct=0 \
        --invalidate=1 --fallocate=none --runtime="$RUNTIME" \
        --output-format=json --output="$json" || return 1
    [[ $rw == write ]] && t rm -f "${MNT[$i]}/wr.0"
    read -r mib bytes < <(jq -r --arg d "$dir" \
        '.jobs[0][$d] | "\(.bw_bytes / 1048576 * 100 | round / 100) \(.io_bytes)"' "$json")
    row micro "$i" "$wl" "$bs" "$jobs" "$rep" "$mib" MiB/s "$bytes"
    printf '[bench] rep %d/%d %-22s %-24s %9.1f MiB/s  daemon %ss client %ss\n' \
        "$rep" "$REPS" "$i" "$wl" "$mib" "$DAEMON" "$CLIENT" >&2
}

# micro_jobs I REP JOB... — run the jobs on the mounted I; 1 on a failure.
micro_jobs() {
    local i="$1" rep="$2" j
    shift 2
    for j in "$@"; do
        fio_job "$i" "$rep" "$j" || { fail "$i" "fio ${j%% *} ($j)"; return 1; }
    done
}

T0=$SECONDS
for ((rep = 1; rep <= REPS; rep++)); do
    for b in "${BACKING_LIST[@]}"; do
        if [[ $b == memory ]]; then jobs=("${MICRO_MEMORY[@]}"); else jobs=("${MICRO_DISK[@]}"); fi
        wr=() rd=()
        for j in "${jobs[@]}"; do
            if [[ $j == *write* ]]; then wr+=("$j"); else rd+=("$j"); fi
        done
        for p in "${ACTIVE[@]}"; do
            alive "$p@$b" || continue
            # Write phase, remount (cold cache), read phase; the mount then stays
            # up (for macro, and the next repetition's write phase).
            up "$p@$b" && micro_jobs "$p@$b" "$rep" "${wr[@]}" && remount "$p@$b" &&
                micro_jobs "$p@$b" "$rep" "${rd[@]}" || true
        done
    done
done
((${#BACKING_LIST[@]})) && wf_log "micro: $((SECONDS - T0))s"

# ---- macro ---------------------------------------------------------------------
T1=$SECONDS
TREE="" TREE_NAME=""
if [[ -n $MACRO_BACKINGS ]]; then
    # The tree for the canonical benchmark: an uncompressed tar (as gocryptfs's
    # benchmark.bash untars linux-3.0, but without the client decompressing)
    # and its md5sums, cached under /var/tmp, copied to a tmpfs for each run.
    if [[ -n $TARBALL ]]; then
        top="$(basename "$TARBALL" .tar.xz)"
        TREE_NAME="$top${TREE_DIRS:+ (${TREE_DIRS// /, } only)}"
        cache="${BENCH_CACHE:-/var/tmp/warpfs-bench-cache}/$top-${TREE_DIRS// /-}"
        cache="${cache%-}"
        if [[ ! -f $cache/md5sums ]]; then
            wf_log "preparing the canonical tree from $TARBALL (once, cached in $cache)"
            rm -rf "$cache"
            mkdir -p "$cache/x"
            members=()
            for dd in $TREE_DIRS; do members+=("$top/$dd"); done
            tar -xJf "$TARBALL" -C "$cache/x" "${members[@]}"
            tar -cf "$cache/tree.tar" -C "$cache/x" "$top"
            (cd "$cache/x" && find "$top" -type f -print0 | sort -z | xargs -0 md5sum >"$cache/md5sums")
            rm -rf "$cache/x"
        fi
        mkdir -p "$WORK/src"
        mount -t tmpfs -o size=$(($(stat -c %s "$cache/tree.tar") / 1048576 + 256))m bench-src "$WORK/src"
        cp "$cache/tree.tar" "$cache/md5sums" "$WORK/src/"
        TREE="$WORK/src"
        meta tree "$TREE_NAME: $(wc -l <"$cache/md5sums") files, $(($(stat -c %s "$cache/tree.tar") / 1048576)) MiB"
    else
        wf_warn "no /usr/src/linux-source-*.tar.xz: the canonical untar/md5sum/ls/rm steps are skipped"
        meta tree "none (linux-source not installed)"
    fi
fi

# macro_run I REP — personalities and canonical benchmark on instance I.
macro_run() {
    local i="$1" rep="$2" m pers n th res c
    m="${MNT[$i]}"
    up "$i" || return 1
    for pers in fileserver webserver; do
        n=$FS_NFILES
        [[ $pers == webserver ]] && n=$WS_NFILES
        t "${CPIN[@]}" "$PY" "$BENCH/macro.py" create "$pers" "$m/$pers" --nfiles "$n" --seed "$rep" ||
            { fail "$i" "$pers fileset"; return 1; }
        for th in "${THREADS[@]}"; do
            drop_caches
            timed "$i" "$PY" "$BENCH/macro.py" run "$pers" "$m/$pers" --nfiles "$n" --threads "$th" \
                --seconds "$MACRO_SECS" --seed "$rep" >"$WORK/macro.json" || { fail "$i" "$pers run"; return 1; }
            res="$(jq -r '"\(.ops_s) \(.bytes) \(.errors)"' "$WORK/macro.json")"
            read -r c bytes errs <<<"$res"
            row macro "$i" "$pers-t$th" - "$th" "$rep" "$c" ops/s "$bytes"
            printf '[bench] rep %d/%d %-22s %-24s %9.1f ops/s  daemon %ss client %ss%s\n' "$rep" "$REPS" \
                "$i" "$pers-t$th" "$c" "$DAEMON" "$CLIENT" "$( ((errs == 0)) || echo " ($errs failed ops)")" >&2
        done
        t rm -rf "${m:?}/$pers" || { fail "$i" "removing the $pers fileset"; return 1; }
    done
    # gocryptfs's canonical benchmark: dd write and read of 128 KiB blocks,
    # then untar, md5sum -c, ls -lR, rm -rf of a Linux tree. Each step is
    # timed alone; caches are dropped before each (and the source tar lives
    # on a tmpfs, so the client never waits for the disk).
    local mib=$((DD_COUNT * 128 / 1024))
    drop_caches
    timed "$i" dd if=/dev/zero of="$m/zero" bs=131072 count="$DD_COUNT" conv=fsync status=none ||
        { fail "$i" "dd write"; return 1; }
    row macro "$i" dd-write 128k 1 "$rep" "$(awk -v w="$WALL" -v m="$mib" 'BEGIN { printf "%.1f", m / w }')" MiB/s $((mib << 20))
    drop_caches
    timed "$i" dd if="$m/zero" of=/dev/null bs=131072 status=none || { fail "$i" "dd read"; return 1; }
    row macro "$i" dd-read 128k 1 "$rep" "$(awk -v w="$WALL" -v m="$mib" 'BEGIN { printf "%.1f", m / w }')" MiB/s $((mib << 20))
    t rm -f "$m/zero"
    if [[ -n $TREE ]]; then
        local step
        for step in untar md5sum ls-lR rm-rf; do
            drop_caches
            case $step in
            untar) timed "$i" tar -xf "$TREE/tree.tar" -C "$m" ;;
            md5sum) timed "$i" bash -c 'cd "$1" && md5sum -c --quiet "$2"' _ "$m" "$TREE/md5sums" ;;
            ls-lR) timed "$i" ls -lR "$m" >/dev/null ;;
            rm-rf) timed "$i" find "$m" -mindepth 1 -maxdepth 1 -name 'linux-source-*' -exec rm -rf {} + ;;
            esac || { fail "$i" "canonical $step"; return 1; }
            row macro "$i" "$step" - 1 "$rep" "$WALL" s 0
        done
        printf '[bench] rep %d/%d %-22s canonical done\n' "$rep" "$REPS" "$i" >&2
    fi
}

for ((rep = 1; rep <= REPS; rep++)); do
    for b in $MACRO_BACKINGS; do
        for p in "${ACTIVE[@]}"; do
            alive "$p@$b" || continue
            macro_run "$p@$b" "$rep" || true
        done
    done
done
[[ -n $MACRO_BACKINGS ]] && wf_log "macro: $((SECONDS - T1))s"

# ---- results -------------------------------------------------------------------
for p in "${ACTIVE[@]}"; do meta "version.$p" "${VERSION[$p]}"; done
meta mode "$MODE"
meta date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
meta cpu_model "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
meta cores "$NCPU"
meta memory_gib "$(awk '/^MemTotal/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)"
meta kernel "$(uname -r)"
meta os "$(. /etc/os-release && echo "$PRETTY_NAME")"
meta cpu_flags "aes=$(flag aes) vaes=$(flag vaes) avx512f=$(flag avx512f)"
meta cpu_busy_pct_before "$BUSY_BEFORE"
meta disk "$(findmnt -n -o FSTYPE,SOURCE -T "$DISK" | tr -s ' ')"
meta git_commit "$(git -C "$WF_REPO" rev-parse HEAD 2>/dev/null || echo unknown)"
meta git_dirty "$([[ -n "$(git -C "$WF_REPO" status --porcelain 2>/dev/null)" ]] && echo true || echo false)"
meta fio "$(fio --version)"
meta pinning "$PINNING"
meta daemon_session "a session of its own (setsid)"
meta repetitions "$REPS"
meta file_mib "$SIZE_MIB"
meta runtime_cap_s "$RUNTIME"
meta macro_seconds "$MACRO_SECS"
meta fileserver_nfiles "$FS_NFILES"
meta webserver_nfiles "$WS_NFILES"
meta dd_mib "$((DD_COUNT * 128 / 1024))"
meta elapsed_s "$((SECONDS))"
"$PY" "$BENCH/report.py" --build "$RAW" "$OUT/$MODE.json"
wf_log "wrote ${OUT#"$WF_REPO"/}/$MODE.json, $MODE.md and plots in $((SECONDS / 60)) min"
