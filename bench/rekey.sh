#!/usr/bin/env bash
# bench/rekey.sh — `warpfs rekey` rate on a 1 GiB volume (FILES x SIZE_MIB
# MiB of random data, default 8 x 128) on tmpfs, per content mode: offline
# with --jobs 1 and with the default (one per core), and online (the volume
# mounted, the daemon re-encrypting) with the default, side by side. Checks
# that the contents read back equal after the rekey. Prints one JSON object
# per run and a Markdown table; writes bench/results/DATE-rekey/rekey.{json,md}
# (DATE the UTC day).
#
#   bash bench/rekey.sh [MODES...]      (default: gcm ctr xts)
#
# Environment: FILES (8), SIZE_MIB (128), WARPFS (target/release/warpfs),
# OUT (bench/results/DATE-rekey).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=${WARPFS:-target/release/warpfs}
FILES=${FILES:-8}
SIZE_MIB=${SIZE_MIB:-128}
OUT=${OUT:-bench/results/$(date -u +%F)-rekey}
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(gcm ctr xts)
rows=() json=()
for mode in "${modes[@]}"; do
    for run in offline:1 offline:default online:default; do
        how=${run%%:*} jobs=${run#*:}
        D=$(mktemp -d /dev/shm/warpfs-rekey.XXXX)
        echo "correct horse battery staple" >"$D/pw"
        mkdir "$D/c" "$D/m"
        "$B" init --passfile "$D/pw" --mode "$mode" "$D/c" >/dev/null
        "$B" mount --passfile "$D/pw" "$D/c" "$D/m"
        for i in $(seq "$FILES"); do head -c $((SIZE_MIB << 20)) /dev/urandom >"$D/m/f$i"; done
        want=$(cat "$D"/m/f* | sha256sum)
        jarg=()
        [ "$jobs" = default ] || jarg=(--jobs "$jobs")
        if [ "$how" = offline ]; then
            fusermount3 -u "$D/m" 2>/dev/null || umount "$D/m"
            line=$("$B" rekey --passfile "$D/pw" "${jarg[@]}" "$D/c")
            "$B" mount --passfile "$D/pw" "$D/c" "$D/m"
        else
            sync
            line=$("$B" rekey --passfile "$D/pw" "${jarg[@]}" "$D/c" 2>/dev/null)
            echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
        fi
        got=$(cat "$D"/m/f* | sha256sum)
        fusermount3 -u "$D/m" 2>/dev/null || umount "$D/m"
        rm -rf "$D"
        [ "$want" = "$got" ] || { echo "rekey.sh: $mode: contents differ after rekey" >&2; exit 1; }
        rate=$(sed -E 's/.*: ([0-9.]+) MB\/s.*/\1/' <<<"$line")
        j=$(sed -E 's/.*\(([0-9]+) jobs, .*/\1/' <<<"$line")
        js="{\"bench\":\"rekey\",\"mode\":\"$mode\",\"how\":\"$how\",\"jobs\":$j,\"bytes\":$((FILES * SIZE_MIB << 20)),\"mb_per_s\":$rate}"
        echo "$js"
        json+=("$js")
        rows+=("| $mode | $how | $j | $((FILES * SIZE_MIB)) MiB | $rate |")
    done
done
mkdir -p "$OUT"
{
    echo "["
    for i in "${!json[@]}"; do
        sep=,
        [ "$i" -eq $((${#json[@]} - 1)) ] && sep=
        echo "  ${json[$i]}$sep"
    done
    echo "]"
} >"$OUT/rekey.json"
{
    echo "# warpfs rekey rate"
    echo
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) · $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores · git $(git rev-parse --short=12 HEAD 2>/dev/null || echo "?")$(git diff --quiet HEAD 2>/dev/null || echo " (dirty)") · tmpfs backing · $FILES files x $SIZE_MIB MiB of random data · \`bash bench/rekey.sh\`"
    echo
    echo "Offline: the volume unmounted, \`warpfs rekey\` does the work. Online: the volume mounted and idle, the daemon re-encrypts (every 1 MiB segment goes through the undo journal: three fsyncs and one extra copy of its bytes, free on tmpfs). MB = 10^6 bytes of plaintext."
    echo
    echo "| mode | how | jobs | volume | rekey MB/s |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
} >"$OUT/rekey.md"
cat "$OUT/rekey.md"
