//! Backups read from a bucket that someone else could write: whatever its objects say, a
//! restore writes only inside its own directories. Against a real server (the replay needs
//! one) and a directory bucket whose objects the test writes as an attacker would.

use std::collections::BTreeMap;
use std::path::Path;

use moco_backup::binlog::events::Gtid;
use moco_backup::binlog::replay::{ReplayError, ReplayTarget, replay};
use moco_backup::binlog::timeline::{Plan, SEGMENT_FORMAT, Segment, Step};
use moco_backup::physical::ObjectRecord;
use moco_backup::{Bucket, BucketSpec};
use moco_tests::local::server_or_skip;
use moco_tests::pod::{pod_admin, ready_pod, test_password};

/// `data` compressed by the `zstd` command (one frame).
fn zstd(data: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut child = std::process::Command::new("zstd")
        .args(["-q", "-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    out.stdout
}

fn sha256(data: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, data)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Stores `data` (zstd) as the archive's object `name` under `prefix`; returns its record.
async fn put_segment_object(
    bucket: &Bucket,
    prefix: &str,
    name: &str,
    data: &[u8],
) -> ObjectRecord {
    let stored = zstd(data);
    bucket
        .upload(&format!("{prefix}/binlog/{name}"), &stored[..])
        .await
        .unwrap();
    ObjectRecord {
        key: name.to_owned(),
        size: stored.len() as u64,
        uncompressed_size: data.len() as u64,
        sha256: sha256(&stored),
    }
}

/// Every file under `dir`, relative to it.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Regression (issue 29, item 1): the replay wrote each archived file to
/// `scratch.join(segment.file)`, the name taken from the bucket's JSON, so a segment named
/// `../victim` (or an absolute path) truncated that file, wrote the object's bytes into it and
/// deleted it afterwards. The scratch file is now named by the step's position: the victim
/// files are untouched whatever the segment says its file is called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_segment_never_writes_outside_the_scratch_dir() {
    let test = "a_replayed_segment_never_writes_outside_the_scratch_dir";
    let Some(binary) = server_or_skip(test) else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let pod = ready_pod(&binary, root.path(), 0).await;
    let admin = pod_admin(&pod);
    let bucket = BucketSpec::from_url(&root.path().join("bucket").display().to_string())
        .unwrap()
        .open(&BTreeMap::new())
        .unwrap();
    let prefix = "moco/local/src";
    let victims = root.path().join("victims");
    std::fs::create_dir_all(&victims).unwrap();
    let relative_victim = victims.join("relative");
    let absolute_victim = victims.join("absolute");
    for v in [&relative_victim, &absolute_victim] {
        std::fs::write(v, b"precious").unwrap();
    }
    let scratch = root.path().join("work").join("scratch");
    let target = ReplayTarget {
        binlog_tool: binary.tool("mariadb-binlog").unwrap(),
        client: binary.tool("mariadb").unwrap(),
        host: "127.0.0.1".into(),
        port: pod.port,
        credentials: moco_adapters::ports::Credentials {
            user: "moco-admin".into(),
            password: test_password(moco_adapters::mysql::Account::Admin),
        },
        ssl_ca: None,
        scratch: scratch.clone(),
        log: root.path().join("replay.log"),
    };
    let names = [
        "../../victims/relative".to_owned(),
        absolute_victim.display().to_string(),
    ];
    for (i, name) in names.iter().enumerate() {
        let object = put_segment_object(
            &bucket,
            prefix,
            &format!("{i}.zst"),
            b"the attacker's bytes, not a binlog",
        )
        .await;
        let last = Gtid {
            domain: 0,
            server_id: 1,
            seq: 5,
        };
        let segment = Segment {
            format_version: SEGMENT_FORMAT,
            server_id: 1,
            file: name.clone(),
            archived_at_ms: 1,
            domain: 0,
            start_state: Vec::new(),
            runs: Vec::new(),
            object,
        };
        let plan = Plan {
            base: 0,
            steps: vec![Step {
                segment: 0,
                after: None,
                last,
            }],
            stop_before: None,
        };
        let e = replay(&bucket, prefix, &[segment], &plan, &target, &admin)
            .await
            .unwrap_err();
        // The bytes are not a binlog: refused as such, after landing in the scratch dir only.
        assert!(matches!(e, ReplayError::Corrupt { .. }), "{name}: {e}");
        for v in [&relative_victim, &absolute_victim] {
            assert_eq!(
                std::fs::read(v).unwrap(),
                b"precious",
                "{name}: {} was overwritten",
                v.display()
            );
        }
        assert_eq!(
            files_under(&victims),
            ["absolute", "relative"],
            "{name}: files appeared beside the victims"
        );
    }
    let _ = admin.disconnect().await;
}
