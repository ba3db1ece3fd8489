//! The controller container of the install manifests, whose args the binary must accept.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::check;

/// The repository root (`testing/`'s parent directory).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `moco-controller` container of the one `moco-controller` Deployment among `docs`.
pub fn controller_container(docs: &[Value]) -> Value {
    let deployments: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "moco-controller")
        .collect();
    assert_eq!(deployments.len(), 1, "one moco-controller Deployment");
    let containers = deployments[0]["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap_or_else(|| panic!("no containers in the moco-controller Deployment"));
    containers
        .iter()
        .find(|c| c["name"] == "moco-controller")
        .unwrap_or_else(|| panic!("no container moco-controller"))
        .clone()
}

/// The controller container of `deploy/deployment.yaml`.
pub fn deploy_container() -> Value {
    let path = repo().join("deploy/deployment.yaml");
    let text = check(
        std::fs::read_to_string(&path),
        "read deploy/deployment.yaml",
    );
    let docs: Vec<Value> = check(
        serde_saphyr::from_multiple(&text),
        "parse deploy/deployment.yaml",
    );
    controller_container(&docs)
}

/// A YAML/JSON list of strings.
pub fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {value}"))
        .iter()
        .map(|v| {
            v.as_str()
                .unwrap_or_else(|| panic!("not a string: {v}"))
                .to_owned()
        })
        .collect()
}
