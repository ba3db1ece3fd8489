//! `moco local up --tls` (MOCO #544: `require_secure_transport=ON` broke MOCO): the servers
//! serve certificates from the cluster's CA and refuse plain TCP, and every connection the
//! project makes verifies them — the manager's, the replication channels, a clone
//! (`mariadb-backup` from the donor), a backup, and the client option files. A switchover and
//! a kill -9 failover under acknowledged writes through the primary endpoint lose nothing.

use std::time::{Duration, Instant};

use moco_adapters::mysql::tls::Authority;
use moco_tests::local::{
    ClusterDir, Compared, Writer, assert_channels_verify, assert_no_acked_loss, connect,
    create_table_with, endpoint_port, free_port_block, instance_port, moco_async, opts,
    primary_index, purge_binary_logs, server_or_skip, state_is, stored_ids_with, tls_opts, up_args,
    wait_ex_primary_back, wait_status_async, wipe_and_await_clone,
};
use mysql_async::prelude::Queryable;
use serde_json::Value;

fn local(args: &[&str]) -> Vec<String> {
    std::iter::once("local")
        .chain(args.iter().copied())
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tls_cluster_refuses_plain_tcp_and_verifies_every_server() {
    let test = "a_tls_cluster_refuses_plain_tcp_and_verifies_every_server";
    let Some(binary) = server_or_skip(test) else {
        return;
    };
    let dir = ClusterDir::new();
    let mut up = up_args(&dir, 3, free_port_block(5));
    up.push("--tls".to_owned());
    let started = Instant::now();
    moco_async(up).await;
    println!(
        "3 instances with TLS Healthy after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let s = dir.status();
    assert!(state_is(&s, "Healthy"), "{s}");
    let d = dir.arg();
    let admin = dir.password("moco-admin");
    let port = endpoint_port(&s, "primary");
    create_table_with(&dir.opts(port, "moco-writable"))
        .await
        .unwrap();

    // 1. Plain TCP is refused by every instance; a CA other than the cluster's is refused by
    //    the client; with the cluster's CA the session is encrypted.
    let other_ca = Authority::generate("not this cluster's CA").unwrap();
    for i in 0..3 {
        let p = instance_port(&s, i);
        let plain = connect(&opts(p, "moco-admin", &admin), Duration::from_secs(10)).await;
        assert!(plain.is_err(), "instance {i} accepted plain TCP");
        let foreign = tls_opts(p, "moco-admin", &admin, other_ca.cert_pem().into());
        let refused = connect(&foreign, Duration::from_secs(10)).await;
        assert!(refused.is_err(), "a certificate of another CA was accepted");
        let mut c = connect(&dir.opts(p, "moco-admin"), Duration::from_secs(10))
            .await
            .unwrap();
        let cipher: Option<(String, String)> = c
            .query_first("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            .await
            .unwrap();
        assert!(
            cipher.is_some_and(|(_, v)| !v.is_empty()),
            "instance {i}: the session is not encrypted"
        );
    }

    // 2. Every replica's channel uses TLS and verifies its source against the cluster's CA.
    let ca_file = dir.path().join("tls").join("ca.pem").display().to_string();
    let primary = primary_index(&s);
    let replicas = (0..3)
        .filter(|i| *i != primary)
        .map(|i| (i, dir.opts(instance_port(&s, i), "moco-admin")))
        .collect();
    assert_channels_verify(replicas, &ca_file).await;

    // 3. The client option file's TLS: the `mariadb` client verifies the server too.
    let client = binary.tool("mariadb").unwrap();
    let cnf = dir.path().join("client").join("moco-writable.cnf");
    let out = std::process::Command::new(&client)
        .arg(format!("--defaults-extra-file={}", cnf.display()))
        .args(["-N", "-e", "SHOW SESSION STATUS LIKE 'Ssl_version'"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("TLSv1"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // 4. Under writes: a switchover, then kill -9 of the new primary.
    let writer = Writer::start_with(dir.opts(port, "moco-writable"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    moco_async(local(&["switchover", "--dir", &d])).await;
    let switched = wait_status_async(&dir, "switchover", Duration::from_secs(120), move |s| {
        primary_index(s) != primary && state_is(s, "Healthy")
    })
    .await;
    let second = primary_index(&switched);
    println!("switchover over TLS: {primary} -> {second}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    moco_async(local(&[
        "kill",
        "--dir",
        &d,
        &second.to_string(),
        "--down-for",
        "3s",
    ]))
    .await;
    let moved = wait_status_async(&dir, "failover", Duration::from_secs(120), move |s| {
        primary_index(s) != second
    })
    .await;
    println!("failover over TLS: {second} -> {}", primary_index(&moved));
    wait_ex_primary_back(&dir, second, false).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let report = writer.finish().await;
    println!(
        "writer: {} acknowledged, {} failures",
        report.acked.len(),
        report.failures
    );
    assert!(!report.acked.is_empty());
    let mut acked = report.acked;

    // 5. A replica whose datadir is gone after the primary purged its binlogs is cloned:
    //    mariadb-backup reaches the donor over TLS.
    let healthy = wait_status_async(&dir, "Healthy", Duration::from_secs(120), |s| {
        state_is(s, "Healthy")
    })
    .await;
    let primary = primary_index(&healthy);
    purge_binary_logs(&dir.opts(instance_port(&healthy, primary), "moco-admin")).await;
    let wiped = (0..3u64).find(|i| *i != primary).unwrap();
    let after = wipe_and_await_clone(&dir, wiped).await;
    let wiped_opts = dir.opts(instance_port(&after, wiped), "moco-admin");
    assert_channels_verify(vec![(wiped, wiped_opts)], &ca_file).await;

    // 6. A backup: mariadb-backup from a replica over TLS.
    let out = moco_async(local(&["backup", "--dir", &d])).await;
    assert!(out.contains("backed up instance"), "{out}");

    // 7. A restore into a new TLS cluster: its instance is seeded over TLS and holds every
    //    row acknowledged before the backup.
    let restored = ClusterDir::new();
    let bucket = dir.path().parent().unwrap().join("backups");
    moco_async(local(&[
        "restore",
        "--dir",
        &restored.arg(),
        "--from",
        &bucket.display().to_string(),
        "--source",
        "c",
        "--replicas",
        "1",
        "--tls",
        "--base-port",
        &free_port_block(3).to_string(),
        "--detach",
    ]))
    .await;
    let rs = restored.status();
    let rport = instance_port(&rs, 0);
    let ids = stored_ids_with(&restored.opts(rport, "moco-admin"))
        .await
        .unwrap();
    let missing = acked.iter().filter(|id| !ids.contains(id)).count();
    assert_eq!(missing, 0, "the restored cluster lacks acknowledged rows");
    let plain = opts(rport, "moco-admin", &restored.password("moco-admin"));
    assert!(connect(&plain, Duration::from_secs(10)).await.is_err());
    drop(restored);

    // Nothing acknowledged is missing anywhere.
    let writes = Writer::start_with(dir.opts(port, "moco-writable"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    acked.extend(writes.finish().await.acked);
    assert_no_acked_loss(&dir, &after, &acked, Compared::Exactly(3)).await;
    assert_eq!(
        after["instances"][wiped as usize]["errant"],
        Value::Bool(false)
    );
}
