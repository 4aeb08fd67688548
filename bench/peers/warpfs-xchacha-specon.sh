# bench/peers/warpfs-xchacha-specon.sh — bench/peers/warpfs-xchacha.sh with
# `--speculation on` (and decrypt-ahead, as on any 2+ core mount): what the
# auto policy chose against below 4 cores (decision 0081).
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs-xchacha.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs-xchacha.sh"

warpfs_xchacha_specon_available() { warpfs_xchacha_available; }
warpfs_xchacha_specon_version() { printf '%s, --speculation on\n' "$(warpfs_xchacha_version)"; }
warpfs_xchacha_specon_crypto() { true; }
warpfs_xchacha_specon_init() { warpfs_xchacha_init "$@"; }
warpfs_xchacha_specon_mount() { WARPFS_PEER_ARGS="--speculation on" warpfs_xchacha_mount "$@"; }
