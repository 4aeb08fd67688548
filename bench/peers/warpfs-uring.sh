# bench/peers/warpfs-uring.sh — warpfs served through FUSE over io_uring (`--transport uring`; bench/transport.sh turns the kernel's enable_uring on for its run), with the default kernel caches.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_uring_available() { warpfs_available; }
warpfs_uring_version() { printf '%s, --transport uring\n' "$(warpfs_version)"; }
warpfs_uring_crypto() { true; }
warpfs_uring_init() { warpfs_init "$@"; }
warpfs_uring_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --transport uring ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
