//! The test command's ledger of the tests that ran against real parts (a server, an object
//! store, the control plane). `scripts/test.sh` points [`LEDGER_ENV`] at an empty directory,
//! counts the tests recorded there and prints the parts' versions, so that a run in which such
//! tests did nothing (a skip, a helper that stopped starting its server) cannot pass unnoticed.
//!
//! One file per test, named after the test binary and the test (libtest names each test's
//! thread after it), holding one line per part the test used: a test that uses two parts
//! counts once.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The directory of the ledger; unset, nothing is recorded.
pub const LEDGER_ENV: &str = "MOCO_REAL_SERVER_LEDGER";

/// The ledger's file for the running test: `<package>::<binary>::<test>` (two crates' test
/// binaries may share a name), where the test is the current thread's name unless that is no
/// test's (`main`, a runtime's worker), then `test`.
pub fn entry_name(package: &str, binary: &str, thread: Option<&str>, test: &str) -> String {
    // Cargo names test binaries `<name>-<hash>`.
    let binary = binary
        .rsplit_once('-')
        .filter(|(_, hash)| hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()))
        .map_or(binary, |(name, _)| name);
    let test = thread
        .filter(|t| *t != "main" && !t.starts_with("tokio-runtime"))
        .unwrap_or(test);
    let key = format!("{package}::{binary}::{test}");
    key.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Records that the running test (called `test` when its thread does not say) used `part`,
/// e.g. `Mariadb 10.11.14` or `moto 5.2.5 (S3)`. Panics when the ledger cannot be written: a
/// run that cannot count its tests proves less than it claims.
pub fn record(test: &str, part: &str) {
    if let Some(dir) = std::env::var_os(LEDGER_ENV).filter(|d| !d.is_empty()) {
        record_in(Path::new(&dir), test, part);
    }
}

/// [`record`] in the ledger at `dir`.
pub fn record_in(dir: &Path, test: &str, part: &str) {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let current = std::thread::current();
    // Cargo and cargo-nextest set the package of the test being run.
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_default();
    let path: PathBuf = dir.join(entry_name(&package, &binary, current.name(), test));
    let line = format!("{test}\t{part}\n");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!(
            "{test}: cannot record in the ledger {}: {e}",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_the_binary_and_the_test_thread() {
        assert_eq!(
            entry_name(
                "moco-tests",
                "integration-0123456789abcdef",
                Some("local_pitr::restores"),
                "x"
            ),
            "moco_tests__integration__local_pitr__restores"
        );
        // Not a cargo hash: kept.
        assert_eq!(
            entry_name("p", "kube-sh", Some("up"), "x"),
            "p__kube_sh__up"
        );
        // Off the test's thread: the name the test gave.
        for thread in [None, Some("main"), Some("tokio-runtime-worker")] {
            assert_eq!(
                entry_name("p", "real_server-0123456789abcdef", thread, "dump"),
                "p__real_server__dump"
            );
        }
    }

    #[test]
    fn two_parts_of_one_test_are_one_entry() {
        let dir = std::env::temp_dir().join(format!("moco-ledger-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        record_in(&dir, "fallback", "Mariadb 10.11.14");
        record_in(&dir, "fallback", "moto 5.2.5 (S3)");
        let entries: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(entries.len(), 1, "{entries:?}");
        let path = entries[0].as_ref().unwrap().path();
        assert!(
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with("two_parts_of_one_test_are_one_entry"),
            "{path:?}"
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "fallback\tMariadb 10.11.14\nfallback\tmoto 5.2.5 (S3)\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
