//! `MysqlInstance` (the `MysqlPort` over mysql_async) and instance initialisation against real
//! servers: `mariadbd` from PATH or /usr/sbin, or the MySQL 8 `mysqld` named by
//! `MOCO_TEST_MYSQLD`. Servers run on free 127.0.0.1 ports in temporary directories and are
//! stopped by pid. Without a server binary the tests fail (`MOCO_SKIP_REAL_SERVER=1` skips).

use crate::support;

use std::time::{Duration, Instant};

use moco_adapters::mysql::{InitOptions, MysqlInstance, initialize, seed_mariadb_clone, sql};

use moco_adapters::mysqld::{LocalMysqld, ServerKind};
use moco_cluster::ports::{Credentials, MysqlPort, PortError};
use moco_core::facts::{Flavor, MysqldStatus, ThreadState};
use moco_core::gtid::GtidSet;
use moco_core::moco_accounts::{Account, MocoPasswords};
use moco_core::operation::ReplicationSource;
use mysql_async::prelude::Queryable;
use support::{
    Fleet, bootstrap_options, client, eventually, server_binary, server_code, tcp_options,
    try_client,
};

/// MOCO's semi-sync timeout: effectively never falls back to asynchronous replication.
const SEMI_SYNC_TIMEOUT_MS: u64 = 86_400_000;
/// Limit for conditions that should hold within a second on an idle machine.
const WAIT: Duration = Duration::from_secs(60);
/// `ER_OPTION_PREVENTS_STATEMENT`: the server is read-only.
const ER_READ_ONLY: u16 = 1290;

fn admin(m: &LocalMysqld, i: usize, pw: &MocoPasswords) -> MysqlInstance {
    // The smallest pool: the read-only fence must still find a second connection to kill.
    MysqlInstance::new(
        tcp_options(
            m,
            &format!("instance {i} (127.0.0.1:{})", m.port()),
            Account::Admin.name(),
            &pw.admin,
        )
        .with_max_connections(1),
    )
}

fn repl_credentials(pw: &MocoPasswords) -> Credentials {
    Credentials {
        user: Account::Repl.name().into(),
        password: pw.repl.clone(),
    }
}

fn source(i: u32, m: &LocalMysqld) -> ReplicationSource {
    ReplicationSource::Instance {
        index: i,
        host: m.host(),
        port: m.port(),
    }
}

async fn initialise_all(fleet: &Fleet, pw: &MocoPasswords) {
    let t = Instant::now();
    for (i, m) in fleet.nodes.iter().enumerate() {
        initialize(
            &bootstrap_options(m, &format!("instance {i}")),
            pw,
            &InitOptions::default(),
        )
        .await
        .unwrap();
    }
    eprintln!("initialize() x{}: {:?}", fleet.nodes.len(), t.elapsed());
}

/// Rows of `moco_test.t`, read as the writable user.
async fn row_count(m: &LocalMysqld, pw: &MocoPasswords) -> u64 {
    let mut c = client(m, Account::Writable.name(), &pw.writable).await;
    let n: Option<u64> = c
        .query_first("SELECT COUNT(*) FROM moco_test.t")
        .await
        .unwrap();
    c.disconnect().await.unwrap();
    n.unwrap()
}

async fn checksum(m: &LocalMysqld, pw: &MocoPasswords) -> String {
    let mut c = client(m, Account::Writable.name(), &pw.writable).await;
    let row: Option<(String, Option<u64>)> =
        c.query_first("CHECKSUM TABLE moco_test.t").await.unwrap();
    c.disconnect().await.unwrap();
    format!("{:?}", row.unwrap().1)
}

/// Inserts ids `from..to`, each acknowledged (autocommit) before the next.
async fn insert_rows(m: &LocalMysqld, pw: &MocoPasswords, from: u32, to: u32) {
    let mut c = client(m, Account::Writable.name(), &pw.writable).await;
    for id in from..to {
        tokio::time::timeout(
            Duration::from_secs(30),
            c.exec_drop(
                "INSERT INTO moco_test.t (id, v) VALUES (?, ?)",
                (id, format!("row {id}")),
            ),
        )
        .await
        .expect("semi-sync commit acknowledged within 30 s")
        .unwrap();
    }
    c.disconnect().await.unwrap();
}

async fn wait_semi_sync_clients(primary: &MysqlInstance, flavor: Flavor, n: u32) -> MysqldStatus {
    let s = eventually("semi-sync replicas connected", WAIT, || async {
        let s = primary.status().await.unwrap();
        let clients_ok = s.semi_sync.source_clients == Some(n);
        (clients_ok && s.replica_hosts.len() == n as usize).then_some(s)
    })
    .await;
    assert_eq!(s.flavor, flavor);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_instance_initialisation_and_clone_seeding() {
    let Some(binary) = server_binary("fresh_instance_initialisation_and_clone_seeding") else {
        return;
    };
    let kind = binary.kind();
    let fleet = Fleet::start(binary, 1).await;
    let m = &fleet.nodes[0];
    let started = Instant::now();

    // Unreachable and wrong-password servers fail fast with context.
    let closed = moco_adapters::mysqld::free_port().unwrap();
    let mut opts = tcp_options(m, "closed port", "moco-admin", "x");
    opts.port = closed;
    let err = MysqlInstance::new(opts).status().await.unwrap_err();
    assert!(matches!(err, PortError::Unreachable { .. }), "{err}");
    assert!(
        err.to_string().starts_with("closed port: unreachable"),
        "{err}"
    );

    // A fresh server, probed as root on the socket.
    let boot = MysqlInstance::new(bootstrap_options(m, "instance 0"));
    let s = boot.status().await.unwrap();
    let version = s.version.clone();
    assert_eq!(s.server_id, 1);
    assert!(
        s.gtid_executed.is_empty() && s.gtid_purged.is_empty(),
        "{s:?}"
    );
    assert!(
        s.replica_status.is_none() && s.replica_hosts.is_empty(),
        "{s:?}"
    );
    assert!(!s.semi_sync.source_enabled, "{s:?}");
    assert_eq!(s.clone_state, None);
    match kind {
        ServerKind::Mariadb => {
            assert_eq!(s.flavor, Flavor::Mariadb);
            assert!(s.server_uuid.is_none());
            // The test my.cnf starts MariaDB read-only; read_only stands for super_read_only.
            assert!(s.read_only && s.super_read_only);
            assert_eq!(s.semi_sync.wait_for_replica_count, None);
            assert_eq!(s.semi_sync.source_timeout_ms, Some(10_000));
            assert_eq!(s.semi_sync.source_clients, Some(0));
        }
        ServerKind::Mysql => {
            assert_eq!(s.flavor, Flavor::Mysql);
            assert!(s.server_uuid.is_some());
        }
    }
    assert!(s.identity().is_some());
    boot.disconnect().await.unwrap();

    // Initialise: accounts, reset, read-only; root is gone afterwards.
    let pw = moco_adapters::mysql::generate_passwords().unwrap();
    let t = Instant::now();
    let info = initialize(
        &bootstrap_options(m, "instance 0"),
        &pw,
        &InitOptions::default(),
    )
    .await
    .unwrap();
    eprintln!("initialize(): {:?}", t.elapsed());
    assert_eq!(info.version, version);
    let again = initialize(
        &bootstrap_options(m, "instance 0"),
        &pw,
        &InitOptions::default(),
    )
    .await
    .unwrap_err();
    // For an account that does not exist, MySQL answers with an authentication plugin it
    // picks at random (so that no one learns which accounts exist), sometimes one the driver
    // does not speak (`sha256_password`): that is a refusal too.
    let mysql_decoy = |text: &str| {
        fleet.binary.kind() == ServerKind::Mysql && text.contains("Unknown authentication plugin")
    };
    match &again {
        PortError::Sql { code, .. } => assert!(*code == 1045 || *code == 1698, "{again}"),
        other if mysql_decoy(&other.to_string()) => {}
        other => panic!("root must be gone after initialisation: {other}"),
    }
    let e = try_client(m, "root", "").await.unwrap_err();
    assert!(
        server_code(&e) == Some(1045) || mysql_decoy(&e.to_string()),
        "{e}"
    );

    let a = admin(m, 0, &pw);
    let s = a.status().await.unwrap();
    assert!(
        s.read_only && s.super_read_only,
        "initialised instances are read-only: {s:?}"
    );
    assert!(
        s.gtid_executed.is_empty(),
        "accounts were created without GTIDs: {s:?}"
    );
    assert!(s.gtid_purged.is_empty(), "{s:?}");
    assert_eq!(
        a.read_only_bypass_accounts().await.unwrap(),
        Vec::<String>::new()
    );
    // Not even the admin's own sessions write through read-only.
    let mut c = a.conn().await.unwrap();
    let e = c
        .query_drop("CREATE DATABASE admin_write")
        .await
        .unwrap_err();
    assert_eq!(server_code(&e), Some(ER_READ_ONLY), "{e}");
    drop(c);

    // All eight accounts log in over TCP with their generated passwords.
    for acct in Account::ALL {
        let mut c = client(m, acct.name(), pw.get(acct)).await;
        let me: Option<String> = c.query_first("SELECT CURRENT_USER()").await.unwrap();
        assert_eq!(me.unwrap(), format!("{}@%", acct.name()));
        c.disconnect().await.unwrap();
    }
    let e = try_client(m, Account::Writable.name(), "wrong")
        .await
        .unwrap_err();
    assert_eq!(server_code(&e), Some(1045));

    // The writable account cannot write while read-only, and can once writable.
    let mut w = client(m, Account::Writable.name(), &pw.writable).await;
    let e = w.query_drop("CREATE DATABASE moco_test").await.unwrap_err();
    assert_eq!(server_code(&e), Some(ER_READ_ONLY), "{e}");
    a.set_writable().await.unwrap();
    w.query_drop("CREATE DATABASE moco_test").await.unwrap();
    w.query_drop("CREATE TABLE moco_test.t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    a.set_super_read_only(Duration::from_secs(10))
        .await
        .unwrap();
    let e = w
        .query_drop("INSERT INTO moco_test.t VALUES (1)")
        .await
        .unwrap_err();
    assert_eq!(server_code(&e), Some(ER_READ_ONLY), "{e}");
    w.disconnect().await.unwrap();
    let executed = a.executed_gtid().await.unwrap();
    assert_eq!(executed.transaction_count(), 2, "{executed}");
    assert!(
        executed
            .sources()
            .all(|src| src.is_server(&s.identity().unwrap()))
    );

    if kind == ServerKind::Mariadb {
        // Clone seeding: the history of the donor becomes this server's binlog state, with
        // the position (highest sequence number) last, and doubles as its purged set.
        let state = GtidSet::parse("0-1-40,0-7-90,0-3-120").unwrap();
        let pos = GtidSet::parse("0-3-120").unwrap();
        seed_mariadb_clone(&a, &state, &pos).await.unwrap();
        let s = a.status().await.unwrap();
        assert_eq!(s.gtid_executed, state);
        assert_eq!(
            s.gtid_purged, state,
            "the first binlog's Gtid_list is the purged state"
        );
        let mut c = a.conn().await.unwrap();
        let (bpos, spos): (String, String) = c
            .query_first("SELECT @@gtid_binlog_pos, @@gtid_slave_pos")
            .await
            .unwrap()
            .unwrap();
        assert_eq!((bpos.as_str(), spos.as_str()), ("0-3-120", "0-3-120"));
        drop(c);
        // A local write continues the domain's sequence under this server's id.
        a.set_writable().await.unwrap();
        let mut w = client(m, Account::Writable.name(), &pw.writable).await;
        w.query_drop("INSERT INTO moco_test.t VALUES (2)")
            .await
            .unwrap();
        w.disconnect().await.unwrap();
        let executed = a.executed_gtid().await.unwrap();
        assert_eq!(
            executed,
            GtidSet::parse("0-1-40,0-7-90,0-3-120,0-1-121").unwrap()
        );
    }
    a.disconnect().await.unwrap();
    fleet.stop().await;
    eprintln!(
        "fresh instance checks: {:?}; verified against {} {}",
        started.elapsed(),
        flavor_name(kind),
        version
    );
}

fn flavor_name(kind: ServerKind) -> &'static str {
    match kind {
        ServerKind::Mariadb => "MariaDB",
        ServerKind::Mysql => "MySQL",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_switchover_and_errant_detection() {
    let Some(binary) = server_binary("replication_switchover_and_errant_detection") else {
        return;
    };
    let kind = binary.kind();
    let flavor = match kind {
        ServerKind::Mariadb => Flavor::Mariadb,
        ServerKind::Mysql => Flavor::Mysql,
    };
    let fleet = Fleet::start(binary, 3).await;
    let started = Instant::now();
    let pw = moco_adapters::mysql::generate_passwords().unwrap();
    initialise_all(&fleet, &pw).await;
    let n = &fleet.nodes;
    let inst: Vec<MysqlInstance> = n
        .iter()
        .enumerate()
        .map(|(i, m)| admin(m, i, &pw))
        .collect();
    let repl = repl_credentials(&pw);

    // --- 1 primary (0) + 2 semi-sync replicas -------------------------------------------
    let t = Instant::now();
    for i in [1, 2] {
        inst[i]
            .configure_replication(&source(0, &n[0]), &repl, true)
            .await
            .unwrap();
    }
    inst[0]
        .configure_primary_semi_sync(1, SEMI_SYNC_TIMEOUT_MS)
        .await
        .unwrap();
    inst[0].set_writable().await.unwrap();
    let ps = wait_semi_sync_clients(&inst[0], flavor, 2).await;
    eprintln!(
        "configure 1 primary + 2 replicas to semi-sync connected: {:?}",
        t.elapsed()
    );
    assert!(!ps.read_only && !ps.super_read_only, "{ps:?}");
    assert!(
        ps.semi_sync.source_enabled && !ps.semi_sync.replica_enabled,
        "{ps:?}"
    );
    assert_eq!(ps.semi_sync.source_timeout_ms, Some(SEMI_SYNC_TIMEOUT_MS));
    assert_eq!(ps.semi_sync.wait_sessions, 0);
    assert!(
        ps.replica_status.is_none(),
        "a primary has no source: {ps:?}"
    );
    let mut hosts: Vec<(u32, String, u16)> = ps
        .replica_hosts
        .iter()
        .map(|h| (h.server_id, h.host.clone(), h.port))
        .collect();
    hosts.sort();
    assert_eq!(
        hosts,
        vec![
            (2, "127.0.0.1".into(), n[1].port()),
            (3, "127.0.0.1".into(), n[2].port())
        ]
    );

    // --- writes on the primary reach both replicas ---------------------------------------
    let mut w = client(&n[0], Account::Writable.name(), &pw.writable).await;
    w.query_drop("CREATE DATABASE moco_test").await.unwrap();
    w.query_drop("CREATE TABLE moco_test.t (id INT PRIMARY KEY, v VARCHAR(32))")
        .await
        .unwrap();
    w.disconnect().await.unwrap();
    let t = Instant::now();
    insert_rows(&n[0], &pw, 0, 50).await;
    eprintln!("50 semi-sync autocommit inserts: {:?}", t.elapsed());
    let gtid = inst[0].executed_gtid().await.unwrap();
    assert_eq!(gtid.transaction_count(), 52, "{gtid}");
    for i in [1, 2] {
        let t = Instant::now();
        inst[i].wait_for_gtid(&gtid, Some(WAIT)).await.unwrap();
        eprintln!("wait_for_gtid on replica {i}: {:?}", t.elapsed());
        let s = inst[i].status().await.unwrap();
        assert!(gtid.is_subset(&s.gtid_executed), "{s:?}");
        assert!(s.read_only && s.super_read_only, "{s:?}");
        assert!(
            s.semi_sync.replica_enabled && !s.semi_sync.source_enabled,
            "{s:?}"
        );
        let r = s.replica_status.clone().unwrap();
        assert_eq!(
            (r.source_host.as_str(), r.source_port),
            ("127.0.0.1", n[0].port())
        );
        assert_eq!(r.io_running, ThreadState::Yes, "{r:?}");
        assert_eq!(r.sql_running, ThreadState::Yes, "{r:?}");
        assert_eq!((r.last_io_errno, r.last_sql_errno), (0, 0), "{r:?}");
        assert!(
            gtid.is_subset(&r.retrieved_gtid_set),
            "retrieved {r:?} vs {gtid}"
        );
        // MySQL counts a second of lag from the last event's timestamp until its applier
        // goes idle; caught up, it reads 0 (MariaDB at once).
        eventually("the replica's lag reads 0", WAIT, || async {
            let r = inst[i].status().await.ok()?.replica_status?;
            (r.seconds_behind_source == Some(0)).then_some(())
        })
        .await;
        assert_eq!(row_count(&n[i], &pw).await, 50);
    }
    // The primary waits on its own binlog (MASTER_GTID_WAIT would say -1 there); a GTID
    // nobody has times out, on the primary and on a replica.
    inst[0]
        .wait_for_gtid(&gtid, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    let future = match kind {
        ServerKind::Mariadb => GtidSet::parse("0-1-100000").unwrap(),
        ServerKind::Mysql => {
            GtidSet::parse(&format!("{}:1-100000", ps.server_uuid.clone().unwrap())).unwrap()
        }
    };
    for i in [0, 1] {
        let t = Instant::now();
        let err = inst[i]
            .wait_for_gtid(&future, Some(Duration::from_millis(1500)))
            .await
            .unwrap_err();
        assert!(matches!(err, PortError::Timeout { .. }), "{err}");
        assert!(
            t.elapsed() >= Duration::from_millis(900),
            "{:?}",
            t.elapsed()
        );
    }

    // --- stop the IO thread of replica 2, write, resume ----------------------------------
    inst[2].stop_replica_io().await.unwrap();
    let r = inst[2].status().await.unwrap().replica_status.unwrap();
    assert_eq!(r.io_running, ThreadState::No, "{r:?}");
    assert_eq!(r.sql_running, ThreadState::Yes, "{r:?}");
    insert_rows(&n[0], &pw, 50, 60).await; // replica 1 still acknowledges
    let gtid = inst[0].executed_gtid().await.unwrap();
    assert!(!gtid.is_subset(&inst[2].executed_gtid().await.unwrap()));
    inst[2]
        .configure_replication(&source(0, &n[0]), &repl, true)
        .await
        .unwrap();
    inst[2].wait_for_gtid(&gtid, Some(WAIT)).await.unwrap();
    inst[1].wait_for_gtid(&gtid, Some(WAIT)).await.unwrap();
    wait_semi_sync_clients(&inst[0], flavor, 2).await;

    // --- fence the primary: read-only, then kill client connections ----------------------
    // A client holding a table write lock blocks read-only; it is killed after `kill_after`.
    let mut locker = client(&n[0], Account::Writable.name(), &pw.writable).await;
    locker
        .query_drop("LOCK TABLES moco_test.t WRITE")
        .await
        .unwrap();
    let t = Instant::now();
    inst[0]
        .set_super_read_only(Duration::from_millis(500))
        .await
        .unwrap();
    let fence = t.elapsed();
    eprintln!("set_super_read_only behind a table lock (kill after 500 ms): {fence:?}");
    assert!(
        fence >= Duration::from_millis(450),
        "the lock must have held it up: {fence:?}"
    );
    assert!(
        locker.query_drop("SELECT 1").await.is_err(),
        "lock holder killed"
    );
    // Clients that connect to the read-only primary cannot write, and are killed.
    let mut idle = client(&n[0], Account::Writable.name(), &pw.writable).await;
    let mut reader = client(&n[0], Account::ReadOnly.name(), &pw.readonly).await;
    let e = idle
        .query_drop("INSERT INTO moco_test.t VALUES (1000, 'x')")
        .await
        .unwrap_err();
    assert_eq!(
        server_code(&e),
        Some(ER_READ_ONLY),
        "writes fail while read-only: {e}"
    );
    let t = Instant::now();
    inst[0].kill_connections().await.unwrap();
    eprintln!("kill_connections: {:?}", t.elapsed());
    assert!(
        idle.query_drop("SELECT 1").await.is_err(),
        "writable client killed"
    );
    assert!(
        reader.query_drop("SELECT 1").await.is_err(),
        "read-only client killed"
    );
    drop((locker, idle, reader));
    let s = inst[0].status().await.unwrap();
    assert!(s.read_only && s.super_read_only, "{s:?}");
    // Replication threads and the admin's own connections survive.
    for i in [1, 2] {
        let r = inst[i].status().await.unwrap().replica_status.unwrap();
        assert_eq!(
            r.io_running,
            ThreadState::Yes,
            "replica {i} lost its source: {r:?}"
        );
    }
    assert_eq!(s.replica_hosts.len(), 2, "{s:?}");

    // --- switch roles: 1 becomes primary, 0 is demoted -----------------------------------
    let t = Instant::now();
    let before = row_count(&n[0], &pw).await;
    let final_gtid = inst[0].executed_gtid().await.unwrap();
    inst[1]
        .wait_for_gtid(&final_gtid, Some(WAIT))
        .await
        .unwrap();
    inst[1]
        .configure_primary_semi_sync(1, SEMI_SYNC_TIMEOUT_MS)
        .await
        .unwrap();
    for i in [0, 2] {
        inst[i]
            .configure_replication(&source(1, &n[1]), &repl, true)
            .await
            .unwrap();
    }
    inst[1].set_writable().await.unwrap();
    let ps = wait_semi_sync_clients(&inst[1], flavor, 2).await;
    eprintln!(
        "switchover (wait, promote, demote, repoint, writable): {:?}",
        t.elapsed()
    );
    assert!(!ps.read_only && ps.replica_status.is_none(), "{ps:?}");
    if kind == ServerKind::Mariadb {
        let mut c = inst[0].conn().await.unwrap();
        let (slave_pos, binlog_pos): (String, String) = c
            .query_first("SELECT @@gtid_slave_pos, @@gtid_binlog_pos")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            slave_pos, binlog_pos,
            "demoted primary's gtid_slave_pos was reset"
        );
    }
    insert_rows(&n[1], &pw, 60, 80).await;
    let gtid = inst[1].executed_gtid().await.unwrap();
    for i in [0, 2] {
        inst[i].wait_for_gtid(&gtid, Some(WAIT)).await.unwrap();
        let s = inst[i].status().await.unwrap();
        let r = s.replica_status.clone().unwrap();
        assert_eq!(r.source_port, n[1].port(), "{r:?}");
        assert!(
            r.io_running == ThreadState::Yes && r.sql_running == ThreadState::Yes,
            "{r:?}"
        );
        assert!(s.super_read_only && s.semi_sync.replica_enabled && !s.semi_sync.source_enabled);
    }
    let expected = before + 20;
    let mut sums = Vec::new();
    for m in n {
        assert_eq!(
            row_count(m, &pw).await,
            expected,
            "no acknowledged row lost"
        );
        sums.push(checksum(m, &pw).await);
    }
    assert!(sums.windows(2).all(|w| w[0] == w[1]), "{sums:?}");

    // --- an errant write on replica 2 is a GTID the primary lacks ------------------------
    let primary_status = inst[1].status().await.unwrap();
    let errant_before = inst[2]
        .status()
        .await
        .unwrap()
        .gtid_executed
        .subtract(&primary_status.gtid_executed);
    assert!(errant_before.is_empty(), "{errant_before}");
    {
        // Open writes on the replica by hand (MariaDB: through the admin's role).
        let d = inst[2].server_info().await.unwrap().dialect;
        let mut c = inst[2].conn().await.unwrap();
        for s in sql::privileged(d, vec!["SET GLOBAL read_only=0".to_owned()]) {
            c.query_drop(s).await.unwrap();
        }
        drop(c);
        let mut w = client(&n[2], Account::Writable.name(), &pw.writable).await;
        w.query_drop("INSERT INTO moco_test.t VALUES (5000, 'errant')")
            .await
            .unwrap();
        w.disconnect().await.unwrap();
        inst[2]
            .set_super_read_only(Duration::from_secs(10))
            .await
            .unwrap();
    }
    let rs = inst[2].status().await.unwrap();
    let ps = inst[1].status().await.unwrap();
    let errant = rs
        .gtid_executed
        .subtract(&ps.gtid_executed)
        .without_server(&ps.identity().unwrap());
    // One source: the replica itself (MariaDB sets count a server's GTIDs from 1 in a
    // domain, so `0-3-83` stands for the replica's single transaction with seq 83).
    assert_eq!(errant.sources().count(), 1, "errant set {errant}");
    if kind == ServerKind::Mysql {
        assert_eq!(errant.transaction_count(), 1, "errant set {errant}");
    }
    let replica_identity = rs.identity().unwrap();
    assert!(
        errant.sources().all(|s| s.is_server(&replica_identity)),
        "{errant}"
    );
    eprintln!("errant transaction on replica 2: {errant}");
    let healthy = inst[0]
        .status()
        .await
        .unwrap()
        .gtid_executed
        .subtract(&ps.gtid_executed)
        .without_server(&ps.identity().unwrap());
    assert!(healthy.is_empty(), "replica 0 is not errant: {healthy}");

    for i in inst {
        i.disconnect().await.unwrap();
    }
    let t = Instant::now();
    fleet.stop().await;
    eprintln!("stop 3 servers: {:?}", t.elapsed());
    eprintln!(
        "replication scenario: {:?}; verified against {} {}",
        started.elapsed(),
        flavor_name(kind),
        ps.version
    );
}

/// Two instances: 0 a writable primary waiting for one semi-sync acknowledgement, 1 its
/// connected semi-sync replica; with the passwords, the flavour and both admin ports.
async fn semi_sync_pair(
    binary: moco_adapters::mysqld::ServerBinary,
) -> (Fleet, MocoPasswords, Flavor, MysqlInstance, MysqlInstance) {
    let flavor = match binary.kind() {
        ServerKind::Mariadb => Flavor::Mariadb,
        ServerKind::Mysql => Flavor::Mysql,
    };
    let fleet = Fleet::start(binary, 2).await;
    let pw = moco_adapters::mysql::generate_passwords().unwrap();
    initialise_all(&fleet, &pw).await;
    let n = &fleet.nodes;
    let (primary, replica) = (admin(&n[0], 0, &pw), admin(&n[1], 1, &pw));
    replica
        .configure_replication(&source(0, &n[0]), &repl_credentials(&pw), true)
        .await
        .unwrap();
    primary
        .configure_primary_semi_sync(1, SEMI_SYNC_TIMEOUT_MS)
        .await
        .unwrap();
    primary.set_writable().await.unwrap();
    wait_semi_sync_clients(&primary, flavor, 1).await;
    (fleet, pw, flavor, primary, replica)
}

/// Regression (hung-primary drill): stopping a semi-sync replica's IO thread while its source
/// answers nothing. MariaDB's `STOP SLAVE` first connects to the source to end the dump
/// thread, bounded only by `rpl_semi_sync_slave_kill_conn_timeout` (0 = no bound: 24 s
/// measured); the port stops it on the replica alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_replication_from_a_frozen_source_does_not_wait_for_it() {
    let Some(binary) = server_binary("stopping_replication_from_a_frozen_source") else {
        return;
    };
    let (fleet, pw, flavor, _primary, replica) = semi_sync_pair(binary).await;
    let n = &fleet.nodes;
    if flavor == Flavor::Mariadb {
        let mut c = client(&n[1], Account::Admin.name(), &pw.admin).await;
        c.query_drop("SET GLOBAL rpl_semi_sync_slave_kill_conn_timeout = 0")
            .await
            .unwrap();
    }
    n[0].freeze().unwrap().expect("the source runs");
    let stopped = tokio::time::timeout(Duration::from_secs(10), replica.stop_replica_io()).await;
    n[0].thaw().unwrap();
    stopped
        .expect("STOP of the IO thread waited for the frozen source")
        .unwrap();
    let r = replica.status().await.unwrap().replica_status.unwrap();
    assert_eq!(r.io_running, ThreadState::No, "{r:?}");
    fleet.stop().await;
}

/// Issue 35 (the manager stalled after a thawed ex-primary): a MariaDB primary whose commit
/// waits for an acknowledgement no replica can give, with more commits queued behind it, blocks
/// `SHOW BINARY LOGS` and `SHOW BINLOG EVENTS` on the binlog lock until the wait ends, which
/// on a one-day semi-sync timeout is never. The status probe read its purged set with them, so
/// such an instance never answered a probe: a thawed ex-primary stayed unreachable and
/// unfenced, and a primary whose replicas all left stalled every round. The probe must answer,
/// and the fence must end the wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_with_commits_waiting_for_acknowledgements_still_answers_probes() {
    let Some(binary) = server_binary("a_primary_with_commits_waiting_for_acknowledgements") else {
        return;
    };
    let (fleet, pw, _, primary, replica) = semi_sync_pair(binary).await;
    let n = &fleet.nodes;
    let mut w = client(&n[0], Account::Writable.name(), &pw.writable).await;
    w.query_drop("CREATE DATABASE moco_test").await.unwrap();
    w.query_drop("CREATE TABLE moco_test.t (id INT PRIMARY KEY, v TEXT)")
        .await
        .unwrap();
    let before = primary.status().await.unwrap();

    // The only replica leaves: from here no commit is ever acknowledged.
    replica.stop_replica_io().await.unwrap();
    eventually("the replica disconnected", WAIT, || async {
        let s = primary.status().await.unwrap();
        (s.semi_sync.source_clients == Some(0)).then_some(())
    })
    .await;
    // Three writers: one waits for the acknowledgement, the others queue behind it.
    let writers: Vec<_> = (0..3)
        .map(|id| {
            let port = n[0].port();
            let password = pw.writable.clone();
            tokio::spawn(async move {
                let opts = mysql_async::OptsBuilder::default()
                    .ip_or_hostname("127.0.0.1")
                    .tcp_port(port)
                    .prefer_socket(false)
                    .user(Some(Account::Writable.name()))
                    .pass(Some(password));
                let mut c = mysql_async::Conn::new(opts).await.unwrap();
                c.exec_drop("INSERT INTO moco_test.t (id, v) VALUES (?, 'stuck')", (id,))
                    .await
            })
        })
        .collect();
    let mut watcher = client(&n[0], Account::Admin.name(), &pw.admin).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let states: Vec<String> = watcher
            .query(
                "SELECT STATE FROM information_schema.PROCESSLIST \
                 WHERE USER = 'moco-writable' AND INFO LIKE 'INSERT%'",
            )
            .await
            .unwrap();
        if states.len() == 3 && states.iter().any(|s| s.contains("semi-sync")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "writers never queued: {states:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }

    let started = Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(10), primary.status())
        .await
        .expect("the probe of a primary with waiting commits did not answer within 10 s")
        .unwrap();
    eprintln!("probe with waiting commits: {:?}", started.elapsed());
    assert!(!status.read_only, "{status:?}");
    assert!(status.semi_sync.wait_sessions >= 1, "{status:?}");
    // The purged set is the one read before the wait (nothing was purged since).
    assert_eq!(status.gtid_purged, before.gtid_purged);

    // The fence ends the wait: read-only after killing the waiting sessions, none of the
    // three writes acknowledged.
    tokio::time::timeout(
        Duration::from_secs(30),
        primary.set_super_read_only(Duration::from_secs(1)),
    )
    .await
    .expect("the fence did not finish")
    .unwrap();
    for w in writers {
        let outcome = tokio::time::timeout(WAIT, w)
            .await
            .expect("writer ended")
            .unwrap();
        assert!(
            outcome.is_err(),
            "a write was acknowledged without a replica"
        );
    }
    let after = primary.status().await.unwrap();
    assert!(
        after.read_only && after.semi_sync.wait_sessions == 0,
        "{after:?}"
    );
    fleet.stop().await;
}

/// Issue 12, item 1: on MariaDB the writable account could `DROP USER 'moco-admin'@'%'` (and
/// lock, rename or re-key it, or edit the grant tables), which replicates and leaves a failed
/// primary without failover. No application account may touch the operator's accounts; the
/// application still owns its own databases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_application_accounts_cannot_touch_the_operators_accounts() {
    let Some(binary) =
        server_binary("the_application_accounts_cannot_touch_the_operators_accounts")
    else {
        return;
    };
    let kind = binary.kind();
    let fleet = Fleet::start(binary, 1).await;
    let m = &fleet.nodes[0];
    let pw = moco_adapters::mysql::generate_passwords().unwrap();
    initialise_all(&fleet, &pw).await;
    let a = admin(m, 0, &pw);
    a.set_writable().await.unwrap();

    let grants_of_every_account = || async {
        let mut c = client(m, Account::Admin.name(), &pw.admin).await;
        let mut all = Vec::new();
        for acct in Account::ALL {
            let q = format!("SHOW GRANTS FOR '{}'@'%'", acct.name());
            let rows: Vec<String> = c.query(&q).await.unwrap();
            all.push(rows);
        }
        c.disconnect().await.unwrap();
        all
    };
    let before = grants_of_every_account().await;

    let grant_table = match kind {
        ServerKind::Mariadb => "mysql.global_priv",
        ServerKind::Mysql => "mysql.user",
    };
    let mut attacks = vec![
        "ALTER USER 'moco-admin'@'%' ACCOUNT LOCK".to_owned(),
        "ALTER USER 'moco-admin'@'%' IDENTIFIED BY 'taken'".to_owned(),
        "ALTER USER 'moco-admin'@'%' WITH MAX_USER_CONNECTIONS 1".to_owned(),
        "RENAME USER 'moco-admin'@'%' TO 'gone'@'%'".to_owned(),
        "SET PASSWORD FOR 'moco-admin'@'%' = 'taken'".to_owned(),
        "REVOKE ALL PRIVILEGES, GRANT OPTION FROM 'moco-admin'@'%'".to_owned(),
        format!("DELETE FROM {grant_table} WHERE User = 'moco-admin'"),
        format!("UPDATE {grant_table} SET Host = 'nowhere' WHERE User = 'moco-repl'"),
        format!("DROP TABLE {grant_table}"),
        format!("ALTER TABLE {grant_table} COMMENT 'x'"),
        "RENAME TABLE mysql.db TO app.db".to_owned(),
        "CREATE TABLE mysql.app (i INT)".to_owned(),
        "CREATE DEFINER = 'moco-admin'@'%' PROCEDURE app.p() SELECT 1".to_owned(),
        "DROP DATABASE mysql".to_owned(),
    ];
    for acct in Account::ALL.into_iter().filter(|a| a.is_system()) {
        attacks.push(format!("DROP USER '{}'@'%'", acct.name()));
    }
    if kind == ServerKind::Mariadb {
        attacks.push("GRANT 'moco-read-only-admin' TO 'moco-writable'@'%'".to_owned());
        attacks.push("SET GLOBAL read_only = 1".to_owned());
    }

    let mut w = client(m, Account::Writable.name(), &pw.writable).await;
    // What the application does with its own data works.
    for q in [
        "CREATE DATABASE app",
        "CREATE TABLE app.t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO app.t VALUES (1, 1)",
        "UPDATE app.t SET v = 2",
        "ALTER TABLE app.t ADD COLUMN w INT",
        "CREATE INDEX tv ON app.t (v)",
        "CREATE VIEW app.v AS SELECT id FROM app.t",
        "CREATE PROCEDURE app.p() SELECT COUNT(*) FROM app.t",
        "CALL app.p()",
        "CREATE EVENT app.e ON SCHEDULE EVERY 1 DAY DO DELETE FROM app.t WHERE id < 0",
        "GRANT SELECT ON app.* TO 'moco-readonly'@'%'",
        "REVOKE SELECT ON app.* FROM 'moco-readonly'@'%'",
        "DELETE FROM app.t",
        "CREATE DATABASE app2",
        "DROP DATABASE app2",
    ] {
        w.query_drop(q)
            .await
            .unwrap_or_else(|e| panic!("the writable account must run {q:?}: {e}"));
    }
    let _: Vec<(String, String)> = w
        .query("SELECT User, Host FROM mysql.user")
        .await
        .expect("the grant tables stay readable, as on MOCO");
    match kind {
        // MySQL: application users are the writable account's to manage, as on MOCO.
        ServerKind::Mysql => {
            w.query_drop("CREATE USER 'app'@'%' IDENTIFIED BY 'app-password'")
                .await
                .unwrap();
            w.query_drop("DROP USER 'app'@'%'").await.unwrap();
        }
        // MariaDB: CREATE USER would reach the operator's accounts too; the admin creates
        // application users.
        ServerKind::Mariadb => {
            let e = w
                .query_drop("CREATE USER 'app'@'%' IDENTIFIED BY 'app-password'")
                .await
                .unwrap_err();
            assert_eq!(server_code(&e), Some(1227), "{e}");
        }
    }

    // Nothing reaches the operator's accounts or the grant tables, as either account.
    let mut r = client(m, Account::ReadOnly.name(), &pw.readonly).await;
    for q in &attacks {
        for (who, conn) in [("moco-writable", &mut w), ("moco-readonly", &mut r)] {
            match conn.query_drop(q.as_str()).await {
                Ok(()) => panic!("{who} ran {q:?}"),
                Err(e) => {
                    let code = server_code(&e);
                    assert!(
                        code.is_some() && code != Some(1064),
                        "{who}: {q:?} must be refused by the server, not misparsed: {e}"
                    );
                }
            }
        }
    }
    w.disconnect().await.unwrap();
    r.disconnect().await.unwrap();

    assert_eq!(grants_of_every_account().await, before);
    for acct in Account::ALL {
        let c = client(m, acct.name(), pw.get(acct)).await;
        c.disconnect().await.unwrap();
    }
    a.disconnect().await.unwrap();
    fleet.stop().await;
}

/// A fact the rotation of MOCO's passwords builds on: a replica's IO thread connects as
/// `moco-repl` with either of the two passwords MariaDB holds for it (two
/// `mysql_native_password` methods joined by `OR`): with the old one it stored, and, configured
/// again, with the new one (the server's client follows the switch to the second method); once
/// the old one is dropped, the new one still connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_connects_with_either_password_of_a_two_password_repl_account() {
    let Some(binary) =
        server_binary("a_replica_connects_with_either_password_of_a_two_password_repl_account")
    else {
        return;
    };
    if binary.kind() != ServerKind::Mariadb {
        return;
    }
    let (fleet, pw, _, _primary, replica) = semi_sync_pair(binary).await;
    let n = &fleet.nodes;
    let io_connected = |what: &'static str| {
        let replica = &replica;
        async move {
            eventually(what, WAIT, || async {
                let s = replica.status().await.ok()?;
                let r = s.replica_status?;
                (r.io_running == ThreadState::Yes).then_some(())
            })
            .await;
        }
    };
    io_connected("the IO thread connected with the first password").await;
    let mut c = client(&n[0], Account::Admin.name(), &pw.admin).await;
    c.query_drop(format!(
        "ALTER USER 'moco-repl'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD({}) \
         OR mysql_native_password USING PASSWORD('second-repl-password')",
        sql::quote(&pw.repl)
    ))
    .await
    .unwrap();
    c.query_drop("CREATE DATABASE two_passwords").await.unwrap();
    eventually("the replica has the database", WAIT, || async {
        has_database(&n[1], &pw, "two_passwords")
            .await
            .then_some(())
    })
    .await;
    // Reconnect with the stored (first) password.
    replica.stop_replica_io().await.unwrap();
    replica.start_replica(false).await.unwrap();
    io_connected("the IO thread reconnected with the first password").await;
    // Configured with the second password.
    let second = Credentials {
        user: Account::Repl.name().into(),
        password: "second-repl-password".into(),
    };
    replica
        .configure_replication(&source(0, &n[0]), &second, true)
        .await
        .unwrap();
    io_connected("the IO thread connected with the second password").await;
    // The first dropped: the second still connects, the first would not.
    c.query_drop("ALTER USER 'moco-repl'@'%' IDENTIFIED BY 'second-repl-password'")
        .await
        .unwrap();
    replica.stop_replica_io().await.unwrap();
    replica.start_replica(false).await.unwrap();
    io_connected("the IO thread reconnected after the first was dropped").await;
    assert!(
        try_client(&n[0], Account::Repl.name(), &pw.repl)
            .await
            .is_err(),
        "the first password is refused"
    );
    c.disconnect().await.unwrap();
    fleet.stop().await;
}

/// Whether `m` has database `name` (asked as moco-admin).
async fn has_database(m: &LocalMysqld, pw: &MocoPasswords, name: &str) -> bool {
    let mut c = client(m, Account::Admin.name(), &pw.admin).await;
    let n: Option<u64> = c
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
            (name,),
        )
        .await
        .unwrap();
    c.disconnect().await.unwrap();
    n.unwrap_or(0) == 1
}
