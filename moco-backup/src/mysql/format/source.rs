//! Choosing the instance a backup is taken from, and whether it fetches the binlogs since the
//! previous backup: MOCO's `ChoosePod` with the `uuidSet` rule of #604, from what
//! `status.backup` recorded ([`PreviousBackup`]) and the instances ready now.

use std::collections::BTreeMap;

use moco_core::facts::Role;
use moco_core::time::Timestamp;

use super::FormatError;

/// The warning MOCO records in `status.backup.warnings` when no instance is known to hold
/// every binlog since the last backup (#603).
pub const SKIP_BINLOG_WARNING: &str =
    "skip binlog backups because some binlog files may be missing";

/// The previous backup, from `status.backup` of the MySQLCluster: what the next backup
/// continues from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreviousBackup {
    /// `time`: when it started; `None` when there has been no backup.
    pub time: Option<Timestamp>,
    /// `sourceIndex`: the instance it was taken from.
    pub source_index: u32,
    /// `sourceUUID`: that instance's `server_uuid` then.
    pub source_uuid: String,
    /// `uuidSet`: the `server_uuid` of every instance ready then, by ordinal as text (MOCO's
    /// JSON map). Empty in statuses written before MOCO had it (#604).
    pub uuid_set: BTreeMap<String, String>,
    /// `binlogFilename`: the source's current binlog file when the backup started.
    pub binlog_filename: String,
    /// `gtidSet`: `gtid_executed` of the dump, as MOCO stored it.
    pub gtid_set: String,
}

/// An instance that is ready now (its Pod's Ready condition is true), with what the backup Job
/// read from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadyInstance {
    /// Its ordinal.
    pub index: u32,
    /// Its `@@server_uuid` now.
    pub server_uuid: String,
    /// Primary or replica (the cluster's `status.currentPrimaryIndex`).
    pub role: Role,
}

/// Where a backup is taken from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceChoice {
    /// The instance to dump.
    pub index: u32,
    /// Whether the binlogs since the previous backup are fetched too.
    pub take_binlog: bool,
    /// For `status.backup.warnings`: [`SKIP_BINLOG_WARNING`] when binlogs are skipped although
    /// there was a previous backup.
    pub warning: Option<&'static str>,
    /// The new `status.backup.uuidSet`: every ready instance's `server_uuid`.
    pub uuid_set: BTreeMap<String, String>,
}

/// MOCO's choice of the instance to back up (`ChoosePod`, with the `uuidSet` rule of #604).
///
/// Backups come from a replica when one is ready, so the primary does not carry the load. The
/// binlogs since the previous backup are only complete on an instance that has kept its
/// `server_uuid` since then: a re-initialised (re-cloned) instance lost its old binlogs, and
/// fetching from it left gaps after a source change (#603). So:
///
/// * First backup: the first ready replica by ordinal, else the primary if ready; no binlogs.
/// * Later: the candidates are the ready instances whose `server_uuid` is the one recorded in
///   `uuidSet` (or, for a status written before `uuidSet` existed, the recorded source's
///   `sourceUUID`). None: [`SKIP_BINLOG_WARNING`], and the first-backup choice without
///   binlogs. Otherwise the previous source if it is still a candidate and a replica, else the
///   first candidate replica, else the primary (then a candidate); binlogs are taken.
///
/// No ready instance that may be chosen is [`FormatError::NoReadyInstance`].
pub fn choose_source(
    previous: &PreviousBackup,
    ready: &[ReadyInstance],
) -> Result<SourceChoice, FormatError> {
    let mut ready: Vec<&ReadyInstance> = ready.iter().collect();
    ready.sort_by_key(|i| i.index);
    ready.dedup_by_key(|i| i.index);
    let uuid_set: BTreeMap<String, String> = ready
        .iter()
        .map(|i| (i.index.to_string(), i.server_uuid.clone()))
        .collect();

    let first_choice = |warning| {
        ready
            .iter()
            .find(|i| i.role == Role::Replica)
            .or_else(|| ready.iter().find(|i| i.role == Role::Primary))
            .map(|i| SourceChoice {
                index: i.index,
                take_binlog: false,
                warning,
                uuid_set: uuid_set.clone(),
            })
            .ok_or(FormatError::NoReadyInstance)
    };
    if previous.time.is_none() {
        return first_choice(None);
    }

    let recorded: BTreeMap<u32, &str> = if previous.uuid_set.is_empty() {
        BTreeMap::from([(previous.source_index, previous.source_uuid.as_str())])
    } else {
        // Keys that are not ordinals never match, as in MOCO.
        previous
            .uuid_set
            .iter()
            .filter_map(|(k, v)| Some((k.parse::<u32>().ok()?, v.as_str())))
            .collect()
    };
    let candidates: Vec<&ReadyInstance> = ready
        .iter()
        .copied()
        .filter(|i| recorded.get(&i.index) == Some(&i.server_uuid.as_str()))
        .collect();
    if candidates.is_empty() {
        return first_choice(Some(SKIP_BINLOG_WARNING));
    }
    let chosen = candidates
        .iter()
        .find(|i| i.index == previous.source_index && i.role == Role::Replica)
        .or_else(|| candidates.iter().find(|i| i.role == Role::Replica))
        .or_else(|| candidates.iter().find(|i| i.role == Role::Primary))
        .ok_or(FormatError::NoReadyInstance)?;
    Ok(SourceChoice {
        index: chosen.index,
        take_binlog: true,
        warning: None,
        uuid_set,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::test_support::t;
    use super::*;

    // MOCO's TestChoosePod table, plus the #603 cases.

    /// Ready instances `ready` (ordinal, uuid) with `primary` as the primary.
    fn instances(primary: u32, ready: &[(u32, &str)]) -> Vec<ReadyInstance> {
        ready
            .iter()
            .map(|&(index, uuid)| ReadyInstance {
                index,
                server_uuid: uuid.into(),
                role: if index == primary {
                    Role::Primary
                } else {
                    Role::Replica
                },
            })
            .collect()
    }

    pub(in crate::mysql::format) fn previous(
        source: u32,
        source_uuid: &str,
        uuid_set: &[(&str, &str)],
    ) -> PreviousBackup {
        PreviousBackup {
            time: Some(t("2024-05-01T00:00:00Z")),
            source_index: source,
            source_uuid: source_uuid.into(),
            uuid_set: uuid_set
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            binlog_filename: "binlog.000003".into(),
            gtid_set: String::new(),
        }
    }

    #[test]
    fn source_choice_table() {
        let first = PreviousBackup::default();
        let all3 = [(0, "uuid-0"), (1, "uuid-1"), (2, "uuid-2")];
        let set3 = [("0", "uuid-0"), ("1", "uuid-1"), ("2", "uuid-2")];
        type Case<'a> = (
            &'a str,
            PreviousBackup,
            Vec<ReadyInstance>,
            Result<(u32, bool, bool), FormatError>,
        );
        let cases: Vec<Case> = vec![
            (
                "single",
                first.clone(),
                instances(0, &[(0, "uuid-0")]),
                Ok((0, false, false)),
            ),
            (
                "single-not-ready",
                first.clone(),
                vec![],
                Err(FormatError::NoReadyInstance),
            ),
            (
                "triple-ready",
                first.clone(),
                instances(0, &[(0, "uuid-0"), (2, "uuid-2")]),
                Ok((2, false, false)),
            ),
            (
                "triple-some-not-ready",
                first.clone(),
                instances(1, &[(1, "uuid-1")]),
                Ok((1, false, false)),
            ),
            (
                "triple-all-not-ready",
                first.clone(),
                vec![],
                Err(FormatError::NoReadyInstance),
            ),
            (
                "triple-last-uuid-set-is-empty",
                previous(2, "uuid-2", &[]),
                instances(1, &all3),
                Ok((2, true, false)),
            ),
            (
                "triple-last-uuid-set-is-empty-source-uuid-changed",
                previous(2, "uuid-b", &[]),
                instances(1, &all3),
                Ok((0, false, true)),
            ),
            (
                "single-2nd",
                previous(0, "uuid-0", &[("0", "uuid-0")]),
                instances(0, &[(0, "uuid-0")]),
                Ok((0, true, false)),
            ),
            (
                "single-2nd-uuid-changed",
                previous(0, "uuid-a", &[("0", "uuid-a")]),
                instances(0, &[(0, "uuid-0")]),
                Ok((0, false, true)),
            ),
            (
                "single-2nd-not-ready",
                previous(0, "uuid-0", &[("0", "uuid-0")]),
                vec![],
                Err(FormatError::NoReadyInstance),
            ),
            (
                "triple-2nd",
                previous(1, "uuid-1", &set3),
                instances(0, &all3),
                Ok((1, true, false)),
            ),
            (
                "triple-2nd-uuid-changed",
                previous(
                    1,
                    "uuid-b",
                    &[("0", "uuid-0"), ("1", "uuid-b"), ("2", "uuid-2")],
                ),
                instances(0, &all3),
                Ok((2, true, false)),
            ),
            (
                "triple-2nd-last-index-not-ready",
                previous(1, "uuid-1", &set3),
                instances(0, &[(0, "uuid-0"), (2, "uuid-2")]),
                Ok((2, true, false)),
            ),
            (
                "triple-2nd-primary",
                previous(1, "uuid-1", &set3),
                instances(1, &all3),
                Ok((0, true, false)),
            ),
            (
                "triple-2nd-all-not-ready",
                previous(1, "uuid-1", &set3),
                vec![],
                Err(FormatError::NoReadyInstance),
            ),
            (
                "triple-2nd-replica-uuid-changed",
                previous(
                    1,
                    "uuid-a",
                    &[("0", "uuid-0"), ("1", "uuid-a"), ("2", "uuid-b")],
                ),
                instances(0, &all3),
                Ok((0, true, false)),
            ),
            (
                "triple-2nd-some-not-ready-and-uuid-changed-1",
                previous(
                    1,
                    "uuid-1",
                    &[("0", "uuid-a"), ("1", "uuid-1"), ("2", "uuid-b")],
                ),
                instances(0, &[(0, "uuid-0"), (2, "uuid-2")]),
                Ok((2, false, true)),
            ),
            (
                "triple-2nd-some-not-ready-and-uuid-changed-2",
                previous(
                    0,
                    "uuid-a",
                    &[("0", "uuid-a"), ("1", "uuid-1"), ("2", "uuid-b")],
                ),
                instances(0, &[(0, "uuid-0")]),
                Ok((0, false, true)),
            ),
            // The previous source stays while it is a candidate replica, even when a lower
            // ordinal is one too.
            (
                "triple-2nd-keeps-last-source",
                previous(2, "uuid-2", &set3),
                instances(0, &all3),
                Ok((2, true, false)),
            ),
            // #603: the previous source (1) was re-cloned; 2 kept its history, so it is the
            // source and its binlogs are complete; 1 would have had a gap.
            (
                "603-source-recloned",
                previous(1, "uuid-1", &set3),
                instances(0, &[(0, "uuid-0"), (1, "uuid-new"), (2, "uuid-2")]),
                Ok((2, true, false)),
            ),
            // Ordinal keys that are not numbers never match.
            (
                "garbage-keys",
                previous(0, "uuid-0", &[("zero", "uuid-0")]),
                instances(1, &[(0, "uuid-0"), (1, "uuid-1")]),
                Ok((0, false, true)),
            ),
        ];
        for (name, prev, ready, expected) in cases {
            let got = choose_source(&prev, &ready).map(|c| {
                (
                    c.index,
                    c.take_binlog,
                    c.warning == Some(SKIP_BINLOG_WARNING),
                )
            });
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn source_choice_records_every_ready_uuid() {
        let choice = choose_source(
            &PreviousBackup::default(),
            &instances(0, &[(2, "uuid-2"), (0, "uuid-0")]),
        )
        .unwrap();
        assert_eq!(
            choice.uuid_set,
            BTreeMap::from([
                ("0".to_string(), "uuid-0".to_string()),
                ("2".to_string(), "uuid-2".to_string())
            ])
        );
        assert_eq!(choice.warning, None);
    }
}
