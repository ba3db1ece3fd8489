//! Benchmark (ignored by `cargo test`; run with `--release … -- --ignored --nocapture`, see
//! `docs/benchmarks.md`): the backup Job's path on Kubernetes, a MariaDB backup streamed from
//! the source's agent over mutual TLS, compressed and hashed into a directory bucket, against
//! the floor measured in the same run on the same server: `mariadb-backup --stream | zstd -1`
//! into a file. `BENCH_ROWS` sets the data size (default 1,000,000 rows, about 300 MB).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use moco_core::moco_accounts::Account;
use moco_testkit::apiserver::FakeApiServer;
use moco_tests::job_bench::{
    AgentBench, addresses, agent_backup, cluster_object, pod_object, writable_with_table,
};
use moco_tests::object_store::directory_bucket;
use moco_tests::pod::test_password;
use mysql_async::prelude::Queryable;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run by hand, numbers in docs/benchmarks.md"]
async fn bench_the_backup_job_through_the_agent_against_the_floor() {
    // A debug build compresses (zstd's C code at -O0), encrypts and streams several times
    // slower than the release build that runs in a Pod: its numbers say nothing about the Job.
    if cfg!(debug_assertions) {
        panic!(
            "run this benchmark from a release build: cargo test --release -p moco-tests \
             --test integration bench_kube_backup:: -- --ignored --nocapture"
        );
    }
    let Some(bench) = AgentBench::start("bench_kube_backup") else {
        return;
    };
    let (binary, root) = (&bench.binary, &bench.root);
    let rows: u64 = std::env::var("BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let ([pod], [agent]) = bench
        .pods_with_agents(root.path(), None, &[], Duration::from_secs(120))
        .await;
    let mut c = pod.admin().await;
    writable_with_table(&mut c, "id INT PRIMARY KEY, v VARCHAR(300)").await;
    let load = Instant::now();
    let mut done = 0;
    while done < rows {
        let n = (rows - done).min(100_000);
        c.query_drop(format!(
            "INSERT INTO app.t SELECT seq, REPEAT(MD5(seq), 8) FROM app.seq_{}_to_{}",
            done + 1,
            done + n
        ))
        .await
        .unwrap();
        done += n;
    }
    c.query_drop("ANALYZE TABLE app.t").await.unwrap();
    let size: u64 = c
        .query_first(
            "SELECT DATA_LENGTH + INDEX_LENGTH FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = 't'",
        )
        .await
        .unwrap()
        .unwrap();
    println!(
        "loaded {rows} rows ({:.0} MB) in {:.1} s",
        size as f64 / 1e6,
        load.elapsed().as_secs_f64()
    );

    let fake = FakeApiServer::new();
    fake.insert(cluster_object("prod", "uid-db", 1));
    fake.insert(pod_object("prod", 0, true));
    let addresses = addresses(&[pod.port], &[agent.agent.port()]);
    let floor_dir = root.path().join("floor");
    std::fs::create_dir_all(&floor_dir).unwrap();
    let floor = || {
        let scratch = root.path().join("floor-scratch");
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&scratch).unwrap();
        let started = Instant::now();
        let mut tool = Command::new(binary.tool("mariadb-backup").unwrap())
            .args([
                format!("--defaults-file={}", pod.mysqld.defaults_file().display()),
                "--backup".into(),
                "--stream=xbstream".into(),
                "--host=127.0.0.1".into(),
                format!("--port={}", pod.port),
                "--user=moco-clone-donor".into(),
                format!("--password={}", test_password(Account::CloneDonor)),
                format!("--datadir={}", pod.volume().join("data").display()),
                format!("--target-dir={}", scratch.display()),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let zstd = Command::new("zstd")
            .args(["-1", "-q", "-f", "-o"])
            .arg(floor_dir.join("floor.zst"))
            .stdin(tool.stdout.take().unwrap())
            .status()
            .unwrap();
        assert!(tool.wait().unwrap().success() && zstd.success());
        started.elapsed()
    };
    for run in 0..2 {
        let bucket_dir = root.path().join(format!("bucket-{run}"));
        std::fs::create_dir_all(&bucket_dir).unwrap();
        let bucket = directory_bucket(&bucket_dir);
        let job = bench.backup_job(
            &fake,
            "prod",
            &bucket,
            &addresses,
            test_password(Account::CloneDonor),
            "work",
        );
        let floor_time = floor();
        // The physical part alone: what the Job does between choosing the source and the
        // binlog step (the agent's stream, compressed and hashed into the bucket).
        let started = Instant::now();
        let (state, stream) = agent_backup(job.agents.as_ref().unwrap(), &agent)
            .await
            .unwrap();
        let manifest = moco_backup::mariadb::physical::store_stream(
            stream,
            moco_core::time::Timestamp(0),
            state,
            &job.bucket,
            &format!("moco/prod/db/bench-{run}"),
            None,
        )
        .await
        .unwrap();
        let physical = started.elapsed();
        // The whole Job, binlog step included: into an empty archive it fetches every binlog
        // file of the load through the primary.
        let started = Instant::now();
        let done = job.run().await.unwrap();
        let job_time = started.elapsed();
        println!(
            "run {run}: backup through the agent {:.2} s ({} MB raw -> {} MB stored), floor {:.2} s, \
             ratio {:.2}; whole Job {:.2} s (binlogs {} MB stored)",
            physical.as_secs_f64(),
            manifest.base.uncompressed_size / 1_000_000,
            manifest.base.size / 1_000_000,
            floor_time.as_secs_f64(),
            physical.as_secs_f64() / floor_time.as_secs_f64(),
            job_time.as_secs_f64(),
            done.status.binlog_size / 1_000_000
        );
    }
    drop(agent);
    pod.stop().await;
}
