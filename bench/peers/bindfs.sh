# bench/peers/bindfs.sh — bindfs (Debian package): a FUSE pass-through with no
# shellcheck shell=bash
# encryption, i.e. roughly the FUSE ceiling on this machine. Benchmark peer
# sourced by bench/quick-fio.sh; see the peer interface described there.
# Debian's bindfs is built on libfuse 2, which splits writes into 4 KiB
# requests unless mounted with -o big_writes (then up to 128 KiB): ~50 vs
# ~480 MiB/s here. We pass big_writes and keep bindfs's single-threaded loop.

bindfs_available() { wf_ensure bindfs:bindfs; }

bindfs_version() { bindfs --version 2>/dev/null | head -n 1; }

bindfs_crypto() { false; }

bindfs_init() { :; }

bindfs_mount() {
    "${PIN[@]}" bindfs -f -o big_writes "$1" "$2" >>"$4" 2>&1 &
    # shellcheck disable=SC2034 # read by bench/quick-fio.sh
    PEER_PID=$!
}
