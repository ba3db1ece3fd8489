//! `moco agent`'s part of a rotation of MOCO's passwords, against a real server: it reports
//! the fingerprint of the passwords it holds to the controller only; told the fingerprint it
//! holds, it stays; told another, it exits by itself (code 0, so that its container starts
//! again with its Secret's new values).

use std::time::Duration;

use moco_adapters::mysql::MocoPasswords;
use moco_tests::certs::TestCerts;
use moco_tests::local::server_or_skip;
use moco_tests::pod::{AgentProcess, TestPod, test_passwords};

const LIMIT: Duration = Duration::from_secs(120);

fn fingerprint(passwords: Vec<(&'static str, String)>) -> String {
    let data: std::collections::BTreeMap<String, Vec<u8>> = passwords
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.into_bytes()))
        .collect();
    MocoPasswords::from_secret_data(&data)
        .unwrap()
        .fingerprint()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_reports_its_passwords_and_restarts_for_new_ones() {
    let test = "an_agent_reports_its_passwords_and_restarts_for_new_ones";
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
    let own = fingerprint(test_passwords());

    // Told its own fingerprint, it stays.
    let status = controller
        .request_credentials("localhost", port, &own)
        .await
        .unwrap();
    assert_eq!(status.fingerprint, own);
    assert!(!status.restarting);
    // Another client of the CA may not ask.
    let intruder = certs.intruder.client(&certs.agent);
    let e = intruder
        .request_credentials("localhost", port, "0000000000000000")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("only the controller"), "{e}");
    assert!(agent.wait_exit(Duration::from_secs(1)).await.is_none());

    // Told another, it exits by itself, cleanly.
    let status = controller
        .request_credentials("localhost", port, "0123456789abcdef")
        .await
        .unwrap();
    assert!(status.restarting, "{status:?}");
    assert_eq!(status.fingerprint, own);
    let exit = agent.wait_exit(LIMIT).await;
    assert!(
        exit.is_some_and(|s| s.success()),
        "{exit:?}\n{}",
        agent.log_tail()
    );
    assert!(
        std::fs::read_to_string(&agent.log)
            .unwrap()
            .contains("exiting so that the container starts again with the new passwords")
    );
    pod.stop().await;
}
