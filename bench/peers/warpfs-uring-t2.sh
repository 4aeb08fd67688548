# bench/peers/warpfs-uring-t2.sh — warpfs over FUSE io_uring with two threads per ring queue
# (`--uring-threads 2`, otherwise as warpfs-uring): the writeback the kernel
# queues on one CPU's ring is then served by two threads.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_variant warpfs-uring-t2 --transport uring --uring-threads 2
