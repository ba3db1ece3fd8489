//! `pod-runner`: parses arguments and calls the library (see its documentation).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "pod-runner",
    about = "Runs a real control plane's Pods as local processes (moco-rs's test infrastructure)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Make the bridge, the Node addresses and the Service blackhole, and write
    /// STATE/network.json (before the API server starts: it listens on the bridge).
    NetworkUp(moco_pod_runner::net::UpArgs),
    /// Run the Nodes, the scheduler, the provisioner and the Pods until SIGTERM.
    Run(moco_pod_runner::runner::RunArgs),
    /// Remove every process, namespace, interface, route, mount and cgroup the runner made.
    Down(moco_pod_runner::net::DownArgs),
    /// Run a command in a running container (the stand-in for `kubectl exec`).
    Exec(moco_pod_runner::pod::exec::ExecArgs),
    /// Inside a new container: enter its namespaces and run its program (internal).
    #[command(hide = true)]
    ContainerInit(moco_pod_runner::container::InitArgs),
    /// Run a command inside a running container (exec probes, tests; internal).
    #[command(hide = true)]
    ContainerExec(moco_pod_runner::container::ExecArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: Result<(), Box<dyn std::error::Error>> = match cli.command {
        // Before any thread exists: entering namespaces needs a single-threaded process. They
        // return only on failure, before the program ran: 127, as a runtime's "cannot run".
        Command::ContainerInit(args) => {
            let Err(e) = moco_pod_runner::container::init_main(&args);
            eprintln!("pod-runner container-init: {e}");
            return ExitCode::from(127);
        }
        Command::ContainerExec(args) => {
            let Err(e) = moco_pod_runner::container::exec_main(&args);
            eprintln!("pod-runner container-exec: {e}");
            return ExitCode::from(127);
        }
        Command::Exec(args) => {
            let Err(e) = moco_pod_runner::pod::exec::main(&args);
            eprintln!("pod-runner exec: {e}");
            return ExitCode::from(127);
        }
        Command::NetworkUp(args) => moco_pod_runner::net::up(&args).map_err(Into::into),
        Command::Down(args) => moco_pod_runner::net::down(&args).map_err(Into::into),
        Command::Run(args) => moco_pod_runner::runner::main(args).map_err(Into::into),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pod-runner: {e}");
            ExitCode::FAILURE
        }
    }
}
