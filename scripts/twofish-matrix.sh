#!/usr/bin/env bash
# scripts/twofish-matrix.sh — the Twofish dimension in full. CI (scripts/
# test.sh) runs a representative subset: the crypto known answers and
# property tests, tests/twofish.rs, four tests/io/ tests over the three
# Twofish modes (the `mode_tests!(twofish: ...)` arm), the example volumes
# and the GPU XTS-Twofish kernel on pocl. This script adds:
#   1. the Twofish property tests with 20x the cases (PROPTEST_CASES);
#   2. tests/twofish.rs and the tests/io/ Twofish tests on both transports
#      (io_uring where the kernel has it, and /dev/fuse), each with
#      speculation on and off;
#   3. fsx on gcm-twofish, ctr-twofish and xts-twofish (scripts/fsx.sh);
#   4. the GPU XTS-Twofish tests with 20x the cases (OpenCL; skipped
#      without a platform).
#
#   sudo bash scripts/twofish-matrix.sh
#
# About 10 minutes on 2 cores. Exit status 0 when every part passed.
set -euo pipefail
WF_NAME=twofish-matrix
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$WF_REPO"
wf_is_root || wf_skip "needs root (mounts)"
fail=0
run() {
    wf_log "$*"
    "$@" || { wf_warn "FAILED: $*"; fail=1; }
}
run env PROPTEST_CASES=4000 cargo test --release -p warpfs-crypto --lib -- twofish xts
run env PROPTEST_CASES=2000 cargo test --release -p warpfs-engine --lib split
wf_uring_on
trap wf_uring_restore EXIT
for transport in uring dev; do
    for spec in on off; do
        run env WARPFS_TRANSPORT=$transport WARPFS_TEST_SPECULATION=$spec \
            cargo test --release -p warpfs --test twofish --no-fail-fast
        run env WARPFS_TRANSPORT=$transport WARPFS_TEST_SPECULATION=$spec \
            cargo test --release -p warpfs --test io --no-fail-fast -- twofish
    done
done
run env FSX_MODES="gcm-twofish ctr-twofish xts-twofish" bash scripts/fsx.sh
run env PROPTEST_CASES=320 cargo test --release -p warpfs-engine --test gpu_xts_twofish
exit "$fail"
