//! Which content-named ConfigMaps to delete: MOCO keeps the newest `limit` of a cluster's
//! my.cnf (and slow-log) ConfigMaps, the current one included, so a rollback can find the
//! previous configuration for a while.

/// A ConfigMap of the cluster, as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// Name.
    pub name: String,
    /// `metadata.creationTimestamp`, RFC 3339 (sorts as text).
    pub created: String,
}

/// The names to delete: those with `prefix` other than `current`, beyond the newest
/// `limit - 1` of them (the current one fills the last place). A limit below 1 keeps only the
/// current one.
pub fn to_delete(listed: &[Listed], prefix: &str, current: &str, limit: i32) -> Vec<String> {
    let mut old: Vec<&Listed> = listed
        .iter()
        .filter(|c| c.name.starts_with(prefix) && c.name != current)
        .collect();
    // Newest first; the name breaks ties so the result does not depend on list order.
    old.sort_by(|a, b| b.created.cmp(&a.created).then_with(|| b.name.cmp(&a.name)));
    let keep = usize::try_from(limit.saturating_sub(1)).unwrap_or(0);
    old.into_iter().skip(keep).map(|c| c.name.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(name: &str, created: &str) -> Listed {
        Listed {
            name: name.into(),
            created: created.into(),
        }
    }

    #[test]
    fn keeps_the_newest_and_never_touches_other_clusters_or_the_current_one() {
        let all = vec![
            listed("moco-a.1", "2026-01-01T00:00:01Z"),
            listed("moco-a.2", "2026-01-01T00:00:03Z"),
            listed("moco-a.3", "2026-01-01T00:00:02Z"),
            listed("moco-a.cur", "2026-01-01T00:00:00Z"),
            listed("moco-ab.1", "2026-01-01T00:00:00Z"),
        ];
        assert_eq!(
            to_delete(&all, "moco-a.", "moco-a.cur", 2),
            ["moco-a.3", "moco-a.1"]
        );
        assert_eq!(to_delete(&all, "moco-a.", "moco-a.cur", 3), ["moco-a.1"]);
        assert!(to_delete(&all, "moco-a.", "moco-a.cur", 10).is_empty());
        assert_eq!(to_delete(&all, "moco-a.", "moco-a.cur", 0).len(), 3);
    }
}
