#!/usr/bin/env bash
# Runs a replicated cluster on this machine with `moco local` (the embedded default).
# Installs MariaDB (Debian packages) when no server is found, builds moco, and starts
# a 3-instance cluster in ./.moco-local in the foreground (Ctrl-C stops it).
# Any arguments are passed to `moco local` instead, e.g. `scripts/local.sh status --dir .moco-local`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/install.sh
ensure_mariadb
if [ $# -eq 0 ]; then
  set -- up --dir .moco-local --replicas 3
fi
exec cargo run --quiet --release -p moco-bin -- local "$@"
