# shellcheck shell=bash
# bench/lib-measure.sh — measuring helpers shared by the fio benchmarks
# (bench/run.sh, bench/quick-fio.sh, bench/spec-fio.sh). Sourced, not run
# (set WF_NAME first); loads scripts/lib.sh and sets BENCH.

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
BENCH="$WF_REPO/bench"

# fn PEER — the function prefix of a peer (bench/peers/NAME.sh defines
# NAME_mount etc. with '-' spelled '_').
fn() { printf '%s\n' "${1//-/_}"; }

# Drop the page cache (root), so reads reach the FS daemon.
drop_caches() {
    sync
    echo 3 >/proc/sys/vm/drop_caches
}

# cpu_seconds PID [DECIMALS] — process CPU time (user + system, all threads)
# in seconds, DECIMALS (default 2) after the point; 0 without a PID.
cpu_seconds() {
    local stat
    [[ -n $1 ]] || { echo 0; return; }
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || { echo 0; return; }
    stat="${stat##*) }" # fields after "pid (comm) "
    awk -v hz="$(getconf CLK_TCK)" -v d="${2:-2}" '{ printf "%." d "f", ($12 + $13) / hz }' <<<"$stat"
}

# What else is using the CPUs right now: busy % over 2 s (/proc/stat), before
# we start anything. The load average lags by minutes, so it is not used.
cpu_busy_pct() {
    local b0 i0 b1 i1 # busy and idle(+iowait) jiffies
    read -r b0 i0 < <(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
    sleep 2
    read -r b1 i1 < <(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
    awk -v bu=$((b1 - b0)) -v id=$((i1 - i0)) 'BEGIN { printf "%.0f", (bu + id) ? 100 * bu / (bu + id) : 0 }'
}

# Sets BUSY_BEFORE (cpu_busy_pct, with a warning above 20%).
measure_busy_before() {
    BUSY_BEFORE="$(cpu_busy_pct)"
    ((BUSY_BEFORE < 20)) || wf_warn "the CPUs are ${BUSY_BEFORE}% busy before the run: results will be noisy"
}

# flag NAME — "true" when /proc/cpuinfo lists the CPU flag NAME.
flag() { grep -qw "$1" /proc/cpuinfo && echo true || echo false; }

# peer_source NAME — check NAME and source bench/peers/NAME.sh (the peer
# interface is described in bench/quick-fio.sh).
peer_source() {
    [[ $1 =~ ^[a-z0-9_-]+$ && -f $BENCH/peers/$1.sh ]] || wf_die "unknown peer '$1' (no bench/peers/$1.sh)"
    # shellcheck disable=SC1090
    . "$BENCH/peers/$1.sh"
}

# load_peers LIST ON_MISSING — source bench/peers/NAME.sh for each NAME of
# the comma-separated LIST and set ACTIVE to those available; for the others
# run ON_MISSING NAME REASON (REASON: the peer's PEER_SKIP_REASON, may be
# empty), e.g. peer_missing_die or peer_missing_warn. Dies when none is left.
load_peers() {
    local p want=()
    IFS=, read -ra want <<<"$1"
    ACTIVE=()
    for p in "${want[@]}"; do
        peer_source "$p"
        PEER_SKIP_REASON=""
        if "$(fn "$p")_available"; then
            ACTIVE+=("$p")
        else
            "$2" "$p" "$PEER_SKIP_REASON"
        fi
    done
    ((${#ACTIVE[@]})) || wf_die "no peer available"
}
peer_missing_die() { wf_die "peer $1 is not available${2:+: $2}"; }
peer_missing_warn() { wf_warn "peer $1 is not available${2:+: $2}; skipping it"; }
