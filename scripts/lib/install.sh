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

# ensure_mysql: MySQL's current LTS (9.7) from Debian's unstable suite, in a private root under
# the cache directory (its programs need a newer C library than the machine's, so they run
# through the root's own loader), with wrappers in its bin/. Exports MOCO_MYSQL_MYSQLD (the
# wrapper of mysqld; tests run on it when it is given as MOCO_TEST_MYSQLD) and
# MOCO_MYSQL_VERSION. Debian's unstable suite keeps only its newest
# build: any 9.7 release it serves is taken, another series is refused. A failed build leaves
# nothing behind.
MYSQL_SERIES=9.7
ensure_mysql() {
  local cache="${XDG_CACHE_HOME:-$HOME/.cache}/moco-rs" dir
  for dir in "$cache"/mysql-"$MYSQL_SERIES".*; do
    if [ -f "$dir/.complete" ]; then
      export MOCO_MYSQL_MYSQLD="$dir/bin/mysqld" MOCO_MYSQL_VERSION="${dir##*/mysql-}"
      return 0
    fi
  done
  export PATH="$PATH:/usr/sbin:/usr/local/sbin"
  if ! command -v debootstrap >/dev/null; then
    echo "installing debootstrap (to build MySQL's private root) ..." >&2
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq debootstrap >/dev/null ||
      { echo "ensure_mysql: cannot install debootstrap from Debian" >&2; return 1; }
  fi
  local free_mb
  free_mb=$(df -Pm "$(dirname "$cache")" 2>/dev/null | awk 'NR==2 {print $4}')
  if [ -n "$free_mb" ] && [ "$free_mb" -lt 2048 ]; then
    echo "ensure_mysql: ${free_mb} MiB free under $(dirname "$cache"); MySQL's root needs about 700 MiB and its tests more: free at least 2 GiB" >&2
    return 1
  fi
  mkdir -p "$cache"
  local build
  build=$(mktemp -d "$cache/mysql-build.XXXXXX")
  # Whatever happens below, a half-made root does not stay.
  trap 'rm -rf "$build"' RETURN
  echo "installing MySQL $MYSQL_SERIES (mysql-server-core from Debian's unstable suite) into $cache ..." >&2
  if ! as_root debootstrap --variant=minbase --include=mysql-server-core,mysql-client-core \
      sid "$build/root" http://deb.debian.org/debian >"$build.log" 2>&1; then
    echo "ensure_mysql: debootstrap failed; the end of its log ($build.log):" >&2
    tail -5 "$build.log" >&2
    grep -q "Couldn't find these debs\|Unable to locate\|Failure trying to run" "$build.log" &&
      echo "ensure_mysql: is mysql-server-core still served by Debian's unstable suite?" >&2
    return 1
  fi
  rm -f "$build.log"
  local version
  version=$(dpkg-query --admindir="$build/root/var/lib/dpkg" -W -f '${Version}' mysql-server-core)
  version=${version%%-*}
  case "$version" in
    "$MYSQL_SERIES".*) ;;
    *) echo "ensure_mysql: Debian's unstable suite serves MySQL $version; moco-rs tests the $MYSQL_SERIES series only" >&2
       return 1 ;;
  esac
  mkdir -p "$build/bin"
  local tool
  for tool in mysqld mysql mysqlbinlog mysqldump mysqladmin; do
    local path=usr/bin/$tool
    [ "$tool" = mysqld ] && path=usr/sbin/mysqld
    write_mysql_wrapper "$build/bin/$tool" "$path"
  done
  # The wrapper is checked as every user of it runs it.
  local said
  if ! said=$("$build/bin/mysqld" --version 2>&1) || [[ "$said" != *" $version"* ]]; then
    echo "ensure_mysql: the installed mysqld does not run: $said" >&2
    return 1
  fi
  local final="$cache/mysql-$version"
  rm -rf "$final"
  mv "$build" "$final"
  # The wrappers name their root: rewritten for its final place.
  for tool in "$final"/bin/*; do sed -i "s|$build|$final|g" "$tool"; done
  touch "$final/.complete"
  trap - RETURN
  echo "MySQL $version installed in $final" >&2
  export MOCO_MYSQL_MYSQLD="$final/bin/mysqld" MOCO_MYSQL_VERSION="$version"
}

# write_mysql_wrapper FILE PROGRAM: a script that runs the root's PROGRAM (a path inside the
# root) through the root's loader and libraries. mysqld reads no option file unless told
# (`--no-defaults`, or the caller's own `--defaults-file` first): the machine's
# /etc/mysql/my.cnf belongs to MariaDB and mysqld refuses it. Its compiled-in directories are
# pointed into the root.
write_mysql_wrapper() {
  local file=$1 program=$2 root
  root="$(dirname "$(dirname "$file")")/root"
  cat >"$file" <<WRAPPER
#!/bin/sh
# Runs MySQL's $program from the private root $root (see scripts/lib/install.sh).
root='$root'
loader="\$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
libs="\$root/usr/lib/x86_64-linux-gnu:\$root/usr/lib/x86_64-linux-gnu/mysql/private"
WRAPPER
  if [ "$program" = usr/sbin/mysqld ]; then
    cat >>"$file" <<'WRAPPER'
first=--no-defaults
case "${1:-}" in
  --no-defaults|--defaults-file=*) first=$1; shift ;;
esac
exec "$loader" --library-path "$libs" "$root/usr/sbin/mysqld" "$first" \
  --basedir="$root/usr" --plugin-dir="$root/usr/lib/mysql/plugin" \
  --lc-messages-dir="$root/usr/share/mysql" --character-sets-dir="$root/usr/share/mysql/charsets" "$@"
WRAPPER
  else
    cat >>"$file" <<WRAPPER
exec "\$loader" --library-path "\$libs" "\$root/$program" "\$@"
WRAPPER
  fi
  chmod 0755 "$file"
}
