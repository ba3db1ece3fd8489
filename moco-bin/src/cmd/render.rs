//! `moco render`: print, offline, every object the operator would create for the
//! MySQLClusters of some manifests (what `helm template` is to a chart).

use std::process::ExitCode;

use moco_operator::render::offline::{OfflineRenderError, render_documents};
use moco_operator::render::{Images, RenderSettings};

use super::validate::{Error as ReadError, read_all};

/// Header of the output.
pub(crate) const HEADER: &str = "# Rendered by `moco render`: the objects the operator would create. \
Secrets hold placeholders and owner references a placeholder uid.\n";

/// Arguments of `moco render`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Manifest files (multi-document YAML); `-` reads standard input. The ConfigMaps and
    /// BackupPolicies the clusters name must be among them.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// The namespace the operator runs in (its `POD_NAMESPACE`).
    #[arg(long, value_name = "NS", default_value = "moco-system")]
    pub operator_namespace: String,
    /// As the controller's flag of the same name.
    #[arg(long, value_name = "IMAGE", default_value = moco_operator::render::DEFAULT_AGENT_IMAGE)]
    pub agent_image: String,
    /// As the controller's flag of the same name.
    #[arg(long, value_name = "IMAGE", default_value = moco_operator::render::DEFAULT_BACKUP_IMAGE)]
    pub backup_image: String,
    /// As the controller's flag of the same name.
    #[arg(long, value_name = "IMAGE", default_value = moco_operator::render::DEFAULT_FLUENT_BIT_IMAGE)]
    pub fluent_bit_image: String,
    /// As the controller's flag of the same name.
    #[arg(long, value_name = "IMAGE", default_value = moco_operator::render::DEFAULT_MYSQLD_EXPORTER_IMAGE)]
    pub mysqld_exporter_image: String,
    /// As the controller's flag of the same name.
    #[arg(long)]
    pub disable_default_security_context: bool,
    /// As the controller's flag of the same name.
    #[command(flatten)]
    pub pre_stop: moco_operator::config::PreStopFlag,
}

/// Errors of `moco render`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// Reading the manifests failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Rendering failed.
    #[error(transparent)]
    Render(#[from] OfflineRenderError),
    /// Writing YAML failed.
    #[error("cannot write YAML: {0}")]
    Yaml(String),
}

/// Runs `moco render`: the objects on standard output; exit status 1 when a cluster is
/// invalid (the violations on standard output, as `moco validate` prints them).
pub(crate) fn run(args: &Args) -> Result<ExitCode, Error> {
    let mut stdin_used = false;
    let documents = read_all(&args.files, &mut stdin_used)?;
    let settings = RenderSettings {
        system_namespace: args.operator_namespace.clone(),
        images: Images {
            agent: args.agent_image.clone(),
            backup: args.backup_image.clone(),
            fluent_bit: args.fluent_bit_image.clone(),
            mysqld_exporter: args.mysqld_exporter_image.clone(),
        },
        default_security_context: !args.disable_default_security_context,
        latest_reconciler_version: moco_operator::render::version::LATEST_RECONCILER_VERSION,
        pre_stop_seconds: args.pre_stop.mysqld_pre_stop_seconds,
    };
    let rendered = match render_documents(&documents, &settings) {
        Ok(r) => r,
        Err(OfflineRenderError::Invalid { findings }) => {
            for f in &findings {
                crate::output::out!("{f}");
            }
            crate::output::err!("{} violation(s); nothing rendered", findings.len());
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e.into()),
    };
    for w in &rendered.warnings {
        crate::output::err!("warning: {w}");
    }
    let mut out = HEADER.to_owned();
    for object in &rendered.objects {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(object).map_err(|e| Error::Yaml(e.to_string()))?);
    }
    crate::output::print_out(&out);
    Ok(ExitCode::SUCCESS)
}
