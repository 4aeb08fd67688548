# shellcheck shell=bash
# bench/lib-engine.sh — setup shared by the engine micro benchmarks
# (bench/engine.sh, bench/gpu.sh), which build and run one of warpfs-engine's
# bench binaries. Sourced after WF_NAME is set, not run: loads scripts/lib.sh,
# changes to the repository root and sets the defaults SECS=0.3 and
# OUT=bench/results/DATE-TOPIC (DATE the UTC day, TOPIC WF_NAME less its
# -bench: engine, gpu).

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$WF_REPO" || exit

SECS=0.3
OUT="$WF_REPO/bench/results/$(date -u +%F)-${WF_NAME%-bench}"

# engine_args "$@" — the options every engine benchmark takes (--secs, --out,
# --help): sets NARGS to the words it used; dies on an unknown option.
# shellcheck disable=SC2034 # read by the sourcing script
engine_args() {
    case "$1" in
        --secs) SECS="$2"; NARGS=2 ;;
        --out) OUT="$2"; NARGS=2 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) wf_die "unknown argument: $1 (see --help)" ;;
    esac
}

# engine_bin NAME — build the warpfs-engine binary NAME (release) and set BIN
# to its path.
# shellcheck disable=SC2034 # read by the sourcing script
engine_bin() {
    wf_log "building $1"
    cargo build --release --quiet -p warpfs-engine --bin "$1"
    BIN="${CARGO_TARGET_DIR:-$WF_REPO/target}/release/$1"
}
