//! TLS to a real server that requires it (`require_secure_transport=ON`, MOCO #544): the
//! server's certificate comes from [`Authority`] (re-created from its PEM files, as `moco
//! local` will keep it), initialisation works through the socket and the admin's TLS, and a
//! connection is made only when it verifies the server: not in plain text, not trusting
//! another CA, not under a name the certificate does not carry.

use crate::support;

use std::time::Duration;

use moco_adapters::mysql::tls::{Authority, MysqlTls};
use moco_adapters::mysql::{
    Account, InitOptions, MocoPasswords, MysqlInstance, admin_options, initialize,
};
use moco_adapters::mysqld::{LocalMysqld, free_ports};
use moco_adapters::ports::MysqlPort;
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
    let pw = MocoPasswords::generate().unwrap();
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
