#!/usr/bin/env bash
# Measures `moco local backup` and `restore` on a 3-instance MariaDB cluster filled by sysbench,
# each against its floor measured in the same run (see docs/benchmarks.md, "Backups and
# point-in-time restore"):
#   1. backup throughput: `moco local backup` into a directory (and into moto's S3 when moto is
#      installed) against raw `mariadb-backup --stream > /dev/null` and `... | zstd -1 > file`
#      from the same replica;
#   2. peak memory of `moco local backup` (its own VmHWM, and /usr/bin/time's maximum over it
#      and its mariadb-backup child);
#   3. `moco local restore --replicas 1 --detach` against `zstd -d | mbstream -x` +
#      `mariadb-backup --prepare` + starting mariadbd on the result by hand;
#   4. the primary's write latency (sysbench oltp_write_only, p99) without a backup, with
#      `moco local backup` of a replica started at t=10 s, the same capped with --max-rate,
#      and with the raw pipeline instead: the whole run's p99, and the median of sysbench's
#      2 s p99s while the backup ran against the same seconds of the run without one;
#   5. with binlog archiving on (`moco local backup archive`, every 5 s), the largest distance
#      between now and the archive's progress mark (`checkedAt`) sampled every 200 ms while
#      sysbench writes.
#
# usage: scripts/bench-backup.sh [TABLES] [ROWS] [OUTDIR]
#   TABLES × ROWS sysbench rows (default 4 × 1,000,000 ≈ 1 GB; 40 × 1,000,000 ≈ 10 GB);
#   OUTDIR (default: a new directory under /tmp) gets the cluster, the backups and the logs;
#   the data is deleted at the end and results.txt and the logs are kept.
# Environment:
#   BENCH_RUNS=3          repetitions of the throughput, memory and restore measurements
#   BENCH_LAT_RUNS=1      repetitions of the latency runs (one per variant)
#   BENCH_LAT_SECONDS=40  length of each latency run (the backup starts at 10 s: a capped
#                         backup must end before the run does)
#   BENCH_LAT_VARIANTS="none moco capped floor"   which latency runs
#   BENCH_MAX_RATE=60Mi   the cap of the latency step's capped backup (`--max-rate`)
#   BENCH_STEPS=backup,s3,restore,latency,archive   which steps to run (backup is always run)
#   BENCH_KEEP=1          keep the cluster and the data (stop it with `moco local down`)
#   BENCH_REPLICAS=3      instances of the measured cluster; 1 leaves out the replicas' copies of
#                         the data and binlogs (10 GB on a small disk), and then the backups
#                         come from the primary and the latency step has no replica to use
#   MOCO_BIN=PATH         use this moco binary instead of building one
#   MOCO_MOTO_SERVER=PATH moto_server for the S3 step (default: scripts/lib/install.sh's cache)
set -euo pipefail

TABLES=${1:-4}
ROWS=${2:-1000000}
OUT=${3:-}
RUNS=${BENCH_RUNS:-3}
LAT_RUNS=${BENCH_LAT_RUNS:-1}
MAX_RATE=${BENCH_MAX_RATE:-60Mi}
LAT_SECONDS=${BENCH_LAT_SECONDS:-40}
LAT_VARIANTS=${BENCH_LAT_VARIANTS:-none moco capped floor}
STEPS=${BENCH_STEPS:-backup,s3,restore,latency,archive}
KEEP=${BENCH_KEEP:-0}
REPLICAS=${BENCH_REPLICAS:-3}

repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib/install.sh"
ensure_mariadb
if ! command -v sysbench >/dev/null; then
  echo "installing sysbench ..." >&2
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq sysbench >/dev/null
fi
for tool in zstd mbstream mariadb-backup mariadb jq python3 /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 1; }
done
if [ -z "${MOCO_BIN:-}" ]; then
  (cd "$repo" && cargo build --quiet --release -p moco-bin)
  MOCO_BIN="${CARGO_TARGET_DIR:-$repo/target}/release/moco"
fi
MOCO=$MOCO_BIN

if [ -z "$OUT" ]; then OUT=$(mktemp -d /tmp/moco-bench-backup.XXXXXX); fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [ -e "$OUT/bench" ]; then echo "$OUT/bench exists: give an empty OUTDIR" >&2; exit 1; fi
DIR=$OUT/bench               # the cluster; its name is "bench"
BUCKET=$OUT/backups          # moco's default bucket beside DIR
FLOOR=$OUT/floor             # the hand-made floors
LOGS=$OUT/logs
RESULTS=$OUT/results.txt
mkdir -p "$FLOOR" "$LOGS"
: >"$RESULTS"

moto_pid= floor_mysqld_pid=
cleanup() {
  set +e
  [ -n "$moto_pid" ] && kill "$moto_pid" 2>/dev/null && wait "$moto_pid" 2>/dev/null
  if [ -n "$floor_mysqld_pid" ]; then kill "$floor_mysqld_pid" 2>/dev/null; wait "$floor_mysqld_pid" 2>/dev/null; fi
  for d in "$OUT"/restored*; do
    [ -f "$d/cluster.json" ] && "$MOCO" local down --dir "$d" >/dev/null 2>&1
  done
  if [ "$KEEP" != 1 ]; then
    [ -f "$DIR/cluster.json" ] && "$MOCO" local down --dir "$DIR" >/dev/null 2>&1
    rm -rf "$DIR" "$BUCKET" "$FLOOR" "$OUT"/restored*
  fi
  echo "results: $RESULTS (logs in $LOGS)" >&2
}
trap cleanup EXIT

has_step() { [[ ",$STEPS," == *",$1,"* ]]; }
now_ms() { date +%s%3N; }
secs() { awk -v ms="$1" 'BEGIN { printf "%.2f", ms / 1000 }'; }
# record KEY VALUE: a result line, printed and kept.
record() { printf '%-44s %s\n' "$1" "$2" | tee -a "$RESULTS"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mbps() { awk -v b="$1" -v ms="$2" 'BEGIN { printf "%.0f", b / 1e6 / (ms / 1000) }'; }
# Before each timed step: the previous step's gigabytes are written back, and (as root) the
# page cache is dropped, so that every step reads from the disk and none pays for or profits
# from the one before it. At 10 GB the data no longer fits beside the copies in memory: a step
# run after another had read the same files found them cached (the floors ran after moco).
# The instances may still be writing after a large load (purge, page flushing), so settle
# also waits until less than 1 MB was written to the disk in a second (10 minutes at most),
# and says how long it waited.
DISK=$(basename "$(df --output=source "$OUT" | tail -1)")
disk_written_kb() { awk -v d="$DISK" '$3 == d { print int($10 / 2) }' /proc/diskstats; }
settle() {
  local before after waited=0
  sync
  if [ -n "$(disk_written_kb)" ]; then
    while :; do
      before=$(disk_written_kb); sleep 1; after=$(disk_written_kb)
      [ $((after - before)) -lt 1000 ] || [ "$waited" -ge 600 ] && break
      waited=$((waited + 1))
    done
    [ "$waited" -eq 0 ] || echo "  (waited $waited s for the disk to go quiet)" >&2
  fi
  if [ -w /proc/sys/vm/drop_caches ]; then echo 3 >/proc/sys/vm/drop_caches; fi
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
status_json() { "$MOCO" local status --dir "$1" --json; }

echo "== machine: $(nproc) cores, $(free -g | awk '/Mem:/ { print $2 }') GiB; $(mariadbd --version | awk '{ print $3 }'); $($MOCO --version 2>/dev/null || echo moco)" | tee -a "$RESULTS"
echo "== data: $TABLES tables x $ROWS rows; instances: $REPLICAS; runs: $RUNS; steps: $STEPS; out: $OUT" | tee -a "$RESULTS"

# ---------------------------------------------------------------- the cluster and its data
"$MOCO" local up --dir "$DIR" --replicas "$REPLICAS" --detach >"$LOGS/up.log" 2>&1
PPORT=$(status_json "$DIR" | jq -r '.endpoints.primary' | cut -d: -f2)
admin() { mariadb --defaults-extra-file="$DIR/client/moco-admin.cnf" "$@"; }
admin -e "CREATE DATABASE sbtest; CREATE USER sbtest@'%' IDENTIFIED BY 'sbpw';
          GRANT ALL ON sbtest.* TO sbtest@'%'"
SB=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$PPORT" --mysql-user=sbtest
    --mysql-password=sbpw --mysql-db=sbtest --tables="$TABLES" --table-size="$ROWS")
threads=$((TABLES < 2 ? TABLES : 2))
t0=$(now_ms)
sysbench oltp_read_write "${SB[@]}" --threads="$threads" prepare >"$LOGS/prepare.log" 2>&1
record "sysbench prepare (s)" "$(secs $(($(now_ms) - t0)))"

# Every replica has applied what the primary executed.
wait_caught_up() {
  local dir=$1 deadline=$(($(date +%s) + 600))
  while :; do
    if status_json "$dir" | jq -e '
        (.instances | map(select(.role == "primary")) | .[0].executedGtids) as $p
        | .state == "Healthy"
          and ([.instances[] | select(.role == "replica") | .executedGtids == $p and .lag == 0]
               | all)' >/dev/null; then
      return 0
    fi
    [ "$(date +%s)" -lt "$deadline" ] || { echo "replicas did not catch up" >&2; return 1; }
    sleep 1
  done
}
wait_caught_up "$DIR"
data_bytes=$(du -sb "$DIR/instances/0/data/sbtest" | cut -f1)
record "sbtest data on the primary (MB)" "$((data_bytes / 1000000))"

# ---------------------------------------------------------------- backup: moco against its floor
# moco_backup LOG [moco args...]: runs `moco local backup`, sets took_ms, moco_hwm_kb (moco's own
# peak RSS, its VmHWM read every 50 ms), time_rss_kb (/usr/bin/time: the largest of moco and its
# children), source (the instance) and raw_bytes / stored_bytes.
moco_backup() {
  local log=$1; shift
  local t0 tpid mpid hwm
  # Not during the latency step: a sync there would hit the writes being measured.
  [ "${no_settle:-0}" = 1 ] || settle
  t0=$(now_ms)
  /usr/bin/time -v -o "$log.time" "$MOCO" local backup --dir "$DIR" "$@" >"$log" 2>&1 &
  tpid=$!
  moco_hwm_kb=0 mpid=
  while kill -0 "$tpid" 2>/dev/null; do
    [ -n "$mpid" ] || mpid=$(pgrep -P "$tpid" || true)
    if [ -n "$mpid" ]; then
      hwm=$(awk '/VmHWM/ { print $2 }' "/proc/$mpid/status" 2>/dev/null || true)
      [ -n "$hwm" ] && [ "$hwm" -gt "$moco_hwm_kb" ] && moco_hwm_kb=$hwm
    fi
    sleep 0.05
  done
  took_ms=$(($(now_ms) - t0))
  if ! wait "$tpid"; then
    backup_failures=$((backup_failures + 1))
    echo "  a backup failed after $took_ms ms ($log): $(grep -m1 -E 'Was only able|error|Error' "$log" || tail -1 "$log")" >&2
    cat "$log" >>"$LOGS/failed-backups.log"
    return 1
  fi
  time_rss_kb=$(awk -F': ' '/Maximum resident/ { print $2 }' "$log.time")
  # "backed up instance 1 to moco/local/bench/... in 9.1 s: 450 bytes stored (1400 before compression), ..."
  source=$(sed -n 's/.*backed up instance \([0-9]*\) to.*/\1/p' "$log")
  stored_bytes=$(sed -n 's/.*: \([0-9]*\) bytes stored.*/\1/p' "$log")
  raw_bytes=$(sed -n 's/.*bytes stored (\([0-9]*\) before compression).*/\1/p' "$log")
  prefix=$(sed -n 's/.*backed up instance [0-9]* to \([^ ]*\) in .*/\1/p' "$log")
}

# Deletes every backup folder of the directory bucket but the newest complete one (disk).
keep_newest_backup() {
  local folders f
  for f in "$BUCKET"/moco/local/bench/2*; do
    [ -f "$f/manifest.json" ] || rm -rf "$f"
  done
  folders=$(ls -d "$BUCKET"/moco/local/bench/2* 2>/dev/null | sort)
  [ -n "$folders" ] || return 0
  echo "$folders" | head -n -1 | xargs -r rm -rf
}
backup_failures=0
# moco_backup_retrying LOG [args...]: moco_backup, again after a pause when it fails (up to 5
# tries; every failure is counted and reported).
moco_backup_retrying() {
  local try
  for try in 1 2 3 4 5; do
    moco_backup "$@" && return 0
    sleep 10
  done
  echo "five backups failed in a row" >&2
  return 1
}

# The floor: mariadb-backup as moco runs it (clone.rs backup_args), on instance $source, with the
# clone-donor account.
floor_args() {
  local n=$1 opts=$FLOOR/donor.cnf
  {
    echo "!include $DIR/instances/$n/my.cnf"
    echo "[mariadb-backup]"
    grep -E '^(user|password)=' "$DIR/client/moco-clone-donor.cnf"
  } >"$opts"
  chmod 600 "$opts"
  rm -rf "$FLOOR/scratch" && mkdir -p "$FLOOR/scratch"
  local port
  port=$(sed -n 's/^port = //p' "$DIR/instances/$n/my.cnf" | head -1)
  FLOOR_ARGS=(--defaults-file="$opts" --backup --stream=xbstream --slave-info --safe-slave-backup
              --host=127.0.0.1 --port="$port" --datadir="$DIR/instances/$n/data"
              --target-dir="$FLOOR/scratch")
}

# floor_retrying raw|zstd LOG: the floor pipeline (to /dev/null, or through zstd -1 into
# $FLOOR/base.xbstream.zst), again when mariadb-backup fails (counted); sets took_ms.
floor_failures=0
floor_retrying() {
  local try t0
  for try in 1 2 3 4 5; do
    settle
    t0=$(now_ms)
    if [ "$1" = raw ]; then
      mariadb-backup "${FLOOR_ARGS[@]}" >/dev/null 2>"$2" && { took_ms=$(($(now_ms) - t0)); return 0; }
    else
      mariadb-backup "${FLOOR_ARGS[@]}" 2>"$2" | zstd -1 -T1 -q -c >"$FLOOR/base.xbstream.zst" \
        && { took_ms=$(($(now_ms) - t0)); return 0; }
    fi
    floor_failures=$((floor_failures + 1))
    echo "  a floor backup failed: $(grep -m1 'Was only able' "$2" || tail -1 "$2")" >&2
    sleep 10
  done
  return 1
}

echo "== backup throughput and memory" >&2
moco_backup_retrying "$LOGS/backup-warmup.log"      # warms the page cache
raw_ms=() zstd_ms=() moco_ms=() hwm=() trss=() raws=() zsizes=() msizes=() sources=()
for run in $(seq "$RUNS"); do
  moco_backup_retrying "$LOGS/backup-$run.log"
  moco_ms+=("$took_ms") hwm+=("$moco_hwm_kb") trss+=("$time_rss_kb") raws+=("$raw_bytes") msizes+=("$stored_bytes")
  sources+=("$source")
  keep_newest_backup
  # The floors on the replica moco chose (the least behind; it may change between runs).
  floor_args "$source"
  floor_retrying raw "$LOGS/floor-raw-$run.log"
  raw_ms+=("$took_ms")
  floor_retrying zstd "$LOGS/floor-zstd-$run.log"
  zstd_ms+=("$took_ms")
  zsizes+=($(stat -c %s "$FLOOR/base.xbstream.zst"))
  rm -f "$FLOOR/base.xbstream.zst"
  echo "  run $run (instance $source): moco ${moco_ms[-1]} ms (moco RSS ${hwm[-1]} KiB), raw ${raw_ms[-1]} ms, zstd ${zstd_ms[-1]} ms" >&2
done
SRC=$source
record "backup source instances, by run" "${sources[*]}"
m_raw=$(printf '%s\n' "${raw_ms[@]}" | median)
m_zstd=$(printf '%s\n' "${zstd_ms[@]}" | median)
m_moco=$(printf '%s\n' "${moco_ms[@]}" | median)
stream=$(printf '%s\n' "${raws[@]}" | median)
record "stream size, uncompressed (MB)" "$(awk -v b="$stream" 'BEGIN { printf "%.0f", b / 1e6 }')"
record "stored by moco, zstd -1 (MB)" "$(printf '%s\n' "${msizes[@]}" | median | awk '{ printf "%.0f", $1 / 1e6 }')"
record "stored by the floor, zstd -1 -T1 (MB)" "$(printf '%s\n' "${zsizes[@]}" | median | awk '{ printf "%.0f", $1 / 1e6 }')"
record "floor: mariadb-backup > /dev/null (s)" "$(secs "$m_raw") [$(printf '%s ' "${raw_ms[@]}")ms] $(mbps "$stream" "$m_raw") MB/s"
record "floor: mariadb-backup | zstd -1 > file (s)" "$(secs "$m_zstd") [$(printf '%s ' "${zstd_ms[@]}")ms] $(mbps "$stream" "$m_zstd") MB/s"
record "moco local backup, directory (s)" "$(secs "$m_moco") [$(printf '%s ' "${moco_ms[@]}")ms] $(mbps "$stream" "$m_moco") MB/s"
record "moco / floor with zstd" "$(ratio "$m_moco" "$m_zstd")"
record "moco / raw floor" "$(ratio "$m_moco" "$m_raw")"
record "moco's own peak RSS (MiB, max of runs)" "$(printf '%s\n' "${hwm[@]}" | sort -g | tail -1 | awk '{ printf "%.1f", $1 / 1024 }')"
record "time -v max RSS, moco or child (MiB)" "$(printf '%s\n' "${trss[@]}" | sort -g | tail -1 | awk '{ printf "%.1f", $1 / 1024 }')"

# ---------------------------------------------------------------- backup into S3 (moto)
moto=${MOCO_MOTO_SERVER:-${XDG_CACHE_HOME:-$HOME/.cache}/moco-rs/moto-5.2.5/bin/moto_server}
if has_step s3 && [ -x "$moto" ]; then
  echo "== backup into S3 (moto)" >&2
  mport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$moto" -H 127.0.0.1 -p "$mport" >"$LOGS/moto.log" 2>&1 &
  moto_pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$mport/" && break; sleep 0.1; done
  curl -sf -X PUT "http://127.0.0.1:$mport/bench" >/dev/null
  s3_ms=() s3_hwm=()
  for run in $(seq "$RUNS"); do
    AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1 \
      AWS_ENDPOINT_URL="http://127.0.0.1:$mport" moco_backup_retrying "$LOGS/backup-s3-$run.log" --to s3://bench
    s3_ms+=("$took_ms") s3_hwm+=("$moco_hwm_kb")
    curl -sf -X POST "http://127.0.0.1:$mport/moto-api/reset" >/dev/null   # frees moto's memory
    curl -sf -X PUT "http://127.0.0.1:$mport/bench" >/dev/null
    echo "  run $run: moco to S3 ${took_ms} ms (moco RSS ${moco_hwm_kb} KiB)" >&2
  done
  # moto's own ingest rate: one PUT of a compressed backup made by the floor pipeline.
  floor_args "$SRC"
  floor_retrying zstd "$LOGS/floor-s3.log"
  t0=$(now_ms)
  curl -sf -T "$FLOOR/base.xbstream.zst" "http://127.0.0.1:$mport/bench/floor.zst" >/dev/null
  put_ms=$(($(now_ms) - t0))
  record "moto: one PUT of the compressed backup (s)" "$(secs "$put_ms") ($(mbps "$(stat -c %s "$FLOOR/base.xbstream.zst")" "$put_ms") MB/s compressed)"
  rm -f "$FLOOR/base.xbstream.zst"
  m_s3=$(printf '%s\n' "${s3_ms[@]}" | median)
  record "moco local backup, moto S3 (s)" "$(secs "$m_s3") [$(printf '%s ' "${s3_ms[@]}")ms] $(mbps "$stream" "$m_s3") MB/s"
  record "moco to S3 / floor with zstd" "$(ratio "$m_s3" "$m_zstd")"
  record "moco's own peak RSS, S3 (MiB, max of runs)" "$(printf '%s\n' "${s3_hwm[@]}" | sort -g | tail -1 | awk '{ printf "%.1f", $1 / 1024 }')"
  kill "$moto_pid"; wait "$moto_pid" 2>/dev/null || true; moto_pid=
elif has_step s3; then
  echo "== S3 step skipped: no moto_server (scripts/lib/install.sh ensure_moto installs it)" | tee -a "$RESULTS"
fi

# ---------------------------------------------------------------- restore against its floor
if has_step restore; then
  echo "== restore" >&2
  newest=$(ls -d "$BUCKET"/moco/local/bench/2* | sort | tail -1)
  # For scale: creating and starting an empty 1-instance cluster, which a restore also does.
  t0=$(now_ms)
  "$MOCO" local up --dir "$OUT/restored" --replicas 1 --detach >"$LOGS/up-empty.log" 2>&1
  record "moco local up --replicas 1 --detach, empty (s)" "$(secs $(($(now_ms) - t0)))"
  "$MOCO" local down --dir "$OUT/restored" >/dev/null
  rm -rf "$OUT/restored"
  # A warm-up extraction, not timed: on the project machine the first large write after other
  # work (here the backups' files, written and deleted) ran at half speed (8 GB with dd: 25 s,
  # then 11 and 12 s), and the first timed restore paid for it alone (10 GB: 52.5 s, then 33.0
  # and 33.1 s, against floors of 31-34 s).
  x=$FLOOR/extract
  rm -rf "$x" && mkdir -p "$x"
  zstd -d -q -c "$newest/base.xbstream.zst" | mbstream -x -C "$x"
  rm -rf "$x"
  restore_ms=() floor_x_ms=() floor_p_ms=() floor_s_ms=() restore_rss=() restore_holds=() restore_copy=()
  for run in $(seq "$RUNS"); do
    settle
    t0=$(now_ms)
    /usr/bin/time -v -o "$LOGS/restore-$run.time" "$MOCO" local restore --dir "$OUT/restored" \
      --source bench --from "$BUCKET" --replicas 1 --detach >"$LOGS/restore-$run.log" 2>&1 \
      || { cat "$LOGS/restore-$run.log" >&2; exit 1; }
    restore_ms+=($(($(now_ms) - t0)))
    restore_rss+=($(awk -F': ' '/Maximum resident/ { print $2 }' "$LOGS/restore-$run.time"))
    # "instance 0 holds backup ... after 2.8 s; the others are cloned from it"
    restore_holds+=($(sed -n 's/.* holds backup .* after \([0-9.]*\) s .*/\1/p' "$LOGS/restore-$run.log"))
    restore_copy+=($(sed -n 's/.*(copied in \([0-9.]*\) s.*/\1/p' "$LOGS/restore-$run.log"))
    rows=$(mariadb --defaults-extra-file="$OUT/restored/client/moco-admin.cnf" -N \
      -e "SELECT COUNT(*) FROM sbtest.sbtest1")
    [ "$rows" = "$ROWS" ] || echo "note: restored sbtest1 has $rows rows, not $ROWS" >&2
    # Their timestamps say where the time went.
    cp "$OUT/restored/instances/0/mysqld.out" "$LOGS/restore-$run-mysqld.out" 2>/dev/null || true
    cp "$OUT/restored/instances/0/restore.log" "$LOGS/restore-$run-tools.log" 2>/dev/null || true
    cp "$OUT/restored/manager.log" "$LOGS/restore-$run-manager.log" 2>/dev/null || true
    "$MOCO" local down --dir "$OUT/restored" >/dev/null
    rm -rf "$OUT/restored"

    x=$FLOOR/extract
    rm -rf "$x" && mkdir -p "$x"
    settle
    t0=$(now_ms)
    zstd -d -q -c "$newest/base.xbstream.zst" | mbstream -x -C "$x"
    floor_x_ms+=($(($(now_ms) - t0)))
    t0=$(now_ms)
    mariadb-backup --prepare --target-dir="$x" >"$LOGS/floor-prepare-$run.log" 2>&1
    floor_p_ms+=($(($(now_ms) - t0)))
    # Start a server on it, as a restore ends with one: until it answers a ping.
    t0=$(now_ms)
    mariadbd --no-defaults --datadir="$x" --socket="$FLOOR/floor.sock" --skip-networking \
      --pid-file="$FLOOR/floor.pid" --log-error="$LOGS/floor-mariadbd-$run.err" \
      --innodb-buffer-pool-size=64M --innodb-log-file-size=16M --log-bin=binlog --server-id=99 \
      $([ "$(id -u)" -eq 0 ] && echo --user=root) >>"$LOGS/floor-mariadbd-$run.err" 2>&1 &
    floor_mysqld_pid=$!
    until mariadb-admin --socket="$FLOOR/floor.sock" ping >/dev/null 2>&1; do sleep 0.02; done
    floor_s_ms+=($(($(now_ms) - t0)))
    kill "$floor_mysqld_pid"; wait "$floor_mysqld_pid" 2>/dev/null || true; floor_mysqld_pid=
    rm -rf "$x"
    echo "  run $run: moco ${restore_ms[-1]} ms; floor extract ${floor_x_ms[-1]} + prepare ${floor_p_ms[-1]} + start ${floor_s_ms[-1]} ms" >&2
  done
  m_restore=$(printf '%s\n' "${restore_ms[@]}" | median)
  m_x=$(printf '%s\n' "${floor_x_ms[@]}" | median)
  m_p=$(printf '%s\n' "${floor_p_ms[@]}" | median)
  m_s=$(printf '%s\n' "${floor_s_ms[@]}" | median)
  floor_total=$((${m_x%.*} + ${m_p%.*} + ${m_s%.*}))
  record "moco local restore --replicas 1 --detach (s)" "$(secs "$m_restore") [$(printf '%s ' "${restore_ms[@]}")ms]"
  record "  of which: instance 0 holds the backup (s)" "$(printf '%s\n' "${restore_holds[@]}" | median)"
  record "  of which: the copy (download, decode, extract) (s)" "$(printf '%s\n' "${restore_copy[@]}" | median)"
  record "floor: zstd -d | mbstream -x (s)" "$(secs "$m_x")"
  record "floor: mariadb-backup --prepare (s)" "$(secs "$m_p")"
  record "floor: mariadbd start to ping (s)" "$(secs "$m_s")"
  record "floor total (s)" "$(secs "$floor_total")"
  record "restore / floor" "$(ratio "$m_restore" "$floor_total")"
  record "restore: time -v max RSS (MiB)" "$(printf '%s\n' "${restore_rss[@]}" | sort -g | tail -1 | awk '{ printf "%.1f", $1 / 1024 }')"
fi

# ---------------------------------------------------------------- write latency during a backup
# sb_run LOG SECONDS: sysbench oltp_write_only through the primary endpoint.
sb_run() {
  sysbench oltp_write_only "${SB[@]}" --threads=2 --time="$2" --report-interval=2 \
    --percentile=99 run >"$1" 2>&1
}
sb_p99() { awk '/99th percentile:/ { print $3 }' "$1"; }
sb_max() { awk '/ max:/ { print $2 }' "$1"; }
sb_tps() { sed -n 's/.*transactions: *[0-9]* *(\([0-9.]*\) per sec.).*/\1/p' "$1"; }
if has_step latency; then
  echo "== write latency on the primary ($LAT_SECONDS s runs; a backup of instance $SRC from t=10 s)" >&2
  # Both backups write into memory: a Pod's backup goes to an object store on other machines,
  # and a file on the data disk would put its writeback beside the primary's commit fsyncs
  # (when the floor's file was deleted at once and moco's was kept, only moco's paid for it).
  LAT_BUCKET=$(mktemp -d /dev/shm/moco-bench-latency.XXXXXX)
  trap 'rm -rf "$LAT_BUCKET"; cleanup' EXIT
  windows=$LOGS/latency-windows.txt
  : >"$windows"
  for run in $(seq "$LAT_RUNS"); do
    for variant in $LAT_VARIANTS; do
      log=$LOGS/latency-$variant-$run.log
      sb_run "$log" "$LAT_SECONDS" &
      sb_pid=$!
      extra=""
      if [ "$variant" != none ]; then
        sleep 10
        t0=$(now_ms)
        case $variant in
          moco)
            no_settle=1 moco_backup "$LOGS/latency-backup-$run.log" --to "$LAT_BUCKET" \
              || echo "  (the backup during the writes failed)" >&2 ;;
          capped)
            no_settle=1 moco_backup "$LOGS/latency-capped-$run.log" --to "$LAT_BUCKET" \
              --max-rate "$MAX_RATE" || echo "  (the capped backup during the writes failed)" >&2 ;;
          floor)
            floor_args "$SRC"
            mariadb-backup "${FLOOR_ARGS[@]}" 2>"$LOGS/latency-floor-$run.log" \
              | zstd -1 -T1 -q -c >"$LAT_BUCKET/floor.xbstream.zst" \
              || { floor_failures=$((floor_failures + 1)); echo "  (the floor backup during the writes failed)" >&2; } ;;
        esac
        took=$(($(now_ms) - t0))
        echo "$variant $run $took" >>"$windows"
        extra=" (backup took $(secs "$took") s)"
        rm -rf "${LAT_BUCKET:?}"/*
      fi
      wait "$sb_pid"
      record "writes, backup=$variant, run $run: p99 ms" "$(sb_p99 "$log"); max $(sb_max "$log") ms; $(sb_tps "$log") tps$extra"
    done
  done
  # While the backup ran: sysbench's 2 s p99s of the intervals overlapping [10 s, 10 s + its
  # time], pooled over the runs, against the same intervals of the run without a backup. An
  # interval in which no write completed (a stall) reports 0: it is counted, not pooled.
  python3 - "$LOGS" "$windows" <<'PYEOF2' | while IFS=$'\t' read -r key value; do record "$key" "$value"; done
import re, statistics, sys
logs, windows = sys.argv[1], sys.argv[2]
def intervals(path):
    out = []
    for line in open(path):
        m = re.match(r'\[ (\d+)s \].*lat \(ms,99%\): ([\d.]+)', line)
        if m:
            out.append((int(m.group(1)), float(m.group(2))))
    return out
pooled = {}
stalls = {}
for line in open(windows):
    variant, run, took_ms = line.split()
    end = 10 + int(took_ms) / 1000
    def window(v):
        try:
            ps = [p for t, p in intervals(f"{logs}/latency-{v}-{run}.log") if t > 10 and t - 2 < end]
        except FileNotFoundError:
            return []
        stalls[v] = stalls.get(v, 0) + ps.count(0.0)
        return [p for p in ps if p > 0]
    mine, none = pooled.setdefault(variant, ([], []))
    mine += window(variant)
    none += window("none")
for variant, (mine, none) in pooled.items():
    if mine and none:
        a, b = statistics.median(mine), statistics.median(none)
        print(f"in the window, backup={variant}: 2 s p99 ms\t{a:.2f} against {b:.2f} without ({(a / b - 1) * 100:+.0f}%, {len(mine)} intervals, {stalls.get(variant, 0)} stalled)")
PYEOF2
fi

# ---------------------------------------------------------------- RPO with binlog archiving on
if has_step archive; then
  echo "== binlog archiving: recovery point while writing" >&2
  status_file=$DIR/archive-status.json
  rm -f "$status_file"
  t0=$(now_ms)
  "$MOCO" local backup archive --dir "$DIR" >"$LOGS/archive-on.log" 2>&1
  until [ -f "$status_file" ] && jq -e '.progress.checkedAt != null' "$status_file" >/dev/null 2>&1; do
    [ $(($(now_ms) - t0)) -lt 600000 ] || { echo "archiving made no progress" >&2; exit 1; }
    sleep 0.2
  done
  record "archive: first progress mark, existing binlogs (s)" "$(secs $(($(now_ms) - t0)))"
  # The first mark is as old as that first round (it names the round's start): wait for two
  # more rounds, so the writer starts against a steady archiver.
  first=$(jq -r '.progress.checkedAt' "$status_file")
  until [ "$(jq -r '.progress.checkedAt' "$status_file" 2>/dev/null || echo 0)" -gt $((first + 5)) ]; do
    sleep 0.2
  done
  sb_run "$LOGS/archive-writes.log" 30 &
  sb_pid=$!
  # Samples now - checkedAt every 200 ms while the writer runs, then how long after the writer's
  # last acknowledged write (its exit) the mark passes it.
  python3 - "$status_file" "$sb_pid" >"$LOGS/archive-rpo.txt" <<'EOF'
import json, os, sys, time
path, pid = sys.argv[1], int(sys.argv[2])
def checked():
    try:
        with open(path) as f:
            return json.load(f)["progress"]["checkedAt"]
    except Exception:
        return None
def alive():
    try:
        os.kill(pid, 0)
        return not open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    except OSError:
        return False
lags = []
while alive():
    c = checked()
    if c is not None:
        lags.append(time.time() - c)
    time.sleep(0.2)
end = time.time()
while (checked() or 0) < end and time.time() - end < 120:
    time.sleep(0.2)
lags.sort()
print(f"worst {lags[-1]:.2f} samples {len(lags)} caught_up {time.time() - end:.2f} median {lags[len(lags) // 2]:.2f}")
EOF
  wait "$sb_pid"
  read -r _ worst _ samples _ caught _ lag_median <"$LOGS/archive-rpo.txt"
  rounds=$(jq -r '.rounds' "$status_file")
  record "archive: worst now - checkedAt while writing (s)" "$worst (median $lag_median; $samples samples, every 5 s rounds, $(sb_tps "$LOGS/archive-writes.log") tps)"
  record "archive: last write -> mark past it (s)" "$caught"
  record "archive: rounds so far, files stored" "$rounds, $(jq -r '.filesStored' "$status_file")"
  "$MOCO" local backup archive --dir "$DIR" --off >>"$LOGS/archive-on.log" 2>&1
fi

record "failed moco backups (logs/failed-backups.log)" "$backup_failures"
record "failed floor backups (logs/floor-*.log)" "$floor_failures"
echo "== disk used under $OUT: $(du -sh "$OUT" | cut -f1)" | tee -a "$RESULTS"
