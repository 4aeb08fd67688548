# bench/peers/warpfs-nocrypto.sh — warpfs built with the bench-only no-crypto
# shellcheck shell=bash
# feature (same frontend and engine, the cipher replaced by a copy): our own
# ceiling. Never a default build; the harness only uses the binary named by
#   WARPFS_NOCRYPTO_BIN   path of that build (peer skipped, with a note, if unset)
# WARPFS_MODE and WARPFS_MOUNT_ARGS apply as for the warpfs peer. Functions
# are prefixed warpfs_nocrypto_ (the peer name with - turned into _).
# Mounted with --speculation off: with no cipher, masks made ahead are never
# used, and worker threads making them would only take CPU from the FUSE
# threads (or, placed elsewhere, from the client), lowering the ceiling.
# The read windows and the write pool still run (on demand), as in warpfs.

# shellcheck disable=SC2034 # PEER_SKIP_REASON is read by the harness
warpfs_nocrypto_available() {
    if [[ -z ${WARPFS_NOCRYPTO_BIN:-} ]]; then
        # Build the bench-only feature into its own target dir.
        if (cd "$WF_REPO" && CARGO_TARGET_DIR="$WF_REPO/target/nocrypto" \
            cargo build --release --quiet -p warpfs --features bench-nocrypto) >&2; then
            WARPFS_NOCRYPTO_BIN="$WF_REPO/target/nocrypto/release/warpfs"
        else
            PEER_SKIP_REASON="building warpfs --features bench-nocrypto failed"
            return 1
        fi
    fi
    if [[ ! -x $WARPFS_NOCRYPTO_BIN ]]; then
        PEER_SKIP_REASON="WARPFS_NOCRYPTO_BIN=$WARPFS_NOCRYPTO_BIN is not executable"
        return 1
    fi
    wf_ensure fusermount3:fuse3
}

warpfs_nocrypto_version() {
    local v
    v="$("$WARPFS_NOCRYPTO_BIN" --version 2>/dev/null | head -n 1)" || v=""
    printf '%s (no-crypto build, %s, --speculation off, WARPFS_NOCRYPTO_BIN=%s)\n' "${v:-warpfs}" "${WARPFS_MODE:-gcm}" "$WARPFS_NOCRYPTO_BIN"
}

# The cipher is a copy: plaintext in the backing dir is expected.
warpfs_nocrypto_crypto() { false; }

warpfs_nocrypto_init() {
    "$WARPFS_NOCRYPTO_BIN" init --passfile "$2" --mode "${WARPFS_MODE:-gcm}" "$1" >/dev/null
}

warpfs_nocrypto_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_NOCRYPTO_BIN" mount -f --passfile "$3" --speculation off ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
