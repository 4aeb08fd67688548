# bench/peers/warpfs-twofish.sh — warpfs with Twofish-GCM content
# (`init --mode gcm --cipher twofish`, FORMAT.md 11) on a default mount.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_twofish_available() { warpfs_available; }
warpfs_twofish_version() { WARPFS_MODE=gcm-twofish warpfs_version; }
warpfs_twofish_crypto() { true; }
warpfs_twofish_init() { "$WARPFS_PEER_BIN" init --passfile "$2" --mode gcm --cipher twofish "$1" >/dev/null; }
warpfs_twofish_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" ${WARPFS_MOUNT_ARGS:-} ${WARPFS_PEER_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
