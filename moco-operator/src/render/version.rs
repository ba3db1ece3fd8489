//! Reconciler versions: which rendering a cluster gets.
//!
//! Rewriting a StatefulSet's Pod template restarts every mysqld, so what a reconciler version
//! renders never changes from one operator release to the next (the snapshots in
//! `tests/snapshots/` hold that contract). A release that must render Pods differently adds a
//! version and keeps the code of the older ones as long as clusters may use them; a cluster
//! stays on the version recorded in `status.reconcileInfo` until its spec is edited
//! (`moco_core::resources::choose_reconciler_version`), so an operator upgrade restarts no
//! Pod by itself.
//!
//! Only version 1 is a product version. Version 2 exists to test that contract across an
//! upgrade on a real control plane: an operator started with the hidden flag
//! `--latest-reconciler-version 2` renders it as version 1 plus one Pod-template annotation.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use moco_api::annotations::UPGRADE_TEST_ANNOTATION;

pub use moco_core::resources::LATEST_RECONCILER_VERSION;

/// The upgrade-test version (see the module documentation).
pub const UPGRADE_TEST_VERSION: u32 = 2;

/// The highest version an operator may be told is its latest.
pub const HIGHEST_KNOWN: u32 = UPGRADE_TEST_VERSION;

/// What `version` adds to the Pod template's metadata over version 1.
pub fn pod_template_metadata(version: u32, metadata: &mut ObjectMeta) {
    if version >= UPGRADE_TEST_VERSION {
        metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(UPGRADE_TEST_ANNOTATION.into(), version.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_upgrade_test_version_annotates() {
        let mut meta = ObjectMeta::default();
        pod_template_metadata(1, &mut meta);
        assert_eq!(meta, ObjectMeta::default());
        pod_template_metadata(2, &mut meta);
        assert_eq!(
            meta.annotations.unwrap().get(UPGRADE_TEST_ANNOTATION),
            Some(&"2".to_owned())
        );
    }
}
