# bench/peers/warpfs-uring-specon.sh — warpfs through FUSE over io_uring with
# `--speculation on` (keystream workers and decrypt-ahead threads, placed by
# the engine), to measure what `--speculation auto` should pick with the ring.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_uring_specon_available() { warpfs_available; }
warpfs_uring_specon_version() { printf '%s, --transport uring --speculation on\n' "$(warpfs_version)"; }
warpfs_uring_specon_crypto() { true; }
warpfs_uring_specon_init() { warpfs_init "$@"; }
warpfs_uring_specon_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --transport uring --speculation on \
        ${WARPFS_MOUNT_ARGS:-} --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
