# bench/peers/warpfs-dev-nowbc.sh — warpfs on /dev/fuse with
# `--no-writeback-cache` (otherwise its defaults): every write(2) is a
# WRITE round trip of its own size, and the kernel no longer keeps file
# times itself, so a close does not make the next stat ask again and an
# unlink sends no SETATTR. Beside warpfs-dev, it shows what the writeback
# cache costs metadata and buys writes (bench/fuse-requests.sh).
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_variant warpfs-dev-nowbc --transport dev --no-writeback-cache
