# bench/peers/warpfs-noxattr.sh — warpfs with `--no-xattr` (otherwise its
# defaults): extended attributes off, so the kernel stops its
# `security.capability` lookup, one FUSE round trip, before every write(2).
# Beside warpfs, it shows what that round trip costs in the same run. Its
# transport is the default (auto): FUSE over io_uring where the kernel's
# enable_uring is on (bench/transport.sh turns it on); warpfs-dev-noxattr
# is the same on /dev/fuse.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_noxattr_available() { warpfs_available; }
warpfs_noxattr_version() { printf '%s, --no-xattr\n' "$(warpfs_version)"; }
warpfs_noxattr_crypto() { true; }
warpfs_noxattr_init() { warpfs_init "$@"; }
warpfs_noxattr_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --no-xattr ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
