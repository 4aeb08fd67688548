# bench/peers/warpfs-xchacha.sh — warpfs with XChaCha20-Poly1305 content
# (`init --mode gcm --cipher xchacha20`, FORMAT.md 15) on a default mount:
# no --speculation, no --engine-cpus (the daemon picks its policy itself).
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_xchacha_available() { warpfs_available; }
warpfs_xchacha_version() { WARPFS_MODE=xchacha20-poly1305 warpfs_version; }
warpfs_xchacha_crypto() { true; }
warpfs_xchacha_init() { "$WARPFS_PEER_BIN" init --passfile "$2" --mode gcm --cipher xchacha20 "$1" >/dev/null; }
warpfs_xchacha_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" ${WARPFS_MOUNT_ARGS:-} ${WARPFS_PEER_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
