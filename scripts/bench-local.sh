#!/usr/bin/env bash
# Measures moco local on a 3-instance MariaDB cluster: bring-up, switchover write
# unavailability, failover (kill -9 → first acknowledged write), clone of ~100 MB.
# BENCH_RUNS (default 3) and BENCH_CLONE_MB (default 100) tune it. Installs MariaDB if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/install.sh
ensure_mariadb
cargo build --quiet --release -p moco-bin -p moco-bench --bins
target="${CARGO_TARGET_DIR:-target}/release"
MOCO_BIN="$target/moco" exec "$target/local_bench"
