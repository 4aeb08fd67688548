# bench/peers/warpfs-uring-t2.sh — warpfs over FUSE io_uring with two threads per ring queue
# (`--uring-threads 2`, otherwise as warpfs-uring): the writeback the kernel
# queues on one CPU's ring is then served by two threads. Two became the
# default (docs/decisions/0113-two-threads-per-ring-queue.md); the peer
# names the setting for runs made before and after; warpfs-uring-t1 is
# the earlier default.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_variant warpfs-uring-t2 --transport uring --uring-threads 2
