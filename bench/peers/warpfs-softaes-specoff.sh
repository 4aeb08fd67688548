# bench/peers/warpfs-softaes-specoff.sh — bench/peers/warpfs-softaes.sh with
# `--speculation off` (decrypt-ahead stays, as on any 2+ core mount): the
# policy the auto choice is compared with.
# shellcheck shell=bash
# shellcheck source=bench/peers/warpfs-softaes.sh
. "$(dirname "${BASH_SOURCE[0]}")/warpfs-softaes.sh"

warpfs_softaes_specoff_available() { warpfs_softaes_available; }
warpfs_softaes_specoff_version() { printf '%s, --speculation off\n' "$(warpfs_softaes_version)"; }
warpfs_softaes_specoff_crypto() { true; }
warpfs_softaes_specoff_init() { warpfs_softaes_init "$@"; }
warpfs_softaes_specoff_mount() { WARPFS_PEER_ARGS="--speculation off" warpfs_softaes_mount "$@"; }
