# bench/peers/warpfs-noahead.sh — warpfs on /dev/fuse with `--read-ahead 0`
# (otherwise its defaults): no decrypt-ahead, so a sequential READ is read
# from the backing file and decrypted by the FUSE thread that answers it.
# Beside warpfs-dev, it shows what decrypt-ahead's second core buys and
# what its buffers cost (bench/readcost.sh).
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_variant warpfs-noahead --transport dev --read-ahead 0
