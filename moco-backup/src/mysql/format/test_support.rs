//! What the format's tests build their cases from.

use std::num::NonZeroU32;

use moco_core::time::Timestamp;

pub(super) fn t(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

pub(super) fn threads(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

pub(super) fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}
