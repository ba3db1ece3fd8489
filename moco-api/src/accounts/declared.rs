//! What a MySQLUser and a MySQLDatabase declare, in the words moco-core's planner compares
//! ([`moco_core::accounts`]): the operator's controllers and `moco local apply` convert them
//! here, so that both make the same changes.
//!
//! `ALL PRIVILEGES` is the server's list for the grant's level (it differs between servers
//! and versions): the caller reads the lists of [`all_privilege_levels`] from the server and
//! passes them to [`account_spec`]. On `*.*` it is refused, since the global list also changes
//! with the version and the account would be rewritten at each upgrade.

use std::collections::{BTreeMap, BTreeSet};

use moco_core::accounts::{AccountSpec, DatabaseSpec, GrantLevel, GrantTarget, Grants, Privilege};

use super::database::MySQLDatabase;
use super::privileges::canonical;
use super::target::GrantTarget as DeclaredTarget;
use super::user::MySQLUser;

/// `ALL PRIVILEGES` as admission writes it (its canonical name).
const ALL_PRIVILEGES: &str = "ALL PRIVILEGES";

/// A grant that cannot be converted, naming its field (`spec.grants[1]`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct DeclaredError {
    /// The field, as JSON names it.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// One grant: its target in the planner's words and its privileges' canonical names.
fn grant_parts(
    user: &MySQLUser,
) -> impl Iterator<Item = Result<(GrantTarget, Vec<String>), DeclaredError>> + '_ {
    user.spec.grants.iter().enumerate().map(|(n, grant)| {
        let refused = |message: String| DeclaredError {
            field: format!("spec.grants[{n}]"),
            message,
        };
        let target = match grant.target().map_err(|e| refused(e.to_string()))? {
            DeclaredTarget::Global => GrantTarget::Global,
            DeclaredTarget::Database(db) => GrantTarget::database(&db),
            DeclaredTarget::Table(db, table) => GrantTarget::Table(db, table),
        };
        let mut names = Vec::new();
        for text in &grant.privileges {
            let name = canonical(text).map_err(|e| refused(e.to_string()))?;
            if name == ALL_PRIVILEGES && target.level() == GrantLevel::Global {
                return Err(refused(
                    "ALL PRIVILEGES on *.* is not kept by moco-rs (the global list differs \
                     between servers and versions): list the privileges"
                        .to_owned(),
                ));
            }
            names.push(name);
        }
        Ok((target, names))
    })
}

/// The levels at which `user` grants `ALL PRIVILEGES`: the server's list of each is needed.
pub fn all_privilege_levels(user: &MySQLUser) -> Result<BTreeSet<GrantLevel>, DeclaredError> {
    let mut levels = BTreeSet::new();
    for part in grant_parts(user) {
        let (target, names) = part?;
        if names.iter().any(|n| n == ALL_PRIVILEGES) {
            levels.insert(target.level());
        }
    }
    Ok(levels)
}

/// The account `user` declares; `all` holds the server's privileges of each level of
/// [`all_privilege_levels`] (a level missing there counts as none).
pub fn account_spec(
    user: &MySQLUser,
    all: &BTreeMap<GrantLevel, BTreeSet<Privilege>>,
) -> Result<AccountSpec, DeclaredError> {
    let mut grants = Grants::new();
    for part in grant_parts(user) {
        let (target, names) = part?;
        let level = target.level();
        let set = grants.entry(target).or_default();
        for name in names {
            if name == ALL_PRIVILEGES {
                set.extend(all.get(&level).into_iter().flatten().cloned());
            } else {
                set.extend(Privilege::new(&name));
            }
        }
    }
    grants.retain(|_, set| !set.is_empty());
    Ok(AccountSpec {
        name: user.account_name().to_owned(),
        host: user.spec.host.clone(),
        grants,
        require_tls: user.spec.require_tls,
        max_user_connections: u32::try_from(user.spec.max_user_connections).unwrap_or(0),
    })
}

/// The database `database` declares.
pub fn database_spec(database: &MySQLDatabase) -> DatabaseSpec {
    DatabaseSpec {
        name: database.database_name().to_owned(),
        character_set: Some(database.spec.character_set.clone()),
        collation: database.spec.collation.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::user::MySQLUserSpec;

    fn user(grants: Vec<(&[&str], &str)>) -> MySQLUser {
        let spec: MySQLUserSpec = serde_json::from_value(serde_json::json!({
            "clusterName": "db",
            "passwordSecretKeyRef": {"name": "s", "key": "password"},
            "grants": grants.iter().map(|(p, on)| serde_json::json!({"privileges": p, "on": on})).collect::<Vec<_>>(),
        }))
        .unwrap();
        MySQLUser::new("app", spec)
    }

    #[test]
    fn all_privileges_take_the_servers_list_of_their_level() {
        let u = user(vec![(&["all"], "appdb.*"), (&["select"], "other.t")]);
        assert_eq!(
            all_privilege_levels(&u).unwrap(),
            BTreeSet::from([GrantLevel::Database])
        );
        let listed: BTreeSet<Privilege> = ["SELECT", "INSERT"]
            .iter()
            .filter_map(|p| Privilege::new(p))
            .collect();
        let spec = account_spec(
            &u,
            &BTreeMap::from([(GrantLevel::Database, listed.clone())]),
        )
        .unwrap();
        assert_eq!(spec.name, "app");
        assert_eq!(spec.grants[&GrantTarget::database("appdb")], listed);
        assert_eq!(
            spec.grants[&GrantTarget::Table("other".into(), "t".into())],
            BTreeSet::from([Privilege::new("SELECT").unwrap()])
        );
        // Without the server's list, ALL grants nothing (and the empty target is left out).
        let spec = account_spec(&u, &BTreeMap::new()).unwrap();
        assert!(!spec.grants.contains_key(&GrantTarget::database("appdb")));
    }

    #[test]
    fn all_privileges_on_everything_is_refused_naming_the_grant() {
        let u = user(vec![(&["SELECT"], "a.*"), (&["ALL PRIVILEGES"], "*.*")]);
        let e = all_privilege_levels(&u).unwrap_err();
        assert_eq!(e.field, "spec.grants[1]");
        assert!(e.message.contains("*.*"), "{e}");
        assert_eq!(account_spec(&u, &BTreeMap::new()).unwrap_err(), e);
    }

    /// A database's `_` is literal in its grant (`app_db.*` is that database only).
    #[test]
    fn database_wildcards_are_escaped() {
        let u = user(vec![(&["SELECT"], "app_db.*")]);
        let spec = account_spec(&u, &BTreeMap::new()).unwrap();
        assert!(spec.grants.contains_key(&GrantTarget::database("app_db")));
    }
}
