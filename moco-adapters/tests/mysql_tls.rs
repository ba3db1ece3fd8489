//! TLS to a real server that requires it (`require_secure_transport=ON`, MOCO #544): the
//! server's certificate comes from [`Authority`] (re-created from its PEM files, as `moco
//! local` will keep it), initialisation works through the socket and the admin's TLS, and a
//! connection is made only when it verifies the server: not in plain text, not trusting
//! another CA, not under a name the certificate does not carry.

use crate::support;

use std::time::Duration;

use moco_adapters::mysql::tls::{Authority, MysqlTls};
use moco_adapters::mysql::{InitOptions, MysqlInstance, admin_options, initialize};
use moco_adapters::mysqld::{LocalMysqld, free_ports};
use moco_cluster::ports::MysqlPort;
use moco_core::moco_accounts::{Account, MocoPasswords};
use mysql_async::prelude::Queryable;
use support::{INIT_TIMEOUT, READY_TIMEOUT, bootstrap_options, mycnf, server_binary, tcp_options};

const CA_NAME: &str = "moco local CA (test)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_require_and_verify_tls() {
    let Some(binary) = server_binary("connections_require_and_verify_tls") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("node");
    std::fs::create_dir_all(&dir).unwrap();
    // The CA is made once and re-created from its files to issue the server's certificate.
    let made = Authority::generate(CA_NAME).unwrap();
    let ca = Authority::load(CA_NAME, made.cert_pem(), made.key_pem()).unwrap();
    let server = ca
        .issue(
            "instance-0",
            &["127.0.0.1".to_owned(), "localhost".to_owned()],
        )
        .unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let ca_file = write("ca.pem", made.cert_pem());
    let cert_file = write("server-cert.pem", &server.cert_pem);
    let key_file = write("server-key.pem", &server.key_pem);
    let port = free_ports(1).unwrap()[0];
    let text = format!(
        "{}ssl_ca={ca_file}\nssl_cert={cert_file}\nssl_key={key_file}\nrequire_secure_transport=ON\n",
        mycnf(binary.kind(), &dir, port, 1)
    );
    let m = LocalMysqld::create(binary.clone(), &dir, &text).unwrap();
    assert!(m.initialize(INIT_TIMEOUT).await.unwrap());
    m.start_and_wait(&[], READY_TIMEOUT).await.unwrap();

    // Root on the socket (secure transport by definition); the admin over TCP with TLS.
    let pw = moco_adapters::mysql::generate_passwords().unwrap();
    let tls = MysqlTls::new(made.cert_pem());
    let bootstrap = bootstrap_options(&m, "instance 0").with_tls(tls.clone());
    initialize(&bootstrap, &pw, &InitOptions::default())
        .await
        .unwrap();
    let admin = MysqlInstance::new(admin_options(&bootstrap, &pw));
    admin.ping().await.unwrap();
    let mut conn = mysql_async::Conn::new(
        mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(port)
            .prefer_socket(false)
            .user(Some(Account::Admin.name()))
            .pass(Some(pw.admin.clone()))
            .ssl_opts(
                mysql_async::SslOpts::default()
                    .with_root_certs(vec![made.cert_pem().as_bytes().to_vec().into()])
                    .with_disable_built_in_roots(true),
            ),
    )
    .await
    .unwrap();
    let cipher: Option<(String, String)> = conn
        .query_first("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .await
        .unwrap();
    assert!(
        cipher.as_ref().is_some_and(|(_, v)| !v.is_empty()),
        "{cipher:?}"
    );
    drop(conn);

    let refused = |opts: moco_adapters::mysql::ConnectOptions| async move {
        let instance =
            MysqlInstance::new(opts.with_timeouts(Duration::from_secs(5), Duration::from_secs(5)));
        instance.ping().await.unwrap_err().to_string()
    };
    // The same account and password, only without TLS: refused (MariaDB answers 1045 to a
    // login over insecure transport, MySQL 3159).
    let plain = tcp_options(&m, "instance 0", Account::Admin.name(), &pw.admin);
    let e = refused(plain.clone()).await;
    assert!(
        ["1045", "1815", "3159"].iter().any(|code| e.contains(code)),
        "plain text: {e}"
    );
    let other = Authority::generate("another CA").unwrap();
    let e = refused(plain.clone().with_tls(MysqlTls::new(other.cert_pem()))).await;
    assert!(e.contains("UnknownIssuer"), "another CA: {e}");
    let e = refused(plain.with_tls(tls.with_server_name("db.example"))).await;
    assert!(e.contains("not valid for name"), "another name: {e}");
    m.stop(support::STOP_GRACE).await.unwrap();
}

/// A TLS-requiring server with a certificate from `ca` for 127.0.0.1 in `dir`, initialised,
/// running, with MOCO's accounts; returns it and its files' directory.
async fn tls_server(
    binary: &moco_adapters::mysqld::ServerBinary,
    ca: &Authority,
    dir: &std::path::Path,
    server_id: u32,
    pw: &MocoPasswords,
) -> LocalMysqld {
    std::fs::create_dir_all(dir).unwrap();
    let issued = ca
        .issue("node", &["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap();
    std::fs::write(dir.join("ca.pem"), ca.cert_pem()).unwrap();
    std::fs::write(dir.join("cert.pem"), &issued.cert_pem).unwrap();
    std::fs::write(dir.join("key.pem"), &issued.key_pem).unwrap();
    let port = free_ports(1).unwrap()[0];
    let d = dir.display();
    let text = format!(
        "{}ssl_ca={d}/ca.pem\nssl_cert={d}/cert.pem\nssl_key={d}/key.pem\nrequire_secure_transport=ON\n",
        mycnf(binary.kind(), dir, port, server_id)
    );
    let m = LocalMysqld::create(binary.clone(), dir, &text).unwrap();
    assert!(m.initialize(INIT_TIMEOUT).await.unwrap());
    m.start_and_wait(&[], READY_TIMEOUT).await.unwrap();
    let bootstrap = bootstrap_options(&m, &format!("server {server_id}"))
        .with_tls(MysqlTls::new(ca.cert_pem()));
    initialize(&bootstrap, pw, &InitOptions::default())
        .await
        .unwrap();
    m
}

/// `Slave_IO_Running` (`Replica_IO_Running`) and `Last_IO_Error` of the replica `admin`
/// reaches.
async fn io_state(admin: &MysqlInstance) -> (String, String) {
    let d = admin.server_info().await.unwrap().dialect;
    let mut c = admin.conn().await.unwrap();
    let row: mysql_async::Row = c
        .query_first(moco_adapters::mysql::sql::replica_status(d))
        .await
        .unwrap()
        .unwrap();
    let columns = moco_adapters::mysql::sql::replica_columns(d);
    let get = |name: &str| -> String {
        let i = row
            .columns_ref()
            .iter()
            .position(|col| col.name_str() == name)
            .unwrap();
        row.get_opt::<Option<String>, _>(i)
            .and_then(Result::ok)
            .flatten()
            .unwrap_or_default()
    };
    (get(columns.io_running), get("Last_IO_Error"))
}

/// A replica's channel to a source that requires TLS runs with the CA that issued the
/// source's certificate, and is refused with another CA, and with the right CA when the
/// source's certificate does not name the host the replica connects to: the channel verifies
/// its source (`MASTER_SSL_VERIFY_SERVER_CERT`), it does not merely encrypt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_verifies_its_source() {
    let Some(binary) = server_binary("replication_verifies_its_source") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let ca = Authority::generate(CA_NAME).unwrap();
    let pw = moco_adapters::mysql::generate_passwords().unwrap();
    let source_dir = tmp.path().join("source");
    let source = tls_server(&binary, &ca, &source_dir, 1, &pw).await;
    let replica = tls_server(&binary, &ca, &tmp.path().join("replica"), 2, &pw).await;
    let admin = |m: &LocalMysqld, ca_file: &std::path::Path| {
        MysqlInstance::new(
            tcp_options(m, "n", Account::Admin.name(), &pw.admin)
                .with_tls(MysqlTls::new(ca.cert_pem()))
                .with_replication_ca(ca_file.display().to_string()),
        )
    };
    let other_ca_file = tmp.path().join("other-ca.pem");
    std::fs::write(
        &other_ca_file,
        Authority::generate("another CA").unwrap().cert_pem(),
    )
    .unwrap();
    let repl = moco_cluster::ports::Credentials {
        user: Account::Repl.name().into(),
        password: pw.repl.clone(),
    };
    let from = moco_core::operation::ReplicationSource::Instance {
        index: 0,
        host: source.host(),
        port: source.port(),
    };
    let primary = admin(&source, &source_dir.join("ca.pem"));
    primary.set_writable().await.unwrap();

    // The cluster's CA: the channel runs and carries a write.
    let right = admin(&replica, &tmp.path().join("replica").join("ca.pem"));
    right
        .configure_replication(&from, &repl, false)
        .await
        .unwrap();
    let mut c = primary.conn().await.unwrap();
    c.query_drop("CREATE DATABASE over_tls").await.unwrap();
    support::eventually("the write replicated over TLS", READY_TIMEOUT, || async {
        let mut r = right.conn().await.ok()?;
        let found: Option<String> = r.query_first("SHOW DATABASES LIKE 'over_tls'").await.ok()?;
        found
    })
    .await;
    assert_eq!(io_state(&right).await.0, "Yes");

    // Another CA: the source's certificate is not trusted.
    let wrong = admin(&replica, &other_ca_file);
    wrong
        .configure_replication(&from, &repl, false)
        .await
        .unwrap();
    let (_, error) = support::eventually("the channel refused", READY_TIMEOUT, || async {
        let (io, error) = io_state(&wrong).await;
        (io != "Yes" && !error.is_empty()).then_some((io, error))
    })
    .await;
    println!("another CA: {error}");
    assert!(
        error.to_lowercase().contains("ssl") || error.contains("certificate"),
        "{error}"
    );

    // Back to the cluster's CA: running again, the error gone (so the next one is new).
    right
        .configure_replication(&from, &repl, false)
        .await
        .unwrap();
    support::eventually("the channel running again", READY_TIMEOUT, || async {
        let (io, error) = io_state(&right).await;
        (io == "Yes" && error.is_empty()).then_some(())
    })
    .await;

    // The right CA, but the source's certificate names another host.
    let renamed = ca.issue("node", &["db.example".to_owned()]).unwrap();
    std::fs::write(source_dir.join("cert.pem"), &renamed.cert_pem).unwrap();
    std::fs::write(source_dir.join("key.pem"), &renamed.key_pem).unwrap();
    let d = primary.server_info().await.unwrap().dialect;
    c.query_drop(moco_adapters::mysql::sql::reload_tls(d))
        .await
        .unwrap();
    drop(c);
    right
        .configure_replication(&from, &repl, false)
        .await
        .unwrap();
    let (_, error) = support::eventually("the channel refused", READY_TIMEOUT, || async {
        let (io, error) = io_state(&right).await;
        (io != "Yes" && !error.is_empty()).then_some((io, error))
    })
    .await;
    println!("another name: {error}");
    for m in [&source, &replica] {
        m.stop(support::STOP_GRACE).await.unwrap();
    }
}
