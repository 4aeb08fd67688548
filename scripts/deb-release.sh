# scripts/deb-release.sh — sourced by scripts/deb.sh: the package of the last
# release (scripts/releases.txt), built from its commit by that release's own
# scripts/deb.sh, and an upgrade from it to the package of this tree while a
# volume is mounted.
#
# Needs from deb.sh: WF_REPO, TDIR, dpkg_, installed_procs and the wf_*
# helpers of lib.sh.

# release_pick [TAG] — REL_TAG and REL_COMMIT of TAG, or of the newest release
# listed. Where the clone has the tag, it must name the listed commit. A
# shallow clone lacks the commit: it is fetched from origin where that
# works; otherwise release_pick returns 1 (the caller leaves the release
# upgrade out, saying so).
release_pick() {
    local want="${1:-}" line tagged
    line="$(grep -v '^#' "$WF_REPO/scripts/releases.txt" | awk -v t="$want" 'NF == 2 && (t == "" || $1 == t)' | tail -n 1)"
    [[ -n $line ]] || wf_die "no release ${want:-at all} in scripts/releases.txt"
    read -r REL_TAG REL_COMMIT <<<"$line"
    if tagged="$(git -C "$WF_REPO" rev-parse -q --verify "refs/tags/$REL_TAG^{commit}" 2>/dev/null)"; then
        [[ $tagged == "$REL_COMMIT" ]] || wf_die "tag $REL_TAG names $tagged; scripts/releases.txt says $REL_COMMIT"
    fi
    git -C "$WF_REPO" cat-file -e "$REL_COMMIT^{commit}" 2>/dev/null && return 0
    wf_log "this clone lacks $REL_TAG ($REL_COMMIT); fetching it from origin"
    timeout 120 git -C "$WF_REPO" fetch --quiet --depth 1 origin "$REL_COMMIT" 2>/dev/null ||
        timeout 300 git -C "$WF_REPO" fetch --quiet --unshallow origin 2>/dev/null || true
    git -C "$WF_REPO" cat-file -e "$REL_COMMIT^{commit}" 2>/dev/null
}

# release_build — REL_DEB: the release's package, built in the same target
# directory as this tree (the dependencies are built once for both; cargo
# keeps the two trees' own crates apart by their paths). Run it before this
# tree's build: it leaves the release's binary in target/release.
release_build() {
    local src="$TDIR/release-src/$REL_TAG" out="$TDIR/release-debs/$REL_TAG" t0=$SECONDS
    # Extracted once per commit: extracting again gives every file a new
    # mtime, and cargo would build the release again.
    if [[ $(cat "$src/.warpfs-commit" 2>/dev/null) != "$REL_COMMIT" ]]; then
        rm -rf "$src"
        mkdir -p "$src"
        git -C "$WF_REPO" archive "$REL_COMMIT" | tar -x -C "$src"
        echo "$REL_COMMIT" >"$src/.warpfs-commit"
    fi
    wf_log "building the package of $REL_TAG ($REL_COMMIT) with its own scripts/deb.sh"
    (cd "$src" && CARGO_TARGET_DIR="$TDIR" bash scripts/deb.sh --build) >&2 ||
        wf_die "building the package of $REL_TAG failed"
    rm -rf "$out"
    mkdir -p "$out"
    cp "$TDIR"/debian/r1/warpfs_*-1_*.deb "$out/"
    REL_DEB="$(ls "$out"/warpfs_*.deb)"
    wf_log "built $(basename "$REL_DEB") in $((SECONDS - t0))s"
}

# release_one_daemon WHAT — the pid of the only warpfs daemon.
release_one_daemon() {
    local pids
    pids="$(installed_procs)"
    [[ -n $pids && $pids != *$'\n'* ]] || wf_die "$1: expected one warpfs daemon, found: ${pids:-none}"
    echo "$pids"
}

release_mount() {
    /usr/bin/warpfs mount --passfile "$UPG/pass" "$UPG/cipher" "$UPG/mnt" ||
        wf_die "$1: /usr/bin/warpfs mount failed"
    wf_is_mounted "$UPG/mnt" || wf_die "$1: $UPG/mnt is not mounted"
}

release_same() {
    cmp -s "$1" "$2" || wf_die "$3: $2 does not read back as written"
}

release_cleanup() {
    [[ -n ${UPG:-} ]] || return 0
    wf_unmount "$UPG/mnt" || true
    rm -rf "$UPG"
}

# release_upgrade_test NEW_DEB — REL_DEB installed, a volume made and
# mounted by it; NEW_DEB installed over it with the mount live: the running
# daemon (of the replaced binary) keeps serving reads, writes, a new
# directory and a rename, and this tree's command line reads its counters;
# a revocation (`key remove --rekey`) is refused on the old daemon's mount
# with the config untouched; after an unmount, a remount runs the new
# binary, revokes on its mount, everything written reads back and the new
# fsck finds the volume clean. Leaves nothing installed.
release_upgrade_test() {
    local new_deb="$1" old_pid new_pid want t0=$SECONDS
    UPG="$(mktemp -d /tmp/warpfs-upgrade.XXXXXX)"
    mkdir "$UPG/cipher" "$UPG/mnt"
    printf 'the upgrade test password\n' >"$UPG/pass"

    wf_log "release upgrade: dpkg -i $(basename "$REL_DEB")"
    dpkg_ -i "$REL_DEB" >/dev/null
    want="warpfs ${REL_TAG#v}"
    [[ $(/usr/bin/warpfs --version) == "$want" ]] ||
        wf_die "$REL_TAG's package runs $(/usr/bin/warpfs --version), not $want"
    /usr/bin/warpfs init --passfile "$UPG/pass" --kdf-memory 32768 --kdf-iterations 2 --quiet "$UPG/cipher" >/dev/null ||
        wf_die "$want: init failed"
    release_mount "$want"
    old_pid="$(release_one_daemon "mounted by $want")"
    head -c 3000000 /dev/urandom >"$UPG/a"
    cp "$UPG/a" "$UPG/mnt/a"
    sync "$UPG/mnt/a"

    wf_log "release upgrade: dpkg -i $(basename "$new_deb") with $UPG/mnt mounted by pid $old_pid"
    dpkg_ -i "$new_deb" >/dev/null
    [[ $(dpkg-query -W -f '${Version}' warpfs) == "$(dpkg-deb -f "$new_deb" Version)" ]] ||
        wf_die "the upgrade did not install $(basename "$new_deb")"
    [[ $(/usr/bin/warpfs --version) != "$want" ]] || wf_die "/usr/bin/warpfs is still $want after the upgrade"
    kill -0 "$old_pid" 2>/dev/null || wf_die "the daemon of $want (pid $old_pid) died in the upgrade"
    [[ $(readlink "/proc/$old_pid/exe") == "/usr/bin/warpfs (deleted)" ]] ||
        wf_die "the daemon of $want does not run the replaced binary: $(readlink "/proc/$old_pid/exe")"
    [[ $(release_one_daemon "after the upgrade") == "$old_pid" ]] || wf_die "the upgrade started a daemon"
    wf_is_mounted "$UPG/mnt" || wf_die "the upgrade took the mount away"
    release_same "$UPG/a" "$UPG/mnt/a" "after the upgrade, on the old daemon"
    head -c 1500000 /dev/urandom >"$UPG/b"
    mkdir "$UPG/mnt/d"
    cp "$UPG/b" "$UPG/mnt/b"
    mv "$UPG/mnt/b" "$UPG/mnt/d/b"
    cat "$UPG/b" >>"$UPG/a"
    cat "$UPG/b" >>"$UPG/mnt/a"
    sync "$UPG/mnt/a" "$UPG/mnt/d/b"
    release_same "$UPG/b" "$UPG/mnt/d/b" "a file written after the upgrade, on the old daemon"
    release_same "$UPG/a" "$UPG/mnt/a" "a file appended to after the upgrade, on the old daemon"
    /usr/bin/warpfs stats "$UPG/mnt" >/dev/null ||
        wf_die "$(/usr/bin/warpfs --version) cannot read the counters of the daemon of $want"
    # Revocation on a mount needs the new daemon: refused while the old
    # one serves, with the config untouched.
    printf 'a password to revoke\n' >"$UPG/pass2"
    local conf out slot
    out="$(/usr/bin/warpfs key add --passfile "$UPG/pass" --password --new-passfile "$UPG/pass2" "$UPG/cipher")" ||
        wf_die "key add beside the daemon of $want failed"
    slot="$(sed -n 's/^Added keyslot \([0-9]*\) .*/\1/p' <<<"$out")"
    [[ -n $slot ]] || wf_die "key add did not name the slot it added: $out"
    conf="$(sha256sum <"$UPG/cipher/warpfs.conf")"
    if out="$(/usr/bin/warpfs key remove --passfile "$UPG/pass" --rekey --yes "$UPG/cipher" "$slot" 2>&1)"; then
        wf_die "key remove --rekey went ahead on the mount of $want: $out"
    fi
    grep -q "older warpfs" <<<"$out" || wf_die "key remove --rekey on the mount of $want: $out"
    [[ $(sha256sum <"$UPG/cipher/warpfs.conf") == "$conf" ]] ||
        wf_die "key remove --rekey refused on the mount of $want but changed the config"

    wf_log "release upgrade: unmount, and mount again with the new binary"
    wf_unmount "$UPG/mnt" || wf_die "unmounting the old daemon's mount failed"
    wf_stop_daemon "$old_pid"
    release_mount "$(/usr/bin/warpfs --version)"
    new_pid="$(release_one_daemon "after the remount")"
    [[ $(readlink "/proc/$new_pid/exe") == /usr/bin/warpfs &&
        $(stat -L -c %d:%i "/proc/$new_pid/exe") == $(stat -c %d:%i /usr/bin/warpfs) ]] ||
        wf_die "the remount does not run the installed binary: $(readlink "/proc/$new_pid/exe")"
    release_same "$UPG/a" "$UPG/mnt/a" "after the remount"
    release_same "$UPG/b" "$UPG/mnt/d/b" "after the remount"
    head -c 700000 /dev/urandom >"$UPG/c"
    cp "$UPG/c" "$UPG/mnt/d/c"
    release_same "$UPG/c" "$UPG/mnt/d/c" "a file written by the new daemon"
    # The new daemon revokes while it serves.
    /usr/bin/warpfs key remove --passfile "$UPG/pass" --rekey --yes "$UPG/cipher" "$slot" >/dev/null 2>&1 ||
        wf_die "key remove --rekey on the new daemon's mount failed"
    release_same "$UPG/a" "$UPG/mnt/a" "after revoking a slot on the mount"
    release_same "$UPG/c" "$UPG/mnt/d/c" "after revoking a slot on the mount"
    wf_unmount "$UPG/mnt" || wf_die "unmounting the new daemon's mount failed"
    wf_stop_daemon "$new_pid"
    /usr/bin/warpfs fsck --passfile "$UPG/pass" "$UPG/cipher" >/dev/null ||
        wf_die "fsck of the upgraded volume is not clean"

    dpkg_ -P warpfs >/dev/null
    [[ -z $(installed_procs) ]] || wf_die "warpfs processes left after the upgrade test: $(installed_procs)"
    release_cleanup
    UPG=""
    wf_log "upgrade from $REL_TAG with a live mount: the old daemon kept serving, the remount runs the new binary ($((SECONDS - t0))s)"
}
