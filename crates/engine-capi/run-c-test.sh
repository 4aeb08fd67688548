#!/usr/bin/env bash
# Build libwaes (cdylib + staticlib), compile tests/c/waes_test.c against
# include/waes.h with cc, and run it linked both ways.
#   crates/engine-capi/run-c-test.sh [--release]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
profile=debug
cargo_flags=()
if [[ "${1:-}" == "--release" ]]; then
    profile=release
    cargo_flags+=(--release)
fi

cargo build --manifest-path "$root/Cargo.toml" -p warpfs-engine-capi ${cargo_flags[@]+"${cargo_flags[@]}"}
libdir="${CARGO_TARGET_DIR:-$root/target}/$profile"
cc_bin="${CC:-cc}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

cflags=(-std=c11 -Wall -Wextra -Werror -O1 -I"$here/include")
"$cc_bin" "${cflags[@]}" "$here/tests/c/waes_test.c" -o "$out/waes_test_dyn" \
    -L"$libdir" -lwaes -Wl,-rpath,"$libdir" -lpthread
"$cc_bin" "${cflags[@]}" "$here/tests/c/waes_test.c" -o "$out/waes_test_static" \
    "$libdir/libwaes.a" -lpthread -ldl -lm

echo "== dynamic (libwaes.so)"
"$out/waes_test_dyn"
echo "== static (libwaes.a)"
"$out/waes_test_static"
