//! The [`Platform`] side of [`SimCluster`]: Pods, labels, annotations, status and events as
//! the manager sees them, and the SQL port of each instance ([`crate::SimInstance`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use moco_core::facts::{ClusterFacts, PodFacts, Role, SpecFacts};
use moco_core::moco_accounts::Account;
use moco_core::operation::{Event, ReplicationSource};
use moco_core::status::ClusteringStatus;
use moco_core::{Action, Decision};

use super::cluster::{SimCluster, reach};
use super::model::{PORT, PodState, Promotion, host_of};
use super::records::SimOp;
use moco_cluster::ports::{Credentials, InstanceSlot, MysqlPort, Observation, Platform, PortError};

fn pod_target(i: u32) -> String {
    format!("pod moco-sim-{i}")
}

impl SimCluster {
    /// Changes the metadata of Pod `index` (after the manager-crash gate, as every write).
    async fn edit_pod(
        &self,
        index: u32,
        op: SimOp,
        edit: impl FnOnce(&mut PodState),
    ) -> Result<(), PortError> {
        self.gate().await;
        let mut st = self.lock();
        let x = st.inst_mut(index).ok_or_else(|| PortError::Failed {
            target: pod_target(index),
            message: "no such Pod".to_owned(),
        })?;
        edit(&mut x.pod);
        st.applied(op);
        Ok(())
    }
}

#[async_trait]
impl Platform for SimCluster {
    async fn observe(&self) -> Result<Observation, PortError> {
        let mut st = self.lock();
        st.note_observe();
        st.remove_leaving();
        let instances = st
            .insts
            .iter()
            .map(|x| InstanceSlot {
                index: x.index,
                host: host_of(x.index),
                port: PORT,
                pod: PodFacts {
                    exists: true,
                    ready: x.up,
                    deleting: x.pod.deleting,
                    demote: x.pod.demote,
                    prevent_delete: x.pod.prevent_delete,
                    role_label: x.pod.role,
                },
            })
            .collect();
        Ok(Observation {
            spec: SpecFacts {
                replicas: st.spec_replicas(),
                external_source: None,
                restore: false,
                offline: false,
                server_id_base: st.server_id_base,
                max_delay_seconds_for_pod_deletion: st.max_delay_seconds,
                flavor: st.flavor,
                reclone_errant: false,
                startup_wait_seconds: 3600,
            },
            status: st.status.clone(),
            instances,
            switchover_to: None,
        })
    }

    async fn mysql(&self, slot: &InstanceSlot) -> Result<Arc<dyn MysqlPort>, PortError> {
        self.count_port_built();
        Ok(Arc::new(self.instance(slot.index)))
    }

    async fn credentials(&self, account: Account) -> Result<Credentials, PortError> {
        Ok(Credentials {
            user: account.name().to_owned(),
            password: "sim".to_owned(),
        })
    }

    async fn external_credentials(&self) -> Result<Credentials, PortError> {
        Err(PortError::Failed {
            target: "external source".to_owned(),
            message: "the simulator has no external source".to_owned(),
        })
    }

    async fn set_role_label(&self, index: u32, role: Option<Role>) -> Result<(), PortError> {
        let op = SimOp::SetRoleLabel {
            instance: index,
            role,
        };
        self.edit_pod(index, op, |pod| pod.role = role).await
    }

    async fn set_prevent_delete(&self, index: u32, enabled: bool) -> Result<(), PortError> {
        self.edit_pod(index, SimOp::SetPreventDelete(index), |pod| {
            pod.prevent_delete = enabled;
        })
        .await
    }

    async fn remove_demote(&self, index: u32) -> Result<(), PortError> {
        self.edit_pod(index, SimOp::RemoveDemote(index), |pod| pod.demote = false)
            .await
    }

    async fn clear_switchover_request(&self, _: u32, _: Option<&str>) -> Result<(), PortError> {
        // The simulator never requests a target (its observations carry none).
        Ok(())
    }

    async fn write_status(&self, status: &ClusteringStatus) -> Result<(), PortError> {
        self.gate().await;
        let mut st = self.lock();
        st.commit_known();
        let from = st.status.current_primary_index;
        let to = status.current_primary_index;
        if from != to {
            let (missing_acknowledged, problems) = st.judge_promotion(from, to);
            let tick = st.ticks;
            let from_frozen = st.frozen(from);
            st.promotions.push(Promotion {
                from,
                to,
                tick,
                missing_acknowledged,
                problems,
                from_frozen,
            });
            st.applied(SimOp::SetPrimaryIndex { from, to });
        }
        status.merge_into(&mut st.status);
        if from != to {
            st.promote_lineage(to);
        }
        Ok(())
    }

    async fn record_event(&self, event: &Event) -> Result<(), PortError> {
        self.lock().events.push(event.clone());
        Ok(())
    }

    async fn clone_instance(
        &self,
        index: u32,
        donor: &ReplicationSource,
        _boot_timeout: Duration,
    ) -> Result<(), PortError> {
        self.gate().await;
        let ReplicationSource::Instance { index: from, .. } = donor else {
            return Err(PortError::Failed {
                target: format!("instance {index}"),
                message: "clone from an external source is not simulated".to_owned(),
            });
        };
        let from = *from;
        // A frozen recipient runs nothing; a frozen donor sends nothing: the clone waits.
        self.wait_while(|st| reach(st, index).is_ok() && (st.frozen(index) || st.frozen(from)))
            .await;
        let mut st = self.lock();
        reach(&st, index)?;
        if from == index || !st.up(from) || !st.link_ok(index, from) {
            return Err(PortError::Sql {
                target: format!("instance {index} ({}:{PORT})", host_of(index)),
                what: format!("CLONE INSTANCE FROM {}:{PORT}", host_of(from)),
                code: 3862,
                message: format!("Clone Donor Error: cannot connect to instance {from}"),
            });
        }
        st.applied(SimOp::Clone {
            instance: index,
            donor: from,
        });
        st.clone_from(index, from);
        Ok(())
    }

    async fn observed(&self, facts: &ClusterFacts, decision: &Decision) {
        let mut st = self.lock();
        if decision.action == Action::Failover {
            st.failover_rounds += 1;
        }
        st.last_round = Some((facts.clone(), decision.clone()));
        st.note_facts(facts, decision);
    }

    async fn round_finished(&self, timing: &moco_cluster::ports::RoundTiming) {
        self.note_round(timing);
    }
}
