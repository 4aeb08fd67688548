# bench/peers/warpfs-uring-shared.sh — warpfs through FUSE over io_uring with `--shared-storage`: every kernel cache off (1 s timeouts, no negative entries, pages dropped at each open, no cached symlinks, FLUSH at close), the caches-off row of bench/transport.sh.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_uring_shared_available() { warpfs_available; }
warpfs_uring_shared_version() { printf '%s, --transport uring --shared-storage\n' "$(warpfs_version)"; }
warpfs_uring_shared_crypto() { true; }
warpfs_uring_shared_init() { warpfs_init "$@"; }
warpfs_uring_shared_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --transport uring --shared-storage ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
