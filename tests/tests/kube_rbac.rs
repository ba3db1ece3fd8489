//! RBAC of what the operator renders, enforced by the real API server (issue 31, item 5): the
//! Pods' ServiceAccount is bound to one rule, `get` of its own MySQLCluster, which `moco init`
//! needs (a MariaDB instance coming back as a replica starts with `init_rpl_role=SLAVE`, read
//! from the cluster's recorded primary). Its token is made through the TokenRequest API as
//! the kubelet makes a Pod's, and every request below goes through the API server's own
//! authentication and authorization.

use k8s_openapi::api::core::v1::{Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use moco_api::cluster::ClusterId;
use moco_api::mysqlcluster::MySQLCluster;
use moco_operator::render::services::{instance_rbac, service_account};
use moco_tests::control_plane::{ControlPlane, control_plane};

fn cluster(name: &str) -> MySQLCluster {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "moco.cybozu.com/v1beta2",
        "kind": "MySQLCluster",
        "metadata": {"name": name, "annotations": {"moco-rs/flavor": "mariadb"}},
        "spec": {
            "replicas": 1,
            "podTemplate": {"spec": {"containers": [{"name": "mysqld", "image": "mariadb:10.11"}]}},
            "volumeClaimTemplates": [{
                "metadata": {"name": "mysql-data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
            }]
        }
    }))
    .unwrap()
}

/// A client that authenticates with `token` and nothing else.
async fn as_token(cp: &ControlPlane, token: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(cp.dir.join("kubeconfig")).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.to_owned().into()),
        ..kube::config::AuthInfo::default()
    };
    kube::Client::try_from(config).unwrap()
}

fn forbidden<T: std::fmt::Debug>(what: &str, r: Result<T, kube::Error>) {
    match r {
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        other => panic!("{what}: want 403 Forbidden, got {other:?}"),
    }
}

#[tokio::test]
async fn the_pods_service_account_may_get_its_own_mysqlcluster_and_nothing_else() {
    let Some(cp) = control_plane("rbac_pods_service_account").await else {
        return;
    };
    moco_tests::operator_host::install_crds(&cp).await;
    let ns = cp.namespace("rbac-pods").await;
    let clusters = Api::<MySQLCluster>::namespaced(cp.client.clone(), &ns);
    let db = clusters
        .create(&PostParams::default(), &cluster("db"))
        .await
        .unwrap();
    clusters
        .create(&PostParams::default(), &cluster("other"))
        .await
        .unwrap();

    // What the operator renders for `db`, created as it creates them.
    let id = ClusterId::of(&db).unwrap();
    let sa = service_account(&id);
    let (role, binding) = instance_rbac(&id);
    let pp = PostParams::default();
    Api::<ServiceAccount>::namespaced(cp.client.clone(), &ns)
        .create(&pp, &sa)
        .await
        .unwrap();
    Api::<Role>::namespaced(cp.client.clone(), &ns)
        .create(&pp, &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(cp.client.clone(), &ns)
        .create(&pp, &binding)
        .await
        .unwrap();

    let sa_name = sa.metadata.name.clone().unwrap();
    let out = cp.kubectl(&["-n", &ns, "create", "token", &sa_name], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap();
    let pod_client = as_token(&cp, token.trim()).await;

    // Exactly the one thing `moco init` does: read its own cluster.
    let mine = Api::<MySQLCluster>::namespaced(pod_client.clone(), &ns);
    let got = mine.get("db").await.expect("its own MySQLCluster");
    assert_eq!(got.metadata.uid, db.metadata.uid);
    // Nothing beside it.
    forbidden("get another cluster", mine.get("other").await);
    forbidden("list clusters", mine.list(&ListParams::default()).await);
    forbidden(
        "patch its cluster's status",
        mine.patch_status(
            "db",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"currentPrimaryIndex": 0}})),
        )
        .await,
    );
    forbidden(
        "patch its cluster",
        mine.patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await,
    );
    forbidden(
        "read its Secret",
        Api::<Secret>::namespaced(pod_client.clone(), &ns)
            .get(&sa_name)
            .await,
    );
    forbidden(
        "list Pods",
        Api::<Pod>::namespaced(pod_client.clone(), &ns)
            .list(&ListParams::default())
            .await,
    );
    forbidden(
        "get the cluster of the same name elsewhere",
        Api::<MySQLCluster>::namespaced(pod_client, "default")
            .get("db")
            .await,
    );
    cp.delete_namespace(&ns).await;
}
