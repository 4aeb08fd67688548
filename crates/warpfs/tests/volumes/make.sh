#!/usr/bin/env bash
# make.sh — create example volumes for tests/format_volumes.rs with the
# current warpfs binary (freezes the on-disk format, FORMAT.md).
#
#   bash crates/warpfs/tests/volumes/make.sh [MODE...]      (default: gcm ctr)
#
# MODE is a content_mode of the config: gcm, ctr, xts, or one of them over
# Twofish (gcm-twofish, ctr-twofish, xts-twofish: `--cipher twofish`), or
# over XChaCha20 (xchacha20-poly1305, ctr-xchacha20: `--cipher xchacha20`).
#
# For each MODE it writes crates/warpfs/tests/volumes/v<VERSION>-<MODE>/:
#   password.txt   the volume password (first line)
#   recovery.txt   the recovery key init printed (keyslot volumes, format 3)
#   expected/      the plaintext tree
#   cipher/        the same tree written through a warpfs mount
# then remounts the volume and checks it shows exactly expected/.
#
# Environment:
#   WARPFS=PATH          binary to use (default: <workspace>/target/release/warpfs)
#   FORMAT_VERSION=N     version in the directory name (default 1)
#   FORCE=1              replace an existing volume (a frozen volume must
#                        normally never be regenerated)
#   MIDREKEY=1           make v<VERSION>-midrekey-<MODE> instead: the same
#                        tree with a `warpfs rekey` killed part way (config
#                        with a rekey target, files of both key generations,
#                        one file with a rekey watermark inside it; FORMAT.md 10)
#   MIDUPGRADE=1         make v<VERSION>-midupgrade-<MODE> instead: the same
#                        tree with a `warpfs upgrade` killed part way (config
#                        with the flag summary-upgrade, files with a summary
#                        and files without, and one file whose record is
#                        written but whose header is still version 1;
#                        FORMAT.md 12.6)
#   INIT_ARGS="..."      more `warpfs init` arguments (e.g. "--file-summary off",
#                        which a gcm volume without summaries now needs;
#                        "--key-bits 128" with TAG=aes128 made v3-aes128-gcm
#                        and v3-aes128-ctr)
#   TAG=NAME             name the volume v<VERSION>-NAME-<MODE> (with
#                        MIDREKEY=1, e.g. TAG=midrekey-id: a rekey with the
#                        rekey ID of FORMAT.md 10.1)
#   TPM2=1               add a tpm2 keyslot (FORMAT.md 2.6) sealed to PCR 7
#                        by a software TPM (swtpm) started for it and
#                        thrown away after: the slot's fields are frozen,
#                        the volume opens with its password (e.g. with
#                        FORMAT_VERSION=3 TAG=tpm2)
# Needs root (or fusermount3) and /dev/fuse. Everything is deterministic
# except the cipher bytes (random keys, IVs, nonces).
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ws=$(cd "$here/../../../.." && pwd)
bin=${WARPFS:-$ws/target/release/warpfs}
version=${FORMAT_VERSION:-1}
modes=("$@")
[[ ${#modes[@]} -gt 0 ]] || modes=(gcm ctr)

die() { echo "make.sh: $*" >&2; exit 1; }
[[ -x $bin ]] || die "no binary at $bin (cargo build --release -p warpfs, or set WARPFS)"
[[ -c /dev/fuse ]] || die "/dev/fuse is missing"

unmount() {
    if command -v fusermount3 >/dev/null; then
        fusermount3 -u "$1" 2>/dev/null || umount "$1" 2>/dev/null || umount -l "$1"
    else
        umount "$1" 2>/dev/null || umount -l "$1"
    fi
}

# gen SEED SIZE: deterministic printable bytes.
gen() {
    # seq dies of SIGPIPE once head has enough: not an error here.
    (
        set +o pipefail
        seq "$1" 7 999999999 | head -c "$2"
    )
}

# populate DIR: build the plaintext tree. Run once on expected/ and once on
# the mount, so every operation (truncate, holes, renames) goes through warpfs.
# No empty directories (git does not keep them), no special files, no hard
# links (git cannot store them).
populate() {
    local d=$1
    printf 'Hello, warpfs format v%s!\n' "$version" >"$d/hello.txt"
    : >"$d/empty"
    printf x >"$d/one-byte"
    gen 1 4095 >"$d/block-4095.bin"
    gen 2 4096 >"$d/block-4096.bin"
    gen 3 4097 >"$d/block-4097.bin"
    gen 4 65536 >"$d/nnode-65536.bin"
    gen 5 70000 >"$d/cross-64k.bin"
    # 64 KiB + 1 MiB + 5000: reaches past the first nonce page into the second.
    gen 6 1119112 >"$d/cross-page1.bin"
    head -c 8192 /dev/zero >"$d/zeros-8192.bin"
    # Holes: data at both ends only.
    printf head >"$d/sparse.bin"
    printf tail | dd of="$d/sparse.bin" bs=1 seek=1200000 conv=notrunc status=none
    # Written long, then truncated inside a block, then extended by truncate.
    gen 7 9000 >"$d/truncated.bin"
    truncate -s 5000 "$d/truncated.bin"
    truncate -s 6000 "$d/truncated.bin"
    # Overwritten in the middle (read-modify-write of partial blocks).
    gen 8 20000 >"$d/rewritten.bin"
    gen 9 3000 | dd of="$d/rewritten.bin" bs=1 seek=5000 conv=notrunc status=none
    # Renamed into place.
    printf 'renamed\n' >"$d/before-rename"
    mv "$d/before-rename" "$d/after-rename"

    mkdir -p "$d/dir/sub"
    printf 'deep\n' >"$d/dir/sub/deep.txt"
    printf 'unicode\n' >"$d/dir/ünïcødé name ☃.txt"
    printf 'dotfile\n' >"$d/dir/.hidden"
    local longdir longfile
    longdir="long-dir-$(printf 'd%.0s' {1..221})"   # 230 bytes
    longfile="long-file-$(printf 'f%.0s' {1..230})" # 240 bytes
    mkdir "$d/$longdir"
    printf 'long names\n' >"$d/$longdir/$longfile"
    printf 'also long\n' >"$d/$longfile"
    # Plaintext names that look like reserved backing names.
    printf 'not the config\n' >"$d/dir/warpfs.conf"

    ln -s hello.txt "$d/link-rel"
    ln -s ../../hello.txt "$d/dir/sub/link-up"
    ln -s does/not/exist "$d/link-dangling"
    ln -s /etc/hostname "$d/link-abs"
    ln -s "$longfile" "$d/link-to-long"
}

# midrekey DIR PASSFILE: kill a `warpfs rekey` of DIR at the first segment
# that leaves both a file wholly at the new generation and a file whose
# watermark lies inside it (header bytes 28..31 nonzero, more segments after).
midrekey() {
    local dir=$1 pw=$2 k f tmp g r moved inside
    tmp=$(mktemp -d)
    for k in $(seq 1 60); do
        rm -rf "$tmp/c" && cp -a "$dir" "$tmp/c"
        WARPFS_REKEY_KILL=segment:$k "$bin" rekey --jobs 1 --passfile "$pw" "$tmp/c" >/dev/null 2>&1 && die "rekey was not killed"
        moved=0 inside=0
        for f in $(find "$tmp/c" -type f ! -name 'warpfs.*' -size +0); do
            read -r g r < <(od -An -tu4 -j24 -N8 "$f")
            [[ $g == 1 && $r == 0 ]] && moved=1
            # Watermark 1 = the nnode only: more data after 64 KiB + a page.
            [[ $r != 0 && $(stat -c %s "$f") -gt 200000 ]] && inside=1
        done
        if ((moved && inside)); then
            rm -rf "$dir" && mv "$tmp/c" "$dir"
            # The killed run emptied its journal; an empty one is removed at mount.
            rm -f "$dir"/warpfs.rekey.undo-*
            rm -rf "$tmp"
            return 0
        fi
    done
    rm -rf "$tmp"
    die "no kill point left a file mid-rekey"
}

# midupgrade DIR PASSFILE: kill a `warpfs upgrade` of DIR right after the
# record of its 5th file is durable, before that file's header changes.
midupgrade() {
    local dir=$1 pw=$2 f v n1=0 n2=0
    WARPFS_UPGRADE_KILL=record:5 "$bin" upgrade --passfile "$pw" "$dir" >/dev/null 2>&1 && die "upgrade was not killed"
    grep -q '"summary-upgrade"' "$dir/warpfs.conf" || die "the config does not say the upgrade is under way"
    # The killed run's lock file (a stale one is harmless, but not part of the format).
    rm -f "$dir/warpfs.lock"
    for f in $(find "$dir" -type f ! -name 'warpfs.*' -size +0); do
        v=$(od -An -tu2 -j4 -N2 "$f" | tr -d ' ')
        [[ $v == 1 ]] && n1=$((n1 + 1))
        [[ $v == 2 ]] && n2=$((n2 + 1))
    done
    ((n1 > 1 && n2 > 0)) || die "no mix of files with and without a summary ($n1 without, $n2 with)"
}

# tpm2_slot DIR PASSFILE: a tpm2 keyslot sealed to PCR 7 by a swtpm that
# lives only for this call.
tpm2_slot() {
    local dir=$1 pw=$2 st port pid
    command -v swtpm >/dev/null || die "TPM2=1 needs swtpm (apt-get install swtpm swtpm-tools)"
    st=$(mktemp -d)
    port=$((20000 + RANDOM % 20000))
    swtpm socket --tpm2 --tpmstate dir="$st" --server type=tcp,port=$port,bindaddr=127.0.0.1 \
        --ctrl type=tcp,port=$((port + 1)),bindaddr=127.0.0.1 --flags not-need-init,startup-clear &
    pid=$!
    sleep 1
    "$bin" key add --passfile "$pw" --tpm2 --tpm2-tcti "swtpm:port=$port" --tpm2-pcrs 7 \
        --label "example tpm2" "$dir" || { kill $pid; die "key add --tpm2 failed"; }
    kill $pid
    wait $pid 2>/dev/null || true
    rm -rf "$st"
}

for mode in "${modes[@]}"; do
    out="$here/v$version-$mode"
    [[ ${MIDREKEY:-} == 1 ]] && out="$here/v$version-midrekey-$mode"
    [[ ${MIDUPGRADE:-} == 1 ]] && out="$here/v$version-midupgrade-$mode"
    [[ -n ${TAG:-} ]] && out="$here/v$version-$TAG-$mode"
    if [[ -e $out ]]; then
        [[ ${FORCE:-} == 1 ]] || die "$out exists (frozen volumes are not regenerated; FORCE=1 to replace)"
        rm -rf "$out"
    fi
    mkdir -p "$out/cipher" "$out/expected"
    printf 'warpfs example volume %s %s\n' "$version" "$mode" >"$out/password.txt"
    init_args=(--mode "$mode")
    [[ $mode == *-twofish ]] && init_args=(--mode "${mode%-twofish}" --cipher twofish)
    [[ $mode == xchacha20-poly1305 ]] && init_args=(--mode gcm --cipher xchacha20)
    [[ $mode == ctr-xchacha20 ]] && init_args=(--mode ctr --cipher xchacha20)
    # shellcheck disable=SC2086 # INIT_ARGS is a list of words
    init_out=$("$bin" init --passfile "$out/password.txt" "${init_args[@]}" ${INIT_ARGS:-} "$out/cipher")
    rk=$(grep -oE '^ +[0-9a-f]{8}(-[0-9a-f]{8}){7}$' <<<"$init_out" | tr -d ' ' || true)
    [[ -n $rk ]] && printf '%s\n' "$rk" >"$out/recovery.txt"
    [[ ${TPM2:-} == 1 ]] && tpm2_slot "$out/cipher" "$out/password.txt"
    populate "$out/expected"

    mnt=$(mktemp -d)
    log=$(mktemp)
    "$bin" mount --passfile "$out/password.txt" --log-file "$log" "$out/cipher" "$mnt"
    populate "$mnt"
    sync
    unmount "$mnt"
    sleep 0.5
    [[ ${MIDREKEY:-} == 1 ]] && midrekey "$out/cipher" "$out/password.txt"
    if [[ ${MIDUPGRADE:-} == 1 ]]; then
        midupgrade "$out/cipher" "$out/password.txt"
        # The check below mounts: on a copy the upgrade finishes first (a
        # volume mid-upgrade does not mount).
        checked=$(mktemp -d)
        cp -a "$out/cipher" "$checked/c"
        "$bin" upgrade --passfile "$out/password.txt" "$checked/c" >/dev/null
        out_cipher=$checked/c
    else
        out_cipher=$out/cipher
    fi

    # Check: a fresh mount shows exactly expected/.
    "$bin" mount --passfile "$out/password.txt" --log-file "$log" "$out_cipher" "$mnt"
    rc=0
    diff -r --no-dereference "$out/expected" "$mnt" || rc=$?
    unmount "$mnt"
    rmdir "$mnt"
    if [[ $rc != 0 ]]; then
        echo "warpfs log:" >&2
        cat "$log" >&2
        rm -f "$log"
        die "$out: the remounted volume differs from expected/ (left in place for inspection)"
    fi
    rm -f "$log"
    [[ ${MIDUPGRADE:-} == 1 ]] && rm -rf "$checked"
    # Modes as a git checkout will have them (git keeps only 644/755), so the
    # tests see what CI sees.
    find "$out" -type d -exec chmod 755 {} +
    find "$out" -type f -exec chmod 644 {} +
    "$bin" info "$out/cipher" >/dev/null
    echo "made $out ($(find "$out/cipher" -type f | wc -l) cipher files)"
done
