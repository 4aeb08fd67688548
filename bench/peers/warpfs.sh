# bench/peers/warpfs.sh — warpfs from this repository as a benchmark peer.
# shellcheck shell=bash
# Sourced by bench/quick-fio.sh; see the peer interface described there.
# Environment:
#   WARPFS_BIN         binary to use (default: cargo build --release -p warpfs)
#   WARPFS_MODE        content mode given to `warpfs init` (default gcm)
#   WARPFS_MOUNT_ARGS  extra `warpfs mount` arguments, e.g. "--threads 2"

warpfs_available() {
    wf_ensure fusermount3:fuse3 || return 1
    WARPFS_PEER_BIN="$(wf_warpfs_bin)" || return 1
    # Until the CLI exists the binary is a stub: require a `mount` subcommand.
    "$WARPFS_PEER_BIN" --help 2>&1 | grep -q mount || {
        wf_warn "$WARPFS_PEER_BIN has no 'mount' subcommand yet"
        return 1
    }
}

warpfs_version() {
    local v
    v="$("$WARPFS_PEER_BIN" --version 2>/dev/null | head -n 1)" || v=""
    if [[ -n ${WARPFS_BIN:-} ]]; then
        printf '%s (%s, WARPFS_BIN=%s)\n' "${v:-warpfs}" "${WARPFS_MODE:-gcm}" "$WARPFS_BIN"
    else
        printf '%s (%s, built from git %s)\n' "${v:-warpfs}" "${WARPFS_MODE:-gcm}" \
            "$(git -C "$WF_REPO" rev-parse --short HEAD 2>/dev/null || echo '?')"
    fi
}

warpfs_crypto() { true; }

warpfs_init() {
    # A mode over Twofish (gcm-twofish, ctr-twofish, xts-twofish) is its
    # base mode with --cipher twofish.
    local mode="${WARPFS_MODE:-gcm}" cipher=()
    if [[ $mode == *-twofish ]]; then
        mode="${mode%-twofish}"
        cipher=(--cipher twofish)
    fi
    "$WARPFS_PEER_BIN" init --passfile "$2" --mode "$mode" "${cipher[@]}" "$1" >/dev/null
}

warpfs_mount() {
    # shellcheck disable=SC2086 # WARPFS_MOUNT_ARGS is a list of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by bench/quick-fio.sh
    PEER_PID=$!
}

# warpfs_variant PEER ARG... — define PEER's peer functions: warpfs's
# own, mounted with ARG... before WARPFS_MOUNT_ARGS, its version naming
# them. A variant's file is then its header and this one line.
declare -gA WARPFS_VARIANT_ARGS
warpfs_variant() {
    local f
    f="$(fn "$1")"
    shift
    WARPFS_VARIANT_ARGS[$f]="$*"
    eval "
${f}_available() { warpfs_available; }
${f}_version() { printf '%s, %s\n' \"\$(warpfs_version)\" \"\${WARPFS_VARIANT_ARGS[$f]}\"; }
${f}_crypto() { true; }
${f}_init() { warpfs_init \"\$@\"; }
${f}_mount() { warpfs_mount_with \"\${WARPFS_VARIANT_ARGS[$f]}\" \"\$@\"; }"
}

# warpfs_mount_with ARGS VOL MNT PASSFILE LOG — warpfs_mount with ARGS (a
# list of words) first.
warpfs_mount_with() {
    local args="$1"
    shift
    # shellcheck disable=SC2086 # ARGS and WARPFS_MOUNT_ARGS are lists of words
    "${PIN[@]}" "$WARPFS_PEER_BIN" mount -f --passfile "$3" $args ${WARPFS_MOUNT_ARGS:-} \
        --log-file "$4" "$1" "$2" >>"$4.out" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
