//! One test per rule: each fails if its rule is removed (the valid neighbour of every refused
//! value passes, so a rule that refuses too much fails too).

use serde_json::{Value, json};

use super::*;
use crate::accounts::target::MAX_IDENTIFIER_LENGTH;

fn user(spec: Value) -> MySQLUser {
    user_named("app", spec)
}

fn user_named(name: &str, spec: Value) -> MySQLUser {
    let mut base = json!({
        "clusterName": "test",
        "passwordSecretKeyRef": {"name": "app-password", "key": "password"},
    });
    merge(&mut base, spec);
    let object = json!({
        "apiVersion": "moco-rs.io/v1alpha1",
        "kind": "MySQLUser",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": base,
    });
    match serde_json::from_value(object) {
        Ok(u) => u,
        Err(e) => panic!("{e}"),
    }
}

fn database(spec: Value) -> MySQLDatabase {
    database_named("appdb", spec)
}

fn database_named(name: &str, spec: Value) -> MySQLDatabase {
    let mut base = json!({"clusterName": "test"});
    merge(&mut base, spec);
    let object = json!({
        "apiVersion": "moco-rs.io/v1alpha1",
        "kind": "MySQLDatabase",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": base,
    });
    match serde_json::from_value(object) {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    }
}

fn merge(base: &mut Value, extra: Value) {
    if let (Some(base), Value::Object(extra)) = (base.as_object_mut(), extra) {
        base.extend(extra);
    }
}

fn grants(grants: Value) -> Value {
    json!({"grants": grants})
}

/// The errors as `(field, problem)`.
fn user_errors(spec: Value) -> Vec<(String, Problem)> {
    pairs(validate_user(&user(spec)))
}

fn pairs(errors: Vec<FieldError>) -> Vec<(String, Problem)> {
    errors.into_iter().map(|e| (e.field, e.problem)).collect()
}

fn one(field: &str, problem: Problem) -> Vec<(String, Problem)> {
    vec![(field.to_owned(), problem)]
}

#[test]
fn the_issues_manifests_are_valid() {
    let u = user(json!({
        "name": "app",
        "host": "%",
        "grants": [{"privileges": ["SELECT", "INSERT", "UPDATE", "DELETE"], "on": "appdb.*"}],
        "requireTLS": false,
        "maxUserConnections": 0,
        "deletionPolicy": "Delete",
    }));
    assert_eq!(validate_user(&u), vec![]);
    let d = database(json!({
        "name": "appdb",
        "characterSet": "utf8mb4",
        "collation": "utf8mb4_bin",
        "deletionPolicy": "Retain",
    }));
    assert_eq!(validate_database(&d), vec![]);
}

#[test]
fn defaults() {
    let u = user(json!({}));
    assert_eq!(u.spec.host, "%");
    assert_eq!(u.account_name(), "app");
    assert!(!u.spec.require_tls);
    assert!(!u.spec.allow_privileged_grants);
    assert_eq!(u.spec.max_user_connections, 0);
    assert_eq!(
        u.spec.deletion_policy,
        crate::accounts::DeletionPolicy::Retain
    );
    let d = database(json!({}));
    assert_eq!(d.database_name(), "appdb");
    assert_eq!(d.spec.character_set, "utf8mb4");
    assert_eq!(d.spec.collation, None);
    assert_eq!(
        d.spec.deletion_policy,
        crate::accounts::DeletionPolicy::Retain
    );
    let u = user(json!({"name": "other"}));
    assert_eq!(u.account_name(), "other");
    // The wire name of requireTLS is the issue's.
    let u = user(json!({"requireTLS": true}));
    assert!(u.spec.require_tls);
}

#[test]
fn moco_accounts_are_refused_in_any_case() {
    for name in crate::accounts::MOCO_ACCOUNTS {
        assert_eq!(
            user_errors(json!({"name": name})),
            one("spec.name", Problem::MocoAccount(name.to_owned())),
        );
        let upper = name.to_ascii_uppercase();
        assert_eq!(
            user_errors(json!({"name": upper})),
            one("spec.name", Problem::MocoAccount(upper.clone())),
        );
    }
    // From metadata.name, the error names metadata.name.
    assert_eq!(
        pairs(validate_user(&user_named("moco-admin", json!({})))),
        one("metadata.name", Problem::MocoAccount("moco-admin".into())),
    );
    assert_eq!(user_errors(json!({"name": "mocoapp"})), vec![]);
}

/// The prefix of MOCO's accounts is the operator's: an account a later version adds (or one
/// it has today that is not an account but a role, `moco-read-only-admin`) is never taken by
/// a MySQLUser first.
#[test]
fn the_moco_prefix_is_reserved_in_any_case() {
    for name in ["moco-app", "moco-read-only-admin", "MOCO-Future", "moco-"] {
        assert_eq!(
            user_errors(json!({"name": name})),
            one("spec.name", Problem::MocoPrefix(name.to_owned())),
            "{name}"
        );
    }
    for name in ["moco", "mocoapp", "app-moco-1", "moco_app"] {
        assert_eq!(user_errors(json!({"name": name})), vec![], "{name}");
    }
}

#[test]
fn system_accounts_are_refused() {
    for name in crate::accounts::SYSTEM_ACCOUNTS {
        assert_eq!(
            user_errors(json!({"name": name})),
            one("spec.name", Problem::SystemAccount(name.to_owned())),
        );
    }
    assert_eq!(user_errors(json!({"name": "rooter"})), vec![]);
}

#[test]
fn account_names_are_short_and_plain() {
    assert_eq!(
        user_errors(json!({"name": ""})),
        one("spec.name", Problem::Empty)
    );
    let ok = "a".repeat(MAX_USER_NAME_LENGTH);
    assert_eq!(user_errors(json!({"name": ok})), vec![]);
    let long = "a".repeat(MAX_USER_NAME_LENGTH + 1);
    assert!(matches!(
        user_errors(json!({"name": long})).as_slice(),
        [(f, Problem::TooLong { length: 33, max: 32, .. })] if f == "spec.name"
    ));
    // A long metadata.name is refused by its own field.
    let named = user_named(&"a".repeat(40), json!({}));
    assert!(matches!(
        pairs(validate_user(&named)).as_slice(),
        [(f, Problem::TooLong { length: 40, .. })] if f == "metadata.name"
    ));
    assert_eq!(
        pairs(validate_user(&user_named(
            &"a".repeat(40),
            json!({"name": "app"})
        ))),
        vec![]
    );
    for (name, character) in [
        ("a b", ' '),
        ("a\tb", '\t'),
        ("a'b", '\''),
        ("a\"b", '"'),
        ("a`b", '`'),
        ("a\\b", '\\'),
        ("app@host", '@'),
        ("a😀", '😀'),
    ] {
        assert!(
            matches!(
                user_errors(json!({"name": name})).as_slice(),
                [(f, Problem::Character { character: c, .. })] if f == "spec.name" && *c == character
            ),
            "{name:?}"
        );
    }
    assert_eq!(user_errors(json!({"name": "app.reader_1-ü%"})), vec![]);
}

#[test]
fn hosts() {
    for ok in [
        "%",
        "localhost",
        "10.0.0.1",
        "10.0.%",
        "app-_.example.com",
        "%.svc.cluster.local",
        "10.1.0.0/255.255.0.0",
        "10.1.2.3/255.255.255.255",
        "0.0.0.0/0.0.0.0",
        "::1",
        "fe80::1:2",
        "fe80::%",
    ] {
        assert_eq!(user_errors(json!({"host": ok})), vec![], "{ok:?}");
    }
    assert_eq!(
        user_errors(json!({"host": ""})),
        one("spec.host", Problem::Empty)
    );
    for (host, character) in [
        ("a b", ' '),
        (" %", ' '),
        ("a\nb", '\n'),
        ("'%'", '\''),
        ("\"%\"", '"'),
        ("`%`", '`'),
        ("a\\b", '\\'),
        ("a;b", ';'),
        ("a@b", '@'),
        ("a*b", '*'),
    ] {
        assert!(
            matches!(
                user_errors(json!({"host": host})).as_slice(),
                [(f, Problem::Character { character: c, .. })] if f == "spec.host" && *c == character
            ),
            "{host:?}"
        );
    }
    let long = "a".repeat(MAX_HOST_LENGTH + 1);
    assert!(matches!(
        user_errors(json!({"host": long})).as_slice(),
        [(f, Problem::TooLong { max: 255, .. })] if f == "spec.host"
    ));
    assert_eq!(
        user_errors(json!({"host": "a".repeat(MAX_HOST_LENGTH)})),
        vec![]
    );
    assert_eq!(
        user_errors(json!({"host": "10.0.0.0/8"})),
        one("spec.host", Problem::CidrHost("10.0.0.0/8".into()))
    );
    for bad in [
        "10.0.0.0/255.0.255.0", // not a netmask
        "10.1.0.0/255.0.0.0",   // bits outside the mask
        "10.0.%/255.255.255.0", // not an address
        "host/255.255.255.0",   // not an address
        "10.0.0.0/255.255.0",   // not a mask
        "10.0.0.0/",            // no mask
        "10.0.0.0/255.0.0.0/8", // two slashes
        "1:2:3:4:5:6:7:8:9",    // not IPv6
    ] {
        assert!(
            matches!(
                user_errors(json!({"host": bad})).as_slice(),
                [(f, Problem::HostAddress { .. })] if f == "spec.host"
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn cluster_name_and_secret_reference() {
    assert_eq!(
        user_errors(json!({"clusterName": ""})),
        one("spec.clusterName", Problem::Empty)
    );
    assert!(matches!(
        user_errors(json!({"clusterName": "Test"})).as_slice(),
        [(f, Problem::ObjectName { .. })] if f == "spec.clusterName"
    ));
    assert!(matches!(
        user_errors(json!({"clusterName": "a".repeat(MAX_CLUSTER_NAME_LENGTH + 1)})).as_slice(),
        [(f, Problem::TooLong { .. })] if f == "spec.clusterName"
    ));
    assert_eq!(
        user_errors(json!({"clusterName": "a".repeat(MAX_CLUSTER_NAME_LENGTH)})),
        vec![]
    );
    for bad in ["-a", "a-", "a..b", "a_b", "A"] {
        assert!(check_object_name(bad).is_err(), "{bad:?}");
    }
    for ok in ["a", "a-b.c1", "0"] {
        assert_eq!(check_object_name(ok), Ok(()), "{ok:?}");
    }
    assert!(matches!(
        user_errors(json!({"passwordSecretKeyRef": {"name": "Bad_Name", "key": "password"}})).as_slice(),
        [(f, Problem::ObjectName { .. })] if f == "spec.passwordSecretKeyRef.name"
    ));
    assert!(matches!(
        user_errors(json!({"passwordSecretKeyRef": {"name": "s", "key": "pass word"}})).as_slice(),
        [(f, Problem::ObjectName { .. })] if f == "spec.passwordSecretKeyRef.key"
    ));
    assert_eq!(
        user_errors(json!({"passwordSecretKeyRef": {"name": "s", "key": ""}})),
        one("spec.passwordSecretKeyRef.key", Problem::Empty)
    );
    assert_eq!(
        user_errors(json!({"passwordSecretKeyRef": {"name": "s.t", "key": "A-z_0.9"}})),
        vec![]
    );
}

#[test]
fn privilege_syntax_is_refused_with_its_path() {
    let errors = user_errors(grants(json!([
        {"privileges": ["SELECT"], "on": "a.*"},
        {"privileges": ["SELECT", "DROP TABLE; --", "SELECT (c)", ""], "on": "b.*"},
    ])));
    assert_eq!(
        errors,
        vec![
            (
                "spec.grants[1].privileges[1]".into(),
                Problem::PrivilegeSyntax(PrivilegeSyntaxError::Syntax("DROP TABLE; --".into()))
            ),
            (
                "spec.grants[1].privileges[2]".into(),
                Problem::PrivilegeSyntax(PrivilegeSyntaxError::ColumnList)
            ),
            (
                "spec.grants[1].privileges[3]".into(),
                Problem::PrivilegeSyntax(PrivilegeSyntaxError::Empty)
            ),
        ]
    );
}

#[test]
fn unknown_privileges_of_valid_syntax_are_left_to_the_server_on_databases() {
    assert_eq!(
        user_errors(grants(
            json!([{"privileges": ["select", "Some Future Privilege"], "on": "appdb.*"}])
        )),
        vec![]
    );
}

#[test]
fn unknown_privileges_on_star_star_need_the_opt_in() {
    let g = json!([{"privileges": ["SOME_FUTURE_ADMIN"], "on": "*.*"}]);
    assert_eq!(
        user_errors(grants(g.clone())),
        one(
            "spec.grants[0].privileges[0]",
            Problem::UnknownOnGlobal {
                privilege: "SOME_FUTURE_ADMIN".into()
            }
        )
    );
    assert_eq!(
        user_errors(json!({"grants": g, "allowPrivilegedGrants": true})),
        vec![]
    );
}

#[test]
fn empty_privilege_lists_are_refused() {
    assert_eq!(
        user_errors(grants(json!([{"privileges": [], "on": "appdb.*"}]))),
        one("spec.grants[0].privileges", Problem::Empty)
    );
}

#[test]
fn duplicate_privileges_are_refused_after_canonical_form() {
    assert_eq!(
        user_errors(grants(
            json!([{"privileges": ["SELECT", "INSERT", "select"], "on": "appdb.*"}])
        )),
        one(
            "spec.grants[0].privileges[2]",
            Problem::DuplicatePrivilege {
                privilege: "SELECT".into(),
                first: "spec.grants[0].privileges[0]".into()
            }
        )
    );
    assert_eq!(
        user_errors(grants(
            json!([{"privileges": ["ALL", "ALL PRIVILEGES"], "on": "appdb.*"}])
        )),
        one(
            "spec.grants[0].privileges[1]",
            Problem::DuplicatePrivilege {
                privilege: "ALL PRIVILEGES".into(),
                first: "spec.grants[0].privileges[0]".into()
            }
        )
    );
}

#[test]
fn all_privileges_stands_alone_or_with_grant_option() {
    assert_eq!(
        user_errors(grants(
            json!([{"privileges": ["ALL", "GRANT OPTION"], "on": "appdb.*"}])
        )),
        vec![]
    );
    assert_eq!(
        user_errors(grants(
            json!([{"privileges": ["SELECT", "ALL"], "on": "appdb.*"}])
        )),
        one("spec.grants[0].privileges[1]", Problem::AllWithOthers)
    );
}

#[test]
fn proxy_is_refused() {
    assert_eq!(
        user_errors(grants(json!([{"privileges": ["PROXY"], "on": "appdb.*"}]))),
        one("spec.grants[0].privileges[0]", Problem::Proxy)
    );
}

#[test]
fn global_privileges_are_refused_on_databases_and_tables() {
    for on in ["appdb.*", "appdb.t"] {
        assert_eq!(
            user_errors(grants(json!([{"privileges": ["PROCESS"], "on": on}]))),
            one(
                "spec.grants[0].privileges[0]",
                Problem::GlobalOnly {
                    privilege: "PROCESS".into()
                }
            ),
            "{on}"
        );
    }
    assert_eq!(
        user_errors(grants(
            json!([{"privileges": ["SHOW DATABASES", "FLUSH_TABLES"], "on": "*.*"}])
        )),
        vec![]
    );
}

/// What reads past table grants (the binary log, every session's statements) is the
/// opt-in's: an account with SELECT on one database would otherwise read every database's
/// changes, and MariaDB's binlog keeps account statements as sent.
#[test]
fn privileges_that_read_past_table_grants_need_the_opt_in() {
    for privilege in [
        "REPLICATION SLAVE",
        "replication replica",
        "BINLOG MONITOR",
        "REPLICATION CLIENT",
        "PROCESS",
    ] {
        let canonical = privileges::canonical(privilege).unwrap_or_default();
        let g = json!([{"privileges": [privilege], "on": "*.*"}]);
        assert_eq!(
            user_errors(grants(g.clone())),
            one(
                "spec.grants[0].privileges[0]",
                Problem::ReadsPastGrants {
                    privilege: canonical
                }
            ),
            "{privilege}"
        );
        assert_eq!(
            user_errors(json!({"grants": g, "allowPrivilegedGrants": true})),
            vec![],
            "{privilege} with the opt-in"
        );
    }
    // BINLOG REPLAY writes through the binary log: administrative, as before.
    assert!(matches!(
        user_errors(grants(
            json!([{"privileges": ["BINLOG REPLAY"], "on": "*.*"}])
        ))
        .as_slice(),
        [(_, Problem::Administrative { .. })]
    ));
}

/// Every schema of the server is treated as `mysql`: no writes, DDL, routines or GRANT
/// OPTION there without the opt-in; reading stays allowed.
#[test]
fn system_schemas_take_no_writes_routines_or_grant_option() {
    for (privilege, on) in [
        ("INSERT", "sys.*"),
        ("CREATE ROUTINE", "sys.*"),
        ("ALTER ROUTINE", "SYS.*"),
        ("EXECUTE", "sys.*"),
        ("UPDATE", "performance_schema.setup_instruments"),
        ("DROP", "performance_schema.*"),
        ("GRANT OPTION", "mysql.*"),
        ("GRANT OPTION", "sys.*"),
        ("CREATE VIEW", "information_schema.*"),
    ] {
        let g = json!([{"privileges": [privilege], "on": on}]);
        let target = parse_target(on).map(|t| t.to_string()).unwrap_or_default();
        let canonical = privileges::canonical(privilege).unwrap_or_default();
        assert_eq!(
            user_errors(grants(g.clone())),
            one(
                "spec.grants[0].privileges[0]",
                Problem::WritesSystemSchema {
                    privilege: canonical,
                    on: target
                }
            ),
            "{privilege} on {on}"
        );
        assert_eq!(
            user_errors(json!({"grants": g, "allowPrivilegedGrants": true})),
            vec![],
            "{privilege} on {on} with the opt-in"
        );
    }
    assert_eq!(
        user_errors(grants(json!([
            {"privileges": ["SELECT"], "on": "sys.*"},
            {"privileges": ["SELECT", "SHOW VIEW"], "on": "performance_schema.*"},
            {"privileges": ["EXECUTE", "GRANT OPTION"], "on": "sysdb.*"},
        ]))),
        vec![]
    );
}

/// MariaDB decodes `#mysql50#` names as MySQL 5.0 file names: a grant on one would reach
/// another database than written.
#[test]
fn mysql50_names_are_refused_in_grant_targets() {
    for (on, name) in [
        ("`#mysql50#mysql`.*", "#mysql50#mysql"),
        ("appdb.`#mysql50#t`", "#mysql50#t"),
    ] {
        assert_eq!(
            user_errors(grants(json!([{"privileges": ["SELECT"], "on": on}]))),
            one("spec.grants[0].on", Problem::Mysql50Name(name.to_owned())),
            "{on}"
        );
    }
}

/// A hostile object is refused whole, at once: lists over their bounds are not looked into
/// (a body of 2 MiB holds ~190,000 privilege words), and the duplicate checks are linear.
#[test]
fn lists_over_their_bounds_are_refused_whole_and_cheaply() {
    let words: Vec<String> = (0..190_000).map(|i| format!("P{i}")).collect();
    let errors = user_errors(grants(json!([{"privileges": words, "on": "appdb.*"}])));
    assert_eq!(
        errors,
        one(
            "spec.grants[0].privileges",
            Problem::TooMany {
                length: 190_000,
                max: MAX_PRIVILEGES_PER_GRANT,
                why: "more than the servers have; list each privilege once",
            }
        )
    );
    let many: Vec<Value> = (0..5_000)
        .map(|i| json!({"privileges": ["SELECT"], "on": format!("db{i}.*")}))
        .collect();
    let errors = user_errors(grants(Value::Array(many)));
    assert!(
        matches!(errors.as_slice(), [(f, Problem::TooMany { length: 5_000, max: MAX_GRANTS, .. })] if f == "spec.grants"),
        "{errors:?}"
    );
    // At the bounds every item is checked, each duplicate found against its first.
    let at_bound: Vec<Value> = (0..MAX_GRANTS)
        .map(|i| json!({"privileges": ["SELECT", "INSERT", "select"], "on": format!("db{}.*", i % (MAX_GRANTS - 1))}))
        .collect();
    let errors = user_errors(grants(Value::Array(at_bound)));
    let duplicates_of_select = errors
        .iter()
        .filter(|(_, p)| matches!(p, Problem::DuplicatePrivilege { .. }))
        .count();
    assert_eq!(duplicates_of_select, MAX_GRANTS);
    assert_eq!(
        errors
            .iter()
            .filter(|(_, p)| matches!(p, Problem::DuplicateTarget { .. }))
            .map(|(f, _)| f.as_str())
            .collect::<Vec<_>>(),
        vec![format!("spec.grants[{}].on", MAX_GRANTS - 1)]
    );
    let long_on = format!("`{}`.*", "a".repeat(100_000));
    assert!(matches!(
        user_errors(grants(json!([{"privileges": ["SELECT"], "on": long_on}]))).as_slice(),
        [(f, Problem::TooLong { length: 100_004, max: MAX_ON_LENGTH, .. })] if f == "spec.grants[0].on"
    ));
}

#[test]
fn database_privileges_are_refused_on_tables() {
    assert_eq!(
        user_errors(grants(
            json!([{"privileges": ["EXECUTE"], "on": "appdb.t"}])
        )),
        one(
            "spec.grants[0].privileges[0]",
            Problem::NotOnTable {
                privilege: "EXECUTE".into()
            }
        )
    );
    assert_eq!(
        user_errors(grants(
            json!([{"privileges": ["EXECUTE", "LOCK TABLES"], "on": "appdb.*"}])
        )),
        vec![]
    );
    assert_eq!(
        user_errors(grants(
            json!([{"privileges": ["SELECT", "UPDATE"], "on": "appdb.t"}])
        )),
        vec![]
    );
}

#[test]
fn administrative_privileges_on_star_star_need_the_opt_in() {
    for privilege in [
        "CREATE USER",
        "GRANT OPTION",
        "ALL",
        "ALL PRIVILEGES",
        "SUPER",
        "SYSTEM_USER",
        "ROLE_ADMIN",
        "CONNECTION_ADMIN",
        "SYSTEM_VARIABLES_ADMIN",
        "READ_ONLY ADMIN",
        "BINLOG ADMIN",
        "BINLOG_ADMIN",
        "REPLICATION SLAVE ADMIN",
        "REPLICATION_SLAVE_ADMIN",
        "SET USER",
        "SET_USER_ID",
        "CREATE ROLE",
        "DROP ROLE",
    ] {
        let canonical = privileges::canonical(privilege).unwrap_or_default();
        let g = json!([{"privileges": [privilege], "on": "*.*"}]);
        assert_eq!(
            user_errors(grants(g.clone())),
            one(
                "spec.grants[0].privileges[0]",
                Problem::Administrative {
                    privilege: canonical
                }
            ),
            "{privilege}"
        );
        assert_eq!(
            user_errors(json!({"grants": g, "allowPrivilegedGrants": true})),
            vec![],
            "{privilege} with the opt-in"
        );
    }
}

#[test]
fn grant_option_and_all_on_a_database_are_not_administrative() {
    assert_eq!(
        user_errors(grants(
            json!([{"privileges": ["ALL PRIVILEGES", "GRANT OPTION"], "on": "appdb.*"}])
        )),
        vec![]
    );
}

#[test]
fn writes_that_reach_the_grant_tables_need_the_opt_in() {
    for (privilege, on) in [
        ("INSERT", "*.*"),
        ("UPDATE", "*.*"),
        ("DELETE", "mysql.*"),
        ("UPDATE", "mysql.user"),
        ("ALL", "mysql.*"),
        ("DROP", "MySQL.*"),
        ("CREATE", "`mysql`.`global_priv`"),
    ] {
        let g = json!([{"privileges": [privilege], "on": on}]);
        let target = parse_target(on).map(|t| t.to_string()).unwrap_or_default();
        let canonical = privileges::canonical(privilege).unwrap_or_default();
        assert_eq!(
            user_errors(grants(g.clone())),
            one(
                "spec.grants[0].privileges[0]",
                Problem::WritesSystemSchema {
                    privilege: canonical,
                    on: target
                }
            ),
            "{privilege} on {on}"
        );
        assert_eq!(
            user_errors(json!({"grants": g, "allowPrivilegedGrants": true})),
            vec![],
            "{privilege} on {on} with the opt-in"
        );
    }
    // Reading the grant tables, and writing elsewhere, is not refused.
    assert_eq!(
        user_errors(grants(json!([
            {"privileges": ["SELECT", "SHOW VIEW"], "on": "*.*"},
            {"privileges": ["SELECT"], "on": "mysql.*"},
            {"privileges": ["INSERT", "UPDATE", "DELETE"], "on": "mysqlx.*"},
        ]))),
        vec![]
    );
}

#[test]
fn the_opt_in_does_not_lift_the_syntax_and_level_rules() {
    let errors = user_errors(json!({
        "allowPrivilegedGrants": true,
        "grants": [{"privileges": ["SUPER", "PROXY", "bad;"], "on": "appdb.*"}],
    }));
    let problems: Vec<&Problem> = errors.iter().map(|(_, p)| p).collect();
    assert!(matches!(
        problems.as_slice(),
        [
            Problem::GlobalOnly { .. },
            Problem::Proxy,
            Problem::PrivilegeSyntax(_)
        ]
    ));
    assert_eq!(
        pairs(validate_user(&user(
            json!({"name": "moco-admin", "allowPrivilegedGrants": true})
        ))),
        one("spec.name", Problem::MocoAccount("moco-admin".into()))
    );
}

#[test]
fn targets_are_checked_and_appear_once() {
    assert!(matches!(
        user_errors(grants(json!([{"privileges": ["SELECT"], "on": "appdb"}]))).as_slice(),
        [(f, Problem::Target(TargetError::Syntax(_)))] if f == "spec.grants[0].on"
    ));
    assert_eq!(
        user_errors(grants(json!([
            {"privileges": ["SELECT"], "on": "appdb.*"},
            {"privileges": ["INSERT"], "on": "other.*"},
            {"privileges": ["UPDATE"], "on": "`appdb`.*"},
        ]))),
        one(
            "spec.grants[2].on",
            Problem::DuplicateTarget {
                on: "appdb.*".into(),
                first: "spec.grants[0].on".into()
            }
        )
    );
    // A bad target still has its privileges' syntax checked.
    let errors = user_errors(grants(json!([{"privileges": ["bad;"], "on": "appdb"}])));
    assert_eq!(errors.len(), 2);
}

#[test]
fn database_names() {
    let errors = |name: &str| pairs(validate_database(&database(json!({"name": name}))));
    assert_eq!(errors("app-db.v2"), vec![]);
    assert_eq!(errors(&"a".repeat(MAX_IDENTIFIER_LENGTH)), vec![]);
    for system in [
        "mysql",
        "sys",
        "information_schema",
        "performance_schema",
        "MySQL",
    ] {
        assert_eq!(
            errors(system),
            one("spec.name", Problem::SystemSchema(system.into())),
            "{system}"
        );
    }
    assert_eq!(
        errors("#mysql50#old"),
        one("spec.name", Problem::Mysql50Name("#mysql50#old".into()))
    );
    assert!(matches!(
        errors(&"a".repeat(MAX_IDENTIFIER_LENGTH + 1)).as_slice(),
        [(f, Problem::Identifier(IdentifierError::TooLong { .. }))] if f == "spec.name"
    ));
    assert!(matches!(
        errors("app ").as_slice(),
        [(f, Problem::Identifier(IdentifierError::TrailingSpace(_)))] if f == "spec.name"
    ));
    assert!(matches!(
        errors("app%").as_slice(),
        [(f, Problem::Identifier(IdentifierError::Character { .. }))] if f == "spec.name"
    ));
    assert!(matches!(
        errors("").as_slice(),
        [(f, Problem::Identifier(IdentifierError::Empty))] if f == "spec.name"
    ));
    // From metadata.name.
    assert_eq!(
        pairs(validate_database(&database_named("mysql", json!({})))),
        one("metadata.name", Problem::SystemSchema("mysql".into()))
    );
    assert_eq!(
        pairs(validate_database(&database_named(
            "mysql",
            json!({"name": "appdb"})
        ))),
        vec![]
    );
}

#[test]
fn character_sets_and_collations() {
    let errors = |spec: Value| pairs(validate_database(&database(spec)));
    for (set, collation) in [
        ("utf8mb4", "utf8mb4_0900_ai_ci"),
        ("utf8mb4", "utf8mb4_uca1400_ai_ci"),
        ("UTF8MB4", "utf8mb4_BIN"),
        ("latin1", "latin1_swedish_ci"),
        ("utf8", "utf8mb3_general_ci"),
        ("utf8mb3", "utf8_general_ci"),
        ("binary", "binary"),
        ("utf16le", "utf16le_general_ci"),
    ] {
        assert_eq!(
            errors(json!({"characterSet": set, "collation": collation})),
            vec![],
            "{set} {collation}"
        );
    }
    for (set, collation) in [
        ("utf8mb4", "latin1_swedish_ci"),
        ("utf8", "utf8mb4_bin"),
        ("utf16", "utf16le_general_ci"),
        ("utf8mb4", "utf8mb4"),
        ("utf8mb4", "utf8mb4_"),
        ("binary", "binary_ci"),
        ("latin1", "binary"),
    ] {
        assert_eq!(
            errors(json!({"characterSet": set, "collation": collation})),
            one(
                "spec.collation",
                Problem::CollationMismatch {
                    collation: collation.into(),
                    character_set: set.into()
                }
            ),
            "{set} {collation}"
        );
    }
    // The default character set applies to a collation given alone.
    assert!(matches!(
        errors(json!({"collation": "latin1_bin"})).as_slice(),
        [(f, Problem::CollationMismatch { .. })] if f == "spec.collation"
    ));
    assert_eq!(errors(json!({"collation": "utf8mb4_bin"})), vec![]);
    assert_eq!(
        errors(json!({"characterSet": "utf8-mb4"})),
        one("spec.characterSet", Problem::CharsetName("utf8-mb4".into()))
    );
    assert_eq!(
        errors(json!({"characterSet": ""})),
        one("spec.characterSet", Problem::Empty)
    );
    assert_eq!(
        errors(json!({"collation": "utf8mb4 bin"})),
        one("spec.collation", Problem::CharsetName("utf8mb4 bin".into()))
    );
    assert!(matches!(
        errors(json!({"collation": format!("utf8mb4_{}", "a".repeat(MAX_CHARSET_NAME_LENGTH))})).as_slice(),
        [(f, Problem::TooLong { .. })] if f == "spec.collation"
    ));
    // A bad character set does not also make its collation a mismatch.
    assert_eq!(
        errors(json!({"characterSet": "bad-set", "collation": "utf8mb4_bin"})),
        one("spec.characterSet", Problem::CharsetName("bad-set".into()))
    );
}

#[test]
fn database_cluster_name() {
    assert_eq!(
        pairs(validate_database(&database(json!({"clusterName": ""})))),
        one("spec.clusterName", Problem::Empty)
    );
}

#[test]
fn user_updates_keep_name_cluster_and_host() {
    let old = user(json!({}));
    let immutable = |field: &str, old: &str, new: &str| {
        one(
            field,
            Problem::Immutable {
                old: old.into(),
                new: new.into(),
            },
        )
    };
    let check = |new: MySQLUser| pairs(validate_user_update(&new, &old));
    assert_eq!(
        check(user(json!({"name": "other"}))),
        immutable("spec.name", "app", "other")
    );
    // The same name written out is no change.
    assert_eq!(check(user(json!({"name": "app"}))), vec![]);
    assert_eq!(
        check(user(json!({"clusterName": "other"}))),
        immutable("spec.clusterName", "test", "other")
    );
    assert_eq!(
        check(user(json!({"host": "10.%"}))),
        immutable("spec.host", "%", "10.%")
    );
    // Everything else may change, and is checked.
    assert_eq!(
        check(user(
            json!({"maxUserConnections": 5, "requireTLS": true, "grants": [{"privileges": ["SELECT"], "on": "a.*"}]})
        )),
        vec![]
    );
    assert_eq!(
        check(user(grants(
            json!([{"privileges": ["SUPER"], "on": "*.*"}])
        ))),
        one(
            "spec.grants[0].privileges[0]",
            Problem::Administrative {
                privilege: "SUPER".into()
            }
        )
    );
}

#[test]
fn an_unchanged_spec_is_not_checked_again_on_update() {
    // An object admitted under more lenient rules can still lose its finalizer.
    let old = user(grants(json!([{"privileges": ["SUPER"], "on": "*.*"}])));
    let mut new = old.clone();
    new.metadata.finalizers = Some(vec![]);
    assert_eq!(validate_user_update(&new, &old), vec![]);
    let old_db = database(json!({"name": "mysql"}));
    assert_eq!(validate_database_update(&old_db.clone(), &old_db), vec![]);
}

#[test]
fn database_updates_keep_name_and_cluster() {
    let old = database(json!({}));
    let check = |new: MySQLDatabase| pairs(validate_database_update(&new, &old));
    assert_eq!(
        check(database(json!({"name": "other"}))),
        one(
            "spec.name",
            Problem::Immutable {
                old: "appdb".into(),
                new: "other".into()
            }
        )
    );
    assert_eq!(check(database(json!({"name": "appdb"}))), vec![]);
    assert_eq!(
        check(database(json!({"clusterName": "b"}))),
        one(
            "spec.clusterName",
            Problem::Immutable {
                old: "test".into(),
                new: "b".into()
            }
        )
    );
    assert_eq!(
        check(database(
            json!({"characterSet": "latin1", "deletionPolicy": "Delete"})
        )),
        vec![]
    );
    assert_eq!(
        check(database(json!({"collation": "latin1_bin"}))),
        one(
            "spec.collation",
            Problem::CollationMismatch {
                collation: "latin1_bin".into(),
                character_set: "utf8mb4".into()
            }
        )
    );
}

#[test]
fn messages_name_the_field_and_say_why() {
    let errors = validate_user(&user(json!({
        "name": "moco-admin",
        "grants": [{"privileges": ["SELECT", "SUPER"], "on": "*.*"}],
    })));
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 2);
    assert!(
        messages[0].starts_with("spec.name: \"moco-admin\" is one of MOCO's own accounts"),
        "{messages:?}"
    );
    assert!(
        messages[1].starts_with("spec.grants[0].privileges[1]: SUPER on *.* would let"),
        "{messages:?}"
    );
    assert!(messages[1].contains("spec.allowPrivilegedGrants: true"));
}

#[test]
fn object_names_and_secret_keys_are_at_most_253_characters() {
    let label = |n: usize| "a".repeat(n);
    // Labels of 63 joined by dots: 4 × 63 + 3 = 255; cut to the bounds.
    let long: String = [label(63), label(63), label(63), label(63)].join(".");
    assert_eq!(check_object_name(&long[..253]), Ok(()));
    assert!(matches!(
        check_object_name(&long[..254]),
        Err(Problem::ObjectName { .. })
    ));
    assert_eq!(check_secret_key(&"k".repeat(253)), Ok(()));
    assert!(matches!(
        check_secret_key(&"k".repeat(254)),
        Err(Problem::ObjectName { .. })
    ));
}

#[test]
fn the_last_character_of_the_basic_plane_is_taken_in_account_names() {
    assert_eq!(check_account_name("a\u{FFFF}"), Ok(()));
    assert!(matches!(
        check_account_name("a\u{10000}"),
        Err(Problem::Character { .. })
    ));
}

#[test]
fn a_host_refusal_says_which_kind_of_character() {
    let why = |host: &str| match check_host(host) {
        Err(Problem::Character { why, .. }) => why,
        other => panic!("{host:?}: {other:?}"),
    };
    assert_eq!(
        why("a b"),
        "white space and control characters are refused in a host"
    );
    assert_eq!(
        why("a\u{1}b"),
        "white space and control characters are refused in a host"
    );
    assert_eq!(
        why("a'b"),
        "quotes, backticks and backslashes are refused in a host"
    );
    assert!(why("a;b").starts_with("a host has letters, digits"));
}

#[test]
fn character_set_names_are_at_most_64_characters() {
    assert_eq!(
        check_charset_name(&"c".repeat(MAX_CHARSET_NAME_LENGTH)),
        Ok(())
    );
    assert!(matches!(
        check_charset_name(&"c".repeat(MAX_CHARSET_NAME_LENGTH + 1)),
        Err(Problem::TooLong { max: 64, .. })
    ));
}

#[test]
fn a_summary_lists_twenty_errors_and_counts_the_rest() {
    let errors: Vec<FieldError> = (0..23)
        .map(|i| FieldError::new(format!("spec.grants[{i}].on"), Problem::Empty))
        .collect();
    let text = summary(&errors);
    assert!(text.starts_with("spec.grants[0].on: must not be empty; "));
    assert!(text.contains("spec.grants[19].on"));
    assert!(!text.contains("spec.grants[20].on"));
    assert!(text.ends_with("; and 3 more"));
    assert_eq!(
        summary(&errors[..2]),
        "spec.grants[0].on: must not be empty; spec.grants[1].on: must not be empty"
    );
}
