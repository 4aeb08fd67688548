#!/usr/bin/env bash
# bench/gpu.sh — mask throughput and per-batch latency of the GPU backends.
#
#   bash bench/gpu.sh [--secs 0.3] [--out DIR]
#
# Builds and runs gpu-bench (crates/engine/src/bin/gpu-bench.rs): AES-256
# and Twofish-256 masks of 4 KiB, 64 KiB and 1 MiB, 1, 16, 256 and 4096
# contexts per batch, on the cpu backend (1 thread), OpenCL (any platform: pocl on a CPU-only
# machine; one lane, then both lanes at once) and CUDA (a "not run" row
# without a device). Writes DIR/gpu.json and DIR/gpu.md (default
# bench/results/DATE-gpu, DATE the UTC day). Installs the OpenCL ICD loader
# and pocl when missing (as root). Shared machines give noisy numbers: compare rows of one run.
set -euo pipefail

WF_NAME=gpu-bench
# shellcheck source=bench/lib-engine.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-engine.sh"
while (($#)); do
    engine_args "$@"
    shift "$NARGS"
done

wf_ensure ocl-icd-libopencl1 pocl-opencl-icd || wf_warn "no OpenCL ICD / pocl: the opencl rows will say why"

engine_bin gpu-bench
wf_log "gpu-bench --secs $SECS --out $OUT"
mkdir -p "$OUT"
"$BIN" --secs "$SECS" --out "$OUT"
wf_log "wrote $OUT/gpu.json and $OUT/gpu.md"
