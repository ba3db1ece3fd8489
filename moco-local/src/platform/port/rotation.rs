//! A rotation of the local cluster's passwords, kept in `secret.json` (see
//! [`super::super::secret::Rotation`]): the manager's port calls of
//! [`moco_cluster::ports::Platform`] for it.
//!
//! Publishing rewrites `secret.json`'s current passwords and the client option files, and
//! rebuilds the manager's SQL ports (they log in as `moco-admin`). The binlog archiver reads
//! `secret.json` each round and so follows by itself.

use moco_cluster::ports::{PortError, RotationRecord};
use moco_core::rotation::RotationPhase;

use super::super::error::LocalError;
use super::super::secret::Secret;
use super::super::sql;
use super::{LocalPlatform, lock, port_err};

impl LocalPlatform {
    fn secret_err(&self, e: LocalError) -> PortError {
        port_err(self.layout.secret().display().to_string(), e)
    }

    /// Replaces the in-memory secret (and, when the passwords changed, the SQL ports).
    fn adopt(&self, secret: Secret) -> Result<(), PortError> {
        let changed = lock(&self.secret).passwords != secret.passwords;
        if changed {
            let ports = (0..self.manifest.replicas)
                .map(|index| sql::port(&self.manifest, &self.layout, index, &secret))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| self.secret_err(e))?;
            *lock(&self.ports) = ports;
        }
        *lock(&self.secret) = secret;
        Ok(())
    }

    pub(super) fn read_rotation(&self) -> Result<Option<RotationRecord>, PortError> {
        let secret = Secret::load(&self.layout).map_err(|e| self.secret_err(e))?;
        let record = secret.rotation_record();
        self.adopt(secret)?;
        Ok(record)
    }

    pub(super) fn publish(&self) -> Result<(), PortError> {
        let (secret, ()) = Secret::update(&self.layout, |s| {
            if let Some(r) = s.rotation.as_mut()
                && r.phase == RotationPhase::Drawn
            {
                s.passwords = r.new.clone();
                r.phase = RotationPhase::Published;
            }
            Ok(())
        })
        .map_err(|e| self.secret_err(e))?;
        secret
            .write_client_files(&self.layout, &self.manifest)
            .map_err(|e| self.secret_err(e))?;
        self.adopt(secret)
    }

    pub(super) fn channel_moved(&self, index: u32) -> Result<(), PortError> {
        let (secret, ()) = Secret::update(&self.layout, |s| {
            if let Some(r) = s.rotation.as_mut() {
                r.channels_moved.insert(index);
            }
            Ok(())
        })
        .map_err(|e| self.secret_err(e))?;
        self.adopt(secret)
    }

    pub(super) fn finish(&self) -> Result<(), PortError> {
        let (secret, ()) = Secret::update(&self.layout, |s| {
            if s.rotation
                .as_ref()
                .is_some_and(|r| r.phase == RotationPhase::Published)
            {
                s.rotation = None;
            }
            Ok(())
        })
        .map_err(|e| self.secret_err(e))?;
        self.adopt(secret)
    }
}
