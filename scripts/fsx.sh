#!/usr/bin/env bash
# scripts/fsx.sh — the fsx file-system exerciser (`cargo install fsx`) against
# real warpfs mounts: FSX_SEEDS seeds × FSX_OPS operations for each content
# mode (default 3 × 40,000 × {gcm, ctr, xts} = 360,000 operations), each seed on
# a fresh file, the cipher dir on tmpfs. Longer soak: FSX_OPS=1000000.
# FSX_MODES: the content modes (default "gcm ctr xts"; *-twofish: --cipher twofish;
# xchacha20-poly1305, ctr-xchacha20: --cipher xchacha20).
# Without root or /dev/fuse it skips: exit 77 (a failure with WARPFS_NO_SKIP=1).
set -euo pipefail

WF_NAME=fsx
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$WF_REPO"

wf_is_root || wf_skip "needs root (tmpfs mounts)"
[[ -c /dev/fuse ]] || wf_skip "/dev/fuse does not exist"
OPS="${FSX_OPS:-40000}"
SEEDS="${FSX_SEEDS:-3}"
TOOLS="$WF_REPO/target/tools"
if [[ ! -x $TOOLS/bin/fsx ]]; then
    wf_log "installing fsx into $TOOLS"
    cargo install --quiet --locked fsx --version 0.3.2 --root "$TOOLS" >&2
fi
BIN="$(wf_warpfs_bin)"
WORK="$(mktemp -d /tmp/warpfs-fsx.XXXXXX)"
MNTS=()
cleanup() {
    for m in "${MNTS[@]}"; do wf_unmount "$m" || true; done
    mountpoint -q "$WORK" && umount -l "$WORK"
    rm -rf "$WORK"
}
trap cleanup EXIT
mount -t tmpfs -o size=1g tmpfs "$WORK"
echo "fsx-password" >"$WORK/pw"

total=0
MODES="${FSX_MODES:-gcm ctr xts}"
for mode in $MODES; do
    c="$WORK/c-$mode" m="$WORK/m-$mode"
    mkdir -p "$c" "$m"
    init_mode=(--mode "$mode")
    [[ $mode == *-twofish ]] && init_mode=(--mode "${mode%-twofish}" --cipher twofish)
    [[ $mode == xchacha20-poly1305 ]] && init_mode=(--mode gcm --cipher xchacha20)
    [[ $mode == ctr-xchacha20 ]] && init_mode=(--mode ctr --cipher xchacha20)
    "$BIN" init --quiet "${init_mode[@]}" --passfile "$WORK/pw" --kdf-memory 32768 --kdf-iterations 2 "$c" >/dev/null
    "$BIN" mount --passfile "$WORK/pw" --log-file "$WORK/log-$mode" "$c" "$m"
    MNTS+=("$m")
    for seed in $(seq 1 "$SEEDS"); do
        if ! (cd "$WORK" && "$TOOLS/bin/fsx" -q -N "$OPS" -S "$seed" -P "$WORK" "$m/fsx-$seed" >"$WORK/fsx-$mode-$seed.out" 2>&1); then
            cat "$WORK/fsx-$mode-$seed.out" >&2
            cat "$WORK/log-$mode" >&2 || true
            wf_die "fsx failed: mode $mode seed $seed (see above)"
        fi
        total=$((total + OPS))
        wf_log "$mode seed $seed: $OPS operations OK"
    done
done
echo "fsx: $total operations over $SEEDS seeds x {${MODES// /, }}: all OK"
