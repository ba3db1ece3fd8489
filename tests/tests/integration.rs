//! The integration tests of `moco-tests`, one module per former test file, linked into one
//! test binary: a binary per file linked the whole dependency graph each time, and the
//! workspace's ~70 of them filled CI's disk. One module runs with
//! `cargo test -p moco-tests --test integration <module>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_clone;
mod agent_credentials;
mod agent_init;
mod agent_restore;
mod agent_rotation;
mod backup_azure;
mod backup_faults;
mod backup_hostile;
mod backup_physical;
mod backup_s3;
mod bench_kube_backup;
mod docs_claims;
mod kube_accounts;
mod kube_archive;
mod kube_backup;
mod kube_clone;
mod kube_clustering;
mod kube_drills;
mod kube_install;
mod kube_mysql;
mod kube_operator;
mod kube_pitr;
mod kube_rbac;
mod kube_restore;
mod kube_rollout;
mod kube_rotation;
mod kube_runner;
mod kube_seeds;
mod layout;
mod local_accounts;
mod local_backup;
mod local_bad_input;
mod local_bringup;
mod local_failover;
mod local_faults;
mod local_hung;
mod local_inprocess;
mod local_pitr;
mod local_recovery;
mod local_rotation;
mod local_scale;
mod local_shrink;
mod local_soak;
mod local_switchover;
mod local_tls;
mod readme_first_command;
mod test_layout;
mod test_scripts;
