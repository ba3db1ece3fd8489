//! `moco plan` (facts file → decision JSON) and `moco schema` (JSON Schemas of both).

use std::process::ExitCode;

use moco_core::facts::ClusterFacts;
use moco_core::{Decision, FactsError, decide};

/// Arguments of `moco plan`.
#[derive(Debug, clap::Args)]
pub(crate) struct PlanArgs {
    /// Facts file (JSON), or `-` for standard input.
    #[arg(long)]
    pub facts: String,
    /// Print compact JSON on one line.
    #[arg(long)]
    pub compact: bool,
}

/// Which schema `moco schema` prints.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum SchemaKind {
    /// The input of `moco plan`.
    Facts,
    /// The output of `moco plan`.
    Decision,
}

/// Arguments of `moco schema`.
#[derive(Debug, clap::Args)]
pub(crate) struct SchemaArgs {
    /// Which schema to print.
    #[arg(value_enum)]
    pub which: SchemaKind,
}

/// Errors of the plan commands.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlanError {
    /// The facts file could not be read.
    #[error("cannot read facts from {path}: {source}")]
    Read {
        /// The path given.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The facts are not valid JSON of the facts schema.
    #[error("{path}: invalid facts at {location}: {message}")]
    Parse {
        /// The path given.
        path: String,
        /// JSON path of the offending value.
        location: String,
        /// What is wrong.
        message: String,
    },
    /// The facts contradict themselves.
    #[error("{path}: inconsistent facts at {source}")]
    Facts {
        /// The path given.
        path: String,
        /// The engine's error, which names the JSON path.
        source: FactsError,
    },
    /// Printing failed.
    #[error("cannot encode the output: {0}")]
    Encode(#[from] serde_json::Error),
}

fn read_input(path: &str) -> Result<String, PlanError> {
    super::input::read_text(path).map_err(|source| PlanError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Parses facts, reporting the JSON path of the first error.
pub(crate) fn parse_facts(path: &str, text: &str) -> Result<ClusterFacts, PlanError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let location = err.path().to_string();
        PlanError::Parse {
            path: path.to_owned(),
            location: if location == "." {
                "$".to_owned()
            } else {
                location
            },
            message: err.into_inner().to_string(),
        }
    })
}

/// Decides on the facts in `path`.
pub(crate) fn plan_file(path: &str) -> Result<Decision, PlanError> {
    let text = read_input(path)?;
    let facts = parse_facts(path, &text)?;
    decide(&facts).map_err(|source| PlanError::Facts {
        path: path.to_owned(),
        source,
    })
}

/// Runs `moco plan`.
pub(crate) fn run_plan(args: &PlanArgs) -> Result<ExitCode, PlanError> {
    let decision = plan_file(&args.facts)?;
    let out = if args.compact {
        serde_json::to_string(&decision)?
    } else {
        serde_json::to_string_pretty(&decision)?
    };
    crate::output::out!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// Runs `moco schema`.
pub(crate) fn run_schema(args: &SchemaArgs) -> Result<ExitCode, PlanError> {
    let schema = match args.which {
        SchemaKind::Facts => schemars::schema_for!(ClusterFacts),
        SchemaKind::Decision => schemars::schema_for!(Decision),
    };
    crate::output::out!("{}", serde_json::to_string_pretty(&schema)?);
    Ok(ExitCode::SUCCESS)
}
