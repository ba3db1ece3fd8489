//! Seeding a new local cluster from a bucket: a physical backup into its instance 0
//! ([`restore_into`]), then the archived binlogs up to a point ([`restore_to`]).

use moco_adapters::mysql::MysqlInstance;
use moco_adapters::mysqld::ServerBinary;
use moco_backup::Bucket;
use moco_backup::catalog::{PlannedRestore, plan_restore_under};
use moco_backup::mariadb::binlog::Point;
use moco_backup::mariadb::binlog::replay::{ReplayTarget, Replayed, replay};
use moco_backup::mariadb::physical;
use moco_core::moco_accounts::Account;

use super::error::{LocalBackupError, RestoreToError};
use super::take::cluster_prefix;
use crate::platform::secret::Secret;
use crate::platform::sql::admin_options;
use crate::platform::tls;
use crate::platform::{Layout, Manifest};

/// Puts the backup under `prefix` into instance 0 of the new cluster in `layout`, which
/// [`create_seeded`](crate::platform::create::create_seeded) left to it (written, never
/// initialised nor started): the copy is extracted and prepared in its datadir, started with
/// an init file that gives its accounts this cluster's passwords (the copy holds the source
/// cluster's) before any connection is accepted, and given the source's GTID history. The
/// manager then makes it the primary and clones the other, empty, instances from it.
pub async fn restore_into(
    layout: &Layout,
    manifest: &Manifest,
    binary: &ServerBinary,
    bucket: &Bucket,
    prefix: &str,
) -> Result<physical::Restored, LocalBackupError> {
    use moco_adapters::instance::clone::{RestoreTarget, seed};
    use moco_adapters::instance::rekey::rekey_init_file;
    use moco_adapters::mysqld::LocalMysqld;
    use moco_core::moco_accounts::MocoPasswords;
    use std::time::Duration;

    let dir = layout.root().display().to_string();
    let fail = |message: String| LocalBackupError::Cluster {
        dir: dir.clone(),
        message,
    };
    let tool = |name: &str| binary.tool(name).map_err(|e| fail(e.to_string()));
    let server = LocalMysqld::open(binary.clone(), &layout.instance_dir(0))
        .map_err(|e| fail(e.to_string()))?;
    let boot = Duration::from_secs(300);
    let target = RestoreTarget {
        backup_tool: tool("mariadb-backup").or_else(|_| tool("mariabackup"))?,
        mbstream: tool("mbstream")?,
        datadir: layout.datadir(0),
        log: layout.instance_dir(0).join("restore.log"),
    };
    let restored = physical::restore(bucket, prefix, &target).await?;
    // The copy starts with the source's binlog history; the seed then only sets its position.
    moco_adapters::instance::clone::write_binlog_state(
        &target.datadir,
        &restored.manifest.binlog_state_before,
        &restored.position,
    )
    .map_err(|e| fail(e.to_string()))?;

    let secret = Secret::load(layout).map_err(|e| fail(e.to_string()))?;
    let passwords =
        MocoPasswords::try_from_fn(|a: Account| secret.password(a.name()).map(str::to_owned))
            .map_err(|e| fail(e.to_string()))?;
    let init_file = layout.instance_dir(0).join("tmp").join("rekey.sql");
    crate::platform::files::write_atomic(&init_file, rekey_init_file(&passwords).as_bytes(), 0o600)
        .map_err(|e| fail(e.to_string()))?;
    let started = server
        .start_and_wait(&[format!("--init-file={}", init_file.display())], boot)
        .await;
    let _ = std::fs::remove_file(&init_file);
    started.map_err(|e| fail(e.to_string()))?;
    let admin_opts =
        admin_options(manifest, layout, 0, &secret).map_err(|e| fail(e.to_string()))?;
    // mariadbd logs a failed statement of its init file, skips the rest of it and starts all
    // the same: an account the copy lacks would go unnoticed until something logged in as it.
    for account in Account::ALL {
        let mut opts = admin_opts.clone();
        opts.user = account.name().to_owned();
        opts.password = passwords.get(account).to_owned();
        let instance = MysqlInstance::new(opts);
        let login = instance.conn().await.map(drop);
        let _ = instance.disconnect().await;
        login.map_err(|e| {
            fail(format!(
                "the restored copy does not let {} log in with this cluster's password ({e}); \
                 the error log {} names the statement that failed",
                account.name(),
                server.settings().log_error.as_ref().map_or_else(
                    || "of instance 0".to_owned(),
                    |log| log.display().to_string()
                )
            ))
        })?;
    }
    let admin = MysqlInstance::new(admin_opts);
    seed(
        &admin,
        &restored.manifest.binlog_state_before,
        &restored.position,
    )
    .await
    .map_err(|e| fail(e.to_string()))?;
    let _ = admin.disconnect().await;
    Ok(restored)
}

/// What a point-in-time restore did.
#[derive(Clone, Debug)]
pub struct RestoredTo {
    /// The base backup's prefix.
    pub base: String,
    /// Its restore.
    pub restored: physical::Restored,
    /// The binlogs replayed after it.
    pub replayed: Replayed,
}

/// Decides how to restore cluster `source`'s state at `point` from `bucket`: the newest
/// backup complete before the point, then the archived binlogs up to it. Nothing is touched,
/// so a point the archive does not reach fails before a new cluster is made.
pub async fn plan_restore(
    bucket: &Bucket,
    source: &str,
    point: Point,
) -> Result<PlannedRestore, RestoreToError> {
    Ok(plan_restore_under(bucket, cluster_prefix(source), source, point).await?)
}

/// Carries out `planned` into instance 0 of the new cluster in `layout`, left to it by
/// [`create_seeded`](crate::platform::create::create_seeded): the base backup
/// ([`restore_into`]), then the binlogs.
pub async fn restore_to(
    layout: &Layout,
    manifest: &Manifest,
    binary: &ServerBinary,
    bucket: &Bucket,
    planned: &PlannedRestore,
) -> Result<RestoredTo, RestoreToError> {
    let PlannedRestore {
        prefix,
        base,
        segments,
        plan,
    } = planned;
    let base = base.clone();
    let restored = restore_into(layout, manifest, binary, bucket, &base).await?;
    let dir = layout.root().display().to_string();
    let fail = |message: String| LocalBackupError::Cluster {
        dir: dir.clone(),
        message,
    };
    if plan.steps.is_empty() {
        return Ok(RestoredTo {
            base,
            restored,
            replayed: Replayed::default(),
        });
    }
    let tool = |names: [&str; 2]| {
        binary
            .tool(names[0])
            .or_else(|_| binary.tool(names[1]))
            .map_err(|e| fail(e.to_string()))
    };
    let secret = Secret::load(layout).map_err(|e| fail(e.to_string()))?;
    let credentials = secret.credentials(Account::Admin);
    let target = ReplayTarget {
        binlog_tool: tool(["mariadb-binlog", "mysqlbinlog"])?,
        client: tool(["mariadb", "mysql"])?,
        host: "127.0.0.1".to_owned(),
        port: manifest.instance_port(0),
        credentials: credentials.clone(),
        ssl_ca: tls::ca_file(layout, manifest),
        scratch: layout.instance_dir(0).join("replay-scratch"),
        log: layout.instance_dir(0).join("restore.log"),
    };
    let admin = MysqlInstance::new(
        admin_options(manifest, layout, 0, &secret).map_err(|e| fail(e.to_string()))?,
    );
    let replayed = replay(bucket, prefix, segments, plan, &target, &admin).await;
    let _ = admin.disconnect().await;
    let _ = std::fs::remove_dir_all(&target.scratch);
    Ok(RestoredTo {
        base,
        restored,
        replayed: replayed?,
    })
}
