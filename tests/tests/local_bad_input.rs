//! `moco local` refuses bad input with an error naming the flag, and touches no existing data.

use std::path::Path;

use moco_core::facts::Flavor;
use moco_local::platform::manifest::{FORMAT_VERSION, MANIFEST_KIND, Phase};
use moco_local::platform::{Layout, Manifest};
use moco_tests::local::{moco_err, server_or_skip};

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("moco-bad-")
        .tempdir()
        .unwrap()
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A directory that looks exactly like one `moco local up` made (no server needed).
fn fake_cluster(dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let manifest = Manifest {
        kind: MANIFEST_KIND.into(),
        format_version: FORMAT_VERSION,
        cluster_id: "0123456789abcdef".into(),
        name: "fake".into(),
        created_at: "2026-01-01T00:00:00Z".into(),
        created_by: "test".into(),
        phase: Phase::Ready,
        flavor: Flavor::Mariadb,
        server_version: String::new(),
        replicas: 3,
        shrinking_to: None,
        base_port: 1,
        server: "/nonexistent/mariadbd".into(),
        server_id_base: 1,
        reclone_errant: false,
        tls: false,
    };
    manifest.save(&Layout::new(dir)).unwrap();
    std::fs::read_to_string(dir.join("cluster.json")).unwrap()
}

#[test]
fn replica_counts_are_checked_first() {
    let t = tmp();
    let dir = t.path().join("c");
    for bad in ["0", "2", "4", "11"] {
        let err = moco_err(&[
            "local",
            "up",
            "--dir",
            dir.to_str().unwrap(),
            "--replicas",
            bad,
        ]);
        assert!(err.contains(&format!("--replicas {bad}")), "{err}");
        assert!(err.contains("odd"), "{err}");
        assert!(!dir.exists(), "nothing may be created for --replicas {bad}");
    }
}

#[test]
fn foreign_and_initialised_directories_are_refused() {
    let t = tmp();
    // Foreign: not empty, no cluster.json.
    let foreign = t.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("precious.txt"), "keep me").unwrap();
    let err = moco_err(&[
        "local",
        "up",
        "--dir",
        foreign.to_str().unwrap(),
        "--replicas",
        "1",
    ]);
    assert!(err.contains("moco local did not create"), "{err}");
    assert_eq!(listing(&foreign), vec!["precious.txt"]);
    assert_eq!(
        std::fs::read_to_string(foreign.join("precious.txt")).unwrap(),
        "keep me"
    );

    // A file instead of a directory.
    let file = t.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let err = moco_err(&[
        "local",
        "up",
        "--dir",
        file.to_str().unwrap(),
        "--replicas",
        "1",
    ]);
    assert!(err.contains("not a directory"), "{err}");

    // Already initialised.
    let existing = t.path().join("existing");
    let before = fake_cluster(&existing);
    let err = moco_err(&[
        "local",
        "up",
        "--dir",
        existing.to_str().unwrap(),
        "--replicas",
        "3",
    ]);
    assert!(err.contains("already holds a moco local cluster"), "{err}");
    assert_eq!(
        std::fs::read_to_string(existing.join("cluster.json")).unwrap(),
        before
    );
    assert_eq!(listing(&existing), vec!["cluster.json"]);

    // A cluster.json of something else.
    let other = t.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("cluster.json"), "{\"kind\":\"other\"}").unwrap();
    let err = moco_err(&[
        "local",
        "up",
        "--dir",
        other.to_str().unwrap(),
        "--replicas",
        "1",
    ]);
    assert!(err.contains("did not create"), "{err}");
}

#[test]
fn other_commands_refuse_non_cluster_directories() {
    let t = tmp();
    let plain = t.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("data.txt"), "x").unwrap();
    let d = plain.to_str().unwrap();
    let missing = t.path().join("missing");
    let m = missing.to_str().unwrap();
    for args in [
        vec!["local", "status", "--dir", d],
        vec!["local", "status", "--dir", d, "--json"],
        vec!["local", "switchover", "--dir", d],
        vec!["local", "kill", "--dir", d, "0"],
        vec!["local", "start", "--dir", d, "0"],
        vec!["local", "resume", "--dir", d],
        vec!["local", "down", "--dir", d],
        vec!["local", "down", "--dir", d, "--wipe"],
        vec!["local", "status", "--dir", m],
        vec!["local", "down", "--dir", m, "--wipe"],
    ] {
        let err = moco_err(&args);
        assert!(
            err.contains("--dir") && err.contains("not a moco local cluster directory"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(listing(&plain), vec!["data.txt"]);
    assert!(!missing.exists());
}

#[test]
fn instance_numbers_and_manager_are_checked() {
    let t = tmp();
    let dir = t.path().join("c");
    fake_cluster(&dir);
    let d = dir.to_str().unwrap();
    let err = moco_err(&["local", "kill", "--dir", d, "3"]);
    assert!(err.contains("instance 3 does not exist"), "{err}");
    let err = moco_err(&["local", "switchover", "--dir", d]);
    assert!(err.contains("manager is not running"), "{err}");
    let err = moco_err(&["local", "switchover", "--dir", d, "--to", "7"]);
    assert!(
        err.contains("manager is not running") || err.contains("--to 7"),
        "{err}"
    );
    assert_eq!(listing(&dir), vec!["cluster.json"]);
}

#[test]
fn missing_server_binary_is_named() {
    let t = tmp();
    let dir = t.path().join("c");
    let err = moco_err(&[
        "local",
        "up",
        "--dir",
        dir.to_str().unwrap(),
        "--replicas",
        "3",
        "--server",
        "/nonexistent/bin/mariadbd",
    ]);
    assert!(err.contains("--server /nonexistent/bin/mariadbd"), "{err}");
    assert!(!dir.exists());
}

#[test]
fn occupied_port_and_wrong_flavor_are_named() {
    let Some(server) = server_or_skip("occupied_port_and_wrong_flavor_are_named") else {
        return;
    };
    let t = tmp();
    let dir = t.path().join("c");
    let d = dir.to_str().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // The block starts two ports below the taken one: instance 0's port is taken.
    let base = port.saturating_sub(2).to_string();
    let err = moco_err(&[
        "local",
        "up",
        "--dir",
        d,
        "--replicas",
        "3",
        "--base-port",
        &base,
    ]);
    // Other tests bind ports too, so the two below ours may be taken while this runs: the
    // error names the first busy port of the block, which is ours unless one below it is busy.
    // Checking past the first port is what matters: with only ours busy, a check of the block's
    // first port alone would have let `up` go on.
    let named: u16 = err
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or_else(|| panic!("no port named: {err}"));
    assert!(
        (port.saturating_sub(2)..=port).contains(&named),
        "{named} is outside {base}..={port}: {err}"
    );
    assert!(err.contains(&format!("--base-port {base}")), "{err}");
    assert!(!dir.exists());

    let other = match server.kind() {
        moco_adapters::mysqld::ServerKind::Mariadb => "mysql",
        moco_adapters::mysqld::ServerKind::Mysql => "mariadb",
    };
    let err = moco_err(&[
        "local",
        "up",
        "--dir",
        d,
        "--replicas",
        "1",
        "--flavor",
        other,
    ]);
    assert!(err.contains(&format!("--flavor {other}")), "{err}");
    assert!(!dir.exists());
}

/// Issue 30, section 0: a restore that finds no backup names the bucket it looked in, and a
/// `--source` that is a cluster's directory is looked for in the `backups/` beside that
/// directory (under the cluster's own name), not beside the new one.
#[test]
fn a_restore_names_the_bucket_and_finds_the_source_clusters_own_backups() {
    let t = tmp();
    let new_dir = t.path().join("elsewhere").join("restored");
    std::fs::create_dir_all(new_dir.parent().unwrap()).unwrap();
    let err = moco_err(&[
        "local",
        "restore",
        "--dir",
        &new_dir.display().to_string(),
        "--source",
        "db",
    ]);
    let beside_new = t.path().join("elsewhere").join("backups");
    assert!(
        err.contains(&beside_new.display().to_string()) && err.contains("\"db\""),
        "{err}"
    );

    let source = t.path().join("home").join("db");
    fake_cluster(&source);
    let err = moco_err(&[
        "local",
        "restore",
        "--dir",
        &new_dir.display().to_string(),
        "--source",
        &source.display().to_string(),
    ]);
    let beside_source = t.path().join("home").join("backups");
    assert!(
        err.contains(&beside_source.display().to_string()) && err.contains("\"fake\""),
        "{err}"
    );
    assert!(
        !new_dir.exists(),
        "a refused restore made {}",
        new_dir.display()
    );
}
