//! Images mapped to local programs: there is no container runtime and no registry here, so an
//! image is the host's own filesystem (seen copy-on-write) plus a few files of its own — the
//! programs the image would hold — and the image's `ENTRYPOINT` and `CMD`. An image with no
//! entry in the table fails its container the way a failed pull does, naming the image.
//!
//! | image (repository, any tag)                                   | what runs                                  |
//! |---------------------------------------------------------------|--------------------------------------------|
//! | `debian`, `ubuntu` (Docker Hub)                               | the host's programs; `CMD ["bash"]`         |
//! | `mariadb` (Docker Hub), `…/mariadb`                           | Debian's `mariadbd`; `ENTRYPOINT ["docker-entrypoint.sh"]`, `CMD ["mariadbd"]` |
//! | `ghcr.io/moco-rs/moco-agent`, `ghcr.io/cybozu-go/moco-agent`  | `moco` as `/moco-init` and `moco-agent` (the entrypoint); moco-rs's also as `/moco`, which MariaDB clusters' Jobs run |
//! | `ghcr.io/moco-rs/moco-backup`, `ghcr.io/cybozu-go/moco-backup`| `moco` as `/moco-backup` (the entrypoint)  |
//! | `ghcr.io/moco-rs/moco`                                        | `moco` (the entrypoint)                    |
//! | `…/mysqld_exporter`, `…/mysqld-exporter`                      | Debian's `prometheus-mysqld-exporter` as `mysqld_exporter` |
//! | `…/fluent-bit`                                                | a stand-in that copies the slow log to stdout (`tail -F`) |
//! | `quay.io/jetstack/cert-manager-controller`, `-cainjector`, `-webhook` | cert-manager's programs from `--kube-bin` (`scripts/kube/build.sh cert-manager`) at `/app/cmd/<name>/<name>` (the entrypoint, as upstream's `hack/containers/Containerfile.<name>` has it) |
//!
//! The MariaDB entrypoint keeps the official image's dispatch (arguments starting with `-` go to
//! `mariadbd`; another program runs as given) but not its first-run initialisation
//! (`MARIADB_ROOT_PASSWORD` and friends): MOCO's Pods initialise the data directory with
//! `moco-init`. MySQL's images have no entry: MySQL cannot be installed on these machines.
//! cert-manager's other images (`-acmesolver`, `-startupapicheck`) have none either: their
//! programs are not built here. cert-manager's images run as the distroless `nonroot` user
//! (65532); here, as everywhere in the runner, a container without `runAsUser` runs as root.

use std::path::{Path, PathBuf};

/// A file an image holds: `target` inside the container is `source` on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFile {
    /// Absolute path inside the container.
    pub target: PathBuf,
    /// The host file (a program).
    pub source: PathBuf,
}

/// An image's contents and defaults, as the table gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The files of its own, bind-mounted read-only over the host's view.
    pub files: Vec<ImageFile>,
    /// Directories it holds (with their modes).
    pub dirs: Vec<crate::container::ImageDir>,
    /// Its `ENTRYPOINT`.
    pub entrypoint: Vec<String>,
    /// Its `CMD`.
    pub cmd: Vec<String>,
}

/// The host programs the table maps images to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageTable {
    /// moco-rs's own multi-call binary (`moco`, also `moco-init`, `moco-agent`, `moco-backup`).
    pub moco: PathBuf,
    /// Debian's `prometheus-mysqld-exporter`.
    pub mysqld_exporter: PathBuf,
    /// Scripts the runner writes once (the MariaDB entrypoint, the fluent-bit stand-in).
    pub scripts: PathBuf,
    /// The directory with cert-manager's programs (`cert-manager-controller`, …), if given.
    pub kube_bin: Option<PathBuf>,
}

/// Why an image or its program could not be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ImageError {
    /// No entry in the table: like a failed pull.
    #[error(
        "image {image:?} has no local stand-in (the Pod runner maps debian, ubuntu, mariadb, \
         moco-rs's and MOCO's agent and backup images, mysqld_exporter, fluent-bit and \
         cert-manager's controller, cainjector and webhook; see \
         testing/moco-pod-runner/src/images.rs)"
    )]
    Unmapped {
        /// The image reference as the Pod gave it.
        image: String,
    },
    /// A cert-manager image, but the runner was started without `--kube-bin`.
    #[error(
        "image {image:?} runs cert-manager's {program}, but the Pod runner was started without \
         --kube-bin (the directory holding it; scripts/kube.sh passes it)"
    )]
    NoKubeBin {
        /// The image reference as the Pod gave it.
        image: String,
        /// The program it needs.
        program: String,
    },
    /// Neither `command`, `args` nor the image give a program.
    #[error(
        "container {container:?}: no command: the image {image:?} has no entrypoint or cmd and the container sets none"
    )]
    NoCommand {
        /// The container.
        container: String,
        /// Its image.
        image: String,
    },
    /// The program is not in the container's view.
    #[error(
        "container {container:?}: executable {program:?} not found in the image {image:?} or in $PATH ({path})"
    )]
    NotFound {
        /// The container.
        container: String,
        /// Its image.
        image: String,
        /// The program as the command line names it.
        program: String,
        /// The PATH searched.
        path: String,
    },
}

/// The repository of an image reference without registry default, tag or digest:
/// `mariadb:10.11` → `docker.io/library/mariadb`, `ghcr.io/x/y:1@sha256:…` → `ghcr.io/x/y`.
pub fn repository(image: &str) -> String {
    let without_digest = image.split('@').next().unwrap_or(image);
    // A tag is after the last ':' that comes after the last '/' (a registry may have a port).
    let last_slash = without_digest.rfind('/').map_or(0, |i| i + 1);
    let repo = match without_digest[last_slash..].rfind(':') {
        Some(i) => &without_digest[..last_slash + i],
        None => without_digest,
    };
    let first = repo.split('/').next().unwrap_or(repo);
    let has_registry =
        repo.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    match (has_registry, repo.contains('/')) {
        (true, _) => repo.to_owned(),
        (false, true) => format!("docker.io/{repo}"),
        (false, false) => format!("docker.io/library/{repo}"),
    }
}

const MARIADB_ENTRYPOINT: &str = "docker-entrypoint.sh";
const FLUENT_BIT: &str = "fluent-bit";

impl ImageTable {
    /// The table, after writing its scripts into `scripts`.
    pub fn prepare(
        moco: PathBuf,
        mysqld_exporter: PathBuf,
        scripts: PathBuf,
        kube_bin: Option<PathBuf>,
    ) -> std::io::Result<Self> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(&scripts)?;
        for (name, body) in [
            (
                MARIADB_ENTRYPOINT,
                "#!/bin/sh\n# The official mariadb image's dispatch, without its first-run setup.\n\
                 case \"$1\" in -*) set -- mariadbd \"$@\" ;; esac\nexec \"$@\"\n",
            ),
            (
                FLUENT_BIT,
                "#!/bin/sh\n# Stands in for MOCO's fluent-bit sidecar: the slow log to stdout.\n\
                 exec tail -n +1 -F /var/log/mysql/mysql.slow\n",
            ),
        ] {
            let path = scripts.join(name);
            std::fs::write(&path, body)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
        Ok(Self {
            moco,
            mysqld_exporter,
            scripts,
            kube_bin,
        })
    }

    /// The image for a reference, or [`ImageError::Unmapped`].
    pub fn lookup(&self, image: &str) -> Result<Image, ImageError> {
        let repo = repository(image);
        let name = repo.rsplit('/').next().unwrap_or(&repo);
        let file = |target: &str, source: &Path| ImageFile {
            target: PathBuf::from(target),
            source: source.to_owned(),
        };
        let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let moco_org =
            repo.starts_with("ghcr.io/moco-rs/") || repo.starts_with("ghcr.io/cybozu-go/");
        let image = match (repo.as_str(), name) {
            ("docker.io/library/debian" | "docker.io/library/ubuntu", _) => Image {
                dirs: vec![],
                files: vec![],
                entrypoint: vec![],
                cmd: strings(&["bash"]),
            },
            // The official image makes /run/mysqld (mode 1777), where Debian's my.cnf puts
            // the socket and the pid file.
            (_, "mariadb") => Image {
                dirs: vec![crate::container::ImageDir {
                    path: PathBuf::from("/run/mysqld"),
                    mode: 0o1777,
                }],
                files: vec![file(
                    &format!("/usr/local/bin/{MARIADB_ENTRYPOINT}"),
                    &self.scripts.join(MARIADB_ENTRYPOINT),
                )],
                entrypoint: strings(&[MARIADB_ENTRYPOINT]),
                cmd: strings(&["mariadbd"]),
            },
            (_, "moco-agent") if moco_org => {
                let mut files = vec![
                    file("/moco-init", &self.moco),
                    file("/usr/local/bin/moco-init", &self.moco),
                    file("/usr/local/bin/moco-agent", &self.moco),
                ];
                // moco-rs's image (the Dockerfile's `agent` target) also holds `/moco`, which
                // MariaDB clusters' backup and restore Jobs and the archiver run.
                if repo.starts_with("ghcr.io/moco-rs/") {
                    files.push(file("/moco", &self.moco));
                }
                Image {
                    dirs: vec![],
                    files,
                    entrypoint: strings(&["moco-agent"]),
                    cmd: vec![],
                }
            }
            (_, "moco-backup") if moco_org => Image {
                dirs: vec![],
                files: vec![
                    file("/moco-backup", &self.moco),
                    file("/usr/local/bin/moco-backup", &self.moco),
                ],
                entrypoint: strings(&["/moco-backup"]),
                cmd: vec![],
            },
            ("ghcr.io/moco-rs/moco", _) => Image {
                dirs: vec![],
                files: vec![file("/usr/local/bin/moco", &self.moco)],
                entrypoint: strings(&["moco"]),
                cmd: vec![],
            },
            (_, "mysqld_exporter" | "mysqld-exporter") => Image {
                dirs: vec![],
                files: vec![file("/bin/mysqld_exporter", &self.mysqld_exporter)],
                entrypoint: strings(&["/bin/mysqld_exporter"]),
                cmd: vec![],
            },
            ("quay.io/jetstack/cert-manager-controller", _) => {
                self.cert_manager(image, "controller")?
            }
            ("quay.io/jetstack/cert-manager-cainjector", _) => {
                self.cert_manager(image, "cainjector")?
            }
            ("quay.io/jetstack/cert-manager-webhook", _) => self.cert_manager(image, "webhook")?,
            (_, "fluent-bit") => Image {
                dirs: vec![],
                files: vec![file(
                    "/fluent-bit/bin/fluent-bit",
                    &self.scripts.join(FLUENT_BIT),
                )],
                entrypoint: strings(&["/fluent-bit/bin/fluent-bit"]),
                cmd: vec![],
            },
            _ => {
                return Err(ImageError::Unmapped {
                    image: image.to_owned(),
                });
            }
        };
        Ok(image)
    }
}

impl ImageTable {
    /// cert-manager's image of `name` (controller, cainjector, webhook): its program at
    /// `/app/cmd/<name>/<name>`, the entrypoint, as `hack/containers/Containerfile.<name>`
    /// builds it upstream.
    fn cert_manager(&self, image: &str, name: &str) -> Result<Image, ImageError> {
        let program = format!("cert-manager-{name}");
        let Some(dir) = &self.kube_bin else {
            return Err(ImageError::NoKubeBin {
                image: image.to_owned(),
                program,
            });
        };
        let target = format!("/app/cmd/{name}/{name}");
        Ok(Image {
            dirs: vec![],
            files: vec![ImageFile {
                target: PathBuf::from(&target),
                source: dir.join(program),
            }],
            entrypoint: vec![target],
            cmd: vec![],
        })
    }
}

impl Image {
    /// The command line as a runtime builds it: `command` replaces the entrypoint (and drops
    /// `CMD`), `args` replace `CMD`.
    pub fn command_line(&self, command: Option<&[String]>, args: Option<&[String]>) -> Vec<String> {
        let command = command.filter(|c| !c.is_empty());
        let args = args.filter(|a| !a.is_empty());
        let (entrypoint, cmd): (&[String], &[String]) = match (command, args) {
            (Some(c), Some(a)) => (c, a),
            (Some(c), None) => (c, &[]),
            (None, Some(a)) => (&self.entrypoint, a),
            (None, None) => (&self.entrypoint, &self.cmd),
        };
        entrypoint.iter().chain(cmd).cloned().collect()
    }

    /// The path inside the container of `program` (the command line's first word): itself
    /// when it has a `/`, else the first of `search_path`'s directories holding it, the image's
    /// own files before the host's at each directory (the image's files sit over the host's).
    pub fn find_program(&self, program: &str, search_path: &str) -> Option<PathBuf> {
        if program.contains('/') {
            return Some(PathBuf::from(program));
        }
        search_path
            .split(':')
            .filter(|d| d.starts_with('/'))
            .map(|dir| Path::new(dir).join(program))
            .find(|candidate| {
                self.files.iter().any(|f| &f.target == candidate) || is_executable(candidate)
            })
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> ImageTable {
        ImageTable {
            moco: "/opt/moco".into(),
            mysqld_exporter: "/usr/bin/prometheus-mysqld-exporter".into(),
            scripts: "/state/images".into(),
            kube_bin: Some("/cache/cm/bin".into()),
        }
    }

    #[test]
    fn repositories_are_normalised() {
        for (image, repo) in [
            ("debian", "docker.io/library/debian"),
            ("debian:12", "docker.io/library/debian"),
            ("mariadb:10.11@sha256:abc", "docker.io/library/mariadb"),
            (
                "prom/mysqld-exporter:v0.15",
                "docker.io/prom/mysqld-exporter",
            ),
            (
                "ghcr.io/moco-rs/moco-agent:0.1.0",
                "ghcr.io/moco-rs/moco-agent",
            ),
            ("localhost:5000/x/y:1", "localhost:5000/x/y"),
            ("registry:5000/y", "registry:5000/y"),
        ] {
            assert_eq!(repository(image), repo, "{image}");
        }
    }

    #[test]
    fn the_table_maps_what_moco_pods_run_and_refuses_the_rest() {
        let t = table();
        let agent = t.lookup("ghcr.io/moco-rs/moco-agent:0.1.0").unwrap();
        assert!(
            agent
                .files
                .iter()
                .any(|f| f.target == Path::new("/moco-init"))
        );
        assert_eq!(agent.entrypoint, ["moco-agent"]);
        assert_eq!(t.lookup("mariadb:10.11").unwrap().cmd, ["mariadbd"]);
        assert_eq!(
            t.lookup("ghcr.io/cybozu-go/moco/mysqld_exporter:0.19.0.1")
                .unwrap()
                .entrypoint,
            ["/bin/mysqld_exporter"]
        );
        let e = t.lookup("ghcr.io/cybozu-go/moco/mysql:8.4.4").unwrap_err();
        assert!(
            e.to_string().contains("ghcr.io/cybozu-go/moco/mysql:8.4.4"),
            "{e}"
        );
        // Someone else's image named like ours is not ours.
        assert!(t.lookup("example.com/evil/moco-agent:1").is_err());
    }

    #[test]
    fn cert_managers_images_run_its_programs_from_kube_bin_at_upstreams_paths() {
        let t = table();
        for name in ["controller", "cainjector", "webhook"] {
            for image in [
                format!("quay.io/jetstack/cert-manager-{name}:v1.21.2"),
                format!("quay.io/jetstack/cert-manager-{name}@sha256:abc"),
            ] {
                let i = t.lookup(&image).unwrap();
                let target = format!("/app/cmd/{name}/{name}");
                assert_eq!(i.entrypoint, std::slice::from_ref(&target), "{image}");
                assert!(i.cmd.is_empty(), "{image}");
                assert_eq!(
                    i.files,
                    [ImageFile {
                        target: PathBuf::from(&target),
                        source: PathBuf::from(format!("/cache/cm/bin/cert-manager-{name}")),
                    }],
                    "{image}"
                );
                // The chart gives only args: the entrypoint runs with them.
                assert_eq!(
                    i.command_line(None, Some(&["--v=2".to_owned()])),
                    [target, "--v=2".to_owned()]
                );
            }
        }
        // Images of cert-manager's not built here, and look-alikes elsewhere, are refused.
        for image in [
            "quay.io/jetstack/cert-manager-acmesolver:v1.21.2",
            "quay.io/jetstack/cert-manager-startupapicheck:v1.21.2",
            "example.com/jetstack/cert-manager-controller:v1.21.2",
        ] {
            let e = t.lookup(image).unwrap_err();
            assert!(matches!(e, ImageError::Unmapped { .. }), "{image}: {e}");
        }
        // Without --kube-bin the image is known but its program is not: say so.
        let without = ImageTable {
            kube_bin: None,
            ..table()
        };
        let e = without
            .lookup("quay.io/jetstack/cert-manager-webhook:v1.21.2")
            .unwrap_err();
        assert!(
            e.to_string().contains("--kube-bin") && e.to_string().contains("cert-manager-webhook"),
            "{e}"
        );
    }

    /// MariaDB clusters' backup and restore Jobs (and the archiver) run `/moco` from the agent
    /// image in place of its entrypoint (`moco-operator/src/render/jobs.rs`, `job_image`), as
    /// the Dockerfile's `agent` target holds it; without it their container never started.
    #[test]
    fn moco_rs_agent_image_holds_moco_for_the_mariadb_jobs() {
        let t = table();
        let agent = t.lookup("ghcr.io/moco-rs/moco-agent:0.1.0").unwrap();
        assert!(
            agent.files.contains(&ImageFile {
                target: PathBuf::from("/moco"),
                source: PathBuf::from("/opt/moco"),
            }),
            "{:?}",
            agent.files
        );
        let job = vec!["/moco".to_owned()];
        let args = vec!["backup".to_owned(), "--threads=4".to_owned()];
        let argv = agent.command_line(Some(&job), Some(&args));
        assert_eq!(argv, ["/moco", "backup", "--threads=4"]);
        assert_eq!(
            agent.find_program(&argv[0], "/usr/bin"),
            Some(PathBuf::from("/moco"))
        );
        // MOCO's own agent image holds no `/moco` (its Jobs run the backup image).
        let moco = t.lookup("ghcr.io/cybozu-go/moco-agent:0.13.0").unwrap();
        assert!(
            !moco.files.iter().any(|f| f.target == Path::new("/moco")),
            "{:?}",
            moco.files
        );
    }

    #[test]
    fn command_and_args_follow_the_runtime_rules() {
        let image = Image {
            dirs: vec![],
            files: vec![],
            entrypoint: vec!["ep".into()],
            cmd: vec!["c1".into()],
        };
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert_eq!(image.command_line(None, None), s(&["ep", "c1"]));
        assert_eq!(image.command_line(None, Some(&s(&["a"]))), s(&["ep", "a"]));
        assert_eq!(image.command_line(Some(&s(&["x"])), None), s(&["x"]));
        assert_eq!(
            image.command_line(Some(&s(&["x"])), Some(&s(&["a"]))),
            s(&["x", "a"])
        );
        assert_eq!(image.command_line(Some(&[]), None), s(&["ep", "c1"]));
    }

    #[test]
    fn programs_are_found_in_the_image_before_the_host() {
        let t = table();
        let agent = t.lookup("ghcr.io/moco-rs/moco-agent:0.1.0").unwrap();
        assert_eq!(
            agent.find_program("moco-agent", "/usr/local/bin:/usr/bin:/bin"),
            Some(PathBuf::from("/usr/local/bin/moco-agent"))
        );
        let sh = agent
            .find_program("sh", "/usr/local/bin:/usr/bin:/bin")
            .unwrap();
        assert!(sh.ends_with("sh"), "{sh:?}");
        assert_eq!(
            agent.find_program("no-such-program-here", "/usr/bin:/bin"),
            None
        );
        assert_eq!(
            agent.find_program("/shared/moco-init", ""),
            Some(PathBuf::from("/shared/moco-init"))
        );
    }
}
