//! The connection flags as kubectl takes them: a kubeconfig file, its contexts and their
//! namespaces, `-n`, against the fake API server served over HTTP (the whole path the binary
//! takes, through `moco_kubectl::run`).

// Helpers panic on failure as the tests do.

use crate::common;

use std::path::{Path, PathBuf};

use clap::Parser as _;
use common::{NAME, NS, cluster, fake_with, password, running_status};
use moco_core::moco_accounts::Account;
use moco_kubectl::cli::KubeFlags;
use moco_kubectl::{Cli, Context, Error};
use moco_testkit::apiserver::FakeApiServer;

/// Serves `fake` on a loopback port; returns its URL.
async fn serve(fake: &FakeApiServer) -> String {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let router = fake.router();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://127.0.0.1:{port}")
}

/// A kubeconfig with context `shop` (namespace `shop`, current) and `plain` (no namespace).
fn kubeconfig(dir: &Path, server: &str) -> PathBuf {
    let path = dir.join("config");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: {server}
users:
- name: me
  user: {{}}
contexts:
- name: shop
  context:
    cluster: fake
    user: me
    namespace: shop
- name: plain
  context:
    cluster: fake
    user: me
current-context: shop
"
        ),
    )
    .unwrap();
    path
}

fn flags(path: &Path, context: Option<&str>, namespace: Option<&str>) -> KubeFlags {
    KubeFlags {
        kubeconfig: Some(path.to_path_buf()),
        context: context.map(str::to_owned),
        namespace: namespace.map(str::to_owned),
    }
}

#[tokio::test]
async fn the_namespace_is_the_flag_else_the_contexts_else_default() {
    let fake = FakeApiServer::new();
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &serve(&fake).await);
    for (context, namespace, expected) in [
        (None, None, "shop"),
        (Some("shop"), None, "shop"),
        (Some("plain"), None, "default"),
        (Some("plain"), Some("billing"), "billing"),
        (None, Some("billing"), "billing"),
    ] {
        let flags = flags(&path, context, namespace);
        let ctx = Context::connect(&flags).await.unwrap();
        assert_eq!(ctx.namespace, expected, "{context:?} {namespace:?}");
        assert_eq!(ctx.flags, flags);
    }
}

#[tokio::test]
async fn a_command_runs_over_http_from_the_kubeconfig() {
    let fake = fake_with(cluster(3, running_status(0)), vec![]);
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &serve(&fake).await);
    let path_arg = path.to_str().unwrap();

    let cli = Cli::try_parse_from([
        "kubectl-moco",
        "--kubeconfig",
        path_arg,
        "credential",
        "-u",
        "moco-writable",
        NAME,
    ])
    .unwrap();
    let mut out = Vec::new();
    let mut err = Vec::new();
    let status = moco_kubectl::run(&cli, &mut out, &mut err).await.unwrap();
    assert_eq!(status, 0);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!("{}\n", password(Account::Writable))
    );
    let request = fake.requests().pop().unwrap();
    assert_eq!(
        request.path,
        format!("/api/v1/namespaces/{NS}/secrets/moco-{NAME}")
    );

    // Context `plain` reads namespace `default`, where nothing is.
    let cli = Cli::try_parse_from([
        "kubectl-moco",
        "credential",
        NAME,
        "--kubeconfig",
        path_arg,
        "--context",
        "plain",
    ])
    .unwrap();
    let e = moco_kubectl::run(&cli, &mut Vec::new(), &mut Vec::new())
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Secret default/moco-db not found: the operator creates it when it first reconciles the \
         MySQLCluster; is the name right?"
    );
}

#[tokio::test]
async fn a_bad_kubeconfig_or_context_is_a_configuration_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let e = Context::connect(&flags(&missing, None, None))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Config { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot configure a Kubernetes client (--kubeconfig {0}): {0}: ",
            missing.display()
        )),
        "{text}"
    );

    let path = kubeconfig(dir.path(), "http://127.0.0.1:9");
    let e = Context::connect(&flags(&path, Some("prod"), None))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot configure a Kubernetes client (--kubeconfig {} --context prod): ",
            path.display()
        )),
        "{text}"
    );
    assert!(text.contains("prod"), "{text}");
}
