# bench/peers/warpfs-uring-t2.sh — warpfs over FUSE io_uring with two threads per ring queue
# (`--uring-threads 2`, otherwise as warpfs-uring): the writeback the kernel
# queues on one CPU's ring is then served by two threads.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_uring_t2_available() { warpfs_available; }
warpfs_uring_t2_version() { printf '%s, --transport uring --uring-threads 2\n' "$(warpfs_version)"; }
warpfs_uring_t2_crypto() { true; }
warpfs_uring_t2_init() { warpfs_init "$@"; }
warpfs_uring_t2_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --transport uring --uring-threads 2 ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
