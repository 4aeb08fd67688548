#!/usr/bin/env bash
# bench/spec-fio.sh — the speculation benchmark: fio on tmpfs at
# 4/64/128 KiB, seq and rand, read and write, with warpfs speculation on
# (keystream workers on the client's otherwise idle CPU, and
# sharing the daemon's CPU) vs off vs gocryptfs vs warpfs's no-crypto
# ceiling, side by side in one run, with the engine's hit rate per job (from
# `warpfs stats --json MOUNTPOINT`).
#
#   sudo bash bench/spec-fio.sh [--mode gcm|ctr|xts[-twofish]] [--software-aes] [--quick] [--runtime S] [--reps N] [--size-mib M]
#                               [--peers warpfs-specon,warpfs-specon-shared,warpfs-specoff,gocryptfs,warpfs-nocrypto]
#                               [--jobs seqread-128k,...] [--out DIR]
#   bash bench/spec-fio.sh --render bench/results/DATE-spec-fio/spec-fio.json     (redo the .md)
#
# --mode: the warpfs volumes' content mode (default gcm, the default of
# `warpfs init`; ctr is the paper's mode: a read with its mask ready is an
# XOR only). gocryptfs is AES-256-GCM either way. Output names:
# spec-fio.{json,md} for gcm, spec-fio-ctr.{json,md} for ctr.
# --software-aes: the warpfs peers make their keystream with software AES
# (WARPFS_NO_AESNI=1), the papers' AES-NI-off experiment, where a mask costs
# far more than the XOR that applies it; GHASH (gcm) keeps PCLMULQDQ and
# gocryptfs its hardware AES. Output names get -softaes.
# Per peer: a tmpfs backing dir, a new volume (warpfs: --mode), a mount, a round
# trip check (4 MiB random data back after remount + cold cache; crypto
# peers: a plaintext marker must not appear in the backing dir), a read file
# of --size-mib. Jobs (fio psync, iodepth 1, one job, direct=0, time based):
#   seqread-{4k,64k,128k}, randread-{4k,64k,128k} on the read file;
#   seqwrite-{4k,64k,128k} to a new file (end_fsync=1);
#   randwrite-{4k,64k,128k} in place over the read file (end_fsync=1);
#   seqread-128k@{80m,800m,1200m}, seqwrite-128k@80m: capped at that rate (fio --rate),
#   below what the CPUs allow: whether speculation keeps ahead of a reader
#   when there is CPU to spare (hit rate, daemon CPU); not in the default set.
# Before every job: unmount, drop caches, mount (reads reach the daemon).
# Repetitions interleave the peers. Pinning: fio on CPU $FIO_CPU (default 0),
# each daemon on $FS_CPUS (default 1) with taskset; warpfs-specon's keystream
# workers on $ENGINE_CPUS (`--engine-cpus`; the technique's premise, masks
# made on a core the file system's work leaves idle: $FIO_CPU on /dev/fuse,
# where fio mostly waits for FUSE, $FS_CPUS on FUSE over io_uring, where the
# request is served on fio's CPU; bench/lib-peers.sh), warpfs-specon-shared's on $FS_CPUS with
# the FUSE threads (the placement of earlier runs). ENGINE_CPUS=none puts
# warpfs-specon's there too.
# Hit rate (warpfs peers with an engine): over the job, (ready hits + blocks
# served decrypted ahead) / (applies + blocks served decrypted ahead + blocks
# of sequential reads the reading thread decrypted itself) (applies = masks
# taken from a context: ready, waited for, or made inline because no worker
# had started them; the last term: chunks a read took back from decrypt-ahead
# before a thread started them or took over from a stalled one, and
# sequential requests nobody planned: misses). "direct" counts blocks
# decrypted without a context (small random reads by design, decrypt-ahead
# chunks, and those the reader decrypted itself).
# Defaults: 1 rep x 10 s x 12 jobs x 5 peers, about 15-18 minutes on 2 cores;
# --quick: 3 s per job, 256 MiB file, about 6 minutes.
# Output: --out (default bench/results/DATE-spec-fio, DATE the UTC day)/spec-fio[-ctr].json and .md; raw
# fio JSON and daemon logs in target/bench/spec-fio-raw/. The daemon logs
# are searched for panics, which are listed in the results.
set -euo pipefail

WF_NAME="spec-fio"
# shellcheck source=bench/lib-peers.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-peers.sh"

render_md() {
    jq -r '
        def r1: if . == null then "–" else ((. * 10 | round) as $t | "\($t / 10 | floor).\($t % 10)") end;
        def pct: if . == null then "–" else ((. * 1000 | round) as $t | "\($t / 10 | floor).\($t % 10)%") end;
        def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
                           else (.[length / 2 - 1] + .[length / 2]) / 2 end;
        .results as $r
        | (.settings.mode // "gcm") as $mode
        | ["warpfs-specon", "warpfs-specon-shared", "warpfs-specoff", "warpfs-split1", "warpfs-split2", "warpfs-noxattr", "gocryptfs", "warpfs-nocrypto"] as $order
        | ($r | map(.peer) | unique) as $all
        | ($order | map(select(. as $p | $all | index($p)))) as $peers
        | ($r | map(.job) | unique) as $jobs0
        | (["seqread-4k","seqread-64k","seqread-128k","randread-4k","randread-64k","randread-128k",
            "seqwrite-4k","seqwrite-64k","seqwrite-128k","randwrite-4k","randwrite-64k","randwrite-128k",
            "seqread-128k@800m","seqread-128k@1200m","seqread-128k@80m","seqwrite-128k@80m"]
           | map(select(. as $j | $jobs0 | index($j)))) as $jobs
        | def cell($p; $j): ($r | map(select(.peer == $p and .job == $j)) | .[0]);
          def med($p; $j): (cell($p; $j) | if . == null then null else (.mib_s | median) end);
          def ratio($a; $b): if $a != null and $b != null and $b > 0 then ($a / $b * 100 | round / 100 | tostring) else "–" end;
          def hit($c): if $c == null or $c.engine == null then "–"
                       else ($c.engine | map(.hit_rate) | median | pct) + " (\($c.engine | map(.direct) | median) direct)" end;
          (.settings.software_aes // false) as $soft
        | "# spec-fio (\($mode)\(if $soft then ", software AES" else "" end)): speculation on vs off vs gocryptfs vs the no-crypto ceiling\n",
          (if $soft then "warpfs keystream made with software AES (WARPFS_NO_AESNI=1, the AES-NI-off experiment of the papers); GHASH keeps PCLMULQDQ, gocryptfs its hardware AES.\n" else empty end),
          "\(.date) · \(.machine.cpu_model), \(.machine.cores) cores, kernel \(.machine.kernel) · AES-NI \(.machine.cpu_flags.aes), VAES \(.machine.cpu_flags.vaes)",
          "CPUs \(.machine.cpu_busy_pct_before)% busy just before the run (other work on a shared machine makes the numbers noisy)",
          (if (.settings.warpfs_mount_args // "") != "" then "Every warpfs peer, the no-crypto ceiling included, mounted with `\(.settings.warpfs_mount_args)` (WARPFS_MOUNT_ARGS).\n" else empty end),
          "git \(.git.commit[0:12])\(if .git.dirty then " (dirty)" else "" end) · \(.settings.backing // "tmpfs") backing · warpfs volumes in \($mode) · fio psync, iodepth 1, direct=0, \(.settings.file_mib) MiB file, \(.settings.runtime_s) s per job, \(.settings.repetitions) rep(s), cold cache before every job\n",
          "Placement (taskset): fio on CPU \(.settings.pinning.fio_cpu); every daemon on CPU \(.settings.pinning.daemon_cpus) (FUSE threads); "
            + "keystream workers of warpfs-specon "
            + ((.settings.pinning.engine_cpus // "") | if . == "" then "with them (no --engine-cpus)" else "on CPU \(.) (--engine-cpus \(.))" end) + ", "
            + "those of warpfs-specon-shared on the daemon CPU with the FUSE threads (the placement of earlier runs). "
            + "Making masks on a core the threads of the file system leave idle is the premise of the technique.\n",
          "MiB/s, median of the repetitions; on = warpfs-specon; hit = (engine ready hits + blocks served decrypted ahead) / (applies + those blocks + blocks of sequential reads the reading thread decrypted itself) over the job, in brackets the blocks decrypted directly without a context (decrypt-ahead chunks among them).\n",
          "| job | " + ($peers | join(" | ")) + " | on/off | on/ceiling | on/gocryptfs | hit (on) | hit (shared) |",
          "|---|" + ($peers | map("---:") | join("|")) + "|---:|---:|---:|---:|---:|",
          ($jobs[] as $j
           | (med("warpfs-specon"; $j)) as $on | (med("warpfs-specoff"; $j)) as $off | (med("warpfs-nocrypto"; $j)) as $ceil
           | (med("gocryptfs"; $j)) as $go
           | "| \($j) | "
             + ($peers | map(med(.; $j) | r1) | join(" | "))
             + " | " + ratio($on; $off) + " | " + ratio($on; $ceil) + " | " + ratio($on; $go)
             + " | " + hit(cell("warpfs-specon"; $j)) + " | " + hit(cell("warpfs-specon-shared"; $j))
             + " |"),
          "\nEngine counters per job (warpfs-specon, last repetition): applies / ready hits / waits / inline / direct / served decrypted ahead / decrypted by the reader in sequential reads (chunks taken over from a stalled thread) / decrypted ahead and wasted; CPUs of the workers.\n",
          ($jobs[] as $j | cell("warpfs-specon"; $j) | select(. != null and .engine != null) | .engine[-1]
           | "- \($j): \(.applies) / \(.ready_hits) / \(.waits) / \(.inline) / \(.direct) / \(.ahead_served // 0) / \(.ahead_inline // "–") (\(.ahead_stolen // "–")) / \(.ahead_wasted // 0); CPUs \(.worker_cpus // [] | map(tostring) | join(","))"),
          "\nVersions: " + ([.results[] | "\(.peer): \(.version)"] | unique | join("; ")) + ".",
          (if (.panics | length) > 0 then "\nPanics in daemon logs:\n" + (.panics | map("- " + .) | join("\n"))
           else "\nNo panic in any daemon log." end)
      ' "$1" >"$2"
}

PEERS="warpfs-specon,warpfs-specon-shared,warpfs-specoff,gocryptfs,warpfs-nocrypto" REPS=1 RUNTIME=10 SIZE_MIB=1024
OUT="" RENDER="" JOBS="" MODE="gcm" SOFT_AES=false
while (($#)); do
    case "$1" in
    --jobs) JOBS="$2"; shift 2 ;;
    --mode)
        MODE="$2"
        [[ $MODE =~ ^(gcm|ctr|xts)(-twofish)?$ ]] || wf_die "--mode is gcm, ctr or xts, or one of them with -twofish"
        shift 2
        ;;
    --quick) RUNTIME=3 SIZE_MIB=256; shift ;;
    --software-aes) SOFT_AES=true; shift ;;
    *) parse_common "$@"; shift "$NARGS" ;;
    esac
done

[[ -z $RENDER ]] || render_only "$RENDER"
OUT="${OUT:-$BENCH/results/$(date -u +%F)-spec-fio}"

# The warpfs peers (and the no-crypto ceiling) init their volumes in MODE.
export WARPFS_MODE="$MODE"
NAME="spec-fio"
[[ $MODE == gcm ]] || NAME="spec-fio-$MODE"
if $SOFT_AES; then
    # Inherited by every daemon; only warpfs reads it.
    export WARPFS_NO_AESNI=1
    NAME="$NAME-softaes"
fi

preflight "tmpfs mounts, drop_caches, warpfs stats"

load_peers "$PEERS" peer_missing_warn

ALL_JOBS=(
    "seqread-4k read 4k read.dat" "seqread-64k read 64k read.dat" "seqread-128k read 128k read.dat"
    "randread-4k randread 4k read.dat" "randread-64k randread 64k read.dat" "randread-128k randread 128k read.dat"
    "seqwrite-4k write 4k write.dat" "seqwrite-64k write 64k write.dat" "seqwrite-128k write 128k write.dat"
    "randwrite-4k randwrite 4k read.dat" "randwrite-64k randwrite 64k read.dat" "randwrite-128k randwrite 128k read.dat"
    "seqread-128k@800m read 128k read.dat" "seqread-128k@1200m read 128k read.dat"
    "seqread-128k@80m read 128k read.dat" "seqwrite-128k@80m write 128k write.dat"
)
JOBLIST=()
for j in "${ALL_JOBS[@]}"; do
    if [[ (-z $JOBS && ${j%% *} != *@*) || ",$JOBS," == *",${j%% *},"* ]]; then JOBLIST+=("$j"); fi
done
((${#JOBLIST[@]})) || wf_die "no job selected"
wf_log "peers: ${ACTIVE[*]}; mode $MODE; ${#JOBLIST[@]} jobs x ${REPS} rep(s) x ${RUNTIME}s; file ${SIZE_MIB} MiB;" \
    "fio on CPU $FIO_CPU, daemons on CPU(s) $FS_CPUS, warpfs-specon's keystream workers on CPU(s) ${ENGINE_CPUS:-$FS_CPUS}"

work_setup spec

# Engine counters of a warpfs mount as JSON, or "null" (no engine / not warpfs).
engine_stats() {
    case "$1" in
    warpfs-specon | warpfs-specon-shared | warpfs-specoff | warpfs-split1 | warpfs-split2)
        t "$WARPFS_PEER_BIN" stats --json "$WORK/$1/mnt" 2>/dev/null || echo null
        ;;
    *) echo null ;;
    esac
}
measure_busy_before
git_state

for p in "${ACTIVE[@]}"; do peer_setup "$p"; done

mkdir -p "$OUT"
ROWS="$WORK/rows.jsonl"
: >"$ROWS"
T0=$SECONDS
# one_job P REP NAME RW BS FILE — one measurement, a line in $ROWS.
one_job() {
    local p="$1" rep="$2" jname="$3" rw="$4" bs="$5" file="$6" extra=() json s0 s1 dir line
    [[ $rw == write || $rw == randwrite ]] && extra=(--end_fsync=1)
    [[ $jname == *@* ]] && extra+=(--rate="${jname#*@}")
    [[ $jname == seqwrite-* ]] && t rm -f "$WORK/$p/mnt/$file"
    json="$RAW/$p-$jname-$rep.json"
    s0="$(engine_stats "$p")"
    fio_job "$p" "$jname" "$rw" "$bs" "$file" "$json" $((RUNTIME + 180)) "${extra[@]}"
    s1="$(engine_stats "$p")"
    dir="read"
    [[ $rw == *write ]] && dir="write"
    jq -c -n --arg peer "$p" --arg job "$jname" --arg rw "$rw" --arg bs "$bs" --argjson rep "$rep" \
        --slurpfile fio "$json" --argjson s0 "$s0" --argjson s1 "$s1" \
        --argjson cpu "$JOB_CPU" --arg dir "$dir" '
        {peer: $peer, job: $job, rw: $rw, bs: $bs, rep: $rep,
         mib_s: ($fio[0].jobs[0][$dir].bw_bytes / 1048576 | . * 10 | round / 10),
         daemon_cpu_s: $cpu,
         engine: (if $s0 == null or $s1 == null then null else
           ({applies: ($s1.applies - $s0.applies), ready_hits: ($s1.ready_hits - $s0.ready_hits),
             waits: ($s1.waits - $s0.waits), wait_ms: (($s1.wait_ns - $s0.wait_ns) / 1e6 | round),
             inline: ($s1.inline - $s0.inline), direct: ($s1.direct - $s0.direct),
             made_by_workers: ($s1.made_by_workers - $s0.made_by_workers),
             wasted: ($s1.wasted - $s0.wasted), speculation: $s1.speculation, threads: $s1.threads,
             worker_cpus: ($s1.worker_cpus // []),
             ahead_served: (($s1.ahead_served // 0) - ($s0.ahead_served // 0)),
             ahead_wasted: (($s1.ahead_wasted // 0) - ($s0.ahead_wasted // 0)),
             ahead_inline: (($s1.ahead_inline // 0) - ($s0.ahead_inline // 0)),
             ahead_stolen: (($s1.ahead_stolen // 0) - ($s0.ahead_stolen // 0)),
             split_requests: (($s1.split_requests // 0) - ($s0.split_requests // 0)),
             split_parts_workers: (($s1.split_parts_workers // 0) - ($s0.split_parts_workers // 0)),
             split_parts_caller: (($s1.split_parts_caller // 0) - ($s0.split_parts_caller // 0))}
            | .hit_rate = (if .applies + .ahead_served + .ahead_inline > 0
                           then (.ready_hits + .ahead_served) / (.applies + .ahead_served + .ahead_inline)
                           else null end)) end)}' >>"$ROWS"
    line="$(tail -n 1 "$ROWS")"
    printf '[spec-fio] rep %d/%d %-14s %-16s %8.1f MiB/s  hit %s  (daemon CPU %ss)\n' "$rep" "$REPS" "$jname" "$p" \
        "$(jq -r .mib_s <<<"$line")" "$(jq -r '.engine.hit_rate // "-" | if type == "number" then (. * 1000 | round / 10 | tostring) + "%" else . end' <<<"$line")" \
        "$(jq -r .daemon_cpu_s <<<"$line")" >&2
}
run_jobs one_job "${JOBLIST[@]}"
wf_log "measured in $((SECONDS - T0))s"

# Panics in any daemon log (logs are copied to $RAW at exit too).
PANICS="$WORK/panics.txt"
: >"$PANICS"
for p in "${ACTIVE[@]}"; do
    for f in "$WORK/$p"/daemon.log*; do
        if [[ -f $f ]]; then
            grep -h -i "panick" "$f" | sed "s|^|$p: |" >>"$PANICS" || true
        fi
    done
done
[[ -s $PANICS ]] && wf_warn "panics in daemon logs:" && cat "$PANICS" >&2

VERSIONS_JSON="$(versions_json)"
jq -s \
    --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    --arg cpu "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)" \
    --argjson cores "$NCPU" --arg kernel "$(uname -r)" --argjson busy0 "$BUSY_BEFORE" \
    --argjson aes "$(flag aes)" --argjson vaes "$(flag vaes)" \
    --arg commit "$GIT_COMMIT" --argjson dirty "$GIT_DIRTY" --arg fio "$(fio --version)" \
    --argjson runtime "$RUNTIME" --argjson reps "$REPS" --argjson size "$SIZE_MIB" \
    --arg fio_cpu "$FIO_CPU" --arg fs_cpus "$FS_CPUS" --arg engine_cpus "$ENGINE_CPUS" --arg mode "$MODE" \
    --arg backing "$BACKING_DESC" \
    --argjson soft_aes "$SOFT_AES" --arg margs "${WARPFS_MOUNT_ARGS:-}" --arg bdi "${BDI_MAX_BYTES:-}" --arg session "$(daemon_session)" \
    --argjson versions "$VERSIONS_JSON" \
    --rawfile panics "$PANICS" '
    . as $rows | {
        benchmark: "spec-fio", date: $date,
        machine: {cpu_model: $cpu, cores: $cores, kernel: $kernel, cpu_flags: {aes: $aes, vaes: $vaes},
                  cpu_busy_pct_before: $busy0},
        git: {commit: $commit, dirty: $dirty},
        settings: {backing: $backing, file_mib: $size, runtime_s: $runtime, repetitions: $reps, fio: $fio,
                   ioengine: "psync", iodepth: 1, direct: 0, mode: $mode, software_aes: $soft_aes,
                   warpfs_mount_args: $margs, bdi_max_bytes: $bdi, daemon_session: $session,
                   cold_cache: "unmount + drop_caches + mount before every job",
                   pinning: {fio_cpu: $fio_cpu, daemon_cpus: $fs_cpus, tool: "taskset",
                             engine_cpus: $engine_cpus,
                             engine_cpus_of: "warpfs-specon (--engine-cpus; empty: the daemon'"'"'s CPUs); warpfs-specon-shared: the daemon'"'"'s CPUs"}},
        panics: ($panics | split("\n") | map(select(length > 0))),
        results: ($rows | group_by([.peer, .job]) | map({
            peer: .[0].peer, version: $versions[.[0].peer], job: .[0].job, rw: .[0].rw, bs: .[0].bs,
            mib_s: map(.mib_s), daemon_cpu_s: map(.daemon_cpu_s),
            engine: (if .[0].engine == null then null else map(.engine) end)}))
    }' "$ROWS" >"$OUT/$NAME.json"
render_md "$OUT/$NAME.json" "$OUT/$NAME.md"
cat "$OUT/$NAME.md"
wf_log "wrote ${OUT#"$WF_REPO"/}/$NAME.json and $NAME.md"
