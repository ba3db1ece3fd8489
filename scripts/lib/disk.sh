# Sourced by scripts/test.sh under `set -euo pipefail`.
# disk: prints the size of the target directory and the free disk, so a CI log shows where the
# space goes (a run once failed with "No space left on device").
disk() {
    # `|| true`: before the first build the directory does not exist, du fails, and under
    # pipefail the assignment would end the run.
    local used
    used=$(du -sh "${CARGO_TARGET_DIR:-target}" 2>/dev/null | cut -f1) || true
    echo "disk: ${used:-nothing} in the target directory, $(df -h --output=avail . | tail -1 | tr -d ' ') free"
}
