//! Copying one instance's data onto another (the moco-agent's Clone RPC, locally), with the
//! procedures of [`moco_adapters::instance::clone`]: both halves run here and the backup stream goes
//! through a pipe. Tool output goes to `instances/<i>/clone.log`.

use std::sync::Arc;
use std::time::Duration;

use moco_cluster::ports::MysqlPort;
use moco_core::facts::Flavor;
use moco_core::gtid::GtidSet;
use moco_core::moco_accounts::Account;

use super::error::LocalError;
use super::layout::Layout;
use super::manifest::Manifest;
use super::secret::Secret;
use super::sql;
use moco_adapters::failure::file_tail;
use moco_adapters::instance::InstanceError;
use moco_adapters::instance::clone::{self, BackupSource, RestoreTarget};
use moco_adapters::mysql::MysqlInstance;
use moco_adapters::mysqld::{LocalMysqld, ServerBinary};

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
    let recipient = MysqlInstance::new(sql::admin_options(
        job.manifest,
        job.layout,
        job.target_index,
        job.secret,
    )?);
    let copied = clone::clone_instance_from(
        &recipient,
        "127.0.0.1",
        job.manifest.instance_port(job.donor_index),
        &job.secret.credentials(Account::CloneDonor),
        super::tls::ca_file(job.layout, job.manifest).as_deref(),
    )
    .await;
    let _ = recipient.disconnect().await;
    copied.map_err(|e| LocalError::other(&context, e.to_string()))?;
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

    // 2. Stop the target; the extraction empties its datadir.
    job.target
        .stop(job.stop_grace)
        .await
        .map_err(|e| fail(format!("stopping the target: {e}")))?;
    let scratch = job
        .layout
        .instance_dir(job.target_index)
        .join("clone-scratch");
    clone::wipe_dir(&scratch).map_err(|e| fail(e.to_string()))?;
    let log_path = job.layout.clone_log(job.target_index);
    std::fs::File::create(&log_path).map_err(|e| LocalError::io(&log_path, "create", e))?;

    // 3. Stream the backup into the datadir through a pipe.
    let source = BackupSource {
        tool: backup_tool.clone(),
        defaults_file: job.donor.defaults_file().to_path_buf(),
        datadir: job.layout.datadir(job.donor_index),
        host: "127.0.0.1".to_owned(),
        port: job.manifest.instance_port(job.donor_index),
        credentials: job.secret.credentials(Account::CloneDonor),
        ssl_ca: super::tls::ca_file(job.layout, job.manifest),
        scratch_dir: scratch.clone(),
        log: log_path.clone(),
        nice: 0,
    };
    let target = RestoreTarget {
        backup_tool,
        mbstream,
        datadir: job.layout.datadir(job.target_index),
        log: log_path.clone(),
    };
    let started = std::time::Instant::now();
    let copy = async {
        let mut backup = clone::start_backup(&source)?;
        let stream = backup.take_stream().ok_or_else(|| {
            InstanceError::Invalid("mariadb-backup has no standard output".to_owned())
        })?;
        let (extracted, finished) = tokio::join!(clone::extract(stream, &target), backup.finish());
        finished?;
        extracted
    };
    // Each copy step is bounded; a timeout shows the end of the tools' log.
    let bounded = |step: &'static str| {
        let what = format!("{context}: {step}");
        let log_path = log_path.clone();
        move |_| LocalError::Timeout {
            what,
            seconds: COPY_TIMEOUT.as_secs(),
            detail: Some(file_tail(&log_path)),
        }
    };
    let bytes = tokio::time::timeout(COPY_TIMEOUT, copy)
        .await
        .map_err(bounded("backup stream"))?
        .map_err(|e| fail(e.to_string()))?;
    tracing::info!(
        target = job.target_index,
        donor = job.donor_index,
        bytes,
        ms = started.elapsed().as_millis() as u64,
        "backup streamed"
    );

    // 4. Prepare; the copy's position.
    let position = tokio::time::timeout(COPY_TIMEOUT, clone::prepare(&target))
        .await
        .map_err(bounded("prepare"))?
        .map_err(|e| fail(e.to_string()))?;
    let _ = std::fs::remove_dir_all(&scratch);

    // 5. Start (with the donor's binlog history, from the state file) and seed.
    clone::write_binlog_state(&target.datadir, &donor_state, &position)
        .map_err(|e| fail(e.to_string()))?;
    job.target
        .start_and_wait(&[], job.boot_timeout)
        .await
        .map_err(|e| fail(format!("starting the restored server: {e}")))?;
    let recipient = MysqlInstance::new(sql::admin_options(
        job.manifest,
        job.layout,
        job.target_index,
        job.secret,
    )?);
    let seeded = clone::seed(&recipient, &donor_state, &position).await;
    let _ = recipient.disconnect().await;
    seeded.map_err(|e| fail(format!("seed GTID state after clone: {e}")))
}
