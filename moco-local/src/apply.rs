//! `moco local apply --dir DIR -f FILE`: accounts and databases as code on a local cluster.
//!
//! The file holds `MySQLUser` and `MySQLDatabase` documents (`moco-rs.io/v1alpha1`, as on
//! Kubernetes: `docs/accounts.md`) and the `Secret`s their passwords are in (`data` in base64,
//! or `stringData`). Every document is first checked as the API server and the operator's
//! webhooks would check it (`moco validate`'s rules: the CRD schema, its CEL rules, admission),
//! and `spec.clusterName` must name this cluster; any finding refuses the whole file and
//! nothing is applied. Then each database, then each account, is made as declared on the
//! primary, by the planner and SQL the operator uses; what changed is printed. Running the
//! command again puts back what was changed by hand. Objects left out of the file are not
//! dropped.
//!
//! What the command made or took over is recorded in `DIR/declared.json` (written before the
//! server is changed), as the operator records it in a status: an account or database that
//! exists and is not in the record is left alone unless its object sets `spec.adopt`
//! ([`moco_core::accounts::claim`]).

use std::collections::BTreeMap;
use std::path::Path;

use crate::platform::secret::Secret;
use crate::platform::sql;
use moco_adapters::mysql::MysqlInstance;
use moco_api::accounts::declared::{account_spec, all_privilege_levels, database_spec};
use moco_api::accounts::{MySQLDatabase, MySQLUser};
use moco_api::offline::{ACCOUNTS_API_VERSION, Document, OfflineValidator, parse_documents};
use moco_core::accounts::{Claim, Ownership, claim, plan_account, plan_database};
use serde_json::Value;

use crate::control::{open, read_status};
use crate::error::{Error, usage};
use crate::options::ApplyOptions;
use crate::output::out;

/// One declared object and where it came from, for messages.
struct Declared<T> {
    at: String,
    object: T,
}

/// `apply`: checks the file, then makes its databases and accounts on the primary.
pub async fn apply(options: ApplyOptions) -> Result<(), Error> {
    let (layout, manifest) = open(&options.dir)?;
    let file = options.file.display().to_string();
    let text = read(&options.file)?;
    let docs = parse_documents(&file, &text).map_err(|e| usage(format!("-f {e}")))?;
    let validator =
        OfflineValidator::new().map_err(|e| usage(format!("cannot check {file}: {e}")))?;
    let report = validator.validate(&docs, &[]);
    let mut findings: Vec<String> = report.findings.iter().map(ToString::to_string).collect();
    let secrets = secrets(&docs, &mut findings);
    let mut users = Vec::new();
    let mut databases = Vec::new();
    for doc in &docs {
        if doc.value.get("apiVersion").and_then(Value::as_str) != Some(ACCOUNTS_API_VERSION) {
            continue;
        }
        let kind = doc.value.get("kind").and_then(Value::as_str).unwrap_or("");
        let at = |name: &str| format!("{}:{}: {kind}/{name}", doc.file, doc.index);
        match kind {
            "MySQLUser" => match serde_json::from_value::<MySQLUser>(doc.value.clone()) {
                Ok(u) => users.push(Declared {
                    at: at(u.metadata.name.as_deref().unwrap_or("")),
                    object: u,
                }),
                // The validator reported it.
                Err(_) => continue,
            },
            "MySQLDatabase" => match serde_json::from_value::<MySQLDatabase>(doc.value.clone()) {
                Ok(d) => databases.push(Declared {
                    at: at(d.metadata.name.as_deref().unwrap_or("")),
                    object: d,
                }),
                Err(_) => continue,
            },
            _ => {}
        }
    }
    let mut passwords = BTreeMap::new();
    for u in &users {
        let cluster = &u.object.spec.cluster_name;
        if *cluster != manifest.name {
            findings.push(format!(
                "{}: spec.clusterName: {cluster:?} is not this cluster ({:?})",
                u.at, manifest.name
            ));
        }
        let r = &u.object.spec.password_secret_key_ref;
        match secrets.get(&r.name).and_then(|s| s.get(&r.key)) {
            Some(p) if !p.is_empty() => {
                passwords.insert(u.at.clone(), p.clone());
            }
            _ => findings.push(format!(
                "{}: spec.passwordSecretKeyRef: no Secret {:?} with key {:?} in {file}",
                u.at, r.name, r.key
            )),
        }
    }
    for d in &databases {
        let cluster = &d.object.spec.cluster_name;
        if *cluster != manifest.name {
            findings.push(format!(
                "{}: spec.clusterName: {cluster:?} is not this cluster ({:?})",
                d.at, manifest.name
            ));
        }
    }
    if !findings.is_empty() {
        for f in &findings {
            out!("{f}");
        }
        return Err(usage(format!(
            "-f {file}: {} problem(s); nothing was applied",
            findings.len()
        )));
    }
    if users.is_empty() && databases.is_empty() {
        return Err(usage(format!(
            "-f {file}: no MySQLUser or MySQLDatabase ({ACCOUNTS_API_VERSION})"
        )));
    }

    let primary = read_status(&layout)?.current_primary_index;
    let secret = Secret::load(&layout)?;
    let admin = MysqlInstance::new(sql::admin_options(&manifest, &layout, primary, &secret)?);
    let failed = |at: &str, e: &dyn std::fmt::Display| usage(format!("{at}: {e}"));
    let record_path = layout.root().join(RECORD_FILE);
    let mut record = Record::load(&record_path)?;
    let mut refused = 0;
    for d in &databases {
        let spec = database_spec(&d.object);
        let observed = admin
            .observe_database(&spec.name)
            .await
            .map_err(|e| failed(&d.at, &e))?;
        let owned = record.databases.get(&spec.name).copied();
        match claim(observed.is_some(), owned, d.object.spec.adopt, false) {
            Claim::Keep(_) => {}
            Claim::Record(o) => {
                record.databases.insert(spec.name.clone(), o);
                record.save(&record_path)?;
            }
            Claim::Refuse => {
                refused += 1;
                out!(
                    "{}: database {}: exists and was not made by moco local apply: nothing \
                     changed (set spec.adopt: true to take it over)",
                    d.at,
                    spec.name
                );
                continue;
            }
        }
        match plan_database(&spec, observed.as_ref()) {
            Some(change) => {
                admin
                    .apply_database(&spec, &change)
                    .await
                    .map_err(|e| failed(&d.at, &e))?;
                out!("{}: database {}: {change:?}", d.at, spec.name);
            }
            None => out!("{}: database {}: unchanged", d.at, spec.name),
        }
    }
    for u in &users {
        let password = passwords.get(&u.at).cloned().unwrap_or_default();
        let mut all = BTreeMap::new();
        for level in all_privilege_levels(&u.object).map_err(|e| failed(&u.at, &e))? {
            let listed = admin
                .all_privileges(level)
                .await
                .map_err(|e| failed(&u.at, &e))?;
            all.insert(level, listed);
        }
        let spec = account_spec(&u.object, &all).map_err(|e| failed(&u.at, &e))?;
        let observed = admin
            .observe_account(&spec.name, &spec.host, &password)
            .await
            .map_err(|e| failed(&u.at, &e))?;
        let who = format!("'{}'@'{}'", spec.name, spec.host);
        let owned = record.accounts.get(&who).copied();
        match claim(observed.is_some(), owned, u.object.spec.adopt, false) {
            Claim::Keep(_) => {}
            Claim::Record(o) => {
                record.accounts.insert(who.clone(), o);
                record.save(&record_path)?;
            }
            Claim::Refuse => {
                refused += 1;
                out!(
                    "{}: account {who}: exists and was not made by moco local apply: nothing \
                     changed (set spec.adopt: true to take it over: its password is set and \
                     what it holds beyond spec.grants is revoked)",
                    u.at
                );
                continue;
            }
        }
        let changes = plan_account(&spec, observed.as_ref(), false);
        if changes.is_empty() {
            out!("{}: account {who}: unchanged", u.at);
            continue;
        }
        admin
            .apply_account(&spec, &password, &changes)
            .await
            .map_err(|e| failed(&u.at, &e))?;
        let said: Vec<String> = changes.iter().map(ToString::to_string).collect();
        out!("{}: account {who}: {}", u.at, said.join("; "));
    }
    let _ = admin.disconnect().await;
    if refused > 0 {
        return Err(usage(format!(
            "-f {file}: {refused} object(s) name what exists and was not made here; they were \
             left alone (the others were applied)"
        )));
    }
    Ok(())
}

/// The record of what `apply` made or took over, in the cluster's directory.
const RECORD_FILE: &str = "declared.json";

/// What `apply` holds: accounts (`'name'@'host'`) and databases, each with how it came to.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Record {
    #[serde(default)]
    accounts: BTreeMap<String, Ownership>,
    #[serde(default)]
    databases: BTreeMap<String, Ownership>,
}

impl Record {
    fn load(path: &Path) -> Result<Record, Error> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| usage(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Record::default()),
            Err(e) => Err(usage(format!("{}: {e}", path.display()))),
        }
    }

    /// Replaces the file at once, before the server is changed.
    fn save(&self, path: &Path) -> Result<(), Error> {
        let bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| usage(format!("{}: {e}", path.display())))?;
        moco_adapters::modes::write_atomic(path, &bytes, 0o600)
            .map_err(|e| usage(format!("{}: {e}", path.display())))
    }
}

fn read(path: &Path) -> Result<String, Error> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| usage(format!("-f -: {e}")))?;
        return Ok(text);
    }
    std::fs::read_to_string(path).map_err(|e| usage(format!("-f {}: {e}", path.display())))
}

/// The `v1` Secrets of the file: name → key → value (`stringData` over `data`, as the API
/// server merges them). A value that is not base64 or not UTF-8 is a finding.
fn secrets(
    docs: &[Document],
    findings: &mut Vec<String>,
) -> BTreeMap<String, BTreeMap<String, String>> {
    use base64::Engine as _;
    let mut out = BTreeMap::new();
    for doc in docs {
        let v = &doc.value;
        if v.get("apiVersion").and_then(Value::as_str) != Some("v1")
            || v.get("kind").and_then(Value::as_str) != Some("Secret")
        {
            continue;
        }
        let name = v
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let mut keys = BTreeMap::new();
        for (key, value) in v
            .get("data")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let decoded = value
                .as_str()
                .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
                .and_then(|b| String::from_utf8(b).ok());
            match decoded {
                Some(text) => {
                    keys.insert(key.clone(), text);
                }
                None => findings.push(format!(
                    "{}:{}: Secret/{name}: data.{key}: not base64 of UTF-8 text",
                    doc.file, doc.index
                )),
            }
        }
        for (key, value) in v
            .get("stringData")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if let Some(text) = value.as_str() {
                keys.insert(key.clone(), text.to_owned());
            }
        }
        out.insert(name, keys);
    }
    out
}
