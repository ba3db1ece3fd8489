//! The health watch: each instance is pinged continuously in the background, so that one that
//! stops answering is known to be unresponsive as soon as the detection window has passed —
//! whatever the manager's rounds are doing — and no round waits for it again.
//!
//! Why a window of silence rather than a count of failed probes: on Kubernetes a frozen mysqld,
//! a dead node and a network cut look the same from the manager (an instance that stops
//! answering), and only the time it has been silent tells them apart from a slow one. The
//! window is the longest silence the cluster accepts from its primary before failing over:
//! shorter fails over sooner; longer rides out longer stalls (a stop-the-world pause, a
//! saturated node, a burst of slow answers) without failing over. A refused connection is
//! different: the process is gone, and the manager does not wait for the window.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::ports::MysqlPort;

/// Timing of the health watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthConfig {
    /// Pause between the starts of two pings of one instance.
    pub ping_interval: Duration,
    /// How long an instance may go without answering a ping before it counts as
    /// unresponsive (and, for the primary, is failed over).
    pub detection_window: Duration,
}

/// The documented default detection window (`--detection-window`).
pub const DEFAULT_DETECTION_WINDOW: Duration = Duration::from_millis(1500);

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            ping_interval: Duration::from_millis(200),
            detection_window: DEFAULT_DETECTION_WINDOW,
        }
    }
}

/// What the watch knows of an instance now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// It answered within the detection window.
    Answering,
    /// It has not answered for the whole detection window.
    Unresponsive,
}

#[derive(Debug)]
struct Seen {
    /// The last answer, or when the watch started.
    last_answer: Instant,
    /// The last status the manager got, or when the watch started.
    last_status: Instant,
    /// The verdict last reported (a change wakes the manager).
    unresponsive: bool,
}

/// The background watch of one instance address; dropping it stops the pings.
#[derive(Debug)]
pub struct InstanceWatch {
    seen: Arc<Mutex<Seen>>,
    window: Duration,
    task: JoinHandle<()>,
}

impl Drop for InstanceWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(PoisonError::into_inner)
}

impl InstanceWatch {
    /// Starts pinging `port`; `wake` is notified whenever the verdict changes. `name` is for
    /// the log.
    pub fn start(
        name: String,
        port: Arc<dyn MysqlPort>,
        config: HealthConfig,
        wake: Arc<Notify>,
    ) -> Self {
        let seen = Arc::new(Mutex::new(Seen {
            last_answer: Instant::now(),
            last_status: Instant::now(),
            unresponsive: false,
        }));
        let task = tokio::spawn(watch(name, port, config, Arc::clone(&seen), wake));
        InstanceWatch {
            seen,
            window: config.detection_window,
            task,
        }
    }

    /// The verdict now: unresponsive once the window has passed since the last answer, even
    /// while a ping is still waiting.
    pub fn liveness(&self) -> Liveness {
        if Instant::now() >= self.answer_deadline() {
            Liveness::Unresponsive
        } else {
            Liveness::Answering
        }
    }

    /// The instant the instance counts as unresponsive unless it answers before.
    pub fn answer_deadline(&self) -> Instant {
        lock(&self.seen).last_answer + self.window
    }

    /// Records an answer seen elsewhere (a successful status probe).
    pub fn answered(&self) {
        let mut s = lock(&self.seen);
        s.last_answer = Instant::now();
        s.last_status = s.last_answer;
    }

    /// How long since the manager last got this instance's status (or the watch started).
    pub fn status_age(&self) -> std::time::Duration {
        lock(&self.seen).last_status.elapsed()
    }
}

async fn watch(
    name: String,
    port: Arc<dyn MysqlPort>,
    config: HealthConfig,
    seen: Arc<Mutex<Seen>>,
    wake: Arc<Notify>,
) {
    let interval = config.ping_interval.max(Duration::from_millis(10));
    loop {
        let started = Instant::now();
        // A ping may take the rest of the window (a slow answer is still an answer), but at
        // least one interval.
        let deadline = lock(&seen).last_answer + config.detection_window;
        let limit = deadline.saturating_duration_since(started).max(interval);
        let answered = matches!(tokio::time::timeout(limit, port.ping()).await, Ok(Ok(())));
        let now = Instant::now();
        let changed = {
            let mut s = lock(&seen);
            if answered {
                s.last_answer = now;
            }
            let unresponsive = now >= s.last_answer + config.detection_window;
            let changed = unresponsive != s.unresponsive;
            s.unresponsive = unresponsive;
            changed.then_some(unresponsive)
        };
        match changed {
            Some(true) => {
                tracing::warn!(instance = %name, window_ms = config.detection_window.as_millis() as u64, "instance stopped answering");
                wake.notify_one();
            }
            Some(false) => {
                tracing::info!(instance = %name, "instance answers again");
                wake.notify_one();
            }
            None => {}
        }
        tokio::time::sleep_until(started + interval).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use async_trait::async_trait;
    use moco_core::facts::MysqldStatus;
    use moco_core::gtid::GtidSet;
    use moco_core::operation::ReplicationSource;

    use super::*;
    use crate::ports::{Credentials, PortError};

    /// A server whose pings wait while `frozen` is set, as a SIGSTOPped mysqld's do.
    #[derive(Debug, Default)]
    struct Freezable {
        frozen: AtomicBool,
    }

    fn unused() -> PortError {
        PortError::Failed {
            target: "test".into(),
            message: "not used".into(),
        }
    }

    #[async_trait]
    impl MysqlPort for Freezable {
        async fn status(&self) -> Result<MysqldStatus, PortError> {
            Err(unused())
        }
        async fn ping(&self) -> Result<(), PortError> {
            // A stopped process answers once it runs again.
            while self.frozen.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Ok(())
        }
        async fn executed_gtid(&self) -> Result<GtidSet, PortError> {
            Err(unused())
        }
        async fn set_super_read_only(&self, _: Duration) -> Result<(), PortError> {
            Err(unused())
        }
        async fn kill_connections(&self) -> Result<(), PortError> {
            Err(unused())
        }
        async fn wait_for_gtid(&self, _: &GtidSet, _: Option<Duration>) -> Result<(), PortError> {
            Err(unused())
        }
        async fn stop_replica_io(&self) -> Result<(), PortError> {
            Err(unused())
        }
        async fn start_replica(&self, _: bool) -> Result<(), PortError> {
            Err(unused())
        }
        async fn set_replica_semi_sync(&self, _: bool) -> Result<(), PortError> {
            Err(unused())
        }
        async fn configure_replication(
            &self,
            _: &ReplicationSource,
            _: &Credentials,
            _: bool,
        ) -> Result<(), PortError> {
            Err(unused())
        }
        async fn configure_primary_semi_sync(&self, _: u32, _: u64) -> Result<(), PortError> {
            Err(unused())
        }
        async fn set_writable(&self) -> Result<(), PortError> {
            Err(unused())
        }
    }

    /// A stall shorter than the window keeps the instance answering; a longer one makes it
    /// unresponsive exactly once the window has passed (and wakes the manager); answering
    /// again wakes it too.
    #[tokio::test(start_paused = true)]
    async fn verdict_follows_the_window() {
        let server = Arc::new(Freezable::default());
        let wake = Arc::new(Notify::new());
        let config = HealthConfig {
            ping_interval: Duration::from_millis(200),
            detection_window: Duration::from_secs(2),
        };
        let w = InstanceWatch::start("i".into(), server.clone(), config, wake.clone());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(w.liveness(), Liveness::Answering);

        // A stall of half the window: still answering throughout.
        server.frozen.store(true, Ordering::SeqCst);
        let stalled = Instant::now();
        while stalled.elapsed() < Duration::from_secs(1) {
            assert_eq!(w.liveness(), Liveness::Answering);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        server.frozen.store(false, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(w.liveness(), Liveness::Answering);

        // A hang: unresponsive within the window plus one ping interval, and the manager woken.
        server.frozen.store(true, Ordering::SeqCst);
        let hung = Instant::now();
        tokio::time::timeout(Duration::from_secs(3), wake.notified())
            .await
            .expect("woken when the instance stopped answering");
        assert_eq!(w.liveness(), Liveness::Unresponsive);
        let took = hung.elapsed();
        assert!(
            took >= Duration::from_millis(1800) && took <= Duration::from_millis(2200),
            "{took:?}"
        );

        // Thawed: answering again at the next ping, and the manager woken.
        server.frozen.store(false, Ordering::SeqCst);
        tokio::time::timeout(Duration::from_secs(3), wake.notified())
            .await
            .expect("woken when the instance answered again");
        assert_eq!(w.liveness(), Liveness::Answering);
    }
}
