//! The `moco.cybozu.com/prevent-delete` annotation: on the primary while a replica lags more
//! than `maxDelaySecondsForPodDeletion`, nowhere otherwise.

use crate::assessment::View;
use crate::operation::{Operation, Step};

pub(super) fn prevent_delete(v: &View<'_>) -> Vec<Step> {
    let want_on_primary = v.assessment.prevent_pod_deletion;
    v.instances()
        .filter(|i| i.pod.exists)
        .filter_map(|i| {
            let want = want_on_primary && i.index == v.assessment.primary;
            (i.pod.prevent_delete != want).then(|| {
                Step::new(Operation::SetPreventDelete {
                    index: i.index,
                    enabled: want,
                })
            })
        })
        .collect()
}
