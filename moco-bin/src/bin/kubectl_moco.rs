//! `kubectl-moco`: MOCO's kubectl plugin. Arguments are parsed here; the work is in
//! `moco_kubectl`. Installed on `PATH` as `kubectl-moco`, it runs as `kubectl moco ...`.

use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let cli = moco_kubectl::Cli::parse();
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(moco_kubectl::Error::Output)
        .and_then(|runtime| {
            runtime.block_on(async {
                let mut out = std::io::stdout().lock();
                let mut err = std::io::stderr();
                moco_kubectl::run(&cli, &mut out, &mut err).await
            })
        });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            // Not eprintln!: stderr may be a closed pipe, and exiting must not panic.
            let _ = writeln!(std::io::stderr().lock(), "kubectl-moco: {err}");
            ExitCode::from(2)
        }
    }
}
