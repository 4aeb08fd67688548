#!/usr/bin/env bash
# bench/cipher-spec.sh — where the cipher is the bottleneck: sequential
# 128 KiB reads and writes through a mount (fio, bench/spec-fio.sh) for
# several content modes in one invocation, side by side, and one table.
#
#   sudo bash bench/cipher-spec.sh [--reps N] [--runtime S] [--size-mib M] [--out DIR] [--tag T]
#       speculation: gcm-twofish, ctr-twofish and gcm with software AES
#       (WARPFS_NO_AESNI=1), each with warpfs-specon (keystream workers on
#       the CPU the FUSE work leaves idle, bench/lib-peers.sh) and
#       warpfs-specoff: on/off ratio and hit rate -> DIR/cipher-spec.{json,md};
#       then both jobs capped at 80 MiB/s (fio --rate), below what the
#       workers make: the hit rate when there is CPU to spare
#   sudo bash bench/cipher-spec.sh --split [...]
#       XTS split across the engine's workers: xts-twofish and xts (AES) with
#       warpfs-specoff (no workers: the FUSE thread alone), warpfs-split1
#       (--engine-threads 1) and warpfs-split2 (--engine-threads 2)
#       -> DIR/xts-split.{json,md}
#
# BDI_MAX_BYTES=N: every mount's dirty limit (bdi max_bytes) for the run, in
# place of the daemon's 128 MiB (bench/lib-peers.sh), e.g. a limit the
# write pool's masks cover (docs/decisions/0013).
# --tag T: name the outputs cipher-spec-T / xts-split-T (e.g. for a run with
# WARPFS_MOUNT_ARGS="--transport dev", which every warpfs peer then gets).
# Each mode is one bench/spec-fio.sh run (its peers interleaved, cold cache
# before every job, fio on CPU 0 and the daemons on CPU 1 as there); the
# modes run one after the other. Defaults: 3 reps x 5 s, a 256 MiB file;
# about 11 minutes (speculation) or 7 (--split) on 2 cores. DIR: --out,
# default bench/results/DATE-NAME (DATE the UTC day, NAME cipher-spec-T or
# xts-split-T). The raw spec-fio results stay in DIR/cipher-spec-raw/.
set -euo pipefail
WF_NAME=cipher-spec
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
REPS=3 RUNTIME=5 SIZE=256 OUT="" SPLIT=false TAG=
while (($#)); do
    case "$1" in
    --reps) REPS="$2"; shift 2 ;;
    --runtime) RUNTIME="$2"; shift 2 ;;
    --size-mib) SIZE="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --split) SPLIT=true; shift ;;
    --tag) TAG="-$2"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) wf_die "unknown argument $1 (see --help)" ;;
    esac
done
JOBS=seqread-128k,seqwrite-128k
if $SPLIT; then
    NAME=xts-split
    runs=("xts-twofish" "xts")
    peers=warpfs-specoff,warpfs-split1,warpfs-split2
else
    NAME=cipher-spec
    runs=("gcm-twofish" "ctr-twofish" "gcm --software-aes")
    peers=warpfs-specon,warpfs-specoff
    JOBS="$JOBS,seqread-128k@80m,seqwrite-128k@80m"
fi
OUT="${OUT:-$WF_REPO/bench/results/$(date -u +%F)-$NAME$TAG}"
RAW="$OUT/cipher-spec-raw"
mkdir -p "$RAW"
common=(--jobs "$JOBS" --reps "$REPS" --runtime "$RUNTIME" --size-mib "$SIZE" --out "$RAW")
files=()
for r in "${runs[@]}"; do
    read -r mode soft <<<"$r"
    wf_log "mode $mode ${soft:-}"
    # shellcheck disable=SC2086 # $soft is one optional word
    bash "$WF_REPO/bench/spec-fio.sh" --mode "$mode" $soft --peers "$peers" "${common[@]}" >&2
    f="spec-fio"
    [[ $mode == gcm ]] || f="$f-$mode"
    [[ -n ${soft:-} ]] && f="$f-softaes"
    files+=("$RAW/$f.json")
done
mkdir -p "$RAW/$NAME$TAG"
cp "${files[@]}" "$RAW/$NAME$TAG/"
python3 "$WF_REPO/bench/cipher_spec_report.py" "$NAME" "$OUT/$NAME$TAG" "${files[@]}"
# The per-mode results are kept in $RAW/$NAME$TAG/ only.
rm -f "${files[@]}" "${files[@]/%.json/.md}"
NAME="$NAME$TAG"
cat "$OUT/$NAME.md"
wf_log "wrote $OUT/$NAME.json and $OUT/$NAME.md"
