#!/usr/bin/env bash
# scripts/test.sh — the project's one test command (CI runs it via .ci/run).
#
#   bash scripts/test.sh
#
# Steps (all run, even after a failure, so one run shows every problem):
#   0. setup      as root: install missing Debian packages (fuse3, fio, a C
#                 compiler; OpenCL ICD + pocl when the workspace uses opencl3),
#                 quietly and only if something is missing; make sure cargo,
#                 rustfmt and clippy are there; e2fsprogs for the container tests;
#                 glusterfs-server, syncthing and iproute2 for the synced-storage
#                 tests (tests/glusterfs.rs, tests/syncthing.rs start and stop
#                 the engines themselves); libtss2-dev, libfido2-dev and
#                 pkg-config to build the hardware keyslots, swtpm and
#                 swtpm-tools for the TPM2 tests (a software TPM each)
#   0b. demo      scripts/demo.sh, the README's quick start (build, a demo
#                 volume mounted, written, read back, remounted), first, as a
#                 user who ran it before the tests would: it must leave the
#                 later steps (deb above all) alone. Its build is the deb
#                 step's (`cargo build --release -p warpfs`), made here
#                 instead; the rest of it takes a few seconds
#   1. fmt        cargo fmt --all -- --check
#   2. clippy     cargo clippy --workspace --all-targets -- -D warnings
#   2b. door      scripts/door-check.sh: no crate but crates/backing opens,
#                 renames, removes or looks up a path itself (clippy's
#                 disallowed-methods, checked to fire on a fixture first)
#   3. test       cargo test --workspace --release --no-fail-fast
#                 (the mount-level tests in crates/warpfs/tests need root and
#                 /dev/fuse; without them they are counted as skipped)
#   3b. dev-fuse  the mount tests that drive every kind of FUSE request
#                 again on /dev/fuse: DEV_FUSE_TESTS below (data and metadata
#                 paths, errors, permissions, crashes and power loss,
#                 security, sharing, mount options and idle unmount, rekey,
#                 reverse mounts, fsck, journals, frozen formats and xts);
#                 the rest (key handling, storage engines, other ciphers)
#                 does not depend on the transport, and
#                 scripts/transport-matrix.sh runs every test on either
#                 transport
#                 (WARPFS_TRANSPORT=dev; step 3 and the steps after it run on
#                 FUSE over io_uring where the kernel has it: enable_uring is
#                 set on for the run and put back at exit), then fsx (gcm and
#                 xchacha20-poly1305, one seed); pjdfstest (gcm) and a shorter soak run on
#                 /dev/fuse too (steps pjdfstest-dev, soak-dev);
#                 scripts/transport-matrix.sh runs everything on either
#                 transport
#   3c. deb       scripts/deb.sh: the Debian package (cargo-deb into
#                 target/tools), installed with dpkg -i; the fstab, mount
#                 helper and contrib tests against /usr/bin/warpfs; upgrade;
#                 removal leaves no file, process or mount; then the newest
#                 release's package (scripts/releases.txt, built from its
#                 commit) upgraded to this one with a volume mounted
#   4. spec-on    the mount-level io and namespace tests again, every mount
#                 with `--speculation on` (WARPFS_TEST_SPECULATION=on; step 3
#                 ran them with the default, off), so both engine paths are
#                 tested through the kernel
#   4b. no-xattr  the io, namespace, security and bound tests again, every
#                 mount with `--no-xattr` (WARPFS_TEST_MOUNT_ARGS; their
#                 xattr cases check the refusal instead);
#                 scripts/option-matrix.sh runs the whole mount suite under
#                 every combination of speculation, transport and --no-xattr
#   4c. seen      tests/syncthing.rs, tests/shared.rs and tests/glusterfs.rs
#                 again over volumes with file summaries (the default), every
#                 mount with `--versions-seen on` (WARPFS_TEST_MOUNT_ARGS):
#                 no false alarm from another host's changes
#   5. capi       crates/engine-capi/run-c-test.sh --release (C known-answer
#                 test of libwaes, linked dynamically and statically)
#   5b. arm64     scripts/arm64.sh --ci: Debian's cross gcc and qemu-user
#                 (installed by the script), the crypto, keystream, engine,
#                 content, config and volume suites built for
#                 aarch64-unknown-linux-gnu (release) and run under
#                 qemu-aarch64; the musl build, the mount suite under qemu
#                 and the arm64 package run in scripts/arm64.sh alone
#   6. fsx        scripts/fsx.sh: fsx against real mounts, 1 seed per content
#                 mode (gcm, ctr, xts and gcm-twofish; the script's default
#                 is 3 seeds of gcm, ctr and xts)
#   6b. xchacha   fsx (1 seed) on xchacha20-poly1305 and ctr-xchacha20; the
#                 XChaCha20 cases of every `mode_tests!` suite (io, namespace,
#                 crash, power_loss, security), tests/xchacha.rs, the attacks
#                 over xchacha20-poly1305 and the known answers run in step 3
#                 (io, namespace, crash and attacks again on /dev/fuse in step
#                 dev-fuse, with fsx on xchacha20-poly1305);
#                 scripts/cipher-matrix.sh runs the dimension with more cases
#   7. opencl     GPU mask tests on OpenCL (pocl): engine gpu tests and the
#                 io/namespace/gpu mount tests with --engine opencl
#                 --speculation on; no OpenCL platform = failure
#   7b. gpu-xts   GPU XTS kernels on OpenCL (pocl), tests/gpu_xts.rs and
#                 tests/gpu_xts_twofish.rs, and through real mounts
#                 (tests/gpu_xts_mount.rs: xts, xts-twofish and a container
#                 with --engine opencl, the device bytes asserted); no
#                 platform = failure
#                 (Twofish in steps 3 and dev-fuse: tests/twofish.rs and the
#                 `twofish:` cases of io, namespace, crash, power_loss and
#                 faults; the `all:` cases are #[ignore]d there and
#                 scripts/twofish-matrix.sh runs them, the Twofish dimension
#                 in full)
#   7c. cuda      the #[ignore]d CUDA tests, only where nvidia-smi lists a GPU
#   8. pjdfstest  scripts/pjdfstest.sh (POSIX suite on a warpfs mount vs tmpfs),
#                 in gcm, then ctr and xts (steps pjdfstest-ctr, pjdfstest-xts),
#                 then gcm over Twofish (step pjdfstest-twofish)
#   8b. xfstests  scripts/xfstests.sh --ci: a fixed subset of fstests' generic
#                 quick group on a gcm volume over /dev/fuse (fstests built from
#                 ../shared/xfstests into target/xfstests, kept between runs),
#                 warpfs fsck of both volumes after; a failure not in
#                 scripts/xfstests/expected-failures.txt fails the step (the
#                 script alone runs the whole group, in every mode, on both
#                 transports)
#   9. fuzz       scripts/fuzz.sh: each cargo-fuzz target FUZZ_SECONDS (10 here; fuzz.sh alone: 15) s;
#                 installs nightly + cargo-fuzz into target/tools
#  10. soak       bench/soak.sh --minutes ${SOAK_MINUTES:-0.5} (random mixed ops
#                 against a model, with remounts)
# Exit status: 0 if every step passed, 1 otherwise. A summary table ends the
# output, then one line `tests: N passed, M failed, K skipped` (the cargo
# tests of every step + pjdfstest cases on warpfs + fstests tests passed on
# warpfs; M also counts pjdfstest regressions, unexpected fstests failures
# and each failed step no test count shows).
# Logs: target/test-logs/.
#
# Skips: a test or script that cannot run here (no root, no /dev/fuse, no
# OpenCL platform...) prints `SKIPPED ...: reason`
# and appends a line to $WARPFS_SKIP_LOG (target/test-logs/STEP.skips, set
# per step; crates/testkit and wf_skip in scripts/lib.sh); the summary counts
# those as skipped, never as passed, and names them. As root with /dev/fuse
# (CI) WARPFS_NO_SKIP=1 is set unless given: every skip is then a failure.
# A script that skips exits 77 (WF_SKIPPED): its step shows "skipped".
#
# Environment: SKIP_PJDFSTEST=1 skips step 8, SKIP_XFSTESTS=1 step 8b, SKIP_FUZZ=1 step 9,
# SOAK_MINUTES=0 step 10; TEST_STEP_TIMEOUT (seconds,
# default 1800) bounds each step when stdin is not a terminal (CI), so a hung
# mount cannot hang CI.
set -euo pipefail

WF_NAME=test.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$WF_REPO"

LOGS="$WF_REPO/target/test-logs"
mkdir -p "$LOGS"
STEP_TIMEOUT="${TEST_STEP_TIMEOUT:-1800}"
START=$SECONDS

# ---- 0. setup ----------------------------------------------------------------
if wf_is_root; then
    # strace: the power-loss crash-state tests record the daemon with it.
    pkgs=(fusermount3:fuse3 fio:fio cc:gcc mountpoint:util-linux timeout:coreutils strace:strace)
    # rsync: the reverse-mode tests copy encrypted views with it.
    pkgs+=(rsync:rsync)
    # keyctl: the user-service example (tests/daily/contrib.rs) reads the
    # password from the kernel keyring; dpkg-deb, man: scripts/deb.sh.
    pkgs+=(keyctl:keyutils dpkg-deb:dpkg man:man-db)
    # systemd-analyze: the contrib units pass `systemd-analyze verify`
    # (tests/daily/contrib.rs); systemd need not be running.
    pkgs+=(systemd-analyze:systemd)
    # Hardware keyslots: the build links libtss2 (TPM2, found by pkg-config)
    # and libfido2 (FIDO2); the TPM2 tests start a software TPM (swtpm).
    pkgs+=(pkg-config:pkg-config libtss2-dev libfido2-dev swtpm:swtpm swtpm_setup:swtpm-tools)
    # OpenCL backend tests run on pocl (a CPU OpenCL) when the code uses opencl3.
    if grep -qs '^opencl3' Cargo.toml crates/*/Cargo.toml; then
        pkgs+=(ocl-icd-libopencl1 pocl-opencl-icd)
    fi
    wf_ensure "${pkgs[@]}" || wf_warn "some packages could not be installed; later steps may fail"
else
    wf_warn "not root: no package installs; mount-level tests and pjdfstest will be skipped"
fi
[[ -c /dev/fuse ]] || wf_warn "/dev/fuse is missing: mount-level tests cannot run"
# Where every test can run (root, /dev/fuse: CI), a skip is a failure.
if wf_is_root && [[ -c /dev/fuse ]]; then
    export WARPFS_NO_SKIP="${WARPFS_NO_SKIP:-1}"
else
    export WARPFS_NO_SKIP="${WARPFS_NO_SKIP:-0}"
fi
if [[ $WARPFS_NO_SKIP == 1 ]]; then
    wf_log "WARPFS_NO_SKIP=1: a test that cannot run here fails"
else
    wf_log "WARPFS_NO_SKIP=$WARPFS_NO_SKIP: a test that cannot run here is counted as skipped"
fi
# Debian's udev makes /dev/fuse 0666 so that users mount through fusermount3;
# containers often leave it 0600. tests/permissions.rs mounts as a user.
if wf_is_root && [[ -c /dev/fuse ]] && [[ $(stat -c %a /dev/fuse) != 666 ]]; then
    chmod 0666 /dev/fuse || wf_warn "cannot make /dev/fuse 0666: user-mount tests will be skipped"
fi
# Container tests (crates/warpfs/tests/container.rs) put ext4 on the exposed file.
if wf_is_root; then
    wf_ensure mkfs.ext4:e2fsprogs debugfs:e2fsprogs e2fsck:e2fsprogs || wf_warn "e2fsprogs missing: container tests will fail"
fi
# Synced and distributed storage (tests/glusterfs.rs, tests/syncthing.rs):
# the tests start glusterd and two syncthing instances themselves (no
# systemd), on a veth pair (ip) and 127.0.0.1.
if wf_is_root; then
    wf_ensure glusterd:glusterfs-server mount.glusterfs:glusterfs-client syncthing:syncthing ip:iproute2 ||
        wf_warn "glusterfs-server/syncthing/iproute2 missing: the synced-storage tests will be skipped (a failure under WARPFS_NO_SKIP=1)"
    # Under systemd the package starts its own glusterd; the tests start theirs.
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet glusterd 2>/dev/null; then
        systemctl stop glusterd || wf_warn "cannot stop glusterd.service: the GlusterFS tests will fail"
    fi
fi
wf_ensure_rust || wf_die "no usable Rust toolchain"
# FUSE over io_uring (Linux 6.14+): the suite runs on it; step dev-fuse runs
# the mount-level tests again on /dev/fuse. The module parameter is put back.
URING_PARAM=/sys/module/fuse/parameters/enable_uring
if wf_is_root && [[ -w $URING_PARAM ]]; then
    URING_WAS="$(cat "$URING_PARAM")"
    echo Y >"$URING_PARAM"
    trap 'echo "$URING_WAS" >"$URING_PARAM"' EXIT
    export WARPFS_TRANSPORT="${WARPFS_TRANSPORT:-uring}"
else
    wf_warn "no writable $URING_PARAM: every step runs on /dev/fuse"
fi
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# ---- steps -------------------------------------------------------------------
NAMES=() RESULTS=() TIMES=()
FAILED_STEPS=0

# step NAME COMMAND... : run, tee output to target/test-logs/NAME.log, record;
# its skips go to target/test-logs/NAME.skips.
step() {
    local name="$1" t0=$SECONDS rc=0
    shift
    printf '\n==== %s: %s\n' "$name" "$*"
    export WARPFS_SKIP_LOG="$LOGS/$name.skips"
    rm -f "$WARPFS_SKIP_LOG"
    if [[ -t 0 ]]; then
        # Interactive: no timeout wrapper, so Ctrl-C reaches cargo directly.
        "$@" 2>&1 | tee "$LOGS/$name.log" || rc=$?
    else
        timeout -k 30 "$STEP_TIMEOUT" "$@" 2>&1 | tee "$LOGS/$name.log" || rc=$?
    fi
    NAMES+=("$name")
    TIMES+=($((SECONDS - t0)))
    if ((rc == 0)); then
        RESULTS+=(ok)
    elif ((rc == WF_SKIPPED)); then
        RESULTS+=(skipped)
    else
        ((rc == 124 || rc == 137)) && RESULTS+=("FAILED (timed out)") || RESULTS+=("FAILED (exit $rc)")
        FAILED_STEPS=$((FAILED_STEPS + 1))
    fi
}

step demo bash scripts/demo.sh
step fmt cargo fmt --all -- --check --color never
step clippy cargo clippy --workspace --all-targets --quiet -- -D warnings
step door bash scripts/door-check.sh
step test cargo test --workspace --release --no-fail-fast
DEV_FUSE_TESTS=(io namespace faults permissions crash power_loss shared ahead attacks security deep_paths bound control devices daily rekey reverse hostile_storage format_volumes xts fsck journal)
step dev-fuse env WARPFS_TRANSPORT=dev FSX_SEEDS=1 FSX_MODES="gcm xchacha20-poly1305" \
    bash -c 'cargo test --release -p warpfs --no-fail-fast "${@/#/--test=}"; r=$?; bash scripts/fsx.sh || r=1; exit $r' dev-fuse "${DEV_FUSE_TESTS[@]}"
step deb bash scripts/deb.sh
step spec-on env WARPFS_TEST_SPECULATION=on \
    cargo test --release -p warpfs --test io --test namespace --no-fail-fast
step no-xattr env WARPFS_TEST_MOUNT_ARGS=--no-xattr \
    cargo test --release -p warpfs --test io --test namespace --test security --test bound --no-fail-fast
# seen: the two-host and sync-conflict suites again, every mount remembering
# the versions it saw (--versions-seen on) over volumes with file summaries
# (the default), where whole files are checked too: another host's changes
# must raise no alarm.
step seen env WARPFS_STATE_DIR="$WF_REPO/target/seen-state" WARPFS_TEST_MOUNT_ARGS="--versions-seen=on" \
    cargo test --release -p warpfs --test syncthing --test shared --test glusterfs --no-fail-fast
step capi bash crates/engine-capi/run-c-test.sh --release
# arm64: a cold aarch64 build of six crates plus their suites under qemu
# took 16 min on a 2-core machine shared with other builds (load 8-12);
# it gets 30 min before the step timeout counts it failed.
STEP_TIMEOUT=$((STEP_TIMEOUT > 1800 ? STEP_TIMEOUT : 1800)) step arm64 bash scripts/arm64.sh --ci
step fsx env FSX_SEEDS=1 FSX_MODES="gcm ctr xts gcm-twofish" bash scripts/fsx.sh
step xchacha env FSX_SEEDS=1 FSX_MODES="xchacha20-poly1305 ctr-xchacha20" bash scripts/fsx.sh
# opencl: the OpenCL mask backend on pocl (installed in setup when a Cargo.toml
# line starts with `opencl3`); WARPFS_REQUIRE_OPENCL=1 makes a missing
# platform fail instead of skip.
step opencl env WARPFS_TEST_ENGINE=opencl WARPFS_TEST_SPECULATION=on WARPFS_REQUIRE_OPENCL=1 \
    cargo test --release -p warpfs-engine -p warpfs --test gpu --test io --test namespace --no-fail-fast
# gpu-xts: the XTS kernels (AES: IEEE 1619 vectors, xts-mode, the mount's
# XTS; Twofish: the mount's XTS-Twofish and xts-mode over the twofish crate)
# on pocl, then xts/xts-twofish mounts and a container with --engine opencl
# (tests/gpu_xts_mount.rs, ~4 s); the kernels were built by step 3 already.
# A missing platform fails.
step gpu-xts env WARPFS_REQUIRE_OPENCL=1 cargo test --release -p warpfs-engine -p warpfs --test gpu_xts \
    --test gpu_xts_twofish --test gpu_xts_mount --no-fail-fast
# cuda: the CUDA tests are #[ignore]d (CI has no NVIDIA GPU); they run here
# where nvidia-smi lists a GPU.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    step cuda cargo test --release -p warpfs-engine --test gpu --test gpu_xts --test gpu_xts_twofish --no-fail-fast \
        -- --ignored cuda
else
    NAMES+=(cuda) RESULTS+=("not run (no NVIDIA GPU)") TIMES+=(0)
fi
if [[ ${SKIP_PJDFSTEST:-0} == 1 ]]; then
    NAMES+=(pjdfstest) RESULTS+=("skipped (SKIP_PJDFSTEST=1)") TIMES+=(0)
else
    # gcm on /dev/fuse first (its summary file is then replaced by the
    # io_uring run's, which the totals below count).
    step pjdfstest-dev env WARPFS_TRANSPORT=dev bash scripts/pjdfstest.sh
    rm -f target/pjdfstest-summary.json
    step pjdfstest bash scripts/pjdfstest.sh
    # The other content modes, in full (about 6 s each once installed).
    step pjdfstest-ctr bash scripts/pjdfstest.sh --mode ctr
    step pjdfstest-xts bash scripts/pjdfstest.sh --mode xts
    # gcm over Twofish (the three Twofish modes: scripts/twofish-matrix.sh).
    step pjdfstest-twofish bash scripts/pjdfstest.sh --cipher twofish
fi

# xfstests: fstests' CI subset on /dev/fuse (scripts/xfstests.sh --ci).
rm -f target/xfstests/results/gcm-dev-ci.json
if [[ ${SKIP_XFSTESTS:-0} == 1 ]]; then
    NAMES+=(xfstests) RESULTS+=("skipped (SKIP_XFSTESTS=1)") TIMES+=(0)
else
    step xfstests bash scripts/xfstests.sh --ci
fi

# fuzz: every cargo-fuzz target for FUZZ_SECONDS (scripts/fuzz.sh).
if [[ ${SKIP_FUZZ:-0} == 1 ]]; then
    NAMES+=(fuzz) RESULTS+=("skipped (SKIP_FUZZ=1)") TIMES+=(0)
else
    step fuzz env FUZZ_SECONDS="${FUZZ_SECONDS:-10}" bash scripts/fuzz.sh
fi

# ---- soak (bench/soak.sh; SOAK_MINUTES=0 skips) --------------------------------
if [[ ${SOAK_MINUTES:-0.5} == 0 ]]; then
    NAMES+=(soak) RESULTS+=("skipped (SOAK_MINUTES=0)") TIMES+=(0)
else
    # Into target/: a short run is a check, not a result for bench/results.
    step soak bash bench/soak.sh --minutes "${SOAK_MINUTES:-0.5}" --out target/soak/soak.json
    # The same mix for half as long on /dev/fuse (the other transport).
    step soak-dev env WARPFS_TRANSPORT=dev bash bench/soak.sh --minutes "$(awk -v m="${SOAK_MINUTES:-0.5}" 'BEGIN { print m / 2 }')" --out target/soak/soak-dev.json
fi

# ---- summary -----------------------------------------------------------------
# pjdfstest: cases passed on warpfs, and regressions (failed tests).
P_PASS=0 P_REG=0 P_LINE="pjdfstest: did not complete (see target/test-logs/pjdfstest.log)"
[[ ${SKIP_PJDFSTEST:-0} == 1 ]] && P_LINE="pjdfstest: skipped"
if [[ -f target/pjdfstest-summary.json ]]; then
    P_LINE="$(grep -h '^pjdfstest: ' "$LOGS/pjdfstest.log" | tail -n 1 || true)"
    if ! grep -q '"skipped": true' target/pjdfstest-summary.json; then
        P_PASS=$(sed -n 's/^  "warpfs": {"passed": \([0-9]*\),.*/\1/p' target/pjdfstest-summary.json)
        P_REG=$(awk -F'"' '/^  "regressions": / { n = 0; for (i = 2; i <= NF; i += 2) if ($i ~ /::/) n++; print n }' \
            target/pjdfstest-summary.json)
    fi
fi

# fstests: tests passed on warpfs, and failures not expected.
X_PASS=0 X_UNEXP=0
if [[ -f target/xfstests/results/gcm-dev-ci.json ]]; then
    X_PASS=$(sed -n 's/^  "passed": \([0-9]*\),$/\1/p' target/xfstests/results/gcm-dev-ci.json)
    X_UNEXP=$(sed -n 's/^  "unexpected_failures": \[\(.*\)\],$/\1/p' target/xfstests/results/gcm-dev-ci.json | tr ',' '\n' | grep -c generic/ || true)
fi

# Every step: cargo's per-binary "test result:" lines, and the tests that
# recorded a skip (once per binary and test; a test may record several). A
# skipped test told cargo "ok": it leaves the passes. A failed step whose
# failure no test count shows (fmt, clippy, a build error, a script, an
# incomplete pjdfstest run) counts as one failed test.
T_PASS=0 T_FAIL=0 T_IGN=0 T_SKIP=0
: >"$LOGS/skips.txt"
for i in "${!NAMES[@]}"; do
    n=${NAMES[$i]} p=0 f=0 g=0 k=0
    if [[ -f $LOGS/$n.log ]]; then
        read -r p f g < <(awk '/^test result:/ {
                for (i = 1; i <= NF; i++) {
                    if ($(i+1) ~ /^passed/) p += $i
                    if ($(i+1) ~ /^failed/) f += $i
                    if ($(i+1) ~ /^ignored/) g += $i
                } }
             END { print p + 0, f + 0, g + 0 }' "$LOGS/$n.log")
    fi
    if [[ -s $LOGS/$n.skips ]]; then
        k=$(cut -f1,2 "$LOGS/$n.skips" | sort -u | wc -l)
        sort -u -t$'\t' -k1,2 "$LOGS/$n.skips" | sed "s/^/$n\t/" >>"$LOGS/skips.txt"
    fi
    [[ $n == pjdfstest ]] && p=$((p + ${P_PASS:-0})) f=$((f + ${P_REG:-0}))
    [[ $n == xfstests ]] && p=$((p + ${X_PASS:-0})) f=$((f + ${X_UNEXP:-0}))
    if [[ ${RESULTS[$i]} == FAILED* ]] && ((f == 0)); then
        f=1
    fi
    T_PASS=$((T_PASS + (p > k ? p - k : 0))) T_FAIL=$((T_FAIL + f)) T_IGN=$((T_IGN + g)) T_SKIP=$((T_SKIP + k))
done

echo
echo "==================== warpfs test summary ===================="
for i in "${!NAMES[@]}"; do
    printf '  %-10s %-28s %5ss\n' "${NAMES[$i]}" "${RESULTS[$i]}" "${TIMES[$i]}"
done
echo "  ${P_LINE:-pjdfstest: no result line}"
if ((T_SKIP > 0)); then
    echo "  skipped (step, binary, test, reason; all in target/test-logs/skips.txt):"
    head -n 25 "$LOGS/skips.txt" | awk -F'\t' '{ printf "    %s: %s::%s: %s\n", $1, $2, $3, $4 }'
    ((T_SKIP > 25)) && echo "    ... and $((T_SKIP - 25)) more"
fi
if ((T_IGN > 0)); then
    echo "  ignored by cargo (#[ignore]: run by another step, a matrix script or where the hardware is):"
    # One line per reason: how many tests (each name once), and one of them.
    for n in "${NAMES[@]}"; do [[ -f $LOGS/$n.log ]] && cat "$LOGS/$n.log"; done |
        sed -n 's/^test \(.*\) \.\.\. ignored\(, \)\{0,1\}\(.*\)$/\3\t\1/p' | sort -u |
        awk -F'\t' '{ n[$1]++; if (!($1 in e)) e[$1] = $2 }
            END { for (r in n) printf "    %s: %d (e.g. %s)\n", (r == "" ? "no reason given" : r), n[r], e[r] }' |
        sort | head -n 10
fi
echo "  total time: $((SECONDS - START))s; logs in target/test-logs/"
# Why each failed step failed, where a test said so (its panic lines), so
# that the end of the output carries the reason.
for i in "${!NAMES[@]}"; do
    [[ ${RESULTS[$i]} == FAILED* && -f $LOGS/${NAMES[$i]}.log ]] || continue
    echo "  ${NAMES[$i]} failed; panics in its log:"
    grep -a -A 6 "panicked at" "$LOGS/${NAMES[$i]}.log" | head -n 40 | sed 's/^/    /' || true
done
echo "=============================================================="
if ((FAILED_STEPS > 0)); then
    echo "RESULT: FAILED ($FAILED_STEPS step(s) failed)"
else
    echo "RESULT: OK"
fi
echo "tests: $T_PASS passed, $T_FAIL failed, $T_SKIP skipped"
((FAILED_STEPS == 0))
