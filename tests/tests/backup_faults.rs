//! A physical backup into an S3 store that becomes unreachable mid-upload (moto behind a proxy
//! that drops every connection after the first megabytes): when the store comes back within
//! the retry window the backup completes and restores whole; when it stays down the backup
//! fails, naming the store, and leaves no manifest, so nothing looks complete.

use std::sync::atomic::Ordering;
use std::time::Duration;

use moco_adapters::instance::clone::RestoreTarget;
use moco_backup::BucketSpec;
use moco_backup::mariadb::physical;
use moco_cluster::ports::MysqlPort as _;
use moco_tests::job_bench::writable_with_table;
use moco_tests::local::server_or_skip;
use moco_tests::pod::{backup_donor, pod_admin, ready_pod};
use moco_tests::s3::{FlakyProxy, create_bucket, moto, moto_env, moto_spec};
use mysql_async::prelude::Queryable;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_lost_mid_upload_is_retried_or_leaves_no_complete_backup() {
    let test = "a_store_lost_mid_upload_is_retried_or_leaves_no_complete_backup";
    let Some(binary) = server_or_skip(test) else {
        return;
    };
    let Some(s3) = moto(test) else {
        return;
    };
    create_bucket(s3.port, "flaky").await;
    let root = tempfile::tempdir().unwrap();
    let source = ready_pod(&binary, root.path(), 0).await;
    let mut c = source.admin().await;
    // Rows that do not compress away: the stored backup is several 5 MiB parts.
    writable_with_table(&mut c, "id INT PRIMARY KEY, v VARCHAR(200)").await;
    c.query_drop("INSERT INTO app.t SELECT seq, CONCAT(SHA2(seq, 512), SHA2(-seq, 256)) FROM app.seq_1_to_150000")
        .await
        .unwrap();
    drop(c);
    let backup_source = backup_donor(&binary, &source);
    let env = moto_env();
    let bucket_via = |port: u16, retry: Duration| {
        BucketSpec {
            retry_timeout: Some(retry),
            ..moto_spec(&format!("http://127.0.0.1:{port}"), "s3://flaky")
        }
        .open(&env)
        .unwrap()
    };

    // Down for good: the backup fails and names the store; no manifest, so it is incomplete.
    let proxy = FlakyProxy::start(s3.port, 2 * 1024 * 1024).await;
    let bucket = bucket_via(proxy.port, Duration::from_secs(5));
    let state = pod_admin(&source).executed_gtid().await.unwrap();
    let started = std::time::Instant::now();
    let e = physical::backup(
        &backup_source,
        state.clone(),
        &bucket,
        "moco/ns/db/down",
        None,
    )
    .await
    .unwrap_err();
    println!(
        "down for good: failed after {:.1} s: {e}",
        started.elapsed().as_secs_f64()
    );
    assert!(
        proxy.cut.load(Ordering::SeqCst),
        "the store went down mid-upload"
    );
    assert!(e.to_string().contains("s3://flaky"), "{e}");
    let direct = bucket_via(s3.port, Duration::from_secs(5));
    let m = physical::manifest(&direct, "moco/ns/db/down")
        .await
        .unwrap_err();
    assert!(m.to_string().contains("incomplete"), "{m}");
    assert!(
        direct.list("moco/ns/db/down").await.unwrap().is_empty(),
        "no object of the failed backup"
    );
    drop(proxy);

    // Back within the retry window: the backup completes and restores whole.
    let proxy = FlakyProxy::start(s3.port, 2 * 1024 * 1024).await;
    let bucket = bucket_via(proxy.port, Duration::from_secs(120));
    let cut = proxy.cut.clone();
    let reviver = {
        let up = std::sync::Arc::new(proxy);
        let p = up.clone();
        let handle = tokio::spawn(async move {
            while !cut.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tokio::time::sleep(Duration::from_secs(3)).await;
            p.set_up(true);
        });
        (up, handle)
    };
    let manifest = physical::backup(&backup_source, state, &bucket, "moco/ns/db/blip", None)
        .await
        .unwrap();
    reviver.1.await.unwrap();
    assert!(
        reviver.0.cut.load(Ordering::SeqCst),
        "the store went down mid-upload"
    );
    println!(
        "a 3 s outage mid-upload: the backup completed ({} bytes stored)",
        manifest.base.size
    );
    let target = RestoreTarget {
        backup_tool: binary.tool("mariadb-backup").unwrap(),
        mbstream: binary.tool("mbstream").unwrap(),
        datadir: root.path().join("restored"),
        log: root.path().join("restore.log"),
    };
    let restored = physical::restore(&direct, "moco/ns/db/blip", &target)
        .await
        .unwrap();
    assert_eq!(Some(&restored.position), manifest.position.as_ref());
}
