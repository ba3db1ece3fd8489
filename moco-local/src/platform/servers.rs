//! The instances of a local cluster as server processes: their my.cnf, their first
//! initialisation (datadir and accounts, through [`moco_adapters::instance`]) and stopping them.
//! Shared by creation ([`super::create`]) and the running platform ([`super::port`]),
//! which re-initialises a wiped datadir.

use std::sync::Arc;
use std::time::Duration;

use moco_core::facts::Flavor;
use moco_core::resources::mycnf::{
    InstanceConfig, MycnfInput, MycnfPaths, MysqlLine, generate_mycnf, instance_mycnf,
};

use super::error::LocalError;
use super::layout::Layout;
use super::manifest::Manifest;
use super::secret::Secret;
use super::sql;
use moco_adapters::mysqld::{LocalMysqld, ServerBinary};

/// The my.cnf text and the per-instance snippet of instance `index`.
pub fn instance_config(
    layout: &Layout,
    manifest: &Manifest,
    index: u32,
) -> Result<(String, String), LocalError> {
    let dir = layout.instance_dir(index).display().to_string();
    let port = manifest.instance_port(index);
    let extra = |n: u32| {
        let offset = Manifest::port_count(manifest.replicas) + n * manifest.replicas + index;
        manifest
            .base_port
            .saturating_add(u16::try_from(offset).unwrap_or(u16::MAX))
    };
    let paths = MycnfPaths::local(&dir, port, extra(0), extra(1));
    let mut user_config = std::collections::BTreeMap::new();
    // Laptop-sized: small redo log and buffer pool, every instance on one machine. The redo
    // log is not smaller than 64M: mariadb-backup copies it while the server writes, and a
    // 16M one wrapped before the copy finished after a 250 MB load (docs/benchmarks.md).
    let mysql_line = MysqlLine::of_version(&manifest.server_version);
    match (manifest.flavor, mysql_line) {
        // MySQL 9 sizes the redo log by its capacity only: the two 64M files' worth.
        (Flavor::Mysql, MysqlLine::Mysql9) => {
            user_config.insert("innodb_redo_log_capacity".to_owned(), "128M".to_owned())
        }
        _ => user_config.insert("innodb_log_file_size".to_owned(), "64M".to_owned()),
    };
    user_config.insert("innodb_buffer_pool_size".to_owned(), "64M".to_owned());
    user_config.insert("max_connections".to_owned(), "1000".to_owned());
    user_config.insert("performance_schema".to_owned(), "OFF".to_owned());
    if manifest.tls {
        user_config.extend(super::tls::server_options(layout, index));
    }
    let input = MycnfInput {
        flavor: manifest.flavor,
        user_config,
        memory: Default::default(),
        paths,
        mysql_line,
    };
    let context = format!("instance {index}: my.cnf");
    let main = generate_mycnf(&input).map_err(|e| LocalError::other(&context, e.to_string()))?;
    let snippet = instance_mycnf(
        manifest.flavor,
        &InstanceConfig::local(
            manifest.server_id_base,
            index,
            port,
            rustix::process::geteuid().is_root(),
        ),
    )
    .map_err(|e| LocalError::other(&context, e.to_string()))?;
    Ok((main, snippet))
}

/// Writes instance `index`'s my.cnf, its `conf.d/instance.cnf` and working directories, and
/// returns its launcher handle.
pub fn write_instance(
    layout: &Layout,
    manifest: &Manifest,
    binary: &ServerBinary,
    index: u32,
) -> Result<LocalMysqld, LocalError> {
    let (main, snippet) = instance_config(layout, manifest, index)?;
    let dir = layout.instance_dir(index);
    for sub in ["conf.d", "tmp"] {
        let path = dir.join(sub);
        super::files::create_private_dir(&path)?;
    }
    if manifest.tls {
        super::tls::issue_instance(layout, manifest, index)?;
    }
    let snippet_path = dir.join("conf.d").join("instance.cnf");
    super::files::write_atomic(&snippet_path, snippet.as_bytes(), 0o644)?;
    LocalMysqld::create(binary.clone(), &dir, &main)
        .map_err(|e| LocalError::other(format!("instance {index}"), e.to_string()))
}

/// Initialises an instance's datadir, starts it and creates MOCO's accounts (with the binary
/// log off, so no instance owns a GTID before replication is set up). Leaves it running,
/// read-only.
pub async fn initialize_instance(
    layout: &Layout,
    manifest: &Manifest,
    secret: &Secret,
    server: &LocalMysqld,
) -> Result<(), LocalError> {
    let index = instance_index(layout, server)?;
    let context = |what: &str| format!("instance {index}: {what}");
    server
        .initialize(Duration::from_secs(300))
        .await
        .map_err(|e| LocalError::other(context("initialise datadir"), e.to_string()))?;
    server
        .start_and_wait(&[], Duration::from_secs(120))
        .await
        .map_err(|e| LocalError::other(context("first start"), e.to_string()))?;
    sql::create_users(manifest, layout, index, secret).await
}

fn instance_index(layout: &Layout, server: &LocalMysqld) -> Result<u32, LocalError> {
    let dir = server.dir();
    dir.strip_prefix(layout.instances_dir())
        .ok()
        .and_then(|rest| rest.to_str())
        .and_then(|s| s.parse::<u32>().ok())
        .ok_or_else(|| {
            LocalError::other(
                dir.display().to_string(),
                "not an instance directory of this cluster",
            )
        })
}

/// Stops `servers` (ordinal, launcher handle): all but `primary` first (concurrently), then
/// `primary`.
pub async fn stop_servers(
    servers: &[(u32, Arc<LocalMysqld>)],
    primary: u32,
    grace: Duration,
) -> Result<(), LocalError> {
    let stop =
        |index: u32, server: &Arc<LocalMysqld>| {
            let server = Arc::clone(server);
            async move {
                server.stop(grace).await.map(|_| ()).map_err(|e| {
                    LocalError::other(format!("instance {index}: stop"), e.to_string())
                })
            }
        };
    let others = servers
        .iter()
        .filter(|(i, _)| *i != primary)
        .map(|(i, s)| stop(*i, s));
    let mut first_error = None;
    for r in futures::future::join_all(others).await {
        if let Err(e) = r {
            first_error.get_or_insert(e);
        }
    }
    for (i, server) in servers.iter().filter(|(i, _)| *i == primary) {
        if let Err(e) = stop(*i, server).await {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::platform::manifest::Phase;

    #[test]
    fn mycnf_per_instance() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path());
        let manifest = Manifest {
            phase: Phase::Initializing,
            server_id_base: 10,
            ..Manifest::example()
        };
        let (main, snippet) = instance_config(&layout, &manifest, 2).unwrap();
        assert!(main.contains("port = 20004\n"), "{main}");
        assert!(main.contains("[mariadbd]"));
        let datadir = format!("datadir = {}\n", layout.datadir(2).display());
        assert!(main.contains(&datadir), "{main}");
        assert!(snippet.contains("server_id = 12\n"), "{snippet}");
        assert!(snippet.contains("report_port = 20004\n"), "{snippet}");
        assert!(!main.contains("ssl"), "{main}");
        let tls = Manifest {
            tls: true,
            ..manifest
        };
        let (main, _) = instance_config(&layout, &tls, 2).unwrap();
        let cert = format!(
            "ssl_cert = {}\n",
            layout.instance_tls_dir(2).join("cert.pem").display()
        );
        assert!(main.contains(&cert), "{main}");
        assert!(main.contains("require_secure_transport = ON\n"), "{main}");
    }
}
