#!/usr/bin/env bash
# scripts/cipher-matrix.sh — the XChaCha20 dimension in full (FORMAT.md 15).
# CI (scripts/test.sh) runs every `mode_tests!` suite (io, namespace,
# crash, power-loss, security) over xchacha20-poly1305 and ctr-xchacha20,
# the known answers and the property tests against the chacha20poly1305
# and poly1305 crates, tests/xchacha.rs, the attacks of tests/attacks.rs on
# xchacha20-poly1305, the content tamper tests, the example volumes and fsx
# (1 seed). This script runs the XChaCha20 cases alone, with more:
#   1. the XChaCha20 property tests with 20x the cases (PROPTEST_CASES);
#   2. the io, namespace, crash, power-loss and security (tamper) suites,
#      tests/attacks.rs and tests/xchacha.rs over xchacha20-poly1305 and
#      ctr-xchacha20 on both transports (io_uring, its kernel switch turned
#      on for the run and put back, and /dev/fuse), with the default
#      policy; the io suite again with `--speculation off`;
#   3. fsx on xchacha20-poly1305 and ctr-xchacha20 (scripts/fsx.sh, 3 seeds).
#
#   sudo bash scripts/cipher-matrix.sh [--transport uring|dev]   (default: both)
#
# About 25 minutes on 2 cores. Exit status 0 when every part passed.
set -euo pipefail
WF_NAME=cipher-matrix
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$WF_REPO"
wf_is_root || wf_skip "needs root (mounts)"
transports=(uring dev)
if [[ ${1:-} == --transport ]]; then
    [[ ${2:-} == uring || ${2:-} == dev ]] || wf_die "--transport takes uring or dev"
    transports=("$2")
fi
fail=0
run() {
    wf_log "$*"
    "$@" || { wf_warn "FAILED: $*"; fail=1; }
}
SUITES=(--test io --test namespace --test crash --test power_loss --test security --test attacks --test xchacha)
run env PROPTEST_CASES=6000 cargo test --release -p warpfs-crypto --lib -- xchacha
run cargo test --release -p warpfs-engine --test engine -- xchacha
wf_uring_on
trap wf_uring_restore EXIT
for transport in "${transports[@]}"; do
    run env WARPFS_TRANSPORT=$transport \
        cargo test --release -p warpfs "${SUITES[@]}" --no-fail-fast -- xchacha
done
run env WARPFS_TRANSPORT="${transports[0]}" WARPFS_TEST_SPECULATION=off \
    cargo test --release -p warpfs --test io --no-fail-fast -- xchacha
run env FSX_MODES="xchacha20-poly1305 ctr-xchacha20" bash scripts/fsx.sh
exit "$fail"
