#!/usr/bin/env bash
# Mutation testing of moco-core's decision modules (docs/testing.md, "Mutation score").
# Usage: scripts/mutants.sh [SHARD]   e.g. scripts/mutants.sh 0/6
# Needs cargo-mutants (`cargo install cargo-mutants --locked`); reads .cargo/mutants.toml.
# About 4 hours on 2 cores for everything; a shard takes its share.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo-mutants >/dev/null; then
  echo "cargo-mutants is missing: cargo install cargo-mutants --locked" >&2
  exit 2
fi
out="target/mutants${1:+-${1//\//-of-}}"
args=(--no-shuffle -o "$out")
if [ $# -gt 0 ]; then
  args+=(--shard "$1")
fi
status=0
cargo mutants "${args[@]}" || status=$?
echo
echo "survivors (missed.txt); each must be killed by a test or listed as equivalent in docs/testing.md:"
cat "$out/mutants.out/missed.txt" 2>/dev/null || true
exit "$status"
