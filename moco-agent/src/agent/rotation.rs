//! Slow query log rotation: on the `--log-rotation-schedule` cron schedule, and when
//! `--log-rotation-size` is set, as soon as the log is that large (checked every second).
//! A rotation renames `mysql.slow` to `mysql.slow.0` (replacing the previous one) and has the
//! server reopen its log (`FLUSH LOCAL SLOW LOGS`); the slow-log sidecar follows the new file.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use moco_adapters::mysql::MysqlInstance;
use moco_core::validate::cron::Schedule;
use mysql_async::prelude::Queryable;

use super::metrics::AgentMetrics;
use crate::error::AgentError;

/// How often the size is checked.
const SIZE_CHECK: Duration = Duration::from_secs(1);

/// The rotation's settings.
#[derive(Clone, Debug)]
pub struct Rotation {
    /// The slow query log.
    pub log: PathBuf,
    /// When to rotate.
    pub schedule: Schedule,
    /// Rotate once the log reaches this many bytes (0: only on schedule).
    pub max_size: u64,
}

/// Where the rotated log goes.
pub fn rotated_path(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".0");
    PathBuf::from(name)
}

/// Rotates once: rename, then have the server reopen the log.
pub async fn rotate(log: &Path, server: &MysqlInstance) -> Result<(), AgentError> {
    match std::fs::rename(log, rotated_path(log)) {
        Ok(()) => {}
        // Nothing logged yet: the flush creates the file.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(AgentError::io(log, "rename", e)),
    }
    let mut conn = server.conn().await?;
    conn.query_drop("FLUSH LOCAL SLOW LOGS")
        .await
        .map_err(|e| AgentError::Remote {
            target: server.target().to_owned(),
            message: format!("FLUSH LOCAL SLOW LOGS: {e}"),
        })
}

use super::clone::now;

/// Rotates forever (until the task is aborted), counting in `metrics`.
pub async fn run(rotation: Rotation, server: Arc<MysqlInstance>, metrics: Arc<AgentMetrics>) {
    let mut next = rotation.schedule.next_after(now());
    loop {
        let due_by_schedule = next.is_some_and(|t| t.0 <= now().0);
        let due_by_size = rotation.max_size > 0
            && std::fs::metadata(&rotation.log).is_ok_and(|m| m.len() >= rotation.max_size);
        if due_by_schedule || due_by_size {
            let started = Instant::now();
            match rotate(&rotation.log, &server).await {
                Ok(()) => {
                    metrics.log_rotation_count.inc();
                }
                Err(e) => {
                    metrics.log_rotation_failure_count.inc();
                    tracing::warn!(error = %e, log = %rotation.log.display(), "slow log rotation failed");
                }
            }
            metrics
                .log_rotation_duration
                .observe(started.elapsed().as_secs_f64());
            if due_by_schedule {
                next = rotation.schedule.next_after(now());
            }
        }
        let until_schedule = next.map_or(Duration::from_secs(3600), |t| {
            Duration::from_secs(u64::try_from(t.0 - now().0).unwrap_or(0))
        });
        let wait = if rotation.max_size > 0 {
            until_schedule.min(SIZE_CHECK)
        } else {
            until_schedule.max(Duration::from_millis(100))
        };
        tokio::time::sleep(wait).await;
    }
}
