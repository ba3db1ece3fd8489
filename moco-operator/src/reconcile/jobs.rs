//! Step 7's Jobs: the backup CronJob with its RBAC and the binlog archiver, while a backup
//! policy is set; the restore Job with its RBAC, while a restore is pending.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::DeleteParams;
use moco_api::cluster::ClusterId;
use moco_api::mysqlcluster::MySQLCluster;
use moco_kube::api::retry;

use super::apply::Writer;
use super::read::Present;
use super::{ReconcileError, Step};
use crate::render::JobObjects;

/// The backup CronJob after its Role and RoleBinding, and the archiver (which runs with the
/// backup's ServiceAccount and RoleBinding); without a policy, those the stores do not rule
/// out are deleted (a cluster that never had a backup sends no DELETE).
pub(super) async fn backup(
    w: &Writer<'_>,
    id: &ClusterId,
    backup: Option<&JobObjects<CronJob>>,
    archive: Option<&Deployment>,
    present: &Present,
) -> Result<(), ReconcileError> {
    let name = id.backup();
    let dp = DeleteParams::background();
    match backup {
        Some(b) => {
            w.apply(Step::Backup, &b.role).await?;
            w.apply(Step::Backup, &b.role_binding).await?;
            w.apply(Step::Backup, &b.workload).await?;
        }
        None => {
            w.delete::<CronJob>(Step::Backup, &name, present.backup_cronjob, &dp)
                .await?;
            w.delete::<Role>(Step::Backup, &name, present.backup_role, &dp)
                .await?;
            w.delete::<RoleBinding>(Step::Backup, &name, present.backup_role_binding, &dp)
                .await?;
        }
    }
    w.ensure(Step::Backup, &id.archive(), archive, present.archive, &dp)
        .await
}

/// The restore Job exists while the restore is pending; once `restoredTime` is recorded a
/// successful Job is deleted, and a failed one is left for inspection.
///
/// Its Role and RoleBinding are applied before the Job, so its Pod finds them, and then owned
/// by the Job alone ([`crate::render::jobs::owned_by_job`]): they go with the Job, whoever
/// deletes it, and are deleted once the restore is recorded even while the Job stays.
pub(super) async fn restore(
    w: &Writer<'_>,
    cluster: &MySQLCluster,
    id: &ClusterId,
    restore: Option<&JobObjects<Job>>,
    present: &Present,
) -> Result<(), ReconcileError> {
    let jobs = w.api::<Job>();
    let err = || ReconcileError::api(Step::Restore);
    let name = id.restore();
    if let Some(r) = restore {
        let job = match retry(|| jobs.get_opt(&name)).await.map_err(err())? {
            Some(job) => job,
            None => {
                w.apply(Step::Restore, &r.role).await?;
                w.apply(Step::Restore, &r.role_binding).await?;
                // A Job's template is immutable: create it once, never update it.
                w.create_once(Step::Restore, &r.workload).await?
            }
        };
        let (role, binding) =
            crate::render::jobs::owned_by_job(r, &job).ok_or_else(|| ReconcileError::Input {
                step: Step::Restore,
                message: format!(
                    "Job {}/{name} has no uid: cannot own its RBAC",
                    id.namespace
                ),
            })?;
        w.apply(Step::Restore, &role).await?;
        w.apply(Step::Restore, &binding).await?;
        return Ok(());
    }
    let restored = cluster
        .status
        .as_ref()
        .is_some_and(|s| s.restored_time.is_some());
    if cluster.spec.restore.is_some() && restored {
        let job = if present.restore_job {
            retry(|| jobs.get_opt(&name)).await.map_err(err())?
        } else {
            None
        };
        let succeeded = job
            .as_ref()
            .and_then(|j| j.status.as_ref())
            .and_then(|s| s.succeeded)
            .unwrap_or(0)
            > 0;
        let dp = DeleteParams::background();
        w.delete::<Job>(Step::Restore, &name, succeeded, &dp)
            .await?;
        w.delete::<RoleBinding>(Step::Restore, &name, present.restore_role_binding, &dp)
            .await?;
        w.delete::<Role>(Step::Restore, &name, present.restore_role, &dp)
            .await?;
    }
    Ok(())
}
