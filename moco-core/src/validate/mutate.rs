//! The `MySQLCluster` mutating webhook: finalizer and `serverIDBase` on CREATE, and on UPDATE
//! the stored `serverIDBase` when the update omits it. The webhook and `moco validate` both
//! decide through these functions, so they cannot disagree.

/// Finalizer MOCO puts on every `MySQLCluster`.
pub const FINALIZER: &str = "moco.cybozu.com/mysqlcluster";

/// Largest `serverIDBase` the mutating webhook picks (2^30).
pub const MAX_SERVER_ID_BASE: i32 = 1 << 30;

/// The fields the mutating webhook reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MutationInput {
    /// `metadata.finalizers`.
    pub finalizers: Vec<String>,
    /// `spec.serverIDBase` (0 when not given).
    pub server_id_base: i32,
}

/// What the mutating webhook changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mutation {
    /// Append [`FINALIZER`] to `metadata.finalizers`.
    pub add_finalizer: bool,
    /// Set `spec.serverIDBase` to this value.
    pub server_id_base: Option<i32>,
}

impl Mutation {
    /// Whether anything changes.
    pub fn is_empty(&self) -> bool {
        !self.add_finalizer && self.server_id_base.is_none()
    }
}

/// Maps a random draw to a `serverIDBase` in `[1, 2^30]`, like MOCO (`(r & 0x3FFFFFFF) + 1`).
pub fn server_id_base_from_random(random: u32) -> i32 {
    // The mask keeps 30 bits, so the sum is at most 2^30 and fits an i32.
    i32::try_from(random & 0x3FFF_FFFF).unwrap_or(0) + 1
}

/// Decides the CREATE mutation. `random` is drawn by the caller (e.g. from the OS) and only
/// used when `serverIDBase` is 0.
pub fn mutate_cluster_create(input: &MutationInput, random: u32) -> Mutation {
    Mutation {
        add_finalizer: !input.finalizers.iter().any(|f| f == FINALIZER),
        server_id_base: (input.server_id_base == 0).then(|| server_id_base_from_random(random)),
    }
}

/// Decides the UPDATE mutation: an update that omits `serverIDBase` (0, as `kubectl replace`
/// with a manifest written without it sends) keeps the stored one, which cannot change
/// anyway. MOCO's webhook does not mutate updates, so such an update was denied ("must be a
/// positive integer") while `kubectl apply` of the same manifest passed.
pub fn mutate_cluster_update(input: &MutationInput, stored_server_id_base: i32) -> Mutation {
    Mutation {
        add_finalizer: false,
        server_id_base: (input.server_id_base == 0 && stored_server_id_base != 0)
            .then_some(stored_server_id_base),
    }
}
