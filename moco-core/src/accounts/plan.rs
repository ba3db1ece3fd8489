//! The changes that make the server's account or database what is declared: pure, so that
//! the operator and `moco local` change the same things, and each change is named for the
//! event that reports a repaired drift.

use std::collections::BTreeSet;
use std::fmt;

use super::model::{
    AccountSpec, DatabaseSpec, GrantTarget, ObservedAccount, ObservedDatabase, Privilege,
    UndeclaredGrant, privilege_list,
};

/// One change to an account. The password is the adapter's: a plan only says when to set it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccountChange {
    /// `CREATE USER` with the password, TLS requirement and connection limit.
    Create,
    /// `ALTER USER … IDENTIFIED BY` the declared password.
    SetPassword,
    /// `ALTER USER … REQUIRE SSL` / `REQUIRE NONE`.
    SetRequireTls(bool),
    /// `ALTER USER … WITH MAX_USER_CONNECTIONS n`.
    SetMaxUserConnections(u32),
    /// `GRANT privileges ON target` (`GRANT OPTION` as `WITH GRANT OPTION`).
    Grant {
        /// Where.
        on: GrantTarget,
        /// What.
        privileges: BTreeSet<Privilege>,
    },
    /// `REVOKE privileges ON target`.
    Revoke {
        /// Where.
        on: GrantTarget,
        /// What.
        privileges: BTreeSet<Privilege>,
    },
    /// Revokes what a declaration cannot hold: a role, a proxy, routine or column privileges.
    RevokeUndeclared(UndeclaredGrant),
    /// `DROP USER`.
    Drop,
}

impl fmt::Display for AccountChange {
    /// In words, for events and logs (never the password).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = privilege_list;
        match self {
            AccountChange::Create => f.write_str("created"),
            AccountChange::SetPassword => f.write_str("password set"),
            AccountChange::SetRequireTls(true) => f.write_str("TLS required"),
            AccountChange::SetRequireTls(false) => f.write_str("TLS no longer required"),
            AccountChange::SetMaxUserConnections(n) => write!(f, "MAX_USER_CONNECTIONS {n}"),
            AccountChange::Grant { on, privileges } => {
                write!(f, "granted {} on {on}", list(privileges))
            }
            AccountChange::Revoke { on, privileges } => {
                write!(f, "revoked {} on {on}", list(privileges))
            }
            AccountChange::RevokeUndeclared(what) => write!(f, "revoked {what}"),
            AccountChange::Drop => f.write_str("dropped"),
        }
    }
}

/// What makes `observed` (`None`: no such account) what `desired` declares. `new_password` is
/// true when the declared password changed since it was last set (a new Secret version): the
/// server's hash cannot always tell (MySQL's salted hashes).
pub fn plan_account(
    desired: &AccountSpec,
    observed: Option<&ObservedAccount>,
    new_password: bool,
) -> Vec<AccountChange> {
    let Some(observed) = observed else {
        let mut changes = vec![AccountChange::Create];
        changes.extend(grants(desired, &ObservedAccount::default()));
        return changes;
    };
    let mut changes = Vec::new();
    if new_password || observed.password_matches == Some(false) {
        changes.push(AccountChange::SetPassword);
    }
    if observed.require_tls != desired.require_tls {
        changes.push(AccountChange::SetRequireTls(desired.require_tls));
    }
    if observed.max_user_connections != desired.max_user_connections {
        changes.push(AccountChange::SetMaxUserConnections(
            desired.max_user_connections,
        ));
    }
    changes.extend(grants(desired, observed));
    changes
}

/// Revocations first (a privilege moved between targets is never held twice), then grants,
/// each target in order. What no declaration can hold (roles, proxies, routine and column
/// privileges) is revoked before the rest.
fn grants(desired: &AccountSpec, observed: &ObservedAccount) -> Vec<AccountChange> {
    let empty = BTreeSet::new();
    let targets: BTreeSet<&GrantTarget> = desired
        .grants
        .keys()
        .chain(observed.grants.keys())
        .collect();
    let mut revokes: Vec<AccountChange> = observed
        .undeclared
        .iter()
        .cloned()
        .map(AccountChange::RevokeUndeclared)
        .collect();
    let mut grants = Vec::new();
    for on in targets {
        let want = desired.grants.get(on).unwrap_or(&empty);
        let have = observed.grants.get(on).unwrap_or(&empty);
        let extra: BTreeSet<Privilege> = have.difference(want).cloned().collect();
        let missing: BTreeSet<Privilege> = want.difference(have).cloned().collect();
        if !extra.is_empty() {
            revokes.push(AccountChange::Revoke {
                on: on.clone(),
                privileges: extra,
            });
        }
        if !missing.is_empty() {
            grants.push(AccountChange::Grant {
                on: on.clone(),
                privileges: missing,
            });
        }
    }
    revokes.extend(grants);
    revokes
}

/// One change to a database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseChange {
    /// `CREATE DATABASE` with the declared character set and collation.
    Create,
    /// `ALTER DATABASE` to the declared character set and collation (tables keep theirs).
    Alter,
    /// `DROP DATABASE`.
    Drop,
}

/// What makes `observed` (`None`: no such database) what `desired` declares. A character set
/// or collation left undeclared is the server's business.
pub fn plan_database(
    desired: &DatabaseSpec,
    observed: Option<&ObservedDatabase>,
) -> Option<DatabaseChange> {
    let Some(observed) = observed else {
        return Some(DatabaseChange::Create);
    };
    let differs = |want: &Option<String>, have: &str| {
        want.as_deref()
            .is_some_and(|w| !w.eq_ignore_ascii_case(have))
    };
    (differs(&desired.character_set, &observed.character_set)
        || differs(&desired.collation, &observed.collation))
    .then_some(DatabaseChange::Alter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::model::Grants;

    fn privs(names: &[&str]) -> BTreeSet<Privilege> {
        names.iter().map(|n| Privilege::new(n).unwrap()).collect()
    }

    fn db(name: &str) -> GrantTarget {
        GrantTarget::Database(name.to_owned())
    }

    fn spec(grants: Grants) -> AccountSpec {
        AccountSpec {
            name: "app".into(),
            host: "%".into(),
            grants,
            require_tls: false,
            max_user_connections: 0,
        }
    }

    #[test]
    fn a_missing_account_is_created_with_its_grants() {
        let desired = spec(Grants::from([(db("app"), privs(&["SELECT", "INSERT"]))]));
        assert_eq!(
            plan_account(&desired, None, false),
            [
                AccountChange::Create,
                AccountChange::Grant {
                    on: db("app"),
                    privileges: privs(&["INSERT", "SELECT"])
                }
            ]
        );
    }

    #[test]
    fn an_account_as_declared_needs_nothing() {
        let grants = Grants::from([(db("app"), privs(&["SELECT"]))]);
        let observed = ObservedAccount {
            grants: grants.clone(),
            password_matches: Some(true),
            ..ObservedAccount::default()
        };
        assert_eq!(
            plan_account(&spec(grants.clone()), Some(&observed), false),
            []
        );
        // A password whose hash cannot be compared is set only for a new Secret.
        let unknown = ObservedAccount {
            password_matches: None,
            ..observed.clone()
        };
        assert_eq!(
            plan_account(&spec(grants.clone()), Some(&unknown), false),
            []
        );
        assert_eq!(
            plan_account(&spec(grants), Some(&unknown), true),
            [AccountChange::SetPassword]
        );
    }

    /// An account that held a role, a proxy, routine and column privileges (taken over, or
    /// granted by hand) loses them all, before any other revocation, with words for the
    /// event.
    #[test]
    fn what_no_declaration_holds_is_revoked_first() {
        use crate::accounts::model::{RoutineKind, UndeclaredGrant};
        let grants = Grants::from([(db("app"), privs(&["SELECT"]))]);
        let undeclared = BTreeSet::from([
            UndeclaredGrant::Role("'dba'".into()),
            UndeclaredGrant::Proxy {
                user: "root".into(),
                host: "%".into(),
            },
            UndeclaredGrant::Routine {
                kind: RoutineKind::Procedure,
                database: "app".into(),
                name: "p".into(),
                privileges: privs(&["EXECUTE", "ALTER ROUTINE"]),
            },
            UndeclaredGrant::Column {
                database: "app".into(),
                table: "t".into(),
                column: "c".into(),
                privileges: privs(&["UPDATE"]),
            },
        ]);
        let observed = ObservedAccount {
            grants: Grants::from([(db("app"), privs(&["SELECT", "DELETE"]))]),
            undeclared: undeclared.clone(),
            password_matches: Some(true),
            ..ObservedAccount::default()
        };
        let changes = plan_account(&spec(grants), Some(&observed), false);
        let mut expected: Vec<AccountChange> = undeclared
            .into_iter()
            .map(AccountChange::RevokeUndeclared)
            .collect();
        expected.push(AccountChange::Revoke {
            on: db("app"),
            privileges: privs(&["DELETE"]),
        });
        assert_eq!(changes, expected);
        let words: Vec<String> = changes.iter().map(ToString::to_string).collect();
        assert_eq!(
            words,
            [
                "revoked role 'dba'",
                "revoked PROXY on 'root'@'%'",
                "revoked ALTER ROUTINE, EXECUTE on PROCEDURE `app`.`p`",
                "revoked UPDATE on column `c` of `app`.`t`",
                "revoked DELETE on `app`.*",
            ]
        );
    }

    #[test]
    fn drift_is_put_back_revocations_first() {
        let desired = AccountSpec {
            require_tls: true,
            max_user_connections: 10,
            ..spec(Grants::from([
                (db("app"), privs(&["SELECT", "UPDATE"])),
                (
                    GrantTarget::Table("app".into(), "t".into()),
                    privs(&["DELETE"]),
                ),
            ]))
        };
        let observed = ObservedAccount {
            grants: Grants::from([
                (db("app"), privs(&["SELECT", "DROP"])),
                (db("other"), privs(&["SELECT"])),
            ]),
            undeclared: BTreeSet::new(),
            require_tls: false,
            max_user_connections: 0,
            password_matches: Some(false),
        };
        assert_eq!(
            plan_account(&desired, Some(&observed), false),
            [
                AccountChange::SetPassword,
                AccountChange::SetRequireTls(true),
                AccountChange::SetMaxUserConnections(10),
                AccountChange::Revoke {
                    on: db("app"),
                    privileges: privs(&["DROP"])
                },
                AccountChange::Revoke {
                    on: db("other"),
                    privileges: privs(&["SELECT"])
                },
                AccountChange::Grant {
                    on: db("app"),
                    privileges: privs(&["UPDATE"])
                },
                AccountChange::Grant {
                    on: GrantTarget::Table("app".into(), "t".into()),
                    privileges: privs(&["DELETE"])
                },
            ]
        );
    }

    #[test]
    fn changes_read_as_words_without_secrets() {
        let grant = AccountChange::Grant {
            on: db("a`b"),
            privileges: privs(&["select", "create  temporary tables"]),
        };
        assert_eq!(
            grant.to_string(),
            "granted CREATE TEMPORARY TABLES, SELECT on `a``b`.*"
        );
        assert_eq!(AccountChange::SetPassword.to_string(), "password set");
    }

    #[test]
    fn a_database_is_created_then_altered_only_for_what_is_declared() {
        let want = DatabaseSpec {
            name: "app".into(),
            character_set: Some("utf8mb4".into()),
            collation: None,
        };
        assert_eq!(plan_database(&want, None), Some(DatabaseChange::Create));
        let have = |cs: &str, co: &str| ObservedDatabase {
            character_set: cs.into(),
            collation: co.into(),
        };
        assert_eq!(
            plan_database(&want, Some(&have("utf8mb4", "utf8mb4_general_ci"))),
            None
        );
        assert_eq!(
            plan_database(&want, Some(&have("latin1", "latin1_swedish_ci"))),
            Some(DatabaseChange::Alter)
        );
        let collated = DatabaseSpec {
            collation: Some("utf8mb4_bin".into()),
            ..want
        };
        assert_eq!(
            plan_database(&collated, Some(&have("utf8mb4", "utf8mb4_general_ci"))),
            Some(DatabaseChange::Alter)
        );
        assert_eq!(
            plan_database(&collated, Some(&have("UTF8MB4", "UTF8MB4_BIN"))),
            None
        );
    }
}
