//! MOCO's `moco-backup` command line: the flags every subcommand takes and the positional
//! arguments of `backup`, exactly as the operator renders them (`--threads=4 --region=…
//! --backend-type=s3 BUCKET NAMESPACE NAME`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use moco_core::resources::ByteRate;

use crate::bucket::{Backend, BucketSpec};

use super::JobError;

/// The variable holding the password of the Job's account (`moco-backup` for a backup,
/// `moco-admin` for a restore), as MOCO's Jobs get it.
pub const PASSWORD_ENV: &str = "MYSQL_PASSWORD";
/// The variable holding the cluster's `moco-clone-donor` password: a MariaDB backup is
/// streamed from the source's agent, which asks for it (beyond MOCO, whose Jobs dump over SQL).
pub const DONOR_PASSWORD_ENV: &str = "CLONE_DONOR_PASSWORD";

/// The flags of both programs.
#[derive(Clone, Debug, clap::Args)]
pub struct CommonFlags {
    /// The working directory (a volume the Job mounts).
    #[arg(long, default_value = "/work")]
    pub work_dir: PathBuf,
    /// Parallelism of the tools.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: u32,
    /// `bucketConfig.region`.
    #[arg(long, default_value = "")]
    pub region: String,
    /// `bucketConfig.endpointURL`.
    #[arg(long, default_value = "")]
    pub endpoint: String,
    /// `bucketConfig.usePathStyle`.
    #[arg(long)]
    pub use_path_style: bool,
    /// `bucketConfig.backendType`: `s3`, `gcs` or `azure`.
    #[arg(long, default_value = "s3")]
    pub backend_type: String,
    /// `bucketConfig.caCert`: a PEM file of extra CAs.
    #[arg(long, default_value = "")]
    pub ca_cert: String,
    /// The client certificate (`tls.crt`, `tls.key`, `ca.crt`) presented to the cluster's
    /// agents (MariaDB; the operator mounts the cluster's agent certificate here).
    #[arg(long, default_value = "/grpc-cert")]
    pub grpc_cert_dir: PathBuf,
    /// The cluster serves TLS only (`moco-rs/tls`): the CA file its servers are verified with
    /// (the operator mounts the cluster's `moco-<name>-mysql-ca` there).
    #[arg(long)]
    pub mysql_tls_ca: Option<PathBuf>,
}

impl CommonFlags {
    /// Flags with MOCO's defaults and the agent certificate in `grpc_cert_dir`, for tests.
    #[cfg(test)]
    pub(crate) fn for_tests(grpc_cert_dir: &std::path::Path) -> Self {
        CommonFlags {
            work_dir: "/work".into(),
            threads: 1,
            region: String::new(),
            endpoint: String::new(),
            use_path_style: false,
            backend_type: String::new(),
            ca_cert: String::new(),
            grpc_cert_dir: grpc_cert_dir.to_path_buf(),
            mysql_tls_ca: None,
        }
    }

    /// The bucket `bucket_name` with these flags; a wrong flag is named.
    pub fn bucket_spec(&self, bucket_name: &str) -> Result<BucketSpec, JobError> {
        let backend = Backend::from_backend_type(&self.backend_type)?;
        if bucket_name.is_empty() {
            return Err(JobError::input("BUCKET", "empty"));
        }
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Ok(BucketSpec {
            backend,
            name: bucket_name.to_owned(),
            region: some(&self.region),
            endpoint: some(&self.endpoint),
            path_style: self.use_path_style,
            ca_cert: some(&self.ca_cert).map(PathBuf::from),
            retry_timeout: None,
        })
    }
}

/// `moco backup [FLAGS] [--max-rate RATE] BUCKET NAMESPACE NAME`.
#[derive(Clone, Debug, clap::Args)]
pub struct BackupArgs {
    /// The flags.
    #[command(flatten)]
    pub common: CommonFlags,
    /// Read the backup no faster than this many bytes per second, a Kubernetes quantity
    /// (`60Mi`, `100M`), so that the primary keeps its latency (beyond MOCO; the operator
    /// passes the cluster's `moco-rs/backup-max-rate` annotation). MySQL: `mysqlsh`'s
    /// `maxRate`, shared among the threads.
    #[arg(long, value_name = "RATE")]
    pub max_rate: Option<ByteRate>,
    /// `bucketConfig.bucketName` (may name `$(VAR)`s of the environment).
    pub bucket: String,
    /// The MySQLCluster's namespace.
    pub namespace: String,
    /// The MySQLCluster's name.
    pub name: String,
}

/// `moco restore [FLAGS] BUCKET SRC_NAMESPACE SRC_NAME NAMESPACE NAME YYYYMMDD-hhmmss SCHEMA
/// USERS` (MOCO passes `SCHEMA` and `USERS` empty when unset).
#[derive(Clone, Debug, clap::Args)]
pub struct RestoreArgs {
    /// The flags.
    #[command(flatten)]
    pub common: CommonFlags,
    /// `bucketConfig.bucketName`.
    pub bucket: String,
    /// `spec.restore.sourceNamespace`.
    pub source_namespace: String,
    /// `spec.restore.sourceName`.
    pub source_name: String,
    /// The MySQLCluster restored into: its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// `spec.restore.restorePoint`, UTC `YYYYMMDD-hhmmss`.
    pub restore_point: String,
    /// `spec.restore.schema`.
    pub schema: String,
    /// `spec.restore.users`.
    pub users: String,
}

/// `moco archive [FLAGS] [--every 5s] BUCKET NAMESPACE NAME`: archiving every few seconds
/// (beyond MOCO; the operator runs it when the cluster's annotation asks for it).
#[derive(Clone, Debug, clap::Args)]
pub struct ArchiveArgs {
    /// The flags.
    #[command(flatten)]
    pub common: CommonFlags,
    /// The pause between rounds (a Go duration, 1s or more): the recovery point is about
    /// this plus an upload.
    #[arg(long, default_value = "5s")]
    pub every: String,
    /// `bucketConfig.bucketName`.
    pub bucket: String,
    /// The MySQLCluster's namespace.
    pub namespace: String,
    /// The MySQLCluster's name.
    pub name: String,
}

/// The value of `name` in `env`; missing or empty is an error naming it.
pub fn required(env: &BTreeMap<String, String>, name: &str) -> Result<String, JobError> {
    env.get(name)
        .filter(|v| !v.is_empty())
        .cloned()
        .ok_or_else(|| JobError::input(name, "not set in the environment"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: BackupArgs,
    }

    #[test]
    fn the_operators_command_line_parses() {
        let cli = Cli::try_parse_from([
            "backup",
            "--threads=3",
            "--region=us-east-1",
            "--endpoint=http://minio:9000",
            "--use-path-style",
            "--backend-type=s3",
            "$(BUCKET)",
            "ns",
            "db",
        ])
        .unwrap();
        assert_eq!(cli.args.common.threads, 3);
        assert_eq!(cli.args.namespace, "ns");
        let spec = cli.args.common.bucket_spec(&cli.args.bucket).unwrap();
        assert_eq!(spec.backend, Backend::S3);
        assert_eq!(spec.region.as_deref(), Some("us-east-1"));
        assert_eq!(spec.endpoint.as_deref(), Some("http://minio:9000"));
        assert!(spec.path_style);
        assert_eq!(spec.ca_cert, None);
        assert_eq!(spec.name, "$(BUCKET)");
        assert_eq!(cli.args.common.mysql_tls_ca, None);
        assert_eq!(cli.args.max_rate, None);

        // With TLS the operator puts the CA flag right after the subcommand.
        let cli = Cli::try_parse_from([
            "backup",
            "--mysql-tls-ca=/mysql-tls/ca.crt",
            "--threads=3",
            "b",
            "ns",
            "db",
        ])
        .unwrap();
        assert_eq!(
            cli.args.common.mysql_tls_ca.as_deref(),
            Some(std::path::Path::new("/mysql-tls/ca.crt"))
        );
    }

    #[test]
    fn the_rate_cap_is_a_quantity_and_a_bad_one_is_named() {
        let cli =
            Cli::try_parse_from(["backup", "--threads=3", "--max-rate=60Mi", "b", "ns", "db"])
                .unwrap();
        assert_eq!(
            cli.args.max_rate.map(|r| r.bytes_per_second().get()),
            Some(60 << 20)
        );
        let e = Cli::try_parse_from(["backup", "--max-rate=60m", "b", "ns", "db"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--max-rate") && e.contains("write Mi"), "{e}");
    }

    #[test]
    fn a_wrong_backend_and_a_missing_password_are_named() {
        let flags = CommonFlags {
            backend_type: "ftp".into(),
            ..CommonFlags::for_tests(std::path::Path::new("/grpc-cert"))
        };
        let e = flags.bucket_spec("b").unwrap_err().to_string();
        assert!(e.starts_with("--backend-type: \"ftp\""), "{e}");
        let e = required(&BTreeMap::new(), PASSWORD_ENV)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "MYSQL_PASSWORD: not set in the environment");
        assert!(Cli::try_parse_from(["backup", "--threads=0", "b", "ns", "db"]).is_err());
    }
}
