#!/usr/bin/env bash
# scripts/synced-storage.sh — the longer variant of the synced and
# distributed storage suites: tests/glusterfs.rs and tests/syncthing.rs
# (real GlusterFS and Syncthing, started and stopped by the tests) run
# ROUNDS times (default 5), to catch what one CI run may not: a race in a
# partial sync, a heal that takes long. Prints passes per round; exit 1 if
# any round failed. Needs root, /dev/fuse and the packages scripts/test.sh
# installs (glusterfs-server, syncthing, iproute2).
#
#   sudo bash scripts/synced-storage.sh [--rounds N]
set -euo pipefail

WF_NAME=synced-storage
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$WF_REPO"

ROUNDS=5
while (($#)); do
    case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    *) wf_die "unknown argument: $1" ;;
    esac
done
wf_is_root || wf_skip "needs root (GlusterFS, mounts)"
[[ -c /dev/fuse ]] || wf_skip "/dev/fuse does not exist"
wf_ensure glusterd:glusterfs-server mount.glusterfs:glusterfs-client syncthing:syncthing ip:iproute2 ||
    wf_die "glusterfs-server, syncthing or iproute2 cannot be installed"
export WARPFS_NO_SKIP=1
cargo test --release -p warpfs --test glusterfs --test syncthing --no-run >&2
failed=0
for ((r = 1; r <= ROUNDS; r++)); do
    t0=$SECONDS
    if out="$(cargo test --release -p warpfs --test glusterfs --test syncthing -- --nocapture 2>&1)"; then
        res=ok
    else
        res=FAILED
        failed=$((failed + 1))
        printf '%s\n' "$out" | tail -n 80 >&2
    fi
    passed=$(printf '%s\n' "$out" | awk '/^test result:/ { n += $4 } END { print n + 0 }')
    printf 'round %d: %s, %d tests passed, %d s\n' "$r" "$res" "$passed" $((SECONDS - t0))
done
echo "synced-storage: $((ROUNDS - failed)) of $ROUNDS rounds passed"
((failed == 0))
