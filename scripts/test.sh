#!/usr/bin/env bash
# Runs every test of moco-rs; installs what the tests need (MariaDB and mysqld_exporter from
# Debian, cargo-nextest from crates.io, moto's S3 server and the manifest validators from PyPI,
# Azurite from npm, a Kubernetes control plane and cert-manager built from Go modules). Real-server tests start
# their own mariadbd processes on free loopback ports and stop them; the control-plane tests
# share one control plane (scripts/kube.sh), started here and stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/guard.sh
refuse_weakening_env
source scripts/lib/install.sh
source scripts/lib/disk.sh
ensure_mariadb
ensure_mysql
ensure_moto
ensure_azurite
ensure_kube_deps
ensure_nextest
export CARGO_TERM_COLOR=never
# A clean checkout gains nothing from incremental compilation, and its files doubled the
# target directory; CI's disk is not large (a run once failed with "No space left on device").
export CARGO_INCREMENTAL=0
# The real-server tests of the workspace on MariaDB (moco-adapters/tests, tests/tests); raise it
# when adding one.
MIN_REAL_SERVER_TESTS=112
# The real-server tests that run on MySQL too (MYSQL_SUITE below); raise it when adding one.
MIN_MYSQL_REAL_SERVER_TESTS=31
# The suites that run on MySQL $MOCO_MYSQL_VERSION as well (issue 47 brings the rest over):
# moco-adapters' real-server tests, but MariaDB's own (resources_mariadb) and the one whose
# MySQL failure is still open (declared grants on a database whose name holds `_`); and the
# `moco local` drills that pass on MySQL: bring-up (1, 3, 5 instances), bad input, kill -9
# failover, hung primary, switchover under writes, a killed manager mid-switchover, a lost
# majority, a refused operator account, the platform in process.
MYSQL_SUITE='(package(moco-adapters) & kind(test) & not test(/^resources_mariadb::/) & not test(=mysql_accounts::declared_accounts_and_databases_are_made_read_back_and_repaired))
  | (package(moco-tests) & (test(/^local_bringup::/) | test(/^local_bad_input::/) | test(/^local_failover::/) | test(/^local_hung::/) | test(/^local_switchover::/) | test(/^local_inprocess::/) | test(=local_faults::a_refused_operator_account_is_reported_and_recovers) | test(=local_faults::manager_killed_mid_switchover_converges) | test(=local_faults::primary_and_majority_down_is_lost)))'

step() { printf '\n=== %s\n' "$*"; }

disk
step "format"
cargo fmt --all -- --check
step "clippy"
cargo clippy --workspace --all-targets -- -D warnings
step "tests (unit, property, scenario, real MariaDB, moco local end to end)"
# Under the test command a missing server fails the real-server tests (never a skip), and
# each of them records itself in the ledger so that the count below shows they ran.
ledger=$(mktemp -d)
trap 'rm -rf "$ledger"' EXIT
export MOCO_REAL_SERVER_LEDGER="$ledger"
# The end-to-end tests run this `moco`, which `cargo test` builds with the workspace's features
# (moco-bin's own tests need it). Left to themselves they would run `cargo build -p moco-bin`,
# whose feature set differs: a second build of the shared dependencies, ~45 s and ~0.5 GB.
# The build's directory, absolute (CARGO_TARGET_DIR may be either).
target_dir=${CARGO_TARGET_DIR:-target}
case $target_dir in /*) ;; *) target_dir="$PWD/$target_dir" ;; esac
export MOCO_BIN="$target_dir/debug/moco"
# The tests' binaries first: the control plane runs the `pod-runner` and `moco` they build.
# (cargo-nextest builds them the same way, so its run below finds them built.)
cargo test --workspace --no-run
# The README's first command (`scripts/local.sh`, run by readme_first_command) builds `moco`
# with the `local` profile (Cargo.toml): built here, not in the middle of the run beside
# timing-sensitive tests.
step "build of moco as the README's first command builds it (profile local)"
cargo build --profile local -p moco-bin --bin moco
step "control plane (scripts/kube.sh up: kube-apiserver, kube-controller-manager, etcd, Pod runner)"
kube_dir="$target_dir/kube-test"
scripts/kube.sh down --dir "$kube_dir" >/dev/null 2>&1 || true # a killed run's leftovers
trap 'scripts/kube.sh down --dir "$kube_dir" || true; rm -rf "$ledger"' EXIT
MOCO_POD_RUNNER="$target_dir/debug/pod-runner" \
    scripts/kube.sh up --dir "$kube_dir" --nodes 3
# cert-manager, built once here (a cold build takes minutes): kube_install's control planes
# install it with the operator (`scripts/kube.sh install`); the shared one stays without both.
scripts/kube/build.sh cert-manager >/dev/null
export MOCO_KUBE_DIR="$kube_dir"
step "tests (the same, run by cargo-nextest: a process per test, binaries sharing one pool)"
# .config/nextest.toml: how many at once, the groups, which run alone. Its JUnit report
# gives every test's wall time: the slowest ten are printed, all of them kept.
tests_status=0
cargo nextest run --workspace --no-fail-fast || tests_status=$?
python3 scripts/lib/timings.py "$target_dir/nextest/default/junit.xml" \
    "$target_dir/test-times.tsv" 10 || true
[ "$tests_status" -eq 0 ] || exit "$tests_status"
step "tests on MySQL $MOCO_MYSQL_VERSION (the real-server suites that run on both servers)"
mysql_ledger=$(mktemp -d)
trap 'scripts/kube.sh down --dir "$kube_dir" || true; rm -rf "$ledger" "$mysql_ledger"' EXIT
MOCO_REAL_SERVER_LEDGER="$mysql_ledger" MOCO_TEST_MYSQLD="$MOCO_MYSQL_MYSQLD" \
    cargo nextest run --workspace --no-fail-fast -E "$MYSQL_SUITE"
step "doc tests (cargo-nextest runs none)"
cargo test --workspace --doc
# check_ledger DIR SERVER MIN: at least MIN tests recorded in DIR, with the parts they used.
check_ledger() {
    local ran
    ran=$(find "$1" -type f | wc -l)
    echo "real-server tests that ran on $2: $ran (want at least $3)"
    find "$1" -type f -exec cut -f2 {} + | sort | uniq -c
    if [ "$ran" -lt "$3" ]; then
        echo "fewer real-server tests ran on $2 than exist: a server test stopped using its server" >&2
        exit 1
    fi
}
check_ledger "$ledger" MariaDB "$MIN_REAL_SERVER_TESTS"
check_ledger "$mysql_ledger" MySQL "$MIN_MYSQL_REAL_SERVER_TESTS"
if find "$mysql_ledger" -type f -exec cut -f2 {} + | grep -qv '^Mysql '; then
    echo "a test of the MySQL pass ran on another server" >&2
    exit 1
fi
disk
step "fuzz (each target ${FUZZ_SECONDS:-60}s from fuzz/corpus)"
./scripts/fuzz.sh
step "manifests"
bash scripts/validate-manifests.sh
disk
