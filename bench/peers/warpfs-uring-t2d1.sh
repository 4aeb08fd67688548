# bench/peers/warpfs-uring-t2d1.sh — warpfs over FUSE io_uring with two
# threads per ring queue of one entry each (`--uring-threads 2
# --uring-depth 1`): as many entries as the default one thread of depth 2,
# but a request that arrives while one thread works goes to the other.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_variant warpfs-uring-t2d1 --transport uring --uring-threads 2 --uring-depth 1
