#!/usr/bin/env bash
# freeze.sh — freeze a reverse view (FORMAT.md 14) for tests/reverse.rs with
# the current warpfs binary: a fixed plaintext tree, its reverse config and
# the exact bytes of the view (a backup of the view must stay byte for byte
# the same while its config stays).
#
#   bash crates/warpfs/tests/revkit/freeze.sh NAME
#
# Writes crates/warpfs/tests/revkit/NAME/:
#   password.txt   the config's password (first line)
#   plain/         the plaintext tree, with its config .warpfs.reverse.conf
#   view.txt       every entry of the view, sorted by path:
#                    d PATH             a directory
#                    f SHA256 PATH      a file and the SHA-256 of its bytes
#                    l TARGET PATH      a symlink and its (sealed) target
# Environment: WARPFS=PATH (default <workspace>/target/release/warpfs),
# INIT_ARGS="..." more arguments of `warpfs init --reverse` (e.g.
# "--file-summary on"), FORCE=1 replaces an existing NAME (a frozen view
# is never regenerated).
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
    [[ ${FORCE:-} == 1 ]] || die "$out exists (frozen views are not regenerated; FORCE=1 to replace)"
    rm -rf "$out"
fi

# gen SEED SIZE: deterministic printable bytes.
gen() {
    (
        set +o pipefail
        seq "$1" 7 999999999 | head -c "$2"
    )
}

mkdir -p "$out/plain"
p=$out/plain
printf 'frozen reverse view %s\n' "$name" >"$out/password.txt"
printf 'hello\n' >"$p/hello.txt"
: >"$p/empty"
gen 1 70000 >"$p/cross-64k.bin"
mkdir -p "$p/dir/sub"
printf 'deep\n' >"$p/dir/sub/deep.txt"
long="long-$(printf 'n%.0s' {1..190})"
printf 'long name\n' >"$p/dir/$long"
ln -s hello.txt "$p/link-rel"
ln -s /etc/hostname "$p/link-abs"
ln -s ../../hello.txt "$p/dir/sub/link-up"
ln -s "$long" "$p/dir/link-$long"
# shellcheck disable=SC2086 # INIT_ARGS is a list of words
"$bin" init --reverse ${INIT_ARGS:-} --passfile "$out/password.txt" --kdf-memory 32768 --kdf-iterations 2 --quiet "$p" >/dev/null

mnt=$(mktemp -d)
"$bin" mount --reverse --passfile "$out/password.txt" "$p" "$mnt"
(
    cd "$mnt"
    find . -mindepth 1 | sed 's|^\./||' | sort | while IFS= read -r e; do
        if [[ -L $e ]]; then
            printf 'l %s %s\n' "$(readlink "$e")" "$e"
        elif [[ -d $e ]]; then
            printf 'd %s\n' "$e"
        else
            printf 'f %s %s\n' "$(sha256sum <"$e" | cut -d' ' -f1)" "$e"
        fi
    done
) >"$out/view.txt"
if command -v fusermount3 >/dev/null; then
    fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt"
else
    umount "$mnt"
fi
rmdir "$mnt"
# Modes as a git checkout has them.
find "$out" -type d -exec chmod 755 {} +
find "$out" -type f -exec chmod 644 {} +
echo "made $out ($(wc -l <"$out/view.txt") view entries)"
