#!/usr/bin/env bash
# scripts/deb.sh — build the Debian package and test it installed.
#
#   bash scripts/deb.sh            # build, then (as root) the install test
#   bash scripts/deb.sh --build    # build only
#   bash scripts/deb.sh --build --target aarch64-unknown-linux-gnu
#                                  # a cross package (scripts/arm64.sh sets
#                                  # the target's linker and runner: the
#                                  # runner runs the binary for its man pages)
#   bash scripts/deb.sh --release v0.1.0
#                                  # upgrade from that release (default: the
#                                  # newest in scripts/releases.txt)
#   bash scripts/deb.sh --no-release
#                                  # without the release build and upgrade
#
# 1. cargo-deb 3.8 into target/tools (cargo install --locked; kept there)
# 1b. (root, unless --no-release) the package of the newest release in
#    scripts/releases.txt, built from its commit (git archive into
#    target/release-src/TAG) by that release's own scripts/deb.sh, in the
#    same target directory (scripts/deb-release.sh)
# 2. release build of warpfs; man pages and completions from the binary
#    (warpfs gen-man / gen-completions) into target/release/assets
# 3. cargo deb --no-build: target/debian/warpfs_VERSION-1_ARCH.deb, and a
#    -2 revision of the same build to test an upgrade with
# 4. install test (root): dpkg -i; the files are there and `dpkg -L`
#    lists them (binary, mount helper, man pages, completions, contrib
#    examples), `man -aw warpfs` finds the package's page (a warning when
#    another page, e.g. under /usr/local, comes first); no warpfs process
#    or mount appeared; the fstab and contrib tests (crates/warpfs/tests/
#    daily/) run against /usr/bin/warpfs, the #[ignore]d mount.warpfs one
#    included; dpkg -i of revision 2 (upgrade), files again; dpkg -r,
#    then dpkg -P: every path `dpkg -L` listed is gone and no warpfs process
#    or mount is left.
# 5. upgrade from the release with a live mount (root, unless --no-release):
#    the release's package installed, a volume made and mounted by it, this
#    tree's package installed over it; the old daemon keeps serving reads,
#    writes and renames and this tree's `warpfs stats` reads its counters;
#    after an unmount a remount runs the new binary, every byte reads back
#    and fsck finds the volume clean (release_upgrade_test).
# Refuses to touch a system where a warpfs package or /usr/bin/warpfs is
# already installed. DPKG_FLOCK=FILE runs each dpkg under `flock FILE`.
set -euo pipefail

WF_NAME=deb.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$WF_REPO"

BUILD_ONLY=0 TARGET="" RELEASE=1 RELEASE_TAG=""
while (($#)); do
    case $1 in
    --build) BUILD_ONLY=1 ;;
    --no-release) RELEASE=0 ;;
    --release)
        RELEASE_TAG="$2"
        shift
        ;;
    --target)
        TARGET="$2"
        shift
        ;;
    *) wf_die "unknown argument $1" ;;
    esac
    shift
done
TDIR="${CARGO_TARGET_DIR:-$WF_REPO/target}"
TOOLS="$TDIR/tools"
# cargo-deb reads target/release/... of the assets below from
# target/TRIPLE/release/... when it builds for --target.
REL="$TDIR/release" TARGET_ARGS=() RUNNER=()
if [[ -n $TARGET ]]; then
    ((BUILD_ONLY)) || wf_die "--target builds a package for another machine: give --build too"
    REL="$TDIR/$TARGET/release" TARGET_ARGS=(--target "$TARGET")
    runner_var="CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$TARGET")_RUNNER"
    read -r -a RUNNER <<<"${!runner_var:-}"
fi
ASSETS="$REL/assets"
OUT="$TDIR/debian"
wf_ensure_rust || wf_die "no usable Rust toolchain"

t0=$SECONDS
if ! "$TOOLS/bin/cargo-deb" --version 2>/dev/null | grep -q ' 3\.8\.'; then
    wf_log "installing cargo-deb 3.8.0 into target/tools"
    cargo install --quiet --root "$TOOLS" --locked cargo-deb --version 3.8.0 || wf_die "cargo install cargo-deb failed"
fi
wf_log "cargo-deb ready in $((SECONDS - t0))s"

# shellcheck source=scripts/deb-release.sh
. "$WF_REPO/scripts/deb-release.sh"
# The release upgrade is part of the install test: root, this machine's
# architecture.
((BUILD_ONLY)) || [[ -n $TARGET ]] || wf_is_root || RELEASE=0
((BUILD_ONLY)) && RELEASE=0
if ((RELEASE)); then
    if release_pick "$RELEASE_TAG"; then
        release_build
    else
        wf_warn "the release upgrade is left out: this clone has neither $REL_TAG nor its commit $REL_COMMIT, and origin gave neither (a shallow clone: git fetch --unshallow)"
        RELEASE=0
    fi
fi

t1=$SECONDS
cargo build --release -p warpfs "${TARGET_ARGS[@]}" ${WARPFS_DEB_FEATURES:-}
# The package's version: Cargo's pre-release "0.2.0-dev" is Debian's
# "0.2.0~dev", which sorts before the release "0.2.0" (with a "-" it would
# sort after it, and the release would not upgrade it).
VERSION="$(awk '/^\[workspace.package\]/ { f = 1 } f && $1 == "version" { gsub(/"/, "", $3); print $3; exit }' Cargo.toml)"
[[ -n $VERSION ]] || wf_die "no version in Cargo.toml's [workspace.package]"
DEB_VERSION="${VERSION/-/\~}"
# The release's build above left its binary here: this must be this tree's.
[[ -n $TARGET || $("$REL/warpfs" --version) == "warpfs $VERSION" ]] ||
    wf_die "$REL/warpfs is $("$REL/warpfs" --version), not warpfs $VERSION"
rm -rf "$ASSETS" "$OUT"
mkdir -p "$OUT"
"${RUNNER[@]}" "$REL/warpfs" gen-man "$ASSETS/man"
gzip -9n "$ASSETS"/man/*
"${RUNNER[@]}" "$REL/warpfs" gen-completions "$ASSETS/completions"
# --fast: gzip instead of xz (5 s instead of 40 s here, 9 MB instead of 7).
for r in 1 2; do
    "$TOOLS/bin/cargo-deb" -p warpfs "${TARGET_ARGS[@]}" --no-build --fast --strip \
        --deb-version "$DEB_VERSION-$r" -o "$OUT/r$r/" >/dev/null
done
DEB1=$(ls "$OUT"/r1/warpfs_*-1_*.deb)
DEB2=$(ls "$OUT"/r2/warpfs_*-2_*.deb)
wf_log "built $DEB1 and $DEB2 in $((SECONDS - t1))s"
dpkg-deb --info "$DEB1" | sed -n 's/^ \(Package\|Version\|Depends\):/  \1:/p'
((BUILD_ONLY)) && exit 0

wf_is_root || wf_skip "the install test needs root (dpkg -i)"
if dpkg -s warpfs >/dev/null 2>&1 || [[ -e /usr/bin/warpfs ]]; then
    wf_die "warpfs is already installed here: not touching it"
fi
dpkg_() {
    if [[ -n ${DPKG_FLOCK:-} ]]; then flock "$DPKG_FLOCK" dpkg "$@"; else dpkg "$@"; fi
}

# What the package must never start: a process of the installed binary
# (also one whose file an upgrade has replaced: "/usr/bin/warpfs
# (deleted)"), or a warpfs mount that was not there before.
installed_procs() {
    local p e
    for p in /proc/[0-9]*; do
        e="$(readlink "$p/exe" 2>/dev/null)" || continue
        [[ $e == /usr/bin/warpfs || $e == "/usr/bin/warpfs (deleted)" ]] && echo "${p#/proc/}"
    done
    return 0
}
warpfs_mounts() { awk '$3 ~ /^fuse\.warpfs$|^warpfs$/ || $1 ~ /^\/usr\/share\/doc\/warpfs/' /proc/self/mounts | sort; }
MOUNTS0="$(warpfs_mounts)"
check_quiet() {
    local procs
    procs="$(installed_procs)"
    [[ -z $procs ]] || wf_die "$1: processes of /usr/bin/warpfs are running: $procs"
    [[ "$(warpfs_mounts)" == "$MOUNTS0" ]] || wf_die "$1: the warpfs mounts changed: $(warpfs_mounts)"
}
WANT=(/usr/bin/warpfs /sbin/mount.warpfs /usr/share/man/man1/warpfs.1.gz
    /usr/share/man/man1/warpfs-mount.1.gz /usr/share/man/man8/mount.warpfs.8.gz
    /usr/share/bash-completion/completions/warpfs /usr/share/zsh/vendor-completions/_warpfs
    /usr/share/fish/vendor_completions.d/warpfs.fish
    /usr/share/doc/warpfs/examples/systemd/mnt-private.mount
    /usr/share/doc/warpfs/examples/systemd/mnt-vault.mount
    /usr/share/doc/warpfs/examples/systemd/warpfs@.service /usr/share/doc/warpfs/CLI.md)
# Minimal images tell dpkg not to install documentation (path-exclude in
# /etc/dpkg/dpkg.cfg.d): such paths are checked in the package only.
excluded() {
    local pat
    for pat in $(sed -n 's/^path-exclude[= ]*//p' /etc/dpkg/dpkg.cfg.d/* 2>/dev/null); do
        # shellcheck disable=SC2053
        [[ $1 == $pat ]] && return 0
    done
    return 1
}
for f in "${WANT[@]}"; do
    dpkg-deb -c "$DEB1" | awk '{print $6}' | grep -qx ".$f" || wf_die "the package lacks $f"
done
check_files() {
    local f
    for f in "${WANT[@]}"; do
        excluded "$f" && continue
        [[ -e $f ]] || wf_die "$1: $f is missing"
    done
    [[ $(readlink -f /sbin/mount.warpfs) == /usr/bin/warpfs ]] || wf_die "$1: /sbin/mount.warpfs does not lead to /usr/bin/warpfs"
    /usr/bin/warpfs --version >/dev/null || wf_die "$1: /usr/bin/warpfs does not run"
    # The package's own files as dpkg recorded them, whatever else the
    # system has (a page under /usr/local/share/man comes first in man's
    # search path and would answer `man -w warpfs` instead).
    local listed
    listed="$(dpkg -L warpfs)"
    for f in "${WANT[@]}"; do
        excluded "$f" && continue
        grep -qxF "$f" <<<"$listed" || wf_die "$1: dpkg -L warpfs does not list $f"
    done
    if command -v man >/dev/null && ! excluded /usr/share/man/man1/warpfs.1.gz; then
        man -aw warpfs 2>/dev/null | grep -qxF /usr/share/man/man1/warpfs.1.gz ||
            wf_die "$1: man -aw warpfs does not find the package's page"
        local first
        first="$(man -w warpfs 2>/dev/null)"
        [[ $first == /usr/share/man/man1/warpfs.1.gz ]] ||
            wf_warn "$1: \`man warpfs\` shows $first, which hides the package's page"
    fi
}

t2=$SECONDS
RC=0
trap 'release_cleanup; dpkg -s warpfs >/dev/null 2>&1 && dpkg_ -P warpfs >/dev/null 2>&1; true' EXIT
wf_log "dpkg -i $(basename "$DEB1")"
dpkg_ -i "$DEB1"
check_files "after dpkg -i"
check_quiet "after dpkg -i"
dpkg -L warpfs | sort >"$OUT/files-1.txt"
wf_log "installed $(wc -l <"$OUT/files-1.txt") paths; man warpfs begins:"
MANWIDTH=80 man -l /usr/share/man/man1/warpfs.1.gz 2>/dev/null | head -n 8 | sed "s/^/    /" || true

wf_log "fstab, mount helper and systemd example tests against /usr/bin/warpfs"
WARPFS_INSTALLED_BIN=/usr/bin/warpfs cargo test --release -p warpfs --test daily \
    -- --include-ignored --nocapture fstab:: contrib:: || RC=1
check_quiet "after the tests"

wf_log "upgrade: dpkg -i $(basename "$DEB2")"
dpkg_ -i "$DEB2"
[[ $(dpkg-query -W -f '${Version}' warpfs) == *-2 ]] || wf_die "the upgrade did not install revision 2"
check_files "after the upgrade"
check_quiet "after the upgrade"
dpkg -L warpfs | sort >"$OUT/files-2.txt"

wf_log "dpkg -r warpfs, then dpkg -P warpfs"
dpkg_ -r warpfs
# Purge what -r keeps (conffiles; the package has none, so nothing is left).
if dpkg -s warpfs >/dev/null 2>&1; then dpkg_ -P warpfs; fi
dpkg -s warpfs >/dev/null 2>&1 && wf_die "warpfs is still known to dpkg after dpkg -r/-P"
check_quiet "after removal"
LEFT=0
while read -r p; do
    # Directories other packages share (/usr/bin, /usr/share/man/man1, and
    # /sbin, a link to usr/sbin on merged-/usr systems) stay.
    if [[ -e $p || -L $p ]] && ! [[ -d $p ]]; then
        wf_warn "left behind: $p"
        LEFT=1
    fi
done < <(sort -u "$OUT/files-1.txt" "$OUT/files-2.txt")
[[ -e /usr/share/doc/warpfs ]] && { wf_warn "left behind: /usr/share/doc/warpfs"; LEFT=1; }
# man-db's formatted-page cache (`man warpfs` writes one; `man -l` above does not).
for p in /var/cache/man/cat*/*warpfs*; do
    [[ -e $p ]] && { wf_warn "left behind: $p"; LEFT=1; }
done
((LEFT == 0)) || wf_die "dpkg -r/-P left files behind"
wf_log "install, upgrade and removal: no stray file, no process, no mount ($((SECONDS - t2))s)"
((RELEASE)) && release_upgrade_test "$DEB1"
trap - EXIT
exit $RC
