//! `moco init`, the init container: runs in the mysqld image before mysqld starts, with MOCO's
//! command line (`moco-init --data-dir=… --conf-dir=… --init-timezones=… SERVER_ID_BASE`).
//!
//! 1. A prepared clone waiting in `moco-clone-ready/` replaces `data/` (see [`crate::layout`]):
//!    nothing runs in the Pod yet, so this is the one moment the datadir can be swapped. A
//!    restored copy (its seed says `rekey`) then gets this cluster's passwords: it is started
//!    once on a private socket with `--skip-grant-tables --skip-networking`, its accounts are
//!    re-keyed ([`moco_adapters::instance::rekey`]) with the passwords of the cluster's
//!    Secret (the environment, as the agent reads it), and the seed is rewritten without
//!    `rekey`. A crash before that rewrite re-keys again on the next run.
//! 2. Unless `moco-initialized` exists, `data/` is removed (a half-done earlier attempt) and
//!    created again (`mariadb-install-db` or `mysqld --initialize-insecure`, with
//!    `lower_case_table_names` when given), the time zone tables are loaded when asked, and
//!    the marker is written atomically. A second run finds the marker and skips this.
//! 3. The per-instance snippet `<conf-dir>/my.cnf` is always rewritten: `server_id =
//!    SERVER_ID_BASE + ordinal`, for MySQL `admin_address`, and for MariaDB
//!    `init_rpl_role = SLAVE` when the MySQLCluster records another instance as the primary
//!    ([`crate::role`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use moco_adapters::instance::datadir::{DatadirInit, InitProgram, initialize_datadir};
use moco_adapters::instance::rekey::{Rekeyed, rekey_accounts};
use moco_adapters::mysqld::{LocalMysqld, ServerBinary, ServerKind, free_port, running_as_root};
use moco_core::facts::Flavor;
use moco_core::resources::mycnf::{InstanceConfig, instance_mycnf};

use crate::agent::clone::Seed;
use crate::error::AgentError;
use crate::layout::{DataVolume, sync_dir, write_atomically};
use crate::{pod, role};

/// `moco init`'s flags, as MOCO's moco-init takes them.
#[derive(Clone, Debug, clap::Args)]
pub struct InitArgs {
    /// `spec.serverIDBase`: this instance's `server_id` is it plus the Pod's ordinal.
    #[arg(value_name = "SERVER_ID_BASE")]
    pub server_id_base: u32,
    /// Where the server is installed (`bin/mysqld` under it is tried first).
    #[arg(long, default_value = "/usr/local/mysql")]
    pub base_dir: PathBuf,
    /// The data volume; the datadir is `data/` under it.
    #[arg(long, default_value = "/var/lib/mysql")]
    pub data_dir: PathBuf,
    /// Where the per-instance snippet `my.cnf` is written (my.cnf includes it).
    #[arg(long, default_value = "/etc/mysql-conf.d")]
    pub conf_dir: PathBuf,
    /// `lower_case_table_names` for a new datadir (it cannot change afterwards).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=2))]
    pub lower_case_table_names: Option<u8>,
    /// Write `admin_address = localhost` (the agent reaches mysqld over loopback).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "false", action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub mysqld_localhost: bool,
    /// Load the time zone tables into a new datadir.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "false", action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub init_timezones: bool,
    /// The time zone files for `--init-timezones`.
    #[arg(long, default_value = "/usr/share/zoneinfo")]
    pub zoneinfo_dir: PathBuf,
    /// The Pod's name (its ordinal gives the server_id).
    #[arg(long, env = pod::POD_NAME)]
    pub pod_name: String,
    /// The cluster's primary, when the caller knows it (tests); otherwise MariaDB reads it
    /// from the MySQLCluster through the API.
    #[arg(long, hide = true)]
    pub primary_index: Option<u32>,
    /// Limit of each step (initialisation, loading time zones).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// A Go duration (`10m`, `1m30s`) as MOCO's flags take it.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let nanos =
        moco_core::validate::duration::parse_go_duration(text).map_err(|e| e.to_string())?;
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| format!("{text:?}: a negative duration"))
}

/// What one run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InitReport {
    /// A prepared clone replaced the datadir.
    pub swapped_clone: bool,
    /// A restored copy's accounts got this cluster's passwords.
    pub rekeyed: bool,
    /// The restored copy's accounts dropped because they would win over MOCO's at login
    /// (other hosts of MOCO's names, anonymous ones), `'user'@'host'`.
    pub rekey_dropped: Vec<String>,
    /// The restored copy's other accounts with global privileges, kept and reported.
    pub rekey_privileged: Vec<String>,
    /// The datadir was created.
    pub initialized: bool,
    /// The time zone tables were loaded.
    pub loaded_timezones: bool,
    /// The snippet written.
    pub snippet: PathBuf,
    /// The server family found.
    pub flavor: Option<Flavor>,
    /// MariaDB starts as a replica (`init_rpl_role = SLAVE`).
    pub replica_role: bool,
}

/// Runs `moco init`.
pub async fn run(args: &InitArgs) -> Result<InitReport, AgentError> {
    let ordinal = pod::ordinal(&args.pod_name)?;
    let volume = DataVolume::new(&args.data_dir);
    let binary = find_server(&args.base_dir)?;
    let flavor = match binary.kind() {
        ServerKind::Mariadb => Flavor::Mariadb,
        ServerKind::Mysql => Flavor::Mysql,
    };
    let mut report = InitReport {
        flavor: Some(flavor),
        ..InitReport::default()
    };
    report.swapped_clone = put_clone_in_place(&volume)?;
    if let Some(rekeyed) = rekey_copy(args, &volume, &binary).await? {
        report.rekeyed = true;
        report.rekey_dropped = rekeyed.dropped;
        report.rekey_privileged = rekeyed.privileged;
    }
    if !volume.initialized_marker().exists() {
        initialize(args, &volume, &binary).await?;
        report.initialized = true;
        if args.init_timezones {
            load_timezones(args, &volume, &binary).await?;
            report.loaded_timezones = true;
        }
        write_atomically(&volume.initialized_marker(), b"")
            .map_err(|e| AgentError::io(volume.initialized_marker(), "write", e))?;
    }
    let snippet = instance_mycnf(
        flavor,
        &InstanceConfig::kubernetes(
            args.server_id_base,
            ordinal,
            &args.pod_name,
            args.mysqld_localhost,
        ),
    )
    .map_err(|e| AgentError::invalid("SERVER_ID_BASE", e.to_string()))?;
    if flavor == Flavor::Mariadb {
        let primary = match args.primary_index {
            Some(p) => Some(p),
            None => role::recorded_primary(&args.pod_name).await,
        };
        report.replica_role = primary.is_some_and(|p| p != ordinal);
    }
    let snippet = role::with_replica_role(&snippet, report.replica_role);
    std::fs::create_dir_all(&args.conf_dir)
        .map_err(|e| AgentError::io(&args.conf_dir, "create", e))?;
    report.snippet = args.conf_dir.join("my.cnf");
    write_atomically(&report.snippet, snippet.as_bytes())
        .map_err(|e| AgentError::io(&report.snippet, "write", e))?;
    Ok(report)
}

/// The server in the image: `<base-dir>/bin/mysqld` (MOCO's images), else the usual places.
fn find_server(base_dir: &Path) -> Result<ServerBinary, AgentError> {
    let in_base = base_dir.join("bin").join("mysqld");
    if in_base.is_file() {
        return Ok(ServerBinary::from_path(&in_base)?);
    }
    Ok(ServerBinary::find(None)?)
}

/// Replaces `data/` with a prepared copy, if one waits. Each step is a rename, so a crash
/// anywhere leaves either the old datadir with the copy still waiting, or the copy in place
/// (a leftover `data.old` is removed by the next run).
pub fn put_clone_in_place(volume: &DataVolume) -> Result<bool, AgentError> {
    let old = volume.root().join("data.old");
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(|e| AgentError::io(&old, "remove", e))?;
    }
    let ready = volume.clone_ready();
    if !ready.is_dir() {
        return Ok(false);
    }
    let datadir = volume.datadir();
    if datadir.exists() {
        std::fs::rename(&datadir, &old).map_err(|e| AgentError::io(&datadir, "move aside", e))?;
    }
    std::fs::rename(&ready, &datadir)
        .map_err(|e| AgentError::io(&ready, "put in place of data/", e))?;
    sync_dir(volume.root()).map_err(|e| AgentError::io(volume.root(), "sync", e))?;
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(|e| AgentError::io(&old, "remove", e))?;
    }
    // A copy is a complete datadir: it needs no initialisation.
    write_atomically(&volume.initialized_marker(), b"")
        .map_err(|e| AgentError::io(volume.initialized_marker(), "write", e))?;
    Ok(true)
}

/// Gives a restored copy in `data/` this cluster's passwords when its seed asks for it, then
/// clears the seed's `rekey` (atomically: a crash before re-keys again, after does not);
/// `None` when no copy needs it, else what re-keying dropped and found. Not only right after
/// the swap: a run that crashed between the swap and the rewrite left the copy in place with
/// the seed still asking.
async fn rekey_copy(
    args: &InitArgs,
    volume: &DataVolume,
    binary: &ServerBinary,
) -> Result<Option<Rekeyed>, AgentError> {
    let Some(mut seed) = Seed::load(volume)? else {
        return Ok(None);
    };
    if !seed.rekey || volume.clone_ready().exists() || volume.clone_staging().exists() {
        // Nothing to do, or the copy is not in data/ (the agent is still receiving it).
        return Ok(None);
    }
    let passwords = pod::passwords()?;
    let dir = scratch_dir().join("rekey-server");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| AgentError::io(&dir, "remove", e))?;
    }
    let socket = dir.join("mysqld.sock");
    let server = LocalMysqld::create(
        binary.clone(),
        &dir,
        &init_options(args, volume, &socket, 0),
    )?;
    server.start(&[
        "--skip-grant-tables".to_owned(),
        "--skip-networking".to_owned(),
        "--skip-log-bin".to_owned(),
    ])?;
    let rekeyed = rekey_accounts(&socket, &passwords, args.timeout).await;
    if rekeyed.is_err() {
        tracing::error!(log = %server.log_tail(20), "the copy's server while re-keying");
    }
    let stopped = server.stop(Duration::from_secs(60)).await;
    let rekeyed = rekeyed?;
    stopped?;
    seed.rekey = false;
    seed.store(volume)?;
    let _ = std::fs::remove_dir_all(&dir);
    tracing::info!(
        dropped = ?rekeyed.dropped,
        privileged = ?rekeyed.privileged,
        "the restored copy's accounts have this cluster's passwords"
    );
    Ok(Some(rekeyed))
}

/// The options file the tools get: nothing of the Pod's my.cnf is mounted here (as in MOCO),
/// only what shapes a new datadir.
fn init_options(args: &InitArgs, volume: &DataVolume, socket: &Path, port: u16) -> String {
    let mut text = format!(
        "[mysqld]\ndatadir = {}\nsocket = {}\nport = {port}\nbind_address = 127.0.0.1\npid_file = {}\n",
        volume.datadir().display(),
        socket.display(),
        socket.with_extension("pid").display(),
    );
    if let Some(n) = args.lower_case_table_names {
        text.push_str(&format!("lower_case_table_names = {n}\n"));
    }
    if running_as_root() {
        // mysqld refuses root without it (test machines; Pods run as 10000).
        text.push_str("user = root\n");
    }
    text
}

fn scratch_dir() -> PathBuf {
    std::env::temp_dir().join("moco-init")
}

async fn initialize(
    args: &InitArgs,
    volume: &DataVolume,
    binary: &ServerBinary,
) -> Result<(), AgentError> {
    let datadir = volume.datadir();
    if datadir.exists() {
        std::fs::remove_dir_all(&datadir).map_err(|e| AgentError::io(&datadir, "remove", e))?;
    }
    let scratch = scratch_dir();
    std::fs::create_dir_all(&scratch).map_err(|e| AgentError::io(&scratch, "create", e))?;
    let defaults = scratch.join("init.cnf");
    std::fs::write(
        &defaults,
        init_options(args, volume, &scratch.join("init.sock"), 0),
    )
    .map_err(|e| AgentError::io(&defaults, "write", e))?;
    let program = match binary.kind() {
        ServerKind::Mariadb => InitProgram::MariadbInstallDb {
            tool: binary
                .tool("mariadb-install-db")
                .or_else(|_| binary.tool("mysql_install_db"))?,
            basedir: None,
        },
        ServerKind::Mysql => InitProgram::MysqldInitializeInsecure {
            mysqld: binary.path().to_owned(),
        },
    };
    initialize_datadir(&DatadirInit {
        program,
        defaults_file: defaults,
        datadir,
        tmpdir: scratch.join("tmp"),
        as_root: running_as_root(),
        timeout: args.timeout,
    })
    .await?;
    Ok(())
}

/// Loads the time zone tables through a temporary server on loopback, without binary
/// logging: the new instance must still have executed no transaction when the agent creates
/// its accounts.
async fn load_timezones(
    args: &InitArgs,
    volume: &DataVolume,
    binary: &ServerBinary,
) -> Result<(), AgentError> {
    if !args.zoneinfo_dir.is_dir() {
        return Err(AgentError::invalid(
            "--init-timezones",
            format!(
                "no time zone files in {} (the mysqld image needs tzdata, or pass --zoneinfo-dir)",
                args.zoneinfo_dir.display()
            ),
        ));
    }
    let (to_sql, client) = match binary.kind() {
        ServerKind::Mariadb => (
            binary
                .tool("mariadb-tzinfo-to-sql")
                .or_else(|_| binary.tool("mysql_tzinfo_to_sql"))?,
            binary.tool("mariadb").or_else(|_| binary.tool("mysql"))?,
        ),
        ServerKind::Mysql => (binary.tool("mysql_tzinfo_to_sql")?, binary.tool("mysql")?),
    };
    let dir = scratch_dir().join("tz-server");
    let port = free_port().map_err(|e| AgentError::io(&dir, "find a free port", e))?;
    let socket = dir.join("mysqld.sock");
    let server = LocalMysqld::create(
        binary.clone(),
        &dir,
        &init_options(args, volume, &socket, port),
    )?;
    server.start(&["--skip-log-bin".to_owned()])?;
    let loaded = async {
        server.wait_ready(args.timeout).await?;
        pipe_timezones(&to_sql, &args.zoneinfo_dir, &client, &socket, args.timeout).await
    }
    .await;
    let stopped = server.stop(Duration::from_secs(60)).await;
    loaded?;
    stopped?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// `<tzinfo-to-sql> <zoneinfo> | <client> --socket=… -uroot mysql`.
async fn pipe_timezones(
    to_sql: &Path,
    zoneinfo: &Path,
    client: &Path,
    socket: &Path,
    timeout: Duration,
) -> Result<(), AgentError> {
    use std::process::Stdio;
    let mut producer = tokio::process::Command::new(to_sql)
        .arg(zoneinfo)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| AgentError::io(to_sql, "run", e))?;
    let stdout = producer
        .stdout
        .take()
        .ok_or_else(|| AgentError::invalid("--init-timezones", "no output from the converter"))?;
    let stdin: Stdio = stdout
        .try_into()
        .map_err(|e| AgentError::io(to_sql, "pipe", e))?;
    let consumer = tokio::process::Command::new(client)
        .arg("--no-defaults")
        .arg(format!("--socket={}", socket.display()))
        .arg("--user=root")
        .arg("--init-command=SET SESSION sql_log_bin=0")
        .arg("mysql")
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| AgentError::io(client, "run", e))?;
    let both = async {
        let output = consumer.wait_with_output().await;
        let produced = producer.wait().await;
        (output, produced)
    };
    let (output, produced) = tokio::time::timeout(timeout, both).await.map_err(|_| {
        AgentError::invalid(
            "--init-timezones",
            format!("loading the time zones took over {} s", timeout.as_secs()),
        )
    })?;
    let output = output.map_err(|e| AgentError::io(client, "wait for", e))?;
    let produced = produced.map_err(|e| AgentError::io(to_sql, "wait for", e))?;
    if !output.status.success() || !produced.success() {
        return Err(AgentError::invalid(
            "--init-timezones",
            format!(
                "{} | {} failed ({produced}, {}): {}",
                to_sql.display(),
                client.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(dir: &Path) -> InitArgs {
        InitArgs {
            server_id_base: 10,
            base_dir: dir.join("none"),
            data_dir: dir.join("volume"),
            conf_dir: dir.join("conf.d"),
            lower_case_table_names: Some(1),
            mysqld_localhost: false,
            init_timezones: false,
            zoneinfo_dir: "/usr/share/zoneinfo".into(),
            pod_name: "moco-db-2".into(),
            primary_index: None,
            timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn the_tool_options_shape_only_the_new_datadir() {
        let dir = Path::new("/x");
        let a = args(dir);
        let text = init_options(&a, &DataVolume::new(&a.data_dir), Path::new("/t/s.sock"), 0);
        let text = text.trim_end_matches("user = root\n");
        assert_eq!(
            text,
            "[mysqld]\ndatadir = /x/volume/data\nsocket = /t/s.sock\nport = 0\n\
             bind_address = 127.0.0.1\npid_file = /t/s.pid\nlower_case_table_names = 1\n"
        );
    }

    #[test]
    fn a_waiting_copy_replaces_the_datadir_once() {
        let dir = tempfile::tempdir().unwrap();
        let v = DataVolume::new(dir.path());
        std::fs::create_dir_all(v.datadir().join("mysql")).unwrap();
        std::fs::write(v.datadir().join("old-file"), b"old").unwrap();
        assert!(!put_clone_in_place(&v).unwrap(), "nothing waits");
        std::fs::create_dir_all(v.clone_ready().join("mysql")).unwrap();
        std::fs::write(v.clone_ready().join("copied"), b"new").unwrap();
        assert!(put_clone_in_place(&v).unwrap());
        assert!(v.datadir().join("copied").exists());
        assert!(!v.datadir().join("old-file").exists());
        assert!(!v.clone_ready().exists());
        assert!(!dir.path().join("data.old").exists());
        assert!(v.initialized_marker().exists());
        assert!(!put_clone_in_place(&v).unwrap(), "done once");
    }

    /// A crash between the two renames leaves `data.old` and the copy waiting: the next run
    /// finishes the swap.
    #[test]
    fn a_swap_interrupted_after_the_first_rename_is_finished() {
        let dir = tempfile::tempdir().unwrap();
        let v = DataVolume::new(dir.path());
        std::fs::create_dir_all(dir.path().join("data.old")).unwrap();
        std::fs::create_dir_all(v.clone_ready()).unwrap();
        std::fs::write(v.clone_ready().join("copied"), b"new").unwrap();
        assert!(put_clone_in_place(&v).unwrap());
        assert!(v.datadir().join("copied").exists());
        assert!(!dir.path().join("data.old").exists());
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert!(parse_duration("ten").is_err());
    }
}
