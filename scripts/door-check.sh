#!/usr/bin/env bash
# scripts/door-check.sh — the backing-store door holds: no crate but
# crates/backing (warpfs-backing) opens, creates, renames, removes or looks
# up a path itself (docs/decisions/0079-one-door-to-the-backing-store.md).
#
#   bash scripts/door-check.sh
#
# 1. The lint fires: clippy's disallowed-methods with scripts/door/clippy.toml
#    on scripts/door/fixture, a crate that breaks the rule on purpose, must
#    refuse each of its nine calls (std::fs, std::path and libc ones).
# 2. The workspace keeps it: the same lint on the library and binary
#    targets of every product crate (warpfs-testkit, test-only, and the
#    tests themselves, which plant files as an adversary, are not linted).
#    The door's own crate allows itself (#![allow] in its lib.rs).
# 3. No raw system call that takes a path (openat2, renameat2, the
#    *xattrat calls, fchmodat2) outside crates/backing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CLIPPY_CONF_DIR=$PWD/scripts/door
lint=(-- -A clippy::all -D clippy::disallowed_methods)
fail=0

out=$(cargo clippy --quiet --manifest-path scripts/door/fixture/Cargo.toml \
    --target-dir target/door-fixture "${lint[@]}" 2>&1) && {
    echo "door-check: the fixture passed the lint: the check does not fire" >&2
    exit 1
}
n=$(grep -c '^error: use of a disallowed method' <<<"$out" || true)
calls=9
if [[ $n -ne $calls ]]; then
    echo "$out" >&2
    echo "door-check: the lint refused $n of the fixture's $calls calls" >&2
    exit 1
fi
if grep -q 'does not refer to a reachable function' <<<"$out"; then
    echo "$out" >&2
    echo "door-check: scripts/door/clippy.toml names a function that does not exist (above)" >&2
    exit 1
fi
echo "door-check: the lint refuses all $calls calls of the fixture"

if ! cargo clippy --release --workspace --exclude warpfs-testkit --lib --bins "${lint[@]}"; then
    echo "door-check: a crate other than warpfs-backing touches a path itself (above)" >&2
    fail=1
fi

raw=$(grep -rnE 'SYS_(openat2|renameat2|open|openat|creat|unlinkat|mkdirat|linkat|symlinkat|mknodat)\b|xattrat|FCHMODAT2|\b(463|464|465|466|452);' \
    crates --include=*.rs | grep -v '^crates/backing/' || true)
if [[ -n $raw ]]; then
    echo "$raw" >&2
    echo "door-check: raw path-taking system calls outside crates/backing (above)" >&2
    fail=1
fi
[[ $fail -eq 0 ]] && echo "door-check: passed"
exit $fail
