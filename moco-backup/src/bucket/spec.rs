//! A bucket as MOCO's `BucketConfig` describes it ([`BucketSpec`]), or as a URL on the command
//! line, and how it is opened: the credentials and settings each service's SDK reads from the
//! environment, `$(VAR)`s in the bucket's name, retries long enough for a backup of hours.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::list::PaginatedListStore;
use object_store::local::LocalFileSystem;
use object_store::{ClientOptions, ObjectStore};

use super::backend::Backend;
use super::error::{BucketError, invalid};
use super::listing::Lister;
use super::objects::Bucket;

/// A bucket as MOCO's `BucketConfig` describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketSpec {
    /// The API.
    pub backend: Backend,
    /// `bucketName` (a directory's path for [`Backend::Directory`]).
    pub name: String,
    /// `region`.
    pub region: Option<String>,
    /// `endpointURL`.
    pub endpoint: Option<String>,
    /// `usePathStyle`.
    pub path_style: bool,
    /// `caCert`: a PEM file of extra CAs to trust.
    pub ca_cert: Option<PathBuf>,
    /// How long one request is retried (with backoff) before the operation fails; `None`:
    /// object_store's default, 3 minutes. Not part of MOCO's BucketConfig.
    pub retry_timeout: Option<std::time::Duration>,
}

/// Expands `$(VAR)` as Kubernetes expands container arguments (`$$` is a literal `$`). A
/// variable that is not set is an error naming it: Kubernetes leaves such a reference as it
/// is, and a bucket called `$(BUCKET)` is never what was meant.
pub(super) fn expand_variables(
    field: &'static str,
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, BucketError> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(') {
            let Some(end) = body.find(')') else {
                return Err(invalid(field, format!("{text:?}: `$(` without `)`")));
            };
            let name = &body[..end];
            let value = lookup(name).ok_or_else(|| {
                invalid(
                    field,
                    format!("{text:?} refers to $({name}), which is not set in the environment"),
                )
            })?;
            out.push_str(&value);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// What opening a bucket of any back-end takes.
struct Opening<'a> {
    env: &'a BTreeMap<String, String>,
    name: &'a str,
    client: ClientOptions,
    retry: object_store::RetryConfig,
}

/// The settings of `env` named `<prefix>*` (`AWS_`, `GOOGLE_`) that object_store knows as
/// `K`. Only those: object_store also knows bare names (`BUCKET`, `ENDPOINT`, `TOKEN`, …) that
/// any process environment may hold for other reasons.
fn prefixed_config<'e, K: std::str::FromStr>(
    env: &'e BTreeMap<String, String>,
    prefix: &'e str,
) -> impl Iterator<Item = (K, &'e String)> + 'e {
    env.iter()
        .filter(move |(k, _)| k.starts_with(prefix))
        .filter_map(|(k, v)| Some((k.to_ascii_lowercase().parse::<K>().ok()?, v)))
}

fn paged<S: ObjectStore + PaginatedListStore>(s: S) -> (Arc<dyn ObjectStore>, Lister) {
    let s = Arc::new(s);
    (s.clone(), Lister::Paged(s))
}

impl BucketSpec {
    /// A bucket from a URL, for the command line: `s3://BUCKET`, `gs://BUCKET`,
    /// `azure://CONTAINER`, `file:///DIR` or a plain path.
    pub fn from_url(url: &str) -> Result<Self, BucketError> {
        let (backend, name) = Backend::from_url(url)?;
        if name.is_empty() || (backend != Backend::Directory && name.contains('/')) {
            return Err(invalid(
                "url",
                format!(
                    "{url:?}: expected SCHEME://BUCKET with a bucket name and nothing after it"
                ),
            ));
        }
        Ok(BucketSpec {
            backend,
            name: name.to_owned(),
            region: None,
            endpoint: None,
            path_style: false,
            ca_cert: None,
            retry_timeout: None,
        })
    }

    /// What the bucket is called in messages (`s3://backups`, `dir:/var/backups`).
    pub fn describe(&self) -> String {
        self.backend.describe(&self.name)
    }

    /// Opens the bucket. Credentials and settings come from `env` as each service's SDK reads
    /// them (`AWS_*`, `AZURE_*`, `GOOGLE_*`); `bucketName` may refer to `$(VAR)`s in it.
    pub fn open(&self, env: &BTreeMap<String, String>) -> Result<Bucket, BucketError> {
        // reqwest takes the process's rustls provider (ring, as everywhere in moco-rs) and
        // panics without one; installing it again is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let with_connection_string;
        let env = if self.backend == Backend::Azure {
            with_connection_string = azure_connection_string(env)?;
            &with_connection_string
        } else {
            env
        };
        let lookup = |k: &str| env.get(k).cloned();
        let name = expand_variables("bucketConfig.bucketName", &self.name, lookup)?;
        if name.is_empty() {
            return Err(invalid("bucketConfig.bucketName", "empty"));
        }
        let opening = Opening {
            env,
            name: &name,
            client: self.client_options(env)?,
            retry: self.retry_config(),
        };
        let (store, lister) = match self.backend {
            Backend::S3 => self.open_s3(opening)?,
            Backend::Azure => self.open_azure(opening)?,
            Backend::Gcs => self.open_gcs(opening)?,
            Backend::Directory => self.open_directory(&name)?,
        };
        Ok(Bucket {
            store,
            lister,
            describe: self.backend.describe(&name),
        })
    }

    /// object_store's default backoff (from 100 ms, 10 retries) gives up on an outage of a
    /// second or two (measured: 1.4 s): too short for a backup of hours. Slower and longer;
    /// the retry timeout (3 minutes unless set) still bounds one request.
    fn retry_config(&self) -> object_store::RetryConfig {
        let mut retry = object_store::RetryConfig {
            backoff: object_store::BackoffConfig {
                init_backoff: std::time::Duration::from_millis(500),
                max_backoff: std::time::Duration::from_secs(20),
                base: 2.0,
            },
            max_retries: 30,
            ..object_store::RetryConfig::default()
        };
        if let Some(t) = self.retry_timeout {
            retry.retry_timeout = t;
        }
        retry
    }

    /// The HTTP client's options: the CA to trust (`caCert`), and plain http for an endpoint
    /// elsewhere (an emulator) that asks for it, given here or in the environment the
    /// service's SDK reads it from.
    fn client_options(&self, env: &BTreeMap<String, String>) -> Result<ClientOptions, BucketError> {
        let mut client = ClientOptions::new();
        if let Some(ca) = &self.ca_cert {
            let pem = std::fs::read(ca)
                .map_err(|e| invalid("bucketConfig.caCert", format!("{}: {e}", ca.display())))?;
            let certs = object_store::Certificate::from_pem_bundle(&pem)
                .map_err(|e| invalid("bucketConfig.caCert", format!("{}: {e}", ca.display())))?;
            for c in certs {
                client = client.with_root_certificate(c);
            }
        }
        let env_endpoints: &[&str] = match self.backend {
            Backend::Azure => &["AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT"],
            _ => &["AWS_ENDPOINT_URL", "AWS_ENDPOINT"],
        };
        let plain_http = self
            .endpoint
            .as_deref()
            .or_else(|| {
                env_endpoints
                    .iter()
                    .find_map(|k| env.get(*k))
                    .map(String::as_str)
            })
            .is_some_and(|e| e.starts_with("http://"));
        if plain_http {
            client = client.with_allow_http(true);
        }
        Ok(client)
    }

    /// An object store's error, naming this bucket.
    fn store_error(&self) -> impl Fn(object_store::Error) -> BucketError + '_ {
        move |e| BucketError::Store {
            target: self.describe(),
            source: e,
        }
    }

    fn open_s3(&self, opening: Opening<'_>) -> Result<(Arc<dyn ObjectStore>, Lister), BucketError> {
        let Opening {
            env,
            name,
            client,
            retry,
        } = opening;
        let mut b = AmazonS3Builder::new();
        for (key, v) in prefixed_config::<AmazonS3ConfigKey>(env, "AWS_") {
            b = b.with_config(key, v);
        }
        // MOCO's `usePathStyle`: path style when set. Without it, AWS itself is
        // addressed virtual-hosted; another service (an endpoint, here or in
        // `AWS_ENDPOINT_URL`) keeps object_store's default, path style.
        let endpoint_elsewhere = ["AWS_ENDPOINT", "AWS_ENDPOINT_URL"]
            .iter()
            .any(|k| env.contains_key(*k));
        b = b
            .with_bucket_name(name)
            .with_client_options(client)
            .with_retry(retry)
            .with_virtual_hosted_style_request(
                !self.path_style && self.endpoint.is_none() && !endpoint_elsewhere,
            );
        if let Some(r) = &self.region {
            b = b.with_region(r);
        }
        if let Some(e) = &self.endpoint {
            b = b.with_endpoint(e);
        }
        Ok(paged(b.build().map_err(self.store_error())?))
    }

    fn open_azure(
        &self,
        opening: Opening<'_>,
    ) -> Result<(Arc<dyn ObjectStore>, Lister), BucketError> {
        let Opening {
            env,
            name,
            client,
            retry,
        } = opening;
        let mut b = MicrosoftAzureBuilder::new();
        // Only `AZURE_*`: object_store also knows bare names (`TOKEN`, `ENDPOINT`,
        // `ACCESS_KEY`, …) that any program's environment may hold, and a stray
        // `TOKEN` would be sent as a bearer token instead of the account's key.
        for (k, v) in env {
            let k = k.to_ascii_lowercase();
            if !k.starts_with("azure_") {
                continue;
            }
            if let Ok(key) = k.parse::<AzureConfigKey>() {
                b = b.with_config(key, v);
            }
        }
        // MOCO's Job environment names the account as the Azure CLI does.
        if let Some(account) = env.get("AZURE_STORAGE_ACCOUNT") {
            b = b.with_account(account);
        }
        if let Some(key) = env.get("AZURE_STORAGE_KEY") {
            b = b.with_access_key(key);
        }
        let emulator = b
            .get_config_value(&AzureConfigKey::UseEmulator)
            .is_some_and(|v| v != "false");
        if !emulator && b.get_config_value(&AzureConfigKey::AccountName).is_none() {
            return Err(invalid(
                "AZURE_STORAGE_ACCOUNT",
                "not set: the storage account's name is needed (its key in \
                 AZURE_STORAGE_KEY)",
            ));
        }
        b = b
            .with_container_name(name)
            .with_client_options(client)
            .with_retry(retry);
        // The account's URL (`endpointURL`, else `AZURE_STORAGE_ENDPOINT`); an
        // emulator's carries the account as its path
        // (`http://127.0.0.1:10000/devstoreaccount1`), where a trailing `/` would
        // make every object's path start with `//`.
        let endpoint = self
            .endpoint
            .clone()
            .or_else(|| b.get_config_value(&AzureConfigKey::Endpoint));
        if let Some(e) = endpoint {
            b = b.with_endpoint(e.trim_end_matches('/').to_owned());
        }
        Ok(paged(b.build().map_err(self.store_error())?))
    }

    fn open_gcs(
        &self,
        opening: Opening<'_>,
    ) -> Result<(Arc<dyn ObjectStore>, Lister), BucketError> {
        let Opening {
            env,
            name,
            client,
            retry,
        } = opening;
        let mut b = GoogleCloudStorageBuilder::new();
        for (key, v) in prefixed_config::<GoogleConfigKey>(env, "GOOGLE_") {
            b = b.with_config(key, v);
        }
        b = b
            .with_bucket_name(name)
            .with_client_options(client)
            .with_retry(retry);
        if let Some(e) = &self.endpoint {
            b = b.with_base_url(e);
        }
        Ok(paged(b.build().map_err(self.store_error())?))
    }

    fn open_directory(&self, name: &str) -> Result<(Arc<dyn ObjectStore>, Lister), BucketError> {
        std::fs::create_dir_all(name)
            .map_err(|e| invalid("url", format!("{name}: cannot create the directory: {e}")))?;
        let store: Arc<dyn ObjectStore> =
            Arc::new(LocalFileSystem::new_with_prefix(name).map_err(self.store_error())?);
        // The directory object_store resolved: listed whatever the working directory
        // becomes.
        let root = std::fs::canonicalize(name)
            .map_err(|e| invalid("url", format!("{name}: cannot resolve the directory: {e}")))?;
        Ok((store, Lister::Directory(root)))
    }
}

/// The connection string's key under which Azure's SDKs (and MOCO, first of all) look.
pub(super) const AZURE_CONNECTION_STRING: &str = "AZURE_STORAGE_CONNECTION_STRING";

/// `env` with `AZURE_STORAGE_CONNECTION_STRING`, when set, spelt out as the account, key and
/// endpoint variables (it wins over them, as in MOCO). An error names the part that is wrong
/// by its place, never by its value: the key never appears in a log or an Event.
fn azure_connection_string(
    env: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, BucketError> {
    let mut out = env.clone();
    let Some(text) = env.get(AZURE_CONNECTION_STRING) else {
        return Ok(out);
    };
    let mut parts = BTreeMap::new();
    // A part is named by its place and the name before it, never by its text: a part without
    // `=` may well be the key itself.
    let mut previous: Option<&str> = None;
    for (i, part) in text
        .split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .enumerate()
    {
        let Some((k, v)) = part.split_once('=') else {
            let after = previous.map_or_else(String::new, |name| format!(" (after {name})"));
            return Err(invalid(
                AZURE_CONNECTION_STRING,
                format!(
                    "part {}{after} is not Name=value; expected Name=value parts separated by `;`",
                    i + 1
                ),
            ));
        };
        let name = k.trim();
        previous = Some(name);
        parts.insert(name.to_ascii_lowercase(), v.trim().to_owned());
    }
    if parts
        .get("usedevelopmentstorage")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        out.insert("AZURE_STORAGE_USE_EMULATOR".into(), "true".into());
        return Ok(out);
    }
    let account = parts.get("accountname").ok_or_else(|| {
        invalid(
            AZURE_CONNECTION_STRING,
            "no AccountName (nor UseDevelopmentStorage=true)",
        )
    })?;
    out.insert("AZURE_STORAGE_ACCOUNT".into(), account.clone());
    if let Some(key) = parts.get("accountkey") {
        out.insert("AZURE_STORAGE_KEY".into(), key.clone());
    }
    let endpoint = match (parts.get("blobendpoint"), parts.get("endpointsuffix")) {
        (Some(e), _) => Some(e.clone()),
        (None, Some(suffix)) => Some(format!(
            "{}://{account}.blob.{suffix}",
            parts
                .get("defaultendpointsprotocol")
                .map_or("https", String::as_str)
        )),
        (None, None) => None,
    };
    if let Some(e) = endpoint {
        out.insert("AZURE_STORAGE_ENDPOINT".into(), e);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt as _;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn variables_expand_as_kubernetes_does() {
        let e = env(&[("BUCKET", "prod"), ("ENV", "eu")]);
        let f = "bucketConfig.bucketName";
        assert_eq!(
            expand_variables(f, "$(BUCKET)-$(ENV)", &e).unwrap(),
            "prod-eu"
        );
        assert_eq!(expand_variables(f, "$$(BUCKET)", &e).unwrap(), "$(BUCKET)");
        assert_eq!(expand_variables(f, "a$b", &e).unwrap(), "a$b");
        let err = expand_variables(f, "x-$(NOPE)", &e).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bucketConfig.bucketName: \"x-$(NOPE)\" refers to $(NOPE), which is not set in the environment"
        );
        assert!(expand_variables(f, "$(OPEN", &e).is_err());
    }

    #[test]
    fn urls() {
        let s3 = BucketSpec::from_url("s3://backups").unwrap();
        assert_eq!((s3.backend, s3.name.as_str()), (Backend::S3, "backups"));
        assert_eq!(
            BucketSpec::from_url("gs://b").unwrap().backend,
            Backend::Gcs
        );
        assert_eq!(
            BucketSpec::from_url("azure://c").unwrap().backend,
            Backend::Azure
        );
        let dir = BucketSpec::from_url("file:///var/backups").unwrap();
        assert_eq!(
            (dir.backend, dir.name.as_str()),
            (Backend::Directory, "/var/backups")
        );
        assert_eq!(
            BucketSpec::from_url("./b").unwrap().backend,
            Backend::Directory
        );
        for bad in ["ftp://x", "s3://", "s3://b/k"] {
            let e = BucketSpec::from_url(bad).unwrap_err();
            assert!(e.to_string().starts_with("url: "), "{e}");
        }
    }

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// A server on `listener` that reads one request's head, refuses it with 403 (as a
    /// store refuses a wrong key) and returns the head.
    fn refuse_one_request(listener: tokio::net::TcpListener) -> tokio::task::JoinHandle<String> {
        use tokio::io::AsyncWriteExt as _;
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8];
                s.read_exact(&mut byte).await.unwrap();
                head.push(byte[0]);
            }
            s.write_all(
                b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            )
            .await
            .unwrap();
            String::from_utf8(head).unwrap()
        })
    }

    /// Lists `spec` with `env` against a one-request server on loopback that refuses with 403
    /// (as a store refuses a wrong key); returns the request's head and the error.
    async fn first_azure_request(
        mut spec: BucketSpec,
        mut env: BTreeMap<String, String>,
    ) -> (String, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://127.0.0.1:{}/devstoreaccount1/",
            listener.local_addr().unwrap().port()
        );
        if spec.endpoint.is_some() {
            spec.endpoint = Some(url);
        } else {
            env.insert("AZURE_STORAGE_ENDPOINT".into(), url);
        }
        let server = refuse_one_request(listener);
        let e = spec.open(&env).unwrap().list("").await.unwrap_err();
        (server.await.unwrap(), e.to_string())
    }

    /// MOCO's Job environment (`AZURE_STORAGE_ACCOUNT`, `AZURE_STORAGE_KEY`) and an emulator's
    /// http endpoint, given as `endpointURL` or in `AZURE_STORAGE_ENDPOINT`, with or without
    /// a trailing `/`: the request goes there, signed with the account's key, whatever
    /// other variables the environment holds.
    #[tokio::test]
    async fn azure_takes_mocos_variables_and_an_http_endpoint() {
        let env = vars(&[
            ("AZURE_STORAGE_ACCOUNT", "devstoreaccount1"),
            ("AZURE_STORAGE_KEY", "a2V5"),
            ("CONTAINER", "c"),
            // Not Azure's: object_store would read `TOKEN` as a bearer token.
            ("TOKEN", "t"),
            ("ENDPOINT", "https://elsewhere.invalid"),
        ]);
        let in_spec = BucketSpec {
            name: "$(CONTAINER)".into(),
            endpoint: Some(String::new()),
            ..BucketSpec::from_url("azure://x").unwrap()
        };
        let in_env = BucketSpec {
            endpoint: None,
            ..in_spec.clone()
        };
        for spec in [in_spec, in_env] {
            let (head, e) = first_azure_request(spec, env.clone()).await;
            let request_line = head.lines().next().unwrap();
            assert_eq!(
                request_line, "GET /devstoreaccount1/c?restype=container&comp=list HTTP/1.1",
                "{head}"
            );
            assert!(
                head.to_ascii_lowercase()
                    .contains("\r\nauthorization: sharedkey devstoreaccount1:"),
                "{head}"
            );
            assert!(e.starts_with("azure://c/: "), "{e}");
            assert!(e.contains("403 Forbidden"), "{e}");
        }
    }

    #[test]
    fn an_azure_bucket_without_an_account_names_the_variable() {
        let spec = BucketSpec::from_url("azure://c").unwrap();
        for env in [
            vars(&[]),
            vars(&[("AZURE_STORAGE_KEY", "a2V5")]),
            // object_store's bare name is not read (only `AZURE_*` are).
            vars(&[("ACCOUNT_NAME", "a"), ("AZURE_STORAGE_KEY", "a2V5")]),
        ] {
            let e = spec.open(&env).unwrap_err().to_string();
            assert!(e.starts_with("AZURE_STORAGE_ACCOUNT: not set"), "{e}");
        }
        for env in [
            vars(&[
                ("AZURE_STORAGE_ACCOUNT", "a"),
                ("AZURE_STORAGE_KEY", "a2V5"),
            ]),
            vars(&[
                ("AZURE_STORAGE_ACCOUNT_NAME", "a"),
                ("AZURE_STORAGE_KEY", "a2V5"),
            ]),
            vars(&[("AZURE_STORAGE_USE_EMULATOR", "true")]),
        ] {
            spec.open(&env).unwrap();
        }
    }

    /// Only `AWS_*` reach the S3 client: a bare `TOKEN` in the environment (object_store
    /// reads it as a session token) must not sign the request.
    #[tokio::test]
    async fn s3_reads_only_aws_variables() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let spec = BucketSpec {
            endpoint: Some(format!(
                "http://127.0.0.1:{}",
                listener.local_addr().unwrap().port()
            )),
            path_style: true,
            region: Some("us-east-1".into()),
            ..BucketSpec::from_url("s3://b").unwrap()
        };
        let env = vars(&[
            ("AWS_ACCESS_KEY_ID", "k"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("TOKEN", "stray"),
            ("BUCKET", "other"),
        ]);
        let server = refuse_one_request(listener);
        let _ = spec.open(&env).unwrap().list("").await.unwrap_err();
        let head = server.await.unwrap().to_ascii_lowercase();
        assert!(head.starts_with("get /b?list-type=2"), "{head}");
        assert!(!head.contains("x-amz-security-token"), "{head}");
        assert!(head.contains("credential=k/"), "{head}");
    }

    /// MOCO reads `AZURE_STORAGE_CONNECTION_STRING` first; Azurite's form carries the
    /// endpoint, and a malformed one is named without showing its key.
    #[test]
    fn azure_reads_a_connection_string() {
        let env = vars(&[
            (
                AZURE_CONNECTION_STRING,
                "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;\
                 BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;",
            ),
            ("AZURE_STORAGE_ACCOUNT", "other"),
        ]);
        let spelt = azure_connection_string(&env).unwrap();
        assert_eq!(spelt["AZURE_STORAGE_ACCOUNT"], "devstoreaccount1");
        assert_eq!(spelt["AZURE_STORAGE_KEY"], "a2V5");
        assert_eq!(
            spelt["AZURE_STORAGE_ENDPOINT"],
            "http://127.0.0.1:1/devstoreaccount1"
        );
        // The spelt-out variables open the bucket as MOCO's names do.
        BucketSpec::from_url("azure://c")
            .unwrap()
            .open(&env)
            .unwrap();
        let cloud = azure_connection_string(&vars(&[(
            AZURE_CONNECTION_STRING,
            "AccountName=acct;AccountKey=k;EndpointSuffix=core.windows.net",
        )]))
        .unwrap();
        assert_eq!(
            cloud["AZURE_STORAGE_ENDPOINT"],
            "https://acct.blob.core.windows.net"
        );
        let dev = azure_connection_string(&vars(&[(
            AZURE_CONNECTION_STRING,
            "UseDevelopmentStorage=true",
        )]))
        .unwrap();
        assert_eq!(dev["AZURE_STORAGE_USE_EMULATOR"], "true");
        for bad in [
            "AccountKey=secretkey",
            "garbage-without-equals;AccountName=a",
            // Regression (issue 29, item 10): the key pasted without its name. The error
            // quoted the part's first 20 characters: the key's.
            "AccountName=a;c2VjcmV0a2V5LXNlY3JldGtleS1zZWNyZXQx",
        ] {
            let e = azure_connection_string(&vars(&[(AZURE_CONNECTION_STRING, bad)]))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(AZURE_CONNECTION_STRING), "{e}");
            assert!(!e.contains("secretkey"), "{e}");
            assert!(!e.contains("c2VjcmV0"), "{e}");
            assert!(!e.contains("garbage"), "{e}");
        }
        let e = azure_connection_string(&vars(&[(
            AZURE_CONNECTION_STRING,
            "AccountName=a;c2VjcmV0a2V5LXNlY3JldGtleS1zZWNyZXQx",
        )]))
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "AZURE_STORAGE_CONNECTION_STRING: part 2 (after AccountName) is not Name=value; \
             expected Name=value parts separated by `;`"
        );
    }

    #[test]
    fn a_missing_ca_file_is_named() {
        let mut spec = BucketSpec::from_url("s3://b").unwrap();
        spec.ca_cert = Some("/nonexistent/ca.pem".into());
        let e = spec.open(&BTreeMap::new()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("bucketConfig.caCert: /nonexistent/ca.pem"),
            "{e}"
        );
    }
}
