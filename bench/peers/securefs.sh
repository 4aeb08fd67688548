# bench/peers/securefs.sh — securefs (Debian package) as a benchmark peer.
# shellcheck shell=bash
# Sourced by bench/run.sh; see the peer interface in bench/quick-fio.sh.
# Volume: `securefs create` defaults (format 4, AES-GCM, 4 KiB blocks) except
# the password stretching: pbkdf2 with 1000 rounds, which only affects
# create/mount time, not I/O. The password is passed with --pass (visible in
# ps to other local users: a throwaway benchmark password).

securefs_available() { wf_ensure securefs:securefs; }

securefs_version() { printf 'securefs %s\n' "$(dpkg-query -W -f='${Version}' securefs 2>/dev/null || echo '?')"; }

securefs_crypto() { true; }

securefs_init() {
    securefs create --pbkdf pkcs5-pbkdf2-hmac-sha256 --rounds 1000 --pass "$(cat "$2")" "$1" </dev/null
}

securefs_mount() {
    "${PIN[@]}" securefs mount --pass "$(cat "$3")" "$1" "$2" </dev/null >>"$4" 2>&1 &
    # shellcheck disable=SC2034 # read by the harness
    PEER_PID=$!
}
