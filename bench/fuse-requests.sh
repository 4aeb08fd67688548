#!/usr/bin/env bash
# bench/fuse-requests.sh — which FUSE requests each peer's mount gets for
# the tree jobs and the storm of bench/transport.sh, counted by the
# kernel's `fuse:fuse_request_send` tracepoint (filtered to the peer's
# connection): counts, not times, so they do not move with a shared
# machine's load. They say where a peer makes more round trips than
# another for the same work (the writeback cache's GETATTR after a close
# and SETATTR after an unlink, the GETXATTR lookups of xattrs).
#
#   sudo bash bench/fuse-requests.sh [--peers warpfs-dev,warpfs-uring,gocryptfs,securefs] [--out DIR]
#
# Per peer (bench/lib-peers.sh: a tmpfs backing, a volume, a mount), each
# step on a cold mount: untar of the 4,000-file tree (as root, so owners
# are restored), `ls -lR`, reread (bench/meta.py), `rm -rf`, and the
# create/stat/unlink storm of 3,000 files. Output: --out (default
# bench/results/DATE-fuse-requests)/fuse-requests.json and .md (per step
# and peer: every opcode's count and the requests per file).
set -euo pipefail

WF_NAME="fuse-requests"
# shellcheck source=bench/lib-peers.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-peers.sh"

PY=/usr/bin/python3
PEERS="warpfs-dev,warpfs-uring,gocryptfs,securefs"
REPS=1 RUNTIME=1 SIZE_MIB=1 OUT="" RENDER=""
while (($#)); do parse_common "$@"; shift "$NARGS"; done
OUT="${OUT:-$BENCH/results/$(date -u +%F)-fuse-requests}"

export FS_CPUS="${FS_CPUS:-0-$(($(nproc) - 1))}"
preflight "tmpfs mounts, drop_caches, tracefs"
TR=/sys/kernel/tracing
[[ -d $TR/events ]] || mount -t tracefs nodev "$TR" || wf_die "no tracefs"
EV="$TR/events/fuse/fuse_request_send"
[[ -d $EV ]] || wf_die "this kernel has no fuse:fuse_request_send tracepoint"
wf_uring_on
# Put it back if anything below dies before the full EXIT trap is set.
trap wf_uring_restore EXIT
load_peers "$PEERS" peer_missing_warn
work_setup fuse-requests
restore() {
    local rc=$?
    set +e
    echo 0 >"$EV/enable"
    echo 0 >"$EV/filter"
    wf_uring_restore
    umount "$WORK/tree-src" 2>/dev/null
    (exit "$rc")
    cleanup
}
trap restore EXIT
git_state

FILES=4000 STORM=3000
TREE="$WORK/tree-src"
mkdir -p "$TREE"
mount -t tmpfs -o size=256m fuse-requests-tree "$TREE"
"$PY" "$BENCH/meta.py" tree "$TREE/t" --files "$FILES" --seed 1 >/dev/null
tar -C "$TREE" -cf "$TREE/tree.tar" t
rm -rf "${TREE:?}/t"
for p in "${ACTIVE[@]}"; do peer_setup "$p"; done
echo 16384 >"$TR/buffer_size_kb"

ROWS="$WORK/rows.jsonl"
: >"$ROWS"
# counted P STEP FILES CMD... — CMD on P's mount (cold), its requests counted.
counted() {
    local p="$1" step="$2" files="$3" dev
    shift 3
    remount_cold "$p"
    dev=$(mountpoint -d "$WORK/$p/mnt")
    echo "connection == $(((${dev%%:*} << 20) | ${dev#*:}))" >"$EV/filter"
    echo >"$TR/trace"
    echo 1 >"$EV/enable"
    t "$@" >/dev/null || wf_die "$p: $step failed"
    sync
    echo 0 >"$EV/enable"
    grep -o '(FUSE_[A-Z_0-9]*)' "$TR/trace" | tr -d '()' | sort | uniq -c |
        jq -R -c -s --arg peer "$p" --arg step "$step" --argjson files "$files" '
        [split("\n")[] | select(length > 0) | capture("^ *(?<n>[0-9]+) (?<op>.*)$") | {(.op): (.n | tonumber)}]
        | add // {} | {peer: $peer, step: $step, files: $files, requests: .}' >>"$ROWS"
    wf_log "$p $step: $(tail -n 1 "$ROWS" | jq -c '.requests')"
}
for p in "${ACTIVE[@]}"; do
    m="$WORK/$p/mnt"
    t rm -rf "$m/t" "$m/storm"
    counted "$p" untar "$FILES" tar -xf "$TREE/tree.tar" -C "$m"
    counted "$p" ls-lR "$FILES" ls -lR "$m/t"
    counted "$p" reread "$FILES" "$PY" "$BENCH/meta.py" reread "$m/t"
    counted "$p" rm-rf "$FILES" rm -rf "$m/t"
    t mkdir -p "$m/storm"
    counted "$p" storm "$STORM" "$PY" "$BENCH/meta.py" storm "$m/storm" --files "$STORM"
done

mkdir -p "$OUT"
jq -s --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg kernel "$(uname -r)" \
    --arg commit "$GIT_COMMIT" --argjson dirty "$GIT_DIRTY" --argjson versions "$(versions_json)" '
    {benchmark: "fuse-requests", date: $date, machine: {kernel: $kernel}, git: {commit: $commit, dirty: $dirty},
     versions: $versions, results: .}' "$ROWS" >"$OUT/fuse-requests.json"
"$PY" - "$OUT/fuse-requests.json" >"$OUT/fuse-requests.md" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
peers = list(dict.fromkeys(r["peer"] for r in doc["results"]))
steps = list(dict.fromkeys(r["step"] for r in doc["results"]))
cell = {(r["peer"], r["step"]): r for r in doc["results"]}
out = ["# FUSE requests per step, counted by the kernel's tracepoint", ""]
out.append("%s · kernel %s · git %s%s · `sudo bash bench/fuse-requests.sh`" % (
    doc["date"], doc["machine"]["kernel"], doc["git"]["commit"][:12], " (dirty)" if doc["git"]["dirty"] else ""))
out.append("")
out.append("Versions: " + "; ".join("%s: %s" % (p, doc["versions"][p]) for p in peers) + ".")
for s in steps:
    files = next(cell[(p, s)]["files"] for p in peers if (p, s) in cell)
    ops = sorted({o for p in peers if (p, s) in cell for o in cell[(p, s)]["requests"]},
                 key=lambda o: -max(cell[(p, s)]["requests"].get(o, 0) for p in peers if (p, s) in cell))
    out += ["", "## %s (%d files)" % (s, files), "", "| request | " + " | ".join(peers) + " |",
            "|---|" + "---:|" * len(peers)]
    for o in ops:
        out.append("| %s | %s |" % (o.replace("FUSE_", ""), " | ".join(
            str(cell[(p, s)]["requests"].get(o, 0)) if (p, s) in cell else "–" for p in peers)))
    out.append("| **per file** | %s |" % " | ".join(
        "%.2f" % (sum(cell[(p, s)]["requests"].values()) / files) if (p, s) in cell else "–" for p in peers))
print("\n".join(out))
EOF
cat "$OUT/fuse-requests.md"
wf_log "wrote ${OUT#"$WF_REPO"/}/fuse-requests.json and .md"
