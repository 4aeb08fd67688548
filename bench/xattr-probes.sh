#!/usr/bin/env bash
# bench/xattr-probes.sh — how many GETXATTR requests the kernel sends a
# warpfs mount (default flags, /dev/fuse) for the tree jobs of
# bench/transport.sh, counted by the daemon (its unmount line: requests for
# names outside user.*, which it answers ENODATA without touching the
# backing file) and not timed: counts do not move with a shared machine's
# load. Then one getxattr round trip, timed by a loop of 20,000 calls, for a
# name outside user.* and for a user.* name.
#
#   sudo bash bench/xattr-probes.sh [--out DIR]    (default bench/results/DATE-xattr-probes)
#
# Output: DIR/xattr-probes.md (a table: step, files, requests, per file).
set -euo pipefail

WF_NAME=xattr-probes
# shellcheck source=bench/lib-measure.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-measure.sh"

OUT=""
while (($#)); do
    case "$1" in
    --out) OUT="$2"; shift 2 ;;
    *) wf_die "unknown argument $1" ;;
    esac
done
OUT="${OUT:-$BENCH/results/$(date -u +%F)-xattr-probes}"
wf_is_root || wf_die "needs root (tmpfs mounts, drop_caches)"
wf_ensure fusermount3:fuse3 || wf_die "fuse3 is missing"
PY=/usr/bin/python3
BIN="$(wf_warpfs_bin)"
FILES=4000 STORM=3000

W="$(mktemp -d /tmp/warpfs-xattr-probes.XXXXXX)"
B="$W/backing" M="$W/mnt" T="$W/src"
mkdir -p "$B" "$M" "$T"
cleanup() {
    local rc=$?
    set +e
    fusermount3 -u "$M" 2>/dev/null
    umount "$B" "$T" 2>/dev/null
    rm -rf "$W"
    exit "$rc"
}
trap cleanup EXIT
mount -t tmpfs -o size=512m xattr-probes-b "$B"
mount -t tmpfs -o size=256m xattr-probes-t "$T"
"$PY" "$BENCH/meta.py" tree "$T/t" --files "$FILES" --seed 1 >/dev/null
tar -C "$T" -cf "$T/tree.tar" t
rm -rf "${T:?}/t"
printf 'xattr-probes-%s\n' "$RANDOM$RANDOM" >"$W/pass"
"$BIN" init --passfile "$W/pass" "$B/vol" >/dev/null 2>&1

LOG="$W/daemon.log"
up() {
    : >"$LOG"
    "$BIN" mount -f --passfile "$W/pass" --transport dev --log-file "$LOG" "$B/vol" "$M" >/dev/null 2>&1 &
    wf_wait_mounted "$M" 30 $! || wf_die "mount failed"
}
# down — unmount; prints the daemon's count of getxattr probes.
down() {
    local i
    fusermount3 -u "$M"
    for i in $(seq 50); do
        grep -q 'getxattr request(s) for names outside' "$LOG" && break
        sleep 0.1
    done
    grep -o '[0-9]* getxattr request(s) for names outside' "$LOG" | tail -n 1 | cut -d' ' -f1
}

mkdir -p "$OUT"
MD="$OUT/xattr-probes.md"
{
    echo "# GETXATTR requests a default mount gets, counted by the daemon"
    echo
    echo "$(date -u +%FT%TZ) · kernel $(uname -r) · $("$BIN" --version | head -n 1) · git $(git -C "$WF_REPO" rev-parse --short HEAD) · \`sudo bash bench/xattr-probes.sh\`"
    echo
    echo "Each step on a cold mount (/dev/fuse, default flags; the same tree and storm as bench/transport.sh)."
    echo
    echo "| step | files | GETXATTR requests | per file |"
    echo "|---|---:|---:|---:|"
} >"$MD"
step() {
    local name="$1" n
    shift
    sync
    echo 3 >/proc/sys/vm/drop_caches
    up
    "$@" >/dev/null
    n="$(down)"
    printf '| %s | %s | %s | %s |\n' "$name" "$COUNT" "$n" "$(awk -v a="$n" -v b="$COUNT" 'BEGIN { printf "%.2f", a / b }')" >>"$MD"
}
COUNT=$FILES step "untar (tar -xf, as root)" tar -xf "$T/tree.tar" -C "$M"
COUNT=$FILES step "ls -lR" ls -lR "$M/t"
COUNT=$FILES step "reread" "$PY" "$BENCH/meta.py" reread "$M/t"
COUNT=$FILES step "rm -rf" rm -rf "$M/t"
COUNT=$FILES step "untar, owners not restored (tar -xf --no-same-owner)" tar -xf "$T/tree.tar" --no-same-owner -C "$M"
up
rm -rf "$M/t"
down >/dev/null
up
mkdir "$M/storm"
down >/dev/null
COUNT=$STORM step "storm (create, stat, unlink)" "$PY" "$BENCH/meta.py" storm "$M/storm" --files "$STORM"

up
echo x >"$M/probe"
{
    echo
    echo "One getxattr(2) round trip on a file of the mount, the mean of 20,000 calls (Python's os.getxattr):"
    echo
    "$PY" - "$M/probe" <<'EOF'
import os, sys, time
p = sys.argv[1]
for name in ("security.capability", "user.absent"):
    n = 20000
    t = time.perf_counter()
    for _ in range(n):
        try:
            os.getxattr(p, name)
        except OSError:
            pass
    print("- `%s`: %.1f µs" % (name, (time.perf_counter() - t) / n * 1e6))
EOF
} >>"$MD"
down >/dev/null
cat "$MD"
wf_log "wrote ${MD#"$WF_REPO"/}"
