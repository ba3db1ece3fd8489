//! MOCO's plugin commands against the fake API server through a real `kube::Client`:
//! `switchover`, `stop`/`start`, `credential`, and the command line itself.

// Helpers panic on failure as the tests do.

use crate::common;

use clap::{CommandFactory as _, Parser as _};
use common::{NAME, NS, cluster, fake_with, password, pod, run, running_status, secret, writes};
use moco_core::moco_accounts::Account;
use moco_kubectl::Cli;
use moco_testkit::apiserver::FakeApiServer;
use serde_json::{Value, json};

const PODS: &str = "v1/pods";
const CLUSTERS: &str = "moco.cybozu.com/v1beta2/mysqlclusters";

fn annotations(fake: &FakeApiServer, resource: &str, name: &str) -> Value {
    fake.get_json(resource, NS, name).unwrap()["metadata"]["annotations"].clone()
}

fn three_pods() -> Vec<Value> {
    vec![
        pod(0, Some("replica"), true, "Running"),
        pod(1, Some("primary"), true, "Running"),
        pod(2, Some("replica"), true, "Running"),
    ]
}

#[test]
fn every_command_has_a_consistent_definition_and_help() {
    Cli::command().debug_assert();
    let mut cli = Cli::command();
    // Propagates the global flags to the subcommands, as parsing does.
    cli.build();
    for path in [
        vec!["mysql"],
        vec!["credential"],
        vec!["switchover"],
        vec!["stop", "clustering"],
        vec!["stop", "reconciliation"],
        vec!["start", "clustering"],
        vec!["start", "reconciliation"],
        vec!["status"],
        vec!["plan"],
    ] {
        let mut command = &mut cli;
        for name in &path {
            command = command
                .find_subcommand_mut(name)
                .unwrap_or_else(|| panic!("no subcommand {path:?}"));
        }
        let help = command.render_long_help().to_string();
        assert!(help.contains("CLUSTER_NAME"), "{path:?}: {help}");
        assert!(help.contains("--namespace"), "{path:?}: {help}");
    }
}

#[test]
fn bad_input_names_the_flag() {
    let err = |args: &[&str]| {
        Cli::try_parse_from(std::iter::once("kubectl-moco").chain(args.iter().copied()))
            .unwrap_err()
            .to_string()
    };
    assert!(err(&["credential", "-u", "root", "db"]).contains("--mysql-user"));
    assert!(err(&["credential", "--format", "yaml", "db"]).contains("--format"));
    assert!(err(&["mysql", "--index", "x", "db"]).contains("--index"));
    assert!(
        err(&["mysql", "--pod-running-timeout", "soon", "db"]).contains("--pod-running-timeout")
    );
    assert!(err(&["plan", "--address", "db-0:3306", "db"]).contains("--address"));
    assert!(err(&["status", "-o", "yaml", "db"]).contains("--output"));
    assert!(err(&["switchover"]).contains("CLUSTER_NAME"));
}

#[tokio::test]
async fn switchover_annotates_the_current_primary_pod_once() {
    let fake = fake_with(cluster(3, running_status(1)), three_pods());
    let run1 = run(&fake, &["switchover", NAME]).await;
    assert_eq!(run1.ok(), "", "MOCO's switchover prints nothing");

    let writes1 = writes(&fake);
    assert_eq!(writes1.len(), 1, "{writes1:?}");
    let patch = &writes1[0];
    assert_eq!(patch.method, "PATCH");
    assert_eq!(patch.path, "/api/v1/namespaces/shop/pods/moco-db-1");
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(
        patch.body,
        Some(json!({"metadata": {"annotations": {"moco.cybozu.com/demote": "true"}}}))
    );
    assert_eq!(
        annotations(&fake, PODS, "moco-db-1"),
        json!({"kept": "yes", "moco.cybozu.com/demote": "true"})
    );
    for other in ["moco-db-0", "moco-db-2"] {
        assert_eq!(annotations(&fake, PODS, other), json!({"kept": "yes"}));
    }

    // Already requested: nothing more is written.
    let run2 = run(&fake, &["switchover", NAME]).await;
    assert_eq!(run2.ok(), "");
    assert_eq!(writes(&fake).len(), 1);
}

/// Waits (up to 30 s) until the test cluster is annotated `moco-rs/switchover-to: to`.
async fn requested(fake: &FakeApiServer, to: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while annotations(fake, CLUSTERS, NAME)["moco-rs/switchover-to"] != json!(to) {
        assert!(std::time::Instant::now() < deadline, "no request for {to}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// The operator's `SwitchOverRefused` event for the test cluster.
fn refusal_event(message: &str) -> Value {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "db.refused", "namespace": NS},
        "reason": "SwitchOverRefused", "type": "Warning", "note": message,
        "action": "Switchover", "reportingController": "moco-controller",
        "reportingInstance": "moco-controller-0", "eventTime": "2026-12-07T10:00:00.000000Z",
        "regarding": {"apiVersion": "moco.cybozu.com/v1beta2", "kind": "MySQLCluster",
                      "namespace": NS, "name": NAME}
    })
}

/// `switchover --to` reports the operator's refusal whichever the plugin sees first, the
/// withdrawal of its request or the refusal's event (on a loaded machine it once saw the
/// withdrawal alone and said "withdrawn ... (by another request?)"): the operator writes the
/// refusal in the patch that withdraws the request, through the function used here.
#[tokio::test]
async fn switchover_to_reports_the_refusal_whichever_the_plugin_sees_first() {
    const REASON: &str = "its mysqld does not answer";
    for event_first in [true, false] {
        let fake = fake_with(cluster(3, running_status(1)), three_pods());
        let api: kube::Api<moco_api::mysqlcluster::MySQLCluster> =
            kube::Api::namespaced(fake.client(), NS);
        let message =
            format!("switchover to instance 2 refused: {REASON}; the request was withdrawn");
        let operator = async {
            requested(&fake, "2").await;
            if event_first {
                fake.insert(refusal_event(&message));
            }
            moco_kube::platform::withdraw_switchover_request(&api, NAME, 2, Some(REASON))
                .await
                .unwrap();
        };
        let (outcome, ()) = tokio::join!(run(&fake, &["switchover", NAME, "--to", "2"]), operator);
        assert_eq!(
            outcome.error(),
            format!("MySQLCluster shop/db: the operator refused: {message}"),
            "event first: {event_first}"
        );
        // The refusal stays on the cluster, readable with the withdrawal.
        assert_eq!(
            annotations(&fake, CLUSTERS, NAME),
            json!({"team": "payments", "moco-rs/switchover-refused": format!("2: {REASON}")})
        );
    }
}

/// A refusal of an earlier request is not the answer to a new one: the new request removes
/// it, and a request someone else removes or replaces is reported as such.
#[tokio::test]
async fn switchover_to_ignores_an_earlier_refusal_and_names_who_withdrew() {
    let fake = fake_with(cluster(3, running_status(1)), three_pods());
    fake.modify(CLUSTERS, NS, NAME, |c| {
        c["metadata"]["annotations"]["moco-rs/switchover-refused"] = json!("2: an old reason");
    });
    let operator = async {
        requested(&fake, "2").await;
        assert_eq!(
            annotations(&fake, CLUSTERS, NAME)["moco-rs/switchover-refused"],
            Value::Null,
            "the request kept an earlier refusal"
        );
        fake.modify(CLUSTERS, NS, NAME, |c| {
            c["status"]["currentPrimaryIndex"] = json!(2);
        });
    };
    let (outcome, ()) = tokio::join!(run(&fake, &["switchover", NAME, "--to", "2"]), operator);
    assert!(
        outcome
            .ok()
            .starts_with("primary moved from instance 1 to instance 2 in "),
        "{}",
        outcome.out
    );

    for (replacement, said) in [
        (Value::Null, "someone removed moco-rs/switchover-to"),
        (
            json!("0"),
            "replaced by another (moco-rs/switchover-to: \"0\")",
        ),
    ] {
        let fake = fake_with(cluster(3, running_status(1)), three_pods());
        let user = async {
            requested(&fake, "2").await;
            fake.modify(CLUSTERS, NS, NAME, |c| {
                let annotations = c["metadata"]["annotations"].as_object_mut().unwrap();
                match &replacement {
                    Value::Null => annotations.remove("moco-rs/switchover-to"),
                    other => annotations.insert("moco-rs/switchover-to".into(), other.clone()),
                };
            });
        };
        let (outcome, ()) = tokio::join!(run(&fake, &["switchover", NAME, "--to", "2"]), user);
        let error = outcome.error();
        assert!(error.contains(said), "{error}");
    }
}

#[tokio::test]
async fn switchover_is_refused_for_one_instance_offline_or_a_missing_cluster() {
    let single = fake_with(
        cluster(1, running_status(0)),
        vec![pod(0, Some("primary"), true, "Running")],
    );
    assert_eq!(
        run(&single, &["switchover", NAME]).await.error(),
        "MySQLCluster shop/db: a single-instance cluster is not able to switch over (spec.replicas: 1)"
    );
    assert!(writes(&single).is_empty());

    let mut offline = cluster(3, running_status(0));
    offline["spec"]["offline"] = json!(true);
    let offline = fake_with(offline, vec![]);
    assert_eq!(
        run(&offline, &["switchover", NAME]).await.error(),
        "MySQLCluster shop/db: the cluster is offline (spec.offline: true), so no instance runs to switch over to"
    );
    assert!(writes(&offline).is_empty());

    let empty = FakeApiServer::new();
    assert_eq!(
        run(&empty, &["switchover", "nope"]).await.error(),
        "MySQLCluster shop/nope not found"
    );
    assert_eq!(
        run(&empty, &["-n", "other", "switchover", NAME])
            .await
            .error(),
        "MySQLCluster other/db not found"
    );

    let no_pod = fake_with(
        cluster(3, running_status(2)),
        vec![pod(0, None, true, "Running")],
    );
    assert_eq!(
        run(&no_pod, &["switchover", NAME]).await.error(),
        "Pod shop/moco-db-2 not found: the primary's Pod is missing"
    );
    assert!(writes(&no_pod).is_empty());
}

#[tokio::test]
async fn stop_and_start_add_and_remove_only_their_annotation() {
    let fake = fake_with(cluster(3, running_status(0)), vec![]);
    let key_c = "moco.cybozu.com/clustering-stopped";
    let key_r = "moco.cybozu.com/reconciliation-stopped";
    let steps: [(&[&str], &str, Value, usize); 8] = [
        (
            &["stop", "clustering", NAME],
            "stopped clustering of MySQLCluster \"shop/db\"\n",
            json!({"team": "payments", key_c: "true"}),
            1,
        ),
        (
            &["stop", "clustering", NAME],
            "The clustering is already stopped.\n",
            json!({"team": "payments", key_c: "true"}),
            1,
        ),
        (
            &["stop", "reconciliation", NAME],
            "stopped reconciliation of MySQLCluster \"shop/db\"\n",
            json!({"team": "payments", key_c: "true", key_r: "true"}),
            2,
        ),
        (
            &["stop", "reconciliation", NAME],
            "The reconciliation is already stopped.\n",
            json!({"team": "payments", key_c: "true", key_r: "true"}),
            2,
        ),
        (
            &["start", "clustering", NAME],
            "started clustering of MySQLCluster \"shop/db\"\n",
            json!({"team": "payments", key_r: "true"}),
            3,
        ),
        (
            &["start", "clustering", NAME],
            "The clustering is already running.\n",
            json!({"team": "payments", key_r: "true"}),
            3,
        ),
        (
            &["start", "reconciliation", NAME],
            "started reconciliation of MySQLCluster \"shop/db\"\n",
            json!({"team": "payments"}),
            4,
        ),
        (
            &["start", "reconciliation", NAME],
            "The reconciliation is already running.\n",
            json!({"team": "payments"}),
            4,
        ),
    ];
    let spec_before = fake.get_json(CLUSTERS, NS, NAME).unwrap()["spec"].clone();
    for (args, said, expected, write_count) in steps {
        let result = run(&fake, args).await;
        assert_eq!(result.ok(), said, "{args:?}");
        assert_eq!(annotations(&fake, CLUSTERS, NAME), expected, "{args:?}");
        let all = writes(&fake);
        assert_eq!(all.len(), write_count, "{args:?}: {all:?}");
        let last = all.last().unwrap();
        assert_eq!(last.method, "PATCH");
        assert_eq!(
            last.path,
            "/apis/moco.cybozu.com/v1beta2/namespaces/shop/mysqlclusters/db"
        );
        assert_eq!(
            last.content_type.as_deref(),
            Some("application/merge-patch+json")
        );
    }
    let bodies: Vec<Value> = writes(&fake).into_iter().map(|r| r.body.unwrap()).collect();
    assert_eq!(
        bodies,
        vec![
            json!({"metadata": {"annotations": {key_c: "true"}}}),
            json!({"metadata": {"annotations": {key_r: "true"}}}),
            json!({"metadata": {"annotations": {key_c: null}}}),
            json!({"metadata": {"annotations": {key_r: null}}}),
        ]
    );
    assert_eq!(
        fake.get_json(CLUSTERS, NS, NAME).unwrap()["spec"],
        spec_before
    );

    let empty = FakeApiServer::new();
    assert_eq!(
        run(&empty, &["stop", "clustering", NAME]).await.error(),
        "MySQLCluster shop/db not found"
    );
}

#[tokio::test]
async fn credential_prints_each_users_password_plain_or_as_mycnf() {
    let fake = fake_with(cluster(3, running_status(0)), vec![]);
    for (flag, account) in [
        (None, Account::ReadOnly),
        (Some("moco-readonly"), Account::ReadOnly),
        (Some("moco-writable"), Account::Writable),
        (Some("moco-admin"), Account::Admin),
    ] {
        let mut args = vec!["credential"];
        if let Some(user) = flag {
            args.extend(["-u", user]);
        }
        args.push(NAME);
        let plain = run(&fake, &args).await;
        assert_eq!(plain.ok(), format!("{}\n", password(account)), "{args:?}");

        args.insert(1, "--format=mycnf");
        let mycnf = run(&fake, &args).await;
        assert_eq!(
            mycnf.ok(),
            format!(
                "[client]\nuser={}\npassword=\"{}\"\n",
                account.name(),
                password(account)
            ),
            "{args:?}"
        );
    }
    assert!(writes(&fake).is_empty());
}

#[tokio::test]
async fn credential_names_the_missing_secret_or_key() {
    let empty = FakeApiServer::new();
    assert_eq!(
        run(&empty, &["credential", NAME]).await.error(),
        "Secret shop/moco-db not found: the operator creates it when it first reconciles the \
         MySQLCluster; is the name right?"
    );

    let partial = FakeApiServer::new();
    partial.insert(secret(&[Account::Admin]));
    assert_eq!(
        run(&partial, &["credential", "-u", "moco-writable", NAME])
            .await
            .error(),
        "Secret shop/moco-db has no key WRITABLE_PASSWORD (the password of moco-writable)"
    );
    assert_eq!(
        run(&partial, &["credential", NAME]).await.error(),
        "Secret shop/moco-db has no key READONLY_PASSWORD (the password of moco-readonly)"
    );
    assert_eq!(
        run(&partial, &["credential", "-u", "moco-admin", NAME])
            .await
            .ok(),
        format!("{}\n", password(Account::Admin))
    );

    let blank = FakeApiServer::new();
    let mut s = secret(&[]);
    s["data"] = json!({"READONLY_PASSWORD": ""});
    blank.insert(s);
    assert_eq!(
        run(&blank, &["credential", NAME]).await.error(),
        "Secret shop/moco-db: the value of key READONLY_PASSWORD is empty or not UTF-8"
    );
}
