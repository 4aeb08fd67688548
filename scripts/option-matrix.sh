#!/usr/bin/env bash
# scripts/option-matrix.sh — the mount-level suite (every test of
# crates/warpfs) under the mount options users run, one combination at a
# time: speculation on/off × FUSE transport io_uring//dev/fuse × xattrs
# served or `--no-xattr`. scripts/test.sh runs a representative subset in
# CI (steps 3, 3b, 4 and the `no-xattr` step); this runs the full matrix.
#
#   sudo bash scripts/option-matrix.sh [--only SPEC,TRANSPORT,XATTR] [-- CARGO_TEST_ARGS...]
#
#   SPEC       on | off                 (WARPFS_TEST_SPECULATION)
#   TRANSPORT  uring | dev              (WARPFS_TRANSPORT)
#   XATTR      xattr | no-xattr         (WARPFS_TEST_MOUNT_ARGS=--no-xattr)
#   --only     run one combination, e.g. --only on,dev,no-xattr
#   CARGO_TEST_ARGS  passed to cargo test after `-p warpfs` (default:
#              --no-fail-fast; e.g. `--test io --test namespace`)
#
# io_uring needs /sys/module/fuse/parameters/enable_uring = Y; this script
# never changes it (the uring combinations are reported "not run" when it is
# N). tests/transport.rs toggles that parameter itself and is left out.
# Logs: target/test-logs/options-SPEC-TRANSPORT-XATTR.log. Exit status 0
# when every combination that ran passed. About 15 minutes per combination
# on 2 cores (8 combinations: about 2 hours).
set -euo pipefail
WF_NAME=option-matrix
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$WF_REPO"
wf_is_root || wf_die "needs root (mounts)"
ONLY=""
while (($#)); do
    case "$1" in
    --only) ONLY="$2" && shift 2 ;;
    --) shift && break ;;
    *) wf_die "unknown argument $1 (see the header of $0)" ;;
    esac
done
EXTRA=("$@")
((${#EXTRA[@]})) || EXTRA=(--no-fail-fast)
# Every test binary of crates/warpfs but transport.rs.
TESTS=()
for t in crates/warpfs/tests/*.rs; do
    n=$(basename "$t" .rs)
    [[ $n == transport ]] || TESTS+=(--test "$n")
done
URING=$(cat /sys/module/fuse/parameters/enable_uring 2>/dev/null || echo N)
LOGS="$WF_REPO/target/test-logs"
mkdir -p "$LOGS"
FAILED=() RAN=() NOTRUN=()
for spec in on off; do
    for tr in uring dev; do
        for x in xattr no-xattr; do
            combo="$spec,$tr,$x"
            [[ -z $ONLY || $ONLY == "$combo" ]] || continue
            if [[ $tr == uring && $URING != Y ]]; then
                NOTRUN+=("$combo (enable_uring is $URING)")
                continue
            fi
            margs=""
            [[ $x == no-xattr ]] && margs="--no-xattr"
            log="$LOGS/options-$spec-$tr-$x.log"
            t0=$SECONDS
            printf '\n==== %s\n' "$combo"
            if env WARPFS_TEST_SPECULATION="$spec" WARPFS_TRANSPORT="$tr" WARPFS_TEST_MOUNT_ARGS="$margs" \
                cargo test --release -p warpfs "${TESTS[@]}" "${EXTRA[@]}" 2>&1 | tee "$log"; then
                RAN+=("$combo")
            else
                FAILED+=("$combo")
            fi
            printf '==== %s: %ss\n' "$combo" $((SECONDS - t0))
        done
    done
done
echo "option matrix: passed: ${RAN[*]:-none}"
((${#NOTRUN[@]})) && echo "option matrix: not run: ${NOTRUN[*]}"
if ((${#FAILED[@]})); then
    echo "option matrix: FAILED: ${FAILED[*]}"
    exit 1
fi
