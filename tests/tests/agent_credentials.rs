//! `moco agent`'s part of a rotation of MOCO's passwords, against a real server: it reports
//! the fingerprint of the passwords it holds, to the controller only; given new passwords
//! (the server accepting both, as during a rotation), it uses them from then on without
//! restarting: once the old ones are dropped, its probes and its own connections still log in.

use std::collections::BTreeMap;
use std::time::Duration;

use moco_adapters::mysql::sql;

use moco_core::moco_accounts::{Account, MocoPasswords};
use moco_tests::certs::TestCerts;
use moco_tests::local::server_or_skip;
use moco_tests::pod::{AgentProcess, TestPod, test_passwords, wait_http};
use mysql_async::prelude::Queryable;

const LIMIT: Duration = Duration::from_secs(120);

fn passwords(pairs: Vec<(&'static str, String)>) -> MocoPasswords {
    let data: BTreeMap<String, Vec<u8>> = pairs
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.into_bytes()))
        .collect();
    MocoPasswords::from_secret_data(&data).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_takes_new_passwords_without_restarting() {
    let test = "an_agent_takes_new_passwords_without_restarting";
    let Some(binary) = server_or_skip(test) else {
        return;
    };
    moco_http::tls::install_crypto_provider();
    let root = tempfile::tempdir().unwrap();
    let certs = TestCerts::write(&root.path().join("certs"));
    let pod = TestPod::new(&binary, root.path(), 0);
    pod.init_and_start(20).await;
    let mut agent = AgentProcess::start(&pod, &certs.agent.0, &[]);
    agent.wait_started(LIMIT).await;
    let port = agent.agent.port();
    let controller = certs.controller.client(&certs.agent);
    let old = passwords(test_passwords());
    let new = passwords(
        test_passwords()
            .into_iter()
            .map(|(k, v)| (k, format!("{v}-rotated")))
            .collect(),
    );

    // Given its own passwords, nothing changes; another client of the CA may not give any.
    let status = controller
        .replace_credentials("localhost", port, &old)
        .await
        .unwrap();
    assert_eq!(status.fingerprint, old.fingerprint());
    let intruder = certs.intruder.client(&certs.agent);
    let e = intruder
        .replace_credentials("localhost", port, &new)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("only the controller"), "{e}");

    // The server accepts both, as a rotation has it; the agent is given the new ones.
    let mut admin = pod.admin().await;
    for statement in sql::set_writable(moco_core::dialect::Dialect::Mariadb) {
        admin.query_drop(statement).await.unwrap();
    }
    for a in Account::ALL {
        admin
            .query_drop(format!(
                "ALTER USER {} IDENTIFIED VIA mysql_native_password USING PASSWORD({}) \
                 OR mysql_native_password USING PASSWORD({})",
                sql::account(a.name(), "%"),
                sql::quote(old.get(a)),
                sql::quote(new.get(a))
            ))
            .await
            .unwrap();
    }
    let status = controller
        .replace_credentials("localhost", port, &new)
        .await
        .unwrap();
    assert_eq!(status.fingerprint, new.fingerprint());

    // Only the new ones from now on: the agent still answers its probes (a fresh login of
    // its own) and did not restart.
    for a in Account::ALL {
        admin
            .query_drop(format!(
                "ALTER USER {} IDENTIFIED BY {}",
                sql::account(a.name(), "%"),
                sql::quote(new.get(a))
            ))
            .await
            .unwrap();
    }
    // Every session the agent opened before is ended: its probe must log in afresh.
    admin
        .query_drop("KILL CONNECTION USER 'moco-agent'")
        .await
        .unwrap();
    drop(admin);
    wait_http(agent.probe, "/healthz", 200, LIMIT, || agent.log_tail()).await;
    assert!(
        agent.wait_exit(Duration::from_millis(500)).await.is_none(),
        "the agent exited:\n{}",
        agent.log_tail()
    );
    assert!(
        std::fs::read_to_string(&agent.log)
            .unwrap()
            .contains("the cluster's passwords were rotated: using the new ones")
    );
    pod.stop().await;
}
