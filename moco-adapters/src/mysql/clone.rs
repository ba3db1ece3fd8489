//! The SQL side of a MariaDB clone (mariadb-backup copy of a donor, restored and started).
//!
//! The copy holds the donor's data but no binlog, and the donor's `mysql.gtid_slave_pos`
//! table, which is stale. Before it replicates it needs the donor's GTID history as its
//! binlog state (errant detection and future replicas depend on it) and the copy's position
//! as its replica position. The position comes from the files mariadb-backup writes:
//! `xtrabackup_binlog_info` (primary donor) or `xtrabackup_slave_info` (replica donor with
//! `--slave-info`).

use moco_cluster::ports::PortError;
use moco_core::gtid::{GtidSet, SourceId};

use super::MysqlInstance;
use super::sql;
use moco_core::dialect::Dialect;

/// A backup info file that does not hold a GTID position.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct BackupInfoError {
    /// Which file.
    pub file: &'static str,
    /// What is wrong.
    pub message: String,
}

/// The GTID position in `xtrabackup_binlog_info` (`binlog.000001<TAB>11454526<TAB>0-2-3513`;
/// empty when the donor had no GTID yet).
pub fn parse_xtrabackup_binlog_info(text: &str) -> Result<GtidSet, BackupInfoError> {
    let err = |message: String| BackupInfoError {
        file: "xtrabackup_binlog_info",
        message,
    };
    let fields: Vec<&str> = text.split_whitespace().collect();
    if fields.len() < 2 {
        return Err(err(format!(
            "expected `file position [gtid]`, got {text:?}"
        )));
    }
    let position = fields[2..].concat();
    GtidSet::from_mariadb(&position).map_err(|e| err(format!("{position:?}: {e}")))
}

/// The position in `xtrabackup_slave_info`
/// (`SET GLOBAL gtid_slave_pos = '0-2-3581';` + `CHANGE MASTER …`).
pub fn parse_xtrabackup_slave_info(text: &str) -> Result<GtidSet, BackupInfoError> {
    let err = |message: String| BackupInfoError {
        file: "xtrabackup_slave_info",
        message,
    };
    let at = text
        .find("gtid_slave_pos")
        .ok_or_else(|| err(format!("no gtid_slave_pos in {text:?}")))?;
    let rest = &text[at..];
    let start = rest
        .find('\'')
        .ok_or_else(|| err(format!("no quoted position in {text:?}")))?;
    let value = &rest[start + 1..];
    let end = value
        .find('\'')
        .ok_or_else(|| err(format!("unterminated position in {text:?}")))?;
    GtidSet::from_mariadb(&value[..end]).map_err(|e| err(format!("{:?}: {e}", &value[..end])))
}

/// The binlog state a copy should start with: the donor's state (read right before the
/// backup) made consistent with the copy's `position`. In each domain of the position, the
/// position's server gets exactly the position's sequence number, and entries with a higher
/// sequence number are dropped: in strict mode sequence numbers only grow within a domain, so
/// those transactions came after the copy.
pub fn clone_binlog_state(donor_state: &GtidSet, position: &GtidSet) -> GtidSet {
    let mut tips: Vec<(u32, u32, u64)> = Vec::new();
    for source in position.sources() {
        if let (SourceId::MariaDb { domain, server_id }, Some(&(_, seq))) =
            (source, position.intervals(source).last())
        {
            tips.push((*domain, *server_id, seq));
        }
    }
    let mut out = GtidSet::new();
    for source in donor_state.sources() {
        let Some(&(_, seq)) = donor_state.intervals(source).last() else {
            continue;
        };
        match source {
            SourceId::MariaDb { domain, server_id } => {
                let tip = tips
                    .iter()
                    .filter(|(d, _, _)| d == domain)
                    .map(|&(_, s, n)| (s, n))
                    .max_by_key(|&(_, n)| n);
                match tip {
                    Some((_, tip_seq)) if seq > tip_seq => {}
                    Some((tip_server, _)) if tip_server == *server_id => {}
                    _ => out.insert_interval(source.clone(), 1, seq),
                }
            }
            SourceId::Uuid { .. } => {}
        }
    }
    for (domain, server_id, seq) in tips {
        out.insert_interval(SourceId::MariaDb { domain, server_id }, 1, seq);
    }
    out
}

/// Seeds a restored MariaDB copy before it replicates: clears replication, sets
/// `gtid_binlog_state` unless the copy started with it ([`sql::mariadb_seed_clone`]) and
/// `gtid_slave_pos`, then checks that the server reports exactly that state.
pub async fn seed_mariadb_clone(
    instance: &MysqlInstance,
    binlog_state: &GtidSet,
    slave_pos: &GtidSet,
) -> Result<(), PortError> {
    let d = instance.server_info().await?.dialect;
    if d != Dialect::Mariadb {
        return Err(instance.failed("MariaDB clone seeding on a MySQL server"));
    }
    instance
        .timed(
            "seed clone GTID state",
            Some(instance.opts.call_timeout),
            async {
                let mut conn = instance.conn().await?;
                let current = instance.executed_gtid_on(&mut conn, d).await?;
                let statements = sql::mariadb_seed_clone(binlog_state, slave_pos, &current);
                instance.exec_all(&mut conn, &statements).await?;
                let now = instance.executed_gtid_on(&mut conn, d).await?;
                let pos: String = instance
                    .value(&mut conn, "SELECT @@gtid_binlog_pos")
                    .await?;
                let want = binlog_state.mariadb_position();
                // The server keeps one sequence number per source: compare in that form.
                let want_state =
                    GtidSet::from_mariadb(&sql::mariadb_binlog_state_text(binlog_state))
                        .map_err(|e| instance.failed(format!("seed state: {e}")))?;
                if now != want_state || pos != want {
                    return Err(instance.failed(format!(
                        "seeded gtid_binlog_state {binlog_state} (position {want}) but the \
                         server reports {now} (position {pos})"
                    )));
                }
                Ok(())
            },
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> GtidSet {
        GtidSet::parse(s).unwrap()
    }

    #[test]
    fn binlog_info_files_parse() {
        assert_eq!(
            parse_xtrabackup_binlog_info("binlog.000001\t11454526\t0-2-3513\n").unwrap(),
            set("0-2-3513")
        );
        assert_eq!(
            parse_xtrabackup_binlog_info("binlog.000003\t385\t0-1-5,1-2-9").unwrap(),
            set("0-1-5,1-2-9")
        );
        assert!(
            parse_xtrabackup_binlog_info("binlog.000001\t4\n")
                .unwrap()
                .is_empty()
        );
        assert!(parse_xtrabackup_binlog_info("").is_err());
        let e = parse_xtrabackup_binlog_info("b 4 zz").unwrap_err();
        assert!(e.to_string().starts_with("xtrabackup_binlog_info:"), "{e}");
    }

    #[test]
    fn slave_info_file_parses() {
        let text = "SET GLOBAL gtid_slave_pos = '0-2-3581';\nCHANGE MASTER TO master_use_gtid = slave_pos;\n";
        assert_eq!(parse_xtrabackup_slave_info(text).unwrap(), set("0-2-3581"));
        assert!(parse_xtrabackup_slave_info("CHANGE MASTER TO x").is_err());
    }

    #[test]
    fn clone_state_matches_the_position() {
        // Donor state read before the backup; writes continued during it.
        let donor = set("0-1-2158,0-2-2900");
        let pos = set("0-2-2944");
        assert_eq!(clone_binlog_state(&donor, &pos), set("0-1-2158,0-2-2944"));
        // State read after the backup: later transactions are not in the copy.
        let donor = set("0-1-2158,0-2-2950,0-3-2960,1-4-7");
        assert_eq!(
            clone_binlog_state(&donor, &pos),
            set("0-1-2158,0-2-2944,1-4-7")
        );
        // Empty donor, empty position.
        assert!(clone_binlog_state(&GtidSet::new(), &GtidSet::new()).is_empty());
    }
}
