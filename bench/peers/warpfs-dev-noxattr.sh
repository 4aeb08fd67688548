# bench/peers/warpfs-dev-noxattr.sh — warpfs on /dev/fuse with `--no-xattr`
# (otherwise its defaults): the kernel gets ENOSYS for its first GETXATTR
# and sends no more, so `ls -l` (security.selinux, system.posix_acl_*) and
# the first write of each new file (security.capability) cost no round trip.
# Beside warpfs-dev, it shows what extended attributes cost on the transport
# most kernels offer (docs/decisions/0110-extended-attributes-stay-on.md).
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_dev_noxattr_available() { warpfs_available; }
warpfs_dev_noxattr_version() { printf '%s, --transport dev --no-xattr\n' "$(warpfs_version)"; }
warpfs_dev_noxattr_crypto() { true; }
warpfs_dev_noxattr_init() { warpfs_init "$@"; }
warpfs_dev_noxattr_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --transport dev --no-xattr ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
