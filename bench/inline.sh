#!/usr/bin/env bash
# bench/inline.sh — the inline cipher against the libraries: what a warpfs
# request costs on one core when no mask was made ahead (gcm seal and open,
# ctr, xts encrypt and decrypt; AES-256, 4 KiB blocks), side by side in one
# run with aws-lc (aws-lc-rs for GCM, its EVP interface for CTR and XTS)
# and the system's OpenSSL (EVP through libcrypto).
#
#   bash bench/inline.sh [--seconds S] [--rounds N] [--out DIR]
#
# Builds bench/inline-bench/ (its own cargo workspace, so aws-lc's C build
# and OpenSSL stay out of the warpfs build) into target/inline-bench and
# runs it with no CPU placement. Every case is first checked against
# warpfs's output (ciphertext, tag, the round trip; a changed block must
# fail OpenSSL's GCM open), then the cases run one after the other, S
# seconds each (default 1), for N rounds (default 3); medians are reported.
# Goal per mode and direction: warpfs >= 0.8x the fastest library.
# Output: DIR (default bench/results/DATE-inline)/inline.json and inline.md.
# About 1 min plus the first build (~5 min on 2 cores: aws-lc is C).
set -euo pipefail
WF_NAME=inline
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
SECS=1 ROUNDS=3 OUT=""
CMDLINE="bash bench/inline.sh $*"
while (($#)); do
    case "$1" in
    --seconds) SECS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) wf_die "unknown argument $1 (see --help)" ;;
    esac
done
OUT="${OUT:-$WF_REPO/bench/results/$(date -u +%F)-inline}"
wf_ensure jq:jq cmake:cmake libssl-dev || wf_die "missing tools"
(cd "$WF_REPO/bench/inline-bench" && CARGO_TARGET_DIR="$WF_REPO/target/inline-bench" cargo build --release --locked --quiet)
mkdir -p "$OUT"
LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
"$WF_REPO/target/inline-bench/release/inline-bench" --seconds "$SECS" --rounds "$ROUNDS" |
    jq --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg commit "$(git -C "$WF_REPO" rev-parse HEAD)" \
        --arg load "$LOAD" --argjson cores "$(nproc)" --arg cmd "$CMDLINE" \
        '. + {date: $date, git_commit: $commit, loadavg_before: $load, cores: $cores, command: $cmd}' >"$OUT/inline.json"
jq -r '
    def r2: (. * 100 | round) / 100;
    "# The inline cipher against the libraries (one core, 4 KiB, AES-256)\n",
    "\(.date) · \(.cpu_model), \(.cores) cores · warpfs AES: \(.warpfs.aes), GHASH: \(.warpfs.ghash), XTS on VAES: \(.warpfs.xts_vaes) · \(.libraries["aws-lc"]); \(.libraries.openssl) · load average before: \(.loadavg_before) (a shared machine: compare within this run) · \(.rounds) rounds x \(.seconds_per_case) s per case, medians (GB/s = 10^9 bytes/s), every operation copying its 4 KiB in first · git \(.git_commit[0:12]) · `\(.command)`\n",
    "Goal: warpfs >= 0.8x the fastest library on each row.\n",
    "| mode | op | warpfs | aws-lc | OpenSSL | warpfs / fastest library | goal |",
    "|---|---|---:|---:|---:|---:|---|",
    (.results | group_by(.mode + " " + .op) | sort_by(.[0].mode == "gcm" | not) | .[] |
        (map({key: .who, value: .gb_s}) | from_entries) as $g |
        ([$g["aws-lc"], $g.openssl] | max) as $best |
        ($g.warpfs / $best) as $ratio |
        "| \(.[0].mode) | \(.[0].op) | \($g.warpfs) | \($g["aws-lc"]) | \($g.openssl) | \($ratio | r2)x | \(if $ratio >= 0.8 then "met" else "unmet" end) |"),
    "\n| mode | op | who | GB/s per round | what |", "|---|---|---|---|---|",
    (.results[] | "| \(.mode) | \(.op) | \(.who) | \(.rounds_gb_s | map(tostring) | join(", ")) | \(.what) |")
' "$OUT/inline.json" >"$OUT/inline.md"
cat "$OUT/inline.md"
