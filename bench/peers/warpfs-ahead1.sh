# bench/peers/warpfs-ahead1.sh — warpfs on /dev/fuse with `--read-ahead 1`
# (otherwise its defaults): decrypt-ahead one request past a sequential
# reader's current one instead of two. Beside warpfs-dev and
# warpfs-noahead, it shows whether a shallower decrypt-ahead keeps the
# segments it answers in the cache (bench/readcost.sh).
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_variant warpfs-ahead1 --transport dev --read-ahead 1
