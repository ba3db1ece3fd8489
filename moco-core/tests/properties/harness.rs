//! Runs a property with a fixed seed and counts the situations it met, so that a generator
//! that stops producing the cases that matter fails the test instead of passing vacuously.
//!
//! `PROPTEST_RNG_SEED` and `PROPTEST_CASES` override the defaults to explore; minimum counts
//! then scale with the number of cases. Failures name the seed to replay.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Debug;

use proptest::strategy::Strategy;
use proptest::test_runner::{
    Config, FailurePersistence, FileFailurePersistence, RngSeed, TestCaseResult, TestRunner,
};

/// The seed every property uses unless `PROPTEST_RNG_SEED` is set.
pub(super) const DEFAULT_SEED: u64 = 0x6d6f_636f_7273; // "mocors"

/// Failing cases are stored here (relative to the package, where cargo runs tests).
const REGRESSIONS: &str = "tests/properties.proptest-regressions";

/// Named counters of what a property saw.
#[derive(Debug, Default)]
pub(super) struct Counts(RefCell<BTreeMap<&'static str, u64>>);

impl Counts {
    pub(super) fn hit(&self, name: &'static str) {
        *self.0.borrow_mut().entry(name).or_insert(0) += 1;
    }

    /// Counts `name` when `cond` holds.
    pub(super) fn hit_if(&self, cond: bool, name: &'static str) {
        if cond {
            self.hit(name);
        } else {
            self.0.borrow_mut().entry(name).or_insert(0);
        }
    }

    pub(super) fn get(&self, name: &str) -> u64 {
        self.0.borrow().get(name).copied().unwrap_or(0)
    }
}

/// What a run saw.
#[derive(Debug)]
pub(super) struct Report {
    name: &'static str,
    seed: u64,
    cases: u32,
    default_cases: u32,
    counts: Counts,
}

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Runs `test` on `default_cases` cases of `strategy` (or `PROPTEST_CASES`) with the fixed
/// seed (or `PROPTEST_RNG_SEED`); panics with the seed and the minimal failing case.
pub(super) fn check<S>(
    name: &'static str,
    default_cases: u32,
    strategy: S,
    test: impl Fn(&S::Value, &Counts) -> TestCaseResult,
) -> Report
where
    S: Strategy,
    S::Value: Debug,
{
    let seed = env("PROPTEST_RNG_SEED").unwrap_or(DEFAULT_SEED);
    let cases = env("PROPTEST_CASES").unwrap_or(default_cases);
    let defaults = Config::default();
    let persist = std::env::var_os("PROPTEST_DISABLE_FAILURE_PERSISTENCE").is_none();
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: persist.then(|| {
            Box::new(FileFailurePersistence::Direct(REGRESSIONS)) as Box<dyn FailurePersistence>
        }),
        source_file: Some(file!()),
        test_name: Some(name),
        // Shrinking a failure stays bounded unless PROPTEST_MAX_SHRINK_TIME says otherwise.
        max_shrink_time: match defaults.max_shrink_time {
            0 => 60_000,
            t => t,
        },
        ..defaults
    };
    let counts = Counts::default();
    let mut runner = TestRunner::new(config);
    if let Err(e) = runner.run(&strategy, |v| test(&v, &counts)) {
        panic!("{name}: PROPTEST_RNG_SEED={seed} PROPTEST_CASES={cases}: {e}");
    }
    Report {
        name,
        seed,
        cases,
        default_cases,
        counts,
    }
}

impl Report {
    /// Prints every counter and fails when one named here stays below its minimum (scaled
    /// to the number of cases actually run).
    pub(super) fn require(&self, minima: &[(&'static str, u64)]) {
        let counts = self.counts.0.borrow();
        eprintln!(
            "{} ({} cases, seed {}): {:?}",
            self.name, self.cases, self.seed, counts
        );
        let scale = |min: u64| min * u64::from(self.cases) / u64::from(self.default_cases);
        let short: Vec<String> = minima
            .iter()
            .filter(|&&(k, min)| self.counts.get(k) < scale(min))
            .map(|&(k, min)| format!("{k}: {} < {}", self.counts.get(k), scale(min)))
            .collect();
        assert!(
            short.is_empty(),
            "{}: the generator became too weak (PROPTEST_RNG_SEED={}, {} cases): {}",
            self.name,
            self.seed,
            self.cases,
            short.join(", ")
        );
    }
}
