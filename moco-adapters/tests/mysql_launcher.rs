//! The local server launcher against a real `mariadbd` (or the `mysqld` named by
//! `MOCO_TEST_MYSQLD`): initialise, start detached, stop, kill, restart with extra arguments.

use crate::support;

use std::time::{Duration, Instant};

use moco_adapters::mysqld::{
    LocalMysqld, MysqldError, ServerKind, StopOutcome, free_port, is_server_process, process_alive,
};
use support::{INIT_TIMEOUT, READY_TIMEOUT, STOP_GRACE, mycnf, server_binary};

fn process_group(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // pid (comm) state ppid pgrp ...; comm may hold spaces, so split after the last ')'.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split(' ').nth(2).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launcher_lifecycle() {
    let Some(binary) = server_binary("launcher_lifecycle") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("node");
    let port = free_port().unwrap();
    let m =
        LocalMysqld::create(binary.clone(), &dir, &mycnf(binary.kind(), &dir, port, 7)).unwrap();

    let t = Instant::now();
    assert!(
        m.initialize(INIT_TIMEOUT).await.unwrap(),
        "fresh datadir is initialised"
    );
    eprintln!("initialise: {:?}", t.elapsed());
    assert!(m.is_initialized());
    assert!(
        !m.initialize(INIT_TIMEOUT).await.unwrap(),
        "second initialise is a no-op"
    );

    let t = Instant::now();
    let pid = m.start_and_wait(&[], READY_TIMEOUT).await.unwrap();
    eprintln!("start to ready: {:?}", t.elapsed());
    assert_eq!(
        process_group(pid),
        pid,
        "server leads its own process group"
    );
    assert_eq!(m.running_pid(), Some(pid));
    assert!(is_server_process(pid, m.defaults_file()));
    let pid_file = m.settings().pid_file.clone();
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().trim(),
        pid.to_string()
    );
    match m.start(&[]) {
        Err(MysqldError::AlreadyRunning { pid: p, .. }) => assert_eq!(p, pid),
        other => panic!("second start must be refused, got {other:?}"),
    }

    // Another handle (as `moco local stop` in a later process would open) sees and stops it;
    // dropping the handle that started it does not stop the server.
    drop(m);
    assert!(
        process_alive(pid),
        "server outlives the handle that started it"
    );
    let m = LocalMysqld::open(binary.clone(), &dir).unwrap();
    assert_eq!(m.running_pid(), Some(pid));
    let t = Instant::now();
    assert_eq!(m.stop(STOP_GRACE).await.unwrap(), StopOutcome::Terminated);
    eprintln!("SIGTERM stop: {:?}", t.elapsed());
    assert!(!process_alive(pid));
    assert!(m.running_pid().is_none());
    assert!(!pid_file.exists(), "clean shutdown leaves no pid file");
    assert_eq!(m.stop(STOP_GRACE).await.unwrap(), StopOutcome::NotRunning);

    // Crash and restart with extra arguments (MariaDB's crash-safe rejoin option).
    let pid = m.start_and_wait(&[], READY_TIMEOUT).await.unwrap();
    let t = Instant::now();
    assert!(m.kill().await.unwrap());
    eprintln!("SIGKILL: {:?}", t.elapsed());
    assert!(!process_alive(pid));
    assert!(!m.kill().await.unwrap(), "nothing left to kill");
    let extra: Vec<String> = match binary.kind() {
        ServerKind::Mariadb => vec!["--init-rpl-role=SLAVE".to_owned()],
        ServerKind::Mysql => vec!["--skip-replica-start".to_owned()],
    };
    let t = Instant::now();
    let pid = m.restart(&extra, STOP_GRACE, READY_TIMEOUT).await.unwrap();
    eprintln!("restart after crash to ready: {:?}", t.elapsed());
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(String::from_utf8_lossy(&cmdline).contains(&extra[0]));
    assert_eq!(m.stop(STOP_GRACE).await.unwrap(), StopOutcome::Terminated);

    // A server that cannot start is reported with its log, not as a timeout.
    m.start(&["--no-such-option-for-moco".to_owned()]).unwrap();
    let t = Instant::now();
    let err = m.wait_ready(Duration::from_secs(120)).await.unwrap_err();
    assert!(matches!(err, MysqldError::Exited { .. }), "{err}");
    assert!(err.to_string().contains("no-such-option-for-moco"), "{err}");
    eprintln!("failed start reported after {:?}", t.elapsed());
    assert!(m.running_pid().is_none());
    eprintln!(
        "verified launcher against {:?} {}",
        binary.kind(),
        binary.version()
    );
}
