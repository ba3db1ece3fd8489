//! Declared accounts and databases on a real server, as the operator's admin account changes
//! them: created with their grants, read back exactly as declared (so a second plan is
//! empty), drift put back (a password, a grant, a limit changed by hand), a declared `ALL`
//! expanded the server's way, database-level wildcards kept literal, a database created and
//! altered, and the declared user able to do what it was granted and nothing else.

use std::collections::BTreeSet;

use crate::support;

use moco_adapters::mysql::{InitOptions, MysqlInstance, initialize};
use moco_adapters::mysqld::ServerKind;

use moco_cluster::ports::MysqlPort;
use moco_core::accounts::{
    AccountChange, AccountSpec, DatabaseChange, DatabaseSpec, GrantLevel, GrantTarget, Grants,
    Privilege, plan_account, plan_database,
};
use moco_core::moco_accounts::{Account, MocoPasswords};
use mysql_async::prelude::Queryable;
use support::{Fleet, bootstrap_options, client, server_binary, tcp_options, try_client};

fn privs(names: &[&str]) -> BTreeSet<Privilege> {
    names.iter().map(|n| Privilege::new(n).unwrap()).collect()
}

/// Plans against what the server holds and applies until nothing is left; returns the
/// changes of the first pass.
/// Applies `spec` with password `pw` as the operator's round does: `new_password` when the
/// Secret's version is not the one last applied (on a first round, always), since MySQL's
/// salted hashes cannot say whether the password differs.
async fn converge(
    admin: &MysqlInstance,
    spec: &AccountSpec,
    pw: &str,
    new_password: bool,
) -> Vec<AccountChange> {
    let observed = admin
        .observe_account(&spec.name, &spec.host, pw)
        .await
        .unwrap();
    let first = plan_account(spec, observed.as_ref(), new_password);
    admin.apply_account(spec, pw, &first).await.unwrap();
    let again = admin
        .observe_account(&spec.name, &spec.host, pw)
        .await
        .unwrap();
    assert_eq!(
        plan_account(spec, again.as_ref(), false),
        [],
        "the server holds what was declared: {again:?}"
    );
    first
}

/// One initialised instance with MOCO's accounts, writable as a primary (the operator changes
/// accounts there only), and its admin.
async fn writable_instance(
    binary: moco_adapters::mysqld::ServerBinary,
) -> (Fleet, MocoPasswords, MysqlInstance) {
    let fleet = Fleet::start(binary, 1).await;
    let m = &fleet.nodes[0];
    let pw = moco_adapters::mysql::generate_passwords().unwrap();
    initialize(
        &bootstrap_options(m, "instance 0"),
        &pw,
        &InitOptions::default(),
    )
    .await
    .unwrap();
    let admin = MysqlInstance::new(tcp_options(
        m,
        "instance 0",
        Account::Admin.name(),
        &pw.admin,
    ));
    admin.set_writable().await.unwrap();
    (fleet, pw, admin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_accounts_and_databases_are_made_read_back_and_repaired() {
    let Some(binary) =
        server_binary("declared_accounts_and_databases_are_made_read_back_and_repaired")
    else {
        return;
    };
    let (fleet, pw, admin) = writable_instance(binary).await;
    let m = &fleet.nodes[0];

    // A database with a wildcard character in its name, and one that must not match it.
    let app = DatabaseSpec {
        name: "app_db".into(),
        character_set: Some("utf8mb4".into()),
        collation: Some("utf8mb4_bin".into()),
    };
    assert_eq!(admin.observe_database("app_db").await.unwrap(), None);
    let change = plan_database(&app, None).unwrap();
    admin.apply_database(&app, &change).await.unwrap();
    let held = admin.observe_database("app_db").await.unwrap().unwrap();
    assert_eq!(
        (held.character_set.as_str(), held.collation.as_str()),
        ("utf8mb4", "utf8mb4_bin")
    );
    assert_eq!(plan_database(&app, Some(&held)), None);
    let other = DatabaseSpec {
        name: "appXdb".into(),
        ..DatabaseSpec::default()
    };
    admin
        .apply_database(&other, &DatabaseChange::Create)
        .await
        .unwrap();
    let mut root = client(m, Account::Admin.name(), &pw.admin).await;
    root.query_drop("CREATE TABLE app_db.t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    root.query_drop("CREATE TABLE appXdb.t (id INT PRIMARY KEY)")
        .await
        .unwrap();

    // The account: DML on app_db, SELECT on one table of appXdb, a limit, no TLS.
    let spec = AccountSpec {
        name: "app".into(),
        host: "%".into(),
        grants: Grants::from([
            (
                GrantTarget::database("app_db"),
                privs(&["SELECT", "INSERT", "UPDATE", "DELETE"]),
            ),
            (
                GrantTarget::Table("appXdb".into(), "t".into()),
                privs(&["SELECT"]),
            ),
        ]),
        require_tls: false,
        max_user_connections: 7,
    };
    let first = converge(&admin, &spec, "secret-1", true).await;
    println!("{first:?}");
    assert_eq!(first[0], AccountChange::Create);
    let mut c = client(m, "app", "secret-1").await;
    c.query_drop("INSERT INTO app_db.t VALUES (1)")
        .await
        .unwrap();
    c.query_drop("SELECT * FROM appXdb.t").await.unwrap();
    let e = c
        .query_drop("INSERT INTO appXdb.t VALUES (1)")
        .await
        .unwrap_err();
    assert_eq!(support::server_code(&e), Some(1142), "{e}");
    let e = c.query_drop("DROP TABLE app_db.t").await.unwrap_err();
    assert_eq!(support::server_code(&e), Some(1142), "{e}");
    let limit: Option<u32> = root
        .query_first("SELECT max_user_connections FROM mysql.user WHERE User = 'app'")
        .await
        .unwrap();
    assert_eq!(limit, Some(7));
    c.disconnect().await.unwrap();

    // Drift by hand: a grant added, one revoked, a wildcard grant (`app_db.*` unescaped also
    // matches appXdb) added, the limit and the password changed.
    root.query_drop("GRANT DROP ON `app\\_db`.* TO 'app'@'%'")
        .await
        .unwrap();
    root.query_drop("REVOKE UPDATE ON `app\\_db`.* FROM 'app'@'%'")
        .await
        .unwrap();
    root.query_drop("GRANT SELECT ON app_db.* TO 'app'@'%'")
        .await
        .unwrap();
    root.query_drop("ALTER USER 'app'@'%' WITH MAX_USER_CONNECTIONS 0")
        .await
        .unwrap();
    root.query_drop("ALTER USER 'app'@'%' IDENTIFIED BY 'by-hand'")
        .await
        .unwrap();
    let observed = admin
        .observe_account("app", "%", "secret-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(observed.password_matches, Some(false));
    let repaired = converge(&admin, &spec, "secret-1", false).await;
    let on = GrantTarget::database("app_db");
    assert_eq!(
        repaired,
        [
            AccountChange::SetPassword,
            AccountChange::SetMaxUserConnections(7),
            AccountChange::Revoke {
                on: on.clone(),
                privileges: privs(&["DROP"])
            },
            AccountChange::Revoke {
                on: GrantTarget::Database("app_db".into()),
                privileges: privs(&["SELECT"])
            },
            AccountChange::Grant {
                on: on.clone(),
                privileges: privs(&["UPDATE"])
            },
        ]
    );
    assert!(
        try_client(m, "app", "by-hand").await.is_err(),
        "the hand-set password is gone"
    );
    client(m, "app", "secret-1")
        .await
        .disconnect()
        .await
        .unwrap();

    // A new password (a new Secret) is set even where the hash cannot be compared.
    let observed = admin
        .observe_account("app", "%", "secret-2")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(observed.password_matches, Some(false));
    let changes = plan_account(&spec, Some(&observed), true);
    assert_eq!(changes, [AccountChange::SetPassword]);
    admin
        .apply_account(&spec, "secret-2", &changes)
        .await
        .unwrap();
    assert!(try_client(m, "app", "secret-1").await.is_err());
    client(m, "app", "secret-2")
        .await
        .disconnect()
        .await
        .unwrap();

    // ALL, expanded the server's way, reads back as declared; so does GRANT OPTION.
    let all = admin.all_privileges(GrantLevel::Database).await.unwrap();
    assert!(
        all.contains(&Privilege::new("CREATE TEMPORARY TABLES").unwrap()),
        "{all:?}"
    );
    assert!(!all.iter().any(Privilege::is_grant_option));
    let table_all = admin.all_privileges(GrantLevel::Table).await.unwrap();
    assert!(
        table_all.contains(&Privilege::new("SHOW VIEW").unwrap()),
        "{table_all:?}"
    );
    let mut owner_grants = all.clone();
    owner_grants.insert(Privilege::new("GRANT OPTION").unwrap());
    let owner = AccountSpec {
        name: "owner".into(),
        host: "10.0.%".into(),
        grants: Grants::from([
            (on.clone(), owner_grants),
            (GrantTarget::Table("appXdb".into(), "t".into()), table_all),
        ]),
        require_tls: true,
        max_user_connections: 0,
    };
    converge(&admin, &owner, "owner-pw", true).await;

    // Dropped.
    admin
        .apply_account(&owner, "", &[AccountChange::Drop])
        .await
        .unwrap();
    assert_eq!(
        admin.observe_account("owner", "10.0.%", "").await.unwrap(),
        None
    );
    admin
        .apply_database(&other, &DatabaseChange::Drop)
        .await
        .unwrap();
    assert_eq!(admin.observe_database("appXdb").await.unwrap(), None);
    root.disconnect().await.unwrap();
    fleet.stop().await;
}

/// A fact the rotation of MOCO's passwords builds on: MariaDB holds two passwords for one
/// account (two `mysql_native_password` methods joined by `OR`), and this client (the
/// manager's, `mysql_async`) logs in with either, following the server's switch to the second
/// method, and is refused a third.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_with_two_passwords_takes_either() {
    let Some(binary) = server_binary("an_account_with_two_passwords_takes_either") else {
        return;
    };
    let fleet = Fleet::start(binary, 1).await;
    let m = &fleet.nodes[0];
    let root = MysqlInstance::new(bootstrap_options(m, "instance 0"));
    let mut r = root.conn().await.unwrap();
    // Two passwords, in each server's words (MySQL keeps the current one as secondary).
    let two: &[&str] = match fleet.binary.kind() {
        ServerKind::Mariadb => &[
            "CREATE USER 'rot'@'%' IDENTIFIED VIA mysql_native_password \
             USING PASSWORD('old') OR mysql_native_password USING PASSWORD('new')",
        ],
        ServerKind::Mysql => &[
            "CREATE USER 'rot'@'%' IDENTIFIED BY 'old'",
            "ALTER USER 'rot'@'%' IDENTIFIED BY 'new' RETAIN CURRENT PASSWORD",
        ],
    };
    for statement in two {
        r.query_drop(*statement).await.unwrap();
    }
    for password in ["old", "new"] {
        let mut c = client(m, "rot", password).await;
        let who: Option<String> = c.query_first("SELECT CURRENT_USER()").await.unwrap();
        assert_eq!(who.as_deref(), Some("rot@%"), "with {password}");
        c.disconnect().await.unwrap();
    }
    let refused = try_client(m, "rot", "third").await.unwrap_err();
    assert_eq!(support::server_code(&refused), Some(1045), "{refused}");
    // Back to one password: the old one is refused from then on (MySQL keeps a secondary
    // password through a change of the primary one until it is discarded).
    let one = match fleet.binary.kind() {
        ServerKind::Mariadb => "ALTER USER 'rot'@'%' IDENTIFIED BY 'new'",
        ServerKind::Mysql => "ALTER USER 'rot'@'%' DISCARD OLD PASSWORD",
    };
    r.query_drop(one).await.unwrap();
    assert!(try_client(m, "rot", "old").await.is_err());
    client(m, "rot", "new").await.disconnect().await.unwrap();
    drop(r);
    fleet.stop().await;
}

/// An account that existed before it was declared (or was granted more by hand) held what a
/// MySQLUser cannot say: a role (its default), a proxy, privileges on a procedure and on
/// columns. Declared, it loses all of them, the plan is empty afterwards, and it logs in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_taken_over_loses_what_no_declaration_holds() {
    let Some(binary) = server_binary("an_account_taken_over_loses_what_no_declaration_holds")
    else {
        return;
    };
    let (fleet, pw, admin) = writable_instance(binary).await;
    let m = &fleet.nodes[0];
    let mut root = client(m, Account::Admin.name(), &pw.admin).await;
    let default_role = match fleet.binary.kind() {
        ServerKind::Mariadb => "SET DEFAULT ROLE 'dba' FOR 'app'@'%'",
        ServerKind::Mysql => "SET DEFAULT ROLE 'dba' TO 'app'@'%'",
    };
    for statement in [
        "CREATE DATABASE app",
        "CREATE TABLE app.t (id INT PRIMARY KEY, c INT)",
        "CREATE PROCEDURE app.p() SELECT 1",
        "CREATE FUNCTION app.f() RETURNS INT DETERMINISTIC RETURN 1",
        "CREATE ROLE 'dba'",
        "GRANT DELETE ON app.* TO 'dba'",
        "CREATE USER 'other'@'%' IDENTIFIED BY 'o'",
        "CREATE USER 'app'@'%' IDENTIFIED BY 'before'",
        "GRANT 'dba' TO 'app'@'%'",
        default_role,
        // GRANT PROXY needs a proxy grant of its own, which MOCO's admin does not hold: a row
        // of the grant table, as whoever held one would have left.
        "INSERT INTO mysql.proxies_priv (Host, User, Proxied_host, Proxied_user, With_grant, \
         Grantor) VALUES ('%', 'app', '%', 'other', 0, 'root@localhost')",
        "FLUSH PRIVILEGES",
        "GRANT EXECUTE, ALTER ROUTINE ON PROCEDURE app.p TO 'app'@'%'",
        "GRANT EXECUTE ON FUNCTION app.f TO 'app'@'%'",
        "GRANT SELECT (c), UPDATE (c) ON app.t TO 'app'@'%'",
    ] {
        root.query_drop(statement)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    let seen = admin
        .observe_account("app", "%", "before")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(seen.undeclared.len(), 5, "{:?}", seen.undeclared);

    let spec = AccountSpec {
        name: "app".into(),
        host: "%".into(),
        grants: Grants::from([(GrantTarget::database("app"), privs(&["SELECT"]))]),
        require_tls: false,
        max_user_connections: 0,
    };
    // The operator's first round over an account: no Secret version applied yet.
    let first = converge(&admin, &spec, "after", true).await;
    let words: Vec<String> = first.iter().map(ToString::to_string).collect();
    println!("{words:#?}");
    // MySQL's roles are accounts, with a host part.
    let role = match fleet.binary.kind() {
        ServerKind::Mariadb => "revoked role 'dba'",
        ServerKind::Mysql => "revoked role 'dba'@'%'",
    };
    for needle in [
        role,
        "revoked PROXY on 'other'@'%'",
        "revoked ALTER ROUTINE, EXECUTE on PROCEDURE `app`.`p`",
        "revoked EXECUTE on FUNCTION `app`.`f`",
        "revoked SELECT, UPDATE on column `c` of `app`.`t`",
        "password set",
        "granted SELECT on `app`.*",
    ] {
        assert!(
            words.iter().any(|w| w == needle),
            "no {needle:?} in {words:?}"
        );
    }
    // What is left is the declaration: the role's DELETE is gone, SELECT works.
    let mut c = client(m, "app", "after").await;
    let n: Option<u64> = c.query_first("SELECT COUNT(*) FROM app.t").await.unwrap();
    assert_eq!(n, Some(0));
    let refused = c.query_drop("DELETE FROM app.t").await.unwrap_err();
    assert_eq!(support::server_code(&refused), Some(1142), "{refused}");
    let refused = c.query_drop("CALL app.p()").await.unwrap_err();
    assert!(
        matches!(support::server_code(&refused), Some(1370) | Some(1044)),
        "{refused}"
    );
    c.disconnect().await.unwrap();
    root.disconnect().await.unwrap();
    fleet.stop().await;
}
