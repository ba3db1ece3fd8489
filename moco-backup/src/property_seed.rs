//! The seed of the crate's property runners: fixed, so that the coverage minima the properties
//! assert (cases that must occur) hold on every run rather than by chance, and printed, so
//! that a failure is replayed with `PROPTEST_RNG_SEED=<seed>` (which also explores another).

use proptest::test_runner::{Config, RngSeed};

/// The seed every run uses unless `PROPTEST_RNG_SEED` names another.
const DEFAULT_SEED: u64 = 20_261_207;

/// A runner configuration of `cases` cases with the seed described above, printed under
/// `test`'s name.
pub(crate) fn config(test: &str, cases: u32) -> Config {
    let base = Config::default();
    let seed = match base.rng_seed {
        RngSeed::Fixed(seed) => seed,
        RngSeed::Random => DEFAULT_SEED,
    };
    println!("{test}: {cases} cases, PROPTEST_RNG_SEED={seed}");
    Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        ..base
    }
}
