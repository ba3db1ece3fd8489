//! # moco-kubectl
//!
//! `kubectl moco`, MOCO's kubectl plugin, as a library: the binary `kubectl-moco` (in moco-bin)
//! parses [`Cli`] and calls [`run`]. The commands:
//!
//! * MOCO's, with MOCO's flags and messages: [`mysql`] (through `kubectl exec`),
//!   [`credential`], [`switchover`], `stop`/`start` `clustering`/`reconciliation` ([`stop`]);
//! * this project's: [`status`] (state, instances, lag, events) and [`plan`] (the operator's
//!   next decision, gathered by the operator's own platform and manager through the read-only
//!   wrapper of [`gather`], never acted on).
//!
//! Every command takes a [`Context`] (client, namespace, connection flags), so tests run them
//! against `moco_testkit::apiserver::FakeApiServer` through a real `kube::Client`.
#![deny(missing_docs)]

pub mod cli;
pub mod context;
pub mod credential;
pub mod error;
pub mod gather;
pub mod mysql;
pub mod objects;
pub mod plan;
pub mod rotate;
pub mod status;
pub mod stop;
pub mod switchover;

use std::io::Write;

pub use cli::{Cli, Command};
pub use context::Context;
pub use error::Error;

/// Runs `command` in `ctx`; normal output goes to `out`, notes to `err`. Returns the exit
/// status: 0, or for `mysql` the status of `kubectl exec` (mysql's own).
pub async fn execute(
    ctx: &Context,
    command: &Command,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, Error> {
    match command {
        Command::Mysql(args) => return mysql::run(ctx, args).await,
        Command::Credential(args) => credential::run(ctx, args, out).await?,
        Command::Switchover(args) => match switchover::run(ctx, args).await? {
            switchover::Outcome::Moved { from, to, millis } => writeln!(
                out,
                "primary moved from instance {from} to instance {to} in {millis} ms"
            )?,
            switchover::Outcome::AlreadyPrimary { index } => {
                writeln!(out, "instance {index} is already the primary")?;
            }
            // MOCO's switchover prints nothing.
            switchover::Outcome::Requested { .. }
            | switchover::Outcome::AlreadyRequested { .. } => {}
        },
        Command::Stop(switch) => stop::run(ctx, switch, true, out).await?,
        Command::Start(switch) => stop::run(ctx, switch, false, out).await?,
        Command::Status(args) => status::run(ctx, args, out).await?,
        Command::Plan(args) => plan::run(ctx, args, out, err).await?,
    }
    out.flush()?;
    Ok(0)
}

/// Connects as the flags of `cli` say and runs its command (see [`execute`]).
pub async fn run(cli: &Cli, out: &mut dyn Write, err: &mut dyn Write) -> Result<u8, Error> {
    let ctx = Context::connect(&cli.kube).await?;
    execute(&ctx, &cli.command, out, err).await
}
