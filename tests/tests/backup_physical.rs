//! MariaDB's physical backup streamed into a bucket and restored from it, against a real
//! server: a directory bucket here (the S3 back-end has its own test against a real S3
//! server in `moco-backup/tests/s3.rs`). The restored instance has every row and continues the
//! source's GTID history; a damaged object is refused before the copy is prepared.

use std::time::Duration;

use moco_adapters::instance::clone::{RestoreTarget, seed};
use moco_backup::ObjectInfo;
use moco_backup::mariadb::physical::{self, BASE_KEY};
use moco_cluster::ports::MysqlPort as _;
use moco_core::moco_accounts::Account;
use moco_core::resources::ByteRate;
use moco_tests::job_bench::writable_with_table;
use moco_tests::local::{connect, opts, server_or_skip};
use moco_tests::object_store::directory_bucket;
use moco_tests::pod::{TestPod, backup_donor, pod_admin as admin, ready_pod, test_password};
use mysql_async::prelude::Queryable;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_physical_backup_restores_every_row_and_the_gtid_history() {
    let test = "a_streamed_physical_backup_restores_every_row_and_the_gtid_history";
    let Some(binary) = server_or_skip(test) else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let source = ready_pod(&binary, root.path(), 0).await;
    let mut c = source.admin().await;
    writable_with_table(&mut c, "id INT PRIMARY KEY, v VARCHAR(100)").await;
    c.query_drop("INSERT INTO app.t SELECT seq, REPEAT('v', 90) FROM app.seq_1_to_20000")
        .await
        .unwrap();
    c.query_drop("INSERT INTO app.t VALUES (0, 'last')")
        .await
        .unwrap();
    let state_before = admin(&source).executed_gtid().await.unwrap();

    let bucket = directory_bucket(&root.path().join("bucket"));
    let prefix = "moco/ns/db/20261123-230000";
    let backup_source = backup_donor(&binary, &source);
    let started = std::time::Instant::now();
    let manifest = physical::backup(&backup_source, state_before.clone(), &bucket, prefix, None)
        .await
        .unwrap();
    let took = started.elapsed();
    println!(
        "backup: {} bytes streamed as {} in {took:?}",
        manifest.base.uncompressed_size, manifest.base.size
    );
    assert!(
        manifest.base.size < manifest.base.uncompressed_size,
        "{manifest:?}"
    );
    let listed = bucket.list(prefix).await.unwrap();
    assert_eq!(
        listed.iter().map(|o| o.key.as_str()).collect::<Vec<_>>(),
        [
            format!("{prefix}/{BASE_KEY}"),
            format!("{prefix}/manifest.json")
        ]
    );
    assert!(listed.contains(&ObjectInfo {
        key: format!("{prefix}/{BASE_KEY}"),
        size: manifest.base.size
    }));
    // A write after the backup is not in it.
    c.query_drop("INSERT INTO app.t VALUES (-1, 'after')")
        .await
        .unwrap();

    // Restore into a new instance's (stopped) datadir, start it, give it the history.
    let target_pod = TestPod::new(&binary, root.path(), 1);
    let out = target_pod.run_init(10, &[]);
    assert!(out.status.success());
    let target = RestoreTarget {
        backup_tool: binary.tool("mariadb-backup").unwrap(),
        mbstream: binary.tool("mbstream").unwrap(),
        datadir: target_pod.volume().join("data"),
        log: target_pod.dir.join("restore.log"),
    };
    let restored = physical::restore(&bucket, prefix, &target).await.unwrap();
    assert_eq!(restored.manifest, manifest);
    // The position read from the stream as it passed is the one the prepared copy names.
    assert_eq!(manifest.position.as_ref(), Some(&restored.position));
    target_pod.start().await;
    let restored_admin = admin(&target_pod);
    seed(
        &restored_admin,
        &manifest.binlog_state_before,
        &restored.position,
    )
    .await
    .unwrap();
    let mut r = connect(
        &opts(
            target_pod.port,
            "moco-admin",
            &test_password(Account::Admin),
        ),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let (rows, after, state): (u64, u64, String) = r
        .query_first("SELECT COUNT(*), SUM(id = -1), @@gtid_binlog_state FROM app.t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rows, 20_001);
    assert_eq!(after, 0, "the write after the backup is not restored");
    assert_eq!(
        state,
        moco_adapters::mysql::sql::mariadb_binlog_state_text(&state_before),
        "the restored instance continues the source's history"
    );

    // A damaged object: one byte changed in the middle.
    target_pod.stop().await;
    let object = root.path().join("bucket").join(prefix).join(BASE_KEY);
    let mut bytes = std::fs::read(&object).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&object, &bytes).unwrap();
    let e = physical::restore(&bucket, prefix, &target)
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("damaged") || e.to_string().contains("mbstream"),
        "{e}"
    );
    // No manifest: an incomplete backup.
    std::fs::remove_file(
        root.path()
            .join("bucket")
            .join(prefix)
            .join("manifest.json"),
    )
    .unwrap();
    let e = physical::restore(&bucket, prefix, &target)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("incomplete"), "{e}");
    drop((c, r));
    source.stop().await;
}

/// `--max-rate`: the backup reads the tool's stream no faster than the cap, and no slower than
/// the cap and the work itself allow. The same source is backed up unpaced first, on the same
/// machine in the same test: the cap is chosen so that the capped backup must last at least
/// four times as long (an ignored cap fails the lower bound however slow the machine is), and
/// it may last at most the stream over the rate plus twice the unpaced run and 5 s (a cap that
/// throttles below its rate fails the upper one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_backup_reads_no_faster_than_its_rate() {
    let test = "a_capped_backup_reads_no_faster_than_its_rate";
    let Some(binary) = server_or_skip(test) else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let source = ready_pod(&binary, root.path(), 0).await;
    let state = admin(&source).executed_gtid().await.unwrap();
    let bucket = directory_bucket(&root.path().join("bucket"));
    let donor = backup_donor(&binary, &source);

    let started = std::time::Instant::now();
    let free = physical::backup(
        &donor,
        state.clone(),
        &bucket,
        "moco/ns/db/20261125-040000",
        None,
    )
    .await
    .unwrap();
    let unpaced = started.elapsed();
    let reference = free.base.uncompressed_size;
    assert!(
        reference > 8 << 20,
        "a stream this small proves little: {reference}"
    );
    let target = (unpaced * 4).max(Duration::from_secs(1));
    let per_second = ((reference as f64 / target.as_secs_f64()) as u64).max(1);
    let rate = ByteRate::parse(&per_second.to_string()).unwrap();

    let prefix = "moco/ns/db/20261125-050000";
    let started = std::time::Instant::now();
    let manifest = physical::backup(&donor, state, &bucket, prefix, Some(&rate))
        .await
        .unwrap();
    let took = started.elapsed();
    let streamed = manifest.base.uncompressed_size;
    let paced = Duration::from_secs_f64(streamed as f64 / rate.bytes_per_second().get() as f64);
    let at_least = paced.saturating_sub(moco_backup::pace::BURST);
    let at_most = paced + unpaced * 2 + Duration::from_secs(5);
    println!(
        "unpaced: {reference} bytes in {unpaced:?}; capped at {rate}: {streamed} bytes in \
         {took:?} (between {at_least:?} and {at_most:?})"
    );
    assert!(
        took >= at_least,
        "{streamed} bytes in {took:?} at {rate}: faster than the cap"
    );
    assert!(
        took <= at_most,
        "{streamed} bytes in {took:?} at {rate}: slower than the cap and the work allow"
    );
    // Paced, it is still whole: the manifest is written and names the position.
    assert!(manifest.position.is_some(), "{manifest:?}");
    assert_eq!(physical::manifest(&bucket, prefix).await.unwrap(), manifest);
    source.stop().await;
}
