# bench/peers/warpfs-uring-base.sh — another warpfs binary (WARPFS_BASE_BIN, e.g. a build of main) through FUSE over io_uring with the default kernel caches: the A/B row that measures a change against its base in the same run.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_uring_base_available() {
    [[ -n ${WARPFS_BASE_BIN:-} && -x ${WARPFS_BASE_BIN:-} ]] || {
        wf_warn "warpfs-uring-base needs WARPFS_BASE_BIN (an executable warpfs to compare with)"
        return 1
    }
    wf_ensure fusermount3:fuse3
}
warpfs_uring_base_version() {
    printf '%s, --transport uring (WARPFS_BASE_BIN=%s)\n' \
        "$("$WARPFS_BASE_BIN" --version 2>/dev/null | head -n 1)" "$WARPFS_BASE_BIN"
}
warpfs_uring_base_crypto() { true; }
warpfs_uring_base_init() {
    WARPFS_PEER_BIN="$WARPFS_BASE_BIN" warpfs_init "$@"
}
warpfs_uring_base_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_BASE_BIN" mount -f --passfile "$3" --transport uring ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
