# bench/peers/warpfs-split2.sh — warpfs with `--speculation on --engine-threads 2`
# and no decrypt-ahead (`--read-ahead 0`): in the xts modes, requests of 64 KiB
# or more are split across the 2 keystream worker(s) on CPU(s) 0-1
# (`--engine-cpus`), the FUSE thread doing a share. Beside warpfs-specoff
# (no workers: the FUSE thread alone) it shows what spreading XTS over the
# cores gives.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_split2_available() { warpfs_available; }
warpfs_split2_version() {
    printf '%s, --speculation on --engine-threads 2 --engine-cpus %s --read-ahead 0\n' "$(warpfs_version)" "0-1"
}
warpfs_split2_crypto() { true; }
warpfs_split2_init() { warpfs_init "$@"; }
warpfs_split2_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --speculation on --engine-threads 2 \
        --engine-cpus "0-1" --read-ahead 0 ${WARPFS_MOUNT_ARGS:-} --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
