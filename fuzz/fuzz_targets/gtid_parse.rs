//! Any text either fails to parse with a position inside it, or parses to a set whose
//! canonical text parses back to the same set; set algebra on it never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moco_core::gtid::GtidSet;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match GtidSet::parse(text) {
        Err(e) => assert!(e.position <= text.len(), "position {} beyond {}", e.position, text.len()),
        Ok(set) => {
            let canonical = set.to_string();
            let again = GtidSet::parse(&canonical).expect("canonical text parses");
            assert_eq!(again, set, "round trip of {canonical:?}");
            assert!(set.subtract(&set).is_empty());
            assert!(set.is_subset(&set.union(&again)));
            let _ = set.mariadb_position();
        }
    }
});
