//! What every command runs with: a Kubernetes client configured as kubectl would be from the
//! same flags, the namespace, and where to find `kubectl` for `mysql`.

use std::ffi::OsString;
use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::cli::KubeFlags;
use crate::error::Error;

/// The surroundings of a command.
#[derive(Clone)]
pub struct Context {
    /// The API server's client.
    pub client: Client,
    /// The namespace of the MySQLCluster.
    pub namespace: String,
    /// The connection flags as given, passed on to `kubectl exec`.
    pub flags: KubeFlags,
    /// The search path for `kubectl` (the process's `PATH`).
    pub path: Option<OsString>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("namespace", &self.namespace)
            .field("flags", &self.flags)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// A context over `client` in `namespace`, with no connection flags and the process's
    /// `PATH` (tests give their own client).
    pub fn new(client: Client, namespace: impl Into<String>) -> Self {
        Context {
            client,
            namespace: namespace.into(),
            flags: KubeFlags::default(),
            path: std::env::var_os("PATH"),
        }
    }

    /// Looks for `kubectl` on [`Context::path`] instead of the process's `PATH`.
    #[must_use]
    pub fn with_path(mut self, path: impl Into<OsString>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Builds the client as kubectl does: `--kubeconfig` (else `$KUBECONFIG`, else
    /// `~/.kube/config`, else the service account of the Pod it runs in), `--context` (else
    /// the current context); the namespace is `-n`, else the context's, else `default`.
    pub async fn connect(flags: &KubeFlags) -> Result<Context, Error> {
        let config_error = |message: String| Error::Config {
            flags: describe(flags),
            message,
        };
        let options = KubeConfigOptions {
            context: flags.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match (&flags.kubeconfig, &flags.context) {
            (Some(path), _) => {
                let kubeconfig = Kubeconfig::read_from(path)
                    .map_err(|e| config_error(format!("{}: {e}", path.display())))?;
                Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .map_err(|e| config_error(e.to_string()))?
            }
            (None, Some(_)) => Config::from_kubeconfig(&options)
                .await
                .map_err(|e| config_error(e.to_string()))?,
            (None, None) => Config::infer()
                .await
                .map_err(|e| config_error(e.to_string()))?,
        };
        let namespace = flags
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| config.default_namespace.clone());
        let namespace = if namespace.is_empty() {
            "default".to_owned()
        } else {
            namespace
        };
        let client = Client::try_from(config).map_err(|e| config_error(e.to_string()))?;
        Ok(Context {
            client,
            namespace,
            flags: flags.clone(),
            path: std::env::var_os("PATH"),
        })
    }

    /// The `kubectl` program on the search path.
    pub fn kubectl(&self) -> Result<PathBuf, Error> {
        find_program("kubectl", self.path.as_deref()).ok_or(Error::KubectlNotFound)
    }
}

/// The flags, for error messages.
fn describe(flags: &KubeFlags) -> String {
    let mut parts = Vec::new();
    if let Some(path) = &flags.kubeconfig {
        parts.push(format!("--kubeconfig {}", path.display()));
    }
    if let Some(context) = &flags.context {
        parts.push(format!("--context {context}"));
    }
    if parts.is_empty() {
        "from $KUBECONFIG, ~/.kube/config or the in-cluster service account".to_owned()
    } else {
        parts.join(" ")
    }
}

/// The first executable file named `name` in the directories of `path`.
pub fn find_program(name: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &std::path::Path) -> bool {
    path.is_file()
}
