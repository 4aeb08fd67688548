#!/usr/bin/env bash
# scripts/fuzz.sh — smoke-run every cargo-fuzz target.
#
#   bash scripts/fuzz.sh [TARGET...]        (default: all four targets)
#
# Targets (fuzz/fuzz_targets/): config (warpfs.conf parse + unlock with a
# fixed password), header (cipher-file header, nonce entries, rekey undo
# records, size arithmetic), names (encrypted names incl. long-name
# sidecars), cipher_file (the content crate's block read path and fsck's
# scan on random cipher files, gcm, ctr and xts, mid-rekey keyring).
# fuzz/ is its own cargo workspace: it needs nightly and libFuzzer. This
# script installs, when missing, a minimal nightly toolchain (rustup) and
# cargo-fuzz 0.13 into target/tools (cargo install --locked), makes the seed
# corpora from the example volumes (fuzz/seed.sh), then runs each target
# FUZZ_SECONDS seconds (default 15) on one core. Any crash fails the script;
# the crashing input is kept in fuzz/artifacts/TARGET/ (turn it into a
# regression unit test in the parsing crate). A line per target gives the
# executions run: `fuzz: TARGET: N executions in S s, 0 crashes`.
#
# Environment: SKIP_FUZZ=1 skips everything (exit 0); FUZZ_SECONDS; FUZZ_JOBS
# (build jobs, default CARGO_BUILD_JOBS or 2).
set -euo pipefail
WF_NAME=fuzz.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$WF_REPO"

if [[ ${SKIP_FUZZ:-0} == 1 ]]; then
    wf_log "SKIP_FUZZ=1: skipped"
    exit 0
fi
wf_ensure_rust || wf_die "no usable Rust toolchain"
SECS="${FUZZ_SECONDS:-15}"
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(config header names cipher_file)
TOOLS="$WF_REPO/target/tools"
export CARGO_BUILD_JOBS="${FUZZ_JOBS:-${CARGO_BUILD_JOBS:-2}}"
LOGS="$WF_REPO/target/test-logs"
mkdir -p "$LOGS"

t0=$SECONDS
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    wf_log "installing a minimal nightly toolchain"
    rustup toolchain install nightly --profile minimal >/dev/null || wf_die "rustup toolchain install nightly failed"
fi
if ! "$TOOLS/bin/cargo-fuzz" --version 2>/dev/null | grep -q '^cargo-fuzz 0\.13\.'; then
    wf_log "installing cargo-fuzz 0.13 into target/tools"
    cargo install --quiet --root "$TOOLS" --locked cargo-fuzz --version '~0.13' || wf_die "cargo install cargo-fuzz failed"
fi
wf_log "toolchain ready in $((SECONDS - t0))s ($(rustup run nightly rustc --version))"
bash fuzz/seed.sh

FAILED=0
for t in "${TARGETS[@]}"; do
    log="$LOGS/fuzz-$t.log"
    max_len=4096
    [[ $t == cipher_file ]] && max_len=140025
    t1=$SECONDS
    # -fork/-jobs stay off: one process, one core (the CI VM has two).
    rc=0
    (cd fuzz && rustup run nightly "$TOOLS/bin/cargo-fuzz" run --release --debug-assertions "$t" \
        "corpus/$t" -- -max_total_time="$SECS" -max_len="$max_len" -rss_limit_mb=2048 \
        -print_final_stats=1) >"$log" 2>&1 || rc=$?
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    if ((rc != 0)); then
        FAILED=$((FAILED + 1))
        tail -n 40 "$log" >&2
        echo "fuzz: $t: FAILED (exit $rc) after ${execs:-?} executions; input in fuzz/artifacts/$t/, log $log"
    else
        echo "fuzz: $t: ${execs:-?} executions in $((SECONDS - t1)) s (incl. build), 0 crashes"
    fi
done
((FAILED == 0))
