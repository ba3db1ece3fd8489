//! Cloning on Kubernetes goes through the agents (`moco_agent::api`): the manager asks the
//! empty instance's agent to copy the donor, and waits.
//!
//! MySQL's `CLONE INSTANCE` finishes inside the recipient Pod. A MariaDB copy is prepared
//! beside the running server and must replace its datadir while no server runs, which in a
//! Pod is only while its init container runs: when the agent reports the copy `Ready`, the
//! Pod is deleted (its StatefulSet re-creates it at once), `moco init` puts the copy in
//! place, and the new Pod's agent seeds it and reports `Completed`. Each step is recorded on
//! the volume, so a manager that restarts in the middle finds the clone where it was.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams};
use moco_agent::api::{ClonePhase, CloneRequest, CloneStatus};
use moco_agent::client::AgentClient;
use moco_agent::error::AgentError;
use moco_api::addresses::AddressResolver;
use moco_api::cluster::ClusterId;
use moco_cluster::ports::{Credentials, PortError};
use moco_core::moco_accounts::MocoPasswords;
use moco_core::operation::ReplicationSource;
use moco_http::tls::mtls_client_config;
use moco_kube::platform::{CloneCredentials, InstanceCloner};

/// How often a running clone is looked at.
const POLL: Duration = Duration::from_secs(1);
/// The longest a copy may take to arrive and be prepared (a large database).
const COPY_LIMIT: Duration = Duration::from_secs(24 * 3600);
/// How long the deleted Pod may take to come back, on top of the server's boot limit.
const RESTART_SLACK: Duration = Duration::from_secs(600);

/// Clones through the agents, as the controller (its client certificate).
pub struct AgentCloner {
    client: Client,
    cert_dir: PathBuf,
    addresses: Arc<dyn AddressResolver>,
}

impl std::fmt::Debug for AgentCloner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentCloner")
            .field("cert_dir", &self.cert_dir)
            .field("addresses", &self.addresses)
            .finish_non_exhaustive()
    }
}

impl AgentCloner {
    /// Calls agents with the client certificate in `cert_dir` (`tls.crt`, `tls.key`,
    /// `ca.crt`; read at each clone, so a renewed certificate is used) at the addresses
    /// `addresses` gives, and deletes Pods with `client`.
    pub fn new(client: Client, cert_dir: PathBuf, addresses: Arc<dyn AddressResolver>) -> Self {
        AgentCloner {
            client,
            cert_dir,
            addresses,
        }
    }

    fn agents(&self, target: &str) -> Result<AgentClient, PortError> {
        let config = mtls_client_config(
            &self.cert_dir.join("tls.crt"),
            &self.cert_dir.join("tls.key"),
            &self.cert_dir.join("ca.crt"),
        )
        .map_err(|e| {
            failed(
                target,
                format!("the agents' client certificate (--grpc-cert-dir): {e}"),
            )
        })?;
        Ok(AgentClient::new(config, Duration::from_secs(30)))
    }
}

fn failed(target: &str, message: impl std::fmt::Display) -> PortError {
    PortError::Failed {
        target: target.to_owned(),
        message: message.to_string(),
    }
}

fn agent_error(target: &str, e: AgentError) -> PortError {
    match e {
        AgentError::Remote { .. } => PortError::Unreachable {
            target: target.to_owned(),
            message: e.to_string(),
        },
        other => failed(target, other),
    }
}

impl AgentCloner {
    /// Polls the agent at `host:port` until `done` holds for its status, or `limit` passes;
    /// an unreachable agent (a Pod restarting) is tried again until then.
    async fn wait(
        &self,
        agents: &AgentClient,
        target: &str,
        (host, port): (&str, u16),
        limit: Duration,
        done: impl Fn(&CloneStatus) -> bool,
    ) -> Result<CloneStatus, PortError> {
        let deadline = Instant::now() + limit;
        loop {
            let mut last_error = None;
            match agents.clone_status(host, port).await {
                Ok(s) if s.phase == ClonePhase::Failed => {
                    return Err(failed(
                        target,
                        format!(
                            "the clone failed: {}",
                            s.error.as_deref().unwrap_or("no reason given")
                        ),
                    ));
                }
                Ok(s) if done(&s) => return Ok(s),
                Ok(_) => {}
                Err(e) => last_error = Some(e),
            }
            if Instant::now() >= deadline {
                return Err(match last_error {
                    Some(e) => agent_error(target, e),
                    None => failed(
                        target,
                        format!("the clone did not finish within {} s", limit.as_secs()),
                    ),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

#[async_trait]
impl InstanceCloner for AgentCloner {
    async fn clone_instance(
        &self,
        id: &ClusterId,
        index: u32,
        donor: &ReplicationSource,
        credentials: &CloneCredentials,
        boot_timeout: Duration,
    ) -> Result<(), PortError> {
        let pod = format!("{}-{index}", id.prefixed());
        let target = format!("instance {index} ({pod})");
        let (host, port) = self.addresses.agent(id, index);
        let (donor_host, donor_port) = donor.address();
        let (donor_agent_host, donor_agent_port) = match donor {
            ReplicationSource::Instance { index, .. } => self.addresses.agent(id, *index),
            ReplicationSource::External { host, .. } => (host.clone(), 0),
        };
        let Credentials { user, password } = credentials.donor.clone();
        let request = CloneRequest {
            donor_host: donor_host.to_owned(),
            donor_port,
            donor_agent_host,
            donor_agent_port,
            user,
            password,
            init_user: credentials.init.user.clone(),
            init_password: credentials.init.password.clone(),
            boot_timeout_seconds: boot_timeout.as_secs(),
        };
        let agent = (host.as_str(), port);
        let agents = self.agents(&target)?;
        // A copy prepared before this manager (re)started is not received twice.
        let current = agents
            .clone_status(&host, port)
            .await
            .map_err(|e| agent_error(&target, e))?;
        if !current.phase.in_progress() {
            agents
                .start_clone(&host, port, &request)
                .await
                .map_err(|e| agent_error(&target, e))?;
            tracing::info!(%pod, donor = %donor_host, "clone started");
        }
        let status = self
            .wait(&agents, &target, agent, COPY_LIMIT, |s| {
                matches!(s.phase, ClonePhase::Ready | ClonePhase::Completed)
            })
            .await?;
        if status.phase == ClonePhase::Ready {
            tracing::info!(%pod, bytes = status.bytes, "copy prepared; restarting the Pod to put it in place");
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), &id.namespace);
            pods.delete(&pod, &DeleteParams::default().grace_period(1))
                .await
                .map_err(|e| failed(&target, format!("deleting the Pod: {e}")))?;
            self.wait(&agents, &target, agent, boot_timeout + RESTART_SLACK, |s| {
                s.phase == ClonePhase::Completed
            })
            .await?;
        }
        tracing::info!(%pod, "clone completed");
        Ok(())
    }

    async fn move_agent(
        &self,
        id: &ClusterId,
        index: u32,
        passwords: &MocoPasswords,
    ) -> Result<bool, PortError> {
        let target = format!("the agent of Pod {}-{index}", id.prefixed());
        let (host, port) = self.addresses.agent(id, index);
        let status = self
            .agents(&target)?
            .replace_credentials(&host, port, passwords)
            .await
            .map_err(|e| agent_error(&target, e))?;
        Ok(status.fingerprint == passwords.fingerprint())
    }
}
