//! Declared accounts and databases on a server: what it holds, read from its own tables, and
//! the changes of `moco_core::accounts` as SQL.
//!
//! Grants are read from `information_schema` (`USER_PRIVILEGES`, `SCHEMA_PRIVILEGES`,
//! `TABLE_PRIVILEGES`), which both flavours list one privilege per row, `ALL` expanded; so a
//! declared `ALL` is expanded the server's way first ([`MysqlInstance::all_privileges`], from
//! the privilege columns of `mysql.db` and `mysql.tables_priv`). A password is compared where
//! the server's hash allows it: `mysql_native_password` (MariaDB's default) is unsalted, so the
//! declared password's hash is computed and compared; MySQL's `caching_sha2_password` is
//! salted, so there only a new Secret sets it again.

use std::collections::{BTreeMap, BTreeSet};

use super::MysqlInstance;
use super::password::{identified_by, native_password_hash};
use super::sql::{account, quote};
use moco_cluster::ports::PortError;
use moco_core::accounts::model::{RoutineKind, UndeclaredGrant, privilege_list};
use moco_core::accounts::{
    AccountChange, AccountSpec, DatabaseChange, DatabaseSpec, GrantLevel, GrantTarget, Grants,
    ObservedAccount, ObservedDatabase, Privilege, quote_identifier,
};
use moco_core::dialect::Dialect;

/// `'user'@'host'` as `information_schema` writes a grantee.
fn grantee(user: &str, host: &str) -> String {
    format!("'{user}'@'{host}'")
}

/// The statements of one account change on a server of dialect `d`. `password` is used by
/// `Create` and `SetPassword` only, as [`identified_by`] sends it (on MariaDB its hash, which
/// is what the binary log keeps).
pub fn account_statements(
    d: Dialect,
    spec: &AccountSpec,
    password: &str,
    change: &AccountChange,
) -> Vec<String> {
    let who = account(&spec.name, &spec.host);
    let require = |tls: bool| if tls { "SSL" } else { "NONE" };
    match change {
        AccountChange::Create => vec![format!(
            "CREATE USER {who} {} REQUIRE {} WITH MAX_USER_CONNECTIONS {}",
            identified_by(d, password),
            require(spec.require_tls),
            spec.max_user_connections
        )],
        AccountChange::SetPassword => {
            vec![format!("ALTER USER {who} {}", identified_by(d, password))]
        }
        AccountChange::SetRequireTls(tls) => {
            vec![format!("ALTER USER {who} REQUIRE {}", require(*tls))]
        }
        AccountChange::SetMaxUserConnections(n) => {
            vec![format!("ALTER USER {who} WITH MAX_USER_CONNECTIONS {n}")]
        }
        AccountChange::Grant { on, privileges } => {
            let (option, list) = split_grant_option(privileges);
            let mut out = Vec::new();
            if !list.is_empty() {
                out.push(format!("GRANT {list} ON {on} TO {who}"));
            }
            if option {
                // Granting the option alone needs a privilege to carry it; USAGE carries none.
                out.push(format!("GRANT USAGE ON {on} TO {who} WITH GRANT OPTION"));
            }
            out
        }
        AccountChange::Revoke { on, privileges } => {
            let (option, list) = split_grant_option(privileges);
            let mut out = Vec::new();
            if !list.is_empty() {
                out.push(format!("REVOKE {list} ON {on} FROM {who}"));
            }
            if option {
                out.push(format!("REVOKE GRANT OPTION ON {on} FROM {who}"));
            }
            out
        }
        AccountChange::RevokeUndeclared(what) => {
            revoke_undeclared(d, (&spec.name, &spec.host), &who, what)
        }
        AccountChange::Drop => vec![format!("DROP USER IF EXISTS {who}")],
    }
}

/// The statements that take `what` from account `owner` (user, host; `who` as SQL).
fn revoke_undeclared(
    d: Dialect,
    owner: (&str, &str),
    who: &str,
    what: &UndeclaredGrant,
) -> Vec<String> {
    let list = privilege_list;
    match what {
        UndeclaredGrant::Role(role) => {
            let mut out = vec![format!("REVOKE {role} FROM {who}")];
            // MySQL forgets a revoked role as a default; MariaDB keeps naming it.
            if d == Dialect::Mariadb {
                out.push(format!("SET DEFAULT ROLE NONE FOR {who}"));
            }
            out
        }
        // MOCO's MariaDB admin holds no proxy grant, which REVOKE PROXY needs (1698): the
        // grant table's row goes instead. MySQL's admin holds `PROXY ON ''@''`.
        UndeclaredGrant::Proxy { user, host } => match d {
            Dialect::Mariadb => vec![
                format!(
                    "DELETE FROM mysql.proxies_priv WHERE User = {} AND Host = {} \
                     AND Proxied_user = {} AND Proxied_host = {}",
                    quote(owner.0),
                    quote(owner.1),
                    quote(user),
                    quote(host)
                ),
                "FLUSH PRIVILEGES".to_owned(),
            ],
            Dialect::Mysql80 | Dialect::Mysql84 => vec![format!(
                "REVOKE PROXY ON {} FROM {who}",
                account(user, host)
            )],
        },
        UndeclaredGrant::Routine {
            kind,
            database,
            name,
            privileges,
        } => vec![format!(
            "REVOKE {} ON {} {}.{} FROM {who}",
            list(privileges),
            kind.as_str(),
            quote_identifier(database),
            quote_identifier(name)
        )],
        UndeclaredGrant::Column {
            database,
            table,
            column,
            privileges,
        } => {
            let column = quote_identifier(column);
            let each = privileges
                .iter()
                .map(|p| format!("{p} ({column})"))
                .collect::<Vec<_>>()
                .join(", ");
            vec![format!(
                "REVOKE {each} ON {}.{} FROM {who}",
                quote_identifier(database),
                quote_identifier(table)
            )]
        }
    }
}

/// A privilege of `mysql.procs_priv.Proc_priv` (`Execute`, `Alter Routine`, `Grant`).
fn routine_privilege(value: &str) -> Option<Privilege> {
    match value.trim().to_ascii_lowercase().as_str() {
        "grant" => Privilege::new(Privilege::GRANT_OPTION),
        "" => None,
        other => Privilege::new(other),
    }
}

/// Whether `GRANT OPTION` is among `privileges`, and the others as a list.
fn split_grant_option(privileges: &BTreeSet<Privilege>) -> (bool, String) {
    let option = privileges.iter().any(Privilege::is_grant_option);
    let list = privileges
        .iter()
        .filter(|p| !p.is_grant_option())
        .map(Privilege::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    (option, list)
}

/// The statement of one database change.
pub fn database_statement(spec: &DatabaseSpec, change: &DatabaseChange) -> String {
    let name = quote_identifier(&spec.name);
    let mut options = String::new();
    if let Some(cs) = &spec.character_set {
        options.push_str(&format!(" CHARACTER SET {}", quote_identifier(cs)));
    }
    if let Some(co) = &spec.collation {
        options.push_str(&format!(" COLLATE {}", quote_identifier(co)));
    }
    match change {
        DatabaseChange::Create => format!("CREATE DATABASE IF NOT EXISTS {name}{options}"),
        DatabaseChange::Alter => format!("ALTER DATABASE {name}{options}"),
        DatabaseChange::Drop => format!("DROP DATABASE IF EXISTS {name}"),
    }
}

/// A privilege column of `mysql.db` (`Create_tmp_table_priv`) or a value of
/// `tables_priv.Table_priv` (`Create View`) as the privilege the server lists.
fn privilege_of_column(name: &str) -> Option<Privilege> {
    let base = name.strip_suffix("_priv").unwrap_or(name);
    let words = match base.to_ascii_lowercase().replace('_', " ").as_str() {
        "grant" => return None,
        "create tmp table" => "CREATE TEMPORARY TABLES".to_owned(),
        "delete versioning rows" | "delete history" => "DELETE HISTORY".to_owned(),
        other => other.to_ascii_uppercase(),
    };
    Privilege::new(&words)
}

impl MysqlInstance {
    /// The privileges `GRANT ALL` gives at `level` on this server: the privilege columns of
    /// `mysql.db` (database level) or the values of `mysql.tables_priv.Table_priv` (table
    /// level); the global level is not expanded (admission refuses `ALL` on `*.*`).
    pub async fn all_privileges(
        &self,
        level: GrantLevel,
    ) -> Result<BTreeSet<Privilege>, PortError> {
        let mut conn = self.conn().await?;
        match level {
            GrantLevel::Global => Ok(BTreeSet::new()),
            GrantLevel::Database => {
                let q = "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
                         WHERE TABLE_SCHEMA = 'mysql' AND TABLE_NAME = 'db' \
                         AND COLUMN_NAME LIKE '%\\_priv'";
                let mut out = BTreeSet::new();
                for row in self.rows(&mut conn, q).await? {
                    let column: String = self.cell(&row, 0usize, q)?;
                    out.extend(privilege_of_column(&column));
                }
                Ok(out)
            }
            GrantLevel::Table => {
                let q = "SELECT COLUMN_TYPE FROM information_schema.COLUMNS \
                         WHERE TABLE_SCHEMA = 'mysql' AND TABLE_NAME = 'tables_priv' \
                         AND COLUMN_NAME = 'Table_priv'";
                let set: String = self.value(&mut conn, q).await?;
                let inner = set
                    .strip_prefix("set(")
                    .and_then(|s| s.strip_suffix(')'))
                    .unwrap_or_default();
                Ok(inner
                    .split(',')
                    .map(|v| v.trim().trim_matches('\''))
                    .filter_map(privilege_of_column)
                    .collect())
            }
        }
    }

    /// Account `user`@`host` as the server holds it (`None`: no such account), its password
    /// compared with `password` where the hash allows.
    pub async fn observe_account(
        &self,
        user: &str,
        host: &str,
        password: &str,
    ) -> Result<Option<ObservedAccount>, PortError> {
        let mut conn = self.conn().await?;
        let q = format!(
            "SELECT ssl_type, max_user_connections, plugin, authentication_string \
             FROM mysql.user WHERE User = {} AND Host = {}",
            quote(user),
            quote(host)
        );
        let Some(row) = self.first_row(&mut conn, &q).await? else {
            return Ok(None);
        };
        let ssl_type: String = self.cell(&row, 0usize, &q)?;
        let max_user_connections: i64 = self.cell(&row, 1usize, &q)?;
        let plugin: String = self.cell(&row, 2usize, &q)?;
        let hash: String = self.cell(&row, 3usize, &q)?;
        let password_matches = (plugin == "mysql_native_password")
            .then(|| hash.eq_ignore_ascii_case(&native_password_hash(password)));
        let g = quote(&grantee(user, host));
        let mut grants = Grants::new();
        let mut add = |on: GrantTarget, privilege: &str, grantable: &str| {
            let set = grants.entry(on).or_default();
            if let Some(p) = Privilege::new(privilege).filter(|p| p.as_str() != "USAGE") {
                set.insert(p);
            }
            if grantable == "YES" {
                set.extend(Privilege::new(Privilege::GRANT_OPTION));
            }
        };
        let q = format!(
            "SELECT PRIVILEGE_TYPE, IS_GRANTABLE FROM information_schema.USER_PRIVILEGES \
             WHERE GRANTEE = {g}"
        );
        for row in self.rows(&mut conn, &q).await? {
            let p: String = self.cell(&row, 0usize, &q)?;
            let grantable: String = self.cell(&row, 1usize, &q)?;
            add(GrantTarget::Global, &p, &grantable);
        }
        let q = format!(
            "SELECT TABLE_SCHEMA, PRIVILEGE_TYPE, IS_GRANTABLE \
             FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = {g}"
        );
        for row in self.rows(&mut conn, &q).await? {
            let db: String = self.cell(&row, 0usize, &q)?;
            let p: String = self.cell(&row, 1usize, &q)?;
            let grantable: String = self.cell(&row, 2usize, &q)?;
            add(GrantTarget::Database(db), &p, &grantable);
        }
        let q = format!(
            "SELECT TABLE_SCHEMA, TABLE_NAME, PRIVILEGE_TYPE, IS_GRANTABLE \
             FROM information_schema.TABLE_PRIVILEGES WHERE GRANTEE = {g}"
        );
        for row in self.rows(&mut conn, &q).await? {
            let db: String = self.cell(&row, 0usize, &q)?;
            let table: String = self.cell(&row, 1usize, &q)?;
            let p: String = self.cell(&row, 2usize, &q)?;
            let grantable: String = self.cell(&row, 3usize, &q)?;
            add(GrantTarget::Table(db, table), &p, &grantable);
        }
        grants.retain(|_, set| !set.is_empty());
        let undeclared = self.undeclared_grants(&mut conn, user, host).await?;
        Ok(Some(ObservedAccount {
            grants,
            undeclared,
            require_tls: !ssl_type.is_empty(),
            max_user_connections: u32::try_from(max_user_connections).unwrap_or(u32::MAX),
            password_matches,
        }))
    }

    /// What account `user`@`host` holds that no declaration can say: roles (MariaDB's
    /// `mysql.roles_mapping`, MySQL's `mysql.role_edges`), proxies (`mysql.proxies_priv`),
    /// privileges on procedures and functions (`mysql.procs_priv`) and on columns
    /// (`information_schema.COLUMN_PRIVILEGES`).
    async fn undeclared_grants(
        &self,
        conn: &mut mysql_async::Conn,
        user: &str,
        host: &str,
    ) -> Result<BTreeSet<UndeclaredGrant>, PortError> {
        let d = self.server_info().await?.dialect;
        let (u, h) = (quote(user), quote(host));
        let mut out = BTreeSet::new();
        let q = match d {
            Dialect::Mariadb => {
                format!("SELECT Role, '' FROM mysql.roles_mapping WHERE User = {u} AND Host = {h}")
            }
            Dialect::Mysql80 | Dialect::Mysql84 => format!(
                "SELECT FROM_USER, FROM_HOST FROM mysql.role_edges \
                 WHERE TO_USER = {u} AND TO_HOST = {h}"
            ),
        };
        for row in self.rows(conn, &q).await? {
            let role: String = self.cell(&row, 0usize, &q)?;
            let role_host: String = self.cell(&row, 1usize, &q)?;
            out.insert(UndeclaredGrant::Role(match d {
                Dialect::Mariadb => quote(&role),
                Dialect::Mysql80 | Dialect::Mysql84 => account(&role, &role_host),
            }));
        }
        let q = format!(
            "SELECT Proxied_user, Proxied_host FROM mysql.proxies_priv \
             WHERE User = {u} AND Host = {h}"
        );
        for row in self.rows(conn, &q).await? {
            let proxied: String = self.cell(&row, 0usize, &q)?;
            let proxied_host: String = self.cell(&row, 1usize, &q)?;
            out.insert(UndeclaredGrant::Proxy {
                user: proxied,
                host: proxied_host,
            });
        }
        let q = format!(
            "SELECT Db, Routine_name, CAST(Routine_type AS CHAR), CAST(Proc_priv AS CHAR) \
             FROM mysql.procs_priv WHERE User = {u} AND Host = {h}"
        );
        for row in self.rows(conn, &q).await? {
            let database: String = self.cell(&row, 0usize, &q)?;
            let name: String = self.cell(&row, 1usize, &q)?;
            let kind: String = self.cell(&row, 2usize, &q)?;
            let privileges: String = self.cell(&row, 3usize, &q)?;
            let kind = match kind.as_str() {
                "PROCEDURE" => RoutineKind::Procedure,
                "FUNCTION" => RoutineKind::Function,
                // MariaDB's packages (Oracle mode) are not revoked here.
                _ => continue,
            };
            let privileges: BTreeSet<Privilege> = privileges
                .split(',')
                .filter_map(routine_privilege)
                .collect();
            if !privileges.is_empty() {
                out.insert(UndeclaredGrant::Routine {
                    kind,
                    database,
                    name,
                    privileges,
                });
            }
        }
        let g = quote(&grantee(user, host));
        let q = format!(
            "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, PRIVILEGE_TYPE \
             FROM information_schema.COLUMN_PRIVILEGES WHERE GRANTEE = {g}"
        );
        let mut columns: BTreeMap<(String, String, String), BTreeSet<Privilege>> = BTreeMap::new();
        for row in self.rows(conn, &q).await? {
            let database: String = self.cell(&row, 0usize, &q)?;
            let table: String = self.cell(&row, 1usize, &q)?;
            let column: String = self.cell(&row, 2usize, &q)?;
            let privilege: String = self.cell(&row, 3usize, &q)?;
            columns
                .entry((database, table, column))
                .or_default()
                .extend(Privilege::new(&privilege));
        }
        out.extend(
            columns
                .into_iter()
                .map(
                    |((database, table, column), privileges)| UndeclaredGrant::Column {
                        database,
                        table,
                        column,
                        privileges,
                    },
                ),
        );
        Ok(out)
    }

    /// Runs `changes` on account `spec` in order, stopping at the first failure.
    pub async fn apply_account(
        &self,
        spec: &AccountSpec,
        password: &str,
        changes: &[AccountChange],
    ) -> Result<(), PortError> {
        let d = self.server_info().await?.dialect;
        let mut conn = self.conn().await?;
        for change in changes {
            for statement in account_statements(d, spec, password, change) {
                self.exec(&mut conn, &statement).await?;
            }
        }
        Ok(())
    }

    /// Database `name` as the server holds it (`None`: no such database).
    pub async fn observe_database(
        &self,
        name: &str,
    ) -> Result<Option<ObservedDatabase>, PortError> {
        let mut conn = self.conn().await?;
        let q = format!(
            "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME \
             FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = {}",
            quote(name)
        );
        let Some(row) = self.first_row(&mut conn, &q).await? else {
            return Ok(None);
        };
        Ok(Some(ObservedDatabase {
            character_set: self.cell(&row, 0usize, &q)?,
            collation: self.cell(&row, 1usize, &q)?,
        }))
    }

    /// Runs `change` on database `spec`.
    pub async fn apply_database(
        &self,
        spec: &DatabaseSpec,
        change: &DatabaseChange,
    ) -> Result<(), PortError> {
        let mut conn = self.conn().await?;
        self.exec(&mut conn, &database_statement(spec, change))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn privs(names: &[&str]) -> BTreeSet<Privilege> {
        names.iter().map(|n| Privilege::new(n).unwrap()).collect()
    }

    #[test]
    fn changes_become_statements_with_quoting() {
        let spec = AccountSpec {
            name: "app".into(),
            host: "10.%".into(),
            require_tls: true,
            max_user_connections: 5,
            ..AccountSpec::default()
        };
        assert_eq!(
            account_statements(Dialect::Mysql84, &spec, "p'w", &AccountChange::Create),
            [
                "CREATE USER 'app'@'10.%' IDENTIFIED BY 'p''w' REQUIRE SSL WITH MAX_USER_CONNECTIONS 5"
            ]
        );
        // MariaDB keeps account statements in its binary log as sent: only the hash travels.
        assert_eq!(
            account_statements(Dialect::Mariadb, &spec, "p'w", &AccountChange::Create),
            [format!(
                "CREATE USER 'app'@'10.%' IDENTIFIED BY PASSWORD '{}' REQUIRE SSL WITH MAX_USER_CONNECTIONS 5",
                native_password_hash("p'w")
            )]
        );
        assert_eq!(
            account_statements(Dialect::Mariadb, &spec, "p'w", &AccountChange::SetPassword),
            [format!(
                "ALTER USER 'app'@'10.%' IDENTIFIED BY PASSWORD '{}'",
                native_password_hash("p'w")
            )]
        );
        let on = GrantTarget::Database("a\\_b".into());
        assert_eq!(
            account_statements(
                Dialect::Mariadb,
                &spec,
                "",
                &AccountChange::Grant {
                    on: on.clone(),
                    privileges: privs(&["SELECT", "GRANT OPTION", "INSERT"])
                }
            ),
            [
                "GRANT INSERT, SELECT ON `a\\_b`.* TO 'app'@'10.%'",
                "GRANT USAGE ON `a\\_b`.* TO 'app'@'10.%' WITH GRANT OPTION"
            ]
        );
        assert_eq!(
            account_statements(
                Dialect::Mariadb,
                &spec,
                "",
                &AccountChange::Revoke {
                    on,
                    privileges: privs(&["GRANT OPTION"])
                }
            ),
            ["REVOKE GRANT OPTION ON `a\\_b`.* FROM 'app'@'10.%'"]
        );
        let db = DatabaseSpec {
            name: "my`db".into(),
            character_set: Some("utf8mb4".into()),
            collation: Some("utf8mb4_bin".into()),
        };
        assert_eq!(
            database_statement(&db, &DatabaseChange::Create),
            "CREATE DATABASE IF NOT EXISTS `my``db` CHARACTER SET `utf8mb4` COLLATE `utf8mb4_bin`"
        );
        assert_eq!(
            database_statement(&db, &DatabaseChange::Drop),
            "DROP DATABASE IF EXISTS `my``db`"
        );
    }

    #[test]
    fn what_no_declaration_holds_is_revoked_the_servers_way() {
        let spec = AccountSpec {
            name: "app".into(),
            host: "%".into(),
            ..AccountSpec::default()
        };
        let revoke = |d, what: UndeclaredGrant| {
            account_statements(d, &spec, "", &AccountChange::RevokeUndeclared(what))
        };
        assert_eq!(
            revoke(Dialect::Mariadb, UndeclaredGrant::Role("'dba'".into())),
            [
                "REVOKE 'dba' FROM 'app'@'%'",
                "SET DEFAULT ROLE NONE FOR 'app'@'%'"
            ]
        );
        assert_eq!(
            revoke(Dialect::Mysql84, UndeclaredGrant::Role("'dba'@'%'".into())),
            ["REVOKE 'dba'@'%' FROM 'app'@'%'"]
        );
        let proxy = || UndeclaredGrant::Proxy {
            user: "o'x".into(),
            host: "%".into(),
        };
        assert_eq!(
            revoke(Dialect::Mariadb, proxy()),
            [
                "DELETE FROM mysql.proxies_priv WHERE User = 'app' AND Host = '%' AND \
                 Proxied_user = 'o''x' AND Proxied_host = '%'",
                "FLUSH PRIVILEGES"
            ]
        );
        assert_eq!(
            revoke(Dialect::Mysql80, proxy()),
            ["REVOKE PROXY ON 'o''x'@'%' FROM 'app'@'%'"]
        );
        assert_eq!(
            revoke(
                Dialect::Mariadb,
                UndeclaredGrant::Routine {
                    kind: RoutineKind::Function,
                    database: "a`b".into(),
                    name: "f".into(),
                    privileges: privs(&["EXECUTE", "GRANT OPTION"]),
                }
            ),
            ["REVOKE EXECUTE, GRANT OPTION ON FUNCTION `a``b`.`f` FROM 'app'@'%'"]
        );
        assert_eq!(
            revoke(
                Dialect::Mysql84,
                UndeclaredGrant::Column {
                    database: "db".into(),
                    table: "t".into(),
                    column: "c".into(),
                    privileges: privs(&["SELECT", "UPDATE"]),
                }
            ),
            ["REVOKE SELECT (`c`), UPDATE (`c`) ON `db`.`t` FROM 'app'@'%'"]
        );
        assert_eq!(
            routine_privilege("Grant").map(|p| p.to_string()).as_deref(),
            Some("GRANT OPTION")
        );
        assert_eq!(
            routine_privilege("Alter Routine")
                .map(|p| p.to_string())
                .as_deref(),
            Some("ALTER ROUTINE")
        );
    }

    #[test]
    fn privilege_columns_name_privileges() {
        let p = |c| privilege_of_column(c).map(|p| p.to_string());
        assert_eq!(p("Select_priv").as_deref(), Some("SELECT"));
        assert_eq!(
            p("Create_tmp_table_priv").as_deref(),
            Some("CREATE TEMPORARY TABLES")
        );
        assert_eq!(p("Lock_tables_priv").as_deref(), Some("LOCK TABLES"));
        assert_eq!(
            p("Delete versioning rows").as_deref(),
            Some("DELETE HISTORY")
        );
        assert_eq!(p("Show view").as_deref(), Some("SHOW VIEW"));
        assert_eq!(p("Grant_priv"), None);
    }
}
