# shellcheck shell=bash
# bench/lib-peers.sh — peer handling shared by bench/quick-fio.sh and
# bench/spec-fio.sh: CPU pinning, one tmpfs-backed volume and mount per peer
# (bench/peers/NAME.sh), its round-trip check, cold remounts and the cleanup
# trap. Sourced (with bench/lib-measure.sh, which loads scripts/lib.sh), not run.
#
# Order of use: parse_common (in the script's option loop), render_only,
# preflight, load_peers (bench/lib-measure.sh), work_setup, peer_setup per peer, run_jobs. The
# script sets SIZE_MIB, RUNTIME, REPS (parse_common does); these set ACTIVE,
# WORK, RAW, PID[peer] (the daemon's PID), VERSION[peer], PIN and FIO_PIN.

# shellcheck source=bench/lib-measure.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-measure.sh"

declare -A PID=() VERSION=()

# Anything touching a mount runs under a timeout: a stuck daemon must not hang
# the benchmark (the EXIT trap then unmounts and kills it).
t() { timeout -k 5 120 "$@"; }

# Pinning (taskset): fio on CPU $FIO_CPU (default 0), each daemon on
# $FS_CPUS (default 1; 0 on a 1-CPU machine); the keystream workers of the
# warpfs-specon peer on $ENGINE_CPUS (`--engine-cpus`; default on a machine
# with 2+ CPUs: the core the FUSE work leaves idle. On /dev/fuse that is
# $FIO_CPU, which the client leaves idle while it waits for FUSE; on FUSE
# over io_uring a request is served on its caller's CPU, so the workers go
# to $FS_CPUS. ENGINE_CPUS=none keeps them with the FUSE threads). Sets
# NCPU too.
# Each daemon starts in a session of its own (setsid), as a file system
# that daemonizes or runs under systemd does: with autogroup scheduling
# (sched_autogroup_enabled, on in most distributions' kernels) a session is
# a scheduling group, and a daemon started in the client's session shares
# the client's group, which no deployment does
# (docs/decisions/0071-ring-readers-stay-on-their-cpu.md).
# DAEMON_SESSION=shared starts them in the benchmark's session instead.
pin_setup() {
    NCPU=$(nproc)
    FIO_CPU="${FIO_CPU:-0}"
    if ((NCPU > 1)); then FS_CPUS="${FS_CPUS:-1}"; else FS_CPUS="${FS_CPUS:-0}"; fi
    if [[ ${ENGINE_CPUS:-} == none ]]; then
        ENGINE_CPUS=""
    elif [[ -z ${ENGINE_CPUS:-} ]] && ((NCPU > 1)); then
        if [[ " ${WARPFS_MOUNT_ARGS:-} " == *" --transport dev "* ]] ||
            [[ $(cat /sys/module/fuse/parameters/enable_uring 2>/dev/null) != Y ]]; then
            ENGINE_CPUS="$FIO_CPU"
        else
            ENGINE_CPUS="$FS_CPUS"
        fi
    fi
    export ENGINE_CPUS
    # shellcheck disable=SC2034 # PIN is used by bench/peers/*.sh
    PIN=(taskset -c "$FS_CPUS")
    [[ ${DAEMON_SESSION:-own} == shared ]] || PIN=(setsid "${PIN[@]}")
    FIO_PIN=(taskset -c "$FIO_CPU")
}

# How the daemons were started, for the results' settings.
daemon_session() {
    if [[ ${DAEMON_SESSION:-own} == shared ]]; then
        echo "the benchmark's own session (DAEMON_SESSION=shared)"
    else
        echo "a session of its own per daemon (setsid)"
    fi
}

peer_umount() {
    local p="$1" mnt="$WORK/$1/mnt"
    if declare -F "$(fn "$p")_umount" >/dev/null; then "$(fn "$p")_umount" "$mnt"; else wf_unmount "$mnt"; fi
    wf_stop_daemon "${PID[$p]:-}" 5
    PID[$p]=""
}

peer_mount() {
    local p="$1"
    PEER_PID=""
    "$(fn "$p")_mount" "$WORK/$p/backing/vol" "$WORK/$p/mnt" "$WORK/$p/passfile" "$WORK/$p/daemon.log"
    PID[$p]="$PEER_PID"
    wf_wait_mounted "$WORK/$p/mnt" 30 "$PEER_PID" || {
        tail -n 20 "$WORK/$p"/daemon.log* >&2
        wf_die "$p: mount failed"
    }
    t stat "$WORK/$p/mnt" >/dev/null || wf_die "$p: the mount does not answer"
    # BDI_MAX_BYTES: every mount's dirty limit (its bdi's max_bytes, root
    # only) for the run, in place of what the daemon chose.
    if [[ -n ${BDI_MAX_BYTES:-} ]]; then
        echo "$BDI_MAX_BYTES" >"/sys/class/bdi/$(mountpoint -d "$WORK/$p/mnt")/max_bytes" ||
            wf_die "$p: cannot set the dirty limit (BDI_MAX_BYTES)"
    fi
}

# Unmount, drop the page cache, mount again: reads go through the daemon,
# never the kernel's cache of the last job.
remount_cold() {
    peer_umount "$1"
    drop_caches
    peer_mount "$1"
}

# EXIT trap: unmount every peer (also on Ctrl-C), keep the daemon logs in RAW.
cleanup() {
    local rc=$? p
    set +e
    for p in "${ACTIVE[@]}"; do
        peer_umount "$p"
        for f in "$WORK/$p"/daemon.log*; do [[ -f $f ]] && cp "$f" "$RAW/$p-${f##*/}"; done
        wf_unmount "$WORK/$p/backing"
    done
    rm -rf "$WORK"
    [[ -z ${DISKWORK:-} ]] || rm -rf "$DISKWORK"
    exit "$rc"
}

# peer_setup P — a backing dir (a tmpfs of its own, or with --backing disk a
# directory under DISK_DIR), a new volume, a mount, a round trip
# (4 MiB random data read back after a cold remount; for crypto peers, a
# plaintext marker must not appear in the backing dir), then the read file
# read.dat of SIZE_MIB (written once, not timed).
peer_setup() {
    local p="$1" marker
    mkdir -p "$WORK/$p/mnt"
    if [[ ${BACKING:-tmpfs} == disk ]]; then
        mkdir -p "$DISKWORK/$p"
        ln -s "$DISKWORK/$p" "$WORK/$p/backing"
    else
        mkdir -p "$WORK/$p/backing"
        mount -t tmpfs -o "size=$((SIZE_MIB * 2 + 1024))m" "$PEER_TAG-$p" "$WORK/$p/backing"
    fi
    mkdir "$WORK/$p/backing/vol"
    printf '%s-%s-%s\n' "$PEER_TAG" "$p" "$RANDOM$RANDOM" >"$WORK/$p/passfile"
    chmod 0600 "$WORK/$p/passfile"
    VERSION[$p]="$("$(fn "$p")_version")"
    wf_log "$p: ${VERSION[$p]}"
    "$(fn "$p")_init" "$WORK/$p/backing/vol" "$WORK/$p/passfile" >"$WORK/$p/init.log" 2>&1 ||
        { cat "$WORK/$p/init.log" >&2; wf_die "$p: init failed"; }
    peer_mount "$p"

    marker="warpfs-$PEER_TAG-plaintext-marker-$RANDOM$RANDOM"
    head -c $((4 << 20)) /dev/urandom >"$WORK/$p/probe"
    t cp "$WORK/$p/probe" "$WORK/$p/mnt/probe" || wf_die "$p: writing through the mount failed"
    printf '%s\n' "$marker" >"$WORK/$p/marker.txt"
    t cp "$WORK/$p/marker.txt" "$WORK/$p/mnt/marker.txt" || wf_die "$p: writing through the mount failed"
    remount_cold "$p"
    t cmp -s "$WORK/$p/probe" "$WORK/$p/mnt/probe" || wf_die "$p: round trip returned different data"
    t grep -qx "$marker" "$WORK/$p/mnt/marker.txt" || wf_die "$p: round trip lost the marker file"
    if "$(fn "$p")_crypto" && grep -rqa "$marker" "$WORK/$p/backing"; then
        wf_die "$p: plaintext marker found in the backing dir"
    fi
    t rm -f "$WORK/$p/mnt/probe" "$WORK/$p/mnt/marker.txt"
    rm -f "$WORK/$p/probe" "$WORK/$p/marker.txt"

    timeout -k 5 600 "${FIO_PIN[@]}" fio --name=layout --filename="$WORK/$p/mnt/read.dat" --rw=write --bs=1m \
        --size="${SIZE_MIB}m" --ioengine=psync --fallocate=none --end_fsync=1 \
        --output=/dev/null || wf_die "$p: could not write the read file"
    wf_log "$p: round trip ok, ${SIZE_MIB} MiB read file ready"
}

# The git commit and whether the tree is dirty: GIT_COMMIT, GIT_DIRTY.
# shellcheck disable=SC2034 # read by the sourcing script
git_state() {
    GIT_COMMIT="$(git -C "$WF_REPO" rev-parse HEAD 2>/dev/null || echo unknown)"
    GIT_DIRTY=false
    [[ -n "$(git -C "$WF_REPO" status --porcelain 2>/dev/null)" ]] && GIT_DIRTY=true
    return 0
}

# {"peer": "version", ...} of the active peers.
versions_json() {
    local p v="{}"
    for p in "${ACTIVE[@]}"; do
        v=$(jq -c --arg p "$p" --arg v "${VERSION[$p]}" '. + {($p): $v}' <<<"$v")
    done
    printf '%s\n' "$v"
}

# parse_common "$@" — the options both benchmarks take (--peers, --reps,
# --runtime, --size-mib, --out, --render, --help; see each script's help):
# sets NARGS to the words it used; dies on an unknown option.
# shellcheck disable=SC2034 # read by the sourcing script
parse_common() {
    case "$1" in
    --peers) PEERS="$2"; NARGS=2 ;;
    --reps) REPS="$2"; NARGS=2 ;;
    --runtime) RUNTIME="$2"; NARGS=2 ;;
    --size-mib) SIZE_MIB="$2"; NARGS=2 ;;
    --out) OUT="$2"; NARGS=2 ;;
    --backing)
        [[ $2 == tmpfs || $2 == disk ]] || wf_die "--backing takes tmpfs or disk"
        BACKING="$2" NARGS=2
        ;;
    --render) RENDER="$2"; NARGS=2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) wf_die "unknown argument $1 (see --help)" ;;
    esac
}

# work_setup TAG — WORK (/tmp/warpfs-TAG.*), RAW (target/bench/$WF_NAME-raw:
# fio JSON and daemon logs of the last run, emptied), the cleanup traps;
# TAG also names the tmpfs, passphrase and marker of each peer.
work_setup() {
    PEER_TAG="$1"
    WORK="$(mktemp -d "/tmp/warpfs-$PEER_TAG.XXXXXX")"
    RAW="$WF_REPO/target/bench/$WF_NAME-raw"
    rm -rf "$RAW"
    mkdir -p "$RAW"
    if [[ ${BACKING:-tmpfs} == disk ]]; then
        DISKWORK="$(mktemp -d "${DISK_DIR:-/var/tmp}/warpfs-$PEER_TAG.XXXXXX")"
        BACKING_DESC="disk ($(findmnt -n -o FSTYPE,SOURCE -T "$DISKWORK" | tr -s ' '))"
        [[ $BACKING_DESC != *tmpfs* ]] || wf_die "--backing disk: ${DISK_DIR:-/var/tmp} is on a tmpfs (set DISK_DIR)"
    else
        BACKING_DESC="tmpfs"
    fi
    trap cleanup EXIT
    trap 'exit 130' INT TERM
}

# render_only JSON — redo the Markdown of an existing JSON with the script's
# render_md (e.g. after changing the table), show it and exit.
render_only() {
    wf_ensure jq:jq || wf_die "jq is missing"
    render_md "$1" "${1%.json}.md"
    cat "${1%.json}.md"
    exit 0
}

# preflight WHY — root (for WHY), /dev/fuse, the tools, then pin_setup.
preflight() {
    wf_is_root || wf_die "needs root ($1)"
    [[ -c /dev/fuse ]] || wf_die "/dev/fuse is missing"
    wf_ensure fio:fio jq:jq taskset:util-linux fusermount3:fuse3 || wf_die "missing tools"
    pin_setup
}

# fio_job P NAME RW BS FILE JSON LIMIT [FIO ARGS...] — one time-based fio job
# (psync, iodepth 1, one job, direct=0) of RUNTIME s on P's mount, pinned to
# FIO_CPU, JSON output to JSON, killed after LIMIT s; fatal on failure. Sets
# JOB_CPU to the CPU seconds P's daemon spent meanwhile.
fio_job() {
    local p="$1" name="$2" rw="$3" bs="$4" file="$5" json="$6" limit="$7" cpu0 cpu1
    shift 7
    cpu0=$(cpu_seconds "${PID[$p]}")
    timeout -k 5 "$limit" "${FIO_PIN[@]}" fio --name="$name" --filename="$WORK/$p/mnt/$file" \
        --rw="$rw" --bs="$bs" --size="${SIZE_MIB}m" --ioengine=psync --iodepth=1 \
        --numjobs=1 --direct=0 --invalidate=1 --fallocate=none \
        --time_based --runtime="$RUNTIME" "$@" \
        --output-format=json --output="$json" ||
        wf_die "$p: fio $name failed (daemon log: ${RAW#"$WF_REPO"/}/$p-daemon.log)"
    cpu1=$(cpu_seconds "${PID[$p]}")
    # shellcheck disable=SC2034 # read by the sourcing script
    JOB_CPU=$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { printf "%.2f", b - a }')
}

# run_jobs FUNC JOB... — REPS repetitions; in each, every JOB ("name rw bs
# file") on every active peer in turn, each after a cold remount:
# FUNC P REP NAME RW BS FILE. Repetitions interleave the peers, so drift on
# the machine hits every peer alike.
run_jobs() {
    local func="$1" rep j name rw bs file p
    shift
    for ((rep = 1; rep <= REPS; rep++)); do
        for j in "$@"; do
            read -r name rw bs file <<<"$j"
            for p in "${ACTIVE[@]}"; do
                remount_cold "$p"
                "$func" "$p" "$rep" "$name" "$rw" "$bs" "$file"
            done
        done
    done
}
