//! `moco local apply -f accounts.yaml` on a real `mariadbd`: the MySQLUser and MySQLDatabase
//! kinds of the operator, with the same rules.
//!
//! * a file with a finding (a MOCO account name, another cluster, a missing password) is
//!   refused whole, each finding printed with its file, document and field, nothing applied;
//! * a valid file makes the database and the account: the user can do what was granted and is
//!   refused the rest;
//! * applied again, nothing changes; a grant revoked by hand is put back; a new password in
//!   the file's Secret is set (the old one refused), and neither password is in the binary
//!   log in clear;
//! * an account made by hand is left alone by a declaration of it (refused, named) and taken
//!   over only with `spec.adopt`; what the command made or took over is recorded.

use std::time::Duration;

use moco_tests::local::{
    ClusterDir, assert_no_cleartext, binlog_as_read, endpoint_port, moco, moco_ok, opts,
    up_detached,
};
use mysql_async::prelude::Queryable;

/// The cluster directory's name is the cluster's (`ClusterDir::new`: `c`).
fn manifest(password: &str, account: &str, cluster: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Secret
metadata:
  name: app-password
stringData:
  password: "{password}"
---
apiVersion: moco-rs.io/v1alpha1
kind: MySQLDatabase
metadata:
  name: appdb
spec:
  clusterName: {cluster}
  characterSet: utf8mb4
  collation: utf8mb4_bin
---
apiVersion: moco-rs.io/v1alpha1
kind: MySQLUser
metadata:
  name: app
spec:
  clusterName: {cluster}
  name: {account}
  passwordSecretKeyRef: {{name: app-password, key: password}}
  grants:
  - privileges: [SELECT, INSERT, CREATE]
    on: "appdb.*"
"#
    )
}

fn apply(dir: &ClusterDir, yaml: &str) -> std::process::Output {
    let file = dir.path().join("accounts.yaml");
    std::fs::write(&file, yaml).unwrap();
    moco(&[
        "local",
        "apply",
        "--dir",
        &dir.arg(),
        "-f",
        file.to_str().unwrap(),
    ])
}

fn ok(out: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "apply failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

async fn connect(port: u16, user: &str, password: &str) -> Result<mysql_async::Conn, String> {
    let attempt = mysql_async::Conn::new(opts(port, user, password));
    match tokio::time::timeout(Duration::from_secs(10), attempt).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_and_databases_from_a_file_are_made_checked_and_kept() {
    if moco_tests::local::server_or_skip(
        "accounts_and_databases_from_a_file_are_made_checked_and_kept",
    )
    .is_none()
    {
        return;
    }
    let dir = ClusterDir::new();
    let (_, status) = up_detached(&dir, 1).await;
    let port = endpoint_port(&status, "primary");

    // Refused whole: one finding per problem, with file, document and field; nothing made.
    let out = apply(
        &dir,
        &manifest("pw-1", "moco-admin", "other").replace("key: password}", "key: missing}"),
    );
    assert!(!out.status.success());
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    for needle in [
        "accounts.yaml:3: MySQLUser/app: spec.name:",
        "MySQLUser/app: spec.clusterName: \"other\" is not this cluster (\"c\")",
        "MySQLDatabase/appdb: spec.clusterName",
        "MySQLUser/app: spec.passwordSecretKeyRef: no Secret \"app-password\" with key \"missing\"",
        "nothing was applied",
    ] {
        assert!(said.contains(needle), "no {needle:?} in:\n{said}");
    }
    let admin = dir.password("moco-admin");
    let mut a = connect(port, "moco-admin", &admin).await.unwrap();
    let dbs: Vec<String> = a.query("SHOW DATABASES LIKE 'appdb'").await.unwrap();
    assert!(dbs.is_empty(), "a refused file made {dbs:?}");

    // Made as declared.
    let text = ok(&apply(&dir, &manifest("pw-1", "app", "c")));
    assert!(text.contains("database appdb: Create"), "{text}");
    assert!(text.contains("account 'app'@'%': created"), "{text}");
    let mut c = connect(port, "app", "pw-1").await.unwrap();
    c.query_drop("CREATE TABLE appdb.t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    c.query_drop("INSERT INTO appdb.t VALUES (1)")
        .await
        .unwrap();
    let refused = c.query_drop("DELETE FROM appdb.t").await.unwrap_err();
    assert!(refused.to_string().contains("1142"), "{refused}");
    c.disconnect().await.unwrap();

    // Again: nothing to do. A revoke by hand: put back.
    let text = ok(&apply(&dir, &manifest("pw-1", "app", "c")));
    assert!(text.contains("database appdb: unchanged"), "{text}");
    assert!(text.contains("account 'app'@'%': unchanged"), "{text}");
    a.query_drop("REVOKE INSERT ON `appdb`.* FROM 'app'@'%'")
        .await
        .unwrap();
    let text = ok(&apply(&dir, &manifest("pw-1", "app", "c")));
    assert!(text.contains("granted INSERT on `appdb`.*"), "{text}");

    // A new password in the file: set, the old one refused.
    let text = ok(&apply(&dir, &manifest("pw-2", "app", "c")));
    assert!(text.contains("password set"), "{text}");
    assert!(connect(port, "app", "pw-2").await.is_ok());
    let old = connect(port, "app", "pw-1").await.unwrap_err();
    assert!(old.contains("1045"), "{old}");

    // An account made by hand (an application's, another tool's) is not taken over by a
    // declaration of it: refused, named, its password kept; taken over only with spec.adopt,
    // which sets the password and revokes what it held beyond the grants.
    a.query_drop("CREATE USER 'handmade'@'%' IDENTIFIED BY 'its-own'")
        .await
        .unwrap();
    a.query_drop("GRANT DELETE ON appdb.* TO 'handmade'@'%'")
        .await
        .unwrap();
    let handmade = manifest("pw-2", "handmade", "c").replace("name: app\n", "name: handmade\n");
    let out = apply(&dir, &handmade);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("account 'handmade'@'%': exists and was not made by moco local apply"),
        "{said}"
    );
    assert!(
        connect(port, "handmade", "its-own").await.is_ok(),
        "its password was changed"
    );
    let adopted = handmade.replace("  grants:\n", "  adopt: true\n  grants:\n");
    let text = ok(&apply(&dir, &adopted));
    assert!(
        text.contains("account 'handmade'@'%': password set"),
        "{text}"
    );
    assert!(text.contains("revoked DELETE on `appdb`.*"), "{text}");
    assert!(connect(port, "handmade", "pw-2").await.is_ok());
    // Recorded: applied again without adopt, it is this command's.
    let text = ok(&apply(&dir, &handmade));
    assert!(text.contains("account 'handmade'@'%': unchanged"), "{text}");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("declared.json")).unwrap()).unwrap();
    assert_eq!(record["accounts"]["'app'@'%'"], "Created", "{record}");
    assert_eq!(record["accounts"]["'handmade'@'%'"], "Adopted", "{record}");
    assert_eq!(record["databases"]["appdb"], "Created", "{record}");

    // Neither password is in the binary log, as the application reads it or as its files
    // are copied: the CREATE USER and ALTER USER are there, with hashes only.
    let readonly = opts(port, "moco-readonly", &dir.password("moco-readonly"));
    let datadir = dir.path().join("instances").join("0").join("data");
    let read = binlog_as_read(&readonly, &datadir).await;
    assert_no_cleartext("the primary", &read, &["pw-1", "pw-2"]);
    for logged in [
        "CREATE USER 'app'@'%' IDENTIFIED BY PASSWORD",
        "ALTER USER 'app'@'%' IDENTIFIED BY PASSWORD",
    ] {
        assert!(
            read.0.iter().any(|s| s.contains(logged)),
            "no {logged:?} in the binary log: {:?}",
            read.0
        );
    }
    a.disconnect().await.unwrap();
    moco_ok(&["local", "down", "--dir", &dir.arg(), "--wipe"]);
}
