//! The instance procedures (`moco_adapters::instance`) against real servers, called the way
//! the agent and the init container will call them: a datadir initialised twice (the second
//! run does nothing), MOCO's accounts on a fresh server, and a MariaDB copy whose two halves
//! are joined by an in-memory byte channel standing in for the network between two agents.

use crate::support;

use std::time::Duration;

use moco_adapters::instance::accounts::{FreshServer, create_accounts};
use moco_adapters::instance::clone::{
    self, BackupSource, RestoreTarget, backup_position, clone_instance_from,
};
use moco_adapters::instance::datadir::{DatadirInit, InitProgram, initialize_datadir};
use moco_adapters::mysql::MysqlInstance;
use moco_adapters::mysqld::{LocalMysqld, ServerKind, free_ports};
use moco_cluster::ports::{Credentials, MysqlPort};
use moco_core::facts::Flavor;
use moco_core::moco_accounts::{Account, MocoPasswords};
use mysql_async::prelude::Queryable;
use support::{Fleet, READY_TIMEOUT, STOP_GRACE, client, mycnf, server_binary, tcp_options};

fn fresh(m: &LocalMysqld, i: usize) -> FreshServer {
    FreshServer {
        name: format!("instance {i}"),
        host: m.host(),
        port: m.port(),
        socket: m
            .settings()
            .socket
            .clone()
            .expect("test my.cnf sets socket"),
        connect_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(60),
        tls: None,
    }
}

fn admin(m: &LocalMysqld, i: usize, pw: &MocoPasswords) -> MysqlInstance {
    MysqlInstance::new(tcp_options(
        m,
        &format!("instance {i}"),
        Account::Admin.name(),
        &pw.admin,
    ))
}

fn donor_credentials(pw: &MocoPasswords) -> Credentials {
    Credentials {
        user: Account::CloneDonor.name().into(),
        password: pw.clone_donor.clone(),
    }
}

async fn rows(m: &LocalMysqld, pw: &MocoPasswords) -> u64 {
    let mut c = client(m, Account::Writable.name(), &pw.writable).await;
    c.query_first("SELECT COUNT(*) FROM app.t")
        .await
        .unwrap()
        .unwrap()
}

/// The datadir procedure is idempotent: an init container restarted after it finished must
/// not touch the datadir again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datadir_initialisation_runs_once() {
    let Some(binary) = server_binary("datadir_initialisation_runs_once") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("node");
    let port = free_ports(1).unwrap()[0];
    std::fs::create_dir_all(&dir).unwrap();
    let defaults = dir.join("my.cnf");
    std::fs::write(&defaults, mycnf(binary.kind(), &dir, port, 1)).unwrap();
    let program = match binary.kind() {
        ServerKind::Mariadb => InitProgram::MariadbInstallDb {
            tool: binary.tool("mariadb-install-db").unwrap(),
            basedir: None,
        },
        ServerKind::Mysql => InitProgram::MysqldInitializeInsecure {
            mysqld: binary.path().to_owned(),
        },
    };
    let init = DatadirInit {
        program,
        defaults_file: defaults,
        datadir: dir.join("data"),
        tmpdir: dir.join("tmp"),
        as_root: rustix::process::geteuid().is_root(),
        timeout: Duration::from_secs(180),
    };
    assert!(
        initialize_datadir(&init).await.unwrap(),
        "first run initialises"
    );
    let marker = dir.join("data").join("mysql");
    let before = std::fs::metadata(&marker).unwrap().modified().unwrap();
    assert!(
        !initialize_datadir(&init).await.unwrap(),
        "second run is a no-op"
    );
    assert_eq!(
        std::fs::metadata(&marker).unwrap().modified().unwrap(),
        before
    );
}

/// Regression: initialisation created the accounts on a writable server and reset binlogs
/// and GTIDs afterwards, so a manager that logged in meanwhile could open the server, a
/// client commit, and the reset then wipe that commit's binlog and GTID (the agent's first
/// start raced the Pod-program tests' writes the same way). Now the reset comes first and
/// the server is read-only for all but root until the manager opens it: a commit made as
/// soon as the accounts exist keeps its GTID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_written_during_initialisation_is_reset() {
    let Some(binary) = server_binary("nothing_written_during_initialisation_is_reset") else {
        return;
    };
    let fleet = Fleet::start(binary.clone(), 1).await;
    let m = &fleet.nodes[0];
    let pw = moco_adapters::mysql::generate_passwords().unwrap();
    let login = |user: &str, password: &str| {
        mysql_async::Opts::from(
            mysql_async::OptsBuilder::default()
                .ip_or_hostname(m.host())
                .tcp_port(m.port())
                .user(Some(user.to_owned()))
                .pass(Some(password.to_owned())),
        )
    };
    // A manager and a client, as eager as can be: open the server and commit the moment the
    // admin account logs in.
    let eager = {
        let admin_login = login(Account::Admin.name(), &pw.admin);
        let writable_login = login(Account::Writable.name(), &pw.writable);
        let manager = admin(m, 0, &pw);
        tokio::spawn(async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            loop {
                assert!(std::time::Instant::now() < deadline, "never logged in");
                if let Ok(c) = mysql_async::Conn::new(admin_login.clone()).await {
                    let _ = c.disconnect().await;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            // A login between `CREATE USER` and its `GRANT` keeps no privileges (they are
            // computed at login): as the manager's next round would, retry on fresh logins.
            loop {
                match manager.set_writable().await {
                    Ok(()) => break,
                    Err(e) => {
                        assert!(std::time::Instant::now() < deadline, "never opened: {e}");
                        manager.forget_connections().await;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            }
            // The client's account and its grants come a moment later.
            loop {
                let done = match mysql_async::Conn::new(writable_login.clone()).await {
                    Ok(mut c) => c.query_drop("CREATE DATABASE early").await,
                    Err(e) => Err(e),
                };
                if done.is_ok() || std::time::Instant::now() > deadline {
                    break done;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    create_accounts(&fresh(m, 0), &pw).await.unwrap();
    let early = eager.await.unwrap();
    let a = admin(m, 0, &pw);
    let status = a.status().await.unwrap();
    match early {
        Ok(()) => assert!(
            !status.gtid_executed.is_empty(),
            "the early commit's GTID was reset: {status:?}"
        ),
        Err(e) => panic!("the early commit failed: {e}"),
    }
}

/// Accounts on two fresh servers, data on the first, then a copy onto the second through the
/// two halves of the clone procedure, with the stream carried by an in-memory channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_and_a_streamed_copy() {
    let Some(binary) = server_binary("accounts_and_a_streamed_copy") else {
        return;
    };
    let kind = binary.kind();
    let fleet = Fleet::start(binary.clone(), 2).await;
    let (donor, recipient) = (&fleet.nodes[0], &fleet.nodes[1]);
    let pw = moco_adapters::mysql::generate_passwords().unwrap();
    for (i, m) in fleet.nodes.iter().enumerate() {
        let info = create_accounts(&fresh(m, i), &pw).await.unwrap();
        let want = match kind {
            ServerKind::Mariadb => Flavor::Mariadb,
            ServerKind::Mysql => Flavor::Mysql,
        };
        assert_eq!(info.dialect.flavor(), want);
    }
    // The fresh server was left read-only with no GTID; root is gone.
    let a0 = admin(donor, 0, &pw);
    let s0 = a0.status().await.unwrap();
    assert!(s0.read_only && s0.gtid_executed.is_empty(), "{s0:?}");
    assert!(support::try_client(donor, "root", "").await.is_err());

    a0.set_writable().await.unwrap();
    let mut c = client(donor, Account::Writable.name(), &pw.writable).await;
    c.query_drop("CREATE DATABASE app").await.unwrap();
    c.query_drop("CREATE TABLE app.t (id INT PRIMARY KEY AUTO_INCREMENT, v TEXT)")
        .await
        .unwrap();
    for _ in 0..50 {
        c.query_drop("INSERT INTO app.t (v) VALUES (REPEAT('x', 1000))")
            .await
            .unwrap();
    }
    drop(c);
    let donor_state = a0.executed_gtid().await.unwrap();
    let a1 = admin(recipient, 1, &pw);

    match kind {
        ServerKind::Mariadb => {
            let dir = fleet.dir();
            let source = BackupSource {
                tool: binary.tool("mariadb-backup").unwrap(),
                defaults_file: donor.defaults_file().to_owned(),
                datadir: donor.settings().datadir.clone(),
                host: donor.host(),
                port: donor.port(),
                credentials: donor_credentials(&pw),
                ssl_ca: None,
                scratch_dir: dir.join("scratch"),
                log: dir.join("donor.log"),
                nice: clone::BACKUP_NICE,
            };
            let target = RestoreTarget {
                backup_tool: binary.tool("mariadb-backup").unwrap(),
                mbstream: binary.tool("mbstream").unwrap(),
                datadir: recipient.settings().datadir.clone(),
                log: dir.join("recipient.log"),
            };
            recipient.stop(STOP_GRACE).await.unwrap();
            // Donor half: backup into one end of the channel.
            let ours = nice_of("self");
            let mut backup = clone::start_backup(&source).unwrap();
            // The tool gives way to the servers; this process (and its threads) does not.
            let pid = backup.pid().unwrap().to_string();
            assert_eq!(nice_of(&pid), (ours + clone::BACKUP_NICE).min(19));
            assert_eq!(nice_of("self"), ours);
            assert_eq!(nice_of("thread-self"), ours);
            let mut out = backup.take_stream().unwrap();
            let (mut tx, rx) = tokio::io::duplex(64 * 1024);
            let send = tokio::spawn(async move {
                let n = tokio::io::copy(&mut out, &mut tx).await.unwrap();
                backup.finish().await.unwrap();
                n
            });
            // Recipient half: unpack from the other end.
            let received = clone::extract(rx, &target).await.unwrap();
            let sent = send.await.unwrap();
            assert_eq!(received, sent);
            assert!(received > 50 * 1000, "{received} bytes");
            let position = clone::prepare(&target).await.unwrap();
            assert_eq!(position, backup_position(&target.datadir).unwrap());
            assert!(!position.is_empty());
            // The copy's first start reads the donor's history from its binlog state file.
            clone::write_binlog_state(&target.datadir, &donor_state, &position).unwrap();
            recipient.start_and_wait(&[], READY_TIMEOUT).await.unwrap();
            let started_with = a1.executed_gtid().await.unwrap();
            assert_eq!(started_with, donor_state, "the state file was not read");
            clone::seed(&a1, &donor_state, &position).await.unwrap();
            // Seeded with another history, its binlog holds GTIDs the new state lacks:
            // RESET MASTER must come first (error 1956 without it); then back again.
            let other = moco_core::gtid::GtidSet::from_mariadb(&format!(
                "9-9-5,{}",
                moco_adapters::mysql::sql::mariadb_binlog_state_text(&donor_state)
            ))
            .unwrap();
            clone::seed(&a1, &other, &position).await.unwrap();
            assert_eq!(a1.executed_gtid().await.unwrap(), other);
            clone::seed(&a1, &donor_state, &position).await.unwrap();
            let s1 = a1.status().await.unwrap();
            assert_eq!(s1.gtid_executed, donor_state);
        }
        ServerKind::Mysql => {
            clone_instance_from(
                &a1,
                &donor.host(),
                donor.port(),
                &donor_credentials(&pw),
                None,
            )
            .await
            .unwrap();
            let _ = recipient.stop(STOP_GRACE).await;
            recipient.start_and_wait(&[], READY_TIMEOUT).await.unwrap();
            let a1 = admin(recipient, 1, &pw);
            assert_eq!(a1.executed_gtid().await.unwrap(), donor_state);
        }
    }
    assert_eq!(rows(recipient, &pw).await, 50);
    fleet.stop().await;
}

/// The nice value of `/proc/<which>` (a pid, `self` or `thread-self`): field 19 of `stat`.
fn nice_of(which: &str) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{which}/stat")).unwrap();
    // The command name (field 2) may hold spaces; the fields after it do not.
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    after_name.split(' ').nth(16).unwrap().parse().unwrap()
}
