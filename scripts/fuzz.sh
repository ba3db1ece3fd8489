#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ for a bounded time, starting from the committed corpus.
#
#   scripts/fuzz.sh            each target for FUZZ_SECONDS (default 60)
#   scripts/fuzz.sh decide     one target
#   FUZZ_MERGE=1 scripts/fuzz.sh
#                              also merge what the run found into fuzz/corpus/<target>
#                              (minimised: only inputs that add coverage)
#
# libFuzzer with coverage instrumentation, built on the stable toolchain with the same rustc
# flags `cargo fuzz build -s none` uses, so no nightly toolchain and no cargo-fuzz are needed.
# A crash leaves its input in fuzz/artifacts/<target>/ and fails the run; reproduce it with
# `fuzz/target/<host triple>/release/<target> fuzz/artifacts/<target>/crash-…`.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-60}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(decide gtid_parse)
fi

export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
-Cdebug-assertions -Coverflow-checks"
# An explicit --target keeps RUSTFLAGS away from build scripts and proc macros (as cargo fuzz
# does): they are not linked with libFuzzer.
host=$(rustc -vV | sed -n 's/^host: //p')
cargo build --quiet --release --manifest-path fuzz/Cargo.toml --target-dir fuzz/target \
    --target "$host" --bins --locked
bin="fuzz/target/$host/release"

for target in "${targets[@]}"; do
    corpus="fuzz/corpus/$target"
    found=$(mktemp -d)
    artifacts="fuzz/artifacts/$target"
    mkdir -p "$corpus" "$artifacts"
    echo "fuzz $target: ${seconds}s from $(find "$corpus" -type f | wc -l) corpus inputs"
    # New inputs go to $found (the first directory); the committed corpus is only read.
    log="$found.log"
    status=0
    "$bin/$target" -max_total_time="$seconds" -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$artifacts/" "$found" "$corpus" >"$log" 2>&1 ||
        status=$?
    grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
    if [ "$status" -ne 0 ]; then
        tail -n 40 "$log" >&2
        echo "fuzz $target FAILED (exit $status); the input is in $artifacts/" >&2
        exit "$status"
    fi
    rm -f "$log"
    if [ "${FUZZ_MERGE:-0}" = 1 ]; then
        "$bin/$target" -merge=1 "$corpus" "$found" 2>&1 | grep -E 'MERGE-OUTER: [0-9]+ new files' || true
    fi
    rm -rf "$found"
done
