#!/usr/bin/env bash
# scripts/xfstests.sh — fstests (xfstests) on warpfs: the `generic` `quick`
# group, or a fixed subset of it, on a warpfs volume mounted as FSTYP=fuse.
#
# What it does:
#   1. installs the Debian build dependencies fstests needs (apt-get update
#      first; only what is missing);
#   2. copies the fstests snapshot from ../shared/xfstests (the directory
#      beside the repository; see ../shared/xfstests.SOURCE: no registry
#      serves fstests, and this repository does not carry it) to
#      target/xfstests/src and builds it there; the build is kept, and made
#      again only when the snapshot changes;
#   3. installs /sbin/mount.fuse.warpfs, a small script that runs the tested
#      binary (`warpfs mount`), and removes it at exit (only if this run
#      installed it; a helper that is not ours is never replaced);
#   4. makes the TEST and SCRATCH volumes with `warpfs init --mode MODE`,
#      each on a tmpfs of its own (XFSTESTS_BACKING_SIZE, default 2g): tests
#      that fill the scratch file system (generic/103 fallocates all there
#      is) fill that, never the machine's disk (fstests does nothing at mkfs
#      time for FUSE: its _scratch_mkfs removes every file on the mounted
#      scratch volume instead, which is enough);
#   5. runs fstests' `check` (FSTYP=fuse, FUSE_SUBTYP=.warpfs) on them;
#   6. unmounts both and runs `warpfs fsck` on each (fstests has no fsck for
#      FUSE either): a volume fsck does not find clean fails the run;
#   7. compares the failures with scripts/xfstests/expected-failures.txt:
#      a failure not listed there fails the run; a listed test that passed
#      is reported (remove it from the list).
# Results: RESULTS_DIR/MODE-TRANSPORT.json (counts, lists, time) and
# RESULTS_DIR/README.md (a table of every JSON there beside gocryptfs's
# published run); fstests' own output in target/xfstests/run/results.
# RESULTS_DIR is target/xfstests/results unless --results DIR names another
# (full runs that are kept go to bench/results/YYYY-MM-DD-xfstests/).
#
# Usage: scripts/xfstests.sh [--ci | --full] [--mode gcm|ctr|xts]
#                            [--transport dev|uring] [--results DIR] [TEST...]
#   --ci          the fixed representative subset below (CI: at most 10
#                 minutes with the build on a 2-core machine)
#   --full        the whole `generic` `quick` group (the default)
#   --mode M      content mode of both volumes (default gcm)
#   --transport T dev (/dev/fuse, the default) or uring (FUSE over io_uring:
#                 the kernel's enable_uring is turned on for the run and the
#                 value found put back at exit)
#   --results DIR where the JSON and Markdown go (default target/xfstests/results)
#   TEST...       run these tests instead (e.g. generic/451)
# Environment: WARPFS_BIN (binary to test; default: build target/release/warpfs),
#   XFSTESTS_SRC (the fstests snapshot; default ../shared/xfstests),
#   XFSTESTS_TIMEOUT (seconds for fstests' check; default 540 with --ci,
#   else 10800), XFSTESTS_BACKING_SIZE (size of each volume's tmpfs, 2g).
# Needs root and /dev/fuse; without them it skips (exit 77; a failure with
# WARPFS_NO_SKIP=1).
set -euo pipefail

WF_NAME=xfstests
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The CI subset: each test here stands for a kind of request or a path
# through the mount (docs/decisions/0087-xfstests.md says why each).
CI_TESTS=(
    generic/001 # copies and compares a tree of files (create, read, write, unlink)
    generic/011 # dirstress: many processes creating and removing in directories
    generic/013 # fsstress: random mixed operations
    generic/023 # rename(2) of files and directories onto each other
    generic/035 # fstat of an open file and directory after a rename over it
    generic/078 # renameat2 RENAME_WHITEOUT (overlayfs upper directories)
    generic/091 # fsx with O_DIRECT mixed with buffered I/O
    generic/120 # -o noatime: reads and execs leave the access time (15 s of sleeps)
    generic/131 # POSIX record locks between two processes
    generic/213 # fallocate(2) beyond the free space: ENOSPC
    generic/221 # futimens on a file opened by another process
    generic/228 # RLIMIT_FSIZE (ulimit -f) and SIGXFSZ
    generic/236 # link(2) updates ctime
    generic/245 # rename of a directory onto a non-empty one: ENOTEMPTY
    generic/246 # mmap of a file, written and read back
    generic/257 # readdir offsets across a growing directory
    generic/294 # mount -o remount,ro of a live mount
    generic/309 # a directory's mtime and ctime after a rename into it
    generic/337 # xattrs of a file with many names
    generic/451 # buffered reads beside asynchronous direct writes (30 s)
    generic/465 # direct reads racing appending direct writes
    generic/471 # rewinddir(3) sees names made after opendir
    generic/568 # writes into a fallocated range allocate nothing more
)

SCOPE=full MODE=gcm TRANSPORT=dev RESULTS_DIR="" TESTS=()
while (($#)); do
    case "$1" in
    --ci) SCOPE=ci; shift ;;
    --full) SCOPE=full; shift ;;
    --mode) MODE="$2"; shift 2 ;;
    --mode=*) MODE="${1#--mode=}"; shift ;;
    --transport) TRANSPORT="$2"; shift 2 ;;
    --transport=*) TRANSPORT="${1#--transport=}"; shift ;;
    --results) RESULTS_DIR="$2"; shift 2 ;;
    --results=*) RESULTS_DIR="${1#--results=}"; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) wf_die "unknown option $1 (see --help)" ;;
    *) TESTS+=("$1"); SCOPE=list; shift ;;
    esac
done
[[ $MODE == gcm || $MODE == ctr || $MODE == xts ]] || wf_die "--mode must be gcm, ctr or xts"
[[ $TRANSPORT == dev || $TRANSPORT == uring ]] || wf_die "--transport must be dev or uring"

WORK="$WF_REPO/target/xfstests"
RESULTS_DIR="${RESULTS_DIR:-$WORK/results}"
[[ $RESULTS_DIR == /* ]] || RESULTS_DIR="$PWD/$RESULTS_DIR"
EXPECTED="$WF_REPO/scripts/xfstests/expected-failures.txt"
if [[ $SCOPE == ci ]]; then
    TIMEOUT="${XFSTESTS_TIMEOUT:-540}"
else
    TIMEOUT="${XFSTESTS_TIMEOUT:-10800}"
fi

# ---- where fstests comes from ------------------------------------------------
# ../shared beside the repository; in a git worktree, also beside the main
# checkout (the directory that holds the common .git).
find_src() {
    local c common
    if [[ -n ${XFSTESTS_SRC:-} ]]; then
        printf '%s\n' "$XFSTESTS_SRC"
        return
    fi
    c="$WF_REPO/../shared/xfstests"
    if [[ ! -d $c ]] && common="$(git -C "$WF_REPO" rev-parse --path-format=absolute --git-common-dir 2>/dev/null)"; then
        [[ -d $common/../../shared/xfstests ]] && c="$common/../../shared/xfstests"
    fi
    printf '%s\n' "$c"
}
SRC="$(find_src)"
if [[ ! -f $SRC/check || ! -f $SRC/README.fuse ]]; then
    wf_die "no fstests snapshot at $SRC: fstests is not in this repository and no
    package registry serves it; put an unmodified kdave/xfstests checkout in
    ../shared/xfstests beside the repository (see ../shared/xfstests.SOURCE), or
    name one with XFSTESTS_SRC=DIR"
fi

if ! wf_is_root; then
    wf_skip "needs root (mounts, /sbin/mount.fuse.warpfs, fstests runs as root)"
fi
[[ -c /dev/fuse ]] || wf_skip "/dev/fuse is missing"

# One run at a time: the helper in /sbin and the uring parameter are the
# machine's.
exec 9>/run/warpfs-xfstests.lock
flock -w 3600 9 || wf_die "another scripts/xfstests.sh holds /run/warpfs-xfstests.lock"

# ---- build dependencies and the build -----------------------------------------
# "command:package" where a command tells, else the package (checked by dpkg).
wf_ensure autoconf:autoconf automake:automake libtool:libtool-bin cc:gcc make:make \
    xfslibs-dev uuid-dev libattr1-dev libacl1-dev libaio-dev liburing-dev libgdbm-dev \
    attr:attr setfacl:acl quota:quota bc:bc dbench:dbench xfs_io:xfsprogs mkfs.ext4:e2fsprogs \
    fio:fio fusermount3:fuse3 timeout:coreutils ||
    wf_die "the fstests build dependencies could not be installed"

WARPFS="$(wf_warpfs_bin)" || wf_die "no warpfs binary"
# The source the binary was built from, as the run starts.
REV="$(git -C "$WF_REPO" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
git -C "$WF_REPO" diff --quiet HEAD -- crates 2>/dev/null || REV+="+changes"

BUILD="$WORK/src"
STAMP="$WORK/src.stamp"
# The snapshot's identity: its SOURCE note when there is one, else its VERSION.
src_id() { cat "$SRC/../xfstests.SOURCE" 2>/dev/null || cat "$SRC/VERSION"; }
mkdir -p "$WORK"
if [[ ! -x $BUILD/src/aio-dio-regress/aio-dio-cycle-write || ! -f $STAMP ]] ||
    [[ "$(cat "$STAMP")" != "$(src_id)" ]]; then
    wf_log "building fstests from $SRC in $BUILD (log: $WORK/build.log)"
    rm -rf "$BUILD" "$STAMP"
    cp -r "$SRC" "$BUILD"
    if ! make -C "$BUILD" -j"$(nproc)" >"$WORK/build.log" 2>&1; then
        tail -n 30 "$WORK/build.log" >&2
        wf_die "fstests build failed"
    fi
    src_id >"$STAMP"
else
    wf_log "fstests already built in $BUILD"
fi

# ---- volumes, mount points, helper -------------------------------------------------
RUN="$WORK/run"
HELPER=/sbin/mount.fuse.warpfs
MARK="# mount.fuse.warpfs of warpfs scripts/xfstests.sh"
HELPER_OURS=0
WAS_URING=""

show_daemon_logs() { tail -n 20 "$RUN"/daemon-*.log 2>/dev/null >&2 || true; }
# Daemons of this run: their command line names $RUN.
run_daemons() {
    local p
    for p in /proc/[0-9]*; do
        { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$RUN/" && printf '%s\n' "${p#/proc/}"
    done
    return 0
}
unmount_all() {
    local d pid
    for d in "$RUN/mnt/test" "$RUN/mnt/scratch"; do
        wf_unmount "$d" || wf_warn "unmount of $d failed"
    done
    for pid in $(run_daemons); do
        [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
        wf_stop_daemon "$pid" 10
    done
}
# The volumes' tmpfs mounts go after their daemons (fsck reads them first).
unmount_backing() {
    local d
    for d in "$RUN/test" "$RUN/scratch"; do
        wf_unmount "$d" || wf_warn "unmount of $d failed"
    done
}
cleanup() {
    local rc=$?
    set +e
    unmount_all
    unmount_backing
    if ((HELPER_OURS)); then rm -f "$HELPER"; fi
    wf_uring_restore
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A run cut short may have left its mounts.
unmount_all
unmount_backing
rm -rf "$RUN"
mkdir -p "$RUN/mnt/test" "$RUN/mnt/scratch" "$RUN/results"
chmod 0755 "$WORK" "$RUN" "$RUN/mnt" "$RUN/mnt/test" "$RUN/mnt/scratch"
PASS="$RUN/passfile"
printf 'xfstests-%s\n' "$RANDOM$RANDOM" >"$PASS"
chmod 0600 "$PASS"
BACKING_SIZE="${XFSTESTS_BACKING_SIZE:-2g}"
for v in test scratch; do
    mkdir -p "$RUN/$v"
    mount -t tmpfs -o "size=$BACKING_SIZE,mode=0755" "xfstests-$v" "$RUN/$v" ||
        wf_die "cannot mount a tmpfs for the $v volume"
    "$WARPFS" init --passfile "$PASS" --mode "$MODE" "$RUN/$v" >"$RUN/init-$v.log" 2>&1 ||
        { cat "$RUN/init-$v.log" >&2; wf_die "warpfs init of the $v volume failed"; }
done

if [[ -e $HELPER ]] && ! grep -qF "$MARK" "$HELPER"; then
    wf_die "$HELPER exists and is not this script's: remove it first"
fi
# mount(8) runs `mount.fuse.warpfs DEV DIR -o OPTIONS`: DEV is fstests'
# TEST_DEV or SCRATCH_DEV (shown as the mount's source, as fstests expects),
# source= names the cipher directory; the rest goes to warpfs's own helper
# form, `warpfs CIPHERDIR DIR -o OPTIONS` (passfile=, transport=,
# allow_other, ...; `remount,ro` changes the live mount).
cat >"$HELPER.tmp" <<EOF
#!/bin/bash
$MARK (removed at its exit)
exec 9>&- # the script's lock stays with the script, not the daemon
dev="\$1" dir="\$2"
shift 2
src="" opts="fsname=\$dev,log_file=$RUN/daemon-\$dev.log"
while ((\$#)); do
    case "\$1" in
    -o) o="\$2"; shift 2 ;;
    -o*) o="\${1#-o}"; shift ;;
    *) shift; continue ;;
    esac
    IFS=, read -ra items <<<"\$o"
    for i in "\${items[@]}"; do
        case "\$i" in
        source=*) src="\${i#source=}" ;;
        "") ;;
        *) opts+=",\$i" ;;
        esac
    done
done
[[ -n \$src ]] || { echo "mount.fuse.warpfs: no source=CIPHERDIR option" >&2; exit 1; }
exec "$WARPFS" "\$src" "\$dir" -o "\$opts"
EOF
chmod 0755 "$HELPER.tmp"
mv -f "$HELPER.tmp" "$HELPER"
HELPER_OURS=1

if [[ $TRANSPORT == uring ]]; then
    [[ -w $WF_URING_PARAM ]] || wf_skip "no $WF_URING_PARAM: this kernel has no FUSE over io_uring"
    wf_uring_on
    WAS_URING="$WF_URING_BEFORE"
fi

OPTS="passfile=$PASS,allow_other,default_permissions,transport=$TRANSPORT"
cat >"$BUILD/local.config" <<EOF
# Written by warpfs scripts/xfstests.sh (made again at every run).
export FSTYP=fuse
export FUSE_SUBTYP=.warpfs
export TEST_DEV=warpfs-test
export TEST_DIR=$RUN/mnt/test
export SCRATCH_DEV=warpfs-scratch
export SCRATCH_MNT=$RUN/mnt/scratch
export TEST_FS_MOUNT_OPTS="-osource=$RUN/test,$OPTS"
export MOUNT_OPTIONS="-osource=$RUN/scratch,$OPTS"
export RESULT_BASE=$RUN/results
EOF

# A first mount by hand, so that a broken helper or binary says so here.
mount -t fuse.warpfs -o "source=$RUN/test,$OPTS" warpfs-test "$RUN/mnt/test" ||
    { show_daemon_logs; wf_die "mounting the test volume through $HELPER failed"; }
timeout -k 5 30 sh -c 'echo probe >"$1/probe" && grep -q probe "$1/probe" && rm "$1/probe"' _ "$RUN/mnt/test" ||
    { show_daemon_logs; wf_die "round trip on the test volume failed"; }
wf_unmount "$RUN/mnt/test"

# ---- run -------------------------------------------------------------------------
case $SCOPE in
ci) ARGS=("${CI_TESTS[@]}") ;;
full) ARGS=(-g generic/quick) ;;
list) ARGS=("${TESTS[@]}") ;;
esac
LOG="$RUN/check.log"
wf_log "fstests: ${ARGS[*]:0:6}$( ((${#ARGS[@]} > 6)) && echo " ...") on $MODE over $TRANSPORT (log: $LOG)"
T0=$SECONDS
CHECK_RC=0
(cd "$BUILD" && timeout -k 30 "$TIMEOUT" ./check "${ARGS[@]}") 2>&1 | tee "$LOG" || CHECK_RC=$?
ELAPSED=$((SECONDS - T0))
COMPLETED=true
if ! grep -qE '^(Passed all|Failed [0-9]+ of) [0-9]+ tests' "$LOG"; then
    COMPLETED=false
    wf_warn "fstests did not complete (exit $CHECK_RC after ${ELAPSED}s)"
fi

# ---- fsck --------------------------------------------------------------------------
unmount_all
FSCK_OK=true
for v in test scratch; do
    if ! "$WARPFS" fsck --passfile "$PASS" "$RUN/$v" >"$RUN/fsck-$v.log" 2>&1; then
        FSCK_OK=false
        tail -n 20 "$RUN/fsck-$v.log" >&2
        wf_warn "warpfs fsck of the $v volume found problems (see $RUN/fsck-$v.log)"
    fi
done

# ---- compare -----------------------------------------------------------------------
list_of() { sed -n "s/^$1: *//p" "$LOG" | tail -n 1 | tr ' ' '\n' | sed '/^$/d' | sort -u; }
# fstests' `Ran:` names the tests it left out too.
list_of Ran >"$RUN/tried"
list_of 'Not run' >"$RUN/notrun"
list_of Failures >"$RUN/failed"
comm -23 "$RUN/tried" "$RUN/notrun" >"$RUN/ran"
comm -23 "$RUN/ran" "$RUN/failed" >"$RUN/passed"
# Expected failures: "TEST[@WHERE,...] KIND REASON"; WHERE (a mode or a
# transport) limits the entry to runs with it.
awk -v m="$MODE" -v t="$TRANSPORT" '
    /^[ \t]*(#|$)/ { next }
    { n = split($1, a, "@"); if (n == 1) { print a[1]; next }
      k = split(a[2], w, ","); for (i = 1; i <= k; i++) if (w[i] == m || w[i] == t) { print a[1]; next } }' \
    "$EXPECTED" | sort -u >"$RUN/expected"
comm -23 "$RUN/failed" "$RUN/expected" >"$RUN/unexpected"
comm -12 "$RUN/passed" "$RUN/expected" >"$RUN/now-passing"
comm -12 "$RUN/failed" "$RUN/expected" >"$RUN/expected-hit"
N_RAN=$(wc -l <"$RUN/ran") N_FAIL=$(wc -l <"$RUN/failed") N_NOTRUN=$(wc -l <"$RUN/notrun")
N_PASS=$((N_RAN - N_FAIL)) N_UNEXP=$(wc -l <"$RUN/unexpected")

if ((N_UNEXP > 0)); then
    echo "xfstests: failures not in ${EXPECTED#"$WF_REPO"/}:"
    while read -r t; do
        echo "  $t"
        if [[ -f $RUN/results/$t.out.bad ]]; then
            { diff -u "$BUILD/tests/$t.out" "$RUN/results/$t.out.bad" 2>/dev/null || true; } | sed -n '3,12p' | sed 's/^/      /'
        fi
    done <"$RUN/unexpected"
fi
if [[ -s $RUN/now-passing ]]; then
    echo "xfstests: listed as expected failures but passed here (remove them from the list if they keep passing):"
    sed 's/^/  /' "$RUN/now-passing"
fi

# ---- results -------------------------------------------------------------------------
json_list() { awk 'BEGIN { printf "[" } { printf "%s\"%s\"", (NR > 1 ? ", " : ""), $0 } END { printf "]" }' "$1"; }
mkdir -p "$RESULTS_DIR"
JSON="$RESULTS_DIR/$MODE-$TRANSPORT.json"
[[ $SCOPE == ci ]] && JSON="$RESULTS_DIR/$MODE-$TRANSPORT-ci.json"
[[ $SCOPE == list ]] && JSON="$RESULTS_DIR/$MODE-$TRANSPORT-list.json"
cat >"$JSON" <<EOF
{
  "fstests": "$(grep -o '[0-9a-f]\{40\}' "$SRC/../xfstests.SOURCE" 2>/dev/null | head -n 1 || true)",
  "scope": "$SCOPE",
  "tests": "$(if [[ $SCOPE == full ]]; then echo "-g generic/quick"; else echo "${ARGS[*]}"; fi)",
  "mode": "$MODE",
  "transport": "$TRANSPORT",
  "kernel": "$(uname -r)",
  "backing": "tmpfs $BACKING_SIZE per volume",
  "warpfs": "$REV",
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "seconds": $ELAPSED,
  "completed": $COMPLETED,
  "ran": $N_RAN,
  "passed": $N_PASS,
  "failed": $N_FAIL,
  "notrun": $N_NOTRUN,
  "failures": $(json_list "$RUN/failed"),
  "unexpected_failures": $(json_list "$RUN/unexpected"),
  "expected_failures_passing": $(json_list "$RUN/now-passing"),
  "fsck_clean": $FSCK_OK
}
EOF
bash "$WF_REPO/scripts/xfstests/report.sh" "$RESULTS_DIR" >"$RESULTS_DIR/README.md"

echo "xfstests: warpfs $MODE/$TRANSPORT ($SCOPE): ran $N_RAN, passed $N_PASS, failed $N_FAIL" \
    "($N_UNEXP unexpected), not run $N_NOTRUN; fsck $([[ $FSCK_OK == true ]] && echo clean || echo FOUND PROBLEMS);" \
    "${ELAPSED}s; results in ${RESULTS_DIR#"$WF_REPO"/}"

[[ $COMPLETED == true ]] || wf_die "fstests did not complete"
((N_RAN > 0)) || wf_die "fstests ran no test"
[[ $FSCK_OK == true ]] || wf_die "warpfs fsck found problems after the run"
((N_UNEXP == 0)) || exit 1
