//! Backups and point-in-time restore through Pods on the real control plane (issue 31): a
//! MariaDB cluster of 3 created with `kubectl apply` (`scripts/kube.sh up`, `MOCO_KUBE_DIR`),
//! its Pods run by the Pod runner, managed by `moco controller --watch-namespace` run on this
//! machine ([`OperatorHost`]), with moto's S3 server on the control plane's bridge as the
//! bucket. A writer inserts through the `moco-db-primary` Service throughout ([`Writer`]).
//!
//! * the BackupPolicy's CronJob (`* * * * *`) fires twice by the real CronJob controller; each
//!   Job's Pod runs `/moco backup` from the agent image (run by the Pod runner; its stand-in
//!   lacked `/moco`), streams the replica's copy from its agent into the bucket (MOCO's layout,
//!   manifest last), writes nothing outside its volumes, and records `status.backup` and the
//!   `BackupCreated` Event; the second stores the binlogs written since the first (the
//!   archive's segments, `binlogSize`);
//! * a new cluster restored to a second between two acknowledged writes after the first
//!   backup (`spec.restore`, the source deleted): the restore Job's Pod streams the first
//!   backup to instance 0's agent and replays the archived binlogs; `status.restoredTime` and
//!   `Restored` are recorded, the restore Job is deleted once it succeeded (its Role and
//!   RoleBinding too), instance 0's binlog history starts at the base's (the agent seeded the
//!   copy: the restore Job's replay racing that seed fails here), and the new cluster holds
//!   every row acknowledged before that second and none sent after it, on all three
//!   instances (the replicas cloned from instance 0);
//! * `kubectl moco credential rotate` between the base backup and the restore point: the
//!   replay crosses the source's `ALTER USER 'moco-*'`, yet the restored cluster keeps its
//!   own passwords (the source's old and new `moco-admin` passwords refused on every
//!   instance).
//!
//! The times of each step are printed (`docs/benchmarks.md`, "Backup and PITR through Pods on
//! the real control plane").

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Event, Pod, Secret};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use moco_adapters::mysql::{clone_binlog_state, sql};
use moco_api::mysqlcluster::{BackupStatus, MySQLCluster};
use moco_core::gtid::GtidSet;
use moco_tests::control_plane::{control_plane, is_ready, wait_for};
use moco_tests::kubectl_plugin::PluginPath;
use moco_tests::operated_namespace::{OperatedNamespace, mariadb_cluster};
use moco_tests::operator_host::{OperatorHost, issue_agent_certificate};
use moco_tests::s3::{Moto, bridge_moto, moto_job_config, open_bucket};
use moco_tests::writer::{
    self, Ack, ServiceRoute, Writer, WriterLog, logs_in, missing, stored_ids,
};
use serde_json::{Value, json};

/// Limit of a bring-up: MariaDB's first start on 2 busy cores is the slowest step.
const BRING_UP: Duration = Duration::from_secs(300);
/// Limit of one scheduled backup: the schedule fires within a minute, then the Job runs.
const BACKUP: Duration = Duration::from_secs(420);
/// Limit of the restore: the Job's copy, the Pod's restart, the replay, then two clones.
const RESTORE: Duration = Duration::from_secs(600);
/// The cluster backed up, the restored one, the bucket, the policy.
const SOURCE: &str = "db";
const RESTORED: &str = "restored";
const BUCKET: &str = "pitr";
const POLICY: &str = "every-minute";
/// The Jobs' ServiceAccount.
const JOB_ACCOUNT: &str = "backup";
/// MariaDB serves clients on 3306.
const PORT: u16 = 3306;

/// A MariaDB cluster `name` of 3 with `extra` spec fields (the operated namespaces' cluster
/// of 1 Gi claims, renamed).
fn cluster_manifest(ns: &str, name: &str, extra: &Value) -> String {
    let mut c = mariadb_cluster(ns, 3, "1Gi");
    c["metadata"]["name"] = json!(name);
    for (k, v) in extra.as_object().into_iter().flatten() {
        c["spec"][k] = v.clone();
    }
    c.to_string()
}

/// The Jobs' settings (MOCO's JobConfig): the bucket on moto, its credentials.
fn job_config(endpoint: &str) -> Value {
    moto_job_config(JOB_ACCOUNT, BUCKET, endpoint)
}

/// A wall-clock second as RFC 3339 (`restorePoint`'s form).
fn rfc3339(second: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(second)
        .unwrap()
        .to_string()
}

/// Seconds since the epoch of a wall-clock time.
fn epoch(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// The namespace and its operator (which both clusters live in and are managed by), moto and
/// the bucket.
struct Fixture {
    space: OperatedNamespace,
    moto: Moto,
    bucket: moco_backup::Bucket,
    /// A wall-clock reading and the monotonic one taken with it: the writer's
    /// acknowledgements are `Instant`s, restore points wall-clock seconds.
    anchor: (Instant, SystemTime),
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // The operator first (the namespace's own drop then deletes the namespace, with
        // nothing re-creating what the deletion takes).
        let space = &mut self.space;
        space.host.stop();
        if std::thread::panicking() {
            // Its temporary directory goes with it: the whole log is kept for the diagnosis.
            let path = std::env::temp_dir().join(format!("{}-operator.log", space.ns));
            if std::fs::write(&path, space.host.log()).is_ok() {
                eprintln!("{}: the operator's whole log: {}", space.ns, path.display());
            }
        }
    }
}

/// What one scheduled backup did, as the test saw it.
#[derive(Debug, Clone)]
struct BackupRun {
    job: String,
    /// When the test first saw the Job, and when it saw `status.backup` recorded.
    seen: Instant,
    recorded: Instant,
    /// The same, on the wall clock.
    recorded_wall: SystemTime,
    /// The second the schedule fired for (the Job's name carries it, in minutes).
    scheduled: i64,
    /// The Job's `creationTimestamp`, `status.startTime` and `completionTime` (seconds).
    created: i64,
    completed: Option<i64>,
    status: BackupStatus,
}

impl Fixture {
    fn clusters(&self) -> Api<MySQLCluster> {
        self.space.clusters()
    }

    fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.space.cp.client.clone(), &self.space.ns)
    }

    fn pods(&self) -> Api<Pod> {
        self.space.pods()
    }

    async fn cluster(&self, name: &str) -> Option<MySQLCluster> {
        self.clusters().get_opt(name).await.ok().flatten()
    }

    /// The monotonic time of a wall-clock one (seconds since the epoch).
    fn instant_of(&self, wall: f64) -> Instant {
        let (i, w) = self.anchor;
        i + Duration::from_secs_f64((wall - epoch(w)).max(0.0))
    }

    /// The wall-clock time of a monotonic one.
    fn wall(&self, at: Instant) -> SystemTime {
        let (i, w) = self.anchor;
        if at >= i {
            w + at.duration_since(i)
        } else {
            w - i.duration_since(at)
        }
    }

    fn log_tail(&self, n: usize) -> String {
        self.space.log_tail(n)
    }

    /// `Healthy: True` and every Pod of `name` Ready.
    async fn healthy(&self, name: &str) -> bool {
        let Some(c) = self.cluster(name).await else {
            return false;
        };
        let healthy = c.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Healthy" && c.status == "True")
        });
        let mut ready = 0;
        for i in 0..c.spec.replicas {
            let pod = self
                .pods()
                .get_opt(&format!("moco-{name}-{i}"))
                .await
                .ok()
                .flatten();
            if pod.is_some_and(|p| is_ready(&p) && p.metadata.deletion_timestamp.is_none()) {
                ready += 1;
            }
        }
        healthy && ready == c.spec.replicas
    }

    async fn wait_healthy(&self, name: &str, limit: Duration) -> Duration {
        let started = Instant::now();
        loop {
            if self.healthy(name).await {
                let took = started.elapsed();
                println!(
                    "{}: {name} Healthy after {:.1} s",
                    self.space.ns,
                    took.as_secs_f64()
                );
                return took;
            }
            assert!(
                started.elapsed() < limit,
                "{}: {name} not Healthy within {limit:?}: conditions {:?}\n{}",
                self.space.ns,
                self.cluster(name).await.and_then(|c| c.status).map(|s| s
                    .conditions
                    .into_iter()
                    .map(|c| (c.type_, c.status, c.reason))
                    .collect::<Vec<_>>()),
                self.log_tail(40)
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// A password of cluster `name`'s Secret `moco-<name>` (`ADMIN_PASSWORD`, …).
    async fn password(&self, name: &str, key: &str) -> String {
        let secret = Api::<Secret>::namespaced(self.space.cp.client.clone(), &self.space.ns)
            .get(&format!("moco-{name}"))
            .await
            .unwrap_or_else(|e| panic!("Secret moco-{name}: {e}"));
        let bytes = secret
            .data
            .and_then(|d| d.get(key).cloned())
            .unwrap_or_else(|| panic!("Secret moco-{name} has no {key}"));
        String::from_utf8(bytes.0).unwrap()
    }

    /// The address of instance `index` of cluster `name`.
    async fn addr(&self, name: &str, index: i32) -> Option<SocketAddr> {
        let pod = self
            .pods()
            .get_opt(&format!("moco-{name}-{index}"))
            .await
            .ok()??;
        let ip = pod.status?.pod_ip?;
        Some(SocketAddr::new(ip.parse().ok()?, PORT))
    }

    /// The messages of the Events of `reason` about cluster `name` (the Jobs create core
    /// Events on it), oldest first.
    async fn events(&self, name: &str, reason: &str) -> Vec<String> {
        let mut items = Api::<Event>::namespaced(self.space.cp.client.clone(), &self.space.ns)
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        items.retain(|e| {
            e.reason.as_deref() == Some(reason)
                && e.involved_object.kind.as_deref() == Some("MySQLCluster")
                && e.involved_object.name.as_deref() == Some(name)
        });
        items.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
        items.into_iter().filter_map(|e| e.message).collect()
    }

    /// The Pods of Job `job` with their container's state and the runner's logs of it.
    async fn job_pods_report(&self, job: &str) -> String {
        let pods = self
            .pods()
            .list(&ListParams::default().labels(&format!("job-name={job}")))
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        let mut out = String::new();
        for p in &pods {
            let name = p.metadata.name.clone().unwrap_or_default();
            let uid = p.metadata.uid.clone().unwrap_or_default();
            let states = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.clone())
                .unwrap_or_default()
                .into_iter()
                .map(|c| format!("{}: {:?}", c.name, c.state))
                .collect::<Vec<_>>();
            out.push_str(&format!("Pod {name}: {states:?}\n"));
            let dir = self
                .space
                .cp
                .runner_state()
                .join("logs")
                .join(format!("{}_{name}_{uid}", self.space.ns));
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                for log in std::fs::read_dir(entry.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    let text = std::fs::read_to_string(log.path()).unwrap_or_default();
                    let lines: Vec<&str> = text.lines().collect();
                    out.push_str(&format!(
                        "--- {} ---\n{}\n",
                        log.path().display(),
                        lines[lines.len().saturating_sub(30)..].join("\n")
                    ));
                }
            }
        }
        out
    }

    /// Job `job`'s succeeded Pod (see [`succeeded`]), which wrote nothing to its root file
    /// system: only the mount points the runner made and `/etc/hostname` are in its layer, so
    /// a real runtime's `readOnlyRootFilesystem` (which the runner does not enforce) would
    /// refuse nothing it did.
    async fn backup_pod_succeeded(&self, job: &str) -> (String, String, Vec<String>) {
        let pods = self
            .pods()
            .list(&ListParams::default().labels(&format!("job-name={job}")))
            .await
            .unwrap()
            .items;
        let pod = pods
            .iter()
            .find(|p| succeeded(p).is_some())
            .unwrap_or_else(|| panic!("Job {job} has no succeeded Pod: {pods:?}"));
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let upper = self
            .space
            .cp
            .runner_state()
            .join("pods")
            .join(&uid)
            .join("containers")
            .join("backup-1")
            .join("upper");
        assert!(upper.is_dir(), "no layer at {}", upper.display());
        let mut written = Vec::new();
        root_writes(&upper, &upper, &mut written);
        let outside: Vec<_> = written
            .iter()
            .filter(|(path, size, dir)| !dir && *size > 0 && path != "/etc/hostname")
            .collect();
        assert!(
            outside.is_empty(),
            "{}: Job {job} wrote outside its volumes: {outside:?}",
            self.space.ns
        );
        succeeded(pod).unwrap()
    }

    /// Waits for the next Job of the backup CronJob after `previous` to complete and record
    /// `status.backup`; panics with the Job Pods' logs when it fails.
    async fn scheduled_backup(&self, previous: Option<&BackupRun>) -> BackupRun {
        let started = Instant::now();
        let cronjob = format!("moco-backup-{SOURCE}");
        let mut seen: Option<(String, Instant)> = None;
        loop {
            assert!(
                started.elapsed() < BACKUP,
                "{}: no scheduled backup recorded within {BACKUP:?} (Job {seen:?})\n{}\n{}",
                self.space.ns,
                match &seen {
                    Some((j, _)) => self.job_pods_report(j).await,
                    None => String::new(),
                },
                self.log_tail(30)
            );
            if seen.is_none() {
                let jobs = self
                    .jobs()
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                    .items;
                seen = jobs
                    .iter()
                    .filter(|j| {
                        j.metadata
                            .owner_references
                            .iter()
                            .flatten()
                            .any(|o| o.kind == "CronJob" && o.name == cronjob)
                    })
                    .filter_map(|j| j.metadata.name.clone())
                    .filter(|n| previous.is_none_or(|p| *n > p.job))
                    .min()
                    .map(|n| (n, Instant::now()));
                if let Some((job, _)) = &seen {
                    println!(
                        "{}: the CronJob created Job {job} ({:.1} s into the wait)",
                        self.space.ns,
                        started.elapsed().as_secs_f64()
                    );
                }
            }
            if let Some((job, at)) = &seen {
                let j = self.jobs().get(job).await.unwrap();
                let conditions = j
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.clone())
                    .unwrap_or_default();
                if conditions
                    .iter()
                    .any(|c| c.type_ == "Failed" && c.status == "True")
                {
                    panic!(
                        "{}: backup Job {job} failed: {conditions:?}\n{}",
                        self.space.ns,
                        self.job_pods_report(job).await
                    );
                }
                let complete = conditions
                    .iter()
                    .any(|c| c.type_ == "Complete" && c.status == "True");
                let status = self
                    .cluster(SOURCE)
                    .await
                    .and_then(|c| c.status)
                    .map(|s| s.backup)
                    .unwrap_or_default();
                let new =
                    status.time.is_some() && previous.is_none_or(|p| status.time != p.status.time);
                if complete && new {
                    let recorded = Instant::now();
                    let s = j.status.clone().unwrap_or_default();
                    // `moco-backup-db-<minutes since the epoch>`, as the controller names it.
                    let scheduled = job
                        .rsplit('-')
                        .next()
                        .and_then(|m| m.parse::<i64>().ok())
                        .expect("a scheduled Job's name ends in its minute")
                        * 60;
                    return BackupRun {
                        job: job.clone(),
                        seen: *at,
                        recorded,
                        recorded_wall: self.wall(recorded),
                        scheduled,
                        created: j
                            .metadata
                            .creation_timestamp
                            .map(|t| t.0.as_second())
                            .unwrap_or_default(),
                        completed: s.completion_time.map(|t| t.0.as_second()),
                        status,
                    };
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Checks a recorded backup: its folder in the bucket (manifest and base, MOCO's key
    /// layout), the Job's Pod run by the runner from the agent image as `/moco backup`.
    async fn check_backup(&self, run: &BackupRun) {
        let time = run.status.time.clone().expect("status.backup.time").0;
        let folder = time.strftime("%Y%m%d-%H%M%S").to_string();
        let prefix = format!("moco/{}/{SOURCE}/{folder}", self.space.ns);
        let keys: BTreeSet<String> = self
            .bucket
            .list(&prefix)
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect();
        let want: BTreeSet<String> = ["base.xbstream.zst", "manifest.json"]
            .iter()
            .map(|k| format!("{prefix}/{k}"))
            .collect();
        assert_eq!(keys, want, "the backup's folder in the bucket");
        let manifest = moco_backup::mariadb::physical::manifest(&self.bucket, &prefix)
            .await
            .unwrap();
        assert_eq!(
            i64::try_from(manifest.base.size).unwrap(),
            run.status.dump_size,
            "status.backup.dumpSize is the stored base's size"
        );
        let (pod, node, argv) = self.backup_pod_succeeded(&run.job).await;
        assert_eq!(argv.first().map(String::as_str), Some("/moco"), "{argv:?}");
        assert_eq!(argv.get(1).map(String::as_str), Some("backup"), "{argv:?}");
        println!(
            "{}: backup {folder} by Job {} (Pod {pod} on {node}): source {}, {} bytes, \
             binlogs {} bytes, elapsed {}; scheduled {} → Job created +{} s → completed +{:?} s; \
             the Job seen → status.backup seen {:.1} s",
            self.space.ns,
            run.job,
            run.status.source_index,
            run.status.dump_size,
            run.status.binlog_size,
            run.status.elapsed,
            rfc3339(run.scheduled),
            run.created - run.scheduled,
            run.completed.map(|c| c - run.created),
            run.recorded.duration_since(run.seen).as_secs_f64(),
        );
    }
}

/// A Pod whose one container ran to exit code 0 on a Node (the runner's doing, not the
/// test's): its name, its Node and the container's command line.
fn succeeded(pod: &Pod) -> Option<(String, String, Vec<String>)> {
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Succeeded") {
        return None;
    }
    let exit = status
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .terminated
        .as_ref()?
        .exit_code;
    let spec = pod.spec.as_ref()?;
    let c = spec.containers.first()?;
    let argv = c
        .command
        .iter()
        .flatten()
        .chain(c.args.iter().flatten())
        .cloned()
        .collect();
    (exit == 0).then(|| {
        (
            pod.metadata.name.clone().unwrap_or_default(),
            spec.node_name.clone().unwrap_or_default(),
            argv,
        )
    })
}

/// Every state of the objects of `api` that `config` selects, as the API server sent them
/// (`false`: applied, `true`: deleted): the restore Job and its Pod are deleted moments after
/// they succeed, between two polls.
struct Recorder<K> {
    seen: Arc<Mutex<Vec<(Instant, bool, K)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl<K> Drop for Recorder<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<K> Recorder<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    fn start(api: Api<K>, config: watcher::Config) -> Recorder<K> {
        use futures::StreamExt as _;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let out = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher::watcher(api, config));
            while let Some(event) = events.next().await {
                let (deleted, object) = match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => (false, o),
                    Ok(watcher::Event::Delete(o)) => (true, o),
                    _ => continue,
                };
                out.lock().unwrap().push((Instant::now(), deleted, object));
            }
        });
        Recorder { seen, task }
    }

    fn seen(&self) -> Vec<(Instant, bool, K)> {
        self.seen.lock().unwrap().clone()
    }
}

/// Every entry of a container's overlay layer `dir` (what it wrote outside its volumes and
/// the runner's tmpfs mounts), as paths of the container with their sizes.
fn root_writes(base: &Path, dir: &Path, out: &mut Vec<(String, u64, bool)>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let inside = format!("/{}", path.strip_prefix(base).unwrap().display());
        out.push((inside, meta.len(), meta.is_dir()));
        if meta.is_dir() {
            root_writes(base, &path, out);
        }
    }
}

/// The `Gtid_list` of the oldest binlog of the server at `addr` (as `moco-admin`): the history
/// before everything its binlogs hold, which the operator reads as MariaDB's `gtid_purged`.
async fn oldest_binlog_history(addr: SocketAddr, password: &str) -> Result<GtidSet, String> {
    use mysql_async::prelude::Queryable;
    let opts = writer::opts_at(addr, "moco-admin", password);
    let mut c = moco_tests::local::connect(&opts, Duration::from_secs(5)).await?;
    let logs: Vec<mysql_async::Row> = c.query(sql::BINARY_LOGS).await.map_err(|e| e.to_string())?;
    let first: String = logs.first().and_then(|r| r.get(0)).ok_or("no binary log")?;
    let events: Vec<mysql_async::Row> = c
        .query(sql::binlog_head_events(&first))
        .await
        .map_err(|e| e.to_string())?;
    let _ = c.disconnect().await;
    events
        .iter()
        .find(|e| e.get::<String, _>("Event_type").as_deref() == Some("Gtid_list"))
        .and_then(|e| e.get::<String, _>("Info"))
        .and_then(|info| sql::parse_gtid_list_info(&info))
        .map(|g| normalized(&g))
        .ok_or_else(|| format!("{first} has no Gtid_list event"))
}

/// A MariaDB state in the server's own form (the last sequence number of each source).
fn normalized(state: &GtidSet) -> GtidSet {
    GtidSet::from_mariadb(&sql::mariadb_binlog_state_text(state)).unwrap()
}

/// The acknowledged writes before second `point` and the first at or after it, on the wall
/// clock of `f`.
fn split_at(f: &Fixture, acks: &[Ack], point: i64) -> (Vec<u64>, Option<u64>) {
    let at = |a: &Ack| epoch(f.wall(a.at));
    let before = acks
        .iter()
        .filter(|a| at(a) < point as f64)
        .map(|a| a.id)
        .collect();
    let first_after = acks.iter().find(|a| at(a) >= point as f64).map(|a| a.id);
    (before, first_after)
}

/// Two scheduled backups of a 3-instance MariaDB cluster under writes, then a point-in-time
/// restore into a new cluster, every program in Pods of the Pod runner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_backups_and_a_point_in_time_restore_run_in_pods() {
    let test = "kube_pitr_backups_and_restore";
    // The Pods' MariaDB image runs this machine's mariadbd: without one they never start.
    if moco_tests::local::server_or_skip(test).is_none() {
        return;
    }
    let Some(cp) = control_plane(test).await else {
        return;
    };
    let anchor = (Instant::now(), SystemTime::now());
    let ns = cp.namespace("kube-pitr").await;
    let moto = bridge_moto(&cp, "kube_pitr");
    let bucket = open_bucket(&moto.endpoint, BUCKET).await;
    // The operator's client certificate (in its `--grpc-cert-dir`) and both clusters' agent
    // Secrets come from the test process's one agent CA: it clones the restored cluster's
    // replicas, and the Jobs call the agents with the clusters' own certificates.
    let host = OperatorHost::start(&cp, &ns, &[]).await;
    for name in [SOURCE, RESTORED] {
        issue_agent_certificate(&cp, &ns, &ns, name).await;
    }
    let f = Fixture {
        space: OperatedNamespace {
            cp,
            system: ns.clone(),
            ns,
            host,
        },
        moto,
        bucket,
        anchor,
    };
    let ns = f.space.ns.clone();
    f.space.cp.apply(
        &ns,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"namespace": ns, "name": JOB_ACCOUNT}})
        .to_string(),
    );

    // The source cluster, Healthy, a writer through its primary Service.
    f.space
        .cp
        .apply(&ns, &cluster_manifest(&ns, SOURCE, &json!({})));
    f.wait_healthy(SOURCE, BRING_UP).await;
    let primary_route =
        ServiceRoute::follow(&f.space.cp.client, &ns, &format!("moco-{SOURCE}-primary"));
    let primary = primary_route
        .wait("one ready endpoint", BRING_UP, |e| e.len() == 1)
        .await[0]
        .addr;
    let writable = f.password(SOURCE, "WRITABLE_PASSWORD").await;
    writer::create_table(primary, &writable)
        .await
        .unwrap_or_else(|e| panic!("creating the table at {primary}: {e}"));
    let w = Writer::start(&primary_route, "moco-writable", &writable);
    w.wait_acked(20, BRING_UP).await;

    // The BackupPolicy, every minute; the real CronJob controller fires it.
    f.space.cp.apply(
        &ns,
        &json!({
            "apiVersion": "moco.cybozu.com/v1beta2", "kind": "BackupPolicy",
            "metadata": {"namespace": ns, "name": POLICY},
            "spec": {
                "schedule": "* * * * *",
                "concurrencyPolicy": "Forbid",
                // A failed Pod fails the Job at once (and the test, with its logs).
                "backoffLimit": 0,
                "jobConfig": job_config(&f.moto.endpoint)
            }
        })
        .to_string(),
    );
    // `kubectl moco` built (or found) before any backup is scheduled: a build inside the
    // schedule would let a second backup fire before the first is checked, or fall between
    // the rotation's start and the restore point.
    let plugin = PluginPath::install(&f.space.cp);
    f.clusters()
        .patch(
            SOURCE,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"backupPolicyName": POLICY}})),
        )
        .await
        .unwrap();
    let cronjobs: Api<CronJob> = Api::namespaced(f.space.cp.client.clone(), &ns);
    let cronjob = format!("moco-backup-{SOURCE}");
    wait_for(&format!("{ns}: CronJob {cronjob}"), BRING_UP, || async {
        cronjobs.get_opt(&cronjob).await.ok().flatten()
    })
    .await;

    // The first backup.
    let first = f.scheduled_backup(None).await;
    f.check_backup(&first).await;
    assert_eq!(
        f.events(SOURCE, "BackupCreated").await.len(),
        1,
        "one BackupCreated Event after the first backup"
    );
    let first_time = first.status.time.clone().unwrap().0.as_second();

    // A rotation of MOCO's passwords inside the restore window: the replay crosses the
    // source's `ALTER USER 'moco-*'` statements (issue 44, item 8).
    let before_rotation = f.password(SOURCE, "ADMIN_PASSWORD").await;
    let rotation_started = f.wall(Instant::now());
    let out = plugin.kubectl_ok(&[
        "moco",
        "-n",
        &ns,
        "credential",
        "rotate",
        SOURCE,
        "--timeout",
        "10m",
    ]);
    assert!(out.contains("password rotation finished"), "{out}");
    let rotated = f.password(SOURCE, "ADMIN_PASSWORD").await;
    assert_ne!(
        before_rotation, rotated,
        "the rotation drew no new password"
    );
    println!(
        "{ns}: rotated the source's passwords in {:.1} s",
        epoch(SystemTime::now()) - epoch(rotation_started)
    );

    // The restore point: a few seconds after the rotation finished, between two writes.
    let point = epoch(SystemTime::now()).ceil() as i64 + 3;
    let point_reached = f.instant_of(point as f64 + 2.0);
    wait_for(
        &format!("{ns}: writes acknowledged 2 s past the restore point"),
        BACKUP,
        || async {
            w.log()
                .acks
                .last()
                .is_some_and(|a| a.at >= point_reached)
                .then_some(())
        },
    )
    .await;

    // The backup after the point, which archives the binlogs written since the base (the
    // schedule may fire once more before the point on a slow machine: that one must not be
    // the base, or the replay would not cross the rotation).
    let mut base = first.clone();
    let mut backups = 1;
    let second = loop {
        let next = f.scheduled_backup(Some(&base)).await;
        f.check_backup(&next).await;
        backups += 1;
        if next.status.time.clone().unwrap().0.as_second() > point {
            break next;
        }
        base = next;
    };
    let base_time = base.status.time.clone().unwrap().0.as_second();
    assert!(
        (base_time as f64) < epoch(rotation_started),
        "a backup was taken during the rotation ({}, the rotation began at {:.0}): the restore \
         would not replay it",
        rfc3339(base_time),
        epoch(rotation_started)
    );
    let second_time = second.status.time.clone().unwrap().0.as_second();
    assert!(
        first_time < point && point < second_time,
        "the restore point {point} is not between the backups ({first_time}, {second_time})"
    );
    assert!(
        second.status.binlog_size > 0,
        "the second backup archived no binlogs: {:?}",
        second.status
    );
    let segments: Vec<String> = f
        .bucket
        .list(&format!("moco/{ns}/{SOURCE}/binlog"))
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert!(
        segments.iter().any(|k| k.ends_with(".zst"))
            && segments.iter().any(|k| k.ends_with(".json")),
        "no archived binlog segment: {segments:?}"
    );
    assert_eq!(f.events(SOURCE, "BackupCreated").await.len(), backups);
    assert!(
        f.events(SOURCE, "BackupNoBinlog").await.is_empty(),
        "a backup without binlogs"
    );

    // No more backups; every acknowledged write is on the source's primary.
    f.clusters()
        .patch(
            SOURCE,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"backupPolicyName": null}})),
        )
        .await
        .unwrap();
    let log: WriterLog = w.finish().await;
    let source_admin = f.password(SOURCE, "ADMIN_PASSWORD").await;
    let on_source = stored_ids(primary_route.single().unwrap().addr, &source_admin)
        .await
        .unwrap();
    let lost = missing(&log.ids(), &on_source);
    assert!(
        lost.is_empty(),
        "acknowledged rows lost on the source: {lost:?}"
    );
    wait_for(
        &format!("{ns}: CronJob {cronjob} deleted"),
        BRING_UP,
        || async {
            cronjobs
                .get_opt(&cronjob)
                .await
                .ok()
                .and_then(|c| c.is_none().then_some(()))
        },
    )
    .await;
    let (before, first_after) = split_at(&f, &log.acks, point);
    let first_after = first_after.expect("a write acknowledged after the restore point");
    let after_base = log
        .acks
        .iter()
        .filter(|a| f.wall(a.at) > base.recorded_wall && epoch(f.wall(a.at)) < point as f64)
        .count();
    let excluded = log
        .acks
        .iter()
        .filter(|a| a.id > first_after && epoch(f.wall(a.at)) < second_time as f64)
        .count();
    println!(
        "{ns}: restore point {} ({point}): {} writes acknowledged before it ({after_base} \
         after the base backup was recorded: only the binlogs hold them), the first after it \
         id {first_after}, {excluded} acknowledged after it and before the second backup",
        rfc3339(point),
        before.len(),
    );
    assert!(
        after_base > 0 && excluded > 0,
        "the point does not split the archived writes"
    );
    // The source goes: the restore needs nothing but the bucket.
    f.clusters()
        .delete(SOURCE, &DeleteParams::background())
        .await
        .unwrap();

    // The restore into a new cluster.
    let restore_job = format!("moco-restore-{RESTORED}");
    let job_watch = Recorder::start(
        f.jobs(),
        watcher::Config::default().fields(&format!("metadata.name={restore_job}")),
    );
    let pod_watch = Recorder::start(
        f.pods(),
        watcher::Config::default().labels(&format!("job-name={restore_job}")),
    );
    let applied = Instant::now();
    f.space.cp.apply(
        &ns,
        &cluster_manifest(
            &ns,
            RESTORED,
            &json!({"restore": {
                "sourceName": SOURCE,
                "sourceNamespace": ns,
                "restorePoint": rfc3339(point),
                "jobConfig": job_config(&f.moto.endpoint)
            }}),
        ),
    );
    let job_created = wait_for(
        &format!("{ns}: restore Job {restore_job} created"),
        RESTORE,
        || async { job_watch.seen().first().map(|(at, _, _)| *at) },
    )
    .await
    .duration_since(applied);
    let restored_at = loop {
        let failed = job_watch.seen().iter().any(|(_, _, j)| {
            j.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Failed" && c.status == "True"))
        });
        assert!(
            !failed && applied.elapsed() < RESTORE,
            "{ns}: the restore Job failed or took longer than {RESTORE:?}; RestoreFailed: {:?}\n{}\n{}",
            f.events(RESTORED, "RestoreFailed").await,
            f.job_pods_report(&restore_job).await,
            f.log_tail(30)
        );
        let c = f.cluster(RESTORED).await;
        if let Some(t) = c.and_then(|c| c.status).and_then(|s| s.restored_time) {
            break (Instant::now(), t);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!(
        "{ns}: restoredTime {} after {:.1} s",
        restored_at.1.0,
        applied.elapsed().as_secs_f64()
    );
    assert_eq!(
        f.events(RESTORED, "Restored").await.len(),
        1,
        "the Restored Event"
    );
    // The Job is deleted, and only once it had succeeded; its Pod ran the restore.
    let deleted_at = wait_for(
        &format!("{ns}: the restore Job deleted"),
        RESTORE,
        || async {
            job_watch
                .seen()
                .iter()
                .find(|(_, deleted, _)| *deleted)
                .map(|(at, _, _)| *at)
        },
    )
    .await;
    let job_deleted = deleted_at.duration_since(applied);
    let last = job_watch
        .seen()
        .into_iter()
        .rfind(|(at, deleted, _)| !deleted && *at <= deleted_at)
        .map(|(_, _, j)| j)
        .expect("the Job's states before its deletion");
    let complete = last
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        });
    assert!(
        complete && last.status.as_ref().and_then(|s| s.succeeded) == Some(1),
        "{ns}: the restore Job was deleted before it succeeded: {:?}",
        last.status
    );
    assert!(
        f.jobs().get_opt(&restore_job).await.unwrap().is_none(),
        "{ns}: the restore Job is still there"
    );
    let (pod, node, argv) = pod_watch
        .seen()
        .iter()
        .find_map(|(_, _, p)| succeeded(p))
        .unwrap_or_else(|| {
            panic!(
                "{ns}: no succeeded Pod of the restore Job seen: {:?}",
                pod_watch
                    .seen()
                    .iter()
                    .map(|(_, d, p)| (*d, p.status.as_ref().and_then(|s| s.phase.clone())))
                    .collect::<Vec<_>>()
            )
        });
    assert!(!node.is_empty(), "the restore Pod ran on no Node");
    assert_eq!(argv.first().map(String::as_str), Some("/moco"), "{argv:?}");
    assert_eq!(argv.get(1).map(String::as_str), Some("restore"), "{argv:?}");
    for kind in ["Role", "RoleBinding"] {
        let gone = match kind {
            "Role" => Api::<Role>::namespaced(f.space.cp.client.clone(), &ns)
                .get_opt(&restore_job)
                .await
                .unwrap()
                .is_none(),
            _ => Api::<RoleBinding>::namespaced(f.space.cp.client.clone(), &ns)
                .get_opt(&restore_job)
                .await
                .unwrap()
                .is_none(),
        };
        assert!(gone, "{ns}: the restore {kind} outlived its Job");
    }
    // The restored instance continues the source's history from the base's position: its
    // oldest binlog starts there. That is what makes the operator clone its replicas; from an
    // empty start they would replay the binlog without the copy's rows, and fail.
    let base_folder = format!(
        "moco/{ns}/{SOURCE}/{}",
        base.status
            .time
            .clone()
            .unwrap()
            .0
            .strftime("%Y%m%d-%H%M%S")
    );
    let manifest = moco_backup::mariadb::physical::manifest(&f.bucket, &base_folder)
        .await
        .unwrap();
    let want = normalized(&clone_binlog_state(
        &manifest.binlog_state_before,
        manifest.position.as_ref().expect("the base's position"),
    ));
    let admin = f.password(RESTORED, "ADMIN_PASSWORD").await;
    let restored_0 = f.addr(RESTORED, 0).await.unwrap();
    let history = oldest_binlog_history(restored_0, &admin).await.unwrap();
    assert_eq!(
        history,
        want,
        "{ns}: instance 0's oldest binlog does not start at the restored base's history (the \
         agent's seed of the copy: {:?})",
        std::fs::read_to_string(
            f.space
                .cp
                .claim_dir(&ns, &format!("mysql-data-moco-{RESTORED}-0"))
                .await
                .join("moco-clone-result.json")
        )
    );
    f.wait_healthy(RESTORED, RESTORE).await;
    let healthy = applied.elapsed();

    // Exactly the rows committed before the point, on every instance.
    let restored_primary = f
        .cluster(RESTORED)
        .await
        .and_then(|c| c.status)
        .map(|s| s.current_primary_index)
        .unwrap();
    let addr = f.addr(RESTORED, restored_primary).await.unwrap();
    let stored = stored_ids(addr, &admin).await.unwrap();
    let absent = missing(&before, &stored);
    assert!(
        absent.is_empty(),
        "{ns}: {} rows acknowledged before the restore point are not restored: {absent:?}",
        absent.len()
    );
    let too_late: Vec<u64> = stored
        .iter()
        .copied()
        .filter(|id| *id > first_after)
        .collect();
    assert!(
        too_late.is_empty(),
        "{ns}: {} rows sent after the restore point were restored (the first acknowledged at or \
         after it is {first_after}): {too_late:?}",
        too_late.len()
    );
    for i in (0..3).filter(|i| *i != restored_primary) {
        let addr = f.addr(RESTORED, i).await.unwrap();
        wait_for(
            &format!("{ns}: {RESTORED} instance {i} holding the restored rows"),
            RESTORE,
            || async { (stored_ids(addr, &admin).await.ok()? == stored).then_some(()) },
        )
        .await;
    }
    // The replay crossed the source's rotation, yet the restored cluster keeps its own
    // passwords: neither of the source's is accepted by any instance, its own is.
    for i in 0..3 {
        let addr = f.addr(RESTORED, i).await.unwrap();
        for (which, password) in [("before", &before_rotation), ("after", &rotated)] {
            assert!(
                !logs_in(addr, "moco-admin", password).await,
                "{ns}: {RESTORED} instance {i} accepts the source's moco-admin password from \
                 {which} the rotation (the replay re-keyed the restored cluster)"
            );
        }
        assert!(
            logs_in(addr, "moco-admin", &admin).await,
            "{ns}: {RESTORED} instance {i} refuses its own moco-admin password"
        );
    }
    println!(
        "{ns}: restored {} rows (acknowledged before the point: {}; the last stored id {:?}, the \
         first acknowledged after the point {first_after}) by Pod {pod} on {node}; applied → \
         Job created {:.1} s → restoredTime {:.1} s → Job deleted {:.1} s → Healthy {:.1} s",
        stored.len(),
        before.len(),
        stored.last(),
        job_created.as_secs_f64(),
        restored_at.0.duration_since(applied).as_secs_f64(),
        job_deleted.as_secs_f64(),
        healthy.as_secs_f64(),
    );
}
