# bench/peers/warpfs-uring-farwake.sh — warpfs through FUSE over io_uring with `--uring-local-wake off`: a reader woken by a read answer may be moved to another CPU (the scheduler's choice), the row that measures keeping readers on their CPU in bench/transport.sh.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_uring_farwake_available() { warpfs_available; }
warpfs_uring_farwake_version() { printf '%s, --transport uring --uring-local-wake off\n' "$(warpfs_version)"; }
warpfs_uring_farwake_crypto() { true; }
warpfs_uring_farwake_init() { warpfs_init "$@"; }
warpfs_uring_farwake_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --transport uring --uring-local-wake off ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
