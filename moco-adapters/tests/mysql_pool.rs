//! A pooled connection keeps the privileges of its login: MariaDB and MySQL compute an
//! account's global privileges when it logs in. `moco local` re-initialising a wiped instance
//! creates the operator's accounts while the health watch pings the instance through the
//! manager's pool; a ping that logged in between `CREATE USER` and `GRANT` left a connection
//! without privileges in the pool, and the manager's next probe failed on it with error 1227
//! (`AccountRefused`, seen in the TLS end-to-end test). `forget_connections` drops every
//! pooled connection, so the next call logs in again with the account as it is now; a
//! statement refused for want of a privilege does the same, so such a pool heals by itself.

use crate::support;

use moco_adapters::mysql::MysqlInstance;
use moco_cluster::ports::MysqlPort;
use mysql_async::prelude::Queryable;
use support::{Fleet, bootstrap_options, server_binary, tcp_options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_opened_before_the_grants_are_forgotten() {
    let Some(binary) = server_binary("connections_opened_before_the_grants_are_forgotten") else {
        return;
    };
    let fleet = Fleet::start(binary, 1).await;
    let m = &fleet.nodes[0];
    let root = MysqlInstance::new(bootstrap_options(m, "root"));
    let mut r = root.conn().await.unwrap();
    r.query_drop("CREATE USER 'late'@'%' IDENTIFIED BY 'pw'")
        .await
        .unwrap();
    let late = MysqlInstance::new(tcp_options(m, "late", "late", "pw"));
    // Logged in before the account has any privilege: still none after the grant.
    let mut c = late.conn().await.unwrap();
    let stale: u64 = c
        .query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap();
    r.query_drop("GRANT ALL PRIVILEGES ON *.* TO 'late'@'%' WITH GRANT OPTION")
        .await
        .unwrap();
    let e = c.query_drop("SHOW BINARY LOGS").await.unwrap_err();
    assert_eq!(support::server_code(&e), Some(1227), "{e}");
    drop(c);
    // Forgotten: every connection from now on is a new login with the privileges.
    late.forget_connections().await;
    for _ in 0..10 {
        let mut c = late.conn().await.unwrap();
        let id: u64 = c
            .query_first("SELECT CONNECTION_ID()")
            .await
            .unwrap()
            .unwrap();
        assert_ne!(id, stale);
        c.query_drop("SHOW BINARY LOGS").await.unwrap();
    }
    late.status().await.unwrap();

    // Without being told: a statement refused for want of a privilege drops the pool, so the
    // next call logs in again. Two stale connections in the pool, so that without that the
    // second call would get the other one. A call that found no stale connection back in the
    // pool yet (it logged in anew) proves nothing: set up again.
    let mut healed = false;
    for _ in 0..20 {
        r.query_drop("REVOKE ALL PRIVILEGES, GRANT OPTION FROM 'late'@'%'")
            .await
            .unwrap();
        late.forget_connections().await;
        let (c1, c2) = (late.conn().await.unwrap(), late.conn().await.unwrap());
        drop((c1, c2));
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        r.query_drop("GRANT ALL PRIVILEGES ON *.* TO 'late'@'%' WITH GRANT OPTION")
            .await
            .unwrap();
        match late.status().await {
            Ok(_) => continue,
            Err(refused) => {
                assert!(refused.is_account_refused(), "{refused}");
                late.status().await.unwrap();
                healed = true;
                break;
            }
        }
    }
    assert!(
        healed,
        "the pool never handed out a stale connection to test with"
    );
    drop(r);
    fleet.stop().await;
}
