#!/usr/bin/env bash
# End-to-end run of moco-rs on a local kind cluster, for a maintainer with Docker. It is NOT
# run in CI (the CI machines have no container runtime); a maintainer runs it by hand.
#
#   scripts/e2e-kind.sh
#
# What it does: builds the operator image and the agent image (Dockerfile, default target and
# `--target agent`) as ghcr.io/moco-rs/moco:e2e and ghcr.io/moco-rs/moco-agent:e2e, loads
# them into a kind cluster, installs cert-manager and the operator (deploy/, image and
# --agent-image overridden in a temporary overlay: the repository's files are not modified),
# creates a 3-instance MySQLCluster default/test (its replicas are cloned from the primary by
# the agents), writes rows through its primary Service, then checks a switchover (demote
# annotation), a failover (primary Pod killed) with no row lost, and a volume growth (claim
# template 1Gi -> 2Gi), then grows the cluster to 5 instances (spec.replicas 3 -> 5) and
# shrinks it back to 3 while rows are written: the new instances join as asynchronous
# learners and become semi-sync members (status.semiSyncMembers 5), with every row on all
# five; the shrink keeps Pods 3-4 until no acknowledged commit needs them, and their PVCs. It
# then runs a backup Job (MinIO in the cluster as the object store) and a point-in-time restore
# into a second MySQLCluster, which must hold exactly the rows written before the point. The
# binlogs are archived every 2 s. With FLAVOR=mariadb the backup is a physical copy; with
# FLAVOR=mysql it is MOCO's format (mysqlsh's dump, then a second backup that stores the
# binlogs between the two), run by moco-rs's program in the `backup` image target (MOCO's
# backup image with `moco` as its program), built as ghcr.io/moco-rs/moco-backup:e2e and
# given to the operator as --backup-image; a third MySQLCluster is restored to a second after
# the second backup, through the archive. On failure it dumps diagnostics.
#
# What the test suite proves of the same checks without Docker, on the real control plane of
# `scripts/kube.sh up` (real etcd, kube-apiserver and kube-controller-manager; Pods run as
# local processes by moco-rs's Pod runner, with Debian's mariadbd; `cargo test`, see
# docs/testing.md), and what only this script checks:
#
#   step of this script                          where the suite proves it (tests/tests/)
#   1  images built, loaded into kind            only here (no Docker in CI; the runner maps
#                                                the images to this checkout's programs)
#   2  cert-manager installed                    kube_install.rs (cert-manager built from Go
#                                                modules, its chart; issues MOCO's chain)
#   3  operator from deploy/, webhooks           kube_install.rs (kubectl apply -k deploy/ and
#                                                helm install, webhooks over TLS)
#   4  3 instances Healthy                       kube_clustering.rs (kubectl apply, Services'
#                                                EndpointSlices, roles)
#   4  TLS=1: plain TCP refused                  kube_drills.rs kube_tls_* (real mariadbd, the
#                                                fake API server); not yet on Pods
#   5  rows through the primary Service          kube_clustering.rs (a writer following the
#                                                Service's EndpointSlice, every ack checked)
#   6  switchover (demote annotation)            kube_clustering.rs (kubectl moco switchover,
#                                                and by deleting the primary's Pod)
#   7  failover, no row lost                     kube_clustering.rs (the primary's mysqld
#                                                killed, frozen, cut off the network; here its
#                                                Pod force-deleted on a cordoned Node)
#   8  volume growth 1Gi -> 2Gi                  kube_operator.rs (claims grown, StatefulSet
#                                                re-created, Pods kept)
#   9  3 -> 5 -> 3 under writes                  kube_clustering.rs
#   10 MariaDB backup + point-in-time restore    kube_pitr.rs (the CronJob's schedule fired
#                                                twice by the real CronJob controller, the Jobs'
#                                                Pods, moto as S3, a 3-instance restore to a
#                                                second between two writes, the Job deleted)
#
# Only here: MySQL 8 (FLAVOR=mysql: MOCO's mysqld and backup images, mysqlsh's dump, the
# binlogs stored by the second backup, the restore through the archive; MySQL cannot be
# installed on this project's machines, whose suite runs these programs against stand-ins,
# kube_mysql.rs), the binlog archiver's Deployment (moco-rs/binlog-archive-interval; the
# suite runs `moco archive` against the fake API server, kube_archive.rs), MinIO, TLS on
# Pods, kind's own kubelet, scheduler, kube-proxy and cluster DNS, and the release images.
#
# Volumes: the operator's webhook (like MOCO's) refuses growing a claim whose StorageClass
# does not allow expansion, and kind's `standard` class (local-path) does not. The cluster
# therefore uses StorageClass moco-e2e-expandable: the same provisioner with
# allowVolumeExpansion: true. local-path has no resizer, so the operator's growth shows in the
# PVCs' requests and the re-created StatefulSet, not in their capacity.
#
# Requires: docker (with BuildKit, the default since Docker 23), kind >= 0.23 (Kubernetes
# >= 1.30, for the ValidatingAdmissionPolicy of deploy/), kubectl, network access to
# github.com (cert-manager's release manifest) and ghcr.io (MOCO's mysqld, moco-agent,
# fluent-bit and mysqld_exporter images). Takes roughly 10-20 minutes (an estimate; the
# Rust release build inside Docker is most of it on a cold cache).
#
# Environment:
#   KIND_CLUSTER          kind cluster name (default moco-rs-e2e); reused when it exists
#   KEEP_CLUSTER=1        keep the cluster at the end (default: delete it, also on failure)
#   CERT_MANAGER_VERSION  cert-manager release to install (default v1.16.2)
#   FLAVOR                mysql (default) or mariadb: the server family of the cluster
#   MYSQL_IMAGE           mysqld image (default ghcr.io/cybozu-go/moco/mysql:8.4.8, or
#                         mariadb:10.11 with FLAVOR=mariadb; the agent image's mariadb-backup
#                         is 10.11's, so another MariaDB series needs MARIADB_VERSION too)
#   MARIADB_VERSION       the MariaDB series of the agent image's copy tools (default 10.11)
#   KIND_NODE_IMAGE       optional kind node image (kindest/node:vX.Y.Z) for a new cluster
#   MINIO_IMAGE, MINIO_CLIENT_IMAGE   MinIO and its client (default quay.io's)
#   MOCO_BACKUP_IMAGE     FLAVOR=mysql: the image the backup image is built on (default
#                         the Dockerfile's, MOCO's moco-backup image)
#   TLS=1                 the cluster is annotated moco-rs/tls: "true": every statement of this
#                         script then verifies the server with the CA the Pods mount, and a
#                         plain connection must be refused
set -Eeuo pipefail
cd "$(dirname "$0")/.."

KIND_CLUSTER=${KIND_CLUSTER:-moco-rs-e2e}
KEEP_CLUSTER=${KEEP_CLUSTER:-0}
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-v1.16.2}
FLAVOR=${FLAVOR:-mysql}
TLS=${TLS:-0}
MARIADB_VERSION=${MARIADB_VERSION:-10.11}
case $FLAVOR in
  mysql) MYSQL_IMAGE=${MYSQL_IMAGE:-ghcr.io/cybozu-go/moco/mysql:8.4.8} ;;
  mariadb) MYSQL_IMAGE=${MYSQL_IMAGE:-mariadb:$MARIADB_VERSION} ;;
  *) echo "FLAVOR must be mysql or mariadb, not $FLAVOR" >&2; exit 2 ;;
esac
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-}
MINIO_IMAGE=${MINIO_IMAGE:-quay.io/minio/minio:latest}
MINIO_CLIENT_IMAGE=${MINIO_CLIENT_IMAGE:-quay.io/minio/mc:latest}

IMAGE_NAME=ghcr.io/moco-rs/moco # as named in deploy/kustomization.yaml
AGENT_IMAGE_NAME=ghcr.io/moco-rs/moco-agent
BACKUP_IMAGE_NAME=ghcr.io/moco-rs/moco-backup
IMAGE_TAG=e2e
CTX="kind-$KIND_CLUSTER"        # every kubectl call names this context explicitly
SYSTEM_NS=moco-system           # deploy/namespace.yaml
CONTROLLER=moco-controller      # deploy/deployment.yaml
NS=default
NAME="test"
STS="moco-$NAME"
PRIMARY_SVC="moco-$NAME-primary.$NS.svc"
STORAGE_CLASS=moco-e2e-expandable
MYCNF=/mysql-credentials/moco-writable-my.cnf

work=$(mktemp -d)
passed=()
cordoned=""
cluster_touched=0

step() { printf '\n== %s\n' "$*"; }
note() { printf '   %s\n' "$*"; }
pass() { passed+=("$*"); printf '   ok: %s\n' "$*"; }
die() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
k() { kubectl --context "$CTX" "$@"; }

# wait_for SECONDS DESCRIPTION COMMAND...: runs COMMAND every 5 s until it succeeds; on
# timeout prints its last output and fails. COMMAND runs in a condition context, where set -e
# is off: check functions below return their failures explicitly.
wait_for() {
  local timeout=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + timeout))
  note "waiting (up to ${timeout}s) for $what"
  until "$@" >"$work/last" 2>&1; do
    if ((SECONDS >= deadline)); then
      cat "$work/last" >&2
      die "timed out after ${timeout}s waiting for $what"
    fi
    sleep 5
  done
}

wait_healthy() {
  k wait "mysqlcluster/$NAME" -n "$NS" --for=condition=Healthy --timeout="$1"
}
primary_index() {
  k get mysqlcluster "$NAME" -n "$NS" -o jsonpath='{.status.currentPrimaryIndex}'
}
index_moved_from() {
  local now
  now=$(primary_index) || return 1
  [[ -n $now && $now != "$1" ]]
}
role_is() {
  [[ "$(k get pod "$1" -n "$NS" -o jsonpath='{.metadata.labels.moco\.cybozu\.com/role}')" == "$2" ]]
}
demote_removed() {
  local value
  value=$(k get pod "$1" -n "$NS" -o jsonpath='{.metadata.annotations.moco\.cybozu\.com/demote}') || return 1
  [[ -z $value ]]
}
pod_ready() {
  [[ "$(k get pod "$1" -n "$NS" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]
}
force_delete() {
  k delete pod "$1" -n "$NS" --grace-period=0 --force --wait=false
}
no_cluster_pvcs() {
  [[ -z "$(k get pvc -n "$NS" -l "app.kubernetes.io/instance=$NAME" -o name)" ]]
}
sts_recreated() { # sts_recreated OLD_UID SIZE
  local uid size
  uid=$(k get sts "$STS" -n "$NS" -o jsonpath='{.metadata.uid}') || return 1
  size=$(k get sts "$STS" -n "$NS" \
    -o jsonpath='{.spec.volumeClaimTemplates[0].spec.resources.requests.storage}') || return 1
  [[ -n $uid && $uid != "$1" && $size == "$2" ]]
}
pvcs_request() {
  local sizes
  sizes=$(k get pvc -n "$NS" -l "app.kubernetes.io/instance=$NAME" \
    -o jsonpath='{range .items[*]}{.spec.resources.requests.storage}{"\n"}{end}') || return 1
  [[ -n $sizes ]] && ! grep -Fvxq -- "$1" <<<"$sizes"
}

# sql POD HOST STATEMENT: runs STATEMENT as moco-writable from POD's mysqld container against
# HOST (the primary Service, or 127.0.0.1 for the instance itself).
sql() {
  local tls=()
  if [[ $TLS == 1 && $FLAVOR == mariadb ]]; then
    tls=(--ssl-ca=/mysql-tls/ca.crt --ssl-verify-server-cert)
  elif [[ $TLS == 1 ]]; then
    tls=(--ssl-ca=/mysql-tls/ca.crt --ssl-mode=VERIFY_IDENTITY)
  fi
  k exec -n "$NS" "$1" -c mysqld -- mysql --defaults-extra-file="$MYCNF" -h "$2" "${tls[@]}" \
    --batch --skip-column-names -e "$3"
}
# write_rows FROM TO: idempotent (REPLACE), so wait_for may retry it.
write_rows() {
  local from=$1 to=$2 values="" i pod
  for ((i = from; i <= to; i++)); do values+="${values:+,}($i,'row-$i')"; done
  pod="$STS-$(primary_index)" || return 1
  sql "$pod" "$PRIMARY_SVC" "CREATE DATABASE IF NOT EXISTS e2e;
    CREATE TABLE IF NOT EXISTS e2e.t (id INT PRIMARY KEY, v VARCHAR(32) NOT NULL);
    REPLACE INTO e2e.t (id, v) VALUES $values"
}
expected_rows() { printf '%s\t%s' "$1" "$(($1 * ($1 + 1) / 2))"; } # rows 1..N: count, sum
rows_are() { # rows_are POD HOST N
  [[ "$(sql "$1" "$2" 'SELECT COUNT(*), SUM(id) FROM e2e.t')" == "$(expected_rows "$3")" ]]
}
members_are() {
  [[ "$(k get mysqlcluster "$NAME" -n "$NS" -o jsonpath='{.status.semiSyncMembers}')" == "$1" ]]
}
served_by() {
  [[ "$(sql "$1" "$PRIMARY_SVC" 'SELECT @@hostname')" == "$1" ]]
}

diagnostics() {
  step "diagnostics"
  k get nodes -o wide || true
  k get all,pvc -A -o wide || true
  k get mysqlcluster -A -o wide || true
  k get certificates -A || true
  k describe mysqlcluster "$NAME" -n "$NS" || true
  k logs -n "$SYSTEM_NS" -l "app.kubernetes.io/component=$CONTROLLER" --prefix --tail=300 || true
  k logs -n "$NS" -l "app.kubernetes.io/instance=$NAME" --all-containers --prefix --tail=50 || true
  k get events -A --sort-by=.lastTimestamp | tail -n 100 || true
}

cleanup() {
  local rc=$?
  set +e
  trap - ERR
  if ((rc != 0 && cluster_touched)) && k get --raw=/readyz >/dev/null 2>&1; then
    diagnostics
  fi
  if [[ -n $cordoned ]]; then k uncordon "$cordoned"; fi
  if ((cluster_touched)); then
    if [[ $KEEP_CLUSTER == 1 ]]; then
      note "keeping kind cluster $KIND_CLUSTER (kubectl --context $CTX)"
    else
      step "deleting kind cluster $KIND_CLUSTER (KEEP_CLUSTER=1 keeps it)"
      kind delete cluster --name "$KIND_CLUSTER"
    fi
  fi
  rm -rf "$work"
  if ((rc != 0)); then printf '\nE2E FAILED (exit %s)\n' "$rc" >&2; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'printf "error: line %s: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

# A 3-instance cluster without the required anti-affinity of docs/examples, so that it fits on
# kind's single node; small requests, no limits.
cat >"$work/cluster.yaml" <<EOF
apiVersion: moco.cybozu.com/v1beta2
kind: MySQLCluster
metadata:
  namespace: $NS
  name: $NAME
  annotations:
    moco-rs/flavor: $FLAVOR
$(if [[ $TLS == 1 ]]; then printf '    moco-rs/tls: "true"\n'; fi)
spec:
  replicas: 3
  podTemplate:
    spec:
      containers:
      - name: mysqld
        image: $MYSQL_IMAGE
$(if [[ $FLAVOR == mariadb ]]; then
  # The official image's entrypoint initialises a datadir of its own; moco-init already did.
  printf '        command: ["mariadbd"]\n'
fi)
        resources:
          requests:
            cpu: 100m
            memory: 512Mi
  volumeClaimTemplates:
  - metadata:
      name: mysql-data
    spec:
      accessModes: ["ReadWriteOnce"]
      storageClassName: $STORAGE_CLASS
      resources:
        requests:
          storage: 1Gi
EOF

step "1. tools, image, kind cluster"
for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || die "$tool not found in PATH"
done
docker info >/dev/null 2>&1 || die "docker cannot reach its daemon"
kind_version=$(kind version | awk '{print $2}')
printf '%s\n' 0.23.0 "${kind_version#v}" | sort -V -C || die "kind $kind_version is older than v0.23.0"
# Without provenance attestations: with Docker's containerd image store (the default of fresh
# Docker 29 installs) they make `kind load docker-image` fail with "content digest not found".
build_image() { # TAG [docker build flags...]
  local tag=$1
  shift
  if docker buildx version >/dev/null 2>&1; then
    docker buildx build --load --provenance=false -t "$tag" "$@" .
  else
    DOCKER_BUILDKIT=1 docker build -t "$tag" "$@" .
  fi
}
build_image "$IMAGE_NAME:$IMAGE_TAG"
build_image "$AGENT_IMAGE_NAME:$IMAGE_TAG" --target agent --build-arg "MARIADB_VERSION=$MARIADB_VERSION"
images=("$IMAGE_NAME:$IMAGE_TAG" "$AGENT_IMAGE_NAME:$IMAGE_TAG")
if [[ $FLAVOR == mysql ]]; then
  backup_build=(--target backup)
  if [[ -n ${MOCO_BACKUP_IMAGE:-} ]]; then backup_build+=(--build-arg "MOCO_BACKUP_IMAGE=$MOCO_BACKUP_IMAGE"); fi
  build_image "$BACKUP_IMAGE_NAME:$IMAGE_TAG" "${backup_build[@]}"
  images+=("$BACKUP_IMAGE_NAME:$IMAGE_TAG")
fi
cluster_touched=1
reused=0
clusters=$(kind get clusters 2>/dev/null)
if grep -Fxq -- "$KIND_CLUSTER" <<<"$clusters"; then
  note "reusing existing kind cluster $KIND_CLUSTER"
  reused=1
  kind export kubeconfig --name "$KIND_CLUSTER" # makes sure context $CTX exists
else
  create=(create cluster --name "$KIND_CLUSTER" --wait 5m)
  if [[ -n $KIND_NODE_IMAGE ]]; then create+=(--image "$KIND_NODE_IMAGE"); fi
  kind "${create[@]}"
fi
for image in "${images[@]}"; do
  if ! kind load docker-image "$image" --name "$KIND_CLUSTER"; then
    note "kind load docker-image failed for $image; retrying with a single-platform archive"
    docker image save --platform "linux/$(docker version -f '{{.Server.Arch}}')" \
      -o "$work/image.tar" "$image"
    kind load image-archive "$work/image.tar" --name "$KIND_CLUSTER"
  fi
done
k wait node --all --for=condition=Ready --timeout=5m
pass "images ${images[*]} built and loaded into kind cluster $KIND_CLUSTER"

step "2. cert-manager $CERT_MANAGER_VERSION"
k apply -f "https://github.com/cert-manager/cert-manager/releases/download/$CERT_MANAGER_VERSION/cert-manager.yaml"
k -n cert-manager wait deployment --all --for=condition=Available --timeout=5m
pass "cert-manager Available"

step "3. operator from deploy/ with image $IMAGE_NAME:$IMAGE_TAG"
cp -R deploy "$work/deploy"
mkdir "$work/overlay"
cat >"$work/overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../deploy
images:
- name: $IMAGE_NAME
  newTag: $IMAGE_TAG
patches:
- target:
    kind: Deployment
    name: $CONTROLLER
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --agent-image=$AGENT_IMAGE_NAME:$IMAGE_TAG
EOF
if [[ $FLAVOR == mysql ]]; then
  cat >>"$work/overlay/kustomization.yaml" <<EOF
- target:
    kind: Deployment
    name: $CONTROLLER
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --backup-image=$BACKUP_IMAGE_NAME:$IMAGE_TAG
EOF
fi
kubectl kustomize "$work/overlay" >"$work/moco.yaml"
grep -Fq "image: $IMAGE_NAME:$IMAGE_TAG" "$work/moco.yaml" || die "the overlay did not set the image"
grep -Fq -- "--agent-image=$AGENT_IMAGE_NAME:$IMAGE_TAG" "$work/moco.yaml" ||
  die "the overlay did not set --agent-image"
# cert-manager's own webhook may still refuse Issuers/Certificates for a little while.
wait_for 300 "the operator manifests to apply" k apply --server-side -f "$work/moco.yaml"
k wait crd mysqlclusters.moco.cybozu.com backuppolicies.moco.cybozu.com \
  --for=condition=Established --timeout=2m
k -n "$SYSTEM_NS" wait certificate --all --for=condition=Ready --timeout=5m
# On a reused cluster the Deployment is unchanged (same tag) but the image is new: restart it.
if ((reused)); then k -n "$SYSTEM_NS" rollout restart "deployment/$CONTROLLER"; fi
k -n "$SYSTEM_NS" rollout status "deployment/$CONTROLLER" --timeout=5m
k -n "$SYSTEM_NS" wait "deployment/$CONTROLLER" --for=condition=Available --timeout=5m
wait_for 300 "the MySQLCluster webhooks to answer" k apply --dry-run=server -f "$work/cluster.yaml"
pass "operator Available, webhooks answering"

step "4. 3-instance MySQLCluster $NS/$NAME"
if k get mysqlcluster "$NAME" -n "$NS" >/dev/null 2>&1; then
  note "deleting MySQLCluster $NAME left by an earlier run"
  k delete mysqlcluster "$NAME" -n "$NS" --wait=true --timeout=5m
  wait_for 300 "its PVCs to be garbage-collected" no_cluster_pvcs
fi
provisioner=$(k get storageclass standard -o jsonpath='{.provisioner}')
[[ -n $provisioner ]] || die "kind's StorageClass standard not found"
k apply -f - <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $STORAGE_CLASS
provisioner: $provisioner
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
EOF
k apply -f "$work/cluster.yaml"
wait_healthy 15m
k wait "mysqlcluster/$NAME" -n "$NS" --for=condition=Available --timeout=2m
k get mysqlcluster,pods -n "$NS" -o wide
pass "cluster Healthy and Available, primary is instance $(primary_index)"
if [[ $TLS == 1 ]]; then
  k get secret "$STS-mysql-ca" -n "$NS" >/dev/null || die "Secret $STS-mysql-ca (the CA for clients) is missing"
  plain=--skip-ssl
  [[ $FLAVOR == mysql ]] && plain=--ssl-mode=DISABLED
  if k exec -n "$NS" "$STS-$(primary_index)" -c mysqld -- mysql --defaults-extra-file="$MYCNF" \
    -h "$PRIMARY_SVC" "$plain" -e 'SELECT 1' >/dev/null 2>&1; then
    die "a plain connection to $PRIMARY_SVC was accepted"
  fi
  pass "TLS: the CA Secret exists and plain TCP is refused"
fi

step "5. write rows through Service $PRIMARY_SVC"
wait_for 120 "rows 1-100 to be written" write_rows 1 100
rows_are "$STS-$(primary_index)" "$PRIMARY_SVC" 100 || die "rows 1-100 not read back"
pass "100 rows written and read back through the primary Service"

step "6. switchover (annotation moco.cybozu.com/demote=true)"
old=$(primary_index)
[[ -n $old ]] || die "status.currentPrimaryIndex is empty"
k annotate pod "$STS-$old" -n "$NS" moco.cybozu.com/demote=true
wait_for 300 "currentPrimaryIndex to move away from $old" index_moved_from "$old"
new=$(primary_index)
wait_healthy 10m
wait_for 120 "$STS-$new to be labelled primary" role_is "$STS-$new" primary
wait_for 120 "$STS-$old to be labelled replica" role_is "$STS-$old" replica
wait_for 120 "the demote annotation to be removed from $STS-$old" demote_removed "$STS-$old"
wait_for 120 "$PRIMARY_SVC to reach $STS-$new" served_by "$STS-$new"
wait_for 120 "rows 101-200 to be written on the new primary" write_rows 101 200
pass "switchover $old -> $new, Healthy, annotation removed, new primary writable"

step "7. failover (primary Pod killed)"
# kill -9 of PID 1 from inside the container is ignored by the kernel (init of its PID
# namespace), and a restarted mysqld may be back before the operator looks. So the primary's
# Pod is deleted with no grace period while its node is cordoned: its replacement stays
# Pending, the instance is gone until uncordon, and only a failover can restore writes.
old=$(primary_index)
node=$(k get pod "$STS-$old" -n "$NS" -o jsonpath='{.spec.nodeName}')
k cordon "$node"
cordoned=$node
wait_for 120 "$STS-$old to be force-deleted" force_delete "$STS-$old"
wait_for 600 "currentPrimaryIndex to move away from $old" index_moved_from "$old"
new=$(primary_index)
wait_for 120 "$STS-$new to be labelled primary" role_is "$STS-$new" primary
k uncordon "$node"
cordoned=""
wait_for 600 "$STS-$old to be Ready again" pod_ready "$STS-$old"
wait_healthy 15m
for i in 0 1 2; do
  wait_for 300 "all 200 rows on $STS-$i" rows_are "$STS-$i" 127.0.0.1 200
done
pass "failover $old -> $new, Healthy again, all 200 rows on every instance"

step "8. volume growth (mysql-data 1Gi -> 2Gi)"
sts_uid=$(k get sts "$STS" -n "$NS" -o jsonpath='{.metadata.uid}')
k patch mysqlcluster "$NAME" -n "$NS" --type=json -p \
  '[{"op":"replace","path":"/spec/volumeClaimTemplates/0/spec/resources/requests/storage","value":"2Gi"}]'
wait_for 300 "StatefulSet $STS to be re-created with a 2Gi claim template" sts_recreated "$sts_uid" 2Gi
wait_healthy 10m
wait_for 300 "every PVC to request 2Gi" pvcs_request 2Gi
k logs -n "$SYSTEM_NS" -l "app.kubernetes.io/component=$CONTROLLER" --tail=-1 |
  grep -F 'PVC grown' || true
note "PVC requests grew to 2Gi; their capacity stays 1Gi because kind's local-path"
note "provisioner has no resizer: real expansion needs a CSI driver that supports it."
pass "PVC requests grown and StatefulSet re-created with a 2Gi claim template"
k get pvc -n "$NS" -l "app.kubernetes.io/instance=$NAME" \
  -o custom-columns=NAME:.metadata.name,REQUEST:.spec.resources.requests.storage,CAPACITY:.status.capacity.storage,CLASS:.spec.storageClassName

step "9. growth (spec.replicas 3 -> 5) while rows are written"
k patch mysqlcluster "$NAME" -n "$NS" --type=merge -p '{"spec":{"replicas":5}}'
# Writes go on while the new instances are cloned: a batch right after the change must not
# wait for them (docs/clustering.md, "Growing without a write stall").
wait_for 120 "rows 201-250 to be written while the cluster grows" write_rows 201 250
wait_for 900 "status.semiSyncMembers to reach 5" members_are 5
wait_healthy 15m
wait_for 120 "rows 251-300 to be written at 5 instances" write_rows 251 300
for i in 0 1 2 3 4; do
  wait_for 300 "all 300 rows on $STS-$i" rows_are "$STS-$i" 127.0.0.1 300
done
pass "grown to 5 instances: every one a member, all 300 rows on each"

step "9b. shrink (spec.replicas 5 -> 3) while rows are written"
# The leaving Pods (3 and 4) stay until the engine records that no acknowledged commit needs
# them; then the operator lowers the StatefulSet's replicas. Their PVCs stay.
k patch mysqlcluster "$NAME" -n "$NS" --type=merge -p '{"spec":{"replicas":3}}'
wait_for 120 "rows 301-350 to be written while the cluster shrinks" write_rows 301 350
wait_for 600 "status.semiSyncMembers to reach 3" members_are 3
wait_for 300 "the StatefulSet at 3 replicas" \
  bash -c "[[ \$(kubectl --context $CTX get sts $STS -n $NS -o jsonpath='{.spec.replicas}') == 3 ]]"
wait_for 300 "Pods 3 and 4 gone" \
  bash -c "! kubectl --context $CTX get pod $STS-3 $STS-4 -n $NS >/dev/null 2>&1"
wait_healthy 10m
for i in 0 1 2; do
  wait_for 300 "all 350 rows on $STS-$i" rows_are "$STS-$i" 127.0.0.1 350
done
[[ $(k get pvc -n "$NS" -l "app.kubernetes.io/instance=$NAME" -o name | wc -l) -ge 5 ]] ||
  die "the leaving instances' PVCs were deleted"
pass "shrunk to 3 instances: members 3, Pods 3-4 removed, PVCs kept, all 350 rows on each"

step "10. backup and point-in-time restore (MinIO in the cluster)"
  # MinIO stands in for S3; the bucket is made by MinIO's client. The backup Job is started
  # from the CronJob by hand, and a second cluster is restored to a second between two
  # batches of rows. The archiver runs every 2 s. MySQL: a second backup stores the binlogs
  # since the first (MOCO's format keeps them only from one backup to the next), and a third
  # cluster is restored to a second after that backup, which only the archive reaches.
  k apply -n "$NS" -f - <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: minio-credentials
stringData:
  AWS_ACCESS_KEY_ID: e2e-access
  AWS_SECRET_ACCESS_KEY: e2e-secret-key
  MINIO_ROOT_USER: e2e-access
  MINIO_ROOT_PASSWORD: e2e-secret-key
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: minio
spec:
  selector: {matchLabels: {app: minio}}
  template:
    metadata: {labels: {app: minio}}
    spec:
      containers:
      - name: minio
        image: $MINIO_IMAGE
        args: ["server", "/data"]
        envFrom: [{secretRef: {name: minio-credentials}}]
        ports: [{containerPort: 9000}]
        volumeMounts: [{name: data, mountPath: /data}]
      volumes: [{name: data, emptyDir: {}}]
---
apiVersion: v1
kind: Service
metadata:
  name: minio
spec:
  selector: {app: minio}
  ports: [{port: 9000}]
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: backup-owner
---
apiVersion: moco.cybozu.com/v1beta2
kind: BackupPolicy
metadata:
  name: e2e
spec:
  schedule: "0 0 1 1 *"
  jobConfig:
    serviceAccountName: backup-owner
    envFrom: [{secretRef: {name: minio-credentials}}]
    bucketConfig:
      bucketName: moco
      region: us-east-1
      endpointURL: http://minio.$NS.svc:9000
      usePathStyle: true
    workVolume: {emptyDir: {}}
    cpu: 100m
    memory: 256Mi
EOF
  k -n "$NS" rollout status deployment/minio --timeout=5m
  k -n "$NS" delete job e2e-make-bucket --ignore-not-found
  k -n "$NS" create job e2e-make-bucket --image="$MINIO_CLIENT_IMAGE" -- sh -c \
    'mc alias set m http://minio:9000 e2e-access e2e-secret-key && mc mb -p m/moco'
  k -n "$NS" wait job/e2e-make-bucket --for=condition=Complete --timeout=5m
  run_backup_job() { # JOB
    k -n "$NS" delete job "$1" --ignore-not-found
    k -n "$NS" create job "$1" --from="cronjob/moco-backup-$NAME"
    k -n "$NS" wait "job/$1" --for=condition=Complete --timeout=15m
  }
  k patch mysqlcluster "$NAME" -n "$NS" --type=merge -p \
    '{"metadata":{"annotations":{"moco-rs/binlog-archive-interval":"2s","moco-rs/backup-max-rate":"200Mi"}},"spec":{"backupPolicyName":"e2e"}}'
  wait_for 300 "CronJob moco-backup-$NAME" k get cronjob "moco-backup-$NAME" -n "$NS"
  k get cronjob "moco-backup-$NAME" -n "$NS" \
    -o jsonpath='{.spec.jobTemplate.spec.template.spec.containers[0].args}' | grep -q -- '--max-rate=200Mi' \
    || die "the backup CronJob does not carry the annotation's --max-rate"
  wait_for 300 "the archiver moco-archive-$NAME" \
    k wait "deployment/moco-archive-$NAME" -n "$NS" --for=condition=Available --timeout=5s
  run_backup_job e2e-backup
  backup_time=$(k get mysqlcluster "$NAME" -n "$NS" -o jsonpath='{.status.backup.time}')
  [[ -n $backup_time ]] || die "status.backup.time is empty after the backup Job"
  pass "backup Job completed (status.backup.time $backup_time)"

  sleep 2
  wait_for 120 "rows 201-300 to be written" write_rows 201 300
  sleep 2
  point=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  sleep 2
  wait_for 120 "rows 301-400 to be written" write_rows 301 400
  note "restore point $point: rows 1-300 before it, 301-400 after it"
  if [[ $FLAVOR == mariadb ]]; then
    sleep 20 # a few archiving rounds
    flavor_meta='  annotations: {moco-rs/flavor: mariadb}'
    mysqld_command='        command: ["mariadbd"]'
  else
    run_backup_job e2e-backup-2
    binlog_size=$(k get mysqlcluster "$NAME" -n "$NS" -o jsonpath='{.status.backup.binlogSize}')
    [[ ${binlog_size:-0} -gt 0 ]] || die "the second backup stored no binlogs (binlogSize ${binlog_size:-empty})"
    pass "second backup Job stored the binlogs since the first ($binlog_size bytes)"
    sleep 2
    wait_for 120 "rows 401-500 to be written" write_rows 401 500
    sleep 2
    archive_point=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    note "archive restore point $archive_point: rows 1-500 before it, after the newest backup"
    sleep 20 # a few archiving rounds
    flavor_meta='  annotations: {}'
    mysqld_command=''
  fi
  restored_cluster() { # NAME POINT
    k apply -f - <<EOF
apiVersion: moco.cybozu.com/v1beta2
kind: MySQLCluster
metadata:
  namespace: $NS
  name: $1
$flavor_meta
spec:
  replicas: 1
  podTemplate:
    spec:
      containers:
      - name: mysqld
        image: $MYSQL_IMAGE
$mysqld_command
        resources: {requests: {cpu: 100m, memory: 512Mi}}
  volumeClaimTemplates:
  - metadata: {name: mysql-data}
    spec:
      accessModes: ["ReadWriteOnce"]
      storageClassName: $STORAGE_CLASS
      resources: {requests: {storage: 1Gi}}
  restore:
    sourceName: $NAME
    sourceNamespace: $NS
    restorePoint: "$2"
    jobConfig:
      serviceAccountName: backup-owner
      envFrom: [{secretRef: {name: minio-credentials}}]
      bucketConfig:
        bucketName: moco
        region: us-east-1
        endpointURL: http://minio.$NS.svc:9000
        usePathStyle: true
      workVolume: {emptyDir: {}}
      cpu: 100m
      memory: 256Mi
EOF
  }
  restored_time() { # NAME
    [[ -n "$(k get mysqlcluster "$1" -n "$NS" -o jsonpath='{.status.restoredTime}')" ]]
  }
  restored_cluster restored "$point"
  wait_for 900 "MySQLCluster restored to record restoredTime" restored_time restored
  k wait mysqlcluster/restored -n "$NS" --for=condition=Healthy --timeout=10m
  wait_for 120 "rows 1-300 (and none after the point) in moco-restored-0" \
    rows_are moco-restored-0 127.0.0.1 300
  pass "restored to $point: rows 1-300, none of 301-400"
  if [[ $FLAVOR == mysql ]]; then
    restored_cluster restored-archive "$archive_point"
    wait_for 900 "MySQLCluster restored-archive to record restoredTime" restored_time restored-archive
    k wait mysqlcluster/restored-archive -n "$NS" --for=condition=Healthy --timeout=10m
    wait_for 120 "rows 1-500 in moco-restored-archive-0" \
      rows_are moco-restored-archive-0 127.0.0.1 500
    pass "restored through the binlog archive to $archive_point: rows 1-500"
  fi

step "11. summary"
for item in "${passed[@]}"; do printf '   PASS  %s\n' "$item"; done
printf '\nE2E PASSED (%s checks)\n' "${#passed[@]}"
