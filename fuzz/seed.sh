#!/usr/bin/env bash
# fuzz/seed.sh — make the seed corpora of the fuzz targets from the example
# volumes in crates/warpfs/tests/volumes (nothing big is committed), the
# mid-rekey gcm volume included (headers with a rekey watermark, blocks of
# two key generations):
#   fuzz/corpus/config/       each warpfs.conf, and one with the cheapest KDF
#   fuzz/corpus/header/       header + nnode of each cipher file
#   fuzz/corpus/names/        dir IV ‖ backing name (‖ 0 ‖ sidecar for long names)
#   fuzz/corpus/cipher_file/  mode ‖ 4 read ranges ‖ the cipher file (≤ 140,000 bytes)
# Existing corpus files (what earlier runs found) are kept.
set -euo pipefail
FUZZ="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VOLS="$FUZZ/../crates/warpfs/tests/volumes"
C="$FUZZ/corpus"
mkdir -p "$C/config" "$C/header" "$C/names" "$C/cipher_file"
n=0
for vol in gcm ctr xts midrekey-gcm; do
    mode="${vol#midrekey-}"
    v="$VOLS/v1-$vol/cipher"
    [[ -f $v/warpfs.conf ]] || { echo "seed.sh: $v/warpfs.conf missing" >&2; exit 1; }
    cp "$v/warpfs.conf" "$C/config/seed-$vol.conf"
    sed -e 's/"memory_kib": [0-9]*/"memory_kib": 32768/' -e 's/"iterations": [0-9]*/"iterations": 2/' \
        "$v/warpfs.conf" >"$C/config/seed-$vol-min.conf"
    case $mode in
        gcm) mb='\x00' hl=544 ;;
        ctr) mb='\x01' hl=288 ;;
        xts) mb='\x02' hl=32 ;; # no nonce table: the header alone
    esac
    # Read ranges (offset u32 le, length u16 le) x 4: [0,4096) [5000,+9000) [65000,+10000) [100,+65535)
    ranges='\x00\x00\x00\x00\x00\x10\x88\x13\x00\x00\x28\x23\xe8\xfd\x00\x00\x10\x27\x64\x00\x00\x00\xff\xff'
    while IFS= read -r -d '' f; do
        n=$((n + 1))
        head -c "$hl" "$f" >"$C/header/seed-$vol-$n"
        { printf "$mb$ranges"; head -c 140000 "$f"; } >"$C/cipher_file/seed-$vol-$n"
    done < <(find "$v" -type f -size +0 ! -name 'warpfs.*' -print0; find "$v" -type f -size +0 -name 'warpfs.long.*' ! -name '*.name' -print0)
    while IFS= read -r -d '' d; do
        iv="$d/warpfs.diriv"
        [[ -f $iv ]] || continue
        for e in "$d"/*; do
            b="$(basename "$e")"
            [[ $b == warpfs.conf* || $b == warpfs.diriv || $b == *.name ]] && continue
            n=$((n + 1))
            {
                cat "$iv"
                printf '%s' "$b"
                if [[ -f "$e.name" ]]; then printf '\x00'; cat "$e.name"; fi
            } >"$C/names/seed-$vol-$n"
        done
    done < <(find "$v" -type d -print0)
done
echo "seed.sh: corpora in $C: $(ls "$C/config" | wc -l) config, $(ls "$C/header" | wc -l) header, $(ls "$C/names" | wc -l) names, $(ls "$C/cipher_file" | wc -l) cipher_file"
