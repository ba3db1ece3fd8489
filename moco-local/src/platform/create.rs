//! Creating a local cluster (`moco local up`): checks that touch nothing, then the
//! directory, the secret and every instance ([`super::servers`]).
//!
//! Every check runs before the first write, so bad input never changes an existing directory.
//! If creation fails half way, everything it made is removed again.

use std::future::Future;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use moco_core::facts::Flavor;

use super::error::LocalError;
use super::layout::Layout;
use super::manifest::{FORMAT_VERSION, MANIFEST_KIND, Manifest, Phase, random_hex};
use super::pods::now_ms;
use super::secret::Secret;
use super::servers;
use moco_adapters::mysqld::{LocalMysqld, ServerBinary, ServerKind};

pub use super::manifest::{MAX_REPLICAS, check_replicas};

/// The first port tried when `--base-port` is not given.
pub const DEFAULT_BASE_PORT: u16 = 13306;
/// UNIX socket paths longer than this do not fit into `sockaddr_un`.
const MAX_SOCKET_PATH: usize = 107;

/// What `moco local up` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateOptions {
    /// The cluster directory (must not exist, or be empty).
    pub dir: PathBuf,
    /// Number of instances (odd).
    pub replicas: u32,
    /// First port of the block; `None` searches from [`DEFAULT_BASE_PORT`].
    pub base_port: Option<u16>,
    /// Required server family; `None` takes the binary's.
    pub flavor: Option<Flavor>,
    /// The server binary; `None` searches (`$MOCO_TEST_MYSQLD`, `PATH`, `/usr/sbin`).
    pub server: Option<PathBuf>,
    /// `server_id` of instance 0.
    pub server_id_base: u32,
    /// Re-clone errant replicas automatically.
    pub reclone_errant: bool,
    /// Serve TLS with a CA made for the cluster, refuse plain TCP, and verify every server
    /// (`up --tls`).
    pub tls: bool,
    /// Limit of `mariadb-install-db` / `mysqld --initialize-insecure` per instance.
    pub init_timeout: Duration,
    /// Limit of a server's start.
    pub boot_timeout: Duration,
}

impl CreateOptions {
    /// Defaults for `replicas` instances in `dir`.
    pub fn new(dir: &Path, replicas: u32) -> Self {
        CreateOptions {
            dir: dir.to_path_buf(),
            replicas,
            base_port: None,
            flavor: None,
            server: None,
            server_id_base: 1,
            reclone_errant: false,
            tls: false,
            init_timeout: Duration::from_secs(300),
            boot_timeout: Duration::from_secs(120),
        }
    }
}

/// A checked plan for a new cluster; nothing was written yet.
#[derive(Debug)]
pub struct Prepared {
    layout: Layout,
    manifest: Manifest,
    binary: ServerBinary,
    options: CreateOptions,
}

impl Prepared {
    /// The manifest that will be written.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
}

fn flavor_of(kind: ServerKind) -> Flavor {
    match kind {
        ServerKind::Mariadb => Flavor::Mariadb,
        ServerKind::Mysql => Flavor::Mysql,
    }
}

/// Number of ports a cluster needs: two endpoints, one SQL port per instance, and for MySQL
/// also an X protocol and an admin port per instance.
pub fn port_count(replicas: u32, flavor: Flavor) -> u32 {
    match flavor {
        Flavor::Mariadb => Manifest::port_count(replicas),
        Flavor::Mysql => Manifest::port_count(replicas) + 2 * replicas,
    }
}

fn port_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

fn check_ports(base: u16, count: u32) -> Result<(), LocalError> {
    for offset in 0..count {
        let port = u16::try_from(u32::from(base) + offset)
            .map_err(|_| LocalError::PortRange { base, count })?;
        if !port_free(port) {
            return Err(LocalError::PortInUse {
                port,
                what: format!(
                    "--base-port {base}: the cluster needs ports {base}-{}",
                    u32::from(base) + count - 1
                ),
            });
        }
    }
    Ok(())
}

fn find_base_port(count: u32) -> Result<u16, LocalError> {
    let mut base = u32::from(DEFAULT_BASE_PORT);
    while base + count <= u32::from(u16::MAX) {
        let all_free = (0..count).all(|o| u16::try_from(base + o).is_ok_and(port_free));
        if all_free {
            return u16::try_from(base).map_err(|_| LocalError::PortRange {
                base: DEFAULT_BASE_PORT,
                count,
            });
        }
        base += count.max(10);
    }
    Err(LocalError::other(
        "--base-port",
        format!(
            "no {count} consecutive free ports found from {DEFAULT_BASE_PORT} on; pass --base-port"
        ),
    ))
}

/// Runs every check of `up`; writes nothing.
pub fn prepare(options: CreateOptions) -> Result<Prepared, LocalError> {
    check_replicas(options.replicas)?;
    if options.server_id_base == 0 {
        return Err(LocalError::other(
            "--server-id-base 0",
            "server_id 0 disables replication; use 1 or more",
        ));
    }
    Manifest::check_new_dir(&options.dir)?;
    let layout = Layout::new(&options.dir);
    let socket = layout.socket(options.replicas.saturating_sub(1));
    if socket.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(LocalError::other(
            format!("--dir {}", options.dir.display()),
            format!(
                "path too long: the server socket {} would exceed {MAX_SOCKET_PATH} bytes; use a shorter directory",
                socket.display()
            ),
        ));
    }
    let binary = ServerBinary::find(options.server.as_deref()).map_err(|e| {
        let flag = match &options.server {
            Some(p) => format!("--server {}", p.display()),
            None => "--server".to_owned(),
        };
        LocalError::other(flag, e.to_string())
    })?;
    let flavor = flavor_of(binary.kind());
    if let Some(wanted) = options.flavor
        && wanted != flavor
    {
        let name = |f: Flavor| match f {
            Flavor::Mariadb => "mariadb",
            Flavor::Mysql => "mysql",
        };
        return Err(LocalError::other(
            format!("--flavor {}", name(wanted)),
            format!(
                "the server binary {} is {} {}; pass --server with a {} server",
                binary.path().display(),
                name(flavor),
                binary.version(),
                name(wanted)
            ),
        ));
    }
    let count = port_count(options.replicas, flavor);
    let base_port = match options.base_port {
        Some(base) => {
            Manifest::check_port_range(base, count.saturating_sub(2))
                .map_err(|e| LocalError::other(format!("--base-port {base}"), e.to_string()))?;
            check_ports(base, count)?;
            base
        }
        None => find_base_port(count)?,
    };
    let name = layout
        .root()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "moco-local".to_owned());
    let manifest = Manifest {
        kind: MANIFEST_KIND.to_owned(),
        format_version: FORMAT_VERSION,
        cluster_id: random_hex(8)?,
        name,
        created_at: moco_core::time::Timestamp(i64::try_from(now_ms() / 1000).unwrap_or(0))
            .to_string(),
        created_by: format!("moco {}", env!("CARGO_PKG_VERSION")),
        phase: Phase::Initializing,
        flavor,
        server_version: binary.version().to_owned(),
        replicas: options.replicas,
        shrinking_to: None,
        base_port,
        server: binary.path().to_path_buf(),
        server_id_base: options.server_id_base,
        reclone_errant: options.reclone_errant,
        tls: options.tls,
    };
    Ok(Prepared {
        layout,
        manifest,
        binary,
        options,
    })
}

/// Creates the cluster: directory, manifest (phase `Initializing`), secret, client option
/// files, then every instance (concurrently). Returns the manifest (phase `Ready`) with every
/// instance running, read-only and without replication: the manager's first rounds configure
/// the rest. On failure everything created is stopped and removed.
pub async fn create(prepared: Prepared) -> Result<Manifest, LocalError> {
    build::<(), LocalError, _, _>(
        prepared,
        None::<fn(Layout, Manifest, ServerBinary) -> NoSeed>,
    )
    .await
    .map(|(manifest, _)| manifest)
    .map_err(|e| match e {
        SeededError::Create(e) | SeededError::Seed(e) => e,
    })
}

/// The seed future [`create`] never runs.
type NoSeed = std::future::Ready<Result<(), LocalError>>;

/// Why [`create_seeded`] failed: creating the cluster, or the caller's seed of instance 0.
#[derive(Debug, thiserror::Error)]
pub enum SeededError<E> {
    /// Creating the cluster failed.
    #[error(transparent)]
    Create(LocalError),
    /// The seed of instance 0 failed.
    #[error(transparent)]
    Seed(E),
}

/// Like [`create`], but instance 0's datadir is `seed`'s to fill (a restore): it is not
/// initialised here, and `seed` gets the layout, the manifest (phase `Initializing`) and the
/// server binary once every file of the cluster is written, and runs while the other
/// instances are initialised. `seed` must leave instance 0 running with MOCO's accounts and
/// this cluster's passwords.
/// A restore into a new cluster thus costs no initialisation of instance 0, and creating the
/// others overlaps the download. On failure of either, everything is stopped and removed.
pub async fn create_seeded<T, E, F, Fut>(
    prepared: Prepared,
    seed: F,
) -> Result<(Manifest, T), SeededError<E>>
where
    F: FnOnce(Layout, Manifest, ServerBinary) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let (manifest, seeded) = build(prepared, Some(seed)).await?;
    let seeded = seeded.ok_or_else(|| {
        SeededError::Create(LocalError::other("instance 0", "the seed did not run"))
    })?;
    Ok((manifest, seeded))
}

async fn build<T, E, F, Fut>(
    prepared: Prepared,
    seed: Option<F>,
) -> Result<(Manifest, Option<T>), SeededError<E>>
where
    F: FnOnce(Layout, Manifest, ServerBinary) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let Prepared {
        layout,
        mut manifest,
        binary,
        options,
    } = prepared;
    let root = layout.root().to_path_buf();
    let existed = root.exists();
    super::files::create_private_dir(&root).map_err(SeededError::Create)?;
    // Two `up` on one new directory: the second stops here, touching nothing.
    let _claim = CreationClaim::take(&root).map_err(SeededError::Create)?;
    let mut servers: Vec<Arc<LocalMysqld>> = Vec::new();
    let result = async {
        let create = SeededError::Create;
        manifest.save(&layout).map_err(create)?;
        let secret = Secret::generate().map_err(create)?;
        secret.save(&layout).map_err(create)?;
        if manifest.tls {
            super::tls::create_authority(&layout, &manifest).map_err(create)?;
        }
        secret
            .write_client_files(&layout, &manifest)
            .map_err(create)?;
        for index in 0..manifest.replicas {
            servers.push(Arc::new(
                servers::write_instance(&layout, &manifest, &binary, index).map_err(create)?,
            ));
        }
        let first_initialised = usize::from(seed.is_some());
        let inits = servers
            .iter()
            .skip(first_initialised)
            .map(|s| servers::initialize_instance(&layout, &manifest, &secret, s));
        let inits = async {
            for r in futures::future::join_all(inits).await {
                r?;
            }
            Ok::<(), LocalError>(())
        };
        let seeding = async {
            match seed {
                Some(seed) => seed(layout.clone(), manifest.clone(), binary.clone())
                    .await
                    .map(Some),
                None => Ok(None),
            }
        };
        let (inits, seeded) = futures::join!(inits, seeding);
        inits.map_err(create)?;
        let seeded = seeded.map_err(SeededError::Seed)?;
        manifest.phase = Phase::Ready;
        manifest.save(&layout).map_err(create)?;
        Ok::<_, SeededError<E>>(seeded)
    }
    .await;
    match result {
        Ok(seeded) => Ok((manifest, seeded)),
        Err(e) => {
            let error = match &e {
                SeededError::Create(c) => c.to_string(),
                SeededError::Seed(s) => s.to_string(),
            };
            tracing::warn!(%error, dir = %root.display(), "creation failed; removing what was made");
            let started: Vec<(u32, Arc<LocalMysqld>)> =
                (0..).zip(servers.iter().cloned()).collect();
            let _ = super::servers::stop_servers(&started, 0, options.boot_timeout).await;
            let cleanup = if existed {
                empty_dir(&root)
            } else {
                std::fs::remove_dir_all(&root).map_err(|e| LocalError::io(&root, "remove", e))
            };
            if let Err(c) = cleanup {
                tracing::warn!(error = %c, "cleanup failed");
            }
            Err(e)
        }
    }
}

/// The marker of an `up` that is creating a cluster in a directory.
const CREATING_MARKER: &str = ".moco-local-creating";

/// Exclusive right to create the cluster in a directory: a marker file created with
/// `O_EXCL`, removed when dropped. `prepare` checks that the directory is new, but two `up`
/// started together both passed that check and then failed after 30 s on each other's locks.
struct CreationClaim(PathBuf);

impl CreationClaim {
    fn take(root: &Path) -> Result<Self, LocalError> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let marker = root.join(CREATING_MARKER);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&marker)
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(LocalError::other(
                    format!("--dir {}", root.display()),
                    "another `moco local up` is creating a cluster in this directory right now",
                ));
            }
            Err(e) => return Err(LocalError::io(&marker, "create", e)),
        }
        let claim = CreationClaim(marker);
        // Claimed after another `up` finished: the directory holds its cluster now.
        let entries = std::fs::read_dir(root).map_err(|e| LocalError::io(root, "list", e))?;
        for entry in entries {
            let entry = entry.map_err(|e| LocalError::io(root, "list", e))?;
            if entry.file_name() != CREATING_MARKER {
                drop(claim);
                return Manifest::check_new_dir(root).and(Err(LocalError::Foreign {
                    dir: root.to_path_buf(),
                    reason: format!("it is not empty (found {:?})", entry.file_name()),
                }));
            }
        }
        Ok(claim)
    }
}

impl Drop for CreationClaim {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn empty_dir(dir: &Path) -> Result<(), LocalError> {
    let entries = std::fs::read_dir(dir).map_err(|e| LocalError::io(dir, "list", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| LocalError::io(dir, "list", e))?;
        let path = entry.path();
        let removed = if entry.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(|e| LocalError::io(&path, "remove", e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_counts() {
        assert!(check_replicas(0).is_err());
        assert!(check_replicas(2).is_err());
        assert!(check_replicas(1).is_ok());
        assert!(check_replicas(5).is_ok());
        assert!(check_replicas(11).is_err());
        let e = check_replicas(4).unwrap_err().to_string();
        assert!(e.contains("--replicas 4"), "{e}");
    }

    #[test]
    fn occupied_port_is_named() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let e = check_ports(port, 1).unwrap_err();
        assert!(
            matches!(e, LocalError::PortInUse { port: p, .. } if p == port),
            "{e}"
        );
        assert!(e.to_string().contains("--base-port"), "{e}");
    }

    #[test]
    fn default_base_port_is_a_free_block() {
        let base = find_base_port(5).unwrap();
        assert!(base >= DEFAULT_BASE_PORT);
        for o in 0..5u16 {
            assert!(
                port_free(base + o),
                "port {} of the block is taken",
                base + o
            );
        }
    }
}
