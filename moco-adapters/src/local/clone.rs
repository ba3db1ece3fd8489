//! Copying one instance's data onto another (the moco-agent's Clone RPC, locally).
//!
//! MariaDB has no `CLONE INSTANCE`; the copy is a physical backup streamed from the donor:
//!
//! 1. capture the donor's `@@gtid_binlog_state` (a restored datadir carries no binlog);
//! 2. stop the target and wipe its datadir;
//! 3. `mariadb-backup --backup --stream=xbstream --slave-info --safe-slave-backup` on the
//!    donor, piped into `mbstream -x` in the target datadir;
//! 4. `mariadb-backup --prepare`;
//! 5. start the target and seed it: `RESET MASTER`, `gtid_binlog_state` = captured state plus
//!    the backup's position, `gtid_slave_pos` = the backup's position
//!    (`xtrabackup_slave_info` from a replica donor, `xtrabackup_binlog_info` from a
//!    primary).
//!
//! MySQL clones with `CLONE INSTANCE FROM` on the target.
//! Tool output goes to `instances/<i>/clone.log`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use moco_core::facts::Flavor;
use moco_core::gtid::GtidSet;

use super::error::LocalError;
use super::layout::Layout;
use super::manifest::Manifest;
use super::secret::{Secret, user_name};
use super::sql;
use crate::mysql;
use crate::mysqld::{LocalMysqld, ServerBinary};
use crate::ports::{MocoUser, MysqlPort};

/// Limit of the backup stream and of the prepare step.
const COPY_TIMEOUT: Duration = Duration::from_secs(3600);

/// Everything one clone needs.
#[derive(Debug)]
pub struct CloneJob<'a> {
    /// The cluster directory.
    pub layout: &'a Layout,
    /// The manifest.
    pub manifest: &'a Manifest,
    /// Passwords.
    pub secret: &'a Secret,
    /// The server binary (its directory holds the backup tools).
    pub binary: &'a ServerBinary,
    /// Ordinal of the instance that receives the copy.
    pub target_index: u32,
    /// Its launcher handle.
    pub target: &'a Arc<LocalMysqld>,
    /// Ordinal of the donor.
    pub donor_index: u32,
    /// Its launcher handle.
    pub donor: &'a Arc<LocalMysqld>,
    /// Its SQL port (to read its GTID state).
    pub donor_port: Option<Arc<dyn MysqlPort>>,
    /// SIGTERM grace when stopping the target.
    pub stop_grace: Duration,
    /// How long the restored server may take to answer.
    pub boot_timeout: Duration,
}

/// Runs the clone for the cluster's flavour.
pub async fn run(job: CloneJob<'_>) -> Result<(), LocalError> {
    if job.target_index == job.donor_index {
        return Err(LocalError::other(
            format!("instance {}: clone", job.target_index),
            "an instance cannot be cloned from itself",
        ));
    }
    match job.manifest.flavor {
        Flavor::Mariadb => mariadb(job).await,
        Flavor::Mysql => mysql(job).await,
    }
}

/// MySQL: `CLONE INSTANCE` on the target, which then shuts down; start it again.
async fn mysql(job: CloneJob<'_>) -> Result<(), LocalError> {
    let context = what(&job);
    if job.donor.running_pid().is_none() {
        return Err(LocalError::other(context, "the donor is not running"));
    }
    sql::mysql_clone_instance(job.manifest, job.target_index, job.donor_index, job.secret).await?;
    let deadline = tokio::time::Instant::now() + job.boot_timeout;
    while job.target.running_pid().is_some() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    job.target
        .stop(job.stop_grace)
        .await
        .map_err(|e| LocalError::other(&context, format!("stopping after the copy: {e}")))?;
    job.target
        .start_and_wait(&[], job.boot_timeout)
        .await
        .map_err(|e| LocalError::other(&context, format!("starting the copy: {e}")))?;
    Ok(())
}

fn what(job: &CloneJob<'_>) -> String {
    format!(
        "instance {}: clone from instance {}",
        job.target_index, job.donor_index
    )
}

async fn mariadb(job: CloneJob<'_>) -> Result<(), LocalError> {
    let context = what(&job);
    let fail = |message: String| LocalError::other(context.clone(), message);
    let backup_tool = job
        .binary
        .tool("mariadb-backup")
        .or_else(|_| job.binary.tool("mariabackup"))
        .map_err(|e| fail(e.to_string()))?;
    let mbstream = job
        .binary
        .tool("mbstream")
        .map_err(|e| fail(e.to_string()))?;
    if job.donor.running_pid().is_none() {
        return Err(fail("the donor is not running".to_owned()));
    }

    // 1. The donor's binlog state before the copy.
    let donor_state = match &job.donor_port {
        Some(port) => port
            .executed_gtid()
            .await
            .map_err(|e| fail(format!("reading the donor's GTID state: {e}")))?,
        None => GtidSet::new(),
    };

    // 2. Stop the target and wipe its datadir.
    job.target
        .stop(job.stop_grace)
        .await
        .map_err(|e| fail(format!("stopping the target: {e}")))?;
    let datadir = job.layout.datadir(job.target_index);
    wipe_dir(&datadir)?;
    let scratch = job
        .layout
        .instance_dir(job.target_index)
        .join("clone-scratch");
    wipe_dir(&scratch)?;
    let log_path = job.layout.clone_log(job.target_index);
    let log =
        std::fs::File::create(&log_path).map_err(|e| LocalError::io(&log_path, "create", e))?;

    // 3. Stream the backup into the datadir.
    let donor_user = user_name(MocoUser::CloneDonor);
    let password = job.secret.password(donor_user)?;
    let mut backup_cmd = tokio::process::Command::new(&backup_tool);
    backup_cmd
        .arg(format!(
            "--defaults-file={}",
            job.donor.defaults_file().display()
        ))
        .arg("--backup")
        .arg("--stream=xbstream")
        .arg("--slave-info")
        .arg("--safe-slave-backup")
        .arg("--host=127.0.0.1")
        .arg(format!(
            "--port={}",
            job.manifest.instance_port(job.donor_index)
        ))
        .arg(format!("--user={donor_user}"))
        .arg(format!("--password={password}"))
        .arg(format!(
            "--datadir={}",
            job.layout.datadir(job.donor_index).display()
        ))
        .arg(format!("--target-dir={}", scratch.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(clone_handle(&log, &log_path)?)
        .kill_on_drop(true);
    let started = std::time::Instant::now();
    let mut backup = backup_cmd
        .spawn()
        .map_err(|e| LocalError::io(&backup_tool, "run", e))?;
    let stream: Stdio = backup
        .stdout
        .take()
        .ok_or_else(|| fail("mariadb-backup has no stdout".to_owned()))?
        .try_into()
        .map_err(|e| LocalError::io(&backup_tool, "pipe output of", e))?;
    let mut extract = tokio::process::Command::new(&mbstream)
        .arg("-x")
        .arg("-C")
        .arg(&datadir)
        .stdin(stream)
        .stdout(Stdio::null())
        .stderr(clone_handle(&log, &log_path)?)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| LocalError::io(&mbstream, "run", e))?;
    let waited = tokio::time::timeout(COPY_TIMEOUT, async {
        tokio::join!(backup.wait(), extract.wait())
    })
    .await;
    let (backup_status, extract_status) = waited.map_err(|_| LocalError::Timeout {
        what: format!("{context}: backup stream"),
        seconds: COPY_TIMEOUT.as_secs(),
        detail: Some(log_tail(&log_path)),
    })?;
    let backup_status = backup_status.map_err(|e| LocalError::io(&backup_tool, "wait for", e))?;
    let extract_status = extract_status.map_err(|e| LocalError::io(&mbstream, "wait for", e))?;
    if !backup_status.success() || !extract_status.success() {
        return Err(LocalError::Command {
            what: context.clone(),
            command: format!("{} | {}", backup_tool.display(), mbstream.display()),
            message: format!(
                "backup {backup_status}, extract {extract_status}; {}:\n{}",
                log_path.display(),
                log_tail(&log_path)
            ),
        });
    }
    tracing::info!(
        target = job.target_index,
        donor = job.donor_index,
        ms = started.elapsed().as_millis() as u64,
        "backup streamed"
    );

    // 4. Prepare.
    let prepared = tokio::time::timeout(
        COPY_TIMEOUT,
        tokio::process::Command::new(&backup_tool)
            .arg("--prepare")
            .arg(format!("--target-dir={}", datadir.display()))
            .stdin(Stdio::null())
            .stdout(clone_handle(&log, &log_path)?)
            .stderr(clone_handle(&log, &log_path)?)
            .kill_on_drop(true)
            .status(),
    )
    .await
    .map_err(|_| LocalError::Timeout {
        what: format!("{context}: prepare"),
        seconds: COPY_TIMEOUT.as_secs(),
        detail: Some(log_tail(&log_path)),
    })?
    .map_err(|e| LocalError::io(&backup_tool, "run --prepare", e))?;
    if !prepared.success() {
        return Err(LocalError::Command {
            what: context.clone(),
            command: format!("{} --prepare", backup_tool.display()),
            message: format!(
                "{prepared}; {}:\n{}",
                log_path.display(),
                log_tail(&log_path)
            ),
        });
    }
    let _ = std::fs::remove_dir_all(&scratch);

    // 5. The backup's position and the binlog state that goes with it.
    let position = backup_position(&datadir)?;
    let state = mysql::clone_binlog_state(&donor_state, &position);

    // 6. Start and seed.
    job.target
        .start_and_wait(&[], job.boot_timeout)
        .await
        .map_err(|e| fail(format!("starting the restored server: {e}")))?;
    sql::seed_mariadb_clone(
        job.manifest,
        job.target_index,
        job.secret,
        &state,
        &position,
    )
    .await?;
    Ok(())
}

/// The GTID position the backup corresponds to, read with the mysql module's parsers:
/// `xtrabackup_slave_info`'s `gtid_slave_pos` (replica donor), else the third field of
/// `xtrabackup_binlog_info` (primary donor); empty when neither names one.
pub fn backup_position(datadir: &Path) -> Result<GtidSet, LocalError> {
    let slave_info = datadir.join("xtrabackup_slave_info");
    if let Ok(text) = std::fs::read_to_string(&slave_info)
        && let Ok(pos) = mysql::parse_xtrabackup_slave_info(&text)
        && !pos.is_empty()
    {
        return Ok(pos);
    }
    let binlog_info = datadir.join("xtrabackup_binlog_info");
    match std::fs::read_to_string(&binlog_info) {
        Ok(text) => mysql::parse_xtrabackup_binlog_info(&text)
            .map_err(|e| LocalError::other(binlog_info.display().to_string(), e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(GtidSet::new()),
        Err(e) => Err(LocalError::io(binlog_info, "read", e)),
    }
}

fn wipe_dir(dir: &PathBuf) -> Result<(), LocalError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(LocalError::io(dir, "remove", e)),
    }
    std::fs::create_dir_all(dir).map_err(|e| LocalError::io(dir, "create", e))
}

fn clone_handle(file: &std::fs::File, path: &Path) -> Result<Stdio, LocalError> {
    file.try_clone()
        .map(Stdio::from)
        .map_err(|e| LocalError::io(path, "duplicate handle of", e))
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_from_backup_files() {
        let dir = tempfile::tempdir().unwrap();
        assert!(backup_position(dir.path()).unwrap().is_empty());
        std::fs::write(
            dir.path().join("xtrabackup_binlog_info"),
            "binlog.000001\t5\t0-1-7\n",
        )
        .unwrap();
        assert_eq!(
            backup_position(dir.path()).unwrap().to_string(),
            GtidSet::from_mariadb("0-1-7").unwrap().to_string()
        );
        std::fs::write(
            dir.path().join("xtrabackup_slave_info"),
            "SET GLOBAL gtid_slave_pos = '0-1-9';\nCHANGE MASTER TO master_use_gtid = slave_pos;\n",
        )
        .unwrap();
        assert_eq!(
            backup_position(dir.path()).unwrap(),
            GtidSet::from_mariadb("0-1-9").unwrap()
        );
    }
}
