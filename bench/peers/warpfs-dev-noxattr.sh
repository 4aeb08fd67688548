# bench/peers/warpfs-dev-noxattr.sh — warpfs on /dev/fuse with `--no-xattr`
# (otherwise its defaults): the kernel gets ENOSYS for its first GETXATTR
# and sends no more, so `ls -l` (security.selinux, system.posix_acl_*) and
# the first write of each new file (security.capability) cost no round trip.
# Beside warpfs-dev, it shows what extended attributes cost on the transport
# most kernels offer (docs/decisions/0110-extended-attributes-stay-on.md).
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_variant warpfs-dev-noxattr --transport dev --no-xattr
