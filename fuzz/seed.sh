#!/usr/bin/env bash
# fuzz/seed.sh — make the seed inputs of the fuzz targets from the example
# volumes in crates/warpfs/tests/volumes, made again on every run (nothing
# here is committed; what fuzzing found is, in fuzz/corpus/):
#   fuzz/seeds/config/       each example warpfs.conf (all formats, keyslots
#                            included), and one with the cheapest KDF
#   fuzz/seeds/header/       header + nnode of each cipher file
#   fuzz/seeds/names/        dir IV ‖ backing name (‖ 0 ‖ sidecar for long names)
#   fuzz/seeds/cipher_file/  kind ‖ 4 read ranges ‖ the cipher file (≤ 140,000
#                            bytes); kind is the volume's index in the
#                            target's KINDS (AES, Twofish and XChaCha20 in
#                            each of their modes, file summaries, mid-rekey)
set -euo pipefail
FUZZ="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VOLS="$FUZZ/../crates/warpfs/tests/volumes"
S="$FUZZ/seeds"
rm -rf "$S"
mkdir -p "$S/config" "$S/header" "$S/names" "$S/cipher_file"

for v in "$VOLS"/v*/cipher; do
    vol="$(basename "$(dirname "$v")")"
    [[ -f $v/warpfs.conf ]] || { echo "seed.sh: $v/warpfs.conf missing" >&2; exit 1; }
    cp "$v/warpfs.conf" "$S/config/seed-$vol.conf"
    sed -e 's/"memory_kib": [0-9]*/"memory_kib": 32768/' -e 's/"iterations": [0-9]*/"iterations": 2/' \
        "$v/warpfs.conf" >"$S/config/seed-$vol-min.conf"
done

# The cipher_file target's KINDS, in its order (the first byte of a seed);
# the mid-rekey gcm volume's files go in as kind 0 (v1-gcm's keys).
kinds=(v1-gcm v1-ctr v1-xts v1-gcm-twofish v1-ctr-twofish v1-xts-twofish v2-gcm v2-xchacha20-poly1305 v2-ctr-xchacha20)
n=0
seed_volume() { # index, volume directory name
    local idx="$1" vol="$2" mb hl
    local v="$VOLS/$vol/cipher"
    [[ -d $v ]] || { echo "seed.sh: $v missing" >&2; exit 1; }
    mb="$(printf '\\x%02x' "$idx")"
    case $vol in
    *xts*) hl=32 ;; # no nonce table: the header alone
    *ctr*) hl=288 ;;
    *) hl=544 ;;
    esac
    # Read ranges (offset u32 le, length u16 le) x 4: [0,4096) [5000,+9000) [65000,+10000) [100,+65535)
    local ranges='\x00\x00\x00\x00\x00\x10\x88\x13\x00\x00\x28\x23\xe8\xfd\x00\x00\x10\x27\x64\x00\x00\x00\xff\xff'
    while IFS= read -r -d '' f; do
        n=$((n + 1))
        head -c "$hl" "$f" >"$S/header/seed-$vol-$n"
        { printf "$mb$ranges"; head -c 140000 "$f"; } >"$S/cipher_file/seed-$vol-$n"
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
            } >"$S/names/seed-$vol-$n"
        done
    done < <(find "$v" -type d -print0)
}
for i in "${!kinds[@]}"; do
    seed_volume "$i" "${kinds[$i]}"
done
seed_volume 0 v1-midrekey-gcm
echo "seed.sh: seeds in $S: $(ls "$S/config" | wc -l) config, $(ls "$S/header" | wc -l) header, $(ls "$S/names" | wc -l) names, $(ls "$S/cipher_file" | wc -l) cipher_file"
