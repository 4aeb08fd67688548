# bench/peers/bindfs.sh — bindfs (Debian package): a FUSE pass-through with no
# encryption, i.e. roughly the FUSE ceiling on this machine. Benchmark peer
# sourced by bench/quick-fio.sh; see the peer interface described there.
# bindfs defaults to a single-threaded libfuse loop; we keep its defaults.

bindfs_available() { wf_ensure bindfs:bindfs; }

bindfs_version() { bindfs --version 2>/dev/null | head -n 1; }

bindfs_crypto() { false; }

bindfs_init() { :; }

bindfs_mount() {
    "${PIN[@]}" bindfs -f "$1" "$2" >>"$4" 2>&1 &
    PEER_PID=$!
}
