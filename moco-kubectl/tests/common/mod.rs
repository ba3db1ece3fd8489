//! Fixtures shared by the tests: a MySQLCluster with its Pods and password Secret in the fake
//! API server, a context over it, and helpers to run a command line.
// Helpers panic on failure as the tests do; each test file uses a part of them.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;

use clap::Parser as _;
use moco_core::moco_accounts::Account;
use moco_kubectl::{Cli, Context, Error};
use moco_testkit::apiserver::{FakeApiServer, RecordedRequest};
use serde_json::{Value, json};

/// Namespace of the test clusters.
pub(crate) const NS: &str = "shop";
/// Name of the test cluster.
pub(crate) const NAME: &str = "db";

/// The password of `account` in the test Secret.
pub(crate) fn password(account: Account) -> String {
    format!("{}-secret-0123", account.name())
}

/// A MySQLCluster `NAME` in `NS` with `replicas` instances and `status`.
pub(crate) fn cluster(replicas: u32, status: Value) -> Value {
    json!({
        "apiVersion": "moco.cybozu.com/v1beta2",
        "kind": "MySQLCluster",
        "metadata": {"name": NAME, "namespace": NS,
                     "annotations": {"team": "payments"}},
        "spec": {
            "replicas": replicas,
            "serverIDBase": 100,
            "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "ghcr.io/cybozu-go/moco/mysql:8.4.8"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "mysql-data"},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]
        },
        "status": status
    })
}

/// Pod `index` of the test cluster: `role` label, `Ready` condition, `phase`.
pub(crate) fn pod(index: u32, role: Option<&str>, ready: bool, phase: &str) -> Value {
    let mut labels = json!({
        "app.kubernetes.io/name": "mysql",
        "app.kubernetes.io/instance": NAME,
        "app.kubernetes.io/created-by": "moco"
    });
    if let Some(role) = role {
        labels["moco.cybozu.com/role"] = json!(role);
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("moco-{NAME}-{index}"), "namespace": NS,
                     "labels": labels, "annotations": {"kept": "yes"}},
        "spec": {"containers": [{"name": "mysqld", "image": "mysql"}]},
        "status": {"phase": phase,
                   "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
    })
}

/// The Secret `moco-NAME` with the passwords of `accounts`.
pub(crate) fn secret(accounts: &[Account]) -> Value {
    let data: BTreeMap<String, k8s_openapi::ByteString> = accounts
        .iter()
        .map(|a| {
            (
                a.secret_key().to_owned(),
                k8s_openapi::ByteString(password(*a).into_bytes()),
            )
        })
        .collect();
    let mut secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("moco-{NAME}"), "namespace": NS,
                     "annotations": {"moco.cybozu.com/secret-version": "1"}}
    });
    secret["data"] = serde_json::to_value(&data).unwrap();
    secret
}

/// A fake holding `cluster` and `pods`, and the Secret with every password.
pub(crate) fn fake_with(cluster: Value, pods: Vec<Value>) -> FakeApiServer {
    let fake = FakeApiServer::new();
    fake.insert(cluster);
    for p in pods {
        fake.insert(p);
    }
    fake.insert(secret(&Account::ALL));
    fake
}

/// The uid the fake gave the test cluster.
pub(crate) fn uid(fake: &FakeApiServer) -> String {
    let stored = fake
        .get_json("moco.cybozu.com/v1beta2/mysqlclusters", NS, NAME)
        .unwrap();
    stored["metadata"]["uid"].as_str().unwrap().to_owned()
}

/// Status of a running three-instance cluster whose primary is `primary`.
pub(crate) fn running_status(primary: u32) -> Value {
    json!({"currentPrimaryIndex": primary, "syncedReplicas": 3,
           "conditions": [
               {"type": "Healthy", "status": "True", "reason": "Healthy", "message": "the current state is Healthy",
                "lastTransitionTime": "2026-03-01T10:00:00Z"}]})
}

/// Output of a command run.
#[derive(Debug)]
pub(crate) struct Run {
    /// The result (exit status or error).
    pub result: Result<u8, Error>,
    /// Standard output.
    pub out: String,
    /// Standard error (notes).
    pub err: String,
}

impl Run {
    /// The error's message (panics on success).
    pub(crate) fn error(&self) -> String {
        match &self.result {
            Ok(code) => panic!("expected an error, got status {code}; out: {}", self.out),
            Err(e) => e.to_string(),
        }
    }

    /// Standard output of a successful run (panics on an error).
    pub(crate) fn ok(&self) -> &str {
        match &self.result {
            Ok(0) => &self.out,
            other => panic!("expected success, got {other:?}; err: {}", self.err),
        }
    }
}

/// Parses `args` (after `kubectl-moco`) and runs the command against `fake` in `NS` (unless
/// `-n` says otherwise), passing the connection flags on as the binary does.
pub(crate) async fn run_in(fake: &FakeApiServer, ctx: Context, args: &[&str]) -> Run {
    let cli = Cli::try_parse_from(std::iter::once("kubectl-moco").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let _ = fake;
    let mut ctx = ctx;
    if let Some(ns) = &cli.kube.namespace {
        ctx.namespace = ns.clone();
    }
    ctx.flags = cli.kube.clone();
    let mut out = Vec::new();
    let mut err = Vec::new();
    let result = moco_kubectl::execute(&ctx, &cli.command, &mut out, &mut err).await;
    Run {
        result,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
    }
}

/// Runs `args` against `fake` in `NS`.
pub(crate) async fn run(fake: &FakeApiServer, args: &[&str]) -> Run {
    run_in(fake, Context::new(fake.client(), NS), args).await
}

/// The requests that are not reads.
pub(crate) fn writes(fake: &FakeApiServer) -> Vec<RecordedRequest> {
    fake.requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .collect()
}
