#!/usr/bin/env bash
# bench/soak.sh — long soak of a warpfs mount: random mixed operations
# (writes, reads, truncates, hole punches, fsyncs, renames, unlink +
# recreate, whole-file verifies) checked against an in-memory model, with a
# remount every 25,000 operations and a full verify after each; half the
# time in gcm, half in ctr (crates/warpfs/tests/soak.rs).
#
#   bash bench/soak.sh [--minutes N] [--out FILE]    (default 10 minutes)
#
# Needs root and /dev/fuse; without them it skips (exit 77; a failure with
# WARPFS_NO_SKIP=1). Writes FILE, by default
# bench/results/DATE-soak/soak-<UTC time>.json (a run kept as a result:
# add the folder's README.md and `bash bench/index.sh`; scripts/test.sh's
# short runs write to target/soak/ instead)
# ({seconds, ops, failures, remounts, ...}); exit status 1 on any failure.
set -euo pipefail

WF_NAME=soak
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$WF_REPO"

MINUTES=10 OUT=""
while (($#)); do
    case "$1" in
        --minutes) MINUTES="$2"; shift 2 ;;
        --minutes=*) MINUTES="${1#*=}"; shift ;;
        --out) OUT="$2"; shift 2 ;;
        --out=*) OUT="${1#*=}"; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) wf_die "unknown argument: $1" ;;
    esac
done
[[ $MINUTES =~ ^[0-9]+(\.[0-9]+)?$ ]] || wf_die "--minutes takes a number"
wf_is_root || wf_skip "needs root"
[[ -c /dev/fuse ]] || wf_skip "/dev/fuse does not exist"
SECS=$(awk -v m="$MINUTES" 'BEGIN { printf "%d", m * 60 }')
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
OUT="${OUT:-bench/results/${STAMP:0:4}-${STAMP:4:2}-${STAMP:6:2}-soak/soak-$STAMP.json}"
[[ $OUT == /* ]] || OUT="$WF_REPO/$OUT"
mkdir -p "$(dirname "$OUT")"
wf_log "soak for $SECS s; result in $OUT"
WARPFS_SOAK_SECS="$SECS" WARPFS_SOAK_JSON="$OUT" WARPFS_TEST_WATCHDOG_SECS=$((SECS + 600)) \
    cargo test --release -p warpfs --test soak -- --ignored --nocapture soak 2>&1 |
    grep -E '^(soak|SOAK|test |thread|---)|panicked' || true
if [[ -f $OUT ]]; then
    cat "$OUT"
    grep -q '"failures": 0,' "$OUT"
else
    wf_die "soak did not finish (no $OUT)"
fi
