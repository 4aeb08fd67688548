# bench/peers/warpfs-noahead.sh — warpfs on /dev/fuse with `--read-ahead 0`
# (otherwise its defaults): no decrypt-ahead, so a sequential READ is read
# from the backing file and decrypted by the FUSE thread that answers it.
# Beside warpfs-dev, it shows what decrypt-ahead's second core buys and
# what its buffers cost (bench/readcost.sh).
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_noahead_available() { warpfs_available; }
warpfs_noahead_version() { printf '%s, --transport dev --read-ahead 0\n' "$(warpfs_version)"; }
warpfs_noahead_crypto() { true; }
warpfs_noahead_init() { warpfs_init "$@"; }
warpfs_noahead_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --transport dev --read-ahead 0 ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
