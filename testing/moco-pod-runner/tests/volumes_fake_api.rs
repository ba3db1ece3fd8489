//! `volumes::prepare`, `refresh`, `mounts` and `remove`, and `env::resolve`, against an
//! in-memory stand-in for the API server (GET of ConfigMaps, Secrets, claims and
//! PersistentVolumes, POST of TokenRequests): the requests the runner makes and what it does
//! with the answers. The real control plane is tested elsewhere.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;
use moco_pod_runner::volumes::{self, VolumeError};
use serde_json::{Value, json};

/// What the fake API server holds and saw.
#[derive(Default)]
struct Fake {
    /// Objects by request path.
    objects: BTreeMap<String, Value>,
    /// TokenRequests received: (path, body).
    token_requests: Vec<(String, Value)>,
}

fn client(fake: Arc<Mutex<Fake>>) -> kube::Client {
    let service = tower::service_fn(move |req: Request<kube::client::Body>| {
        let fake = fake.clone();
        async move {
            let path = req.uri().path().to_owned();
            let method = req.method().clone();
            let body = req
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let mut f = fake.lock().unwrap();
            let (status, value) = if method == http::Method::POST && path.ends_with("/token") {
                let mut body: Value = serde_json::from_slice(&body).unwrap();
                f.token_requests.push((path.clone(), body.clone()));
                let n = f.token_requests.len();
                let secs = body["spec"]["expirationSeconds"].as_i64().unwrap();
                let exp = k8s_openapi::jiff::Timestamp::now()
                    + k8s_openapi::jiff::SignedDuration::from_secs(secs);
                body["status"] =
                    json!({"token": format!("token-{n}"), "expirationTimestamp": exp.to_string()});
                (StatusCode::CREATED, body)
            } else if let Some(v) = f.objects.get(&path) {
                (StatusCode::OK, v.clone())
            } else {
                (
                    StatusCode::NOT_FOUND,
                    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": format!("{path} not found"), "reason": "NotFound", "code": 404}),
                )
            };
            let resp = Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(
                    serde_json::to_vec(&value).unwrap(),
                ))
                .unwrap();
            Ok::<_, Infallible>(resp)
        }
    });
    kube::Client::new(service, "default")
}

/// The user and group the test runs as (the owner of a directory it made).
fn me(made: &Path) -> (u32, u32) {
    let m = fs::metadata(made).unwrap();
    (m.uid(), m.gid())
}

fn pod(host: &Path, uid: u32, gid: u32) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "mysql-0", "namespace": "ns", "uid": "pod-uid",
                     "labels": {"app": "moco", "role": "primary"}},
        "spec": {
            "serviceAccountName": "sa",
            "nodeName": "node-0",
            "securityContext": {"fsGroup": gid, "runAsUser": uid},
            "containers": [{
                "name": "mysqld",
                "image": "mysql",
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "password"}}}],
                "volumeMounts": [
                    {"name": "data", "mountPath": "/var/lib/mysql"},
                    {"name": "conf", "mountPath": "/etc/mysql-conf.d"},
                    {"name": "conf", "mountPath": "/etc/my.cnf", "subPath": "my.cnf"},
                    {"name": "kube-api-access-x", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true},
                    {"name": "tmp", "mountPath": "/tmp", "subPathExpr": "$(POD_NAME)"},
                    {"name": "host", "mountPath": "/host"}
                ]
            }],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "mysql-data-mysql-0"}},
                {"name": "conf", "configMap": {"name": "conf", "items": [{"key": "cnf", "path": "my.cnf"}]}},
                {"name": "sec", "secret": {"secretName": "sec", "defaultMode": 0o400}},
                {"name": "tmp", "emptyDir": {"medium": "Memory"}},
                {"name": "podinfo", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                {"name": "host", "hostPath": {"path": host.join("made/here").to_string_lossy(), "type": "DirectoryOrCreate"}},
                {"name": "kube-api-access-x", "projected": {"defaultMode": 0o644, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
                ]}}
            ]
        },
        "status": {"podIP": "10.200.1.5", "hostIP": "10.200.0.1"}
    }))
    .unwrap()
}

fn seed(fake: &mut Fake, pv_dir: &Path) {
    let o = &mut fake.objects;
    o.insert(
        "/api/v1/namespaces/ns/configmaps/conf".into(),
        json!({"metadata": {"name": "conf"}, "data": {"cnf": "[mysqld]\n"}}),
    );
    o.insert(
        "/api/v1/namespaces/ns/configmaps/kube-root-ca.crt".into(),
        json!({"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "PEM"}}),
    );
    o.insert(
        "/api/v1/namespaces/ns/secrets/sec".into(),
        json!({"metadata": {"name": "sec"}, "data": {"password": "czNjcmV0"}}),
    );
    o.insert(
        "/api/v1/namespaces/ns/persistentvolumeclaims/mysql-data-mysql-0".into(),
        json!({"metadata": {"name": "mysql-data-mysql-0", "namespace": "ns", "uid": "claim-uid"},
               "spec": {"volumeName": "pv-1"}, "status": {"phase": "Bound"}}),
    );
    o.insert(
        "/api/v1/persistentvolumes/pv-1".into(),
        json!({"metadata": {"name": "pv-1"},
               "spec": {"hostPath": {"path": pv_dir.to_string_lossy()},
                        "claimRef": {"name": "mysql-data-mysql-0", "namespace": "ns", "uid": "claim-uid"}}}),
    );
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().mode() & 0o7777
}

#[tokio::test]
async fn prepare_refresh_mount_remove() {
    let tmp = tempfile::tempdir().unwrap();
    let (uid, gid) = me(tmp.path());
    let pv_dir = tmp.path().join("state/volumes/pv-1");
    fs::create_dir_all(&pv_dir).unwrap();
    let fake = Arc::new(Mutex::new(Fake::default()));
    seed(&mut fake.lock().unwrap(), &pv_dir);
    let client = client(fake.clone());
    let mut p = pod(tmp.path(), uid, gid);
    let dir = tmp.path().join("state/pods/pod-uid/volumes");

    let mut vols = volumes::prepare(&client, &p, &dir, &BTreeMap::new())
        .await
        .unwrap();

    // The kube-api-access volume: a token for the Pod's ServiceAccount bound to the Pod.
    let api = dir.join("kube-api-access-x");
    assert_eq!(fs::read_to_string(api.join("token")).unwrap(), "token-1");
    assert_eq!(fs::read_to_string(api.join("ca.crt")).unwrap(), "PEM");
    assert_eq!(fs::read_to_string(api.join("namespace")).unwrap(), "ns");
    assert_eq!(
        fs::read_link(api.join("token")).unwrap(),
        Path::new("..data/token")
    );
    // One runAsUser and fsGroup: the token is the user's, 0600 made 0640 by fsGroup.
    assert_eq!(mode(&api.join("token")), 0o640);
    assert_eq!(fs::metadata(api.join("token")).unwrap().uid(), uid);
    assert_eq!(fs::metadata(api.join("ca.crt")).unwrap().gid(), gid);
    {
        let f = fake.lock().unwrap();
        assert_eq!(f.token_requests.len(), 1);
        let (path, body) = &f.token_requests[0];
        assert_eq!(path, "/api/v1/namespaces/ns/serviceaccounts/sa/token");
        assert_eq!(body["spec"]["expirationSeconds"], 3607);
        assert_eq!(
            body["spec"]["boundObjectRef"],
            json!({"apiVersion": "v1", "kind": "Pod", "name": "mysql-0", "uid": "pod-uid"})
        );
    }

    // Secret with defaultMode 0400 and fsGroup: group-readable.
    assert_eq!(
        fs::read_to_string(dir.join("sec/password")).unwrap(),
        "s3cret"
    );
    assert_eq!(mode(&dir.join("sec/password")), 0o440);
    assert_eq!(
        fs::read_to_string(dir.join("podinfo/labels")).unwrap(),
        "app=\"moco\"\nrole=\"primary\""
    );
    // emptyDir (Memory is a plain directory): 0777, setgid with fsGroup.
    assert_eq!(mode(&dir.join("tmp")), 0o2777);
    assert!(tmp.path().join("made/here").is_dir());
    assert_eq!(vols.path("data"), Some(pv_dir.as_path()));

    // Mounts, with the environment the kubelet would give.
    let c = &p.spec.as_ref().unwrap().containers[0];
    let api_server = "10.200.0.254:6443".parse().unwrap();
    let env = moco_pod_runner::env::resolve(&client, &p, c, api_server)
        .await
        .unwrap();
    assert_eq!(moco_pod_runner::env::lookup(&env, "PW"), Some("s3cret"));
    let m = vols.mounts(&p, c, &env).unwrap();
    let targets: Vec<_> = m
        .iter()
        .map(|b| b.target.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        targets,
        [
            "/var/lib/mysql",
            "/etc/mysql-conf.d",
            "/etc/my.cnf",
            "/var/run/secrets/kubernetes.io/serviceaccount",
            "/tmp",
            "/host"
        ]
    );
    assert_eq!(m[0].source, pv_dir);
    assert!(!m[0].read_only);
    assert_eq!(m[1].source, dir.join("conf"));
    assert!(m[1].read_only);
    let cnf_file = m[2].source.clone();
    assert_eq!(fs::read_to_string(&cnf_file).unwrap(), "[mysqld]\n");
    assert!(m[3].read_only);
    assert!(m[4].source.ends_with("tmp/mysql-0"));
    assert_eq!(m[5].source, tmp.path().join("made/here"));

    // Nothing changed: nothing written, no new token.
    assert!(!vols.refresh(&client, &p).await.unwrap());
    assert_eq!(fake.lock().unwrap().token_requests.len(), 1);

    // A ConfigMap update shows through the volume, not through the subPath file.
    fake.lock().unwrap().objects.insert(
        "/api/v1/namespaces/ns/configmaps/conf".into(),
        json!({"metadata": {"name": "conf"}, "data": {"cnf": "[mysqld]\nport=3307\n"}}),
    );
    assert!(vols.refresh(&client, &p).await.unwrap());
    assert_eq!(
        fs::read_to_string(dir.join("conf/my.cnf")).unwrap(),
        "[mysqld]\nport=3307\n"
    );
    assert!(!cnf_file.exists(), "the old timestamped directory is gone");

    // A label change rewrites the downward API file.
    p.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("role".into(), "replica".into());
    assert!(vols.refresh(&client, &p).await.unwrap());
    assert_eq!(
        fs::read_to_string(dir.join("podinfo/labels")).unwrap(),
        "app=\"moco\"\nrole=\"replica\""
    );

    // A deleted Secret: an error naming it, the files kept.
    fake.lock()
        .unwrap()
        .objects
        .remove("/api/v1/namespaces/ns/secrets/sec");
    let err = vols.refresh(&client, &p).await.unwrap_err();
    assert!(err.is_not_ready());
    assert!(err.to_string().contains("Secret ns/sec"), "{err}");
    assert_eq!(
        fs::read_to_string(dir.join("sec/password")).unwrap(),
        "s3cret"
    );

    fs::write(pv_dir.join("ibdata1"), "data").unwrap();
    vols.remove().unwrap();
    assert!(!dir.exists());
    assert!(
        pv_dir.join("ibdata1").exists(),
        "PersistentVolume data outlives the Pod"
    );
}

#[tokio::test]
async fn unready_claims_and_objects_name_what_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let (uid, gid) = me(tmp.path());
    let fake = Arc::new(Mutex::new(Fake::default()));
    let client = client(fake.clone());
    let p = pod(tmp.path(), uid, gid);
    let dir = tmp.path().join("volumes");
    let not_ready = |e: VolumeError, needle: &str| {
        assert!(e.is_not_ready(), "{e}");
        assert!(e.to_string().contains(needle), "{e} lacks {needle}");
    };

    let e = volumes::prepare(&client, &p, &dir, &BTreeMap::new())
        .await
        .unwrap_err();
    not_ready(e, "PersistentVolumeClaim ns/mysql-data-mysql-0 not found");

    fake.lock().unwrap().objects.insert(
        "/api/v1/namespaces/ns/persistentvolumeclaims/mysql-data-mysql-0".into(),
        json!({"metadata": {"name": "mysql-data-mysql-0", "namespace": "ns"}, "status": {"phase": "Pending"}}),
    );
    let e = volumes::prepare(&client, &p, &dir, &BTreeMap::new())
        .await
        .unwrap_err();
    not_ready(e, "not bound yet");

    let pv_dir = tmp.path().join("pv");
    seed(&mut fake.lock().unwrap(), &pv_dir);
    fake.lock()
        .unwrap()
        .objects
        .remove("/api/v1/persistentvolumes/pv-1");
    let e = volumes::prepare(&client, &p, &dir, &BTreeMap::new())
        .await
        .unwrap_err();
    not_ready(e, "PersistentVolume \"pv-1\"");

    seed(&mut fake.lock().unwrap(), &pv_dir);
    fake.lock()
        .unwrap()
        .objects
        .remove("/api/v1/namespaces/ns/configmaps/kube-root-ca.crt");
    // The hostPath PV's directory is made when missing (no type); then the CA is missing.
    let e = volumes::prepare(&client, &p, &dir, &BTreeMap::new())
        .await
        .unwrap_err();
    not_ready(e, "ConfigMap ns/kube-root-ca.crt not found");
    assert!(pv_dir.is_dir());

    seed(&mut fake.lock().unwrap(), &pv_dir);
    volumes::prepare(&client, &p, &dir, &BTreeMap::new())
        .await
        .unwrap();
}
