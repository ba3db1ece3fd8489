//! The password Secrets: the controller's copy (the source of truth, created once, never
//! rotated silently), the cluster-namespace copy the agent reads, and the client option files
//! the containers mount at `/mysql-credentials`.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use moco_api::cluster::{ClusterId, mycnf_key};
use moco_api::labels::ANNOTATION_SECRET_VERSION;
use moco_core::moco_accounts::{Account, MocoPasswords};
use moco_core::option_file::quote_value;

/// The format version of password Secrets; a Secret without it is not trusted.
pub const SECRET_VERSION: &str = "1";

/// The accounts that get a client option file, in the order MOCO lists them.
pub const MYCNF_ACCOUNTS: [Account; 5] = [
    Account::Admin,
    Account::Exporter,
    Account::Backup,
    Account::ReadOnly,
    Account::Writable,
];

fn version_annotation() -> BTreeMap<String, String> {
    BTreeMap::from([(ANNOTATION_SECRET_VERSION.into(), SECRET_VERSION.into())])
}

fn password_data(passwords: &MocoPasswords) -> BTreeMap<String, ByteString> {
    Account::ALL
        .iter()
        .map(|a| {
            (
                a.secret_key().to_owned(),
                ByteString(passwords.get(*a).as_bytes().to_vec()),
            )
        })
        .collect()
}

/// `mysql-<ns>.<name>` in the controller namespace.
pub fn controller(id: &ClusterId, system_namespace: &str, passwords: &MocoPasswords) -> Secret {
    let mut metadata = id.system_meta(id.controller_secret(), system_namespace);
    metadata.annotations = Some(version_annotation());
    Secret {
        metadata,
        data: Some(password_data(passwords)),
        ..Secret::default()
    }
}

/// `moco-<name>` in the cluster namespace (the agent's `envFrom`).
pub fn user(id: &ClusterId, passwords: &MocoPasswords) -> Secret {
    let mut metadata = id.owned_meta(id.prefixed(), id.labels());
    metadata.annotations = Some(version_annotation());
    Secret {
        metadata,
        data: Some(password_data(passwords)),
        ..Secret::default()
    }
}

/// The `[client]` option file of one account. Passwords are hex, but the values are quoted
/// and escaped anyway so that no password could add an option.
pub fn client_option_file(account: Account, password: &str) -> String {
    let mut out = format!(
        "[client]\nuser={}\npassword={}\n",
        quote_value(account.name()),
        quote_value(password)
    );
    if account == Account::Exporter {
        out.push_str("socket=\"/run/mysqld.sock\"\n");
    }
    out
}

/// `moco-my-cnf-<name>`.
pub fn mycnf(id: &ClusterId, passwords: &MocoPasswords) -> Secret {
    let mut metadata = id.owned_meta(id.mycnf_secret(), id.labels());
    metadata.annotations = Some(version_annotation());
    let data = MYCNF_ACCOUNTS
        .iter()
        .map(|a| {
            (
                mycnf_key(a.name()),
                ByteString(client_option_file(*a, passwords.get(*a)).into_bytes()),
            )
        })
        .collect();
    Secret {
        metadata,
        data: Some(data),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_files_quote_and_the_exporter_one_names_the_socket() {
        assert_eq!(
            client_option_file(Account::Admin, "0123abcd"),
            "[client]\nuser=\"moco-admin\"\npassword=\"0123abcd\"\n"
        );
        assert_eq!(
            client_option_file(Account::Exporter, "p"),
            "[client]\nuser=\"moco-exporter\"\npassword=\"p\"\nsocket=\"/run/mysqld.sock\"\n"
        );
    }
}
