#!/usr/bin/env bash
# bench/volkey.sh — revocation (`warpfs key remove 2 --rekey`, a rekey to a
# new volume key) of a mounted volume on tmpfs: DIRS directories of FILES
# small files each (default 100 x 100). Reports the whole run and the
# part during which requests to the mount wait (the names moving, from the
# daemon's log), and checks the tree reads back the same. Prints one JSON
# object per size and a Markdown table; writes
# bench/results/DATE-volkey/volkey.{json,md} (DATE the UTC day).
#
#   bash bench/volkey.sh [DIRSxFILES...]     (default: 10x100 100x100)
#
# Environment: WARPFS (target/release/warpfs), OUT (bench/results/DATE-volkey).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=${WARPFS:-target/release/warpfs}
OUT=${OUT:-bench/results/$(date -u +%F)-volkey}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10x100 100x100)
# Seconds since the epoch of a log line's RFC 3339 timestamp.
secs() { date -u -d "$(cut -d' ' -f1 <<<"$1")" +%s.%N; }
rows=() json=()
for size in "${sizes[@]}"; do
    dirs=${size%x*} files=${size#*x}
    D=$(mktemp -d /dev/shm/warpfs-volkey.XXXX)
    echo "correct horse battery staple" >"$D/p1"
    echo "the password to revoke" >"$D/p2"
    mkdir "$D/c" "$D/m"
    "$B" init --passfile "$D/p1" --kdf-memory 32768 --kdf-iterations 2 "$D/c" >/dev/null 2>&1
    "$B" key add --passfile "$D/p1" --password --new-passfile "$D/p2" "$D/c" >/dev/null
    "$B" mount --passfile "$D/p1" --log-file "$D/log" "$D/c" "$D/m"
    for d in $(seq "$dirs"); do
        mkdir "$D/m/d$d"
        for f in $(seq "$files"); do printf 'file %s of %s\n' "$f" "$d" >"$D/m/d$d/f$f"; done
    done
    want=$(cd "$D/m" && find . -type f -print0 | sort -z | xargs -0 cat | sha256sum)
    t0=$(date +%s.%N)
    "$B" key remove --passfile "$D/p1" --rekey --yes "$D/c" 2 >/dev/null 2>&1
    t1=$(date +%s.%N)
    got=$(cd "$D/m" && find . -type f -print0 | sort -z | xargs -0 cat | sha256sum)
    a=$(grep -m1 'moving every name' "$D/log")
    z=$(grep -m1 'names and .* directories moved' "$D/log")
    names=$(sed -E 's/.*: ([0-9]+) names and.*/\1/' <<<"$z")
    fusermount3 -u "$D/m" 2>/dev/null || umount "$D/m"
    rm -rf "$D"
    [ "$want" = "$got" ] || { echo "volkey.sh: $size: the tree differs after the rekey" >&2; exit 1; }
    total=$(echo "$t1 - $t0" | bc -l)
    pause=$(echo "$(secs "$z") - $(secs "$a")" | bc -l)
    js=$(printf '{"bench":"volkey","dirs":%s,"files":%s,"names":%s,"total_s":%.3f,"names_pause_s":%.3f}' \
        "$dirs" "$((dirs * files))" "$names" "$total" "$pause")
    echo "$js"
    json+=("$js")
    rows+=("$(printf '| %s | %s | %s | %.2f | %.3f |' "$dirs" "$((dirs * files))" "$names" "$total" "$pause")")
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
} >"$OUT/volkey.json"
{
    echo "# Revoking a keyslot on a mounted volume"
    echo
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) · $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores · git $(git rev-parse --short=12 HEAD 2>/dev/null || echo "?")$(git diff --quiet HEAD 2>/dev/null || echo " (dirty)") · tmpfs backing · \`bash bench/volkey.sh\`"
    echo
    echo "\`warpfs key remove 2 --rekey\` on the mounted volume (decision record 0092): the whole run (content moved while the mount serves, then the names), and the pause during which every request to the mount waits (the names moving, from the daemon's log). Small files, so the run is mostly per-file work. A shared 2-core machine: one run each, read as an order of magnitude."
    echo
    echo "| directories | files | names moved | whole run (s) | requests wait (s) |"
    echo "|---:|---:|---:|---:|---:|"
    printf '%s\n' "${rows[@]}"
} >"$OUT/volkey.md"
cat "$OUT/volkey.md"
