# bench/peers/cryfs.sh — CryFS (Debian package) as a benchmark peer.
# shellcheck shell=bash
# Sourced by bench/run.sh; see the peer interface in bench/quick-fio.sh.
# CRYFS_FRONTEND=noninteractive makes cryfs read the password from stdin and
# create a volume with its defaults (xchacha20-poly1305, 16 KiB blocks)
# without questions; CRYFS_CIPHER=aes-256-gcm (any of `cryfs --show-ciphers`)
# picks another cipher at creation; CRYFS_NO_UPDATE_CHECK=1 keeps it off the
# network. Creating a volume mounts it, so init mounts on a scratch directory
# and unmounts again.
# CryFS keeps a small integrity state in ~/.local/share/cryfs (per volume id).
# Its scrypt key derivation (N=2^20, r=4, p=8) is not tunable from the
# command line: each mount takes ~15 s on a loaded 2-core VM (not measured,
# but it is most of cryfs's share of the run time).

cryfs_available() { wf_ensure cryfs:cryfs; }

cryfs_version() {
    printf '%s (%s)\n' "$(CRYFS_NO_UPDATE_CHECK=1 cryfs --version 2>&1 | grep -m1 -i 'cryfs version' || echo cryfs)" \
        "${CRYFS_CIPHER:-xchacha20-poly1305}"
}

cryfs_crypto() { true; }

cryfs_init() {
    local tmp rc=0
    tmp="$(mktemp -d /tmp/cryfs-init.XXXXXX)"
    timeout -k 5 120 env CRYFS_FRONTEND=noninteractive CRYFS_NO_UPDATE_CHECK=1 \
        cryfs ${CRYFS_CIPHER:+--cipher "$CRYFS_CIPHER"} "$1" "$tmp" <"$2" || rc=$?
    wf_unmount "$tmp" || rc=1
    rmdir "$tmp" 2>/dev/null || true
    [[ -f $1/cryfs.config ]] || { echo "cryfs: no cryfs.config in $1" >&2; return 1; }
    return "$rc"
}

cryfs_mount() {
    "${PIN[@]}" env CRYFS_FRONTEND=noninteractive CRYFS_NO_UPDATE_CHECK=1 \
        cryfs -f "$1" "$2" <"$3" >>"$4" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
