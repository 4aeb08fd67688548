# bench/peers/warpfs-specon-shared.sh — warpfs with `--speculation on` and the
# keystream workers on the same CPUs as the FUSE threads (the daemon's, $FS_CPUS;
# no `--engine-cpus`, whatever ENGINE_CPUS says): the placement the benchmarks
# used before `--engine-cpus`, kept beside warpfs-specon so readers see what
# the placement alone changes.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_specon_shared_available() { warpfs_available; }
warpfs_specon_shared_version() { printf '%s, --speculation on (workers on the daemon'"'"'s CPUs)\n' "$(warpfs_version)"; }
warpfs_specon_shared_crypto() { true; }
warpfs_specon_shared_init() { warpfs_init "$@"; }
warpfs_specon_shared_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --speculation on ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
