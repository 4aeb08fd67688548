#!/usr/bin/env bash
# bench/rekey.sh — `warpfs rekey` rate on a 1 GiB volume (FILES x SIZE_MIB
# MiB of random data, default 8 x 128) on tmpfs, per content mode, with
# --jobs 1 and the default (one per core) side by side. Checks that the
# contents read back equal after the rekey. Prints one JSON object per run
# and a Markdown table.
#
#   bash bench/rekey.sh [MODES...]      (default: gcm ctr xts)
#
# Environment: FILES (8), SIZE_MIB (128), WARPFS (target/release/warpfs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=${WARPFS:-target/release/warpfs}
FILES=${FILES:-8}
SIZE_MIB=${SIZE_MIB:-128}
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(gcm ctr xts)
rows=()
for mode in "${modes[@]}"; do
    for jobs in 1 default; do
        D=$(mktemp -d /dev/shm/warpfs-rekey.XXXX)
        echo "correct horse battery staple" >"$D/pw"
        mkdir "$D/c" "$D/m"
        "$B" init --passfile "$D/pw" --mode "$mode" "$D/c" >/dev/null
        "$B" mount --passfile "$D/pw" "$D/c" "$D/m"
        for i in $(seq "$FILES"); do head -c $((SIZE_MIB << 20)) /dev/urandom >"$D/m/f$i"; done
        want=$(cat "$D"/m/f* | sha256sum)
        fusermount3 -u "$D/m" 2>/dev/null || umount "$D/m"
        jarg=()
        [ "$jobs" = default ] || jarg=(--jobs "$jobs")
        line=$("$B" rekey --passfile "$D/pw" "${jarg[@]}" "$D/c")
        "$B" mount --passfile "$D/pw" "$D/c" "$D/m"
        got=$(cat "$D"/m/f* | sha256sum)
        fusermount3 -u "$D/m" 2>/dev/null || umount "$D/m"
        rm -rf "$D"
        [ "$want" = "$got" ] || { echo "rekey.sh: $mode: contents differ after rekey" >&2; exit 1; }
        rate=$(sed -E 's/.*: ([0-9.]+) MB\/s.*/\1/' <<<"$line")
        j=$(sed -E 's/.*\(([0-9]+) jobs\).*/\1/' <<<"$line")
        echo "{\"bench\":\"rekey\",\"mode\":\"$mode\",\"jobs\":$j,\"bytes\":$((FILES * SIZE_MIB << 20)),\"mb_per_s\":$rate}"
        rows+=("| $mode | $j | $((FILES * SIZE_MIB)) MiB | $rate |")
    done
done
echo
echo "| mode | jobs | volume | rekey MB/s |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
