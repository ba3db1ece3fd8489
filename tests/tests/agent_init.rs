//! `moco init`, the init container, against a real server: run under MOCO's name with MOCO's
//! command line, twice, then the server started on what it left.

use moco_tests::local::server_or_skip;
use moco_tests::pod::{TestPod, root_on_socket};
use mysql_async::prelude::Queryable;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_creates_the_datadir_once_and_the_server_starts_on_it() {
    let Some(binary) = server_or_skip("init_creates_the_datadir_once_and_the_server_starts_on_it")
    else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let pod = TestPod::new(&binary, root.path(), 2);

    let flags = ["--init-timezones=true", "--lower-case-table-names=1"];
    let first = pod.run_init(10, &flags);
    assert!(
        first.status.success(),
        "first run: {}",
        String::from_utf8_lossy(&first.stderr)
    );
    let log = String::from_utf8_lossy(&first.stderr);
    assert!(log.contains("\"initialized\":true"), "{log}");
    assert!(log.contains("\"loaded_timezones\":true"), "{log}");
    let marker = pod.volume().join("moco-initialized");
    assert!(marker.is_file());
    let snippet = std::fs::read_to_string(pod.conf_dir().join("my.cnf")).unwrap();
    assert!(snippet.contains("server_id = 12\n"), "{snippet}");

    // The second run leaves the datadir alone (a file in it survives) and rewrites the
    // snippet with the new base.
    std::fs::write(pod.volume().join("data").join("sentinel"), b"x").unwrap();
    let second = pod.run_init(20, &flags);
    assert!(
        second.status.success(),
        "second run: {}",
        String::from_utf8_lossy(&second.stderr)
    );
    let log = String::from_utf8_lossy(&second.stderr);
    assert!(log.contains("\"initialized\":false"), "{log}");
    assert!(pod.volume().join("data").join("sentinel").exists());
    let snippet = std::fs::read_to_string(pod.conf_dir().join("my.cnf")).unwrap();
    assert!(snippet.contains("server_id = 22\n"), "{snippet}");

    pod.start().await;
    let mut c = root_on_socket(&pod.socket()).await;
    // lower_case_table_names shapes only the new datadir here; the running server takes it
    // from my.cnf, where the user's ConfigMap puts it too.
    let (server_id, zones, gtid): (u32, u64, String) = c
        .query_first(
            "SELECT @@server_id, (SELECT COUNT(*) FROM mysql.time_zone_name), @@gtid_binlog_pos",
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(server_id, 22);
    assert!(zones > 100, "time zones loaded: {zones}");
    assert_eq!(gtid, "", "loading time zones wrote no binlog event");
    let tokyo: Option<String> = c
        .query_first("SELECT CAST(CONVERT_TZ('2026-01-01 00:00:00', 'UTC', 'Asia/Tokyo') AS CHAR)")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tokyo.as_deref(), Some("2026-01-01 09:00:00"));
    drop(c);
    pod.stop().await;
}

/// A MariaDB Pod coming back while the cluster records another primary starts as a replica
/// (`init_rpl_role = SLAVE`, which rolls back an unacknowledged binlog tail); the primary's
/// own Pod, or a cluster that recorded no primary yet, starts in the default role. The
/// recorded primary is read through the API with the Pod's credentials (a kubeconfig here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_starts_an_instance_that_is_not_the_recorded_primary_as_a_replica() {
    let test = "init_starts_an_instance_that_is_not_the_recorded_primary_as_a_replica";
    let Some(binary) = server_or_skip(test) else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let pod = TestPod::new(&binary, root.path(), 1);
    let fake = moco_testkit::apiserver::FakeApiServer::new();
    let kubeconfig = moco_tests::pod::fake_kubeconfig(&fake, root.path(), "drill").await;
    let env = [("KUBECONFIG", kubeconfig.as_path())];
    let snippet = || std::fs::read_to_string(pod.conf_dir().join("my.cnf")).unwrap();
    let run = |expect: bool| {
        let out = pod.run_init_with(10, &[], &env);
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{log}");
        assert!(log.contains(&format!("\"replica_role\":{expect}")), "{log}");
    };
    // No MySQLCluster readable: the default role, and init still succeeds.
    run(false);
    assert!(!snippet().contains("init_rpl_role"), "{}", snippet());
    fake.insert(serde_json::json!({
        "apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
        "metadata": {"name": "db", "namespace": "drill"},
        "spec": {"replicas": 3, "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "mariadb"}]}},
                 "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"}}]}
    }));
    // No primary recorded yet (clustering never ran).
    run(false);
    let recorded = |index: u32| {
        fake.set_status(
            "moco.cybozu.com/v1beta2/mysqlclusters",
            "drill",
            "db",
            serde_json::json!({"currentPrimaryIndex": index, "conditions": [{
                "type": "Initialized", "status": "True", "reason": "Initialized",
                "message": "", "lastTransitionTime": "2026-11-23T00:00:00Z"}]}),
        );
    };
    recorded(0);
    run(true);
    assert!(
        snippet().ends_with("init_rpl_role = SLAVE\n"),
        "{}",
        snippet()
    );
    // MariaDB takes it (it refuses to start on an option it does not know; the option is a
    // start-up one, with no variable to read back).
    pod.start().await;
    let mut c = root_on_socket(&pod.socket()).await;
    let one: u32 = c.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
    drop(c);
    pod.stop().await;
    // The primary's own Pod.
    recorded(1);
    run(false);
    assert!(!snippet().contains("init_rpl_role"), "{}", snippet());
}

/// A bad command line names the flag; a Pod name without an ordinal names POD_NAME.
#[test]
fn init_refuses_bad_input_by_name() {
    let root = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(moco_tests::local::moco_bin())
        .args(["init", "--lower-case-table-names=3", "10"])
        .env("POD_NAME", "moco-db-0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--lower-case-table-names"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = std::process::Command::new(moco_tests::local::moco_bin())
        .args(["init", "--data-dir"])
        .arg(root.path())
        .arg("10")
        .env("POD_NAME", "db")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("POD_NAME: \"db\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
