//! Verifying a backup: restored into a scratch cluster, checked table by table, and compared
//! with its earlier verification.

use std::collections::BTreeMap;

use moco_adapters::mysql::MysqlInstance;
use moco_adapters::mysqld::ServerBinary;
use moco_backup::Bucket;
use moco_core::gtid::GtidSet;
use moco_core::time::Timestamp;

use super::error::LocalBackupError;
use super::seed::restore_into;
use crate::platform::secret::Secret;
use crate::platform::sql::admin_options;
use crate::platform::{Layout, Manifest};

/// The key of a backup's verification record, beside its manifest.
pub const VERIFY_KEY: &str = "verify.json";

/// What a verification found in a restored backup.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Verification {
    /// When (Unix second).
    pub verified_at: i64,
    /// The restored server's GTID position (it must be the manifest's).
    pub position: String,
    /// Per table (`schema.table`): rows and `CHECKSUM TABLE`.
    pub tables: BTreeMap<String, TableCheck>,
}

/// One table of a [`Verification`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TableCheck {
    /// `SELECT COUNT(*)`.
    pub rows: u64,
    /// `CHECKSUM TABLE … EXTENDED`.
    pub checksum: Option<u64>,
}

/// The differences between two verifications of one backup (empty when they agree).
pub fn differences(recorded: &Verification, now: &Verification) -> Vec<String> {
    let mut out = Vec::new();
    if recorded.position != now.position {
        out.push(format!(
            "GTID position {} (recorded {})",
            now.position, recorded.position
        ));
    }
    for (name, was) in &recorded.tables {
        match now.tables.get(name) {
            None => out.push(format!("{name}: missing")),
            Some(t) if t != was => out.push(format!(
                "{name}: {} rows, checksum {:?} (recorded {} rows, {:?})",
                t.rows, t.checksum, was.rows, was.checksum
            )),
            Some(_) => {}
        }
    }
    for name in now.tables.keys() {
        if !recorded.tables.contains_key(name) {
            out.push(format!("{name}: not in the recorded verification"));
        }
    }
    out
}

/// Verifies the backup under `prefix` by restoring it into instance 0 of the scratch cluster
/// in `layout` (as [`restore_into`]): its hash, the prepare, a server that starts, every
/// table passing `CHECK TABLE`, the GTID position the manifest recorded; then rows and
/// checksums per table, compared with the backup's earlier verification when there is one
/// (else recorded as `verify.json` beside the manifest). Returns the verification and
/// whether it was compared with a recorded one.
pub async fn verify(
    layout: &Layout,
    manifest: &Manifest,
    binary: &ServerBinary,
    bucket: &Bucket,
    prefix: &str,
    now: Timestamp,
) -> Result<(Verification, bool), LocalBackupError> {
    use mysql_async::prelude::Queryable as _;
    let dir = layout.root().display().to_string();
    let fail = |message: String| LocalBackupError::Cluster {
        dir: dir.clone(),
        message,
    };
    let restored = restore_into(layout, manifest, binary, bucket, prefix).await?;
    let secret = Secret::load(layout).map_err(|e| fail(e.to_string()))?;
    let admin = MysqlInstance::new(
        admin_options(manifest, layout, 0, &secret).map_err(|e| fail(e.to_string()))?,
    );
    let mut c = admin.conn().await.map_err(|e| fail(e.to_string()))?;
    let sql_error = |what: &str, e: mysql_async::Error| fail(format!("{what}: {e}"));
    let position: Option<String> = c
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .map_err(|e| sql_error("SELECT @@gtid_binlog_pos", e))?;
    let position = position.unwrap_or_default();
    if let Some(recorded) = &restored.manifest.position
        && GtidSet::from_mariadb(&recorded.mariadb_position()).ok()
            != GtidSet::from_mariadb(&position).ok()
    {
        return Err(fail(format!(
            "the restored server is at GTID position {position:?}, the backup recorded {}",
            recorded.mariadb_position()
        )));
    }
    let tables: Vec<(String, String)> = c
        .query(
            "SELECT table_schema, table_name FROM information_schema.tables \
             WHERE table_type = 'BASE TABLE' AND table_schema NOT IN \
             ('mysql', 'information_schema', 'performance_schema', 'sys') \
             ORDER BY table_schema, table_name",
        )
        .await
        .map_err(|e| sql_error("listing tables", e))?;
    let mut checked = BTreeMap::new();
    for (schema, table) in tables {
        let name = format!("{}.{}", identifier(&schema), identifier(&table));
        let results: Vec<(String, String, String, String)> = c
            .query(format!("CHECK TABLE {name} EXTENDED"))
            .await
            .map_err(|e| sql_error(&format!("CHECK TABLE {name}"), e))?;
        if let Some(bad) = results
            .iter()
            .find(|r| (r.2 == "status" && r.3 != "OK") || r.2 == "error")
        {
            return Err(fail(format!("CHECK TABLE {name}: {} {}", bad.2, bad.3)));
        }
        let rows: Option<u64> = c
            .query_first(format!("SELECT COUNT(*) FROM {name}"))
            .await
            .map_err(|e| sql_error(&format!("counting {name}"), e))?;
        let sum: Option<(String, Option<u64>)> = c
            .query_first(format!("CHECKSUM TABLE {name} EXTENDED"))
            .await
            .map_err(|e| sql_error(&format!("CHECKSUM TABLE {name}"), e))?;
        checked.insert(
            format!("{schema}.{table}"),
            TableCheck {
                rows: rows.unwrap_or(0),
                checksum: sum.and_then(|s| s.1),
            },
        );
    }
    let _ = c.disconnect().await;
    let _ = admin.disconnect().await;
    let verification = Verification {
        verified_at: now.seconds(),
        position,
        tables: checked,
    };
    let key = format!("{prefix}/{VERIFY_KEY}");
    let recorded: Option<Verification> = match bucket.read_json_bytes(&key).await {
        Ok(text) => Some(serde_json::from_slice(&text).map_err(|e| fail(format!("{key}: {e}")))?),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(fail(e.to_string())),
    };
    match recorded {
        Some(recorded) => {
            let diff = differences(&recorded, &verification);
            if !diff.is_empty() {
                return Err(fail(format!(
                    "the restored backup differs from its verification of {}: {}",
                    moco_backup::mariadb::binlog::timeline::show(recorded.verified_at),
                    diff.join("; ")
                )));
            }
            Ok((verification, true))
        }
        None => {
            let text = serde_json::to_vec_pretty(&verification).map_err(|e| fail(e.to_string()))?;
            bucket
                .upload(&key, &text[..])
                .await
                .map_err(|e| LocalBackupError::Backup(e.into()))?;
            Ok((verification, false))
        }
    }
}

/// A quoted SQL identifier.
fn identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifications_differ_by_table() {
        let t = |rows, checksum| TableCheck {
            rows,
            checksum: Some(checksum),
        };
        let a = Verification {
            verified_at: 1,
            position: "0-1-5".into(),
            tables: [
                ("app.t".to_owned(), t(10, 7)),
                ("app.u".to_owned(), t(1, 2)),
            ]
            .into(),
        };
        assert!(differences(&a, &a).is_empty());
        let mut b = a.clone();
        b.tables.insert("app.t".into(), t(10, 8));
        b.tables.remove("app.u");
        b.tables.insert("app.v".into(), t(0, 0));
        b.position = "0-1-6".into();
        let d = differences(&a, &b);
        assert_eq!(d.len(), 4, "{d:?}");
        assert!(
            d[1].starts_with("app.t: 10 rows, checksum Some(8)"),
            "{d:?}"
        );
        assert_eq!(identifier("we`ird"), "`we``ird`");
    }
}
