#!/usr/bin/env bash
# bench/twofish.sh — Twofish on one core, 4 KiB units: warpfs-crypto's own
# Twofish against libgcrypt's (Debian libgcrypt20) and the `twofish` crate
# warpfs used before, XTS and CTR, Twofish-128 and -256, in the same run.
#
#   bash bench/twofish.sh [--seconds S] [--reps N] [--out DIR]
#
# Builds bench/twofish/gcry.c (gcc, -lgcrypt) and the twofish_bench example
# (crates/crypto/examples/), runs both pinned to one CPU ($TWOFISH_CPU,
# default 1), alternating, N rounds (default 5) of S seconds per case
# (default 1; the old crate gets S/4). Each case reports MB/s (10^6 B/s) by
# wall clock and by the thread's CPU time; the table takes medians. On a
# shared machine the CPU-time column is the one to compare (wall time counts
# time the thread waited for a CPU). Output: DIR (default bench/results/DATE-twofish, DATE the UTC day)/
# twofish.json and twofish.md. ~2 min.
set -euo pipefail
WF_NAME=twofish
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
SECS=1 REPS=5 OUT=""
while (($#)); do
    case "$1" in
    --seconds) SECS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) wf_die "unknown argument $1 (see --help)" ;;
    esac
done
OUT="${OUT:-$WF_REPO/bench/results/$(date -u +%F)-twofish}"
wf_ensure gcc:gcc libgcrypt20-dev taskset:util-linux python3:python3 || wf_die "missing tools"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -Wall -o "$tmp/gcry" "$WF_REPO/bench/twofish/gcry.c" -lgcrypt
cargo build --release --quiet -p warpfs-crypto --example twofish_bench
cpu=${TWOFISH_CPU:-1}
load=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= REPS; r++)); do
    wf_log "round $r of $REPS"
    taskset -c "$cpu" "$tmp/gcry" bench "$SECS" >>"$tmp/lines"
    taskset -c "$cpu" "$WF_REPO/target/release/examples/twofish_bench" "$SECS" >>"$tmp/lines"
done
mkdir -p "$OUT"
python3 "$WF_REPO/bench/twofish/report.py" "$tmp/lines" "$OUT/twofish" \
    --meta "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" "git_commit=$(git -C "$WF_REPO" rev-parse HEAD)" \
    "loadavg_before=$load" "cores=$(nproc)" "cpu=$cpu" "reps=$REPS" "seconds=$SECS" \
    "cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
wf_log "wrote $OUT/twofish.json and $OUT/twofish.md"
