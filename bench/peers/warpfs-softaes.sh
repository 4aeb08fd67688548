# bench/peers/warpfs-softaes.sh — warpfs AES-GCM with software AES
# (`WARPFS_NO_AESNI=1` for this daemon only: a CPU without AES-NI; GHASH
# keeps PCLMULQDQ) on a default mount.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs.sh"

warpfs_softaes_available() { warpfs_available; }
warpfs_softaes_version() { printf '%s, WARPFS_NO_AESNI=1\n' "$(WARPFS_MODE=gcm warpfs_version)"; }
warpfs_softaes_crypto() { true; }
warpfs_softaes_init() { "$WARPFS_PEER_BIN" init --passfile "$2" --mode gcm "$1" >/dev/null; }
warpfs_softaes_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    WARPFS_NO_AESNI=1 "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" ${WARPFS_MOUNT_ARGS:-} \
        ${WARPFS_PEER_ARGS:-} --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
