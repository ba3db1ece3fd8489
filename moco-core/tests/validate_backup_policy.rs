//! Table tests of the `BackupPolicy` admission rules and the `MySQLCluster` mutation.

use moco_core::validate::{
    BackupPolicyView, ClusterReference, FINALIZER, MAX_SERVER_ID_BASE, Mutation, MutationInput,
    Rule, mutate_cluster_create, server_id_base_from_random, validate_backup_policy,
    validate_backup_policy_delete,
};

#[test]
fn schedules() {
    let cases = [
        ("@daily", true),
        ("0 */6 * * *", true),
        ("@every 12h", true),
        ("CRON_TZ=Asia/Tokyo 0 2 * * *", true),
        ("", false),
        ("0 0 * *", false),
        ("61 * * * *", false),
        ("@fortnightly", false),
    ];
    for (schedule, ok) in cases {
        let got = validate_backup_policy(&BackupPolicyView {
            name: "daily".into(),
            schedule: schedule.into(),
        });
        assert_eq!(got.is_empty(), ok, "{schedule:?}: {got:?}");
        if !ok {
            assert_eq!(got[0].rule, Rule::BackupSchedule);
            assert_eq!(got[0].field.as_str(), "spec.schedule");
            assert!(got[0].message.starts_with(&format!(
                "schedule {schedule:?} is not a valid cron schedule"
            )));
        }
    }
}

fn cluster(name: &str, policy: Option<&str>) -> ClusterReference {
    ClusterReference {
        cluster_name: name.into(),
        backup_policy_name: policy.map(str::to_owned),
    }
}

#[test]
fn delete_while_referenced() {
    let clusters = [
        cluster("a", Some("daily")),
        cluster("b", None),
        cluster("c", Some("hourly")),
        cluster("d", Some("daily")),
    ];
    assert!(validate_backup_policy_delete("weekly", &clusters).is_empty());
    assert!(validate_backup_policy_delete("daily", &[]).is_empty());
    let got = validate_backup_policy_delete("hourly", &clusters);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].rule, Rule::BackupPolicyInUse);
    let got = validate_backup_policy_delete("daily", &clusters);
    assert_eq!(
        got[0].to_string(),
        "metadata.name: BackupPolicy \"daily\" cannot be deleted: it is still referenced by spec.backupPolicyName of MySQLClusters a, d"
    );
}

#[test]
fn mutation() {
    let cases = [
        (
            MutationInput::default(),
            0u32,
            Mutation {
                add_finalizer: true,
                server_id_base: Some(1),
            },
        ),
        (
            MutationInput::default(),
            u32::MAX,
            Mutation {
                add_finalizer: true,
                server_id_base: Some(MAX_SERVER_ID_BASE),
            },
        ),
        (
            MutationInput::default(),
            0x4000_0000,
            Mutation {
                add_finalizer: true,
                server_id_base: Some(1),
            },
        ),
        (
            MutationInput::default(),
            41,
            Mutation {
                add_finalizer: true,
                server_id_base: Some(42),
            },
        ),
        (
            MutationInput {
                finalizers: vec!["other".into()],
                server_id_base: 7,
            },
            41,
            Mutation {
                add_finalizer: true,
                server_id_base: None,
            },
        ),
        (
            MutationInput {
                finalizers: vec![FINALIZER.into()],
                server_id_base: 0,
            },
            99,
            Mutation {
                add_finalizer: false,
                server_id_base: Some(100),
            },
        ),
        (
            MutationInput {
                finalizers: vec![FINALIZER.into()],
                server_id_base: 5,
            },
            99,
            Mutation::default(),
        ),
    ];
    for (input, random, want) in cases {
        assert_eq!(
            mutate_cluster_create(&input, random),
            want,
            "{input:?} {random}"
        );
    }
    assert!(Mutation::default().is_empty());
    for r in [0, 1, 0x3FFF_FFFF, 0x4000_0000, 0xFFFF_FFFF, 123_456_789] {
        let base = server_id_base_from_random(r);
        assert!((1..=MAX_SERVER_ID_BASE).contains(&base), "{r} -> {base}");
    }
}
