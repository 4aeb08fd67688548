#!/usr/bin/env bash
# bench/quick-fio.sh — quick side-by-side fio benchmark of warpfs and its peers
# (gocryptfs by default), each over its own tmpfs backing directory.
#
#   sudo bash bench/quick-fio.sh [--peers warpfs,gocryptfs,bindfs] [--reps 3]
#                                [--runtime 10] [--size-mib 1024] [--quick]
#   bash bench/quick-fio.sh --render bench/results/quick-fio.json   (redo the .md)
#
# What it does:
#   - installs fio, jq, fuse3 and the peers' packages when missing (root);
#   - per peer: a tmpfs backing dir, a new volume, a mount, and a round-trip
#     check (random data read back after remount + drop_caches; for crypto
#     peers, a plaintext marker must not appear in the backing dir); then a
#     read file of --size-mib is written once;
#   - workloads (fio, psync, iodepth 1, one job, direct=0, time-based):
#       seqwrite-128k, seqwrite-1m   sequential write, end_fsync=1
#       seqread-128k, seqread-1m     sequential read of the read file
#       randread-4k                  random 4 KiB reads of the read file
#     Before every job the peer is unmounted, the page cache dropped
#     (`echo 3 > /proc/sys/vm/drop_caches`) and the peer mounted again, so
#     reads go through the daemon, never the kernel's cache of the last job.
#     fio's invalidate=1 (default) also drops the file's cached pages each time
#     fio (re)opens it while looping over the file.
#   - repetitions interleave the peers (rep 1: each workload on each peer,
#     then rep 2, ...), so drift on the machine hits every peer alike;
#   - CPU pinning (taskset): fio on CPU $FIO_CPU (default 0), each FS daemon
#     with all its threads on CPUs $FS_CPUS (default 1; 0 on a 1-CPU machine).
#     Kernel-side FUSE work runs on the CPU of the thread that enters the
#     kernel. Cross-CPU wake-ups are expensive on VMs, so this placement is a
#     choice to report, not a detail: override with FIO_CPU / FS_CPUS.
#   - always unmounts everything (trap on EXIT), also on Ctrl-C.
#   - records how busy the CPUs were just before the run (other builds on a
#     shared machine make the numbers noisy; it warns above 20%).
# Peers: default warpfs,gocryptfs; a default peer that is unavailable (warpfs
#   not buildable yet) is skipped with a warning, a peer named in --peers must
#   work. warpfs: WARPFS_BIN, WARPFS_MODE, WARPFS_MOUNT_ARGS (bench/peers/warpfs.sh).
# Output: bench/results/quick-fio.json (machine info, settings, every
#   repetition's MiB/s and the daemon's CPU seconds) and bench/results/quick-fio.md
#   (median, min–max, ratio warpfs/gocryptfs). Raw fio JSON of the last run:
#   target/bench/quick-fio-raw/ (not committed), with the daemons' logs.
#   --out DIR writes elsewhere.
# Defaults take about 6 minutes for 2 peers, 8.5 for 3 (15 jobs per peer,
# 10 s + ~2 s remount each, plus setup);
# --quick (2 s, 1 rep, 256 MiB) is a smoke test of the plumbing.
#
# Peers: bench/peers/NAME.sh, sourced, defines for peer NAME:
#   NAME_available              0 if usable (may install packages)
#   NAME_version                one line
#   NAME_crypto                 0 if the backing dir must not hold plaintext
#   NAME_init BACKING PASSFILE  make a volume in the empty dir BACKING
#   NAME_mount BACKING MNT PASSFILE LOG
#                               start the daemon in the foreground, backgrounded
#                               (`&`), prefixed with "${PIN[@]}"; set PEER_PID;
#                               logs go to LOG (and LOG.*)
#   NAME_umount MNT             optional (default: fusermount3 -u)
set -euo pipefail

WF_NAME=quick-fio
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
BENCH="$WF_REPO/bench"

# render_md JSON MD — the Markdown table: median (min–max) per peer, ratio
# warpfs/gocryptfs when both ran.
render_md() {
    jq -r '
        def median: sort | if length % 2 == 1 then .[length / 2 | floor]
                           else (.[length / 2 - 1] + .[length / 2]) / 2 end;
        def r1: (. * 10 | round) as $t | "\($t / 10 | floor).\($t % 10)";
        .results as $r
        | ($r | map(.peer) | unique) as $all
        | (["warpfs", "gocryptfs", "bindfs"] | map(select(. as $p | $all | index($p)))) as $known
        | ($known + ($all - $known)) as $peers
        | ["seqwrite-128k", "seqwrite-1m", "seqread-128k", "seqread-1m", "randread-4k"] as $wls
        | (($peers | index("warpfs")) != null and ($peers | index("gocryptfs")) != null) as $ratio
        | def cell($p; $w): ($r | map(select(.peer == $p and .workload == $w)) | .[0]);
          "# quick-fio results\n",
          "\(.date) · \(.machine.cpu_model), \(.machine.cores) cores, kernel \(.machine.kernel) · AES-NI \(.machine.cpu_flags.aes), VAES \(.machine.cpu_flags.vaes), AVX-512F \(.machine.cpu_flags.avx512f)",
          (if .machine.cpu_busy_pct_before == null then "CPU use by other work before the run: not recorded"
       else "CPUs \(.machine.cpu_busy_pct_before)% busy just before the run (well above 0: other work competed for them)" end),
          "git \(.git.commit[0:12])\(if .git.dirty then " (dirty)" else "" end) · tmpfs backing · fio psync, iodepth 1, direct=0, \(.settings.file_mib) MiB file, \(.settings.runtime_s) s per job, \(.settings.repetitions) repetitions, cold cache before every job · fio on CPU \(.settings.pinning.fio_cpu), daemon on CPU \(.settings.pinning.daemon_cpus)\n",
          "MiB/s, median (min–max)\(if $ratio then "; ratio = warpfs median / gocryptfs median" else "" end).\n",
          "| workload | " + ($peers | join(" | ")) + (if $ratio then " | warpfs/gocryptfs" else "" end) + " |",
          "|---|" + ($peers | map("---:") | join("|")) + (if $ratio then "|---:" else "" end) + "|",
          ($wls[] as $w
           | "| \($w) | "
             + ($peers | map(cell(.; $w) | if . == null then "–"
                             else "\(.mib_s | median | r1) (\(.mib_s | min | r1)–\(.mib_s | max | r1))" end)
                | join(" | "))
             + (if $ratio then
                  " | " + ((cell("warpfs"; $w).mib_s | median) as $a | (cell("gocryptfs"; $w).mib_s | median) as $b
                           | if $b > 0 then ($a / $b * 100 | round) as $c
                                           | "\($c / 100 | floor).\($c % 100 / 10 | floor)\($c % 10)"
                             else "–" end)
                else "" end)
             + " |"),
          "\nVersions: " + ([.results[] | "\(.peer): \(.version)"] | unique | join("; ")) + ".",
        (if .note then "\nNote: \(.note)" else empty end),
          "\nDaemon CPU seconds per job, median: "
            + ($peers | map(. as $p | "\($p) " + ($wls | map(. as $w | cell($p; $w) | if . == null then "–" else (.daemon_cpu_s | median | r1) end) | join("/"))) | join("; "))
            + " (order: " + ($wls | join(", ")) + ")."
      ' "$1" >"$2"
}

PEERS="" REPS=3 RUNTIME=10 SIZE_MIB=1024 OUT="$BENCH/results"
RENDER=""
while (($#)); do
    case "$1" in
    --peers) PEERS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --runtime) RUNTIME="$2"; shift 2 ;;
    --size-mib) SIZE_MIB="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --quick) REPS=1 RUNTIME=2 SIZE_MIB=256; shift ;;
    --render) RENDER="$2"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) wf_die "unknown argument $1 (see --help)" ;;
    esac
done

if [[ -n $RENDER ]]; then
    # Only re-render the Markdown of an existing JSON (e.g. after changing the table).
    wf_ensure jq:jq || wf_die "jq is missing"
    render_md "$RENDER" "${RENDER%.json}.md"
    cat "${RENDER%.json}.md"
    exit 0
fi

wf_is_root || wf_die "needs root (tmpfs mounts, drop_caches)"
[[ -c /dev/fuse ]] || wf_die "/dev/fuse is missing"
wf_ensure fio:fio jq:jq taskset:util-linux fusermount3:fuse3 || wf_die "missing tools"

NCPU=$(nproc)
FIO_CPU="${FIO_CPU:-0}"
if ((NCPU > 1)); then FS_CPUS="${FS_CPUS:-1}"; else FS_CPUS="${FS_CPUS:-0}"; fi
# shellcheck disable=SC2034 # PIN is used by bench/peers/*.sh
PIN=(taskset -c "$FS_CPUS")
FIO_PIN=(taskset -c "$FIO_CPU")

# ---- peers -------------------------------------------------------------------
explicit=1
if [[ -z $PEERS ]]; then PEERS="warpfs,gocryptfs" explicit=0; fi
IFS=, read -ra WANT <<<"$PEERS"
ACTIVE=()
for p in "${WANT[@]}"; do
    [[ $p =~ ^[a-z0-9_]+$ && -f $BENCH/peers/$p.sh ]] || wf_die "unknown peer '$p' (no bench/peers/$p.sh)"
    # shellcheck disable=SC1090
    . "$BENCH/peers/$p.sh"
    if "${p}_available"; then
        ACTIVE+=("$p")
    elif ((explicit)); then
        wf_die "peer $p is not available"
    else
        wf_warn "peer $p is not available; skipping it"
    fi
done
((${#ACTIVE[@]})) || wf_die "no peer available"
wf_log "peers: ${ACTIVE[*]}; ${REPS} reps x ${RUNTIME}s; file ${SIZE_MIB} MiB;" \
    "fio on CPU $FIO_CPU, daemons on CPU(s) $FS_CPUS"

# ---- work dir, mount helpers, cleanup ----------------------------------------
WORK="$(mktemp -d /tmp/warpfs-bench.XXXXXX)"
RAW="$WF_REPO/target/bench/quick-fio-raw" # fio JSON and daemon logs of the last run
rm -rf "$RAW"
mkdir -p "$RAW"
declare -A PID=()

peer_umount() {
    local p="$1" mnt="$WORK/$1/mnt"
    if declare -F "${p}_umount" >/dev/null; then "${p}_umount" "$mnt"; else wf_unmount "$mnt"; fi
    wf_stop_daemon "${PID[$p]:-}" 5
    PID[$p]=""
}

peer_mount() {
    local p="$1"
    PEER_PID=""
    "${p}_mount" "$WORK/$p/backing/vol" "$WORK/$p/mnt" "$WORK/$p/passfile" "$WORK/$p/daemon.log"
    PID[$p]="$PEER_PID"
    wf_wait_mounted "$WORK/$p/mnt" 30 "$PEER_PID" || {
        tail -n 20 "$WORK/$p"/daemon.log* >&2
        wf_die "$p: mount failed"
    }
    t stat "$WORK/$p/mnt" >/dev/null || wf_die "$p: the mount does not answer"
}

# Anything touching a mount runs under a timeout: a stuck daemon must not hang
# the benchmark (the EXIT trap then unmounts and kills it).
t() { timeout -k 5 120 "$@"; }

drop_caches() {
    sync
    echo 3 >/proc/sys/vm/drop_caches
}

remount_cold() {
    peer_umount "$1"
    drop_caches
    peer_mount "$1"
}

cleanup() {
    local rc=$? p
    set +e
    for p in "${ACTIVE[@]}"; do
        peer_umount "$p"
        for f in "$WORK/$p"/daemon.log*; do [[ -f $f ]] && cp "$f" "$RAW/$p-${f##*/}"; done
        wf_unmount "$WORK/$p/backing"
    done
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Process CPU time (user + system, all threads) in seconds.
cpu_seconds() {
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || { echo 0; return; }
    stat="${stat##*) }" # fields after "pid (comm) "
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($12 + $13) / hz }' <<<"$stat"
}

# What else is using the CPUs right now: busy % over 2 s (/proc/stat), before
# we start anything. The load average lags by minutes, so it is not used.
cpu_busy_pct() {
    local b0 i0 b1 i1 # busy and idle(+iowait) jiffies
    read -r b0 i0 < <(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
    sleep 2
    read -r b1 i1 < <(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
    awk -v bu=$((b1 - b0)) -v id=$((i1 - i0)) 'BEGIN { printf "%.0f", (bu + id) ? 100 * bu / (bu + id) : 0 }'
}
BUSY_BEFORE="$(cpu_busy_pct)"
((BUSY_BEFORE < 20)) || wf_warn "the CPUs are ${BUSY_BEFORE}% busy before the run: results will be noisy"
GIT_COMMIT="$(git -C "$WF_REPO" rev-parse HEAD 2>/dev/null || echo unknown)"
GIT_DIRTY=false
[[ -n "$(git -C "$WF_REPO" status --porcelain 2>/dev/null)" ]] && GIT_DIRTY=true

# ---- set up every peer -------------------------------------------------------
declare -A VERSION=()
for p in "${ACTIVE[@]}"; do
    mkdir -p "$WORK/$p/backing" "$WORK/$p/mnt"
    mount -t tmpfs -o "size=$((SIZE_MIB * 2 + 1024))m" "bench-$p" "$WORK/$p/backing"
    mkdir "$WORK/$p/backing/vol"
    printf 'bench-%s-%s\n' "$p" "$RANDOM$RANDOM" >"$WORK/$p/passfile"
    chmod 0600 "$WORK/$p/passfile"
    VERSION[$p]="$("${p}_version")"
    wf_log "$p: ${VERSION[$p]}"
    "${p}_init" "$WORK/$p/backing/vol" "$WORK/$p/passfile" >"$WORK/$p/init.log" 2>&1 ||
        { cat "$WORK/$p/init.log" >&2; wf_die "$p: init failed"; }
    peer_mount "$p"

    # Round trip: data survives unmount + cold cache; no plaintext in backing.
    marker="warpfs-bench-plaintext-marker-$RANDOM$RANDOM"
    head -c $((4 << 20)) /dev/urandom >"$WORK/$p/probe"
    t cp "$WORK/$p/probe" "$WORK/$p/mnt/probe" || wf_die "$p: writing through the mount failed"
    printf '%s\n' "$marker" >"$WORK/$p/marker.txt"
    t cp "$WORK/$p/marker.txt" "$WORK/$p/mnt/marker.txt" || wf_die "$p: writing through the mount failed"
    remount_cold "$p"
    t cmp -s "$WORK/$p/probe" "$WORK/$p/mnt/probe" || wf_die "$p: round trip returned different data"
    t grep -qx "$marker" "$WORK/$p/mnt/marker.txt" || wf_die "$p: round trip lost the marker file"
    if "${p}_crypto" && grep -rqa "$marker" "$WORK/$p/backing"; then
        wf_die "$p: plaintext marker found in the backing dir"
    fi
    t rm -f "$WORK/$p/mnt/probe" "$WORK/$p/mnt/marker.txt"
    rm -f "$WORK/$p/probe" "$WORK/$p/marker.txt"

    # The file that read workloads read (written once, not timed).
    timeout -k 5 600 "${FIO_PIN[@]}" fio --name=layout --filename="$WORK/$p/mnt/read.dat" --rw=write --bs=1m \
        --size="${SIZE_MIB}m" --ioengine=psync --fallocate=none --end_fsync=1 \
        --output=/dev/null || wf_die "$p: could not write the read file"
    wf_log "$p: round trip ok, ${SIZE_MIB} MiB read file ready"
done

# ---- workloads ---------------------------------------------------------------
# name rw bs file
WORKLOADS=(
    "seqwrite-128k write 128k write.dat"
    "seqwrite-1m write 1m write.dat"
    "seqread-128k read 128k read.dat"
    "seqread-1m read 1m read.dat"
    "randread-4k randread 4k read.dat"
)
mkdir -p "$OUT"
TSV="$WORK/results.tsv"
: >"$TSV"
T0=$SECONDS
for ((rep = 1; rep <= REPS; rep++)); do
    for w in "${WORKLOADS[@]}"; do
        read -r wname rw bs file <<<"$w"
        for p in "${ACTIVE[@]}"; do
            remount_cold "$p"
            extra=()
            [[ $rw == write ]] && extra=(--end_fsync=1)
            json="$RAW/$p-$wname-$rep.json"
            cpu0=$(cpu_seconds "${PID[$p]}")
            timeout -k 5 $((RUNTIME + 120)) "${FIO_PIN[@]}" fio --name="$wname" --filename="$WORK/$p/mnt/$file" \
                --rw="$rw" --bs="$bs" --size="${SIZE_MIB}m" --ioengine=psync --iodepth=1 \
                --numjobs=1 --direct=0 --invalidate=1 --fallocate=none \
                --time_based --runtime="$RUNTIME" "${extra[@]}" \
                --output-format=json --output="$json" ||
                wf_die "$p: fio $wname failed (daemon log: ${RAW#"$WF_REPO"/}/$p-daemon.log)"
            cpu1=$(cpu_seconds "${PID[$p]}")
            dir="read"
            [[ $rw == write ]] && dir="write"
            mibs=$(jq -r --arg d "$dir" '.jobs[0][$d].bw_bytes / 1048576 | . * 10 | round / 10' "$json")
            cpu=$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { printf "%.2f", b - a }')
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$p" "$wname" "$rw" "$bs" "$rep" "$mibs" "$cpu" >>"$TSV"
            printf '[quick-fio] rep %d/%d %-14s %-10s %8.1f MiB/s  (daemon CPU %ss)\n' \
                "$rep" "$REPS" "$wname" "$p" "$mibs" "$cpu" >&2
        done
    done
done
wf_log "measured in $((SECONDS - T0))s"

# ---- results -----------------------------------------------------------------
flag() { grep -qw "$1" /proc/cpuinfo && echo true || echo false; }
VERSIONS_JSON="{}"
for p in "${ACTIVE[@]}"; do
    VERSIONS_JSON=$(jq -c --arg p "$p" --arg v "${VERSION[$p]}" '. + {($p): $v}' <<<"$VERSIONS_JSON")
done
jq -R -s \
    --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    --arg cpu "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)" \
    --argjson cores "$NCPU" \
    --arg kernel "$(uname -r)" \
    --argjson mem_gib "$(awk '/^MemTotal/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)" \
    --argjson busy0 "$BUSY_BEFORE" \
    --argjson aes "$(flag aes)" --argjson vaes "$(flag vaes)" --argjson avx512f "$(flag avx512f)" \
    --arg commit "$GIT_COMMIT" --argjson dirty "$GIT_DIRTY" \
    --arg fio "$(fio --version)" --arg fuse "$(fusermount3 -V 2>&1 | head -n 1)" \
    --argjson runtime "$RUNTIME" --argjson reps "$REPS" --argjson size "$SIZE_MIB" \
    --arg fio_cpu "$FIO_CPU" --arg fs_cpus "$FS_CPUS" \
    --argjson versions "$VERSIONS_JSON" '
    [split("\n")[] | select(length > 0) | split("\t")
     | {peer: .[0], workload: .[1], rw: .[2], bs: .[3], rep: (.[4] | tonumber),
        mib_s: (.[5] | tonumber), daemon_cpu_s: (.[6] | tonumber)}] as $rows
    | {
        benchmark: "quick-fio",
        date: $date,
        machine: {cpu_model: $cpu, cores: $cores, memory_gib: $mem_gib, kernel: $kernel,
                  cpu_flags: {aes: $aes, vaes: $vaes, avx512f: $avx512f},
                  cpu_busy_pct_before: $busy0},
        git: {commit: $commit, dirty: $dirty},
        settings: {backing: "tmpfs", file_mib: $size, runtime_s: $runtime, repetitions: $reps,
                   fio: $fio, fusermount3: $fuse, ioengine: "psync", iodepth: 1, direct: 0,
                   cold_cache: "unmount + drop_caches + mount before every job",
                   pinning: {fio_cpu: $fio_cpu, daemon_cpus: $fs_cpus, tool: "taskset"}},
        results: ($rows | group_by([.peer, .workload]) | map({
            peer: .[0].peer, version: $versions[.[0].peer], workload: .[0].workload,
            rw: .[0].rw, bs: .[0].bs,
            mib_s: map(.mib_s), daemon_cpu_s: map(.daemon_cpu_s)}))
      }' "$TSV" >"$OUT/quick-fio.json"

render_md "$OUT/quick-fio.json" "$OUT/quick-fio.md"

cat "$OUT/quick-fio.md"
wf_log "wrote ${OUT#"$WF_REPO"/}/quick-fio.json and quick-fio.md in $((SECONDS - T0))s of measuring"
