//! The S3 back-end against a real S3-compatible server on loopback (moto's, which
//! `scripts/test.sh` installs, see `tests/src/s3.rs`): a multipart upload streamed, listed, read back and deleted, and
//! a failed upload that leaves no object. Without the server the test fails, unless
//! `MOCO_SKIP_OBJECT_STORES=1`.

use moco_backup::BucketSpec;
use moco_tests::object_store::{
    a_missing_bucket_is_named, data, streams_both_ways, upload_whose_source_fails,
};
use moco_tests::s3::{create_bucket, moto, moto_env, moto_spec, put_object_raw};

#[tokio::test]
async fn s3_objects_stream_both_ways_and_a_failed_upload_leaves_nothing() {
    let test = "moco-backup s3_objects_stream_both_ways_and_a_failed_upload_leaves_nothing";
    let Some(server) = moto(test) else {
        return;
    };
    create_bucket(server.port, "moco-test").await;
    let spec = BucketSpec {
        name: "$(BUCKET)".into(),
        ..moto_spec(&server.endpoint, "s3://placeholder")
    };
    let mut env = moto_env();
    env.insert("BUCKET".into(), "moco-test".into());
    let bucket = spec.open(&env).unwrap();

    // 20 MiB: four parts of 5 MiB, streamed.
    let data = data();
    streams_both_ways(&bucket, &data).await;

    // The source fails after two parts: the multipart upload is aborted, nothing is listed.
    upload_whose_source_fails(&bucket, &data).await;
    assert_eq!(bucket.list("moco/ns/db/broken").await.unwrap(), []);

    bucket.delete(moco_tests::object_store::KEY).await.unwrap();
    assert_eq!(bucket.list("").await.unwrap(), []);

    // A bucket that does not exist is named in the error.
    a_missing_bucket_is_named(&spec, &env, "no-such-bucket", "s3://no-such-bucket").await;
}

/// Regression (issue 29, item 5): object_store fails a whole page of an S3 listing at a key
/// with an empty or `..` segment (legal in S3), so one such object broke restore, list,
/// prune, verify and the archiver. Such keys are left out and reported (two of them
/// side by side too); every other key of the page, and of the pages after it, is listed.
#[tokio::test]
async fn s3_keys_that_are_no_paths_are_skipped_and_the_rest_listed() {
    let test = "moco-backup s3_keys_that_are_no_paths_are_skipped_and_the_rest_listed";
    let Some(server) = moto(test) else {
        return;
    };
    let bucket = moco_tests::s3::moto_bucket(server.port, "moco-keys").await;
    let mut good = Vec::new();
    for i in 0..40 {
        let key = format!("moco/ns/db/k{i:03}");
        bucket.upload(&key, &b"x"[..]).await.unwrap();
        good.push(key);
    }
    let bad = [
        "moco/ns/db/k000//first",
        "moco/ns/db/k010//x",
        "moco/ns/db/k020/../y",
        "moco/ns/db/k025//a",
        "moco/ns/db/k025//b",
        "moco/ns/db/k039//last",
    ];
    for key in bad {
        put_object_raw(server.port, "moco-keys", key, b"x").await;
    }
    let listing = bucket.listing("moco/ns/db").await.unwrap();
    assert_eq!(
        listing
            .objects
            .iter()
            .map(|o| o.key.as_str())
            .collect::<Vec<_>>(),
        good,
    );
    assert_eq!(listing.skipped, bad);
    assert_eq!(bucket.list("moco/ns/db").await.unwrap(), listing.objects);
    // What is built on listings works past them: the backups of the cluster are listed.
    assert!(
        moco_backup::catalog::list(&bucket, "moco/ns/db")
            .await
            .unwrap()
            .is_empty()
    );
}
