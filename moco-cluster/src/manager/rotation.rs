//! The manager's part of a rotation of MOCO's passwords: after a round that found the cluster
//! healthy with nothing to do, it asks each instance which passwords it accepts, lets
//! [`moco_core::rotation::decide_rotation`] choose one step, and takes it. A round that had
//! steps of its own takes none, so a rotation never competes with a failover or a clone.

use std::collections::BTreeMap;

use moco_core::Decision;
use moco_core::facts::ClusterFacts;
use moco_core::moco_accounts::Account;
use moco_core::operation::{Event, ReplicationSource};
use moco_core::rotation::{
    Accepts, InstanceView, RotationPhase, RotationStep, RotationView, decide_rotation,
};
use moco_core::state::ClusterState;

use super::Manager;
use crate::ports::{Observation, PasswordPair, PortError, RotationRecord};

/// The reason of the rotation's events.
pub const ROTATION_REASON: &str = "PasswordRotation";

impl Manager {
    /// Takes the next step of the rotation in progress, if any; returns it (`None` without
    /// a rotation). A failed step is reported as a warning event and returned as a wait, so
    /// that the next round comes at the usual pace and tries again.
    pub(super) async fn rotate(
        &self,
        view: &Observation,
        facts: &ClusterFacts,
        decision: &Decision,
    ) -> Option<RotationStep> {
        let record = match self
            .platform_call("read the rotation", self.platform.rotation())
            .await
        {
            Ok(Some(record)) => record,
            Ok(None) => return None,
            Err(err) => {
                tracing::warn!(%err, "reading the password rotation failed");
                return None;
            }
        };
        let (step, readers) = match self.rotation_view(view, decision, &record).await {
            Ok(v) => (decide_rotation(&v), v.readers_on_old),
            Err(err) => (
                RotationStep::Wait {
                    reason: err.to_string(),
                },
                Vec::new(),
            ),
        };
        if let RotationStep::Wait { reason } = &step {
            tracing::info!(%reason, phase = record.phase.as_str(), "password rotation waits");
            self.report_readers(&readers).await;
            return Some(step);
        }
        tracing::info!(
            ?step,
            phase = record.phase.as_str(),
            "password rotation step"
        );
        // A step moves the rotation on: a wait after it is worth saying again, even for the
        // same readers (and the next rotation's waits are its own).
        self.rotation_wait
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let primary = decision.status.current_primary_index;
        match self.take(view, facts, primary, &record, &step).await {
            Ok(message) => {
                self.record(&Event::normal(ROTATION_REASON, message), None)
                    .await;
            }
            Err(err) => {
                let detail = err.to_string();
                tracing::warn!(error = %detail, ?step, "password rotation step failed");
                let ev = Event::warning("PasswordRotationFailed", "a rotation step failed");
                self.record(&ev, Some(&detail)).await;
                return Some(RotationStep::Wait { reason: detail });
            }
        }
        Some(step)
    }

    /// Records what the rotation waits for when the readers still on the old passwords are
    /// others than last reported since the last step (what `kubectl moco credential rotate`
    /// prints: a running backup may hold the rotation for as long as it runs).
    async fn report_readers(&self, readers: &[String]) {
        if readers.is_empty() {
            return;
        }
        let message = format!(
            "waiting until no reader holds the old passwords: {}",
            readers.join("; ")
        );
        let changed = self
            .rotation_wait
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .replace(message.clone())
            .as_ref()
            != Some(&message);
        if changed {
            self.record(&Event::normal(ROTATION_REASON, message), None)
                .await;
        }
    }

    /// What the decision needs: each instance's test logins with both passwords of every
    /// account (skipped while the cluster is busy), the channels, the readers.
    async fn rotation_view(
        &self,
        view: &Observation,
        decision: &Decision,
        record: &RotationRecord,
    ) -> Result<RotationView, PortError> {
        let busy = if decision.state != ClusterState::Healthy {
            Some(format!("the cluster is {}", decision.state))
        } else if !decision.steps.is_empty() {
            Some("the manager took steps this round".to_owned())
        } else {
            None
        };
        let primary = decision.status.current_primary_index;
        let mut instances = BTreeMap::new();
        if busy.is_none() {
            // Every login of every instance at once: a round during a rotation tries each
            // account's two passwords on each instance.
            let tries = view.instances.iter().map(|slot| async move {
                let port = self.mysql(slot).await?;
                let logins = record.pairs.iter().map(|pair| {
                    let port = &port;
                    async move {
                        let (old, new) = futures::future::join(
                            port.accepts(&pair.account, &pair.old),
                            port.accepts(&pair.account, &pair.new),
                        )
                        .await;
                        Ok::<_, PortError>((
                            pair.account.clone(),
                            Accepts {
                                old: old?,
                                new: new?,
                            },
                        ))
                    }
                });
                let accounts = futures::future::try_join_all(logins).await?;
                Ok::<_, PortError>((slot.index, accounts.into_iter().collect::<BTreeMap<_, _>>()))
            });
            for (index, accounts) in futures::future::try_join_all(tries).await? {
                instances.insert(index, InstanceView { accounts });
            }
        }
        let readers_on_old = if busy.is_none() && record.phase == RotationPhase::Published {
            self.platform_call(
                "move the readers of the old passwords",
                self.platform.move_readers(record),
            )
            .await?
        } else {
            Vec::new()
        };
        Ok(RotationView {
            phase: record.phase,
            channels_moved: record.channels_moved.clone(),
            accounts: record.pairs.iter().map(|p| p.account.clone()).collect(),
            busy,
            primary,
            instances,
            replicas: u32::try_from(view.instances.len()).unwrap_or(u32::MAX),
            readers_on_old,
        })
    }

    /// Takes `step`; returns the event's message.
    async fn take(
        &self,
        view: &Observation,
        facts: &ClusterFacts,
        primary: u32,
        record: &RotationRecord,
        step: &RotationStep,
    ) -> Result<String, PortError> {
        let pairs = |accounts: &[String]| -> Vec<PasswordPair> {
            record
                .pairs
                .iter()
                .filter(|p| accounts.contains(&p.account))
                .cloned()
                .collect()
        };
        match step {
            RotationStep::Wait { reason } => Ok(reason.clone()),
            RotationStep::AddNew { accounts } => {
                let port = self.port(view, primary).await?;
                port.add_new_passwords(&pairs(accounts)).await?;
                Ok(format!(
                    "the primary (instance {primary}) accepts the new passwords of {} beside the old ones",
                    accounts.join(", ")
                ))
            }
            RotationStep::Publish => {
                self.platform_call(
                    "publish the new passwords",
                    self.platform.publish_rotation(record),
                )
                .await?;
                // The ports log in as moco-admin: from now on with its new password.
                self.forget_ports();
                Ok("the new passwords were given to every reader".to_owned())
            }
            RotationStep::RepointChannel { index } => {
                let slot = Self::slot(view, primary)?;
                let source = ReplicationSource::Instance {
                    index: primary,
                    host: slot.host.clone(),
                    port: slot.port,
                };
                let semi_sync = facts
                    .instances
                    .iter()
                    .find(|i| i.index == *index)
                    .and_then(|i| i.mysqld.as_ref())
                    .is_some_and(|m| m.semi_sync.replica_enabled);
                let credentials = self.platform.credentials(Account::Repl).await?;
                let port = self.port(view, *index).await?;
                // Apply what the channel received before a new one discards it.
                port.stop_replica_io().await?;
                let drained = async {
                    let received = port
                        .status()
                        .await?
                        .replica_status
                        .map(|r| r.retrieved_gtid_set);
                    if let Some(received) = received {
                        port.wait_for_gtid(&received, Some(self.config.step_timeout))
                            .await?;
                    }
                    Ok::<(), PortError>(())
                }
                .await;
                if let Err(err) = drained {
                    // Receive again; the next round tries once more.
                    let _ = port.start_replica(false).await;
                    return Err(err);
                }
                port.configure_replication(&source, &credentials, semi_sync)
                    .await?;
                self.platform_call(
                    "record the channel",
                    self.platform.record_channel_moved(*index),
                )
                .await?;
                Ok(format!(
                    "instance {index} replicates with the new password of moco-repl"
                ))
            }
            RotationStep::DropOld { accounts } => {
                let port = self.port(view, primary).await?;
                port.drop_old_passwords(&pairs(accounts)).await?;
                // Every reader moved, the platform's credentials included (on Kubernetes
                // read from a Secret the reconciler rewrites after publishing): ports built
                // before that would log in with an old password from now on.
                self.forget_ports();
                Ok(format!(
                    "the primary (instance {primary}) no longer accepts the old passwords of {}",
                    accounts.join(", ")
                ))
            }
            RotationStep::Finish => {
                self.platform_call("finish the rotation", self.platform.finish_rotation())
                    .await?;
                Ok("the rotation of MOCO's passwords finished".to_owned())
            }
        }
    }
}
