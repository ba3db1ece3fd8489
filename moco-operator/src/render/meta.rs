//! Labels of the objects the operator creates for a cluster. Their names, labels and owner
//! references derive from the cluster's identity, `moco_api::cluster::ClusterId`, which the
//! backup Jobs and `kubectl moco` use too.

use std::collections::BTreeMap;

/// `base` overlaid by `over`: the operator's labels win over the user's.
pub fn overlay(
    base: &BTreeMap<String, String>,
    over: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = base.clone();
    out.extend(over.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}
