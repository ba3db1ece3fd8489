//! `moco validate`: check manifests of MOCO's kinds (MySQLCluster, BackupPolicy) and moco-rs's
//! (MySQLUser, MySQLDatabase) offline against the CRD schema, the CRD's CEL rules and the
//! admission webhooks' rules.

use std::process::ExitCode;

use moco_api::offline::{Document, OfflineError, OfflineValidator, parse_documents};

/// Arguments of `moco validate`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Manifest files (multi-document YAML); `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// The objects as they are now: objects of the same kind, namespace and name in FILE are
    /// checked as updates of these (and BackupPolicies missing from FILE as deletions).
    /// May be repeated.
    #[arg(long, value_name = "FILE")]
    pub old: Vec<String>,
}

/// Errors of `moco validate`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// A file could not be read.
    #[error("cannot read {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// Parsing or setup failed.
    #[error(transparent)]
    Offline(#[from] OfflineError),
    /// Standard input was named more than once.
    #[error("standard input (`-`) can be read only once")]
    StdinTwice,
}

/// Reads and splits every file (`-` = standard input, once).
pub(crate) fn read_all(files: &[String], stdin_used: &mut bool) -> Result<Vec<Document>, Error> {
    let mut docs = Vec::new();
    for file in files {
        if file == "-" {
            if *stdin_used {
                return Err(Error::StdinTwice);
            }
            *stdin_used = true;
        }
        let text = super::input::read_text(file).map_err(|source| Error::Read {
            file: file.clone(),
            source,
        })?;
        docs.extend(parse_documents(file, &text)?);
    }
    Ok(docs)
}

/// Runs `moco validate`: one line per violation on standard output, exit status 1 when there is
/// any, 0 otherwise.
pub(crate) fn run(args: &Args) -> Result<ExitCode, Error> {
    let mut stdin_used = false;
    let new = read_all(&args.files, &mut stdin_used)?;
    let old = read_all(&args.old, &mut stdin_used)?;
    let report = OfflineValidator::new()?.validate(&new, &old);
    for warning in &report.warnings {
        crate::output::err!("warning: {warning}");
    }
    for finding in &report.findings {
        crate::output::out!("{finding}");
    }
    if report.findings.is_empty() {
        crate::output::err!("{} object(s) valid", report.checked);
        Ok(ExitCode::SUCCESS)
    } else {
        crate::output::err!(
            "{} violation(s) in {} object(s)",
            report.findings.len(),
            report.checked
        );
        Ok(ExitCode::from(1))
    }
}
