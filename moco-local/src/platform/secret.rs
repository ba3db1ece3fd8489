//! `DIR/secret.json` (the passwords of MOCO's accounts, mode 0600) and the client option files
//! `DIR/client/<user>.cnf` (mode 0600) for `mariadb --defaults-extra-file=…`.
//!
//! Every instance has the same accounts with the same passwords, as in MOCO's Secret.

use moco_core::moco_accounts::Account;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use moco_cluster::ports::Credentials;
use serde::{Deserialize, Serialize};

use super::error::LocalError;
use super::files;
use super::layout::Layout;
use super::manifest::{Manifest, random_hex};
use moco_core::option_file::tls_client_options;

/// MOCO's accounts (moco-reference §c.1), in the order MOCO lists them.
pub const MOCO_USERS: [&str; 8] = [
    "moco-admin",
    "moco-agent",
    "moco-repl",
    "moco-clone-donor",
    "moco-exporter",
    "moco-backup",
    "moco-readonly",
    "moco-writable",
];

/// The contents of `secret.json`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Secret {
    /// Account name → password: what every reader uses now.
    pub passwords: BTreeMap<String, String>,
    /// A rotation of the passwords in progress (`moco local credential rotate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<Rotation>,
}

impl std::fmt::Debug for Rotation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rotation")
            .field("phase", &self.phase)
            .field("channels_moved", &self.channels_moved)
            .finish_non_exhaustive()
    }
}

/// A rotation in `secret.json`: both sets of passwords, so that one interrupted at any step
/// resumes with the same new passwords (they are drawn once).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rotation {
    /// `drawn` or `published` ([`moco_core::rotation::RotationPhase`]).
    pub phase: moco_core::rotation::RotationPhase,
    /// Replicas whose channel uses the new replication password.
    #[serde(default)]
    pub channels_moved: std::collections::BTreeSet<u32>,
    /// Account name → password before the rotation.
    pub old: BTreeMap<String, String>,
    /// Account name → password after it.
    pub new: BTreeMap<String, String>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("users", &self.passwords.keys().collect::<Vec<_>>())
            .field("rotation", &self.rotation.as_ref().map(|r| r.phase))
            .finish()
    }
}

impl Secret {
    /// New random passwords (16 random bytes, hex: 32 characters, as MOCO makes them).
    pub fn generate() -> Result<Secret, LocalError> {
        let mut passwords = BTreeMap::new();
        for user in MOCO_USERS {
            passwords.insert(user.to_owned(), random_hex(16)?);
        }
        Ok(Secret {
            passwords,
            rotation: None,
        })
    }

    /// Starts a rotation: new random passwords drawn beside the current ones. A rotation in
    /// progress is kept as it is (its passwords are never drawn again).
    pub fn begin_rotation(&mut self) -> Result<bool, LocalError> {
        if self.rotation.is_some() {
            return Ok(false);
        }
        let new = Secret::generate()?.passwords;
        self.rotation = Some(Rotation {
            phase: moco_core::rotation::RotationPhase::Drawn,
            channels_moved: std::collections::BTreeSet::new(),
            old: self.passwords.clone(),
            new,
        });
        Ok(true)
    }

    /// The rotation as the manager's port gives it.
    pub fn rotation_record(&self) -> Option<moco_cluster::ports::RotationRecord> {
        let r = self.rotation.as_ref()?;
        let pairs = MOCO_USERS
            .iter()
            .filter_map(|user| {
                Some(moco_cluster::ports::PasswordPair {
                    account: (*user).to_owned(),
                    old: r.old.get(*user)?.clone(),
                    new: r.new.get(*user)?.clone(),
                })
            })
            .collect();
        Some(moco_cluster::ports::RotationRecord {
            phase: r.phase,
            channels_moved: r.channels_moved.clone(),
            pairs,
        })
    }

    /// The password of `user`.
    pub fn password(&self, user: &str) -> Result<&str, LocalError> {
        self.passwords
            .get(user)
            .map(String::as_str)
            .ok_or_else(|| LocalError::other("secret.json", format!("no password for {user}")))
    }

    /// Credentials of one of MOCO's accounts.
    pub fn credentials(&self, account: Account) -> Credentials {
        let name = account.name();
        Credentials {
            user: name.to_owned(),
            password: self.passwords.get(name).cloned().unwrap_or_default(),
        }
    }

    /// Writes `secret.json` (0600).
    pub fn save(&self, layout: &Layout) -> Result<(), LocalError> {
        files::write_json(&layout.secret(), self, 0o600)
    }

    /// Applies `change` to `secret.json` under its lock and writes the result if it changed;
    /// returns the new content.
    pub fn update<T>(
        layout: &Layout,
        change: impl FnOnce(&mut Secret) -> Result<T, LocalError>,
    ) -> Result<(Secret, T), LocalError> {
        let _lock = super::files::FileLock::acquire(&layout.secret_lock())?;
        let mut secret = Secret::load(layout)?;
        let before = secret.clone();
        let out = change(&mut secret)?;
        if secret != before {
            secret.save(layout)?;
        }
        Ok((secret, out))
    }

    /// Reads `secret.json`, checking every account is present.
    pub fn load(layout: &Layout) -> Result<Secret, LocalError> {
        let secret: Secret = files::read_json(&layout.secret())?;
        for user in MOCO_USERS {
            secret.password(user).map_err(|_| {
                LocalError::other(
                    layout.secret().display().to_string(),
                    format!("no password for {user}"),
                )
            })?;
            if let Some(r) = &secret.rotation
                && !(r.old.contains_key(user) && r.new.contains_key(user))
            {
                return Err(LocalError::other(
                    layout.secret().display().to_string(),
                    format!("rotation: no old or new password for {user}"),
                ));
            }
        }
        Ok(secret)
    }

    /// Writes `client/<user>.cnf` for every account: `[client]` with user, password and the
    /// endpoint it should use — the replica endpoint for `moco-readonly` when the cluster has
    /// replicas, the primary endpoint otherwise.
    pub fn write_client_files(
        &self,
        layout: &Layout,
        manifest: &Manifest,
    ) -> Result<(), LocalError> {
        let dir = layout.client_dir();
        std::fs::create_dir_all(&dir).map_err(|e| LocalError::io(&dir, "create", e))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| LocalError::io(&dir, "set permissions", e))?;
        for user in MOCO_USERS {
            let port = if user == "moco-readonly" && manifest.replicas > 1 {
                manifest.replica_port()
            } else {
                manifest.primary_port()
            };
            let ca = super::tls::ca_file(layout, manifest);
            let text = client_cnf(user, self.password(user)?, port, ca.as_deref());
            files::write_atomic(&layout.client_cnf(user), text.as_bytes(), 0o600)?;
        }
        Ok(())
    }
}

/// A `[client]` option file; with the cluster's CA, the client uses TLS and verifies the
/// server against it.
pub fn client_cnf(user: &str, password: &str, port: u16, ca: Option<&Path>) -> String {
    let mut text = format!(
        "# moco local: {user} through 127.0.0.1:{port}\n[client]\nuser={user}\npassword={password}\nhost=127.0.0.1\nport={port}\nprotocol=TCP\n"
    );
    text.push_str(&tls_client_options(ca));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_and_client_files() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path());
        let s = Secret::generate().unwrap();
        assert_eq!(s.passwords.len(), 8);
        assert!(s.passwords.values().all(|p| p.len() == 32));
        s.save(&layout).unwrap();
        let mode = std::fs::metadata(layout.secret())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Secret::load(&layout).unwrap(), s);
        let manifest = Manifest {
            base_port: 30000,
            ..Manifest::example()
        };
        s.write_client_files(&layout, &manifest).unwrap();
        let w = std::fs::read_to_string(layout.client_cnf("moco-writable")).unwrap();
        assert!(w.contains("user=moco-writable\n"));
        assert!(w.contains(&format!("password={}\n", s.passwords["moco-writable"])));
        assert!(w.contains("port=30000\n"));
        let r = std::fs::read_to_string(layout.client_cnf("moco-readonly")).unwrap();
        assert!(r.contains("port=30001\n"));
        let debug = format!("{s:?}");
        assert!(!debug.contains(&s.passwords["moco-admin"]));
    }
}
