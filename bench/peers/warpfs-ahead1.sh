# bench/peers/warpfs-ahead1.sh — warpfs on /dev/fuse with `--read-ahead 1`
# (otherwise its defaults): decrypt-ahead one request past a sequential
# reader's current one instead of two. Beside warpfs-dev and
# warpfs-noahead, it shows whether a shallower decrypt-ahead keeps the
# segments it answers in the cache (bench/readcost.sh).
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_ahead1_available() { warpfs_available; }
warpfs_ahead1_version() { printf '%s, --transport dev --read-ahead 1\n' "$(warpfs_version)"; }
warpfs_ahead1_crypto() { true; }
warpfs_ahead1_init() { warpfs_init "$@"; }
warpfs_ahead1_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --transport dev --read-ahead 1 ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
