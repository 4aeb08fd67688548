# bench/peers/plain.sh — the plain backing directory, no FUSE at all: the
# shellcheck shell=bash
# ceiling of the backing store itself (tmpfs or disk). Benchmark peer sourced
# by bench/run.sh. plain_nofuse makes the harness run the workloads in the
# backing directory and skip mount/umount (caches are still dropped); there is
# no daemon, so its daemon CPU is 0 and its CPU efficiency is not defined.

plain_available() { true; }
plain_version() { printf 'no FUSE (%s)\n' "$(uname -r)"; }
plain_crypto() { false; }
plain_nofuse() { true; }
plain_init() { :; }
# shellcheck disable=SC2034 # read by the harness
plain_mount() { PEER_PID=""; }
plain_umount() { :; }
