//! The Kubernetes side of a rotation of MOCO's passwords ([`crate::rotation`] holds the
//! controller Secret's format): the manager's port calls, and how its readers are moved.
//!
//! Publishing writes the new passwords to the controller's Secret; the reconciler (which
//! watches it) copies them to `moco-<name>` and `moco-my-cnf-<name>`. The readers are then
//! moved in that order: the two Secrets first (until they hold the new passwords nothing else
//! can move, since a container resolves its environment when it starts); each Pod's agent is
//! given the new passwords over its mTLS API and uses them at once (no restart: a restarting
//! container would take the Pod out of its Services); the binlog archiver's Pods created
//! before the Secrets moved are deleted (their Deployment makes new ones); backup and restore
//! Jobs created before are waited for (the manager reports what it waits for as an event).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use moco_api::labels::{ARCHIVE_COMPONENT, LABEL_COMPONENT};
use moco_api::mysqlcluster::MySQLCluster;
use moco_cluster::ports::{PortError, RotationRecord};
use moco_core::moco_accounts::{Account, MocoPasswords};

use super::{KubePlatform, failed, unreachable};
use crate::api::{label_selector, retry};
use crate::rotation;

impl KubePlatform {
    fn controller_secret_target(&self) -> String {
        format!(
            "Secret {}/{}",
            self.system_namespace.as_deref().unwrap_or("?"),
            self.id.controller_secret()
        )
    }

    /// The controller's password Secret; `None` without a controller namespace (then no
    /// rotation is ever in progress) or before the Secret exists.
    async fn controller_secret(&self) -> Result<Option<Secret>, PortError> {
        let Some(system) = &self.system_namespace else {
            return Ok(None);
        };
        let api: Api<Secret> = Api::namespaced(self.client.clone(), system);
        let name = self.id.controller_secret();
        retry(|| api.get_opt(&name))
            .await
            .map_err(|e| unreachable(self.controller_secret_target(), &e))
    }

    async fn required_controller_secret(&self) -> Result<Secret, PortError> {
        self.controller_secret()
            .await?
            .ok_or_else(|| failed(self.controller_secret_target(), "does not exist"))
    }

    /// A merge patch of the controller's Secret (conditional: it carries the
    /// `resourceVersion` it was made from).
    async fn patch_controller_secret(&self, patch: serde_json::Value) -> Result<(), PortError> {
        let system = self.system_namespace.clone().unwrap_or_default();
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &system);
        let name = self.id.controller_secret();
        api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(|_| ())
            .map_err(|e| unreachable(self.controller_secret_target(), &e))
    }

    pub(super) async fn read_rotation(&self) -> Result<Option<RotationRecord>, PortError> {
        let Some(secret) = self.controller_secret().await? else {
            return Ok(None);
        };
        rotation::read(&secret).map_err(|e| failed(self.controller_secret_target(), e))
    }

    pub(super) async fn publish(&self, record: &RotationRecord) -> Result<(), PortError> {
        let secret = self.required_controller_secret().await?;
        self.patch_controller_secret(rotation::publish_patch(&secret, record))
            .await
    }

    pub(super) async fn channel_moved(&self, index: u32) -> Result<(), PortError> {
        let secret = self.required_controller_secret().await?;
        let moved = rotation::read(&secret)
            .map_err(|e| failed(self.controller_secret_target(), e))?
            .map(|r| r.channels_moved)
            .unwrap_or_default();
        self.patch_controller_secret(rotation::channel_patch(&secret, &moved, index))
            .await
    }

    /// Forgets the old passwords, then withdraws the request the rotation served from the
    /// MySQLCluster (what `kubectl moco credential rotate` waits for).
    pub(super) async fn finish(&self) -> Result<(), PortError> {
        let secret = self.required_controller_secret().await?;
        self.patch_controller_secret(rotation::finish_patch(&secret))
            .await?;
        if let Some(request) = rotation::served_request(&secret) {
            let api: Api<MySQLCluster> = Api::namespaced(self.client.clone(), &self.id.namespace);
            super::withdraw_rotation_request(&api, &self.id.name, &request)
                .await
                .map_err(|e| unreachable(self.target(), &e))?;
        }
        Ok(())
    }

    /// See [`moco_cluster::ports::Platform::move_readers`] and the module documentation.
    pub(super) async fn move_all(&self, record: &RotationRecord) -> Result<Vec<String>, PortError> {
        let new = new_passwords(record)
            .map_err(|key| failed(self.controller_secret_target(), format!("no new {key}")))?;
        let old: Vec<String> = record.pairs.iter().map(|p| p.old.clone()).collect();
        let mut waiting = self.secrets_on_old(&new, &old).await?;
        if !waiting.is_empty() {
            return Ok(waiting);
        }
        let secret = self.required_controller_secret().await?;
        let moved_at = match rotation::secrets_moved_at(&secret) {
            Some(at) => at,
            None => {
                let now = now_rfc3339();
                self.patch_controller_secret(rotation::secrets_moved_patch(&secret, &now))
                    .await?;
                now
            }
        };
        let cloner = self.cloner.clone();
        for (index, pod) in self.pods(true).await? {
            let name = self.pod_name(index);
            let moved = match &cloner {
                Some(c) => c.move_agent(&self.id, index, &new).await,
                None => Err(failed(&name, "this controller cannot reach the agents")),
            };
            match moved {
                Ok(true) => {}
                Ok(false) => waiting.push(format!("the agent of Pod {name}")),
                Err(e) => waiting.push(format!("the agent of Pod {name} ({e})")),
            }
            if let Some(why) = exporter_on_old(&pod, &moved_at) {
                waiting.push(format!("the mysqld_exporter of Pod {name} ({why})"));
            }
        }
        waiting.extend(self.archivers_on_old(&moved_at).await?);
        waiting.extend(self.jobs_on_old(&moved_at).await?);
        Ok(waiting)
    }

    /// `moco-<name>` and `moco-my-cnf-<name>`, unless they hold the new passwords.
    async fn secrets_on_old(
        &self,
        new: &MocoPasswords,
        old: &[String],
    ) -> Result<Vec<String>, PortError> {
        let mut out = Vec::new();
        match self.passwords().await {
            Ok(p) if p == *new => {}
            _ => out.push(format!("the Secret {}", self.id.prefixed())),
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.id.namespace);
        let name = self.id.mycnf_secret();
        let mycnf = retry(|| api.get_opt(&name))
            .await
            .map_err(|e| unreachable(format!("Secret {}/{name}", self.id.namespace), &e))?;
        let stale = mycnf.and_then(|s| s.data).is_none_or(|data| {
            data.values().any(|v| {
                let text = String::from_utf8_lossy(&v.0);
                old.iter().any(|o| text.contains(o.as_str()))
            })
        });
        if stale {
            out.push(format!("the Secret {name}"));
        }
        Ok(out)
    }

    /// The archiver's Pods created before the Secrets moved: deleted, and listed until gone.
    async fn archivers_on_old(&self, moved_at: &str) -> Result<Vec<String>, PortError> {
        let mut labels = self.id.backup_labels();
        labels.insert(LABEL_COMPONENT.into(), ARCHIVE_COMPONENT.into());
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.id.namespace);
        let params = ListParams::default().labels(&label_selector(&labels));
        let pods = retry(|| api.list(&params))
            .await
            .map_err(|e| unreachable(self.target(), &e))?;
        let mut out = Vec::new();
        for pod in pods {
            if !created_before(pod.metadata.creation_timestamp.as_ref(), moved_at) {
                continue;
            }
            let name = pod.metadata.name.clone().unwrap_or_default();
            if pod.metadata.deletion_timestamp.is_none() {
                tracing::info!(pod = %name, "restarting the binlog archiver with the new passwords");
                let _ = api.delete(&name, &DeleteParams::default()).await;
            }
            out.push(format!("the binlog archiver Pod {name} (restarting)"));
        }
        Ok(out)
    }

    /// Backup and restore Jobs still running that were created before the Secrets moved.
    async fn jobs_on_old(&self, moved_at: &str) -> Result<Vec<String>, PortError> {
        let api: Api<Job> = Api::namespaced(self.client.clone(), &self.id.namespace);
        let params = ListParams::default().labels(&label_selector(&self.id.backup_labels()));
        let jobs = retry(|| api.list(&params))
            .await
            .map_err(|e| unreachable(self.target(), &e))?;
        Ok(jobs
            .into_iter()
            .filter(|j| j.status.as_ref().and_then(|s| s.active).unwrap_or(0) > 0)
            .filter(|j| created_before(j.metadata.creation_timestamp.as_ref(), moved_at))
            .map(|j| {
                format!(
                    "the Job {} (running since before the rotation)",
                    j.metadata.name.unwrap_or_default()
                )
            })
            .collect())
    }
}

/// Why the Pod's mysqld_exporter still holds the old passwords, if it may: it reads its
/// option file only when it starts (mysqld_exporter 0.14), and restarting the container
/// would take the Pod out of its Services for that time, so the rotation waits for it to
/// start again (a rollout, a deleted Pod) after the Secrets moved.
fn exporter_on_old(pod: &Pod, moved_at: &str) -> Option<String> {
    const EXPORTER: &str = "mysqld-exporter";
    let status = pod
        .status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == EXPORTER);
    let declared = pod
        .spec
        .as_ref()
        .is_some_and(|s| s.containers.iter().any(|c| c.name == EXPORTER));
    if !declared {
        return None;
    }
    let started = status
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.running.as_ref())
        .and_then(|r| r.started_at.as_ref());
    created_before(started, moved_at).then(|| {
        "it reads its password only when it starts: delete the Pod, one at a time, or wait for a rollout".to_owned()
    })
}

/// The new passwords of `record`.
fn new_passwords(record: &RotationRecord) -> Result<MocoPasswords, &'static str> {
    let data: BTreeMap<String, &str> = record
        .pairs
        .iter()
        .filter_map(|p| {
            let a = Account::ALL.iter().find(|a| a.name() == p.account)?;
            Some((a.secret_key().to_owned(), p.new.as_str()))
        })
        .collect();
    MocoPasswords::from_secret_data(&data)
}

/// Whether `created` is earlier than the RFC 3339 time `at` (an object without a creation
/// time counts as earlier: it is not known to have the new passwords).
fn created_before(created: Option<&Time>, at: &str) -> bool {
    let Ok(at) = at.parse::<k8s_openapi::jiff::Timestamp>() else {
        return true;
    };
    created.is_none_or(|t| t.0 < at)
}

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}
