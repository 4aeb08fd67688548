# bench/peers/encfs.sh — EncFS (Debian package, libfuse 2) as a benchmark peer.
# shellcheck shell=bash
# Sourced by bench/run.sh; see the peer interface in bench/quick-fio.sh.
# Volume: `encfs --standard` (AES-192, 1 KiB blocks, block filename encoding,
# unique + chained IVs, no per-block MACs), created without prompts by giving
# the password through --extpass; creating a volume mounts it, so init mounts
# on a scratch directory and unmounts again. Mounted with -o big_writes (libfuse
# 2 otherwise splits writes into 4 KiB requests), as bindfs.

encfs_available() { wf_ensure encfs:encfs; }

encfs_version() { encfs --version 2>&1 | head -n 1; }

encfs_crypto() { true; }

encfs_init() {
    local tmp rc=0
    tmp="$(mktemp -d /tmp/encfs-init.XXXXXX)"
    timeout -k 5 120 encfs --standard --extpass="cat $2" "$1" "$tmp" </dev/null || rc=$?
    wf_unmount "$tmp" || rc=1
    rmdir "$tmp" 2>/dev/null || true
    [[ -f $1/.encfs6.xml ]] || { echo "encfs: no .encfs6.xml in $1" >&2; return 1; }
    return "$rc"
}

encfs_mount() {
    "${PIN[@]}" encfs -f --extpass="cat $3" "$1" "$2" -- -o big_writes </dev/null >>"$4" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
