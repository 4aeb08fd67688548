#!/usr/bin/env bash
# bench/quick-fio.sh — quick side-by-side fio benchmark of warpfs and its peers
# (gocryptfs by default), each over its own tmpfs backing directory.
#
#   sudo bash bench/quick-fio.sh [--peers warpfs,gocryptfs,bindfs] [--reps 3]
#                                [--runtime 10] [--size-mib 1024] [--quick]
#   bash bench/quick-fio.sh --render bench/results/DATE-quick-fio/quick-fio.json   (redo the .md)
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
# Output: bench/results/DATE-quick-fio/quick-fio.json (DATE the UTC day;
#   machine info, settings, every repetition's MiB/s and the daemon's CPU
#   seconds) and quick-fio.md beside it
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
# shellcheck source=bench/lib-peers.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-peers.sh"

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
          "git \(.git.commit[0:12])\(if .git.dirty then " (dirty)" else "" end) · \(.settings.backing // "tmpfs") backing · fio psync, iodepth 1, direct=0, \(.settings.file_mib) MiB file, \(.settings.runtime_s) s per job, \(.settings.repetitions) repetitions, cold cache before every job · fio on CPU \(.settings.pinning.fio_cpu), daemon on CPU \(.settings.pinning.daemon_cpus)\n",
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

PEERS="" REPS=3 RUNTIME=10 SIZE_MIB=1024 OUT=""
RENDER=""
while (($#)); do
    case "$1" in
    --quick) REPS=1 RUNTIME=2 SIZE_MIB=256; shift ;;
    *) parse_common "$@"; shift "$NARGS" ;;
    esac
done

[[ -z $RENDER ]] || render_only "$RENDER"
OUT="${OUT:-$BENCH/results/$(date -u +%F)-quick-fio}"

preflight "tmpfs mounts, drop_caches"

# ---- peers -------------------------------------------------------------------
ON_MISSING=peer_missing_die # a peer named in --peers must work
if [[ -z $PEERS ]]; then PEERS="warpfs,gocryptfs" ON_MISSING=peer_missing_warn; fi
load_peers "$PEERS" "$ON_MISSING"
wf_log "peers: ${ACTIVE[*]}; ${REPS} reps x ${RUNTIME}s; file ${SIZE_MIB} MiB;" \
    "fio on CPU $FIO_CPU, daemons on CPU(s) $FS_CPUS"

# ---- work dir, mount helpers, cleanup ----------------------------------------
work_setup bench
measure_busy_before
git_state

# ---- set up every peer -------------------------------------------------------
# Round trip: data survives unmount + cold cache; no plaintext in backing.
# Then the file that read workloads read (written once, not timed).
for p in "${ACTIVE[@]}"; do peer_setup "$p"; done

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
# workload P REP NAME RW BS FILE — one measurement, a line in $TSV.
workload() {
    local p="$1" rep="$2" wname="$3" rw="$4" bs="$5" file="$6" extra=() json dir mibs
    [[ $rw == write ]] && extra=(--end_fsync=1)
    json="$RAW/$p-$wname-$rep.json"
    fio_job "$p" "$wname" "$rw" "$bs" "$file" "$json" $((RUNTIME + 120)) "${extra[@]}"
    dir="read"
    [[ $rw == write ]] && dir="write"
    mibs=$(jq -r --arg d "$dir" '.jobs[0][$d].bw_bytes / 1048576 | . * 10 | round / 10' "$json")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$p" "$wname" "$rw" "$bs" "$rep" "$mibs" "$JOB_CPU" >>"$TSV"
    printf '[quick-fio] rep %d/%d %-14s %-10s %8.1f MiB/s  (daemon CPU %ss)\n' \
        "$rep" "$REPS" "$wname" "$p" "$mibs" "$JOB_CPU" >&2
}
run_jobs workload "${WORKLOADS[@]}"
wf_log "measured in $((SECONDS - T0))s"

# ---- results -----------------------------------------------------------------
VERSIONS_JSON="$(versions_json)"
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
    --arg backing "$BACKING_DESC" \
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
        settings: {backing: $backing, file_mib: $size, runtime_s: $runtime, repetitions: $reps,
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
