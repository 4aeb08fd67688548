# bench/peers/warpfs-uring-t1.sh — warpfs over FUSE io_uring with one thread
# per ring queue (`--uring-threads 1`, the default before two; otherwise
# as warpfs-uring).
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_variant warpfs-uring-t1 --transport uring --uring-threads 1
