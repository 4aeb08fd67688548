#!/usr/bin/env bash
# scripts/fuzz.sh — run every cargo-fuzz target from its committed corpus.
#
#   bash scripts/fuzz.sh [TARGET...]              (default: all four targets)
#   bash scripts/fuzz.sh --grow MINUTES [TARGET...]
#
# Targets (fuzz/fuzz_targets/): config (warpfs.conf parse + unlock with a
# fixed password), header (cipher-file header, nonce entries, rekey undo
# records, size arithmetic), names (encrypted names incl. long-name
# sidecars), cipher_file (the content crate's block read path and fsck's
# scan on random cipher files of every content cipher and mode, file
# summaries, mid-rekey keyring).
# fuzz/ is its own cargo workspace: it needs nightly and libFuzzer. The
# nightly is pinned (NIGHTLY below; FUZZ_NIGHTLY overrides it) so that a
# new nightly never breaks CI; this script installs it (rustup, minimal
# profile) and cargo-fuzz 0.13 into target/tools when missing.
#
# Inputs per target: fuzz/corpus/TARGET (committed: what longer runs found,
# minimized), fuzz/seeds/TARGET (made from the example volumes by
# fuzz/seed.sh on every run) and target/fuzz-corpus/TARGET (what this
# checkout's runs found; libFuzzer writes there, never into the committed
# corpus). Each target runs FUZZ_SECONDS seconds (default 15) on one core.
# Any crash fails the script; the crashing input is kept in
# fuzz/artifacts/TARGET/ (turn it into a regression unit test in the
# parsing crate). A line per target gives the executions run and the
# corpus it started from: `fuzz: TARGET: N executions in S s, C committed
# inputs, 0 crashes`.
#
# --grow MINUTES runs each target that long (outside CI), then minimizes
# everything it has (committed, seeds, found) with `cargo fuzz cmin` into
# fuzz/corpus/TARGET, to be committed (inputs of at most 32 KiB).
#
# Environment: SKIP_FUZZ=1 skips everything (exit 0); FUZZ_SECONDS; FUZZ_JOBS
# (build jobs, default CARGO_BUILD_JOBS or 2); FUZZ_NIGHTLY.
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
GROW=0
if [[ ${1:-} == --grow ]]; then
    [[ ${2:-} =~ ^[0-9]+$ ]] || wf_die "--grow needs a number of minutes"
    GROW=1
    SECS=$(($2 * 60))
    shift 2
fi
NIGHTLY="${FUZZ_NIGHTLY:-nightly-2026-05-20}"
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(config header names cipher_file)
TOOLS="$WF_REPO/target/tools"
export CARGO_BUILD_JOBS="${FUZZ_JOBS:-${CARGO_BUILD_JOBS:-2}}"
LOGS="$WF_REPO/target/test-logs"
mkdir -p "$LOGS"

t0=$SECONDS
if ! rustup run "$NIGHTLY" rustc --version >/dev/null 2>&1; then
    wf_log "installing the pinned toolchain $NIGHTLY (minimal)"
    rustup toolchain install "$NIGHTLY" --profile minimal >/dev/null ||
        wf_die "rustup toolchain install $NIGHTLY failed"
fi
if ! "$TOOLS/bin/cargo-fuzz" --version 2>/dev/null | grep -q '^cargo-fuzz 0\.13\.'; then
    wf_log "installing cargo-fuzz 0.13 into target/tools"
    cargo install --quiet --root "$TOOLS" --locked cargo-fuzz --version '~0.13' || wf_die "cargo install cargo-fuzz failed"
fi
wf_log "toolchain ready in $((SECONDS - t0))s ($NIGHTLY: $(rustup run "$NIGHTLY" rustc --version))"
bash fuzz/seed.sh

FAILED=0
for t in "${TARGETS[@]}"; do
    log="$LOGS/fuzz-$t.log"
    max_len=4096
    [[ $t == cipher_file ]] && max_len=140025
    t1=$SECONDS
    # -fork/-jobs stay off: one process, one core (the CI VM has two).
    rc=0
    found="$WF_REPO/target/fuzz-corpus/$t"
    mkdir -p "$found" "fuzz/corpus/$t"
    committed=$(find "fuzz/corpus/$t" -type f | wc -l)
    (cd fuzz && rustup run "$NIGHTLY" "$TOOLS/bin/cargo-fuzz" run --release --debug-assertions "$t" \
        "$found" "corpus/$t" "seeds/$t" -- -max_total_time="$SECS" -max_len="$max_len" -rss_limit_mb=2048 \
        -print_final_stats=1) >"$log" 2>&1 || rc=$?
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    if ((rc != 0)); then
        FAILED=$((FAILED + 1))
        tail -n 40 "$log" >&2
        echo "fuzz: $t: FAILED (exit $rc) after ${execs:-?} executions; input in fuzz/artifacts/$t/, log $log"
        continue
    fi
    echo "fuzz: $t: ${execs:-?} executions in $((SECONDS - t1)) s (incl. build), $committed committed inputs, 0 crashes"
    if ((GROW)); then
        # Everything known, minimized to the inputs that add coverage.
        all="$WF_REPO/target/fuzz-cmin/$t"
        rm -rf "$all"
        mkdir -p "$all"
        cp -n "fuzz/corpus/$t"/* "fuzz/seeds/$t"/* "$found"/* "$all"/ 2>/dev/null || true
        (cd fuzz && rustup run "$NIGHTLY" "$TOOLS/bin/cargo-fuzz" cmin --release --debug-assertions "$t" "$all" \
            -- -max_len="$max_len" -rss_limit_mb=2048) >>"$log" 2>&1 ||
            { FAILED=$((FAILED + 1)); echo "fuzz: $t: cmin failed (log $log)"; continue; }
        rm -rf "fuzz/corpus/$t"
        mkdir -p "fuzz/corpus/$t"
        # Inputs over 32 KiB stay out of the repository (whole cipher files:
        # the seeds give those on every run).
        find "$all" -type f -size -32769c -exec cp {} "fuzz/corpus/$t"/ \;
        echo "fuzz: $t: fuzz/corpus/$t now $(find "fuzz/corpus/$t" -type f | wc -l) inputs, $(du -sh "fuzz/corpus/$t" | cut -f1)"
    fi
done
((FAILED == 0))
