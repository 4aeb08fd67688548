#!/usr/bin/env bash
# scripts/demo.sh — warpfs in one command, on a fresh Debian machine.
#
#   bash scripts/demo.sh [--keep]
#
# What it does:
#   1. installs what is missing via apt (fuse3, a C toolchain, pkg-config, git),
#      as root or through passwordless sudo; checks for cargo (and says how to
#      get Rust if it is missing: Debian bookworm's own cargo is too old);
#   2. builds warpfs (`cargo build --release -p warpfs`, the build
#      scripts/deb.sh makes too), makes its man pages and bash/zsh/fish
#      completions from the binary into target/release/assets and says how to
#      read them; it installs nothing outside the repository (man pages under
#      /usr/local would hide the Debian package's: scripts/deb.sh installs
#      them), and warns about warpfs pages an earlier demo left in
#      /usr/local/share;
#   3. in a temp dir: generates a passfile, `warpfs init` (gcm), mounts the
#      volume, writes a file and a directory with a file through the mount and
#      reads them back;
#   4. shows `ls -la` of the plaintext view and of the encrypted backing dir,
#      and `warpfs info`; checks with grep that no plaintext appears in the
#      backing dir;
#   5. unmounts, mounts again and reads the file back (it persisted), unmounts
#      and removes the temp dir. A trap on EXIT always unmounts, also on error
#      or Ctrl-C. --keep keeps the temp dir (unmounted) for a look around.
set -euo pipefail

WF_NAME=demo
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$WF_REPO"

KEEP=0
[[ ${1:-} == --keep ]] && KEEP=1

if [[ -t 1 ]]; then B=$'\033[1m' N=$'\033[0m'; else B="" N=""; fi
say() { printf '\n%s== %s%s\n' "$B" "$*" "$N"; }
run() {
    printf '$ %s\n' "$*"
    "$@"
}

# ---- 1. prerequisites ----------------------------------------------------------
say "Prerequisites"
wf_ensure fusermount3:fuse3 cc:build-essential pkg-config:pkg-config git:git ||
    wf_warn "could not install everything; continuing with what is there"
[[ -c /dev/fuse ]] || wf_die "/dev/fuse is missing: FUSE is not available on this machine (modprobe fuse?)"
if ! command -v cargo >/dev/null 2>&1 && [[ ! -x $HOME/.cargo/bin/cargo ]]; then
    # Debian trixie and later package rustup; bookworm does not.
    if apt-cache policy rustup 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        wf_ensure rustup:rustup && rustup default stable >/dev/null 2>&1 || true
    fi
fi
wf_ensure_rust || {
    cat >&2 <<'EOF'

warpfs needs Rust 1.85 or newer (Debian bookworm's `cargo` package is 1.63).
Get it with rustup:
  Debian trixie or later:  sudo apt-get install rustup && rustup default stable
  otherwise:               see https://rustup.rs (curl ... | sh), then
                           source "$HOME/.cargo/env"
and run this script again.
EOF
    exit 1
}
echo "cargo: $(cargo --version)"

# ---- 2. build ------------------------------------------------------------------
say "Building warpfs (release)"
WARPFS="$(wf_warpfs_bin)" || wf_die "build failed"
echo "binary: ${WARPFS#"$WF_REPO"/}"
ASSETS="$WF_REPO/target/release/assets"
run "$WARPFS" gen-man "$ASSETS/man"
run "$WARPFS" gen-completions "$ASSETS/completions"
echo "man pages: man -l $ASSETS/man/warpfs.1; completions: . $ASSETS/completions/warpfs.bash"
echo "installed with them (the Debian package): bash scripts/deb.sh --build && sudo dpkg -i target/debian/r1/warpfs_*.deb"
# Earlier versions of this script installed the pages and completions under
# /usr/local/share, where `man` looks before /usr/share: they would hide
# the package's (and go stale). Say so; they are the user's to remove.
STALE=()
for f in /usr/local/share/man/man1/warpfs*.1 /usr/local/share/man/man8/mount.warpfs.8 \
    /usr/local/share/bash-completion/completions/warpfs /usr/local/share/zsh/site-functions/_warpfs \
    /usr/local/share/fish/vendor_completions.d/warpfs.fish; do
    if [[ -e $f ]]; then STALE+=("$f"); fi
done
if ((${#STALE[@]})); then
    wf_warn "${#STALE[@]} warpfs man page(s) or completion(s) under /usr/local/share (an earlier demo's?) hide the" \
        "package's and may be stale; remove them with: rm -f /usr/local/share/man/man1/warpfs*.1" \
        "/usr/local/share/man/man8/mount.warpfs.8 /usr/local/share/bash-completion/completions/warpfs" \
        "/usr/local/share/zsh/site-functions/_warpfs /usr/local/share/fish/vendor_completions.d/warpfs.fish"
fi

# ---- 3. a demo volume ------------------------------------------------------------
DEMO="$(mktemp -d /tmp/warpfs-demo.XXXXXX)"
CIPHER="$DEMO/cipher" PLAIN="$DEMO/plain" PASS="$DEMO/passfile"
mkdir -p "$CIPHER" "$PLAIN"
cleanup() {
    local rc=$?
    set +e
    wf_unmount "$PLAIN"
    if ((KEEP)); then
        echo "kept $DEMO (passfile: $PASS)"
    else
        rm -rf "$DEMO"
    fi
    ((rc == 0)) || echo "demo FAILED (exit $rc)" >&2
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

head -c 24 /dev/urandom | base64 >"$PASS"
chmod 0600 "$PASS"

say "Creating a volume (warpfs init)"
run "$WARPFS" init --passfile "$PASS" "$CIPHER"
echo "(this demo volume and its key are deleted at the end)"

say "Mounting it (warpfs mount)"
run "$WARPFS" mount --passfile "$PASS" "$CIPHER" "$PLAIN"
wf_wait_mounted "$PLAIN" 20 || wf_die "the mount did not appear"
timeout 20 stat "$PLAIN" >/dev/null || wf_die "the mount does not answer"
grep " $PLAIN " /proc/self/mounts

MARKER="warpfs demo secret $(date +%s)"
say "Writing through the mount"
echo "\$ echo '$MARKER: hello' > $PLAIN/hello.txt"
echo "$MARKER: hello" >"$PLAIN/hello.txt"
run mkdir "$PLAIN/notes"
echo "\$ echo '$MARKER: a note in a directory' > $PLAIN/notes/todo.txt"
echo "$MARKER: a note in a directory" >"$PLAIN/notes/todo.txt"
head -c $((3 << 20)) /dev/urandom >"$DEMO/random.bin"
run cp "$DEMO/random.bin" "$PLAIN/notes/random.bin"

say "Reading it back"
run cat "$PLAIN/hello.txt" "$PLAIN/notes/todo.txt"
run cmp "$DEMO/random.bin" "$PLAIN/notes/random.bin" && echo "random.bin: 3 MiB read back identical"

say "Plaintext view (mount point)"
run ls -la "$PLAIN" "$PLAIN/notes"

say "Encrypted backing directory (what is stored on disk)"
run ls -laR "$CIPHER"

say "Volume info (warpfs info)"
run "$WARPFS" info "$CIPHER"

say "Looking for the plaintext in the backing directory"
if grep -rqaF "$MARKER" "$CIPHER"; then
    wf_die "plaintext found in $CIPHER"
fi
if grep -rqaE 'hello\.txt|todo\.txt|notes' "$CIPHER"; then
    wf_die "a plaintext file name appears in $CIPHER"
fi
echo "grep -r '$MARKER' $CIPHER: no match (contents encrypted)"
echo "no file name from the plaintext view appears in $CIPHER (names encrypted)"

say "Unmounting, mounting again, reading back"
wf_unmount "$PLAIN" || wf_die "unmount failed"
echo "unmounted; $PLAIN is now empty: $(find "$PLAIN" -mindepth 1 | wc -l) entries"
run "$WARPFS" mount --passfile "$PASS" "$CIPHER" "$PLAIN"
wf_wait_mounted "$PLAIN" 20 || wf_die "the second mount did not appear"
run cat "$PLAIN/hello.txt"
cmp -s "$DEMO/random.bin" "$PLAIN/notes/random.bin" || wf_die "random.bin changed across remount"
echo "random.bin: identical after remount"
run fusermount3 -u "$PLAIN"

say "Done: warpfs works on this machine"
