# bench/peers/warpfs-twofish-specoff.sh — bench/peers/warpfs-twofish.sh with
# `--speculation off` (decrypt-ahead stays, as on any 2+ core mount): the
# policy the auto choice is compared with.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs-twofish.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs-twofish.sh"

warpfs_twofish_specoff_available() { warpfs_twofish_available; }
warpfs_twofish_specoff_version() { printf '%s, --speculation off\n' "$(warpfs_twofish_version)"; }
warpfs_twofish_specoff_crypto() { true; }
warpfs_twofish_specoff_init() { warpfs_twofish_init "$@"; }
warpfs_twofish_specoff_mount() { WARPFS_PEER_ARGS="--speculation off" warpfs_twofish_mount "$@"; }
