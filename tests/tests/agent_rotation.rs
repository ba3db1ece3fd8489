//! The agent rotates the slow query log by size and on its schedule, against a real server,
//! and counts rotations in its metrics.

use std::time::{Duration, Instant};

use moco_tests::certs::TestCerts;
use moco_tests::local::server_or_skip;
use moco_tests::pod::{AgentProcess, TestPod, get, wait_http};
use mysql_async::prelude::Queryable;

async fn wait_until(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> bool,
    log: impl Fn() -> String,
) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "{what} never happened\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_rotates_the_slow_log_by_size_and_on_schedule() {
    let test = "the_agent_rotates_the_slow_log_by_size_and_on_schedule";
    let Some(binary) = server_or_skip(test) else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let certs = TestCerts::write(&root.path().join("certs"));
    let pod = TestPod::new(&binary, root.path(), 0);
    pod.init_and_start(10).await;
    // By size only: the schedule fires once a year.
    let mut agent = AgentProcess::start(
        &pod,
        &certs.agent.0,
        &[
            "--log-rotation-size=4096",
            "--log-rotation-schedule=@yearly",
        ],
    );
    wait_http(
        agent.probe,
        "/healthz",
        200,
        Duration::from_secs(120),
        || agent.log_tail(),
    )
    .await;
    let mut c = pod.admin().await;
    c.query_drop("SET GLOBAL slow_query_log=ON").await.unwrap();
    c.query_drop("SET GLOBAL long_query_time=0").await.unwrap();
    c.disconnect().await.unwrap();
    let mut c = pod.admin().await;
    let slow = pod.slow_log();
    let rotated = slow.with_file_name("mysql.slow.0");
    // Every statement is slow now: a few dozen fill 4 KiB.
    for i in 0..200 {
        c.query_drop(format!("SELECT {i} /* fill the slow log */"))
            .await
            .unwrap();
    }
    wait_until(
        "a rotation by size",
        Duration::from_secs(60),
        || rotated.exists(),
        || agent.log_tail(),
    )
    .await;
    let rotated_text = std::fs::read_to_string(&rotated).unwrap();
    assert!(rotated_text.contains("fill the slow log"), "{rotated_text}");
    // The server writes to a new file after the flush.
    c.query_drop("SELECT 'after the rotation'").await.unwrap();
    wait_until(
        "the server writing a new log",
        Duration::from_secs(30),
        || std::fs::read_to_string(&slow).is_ok_and(|t| t.contains("after the rotation")),
        || agent.log_tail(),
    )
    .await;
    let metrics = get(agent.metrics, "/metrics").await.unwrap().1;
    let count = metrics
        .lines()
        .find(|l| l.starts_with("moco_instance_log_rotation_count{"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(count >= 1.0, "{metrics}");
    assert!(
        metrics.contains("moco_instance_log_rotation_failure_count{name=\"db\",index=\"0\"} 0"),
        "{metrics}"
    );

    // On schedule only.
    agent.stop();
    std::fs::remove_file(&rotated).unwrap();
    let agent = AgentProcess::start(&pod, &certs.agent.0, &["--log-rotation-schedule=@every 1s"]);
    wait_until(
        "a rotation on schedule",
        Duration::from_secs(60),
        || rotated.exists(),
        || agent.log_tail(),
    )
    .await;
    drop(c);
    drop(agent);
    pod.stop().await;
}

/// A schedule the agent cannot read is refused at start, naming the flag.
#[test]
fn a_bad_schedule_names_the_flag() {
    let out = std::process::Command::new(moco_tests::local::moco_bin())
        .args(["agent", "--log-rotation-schedule=every day"])
        .env("POD_NAME", "moco-db-0")
        .env("CLUSTER_NAME", "db")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--log-rotation-schedule"), "{err}");
}
