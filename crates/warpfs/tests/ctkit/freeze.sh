#!/usr/bin/env bash
# freeze.sh — freeze a container image (`warpfs container`, FORMAT.md 9) for
# tests/container.rs with the current warpfs binary: a fixed password, a
# 256 KiB volume holding a fixed pattern in two runs with a hole between and
# after them, and the image's exact bytes. An image made by an earlier
# warpfs must keep opening to the same content.
#
#   bash crates/warpfs/tests/ctkit/freeze.sh NAME
#
# Writes crates/warpfs/tests/ctkit/NAME/:
#   password.txt   the image's password (first line)
#   image          the container image
# The content (what tests/container.rs checks): bytes [0, 40000) and
# [131072, 200000) of the volume are those of the pattern `seq 1 7 ...`
# (each number and a newline, from the start of the pattern), all other
# bytes are zero.
# Environment: WARPFS=PATH (default <workspace>/target/release/warpfs),
# FORCE=1 replaces an existing NAME (a frozen image is never regenerated).
# Needs root (or fusermount3) and /dev/fuse.
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ws=$(cd "$here/../../../.." && pwd)
bin=${WARPFS:-$ws/target/release/warpfs}
name=${1:?usage: freeze.sh NAME}
out=$here/$name

die() { echo "freeze.sh: $*" >&2; exit 1; }
[[ -x $bin ]] || die "no binary at $bin (cargo build --release -p warpfs, or set WARPFS)"
[[ -c /dev/fuse ]] || die "/dev/fuse is missing"
if [[ -e $out ]]; then
    [[ ${FORCE:-} == 1 ]] || die "$out exists (frozen images are not regenerated; FORCE=1 to replace)"
    rm -rf "$out"
fi
mkdir -p "$out"
printf 'frozen container %s\n' "$name" >"$out/password.txt"
"$bin" container create --passfile "$out/password.txt" --kdf-memory 32768 --kdf-iterations 2 \
    --size 256K "$out/image" >/dev/null
pattern=$(mktemp)
mnt=$(mktemp -d)
trap 'rm -f "$pattern"; mountpoint -q "$mnt" && umount "$mnt"; rmdir "$mnt"' EXIT
(set +o pipefail; seq 1 7 999999999 | head -c 200000) >"$pattern"
"$bin" container open --passfile "$out/password.txt" "$out/image" "$mnt"
dd if="$pattern" of="$mnt/volume" bs=40000 count=1 conv=notrunc status=none
dd if="$pattern" of="$mnt/volume" bs=1 skip=131072 seek=131072 count=68928 conv=notrunc status=none
sync "$mnt/volume"
if command -v fusermount3 >/dev/null; then
    fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt"
else
    umount "$mnt"
fi
chmod 644 "$out/image" "$out/password.txt"
echo "made $out ($(stat -c %s "$out/image") byte image)"
