//! `kubectl moco mysql`: the mysql client inside an instance's `mysqld` container. MOCO's
//! plugin links kubectl's exec code; this one runs the `kubectl` it is a plugin of, with the
//! same connection flags, so authentication, proxies and TTY handling are kubectl's own.

use std::ffi::OsString;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use moco_api::cluster::{CREDENTIALS_DIR, mycnf_key};
use moco_api::mysqlcluster::MySQLCluster;
use moco_core::validate::MYSQLD_CONTAINER_NAME;

use crate::cli::{KubeFlags, MysqlArgs, MysqlUser};
use crate::context::Context;
use crate::error::Error;
use crate::objects;

/// How often the Pod's phase is read while waiting for it to run.
const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The instance `mysql` connects to: `requested` (`--index`), else the current primary. Either
/// must be below `spec.replicas`.
pub fn target_index(
    namespace: &str,
    cluster: &MySQLCluster,
    requested: Option<u32>,
) -> Result<u32, Error> {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let replicas = objects::replicas(cluster);
    if let Some(index) = requested {
        if index >= replicas {
            return Err(Error::IndexOutOfRange {
                index,
                namespace: namespace.to_owned(),
                cluster: name,
                replicas,
                last: replicas.saturating_sub(1),
            });
        }
        return Ok(index);
    }
    let recorded = cluster
        .status
        .as_ref()
        .map_or(0, |s| s.current_primary_index);
    u32::try_from(recorded)
        .ok()
        .filter(|i| *i < replicas)
        .ok_or(Error::PrimaryOutOfRange {
            namespace: namespace.to_owned(),
            cluster: name,
            index: i64::from(recorded),
            replicas,
        })
}

/// The arguments of `kubectl` that run mysql as `user` in `pod`: the connection flags first
/// (the namespace always, resolved), then `exec`, then mysql with the user's option file and
/// `mysql_args`.
pub fn exec_args(
    flags: &KubeFlags,
    namespace: &str,
    pod: &str,
    user: MysqlUser,
    stdin: bool,
    tty: bool,
    mysql_args: &[String],
) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    if let Some(path) = &flags.kubeconfig {
        args.push("--kubeconfig".into());
        args.push(path.clone().into_os_string());
    }
    if let Some(context) = &flags.context {
        args.push("--context".into());
        args.push(context.into());
    }
    args.push("--namespace".into());
    args.push(namespace.into());
    args.push("exec".into());
    args.push(pod.into());
    args.push("--container".into());
    args.push(MYSQLD_CONTAINER_NAME.into());
    if stdin {
        args.push("--stdin".into());
    }
    if tty {
        args.push("--tty".into());
    }
    args.push("--".into());
    args.push("mysql".into());
    args.push(
        format!(
            "--defaults-extra-file={CREDENTIALS_DIR}/{}",
            mycnf_key(user.account().name())
        )
        .into(),
    );
    args.extend(mysql_args.iter().map(OsString::from));
    args
}

/// Waits until Pod `name` is in phase `Running`, for at most `limit`.
pub async fn wait_running(ctx: &Context, name: &str, limit: Duration) -> Result<(), Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let phase = match api.get_opt(name).await {
            Ok(Some(pod)) => objects::pod_phase(&pod).to_owned(),
            Ok(None) => "missing".to_owned(),
            Err(e) => return Err(Error::api("get", "Pod", &ctx.namespace, name, "", e)),
        };
        if phase == "Running" {
            return Ok(());
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Err(Error::PodNotRunning {
                namespace: ctx.namespace.clone(),
                pod: name.to_owned(),
                waited: limit,
                phase,
            });
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline - now)).await;
    }
}

/// Runs `mysql`; returns kubectl's exit status (mysql's, when it ran).
pub async fn run(ctx: &Context, args: &MysqlArgs) -> Result<u8, Error> {
    let cluster = objects::cluster(ctx, &args.cluster).await?;
    if cluster.spec.offline {
        return Err(Error::Cluster {
            namespace: ctx.namespace.clone(),
            cluster: args.cluster.clone(),
            message: "the cluster is offline (spec.offline: true): no instance runs".to_owned(),
        });
    }
    let index = target_index(&ctx.namespace, &cluster, args.index)?;
    let pod = objects::pod_name(&args.cluster, index);
    let kubectl = ctx.kubectl()?;
    wait_running(ctx, &pod, args.pod_running_timeout).await?;
    let argv = exec_args(
        &ctx.flags,
        &ctx.namespace,
        &pod,
        args.user,
        args.stdin,
        args.tty,
        &args.args,
    );
    let status = tokio::process::Command::new(&kubectl)
        .args(&argv)
        .status()
        .await
        .map_err(|source| Error::Spawn {
            program: kubectl.display().to_string(),
            source,
        })?;
    Ok(exit_code(status))
}

/// The child's exit status as ours: its code, or 128 + the signal that ended it (as shells
/// report it).
fn exit_code(status: std::process::ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return u8::try_from(code).unwrap_or(1);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt as _;
        if let Some(signal) = status.signal() {
            return u8::try_from(128 + signal).unwrap_or(1);
        }
    }
    1
}
