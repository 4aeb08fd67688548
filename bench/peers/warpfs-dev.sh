# bench/peers/warpfs-dev.sh — warpfs served through /dev/fuse (`--transport dev`), with the default kernel caches.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_dev_available() { warpfs_available; }
warpfs_dev_version() { printf '%s, --transport dev\n' "$(warpfs_version)"; }
warpfs_dev_crypto() { true; }
warpfs_dev_init() { warpfs_init "$@"; }
warpfs_dev_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --transport dev ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
