#!/usr/bin/env bash
# scripts/pjdfstest.sh — POSIX conformance of a warpfs mount, measured with
# pjdfstest against a tmpfs baseline.
#
# What it does:
#   1. installs pjdfstest 0.2.2 (the Rust rewrite from crates.io) into
#      target/tools/bin unless that version is already there;
#   2. runs it on a fresh tmpfs (the backing file system: the baseline);
#   3. creates a warpfs volume (gcm over AES unless --mode/--cipher say
#      otherwise) whose CIPHERDIR is on another tmpfs, mounts it, checks a
#      round trip, runs pjdfstest on the mount, unmounts;
#   4. fails if a case that passes on the baseline fails (or does not run) on
#      warpfs, unless it is listed in scripts/pjdfstest-known.txt.
# It prints `pjdfstest: warpfs (MODE, CIPHER) P/T passed, baseline P/T
# passed` and writes target/pjdfstest-summary.json (gcm over AES; other
# modes and ciphers: see --mode, --cipher); full logs are kept in
# target/pjdfstest/.
#
# How pjdfstest is run (see scripts/pjdfstest.toml):
#   pjdfstest -c scripts/pjdfstest.toml -p DIR -s OTHER_FS
#   -p  directory under test; pjdfstest makes its own temp dir inside it (no
#       need to cd there). Every directory above it must be searchable by the
#       dummy users, hence the 0755 work dir.
#   -s  a directory on a different file system: enables the EXDEV cases
#       (rename/link across file systems).
#   Root is required: 1/4 of the cases (chown, mknod, user switching) only run
#   as root, and the tmpfs mounts need it. Without root this script skips
#   (exit 77, counted by scripts/test.sh; a failure with WARPFS_NO_SKIP=1).
#   The user-switching cases use the two dummy user/group pairs of the config
#   (nobody/nogroup, daemon/daemon — both exist on every Debian).
#
# Mount options for the FUSE side: `-o allow_other,default_permissions`.
#   allow_other          without it the kernel refuses every access to a FUSE
#                        mount by a uid other than the mounting one (root
#                        here), so the cases that switch to nobody/daemon get
#                        EACCES for everything.
#   default_permissions  makes the kernel check mode bits/ownership itself. The
#                        daemon runs as root, so without it nothing would be
#                        denied and the EACCES/EPERM cases would fail.
#   Measured (first working warpfs): -o allow_other alone passes the same
#   cases (warpfs turns default_permissions on with allow_other); without
#   allow_other 22 more cases fail (everything run as nobody/daemon).
#   Override with WARPFS_MOUNT_OPTS=... .
#
# Usage: scripts/pjdfstest.sh [--fs warpfs|bindfs] [--mode gcm|ctr|xts]
#                             [--cipher aes|twofish] [--keep] [PATTERN...]
#   --mode M      content mode of the warpfs volume (default gcm)
#   --cipher C    its block cipher (`warpfs init --cipher`; default aes).
#                 The summary is target/pjdfstest-summary.json for gcm over
#                 AES, target/pjdfstest-summary-M.json for ctr and xts over
#                 AES, target/pjdfstest-summary-M-twofish.json over Twofish
#                 (CI: gcm, ctr and xts over AES, gcm over Twofish;
#                 scripts/twofish-matrix.sh: the three modes over Twofish)
#   --fs bindfs   run the FUSE half on bindfs instead (checks this script's
#                 mount/unmount plumbing without warpfs)
#   --keep        keep the work dir and its tmpfs mounts (baseline, cipher
#                 dir) for inspection; logs are always kept in target/pjdfstest
#   PATTERN       only run pjdfstest cases whose name contains PATTERN
# Environment: WARPFS_BIN (binary to use; default: build target/release/warpfs),
#   PJDFSTEST_TIMEOUT (seconds per pjdfstest run, default 600),
#   PJDFSTEST_RERUNS (a baseline-passing case that fails is run again this
#   many times, alone; passing them all makes it "flaky", reported with its
#   first failure but not failing the run; default 3),
#   PJDFSTEST_REQUIRE_ROOT=1 (fail instead of skipping when not root),
#   PJDFSTEST_KNOWN (known-failures file, default scripts/pjdfstest-known.txt).
set -euo pipefail

WF_NAME=pjdfstest
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PJD_VERSION=0.2.2
FS=warpfs
KEEP=0
MODE=gcm
CIPHER=aes
PATTERNS=()
while (($#)); do
    case "$1" in
    --fs) FS="$2"; shift 2 ;;
    --fs=*) FS="${1#--fs=}"; shift ;;
    --keep) KEEP=1; shift ;;
    --mode) MODE="$2"; shift 2 ;;
    --mode=*) MODE="${1#--mode=}"; shift ;;
    --cipher) CIPHER="$2"; shift 2 ;;
    --cipher=*) CIPHER="${1#--cipher=}"; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; PATTERNS+=("$@"); break ;;
    -*) wf_die "unknown option $1 (see --help)" ;;
    *) PATTERNS+=("$1"); shift ;;
    esac
done
[[ $FS == warpfs || $FS == bindfs ]] || wf_die "--fs must be warpfs or bindfs"
[[ $MODE == gcm || $MODE == ctr || $MODE == xts ]] || wf_die "--mode must be gcm, ctr or xts"
[[ $CIPHER == aes || $CIPHER == twofish ]] || wf_die "--cipher must be aes or twofish"
# The volume's content mode as the config names it (gcm, ctr-twofish, ...).
VOLMODE=$MODE
[[ $CIPHER == aes ]] || VOLMODE="$MODE-$CIPHER"

TIMEOUT="${PJDFSTEST_TIMEOUT:-600}"
MOUNT_OPTS="${WARPFS_MOUNT_OPTS:-allow_other,default_permissions}"
CONFIG="$WF_REPO/scripts/pjdfstest.toml"
KNOWN="${PJDFSTEST_KNOWN:-$WF_REPO/scripts/pjdfstest-known.txt}"
LOGDIR="$WF_REPO/target/pjdfstest"
SUMMARY="$WF_REPO/target/pjdfstest-summary.json"
[[ $VOLMODE == gcm ]] || SUMMARY="$WF_REPO/target/pjdfstest-summary-$VOLMODE.json"
TOOLS="$WF_REPO/target/tools"
PJD="$TOOLS/bin/pjdfstest"
mkdir -p "$LOGDIR"
rm -f "$SUMMARY" "$LOGDIR"/*.first.log

write_skip_summary() {
    printf '{"skipped": true, "reason": "%s"}\n' "$1" >"$SUMMARY"
}

if ! wf_is_root; then
    [[ ${PJDFSTEST_REQUIRE_ROOT:-0} == 1 ]] && wf_die "pjdfstest needs root"
    write_skip_summary "not root"
    echo "pjdfstest: SKIPPED (not root)"
    wf_skip "needs root (tmpfs mounts and user switching)"
fi
[[ -c /dev/fuse ]] || wf_die "/dev/fuse is missing (modprobe fuse?)"

# ---- tools ---------------------------------------------------------------
pkgs=(fusermount3:fuse3 cc:gcc mountpoint:util-linux timeout:coreutils)
[[ $FS == bindfs ]] && pkgs+=(bindfs:bindfs)
wf_ensure "${pkgs[@]}" || wf_die "required packages are missing"
wf_ensure_rust || wf_die "no Rust toolchain"

if [[ ! -x $PJD ]] || [[ "$("$PJD" --version 2>/dev/null)" != "pjdfstest $PJD_VERSION" ]]; then
    wf_log "installing pjdfstest $PJD_VERSION into $TOOLS"
    cargo install pjdfstest --version "$PJD_VERSION" --locked --quiet --root "$TOOLS" \
        2>"$LOGDIR/cargo-install.log" || {
        tail -n 30 "$LOGDIR/cargo-install.log" >&2
        wf_die "cargo install pjdfstest failed"
    }
fi

if [[ $FS == warpfs ]]; then
    WARPFS="$(wf_warpfs_bin)" || wf_die "no warpfs binary"
fi

# ---- work dir and cleanup -------------------------------------------------
WORK="$(mktemp -d /tmp/warpfs-pjdfstest.XXXXXX)"
chmod 0755 "$WORK" # dummy users must be able to traverse it
BASE="$WORK/baseline" SEC="$WORK/secondary" BACK="$WORK/backing" MNT="$WORK/mnt"
mkdir -p "$BASE" "$SEC" "$BACK" "$MNT"
FS_PID=""

cleanup() {
    local rc=$?
    set +e
    wf_unmount "$MNT"
    wf_stop_daemon "$FS_PID" 5
    if ((KEEP)); then
        wf_log "kept $WORK (tmpfs mounts left in place; clean up with:"
        wf_log "  umount $BASE $SEC $BACK && rm -rf $WORK)"
    else
        for d in "$BACK" "$SEC" "$BASE"; do wf_unmount "$d"; done
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for d in "$BASE" "$SEC" "$BACK"; do
    mount -t tmpfs -o size=1g,mode=0755 "pjdfstest-$(basename "$d")" "$d"
done

# Runs pjdfstest on $1, output to $2. Exit status 0/1 is pass/fail of the
# suite itself (we judge per case); anything else is an error.
run_pjd() {
    local dir="$1" log="$2" rc=0
    RUST_BACKTRACE=0 NO_COLOR=1 timeout -k 10 "$TIMEOUT" \
        "$PJD" -c "$CONFIG" -p "$dir" -s "$SEC" -- "${PATTERNS[@]}" >"$log" 2>&1 || rc=$?
    case $rc in
    0 | 1) return 0 ;;
    124 | 137) wf_warn "pjdfstest on $dir timed out after ${TIMEOUT}s (see $log)"; return 1 ;;
    *) wf_warn "pjdfstest on $dir exited with status $rc (see $log)"; tail -n 5 "$log" >&2; return 1 ;;
    esac
}

# "name status" per case from a pjdfstest log.
parse_results() {
    sed -E 's/\x1b\[[0-9;]*m//g' "$1" |
        awk '/^[A-Za-z_][A-Za-z0-9_:]* +(ok|FAILED|skipped|failed as expected|PASSED UNEXPECTEDLY)$/ {
                name = $1; $1 = ""; sub(/^ +/, ""); print name, $0 }'
}

# ---- baseline --------------------------------------------------------------
wf_log "baseline: pjdfstest on tmpfs"
BASE_OK=1
run_pjd "$BASE" "$LOGDIR/baseline.log" || BASE_OK=0
parse_results "$LOGDIR/baseline.log" >"$LOGDIR/baseline.results"

# ---- file system under test ------------------------------------------------
PASS="$WORK/passfile"
printf 'pjdfstest-%s\n' "$RANDOM$RANDOM" >"$PASS"
chmod 0600 "$PASS"
DAEMON_LOG="$LOGDIR/$FS-daemon.log" # the daemon's stdout/stderr
rm -f "$LOGDIR/warpfs-log-file.log"     # warpfs --log-file
: >"$DAEMON_LOG"

case $FS in
warpfs)
    wf_log "warpfs: init ($MODE, $CIPHER) on tmpfs"
    mkdir -p "$BACK/cipher"
    "$WARPFS" init --passfile "$PASS" --mode "$MODE" --cipher "$CIPHER" "$BACK/cipher" \
        >"$LOGDIR/warpfs-init.log" 2>&1 ||
        { cat "$LOGDIR/warpfs-init.log" >&2; wf_die "warpfs init failed"; }
    # -f keeps it in the foreground, so we know the daemon's pid and notice a crash.
    "$WARPFS" mount --passfile "$PASS" -f -o "$MOUNT_OPTS" --log-file "$LOGDIR/warpfs-log-file.log" \
        "$BACK/cipher" "$MNT" >>"$DAEMON_LOG" 2>&1 &
    FS_PID=$!
    ;;
bindfs)
    # bindfs as root: checks permissions itself, allow_other is implied.
    mkdir -p "$BACK/cipher"
    bindfs -f -o "$MOUNT_OPTS" "$BACK/cipher" "$MNT" >>"$DAEMON_LOG" 2>&1 &
    FS_PID=$!
    ;;
esac
show_daemon_logs() { tail -n 30 "$DAEMON_LOG" "$LOGDIR"/warpfs-log-file.log 2>/dev/null >&2 || true; }
wf_wait_mounted "$MNT" 30 "$FS_PID" || { show_daemon_logs; wf_die "$FS mount failed"; }

# First contact and a round trip before spending time on the suite; each under
# a timeout, as a stuck daemon would otherwise hang this script.
t() { timeout -k 5 60 "$@"; }
t stat "$MNT" >/dev/null || { show_daemon_logs; wf_die "$FS mount does not answer (stat of the mount point failed or hung)"; }
t chmod 0755 "$MNT" || wf_die "chmod of the mount point failed"
head -c 300000 /dev/urandom >"$WORK/probe"
t cp "$WORK/probe" "$MNT/probe" && t cmp -s "$WORK/probe" "$MNT/probe" && t rm "$MNT/probe" ||
    wf_die "$FS round trip (write, read back, remove) failed on the mount"

wf_log "$FS: pjdfstest on the mount ($MODE, $CIPHER; -o $MOUNT_OPTS)"
FS_OK=1
run_pjd "$MNT" "$LOGDIR/$FS.log" || FS_OK=0
parse_results "$LOGDIR/$FS.log" >"$LOGDIR/$FS.results"

# Known failures: first word of each non-comment line.
sed -E 's/#.*//' "$KNOWN" | awk 'NF { print $1 }' | sort -u >"$LOGDIR/known.list"
awk '$2 == "ok" { print $1 }' "$LOGDIR/baseline.results" | sort -u >"$LOGDIR/baseline.pass"

# A case that passes on the baseline but failed here is run again, alone,
# RERUNS times on the same mount. One that passes every rerun is reported
# as flaky (with its first failure and the daemon log's tail) and does not
# fail the run; one that fails any rerun is a regression. A case that fails
# every time is never hidden this way; one that fails rarely is named.
RERUNS="${PJDFSTEST_RERUNS:-3}"
: >"$LOGDIR/$FS.flaky"
awk '$2 == "ok" { print $1 }' "$LOGDIR/$FS.results" | sort -u >"$LOGDIR/$FS.pass0"
comm -23 <(comm -23 "$LOGDIR/baseline.pass" "$LOGDIR/$FS.pass0") "$LOGDIR/known.list" >"$LOGDIR/$FS.retry"
if ((FS_OK)) && [[ -s $LOGDIR/$FS.retry ]] && (($(wc -l <"$LOGDIR/$FS.retry") <= 5)); then
    cp "$LOGDIR/$FS.log" "$LOGDIR/$FS.first.log"
    while read -r name; do
        passed=0
        for ((i = 1; i <= RERUNS; i++)); do
            PATTERNS=("$name")
            run_pjd "$MNT" "$LOGDIR/$FS.rerun.log" || break
            parse_results "$LOGDIR/$FS.rerun.log" | awk -v n="$name" '$1 == n && $2 == "ok" { f = 1 } END { exit !f }' ||
                break
            passed=$((passed + 1))
        done
        if ((passed == RERUNS)); then
            echo "$name" >>"$LOGDIR/$FS.flaky"
            awk -v n="$name" '$1 == n { $0 = n " ok" } { print }' "$LOGDIR/$FS.results" >"$LOGDIR/$FS.results.new"
            mv "$LOGDIR/$FS.results.new" "$LOGDIR/$FS.results"
        fi
    done <"$LOGDIR/$FS.retry"
fi
if ! kill -0 "$FS_PID" 2>/dev/null; then
    wf_warn "$FS daemon died during the run (logs: $DAEMON_LOG, $LOGDIR/warpfs-log-file.log)"
    FS_OK=0
fi
wf_unmount "$MNT" || wf_warn "unmount of $MNT failed"

# ---- compare ---------------------------------------------------------------
count() { awk -v s="$2" 'BEGIN { n = 0 } { st = $0; sub(/^[^ ]+ /, "", st) } st == s { n++ } END { print n }' "$1"; }
B_PASS=$(count "$LOGDIR/baseline.results" ok)
B_TOTAL=$(wc -l <"$LOGDIR/baseline.results")
B_SKIP=$(count "$LOGDIR/baseline.results" skipped)
F_PASS=$(count "$LOGDIR/$FS.results" ok)
F_TOTAL=$(wc -l <"$LOGDIR/$FS.results")
F_SKIP=$(count "$LOGDIR/$FS.results" skipped)
F_FAIL=$(count "$LOGDIR/$FS.results" FAILED)

# Baseline passes that are not "ok" on the FS (FAILED, skipped, or absent).
awk '$2 == "ok" { print $1 }' "$LOGDIR/$FS.results" | sort -u >"$LOGDIR/$FS.pass"
comm -23 "$LOGDIR/baseline.pass" "$LOGDIR/$FS.pass" >"$LOGDIR/$FS.lost"
comm -23 "$LOGDIR/$FS.lost" "$LOGDIR/known.list" >"$LOGDIR/$FS.regressions"
comm -12 "$LOGDIR/$FS.lost" "$LOGDIR/known.list" >"$LOGDIR/$FS.known-hit"
comm -12 "$LOGDIR/$FS.pass" "$LOGDIR/known.list" >"$LOGDIR/$FS.known-passing"
REGRESSIONS=$(wc -l <"$LOGDIR/$FS.regressions")

# The failure message pjdfstest printed for a case (tab-indented lines after
# it), from the first run.
failure_detail() {
    local log="$LOGDIR/$FS.log"
    [[ -f $LOGDIR/$FS.first.log ]] && log="$LOGDIR/$FS.first.log"
    sed -E 's/\x1b\[[0-9;]*m//g' "$log" |
        awk -v n="$1" '$1 == n { on = 1; next }
                       on && /^\t/ { if (++k <= 3) print "      " substr($0, 2); next }
                       { on = 0 }'
}

if ((REGRESSIONS > 0)); then
    echo "pjdfstest: cases that pass on tmpfs but not on $FS (not in ${KNOWN#"$WF_REPO"/}):"
    while read -r name; do
        st=$(awk -v n="$name" '$1 == n { $1 = ""; sub(/^ /, ""); print; exit }' "$LOGDIR/$FS.results")
        echo "  $name: ${st:-did not run}"
        failure_detail "$name"
    done <"$LOGDIR/$FS.regressions"
fi
# Entries naming no case that ran on the baseline are probably typos.
sort -u <(cut -d' ' -f1 "$LOGDIR/baseline.results") >"$LOGDIR/baseline.names"
if ((${#PATTERNS[@]} == 0)) && comm -23 "$LOGDIR/known.list" "$LOGDIR/baseline.names" | grep -q .; then
    echo "pjdfstest: entries in ${KNOWN#"$WF_REPO"/} that name no pjdfstest case:"
    comm -23 "$LOGDIR/known.list" "$LOGDIR/baseline.names" | sed 's/^/  /'
fi
if [[ -s $LOGDIR/$FS.flaky ]]; then
    echo "pjdfstest: FLAKY on $FS: failed once, then passed $RERUNS reruns on the same mount:"
    while read -r name; do
        echo "  $name"
        failure_detail "$name"
    done <"$LOGDIR/$FS.flaky"
    echo "  daemon log tail:"
    tail -n 15 "$DAEMON_LOG" "$LOGDIR"/warpfs-log-file.log 2>/dev/null | sed 's/^/    /'
fi
if [[ -s $LOGDIR/$FS.known-hit ]]; then
    echo "pjdfstest: $(wc -l <"$LOGDIR/$FS.known-hit") known failure(s) (${KNOWN#"$WF_REPO"/}) still fail"
fi
if [[ -s $LOGDIR/$FS.known-passing ]]; then
    echo "pjdfstest: these known-failure entries now pass; remove them from ${KNOWN#"$WF_REPO"/}:"
    sed 's/^/  /' "$LOGDIR/$FS.known-passing"
fi

json_list() { awk 'BEGIN { printf "[" } { printf "%s\"%s\"", (NR > 1 ? ", " : ""), $0 } END { printf "]" }' "$1"; }
cat >"$SUMMARY" <<EOF
{
  "pjdfstest_version": "$PJD_VERSION",
  "fs": "$FS",
  "mode": "$MODE",
  "cipher": "$CIPHER",
  "mount_options": "$MOUNT_OPTS",
  "baseline": {"fs": "tmpfs", "passed": $B_PASS, "skipped": $B_SKIP, "total": $B_TOTAL, "completed": $([[ $BASE_OK == 1 ]] && echo true || echo false)},
  "$FS": {"passed": $F_PASS, "failed": $F_FAIL, "skipped": $F_SKIP, "total": $F_TOTAL, "completed": $([[ $FS_OK == 1 ]] && echo true || echo false)},
  "regressions": $(json_list "$LOGDIR/$FS.regressions"),
  "known_failures_hit": $(json_list "$LOGDIR/$FS.known-hit"),
  "flaky": $(json_list "$LOGDIR/$FS.flaky"),
  "known_failures_now_passing": $(json_list "$LOGDIR/$FS.known-passing"),
  "logs": "target/pjdfstest/"
}
EOF

echo "pjdfstest: $FS ($MODE, $CIPHER) $F_PASS/$F_TOTAL passed, baseline $B_PASS/$B_TOTAL passed" \
    "($F_FAIL failed on $FS, $REGRESSIONS regressions, $(wc -l <"$LOGDIR/$FS.known-hit") known," \
    "$(wc -l <"$LOGDIR/$FS.flaky") flaky)"

((BASE_OK)) || wf_die "baseline run did not complete"
((FS_OK)) || wf_die "$FS run did not complete"
((B_TOTAL > 0)) || wf_die "baseline ran no test case"
((REGRESSIONS == 0)) || exit 1
