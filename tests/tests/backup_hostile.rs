//! Backups read from a bucket that someone else could write: whatever its objects say, a
//! restore writes only inside its own directories. Against a real server (the replay needs
//! one) and a directory bucket whose objects the test writes as an attacker would.

use std::collections::BTreeMap;
use std::path::Path;

use moco_backup::mariadb::binlog::events::Gtid;
use moco_backup::mariadb::binlog::replay::{ReplayError, ReplayTarget, replay};
use moco_backup::mariadb::binlog::timeline::{Plan, SEGMENT_FORMAT, Segment, Step};
use moco_backup::mariadb::physical::ObjectRecord;
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
        credentials: moco_cluster::ports::Credentials {
            user: "moco-admin".into(),
            password: test_password(moco_core::moco_accounts::Account::Admin),
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

/// One xbstream chunk (`P` payload or `E` end of file) as mariadb-backup writes it.
fn xbstream_chunk(kind: u8, path: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = b"XBSTCK01".to_vec();
    out.push(0);
    out.push(kind);
    out.extend((path.len() as u32).to_le_bytes());
    out.extend(path.as_bytes());
    if kind == b'E' {
        return out;
    }
    out.extend((payload.len() as u64).to_le_bytes());
    out.extend(0u64.to_le_bytes());
    // mbstream checks the payload's CRC-32 (zlib's).
    out.extend(crc32(payload).to_le_bytes());
    out.extend(payload);
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Stores `stream` as a complete physical backup under `prefix`, its manifest matching it.
async fn put_backup(bucket: &Bucket, prefix: &str, stream: &[u8]) {
    use moco_backup::mariadb::physical::{BASE_KEY, FORMAT_VERSION, MANIFEST_KEY, Manifest};
    let stored = zstd(stream);
    bucket
        .upload(&format!("{prefix}/{BASE_KEY}"), &stored[..])
        .await
        .unwrap();
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        kind: "mariadb-physical".into(),
        started_at: moco_core::time::Timestamp(1_795_568_400),
        finished_at: moco_core::time::Timestamp(1_795_568_405),
        binlog_state_before: Default::default(),
        position: None,
        base: ObjectRecord {
            key: BASE_KEY.into(),
            size: stored.len() as u64,
            uncompressed_size: stream.len() as u64,
            sha256: sha256(&stored),
        },
    };
    bucket
        .upload(
            &format!("{prefix}/{MANIFEST_KEY}"),
            &serde_json::to_vec(&manifest).unwrap()[..],
        )
        .await
        .unwrap();
}

/// Regression (issue 29, item 1): a backup whose xbstream names `../outside/evil` went to
/// `mbstream -x`, which refuses the name but exits 0, so the restore went on to prepare a
/// half-unpacked copy and failed there, saying nothing of the name. The stream is now
/// stopped at that chunk, and the error names it; nothing is written outside the datadir.
#[tokio::test]
async fn a_backup_naming_a_path_outside_the_datadir_is_refused_by_name() {
    let test = "a_backup_naming_a_path_outside_the_datadir_is_refused_by_name";
    let Some(binary) = server_or_skip(test) else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let bucket = BucketSpec::from_url(&root.path().join("bucket").display().to_string())
        .unwrap()
        .open(&BTreeMap::new())
        .unwrap();
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let mut stream = xbstream_chunk(b'P', "ibdata1", &[7u8; 4096]);
    stream.extend(xbstream_chunk(b'E', "ibdata1", &[]));
    for name in ["../outside/evil", "db/../../outside/evil2"] {
        stream.extend(xbstream_chunk(b'P', name, b"pwned"));
        stream.extend(xbstream_chunk(b'E', name, &[]));
    }
    let prefix = "moco/local/src/20261123-230000";
    put_backup(&bucket, prefix, &stream).await;
    let target = moco_adapters::instance::clone::RestoreTarget {
        backup_tool: binary.tool("mariadb-backup").unwrap(),
        mbstream: binary.tool("mbstream").unwrap(),
        datadir: root.path().join("data"),
        log: root.path().join("restore.log"),
    };
    let e = moco_backup::mariadb::physical::restore(&bucket, prefix, &target)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"../outside/evil\""), "{e}");
    assert!(
        files_under(&outside).is_empty(),
        "{:?}",
        files_under(&outside)
    );
}

/// Regression (issue 29, item 6): a backup's stream was unpacked whole before its size was
/// compared with the manifest's, so a base of a few KiB declared as 1 MiB that unpacks to
/// 64 MiB (its hash matches: the manifest is the attacker's too) filled the datadir first.
/// The decoder now stops at the declared size, and the datadir holds no more than that.
#[tokio::test]
async fn a_backup_unpacking_past_its_manifest_stops_at_the_declared_size() {
    let test = "a_backup_unpacking_past_its_manifest_stops_at_the_declared_size";
    let Some(binary) = server_or_skip(test) else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let bucket = BucketSpec::from_url(&root.path().join("bucket").display().to_string())
        .unwrap()
        .open(&BTreeMap::new())
        .unwrap();
    let mut stream = xbstream_chunk(b'P', "ibdata1", &vec![0u8; 64 << 20]);
    stream.extend(xbstream_chunk(b'E', "ibdata1", &[]));
    let prefix = "moco/local/src/20261123-230000";
    put_backup(&bucket, prefix, &stream).await;
    // The attacker's manifest declares 1 MiB unpacked.
    let key = format!("{prefix}/{}", moco_backup::mariadb::physical::MANIFEST_KEY);
    let mut manifest = moco_backup::mariadb::physical::manifest(&bucket, prefix)
        .await
        .unwrap();
    manifest.base.uncompressed_size = 1 << 20;
    bucket
        .upload(&key, &serde_json::to_vec(&manifest).unwrap()[..])
        .await
        .unwrap();
    let datadir = root.path().join("data");
    let target = moco_adapters::instance::clone::RestoreTarget {
        backup_tool: binary.tool("mariadb-backup").unwrap(),
        mbstream: binary.tool("mbstream").unwrap(),
        datadir: datadir.clone(),
        log: root.path().join("restore.log"),
    };
    let e = moco_backup::mariadb::physical::restore(&bucket, prefix, &target)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than the 1048576 bytes"), "{e}");
    let unpacked: u64 = files_under(&datadir)
        .iter()
        .map(|f| std::fs::metadata(datadir.join(f)).unwrap().len())
        .sum();
    assert!(unpacked <= 1 << 20, "{unpacked} bytes unpacked");
}
