//! The kubelet's restart back-off: the first restart at once, then 10 s, doubling to 5
//! minutes, forgotten once a container has run for 10 minutes.

use std::time::Duration;

/// The first delay.
pub const INITIAL: Duration = Duration::from_secs(10);
/// The longest delay.
pub const MAX: Duration = Duration::from_secs(300);
/// A run this long resets the back-off.
pub const RESET_AFTER: Duration = Duration::from_secs(600);

/// The delay before the next start after `crashes` restarts in a row (0: the first restart).
pub fn delay(crashes: u32) -> Duration {
    match crashes {
        0 => Duration::ZERO,
        n => INITIAL
            .saturating_mul(1u32.checked_shl(n - 1).unwrap_or(u32::MAX))
            .min(MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_five_minutes() {
        let secs: Vec<u64> = (0..9).map(|n| delay(n).as_secs()).collect();
        assert_eq!(secs, [0, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(delay(40), MAX);
    }
}
