//! Runs the command lines of MOCO's MySQL format ([`crate::mysql::format`]): one process or a
//! pipeline of them, reading an object downloaded from the bucket or nothing, writing an
//! object uploaded to it or the log. Passwords reach each process as its [`CommandLine`]
//! says, never as an argument.
//!
//! The end of a pipeline's output is the end of the object only when every stage exited 0:
//! a `tar` that fails halfway closes its output like one that finished. So the upload's
//! reader reports the end only after every stage succeeded, and sees an error otherwise,
//! which aborts the upload: no object that looks complete is left behind.

use std::future::Future as _;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::task::{Context, Poll};

use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWriteExt as _, BufReader, ReadBuf,
};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use moco_adapters::modes::write_atomic;

use crate::bucket::{Bucket, BucketError};
use crate::mysql::format::command_line::{
    CommandLine, PasswordInput, Pipeline, client_option_file,
};

/// How much of a failed process's standard error its error keeps: the end, where the tools
/// say why they stopped.
const STDERR_TAIL: usize = 4096;

/// Where the tools are: looked up in `PATH` (MOCO's backup image), or all in one directory.
#[derive(Clone, Debug, Default)]
pub struct Tools {
    dir: Option<PathBuf>,
}

/// What the first stage reads.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// Nothing: its standard input is empty (or carries its password).
    Nothing,
    /// The object `key`, streamed.
    Object {
        /// Where it is.
        bucket: &'a Bucket,
        /// Its key.
        key: &'a str,
    },
}

/// Where the last stage's output goes.
#[derive(Clone, Copy, Debug)]
pub enum Output<'a> {
    /// Into the log, line by line (what `mysqlsh` reports of its progress).
    Log,
    /// Into the object `key`, created only when every stage succeeded.
    Object {
        /// Where it goes.
        bucket: &'a Bucket,
        /// Its key.
        key: &'a str,
    },
}

/// Why a run failed; each names the command line (which never holds a password).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The pipeline cannot be run as asked.
    #[error("{command}: {message}")]
    Invalid {
        /// The command line.
        command: String,
        /// What is wrong.
        message: String,
    },
    /// A process did not start.
    #[error("{command}: cannot start: {source}")]
    Start {
        /// The command line.
        command: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Stages exited unsuccessfully, each with the end of what it wrote to standard error.
    #[error("{}", failures.join("; "))]
    Failed {
        /// `command exited with …: stderr`, one per failed stage, the first stage first.
        failures: Vec<String>,
    },
    /// A password file or a pipe.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// The object read or written.
    #[error(transparent)]
    Bucket(#[from] BucketError),
}

/// What a run moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ran {
    /// Bytes read from the input object.
    pub read: u64,
    /// Bytes written to the output object.
    pub written: u64,
}

impl Tools {
    /// The tools are found through `PATH`.
    pub fn from_path() -> Self {
        Tools { dir: None }
    }

    /// Every tool is `dir/<program>`.
    pub fn in_dir(dir: impl Into<PathBuf>) -> Self {
        Tools {
            dir: Some(dir.into()),
        }
    }

    fn program(&self, name: &str) -> PathBuf {
        match &self.dir {
            Some(dir) => dir.join(name),
            None => PathBuf::from(name),
        }
    }
}

/// Runs `command` alone, with `password` for the account it connects as.
pub async fn run_one(
    tools: &Tools,
    command: &CommandLine,
    password: &str,
) -> Result<Ran, CommandError> {
    let pipeline = Pipeline {
        stages: vec![command.clone()],
    };
    run(tools, &pipeline, password, Input::Nothing, Output::Log).await
}

/// Runs `pipeline` from `input` to `output`; `password` is the password of the account its
/// connecting stages use (the format's pipelines connect as one account at most).
pub async fn run(
    tools: &Tools,
    pipeline: &Pipeline,
    password: &str,
    input: Input<'_>,
    output: Output<'_>,
) -> Result<Ran, CommandError> {
    check(pipeline, input)?;
    let _files = OptionFiles::write(pipeline, password)?;
    let mut children = Vec::with_capacity(pipeline.stages.len());
    let mut stderr_tasks = Vec::with_capacity(pipeline.stages.len());
    for (i, stage) in pipeline.stages.iter().enumerate() {
        let stdin = if i == 0 {
            match (input, &stage.password) {
                (Input::Object { .. }, _) | (_, PasswordInput::Stdin) => Stdio::piped(),
                _ => Stdio::null(),
            }
        } else {
            let previous: &mut Child = children
                .last_mut()
                .ok_or_else(|| invalid(stage, "a pipeline stage without a previous one"))?;
            let out = previous
                .stdout
                .take()
                .ok_or_else(|| invalid(stage, "the previous stage has no output"))?;
            out.try_into().map_err(|source| CommandError::Io {
                what: format!("{stage}: connect its input"),
                source,
            })?
        };
        let mut child = Command::new(tools.program(&stage.program))
            .args(&stage.args)
            .envs(stage.env.iter().map(|(k, v)| (k, v)))
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| CommandError::Start {
                command: stage.to_string(),
                source,
            })?;
        let stderr = child.stderr.take();
        let name = stage.program.clone();
        stderr_tasks.push(tokio::spawn(async move {
            match stderr {
                Some(stderr) => log_lines(stderr, &name, true).await,
                None => String::new(),
            }
        }));
        children.push(child);
    }

    let first = children.first_mut().ok_or_else(|| CommandError::Invalid {
        command: pipeline.to_string(),
        message: "no stage to run".to_owned(),
    })?;
    let stdin = first.stdin.take();
    let first_stage = &pipeline.stages[0];
    let feed = feed(stdin, input, first_stage, password);

    let stdout = children.last_mut().and_then(|c| c.stdout.take());
    let (exited_tx, exited_rx) = oneshot::channel::<Result<(), String>>();
    let wait = async {
        let mut failures = Vec::new();
        for ((child, stage), stderr) in children.iter_mut().zip(&pipeline.stages).zip(stderr_tasks)
        {
            let status = child.wait().await;
            let tail = stderr.await.unwrap_or_default();
            match status {
                Ok(s) if s.success() => {}
                Ok(s) => failures.push(failure(stage, s, &tail)),
                Err(e) => failures.push(format!("{stage}: wait: {e}")),
            }
        }
        let verdict = if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        };
        let _ = exited_tx.send(verdict);
        failures
    };
    let consume = async {
        let Some(stdout) = stdout else {
            return Ok(0);
        };
        match output {
            Output::Log => {
                let name = pipeline
                    .stages
                    .last()
                    .map(|s| s.program.clone())
                    .unwrap_or_default();
                log_lines(stdout, &name, false).await;
                Ok(0)
            }
            Output::Object { bucket, key } => {
                let checked = EndChecked {
                    inner: stdout,
                    exited: Some(exited_rx),
                };
                bucket.upload(key, checked).await
            }
        }
    };
    let (fed, failures, consumed) = tokio::join!(feed, wait, consume);
    if !failures.is_empty() {
        // A download that failed first explains the stages' failures better than they do.
        if let Err(e @ (CommandError::Bucket(_) | CommandError::Io { .. })) = fed {
            return Err(e);
        }
        if let Err(e @ BucketError::Store { .. }) = consumed {
            return Err(e.into());
        }
        return Err(CommandError::Failed { failures });
    }
    let read = fed?;
    let written = consumed?;
    Ok(Ran { read, written })
}

/// A password on stdin needs stdin for itself.
fn check(pipeline: &Pipeline, input: Input<'_>) -> Result<(), CommandError> {
    for (i, stage) in pipeline.stages.iter().enumerate() {
        if stage.password == PasswordInput::Stdin
            && (i > 0 || matches!(input, Input::Object { .. }))
        {
            return Err(invalid(
                stage,
                "reads its password from standard input, which another stream feeds",
            ));
        }
    }
    Ok(())
}

fn invalid(stage: &CommandLine, message: &str) -> CommandError {
    CommandError::Invalid {
        command: stage.to_string(),
        message: message.to_owned(),
    }
}

/// What a failed stage reports: its exit and an excerpt of what it wrote on stderr, values
/// redacted ([`crate::guard::tool_output::excerpt`]; the log has every line).
fn failure(stage: &CommandLine, status: ExitStatus, stderr_tail: &str) -> String {
    let tail = crate::guard::tool_output::excerpt(stderr_tail);
    if tail.is_empty() {
        format!("{stage} exited with {status}")
    } else {
        format!("{stage} exited with {status}: {tail}")
    }
}

/// Writes the password or the input object into the first stage, then closes its input.
/// A process that stops reading early (a broken pipe) is not this side's failure: its exit
/// status says why.
async fn feed(
    stdin: Option<tokio::process::ChildStdin>,
    input: Input<'_>,
    stage: &CommandLine,
    password: &str,
) -> Result<u64, CommandError> {
    let Some(mut stdin) = stdin else {
        return Ok(0);
    };
    let written = match input {
        Input::Nothing => {
            // Only a password reader gets a piped stdin without an object.
            let line = format!("{password}\n");
            stdin.write_all(line.as_bytes()).await.map(|()| 0)
        }
        Input::Object { bucket, key } => {
            let mut object = bucket.download(key).await?;
            let mut buffer = vec![0u8; 1 << 20];
            let mut total = 0u64;
            loop {
                let n = object
                    .read(&mut buffer)
                    .await
                    .map_err(|source| CommandError::Io {
                        what: format!("read {key}"),
                        source,
                    })?;
                if n == 0 {
                    break Ok(total);
                }
                if let Err(e) = stdin.write_all(&buffer[..n]).await {
                    break Err(e);
                }
                total += n as u64;
            }
        }
    };
    drop(stdin);
    match written {
        Ok(n) => Ok(n),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(0),
        Err(source) => Err(CommandError::Io {
            what: format!("{stage}: write its input"),
            source,
        }),
    }
}

/// Logs each line a process writes; returns the last [`STDERR_TAIL`] bytes for its error.
async fn log_lines(stream: impl AsyncRead + Unpin, program: &str, stderr: bool) -> String {
    let mut lines = BufReader::new(stream).split(b'\n');
    let mut tail = String::new();
    while let Ok(Some(line)) = lines.next_segment().await {
        let line = String::from_utf8_lossy(&line);
        let line = line.trim_end_matches('\r');
        if stderr {
            tracing::info!(program, stream = "stderr", "{line}");
            tail.push_str(line);
            tail.push('\n');
            if tail.len() > 2 * STDERR_TAIL {
                keep_last(&mut tail, STDERR_TAIL);
            }
        } else {
            tracing::info!(program, "{line}");
        }
    }
    keep_last(&mut tail, STDERR_TAIL);
    tail
}

/// Cuts `text` to about its last `max` bytes (at a character boundary).
fn keep_last(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut cut = text.len() - max;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text.drain(..cut);
}

/// The option files of a pipeline's stages, 0600, removed when dropped.
struct OptionFiles {
    paths: Vec<PathBuf>,
}

impl OptionFiles {
    fn write(pipeline: &Pipeline, password: &str) -> Result<Self, CommandError> {
        let mut files = OptionFiles { paths: Vec::new() };
        for stage in &pipeline.stages {
            if let PasswordInput::OptionFile { path } = &stage.password {
                let path = PathBuf::from(path);
                // A file left by an earlier run is replaced, never reused with its old mode.
                write_atomic(&path, client_option_file(password).as_bytes(), 0o600).map_err(
                    |source| CommandError::Io {
                        what: format!("write {}", path.display()),
                        source,
                    },
                )?;
                files.paths.push(path);
            }
        }
        Ok(files)
    }
}

impl Drop for OptionFiles {
    fn drop(&mut self) {
        for path in &self.paths {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A process's output whose end is reported only once every stage has exited 0.
struct EndChecked<R> {
    inner: R,
    exited: Option<oneshot::Receiver<Result<(), String>>>,
}

impl<R: AsyncRead + Unpin> AsyncRead for EndChecked<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if buf.filled().len() == before => {}
            other => return other,
        }
        let Some(exited) = self.exited.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        match Pin::new(exited).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(verdict) => {
                self.exited = None;
                match verdict {
                    Ok(Ok(())) => Poll::Ready(Ok(())),
                    Ok(Err(why)) => Poll::Ready(Err(io::Error::other(why))),
                    Err(_) => Poll::Ready(Err(io::Error::other(
                        "the pipeline's exit was never reported",
                    ))),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket::BucketSpec;
    use crate::mysql::format::backup::binlog_archive;
    use crate::mysql::format::restore::binlog_extract;
    use std::num::NonZeroU32;
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::Path;

    fn bucket(dir: &Path) -> Bucket {
        BucketSpec::from_url(&dir.display().to_string())
            .unwrap()
            .open(&Default::default())
            .unwrap()
    }

    fn line(program: &str, args: &[&str], password: PasswordInput) -> CommandLine {
        CommandLine {
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: Vec::new(),
            password,
        }
    }

    /// A tool of the test's own: `dir/name` running `script` under `sh`.
    fn tool(dir: &Path, name: &str, script: &str) {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[tokio::test]
    async fn an_archive_goes_up_through_tar_and_zstd_and_comes_back_whole() {
        let root = tempfile::tempdir().unwrap();
        let work = root.path().join("work");
        let restored = root.path().join("restored");
        std::fs::create_dir_all(work.join("binlog")).unwrap();
        std::fs::create_dir_all(&restored).unwrap();
        let content: Vec<u8> = (0..300_000u32).flat_map(|i| i.to_le_bytes()).collect();
        std::fs::write(work.join("binlog/binlog.000001"), &content).unwrap();
        std::fs::write(work.join("binlog/binlog.000002"), b"second").unwrap();
        let store = bucket(&root.path().join("bucket"));
        let threads = NonZeroU32::new(2).unwrap();

        let up = run(
            &Tools::from_path(),
            &binlog_archive(&work.display().to_string(), threads),
            "",
            Input::Nothing,
            Output::Object {
                bucket: &store,
                key: "moco/ns/db/20261124-000000/binlog.tar.zst",
            },
        )
        .await
        .unwrap();
        assert!(
            up.written > 0 && up.written < content.len() as u64,
            "{up:?}"
        );
        let down = run(
            &Tools::from_path(),
            &binlog_extract(&restored.display().to_string()),
            "",
            Input::Object {
                bucket: &store,
                key: "moco/ns/db/20261124-000000/binlog.tar.zst",
            },
            Output::Log,
        )
        .await
        .unwrap();
        assert_eq!(down.read, up.written);
        assert_eq!(
            std::fs::read(restored.join("binlog/binlog.000001")).unwrap(),
            content
        );
        assert_eq!(
            std::fs::read(restored.join("binlog/binlog.000002")).unwrap(),
            b"second"
        );
    }

    #[tokio::test]
    async fn a_stage_that_fails_halfway_leaves_no_object_and_says_why() {
        let root = tempfile::tempdir().unwrap();
        let tools = Tools::in_dir(root.path());
        // Writes part of its output, then fails, as a tar that meets an unreadable file.
        tool(
            root.path(),
            "half",
            "head -c 100000 /dev/zero; echo 'half: cannot read dump/x' >&2; exit 2",
        );
        let store = bucket(&root.path().join("bucket"));
        let pipeline = Pipeline {
            stages: vec![
                line("half", &[], PasswordInput::None),
                line("zstd", &[], PasswordInput::None),
            ],
        };
        let e = run(
            &Tools::in_dir(root.path()),
            &Pipeline {
                stages: vec![line("half", &[], PasswordInput::None)],
            },
            "",
            Input::Nothing,
            Output::Object {
                bucket: &store,
                key: "k/dump.tar",
            },
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("half exited with exit status: 2: half: cannot read dump/x"),
            "{e}"
        );
        assert!(store.list("").await.unwrap().is_empty());
        // The same through a second stage that succeeds on what it got.
        tool(root.path(), "zstd", "exec /usr/bin/zstd \"$@\"");
        let e = run(
            &tools,
            &pipeline,
            "",
            Input::Nothing,
            Output::Object {
                bucket: &store,
                key: "k/binlog.tar.zst",
            },
        )
        .await
        .unwrap_err();
        match &e {
            CommandError::Failed { failures } => {
                assert_eq!(failures.len(), 1, "{failures:?}");
                assert!(failures[0].starts_with("half exited"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        assert!(store.list("").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn passwords_go_through_stdin_or_a_private_option_file_never_an_argument() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path();
        let tools = Tools::in_dir(dir);
        let password = "p'a ss\"word#1";
        // Records its arguments and the line it reads.
        tool(
            dir,
            "mysqlsh",
            &format!(
                "echo \"$@\" > {d}/sh.args; read -r line; printf '%s' \"$line\" > {d}/sh.stdin; \
                 printf 'Please provide the password: '; echo done",
                d = dir.display()
            ),
        );
        let sh = line(
            "mysqlsh",
            &["mysql://moco-backup@h:3306", "--passwords-from-stdin"],
            PasswordInput::Stdin,
        );
        run_one(&tools, &sh, password).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("sh.stdin")).unwrap(),
            password
        );
        assert!(
            !std::fs::read_to_string(dir.join("sh.args"))
                .unwrap()
                .contains("ss\"word")
        );

        // Copies the option file it is given and records its mode.
        let cnf = dir.join("moco-admin.cnf");
        tool(
            dir,
            "mysql",
            &format!(
                "f=${{1#--defaults-extra-file=}}; cp \"$f\" {d}/seen.cnf; stat -c %a \"$f\" > {d}/mode",
                d = dir.display()
            ),
        );
        std::fs::write(&cnf, "left by an earlier run").unwrap();
        std::fs::set_permissions(&cnf, std::fs::Permissions::from_mode(0o644)).unwrap();
        let client = line(
            "mysql",
            &[&format!("--defaults-extra-file={}", cnf.display())],
            PasswordInput::OptionFile {
                path: cnf.display().to_string(),
            },
        );
        run_one(&tools, &client, password).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("seen.cnf")).unwrap(),
            client_option_file(password)
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("mode")).unwrap().trim(),
            "600"
        );
        assert!(!cnf.exists(), "the option file outlived the run");
    }

    #[tokio::test]
    async fn a_missing_tool_and_a_password_reader_fed_an_object_are_refused_by_name() {
        let root = tempfile::tempdir().unwrap();
        let tools = Tools::in_dir(root.path());
        let e = run_one(&tools, &line("mysqlsh", &["x"], PasswordInput::None), "")
            .await
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("mysqlsh x: cannot start: "), "{e}");
        let store = bucket(&root.path().join("bucket"));
        let e = run(
            &tools,
            &Pipeline {
                stages: vec![line("mysqlsh", &[], PasswordInput::Stdin)],
            },
            "pw",
            Input::Object {
                bucket: &store,
                key: "k",
            },
            Output::Log,
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(e.contains("reads its password from standard input"), "{e}");
    }

    #[tokio::test]
    async fn a_failing_download_is_the_error_not_the_stage_it_starved() {
        let root = tempfile::tempdir().unwrap();
        let store = bucket(&root.path().join("bucket"));
        let e = run(
            &Tools::from_path(),
            &binlog_extract(&root.path().display().to_string()),
            "",
            Input::Object {
                bucket: &store,
                key: "moco/ns/db/20261124-000000/binlog.tar.zst",
            },
            Output::Log,
        )
        .await
        .unwrap_err();
        assert!(matches!(e, CommandError::Bucket(_)), "{e}");
    }
}
