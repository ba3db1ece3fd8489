//! The Pod sandbox on the real kernel: the bridge, Pod network namespaces, containers in their
//! own mount and UTS namespaces over an overlay, freezer cgroups, exec, and `down`. Needs root,
//! `ip`, a cgroup v1 freezer hierarchy and /usr/bin/python3. Each test has its own bridge and
//! address ranges, and runs `down` at its end, failed or not.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use moco_pod_runner::container::{self, BindMount, Cgroup, ContainerSpec, Running};
use moco_pod_runner::net::{self, DownArgs, PodNetwork, UpArgs};
use moco_pod_runner::state::NetworkState;
use nix::sys::signal::Signal;

const EXE: &str = env!("CARGO_BIN_EXE_pod-runner");

/// A listener on port 8080 that answers every connection with the Pod's /etc/hostname.
const LISTENER: &str = r#"
import socket
name = open("/etc/hostname").read().strip()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080))
s.listen(16)
while True:
    c, _ = s.accept()
    c.sendall(name.encode())
    c.close()
"#;

/// One test's network, taken down when dropped (a failed test's too).
struct Sandbox {
    dir: tempfile::TempDir,
    net: NetworkState,
}

impl Sandbox {
    fn up(bridge: &str, pod_cidr: &str, service_cidr: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        // A run of this test that was killed midway left its network: down takes it away
        // when given its description.
        if Path::new("/sys/class/net").join(bridge).exists() {
            let old = tempfile::tempdir().unwrap();
            let plan = NetworkState::plan(
                bridge,
                pod_cidr.parse().unwrap(),
                service_cidr.parse().unwrap(),
                1,
            )
            .unwrap();
            std::fs::write(
                NetworkState::path(old.path()),
                serde_json::to_vec(&plan).unwrap(),
            )
            .unwrap();
            net::down(&DownArgs {
                state_dir: old.path().to_owned(),
            })
            .unwrap();
        }
        net::up(&up_args(dir.path(), bridge, pod_cidr, service_cidr)).unwrap();
        let net: NetworkState =
            serde_json::from_slice(&std::fs::read(dir.path().join("network.json")).unwrap())
                .unwrap();
        Self { dir, net }
    }

    fn state_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The `n`th Pod address of Node 0's range, its network made.
    fn pod(&self, n: u32) -> PodNetwork {
        let address = self.net.nodes[0].pod_cidr.nth(n).unwrap();
        net::add_pod(&self.net, address).unwrap()
    }

    /// A spec for `program args…` in `pod`, named `pod_uid`/`name`, running as the runner.
    fn spec(
        &self,
        pod: &PodNetwork,
        pod_uid: &str,
        name: &str,
        program: &str,
        args: &[&str],
    ) -> ContainerSpec {
        let pod_dir = self.state_dir().join("pods").join(pod_uid);
        let hosts = pod_dir.join("hosts");
        std::fs::create_dir_all(&pod_dir).unwrap();
        std::fs::write(
            &hosts,
            format!("127.0.0.1 localhost\n{} {name}\n", pod.address),
        )
        .unwrap();
        ContainerSpec {
            program: program.into(),
            argv0: program.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: vec![(
                "PATH".into(),
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
            )],
            working_dir: None,
            user: None,
            group: None,
            supplementary_groups: vec![],
            hostname: name.into(),
            netns: pod.netns_path(),
            mounts: vec![],
            dirs: vec![],
            hosts,
            root: pod_dir.join("containers").join(format!("{name}-0")),
            log: self
                .state_dir()
                .join("logs")
                .join(pod_uid)
                .join(format!("{name}/0.log")),
            cgroup: Cgroup::for_container(&self.net.bridge, pod_uid, name)
                .relative()
                .to_owned(),
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let result = net::down(&DownArgs {
            state_dir: self.state_dir().to_owned(),
        });
        if let Err(e) = result {
            if std::thread::panicking() {
                eprintln!("down after a failed test: {e}");
            } else {
                panic!("down: {e}");
            }
        }
    }
}

fn up_args(state_dir: &Path, bridge: &str, pod_cidr: &str, service_cidr: &str) -> UpArgs {
    UpArgs {
        state_dir: state_dir.to_owned(),
        bridge: bridge.into(),
        pod_cidr: pod_cidr.parse().unwrap(),
        service_cidr: service_cidr.parse().unwrap(),
        nodes: 1,
    }
}

/// What the listener at `ip`:8080 answers, if it answers within `wait`.
fn ask(ip: Ipv4Addr, wait: Duration) -> Option<String> {
    let end = Instant::now() + wait;
    loop {
        let addr = SocketAddr::from((ip, 8080));
        if let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
            let mut answer = String::new();
            stream
                .set_read_timeout(Some(Duration::from_secs(2)))
                .unwrap();
            if stream.read_to_string(&mut answer).is_ok() && !answer.is_empty() {
                return Some(answer);
            }
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

async fn exec(running: &Running, argv: &[&str]) -> (Option<i32>, String) {
    let argv: Vec<String> = argv.iter().map(|a| (*a).to_owned()).collect();
    let out = container::exec(
        Path::new(EXE),
        running.pid(),
        &argv,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert!(!out.timed_out);
    (out.code, String::from_utf8_lossy(&out.output).into_owned())
}

fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(out.status.success(), "ip {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaps: this machine's init
/// does not).
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => process_state(&stat) == Some('Z'),
    }
}

fn process_state(stat: &str) -> Option<char> {
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

fn wait_for(what: &str, wait: Duration, mut check: impl FnMut() -> bool) {
    let end = Instant::now() + wait;
    while !check() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// A world-writable directory (containers run as 65534 write into it).
fn shared_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    dir
}

#[tokio::test]
async fn pods_reach_each_other_on_the_bridge_and_nothing_else() {
    let sandbox = Sandbox::up("sbxnet", "10.231.0.0/16", "10.191.0.0/16");
    let t = Instant::now();
    let a = sandbox.pod(2);
    let b = sandbox.pod(3);
    eprintln!("two add_pod: {:?}", t.elapsed());
    let t = Instant::now();
    let mut server_a = container::start(
        Path::new(EXE),
        &sandbox.spec(&a, "uid-a", "pod-a", "/usr/bin/python3", &["-c", LISTENER]),
    )
    .await
    .unwrap();
    eprintln!("start: {:?}", t.elapsed());
    // Both Pods bind the same port: each has its own network namespace.
    let mut server_b = container::start(
        Path::new(EXE),
        &sandbox.spec(&b, "uid-b", "pod-b", "/usr/bin/python3", &["-c", LISTENER]),
    )
    .await
    .unwrap();

    assert_eq!(
        ask(a.address, Duration::from_secs(5)).as_deref(),
        Some("pod-a")
    );
    eprintln!("start to first answer: {:?}", t.elapsed());
    assert_eq!(
        ask(b.address, Duration::from_secs(5)).as_deref(),
        Some("pod-b")
    );

    let connect_a = format!(
        "import socket; s = socket.create_connection(('{}', 8080), 2); print(s.recv(100).decode())",
        a.address
    );
    let t = Instant::now();
    let (code, out) = exec(&server_b, &["python3", "-c", &connect_a]).await;
    eprintln!("exec of python3 in pod-b: {:?}", t.elapsed());
    assert_eq!((code, out.trim()), (Some(0), "pod-a"), "{out}");

    // Only the bridge's network is routed inside a Pod.
    let (code, routes) = exec(&server_b, &["ip", "route"]).await;
    assert_eq!(code, Some(0), "{routes}");
    let routes: Vec<&str> = routes.lines().collect();
    assert_eq!(routes.len(), 1, "{routes:?}");
    assert!(
        routes[0].starts_with("10.231.0.0/16 dev eth0"),
        "{routes:?}"
    );

    // The Service range leads nowhere on the host.
    let blackholes = ip(&["route", "show", "type", "blackhole"]);
    assert!(blackholes.contains("10.191.0.0/16"), "{blackholes}");
    let refused = TcpStream::connect_timeout(
        &SocketAddr::from(([10, 191, 0, 1], 443)),
        Duration::from_secs(1),
    );
    assert!(refused.is_err());

    for server in [&server_a, &server_b] {
        server.signal(Signal::SIGTERM).unwrap();
    }
    assert_eq!(server_a.wait().await.signal, Some(libc_sigterm()));
    assert_eq!(server_b.wait().await.kube_code(), 128 + libc_sigterm());
    net::remove_pod(&sandbox.net, a.address).unwrap();
    net::remove_pod(&sandbox.net, a.address).unwrap();
    assert!(!a.netns_path().exists());
    assert!(!ip(&["link"]).contains(&a.host_veth));
}

fn libc_sigterm() -> i32 {
    Signal::SIGTERM as i32
}

#[tokio::test]
async fn a_container_sees_its_volumes_hosts_hostname_and_user() {
    let sandbox = Sandbox::up("sbxfs", "10.232.0.0/16", "10.192.0.0/16");
    let pod = sandbox.pod(2);
    let data = shared_dir();
    let config = tempfile::tempdir().unwrap();
    std::fs::write(config.path().join("my.cnf"), "[mysqld]\n").unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), "one file").unwrap();
    std::fs::set_permissions(
        file.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let marker = format!("sandbox-marker-{}", std::process::id());

    let script = format!(
        r#"echo started
exec > /data/out.txt 2>&1
echo "uid=$(id -u) gid=$(id -g) groups=$(id -G)"
echo "pwd=$(pwd)"
echo "uts=$(cat /proc/sys/kernel/hostname)"
echo "etc-hostname=$(cat /etc/hostname)"
echo "hosts=$(grep pod-fs /etc/hosts)"
echo "config=$(cat /config/my.cnf)"
echo "file=$(cat /etc/extra/file.txt)"
if touch /config/new 2>/dev/null; then echo ro=writable; else echo ro=refused; fi
echo upper > /var/tmp/{marker} && echo upper=written
echo tmp > /tmp/{marker}
echo "env=$FOO"
"#
    );
    let mut spec = sandbox.spec(&pod, "uid-fs", "pod-fs", "/bin/sh", &["-c", &script]);
    spec.env.push(("FOO".into(), "bar".into()));
    spec.user = Some(65534);
    spec.supplementary_groups = vec![4000];
    spec.working_dir = Some("/work/here".into());
    spec.mounts = vec![
        BindMount {
            source: data.path().to_owned(),
            target: "/data".into(),
            read_only: false,
        },
        BindMount {
            source: config.path().to_owned(),
            target: "/config".into(),
            read_only: true,
        },
        BindMount {
            source: file.path().to_owned(),
            target: "/etc/extra/file.txt".into(),
            read_only: true,
        },
    ];
    let mut running = container::start(Path::new(EXE), &spec).await.unwrap();
    let exit = running.wait().await;
    let out = std::fs::read_to_string(data.path().join("out.txt")).unwrap_or_default();
    let log = std::fs::read_to_string(&spec.log).unwrap_or_default();
    assert_eq!(exit.code, Some(0), "{out}\n{log}");
    assert_eq!(log, "started\n");
    for line in [
        // nogroup: the user's primary group, from the container's /etc/passwd.
        "uid=65534 gid=65534 groups=65534 4000",
        "pwd=/work/here",
        "uts=pod-fs",
        "etc-hostname=pod-fs",
        &format!("hosts={} pod-fs", pod.address),
        "config=[mysqld]",
        "file=one file",
        "ro=refused",
        "upper=written",
        "env=bar",
    ] {
        assert!(out.lines().any(|l| l == line), "no {line:?} in:\n{out}");
    }
    // Writes outside the volumes land in the container's layer, never on the host.
    assert_eq!(
        std::fs::read_to_string(spec.root.join("upper/var/tmp").join(&marker)).unwrap(),
        "upper\n"
    );
    assert!(!Path::new("/var/tmp").join(&marker).exists());
    assert!(!Path::new("/tmp").join(&marker).exists());
    assert!(!Path::new("/work/here").exists());
    assert!(!config.path().join("new").exists());

    // A program that cannot be started: 127, and the log says why.
    let spec = sandbox.spec(&pod, "uid-fs", "missing", "/nonexistent/program", &[]);
    let mut running = container::start(Path::new(EXE), &spec).await.unwrap();
    assert_eq!(running.wait().await.code, Some(127));
    let log = std::fs::read_to_string(&spec.log).unwrap();
    assert!(
        log.starts_with("pod-runner container-init: executing /nonexistent/program: "),
        "{log}"
    );
}

#[tokio::test]
async fn freeze_thaw_and_kill_reach_every_process() {
    let sandbox = Sandbox::up("sbxfrz", "10.233.0.0/16", "10.193.0.0/16");
    let pod = sandbox.pod(2);
    let data = shared_dir();
    let counter = data.path().join("counter");
    let script = "sleep 1000 & echo $! > /data/orphan; i=0; \
                  while true; do i=$((i+1)); echo $i > /data/counter.tmp; \
                  mv /data/counter.tmp /data/counter; sleep 0.02; done";
    let mut spec = sandbox.spec(&pod, "uid-frz", "loop", "/bin/sh", &["-c", script]);
    spec.mounts = vec![BindMount {
        source: data.path().to_owned(),
        target: "/data".into(),
        read_only: false,
    }];
    let mut running = container::start(Path::new(EXE), &spec).await.unwrap();
    wait_for("the counter", Duration::from_secs(5), || {
        read_number(&counter).is_some_and(|n| n > 2)
    });
    let orphan = read_number(&data.path().join("orphan")).unwrap() as u32;

    let t = Instant::now();
    running.freeze().await.unwrap();
    eprintln!("freeze: {:?}", t.elapsed());
    assert_eq!(running.cgroup().state().unwrap(), "FROZEN");
    let pids = running.cgroup().pids().unwrap();
    assert!(
        pids.contains(&running.pid()) && pids.contains(&orphan),
        "{pids:?}"
    );
    for pid in &pids {
        // A frozen task shows as D (in the refrigerator) on this kernel.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        assert_eq!(process_state(&stat), Some('D'), "{stat}");
    }
    let frozen_at = read_number(&counter).unwrap();
    // An exec into a frozen container hangs (a paused machine): it ends at its time limit.
    let t = Instant::now();
    let out = container::exec(
        Path::new(EXE),
        running.pid(),
        &["true".to_owned()],
        Duration::from_millis(300),
    )
    .await
    .unwrap();
    assert!(out.timed_out && out.code.is_none(), "{out:?}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(read_number(&counter).unwrap(), frozen_at);

    running.thaw().await.unwrap();
    assert_eq!(running.cgroup().state().unwrap(), "THAWED");
    wait_for("the counter to move again", Duration::from_secs(5), || {
        read_number(&counter).is_some_and(|n| n > frozen_at)
    });

    // kill_all from frozen: thawed, killed, none left.
    running.freeze().await.unwrap();
    let t = Instant::now();
    let killed = running.kill_all().await.unwrap();
    eprintln!("kill_all of {killed}: {:?}", t.elapsed());
    // The shell and the orphan, and the loop's sleep or mv when it was in one.
    assert!(killed >= 2, "{killed}");
    assert!(running.cgroup().pids().unwrap().is_empty());
    let exit = running.wait().await;
    assert_eq!(exit.signal, Some(Signal::SIGKILL as i32));
    assert!(ended(orphan));

    // The main process's end kills what it left behind.
    let script = "sleep 1000 & echo $! > /data/orphan2; sleep 0.2; exit 3";
    let mut spec = sandbox.spec(&pod, "uid-frz", "orphans", "/bin/sh", &["-c", script]);
    spec.mounts = vec![BindMount {
        source: data.path().to_owned(),
        target: "/data".into(),
        read_only: false,
    }];
    let mut running = container::start(Path::new(EXE), &spec).await.unwrap();
    assert_eq!(running.wait().await.code, Some(3));
    let orphan = read_number(&data.path().join("orphan2")).unwrap() as u32;
    assert!(ended(orphan), "orphan {orphan} still runs");
    assert!(running.cgroup().pids().unwrap().is_empty());
    running.cgroup().remove().unwrap();
    assert!(!running.cgroup().exists());
}

#[tokio::test]
async fn a_cut_pod_is_unreachable_until_restored() {
    let sandbox = Sandbox::up("sbxcut", "10.234.0.0/16", "10.194.0.0/16");
    let pod = sandbox.pod(2);
    let running = container::start(
        Path::new(EXE),
        &sandbox.spec(
            &pod,
            "uid-cut",
            "pod-cut",
            "/usr/bin/python3",
            &["-c", LISTENER],
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        ask(pod.address, Duration::from_secs(5)).as_deref(),
        Some("pod-cut")
    );

    net::cut(&pod).unwrap();
    assert_eq!(ask(pod.address, Duration::from_millis(500)), None);
    // Its loopback still works.
    let (code, out) = exec(
        &running,
        &[
            "python3",
            "-c",
            "import socket; print(socket.create_connection(('127.0.0.1', 8080), 2).recv(100).decode())",
        ],
    )
    .await;
    assert_eq!((code, out.trim()), (Some(0), "pod-cut"));

    net::restore(&pod).unwrap();
    let t = Instant::now();
    assert_eq!(
        ask(pod.address, Duration::from_secs(5)).as_deref(),
        Some("pod-cut")
    );
    eprintln!("answer after restore: {:?}", t.elapsed());
    running.kill_all().await.unwrap();
}

#[tokio::test]
async fn exec_runs_inside_the_container() {
    let sandbox = Sandbox::up("sbxexec", "10.235.0.0/16", "10.195.0.0/16");
    let pod = sandbox.pod(2);
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("f"), "volume file").unwrap();
    let mut spec = sandbox.spec(&pod, "uid-exec", "pod-exec", "/bin/sleep", &["1000"]);
    spec.env.push(("FOO".into(), "bar".into()));
    spec.working_dir = Some("/srv/app".into());
    spec.user = Some(65534);
    spec.mounts = vec![BindMount {
        source: data.path().to_owned(),
        target: "/data".into(),
        read_only: true,
    }];
    let t = Instant::now();
    let mut running = container::start(Path::new(EXE), &spec).await.unwrap();
    eprintln!("start until the program runs: {:?}", t.elapsed());
    // start returns once the program runs (an exec before would find container-init still
    // outside the container).
    let exe = std::fs::read_link(format!("/proc/{}/exe", running.pid())).unwrap();
    assert!(exe.ends_with("sleep"), "{}", exe.display());

    let (code, out) = exec(
        &running,
        &[
            "sh",
            "-c",
            "cat /proc/sys/kernel/hostname; cat /data/f; echo; echo $FOO; pwd; id -u; exit 7",
        ],
    )
    .await;
    assert_eq!(code, Some(7), "{out}");
    assert_eq!(out, "pod-exec\nvolume file\nbar\n/srv/app\n65534\n");

    // SIGPIPE is not ignored (Rust's runtime ignores it, and an exec would pass that on).
    // (glibc's posix_spawn leaves its internal signals 32 and 33 ignored in every child of
    // a Rust program; no program uses them.)
    let status = std::fs::read_to_string(format!("/proc/{}/status", running.pid())).unwrap();
    let ignored = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:\t"))
        .map(|mask| u64::from_str_radix(mask, 16).unwrap())
        .unwrap();
    assert_eq!(
        ignored & (1 << (Signal::SIGPIPE as u32 - 1)),
        0,
        "{ignored:x}"
    );
    // Its sysfs is its network namespace's; no mount of the host is left in its namespace.
    let (_, out) = exec(&running, &["ls", "/sys/class/net"]).await;
    assert_eq!(out, "eth0\nlo\n");
    let (_, mounts) = exec(&running, &["cat", "/proc/self/mountinfo"]).await;
    let points: Vec<(&str, &str)> = mounts
        .lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            let dash = fields.iter().position(|f| *f == "-")?;
            Some((fields[4], fields[dash + 1]))
        })
        .collect();
    assert_eq!(points.first(), Some(&("/", "overlay")), "{mounts}");
    for (point, _) in &points {
        assert!(
            ["/", "/proc", "/sys", "/tmp", "/run", "/data", "/etc/hosts"].contains(point)
                || point.starts_with("/dev"),
            "{point} in:\n{mounts}"
        );
    }

    let t = Instant::now();
    let out = container::exec(
        Path::new(EXE),
        running.pid(),
        &["sleep".to_owned(), "10".to_owned()],
        Duration::from_millis(300),
    )
    .await
    .unwrap();
    assert!(out.timed_out);
    assert_eq!(out.code, None);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());

    let (code, out) = exec(&running, &["no-such-command"]).await;
    assert_eq!(code, Some(127));
    assert!(
        out.starts_with("pod-runner container-exec: executing no-such-command: "),
        "{out}"
    );

    running.signal(Signal::SIGKILL).unwrap();
    assert_eq!(running.wait().await.kube_code(), 137);
}

#[tokio::test]
async fn up_refuses_what_would_clash_and_down_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::up("sbxup", "10.236.0.0/16", "10.196.0.0/16");
    let other = dir.path().join("other");
    let refuse = |args: UpArgs, flag: &str| {
        let e = net::up(&args).unwrap_err().to_string();
        assert!(e.starts_with(flag), "{e}");
        assert!(!args.state_dir.join("network.json").exists());
        if args.bridge != "sbxup" {
            assert!(!Path::new("/sys/class/net").join(&args.bridge).exists());
        }
        e
    };
    let e = refuse(
        up_args(&other, "sbxup", "10.237.0.0/16", "10.197.0.0/16"),
        "--bridge",
    );
    eprintln!("{e}");
    refuse(
        up_args(&other, "sbx-up2", "10.237.0.0/16", "10.197.0.0/16"),
        "--bridge",
    );
    refuse(
        up_args(&other, "sbxup2", "10.236.0.0/16", "10.197.0.0/16"),
        "--pod-cidr",
    );
    let e = refuse(
        up_args(&other, "sbxup2", "10.237.0.0/16", "10.196.4.0/24"),
        "--service-cidr",
    );
    eprintln!("{e}");
    refuse(
        up_args(&other, "sbxup2", "10.237.0.0/24", "10.197.0.0/16"),
        "--pod-cidr",
    );
    refuse(
        up_args(&other, "sbxup2", "10.237.0.0/16", "10.237.4.0/24"),
        "--service-cidr",
    );
    let e = net::up(&up_args(
        sandbox.state_dir(),
        "sbxup2",
        "10.237.0.0/16",
        "10.197.0.0/16",
    ))
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("--state-dir"), "{e}");
    let routes = ip(&["route", "show", "table", "all"]);
    assert!(
        !routes.contains("10.237.") && !routes.contains("10.197."),
        "{routes}"
    );

    // A step that fails (network.json cannot be written) undoes the steps before it.
    std::fs::create_dir_all(&other).unwrap();
    assert!(
        Command::new("chattr")
            .arg("+i")
            .arg(&other)
            .status()
            .unwrap()
            .success()
    );
    let e = net::up(&up_args(&other, "sbxup2", "10.237.0.0/16", "10.197.0.0/16"));
    assert!(
        Command::new("chattr")
            .arg("-i")
            .arg(&other)
            .status()
            .unwrap()
            .success()
    );
    let e = e.unwrap_err().to_string();
    assert!(e.contains("network.json"), "{e}");
    assert!(!Path::new("/sys/class/net/sbxup2").exists());
    let routes = ip(&["route", "show", "table", "all"]);
    assert!(
        !routes.contains("10.237.") && !routes.contains("10.197."),
        "{routes}"
    );

    // Something for down to remove: a Pod with a container.
    let pod = sandbox.pod(2);
    let running = container::start(
        Path::new(EXE),
        &sandbox.spec(&pod, "uid-up", "sleeper", "/bin/sleep", &["1000"]),
    )
    .await
    .unwrap();
    let addresses = ip(&["-4", "addr", "show", "dev", "sbxup"]);
    assert!(addresses.contains("10.236.0.1/16"), "{addresses}");

    let down = DownArgs {
        state_dir: sandbox.state_dir().to_owned(),
    };
    let t = Instant::now();
    net::down(&down).unwrap();
    eprintln!("down: {:?}", t.elapsed());
    assert!(ended(running.pid()));
    assert!(!ip(&["netns", "list"]).contains("sbxup-"));
    assert!(!ip(&["link"]).contains("sbxup"));
    let routes = ip(&["route", "show", "table", "all"]);
    assert!(
        !routes.contains("10.236.") && !routes.contains("10.196."),
        "{routes}"
    );
    assert!(!Cgroup::for_bridge("sbxup").exists());
    assert!(!sandbox.state_dir().join("network.json").exists());
    // Again: nothing to do.
    net::down(&down).unwrap();
}
