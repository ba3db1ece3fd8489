//! A Pod's status as the kubelet writes it, built from the worker's view of its containers.
//! Pure: the worker decides, this only spells it in the API's terms and keeps the condition
//! transition times of conditions that did not change.

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// One container's state, as the worker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Not running: being created, or waiting out a back-off.
    Waiting {
        /// `ContainerCreating`, `PodInitializing`, `CrashLoopBackOff`, `ErrImagePull`, …
        reason: String,
        /// Details.
        message: Option<String>,
    },
    /// Its process runs.
    Running {
        /// Since when.
        started_at: Timestamp,
    },
    /// Its process ended.
    Terminated(Ended),
}

/// How a run of a container ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// The exit code (128 + signal when a signal ended it).
    pub exit_code: i32,
    /// The signal, if one ended it.
    pub signal: Option<i32>,
    /// `Completed`, `Error`, `StartError`, `OOMKilled`…
    pub reason: String,
    /// Details (the end of its log for a failed start).
    pub message: Option<String>,
    /// When it started, if it did.
    pub started_at: Option<Timestamp>,
    /// When it ended.
    pub finished_at: Timestamp,
    /// The run's id.
    pub container_id: Option<String>,
}

/// One container, as the worker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// Its name.
    pub name: String,
    /// Its image as the Pod names it.
    pub image: String,
    /// The current run's id (`moco-pod-runner://…`), once it started once.
    pub container_id: Option<String>,
    /// Now.
    pub state: State,
    /// How the previous run ended.
    pub last: Option<Ended>,
    /// Passed its readiness probe (or has none and runs).
    pub ready: bool,
    /// Passed its startup probe (or has none and runs).
    pub started: bool,
    /// Restarts so far.
    pub restart_count: i32,
}

impl Container {
    /// A container not started yet.
    pub fn waiting(name: &str, image: &str, reason: &str) -> Self {
        Self {
            name: name.to_owned(),
            image: image.to_owned(),
            container_id: None,
            state: State::Waiting {
                reason: reason.to_owned(),
                message: None,
            },
            last: None,
            ready: false,
            started: false,
            restart_count: 0,
        }
    }
}

/// The Pod, as the worker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// `Pending`, `Running`, `Succeeded`, `Failed`.
    pub phase: &'static str,
    /// Its address, once its sandbox exists.
    pub pod_ip: Option<Ipv4Addr>,
    /// Its Node's address.
    pub host_ip: Ipv4Addr,
    /// When the worker took it up.
    pub start_time: Timestamp,
    /// The network namespace exists.
    pub sandbox_ready: bool,
    /// Every init container succeeded.
    pub initialized: bool,
    /// Init containers.
    pub init: Vec<Container>,
    /// Containers.
    pub containers: Vec<Container>,
    /// Why the Pod failed (`phase: Failed`), or why a volume is not mounted.
    pub reason: Option<String>,
    /// Details of `reason`.
    pub message: Option<String>,
}

fn time(t: Timestamp) -> Time {
    Time(t)
}

fn state(s: &State) -> ContainerState {
    match s {
        State::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.clone()),
                message: message.clone(),
            }),
            ..ContainerState::default()
        },
        State::Running { started_at } => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(time(*started_at)),
            }),
            ..ContainerState::default()
        },
        State::Terminated(e) => ContainerState {
            terminated: Some(terminated(e)),
            ..ContainerState::default()
        },
    }
}

fn terminated(e: &Ended) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: e.exit_code,
        signal: e.signal,
        reason: Some(e.reason.clone()),
        message: e.message.clone(),
        started_at: e.started_at.map(time),
        finished_at: Some(time(e.finished_at)),
        container_id: e.container_id.clone(),
    }
}

fn container_status(c: &Container) -> ContainerStatus {
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone(),
        image_id: format!("moco-pod-runner://{}", c.image),
        container_id: c.container_id.clone(),
        state: Some(state(&c.state)),
        last_state: Some(
            c.last
                .as_ref()
                .map(|e| ContainerState {
                    terminated: Some(terminated(e)),
                    ..ContainerState::default()
                })
                .unwrap_or_default(),
        ),
        ready: c.ready,
        started: Some(c.started),
        restart_count: c.restart_count,
        ..ContainerStatus::default()
    }
}

/// An init container's status: ready once it exited 0, as the kubelet's prober manager
/// reports it (`UpdatePodStatus`); MOCO's rollout waits for every container of a Pod, init
/// containers included, to be ready.
fn init_container_status(c: &Container) -> ContainerStatus {
    let succeeded = matches!(&c.state, State::Terminated(e) if e.exit_code == 0);
    ContainerStatus {
        ready: c.ready || succeeded,
        ..container_status(c)
    }
}

/// The condition types the kubelet owns; others (`PodScheduled`, readiness gates,
/// `DisruptionTarget`) are kept as they are.
const OWNED: [&str; 4] = [
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
];

/// The Pod's status: `previous` gives the conditions this does not own and the transition
/// times of those that did not change; `gates` are the Pod's readiness gates' condition types.
pub fn build(
    view: &View,
    previous: Option<&PodStatus>,
    gates: &[String],
    now: Timestamp,
) -> PodStatus {
    let old: &[PodCondition] = previous
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[]);
    let terminal = matches!(view.phase, "Succeeded" | "Failed");
    let containers_ready =
        !terminal && !view.containers.is_empty() && view.containers.iter().all(|c| c.ready);
    let gates_ok = gates
        .iter()
        .all(|g| old.iter().any(|c| &c.type_ == g && c.status == "True"));
    let mut wanted: Vec<(&str, bool, Option<&str>, Option<String>)> = vec![
        (
            "PodReadyToStartContainers",
            view.sandbox_ready && !terminal,
            None,
            None,
        ),
        (
            "Initialized",
            view.initialized,
            (!view.initialized).then_some("ContainersNotInitialized"),
            None,
        ),
    ];
    let not_ready: Vec<&str> = view
        .containers
        .iter()
        .filter(|c| !c.ready)
        .map(|c| c.name.as_str())
        .collect();
    let reason = if terminal {
        Some("PodCompleted")
    } else if !containers_ready {
        Some("ContainersNotReady")
    } else {
        None
    };
    let message = (!containers_ready && !terminal)
        .then(|| format!("containers with unready status: [{}]", not_ready.join(" ")));
    wanted.push(("ContainersReady", containers_ready, reason, message.clone()));
    let ready_reason = if containers_ready && !gates_ok {
        Some("ReadinessGatesNotReady")
    } else {
        reason
    };
    wanted.push(("Ready", containers_ready && gates_ok, ready_reason, message));

    let mut conditions: Vec<PodCondition> = old
        .iter()
        .filter(|c| !OWNED.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    for (type_, ok, reason, message) in wanted {
        let status = if ok { "True" } else { "False" };
        let since = old
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .and_then(|c| c.last_transition_time.clone())
            .unwrap_or_else(|| time(now));
        conditions.push(PodCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.map(str::to_owned),
            message,
            last_transition_time: Some(since),
            last_probe_time: None,
            observed_generation: None,
        });
    }
    conditions.sort_by_key(|c| condition_order(&c.type_));
    let ip = view.pod_ip.map(|ip| ip.to_string());
    PodStatus {
        phase: Some(view.phase.to_owned()),
        conditions: Some(conditions),
        host_ip: Some(view.host_ip.to_string()),
        host_ips: Some(vec![HostIP {
            ip: view.host_ip.to_string(),
        }]),
        pod_ip: ip.clone(),
        pod_ips: ip.map(|ip| vec![PodIP { ip }]),
        start_time: Some(time(view.start_time)),
        init_container_statuses: (!view.init.is_empty())
            .then(|| view.init.iter().map(init_container_status).collect()),
        container_statuses: Some(view.containers.iter().map(container_status).collect()),
        qos_class: previous.and_then(|s| s.qos_class.clone()),
        reason: view.reason.clone().filter(|_| terminal),
        message: view.message.clone().filter(|_| terminal),
        ..PodStatus::default()
    }
}

fn condition_order(t: &str) -> usize {
    [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .position(|x| *x == t)
    .unwrap_or(5)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(ready: bool) -> View {
        let mut c = Container::waiting("app", "debian:12", "ContainerCreating");
        c.state = State::Running {
            started_at: Timestamp::from_second(100).unwrap(),
        };
        c.ready = ready;
        c.started = true;
        View {
            phase: "Running",
            pod_ip: Some("10.200.1.2".parse().unwrap()),
            host_ip: "10.200.0.1".parse().unwrap(),
            start_time: Timestamp::from_second(90).unwrap(),
            sandbox_ready: true,
            initialized: true,
            init: vec![],
            containers: vec![c],
            reason: None,
            message: None,
        }
    }

    fn cond<'a>(s: &'a PodStatus, t: &str) -> &'a PodCondition {
        s.conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == t)
            .unwrap()
    }

    #[test]
    fn readiness_follows_the_containers_and_transition_times_move_only_on_change() {
        let t1 = Timestamp::from_second(1000).unwrap();
        let t2 = Timestamp::from_second(2000).unwrap();
        let t3 = Timestamp::from_second(3000).unwrap();
        let scheduled = PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "True".into(),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        };
        let a = build(&view(false), Some(&scheduled), &[], t1);
        assert_eq!(cond(&a, "Ready").status, "False");
        assert_eq!(
            cond(&a, "Ready").message.as_deref(),
            Some("containers with unready status: [app]")
        );
        assert_eq!(cond(&a, "PodScheduled").status, "True", "kept");
        let b = build(&view(true), Some(&a), &[], t2);
        assert_eq!(cond(&b, "Ready").status, "True");
        assert_eq!(cond(&b, "Ready").last_transition_time, Some(Time(t2)));
        assert_eq!(
            cond(&b, "Initialized").last_transition_time,
            Some(Time(t1)),
            "unchanged: kept"
        );
        let c = build(&view(true), Some(&b), &[], t3);
        assert_eq!(cond(&c, "Ready").last_transition_time, Some(Time(t2)));
        assert_eq!(c.pod_ip.as_deref(), Some("10.200.1.2"));
        assert_eq!(c.host_ip.as_deref(), Some("10.200.0.1"));
    }

    #[test]
    fn readiness_gates_hold_ready_back() {
        let t = Timestamp::from_second(1000).unwrap();
        let gates = vec!["example.com/gate".to_owned()];
        let s = build(&view(true), None, &gates, t);
        assert_eq!(cond(&s, "ContainersReady").status, "True");
        assert_eq!(cond(&s, "Ready").status, "False");
        let mut opened = s.clone();
        opened.conditions.as_mut().unwrap().push(PodCondition {
            type_: "example.com/gate".into(),
            status: "True".into(),
            ..PodCondition::default()
        });
        assert_eq!(
            cond(&build(&view(true), Some(&opened), &gates, t), "Ready").status,
            "True"
        );
    }

    #[test]
    fn an_init_container_that_exited_0_is_ready_and_one_that_failed_is_not() {
        let mut v = view(true);
        let ended = |code: i32| Ended {
            exit_code: code,
            signal: None,
            reason: if code == 0 { "Completed" } else { "Error" }.into(),
            message: None,
            started_at: None,
            finished_at: Timestamp::from_second(95).unwrap(),
            container_id: None,
        };
        let mut done = Container::waiting("init", "debian:12", "PodInitializing");
        done.state = State::Terminated(ended(0));
        let mut failed = Container::waiting("init2", "debian:12", "PodInitializing");
        failed.state = State::Terminated(ended(1));
        let running = Container::waiting("init3", "debian:12", "PodInitializing");
        v.init = vec![done, failed, running];
        let s = build(&v, None, &[], Timestamp::from_second(100).unwrap());
        let ready: Vec<bool> = s
            .init_container_statuses
            .unwrap()
            .iter()
            .map(|c| c.ready)
            .collect();
        assert_eq!(ready, [true, false, false]);
    }

    #[test]
    fn a_finished_pod_is_not_ready() {
        let mut v = view(true);
        v.phase = "Succeeded";
        let s = build(&v, None, &[], Timestamp::from_second(1).unwrap());
        assert_eq!(cond(&s, "Ready").status, "False");
        assert_eq!(cond(&s, "Ready").reason.as_deref(), Some("PodCompleted"));
    }
}
