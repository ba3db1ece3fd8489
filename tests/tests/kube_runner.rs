//! The Pod runner against the real control plane (`scripts/kube.sh up`, exported by
//! `scripts/test.sh` as `MOCO_KUBE_DIR`): what MOCO relies on the kubelet, the StatefulSet,
//! Job, CronJob and EndpointSlice controllers and a volume provisioner for, proven with real
//! kube-apiserver and kube-controller-manager and Pods run as local processes. Each test works
//! in a namespace of its own and deletes it at the end.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use moco_tests::control_plane::{
    ControlPlane, control_plane, host_dir, is_ready, restarts, wait_for,
};

const LIMIT: Duration = Duration::from_secs(120);

async fn plane(test: &str) -> Option<(ControlPlane, String)> {
    let cp = control_plane(test).await?;
    let ns = cp
        .namespace(&test.replace('_', "-")[..test.len().min(40)])
        .await;
    Some((cp, ns))
}

fn pods(cp: &ControlPlane, ns: &str) -> Api<Pod> {
    Api::namespaced(cp.client.clone(), ns)
}

async fn pod_ready(cp: &ControlPlane, ns: &str, name: &str, ready: bool) -> Pod {
    wait_for(&format!("{ns}/{name} Ready={ready}"), LIMIT, || async {
        cp.pod(ns, name).await.filter(|p| is_ready(p) == ready)
    })
    .await
}

fn ip_of(pod: &Pod) -> String {
    pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap()
}

/// Endpoints of `service` and whether each is ready, by address.
async fn endpoints(cp: &ControlPlane, ns: &str, service: &str) -> Vec<(String, bool)> {
    let slices = Api::<EndpointSlice>::namespaced(cp.client.clone(), ns)
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={service}")))
        .await
        .unwrap();
    let mut out: Vec<(String, bool)> = slices
        .items
        .iter()
        .flat_map(|s| s.endpoints.iter())
        .map(|e| {
            (
                e.addresses.join(","),
                e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(false),
            )
        })
        .collect();
    out.sort();
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test]
async fn a_statefulset_gets_ready_pods_with_bound_claims_and_a_re_created_pod_keeps_its_claim_and_data()
 {
    let Some((cp, ns)) = plane("runner_statefulset").await else {
        return;
    };
    cp.apply(
        &ns,
        r#"
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{port: 8080}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      # One Node: an address is the Node's (from its Pod range), and claims have no topology,
      # so a re-created Pod elsewhere would rightly get another (CI saw it move).
      nodeSelector: {kubernetes.io/hostname: node-0}
      terminationGracePeriodSeconds: 10
      containers:
      - name: web
        image: debian:12
        command: ["sh", "-c", "echo \"$(hostname) $POD_UID\" >> /data/starts; exec python3 -m http.server 8080 --directory /data"]
        env:
        - name: POD_UID
          valueFrom: {fieldRef: {fieldPath: metadata.uid}}
        ports: [{containerPort: 8080, name: http}]
        readinessProbe:
          httpGet: {path: /starts, port: http}
          periodSeconds: 1
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
"#,
    );
    let mut ips = Vec::new();
    for i in 0..3 {
        let pod = pod_ready(&cp, &ns, &format!("web-{i}"), true).await;
        ips.push(ip_of(&pod));
    }
    // Every claim is bound, to a directory of its own that holds what its Pod wrote.
    let claims = Api::<PersistentVolumeClaim>::namespaced(cp.client.clone(), &ns);
    let mut dirs = Vec::new();
    for i in 0..3 {
        let claim = claims.get(&format!("data-web-{i}")).await.unwrap();
        assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
        let dir = cp.claim_dir(&ns, &format!("data-web-{i}")).await;
        assert!(read(&dir.join("starts")).starts_with(&format!("web-{i} ")));
        dirs.push(dir);
    }
    // The headless Service's EndpointSlice lists the three Pods, ready.
    let want: Vec<(String, bool)> = {
        let mut v: Vec<_> = ips.iter().map(|ip| (ip.clone(), true)).collect();
        v.sort();
        v
    };
    wait_for("three ready endpoints", LIMIT, || async {
        (endpoints(&cp, &ns, "web").await == want).then_some(())
    })
    .await;
    // Each Pod answers on its own address, and its hosts file names the others.
    let hosts = cp.exec(&ns, "web-0", "web", &["cat", "/etc/hosts"]);
    let hosts = String::from_utf8_lossy(&hosts.stdout).to_string();
    assert!(
        hosts.contains(&format!("{}\tweb-1.web.{ns}.svc.cluster.local", ips[1])),
        "{hosts}"
    );

    // A deleted Pod comes back under its name, with its claim, its data and (on its Node) its
    // address.
    let old_uid = cp.pod(&ns, "web-1").await.unwrap().metadata.uid.unwrap();
    pods(&cp, &ns)
        .delete("web-1", &DeleteParams::default())
        .await
        .unwrap();
    let pod = wait_for("web-1 re-created and Ready", LIMIT, || async {
        cp.pod(&ns, "web-1")
            .await
            .filter(|p| p.metadata.uid.as_deref() != Some(old_uid.as_str()) && is_ready(p))
    })
    .await;
    let new_uid = pod.metadata.uid.clone().unwrap();
    assert_eq!(ip_of(&pod), ips[1], "the same address for the same name");
    let starts = read(&dirs[1].join("starts"));
    assert_eq!(
        starts,
        format!("web-1 {old_uid}\nweb-1 {new_uid}\n"),
        "the new Pod found the old one's data"
    );
    cp.delete_namespace(&ns).await;
}

#[tokio::test]
async fn readiness_gates_ready_and_the_endpointslice_and_a_failing_liveness_probe_restarts_the_container()
 {
    let Some((cp, ns)) = plane("runner_probes").await else {
        return;
    };
    let probe = host_dir("probe");
    let p = probe.path().display();
    std::fs::write(probe.path().join("alive"), "").unwrap();
    cp.apply(
        &ns,
        &format!(
            r#"
apiVersion: v1
kind: Service
metadata: {{name: probed}}
spec:
  selector: {{app: probed}}
  ports: [{{port: 8080}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: probed, labels: {{app: probed}}}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: debian:12
    command: ["sleep", "infinity"]
    readinessProbe:
      exec: {{command: ["test", "-f", "/probe/ready"]}}
      periodSeconds: 1
    livenessProbe:
      exec: {{command: ["test", "-f", "/probe/alive"]}}
      periodSeconds: 1
      failureThreshold: 2
    volumeMounts: [{{name: probe, mountPath: /probe}}]
  volumes:
  - name: probe
    hostPath: {{path: "{p}"}}
"#
        ),
    );
    wait_for("probed running", LIMIT, || async {
        cp.pod(&ns, "probed")
            .await
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
    })
    .await;
    let ip = ip_of(&cp.pod(&ns, "probed").await.unwrap());
    // Not ready: an endpoint, not ready.
    wait_for("a not-ready endpoint", LIMIT, || async {
        (endpoints(&cp, &ns, "probed").await == vec![(ip.clone(), false)]).then_some(())
    })
    .await;
    assert!(!is_ready(&cp.pod(&ns, "probed").await.unwrap()));
    std::fs::write(probe.path().join("ready"), "").unwrap();
    pod_ready(&cp, &ns, "probed", true).await;
    wait_for("a ready endpoint", LIMIT, || async {
        (endpoints(&cp, &ns, "probed").await == vec![(ip.clone(), true)]).then_some(())
    })
    .await;
    std::fs::remove_file(probe.path().join("ready")).unwrap();
    pod_ready(&cp, &ns, "probed", false).await;
    assert_eq!(restarts(&cp.pod(&ns, "probed").await.unwrap(), "main"), 0);

    // Liveness fails: the container is killed and started again, with its last state.
    std::fs::remove_file(probe.path().join("alive")).unwrap();
    let pod = wait_for(
        "a restart after the liveness probe failed",
        LIMIT,
        || async {
            cp.pod(&ns, "probed")
                .await
                .filter(|p| restarts(p, "main") >= 1)
        },
    )
    .await;
    std::fs::write(probe.path().join("alive"), "").unwrap();
    let status = &pod.status.unwrap().container_statuses.unwrap()[0];
    let last = status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("the killed run's end");
    assert_eq!(last.exit_code, 128 + 15, "ended by SIGTERM: {last:?}");
    // Events come from the runner as the kubelet's: each failed run, then the kill.
    wait_for("the Unhealthy and Killing events", LIMIT, || async {
        let out = cp.kubectl(
            &[
                "-n",
                &ns,
                "get",
                "events",
                "--field-selector",
                "involvedObject.name=probed",
            ],
            None,
        );
        let events = String::from_utf8_lossy(&out.stdout).to_string();
        (events.contains("Liveness probe failed") && events.contains("failed Liveness probe"))
            .then_some(())
    })
    .await;
    cp.delete_namespace(&ns).await;
}

#[tokio::test]
async fn init_containers_run_in_order_and_a_config_map_edit_reaches_the_mounted_file() {
    let Some((cp, ns)) = plane("runner_files").await else {
        return;
    };
    let out = host_dir("files");
    let o = out.path().display();
    cp.apply(
        &ns,
        &format!(
            r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: conf}}
data: {{version: "one"}}
---
apiVersion: v1
kind: Pod
metadata: {{name: files}}
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: first
    image: debian:12
    command: ["sh", "-c", "sleep 1; echo first >> /out/order"]
    volumeMounts: [{{name: out, mountPath: /out}}]
  - name: second
    image: debian:12
    command: ["sh", "-c", "echo second >> /out/order"]
    volumeMounts: [{{name: out, mountPath: /out}}]
  containers:
  - name: main
    image: debian:12
    command: ["sh", "-c", "echo main >> /out/order; while true; do cat /conf/version > /out/seen.tmp && mv /out/seen.tmp /out/seen; sleep 0.2; done"]
    volumeMounts:
    - {{name: out, mountPath: /out}}
    - {{name: conf, mountPath: /conf}}
  volumes:
  - name: out
    hostPath: {{path: "{o}"}}
  - name: conf
    configMap: {{name: conf}}
"#
        ),
    );
    let seen = out.path().join("seen");
    wait_for("the first version seen", LIMIT, || async {
        (read(&seen) == "one").then_some(())
    })
    .await;
    assert_eq!(read(&out.path().join("order")), "first\nsecond\nmain\n");
    let pod = cp.pod(&ns, "files").await.unwrap();
    let inits = pod.status.unwrap().init_container_statuses.unwrap();
    for s in &inits {
        let t = s
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .unwrap();
        assert_eq!(
            (t.exit_code, t.reason.as_deref()),
            (0, Some("Completed")),
            "{}",
            s.name
        );
    }
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(cp.client.clone(), &ns)
        .patch(
            "conf",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"version": "two"}})),
        )
        .await
        .unwrap();
    wait_for("the edit seen in the mounted file", LIMIT, || async {
        (read(&seen) == "two").then_some(())
    })
    .await;
    // The kubelet's layout: the key is a link into `..data`, itself a link swapped whole.
    let listing = cp.exec(&ns, "files", "main", &["ls", "-la", "/conf/"]);
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(listing.contains("version -> ..data/version"), "{listing}");
    assert!(listing.contains("..data -> ..20"), "{listing}");
    cp.delete_namespace(&ns).await;
}

/// A Job whose container prints "working" and exits `code`, with `policy` as its
/// `terminationMessagePolicy` (the API server's default, `File`, when None).
fn job_yaml(name: &str, code: u8, backoff: u32, policy: Option<&str>) -> String {
    let policy = policy
        .map(|p| format!("        terminationMessagePolicy: {p}\n"))
        .unwrap_or_default();
    format!(
        r#"
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}}}
spec:
  backoffLimit: {backoff}
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: job
        image: debian:12
        command: ["sh", "-c", "echo working; exit {code}"]
{policy}"#
    )
}

fn condition(job: &Job, kind: &str) -> Option<String> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status == "True")
        .map(|c| c.reason.clone().unwrap_or_default())
}

#[tokio::test]
async fn a_job_completes_a_failing_one_retries_to_its_backoff_limit_and_a_cronjob_fires() {
    let Some((cp, ns)) = plane("runner_jobs").await else {
        return;
    };
    cp.apply(&ns, &job_yaml("works", 0, 2, None));
    cp.apply(&ns, &job_yaml("fails", 3, 1, None));
    cp.apply(
        &ns,
        &job_yaml("fails-logged", 4, 0, Some("FallbackToLogsOnError")),
    );
    cp.apply(
        &ns,
        r#"
apiVersion: batch/v1
kind: CronJob
metadata: {name: every-minute}
spec:
  schedule: "* * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: tick
            image: debian:12
            command: ["true"]
"#,
    );
    let jobs = Api::<Job>::namespaced(cp.client.clone(), &ns);
    wait_for("the job Complete", LIMIT, || async {
        condition(&jobs.get("works").await.unwrap(), "Complete")
    })
    .await;
    let reason = wait_for(
        "the failing job Failed",
        Duration::from_secs(240),
        || async { condition(&jobs.get("fails").await.unwrap(), "Failed") },
    )
    .await;
    assert_eq!(reason, "BackoffLimitExceeded");
    let failed: Vec<Pod> = pods(&cp, &ns)
        .list(&ListParams::default().labels("job-name=fails"))
        .await
        .unwrap()
        .items;
    assert_eq!(failed.len(), 2, "the first try and one retry");
    for p in &failed {
        let s = p.status.as_ref().unwrap();
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        let t = s.container_statuses.as_ref().unwrap()[0]
            .state
            .as_ref()
            .and_then(|s| s.terminated.clone())
            .unwrap();
        assert_eq!(t.exit_code, 3);
        // The default policy (`File`): the message is what the container wrote to its
        // termination-log file, which the runner does not provide; never its log.
        assert_eq!(t.message, None);
    }
    // FallbackToLogsOnError: a failed container's log ends its termination message.
    let logged = wait_for("the logged job's Pod failed", LIMIT, || async {
        let pods = pods(&cp, &ns)
            .list(&ListParams::default().labels("job-name=fails-logged"))
            .await
            .unwrap()
            .items;
        pods.first()
            .and_then(|p| p.status.clone())
            .and_then(|s| s.container_statuses)
            .and_then(|c| c.first().cloned())
            .and_then(|c| c.state)
            .and_then(|s| s.terminated)
    })
    .await;
    assert_eq!(logged.exit_code, 4);
    assert_eq!(logged.message.as_deref(), Some("working"));
    // A minute's schedule fires within two, and its Job completes.
    wait_for(
        "a Job of the CronJob Complete",
        Duration::from_secs(180),
        || async {
            let all = jobs.list(&ListParams::default()).await.unwrap().items;
            all.iter()
                .find(|j| {
                    j.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with("every-minute-"))
                        && condition(j, "Complete").is_some()
                })
                .map(|_| ())
        },
    )
    .await;
    cp.delete_namespace(&ns).await;
}

#[tokio::test]
async fn a_claim_expansion_reaches_the_volume_and_the_claim() {
    let Some((cp, ns)) = plane("runner_expand").await else {
        return;
    };
    cp.apply(
        &ns,
        r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: grow}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
"#,
    );
    let claims = Api::<PersistentVolumeClaim>::namespaced(cp.client.clone(), &ns);
    let capacity = |c: &PersistentVolumeClaim| {
        c.status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.clone())
    };
    wait_for("the claim bound at 1Gi", LIMIT, || async {
        let c = claims.get("grow").await.unwrap();
        (capacity(&c).as_deref() == Some("1Gi")).then_some(())
    })
    .await;
    claims
        .patch(
            "grow",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}}),
            ),
        )
        .await
        .unwrap();
    wait_for("the claim at 2Gi", LIMIT, || async {
        let c = claims.get("grow").await.unwrap();
        (capacity(&c).as_deref() == Some("2Gi")).then_some(())
    })
    .await;
    let pv = Api::<k8s_openapi::api::core::v1::PersistentVolume>::all(cp.client.clone())
        .get(
            &claims
                .get("grow")
                .await
                .unwrap()
                .spec
                .unwrap()
                .volume_name
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(pv.spec.unwrap().capacity.unwrap()["storage"].0, "2Gi");
    cp.delete_namespace(&ns).await;
}

#[tokio::test]
async fn faults_cut_a_pod_off_freeze_it_and_kill_its_container() {
    let Some((cp, ns)) = plane("runner_faults").await else {
        return;
    };
    cp.apply(
        &ns,
        r#"
apiVersion: v1
kind: Pod
metadata: {name: victim}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: debian:12
    command: ["python3", "-m", "http.server", "8080"]
    readinessProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 1
"#,
    );
    let pod = pod_ready(&cp, &ns, "victim", true).await;
    let addr: std::net::SocketAddr = format!("{}:8080", ip_of(&pod)).parse().unwrap();
    let connects = || std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok();
    assert!(connects());
    let annotate = |key: &str, value: Option<&str>| {
        let arg = match value {
            Some(v) => format!("pod-runner.moco-rs.test/{key}={v}"),
            None => format!("pod-runner.moco-rs.test/{key}-"),
        };
        let out = cp.kubectl(
            &["-n", &ns, "annotate", "--overwrite", "pod", "victim", &arg],
            None,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };

    // Cut off: nothing reaches it, and its readiness probe fails.
    annotate("network", Some("cut"));
    pod_ready(&cp, &ns, "victim", false).await;
    assert!(!connects());
    annotate("network", None);
    pod_ready(&cp, &ns, "victim", true).await;
    assert!(connects());

    // Frozen: its process stops (the connection is accepted by the kernel but never
    // answered) and is not restarted; thawed, it answers again.
    annotate("freeze", Some("true"));
    let pid_file = cp.runner_state().join(format!("exec/{ns}/victim/web.pid"));
    let pid = read(&pid_file).trim().to_owned();
    wait_for("the process frozen", LIMIT, || async {
        let state = read(Path::new(&format!("/proc/{pid}/stat")));
        let field = state.rsplit(") ").next().unwrap_or("").chars().next();
        matches!(field, Some('D' | 'T')).then_some(())
    })
    .await;
    let get = || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        s.write_all(b"GET / HTTP/1.0\r\n\r\n").ok()?;
        let mut buf = [0u8; 12];
        s.read_exact(&mut buf).ok()?;
        Some(String::from_utf8_lossy(&buf).to_string())
    };
    assert_eq!(get(), None, "a frozen server does not answer");
    annotate("freeze", None);
    assert_eq!(get().as_deref(), Some("HTTP/1.0 200"));
    assert_eq!(restarts(&cp.pod(&ns, "victim").await.unwrap(), "web"), 0);

    // Its container's process killed: started again, the kill in its last state.
    annotate("kill", Some("web@1"));
    let pod = wait_for("the killed container restarted", LIMIT, || async {
        cp.pod(&ns, "victim")
            .await
            .filter(|p| restarts(p, "web") == 1)
    })
    .await;
    let last = pod.status.unwrap().container_statuses.unwrap()[0]
        .last_state
        .clone()
        .and_then(|s| s.terminated)
        .unwrap();
    assert_eq!(last.exit_code, 137);
    pod_ready(&cp, &ns, "victim", true).await;
    cp.delete_namespace(&ns).await;
}

#[tokio::test]
async fn images_map_to_local_programs_and_an_unmapped_one_fails_naming_it() {
    let Some((cp, ns)) = plane("runner_images").await else {
        return;
    };
    cp.apply(
        &ns,
        r#"
apiVersion: v1
kind: Pod
metadata: {name: db}
spec:
  terminationGracePeriodSeconds: 10
  initContainers:
  # MOCO's agent image: moco is its /moco-init.
  - name: copy-init
    image: ghcr.io/moco-rs/moco-agent:0.1.0
    command: ["cp", "/moco-init", "/shared/moco-init"]
    volumeMounts: [{name: shared, mountPath: /shared}]
  # MariaDB's image runs the machine's mariadb-install-db.
  - name: install
    image: mariadb:10.11
    command: ["mariadb-install-db", "--datadir=/var/lib/mysql", "--user=root", "--skip-test-db"]
    volumeMounts: [{name: data, mountPath: /var/lib/mysql}]
  containers:
  # Arguments only: the image's entrypoint hands options to mariadbd.
  - name: mysqld
    image: mariadb:10.11
    args: ["--datadir=/var/lib/mysql", "--user=root", "--port=3306", "--bind-address=0.0.0.0", "--socket=/tmp/mysqld.sock", "--skip-log-bin"]
    readinessProbe:
      tcpSocket: {port: 3306}
      periodSeconds: 1
    volumeMounts: [{name: data, mountPath: /var/lib/mysql}]
  # MOCO's exporter image runs Debian's prometheus-mysqld-exporter.
  - name: exporter
    image: ghcr.io/cybozu-go/moco/mysqld_exporter:0.19.0.1
    args: ["--web.listen-address=:9104"]
    env: [{name: DATA_SOURCE_NAME, value: "root@unix(/tmp/none.sock)/"}]
    readinessProbe:
      httpGet: {path: /metrics, port: 9104}
      periodSeconds: 1
  - name: agent-files
    image: debian:12
    command: ["sleep", "infinity"]
    volumeMounts: [{name: shared, mountPath: /shared}]
  volumes:
  - {name: shared, emptyDir: {}}
  - {name: data, emptyDir: {}}
---
apiVersion: v1
kind: Pod
metadata: {name: mysql}
spec:
  containers:
  - name: mysqld
    image: ghcr.io/cybozu-go/moco/mysql:8.4.4
"#,
    );
    let pod = pod_ready(&cp, &ns, "db", true).await;
    // mariadbd answers on the Pod's address (with its refusal of a host it has no account
    // for: the greeting of a server that is there).
    let addr: std::net::SocketAddr = format!("{}:3306", ip_of(&pod)).parse().unwrap();
    let mut greeting = [0u8; 256];
    {
        use std::io::Read;
        let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let n = s.read(&mut greeting).unwrap();
        let text = String::from_utf8_lossy(&greeting[..n]).to_string();
        assert!(text.contains("MariaDB server"), "{text:?}");
    }
    // The copied program is moco, answering under MOCO's name.
    let out = cp.exec(&ns, "db", "agent-files", &["/shared/moco-init", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && help.contains("moco"), "{help}");

    // No local stand-in for MySQL's image: the container waits as after a failed pull.
    let (reason, message) = wait_for("the unmapped image refused", LIMIT, || async {
        let pod = cp.pod(&ns, "mysql").await?;
        let waiting = pod
            .status?
            .container_statuses?
            .first()?
            .state
            .clone()?
            .waiting?;
        Some((waiting.reason?, waiting.message?))
    })
    .await;
    assert!(
        reason == "ErrImagePull" || reason == "ImagePullBackOff",
        "{reason}"
    );
    assert!(
        message.contains("ghcr.io/cybozu-go/moco/mysql:8.4.4"),
        "{message}"
    );
    cp.delete_namespace(&ns).await;
}

#[tokio::test]
async fn a_deleted_pod_runs_its_pre_stop_hook_gets_sigterm_and_its_grace_then_nothing_of_it_runs() {
    let Some((cp, ns)) = plane("runner_deletion").await else {
        return;
    };
    let out = host_dir("deletion");
    let o = out.path().display();
    cp.apply(
        &ns,
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: stopping}}
spec:
  terminationGracePeriodSeconds: 4
  containers:
  - name: main
    image: debian:12
    # Notes SIGTERM and carries on: only the SIGKILL at the end of the grace ends it.
    command: ["sh", "-c", "trap 'echo term >> /out/log' TERM; echo started >> /out/log; while true; do sleep 0.1; done"]
    lifecycle:
      preStop:
        exec: {{command: ["sh", "-c", "echo prestop >> /out/log"]}}
    volumeMounts: [{{name: out, mountPath: /out}}]
  volumes:
  - name: out
    hostPath: {{path: "{o}"}}
"#
        ),
    );
    let log = out.path().join("log");
    wait_for("started", LIMIT, || async {
        (read(&log) == "started\n").then_some(())
    })
    .await;
    let pid = read(
        &cp.runner_state()
            .join(format!("exec/{ns}/stopping/main.pid")),
    );
    let pid = pid.trim().to_owned();
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    let asked = std::time::Instant::now();
    pods(&cp, &ns)
        .delete("stopping", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the Pod gone", LIMIT, || async {
        cp.pod(&ns, "stopping").await.is_none().then_some(())
    })
    .await;
    let took = asked.elapsed();
    assert!(
        took >= Duration::from_millis(3500),
        "the grace period of 4 s was not given: gone after {took:?}"
    );
    assert_eq!(read(&log), "started\nprestop\nterm\n");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists()
            || read(Path::new(&format!("/proc/{pid}/stat"))).contains(") Z "),
        "the container's process {pid} still runs"
    );
    cp.delete_namespace(&ns).await;
}

#[tokio::test]
async fn kube_sh_refuses_a_running_dir_and_bad_nodes_naming_them_and_leaves_the_cluster_running() {
    // (And its etcd takes only kube-apiserver's client certificate.)
    let Some(cp) = control_plane("runner_kube_sh_bad_input").await else {
        return;
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let kube_sh = |args: &[&str]| {
        std::process::Command::new(repo.join("scripts/kube.sh"))
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let dir = cp.dir.display().to_string();
    let again = kube_sh(&["up", "--dir", &dir]);
    let why = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success());
    assert!(
        why.contains("already running") && why.contains(&dir),
        "{why}"
    );
    let empty = tempfile::tempdir().unwrap();
    let empty = empty.path().display().to_string();
    for (args, named) in [
        (vec!["up", "--dir", &empty, "--nodes", "0"], "--nodes"),
        (vec!["up"], "--dir"),
        (vec!["sideways", "--dir", &empty], "sideways"),
    ] {
        let out = kube_sh(&args);
        let why = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && why.contains(named),
            "{args:?}: {why}"
        );
    }
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "nothing started"
    );
    // etcd takes no client without a certificate of its own CA (before, any local user could
    // write to it on loopback, and so run a root Pod with a hostPath volume): plain HTTP and
    // TLS without a client certificate are refused, kube-apiserver's certificate is taken.
    let env = std::fs::read_to_string(cp.dir.join("env")).unwrap();
    let etcd = env
        .lines()
        .find_map(|l| l.strip_prefix("export MOCO_KUBE_ETCD="))
        .unwrap()
        .to_owned();
    assert!(etcd.starts_with("https://127.0.0.1:"), "{etcd}");
    let pki = cp.dir.join("pki");
    let curl = |args: &[&str]| {
        std::process::Command::new("curl")
            .args(["-sS", "--max-time", "10"])
            .args(args)
            .output()
            .unwrap()
    };
    let plain = curl(&[&format!("{}/health", etcd.replace("https://", "http://"))]);
    assert!(
        !String::from_utf8_lossy(&plain.stdout).contains("\"health\":\"true\""),
        "etcd answered plain HTTP"
    );
    let ca = pki.join("etcd-ca.crt").display().to_string();
    let anonymous = curl(&["--cacert", &ca, &format!("{etcd}/health")]);
    assert!(
        !anonymous.status.success(),
        "etcd answered a client without a certificate: {}",
        String::from_utf8_lossy(&anonymous.stdout)
    );
    let cert = pki.join("apiserver-etcd-client.crt").display().to_string();
    let key = pki.join("apiserver-etcd-client.key").display().to_string();
    let apiserver = curl(&[
        "--cacert",
        &ca,
        "--cert",
        &cert,
        "--key",
        &key,
        &format!("{etcd}/health"),
    ]);
    assert!(
        String::from_utf8_lossy(&apiserver.stdout).contains("\"health\":\"true\""),
        "{}",
        String::from_utf8_lossy(&apiserver.stderr)
    );
    // The API server's own client CA signs no etcd client.
    let admin = curl(&[
        "--cacert",
        &ca,
        "--cert",
        &pki.join("admin.crt").display().to_string(),
        "--key",
        &pki.join("admin.key").display().to_string(),
        &format!("{etcd}/health"),
    ]);
    assert!(
        !admin.status.success(),
        "etcd took the cluster CA's admin certificate"
    );

    // The running cluster did not notice.
    cp.client.apiserver_version().await.unwrap();
    let nodes = cp.kubectl(&["get", "nodes", "-o", "name"], None);
    assert!(String::from_utf8_lossy(&nodes.stdout).contains("node/node-0"));
}

#[tokio::test]
async fn a_startup_probe_holds_readiness_back_until_it_passes() {
    let Some((cp, ns)) = plane("runner_startup").await else {
        return;
    };
    let probe = host_dir("startup");
    let p = probe.path().display();
    cp.apply(
        &ns,
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: slow}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: debian:12
    command: ["sleep", "infinity"]
    startupProbe:
      exec: {{command: ["test", "-f", "/probe/started"]}}
      periodSeconds: 1
      failureThreshold: 600
    readinessProbe:
      exec: {{command: ["true"]}}
      periodSeconds: 1
    volumeMounts: [{{name: probe, mountPath: /probe}}]
  volumes:
  - name: probe
    hostPath: {{path: "{p}"}}
"#
        ),
    );
    let started = |pod: &Pod| {
        pod.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .and_then(|c| c.started)
    };
    wait_for("running, not started", LIMIT, || async {
        cp.pod(&ns, "slow").await.filter(|p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                && started(p) == Some(false)
        })
    })
    .await;
    // A readiness probe that would pass at once is not run before the startup probe passes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pod = cp.pod(&ns, "slow").await.unwrap();
    assert!(!is_ready(&pod) && started(&pod) == Some(false));
    std::fs::write(probe.path().join("started"), "").unwrap();
    let pod = pod_ready(&cp, &ns, "slow", true).await;
    assert_eq!(started(&pod), Some(true));
    cp.delete_namespace(&ns).await;
}
