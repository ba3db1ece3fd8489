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
//! The versions:
//! 1. MOCO's rendering.
//! 2. mysqld's `terminationMessagePolicy` is `FallbackToLogsOnError`: a mysqld that exits on a
//!    bad option leaves the end of its log (the option it refused) as its termination message,
//!    where a stalled rollout reads its reason (`crate::partition`).
//! 3. Exists to test the contract across an upgrade on a real control plane: an operator
//!    started with the hidden flag `--latest-reconciler-version 3` renders it as version 2
//!    plus one Pod-template annotation.

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use moco_api::annotations::UPGRADE_TEST_ANNOTATION;

pub use moco_core::resources::LATEST_RECONCILER_VERSION;

/// The version from which mysqld falls back to its log for its termination message.
pub const TERMINATION_LOG_VERSION: u32 = 2;

/// The upgrade-test version (see the module documentation).
pub const UPGRADE_TEST_VERSION: u32 = 3;

/// The highest version an operator may be told is its latest.
pub const HIGHEST_KNOWN: u32 = UPGRADE_TEST_VERSION;

/// What `version` changes in the mysqld container over version 1.
pub fn mysqld_container(version: u32, container: &mut Container) {
    if version >= TERMINATION_LOG_VERSION {
        container.termination_message_policy = Some("FallbackToLogsOnError".into());
    }
}

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
        pod_template_metadata(2, &mut meta);
        assert_eq!(meta, ObjectMeta::default());
        pod_template_metadata(3, &mut meta);
        assert_eq!(
            meta.annotations.unwrap().get(UPGRADE_TEST_ANNOTATION),
            Some(&"3".to_owned())
        );
    }

    #[test]
    fn from_version_2_mysqld_leaves_its_log_as_the_termination_message() {
        let mut c = Container::default();
        mysqld_container(1, &mut c);
        assert_eq!(c, Container::default());
        for v in [2, 3] {
            let mut c = Container::default();
            mysqld_container(v, &mut c);
            assert_eq!(
                c.termination_message_policy.as_deref(),
                Some("FallbackToLogsOnError")
            );
        }
    }
}
