#!/usr/bin/env bash
# scripts/xfstests/report.sh DIR — the Markdown table of every fstests run
# in DIR (the JSON files scripts/xfstests.sh writes), beside gocryptfs's
# published run. Prints to stdout; scripts/xfstests.sh writes it to DIR/README.md.
set -euo pipefail
DIR="${1:?usage: report.sh RESULTS_DIR}"

# One JSON field (the files are written by scripts/xfstests.sh: one field a line).
field() { sed -n "s/^  \"$2\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" "$1" | head -n 1; }
list() { sed -n "s/^  \"$2\": \[\(.*\)\],\{0,1\}$/\1/p" "$1" | tr -d '"' | sed 's/, / /g'; }

cat <<'HEAD'
# fstests (xfstests) on warpfs

Made by `scripts/xfstests.sh` (one JSON file per mode and transport beside
this file). `ran` counts the tests that ran (passed + failed); `not run` the
ones fstests left out because the file system or the machine lacks what they
need (reflinks, shutdown, quotas, a block device, the fsgqa user...).
Failures listed in `scripts/xfstests/expected-failures.txt` are explained
there; `unexpected` ones fail the script.

| run | tests | ran | passed | failed | unexpected | not run | fsck | time |
|---|---|---|---|---|---|---|---|---|
HEAD
# A long list of tests is shown by its count.
tests() {
    local t
    t="$(field "$1" tests)"
    if (($(wc -w <<<"$t") > 3)); then echo "$(wc -w <<<"$t") tests ($(field "$1" scope))"; else echo "$t"; fi
}
for f in "$DIR"/*.json; do
    [[ -e $f ]] || continue
    printf '| warpfs %s, %s (%s, kernel %s, %s, %s) | %s | %s | %s | %s | %s | %s | %s | %ss |\n' \
        "$(field "$f" mode)" "$(field "$f" transport)" "$(field "$f" scope)" "$(field "$f" kernel)" "$(field "$f" backing)" \
        "$(field "$f" warpfs)" "$(tests "$f")" "$(field "$f" ran)" "$(field "$f" passed)" \
        "$(field "$f" failed)" "$(list "$f" unexpected_failures | wc -w)" "$(field "$f" notrun)" \
        "$([[ $(field "$f" fsck_clean) == true ]] && echo clean || echo PROBLEMS)" "$(field "$f" seconds)"
done
cat <<'GOCRYPTFS'
| gocryptfs v1.7.1 (published, 2019-10-10, kernel 5.2, fuse-xfstests) | every generic and shared test | 155 | 145 | 10 | - | 352 | - | 4046s |

gocryptfs's counts are from its own published run,
<https://github.com/rfjakob/gocryptfs/blob/master/Documentation/XFSTESTS.md>:
`Failed 10 of 507 tests` over every `generic` and `shared` test of its
fstests fork of 2019, 352 of them not run (fstests then counted the tests
it did not run among the 507). Its failures: generic/035, 062, 093, 097,
403, 426, 466, 467, 477, 484. Both the fstests version and the test list
differ from the runs above (the `quick` group of a 2026 fstests), so
compare the failures, not the totals.

## Failures
GOCRYPTFS
for f in "$DIR"/*.json; do
    [[ -e $f ]] || continue
    printf -- '- warpfs %s, %s (%s): %s\n' "$(field "$f" mode)" "$(field "$f" transport)" "$(field "$f" scope)" \
        "$(list "$f" failures | sed 's/^$/none/')"
done
# Notes kept beside the results (how the machine was, what changed between runs).
if [[ -f $DIR/NOTES.md ]]; then
    echo
    cat "$DIR/NOTES.md"
fi
