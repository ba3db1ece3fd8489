#!/usr/bin/env bash
# Runs every test of moco-rs; installs what the tests need (MariaDB from Debian, the
# manifest validators from PyPI). Real-server tests start their own mariadbd processes on
# free loopback ports and stop them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/install.sh
ensure_mariadb
export CARGO_TERM_COLOR=never

step() { printf '\n=== %s\n' "$*"; }

step "format"
cargo fmt --all -- --check
step "clippy"
cargo clippy --workspace --all-targets -- -D warnings
step "tests (unit, property, scenario, real MariaDB, moco local end to end)"
cargo test --workspace
step "fuzz targets compile"
cargo build --quiet --manifest-path fuzz/Cargo.toml
step "manifests"
bash scripts/validate-manifests.sh
