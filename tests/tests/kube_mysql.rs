//! The backup and restore Jobs' programs for a MySQL cluster, in MOCO's own format.
//!
//! No MySQL server runs here, so MySQL's tools (`mysqlsh`, `mysqlbinlog`, `mysql`) are shell
//! scripts that record what they were given (arguments, the password on stdin or in the option
//! file, environment) and do what the real ones do to the work directory; the servers'
//! answers (`server_uuid`, binary logs, `super_read_only`) come from a stand-in. `tar`,
//! `zstd`, the bucket (a directory) and the Kubernetes API (the fake API server) are real.
//! `scripts/e2e-kind.sh` runs the same programs against MySQL.
//!
//! Four backups: the first (no binlogs), the second (the binlogs since the first, stored in
//! the first's folder), a third after every instance was re-cloned (MOCO's uuid-set rule skips
//! the binlogs with a warning), a fourth whose binlog fetch fails (a warning, not a failed
//! Job). Then a restore to a second between the first two backups: the first dump loaded, its
//! binlogs replayed up to that second, and the instance left read-only.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moco_api::addresses::StaticAddresses;
use moco_backup::bucket::{Bucket, BucketSpec};
use moco_backup::job::JobError;
use moco_backup::job::archive::{ArchiveJob, Archived, PrimaryAccess};
use moco_backup::job::backup::BackupJob;
use moco_backup::job::cluster::ClusterAccess;
use moco_backup::job::mysql::archive::{ArchiveServers, PrimarySnapshot};
use moco_backup::job::mysql::{BackupServers, BinlogFiles, MysqlTools, RestoreServer};
use moco_backup::job::restore::RestoreJob;
use moco_backup::job::server_tls::ServerTls;
use moco_backup::layout;
use moco_backup::mysql::command::Tools;
use moco_backup::mysql::{archive as mysql_archive, format};
use moco_core::gtid::GtidSet;
use moco_core::moco_accounts::Account;
use moco_core::time::Timestamp;
use moco_testkit::apiserver::FakeApiServer;
use serde_json::json;

const CLUSTERS: &str = "moco.cybozu.com/v1beta2/mysqlclusters";
const BACKUP_PASSWORD: &str = "backup'pw\"1";
const ADMIN_PASSWORD: &str = "admin pw#2";
const FIRST_GTIDS: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100";
const SECOND_GTIDS: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-180";

fn pod_object(ns: &str, cluster: &str, index: u32) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("moco-{cluster}-{index}"), "namespace": ns,
                     "labels": {"app.kubernetes.io/name": "mysql",
                                "app.kubernetes.io/instance": cluster,
                                "app.kubernetes.io/created-by": "moco"}},
        "spec": {"containers": [{"name": "mysqld", "image": "mysql"}]},
        "status": {"podIP": "127.0.0.1",
                   "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

fn cluster_object(ns: &str, name: &str, replicas: u32) -> serde_json::Value {
    json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}")},
        "spec": {
            "replicas": replicas,
            "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "mysql"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]
        },
        "status": {"currentPrimaryIndex": 0}
    })
}

/// The instances' answers: their `server_uuid`s (a re-cloned instance gets a new one) and
/// binary logs.
struct Servers {
    uuids: Mutex<BTreeMap<u32, String>>,
}

impl BackupServers for Servers {
    async fn server_uuid(&self, index: u32) -> Result<String, JobError> {
        Ok(self.uuids.lock().unwrap()[&index].clone())
    }

    async fn binlog_files(&self, index: u32) -> Result<BinlogFiles, JobError> {
        // Instance 1 has kept binlog.000002 on; it writes binlog.000003 now.
        assert_eq!(
            index, 1,
            "the backups come from the replica of lowest ordinal"
        );
        Ok(BinlogFiles {
            current: "binlog.000003".into(),
            all: vec!["binlog.000003".into(), "binlog.000002".into()],
        })
    }
}

/// Instance 0 of the restored cluster: not ready at the first look, then ready.
#[derive(Default)]
struct Target {
    looks: AtomicU32,
    calls: Mutex<Vec<&'static str>>,
}

impl RestoreServer for Target {
    async fn ready_to_load(&self) -> Result<(), String> {
        self.calls.lock().unwrap().push("ready?");
        if self.looks.fetch_add(1, Ordering::SeqCst) == 0 {
            Err("super_read_only is off".into())
        } else {
            Ok(())
        }
    }

    async fn open_for_load(&self) -> Result<(), JobError> {
        self.calls.lock().unwrap().push("open");
        Ok(())
    }

    async fn close_after_load(&self) -> Result<(), JobError> {
        self.calls.lock().unwrap().push("close");
        Ok(())
    }
}

fn script(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\nS={}\n{body}\n", dir.display())).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Links the real `tar` and `zstd` into `dir`, beside the stand-ins.
fn link_real_tools(dir: &Path) {
    for real in ["tar", "zstd"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {real}")])
            .output()
            .unwrap();
        let path = String::from_utf8(found.stdout).unwrap();
        std::os::unix::fs::symlink(path.trim(), dir.join(real)).unwrap();
    }
}

/// MySQL's tools as scripts in `dir`, which also holds what they record (`*.calls`, the
/// passwords they got) and the "server's" state (`gtid`, `data`, `binlogs/`).
fn tools(dir: &Path) -> Tools {
    link_real_tools(dir);
    script(
        dir,
        "mysqlsh",
        r#"read -r pw
printf 'Please provide the password for the account: '
echo "$*" >> $S/mysqlsh.calls
echo "$pw" >> $S/mysqlsh.passwords
sub=""; target=""; prev=""
for a in "$@"; do
  [ "$prev" = util ] && sub=$a
  case $prev in dump-instance|load-dump) target=$a;; esac
  prev=$a
done
case $sub in
  dump-instance)
    if [ -e "$target" ]; then echo "Cannot proceed with the dump, $target already exists" >&2; exit 1; fi
    mkdir -p "$target"
    printf '{"dumper": "mysqlsh Ver 8.4", "gtidExecuted": "%s"}' "$(cat $S/gtid)" > "$target/@.json"
    cp $S/data "$target/app@t@@0.tsv.zst"
    echo "Dump finished" ;;
  load-dump)
    if [ -e $S/fail-load ]; then echo "ERROR: [Worker000] app@t@@0.tsv.zst: Duplicate entry 'alice@example.com' for key 't.email'" >&2; exit 1; fi
    rm -rf $S/loaded; mkdir -p $S/loaded; cp -r "$target/." $S/loaded/
    echo "Loading finished" ;;
  *) echo "unknown $sub" >&2; exit 2 ;;
esac"#,
    );
    script(
        dir,
        "mysqlbinlog",
        r#"echo "$*" >> $S/mysqlbinlog.calls
case "$1" in --defaults-extra-file=*) cat "${1#--defaults-extra-file=}" >> $S/mysqlbinlog.cnf;; esac
case "$*" in
  *--read-from-remote-master*)
    if [ -e $S/fail-fetch ]; then echo "ERROR: Got error reading packet from server: Lost connection near 'INSERT INTO t VALUES ('4111-1111')'" >&2; exit 1; fi
    for a in "$@"; do case $a in --result-file=*) out=${a#--result-file=};; esac; last=$a; done
    for f in $(ls $S/binlogs); do
      if [ "$f" = "$last" ] || [ "$f" \> "$last" ]; then cp "$S/binlogs/$f" "$out$f"; fi
    done ;;
  *)
    echo "TZ=$TZ TMPDIR=$TMPDIR" >> $S/mysqlbinlog.env
    [ -d "$TMPDIR" ] || { echo "no $TMPDIR" >&2; exit 1; }
    for a in "$@"; do case $a in --*) ;; *) cat "$a";; esac; done ;;
esac"#,
    );
    script(
        dir,
        "mysql",
        r#"echo "$*" >> $S/mysql.calls
cat "${1#--defaults-extra-file=}" >> $S/mysql.cnf
cat >> $S/applied"#,
    );
    Tools::in_dir(dir)
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

fn now() -> i64 {
    moco_cluster::ports::Clock::now(&moco_cluster::ports::SystemClock).0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mocos_format_backs_up_a_mysql_cluster_and_restores_it_to_a_second() {
    let root = tempfile::tempdir().unwrap();
    let bin = root.path().join("bin");
    std::fs::create_dir_all(bin.join("binlogs")).unwrap();
    let tools = tools(&bin);
    std::fs::write(bin.join("gtid"), FIRST_GTIDS).unwrap();
    std::fs::write(bin.join("data"), b"first dump's rows").unwrap();
    std::fs::write(
        bin.join("binlogs/binlog.000002"),
        b"-- events in binlog.000002\n",
    )
    .unwrap();
    std::fs::write(
        bin.join("binlogs/binlog.000003"),
        b"-- events in binlog.000003\n",
    )
    .unwrap();
    let bucket: Bucket = BucketSpec::from_url(&root.path().join("bucket").display().to_string())
        .unwrap()
        .open(&Default::default())
        .unwrap();

    let fake = FakeApiServer::new();
    fake.insert(cluster_object("prod", "db", 3));
    for i in 0..3 {
        fake.insert(pod_object("prod", "db", i));
    }
    let addresses = StaticAddresses {
        by_index: (0..3).map(|i| (i, (format!("10.0.0.{i}"), 3306))).collect(),
        agents: BTreeMap::new(),
    };
    let work = root.path().join("work");
    let job = BackupJob {
        cluster: ClusterAccess::new(fake.client(), "prod", "db"),
        bucket: bucket.clone(),
        // MySQL clusters' Jobs do not mount the agent certificate: no agent is needed.
        agents: None,
        addresses: Arc::new(addresses.clone()),
        donor_password: String::new(),
        backup_password: BACKUP_PASSWORD.into(),
        binlog_tool: PathBuf::from("unused"),
        work_dir: work.clone(),
        tls: ServerTls::default(),
        tools: tools.clone(),
        threads: std::num::NonZeroU32::new(3).unwrap(),
        // `--max-rate=30M`: mysqlsh's maxRate is per thread.
        max_rate: Some(moco_core::resources::ByteRate::parse("30M").unwrap()),
    };
    let servers = Servers {
        uuids: Mutex::new((0..3).map(|i| (i, format!("uuid-{i}"))).collect()),
    };
    let status = || fake.get_json(CLUSTERS, "prod", "db").unwrap()["status"]["backup"].clone();
    let events = |ns: &str, reason: &str| {
        fake.list_json("v1/events", Some(ns))
            .into_iter()
            .filter(|e| e["reason"] == reason)
            .count()
    };
    let backup = || async {
        let cluster = job.cluster.get().await.unwrap();
        job.run_mysql(cluster, &servers).await
    };

    // The first backup: the dump alone, from the replica of lowest ordinal.
    let first = backup().await.unwrap();
    let first_time = layout::parse_backup_time(first.prefix.rsplit('/').next().unwrap()).unwrap();
    assert_eq!(first.source_index, 1);
    let s = status();
    assert_eq!(s["sourceIndex"], 1);
    assert_eq!(s["sourceUUID"], "uuid-1");
    assert_eq!(
        s["uuidSet"],
        json!({"0": "uuid-0", "1": "uuid-1", "2": "uuid-2"})
    );
    assert_eq!(s["binlogFilename"], "binlog.000003");
    assert_eq!(s["gtidSet"], FIRST_GTIDS);
    assert_eq!(s["binlogSize"], 0);
    assert!(s["workDirUsage"].as_i64().unwrap() >= 17, "{s}");
    assert_eq!(s["warnings"], serde_json::Value::Null);
    let dump_key = format::keys::dump_key("prod", "db", first_time);
    let stored = bucket.list("moco/prod/db/").await.unwrap();
    assert_eq!(
        stored.iter().map(|o| o.key.as_str()).collect::<Vec<_>>(),
        [dump_key.as_str()]
    );
    assert_eq!(s["dumpSize"], json!(stored[0].size));
    assert_eq!(
        read(&bin, "mysqlsh.calls").trim(),
        "mysql://moco-backup@10.0.0.1:3306 --passwords-from-stdin --save-passwords=never -C False \
         -- util dump-instance "
            .to_owned()
            + &format!(
                "{}/dump --excludeUsers={} --threads=3 --maxRate=10000000",
                work.display(),
                Account::ALL.map(|a| a.name()).join(",")
            )
    );
    assert_eq!(
        read(&bin, "mysqlsh.passwords"),
        format!("{BACKUP_PASSWORD}\n")
    );
    assert!(
        !work.join("dump").exists(),
        "the dump stayed in the work dir"
    );
    assert_eq!(
        (
            events("prod", "BackupCreated"),
            events("prod", "BackupNoBinlog")
        ),
        (1, 0)
    );

    // The second: the binlogs since the first go into the first's folder, fetched from the
    // file the first recorded and without the GTIDs its dump holds.
    std::fs::write(bin.join("gtid"), SECOND_GTIDS).unwrap();
    std::fs::write(bin.join("data"), b"second dump's rows").unwrap();
    // Two seconds apart, so a second lies strictly between the two backups.
    while now() < first_time.0 + 2 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let second = backup().await.unwrap();
    let second_time = layout::parse_backup_time(second.prefix.rsplit('/').next().unwrap()).unwrap();
    let s = status();
    assert_eq!(s["gtidSet"], SECOND_GTIDS);
    assert_eq!(s["warnings"], serde_json::Value::Null);
    let binlog_key = format::keys::binlog_key("prod", "db", first_time);
    let keys: Vec<(String, u64)> = bucket
        .list("moco/prod/db/")
        .await
        .unwrap()
        .into_iter()
        .map(|o| (o.key, o.size))
        .collect();
    let binlog_size = keys.iter().find(|(k, _)| *k == binlog_key).unwrap().1;
    assert_eq!(s["binlogSize"], json!(binlog_size));
    assert!(
        keys.iter()
            .any(|(k, _)| *k == format::keys::dump_key("prod", "db", second_time))
    );
    let fetch = read(&bin, "mysqlbinlog.calls");
    assert_eq!(
        fetch.trim(),
        format!(
            "--defaults-extra-file={w}/moco-backup.cnf -h 10.0.0.1 --port 3306 --protocol=tcp \
             -u moco-backup --get-server-public-key --read-from-remote-master=BINLOG-DUMP-GTIDS \
             --exclude-gtids={FIRST_GTIDS} -t --raw --result-file={w}/binlog/ binlog.000003",
            w = work.display()
        )
    );
    assert_eq!(
        read(&bin, "mysqlbinlog.cnf"),
        format::command_line::client_option_file(BACKUP_PASSWORD)
    );
    assert!(
        !work.join("moco-backup.cnf").exists(),
        "the password file stayed"
    );
    assert_eq!(
        (
            events("prod", "BackupCreated"),
            events("prod", "BackupNoBinlog")
        ),
        (2, 0)
    );

    // Every instance re-cloned: no instance is known to have every binlog since the second
    // backup, so the third skips them, as MOCO does.
    *servers.uuids.lock().unwrap() = (0..3).map(|i| (i, format!("new-uuid-{i}"))).collect();
    let third = backup().await.unwrap();
    let s = status();
    assert_eq!(s["warnings"], json!([format::source::SKIP_BINLOG_WARNING]));
    assert_eq!(s["binlogSize"], 0);
    assert_eq!(s["uuidSet"]["1"], "new-uuid-1");
    assert_eq!(
        (
            events("prod", "BackupCreated"),
            events("prod", "BackupNoBinlog")
        ),
        (3, 1)
    );
    assert_eq!(
        bucket
            .list(&format!("{}/", second.prefix))
            .await
            .unwrap()
            .len(),
        1,
        "no binlogs stored for the second backup"
    );

    // The binlog fetch fails: the backup is still taken, with a warning.
    std::fs::write(bin.join("fail-fetch"), b"").unwrap();
    backup().await.unwrap();
    let s = status();
    let warning = s["warnings"][0].as_str().unwrap();
    assert!(
        warning.starts_with("the binlogs were not stored: mysqlbinlog ")
            && warning.contains("Lost connection"),
        "{warning}"
    );
    // Regression (issue 29, item 10): the tool's output quoted a row's values into the
    // status; quoted values are redacted there now.
    assert!(!warning.contains("4111"), "{warning}");
    assert_eq!(
        (
            events("prod", "BackupCreated"),
            events("prod", "BackupNoBinlog")
        ),
        (4, 2)
    );
    assert!(
        bucket
            .list(&format!("{}/", third.prefix))
            .await
            .unwrap()
            .iter()
            .all(|o| !o.key.ends_with(format::keys::BINLOG_FILE)),
        "a failed fetch stored a binlog tarball"
    );

    // The restore into a new cluster, to the second after the first backup.
    fake.insert(cluster_object("new", "db2", 1));
    let point = first_time.0 + 1;
    assert!(point < second_time.0);
    let restore_work = root.path().join("restore-work");
    let restore_job = |point: i64, schema: &str, users: &str| RestoreJob {
        cluster: ClusterAccess::new(fake.client(), "new", "db2"),
        source_prefix: "moco/prod/db".into(),
        point: Timestamp(point),
        schema: schema.into(),
        users: users.into(),
        bucket: bucket.clone(),
        // MySQL clusters' Jobs do not mount the agent certificate: no agent is needed.
        agents: None,
        addresses: Arc::new(addresses.clone()),
        admin_password: ADMIN_PASSWORD.into(),
        binlog_tool: PathBuf::from("unused"),
        client_tool: PathBuf::from("unused"),
        work_dir: restore_work.clone(),
        wait_limit: Duration::from_secs(60),
        tls: ServerTls::default(),
        tools: tools.clone(),
        threads: std::num::NonZeroU32::new(2).unwrap(),
    };
    let target = Target::default();

    // Refused before anything is touched: a schema list, a point before the first backup.
    let e = restore_job(point, "app,other", "")
        .run_mysql(&target)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("spec.restore.schema: \"app,other\": one schema only"),
        "{e}"
    );
    let e = restore_job(first_time.0 - 60, "", "")
        .run_mysql(&target)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("spec.restore.restorePoint: ")
            && e.contains(&format!("the earliest restorable time is {first_time}")),
        "{e}"
    );
    assert!(target.calls.lock().unwrap().is_empty());
    assert_eq!(events("new", "RestoreFailed"), 2);

    // A load that fails: the Job fails with mysqlsh's reason, and instance 0 is read-only
    // again, as the cluster must stay.
    std::fs::write(bin.join("fail-load"), b"").unwrap();
    let e = restore_job(point, "", "")
        .run_mysql(&target)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("util load-dump") && e.contains("Duplicate entry"),
        "{e}"
    );
    assert_eq!(
        std::mem::take(&mut *target.calls.lock().unwrap()),
        ["ready?", "ready?", "open", "close"]
    );
    assert_eq!(events("new", "RestoreFailed"), 3);
    // Regression (issue 29, item 10): mysqlsh's message quoted the row's value into the
    // Event; it says what failed, and the value is redacted.
    let failed: Vec<String> = fake
        .list_json("v1/events", Some("new"))
        .into_iter()
        .filter(|e| e["reason"] == "RestoreFailed")
        .filter_map(|e| e["message"].as_str().map(str::to_owned))
        .filter(|m| m.contains("Duplicate entry"))
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(!failed[0].contains("alice@example.com"), "{}", failed[0]);
    assert!(fake.get_json(CLUSTERS, "new", "db2").unwrap()["status"]["restoredTime"].is_null());
    std::fs::remove_file(bin.join("fail-load")).unwrap();

    let done = restore_job(point, "app", "alice@'%'")
        .run_mysql(&target)
        .await
        .unwrap();
    assert_eq!(done.base, first.prefix);
    let plan = done.dump.unwrap();
    assert_eq!(plan.binlog_keys, [binlog_key]);
    assert_eq!(*target.calls.lock().unwrap(), ["ready?", "open", "close"]);
    // The first dump, through tar and the bucket, was what the load read.
    assert_eq!(read(&bin, "loaded/app@t@@0.tsv.zst"), "first dump's rows");
    assert_eq!(
        read(&bin, "loaded/@.json"),
        format!(r#"{{"dumper": "mysqlsh Ver 8.4", "gtidExecuted": "{FIRST_GTIDS}"}}"#)
    );
    let load = read(&bin, "mysqlsh.calls");
    let load = load.lines().last().unwrap();
    assert_eq!(
        load,
        format!(
            "mysql://moco-admin@10.0.0.0:3306 --passwords-from-stdin --save-passwords=never -C \
             False -- util load-dump {}/dump --threads=2 --loadUsers=true --analyzeTables=on \
             --skipBinlog=true --deferTableIndexes=all --updateGtidSet=replace \
             --includeSchemas=app --includeUsers=alice@'%'",
            restore_work.display()
        )
    );
    assert_eq!(
        read(&bin, "mysqlsh.passwords").lines().last().unwrap(),
        ADMIN_PASSWORD
    );
    // The binlogs the second backup fetched, replayed up to the point, in order, as UTC.
    let decode = read(&bin, "mysqlbinlog.calls");
    let decode = decode.lines().last().unwrap();
    let stop = Timestamp(point)
        .to_string()
        .replace('T', " ")
        .replace('Z', "");
    assert_eq!(
        decode,
        format!(
            "--stop-datetime={stop} {w}/binlog/binlog.000003 --database=app",
            w = restore_work.display()
        )
    );
    assert_eq!(
        read(&bin, "mysqlbinlog.env"),
        format!("TZ=Etc/UTC TMPDIR={}/tmp\n", restore_work.display())
    );
    assert_eq!(read(&bin, "applied"), "-- events in binlog.000003\n");
    assert_eq!(
        read(&bin, "mysql.calls").trim(),
        format!(
            "--defaults-extra-file={w}/moco-admin.cnf --binary-mode -h 10.0.0.0 --port 3306 \
             --protocol=tcp -u moco-admin",
            w = restore_work.display()
        )
    );
    assert_eq!(
        read(&bin, "mysql.cnf"),
        format::command_line::client_option_file(ADMIN_PASSWORD)
    );
    let restored = fake.get_json(CLUSTERS, "new", "db2").unwrap();
    assert!(restored["status"]["restoredTime"].is_string(), "{restored}");
    assert_eq!(events("new", "Restored"), 1);

    // Once restored, never again.
    let e = restore_job(point, "", "")
        .run_mysql(&target)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("restored already"), "{e}");
}

// --- binlog archiving (beyond MOCO) -----------------------------------------------------------

const UUID_A: &str = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa";
const UUID_B: &str = "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb";
/// The backup's time: the archive's times are set against it (the stand-in servers' clocks).
const T0: i64 = 1_800_000_000;

/// GTID sets, the little the stand-ins need of them.
const PY_GTID: &str = r#"
import os, sys
def parse(text):
    s = {}
    for entry in filter(None, (e.strip() for e in text.split(','))):
        parts = entry.split(':')
        for iv in parts[1:]:
            a, _, b = iv.partition('-')
            s.setdefault(parts[0], []).append((int(a), int(b or a)))
    return s
def contains(s, gtid):
    uuid, n = gtid.rsplit(':', 1)
    return any(a <= int(n) <= b for a, b in s.get(uuid, []))
"#;

fn python(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "#!/usr/bin/env python3\nS = {:?}\n{PY_GTID}\n{body}\n",
            dir.display().to_string()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// MySQL's tools for archiving, as a MySQL server would make them behave: a binlog line is
/// `<gtid> <unix time> <row>`, and `servers/<i>/` holds instance i's binlog files.
/// `mysqlbinlog` fetches as `BINLOG-DUMP-GTIDS` does (from the first file holding a
/// transaction not excluded, leaving out the excluded ones) and decodes with
/// `--stop-datetime` (stopping at the first later event) and `--include-gtids`; `mysql`
/// applies rows into `target/rows`, skipping a GTID already executed, as a server does;
/// `mysqlsh load-dump` replaces `target/` with the dump's rows and `gtidExecuted`.
fn archive_tools(dir: &Path) -> Tools {
    link_real_tools(dir);
    python(
        dir,
        "mysqlbinlog",
        r#"
args = sys.argv[1:]
open(S + '/mysqlbinlog.calls', 'a').write(' '.join(args) + '\n')
opts, files, i = {}, [], 0
while i < len(args):
    a = args[i]
    if a in ('-h', '--port', '-u'):
        opts[a] = args[i + 1]; i += 2; continue
    if a.startswith('-'):
        k, _, v = a.partition('='); opts[k] = v
    else:
        files.append(a)
    i += 1
if '--read-from-remote-master' in opts:
    if os.path.exists(S + '/fail-fetch'):
        sys.exit('ERROR: Got error reading packet from server: Lost connection')
    server = S + '/servers/' + opts['-h'].rsplit('.', 1)[1]
    exclude = parse(opts['--exclude-gtids'])
    names = sorted(os.listdir(server))
    def lines(name):
        return open(server + '/' + name).read().splitlines()
    start = next(i for i, n in enumerate(names) if any(not contains(exclude, l.split()[0]) for l in lines(n)))
    for name in names[start:]:
        kept = [l for l in lines(name) if not contains(exclude, l.split()[0])]
        open(opts['--result-file'] + name, 'w').write(''.join(l + '\n' for l in kept))
else:
    import calendar, time
    if os.environ.get('TZ') != 'Etc/UTC':
        sys.exit('not UTC')
    stop = calendar.timegm(time.strptime(opts['--stop-datetime'], '%Y-%m-%d %H:%M:%S'))
    include = parse(opts['--include-gtids']) if '--include-gtids' in opts else None
    for f in files:
        for l in open(f).read().splitlines():
            gtid, ts, row = l.split(' ', 2)
            if int(ts) >= stop:
                sys.exit(0)
            if include is None or contains(include, gtid):
                print('APPLY', gtid, row)
"#,
    );
    python(
        dir,
        "mysql",
        r#"
open(S + '/mysql.calls', 'a').write(' '.join(sys.argv[1:]) + '\n')
t = S + '/target'
executed = parse(open(t + '/executed').read())
applied = open(t + '/applied').read().split()
with open(t + '/rows', 'a') as rows, open(t + '/applied', 'a') as out:
    for line in sys.stdin:
        _, gtid, row = line.rstrip('\n').split(' ', 2)
        if contains(executed, gtid) or gtid in applied:
            continue
        rows.write(row + '\n'); out.write(gtid + '\n'); applied.append(gtid)
"#,
    );
    python(
        dir,
        "mysqlsh",
        r#"
import json, shutil
sys.stdin.readline()
args = sys.argv[1:]
dump = args[args.index('load-dump') + 1]
t = S + '/target'
shutil.rmtree(t, ignore_errors=True); os.makedirs(t)
shutil.copy(dump + '/rows', t + '/rows')
open(t + '/executed', 'w').write(json.load(open(dump + '/@.json'))['gtidExecuted'])
open(t + '/applied', 'w').write('')
print('Loading finished')
"#,
    );
    Tools::in_dir(dir)
}

/// The stand-in instances of the archived cluster: what each executed, its clock, whether it
/// is writable.
struct Primaries {
    dir: PathBuf,
    state: Mutex<BTreeMap<u32, (String, bool, i64)>>,
}

impl Primaries {
    fn set(&self, index: u32, executed: String, writable: bool, now: i64) {
        self.state
            .lock()
            .unwrap()
            .insert(index, (executed, writable, now));
    }

    /// Appends transactions `first..=last` of `uuid` to instance `index`'s `file`, the n-th
    /// committed at `T0 + at(n)`.
    fn write(
        &self,
        index: u32,
        file: &str,
        uuid: &str,
        range: (u32, u32),
        at: impl Fn(u32) -> i64,
    ) {
        let dir = self.dir.join("servers").join(index.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = read(&dir, file);
        for n in range.0..=range.1 {
            text.push_str(&format!("{uuid}:{n} {} {}-{n}\n", T0 + at(n), &uuid[..1]));
        }
        std::fs::write(dir.join(file), text).unwrap();
    }
}

impl BackupServers for Primaries {
    async fn server_uuid(&self, index: u32) -> Result<String, JobError> {
        Ok([UUID_A, UUID_B][index as usize].to_owned())
    }

    async fn binlog_files(&self, index: u32) -> Result<BinlogFiles, JobError> {
        let mut all: Vec<String> =
            std::fs::read_dir(self.dir.join("servers").join(index.to_string()))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
        all.sort();
        Ok(BinlogFiles {
            current: all.last().cloned().unwrap_or_default(),
            all,
        })
    }
}

impl ArchiveServers for Primaries {
    async fn snapshot(&self, index: u32) -> Result<PrimarySnapshot, JobError> {
        let (executed, writable, now) = self.state.lock().unwrap()[&index].clone();
        Ok(PrimarySnapshot {
            executed: GtidSet::parse(&executed).unwrap(),
            purged: GtidSet::new(),
            server_uuid: [UUID_A, UUID_B][index as usize].to_owned(),
            writable,
            now_ms: now * 1000,
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mysql_clusters_binlogs_are_archived_across_a_failover_and_restored_to_the_second() {
    let root = tempfile::tempdir().unwrap();
    let bin = root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let tools = archive_tools(&bin);
    let bucket: Bucket = BucketSpec::from_url(&root.path().join("bucket").display().to_string())
        .unwrap()
        .open(&Default::default())
        .unwrap();
    let prefix = layout::cluster_prefix("prod", "db");

    // A backup at T0 of instance 0 (A:1-10), its dump in MOCO's layout, recorded in the
    // status the archiver starts from.
    let source = root.path().join("dump-source");
    std::fs::create_dir_all(source.join("dump")).unwrap();
    std::fs::write(
        source.join("dump/@.json"),
        format!(r#"{{"gtidExecuted": "{UUID_A}:1-10"}}"#),
    )
    .unwrap();
    std::fs::write(
        source.join("dump/rows"),
        (1..=10).map(|n| format!("a-{n}\n")).collect::<String>(),
    )
    .unwrap();
    let tar = std::process::Command::new("tar")
        .args(["-c", "-f", "-", "-C"])
        .arg(&source)
        .arg("dump")
        .output()
        .unwrap();
    assert!(tar.status.success());
    bucket
        .upload(
            &format::keys::dump_key("prod", "db", Timestamp(T0)),
            &tar.stdout[..],
        )
        .await
        .unwrap();
    let fake = FakeApiServer::new();
    let mut cluster = cluster_object("prod", "db", 3);
    cluster["status"]["backup"] = json!({"gtidSet": format!("{UUID_A}:1-10"), "sourceIndex": 1});
    fake.insert(cluster.clone());
    let addresses = StaticAddresses {
        by_index: (0..3).map(|i| (i, (format!("10.0.0.{i}"), 3306))).collect(),
        agents: BTreeMap::new(),
    };
    let work = root.path().join("work");
    let job = ArchiveJob {
        cluster: ClusterAccess::new(fake.client(), "prod", "db"),
        bucket: bucket.clone(),
        access: PrimaryAccess {
            addresses: Arc::new(addresses.clone()),
            backup_password: BACKUP_PASSWORD.into(),
            binlog_tool: PathBuf::from("unused"),
            scratch: work.join("unused"),
            tls: ServerTls::default(),
        },
        mysql: MysqlTools {
            tools: tools.clone(),
            work_dir: work.clone(),
            threads: std::num::NonZeroU32::new(2).unwrap(),
        },
        every: Duration::from_secs(1),
    };
    let servers = Primaries {
        dir: bin.clone(),
        state: Mutex::default(),
    };
    let round = || async {
        let cluster = job.cluster.get().await.unwrap();
        let id = moco_api::cluster::ClusterId::of(&cluster).unwrap();
        job.mysql_round(&cluster, &id, &servers).await
    };
    let record = |seconds: i64| {
        let (bucket, key) = (
            bucket.clone(),
            mysql_archive::round_record_key(&prefix, seconds * 1000),
        );
        async move {
            let mut text = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(
                &mut bucket.download(&key).await.unwrap(),
                &mut text,
            )
            .await
            .unwrap();
            serde_json::from_slice::<mysql_archive::RoundRecord>(&text).unwrap()
        }
    };

    // Instance 0, the primary: A:1-10 before the backup, A:11-15 after it.
    servers.write(0, "binlog.000001", UUID_A, (1, 10), |n| i64::from(n) - 11);
    servers.write(0, "binlog.000002", UUID_A, (11, 15), |n| i64::from(n) - 10);
    servers.set(0, format!("{UUID_A}:1-15"), true, T0 + 6);
    let first = round().await;
    assert_eq!(first.primary, Some(0));
    let Ok(Archived::Mysql(first)) = first.result else {
        panic!("{first:?}")
    };
    let stored = first.stored.unwrap();
    assert_eq!(stored, record(T0 + 6).await);
    assert_eq!(stored.files, ["binlog.000002"]);
    assert_eq!(
        stored.excluded,
        GtidSet::parse(&format!("{UUID_A}:1-10")).unwrap()
    );
    assert_eq!(
        stored.covers,
        GtidSet::parse(&format!("{UUID_A}:1-15")).unwrap()
    );
    // MOCO's fetch, from the oldest file, without what the backup holds; the password in
    // the option file, which is gone afterwards.
    assert_eq!(
        read(&bin, "mysqlbinlog.calls").trim(),
        format!(
            "--defaults-extra-file={w}/moco-backup.cnf -h 10.0.0.0 --port 3306 --protocol=tcp \
             -u moco-backup --get-server-public-key --read-from-remote-master=BINLOG-DUMP-GTIDS \
             --exclude-gtids={UUID_A}:1-10 -t --raw --result-file={w}/binlog/ binlog.000001",
            w = work.join("archive").display()
        )
    );
    assert!(!work.join("archive/moco-backup.cnf").exists());
    assert!(
        !work.join("archive/binlog").exists(),
        "the fetched files stayed"
    );

    // Nothing new: only the mark moves.
    servers.set(0, format!("{UUID_A}:1-15"), true, T0 + 8);
    let Ok(Archived::Mysql(idle)) = round().await.result else {
        panic!()
    };
    assert_eq!(
        (idle.stored, idle.progress.read_at_ms),
        (None, (T0 + 8) * 1000)
    );

    // A:16-18 committed; A:19 written to the binlog but not committed when the round reads
    // the primary (semi-synchronous: it waits for a replica's acknowledgement).
    servers.write(0, "binlog.000002", UUID_A, (16, 19), |n| i64::from(n) - 7);
    servers.set(0, format!("{UUID_A}:1-18"), true, T0 + 13);
    let Ok(Archived::Mysql(third)) = round().await.result else {
        panic!()
    };
    assert_eq!(
        third.stored.unwrap().covers,
        GtidSet::parse(&format!("{UUID_A}:1-18")).unwrap()
    );

    // Instance 0 fails before A:19 is acknowledged; instance 1 (B), which has A:1-18, is
    // promoted and writes B:1-3. Until the status says so, the round finds a read-only
    // instance and stores nothing.
    servers.set(0, format!("{UUID_A}:1-19"), false, T0 + 14);
    servers.write(1, "binlog.000001", UUID_A, (1, 18), |n| i64::from(n) - 11);
    servers.write(1, "binlog.000002", UUID_B, (1, 3), |n| i64::from(n) + 14);
    servers.set(1, format!("{UUID_A}:1-18,{UUID_B}:1-3"), true, T0 + 18);
    let stale = round().await;
    let e = stale.result.unwrap_err();
    assert!(
        e.contains("instance 0") && e.contains("read-only: not the primary"),
        "{e}"
    );
    cluster["status"]["currentPrimaryIndex"] = json!(1);
    fake.insert(cluster.clone());
    let fourth = round().await;
    assert_eq!(fourth.primary, Some(1));
    let Ok(Archived::Mysql(fourth)) = fourth.result else {
        panic!("{fourth:?}")
    };
    let fourth = fourth.stored.unwrap();
    assert_eq!(
        fourth.excluded,
        GtidSet::parse(&format!("{UUID_A}:1-18")).unwrap()
    );
    assert_eq!(
        fourth.files,
        ["binlog.000002"],
        "B's file only: A's is all excluded"
    );

    // A fetch that fails stores nothing, and the mark stays.
    std::fs::write(bin.join("fail-fetch"), b"").unwrap();
    servers.write(1, "binlog.000002", UUID_B, (4, 4), |_| 19);
    servers.set(1, format!("{UUID_A}:1-18,{UUID_B}:1-4"), true, T0 + 20);
    let e = round().await.result.unwrap_err();
    assert!(
        e.contains("mysqlbinlog") && e.contains("Lost connection"),
        "{e}"
    );
    std::fs::remove_file(bin.join("fail-fetch")).unwrap();
    let contents = moco_backup::job::mysql::archive_store::load(&bucket, &prefix)
        .await
        .unwrap();
    assert_eq!(contents.rounds.len(), 3);
    assert_eq!(contents.latest_ms(), Some((T0 + 18) * 1000));
    assert!(!work.join("archive/binlog").exists());

    // Restores into new clusters: MOCO's layout alone has only the dump.
    let restore = |name: &str, point: i64| {
        fake.insert(cluster_object("new", name, 1));
        RestoreJob {
            cluster: ClusterAccess::new(fake.client(), "new", name),
            source_prefix: "moco/prod/db".into(),
            point: Timestamp(point),
            schema: String::new(),
            users: String::new(),
            bucket: bucket.clone(),
            agents: None,
            addresses: Arc::new(addresses.clone()),
            admin_password: ADMIN_PASSWORD.into(),
            binlog_tool: PathBuf::from("unused"),
            client_tool: PathBuf::from("unused"),
            work_dir: root.path().join(format!("restore-{name}")),
            wait_limit: Duration::from_secs(60),
            tls: ServerTls::default(),
            tools: tools.clone(),
            threads: std::num::NonZeroU32::new(2).unwrap(),
        }
    };
    let rows = || {
        read(&bin, "target/rows")
            .lines()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let expected = |a: u32, b: u32| {
        (1..=a)
            .map(|n| format!("a-{n}"))
            .chain((1..=b).map(|n| format!("b-{n}")))
            .collect::<Vec<_>>()
    };

    // To the last round's second: everything committed, across the failover; never A:19,
    // which was in a fetched file but never committed.
    let target = Target::default();
    restore("latest", T0 + 18).run_mysql(&target).await.unwrap();
    assert_eq!(rows(), expected(18, 3));
    assert_eq!(
        *target.calls.lock().unwrap(),
        ["ready?", "ready?", "open", "close"]
    );
    let decode = read(&bin, "mysqlbinlog.calls");
    let decodes: Vec<&str> = decode
        .lines()
        .filter(|l| l.starts_with("--stop-datetime"))
        .collect();
    assert_eq!(decodes.len(), 3, "the three rounds, in order: {decodes:?}");
    for d in &decodes {
        assert!(
            d.contains(&format!("--include-gtids={UUID_A}:11-18,{UUID_B}:1-3")),
            "{d}"
        );
    }

    // To a second between two rounds: A:16 (at T0+9) is in, A:17 (at T0+10) is not.
    restore("between", T0 + 10)
        .run_mysql(&Target::default())
        .await
        .unwrap();
    assert_eq!(rows(), expected(16, 0));

    // Past the archive: refused before the instance is touched, naming how far it reaches.
    let target = Target::default();
    let e = restore("later", T0 + 30)
        .run_mysql(&target)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("spec.restore.restorePoint: ")
            && e.contains("the binlog archive reaches")
            && e.contains(&mysql_archive::show_ms((T0 + 18) * 1000)),
        "{e}"
    );
    assert!(target.calls.lock().unwrap().is_empty());

    // `moco local backup list` shows MOCO's backup and the archive, and takes neither for
    // an incomplete physical backup.
    let bucket_dir = root.path().join("bucket").display().to_string();
    let out = moco_tests::local::moco_ok(&[
        "local",
        "backup",
        "list",
        "--from",
        &bucket_dir,
        "--cluster",
        "prod/db",
    ]);
    let dump_size = std::fs::metadata(root.path().join("bucket").join(format::keys::dump_key(
        "prod",
        "db",
        Timestamp(T0),
    )))
    .unwrap()
    .len();
    assert!(
        out.contains(&format!(
            "moco/prod/db/{}  MOCO dump  {dump_size} bytes  restores as it is; later seconds \
             through the binlog archive",
            layout::backup_time_text(Timestamp(T0))
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "binlog archive (MySQL): 3 rounds stored, read {} .. {}",
            mysql_archive::show_ms((T0 + 6) * 1000),
            mysql_archive::show_ms((T0 + 18) * 1000)
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "complete up to {}",
            mysql_archive::show_ms((T0 + 18) * 1000)
        )),
        "{out}"
    );
    assert!(
        !out.contains("NOT RESTORABLE") && !out.contains("no backups"),
        "{out}"
    );
}
