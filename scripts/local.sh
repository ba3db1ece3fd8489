#!/usr/bin/env bash
# Runs a replicated cluster on this machine with `moco local` (the embedded default).
# Installs MariaDB (Debian packages) when no server is found, builds moco, and starts
# a 3-instance cluster in ./.moco-local in the foreground (Ctrl-C stops it). Run again, it
# resumes the cluster it created (`moco local resume`); `moco local down --dir .moco-local
# --wipe` removes it.
# Any arguments are passed to `moco local` instead, e.g. `scripts/local.sh status --dir .moco-local`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/install.sh
ensure_mariadb
if [ $# -eq 0 ]; then
  if [ -f .moco-local/cluster.json ]; then
    set -- resume --dir .moco-local
  else
    set -- up --dir .moco-local --replicas 3
  fi
fi
exec cargo run --quiet --profile local -p moco-bin --bin moco -- local "$@"
