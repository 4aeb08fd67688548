# scripts/lib.sh — small shell helpers shared by scripts/*.sh and bench/*.sh.
# shellcheck shell=bash
#
# Source it (`. scripts/lib.sh`); it defines functions only, prefixed `wf_`,
# plus WF_REPO (the repository root). Nothing here changes the system unless a
# function is called:
#   wf_log / wf_warn / wf_die       messages on stderr, prefixed with the script name
#   wf_skip REASON                  this script cannot run here: say so, record it in
#                                   $WARPFS_SKIP_LOG, exit 77 (WF_SKIPPED); with
#                                   WARPFS_NO_SKIP=1 fail (exit 1) instead
#   wf_is_root                      true when running as uid 0
#   wf_ensure SPEC...               install missing Debian packages (root only, quiet);
#                                   SPEC is "command:package" (checked with
#                                   command -v) or "package" (checked with dpkg)
#   wf_ensure_rust                  put ~/.cargo/bin on PATH; rustfmt/clippy components
#   wf_is_mounted DIR               DIR is a mount point (reads /proc/self/mounts,
#                                   never stats DIR, so a hung FUSE daemon can't hang it)
#   wf_wait_mounted DIR SECS [PID]  wait for DIR to become a mount point; fails early
#                                   if PID (the daemon) exits first
#   wf_unmount DIR                  unmount (FUSE or not), retrying, lazily as last resort
#   wf_stop_daemon PID [SECS]       wait for a FUSE daemon to exit, then TERM, then KILL
#   wf_warpfs_bin                   print the path of a usable warpfs binary, building
#                                   it (`cargo build --release -p warpfs`) if needed

WF_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WF_NAME="${WF_NAME:-$(basename "$0")}"

wf_log() { printf '[%s] %s\n' "$WF_NAME" "$*" >&2; }
wf_warn() { printf '[%s] WARNING: %s\n' "$WF_NAME" "$*" >&2; }
wf_die() {
    printf '[%s] ERROR: %s\n' "$WF_NAME" "$*" >&2
    exit 1
}

# Exit status of a script that skipped (the autotools convention):
# scripts/test.sh shows the step as skipped and counts it, never as passed.
WF_SKIPPED=77

wf_skip() {
    if [[ ${WARPFS_NO_SKIP:-0} == 1 ]]; then
        wf_die "WARPFS_NO_SKIP=1, but this cannot run here: $*"
    fi
    printf '[%s] SKIPPED: %s\n' "$WF_NAME" "$*" >&2
    if [[ -n ${WARPFS_SKIP_LOG:-} ]]; then
        printf '%s\t-\t%s\n' "$WF_NAME" "$*" >>"$WARPFS_SKIP_LOG" ||
            wf_die "cannot record the skip in $WARPFS_SKIP_LOG"
    fi
    exit "$WF_SKIPPED"
}

wf_is_root() { [[ $(id -u) -eq 0 ]]; }

# FUSE over io_uring is served only while the kernel's enable_uring is on,
# and warpfs writes it only when a mount says --uring-enable: a script that
# runs several ring mounts turns it on for its run (as root) and puts back
# the value it found with wf_uring_restore (call it from its EXIT trap).
WF_URING_PARAM=/sys/module/fuse/parameters/enable_uring
WF_URING_BEFORE=""
wf_uring_on() {
    if wf_is_root && [[ -w $WF_URING_PARAM ]]; then
        WF_URING_BEFORE="$(cat "$WF_URING_PARAM")"
        echo Y >"$WF_URING_PARAM"
    else
        wf_warn "no writable $WF_URING_PARAM: ring mounts need it on"
    fi
}
wf_uring_restore() {
    [[ -z $WF_URING_BEFORE ]] || echo "$WF_URING_BEFORE" >"$WF_URING_PARAM" 2>/dev/null || true
}

wf_ensure() {
    local spec missing=() p seen=" "
    for spec in "$@"; do
        if [[ $spec == *:* ]]; then
            command -v "${spec%%:*}" >/dev/null 2>&1 && continue
            p="${spec#*:}"
        else
            dpkg-query -W -f='${Status}' "$spec" 2>/dev/null | grep -q 'ok installed' && continue
            p="$spec"
        fi
        [[ $seen == *" $p "* ]] || missing+=("$p")
        seen+="$p "
    done
    ((${#missing[@]} == 0)) && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        wf_warn "missing packages: ${missing[*]} (no apt-get here; install them by hand)"
        return 1
    fi
    local sudo=()
    if ! wf_is_root; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo=(sudo -n)
        else
            wf_warn "missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})"
            return 1
        fi
    fi
    wf_log "installing Debian packages: ${missing[*]}"
    if [[ -z ${WF_APT_UPDATED:-} ]]; then
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 ||
            wf_warn "apt-get update failed (continuing with the old package lists)"
        export WF_APT_UPDATED=1
    fi
    local log
    log="$(mktemp)"
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
        tail -n 20 "$log" >&2
        rm -f "$log"
        wf_warn "apt-get install ${missing[*]} failed"
        return 1
    fi
    rm -f "$log"
}

wf_ensure_rust() {
    if ! command -v cargo >/dev/null 2>&1 && [[ -x ${CARGO_HOME:-$HOME/.cargo}/bin/cargo ]]; then
        export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        wf_warn "cargo not found. Debian bookworm's own cargo (1.63) is too old for this"
        wf_warn "workspace (rust-version 1.85). Install rustup (Debian trixie+: apt-get"
        wf_warn "install rustup; otherwise see https://rustup.rs), then: rustup default stable"
        return 1
    fi
    local comp
    for comp in rustfmt clippy; do
        local probe=(cargo fmt --version)
        [[ $comp == clippy ]] && probe=(cargo clippy --version)
        if ! "${probe[@]}" >/dev/null 2>&1; then
            if command -v rustup >/dev/null 2>&1; then
                wf_log "adding rust component $comp"
                rustup component add "$comp" >/dev/null 2>&1 || wf_warn "rustup component add $comp failed"
            else
                wf_warn "cargo $comp is missing and rustup is not available"
            fi
        fi
    done
}

# Absolute path by string manipulation only: realpath/readlink stat the path,
# and a stat of a mount whose daemon is stuck never returns.
_wf_abspath() {
    local p="$1"
    [[ $p == /* ]] || p="$PWD/$p"
    while [[ $p == */ && $p != / ]]; do p="${p%/}"; done
    printf '%s\n' "$p"
}

wf_is_mounted() {
    # /proc/self/mounts escapes blanks as \040; our paths have none.
    awk -v d="$(_wf_abspath "$1")" '$2 == d { found = 1 } END { exit !found }' /proc/self/mounts
}

_wf_is_fuse() {
    awk -v d="$(_wf_abspath "$1")" '$2 == d && $3 ~ /^fuse/ { f = 1 } END { exit !f }' /proc/self/mounts
}

wf_wait_mounted() {
    local dir="$1" secs="${2:-20}" pid="${3:-}" i
    for ((i = 0; i < secs * 10; i++)); do
        wf_is_mounted "$dir" && return 0
        if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
            wf_warn "file system daemon (pid $pid) exited before $dir was mounted"
            return 1
        fi
        sleep 0.1
    done
    wf_warn "$dir was not mounted within ${secs}s"
    return 1
}

wf_unmount() {
    local dir="$1" i rc
    wf_is_mounted "$dir" || return 0
    for ((i = 0; i < 20; i++)); do
        # Under a timeout: an unmount can wait on a stuck daemon too.
        rc=0
        if _wf_is_fuse "$dir" && command -v fusermount3 >/dev/null 2>&1; then
            timeout -k 1 5 fusermount3 -u "$dir" 2>/dev/null || rc=$?
        else
            timeout -k 1 5 umount "$dir" 2>/dev/null || rc=$?
        fi
        wf_is_mounted "$dir" || return 0
        ((rc == 124 || rc == 137)) && break # hung: no point retrying
        sleep 0.25
    done
    wf_warn "$dir is busy or stuck; detaching it lazily"
    timeout -k 1 5 umount -l "$dir" 2>/dev/null || true
    ! wf_is_mounted "$dir"
}

# wf_stop_daemon PID [SECS] — wait for a FUSE daemon to exit after its
# unmount; then SIGTERM, then SIGKILL (a daemon stuck on a request to its own
# mount only dies of SIGKILL).
wf_stop_daemon() {
    local pid="$1" secs="${2:-5}" i
    [[ -n $pid ]] || return 0
    for ((i = 0; i < secs * 10; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    wf_warn "daemon $pid still running ${secs}s after unmount; sending SIGTERM"
    kill "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 20; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    wf_warn "daemon $pid ignored SIGTERM; sending SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
}

wf_warpfs_bin() {
    if [[ -n ${WARPFS_BIN:-} ]]; then
        [[ -x $WARPFS_BIN ]] || wf_die "WARPFS_BIN=$WARPFS_BIN is not executable"
        printf '%s\n' "$WARPFS_BIN"
        return 0
    fi
    wf_ensure_rust || return 1
    (cd "$WF_REPO" && cargo build --release -p warpfs --quiet) >&2 || {
        wf_warn "cargo build --release -p warpfs failed"
        return 1
    }
    printf '%s\n' "$WF_REPO/target/release/warpfs"
}
