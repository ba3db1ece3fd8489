//! Reading MariaDB binary log files, only as far as archiving and point-in-time restore need:
//! the GTID state a file starts from (its `Gtid_list` event) and each transaction's GTID with
//! its commit second (the header timestamp of its GTID event, which MariaDB writes at commit).
//! No crate reads MariaDB's GTID events (mysql_common knows MySQL's only), and the two layouts
//! are small, so they are read here by hand.
//!
//! Layout: the magic `\xfebin`, then events, each a 19-byte header (timestamp u32, type u8,
//! server_id u32, length u32, next position u32, flags u16; little-endian) and a body.
//! `GTID_EVENT` (162) starts with seq_no u64 and domain u32; `GTID_LIST_EVENT` (163) with a
//! count u32 (low 28 bits) and then `count` × (domain u32, server_id u32, seq_no u64).

use std::fmt;
use std::io::{self, Read};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The first four bytes of every binary log file.
pub const MAGIC: [u8; 4] = [0xfe, b'b', b'i', b'n'];
const HEADER_LEN: u32 = 19;
const GTID_EVENT: u8 = 162;
const GTID_LIST_EVENT: u8 = 163;
/// Largest event accepted (MariaDB's `max_allowed_packet` ceiling is 1 GiB).
const MAX_EVENT_LEN: u32 = 1 << 30;
/// Most entries read from one `Gtid_list` event (one per domain and server in the history).
const MAX_LIST_ENTRIES: u32 = 65_536;

/// One MariaDB GTID: `domain-server-seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gtid {
    /// `gtid_domain_id`.
    pub domain: u32,
    /// The originating `server_id`.
    pub server_id: u32,
    /// The sequence number in the domain.
    pub seq: u64,
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.domain, self.server_id, self.seq)
    }
}

/// Text that is not one `domain-server-seq` GTID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a MariaDB GTID (domain-server-seq)")]
pub struct GtidError {
    /// The text.
    pub text: String,
}

impl FromStr for Gtid {
    type Err = GtidError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = || GtidError {
            text: text.to_owned(),
        };
        let mut parts = text.trim().splitn(3, '-');
        let mut next = || parts.next().ok_or_else(err);
        let domain = next()?.parse().map_err(|_| err())?;
        let server_id = next()?.parse().map_err(|_| err())?;
        let seq = next()?.parse().map_err(|_| err())?;
        Ok(Gtid {
            domain,
            server_id,
            seq,
        })
    }
}

impl Serialize for Gtid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Gtid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A MariaDB GTID position (`@@gtid_binlog_pos`): one entry per domain, comma-separated.
pub fn parse_position(text: &str) -> Result<Vec<Gtid>, GtidError> {
    text.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::parse)
        .collect()
}

/// One transaction of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transaction {
    /// Its GTID.
    pub gtid: Gtid,
    /// Its commit second (Unix time, UTC).
    pub time: u32,
}

/// What a file holds, for archiving and replay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileSummary {
    /// The binlog state the file starts from (its `Gtid_list` event): the last GTID of each
    /// domain and server before the file's first transaction.
    pub start_state: Vec<Gtid>,
    /// The file's transactions, in order.
    pub transactions: Vec<Transaction>,
    /// Bytes up to the end of the last whole event.
    pub whole_len: u64,
}

/// Bytes that are not a binary log file.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Reading failed.
    #[error("reading: {0}")]
    Io(#[from] io::Error),
    /// The file does not start with the binlog magic.
    #[error("not a binary log file (no \\xfebin magic)")]
    NotABinlog,
    /// An event is malformed.
    #[error("malformed event at byte {offset}: {what}")]
    Malformed {
        /// Where the event starts.
        offset: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// The file ends inside an event.
    #[error("the file ends inside the event at byte {offset}")]
    Truncated {
        /// Where the cut event starts.
        offset: u64,
    },
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` at a clean end of input before the first byte.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<Result<(), usize>> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => return Ok(Err(filled)),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Ok(()))
}

/// Reads a whole binary log file. A file that ends inside an event fails with
/// [`ParseError::Truncated`] unless `allow_partial_tail` (a file still being written), in
/// which case [`FileSummary::whole_len`] says where the whole events end.
pub fn summarize(
    mut input: impl Read,
    allow_partial_tail: bool,
) -> Result<FileSummary, ParseError> {
    let mut magic = [0u8; 4];
    if read_full(&mut input, &mut magic)?.is_err() || magic != MAGIC {
        return Err(ParseError::NotABinlog);
    }
    let mut summary = FileSummary {
        whole_len: 4,
        ..FileSummary::default()
    };
    let mut header = [0u8; HEADER_LEN as usize];
    loop {
        let offset = summary.whole_len;
        match read_full(&mut input, &mut header)? {
            Ok(()) => {}
            Err(0) => return Ok(summary),
            Err(_) if allow_partial_tail => return Ok(summary),
            Err(_) => return Err(ParseError::Truncated { offset }),
        }
        let time = u32_at(&header, 0);
        let kind = header[4];
        let server_id = u32_at(&header, 5);
        let len = u32_at(&header, 9);
        if !(HEADER_LEN..=MAX_EVENT_LEN).contains(&len) {
            return Err(ParseError::Malformed {
                offset,
                what: "event length out of range",
            });
        }
        let body_len = u64::from(len - HEADER_LEN);
        // Only the first bytes of a body matter; they are read, the rest skipped.
        let wanted: u64 = match kind {
            GTID_EVENT => 12,
            GTID_LIST_EVENT => 4,
            _ => 0,
        };
        if body_len < wanted {
            return Err(ParseError::Malformed {
                offset,
                what: "event shorter than its fixed part",
            });
        }
        let mut head = vec![0u8; wanted as usize];
        let mut rest = body_len - wanted;
        let cut = match read_full(&mut input, &mut head)? {
            Ok(()) => false,
            Err(_) => true,
        };
        let mut list = Vec::new();
        if !cut && kind == GTID_LIST_EVENT {
            let count = u32_at(&head, 0) & 0x0fff_ffff;
            if count > MAX_LIST_ENTRIES || u64::from(count) * 16 > rest {
                return Err(ParseError::Malformed {
                    offset,
                    what: "Gtid_list count does not fit the event",
                });
            }
            let mut entries = vec![0u8; count as usize * 16];
            if read_full(&mut input, &mut entries)?.is_err() {
                return Err(ParseError::Truncated { offset });
            }
            rest -= entries.len() as u64;
            list = entries
                .chunks_exact(16)
                .map(|e| Gtid {
                    domain: u32_at(e, 0),
                    server_id: u32_at(e, 4),
                    seq: u64_at(e, 8),
                })
                .collect();
        }
        let skipped = if cut {
            0
        } else {
            io::copy(&mut (&mut input).take(rest), &mut io::sink())?
        };
        if cut || skipped < rest {
            if allow_partial_tail {
                return Ok(summary);
            }
            return Err(ParseError::Truncated { offset });
        }
        match kind {
            GTID_EVENT => summary.transactions.push(Transaction {
                gtid: Gtid {
                    domain: u32_at(&head, 8),
                    server_id,
                    seq: u64_at(&head, 0),
                },
                time,
            }),
            GTID_LIST_EVENT
                if summary.start_state.is_empty() && summary.transactions.is_empty() =>
            {
                summary.start_state = list;
            }
            _ => {}
        }
        summary.whole_len = offset + u64::from(len);
    }
}

/// [`summarize`] of a whole file on disk, off the async threads; the error as text.
pub async fn summarize_file(path: &std::path::Path) -> Result<FileSummary, String> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let file = std::fs::File::open(&path).map_err(|e| e.to_string())?;
        summarize(io::BufReader::new(file), false).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())?
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One event with `body`, as MariaDB lays it out (no checksum: the reader does not look).
    pub(crate) fn event(time: u32, kind: u8, server_id: u32, body: &[u8]) -> Vec<u8> {
        let len = HEADER_LEN + body.len() as u32;
        let mut out = Vec::new();
        out.extend(time.to_le_bytes());
        out.push(kind);
        out.extend(server_id.to_le_bytes());
        out.extend(len.to_le_bytes());
        out.extend(0u32.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(body);
        out
    }

    pub(crate) fn gtid_event(time: u32, g: Gtid) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend(g.seq.to_le_bytes());
        body.extend(g.domain.to_le_bytes());
        body.push(0); // flags
        body.extend([0u8; 6]); // the rest of a real event's fixed part
        event(time, GTID_EVENT, g.server_id, &body)
    }

    pub(crate) fn list_event(state: &[Gtid]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend((state.len() as u32).to_le_bytes());
        for g in state {
            body.extend(g.domain.to_le_bytes());
            body.extend(g.server_id.to_le_bytes());
            body.extend(g.seq.to_le_bytes());
        }
        event(0, GTID_LIST_EVENT, 1, &body)
    }

    /// A file: the format description, the start state, and each transaction as a GTID event
    /// followed by a query event.
    pub(crate) fn file(state: &[Gtid], txns: &[(u32, Gtid)]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend(event(1, 15, 1, &[0u8; 100]));
        out.extend(list_event(state));
        for &(time, g) in txns {
            out.extend(gtid_event(time, g));
            out.extend(event(time, 2, g.server_id, b"INSERT INTO t VALUES (1)"));
            out.extend(event(time, 16, g.server_id, &[0u8; 8]));
        }
        out
    }

    pub(crate) fn g(domain: u32, server_id: u32, seq: u64) -> Gtid {
        Gtid {
            domain,
            server_id,
            seq,
        }
    }

    #[test]
    fn reads_the_start_state_and_each_transaction_with_its_second() {
        let bytes = file(
            &[g(0, 1, 1504), g(0, 2, 17)],
            &[
                (100, g(0, 1, 1505)),
                (101, g(0, 1, 1506)),
                (103, g(0, 3, 1507)),
            ],
        );
        let s = summarize(&bytes[..], false).unwrap();
        assert_eq!(s.start_state, [g(0, 1, 1504), g(0, 2, 17)]);
        assert_eq!(
            s.transactions,
            [
                Transaction {
                    gtid: g(0, 1, 1505),
                    time: 100
                },
                Transaction {
                    gtid: g(0, 1, 1506),
                    time: 101
                },
                Transaction {
                    gtid: g(0, 3, 1507),
                    time: 103
                },
            ]
        );
        assert_eq!(s.whole_len, bytes.len() as u64);
    }

    #[test]
    fn a_cut_file_is_refused_unless_a_partial_tail_is_expected() {
        let bytes = file(&[], &[(100, g(0, 1, 1)), (101, g(0, 1, 2))]);
        let whole = summarize(&bytes[..], false).unwrap();
        for cut in [bytes.len() - 1, bytes.len() - 30, bytes.len() - 50] {
            assert!(matches!(
                summarize(&bytes[..cut], false),
                Err(ParseError::Truncated { .. })
            ));
            let partial = summarize(&bytes[..cut], true).unwrap();
            assert!(partial.whole_len <= cut as u64);
            assert!(partial.transactions.len() <= whole.transactions.len());
            // What a partial read keeps re-reads whole.
            let again = summarize(&bytes[..partial.whole_len as usize], false).unwrap();
            assert_eq!(again, partial);
        }
    }

    #[test]
    fn other_bytes_are_refused() {
        assert!(matches!(
            summarize(&b"hello"[..], false),
            Err(ParseError::NotABinlog)
        ));
        let mut bad = MAGIC.to_vec();
        bad.extend(event(1, 15, 1, &[]));
        bad[13..17].copy_from_slice(&3u32.to_le_bytes()); // length below the header
        assert!(matches!(
            summarize(&bad[..], false),
            Err(ParseError::Malformed { .. })
        ));
        let mut list = MAGIC.to_vec();
        list.extend(event(0, GTID_LIST_EVENT, 1, &1000u32.to_le_bytes()));
        assert!(matches!(
            summarize(&list[..], false),
            Err(ParseError::Malformed { .. })
        ));
    }

    #[test]
    fn gtids_read_and_print_as_mariadb_writes_them() {
        let parsed: Gtid = "0-12-1505".parse().unwrap();
        assert_eq!(parsed, g(0, 12, 1505));
        assert_eq!(parsed.to_string(), "0-12-1505");
        for bad in ["", "0-1", "a-1-2", "0-1-2-3", "0--1"] {
            assert!(bad.parse::<Gtid>().is_err(), "{bad}");
        }
    }
}
