//! MOCO's readiness rule for an instance (`/readyz`), as a pure function of what the agent
//! observed. Kubernetes routes the replica Services by it, so a replica that is broken or too
//! far behind stops serving reads, and the operator reads it as the Pod's readiness.
//!
//! In order, first match wins:
//!
//! 1. a clone is running on the instance → not ready;
//! 2. writable (`read_only=0`: the primary) → ready;
//! 3. no replication configured → error (MOCO answers 500);
//! 4. an IO or SQL thread not running, or either holding an error → not ready;
//! 5. `--max-delay 0` → ready (lag is not checked);
//! 6. nothing queued yet and the server up for less than `--transaction-queueing-wait` →
//!    not ready (a replica that just started has no lag to show yet);
//! 7. lag at or above `--max-delay` → not ready;
//! 8. ready.

use std::time::Duration;

/// What the agent observed of its instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadinessFacts {
    /// A clone into this instance has not finished.
    pub clone_running: bool,
    /// `@@read_only`.
    pub read_only: bool,
    /// Replication, when configured.
    pub replica: Option<ReplicaFacts>,
    /// `Uptime`.
    pub uptime: Duration,
}

/// The replication threads and how far behind they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaFacts {
    /// The IO thread runs (`Yes`).
    pub io_running: bool,
    /// The SQL thread runs (`Yes`).
    pub sql_running: bool,
    /// `Last_IO_Errno`.
    pub io_errno: u32,
    /// `Last_SQL_Errno`.
    pub sql_errno: u32,
    /// Whether any transaction has been received since replication started.
    pub anything_queued: bool,
    /// How far the applied transactions are behind the received ones (MySQL: original
    /// commit timestamps; MariaDB: `Seconds_Behind_Master`); `None` when unknown.
    pub lag: Option<Duration>,
}

/// The answer of `/readyz`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// 200.
    Ready,
    /// 503, with the reason.
    NotReady(String),
    /// 500: the instance is in a state readiness cannot be judged in.
    Error(String),
}

/// The limits of the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadinessLimits {
    /// `--max-delay`; zero disables the lag check.
    pub max_delay: Duration,
    /// `--transaction-queueing-wait`.
    pub queueing_wait: Duration,
}

/// MOCO's rule (see the module documentation).
pub fn readiness(facts: &ReadinessFacts, limits: ReadinessLimits) -> Verdict {
    if facts.clone_running {
        return Verdict::NotReady("a clone is in progress".to_owned());
    }
    if !facts.read_only {
        return Verdict::Ready;
    }
    let Some(r) = &facts.replica else {
        return Verdict::Error("read-only, and replication is not configured".to_owned());
    };
    if !r.io_running || !r.sql_running {
        return Verdict::NotReady(format!(
            "replication threads not running (IO: {}, SQL: {})",
            yes_no(r.io_running),
            yes_no(r.sql_running)
        ));
    }
    if r.io_errno != 0 || r.sql_errno != 0 {
        return Verdict::NotReady(format!(
            "replication error (IO errno {}, SQL errno {})",
            r.io_errno, r.sql_errno
        ));
    }
    if limits.max_delay.is_zero() {
        return Verdict::Ready;
    }
    if !r.anything_queued && facts.uptime < limits.queueing_wait {
        return Verdict::NotReady(format!(
            "no transaction received yet, up for {} s (waiting {} s)",
            facts.uptime.as_secs(),
            limits.queueing_wait.as_secs()
        ));
    }
    match r.lag {
        Some(lag) if lag >= limits.max_delay => Verdict::NotReady(format!(
            "{} s behind (at most {} s)",
            lag.as_secs(),
            limits.max_delay.as_secs()
        )),
        _ => Verdict::Ready,
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "Yes" } else { "No" }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ReadinessLimits = ReadinessLimits {
        max_delay: Duration::from_secs(60),
        queueing_wait: Duration::from_secs(60),
    };

    fn replica() -> ReadinessFacts {
        ReadinessFacts {
            clone_running: false,
            read_only: true,
            replica: Some(ReplicaFacts {
                io_running: true,
                sql_running: true,
                io_errno: 0,
                sql_errno: 0,
                anything_queued: true,
                lag: Some(Duration::from_secs(3)),
            }),
            uptime: Duration::from_secs(600),
        }
    }

    fn with(f: impl FnOnce(&mut ReadinessFacts)) -> Verdict {
        let mut facts = replica();
        f(&mut facts);
        readiness(&facts, LIMITS)
    }

    fn r(facts: &mut ReadinessFacts) -> &mut ReplicaFacts {
        facts.replica.as_mut().unwrap()
    }

    #[test]
    fn each_rule_in_order() {
        assert_eq!(with(|_| {}), Verdict::Ready);
        // 1. a clone beats everything, even writability.
        assert!(matches!(
            with(|f| {
                f.clone_running = true;
                f.read_only = false;
            }),
            Verdict::NotReady(m) if m.contains("clone")
        ));
        // 2. the primary is ready whatever its (stale) replication says.
        assert_eq!(
            with(|f| {
                f.read_only = false;
                r(f).io_running = false;
            }),
            Verdict::Ready
        );
        // 3.
        assert!(matches!(with(|f| f.replica = None), Verdict::Error(_)));
        // 4.
        assert!(
            matches!(with(|f| r(f).io_running = false), Verdict::NotReady(m) if m.contains("IO: No"))
        );
        assert!(
            matches!(with(|f| r(f).sql_running = false), Verdict::NotReady(m) if m.contains("SQL: No"))
        );
        assert!(
            matches!(with(|f| r(f).sql_errno = 1062), Verdict::NotReady(m) if m.contains("1062"))
        );
        assert!(
            matches!(with(|f| r(f).io_errno = 2003), Verdict::NotReady(m) if m.contains("2003"))
        );
        // 6. just started, nothing received.
        let fresh = |f: &mut ReadinessFacts| {
            f.uptime = Duration::from_secs(10);
            r(f).anything_queued = false;
            r(f).lag = None;
        };
        assert!(matches!(with(fresh), Verdict::NotReady(m) if m.contains("no transaction")));
        // ... which --max-delay 0 skips (5).
        let mut facts = replica();
        fresh(&mut facts);
        let off = ReadinessLimits {
            max_delay: Duration::ZERO,
            ..LIMITS
        };
        assert_eq!(readiness(&facts, off), Verdict::Ready);
        // Up exactly the wait: no longer waiting.
        assert_eq!(
            with(|f| {
                f.uptime = LIMITS.queueing_wait;
                r(f).anything_queued = false;
                r(f).lag = None;
            }),
            Verdict::Ready
        );
        // Up long enough, nothing received: ready.
        assert_eq!(
            with(|f| {
                r(f).anything_queued = false;
                r(f).lag = None;
            }),
            Verdict::Ready
        );
        // 7. at the limit is too far.
        assert!(
            matches!(with(|f| r(f).lag = Some(Duration::from_secs(60))), Verdict::NotReady(m) if m.contains("60 s behind"))
        );
        assert_eq!(
            with(|f| r(f).lag = Some(Duration::from_secs(59))),
            Verdict::Ready
        );
        let mut facts = replica();
        r(&mut facts).lag = Some(Duration::from_secs(3600));
        assert_eq!(readiness(&facts, off), Verdict::Ready, "lag unchecked at 0");
    }
}
