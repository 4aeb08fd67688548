#!/usr/bin/env bash
# bench/index.sh — the index of bench/results/README.md, made from the run
# folders (bench/results/YYYY-MM-DD-TOPIC/, the scheme at the top of
# bench/README.md).
#
#   bash bench/index.sh           rewrite the index in bench/results/README.md
#   bash bench/index.sh --check   exit 1, saying so, when the index differs
#
# Per topic, newest run first: the newest is the reference, the older ones
# are its history. A run's line is the first `# ` title of its README.md
# (else of its first Markdown file); its commit the first word of README.md's
# `- Commit:` line, else the first "commit", "git_commit", "git" or "warpfs"
# (a hex value) of its JSON, TOPIC.json first, else `?`. The test
# crates/warpfs/tests/bench_results.rs fails when a folder is missing from
# the index.
set -euo pipefail
RESULTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/results"
README="$RESULTS/README.md"
BEGIN='<!-- index: made from the run folders by `bash bench/index.sh`; edit the folders, not this table -->'
END='<!-- end of index -->'
CHECK=false
case "${1:-}" in
--check) CHECK=true ;;
"") ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac

title_of() { # DIR -> the run's one line
    local d="$1" f
    for f in "$d/README.md" "$d"/*.md; do
        [[ -f $f ]] || continue
        sed -n 's/^# //p' "$f" | head -n 1 | sed 's/|/\\|/g'
        return
    done
    echo "?"
}

commit_of() { # DIR TOPIC -> the commit measured, short
    local d="$1" c=""
    if [[ -f $d/README.md ]]; then
        c="$(sed -n 's/^- Commit: \([0-9a-f]\{7,40\}\).*/\1/p' "$d/README.md" | head -n 1)"
    fi
    if [[ -z $c ]]; then
        # The JSON named after the topic first, then the others.
        c="$(cat "$d/${2:-}.json" "$d"/*.json 2>/dev/null |
            grep -oE '"(commit|git_commit|git|warpfs)": *"[0-9a-f]{7,40}"' | head -n 1 |
            sed -E 's/.*"([0-9a-f]+)"$/\1/')" || true
    fi
    [[ -n $c ]] && echo "${c:0:7}" || echo "?"
}

table() {
    echo "| topic | run | date | commit | what it shows |"
    echo "|---|---|---|---|---|"
    local name topic date prev=""
    for d in "$RESULTS"/*/; do
        name="$(basename "$d")"
        [[ $name =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}-[a-z0-9][a-z0-9-]*$ ]] || continue
        printf '%s\t%s\n' "${name:11}" "${name:0:10}"
    done | sort -t$'\t' -k1,1 -k2,2r | while IFS=$'\t' read -r topic date; do
        name="$date-$topic"
        if [[ $topic != "$prev" ]]; then
            printf '| **%s** | [%s](%s/) reference | %s | %s | %s |\n' "$topic" "$name" "$name" "$date" \
                "$(commit_of "$RESULTS/$name" "$topic")" "$(title_of "$RESULTS/$name")"
        else
            printf '| | [%s](%s/) history | %s | %s | %s |\n' "$name" "$name" "$date" \
                "$(commit_of "$RESULTS/$name" "$topic")" "$(title_of "$RESULTS/$name")"
        fi
        prev="$topic"
    done
}

[[ -f $README ]] || { echo "bench/index.sh: no $README" >&2; exit 1; }
grep -qF -- "$BEGIN" "$README" && grep -qF -- "$END" "$README" ||
    { echo "bench/index.sh: $README has no index markers" >&2; exit 1; }
want="$(mktemp)"
trap 'rm -f "$want"' EXIT
{
    sed -n "1,/^$(printf '%s' "$BEGIN" | sed 's/[][\/.*^$]/\\&/g')\$/p" "$README"
    echo
    table
    echo
    sed -n "/^$END\$/,\$p" "$README"
} >"$want"
if $CHECK; then
    cmp -s "$want" "$README" ||
        { echo "bench/results/README.md's index differs from the folders: run bash bench/index.sh" >&2; exit 1; }
    exit 0
fi
cp "$want" "$README"
