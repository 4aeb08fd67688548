#!/usr/bin/env bash
# scripts/arm64.sh — warpfs for arm64 (aarch64 Linux), built, tested and
# packaged on an x86-64 Debian machine with Debian's cross gcc and
# qemu-user (docs/decisions/0086).
#
#   bash scripts/arm64.sh           # every step below
#   bash scripts/arm64.sh --ci      # steps 1 and 3 (scripts/test.sh, step arm64)
#   bash scripts/arm64.sh --steps "musl deb"     # setup plus the steps named
#
# Steps (all run, even after a failure; exit 1 if any failed):
#   1. setup  apt-get (as root, only what is missing): gcc-aarch64-linux-gnu,
#             libc6-dev-arm64-cross, qemu-user (qemu-aarch64 for cargo's
#             runner) and, for the mount and deb steps, qemu-user-static (a
#             spawned arm64 binary runs under it through binfmt_misc,
#             registered for the run and taken back); rustup targets aarch64-unknown-linux-gnu and
#             aarch64-unknown-linux-musl. Cargo's linker and runner come
#             from CARGO_TARGET_AARCH64_UNKNOWN_LINUX_{GNU,MUSL}_{LINKER,RUNNER}
#             set here, so no .cargo/config is needed.
#   2. gnu    cargo build --release of the workspace for
#             aarch64-unknown-linux-gnu (warpfs without LEFT_OUT_FEATURES).
#   3. unit   the crypto, keystream, engine, content, config, volume and
#             FUSE frontend test suites under qemu-aarch64, release (CI: this step alone).
#             Not run: the engine's gpu, gpu_xts and gpu_xts_twofish suites
#             (OpenCL/CUDA: no GPU platform under qemu-user; CI runs them on
#             x86-64), and key_memory::raw_keys_and_device_tables_are_on_locked_pages
#             (qemu-user accepts madvise(MADV_DONTDUMP) and ignores it, so
#             /proc/self/smaps never shows `dd`).
#   4. soft   the crypto and keystream suites again, built with
#             --cfg aes_backend="soft" --cfg polyval_backend="soft": the
#             portable AES and GHASH that an arm64 CPU without the crypto
#             extensions (Raspberry Pi 4) runs; every qemu CPU model has
#             them, so only a build can turn them off.
#   5. musl   warpfs for aarch64-unknown-linux-musl, static (checked: no
#             program interpreter, no dynamic section); `--version`,
#             `speed` under qemu.
#   6. mount  as much of the mount suite (crates/warpfs/tests) as
#             qemu-user can drive: root, /dev/fuse, binfmt_misc; every mount
#             on /dev/fuse (WARPFS_TRANSPORT=dev). MOUNT_SUITES lists the
#             suites run; MOUNT_SKIP the tests qemu-user cannot run, each
#             with its reason.
#   7. deb    the arm64 .deb from scripts/deb.sh (--build --target),
#             checked (Architecture arm64, an aarch64 binary), unpacked with
#             `dpkg-deb -x` (an amd64 machine cannot satisfy its fuse3
#             dependency for dpkg -i) and smoke-tested under qemu:
#             `warpfs init`, `info`, `speed`.
#
# Environment: ARM64_TARGET_DIR (default target/, as a native build: the
# aarch64 outputs sit in target/aarch64-unknown-linux-*).
set -euo pipefail

WF_NAME=arm64.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$WF_REPO"

GNU=aarch64-unknown-linux-gnu
MUSL=aarch64-unknown-linux-musl
SYSROOT=/usr/aarch64-linux-gnu
# The six suites CI runs under qemu (step unit).
UNIT_CRATES=(warpfs-crypto warpfs-keystream warpfs-content warpfs-config warpfs-volume warpfs-fuse)
ENGINE_SUITES=(engine key_memory locked_masks)
UNIT_SKIP=(raw_keys_and_device_tables_are_on_locked_pages)

# Cargo features of the warpfs crate that need C libraries Debian ships
# neither for the cross target (arm64 -dev packages cannot be installed
# beside the amd64 ones without multiarch) nor for musl: the TPM2 (tpm2-tss)
# and FIDO2 (libfido2) keyslots. The cross builds take warpfs's default
# features less these; a feature not (yet) in crates/warpfs/Cargo.toml is
# ignored.
LEFT_OUT_FEATURES=(tpm2 fido2)

# The mount suites run under qemu-user in step mount, and the tests in
# them it cannot run (`--skip`, exact names), each with its reason. Not
# run at all:
# - tests/control.rs: qemu-user 7.2 passes no ioctl it does not know, so
#   warpfs's control ioctls fail with ENOSYS (`warpfs stats` and online
#   rekey still work there as root, through the trusted.warpfs.*
#   attributes, and tests/rekey.rs runs);
# - the io_uring transport (qemu-user 7.2 has no io_uring_setup): every
#   mount is on /dev/fuse (WARPFS_TRANSPORT=dev), and tests/transport.rs
#   is never run by a script;
# - tests/gpu.rs (no OpenCL or CUDA platform for arm64 here);
# - tests/crash.rs (its tests SIGKILL the daemon, found in /proc: see below).
MOUNT_SUITES=(io namespace daily format_volumes rekey xts twofish security faults hygiene)
MOUNT_SKIP=(
    # The daemon runs as qemu-aarch64-static (binfmt_misc): these find it
    # in /proc by its command line and executable, and find none.
    an_online_rekey_releases_the_old_generation
    contrib::the_user_service_mounts_with_the_password_from_the_keyring
    fstab::every_mount_option_is_an_o_option
    fstab::fstab_entries_mount_with_mount_a_and_by_their_mountpoint
    fstab::nonempty_mounts_over_files_only_when_asked
    idle::a_users_idle_mount_is_unmounted_through_fusermount3
    idle::an_idle_daemon_unmounts_and_exits
    # Takes CIPHERDIR's lock (flock, non-blocking) right after an unmount,
    # while the emulated daemon may still be exiting with the lock held:
    # passed once and failed once in two runs here.
    a_running_rekey_locks_out_mounts_and_other_rekeys
)

CI=0
STEPS="gnu unit soft musl mount deb"
while (($#)); do
    case $1 in
    --ci) CI=1 STEPS="unit" ;;
    --steps)
        STEPS="$2"
        shift
        ;;
    *) wf_die "unknown argument $1 (see the header of scripts/arm64.sh)" ;;
    esac
    shift
done
want() { [[ " $STEPS " == *" $1 "* ]]; }

# ---- 1. setup ------------------------------------------------------------------
wf_ensure_rust || wf_die "no usable Rust toolchain"
pkgs=(aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-aarch64:qemu-user)
if want mount || want deb; then
    pkgs+=(qemu-aarch64-static:qemu-user-static dpkg-deb:dpkg file:file)
fi
wf_ensure "${pkgs[@]}" || wf_die "the cross toolchain or qemu-user could not be installed"
targets=("$GNU")
want musl && targets+=("$MUSL")
for t in "${targets[@]}"; do
    if ! rustup target list --installed 2>/dev/null | grep -qx "$t"; then
        wf_log "rustup target add $t"
        rustup target add "$t" >/dev/null || wf_die "rustup target add $t failed"
    fi
done
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $SYSROOT"
# musl: Rust's self-contained crt and libc, linked by the cross gcc.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUNNER=qemu-aarch64
# An arm64 program that a test spawns (the warpfs binary) runs under
# qemu-aarch64-static through binfmt_misc; it finds the loader here.
export QEMU_LD_PREFIX=$SYSROOT
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
[[ -n ${ARM64_TARGET_DIR:-} ]] && export CARGO_TARGET_DIR="$ARM64_TARGET_DIR"
TDIR="${CARGO_TARGET_DIR:-$WF_REPO/target}"

# warpfs's feature arguments: its default features less LEFT_OUT_FEATURES.
warpfs_features() {
    local defaults f keep=() left=0
    defaults="$(sed -n '/^\[features\]/,/^\[/ s/^default *= *\[\(.*\)\].*/\1/p' crates/warpfs/Cargo.toml | tr -d '" ' | tr ',' ' ')"
    for f in $defaults; do
        if [[ " ${LEFT_OUT_FEATURES[*]} " == *" $f "* ]]; then left=1; else keep+=("$f"); fi
    done
    ((left)) || return 0
    printf '%s\n' --no-default-features
    ((${#keep[@]})) && printf '%s\n' --features "$(
        IFS=,
        echo "${keep[*]}"
    )"
    return 0
}
mapfile -t WARPFS_FEATURES < <(warpfs_features)

RESULTS=() FAILED=0
run_step() {
    local name="$1" t0=$SECONDS rc=0
    shift
    want "$name" || return 0
    printf '\n==== arm64 %s\n' "$name" >&2
    "$@" || rc=$?
    if ((rc == 0)); then
        RESULTS+=("$name ok $((SECONDS - t0))s")
    else
        RESULTS+=("$name FAILED (exit $rc) $((SECONDS - t0))s")
        FAILED=$((FAILED + 1))
    fi
}

# ---- 2. gnu --------------------------------------------------------------------
step_gnu() {
    cargo build --release --target "$GNU" --workspace --exclude warpfs &&
        cargo build --release --target "$GNU" -p warpfs "${WARPFS_FEATURES[@]}"
}

# ---- 3. unit -------------------------------------------------------------------
unit_skips() { for s in "${UNIT_SKIP[@]}"; do printf -- '--skip\n%s\n' "$s"; done; }
step_unit() {
    local rc=0 p=() s
    for c in "${UNIT_CRATES[@]}"; do p+=(-p "$c"); done
    mapfile -t s < <(unit_skips)
    cargo test --release --target "$GNU" --no-fail-fast "${p[@]}" -- "${s[@]}" || rc=1
    cargo test --release --target "$GNU" --no-fail-fast -p warpfs-engine --lib \
        "${ENGINE_SUITES[@]/#/--test=}" -- "${s[@]}" || rc=1
    return $rc
}

# ---- 4. soft -------------------------------------------------------------------
step_soft() {
    # Its own target dir: other RUSTFLAGS would rebuild the main one's deps.
    CARGO_TARGET_DIR="$TDIR/arm64-soft" RUSTFLAGS='--cfg aes_backend="soft" --cfg polyval_backend="soft"' \
        cargo test --release --target "$GNU" --no-fail-fast -p warpfs-crypto -p warpfs-keystream
}

# ---- 5. musl -------------------------------------------------------------------
step_musl() {
    local bin="$TDIR/$MUSL/release/warpfs" hdr
    cargo build --release --target "$MUSL" -p warpfs "${WARPFS_FEATURES[@]}" || return 1
    hdr="$(aarch64-linux-gnu-readelf -lh "$bin")" || return 1
    grep -q 'Machine:.*AArch64' <<<"$hdr" || { wf_warn "$bin is not an AArch64 program"; return 1; }
    if grep -q 'INTERP\|Requesting program interpreter' <<<"$hdr" ||
        aarch64-linux-gnu-readelf -d "$bin" 2>/dev/null | grep -q NEEDED; then
        wf_warn "$bin is not static: $(file -b "$bin" 2>/dev/null)"
        return 1
    fi
    wf_log "static: $(file -b "$bin" 2>/dev/null | cut -c1-100)"
    qemu-aarch64 "$bin" --version || return 1
    qemu-aarch64 "$bin" speed --time-ms 5 >"$TDIR/$MUSL/speed.txt" || return 1
    head -n 1 "$TDIR/$MUSL/speed.txt"
    grep -q '^CPU: aarch64 ' "$TDIR/$MUSL/speed.txt"
}

# ---- 6. mount ------------------------------------------------------------------
BINFMT=/proc/sys/fs/binfmt_misc
BINFMT_ADDED=0
binfmt_on() {
    [[ -e $BINFMT/register ]] || mount -t binfmt_misc binfmt_misc "$BINFMT" 2>/dev/null ||
        { wf_warn "cannot mount binfmt_misc"; return 1; }
    [[ -e $BINFMT/qemu-aarch64 ]] && return 0
    # qemu-aarch64-static for aarch64 ELF programs (the magic and mask of
    # Debian's /usr/lib/binfmt.d/qemu-aarch64.conf; F: the interpreter is
    # opened now, so it works in any mount namespace), for this run only:
    # binfmt_restore takes it back at exit.
    local magic='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
    local mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
    printf ':qemu-aarch64:M::%s:%s:/usr/bin/qemu-aarch64-static:F\n' "$magic" "$mask" >"$BINFMT/register" ||
        { wf_warn "cannot register qemu-aarch64 with binfmt_misc"; return 1; }
    BINFMT_ADDED=1
}
binfmt_restore() { ((BINFMT_ADDED)) && echo -1 >"$BINFMT/qemu-aarch64" 2>/dev/null; return 0; }
trap binfmt_restore EXIT

step_mount() {
    local s=() x
    wf_is_root || { wf_warn "the mount suite needs root"; return 1; }
    [[ -c /dev/fuse ]] || { wf_warn "the mount suite needs /dev/fuse"; return 1; }
    binfmt_on || return 1
    for x in "${MOUNT_SKIP[@]}"; do s+=(--skip "$x"); done
    WARPFS_TRANSPORT=dev cargo test --release --target "$GNU" --no-fail-fast -p warpfs "${WARPFS_FEATURES[@]}" \
        "${MOUNT_SUITES[@]/#/--test=}" -- --exact "${s[@]}"
}

# ---- 7. deb --------------------------------------------------------------------
step_deb() {
    local deb x w
    binfmt_on || return 1
    WARPFS_DEB_FEATURES="${WARPFS_FEATURES[*]}" bash scripts/deb.sh --build --target "$GNU" || return 1
    deb=$(ls "$TDIR"/debian/r1/warpfs_*-1_arm64.deb) || { wf_warn "no arm64 .deb"; return 1; }
    [[ $(dpkg-deb -f "$deb" Architecture) == arm64 ]] || { wf_warn "$deb: not Architecture arm64"; return 1; }
    x="$(mktemp -d)"
    # shellcheck disable=SC2064
    trap "rm -rf '$x'; binfmt_restore" EXIT
    dpkg-deb -x "$deb" "$x/root"
    w="$x/root/usr/bin/warpfs"
    file -b "$w" | grep -q 'ARM aarch64' || { wf_warn "the package's warpfs is $(file -b "$w")"; return 1; }
    printf 'arm64 smoke test\n' >"$x/pass"
    qemu-aarch64 -L "$SYSROOT" "$w" init --quiet --passfile "$x/pass" --kdf-memory 32768 --kdf-iterations 2 "$x/c" &&
        qemu-aarch64 -L "$SYSROOT" "$w" info "$x/c" &&
        qemu-aarch64 -L "$SYSROOT" "$w" info --json "$x/c" | grep -q '"content_mode":"gcm"' &&
        qemu-aarch64 -L "$SYSROOT" "$w" speed --time-ms 5 >"$x/speed" &&
        grep -q '^CPU: aarch64 .*AES: ARMv8 AES' "$x/speed" || { wf_warn "the unpacked arm64 warpfs failed its smoke test"; return 1; }
    cat "$x/speed"
}

run_step gnu step_gnu
run_step unit step_unit
run_step soft step_soft
run_step musl step_musl
run_step mount step_mount
run_step deb step_deb

echo "arm64.sh: ${RESULTS[*]/%/;}" >&2
((FAILED == 0))
