#!/usr/bin/env bash
# bench/reverse.sh — reverse mode side by side with gocryptfs -reverse, in
# one run, over one PLAINDIR on tmpfs: a 1 GiB file of random data and the
# Linux source tree (Debian's linux-source, untarred without drivers/ and
# arch/; a generated tree of 20,000 files when it is not installed).
#
# Per peer, REPS times interleaved, each view mounted cold (fresh mount):
#   seq-read   dd of the 1 GiB file's view, 1 MiB reads, to /dev/null (MB/s)
#   rsync      rsync -a of the whole view to an empty directory (s)
#   rsync-again the same rsync once more, nothing changed (s)
# Peers: warpfs (mount --reverse, the default config), warpfs-summary (a
# config with --file-summary on: every file of the view is summed once more
# when opened), gocryptfs (-reverse), and "plain" (rsync/dd of PLAINDIR
# itself: no FUSE, no crypto) as the ceiling. The daemons run on CPUs
# $FS_CPUS, dd and rsync on $CLIENT_CPU (taskset; by default neither is
# placed).
# Prints a Markdown table and writes
# bench/results/DATE-reverse/reverse.{json,md} (DATE the UTC day).
#
#   flock /work/bench.lock bash bench/reverse.sh
#
# Environment: REPS (3), BIG_MIB (1024), WARPFS (target/release/warpfs),
# OUT (bench/results/DATE-reverse), TREE_SRC (linux; `generated` for the generated tree).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=$(realpath "${WARPFS:-target/release/warpfs}")
REPS=${REPS:-3}
BIG_MIB=${BIG_MIB:-1024}
OUT=${OUT:-bench/results/$(date -u +%F)-reverse}
FS_CPUS=${FS_CPUS:-}
CLIENT_CPU=${CLIENT_CPU:-}
# pin CPUS CMD...: CMD on CPUS (taskset), or where the scheduler puts it
# when CPUS is empty (the default: no hand placement).
pin() {
    local c=$1
    shift
    if [ -n "$c" ]; then taskset -c "$c" "$@"; else "$@"; fi
}
command -v gocryptfs >/dev/null || { echo "needs gocryptfs (apt-get install gocryptfs)" >&2; exit 1; }
command -v rsync >/dev/null || { echo "needs rsync" >&2; exit 1; }

D=$(mktemp -d /dev/shm/warpfs-reverse.XXXX)
cleanup() {
    for m in "$D"/mnt-*; do
        [ -d "$m" ] && { fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; }
    done
    rm -rf "$D"
}
trap cleanup EXIT
P="$D/plain"
mkdir -p "$P"
echo "correct horse battery staple" >"$D/pw"
head -c $((BIG_MIB << 20)) /dev/urandom >"$P/big.bin"
tb=(/usr/src/linux-source-*.tar.xz)
if [ -e "${tb[0]}" ] && [ "${TREE_SRC:-linux}" = linux ]; then
    # Without drivers/ and arch/ (most of its files), so that a run of
    # three repetitions stays within a few minutes.
    tar -xJf "${tb[0]}" -C "$P" --exclude='*/drivers' --exclude='*/arch'
    TREE="$(basename "${tb[0]}" .tar.xz) without drivers/ and arch/ ($(find "$P" -type f | wc -l) files)"
else
    python3 - "$P/tree" <<'EOF'
import os, random, sys
r = random.Random(7)
root = sys.argv[1]
for i in range(20000):
    d = os.path.join(root, f"d{i % 97}", f"e{i % 13}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}.c"), "wb") as f:
        f.write(r.randbytes(int(r.expovariate(1 / 12000)) + 1))
EOF
    TREE="generated ($(find "$P/tree" -type f | wc -l) files)"
fi
TREE_BYTES=$(du -sb "$P" | cut -f1)

"$B" init --reverse --passfile "$D/pw" --quiet "$P" >/dev/null
gocryptfs -q -init -reverse -passfile "$D/pw" -scryptn 16 "$P" >/dev/null
# The summary config lives outside PLAINDIR; the default one is left out
# of its view.
"$B" init --reverse --file-summary on --config "$D/summary.conf" --passfile "$D/pw" --quiet "$P" >/dev/null
mkdir -p "$D/mnt-warpfs" "$D/mnt-warpfs-summary" "$D/mnt-gocryptfs"

mount_peer() {
    case $1 in
    warpfs) pin "$FS_CPUS" "$B" mount --reverse --passfile "$D/pw" --exclude .gocryptfs.reverse.conf \
        "$P" "$D/mnt-warpfs" ;;
    warpfs-summary) pin "$FS_CPUS" "$B" mount --reverse --passfile "$D/pw" --config "$D/summary.conf" \
        --exclude .gocryptfs.reverse.conf --exclude .warpfs.reverse.conf "$P" "$D/mnt-warpfs-summary" ;;
    gocryptfs) pin "$FS_CPUS" gocryptfs -q -reverse -passfile "$D/pw" -exclude .warpfs.reverse.conf \
        "$P" "$D/mnt-gocryptfs" ;;
    esac
}
umount_peer() { [ "$1" = plain ] || fusermount3 -u "$D/mnt-$1"; }
src() { if [ "$1" = plain ]; then echo "$P"; else echo "$D/mnt-$1"; fi; }
big_of() {
    if [ "$1" = plain ]; then echo "$P/big.bin"; else find "$(src "$1")" -maxdepth 1 -type f -size +$((BIG_MIB / 2))M | head -1; fi
}
now() { date +%s.%N; }
declare -A R
peers=(warpfs warpfs-summary gocryptfs plain)
for rep in $(seq "$REPS"); do
    for p in "${peers[@]}"; do
        [ "$p" = plain ] || mount_peer "$p"
        f=$(big_of "$p")
        t0=$(now)
        pin "$CLIENT_CPU" dd if="$f" of=/dev/null bs=1M status=none
        t1=$(now)
        R[$p,seq-read,$rep]=$(python3 -c "print(round($(stat -c %s "$f") / ($t1 - $t0) / 1e6, 1))")
        umount_peer "$p"
        [ "$p" = plain ] || mount_peer "$p"
        dst="$D/dst-$p"
        rm -rf "$dst"
        t0=$(now)
        pin "$CLIENT_CPU" rsync -a "$(src "$p")/" "$dst/"
        t1=$(now)
        pin "$CLIENT_CPU" rsync -a "$(src "$p")/" "$dst/"
        t2=$(now)
        R[$p,rsync,$rep]=$(python3 -c "print(round($t1 - $t0, 3))")
        R[$p,rsync-again,$rep]=$(python3 -c "print(round($t2 - $t1, 3))")
        rm -rf "$dst"
        umount_peer "$p"
        echo "rep $rep $p: seq-read ${R[$p,seq-read,$rep]} MB/s, rsync ${R[$p,rsync,$rep]} s, again ${R[$p,rsync-again,$rep]} s" >&2
    done
done

json=$(for p in "${peers[@]}"; do for m in seq-read rsync rsync-again; do
    vals=$(for rep in $(seq "$REPS"); do printf '%s,' "${R[$p,$m,$rep]}"; done)
    printf '{"peer":"%s","metric":"%s","values":[%s]}\n' "$p" "$m" "${vals%,}"
done; done)
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
GIT=$(git rev-parse --short=12 HEAD)$(git diff --quiet || echo " (dirty)")
mkdir -p "$OUT"
python3 - "$OUT" "$TREE" "$TREE_BYTES" "$BIG_MIB" "$REPS" "$CPU" "$GIT" "$(gocryptfs -version | head -1)" <<EOF
import json, statistics, sys, datetime
out, tree, tree_bytes, big, reps, cpu, git, goc = sys.argv[1:]
rows = [json.loads(l) for l in """$json""".splitlines() if l.strip()]
med = {(r["peer"], r["metric"]): statistics.median(r["values"]) for r in rows}
when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
doc = {"when": when, "git": git, "cpu": cpu, "tree": tree, "tree_bytes": int(tree_bytes),
       "big_mib": int(big), "reps": int(reps), "gocryptfs": goc, "runs": rows,
       "medians": [{"peer": p, "metric": m, "median": v} for (p, m), v in med.items()]}
open(f"{out}/reverse.json", "w").write(json.dumps(doc, indent=2) + "\n")
lines = [f"# Reverse mode: warpfs mount --reverse vs gocryptfs -reverse", "",
         f"{when} · {cpu}, 2 cores, shared with other work · git {git} · {goc} · tmpfs PLAINDIR: "
         f"{big} MiB random file + {tree}, {int(tree_bytes) / 1e6:.0f} MB in all · medians of {reps} "
         f"interleaved runs, each view freshly mounted · \`flock /work/bench.lock bash bench/reverse.sh\`", "",
         "| peer | seq read of the view, MB/s | rsync -a of the view, s | rsync -a again, nothing changed, s |",
         "|---|---:|---:|---:|"]
for p in ["warpfs", "warpfs-summary", "gocryptfs", "plain"]:
    lines.append(f"| {p} | {med[(p, 'seq-read')]:.1f} | {med[(p, 'rsync')]:.2f} | {med[(p, 'rsync-again')]:.2f} |")
w, g = "warpfs", "gocryptfs"
lines += ["", f"warpfs / gocryptfs: sequential read {med[(w, 'seq-read')] / med[(g, 'seq-read')]:.2f}x, "
          f"rsync {med[(g, 'rsync')] / med[(w, 'rsync')]:.2f}x faster, "
          f"rsync again {med[(g, 'rsync-again')] / med[(w, 'rsync-again')]:.2f}x faster. "
          "\`plain\` is rsync/dd of PLAINDIR itself (no FUSE, no encryption).", "",
          f"file summaries (warpfs-summary / warpfs): sequential read {med[('warpfs-summary', 'seq-read')] / med[(w, 'seq-read')]:.2f}x, "
          f"rsync {med[(w, 'rsync')] / med[('warpfs-summary', 'rsync')]:.2f}x the speed, "
          f"rsync again {med[(w, 'rsync-again')] / med[('warpfs-summary', 'rsync-again')]:.2f}x the speed."]
open(f"{out}/reverse.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
