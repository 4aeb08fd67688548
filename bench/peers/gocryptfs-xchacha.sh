# bench/peers/gocryptfs-xchacha.sh — gocryptfs (Debian package, 2.2 or
# later) with `-xchacha`: XChaCha20-Poly1305 content (Go's x/crypto), 4 KiB
# blocks; scrypt's cost lowered as for bench/peers/gocryptfs.sh (init and
# mount time only).
# shellcheck shell=bash
# shellcheck source=bench/peers/gocryptfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/gocryptfs.sh"

gocryptfs_xchacha_available() {
    gocryptfs_available || return 1
    gocryptfs -hh 2>&1 | grep -q -- '-xchacha' || {
        PEER_SKIP_REASON="this gocryptfs has no -xchacha (2.2 or later has)"
        return 1
    }
}
gocryptfs_xchacha_version() { printf '%s, -xchacha\n' "$(gocryptfs_version)"; }
gocryptfs_xchacha_crypto() { true; }
gocryptfs_xchacha_init() { gocryptfs -init -q -xchacha -scryptn 10 -passfile "$2" "$1"; }
gocryptfs_xchacha_mount() { gocryptfs_mount "$@"; }
