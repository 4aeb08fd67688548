#!/usr/bin/env bash
# scripts/twofish-matrix.sh — the Twofish dimension in full (gcm-twofish,
# ctr-twofish, xts-twofish: FORMAT.md 7 and 11).
#
# CI (scripts/test.sh) runs a representative subset: the crypto known
# answers and property tests; tests/twofish.rs and tests/rekey_twofish.rs;
# the `mode_tests!(twofish: ...)` cases, in the three Twofish modes, of
# io (sparse files, truncation, random and big writes), namespace (rename,
# hard links, fallocate ranges) and faults (a full disk), and with
# speculation on (Twofish's default; `speculation_tests!(twofish_on: ...)`)
# crash (SIGKILL during concurrent writes) and power_loss (`writes`), on
# io_uring (step test) and again on /dev/fuse (step dev-fuse); fsx on
# gcm-twofish (1 seed); pjdfstest on gcm-twofish; the example volumes and
# the GPU XTS-Twofish kernel on pocl. Every other Twofish case of namespace,
# crash, power_loss and faults (`mode_tests!(all: ...)`) is #[ignore]d in
# CI: this script runs them. It adds:
#   1. the Twofish property tests with 20x the cases (PROPTEST_CASES);
#   2. on each transport (io_uring, its kernel switch turned on for the run
#      and put back, and /dev/fuse):
#      - tests/twofish.rs and the Twofish cases of io, namespace and faults
#        (ENOSPC), each with speculation on and off;
#      - every Twofish case of crash, power_loss (writes, rename, an
#        interrupted rekey; each case forces speculation on, then off),
#        keyslots (revocation offline and online) and tests/rekey_twofish.rs;
#      - pjdfstest on gcm-twofish, ctr-twofish and xts-twofish
#        (scripts/pjdfstest.sh --cipher twofish);
#      the #[ignore]d cases included (`-- --include-ignored twofish`: a
#      Twofish case's name ends in `_twofish`, and no other test of these
#      suites has "twofish" in its name);
#   3. fsx on gcm-twofish, ctr-twofish and xts-twofish (scripts/fsx.sh,
#      3 seeds each);
#   4. the GPU XTS-Twofish tests with 20x the cases (OpenCL; skipped
#      without a platform).
#
#   sudo bash scripts/twofish-matrix.sh [--transport uring|dev]   (default: both)
#
# About 15 minutes on 2 cores (9 with --transport dev alone, measured on a
# shared machine, builds included). Exit status 0 when every part passed.
set -euo pipefail
WF_NAME=twofish-matrix
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
run env PROPTEST_CASES=4000 cargo test --release -p warpfs-crypto --lib -- twofish xts
run env PROPTEST_CASES=2000 cargo test --release -p warpfs-engine --lib split
if [[ " ${transports[*]} " == *" uring "* ]]; then
    wf_uring_on
    trap wf_uring_restore EXIT
fi
for transport in "${transports[@]}"; do
    for spec in on off; do
        run env WARPFS_TRANSPORT=$transport WARPFS_TEST_SPECULATION=$spec \
            cargo test --release -p warpfs --test twofish --no-fail-fast
        run env WARPFS_TRANSPORT=$transport WARPFS_TEST_SPECULATION=$spec \
            cargo test --release -p warpfs --test io --test namespace --test faults --no-fail-fast \
            -- --include-ignored twofish
    done
    run env WARPFS_TRANSPORT=$transport \
        cargo test --release -p warpfs --test crash --test power_loss --test keyslots --test rekey_twofish \
        --no-fail-fast \
        -- --include-ignored twofish
    for mode in gcm ctr xts; do
        run env WARPFS_TRANSPORT=$transport bash scripts/pjdfstest.sh --mode $mode --cipher twofish
    done
done
run env WARPFS_TRANSPORT="${transports[0]}" FSX_MODES="gcm-twofish ctr-twofish xts-twofish" bash scripts/fsx.sh
run env PROPTEST_CASES=320 cargo test --release -p warpfs-engine --test gpu_xts_twofish
exit "$fail"
