//! A rotation of MOCO's passwords as the controller's password Secret (`mysql-<ns>.<name>` in
//! the controller namespace) keeps it, so that one interrupted by an operator restart resumes
//! with the passwords it drew:
//!
//! * its usual keys (`ADMIN_PASSWORD`, …) are what every reader is given: the old passwords
//!   while [`RotationPhase::Drawn`], the new ones once [`RotationPhase::Published`] (the
//!   reconciler copies them to `moco-<name>` and `moco-my-cnf-<name>`);
//! * `ROTATION_OLD_<KEY>` and `ROTATION_NEW_<KEY>` hold both sets for the whole rotation;
//! * annotations hold the phase ([`PHASE_ANNOTATION`]), the replicas whose channel was
//!   re-pointed ([`CHANNELS_ANNOTATION`]) and the request served ([`REQUEST_ANNOTATION`]:
//!   the value of the MySQLCluster's `moco-rs/rotate-passwords` that started the last one).
//!
//! Every write is a merge patch carrying the Secret's `resourceVersion`: the reconciler (which
//! begins a rotation) and the manager (which advances it) never overwrite each other.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Secret;
use moco_cluster::ports::{PasswordPair, RotationRecord};
use moco_core::moco_accounts::{Account, MocoPasswords};
use moco_core::rotation::RotationPhase;
use serde_json::{Map, Value, json};

/// The phase of the rotation in progress (absent: none).
pub const PHASE_ANNOTATION: &str = "moco-rs/password-rotation";
/// The replicas whose channel uses the new replication password, comma-separated ordinals.
pub const CHANNELS_ANNOTATION: &str = "moco-rs/password-rotation-channels";
/// The request the last rotation served.
pub const REQUEST_ANNOTATION: &str = "moco-rs/password-rotation-request";
/// When the manager first saw the cluster's Secrets hold the new passwords (RFC 3339): a
/// Pod created after it resolved its environment from them.
pub const SECRETS_MOVED_ANNOTATION: &str = "moco-rs/password-rotation-secrets-moved-at";

const OLD_PREFIX: &str = "ROTATION_OLD_";
const NEW_PREFIX: &str = "ROTATION_NEW_";

/// A Secret whose rotation fields cannot be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RotationFormatError {
    /// The phase annotation holds something else.
    #[error("annotation {PHASE_ANNOTATION} is {0:?}, not \"drawn\" or \"published\"")]
    Phase(String),
    /// The channels annotation holds something else.
    #[error("annotation {CHANNELS_ANNOTATION} is {0:?}, not comma-separated ordinals")]
    Channels(String),
    /// A key of a rotation in progress is missing.
    #[error("key {0} is missing, empty or not UTF-8 while a rotation is in progress")]
    Key(String),
}

fn annotations(secret: &Secret) -> BTreeMap<String, String> {
    secret.metadata.annotations.clone().unwrap_or_default()
}

fn data(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}

/// The passwords under `prefix` + each account's key.
fn prefixed(secret: &Secret, prefix: &str) -> Result<MocoPasswords, RotationFormatError> {
    let data: BTreeMap<String, Vec<u8>> = data(secret)
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(prefix)?.to_owned(), v)))
        .collect();
    MocoPasswords::from_secret_data(&data)
        .map_err(|key| RotationFormatError::Key(format!("{prefix}{key}")))
}

/// The rotation in progress that `secret` records, if any.
pub fn read(secret: &Secret) -> Result<Option<RotationRecord>, RotationFormatError> {
    let annotations = annotations(secret);
    let Some(phase) = annotations.get(PHASE_ANNOTATION) else {
        return Ok(None);
    };
    let phase =
        RotationPhase::parse(phase).ok_or_else(|| RotationFormatError::Phase(phase.clone()))?;
    let channels = match annotations.get(CHANNELS_ANNOTATION).map(String::as_str) {
        None | Some("") => BTreeSet::new(),
        Some(text) => text
            .split(',')
            .map(|s| s.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| RotationFormatError::Channels(text.to_owned()))?,
    };
    let old = prefixed(secret, OLD_PREFIX)?;
    let new = prefixed(secret, NEW_PREFIX)?;
    let pairs = Account::ALL
        .iter()
        .map(|a| PasswordPair {
            account: a.name().to_owned(),
            old: old.get(*a).to_owned(),
            new: new.get(*a).to_owned(),
        })
        .collect();
    Ok(Some(RotationRecord {
        phase,
        channels_moved: channels,
        pairs,
    }))
}

/// The request the last rotation served, if any.
pub fn served_request(secret: &Secret) -> Option<String> {
    annotations(secret).get(REQUEST_ANNOTATION).cloned()
}

fn b64(text: &str) -> Value {
    use base64::Engine as _;
    Value::from(base64::engine::general_purpose::STANDARD.encode(text))
}

/// The merge patch's metadata: `resourceVersion` (the precondition) and `annotations`.
fn patch(secret: &Secret, annotations: Value, data: Map<String, Value>) -> Value {
    json!({
        "metadata": {
            "resourceVersion": secret.metadata.resource_version,
            "annotations": annotations,
        },
        "data": data,
    })
}

/// Begins the rotation requested by `request` with the `new` passwords: both sets stored,
/// the readers' keys unchanged.
pub fn begin_patch(
    secret: &Secret,
    current: &MocoPasswords,
    new: &MocoPasswords,
    request: &str,
) -> Value {
    let mut data = Map::new();
    for a in Account::ALL {
        data.insert(
            format!("{OLD_PREFIX}{}", a.secret_key()),
            b64(current.get(a)),
        );
        data.insert(format!("{NEW_PREFIX}{}", a.secret_key()), b64(new.get(a)));
    }
    patch(
        secret,
        json!({
            PHASE_ANNOTATION: RotationPhase::Drawn.as_str(),
            CHANNELS_ANNOTATION: null,
            SECRETS_MOVED_ANNOTATION: null,
            REQUEST_ANNOTATION: request,
        }),
        data,
    )
}

/// Gives the readers' keys the new passwords.
pub fn publish_patch(secret: &Secret, record: &RotationRecord) -> Value {
    let mut data = Map::new();
    for pair in &record.pairs {
        if let Some(a) = Account::ALL.iter().find(|a| a.name() == pair.account) {
            data.insert(a.secret_key().to_owned(), b64(&pair.new));
        }
    }
    patch(
        secret,
        json!({ PHASE_ANNOTATION: RotationPhase::Published.as_str() }),
        data,
    )
}

/// Records replica `index`'s channel as re-pointed.
pub fn channel_patch(secret: &Secret, moved: &BTreeSet<u32>, index: u32) -> Value {
    let mut all = moved.clone();
    all.insert(index);
    let text: Vec<String> = all.iter().map(u32::to_string).collect();
    patch(
        secret,
        json!({ CHANNELS_ANNOTATION: text.join(",") }),
        Map::new(),
    )
}

/// When the cluster's Secrets were first seen holding the new passwords, if recorded.
pub fn secrets_moved_at(secret: &Secret) -> Option<String> {
    annotations(secret).get(SECRETS_MOVED_ANNOTATION).cloned()
}

/// Records `at` as when the cluster's Secrets were first seen holding the new passwords.
pub fn secrets_moved_patch(secret: &Secret, at: &str) -> Value {
    patch(secret, json!({ SECRETS_MOVED_ANNOTATION: at }), Map::new())
}

/// Forgets the old and new sets: the readers' keys hold the passwords.
pub fn finish_patch(secret: &Secret) -> Value {
    let mut data = Map::new();
    for a in Account::ALL {
        data.insert(format!("{OLD_PREFIX}{}", a.secret_key()), Value::Null);
        data.insert(format!("{NEW_PREFIX}{}", a.secret_key()), Value::Null);
    }
    patch(
        secret,
        json!({
            PHASE_ANNOTATION: null,
            CHANNELS_ANNOTATION: null,
            SECRETS_MOVED_ANNOTATION: null,
        }),
        data,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret_with(passwords: &MocoPasswords) -> Secret {
        let data = Account::ALL
            .iter()
            .map(|a| {
                (
                    a.secret_key().to_owned(),
                    ByteString(passwords.get(*a).as_bytes().to_vec()),
                )
            })
            .collect();
        let mut s = Secret {
            data: Some(data),
            ..Secret::default()
        };
        s.metadata.resource_version = Some("7".into());
        s
    }

    /// Applies a merge patch's annotations and data as the API server would (base64 decoded).
    fn apply(secret: &mut Secret, patch: &Value) {
        use base64::Engine as _;
        let annotations = secret
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        for (k, v) in patch["metadata"]["annotations"].as_object().unwrap() {
            match v.as_str() {
                Some(v) => {
                    annotations.insert(k.clone(), v.to_owned());
                }
                None => {
                    annotations.remove(k);
                }
            }
        }
        let data = secret.data.get_or_insert_with(BTreeMap::new);
        for (k, v) in patch["data"].as_object().unwrap() {
            match v.as_str() {
                Some(v) => {
                    let bytes = base64::engine::general_purpose::STANDARD.decode(v).unwrap();
                    data.insert(k.clone(), ByteString(bytes));
                }
                None => {
                    data.remove(k);
                }
            }
        }
        assert_eq!(
            patch["metadata"]["resourceVersion"], "7",
            "every patch is conditional"
        );
    }

    #[test]
    fn a_rotation_is_begun_published_moved_and_finished_through_the_secret() {
        let old = moco_adapters::mysql::generate_passwords().unwrap();
        let new = moco_adapters::mysql::generate_passwords().unwrap();
        let mut s = secret_with(&old);
        assert_eq!(read(&s), Ok(None));
        let p = begin_patch(&s, &old, &new, "2026-11-29T18:00:00Z");
        apply(&mut s, &p);
        let r = read(&s).unwrap().unwrap();
        assert_eq!(r.phase, RotationPhase::Drawn);
        assert_eq!(r.pairs.len(), 8);
        let admin = r.pairs.iter().find(|p| p.account == "moco-admin").unwrap();
        assert_eq!(
            (admin.old.as_str(), admin.new.as_str()),
            (old.admin.as_str(), new.admin.as_str())
        );
        assert_eq!(served_request(&s).as_deref(), Some("2026-11-29T18:00:00Z"));
        // The readers' keys still hold the old passwords.
        assert_eq!(MocoPasswords::from_secret_data(&data(&s)).unwrap(), old);

        let p = publish_patch(&s, &r);
        apply(&mut s, &p);
        assert_eq!(MocoPasswords::from_secret_data(&data(&s)).unwrap(), new);
        let p = channel_patch(&s, &BTreeSet::new(), 2);
        apply(&mut s, &p);
        let p = channel_patch(&s, &read(&s).unwrap().unwrap().channels_moved, 1);
        apply(&mut s, &p);
        let r = read(&s).unwrap().unwrap();
        assert_eq!(r.phase, RotationPhase::Published);
        assert_eq!(r.channels_moved, BTreeSet::from([1, 2]));

        let p = secrets_moved_patch(&s, "2026-11-29T18:01:00Z");
        apply(&mut s, &p);
        assert_eq!(
            secrets_moved_at(&s).as_deref(),
            Some("2026-11-29T18:01:00Z")
        );
        let p = finish_patch(&s);
        apply(&mut s, &p);
        assert_eq!(read(&s), Ok(None));
        assert!(
            data(&s).keys().all(|k| !k.starts_with("ROTATION_")),
            "{:?}",
            data(&s).keys()
        );
        assert_eq!(MocoPasswords::from_secret_data(&data(&s)).unwrap(), new);
        assert_eq!(served_request(&s).as_deref(), Some("2026-11-29T18:00:00Z"));
    }

    #[test]
    fn a_damaged_rotation_is_an_error_naming_what() {
        let p = moco_adapters::mysql::generate_passwords().unwrap();
        let mut s = secret_with(&p);
        s.metadata.annotations = Some(BTreeMap::from([(PHASE_ANNOTATION.into(), "done".into())]));
        assert_eq!(read(&s), Err(RotationFormatError::Phase("done".into())));
        s.metadata.annotations = Some(BTreeMap::from([(PHASE_ANNOTATION.into(), "drawn".into())]));
        assert!(
            matches!(read(&s), Err(RotationFormatError::Key(k)) if k == "ROTATION_OLD_ADMIN_PASSWORD")
        );
    }
}
