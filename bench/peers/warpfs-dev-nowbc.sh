# bench/peers/warpfs-dev-nowbc.sh — warpfs on /dev/fuse with
# `--no-writeback-cache` (otherwise its defaults): every write(2) is a
# WRITE round trip of its own size, and the kernel no longer keeps file
# times itself, so a close does not make the next stat ask again and an
# unlink sends no SETATTR. Beside warpfs-dev, it shows what the writeback
# cache costs metadata and buys writes (bench/fuse-requests.sh).
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_dev_nowbc_available() { warpfs_available; }
warpfs_dev_nowbc_version() { printf '%s, --transport dev --no-writeback-cache\n' "$(warpfs_version)"; }
warpfs_dev_nowbc_crypto() { true; }
warpfs_dev_nowbc_init() { warpfs_init "$@"; }
warpfs_dev_nowbc_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --transport dev --no-writeback-cache \
        ${WARPFS_MOUNT_ARGS:-} --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
