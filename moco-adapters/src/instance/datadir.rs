//! Initialising an empty datadir, once: the system tables, root without a password on the
//! socket. A second run finds `mysql/` and does nothing, so an init container may be
//! restarted at any point before the server first starts.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::InstanceError;
use crate::failure::{CommandFailed, tail};

/// The program that creates the system tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitProgram {
    /// MariaDB: `mariadb-install-db --auth-root-authentication-method=normal --skip-test-db`.
    MariadbInstallDb {
        /// `mariadb-install-db` (or `mysql_install_db`).
        tool: PathBuf,
        /// `--basedir`, for a server unpacked outside `/usr`.
        basedir: Option<PathBuf>,
    },
    /// MySQL: `mysqld --initialize-insecure`.
    MysqldInitializeInsecure {
        /// The server binary.
        mysqld: PathBuf,
    },
}

/// Everything [`initialize_datadir`] needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatadirInit {
    /// The program and its installation.
    pub program: InitProgram,
    /// The server's my.cnf (`--defaults-file`), which names the datadir.
    pub defaults_file: PathBuf,
    /// The datadir the my.cnf names.
    pub datadir: PathBuf,
    /// `TMPDIR` for the program (servers sharing `/tmp` trip over each other).
    pub tmpdir: PathBuf,
    /// Pass `--user=root` (running as root without `user` in my.cnf).
    pub as_root: bool,
    /// Limit for the program.
    pub timeout: Duration,
}

/// True when `datadir` holds the system schema.
pub fn is_initialized(datadir: &Path) -> bool {
    datadir.join("mysql").is_dir()
}

/// How [`initialize_datadir`] runs the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitCommand {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Where it runs; `None`: the caller's directory.
    pub cwd: Option<PathBuf>,
}

impl DatadirInit {
    /// True when mariadb-install-db would break on this init's paths. It is a shell script
    /// that splits its defaults file's path, and the option values it reads from that file,
    /// on whitespace; a path with a space (a `--dir` under `/home/a user`) broke it.
    pub fn needs_space_free_paths(&self) -> bool {
        let spaced = |p: &Path| p.to_string_lossy().chars().any(char::is_whitespace);
        matches!(self.program, InitProgram::MariadbInstallDb { .. })
            && (spaced(&self.defaults_file) || spaced(&self.datadir))
    }

    /// The program, its arguments and where it runs. With `datadir_alias` (a space-free
    /// symlink to the datadir, see [`DatadirInit::needs_space_free_paths`]) the program runs
    /// in the my.cnf's directory, names the my.cnf by its file name, and is given the alias as
    /// its datadir (which overrides the my.cnf's).
    pub fn command(&self, datadir_alias: Option<&Path>) -> InitCommand {
        let mut defaults = format!("--defaults-file={}", self.defaults_file.display());
        let mut cwd = None;
        let mut datadir_arg = None;
        if let (Some(alias), Some(dir), Some(name)) = (
            datadir_alias,
            self.defaults_file.parent(),
            self.defaults_file.file_name(),
        ) {
            defaults = format!("--defaults-file={}", Path::new(name).display());
            datadir_arg = Some(format!("--datadir={}", alias.display()));
            cwd = Some(dir.to_path_buf());
        }
        let (program, mut args) = match &self.program {
            InitProgram::MariadbInstallDb { tool, basedir } => {
                let mut args = vec![
                    defaults,
                    "--auth-root-authentication-method=normal".to_owned(),
                    "--skip-test-db".to_owned(),
                ];
                if let Some(dir) = basedir {
                    args.push(format!("--basedir={}", dir.display()));
                }
                args.extend(datadir_arg);
                (tool.clone(), args)
            }
            InitProgram::MysqldInitializeInsecure { mysqld } => (
                mysqld.clone(),
                vec![defaults, "--initialize-insecure".to_owned()],
            ),
        };
        if self.as_root {
            args.push("--user=root".to_owned());
        }
        InitCommand { program, args, cwd }
    }
}

/// A space-free symlink to a datadir, removed when dropped.
struct DatadirAlias(PathBuf);

impl DatadirAlias {
    fn create(datadir: &Path) -> Result<Self, InstanceError> {
        let base = std::env::temp_dir();
        let base = if base.to_string_lossy().chars().any(char::is_whitespace) {
            PathBuf::from("/tmp")
        } else {
            base
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let link = base.join(format!("moco-datadir-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(datadir)
            .map_err(|e| InstanceError::io(datadir, "create datadir", e))?;
        std::os::unix::fs::symlink(datadir, &link)
            .map_err(|e| InstanceError::io(&link, "create a space-free link to the datadir", e))?;
        Ok(DatadirAlias(link))
    }
}

impl Drop for DatadirAlias {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Creates the system tables unless they exist; returns `false` when there was nothing to do.
/// On failure the error carries the end of the program's output.
pub async fn initialize_datadir(init: &DatadirInit) -> Result<bool, InstanceError> {
    if is_initialized(&init.datadir) {
        return Ok(false);
    }
    if let Some(parent) = init.datadir.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| InstanceError::io(parent, "create datadir parent", e))?;
    }
    std::fs::create_dir_all(&init.tmpdir)
        .map_err(|e| InstanceError::io(&init.tmpdir, "create tmpdir", e))?;
    let alias = if init.needs_space_free_paths() {
        Some(DatadirAlias::create(&init.datadir)?)
    } else {
        None
    };
    let InitCommand { program, args, cwd } = init.command(alias.as_ref().map(|a| a.0.as_path()));
    let command = format!("{} {}", program.display(), args.join(" "));
    let mut child = tokio::process::Command::new(&program);
    if let Some(dir) = &cwd {
        child.current_dir(dir);
    }
    let child = child
        .args(&args)
        .env("TMPDIR", &init.tmpdir)
        .env("UMASK", crate::modes::SERVER_FILE_UMASK)
        .env("UMASK_DIR", crate::modes::SERVER_DIR_UMASK)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| InstanceError::io(&program, "run", e))?;
    let output = tokio::time::timeout(init.timeout, child.wait_with_output())
        .await
        .map_err(|_| InstanceError::Timeout {
            what: command.clone(),
            seconds: init.timeout.as_secs(),
        })?
        .map_err(|e| InstanceError::io(&program, "wait for", e))?;
    if !output.status.success() || !is_initialized(&init.datadir) {
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        return Err(InstanceError::Command(CommandFailed {
            command,
            status: output.status.to_string(),
            output_tail: tail(&text, 15),
        }));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl InitCommand {
        fn parts(self) -> (PathBuf, Vec<String>) {
            assert_eq!(self.cwd, None);
            (self.program, self.args)
        }
    }

    /// Issue 12, item 9: a `--dir` with a space broke mariadb-install-db's word splitting.
    #[test]
    fn paths_with_spaces_are_given_relative_to_the_mycnf() {
        let mut i = init(
            InitProgram::MariadbInstallDb {
                tool: "/usr/bin/mariadb-install-db".into(),
                basedir: None,
            },
            false,
        );
        assert!(!i.needs_space_free_paths());
        i.defaults_file = "/home/a user/db/instances/0/my.cnf".into();
        i.datadir = "/home/a user/db/instances/0/data".into();
        assert!(i.needs_space_free_paths());
        let c = i.command(Some(Path::new("/tmp/moco-datadir-1-2")));
        assert_eq!(c.cwd, Some(PathBuf::from("/home/a user/db/instances/0")));
        assert_eq!(
            c.args,
            [
                "--defaults-file=my.cnf",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--datadir=/tmp/moco-datadir-1-2"
            ]
        );
        assert!(c.args.iter().all(|a| !a.contains(' ')));
    }

    fn init(program: InitProgram, as_root: bool) -> DatadirInit {
        DatadirInit {
            program,
            defaults_file: "/etc/mysql/my.cnf".into(),
            datadir: "/var/lib/mysql/data".into(),
            tmpdir: "/tmp/x".into(),
            as_root,
            timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn commands_per_flavour() {
        let (p, a) = init(
            InitProgram::MariadbInstallDb {
                tool: "/opt/mariadb/bin/mariadb-install-db".into(),
                basedir: Some("/opt/mariadb".into()),
            },
            true,
        )
        .command(None)
        .parts();
        assert_eq!(p, PathBuf::from("/opt/mariadb/bin/mariadb-install-db"));
        assert_eq!(
            a,
            [
                "--defaults-file=/etc/mysql/my.cnf",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--basedir=/opt/mariadb",
                "--user=root"
            ]
        );
        let (p, a) = init(
            InitProgram::MysqldInitializeInsecure {
                mysqld: "/usr/sbin/mysqld".into(),
            },
            false,
        )
        .command(None)
        .parts();
        assert_eq!(p, PathBuf::from("/usr/sbin/mysqld"));
        assert_eq!(
            a,
            ["--defaults-file=/etc/mysql/my.cnf", "--initialize-insecure"]
        );
    }

    #[tokio::test]
    async fn an_initialised_datadir_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let datadir = dir.path().join("data");
        std::fs::create_dir_all(datadir.join("mysql")).unwrap();
        let mut i = init(
            InitProgram::MysqldInitializeInsecure {
                mysqld: "/nonexistent/mysqld".into(),
            },
            false,
        );
        i.datadir = datadir;
        assert!(!initialize_datadir(&i).await.unwrap());
    }

    #[tokio::test]
    async fn a_failing_program_is_reported_with_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let mut i = init(
            InitProgram::MysqldInitializeInsecure {
                mysqld: "/bin/false".into(),
            },
            false,
        );
        i.datadir = dir.path().join("data");
        i.tmpdir = dir.path().join("tmp");
        let e = initialize_datadir(&i).await.unwrap_err();
        assert!(matches!(e, InstanceError::Command(_)), "{e}");
        assert!(e.to_string().contains("/bin/false"), "{e}");
    }
}
