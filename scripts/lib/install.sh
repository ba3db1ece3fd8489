# Shared install helpers for the scripts; sourced, not run.

# as_root CMD...: runs CMD as root (directly, or through sudo when available).
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "need root to run: $*" >&2; return 1; fi
}

# ensure_mariadb: installs mariadb-server and mariadb-backup from Debian when missing.
ensure_mariadb() {
  export PATH="$PATH:/usr/sbin:/usr/local/sbin"
  local missing=()
  command -v mariadbd >/dev/null || missing+=(mariadb-server)
  command -v mariadb-backup >/dev/null || missing+=(mariadb-backup)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]} ..." >&2
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# ensure_moto: an S3-compatible server for the object-store tests (moto's, from PyPI) in a
# virtualenv under the cache directory; exports MOCO_MOTO_SERVER.
ensure_moto() {
  local venv="${XDG_CACHE_HOME:-$HOME/.cache}/moco-rs/moto-5.2.5"
  if [ ! -x "$venv/bin/moto_server" ]; then
    echo "installing moto 5.2.5 (S3 test server) into $venv ..." >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "moto[server]==5.2.5"
  fi
  export MOCO_MOTO_SERVER="$venv/bin/moto_server"
}

# ensure_azurite: an Azure Blob Storage emulator for the object-store tests (Azurite, from npm)
# under the cache directory; exports MOCO_AZURITE_BLOB.
ensure_azurite() {
  local prefix="${XDG_CACHE_HOME:-$HOME/.cache}/moco-rs/azurite-3.35.0"
  if [ ! -x "$prefix/node_modules/.bin/azurite-blob" ]; then
    echo "installing Azurite 3.35.0 (Azure Blob test server) into $prefix ..." >&2
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --save-exact --no-audit --no-fund --loglevel=error \
      azurite@3.35.0 >/dev/null
  fi
  export MOCO_AZURITE_BLOB="$prefix/node_modules/.bin/azurite-blob"
}

# ensure_kube_deps: what the real control plane and the Pod runner use besides their own
# builds (scripts/kube.sh): Go for the build, openssl for the certificates, iproute2 for the
# Pods' network, and Debian's mysqld_exporter, which the runner's image table maps MOCO's
# exporter image to. Exports MOCO_MYSQLD_EXPORTER.
ensure_kube_deps() {
  local missing=()
  command -v openssl >/dev/null || missing+=(openssl)
  command -v ip >/dev/null || missing+=(iproute2)
  [ -x /usr/bin/prometheus-mysqld-exporter ] || missing+=(prometheus-mysqld-exporter)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]} ..." >&2
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
  command -v go >/dev/null || { echo "no go command: the control plane is built from Go modules (Go 1.26)" >&2; return 1; }
  export MOCO_MYSQLD_EXPORTER=/usr/bin/prometheus-mysqld-exporter
}

# ensure_nextest: cargo-nextest, which runs the test command's tests (a process per test, one
# pool for every binary, per-test times), at the version the configuration was written for.
NEXTEST_VERSION=0.9.151
ensure_nextest() {
  if [ "$(cargo nextest --version 2>/dev/null | awk 'NR==1 {print $2}')" != "$NEXTEST_VERSION" ]; then
    echo "installing cargo-nextest $NEXTEST_VERSION (a few minutes, once) ..." >&2
    cargo install cargo-nextest --locked --version "$NEXTEST_VERSION" --quiet
  fi
}
