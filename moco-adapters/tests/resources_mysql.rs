//! Does MySQL accept what the generator writes? `mysqld --validate-config` reads the generated
//! my.cnf (every default, every forced option, with TLS and without) plus a local-mode instance
//! snippet, for the MySQL line of the server under test, and must find nothing it refuses. The
//! server is the one the suite runs on (`MOCO_TEST_MYSQLD`); under MariaDB the test returns
//! and records nothing (`resources_mariadb` starts `mariadbd` on MariaDB's my.cnf).
//!
//! Nothing is started: `--validate-config` reads the options and exits.

use std::collections::BTreeMap;

use moco_adapters::mysqld::{ServerBinary, ServerKind};
use moco_core::facts::Flavor;
use moco_core::resources::mycnf::{
    InstanceConfig, MycnfInput, MycnfPaths, MysqlLine, generate_mycnf, instance_mycnf,
};

use crate::support::server_binary;

#[test]
fn generated_mysql_config_is_accepted_by_mysqld_validate_config() {
    // MariaDB's my.cnf is resources_mariadb's: under MariaDB this test neither runs nor counts.
    if ServerBinary::find(None).is_ok_and(|b| b.kind() == ServerKind::Mariadb) {
        eprintln!("the server under test is MariaDB: its my.cnf is resources_mariadb's");
        return;
    }
    let Some(binary) =
        server_binary("generated_mysql_config_is_accepted_by_mysqld_validate_config")
    else {
        return;
    };
    let line = MysqlLine::of_version(binary.version());
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().display().to_string();
    for dir in ["data", "tmp", "conf.d", "log"] {
        std::fs::create_dir_all(tmp.path().join(dir)).unwrap();
    }
    let paths = MycnfPaths {
        datadir: format!("{d}/data"),
        socket: format!("{d}/mysqld.sock"),
        pid_file: format!("{d}/mysqld.pid"),
        tmpdir: format!("{d}/tmp"),
        slow_query_log_file: format!("{d}/log/mysql.slow"),
        include_dir: format!("{d}/conf.d"),
        port: 3306,
        mysqlx_port: 33060,
        admin_port: 33062,
    };
    // With the TLS options the operator writes for `moco-rs/tls` (files need not exist for
    // the options to be known).
    let tls: BTreeMap<String, String> = [
        ("ssl_ca", format!("{d}/ca.crt")),
        ("ssl_cert", format!("{d}/tls.crt")),
        ("ssl_key", format!("{d}/tls.key")),
        ("require_secure_transport", "ON".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    for user_config in [BTreeMap::new(), tls] {
        let mycnf = generate_mycnf(&MycnfInput {
            flavor: Flavor::Mysql,
            user_config,
            memory: Default::default(),
            paths: paths.clone(),
            mysql_line: line,
        })
        .unwrap();
        let snippet =
            instance_mycnf(Flavor::Mysql, &InstanceConfig::local(100, 0, 3306, true)).unwrap();
        std::fs::write(tmp.path().join("my.cnf"), &mycnf).unwrap();
        std::fs::write(tmp.path().join("conf.d/instance.cnf"), &snippet).unwrap();
        let out = std::process::Command::new(binary.path())
            .arg(format!("--defaults-file={d}/my.cnf"))
            .arg("--validate-config")
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && !said.contains("[ERROR]"),
            "mysqld {} refuses the generated my.cnf ({line:?}):\n{said}\n--- my.cnf ---\n{mycnf}",
            binary.version()
        );
    }
}
