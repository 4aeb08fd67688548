#!/usr/bin/env bash
# scripts/crash-states.sh — power-loss crash states beyond what CI checks.
#
#   bash scripts/crash-states.sh [--states N] [--seeds K]
#
# Runs crates/warpfs/tests/power_loss.rs (workloads writes, rename, rekey ×
# content modes gcm, ctr, xts, and gcm with file summaries; see
# docs/decisions/0006-crash-state-testing.md and 0015-file-summaries.md)
# with N distinct crash states per test (default 400; CI checks 24), once
# with the tests' own seeds and then K-1 more times with other seeds (other
# data, other traces, other states; default K=1). Prints the number of states
# checked and the time. Needs root, /dev/fuse and strace (installed here).
set -euo pipefail

WF_NAME=crash-states
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$WF_REPO"

STATES=400 SEEDS=1
while (($#)); do
    case "$1" in
    --states) STATES="$2" && shift 2 ;;
    --seeds) SEEDS="$2" && shift 2 ;;
    *) wf_die "unknown argument $1 (see the header of $0)" ;;
    esac
done
wf_is_root && [[ -c /dev/fuse ]] || wf_die "needs root and /dev/fuse"
wf_ensure strace:strace fusermount3:fuse3 || wf_die "strace and fuse3 are needed"
wf_ensure_rust || wf_die "no usable Rust toolchain"

LOG="$WF_REPO/target/test-logs/crash-states.log"
mkdir -p "$(dirname "$LOG")"
: >"$LOG"
start=$SECONDS
failed=0
for ((k = 0; k < SEEDS; k++)); do
    env=(WARPFS_CRASH_STATES="$STATES" WARPFS_TEST_WATCHDOG_SECS=3600)
    ((k > 0)) && env+=(WARPFS_TEST_SEED=$((0x5eed0000 + k)))
    wf_log "round $((k + 1))/$SEEDS: $STATES states per test (${env[*]})"
    env "${env[@]}" cargo test --release -p warpfs --test power_loss -- --nocapture 2>&1 | tee -a "$LOG" ||
        failed=1
done
total=$(awk '/^crash states checked: / { n += $4 } END { print n + 0 }' "$LOG")
wf_log "crash states checked: $total in $((SECONDS - start)) s ($SEEDS round(s) × 9 tests; log $LOG)"
if ((failed)); then
    wf_die "a crash state failed its checks (see $LOG; the failing state is kept under target/tmp/)"
fi
