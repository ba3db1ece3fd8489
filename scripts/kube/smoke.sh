#!/usr/bin/env bash
# The spike's check that the binaries scripts/kube/build.sh made run as a control plane:
# etcd, kube-apiserver (RBAC, certificates made here by openssl) and kube-controller-manager
# on loopback ports for a few seconds, then kubectl and helm against them. Every process is
# started here and stopped by its pid; the temporary directory is removed.
#
#   scripts/kube/smoke.sh [BIN_DIR]     # BIN_DIR: what build.sh prints (it is run if omitted)
#
# Not the test harness (a later step): nothing here is used by the tests.
set -euo pipefail

me="scripts/kube/smoke.sh"
die() { echo "$me: $*" >&2; exit 1; }
log() { echo "$me: $*" >&2; }

bin=${1:-$("$(dirname "${BASH_SOURCE[0]}")/build.sh")}
for b in etcd kube-apiserver kube-controller-manager kubectl helm; do
    [[ -x "$bin/$b" ]] || die "no $b in $bin"
done
command -v openssl >/dev/null || die "no openssl"
command -v curl >/dev/null || die "no curl"

tmp=$(mktemp -d)
pids=()
# stop PID: SIGTERM, then SIGKILL if it is still there after 20 s.
stop() {
    kill "$1" 2>/dev/null || return 0
    local _
    for _ in $(seq 1 40); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.5
    done
    kill -9 "$1" 2>/dev/null && log "pid $1 ignored SIGTERM for 20 s: killed"
    wait "$1" 2>/dev/null || true
}
# Last started, first stopped: kube-apiserver's graceful shutdown waits on etcd.
cleanup() {
    local i
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop "${pids[i]}"; done
    rm -rf "$tmp"
}
trap cleanup EXIT

# Free loopback ports, chosen by the kernel.
read -r etcd_port peer_port api_port kcm_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')

# --- certificates: a CA, the apiserver's serving certificate, an admin client, the SA key
cd "$tmp"
ssl() { openssl "$@" 2>/dev/null || die "openssl $1 failed"; }
ssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 1 -subj "/CN=moco-rs spike CA"
cert() { # NAME SUBJECT [EXTENSIONS]
    ssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
    printf '%s\n' "${3:-extendedKeyUsage=clientAuth}" >"$1.ext"
    ssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -out "$1.crt" -extfile "$1.ext"
}
cert apiserver "/CN=kube-apiserver" \
    "subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes.default.svc
extendedKeyUsage=serverAuth"
cert admin "/O=system:masters/CN=moco-rs-admin"
ssl genrsa -out sa.key 2048
ssl rsa -in sa.key -pubout -out sa.pub
cat >kubeconfig <<EOF
apiVersion: v1
kind: Config
clusters:
- name: spike
  cluster: {server: "https://127.0.0.1:$api_port", certificate-authority: $tmp/ca.crt}
users:
- name: admin
  user: {client-certificate: $tmp/admin.crt, client-key: $tmp/admin.key}
contexts:
- name: spike
  context: {cluster: spike, user: admin}
current-context: spike
EOF

# --- etcd
"$bin/etcd" --name spike --data-dir "$tmp/etcd" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "spike=http://127.0.0.1:$peer_port" >etcd.log 2>&1 &
pids+=($!)

# --- kube-apiserver
start=$(date +%s.%N)
"$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --secure-port "$api_port" --advertise-address 127.0.0.1 \
    --endpoint-reconciler-type none --cert-dir "$tmp/apiserver-certs" \
    --tls-cert-file apiserver.crt --tls-private-key-file apiserver.key --client-ca-file ca.crt \
    --authorization-mode RBAC --service-cluster-ip-range 10.96.0.0/16 \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file sa.pub \
    --service-account-signing-key-file sa.key --enable-priority-and-fairness=false \
    >apiserver.log 2>&1 &
pids+=($!)

k() { "$bin/kubectl" --kubeconfig "$tmp/kubeconfig" "$@"; }
ready=""
for _ in $(seq 1 120); do
    if ready=$(k get --raw /readyz 2>/dev/null) && [[ $ready == ok ]]; then break; fi
    kill -0 "${pids[1]}" 2>/dev/null || { tail -20 apiserver.log >&2; die "kube-apiserver exited"; }
    sleep 0.5
done
[[ $ready == ok ]] || { tail -20 apiserver.log >&2; die "kube-apiserver not ready in 60 s"; }
log "kube-apiserver /readyz: $ready after $(python3 -c "import time; print(round(time.time() - $start, 1))") s"
log "server: $(k version -o json | python3 -c 'import json, sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')"

# --- kube-controller-manager: its service-account controller creates `default` in every namespace
"$bin/kube-controller-manager" --kubeconfig "$tmp/kubeconfig" --leader-elect=false \
    --bind-address 127.0.0.1 --secure-port "$kcm_port" --cert-dir "$tmp/kcm-certs" \
    --authorization-always-allow-paths /healthz --root-ca-file ca.crt \
    --service-account-private-key-file sa.key --use-service-account-credentials \
    >kcm.log 2>&1 &
pids+=($!)
k create namespace spike >/dev/null
sa=""
for _ in $(seq 1 120); do
    sa=$(k -n spike get serviceaccount default -o name 2>/dev/null) && break
    kill -0 "${pids[2]}" 2>/dev/null || { tail -20 kcm.log >&2; die "kube-controller-manager exited"; }
    sleep 0.5
done
[[ -n $sa ]] || { tail -20 kcm.log >&2; die "kube-controller-manager made no service account in 60 s"; }
log "kube-controller-manager /healthz: $(curl -sk "https://127.0.0.1:$kcm_port/healthz"); made $sa"

# --- RBAC is enforced: a service account's token may not list Secrets
token=$(k -n spike create token default)
code=$(curl -s -o denied.json -w '%{http_code}' --cacert ca.crt -H "Authorization: Bearer $token" \
    "https://127.0.0.1:$api_port/api/v1/namespaces/spike/secrets")
[[ $code == 403 ]] || die "the default service account listing Secrets got $code, not 403: $(cat denied.json)"
log "RBAC: 403 $(python3 -c 'import json, sys; print(json.load(sys.stdin)["message"])' <denied.json)"

# --- helm talks to it
HELM_CACHE_HOME="$tmp/helm" HELM_CONFIG_HOME="$tmp/helm" HELM_DATA_HOME="$tmp/helm" \
    "$bin/helm" --kubeconfig "$tmp/kubeconfig" list --all-namespaces >helm.txt ||
    die "helm list failed: $(cat helm.txt)"
log "helm list: $(head -1 helm.txt)"

rss() { awk '/VmRSS/ {printf "%d MB", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }
log "resident memory: etcd $(rss "${pids[0]}"), kube-apiserver $(rss "${pids[1]}"), kube-controller-manager $(rss "${pids[2]}")"
log "ok"
