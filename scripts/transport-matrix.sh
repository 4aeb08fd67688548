#!/usr/bin/env bash
# scripts/transport-matrix.sh — the whole mount-level suite on one FUSE
# transport: every test of crates/warpfs, fsx (all seeds), pjdfstest and the
# soak, with WARPFS_TRANSPORT set for every mount (and `container open`).
# scripts/test.sh runs everything on io_uring and a subset on /dev/fuse (the
# mount tests in its DEV_FUSE_TESTS, fsx (gcm, one seed), pjdfstest and a short
# soak); this runs all of it.
#
#   sudo bash scripts/transport-matrix.sh [dev|uring]     (default dev)
#
# For uring the module parameter enable_uring is set on and put back at exit.
# Exit status 0 when every step passed; logs in target/test-logs/matrix-T-*.log.
set -euo pipefail
WF_NAME=transport-matrix
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$WF_REPO"
T="${1:-dev}"
[[ $T == dev || $T == uring ]] || wf_die "transport is dev or uring"
wf_is_root || wf_die "needs root (mounts, enable_uring)"
export WARPFS_TRANSPORT="$T"
P=/sys/module/fuse/parameters/enable_uring
if [[ $T == uring ]]; then
    [[ -w $P ]] || wf_die "no FUSE over io_uring in this kernel ($P)"
    WAS="$(cat "$P")"
    echo Y >"$P"
    trap 'echo "$WAS" >"$P"' EXIT
fi
LOGS="$WF_REPO/target/test-logs"
mkdir -p "$LOGS"
FAILED=()
run() {
    local name="$1" t0=$SECONDS
    shift
    printf '\n==== %s (%s): %s\n' "$name" "$T" "$*"
    if "$@" 2>&1 | tee "$LOGS/matrix-$T-$name.log"; then :; else FAILED+=("$name"); fi
    printf '==== %s: %ss\n' "$name" $((SECONDS - t0))
}
run test cargo test --release -p warpfs --no-fail-fast
run fsx bash scripts/fsx.sh
run pjdfstest bash scripts/pjdfstest.sh
run soak bash bench/soak.sh --minutes "${SOAK_MINUTES:-1}"
if ((${#FAILED[@]})); then
    echo "transport $T: FAILED: ${FAILED[*]}"
    exit 1
fi
echo "transport $T: every step passed"
