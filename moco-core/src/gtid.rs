//! GTID sets: MySQL's `uuid[:tag]:interval[,…]` text and MariaDB's `domain-server-seq` positions
//! in one model, with the set algebra MOCO otherwise asks the server for (`GTID_SUBTRACT`,
//! `GTID_SUBSET`).
//!
//! A set maps each *source* to a sorted list of disjoint, non-adjacent inclusive intervals of
//! transaction numbers. A MySQL source is a server UUID plus an optional tag (MySQL 8.4). A
//! MariaDB `domain-server-seq` entry of `@@gtid_binlog_state` becomes the source
//! `domain-server` with the interval `1-seq`: in strict mode a server's sequence numbers in a
//! domain only grow, so "the primary has `0-1-9`" covers every `0-1-n` with `n ≤ 9`, and the
//! errant rule (an entry the primary does not cover) becomes plain set subtraction.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// Who originated a transaction.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SourceId {
    /// A MySQL server: its `server_uuid` and an optional lower-case tag (MySQL 8.4).
    Uuid {
        /// The UUID as a 128-bit number.
        uuid: u128,
        /// The tag, lower case; empty for untagged GTIDs.
        tag: String,
    },
    /// A MariaDB server in one replication domain.
    MariaDb {
        /// `gtid_domain_id`.
        domain: u32,
        /// `server_id`.
        server_id: u32,
    },
}

impl SourceId {
    /// True when this source is the server identified by `identity` (tag and domain ignored).
    pub fn is_server(&self, identity: &ServerIdentity) -> bool {
        match (self, identity) {
            (SourceId::Uuid { uuid, .. }, ServerIdentity::Uuid(own)) => uuid == own,
            (SourceId::MariaDb { server_id, .. }, ServerIdentity::ServerId(own)) => {
                server_id == own
            }
            _ => false,
        }
    }
}

/// How a server names itself in GTIDs: `server_uuid` (MySQL) or `server_id` (MariaDB).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServerIdentity {
    /// MySQL `@@server_uuid`.
    Uuid(u128),
    /// MariaDB `@@server_id`.
    ServerId(u32),
}

/// A set of GTIDs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GtidSet {
    sources: BTreeMap<SourceId, Vec<(u64, u64)>>,
}

/// Text that is not a GTID set; `position` is the byte offset where parsing stopped.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid GTID set at byte {position}: {reason}")]
pub struct GtidParseError {
    /// Byte offset into the input.
    pub position: usize,
    /// What was expected there.
    pub reason: &'static str,
}

impl GtidSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses MySQL GTID-set text (`uuid:1-5:7,uuid2:tag:1-3`) or MariaDB positions
    /// (`0-1-5,0-2-7`); the two forms may be mixed. Whitespace and newlines around entries are
    /// ignored, as in `@@gtid_executed` output.
    pub fn parse(text: &str) -> Result<Self, GtidParseError> {
        // Intervals are gathered per source as they come and sorted and merged once at the
        // end: O(n log n) whatever their order (one merge per insert was quadratic).
        let mut pending = Pending::default();
        let mut offset = 0;
        for entry in text.split(',') {
            let start = offset + (entry.len() - entry.trim_start().len());
            offset += entry.len() + 1;
            let trimmed = entry.trim();
            if trimmed.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                return Err(GtidParseError {
                    position: start,
                    reason: "empty entry",
                });
            }
            parse_entry(trimmed, start, &mut pending)?;
        }
        let mut sources = pending.sources;
        for list in sources.values_mut() {
            normalize(list);
        }
        Ok(GtidSet { sources })
    }

    /// Builds a set from MariaDB's `@@gtid_binlog_state`-style text only.
    pub fn from_mariadb(text: &str) -> Result<Self, GtidParseError> {
        let set = Self::parse(text)?;
        if set
            .sources
            .keys()
            .any(|s| matches!(s, SourceId::Uuid { .. }))
        {
            return Err(GtidParseError {
                position: 0,
                reason: "expected MariaDB domain-server-seq entries",
            });
        }
        Ok(set)
    }

    /// True when the set holds no transaction.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// Adds the inclusive interval `start..=end` of `source` (ignored when `start > end` or
    /// `start == 0`, since transaction numbers start at 1). Only the intervals it touches are
    /// merged: appending after the last interval, the usual case, is O(1).
    pub fn insert_interval(&mut self, source: SourceId, start: u64, end: u64) {
        if start == 0 || start > end {
            return;
        }
        let list = self.sources.entry(source).or_default();
        // The intervals that overlap or touch `start..=end` form one run: from the first
        // that does not end before `start - 1` to the last that starts by `end + 1`.
        let first = list.partition_point(|&(_, b)| b.saturating_add(1) < start);
        let last = list.partition_point(|&(a, _)| a <= end.saturating_add(1));
        if first == last {
            list.insert(first, (start, end));
        } else {
            let merged = (start.min(list[first].0), end.max(list[last - 1].1));
            list.splice(first..last, [merged]);
        }
    }

    /// True when the set holds transaction `number` of `source`.
    pub fn contains(&self, source: &SourceId, number: u64) -> bool {
        self.sources.get(source).is_some_and(|l| {
            let i = l.partition_point(|&(_, b)| b < number);
            l.get(i).is_some_and(|&(a, _)| a <= number)
        })
    }

    /// The sources present, in canonical order.
    pub fn sources(&self) -> impl Iterator<Item = &SourceId> {
        self.sources.keys()
    }

    /// The intervals of one source.
    pub fn intervals(&self, source: &SourceId) -> &[(u64, u64)] {
        self.sources.get(source).map_or(&[], Vec::as_slice)
    }

    /// Number of transactions in the set (saturating).
    pub fn transaction_count(&self) -> u128 {
        self.sources
            .values()
            .flatten()
            .fold(0u128, |n, &(a, b)| n.saturating_add(u128::from(b - a) + 1))
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &GtidSet) -> GtidSet {
        let mut out = self.clone();
        for (source, list) in &other.sources {
            let mine = out.sources.entry(source.clone()).or_default();
            mine.extend_from_slice(list);
            normalize(mine);
        }
        out
    }

    /// `self − other` (MySQL's `GTID_SUBTRACT(self, other)`).
    pub fn subtract(&self, other: &GtidSet) -> GtidSet {
        let mut out = GtidSet::new();
        for (source, list) in &self.sources {
            let rest = match other.sources.get(source) {
                None => list.clone(),
                Some(remove) => subtract_intervals(list, remove),
            };
            if !rest.is_empty() {
                out.sources.insert(source.clone(), rest);
            }
        }
        out
    }

    /// `self ∩ other`.
    pub fn intersection(&self, other: &GtidSet) -> GtidSet {
        self.subtract(&self.subtract(other))
    }

    /// True when every GTID of `self` is in `other` (MySQL's `GTID_SUBSET(self, other)`).
    pub fn is_subset(&self, other: &GtidSet) -> bool {
        self.subtract(other).is_empty()
    }

    /// The set without the transactions of `identity`'s own sources.
    pub fn without_server(&self, identity: &ServerIdentity) -> GtidSet {
        GtidSet {
            sources: self
                .sources
                .iter()
                .filter(|(s, _)| !s.is_server(identity))
                .map(|(s, l)| (s.clone(), l.clone()))
                .collect(),
        }
    }

    /// MariaDB position for `MASTER_GTID_WAIT` and `gtid_slave_pos`: per domain, the entry with
    /// the highest sequence number (strict mode keeps sequence numbers increasing per domain).
    /// UUID sources are skipped.
    pub fn mariadb_position(&self) -> String {
        let mut best: BTreeMap<u32, (u64, u32)> = BTreeMap::new();
        for (source, list) in &self.sources {
            if let (SourceId::MariaDb { domain, server_id }, Some(&(_, end))) =
                (source, list.last())
            {
                let slot = best.entry(*domain).or_insert((end, *server_id));
                if end > slot.0 {
                    *slot = (end, *server_id);
                }
            }
        }
        let mut out = String::new();
        for (domain, (seq, server)) in best {
            if !out.is_empty() {
                out.push(',');
            }
            let _ = write!(out, "{domain}-{server}-{seq}");
        }
        out
    }

    /// MariaDB `gtid_binlog_state` text: `domain-server-seq` per source, with the highest
    /// sequence number of each. UUID sources are skipped.
    pub fn mariadb_state(&self) -> String {
        let mut out = String::new();
        for (source, list) in &self.sources {
            if let (SourceId::MariaDb { domain, server_id }, Some(&(_, end))) =
                (source, list.last())
            {
                if !out.is_empty() {
                    out.push(',');
                }
                let _ = write!(out, "{domain}-{server_id}-{end}");
            }
        }
        out
    }
}

/// Most distinct sources (server UUIDs with their tags, MariaDB domain-server pairs) a parsed
/// set may hold. A real cluster's history holds a handful to hundreds; the bound keeps hostile
/// text (millions of `d-s-n` entries, each a source) from taking gigabytes.
pub const MAX_GTID_SOURCES: usize = 65_536;

/// Intervals gathered while parsing, not yet sorted or merged.
#[derive(Default)]
struct Pending {
    sources: BTreeMap<SourceId, Vec<(u64, u64)>>,
}

impl Pending {
    fn push(
        &mut self,
        source: SourceId,
        start: u64,
        end: u64,
        position: usize,
    ) -> Result<(), GtidParseError> {
        if self.sources.len() >= MAX_GTID_SOURCES && !self.sources.contains_key(&source) {
            return Err(GtidParseError {
                position,
                reason: "more than 65536 sources",
            });
        }
        self.sources.entry(source).or_default().push((start, end));
        Ok(())
    }
}

/// Sorts and merges overlapping or adjacent intervals.
fn normalize(list: &mut Vec<(u64, u64)>) {
    list.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(list.len());
    for &(a, b) in list.iter() {
        match merged.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    *list = merged;
}

fn subtract_intervals(list: &[(u64, u64)], remove: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut j = 0;
    for &(mut a, b) in list {
        while j < remove.len() && remove[j].1 < a {
            j += 1;
        }
        let mut k = j;
        let mut alive = true;
        while k < remove.len() && remove[k].0 <= b {
            let (ra, rb) = remove[k];
            if ra > a {
                out.push((a, ra - 1));
            }
            if rb >= b {
                alive = false;
                break;
            }
            a = a.max(rb + 1);
            k += 1;
        }
        if alive && a <= b {
            out.push((a, b));
        }
    }
    out
}

fn parse_uuid(text: &str) -> Option<u128> {
    let b = text.as_bytes();
    if b.len() != 36 {
        return None;
    }
    let mut value: u128 = 0;
    for (i, &c) in b.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if c != b'-' {
                return None;
            }
            continue;
        }
        value = (value << 4) | u128::from((c as char).to_digit(16)?);
    }
    Some(value)
}

fn is_tag(text: &str) -> bool {
    let b = text.as_bytes();
    !b.is_empty()
        && b.len() <= 32
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

fn parse_number(text: &str, position: usize) -> Result<u64, GtidParseError> {
    if text.is_empty() || !text.bytes().all(|c| c.is_ascii_digit()) {
        return Err(GtidParseError {
            position,
            reason: "expected a decimal number",
        });
    }
    text.parse().map_err(|_| GtidParseError {
        position,
        reason: "number out of range",
    })
}

fn parse_entry(entry: &str, start: usize, set: &mut Pending) -> Result<(), GtidParseError> {
    let mut parts = entry.split(':');
    let head = parts.next().unwrap_or_default();
    if !entry.contains(':') && parse_uuid(head).is_some() {
        return Err(GtidParseError {
            position: start + head.len(),
            reason: "expected an interval after the source",
        });
    }
    if !entry.contains(':') {
        // MariaDB domain-server-seq.
        let fields: Vec<&str> = head.split('-').collect();
        if fields.len() != 3 {
            return Err(GtidParseError {
                position: start,
                reason: "expected uuid:interval or domain-server-seq",
            });
        }
        let domain = parse_u32(fields[0], start)?;
        let server_pos = start + fields[0].len() + 1;
        let server_id = parse_u32(fields[1], server_pos)?;
        let seq = parse_number(fields[2], server_pos + fields[1].len() + 1)?;
        if seq == 0 {
            // `d-s-0`: no transaction (as `insert_interval` ignores an empty interval).
            return Ok(());
        }
        return set.push(SourceId::MariaDb { domain, server_id }, 1, seq, start);
    }
    let base = source_of(head, start)?;
    let mut tag = String::new();
    let mut pos = start + head.len() + 1;
    let mut saw_interval = false;
    for part in parts {
        let part_pos = pos;
        pos += part.len() + 1;
        let part = part.trim();
        if part.bytes().next().is_some_and(|c| c.is_ascii_digit()) {
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (
                    parse_number(a, part_pos)?,
                    parse_number(b, part_pos + a.len() + 1)?,
                ),
                None => {
                    let n = parse_number(part, part_pos)?;
                    (n, n)
                }
            };
            if a == 0 {
                return Err(GtidParseError {
                    position: part_pos,
                    reason: "transaction numbers start at 1",
                });
            }
            if a > b {
                return Err(GtidParseError {
                    position: part_pos,
                    reason: "interval start after its end",
                });
            }
            let source = match &base {
                SourceId::Uuid { uuid, .. } => SourceId::Uuid {
                    uuid: *uuid,
                    tag: tag.clone(),
                },
                other => other.clone(),
            };
            set.push(source, a, b, part_pos)?;
            saw_interval = true;
        } else if is_tag(part) && matches!(base, SourceId::Uuid { .. }) {
            tag = part.to_ascii_lowercase();
            saw_interval = false;
        } else {
            return Err(GtidParseError {
                position: part_pos,
                reason: "expected an interval or a tag",
            });
        }
    }
    if !saw_interval {
        return Err(GtidParseError {
            position: pos.saturating_sub(1),
            reason: "expected an interval after the source",
        });
    }
    Ok(())
}

fn parse_u32(text: &str, position: usize) -> Result<u32, GtidParseError> {
    u32::try_from(parse_number(text, position)?).map_err(|_| GtidParseError {
        position,
        reason: "number out of range",
    })
}

fn source_of(head: &str, position: usize) -> Result<SourceId, GtidParseError> {
    if let Some(uuid) = parse_uuid(head.trim()) {
        return Ok(SourceId::Uuid {
            uuid,
            tag: String::new(),
        });
    }
    if let Some((d, s)) = head.split_once('-') {
        return Ok(SourceId::MariaDb {
            domain: parse_u32(d, position)?,
            server_id: parse_u32(s, position + d.len() + 1)?,
        });
    }
    Err(GtidParseError {
        position,
        reason: "expected a UUID or domain-server",
    })
}

fn write_uuid(f: &mut fmt::Formatter<'_>, uuid: u128) -> fmt::Result {
    let hex = format!("{uuid:032x}");
    write!(
        f,
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

fn write_intervals(f: &mut fmt::Formatter<'_>, list: &[(u64, u64)]) -> fmt::Result {
    for &(a, b) in list {
        if a == b {
            write!(f, ":{a}")?;
        } else {
            write!(f, ":{a}-{b}")?;
        }
    }
    Ok(())
}

/// Canonical text: MySQL sources as `uuid:1-5:tag:1-3` (untagged intervals first, tags sorted,
/// lower-case UUIDs), MariaDB sources as `domain-server-seq` when they hold `1-seq` and as
/// `domain-server:a-b` otherwise; entries joined by `,`.
impl fmt::Display for GtidSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut last_uuid: Option<u128> = None;
        for (source, list) in &self.sources {
            match source {
                SourceId::Uuid { uuid, tag } => {
                    if last_uuid != Some(*uuid) {
                        if !first {
                            f.write_char(',')?;
                        }
                        write_uuid(f, *uuid)?;
                        last_uuid = Some(*uuid);
                    }
                    if !tag.is_empty() {
                        write!(f, ":{tag}")?;
                    }
                    write_intervals(f, list)?;
                }
                SourceId::MariaDb { domain, server_id } => {
                    if !first {
                        f.write_char(',')?;
                    }
                    last_uuid = None;
                    match list.as_slice() {
                        [(1, end)] => write!(f, "{domain}-{server_id}-{end}")?,
                        _ => {
                            write!(f, "{domain}-{server_id}")?;
                            write_intervals(f, list)?;
                        }
                    }
                }
            }
            first = false;
        }
        Ok(())
    }
}

impl std::str::FromStr for GtidSet {
    type Err = GtidParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for GtidSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for GtidSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        GtidSet::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for GtidSet {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "GtidSet".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "GTID set: MySQL `uuid[:tag]:a-b,…` or MariaDB `domain-server-seq,…`"
        })
    }
}

#[cfg(feature = "arbitrary")]
impl<'a> arbitrary::Arbitrary<'a> for GtidSet {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        let mut set = GtidSet::new();
        let n = u.int_in_range(0..=4)?;
        for _ in 0..n {
            let source = if u.arbitrary()? {
                SourceId::Uuid {
                    uuid: u128::from(u.int_in_range(0u8..=3)?),
                    tag: String::new(),
                }
            } else {
                SourceId::MariaDb {
                    domain: 0,
                    server_id: u.int_in_range(1..=5)?,
                }
            };
            let a = u.int_in_range(1u64..=50)?;
            let b = u.int_in_range(a..=60)?;
            set.insert_interval(source, a, b);
        }
        Ok(set)
    }
}

/// Parses a MySQL `server_uuid` into the number [`SourceId::Uuid`] uses.
pub fn parse_server_uuid(text: &str) -> Option<u128> {
    parse_uuid(text.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const B: &str = "4e11fa47-71ca-11e1-9e33-c80aa9429562";

    fn set(s: &str) -> GtidSet {
        GtidSet::parse(s).unwrap()
    }

    #[test]
    fn parses_and_prints_canonically() {
        let s = set(&format!("{B}:1-5, {A}:7:1-3:4 ,{A}:Tag_1:9-10:1-2"));
        assert_eq!(s.to_string(), format!("{A}:1-4:7:tag_1:1-2:9-10,{B}:1-5"));
        assert_eq!(set(&s.to_string()), s);
    }

    /// Survivors of the mutation run: `from_mariadb` was never called in this crate, and an
    /// interval starting at 0 was only excluded by its other condition.
    #[test]
    fn from_mariadb_takes_only_mariadb_entries() {
        assert_eq!(
            GtidSet::from_mariadb("0-1-5,1-2-3").unwrap(),
            set("0-1-5,1-2-3")
        );
        assert_eq!(
            GtidSet::from_mariadb(&format!("0-1-5,{A}:1-2"))
                .unwrap_err()
                .reason,
            "expected MariaDB domain-server-seq entries"
        );
    }

    #[test]
    fn intervals_from_zero_or_backwards_are_ignored() {
        let source = || SourceId::MariaDb {
            domain: 0,
            server_id: 1,
        };
        let mut s = GtidSet::new();
        s.insert_interval(source(), 0, 5);
        s.insert_interval(source(), 5, 3);
        assert!(s.is_empty());
        s.insert_interval(source(), 2, 2);
        assert_eq!(s.intervals(&source()), &[(2, 2)]);
    }

    #[test]
    fn uppercase_uuid_and_newlines_are_accepted() {
        let s = set(&format!("{}:1-3,\n{B}:2", A.to_uppercase()));
        assert_eq!(s.to_string(), format!("{A}:1-3,{B}:2"));
    }

    #[test]
    fn mariadb_entries_map_to_intervals_from_one() {
        let s = set("0-1-5,0-2-7,1-1-3");
        assert!(s.contains(
            &SourceId::MariaDb {
                domain: 0,
                server_id: 1
            },
            1
        ));
        assert!(s.contains(
            &SourceId::MariaDb {
                domain: 0,
                server_id: 1
            },
            5
        ));
        assert!(!s.contains(
            &SourceId::MariaDb {
                domain: 0,
                server_id: 1
            },
            6
        ));
        assert_eq!(s.to_string(), "0-1-5,0-2-7,1-1-3");
        assert_eq!(s.mariadb_position(), "0-2-7,1-1-3");
        assert_eq!(s.mariadb_state(), "0-1-5,0-2-7,1-1-3");
    }

    #[test]
    fn mariadb_errant_rule_is_subtraction() {
        let primary = set("0-1-2158,0-2-2944");
        let replica = set("0-1-2158,0-2-2944,0-3-2945");
        let extra = replica.subtract(&primary);
        assert_eq!(extra.to_string(), "0-3-2945");
        // The crashed ex-primary's tail is from the primary's own server id in the old topology.
        let ex = set("0-1-20850");
        let new_primary = set("0-1-20849,0-2-22699");
        assert_eq!(ex.subtract(&new_primary).to_string(), "0-1:20850");
    }

    /// Survivors of the mutation run: `sources()` was never read in this crate, and a tie of
    /// sequence numbers in one domain must pick one server deterministically (the first in
    /// canonical order, the lowest server id).
    #[test]
    fn sources_in_canonical_order_and_position_ties_go_to_the_lowest_server() {
        let s = set(&format!("1-1-3,{B}:1,0-2-5,{A}:1,0-1-5"));
        let order: Vec<String> = s
            .sources()
            .map(|src| {
                let mut one = GtidSet::new();
                one.insert_interval(src.clone(), 1, 1);
                one.to_string()
            })
            .collect();
        assert_eq!(
            order,
            [
                format!("{A}:1"),
                format!("{B}:1"),
                "0-1-1".to_owned(),
                "0-2-1".to_owned(),
                "1-1-1".to_owned()
            ]
        );
        assert_eq!(set("0-1-5,0-2-5").mariadb_position(), "0-1-5");
        assert_eq!(set("0-1-5,0-2-6").mariadb_position(), "0-2-6");
    }

    #[test]
    fn algebra_basics() {
        let a = set(&format!("{A}:1-10"));
        let b = set(&format!("{A}:3-4:8-12"));
        assert_eq!(a.subtract(&b).to_string(), format!("{A}:1-2:5-7"));
        assert_eq!(a.union(&b).to_string(), format!("{A}:1-12"));
        assert_eq!(a.intersection(&b).to_string(), format!("{A}:3-4:8-10"));
        assert!(set(&format!("{A}:2-3")).is_subset(&a));
        assert!(!b.is_subset(&a));
        assert!(GtidSet::new().is_subset(&a));
        assert_eq!(a.transaction_count(), 10);
    }

    /// MySQL 8.4 tags: 1–32 characters, letters, digits and `_`, not starting with a digit
    /// (survivors of the mutation run: nothing checked the tag rule).
    #[test]
    fn tags_follow_mysqls_rule() {
        for ok in ["a", "_x1", "Tag_9", &"t".repeat(32)] {
            let s = set(&format!("{A}:{ok}:1"));
            assert_eq!(
                s.to_string(),
                format!("{A}:{}:1", ok.to_ascii_lowercase()),
                "{ok}"
            );
        }
        for bad in ["a$", "$", "a-b", &"t".repeat(33)] {
            let err = GtidSet::parse(&format!("{A}:{bad}:1")).unwrap_err();
            assert_eq!(err.reason, "expected an interval or a tag", "{bad}");
        }
        assert_eq!(
            GtidSet::parse(&format!("{A}:1-2a")).unwrap_err().reason,
            "expected a decimal number"
        );
    }

    /// Error positions point at the offending field, also in later entries and parts.
    #[test]
    fn error_positions_in_later_fields() {
        assert_eq!(GtidSet::parse("0-1-5,0-22-x").unwrap_err().position, 11);
        assert_eq!(GtidSet::parse("0-1-5,0-x-1").unwrap_err().position, 8);
        assert_eq!(
            GtidSet::parse(&format!("{A}:1-2:$")).unwrap_err().position,
            41
        );
        assert_eq!(
            GtidSet::parse(&format!("{A}:1-2:3-x"))
                .unwrap_err()
                .position,
            43
        );
    }

    /// More survivors: a MariaDB source takes no tag; the server id's position in a
    /// `domain-server:interval` source; `FromStr`; the JSON Schema; a removal interval that
    /// ends before the interval it is subtracted from.
    #[test]
    fn mariadb_sources_parse_str_schema_and_subtraction_skips() {
        assert_eq!(
            GtidSet::parse("0-1:abc:5").unwrap_err().reason,
            "expected an interval or a tag"
        );
        assert_eq!(GtidSet::parse("0-1:5,0-x:5").unwrap_err().position, 8);
        assert_eq!("0-1-5".parse::<GtidSet>().unwrap(), set("0-1-5"));
        assert!("0-1-x".parse::<GtidSet>().is_err());
        let schema = serde_json::to_value(schemars::schema_for!(GtidSet)).unwrap();
        assert_eq!(schema["type"], "string");
        assert!(schema["description"].as_str().unwrap().contains("GTID set"));
        let a = set(&format!("{A}:5-10"));
        let b = set(&format!("{A}:1-2:7-8"));
        assert_eq!(a.subtract(&b).to_string(), format!("{A}:5-6:9-10"));
        let c = set(&format!("{A}:1-10"));
        let d = set(&format!("{A}:2-3:5-6"));
        assert_eq!(c.subtract(&d).to_string(), format!("{A}:1:4:7-10"));
    }

    #[test]
    fn empty_text_is_the_empty_set() {
        assert!(set("").is_empty());
        assert!(set("  \n").is_empty());
    }

    #[test]
    fn errors_carry_positions() {
        let cases = [
            (format!("{A}:1-5,"), 41),
            (format!("{A}:0-5"), 37),
            (format!("{A}:5-1"), 37),
            (A.to_string(), 36),
            ("zz:1".to_owned(), 0),
            (format!("{A}:1-5,0-x-3"), 43),
            (format!("{A}:1-x"), 39),
        ];
        for (text, position) in cases {
            let err = GtidParseError::clone(&GtidSet::parse(&text).unwrap_err());
            assert_eq!(err.position, position, "{text}: {err}");
        }
    }

    #[test]
    fn own_server_is_recognised() {
        let uuid = parse_server_uuid(A).unwrap();
        let s = set(&format!("{A}:1-3,{A}:t:1,{B}:1,0-7-3"));
        let rest = s.without_server(&ServerIdentity::Uuid(uuid));
        assert_eq!(rest.to_string(), format!("{B}:1,0-7-3"));
        let rest = rest.without_server(&ServerIdentity::ServerId(7));
        assert_eq!(rest.to_string(), format!("{B}:1"));
    }

    /// Subtraction at the edges of the skip loop: a removal interval that ends exactly where a
    /// kept interval starts, and kept intervals after every removal interval. (Survivors of a
    /// mutation run with the unit tests alone: only the properties covered these.)
    #[test]
    fn subtraction_at_interval_edges() {
        let u = "3E11FA47-71CA-11E1-9E33-C80AA9429562";
        let set = |t: &str| GtidSet::parse(&t.replace('U', u)).unwrap();
        assert_eq!(set("U:5-10").subtract(&set("U:1-5")), set("U:6-10"));
        assert_eq!(
            set("U:1-10:20-30").subtract(&set("U:1-5")),
            set("U:6-10:20-30")
        );
        assert_eq!(
            set("U:1-3:7-9:20-30").subtract(&set("U:2:8")),
            set("U:1:3:7:9:20-30")
        );
    }

    /// Issue 12, item 4: building a set merged the whole list on every interval (quadratic).
    /// The local merge must give the same set as sorting everything, in any order.
    mod insert_and_parse {
        use super::super::*;
        use proptest::prelude::*;

        fn source() -> SourceId {
            SourceId::MariaDb {
                domain: 0,
                server_id: 1,
            }
        }

        proptest! {
            #[test]
            fn any_insertion_order_gives_the_merged_set(
                intervals in proptest::collection::vec((1u64..200, 0u64..12), 0..40),
            ) {
                let intervals: Vec<(u64, u64)> =
                    intervals.into_iter().map(|(a, len)| (a, a + len)).collect();
                let mut built = GtidSet::new();
                for &(a, b) in &intervals {
                    built.insert_interval(source(), a, b);
                }
                // The model: a membership table.
                let member = |n: u64| intervals.iter().any(|&(a, b)| a <= n && n <= b);
                for n in 0..220 {
                    prop_assert_eq!(built.contains(&source(), n), member(n), "n = {}", n);
                }
                // Canonical: sorted, disjoint, not adjacent.
                let list = built.intervals(&source());
                for w in list.windows(2) {
                    prop_assert!(w[0].1 + 1 < w[1].0, "{:?}", list);
                }
                // The parser, gathering first and merging once, agrees.
                let text = intervals
                    .iter()
                    .map(|&(a, b)| format!("3E11FA47-71CA-11E1-9E33-C80AA9429562:{a}-{b}"))
                    .collect::<Vec<_>>()
                    .join(",");
                let parsed = GtidSet::parse(&text).unwrap();
                let uuid = parsed.sources().next().cloned();
                if let Some(uuid) = uuid {
                    prop_assert_eq!(parsed.intervals(&uuid), list);
                } else {
                    prop_assert!(list.is_empty());
                }
            }
        }

        #[test]
        fn a_hundred_thousand_reversed_intervals_parse() {
            // Reversed order was the worst case of the quadratic merge (minutes); the bench
            // measures the time, this only that the result is right.
            let text = (0..100_000u64)
                .rev()
                .map(|i| format!("3E11FA47-71CA-11E1-9E33-C80AA9429562:{}", 2 * i + 1))
                .collect::<Vec<_>>()
                .join(",");
            let set = GtidSet::parse(&text).unwrap();
            let uuid = set.sources().next().unwrap().clone();
            assert_eq!(set.intervals(&uuid).len(), 100_000);
            assert_eq!(set.intervals(&uuid)[0], (1, 1));
            assert_eq!(set.transaction_count(), 100_000);
        }

        #[test]
        fn too_many_sources_are_refused_with_the_position() {
            let text = (0..=MAX_GTID_SOURCES as u32)
                .map(|i| format!("0-{i}-1"))
                .collect::<Vec<_>>()
                .join(",");
            let err = GtidSet::parse(&text).unwrap_err();
            assert_eq!(err.reason, "more than 65536 sources");
            let last = text.rfind(',').unwrap() + 1;
            assert_eq!(err.position, last);
            // Exactly the bound is fine.
            let at_bound = &text[..last - 1];
            assert_eq!(
                GtidSet::parse(at_bound).unwrap().sources().count(),
                MAX_GTID_SOURCES
            );
        }
    }
}
