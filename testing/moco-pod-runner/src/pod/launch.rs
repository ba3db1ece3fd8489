//! One start of one container: its command line and files from the image table, its
//! environment and volumes, then the process; and the probe loop that watches it.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::sync::mpsc;

use super::probe::{self, Kind, Tracker};
use crate::container::{BindMount, ContainerSpec};
use crate::images::{ImageError, ImageTable};

/// Why a container could not be started; the kubelet's waiting reasons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotStarted {
    /// The image has no stand-in (`ErrImagePull`).
    Image(String),
    /// Its environment or volumes name an object that is not there yet
    /// (`CreateContainerConfigError`).
    Config(String),
    /// The program is missing or the process could not be made (`StartError`, exit 128).
    Start(String),
}

use crate::env::DEFAULT_PATH;

/// Everything that decides a container's process, resolved.
#[derive(Debug)]
pub struct Inputs<'a> {
    /// The Pod.
    pub pod: &'a Pod,
    /// The container.
    pub container: &'a Container,
    /// Its resolved environment.
    pub env: Vec<(String, String)>,
    /// Its volume mounts, resolved to host paths.
    pub volume_mounts: Vec<BindMount>,
    /// The image table.
    pub images: &'a ImageTable,
    /// The Pod's network namespace.
    pub netns: PathBuf,
    /// The Pod's hosts file.
    pub hosts: PathBuf,
    /// This start's directory.
    pub root: PathBuf,
    /// This start's log file.
    pub log: PathBuf,
    /// The container's freezer cgroup (relative).
    pub cgroup: PathBuf,
}

/// The spec of one start: pure over its inputs.
pub fn spec(inputs: Inputs<'_>) -> Result<ContainerSpec, NotStarted> {
    let c = inputs.container;
    let pod = inputs.pod;
    let image_ref = c.image.clone().unwrap_or_default();
    let image = inputs.images.lookup(&image_ref).map_err(|e| match e {
        ImageError::Unmapped { .. } | ImageError::NoKubeBin { .. } => {
            NotStarted::Image(e.to_string())
        }
        other => NotStarted::Start(other.to_string()),
    })?;
    let expand = |v: &Option<Vec<String>>| {
        v.as_ref().map(|v| {
            v.iter()
                .map(|s| crate::env::expand(s, &inputs.env))
                .collect::<Vec<_>>()
        })
    };
    let command = expand(&c.command);
    let args = expand(&c.args);
    let argv = image.command_line(command.as_deref(), args.as_deref());
    let Some(first) = argv.first() else {
        return Err(NotStarted::Start(
            ImageError::NoCommand {
                container: c.name.clone(),
                image: image_ref,
            }
            .to_string(),
        ));
    };
    let mut env = inputs.env.clone();
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.insert(0, ("PATH".to_owned(), DEFAULT_PATH.to_owned()));
    }
    let search = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let program = image.find_program(first, &search).ok_or_else(|| {
        NotStarted::Start(
            ImageError::NotFound {
                container: c.name.clone(),
                image: image_ref.clone(),
                program: first.clone(),
                path: search.clone(),
            }
            .to_string(),
        )
    })?;
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let sc = c.security_context.as_ref();
    let user = sc
        .and_then(|s| s.run_as_user)
        .or_else(|| pod_sc.and_then(|s| s.run_as_user))
        .and_then(|u| u32::try_from(u).ok());
    let group = sc
        .and_then(|s| s.run_as_group)
        .or_else(|| pod_sc.and_then(|s| s.run_as_group))
        .and_then(|g| u32::try_from(g).ok());
    let mut groups: Vec<u32> = pod_sc
        .and_then(|s| s.fs_group)
        .into_iter()
        .chain(
            pod_sc
                .and_then(|s| s.supplemental_groups.clone())
                .unwrap_or_default(),
        )
        .filter_map(|g| u32::try_from(g).ok())
        .collect();
    groups.dedup();
    let mut mounts: Vec<BindMount> = image
        .files
        .iter()
        .map(|f| BindMount {
            source: f.source.clone(),
            target: f.target.clone(),
            read_only: true,
        })
        .collect();
    mounts.extend(inputs.volume_mounts);
    Ok(ContainerSpec {
        program,
        argv0: first.clone(),
        args: argv[1..].to_vec(),
        env,
        working_dir: c
            .working_dir
            .clone()
            .filter(|w| !w.is_empty())
            .map(PathBuf::from),
        user,
        group,
        supplementary_groups: groups,
        hostname: crate::env::pod_hostname(pod),
        netns: inputs.netns,
        mounts,
        dirs: image.dirs.clone(),
        hosts: inputs.hosts,
        root: inputs.root,
        log: inputs.log,
        cgroup: inputs.cgroup,
    })
}

/// What the probe loop reports; `run` is the start it watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeReport {
    /// The startup probe passed (or there is none).
    Started,
    /// The readiness result changed.
    Ready(bool),
    /// The liveness or startup probe failed past its threshold: restart the container.
    Failed(Kind, String),
    /// One probe run failed (an `Unhealthy` event).
    Unhealthy(Kind, String),
}

/// Where the probe loop sends its reports: `(container, run, report)`.
pub type ProbeSender = mpsc::UnboundedSender<(String, u64, ProbeReport)>;

/// Probes one start of `container` until the task is aborted or a restarting probe fails.
pub async fn probe_loop(
    container: Arc<Container>,
    pod_ip: Ipv4Addr,
    pid: u32,
    exe: PathBuf,
    run: u64,
    tx: ProbeSender,
) {
    let name = container.name.clone();
    let send = |r: ProbeReport| {
        let _ = tx.send((name.clone(), run, r));
    };
    let ports = container.ports.clone().unwrap_or_default();
    let target = probe::Target {
        pod_ip,
        ports: &ports,
        pid,
        exe: &exe,
    };
    if let Some(p) = &container.startup_probe
        && let Err(why) = probe_until(p, Kind::Startup, &target, &send).await
    {
        send(ProbeReport::Failed(Kind::Startup, why));
        return;
    }
    send(ProbeReport::Started);
    let readiness = async {
        match &container.readiness_probe {
            None => send(ProbeReport::Ready(true)),
            Some(p) => watch_probe(p, Kind::Readiness, &target, &send).await,
        }
    };
    let liveness = async {
        match &container.liveness_probe {
            Some(p) => watch_probe(p, Kind::Liveness, &target, &send).await,
            // Without one nothing ever restarts the container from here.
            None => std::future::pending().await,
        }
    };
    // Liveness ends only by failing: then the loop ends (the container is restarted).
    tokio::select! {
        () = async { readiness.await; std::future::pending::<()>().await } => {}
        () = liveness => {}
    }
}

/// Runs a startup probe until it passes (`Ok`) or fails past its threshold (`Err`).
async fn probe_until(
    p: &k8s_openapi::api::core::v1::Probe,
    kind: Kind,
    target: &probe::Target<'_>,
    send: &impl Fn(ProbeReport),
) -> Result<(), String> {
    let timing = probe::Timing::of(p);
    let mut tracker = Tracker::new(kind);
    tokio::time::sleep(timing.initial_delay).await;
    loop {
        let result = probe::run(p, target, timing.timeout).await;
        let ok = result.is_ok();
        tracker.observe(ok, &timing);
        if let Err(why) = result {
            send(ProbeReport::Unhealthy(kind, why.clone()));
            if !tracker.passing && tracker_failed(&tracker, &timing) {
                return Err(why);
            }
        } else if tracker.passing {
            return Ok(());
        }
        tokio::time::sleep(timing.period).await;
    }
}

fn tracker_failed(t: &Tracker, timing: &probe::Timing) -> bool {
    t.failed_in_a_row() >= timing.failure_threshold
}

/// Runs a readiness or liveness probe for ever: readiness reports each change; liveness returns
/// once it fails past its threshold (after reporting it).
async fn watch_probe(
    p: &k8s_openapi::api::core::v1::Probe,
    kind: Kind,
    target: &probe::Target<'_>,
    send: &impl Fn(ProbeReport),
) {
    let timing = probe::Timing::of(p);
    let mut tracker = Tracker::new(kind);
    tokio::time::sleep(timing.initial_delay).await;
    loop {
        let result = probe::run(p, target, timing.timeout).await;
        let changed = tracker.observe(result.is_ok(), &timing);
        if let Err(why) = &result {
            send(ProbeReport::Unhealthy(kind, why.clone()));
        }
        match kind {
            Kind::Readiness if changed => send(ProbeReport::Ready(tracker.passing)),
            Kind::Liveness if !tracker.passing => {
                send(ProbeReport::Failed(
                    kind,
                    result
                        .err()
                        .unwrap_or_else(|| "liveness probe failed".into()),
                ));
                return;
            }
            _ => {}
        }
        tokio::time::sleep(timing.period).await;
    }
}

/// The log file of one start: `STATE/logs/<ns>_<pod>_<uid>/<container>/<n>.log`.
pub fn log_path(state: &Path, pod: &Pod, container: &str, run: u64) -> PathBuf {
    let m = &pod.metadata;
    state
        .join("logs")
        .join(format!(
            "{}_{}_{}",
            m.namespace.as_deref().unwrap_or(""),
            m.name.as_deref().unwrap_or(""),
            m.uid.as_deref().unwrap_or("")
        ))
        .join(container)
        .join(format!("{run}.log"))
}

/// The last lines of a log (a failed start's message).
pub fn log_tail(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let lines: Vec<&str> = text.lines().rev().take(5).collect();
    let tail: Vec<&str> = lines.into_iter().rev().collect();
    let joined = tail.join("\n");
    (!joined.trim().is_empty()).then_some(joined)
}

/// Waits `d`, unless `d` is zero.
pub async fn pause(d: Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, SecurityContext};

    fn table() -> ImageTable {
        ImageTable {
            moco: "/opt/moco".into(),
            mysqld_exporter: "/usr/bin/prometheus-mysqld-exporter".into(),
            scripts: "/state/images".into(),
            kube_bin: None,
        }
    }

    fn inputs<'a>(
        pod: &'a Pod,
        c: &'a Container,
        images: &'a ImageTable,
        env: Vec<(String, String)>,
    ) -> Inputs<'a> {
        Inputs {
            pod,
            container: c,
            env,
            volume_mounts: vec![BindMount {
                source: "/state/v/data".into(),
                target: "/var/lib/mysql".into(),
                read_only: false,
            }],
            images,
            netns: "/run/netns/x".into(),
            hosts: "/state/pods/u/hosts".into(),
            root: "/state/pods/u/containers/app-1".into(),
            log: "/state/logs/app/1.log".into(),
            cgroup: "moco-pod-runner/b/u/app".into(),
        }
    }

    fn pod(name: &str) -> Pod {
        Pod {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                security_context: Some(PodSecurityContext {
                    run_as_user: Some(999),
                    fs_group: Some(1001),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_agent_image_runs_moco_as_moco_agent_with_expanded_arguments() {
        let images = table();
        let c = Container {
            name: "agent".into(),
            image: Some("ghcr.io/moco-rs/moco-agent:0.1.0".into()),
            args: Some(vec!["--pod=$(POD_NAME)".into(), "$$(KEPT)".into()]),
            security_context: Some(SecurityContext {
                run_as_user: Some(10000),
                ..Default::default()
            }),
            ..Default::default()
        };
        let p = pod("db-0");
        let s = spec(inputs(
            &p,
            &c,
            &images,
            vec![("POD_NAME".into(), "db-0".into())],
        ))
        .unwrap();
        assert_eq!(s.program, PathBuf::from("/usr/local/bin/moco-agent"));
        assert_eq!(s.argv0, "moco-agent");
        assert_eq!(s.args, ["--pod=db-0", "$(KEPT)"]);
        assert_eq!(
            s.user,
            Some(10000),
            "the container's user wins over the Pod's"
        );
        assert_eq!(s.supplementary_groups, [1001]);
        assert_eq!(s.hostname, "db-0");
        assert_eq!(s.env[0], ("PATH".to_owned(), DEFAULT_PATH.to_owned()));
        // The image's files come first, read-only, then the volumes.
        assert!(
            s.mounts
                .iter()
                .any(|m| m.target == Path::new("/moco-init") && m.read_only)
        );
        assert_eq!(
            s.mounts.last().unwrap().target,
            PathBuf::from("/var/lib/mysql")
        );
    }

    #[test]
    fn an_unmapped_image_or_a_missing_program_is_named() {
        let images = table();
        let p = pod("x");
        let mysql = Container {
            name: "mysqld".into(),
            image: Some("ghcr.io/cybozu-go/moco/mysql:8.4.4".into()),
            ..Default::default()
        };
        match spec(inputs(&p, &mysql, &images, vec![])) {
            Err(NotStarted::Image(m)) => {
                assert!(m.contains("ghcr.io/cybozu-go/moco/mysql:8.4.4"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        let missing = Container {
            name: "sh".into(),
            image: Some("debian:12".into()),
            command: Some(vec!["no-such-program-anywhere".into()]),
            ..Default::default()
        };
        match spec(inputs(&p, &missing, &images, vec![])) {
            Err(NotStarted::Start(m)) => assert!(m.contains("no-such-program-anywhere"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hostnames_are_cut_as_the_kubelet_cuts_them() {
        let long = format!("{}-x", "a".repeat(62));
        assert_eq!(crate::env::pod_hostname(&pod(&long)), "a".repeat(62));
        let mut p = pod("db-0");
        p.spec.as_mut().unwrap().hostname = Some("custom".into());
        assert_eq!(crate::env::pod_hostname(&p), "custom");
    }
}
