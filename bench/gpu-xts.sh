#!/usr/bin/env bash
# bench/gpu-xts.sh — CPU vs OpenCL XTS-AES and XTS-Twofish throughput by
# request size, the TrueCrypt GPU XTS paper's Fig. 6 (GPU vs CPU by
# plaintext size, crossover).
#
#   bash bench/gpu-xts.sh [--secs 0.2] [--reps 3] [--out DIR]
#   (DIR: default bench/results/DATE-gpu-xts, DATE the UTC day)
#
# Builds and runs the gpu_xts_bench example (crates/engine/examples/):
#   - CPU: the `xts-mode` crate over `aes` 0.9 (AES-NI when present), one
#     thread — the fastest CPU XTS reachable from the engine crate today;
#   - OpenCL: XtsDevice (crates/engine/src/gpu/xts.rs, kernels/aes_xts.cl),
#     256 work items per group, 256 KiB launches, copies included;
#   - requests of 4 KiB .. 16 MiB in 4 KiB data units, XTS-AES-128 and -256,
#     plus a launch-chunk sweep at 16 MiB;
#   - writes DIR/gpu-xts.json and DIR/gpu-xts.md (MB/s = 10^6 bytes/s) with
#     the crossover size (none if OpenCL never stays ahead);
#   - then the gpu_xts_twofish_bench example: XTS-Twofish-128/256 on one
#     core, on all cores (split across the engine's workers as the mount
#     splits requests) and on OpenCL (kernels/twofish_xts.cl), 4 KiB ..
#     16 MiB, the crossover, a launch-chunk sweep: DIR/gpu-xts-twofish.{json,md}.
# On pocl (a CPU OpenCL) the OpenCL column is NOT a GPU figure. Timings on a
# shared VM are noisy: compare only columns measured side by side. ~40 s.
set -euo pipefail

WF_NAME=gpu-xts
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$WF_REPO"

SECS=0.2
REPS=3
OUT=""
while (($#)); do
    case "$1" in
        --secs) SECS="$2"; shift 2 ;;
        --reps) REPS="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        *) echo "usage: bash bench/gpu-xts.sh [--secs S] [--reps N] [--out DIR]" >&2; exit 2 ;;
    esac
done
OUT="${OUT:-$WF_REPO/bench/results/$(date -u +%F)-gpu-xts}"
mkdir -p "$OUT"
cargo build --release -p warpfs-engine --example gpu_xts_bench
"$WF_REPO/target/release/examples/gpu_xts_bench" --secs "$SECS" --reps "$REPS" \
    --json "$OUT/gpu-xts.json" --md "$OUT/gpu-xts.md"
echo "wrote $OUT/gpu-xts.json and $OUT/gpu-xts.md"
cargo build --release -p warpfs-engine --example gpu_xts_twofish_bench
"$WF_REPO/target/release/examples/gpu_xts_twofish_bench" --secs "$SECS" --reps "$REPS" \
    --json "$OUT/gpu-xts-twofish.json" --md "$OUT/gpu-xts-twofish.md"
echo "wrote $OUT/gpu-xts-twofish.json and $OUT/gpu-xts-twofish.md"
