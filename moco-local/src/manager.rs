//! The commands that start a cluster's manager: `up` (create, then start), `resume`, and `run`,
//! the manager process that `detach` starts. In the foreground the manager runs in this
//! process with a live view until [`Host::shutdown`]; detached, [`Host::manager_command`]
//! starts it and the command returns once the cluster is Healthy.

use std::fs::File;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::platform::create;
use crate::platform::run::{self as local_run, RunOptions, RunningCluster};
use crate::platform::snapshot::ClusterSnapshot;
use crate::platform::{Layout, LocalError, Manifest};
use moco_core::state::ClusterState;

use crate::control::open;
use crate::error::{Error, usage};
use crate::host::Host;
use crate::options::{ManagerOptions, ResumeOptions, RunManagerOptions, UpOptions};
use crate::output::{out, print_out};
use crate::status::{LiveView, flavor_name, print_status_text};

/// `up`: creates the cluster in `options.create.dir` and starts its manager.
pub async fn up(options: UpOptions, host: &impl Host) -> Result<(), Error> {
    let started = Instant::now();
    let prepared = create::prepare(options.create)?;
    let m = prepared.manifest();
    out!(
        "creating {} instance(s) of {} {} in {} (ports {}-{})",
        m.replicas,
        flavor_name(m.flavor),
        m.server_version,
        prepared.layout().root().display(),
        m.base_port,
        u32::from(m.base_port) + create::port_count(m.replicas, m.flavor) - 1
    );
    let layout = prepared.layout().clone();
    let manifest = create::create(prepared).await?;
    out!(
        "initialised {} instance(s) in {:.1} s",
        manifest.replicas,
        started.elapsed().as_secs_f64()
    );
    start_manager(&layout, &manifest, &options.manager, started, host).await
}

/// `resume`: starts the manager of an existing, stopped cluster again.
pub async fn resume(options: ResumeOptions, host: &impl Host) -> Result<(), Error> {
    let (layout, manifest) = open(&options.dir)?;
    if let Some(pid) = local_run::running_manager(&layout)? {
        return Err(usage(format!(
            "{}: the manager is already running (pid {pid})",
            layout.root().display()
        )));
    }
    start_manager(&layout, &manifest, &options.manager, Instant::now(), host).await
}

/// Opens (creating) `DIR/manager.log` for appending.
fn open_manager_log(layout: &Layout) -> Result<File, LocalError> {
    let path = layout.manager_log();
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| LocalError::io(&path, "open", e))
}

/// The manager's log lines go to `DIR/manager.log`.
fn log_to_manager_log(layout: &Layout, host: &impl Host) -> Result<(), Error> {
    host.log_to(open_manager_log(layout)?);
    Ok(())
}

/// Starts the manager of the cluster in `layout`, detached or in the foreground as `options`
/// say; `started` is when the command began (for the times it prints).
pub(crate) async fn start_manager(
    layout: &Layout,
    manifest: &Manifest,
    options: &ManagerOptions,
    started: Instant,
    host: &impl Host,
) -> Result<(), Error> {
    let starting = Starting {
        layout,
        manifest,
        options,
        started,
    };
    if options.detach {
        starting.detached(host).await
    } else {
        starting.in_foreground(host).await
    }
}

/// A manager being started.
struct Starting<'a> {
    layout: &'a Layout,
    manifest: &'a Manifest,
    options: &'a ManagerOptions,
    /// When the command began.
    started: Instant,
}

impl Starting<'_> {
    /// `detach`: the manager in its own process, and a wait until the cluster is Healthy.
    async fn detached(&self, host: &impl Host) -> Result<(), Error> {
        let (layout, manifest, options) = (self.layout, self.manifest, self.options);
        let mut command = host.manager_command(&RunManagerOptions {
            dir: layout.root().to_path_buf(),
            check_interval: options.check_interval,
            detection_window: options.detection_window,
        })?;
        let program = Path::new(command.get_program()).to_path_buf();
        let log_path = layout.manager_log();
        let log = open_manager_log(layout)?;
        let err = log
            .try_clone()
            .map_err(|e| LocalError::io(&log_path, "duplicate handle of", e))?;
        command.stdin(Stdio::null()).stdout(log).stderr(err);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command
            .spawn()
            .map_err(|e| LocalError::io(&program, "start the manager", e))?;
        let pid = child.id();
        let deadline = Instant::now() + options.wait_timeout;
        loop {
            if let Ok(Some(exit)) = child.try_wait() {
                return Err(usage(format!(
                    "the manager (pid {pid}) exited with {exit}; {}:\n{}",
                    log_path.display(),
                    tail(&log_path, 20)
                )));
            }
            let snapshot = ClusterSnapshot::load(layout).ok().flatten();
            if let Some(s) = &snapshot
                && s.manager_pid == pid
                && s.is(ClusterState::Healthy)
            {
                print_status_text(layout, manifest, Some(pid), snapshot.as_ref());
                out!(
                    "cluster is Healthy after {:.1} s; manager pid {pid} (log {})",
                    self.started.elapsed().as_secs_f64(),
                    log_path.display()
                );
                print_out(&connect_commands(layout, manifest));
                return Ok(());
            }
            if Instant::now() >= deadline {
                let state = snapshot
                    .as_ref()
                    .map(|s| s.state_name())
                    .unwrap_or("no round yet");
                print_status_text(layout, manifest, Some(pid), snapshot.as_ref());
                return Err(usage(format!(
                    "the cluster did not become Healthy within {} s (state: {state}); the manager (pid {pid}) keeps running: see {} or stop it with `moco local down --dir {}`",
                    options.wait_timeout.as_secs(),
                    log_path.display(),
                    layout.root().display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The manager in this process with a live view; [`Host::shutdown`] stops everything.
    async fn in_foreground(&self, host: &impl Host) -> Result<(), Error> {
        let (layout, manifest, options) = (self.layout, self.manifest, self.options);
        log_to_manager_log(layout, host)?;
        let run = RunOptions {
            check_interval: options.check_interval,
            detection_window: options.detection_window,
            ..RunOptions::default()
        };
        let cluster = RunningCluster::start(layout, run).await?;
        let archiver = Archiving::start(layout);
        out!(
            "manager running (log {}); Ctrl-C stops the cluster",
            layout.manager_log().display()
        );
        let mut view = LiveView::new(layout);
        let mut healthy_reported = false;
        let stop = host.shutdown();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {
                    let snapshot = view.tick(manifest);
                    if !healthy_reported && snapshot.as_ref().is_some_and(|s| s.is(ClusterState::Healthy)) {
                        healthy_reported = true;
                        out!("cluster is Healthy after {:.1} s", self.started.elapsed().as_secs_f64());
                        print_out(&connect_commands(layout, manifest));
                    }
                }
            }
        }
        out!("stopping the cluster…");
        archiver.stop().await;
        cluster.stop().await?;
        out!(
            "stopped; start it again with `moco local resume --dir {}`",
            layout.root().display()
        );
        Ok(())
    }
}

/// Binlog archiving beside the manager (it acts only while `moco local backup archive` has
/// turned it on; see [`crate::backup::archive`]).
struct Archiving {
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Archiving {
    fn start(layout: &Layout) -> Self {
        let (shutdown, receiver) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(crate::backup::archive::run(layout.clone(), receiver));
        Archiving { shutdown, task }
    }

    async fn stop(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

/// `run`: the manager process itself (what `detach` starts), logging to `DIR/manager.log`,
/// until [`Host::shutdown`].
pub async fn run_manager(options: RunManagerOptions, host: &impl Host) -> Result<(), Error> {
    let (layout, _manifest) = open(&options.dir)?;
    log_to_manager_log(&layout, host)?;
    // A detached manager outlives the terminal that started it: ignore its hangup.
    host.ignore_hangup();
    let run = RunOptions {
        check_interval: options.check_interval,
        detection_window: options.detection_window,
        ..RunOptions::default()
    };
    let cluster = match RunningCluster::start(&layout, run).await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "manager start failed");
            return Err(e.into());
        }
    };
    let archiver = Archiving::start(&layout);
    tracing::info!(pid = std::process::id(), "manager running");
    host.shutdown().await;
    tracing::info!("stopping");
    archiver.stop().await;
    cluster.stop().await?;
    tracing::info!("stopped");
    Ok(())
}

/// How to connect, printed once the cluster is Healthy: the option files hold user, password,
/// host and port.
fn connect_commands(layout: &Layout, manifest: &Manifest) -> String {
    let cnf = |user: &str| {
        let path = layout.client_cnf(user);
        shell_word(
            &std::path::absolute(&path)
                .unwrap_or(path)
                .display()
                .to_string(),
        )
    };
    let mut out = format!(
        "connect (read-write, follows the primary): mariadb --defaults-extra-file={}\n",
        cnf("moco-writable")
    );
    if manifest.replicas > 1 {
        out.push_str(&format!(
            "connect (read-only, the replicas):          mariadb --defaults-extra-file={}\n",
            cnf("moco-readonly")
        ));
    }
    out
}

/// `text` as one shell word, for commands printed to be copied: quoted when it holds anything
/// but letters, digits and `/._-+=:@,`.
fn shell_word(text: &str) -> String {
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:@,".contains(c));
    if plain && !text.is_empty() {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod shell_word_tests {
    use super::shell_word;

    #[test]
    fn printed_paths_paste_as_one_word() {
        assert_eq!(shell_word("/home/me/db/c.cnf"), "/home/me/db/c.cnf");
        assert_eq!(shell_word("/tmp/sp ace/c.cnf"), "'/tmp/sp ace/c.cnf'");
        assert_eq!(shell_word("/tmp/it's"), "'/tmp/it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
