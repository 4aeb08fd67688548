# bench/peers/warpfs-specoff.sh — warpfs with `--speculation off` (no worker
# threads; every mask made on the FUSE thread that needs it, on the same code
# path), beside warpfs-specon, so the technique's effect is measured in one run.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_specoff_available() { warpfs_available; }
warpfs_specoff_version() { printf '%s, --speculation off\n' "$(warpfs_version)"; }
warpfs_specoff_crypto() { true; }
warpfs_specoff_init() { warpfs_init "$@"; }
warpfs_specoff_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --speculation off ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
