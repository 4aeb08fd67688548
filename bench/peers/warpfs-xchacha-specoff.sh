# bench/peers/warpfs-xchacha-specoff.sh — bench/peers/warpfs-xchacha.sh with
# `--speculation off` (decrypt-ahead stays, as on any 2+ core mount): the
# policy the auto choice is compared with.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs-xchacha.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs-xchacha.sh"

warpfs_xchacha_specoff_available() { warpfs_xchacha_available; }
warpfs_xchacha_specoff_version() { printf '%s, --speculation off\n' "$(warpfs_xchacha_version)"; }
warpfs_xchacha_specoff_crypto() { true; }
warpfs_xchacha_specoff_init() { warpfs_xchacha_init "$@"; }
warpfs_xchacha_specoff_mount() { WARPFS_PEER_ARGS="--speculation off" warpfs_xchacha_mount "$@"; }
