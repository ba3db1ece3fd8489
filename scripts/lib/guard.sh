# Sourced by scripts/test.sh under `set -euo pipefail`, before anything else runs.
# refuse_weakening_env: the test command is the project's proof, so it refuses to start when the
# environment holds a variable that would let it pass while proving less: fewer property cases,
# a simulator that tolerates engine bugs, golden files or snapshots rewritten instead of
# compared, a shorter soak, skipped servers. docs/testing.md lists them. To run a weaker or
# narrower suite on purpose, run `cargo test` directly.
WEAKENING_VARIABLES=(
    "PROPTEST_*: fewer property cases or a fixed seed lower the coverage minima"
    "SIM_*: SIM_STRICT=0 tolerates engine bugs, SIM_SEED/SIM_COVERAGE_CASES narrow the fault tests"
    "UPDATE_GOLDEN: the my.cnf golden test rewrites its files and passes"
    "INSTA_*: snapshot tests accept or rewrite what they should compare"
    "MOCO_SOAK_*: a shorter or fixed soak"
    "MOCO_SKIP_*: real servers, object stores or the control plane skipped"
    "MOCO_REAL_SERVER_LEDGER: the test command keeps its own ledger"
    "MOCO_TEST_MYSQLD: the test command runs each server's suites on the server it installs"
)

refuse_weakening_env() {
    local found=() entry pattern name
    for entry in "${WEAKENING_VARIABLES[@]}"; do
        pattern=${entry%%:*}
        while IFS= read -r name; do
            # shellcheck disable=SC2053 # the pattern is a glob on purpose
            if [[ -n $name && $name == $pattern ]]; then
                found+=("$name (${entry#*: })")
            fi
        done < <(compgen -e)
    done
    if [ ${#found[@]} -gt 0 ]; then
        {
            echo "scripts/test.sh: refusing to run with variables that weaken the proof:"
            printf '  %s\n' "${found[@]}"
            echo "unset them (or run cargo test directly for a narrower run)"
        } >&2
        exit 2
    fi
}
