//! `DIR/pods.json`: what Kubernetes would keep on Pod objects — the role label, the demote and
//! prevent-delete annotations — plus the kill holds of `moco local kill`.
//!
//! Both the manager and the CLI change this file, always under the `pods.lock` advisory lock
//! and with an atomic replace.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use moco_core::facts::Role;
use serde::{Deserialize, Serialize};

use super::error::LocalError;
use super::files::{self, FileLock};
use super::layout::Layout;

/// Why an instance is kept down.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KillHold {
    /// When `moco local kill` ran (Unix milliseconds).
    pub since_ms: u64,
    /// Until when the supervisor must not restart it (Unix milliseconds); `None` keeps it down
    /// until `moco local start N`.
    #[serde(default)]
    pub until_ms: Option<u64>,
}

impl KillHold {
    /// True while the hold keeps the instance down at `now_ms`.
    pub fn active(&self, now_ms: u64) -> bool {
        self.until_ms.is_none_or(|until| now_ms < until)
    }
}

/// Pod-like metadata of one instance.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMeta {
    /// `moco.cybozu.com/role`.
    #[serde(default)]
    pub role: Option<Role>,
    /// `moco.cybozu.com/demote: "true"`.
    #[serde(default)]
    pub demote: bool,
    /// `moco.cybozu.com/prevent-delete: "true"`.
    #[serde(default)]
    pub prevent_delete: bool,
    /// Set by `moco local kill`.
    #[serde(default)]
    pub kill_hold: Option<KillHold>,
}

/// The whole file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodsFile {
    /// Per ordinal.
    #[serde(default)]
    pub instances: BTreeMap<u32, PodMeta>,
    /// A pending `moco local switchover --to N` request; cleared once N is the primary.
    #[serde(default)]
    pub switchover_to: Option<u32>,
    /// Why the manager withdrew the last request it refused (the ordinal and the reason),
    /// written with the withdrawal; a new request clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switchover_refused: Option<(u32, String)>,
}

impl PodsFile {
    /// The metadata of `index` (defaults when never written).
    pub fn get(&self, index: u32) -> PodMeta {
        self.instances.get(&index).cloned().unwrap_or_default()
    }

    /// Reads the file (empty when it does not exist yet).
    pub fn load(layout: &Layout) -> Result<PodsFile, LocalError> {
        Ok(files::read_json_opt(&layout.pods())?.unwrap_or_default())
    }

    /// Applies `change` under the lock and writes the result; returns the new content.
    pub fn update<F>(layout: &Layout, change: F) -> Result<PodsFile, LocalError>
    where
        F: FnOnce(&mut PodsFile),
    {
        let _lock = FileLock::acquire(&layout.pods_lock())?;
        let mut pods = PodsFile::load(layout)?;
        let before = pods.clone();
        change(&mut pods);
        if pods != before {
            files::write_json(&layout.pods(), &pods, 0o644)?;
        }
        Ok(pods)
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_round_trips() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path());
        assert_eq!(PodsFile::load(&layout).unwrap(), PodsFile::default());
        PodsFile::update(&layout, |p| {
            p.instances.entry(1).or_default().role = Some(Role::Primary);
            p.instances.entry(2).or_default().demote = true;
        })
        .unwrap();
        let p = PodsFile::load(&layout).unwrap();
        assert_eq!(p.get(1).role, Some(Role::Primary));
        assert!(p.get(2).demote);
        assert_eq!(p.get(0), PodMeta::default());
    }

    #[test]
    fn holds_expire() {
        let hold = KillHold {
            since_ms: 10,
            until_ms: Some(20),
        };
        assert!(hold.active(15));
        assert!(!hold.active(20));
        let forever = KillHold {
            since_ms: 10,
            until_ms: None,
        };
        assert!(forever.active(u64::MAX));
    }
}
