//! What the Pod tells its containers through the environment: the Pod's name (and from it
//! the instance ordinal), the cluster's name, and the passwords of MOCO's accounts (the
//! Secret `moco-<cluster>` mounted with `envFrom`, keys `ADMIN_PASSWORD`, …).

use moco_core::moco_accounts::{Account, MocoPasswords};

use crate::error::AgentError;

/// `POD_NAME`, from `metadata.name`.
pub const POD_NAME: &str = "POD_NAME";
/// `CLUSTER_NAME`: the MySQLCluster's name.
pub const CLUSTER_NAME: &str = "CLUSTER_NAME";

/// The ordinal at the end of a StatefulSet Pod's name (`moco-db-2` → 2).
pub fn ordinal(pod_name: &str) -> Result<u32, AgentError> {
    pod_name
        .rsplit_once('-')
        .and_then(|(_, n)| n.parse().ok())
        .ok_or_else(|| {
            AgentError::invalid(
                POD_NAME,
                format!("{pod_name:?} does not end with -<ordinal> (a StatefulSet Pod's name)"),
            )
        })
}

/// A required, non-empty environment variable.
pub fn required(name: &'static str) -> Result<String, AgentError> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or(AgentError::MissingEnv(name))
}

/// The passwords of the eight accounts from the environment.
pub fn passwords() -> Result<MocoPasswords, AgentError> {
    passwords_from(|key| std::env::var(key).ok())
}

/// The passwords from `lookup` (the environment, or a table in tests).
pub fn passwords_from(
    lookup: impl Fn(&'static str) -> Option<String>,
) -> Result<MocoPasswords, AgentError> {
    MocoPasswords::try_from_fn(|account: Account| {
        let key = account.secret_key();
        lookup(key)
            .filter(|v| !v.is_empty())
            .ok_or(AgentError::MissingEnv(key))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_come_from_the_name() {
        assert_eq!(ordinal("moco-db-0").unwrap(), 0);
        assert_eq!(ordinal("moco-my-db-12").unwrap(), 12);
        let e = ordinal("moco-db").unwrap_err();
        assert!(e.to_string().starts_with("POD_NAME: \"moco-db\""), "{e}");
    }

    #[test]
    fn every_password_is_required_by_its_secret_key() {
        let all = |k: &str| Some(format!("pw-{k}"));
        let p = passwords_from(all).unwrap();
        assert_eq!(p.get(Account::CloneDonor), "pw-CLONE_DONOR_PASSWORD");
        let e = passwords_from(|k| (k != "BACKUP_PASSWORD").then(|| "x".to_owned())).unwrap_err();
        assert!(e.to_string().contains("BACKUP_PASSWORD"), "{e}");
    }
}
