#!/usr/bin/env bash
# bench/ghash.sh — GHASH and AES-GCM paths on one core for 4 KiB blocks
# (which GCM path each warpfs mode uses and why, with numbers).
#
#   bash bench/ghash.sh [--seconds S] [--out DIR]
#
# Builds bench/ghash-bench/ (its own cargo workspace, so aws-lc-rs and its C
# build stay out of the warpfs build) into target/ghash-bench and runs it
# pinned to one CPU ($GHASH_CPU, default 0). Every case is first checked
# against RustCrypto aes-gcm (same key, nonce, 24-byte AAD as warpfs uses,
# 4 KiB plaintext), then timed for S seconds (default 2).
# Cases: ghash crate; polyval + hand-made byte reversal; raw polyval (not
# GCM-compatible: the field-arithmetic ceiling); warpfs gcm read and write
# with the engine's mask ready; plain CTR XOR with the mask ready; warpfs gcm
# read with the mask made inline; aws-lc-rs AES-256-GCM seal/open; RustCrypto
# aes-gcm seal.
# Output: DIR (default bench/results/DATE-ghash, DATE the UTC day)/ghash.json and ghash.md. Takes ~1 min
# plus the first build (~5 min on 2 cores: aws-lc-sys is C).
set -euo pipefail
WF_NAME=ghash
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
SECS=2 OUT=""
while (($#)); do
    case "$1" in
    --seconds) SECS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) wf_die "unknown argument $1 (see --help)" ;;
    esac
done
OUT="${OUT:-$WF_REPO/bench/results/$(date -u +%F)-ghash}"
wf_ensure jq:jq cmake:cmake taskset:util-linux || wf_die "missing tools"
(cd "$WF_REPO/bench/ghash-bench" && CARGO_TARGET_DIR="$WF_REPO/target/ghash-bench" cargo build --release --locked --quiet)
mkdir -p "$OUT"
taskset -c "${GHASH_CPU:-0}" "$WF_REPO/target/ghash-bench/release/ghash-bench" --seconds "$SECS" |
    jq --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg commit "$(git -C "$WF_REPO" rev-parse HEAD)" \
        --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" --argjson cores "$(nproc)" \
        '. + {date: $date, git_commit: $commit, loadavg_before: $load, cores: $cores}' >"$OUT/ghash.json"
jq -r '
    "# GHASH / AES-GCM on one core, 4 KiB blocks\n",
    "\(.date) · \(.cpu_model), \(.cores) cores · AES-NI \(.cpu_flags.aes), PCLMULQDQ \(.cpu_flags.pclmulqdq), VAES \(.cpu_flags.vaes), VPCLMULQDQ \(.cpu_flags.vpclmulqdq) · load average before: \(.loadavg_before) (a shared machine: absolute numbers are noisy, ratios within one run less so) · AES-256, 24-byte AAD, \(.seconds_per_case) s per case, git \(.git_commit[0:12])\n",
    "| case | GB/s | what |", "|---|---:|---|",
    (.results[] | "| \(.case) | \(.gb_s) | \(.what) |")
' "$OUT/ghash.json" >"$OUT/ghash.md"
cat "$OUT/ghash.md"
