# bench/peers/warpfs-specon.sh — warpfs with `--speculation on` (keystream made
# ahead on worker threads), beside the `warpfs` peer (auto: off on 2-core
# AES-NI machines), so the technique's effect is measured in the same run.
# When ENGINE_CPUS is set (bench/lib-peers.sh sets it to the client's CPU by
# default) the keystream workers run there (`--engine-cpus`) while the FUSE
# threads stay on the daemon's CPUs ($FS_CPUS): the technique's premise,
# masks made on a core the file system's own threads leave idle. Unset, all
# threads share the daemon's CPUs (see warpfs-specon-shared).
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_specon_available() { warpfs_available; }
warpfs_specon_version() {
    printf '%s, --speculation on%s\n' "$(warpfs_version)" "${ENGINE_CPUS:+ --engine-cpus $ENGINE_CPUS}"
}
warpfs_specon_crypto() { true; }
warpfs_specon_init() { warpfs_init "$@"; }
warpfs_specon_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" --speculation on \
        ${ENGINE_CPUS:+--engine-cpus "$ENGINE_CPUS"} ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
