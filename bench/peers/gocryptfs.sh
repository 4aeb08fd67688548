# bench/peers/gocryptfs.sh — gocryptfs (Debian package) as a benchmark peer.
# shellcheck shell=bash
# Sourced by bench/quick-fio.sh; see the peer interface described there.
# Default settings (AES-256-GCM, 4 KiB blocks, Go's AES-NI), except scrypt's
# cost, which only affects init/mount time, not I/O.

gocryptfs_available() { wf_ensure gocryptfs:gocryptfs; }

gocryptfs_version() { gocryptfs -version 2>/dev/null | head -n 1 | cut -d';' -f1; }

gocryptfs_crypto() { true; }

# gocryptfs_init BACKING PASSFILE — BACKING is an empty directory.
gocryptfs_init() { gocryptfs -init -q -scryptn 10 -passfile "$2" "$1"; }

# gocryptfs_mount BACKING MNT PASSFILE LOG — foreground daemon in the
# background, pinned with ${PIN[@]}; sets PEER_PID.
gocryptfs_mount() {
    "${PIN[@]}" gocryptfs -fg -q -passfile "$3" "$1" "$2" >>"$4" 2>&1 &
    # shellcheck disable=SC2034 # read by bench/quick-fio.sh
    PEER_PID=$!
}
