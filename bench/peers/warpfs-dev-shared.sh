# bench/peers/warpfs-dev-shared.sh — warpfs through /dev/fuse with `--shared-storage`: every kernel cache off (1 s timeouts, no negative entries, pages dropped at each open, no cached symlinks, FLUSH at close), the caches-off row of bench/transport.sh.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_dev_shared_available() { warpfs_available; }
warpfs_dev_shared_version() { printf '%s, --transport dev --shared-storage\n' "$(warpfs_version)"; }
warpfs_dev_shared_crypto() { true; }
warpfs_dev_shared_init() { warpfs_init "$@"; }
warpfs_dev_shared_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --transport dev --shared-storage ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
