//! `scripts/kube.sh` with the real control plane: a two-Node cluster of its own is brought up,
//! the runner's Node, scheduler and provisioner parts are checked against kube-apiserver and
//! kube-controller-manager, and `down` must leave no process, namespace, link or route.
//!
//! Needs root, iproute2, openssl and the control plane's binaries (scripts/kube/build.sh builds
//! them when its cache is cold: minutes). `MOCO_SKIP_KUBE=1` skips it on a machine without
//! them. One test on purpose: a control plane costs ~450 MB and a few seconds to start, and the
//! checks run in order on the same cluster.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_pod-runner");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn kube_sh(args: &[&str], dir: &Path) -> Output {
    Command::new(repo().join("scripts/kube.sh"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .env("MOCO_POD_RUNNER", EXE)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The cluster of one test, taken down when dropped (a failed test's too).
struct Cluster {
    dir: tempfile::TempDir,
    down: bool,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.down {
            let out = kube_sh(&["down"], self.dir.path());
            eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

impl Cluster {
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        use std::io::Write;
        let mut child = Command::new(self.dir.path().join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(self.dir.path().join("kubeconfig"))
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).unwrap();
        }
        child.wait_with_output().unwrap()
    }

    /// kubectl's output; the test fails on a failing kubectl.
    fn k(&self, args: &[&str]) -> String {
        let out = self.kubectl(args, None);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn apply(&self, yaml: &str) {
        let out = self.kubectl(&["apply", "-f", "-"], Some(yaml));
        assert!(
            out.status.success(),
            "kubectl apply: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Polls `f` until it gives Some, at most `limit`; the time it took.
    fn wait<T>(
        &self,
        what: &str,
        limit: Duration,
        mut f: impl FnMut() -> Option<T>,
    ) -> (T, Duration) {
        let start = Instant::now();
        loop {
            if let Some(v) = f() {
                return (v, start.elapsed());
            }
            assert!(
                start.elapsed() < limit,
                "{what}: not so after {limit:?}; the runner's log ends:\n{}",
                tail(&self.dir.path().join("logs/pod-runner.log"))
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn jsonpath(&self, what: &[&str], path: &str) -> String {
        let mut args = vec!["get"];
        args.extend_from_slice(what);
        let path = format!("jsonpath={path}");
        args.extend(["-o", &path]);
        let out = self.kubectl(&args, None);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[test]
fn kube_sh_up_runs_nodes_scheduler_provisioner_and_down_leaves_nothing() {
    if std::env::var_os("MOCO_SKIP_KUBE").is_some_and(|v| v == "1") {
        println!("SKIPPED (MOCO_SKIP_KUBE=1): no control plane");
        return;
    }
    let mut cluster = Cluster {
        dir: tempfile::tempdir().unwrap(),
        down: false,
    };
    let dir = cluster.dir.path().to_owned();

    // --- up: two Nodes Ready, each with a Lease.
    let start = Instant::now();
    let out = kube_sh(&["up", "--nodes", "2"], &dir);
    assert!(
        out.status.success(),
        "kube.sh up failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("kube.sh up: {:.1} s", start.elapsed().as_secs_f64());
    let env = std::fs::read_to_string(dir.join("env")).unwrap();
    let var = |name: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("export {name}=")))
            .unwrap_or_else(|| panic!("{name} not in {}/env:\n{env}", dir.display()))
            .to_owned()
    };
    let bridge = var("MOCO_KUBE_BRIDGE");
    let pod_cidr = var("MOCO_KUBE_POD_CIDR");
    let service_cidr = var("MOCO_KUBE_SERVICE_CIDR");
    let pids = std::fs::read_to_string(dir.join("pids")).unwrap();
    let names: Vec<&str> = pids.lines().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(
        names,
        [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "pod-runner"
        ]
    );
    let ready = cluster.jsonpath(
        &["nodes"],
        r#"{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}"#,
    );
    assert_eq!(ready.trim(), "node-0=True node-1=True");
    // Counted in the test command's ledger with the version that ran, so a run where it did
    // nothing shows.
    let version = cluster.kubectl(&["get", "--raw", "/version"], None);
    let version: serde_json::Value = serde_json::from_slice(&version.stdout).unwrap_or_default();
    moco_testkit::ledger::record(
        "kube_sh_up_runs_nodes_scheduler_provisioner_and_down_leaves_nothing",
        &format!(
            "kube-apiserver {}",
            version["gitVersion"].as_str().unwrap_or("(unknown)")
        ),
    );
    let renewed = cluster.jsonpath(
        &["lease", "-n", "kube-node-lease", "node-1"],
        "{.spec.renewTime}",
    );
    assert!(!renewed.is_empty());
    // The API server's own Service names its address on the bridge.
    let endpoint = cluster.jsonpath(
        &["endpoints", "kubernetes"],
        "{.subsets[0].addresses[0].ip}",
    );
    assert_eq!(
        format!("{endpoint}:6443"),
        var("MOCO_KUBE_API_ADDRESS"),
        "the kubernetes Endpoints"
    );

    // --- a claim of the default class: a PV with its directory, Bound; then expanded.
    assert_eq!(
        cluster.jsonpath(
            &["storageclass", "standard"],
            "{.metadata.annotations.storageclass\\.kubernetes\\.io/is-default-class} {.provisioner}"
        ),
        "true moco-rs.test/pod-runner"
    );
    cluster.apply(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: default}\n\
         spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n",
    );
    let (pv, took) = cluster.wait("the claim Bound", Duration::from_secs(30), || {
        let s = cluster.jsonpath(&["pvc", "data"], "{.status.phase} {.spec.volumeName}");
        s.strip_prefix("Bound ").map(str::to_owned)
    });
    println!("claim Bound in {:.1} s to {pv}", took.as_secs_f64());
    let volume_dir = dir.join("runner/volumes").join(&pv);
    assert!(volume_dir.is_dir(), "{} missing", volume_dir.display());
    assert_eq!(
        cluster.jsonpath(
            &["pv", &pv],
            "{.spec.hostPath.path} {.spec.capacity.storage} {.spec.persistentVolumeReclaimPolicy}"
        ),
        format!("{} 1Gi Delete", volume_dir.display())
    );
    cluster.k(&[
        "patch",
        "pvc",
        "data",
        "-p",
        r#"{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}"#,
    ]);
    cluster.wait("the claim's capacity 2Gi", Duration::from_secs(30), || {
        (cluster.jsonpath(&["pvc", "data"], "{.status.capacity.storage}") == "2Gi").then_some(())
    });
    assert_eq!(
        cluster.jsonpath(&["pv", &pv], "{.spec.capacity.storage}"),
        "2Gi"
    );

    // --- scheduling: a selector matching no Node leaves the Pod unbound, saying why; two Pods
    // that fit are bound, one per Node (fewest Pods first).
    let pod = |name: &str, spec: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\n\
             spec: {{terminationGracePeriodSeconds: 1, containers: [{{name: c, image: debian, command: [sleep, '3600']}}]{spec}}}\n"
        )
    };
    cluster.apply(&pod("nowhere", ", nodeSelector: {disk: none}"));
    let (message, _) = cluster.wait("PodScheduled=False", Duration::from_secs(30), || {
        let s = cluster.jsonpath(
            &["pod", "nowhere"],
            r#"{.status.conditions[?(@.type=="PodScheduled")].reason}: {.status.conditions[?(@.type=="PodScheduled")].message}"#,
        );
        s.starts_with("Unschedulable: ").then_some(s)
    });
    assert_eq!(
        message,
        "Unschedulable: 0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    );
    let events = cluster.k(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=nowhere,reason=FailedScheduling",
        "-o",
        "name",
    ]);
    assert!(!events.trim().is_empty(), "no FailedScheduling event");
    cluster.apply(&(pod("fit-a", "") + "---\n" + &pod("fit-b", "")));
    let (nodes, _) = cluster.wait("both bound", Duration::from_secs(30), || {
        let a = cluster.jsonpath(&["pod", "fit-a"], "{.spec.nodeName}");
        let b = cluster.jsonpath(&["pod", "fit-b"], "{.spec.nodeName}");
        (!a.is_empty() && !b.is_empty()).then_some((a, b))
    });
    assert_ne!(nodes.0, nodes.1, "two Pods on two empty Nodes go one each");

    // --- the Lease is renewed (every 10 s).
    cluster.wait("node-1's Lease renewed", Duration::from_secs(15), || {
        (cluster.jsonpath(
            &["lease", "-n", "kube-node-lease", "node-1"],
            "{.spec.renewTime}",
        ) != renewed)
            .then_some(())
    });

    // --- the heartbeat fault: node-1 goes NotReady (Unknown) within the 20 s grace period
    // (plus up to one renewal period), is tainted, and is Ready again once resumed.
    cluster.k(&[
        "annotate",
        "node",
        "node-1",
        "pod-runner.moco-rs.test/heartbeat=stopped",
    ]);
    let ready_of = |node: &str| {
        cluster.jsonpath(
            &["node", node],
            r#"{.status.conditions[?(@.type=="Ready")].status}"#,
        )
    };
    let (_, took) = cluster.wait("node-1 NotReady", Duration::from_secs(45), || {
        (ready_of("node-1") == "Unknown").then_some(())
    });
    println!(
        "node-1 NotReady {:.1} s after its heartbeat stopped",
        took.as_secs_f64()
    );
    cluster.wait(
        "node-1 tainted unreachable",
        Duration::from_secs(15),
        || {
            cluster
                .jsonpath(&["node", "node-1"], "{.spec.taints[*].key}")
                .contains("node.kubernetes.io/unreachable")
                .then_some(())
        },
    );
    assert_eq!(ready_of("node-0"), "True", "the other Node is untouched");
    // A Pod that can only go to node-1 waits, naming the taint.
    cluster.apply(&pod(
        "to-node-1",
        ", nodeSelector: {kubernetes.io/hostname: node-1}",
    ));
    let (message, _) = cluster.wait("to-node-1 unschedulable", Duration::from_secs(30), || {
        let s = cluster.jsonpath(
            &["pod", "to-node-1"],
            r#"{.status.conditions[?(@.type=="PodScheduled")].message}"#,
        );
        s.contains("taint").then_some(s)
    });
    assert_eq!(
        message,
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, \
         1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }."
    );
    assert!(
        cluster
            .jsonpath(&["pod", "to-node-1"], "{.spec.nodeName}")
            .is_empty()
    );
    cluster.k(&[
        "annotate",
        "node",
        "node-1",
        "pod-runner.moco-rs.test/heartbeat-",
    ]);
    let (_, took) = cluster.wait("node-1 Ready again", Duration::from_secs(20), || {
        (ready_of("node-1") == "True").then_some(())
    });
    println!(
        "node-1 Ready {:.1} s after its heartbeat resumed",
        took.as_secs_f64()
    );
    cluster.wait("node-1 untainted", Duration::from_secs(20), || {
        cluster
            .jsonpath(&["node", "node-1"], "{.spec.taints}")
            .is_empty()
            .then_some(())
    });
    cluster.wait("to-node-1 bound to node-1", Duration::from_secs(30), || {
        (cluster.jsonpath(&["pod", "to-node-1"], "{.spec.nodeName}") == "node-1").then_some(())
    });

    // --- reclaim: the claim's deletion removes the PV and its directory.
    cluster.k(&["delete", "pvc", "data", "--wait=false"]);
    cluster.wait(
        "the PV and its directory gone",
        Duration::from_secs(30),
        || {
            let out = cluster.kubectl(&["get", "pv", &pv], None);
            (!out.status.success() && !volume_dir.exists()).then_some(())
        },
    );

    // --- down: nothing left of the cluster on the machine; a second down is fine.
    let out = kube_sh(&["down"], &dir);
    cluster.down = true;
    assert!(
        out.status.success(),
        "kube.sh down failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in pids.lines() {
        let pid = line.split(' ').nth(1).unwrap();
        // Exited: gone, or a zombie its new parent (the machine's init) has not reaped yet.
        let stat =
            std::fs::read_to_string(Path::new("/proc").join(pid).join("stat")).unwrap_or_default();
        let state = stat.rsplit_once(") ").map(|(_, rest)| &rest[..1]);
        assert!(
            matches!(state, None | Some("Z" | "X")),
            "{line} still alive after down: {stat}"
        );
    }
    assert!(!dir.join("pids").exists());
    let ip = |args: &[&str]| {
        String::from_utf8(Command::new("ip").args(args).output().unwrap().stdout).unwrap()
    };
    assert!(
        !ip(&["-br", "link"]).contains(&bridge),
        "a link of {bridge} is left"
    );
    assert!(
        !ip(&["netns", "list"]).contains(&bridge),
        "a namespace of {bridge} is left"
    );
    let routes = ip(&["route", "show", "table", "all"]);
    for cidr in [&pod_cidr, &service_cidr] {
        assert!(
            !routes.contains(cidr.as_str()),
            "a route to {cidr} is left:\n{routes}"
        );
    }
    let again = kube_sh(&["down"], &dir);
    assert!(
        again.status.success(),
        "a second down failed: {}",
        String::from_utf8_lossy(&again.stderr)
    );
}
