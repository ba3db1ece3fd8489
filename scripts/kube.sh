#!/usr/bin/env bash
# A real Kubernetes control plane for moco-rs's tests, with Pods run as local processes:
# etcd, kube-apiserver and kube-controller-manager (built from Go modules by
# scripts/kube/build.sh), and `pod-runner` (testing/moco-pod-runner/) standing in for the kubelets,
# the container runtime, the scheduler and a volume provisioner.
#
#   scripts/kube.sh up --dir DIR [--nodes N]   # returns once every Node is Ready
#   scripts/kube.sh install --dir DIR [--helm] # cert-manager, then moco-rs's operator
#   scripts/kube.sh status --dir DIR
#   scripts/kube.sh down --dir DIR             # idempotent
#
# up makes, under DIR (only these names: DIR itself is never removed; a DIR that is not empty
# must be one up made, with its marker .moco-kube-dir):
#   kubeconfig          cluster admin (client certificate, O=system:masters)
#   runner.kubeconfig   the runner's identity
#   env                 `export KEY=VALUE` lines for tests: KUBECONFIG, PATH, the addresses
#   bin/                kubectl, helm, pod-runner (links); install adds cert-manager's programs
#   pids                `NAME PID` per started process, in start order
#   logs/NAME.log       each process's output
#   pki/ etcd/ runner/  certificates, etcd's data, the runner's state (runner/volumes: PVs)
#
# The network: a bridge mkubeKK (KK = 00..39, the first index whose bridge, Pod range
# 10.(200+KK).0.0/16 and Service range 10.(160+KK).0.0/16 meet no existing link, address or
# route) made by `pod-runner network-up`; Node i has address 10.(200+KK).0.(i+1) and Pods
# 10.(200+KK).(i+1).0/24. kube-apiserver listens on Node 0's address only, port 6443, so that
# Pods reach it on the bridge; etcd and kube-controller-manager listen on 127.0.0.1. etcd takes
# only clients with a certificate of its own CA (DIR/pki/etcd-ca.crt): kube-apiserver's.
#
# install, into a DIR that `up` started, as a user installs: cert-manager (its controller,
# cainjector and webhook built by `scripts/kube/build.sh cert-manager`, its own Helm chart
# rendered by helm with crds.enabled=true and applied; ready once a self-signed Issuer has
# issued a Certificate through its webhook), then the operator: `kubectl apply -k deploy/`,
# or with --helm `helm install moco charts/moco`, both into moco-system, the image
# ghcr.io/moco-rs/moco mapped by the Pod runner to moco-rs's `moco` (MOCO_BIN when `up` ran,
# else the one beside pod-runner). It returns once the Deployment moco-controller is
# Available and its webhooks answer over TLS (a server-side dry run of
# docs/examples/invalid/missing-mysqld-container.yaml refused with MOCO's message). A failed
# install stops where it failed and leaves what it made (down removes everything).
#
# Environment: MOCO_POD_RUNNER (a pod-runner binary to use instead of building one with
# cargo), MOCO_KUBE_UP_TIMEOUT (seconds for each start-up step, 120 by default),
# MOCO_KUBE_INSTALL_TIMEOUT (seconds for each install step, 300 by default), and those of
# scripts/kube/build.sh.
set -euo pipefail

me="scripts/kube.sh"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
step_timeout=${MOCO_KUBE_UP_TIMEOUT:-120}
api_port=6443
storage_class=standard
cluster_domain=cluster.local

die() {
    echo "$me: $*" >&2
    exit 1
}
log() { echo "$me: $*" >&2; }
usage() {
    sed -n '7,10p' "${BASH_SOURCE[0]}" | sed 's/^#   //'
}

[[ $# -ge 1 ]] || {
    usage >&2
    exit 2
}
command=$1
shift
dir=""
nodes=1
helm_install=0
while (($#)); do
    case $1 in
    --dir)
        [[ $# -ge 2 ]] || die "--dir needs a value"
        dir=$2
        shift 2
        ;;
    --dir=*)
        dir=${1#--dir=}
        shift
        ;;
    --nodes)
        [[ $# -ge 2 ]] || die "--nodes needs a value"
        nodes=$2
        shift 2
        ;;
    --nodes=*)
        nodes=${1#--nodes=}
        shift
        ;;
    --helm)
        helm_install=1
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *) die "unknown argument: $1 (usage: $me up|install|status|down --dir DIR [--nodes N] [--helm])" ;;
    esac
done
case $command in
up | down | status | install) ;;
-h | --help)
    usage
    exit 0
    ;;
*) die "unknown command: $command (up, install, status or down)" ;;
esac
((helm_install == 0)) || [[ $command == install ]] || die "--helm is an option of install only"
[[ -n $dir ]] || die "$command: --dir DIR is required"
if ! [[ $nodes =~ ^[0-9]+$ ]] || ((nodes < 1 || nodes > 50)); then
    die "--nodes: $nodes is not a number from 1 to 50"
fi
# DIR goes into kubeconfigs, the env file and command lines unquoted: keep it plain.
[[ $dir =~ ^[A-Za-z0-9_./+-]+$ ]] ||
    die "--dir: $dir has characters other than letters, digits and _./+- (it is written unquoted into DIR/env)"
# up removes what an earlier up made under DIR: never in a directory it did not make. DIR is
# ours when it is new or empty, or holds the marker (or, from a release before the marker,
# the env file up writes).
marker=.moco-kube-dir
if [[ $command == up ]]; then
    if [[ -d $dir && -n $(ls -A "$dir") && ! -e $dir/$marker ]] &&
        ! head -n 1 "$dir/env" 2>/dev/null | grep -q "^# scripts/kube.sh up --dir "; then
        die "up: $dir is not empty and was not made by \`$me up\` (no $dir/$marker): it would remove $dir/bin, $dir/pki and their siblings; choose a new or empty directory"
    fi
    mkdir -p "$dir"
    touch "$dir/$marker"
fi
if [[ ! -d $dir ]]; then
    [[ $command == down ]] && {
        log "down: $dir does not exist: nothing to stop"
        exit 0
    }
    die "$command: $dir does not exist"
fi
dir=$(cd "$dir" && pwd)

pids_file=$dir/pids
state=$dir/runner

# --- processes ----------------------------------------------------------------------------

# ours PID: whether PID is alive and one of this DIR's processes. Each is started with DIR in
# its arguments, so that a pid reused by another program after a crash is never signalled.
ours() {
    local cmdline
    kill -0 "$1" 2>/dev/null || return 1
    cmdline=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
    [[ $cmdline == *"$dir/"* ]]
}

# alive: the `NAME PID` lines of DIR/pids whose process is still there.
alive() {
    [[ -f $pids_file ]] || return 0
    local name pid
    while read -r name pid; do
        if [[ -n ${pid:-} ]] && ours "$pid"; then echo "$name $pid"; fi
    done <"$pids_file"
}

# stop NAME PID SECONDS: SIGTERM, then SIGKILL after SECONDS if it is still there.
stop() {
    local name=$1 pid=$2 deadline=$((SECONDS + $3))
    ours "$pid" || return 0
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || return 0
    while ours "$pid"; do
        if ((SECONDS >= deadline)); then
            log "$name (pid $pid) still there $3 s after SIGTERM: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
            break
        fi
        sleep 0.1
    done
    # Reap it if it is our child (a failing `up`); elsewhere this is a no-op.
    wait "$pid" 2>/dev/null || true
}

# runner_binary: the pod-runner to use for `network-up`/`down` (DIR/bin's link once `up` made it).
runner_binary() {
    if [[ -x $dir/bin/pod-runner ]]; then
        echo "$dir/bin/pod-runner"
    elif [[ -n ${MOCO_POD_RUNNER:-} ]]; then
        echo "$MOCO_POD_RUNNER"
    elif [[ -x $repo/target/debug/pod-runner ]]; then
        echo "$repo/target/debug/pod-runner"
    fi
}

# teardown: stop every process of DIR/pids, last started first, then remove what the runner
# made on the machine, then check. Used by `down` and by an `up` that fails half-way.
teardown() {
    local lines=() i name pid left runner rc=0
    if [[ -f $pids_file ]]; then mapfile -t lines <"$pids_file"; fi
    for ((i = ${#lines[@]} - 1; i >= 0; i--)); do
        read -r name pid <<<"${lines[i]}"
        [[ -n ${pid:-} ]] || continue
        # The runner stops every container first (mysqld's shutdown takes a while).
        if [[ $name == pod-runner ]]; then stop "$name" "$pid" 60; else stop "$name" "$pid" 20; fi
    done
    if [[ -f $state/network.json ]]; then
        runner=$(runner_binary)
        if [[ -z $runner ]]; then
            log "no pod-runner binary to run \`down\` with: the network of $state stays"
            rc=1
        elif ! "$runner" down --state-dir "$state"; then
            log "\`pod-runner down --state-dir $state\` failed (above)"
            rc=1
        fi
    fi
    left=$(alive)
    if [[ -n $left ]]; then
        log "still alive after down: $(echo "$left" | tr '\n' ' ')"
        return 1
    fi
    rm -f "$pids_file"
    return "$rc"
}

# --- down, status -------------------------------------------------------------------------

lock_dir() {
    exec 9>"$dir/.lock"
    flock -w 300 9 || die "another up or down of $dir holds $dir/.lock"
}

if [[ $command == down ]]; then
    lock_dir
    if [[ ! -f $pids_file && ! -f $state/network.json ]]; then
        log "down: nothing runs from $dir"
        exit 0
    fi
    teardown || die "down: not everything was removed (above)"
    log "down: stopped"
    exit 0
fi

if [[ $command == status ]]; then
    [[ -f $pids_file ]] || {
        echo "nothing started from $dir"
        exit 1
    }
    down=0
    while read -r name pid; do
        if ours "$pid"; then
            printf '%-24s %-8s alive, %s MiB resident\n' "$name" "$pid" \
                "$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$pid/status" 2>/dev/null)"
        else
            printf '%-24s %-8s gone\n' "$name" "$pid"
            down=1
        fi
    done <"$pids_file"
    if [[ -x $dir/bin/kubectl ]]; then
        "$dir/bin/kubectl" --kubeconfig "$dir/kubeconfig" get nodes -o wide --request-timeout 5s || down=1
    fi
    exit "$down"
fi

# --- install ------------------------------------------------------------------------------

if [[ $command == install ]]; then
    install_timeout=${MOCO_KUBE_INSTALL_TIMEOUT:-300}
    [[ -f $dir/env && -f $dir/kubeconfig ]] ||
        die "install: $dir was not started by \`$me up\` (no $dir/env); \`$me up --dir $dir\` first"
    running=$(alive)
    for p in etcd kube-apiserver kube-controller-manager pod-runner; do
        grep -q "^$p " <<<"$running" ||
            die "install: $dir is not running ($p is not alive); \`$me up --dir $dir\` first"
    done
    [[ -x $dir/bin/kubectl ]] || die "install: no kubectl in $dir/bin"
    [[ -x $dir/bin/helm ]] ||
        die "install: no helm in $dir/bin (it renders cert-manager's chart, and installs moco-rs's with --helm)"
    lock_dir
    k() { "$dir/bin/kubectl" --kubeconfig "$dir/kubeconfig" --request-timeout 30s "$@"; }
    helm() { "$dir/bin/helm" --kubeconfig "$dir/kubeconfig" "$@"; }
    k get --raw /readyz >/dev/null 2>&1 || die "install: the API server of $dir does not answer /readyz"
    if k get crd mysqlclusters.moco.cybozu.com >/dev/null 2>&1; then
        die "install: moco-rs's operator is already installed in $dir (the CRD mysqlclusters.moco.cybozu.com exists); \`$me down\`, then \`up\`, for a fresh cluster"
    fi

    # diagnose NAMESPACE: what a timed-out step leaves to read: its Pods and their events.
    diagnose() {
        echo "--- Pods and events in $1:" >&2
        k -n "$1" get pods -o wide >&2 || true
        k -n "$1" get events --sort-by=.lastTimestamp 2>/dev/null | tail -n 15 >&2 || true
        echo "--- container logs: $state/logs/" >&2
    }
    # retry WHAT NAMESPACE COMMAND...: until COMMAND succeeds, at most $install_timeout s; its
    # last output is shown on failure.
    retry() {
        local what=$1 ns=$2 deadline=$((SECONDS + install_timeout)) out
        shift 2
        until out=$("$@" 2>&1); do
            if ((SECONDS >= deadline)); then
                echo "$out" | tail -n 5 >&2
                diagnose "$ns"
                die "install: $what: not so after $install_timeout s"
            fi
            sleep 1
        done
    }
    elapsed() { python3 -c "import time; print(f'{time.time() - $1:.1f}')"; }

    # --- cert-manager
    cm_started=$(date +%s.%N)
    cm=$("$repo/scripts/kube/build.sh" cert-manager) || die "install: scripts/kube/build.sh cert-manager failed (above)"
    for c in controller cainjector webhook; do
        ln -sfn "$cm/bin/cert-manager-$c" "$dir/bin/cert-manager-$c"
    done
    server_version=$(k version -o json | python3 -c 'import json, sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])') ||
        die "install: could not read the API server's version"
    # --kube-version: helm's own default (without the build's version flags) is v1.20, which
    # the chart's kubeVersion refuses. The startupapicheck Job is left out: its program is
    # not built (install checks issuance itself, below).
    helm template cert-manager "$cm/charts/cert-manager" --namespace cert-manager \
        --kube-version "$server_version" --set crds.enabled=true \
        --set startupapicheck.enabled=false >"$dir/cert-manager.yaml" ||
        die "install: helm template of $cm/charts/cert-manager failed (above)"
    log "install: cert-manager $(sed -n 's/^appVersion: //p' "$cm/charts/cert-manager/Chart.yaml") ($(grep -c '^kind:' "$dir/cert-manager.yaml") objects)"
    k create namespace cert-manager --dry-run=client -o yaml | k apply -f - >/dev/null ||
        die "install: creating the namespace cert-manager failed"
    k apply --server-side -f "$dir/cert-manager.yaml" >/dev/null ||
        die "install: kubectl apply of cert-manager's chart ($dir/cert-manager.yaml) failed (above)"
    retry "cert-manager's Deployments Available" cert-manager \
        k -n cert-manager wait deployment --all --for=condition=Available --timeout=5s
    # Its webhook and CA injector work once a self-signed Issuer passes the webhook (which the
    # API server calls with the caBundle the injector set) and its Certificate is issued.
    check="apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: moco-rs-install-check, namespace: cert-manager}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: moco-rs-install-check, namespace: cert-manager}
spec:
  secretName: moco-rs-install-check
  commonName: moco-rs-install-check
  issuerRef: {name: moco-rs-install-check, kind: Issuer}"
    apply_check() { k apply -f - <<<"$check"; }
    retry "cert-manager's webhook admitting an Issuer" cert-manager apply_check
    retry "a self-signed Certificate issued by cert-manager" cert-manager \
        k -n cert-manager wait certificate/moco-rs-install-check --for=condition=Ready --timeout=5s
    k -n cert-manager delete certificate/moco-rs-install-check issuer/moco-rs-install-check \
        secret/moco-rs-install-check --wait=false >/dev/null 2>&1 || true
    log "install: cert-manager issues certificates, $(elapsed "$cm_started") s"

    # --- moco-rs's operator
    op_started=$(date +%s.%N)
    if ((helm_install)); then
        helm install moco "$repo/charts/moco" --namespace moco-system --create-namespace >/dev/null ||
            die "install: helm install moco $repo/charts/moco failed (above)"
        how="helm install moco charts/moco"
    else
        k apply -k "$repo/deploy" >/dev/null || die "install: kubectl apply -k $repo/deploy failed (above)"
        how="kubectl apply -k deploy/"
    fi
    retry "the Deployment moco-system/moco-controller Available" moco-system \
        k -n moco-system wait deployment/moco-controller --for=condition=Available --timeout=5s
    # The webhooks answer over TLS (the caBundle injected by cert-manager) with MOCO's message.
    invalid=$repo/docs/examples/invalid/missing-mysqld-container.yaml
    # answered: the API server called the webhook and it gave a verdict (either way).
    answered() {
        local out
        out=$(k create --dry-run=server -f "$invalid" 2>&1) && return 0
        echo "$out"
        grep -q 'containers must include a container named "mysqld"' <<<"$out"
    }
    retry "the webhooks refusing $invalid with MOCO's message" moco-system answered
    if out=$(k create --dry-run=server -f "$invalid" 2>&1); then
        die "install: the webhooks let $invalid through: $out"
    fi
    log "install: the operator ($how) Available and its webhooks answering, $(elapsed "$op_started") s"
    log "install: done in $(elapsed "$cm_started") s"
    exit 0
fi

# --- up -----------------------------------------------------------------------------------

started_at=$(date +%s.%N)
lock_dir
running=$(alive)
[[ -z $running ]] || die "up: $dir is already running ($(echo "$running" | tr '\n' ' ')); \`$me down --dir $dir\` first"

up_done=0
on_exit() {
    local rc=$?
    ((up_done)) && return
    trap - EXIT INT TERM
    log "up failed: stopping what was started"
    teardown || log "the clean-up was incomplete (above); \`$me down --dir $dir\` may finish it"
    exit $((rc == 0 ? 1 : rc))
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A previous run that crashed (no process left) may have left its network: remove it first.
if [[ -f $pids_file || -f $state/network.json ]]; then
    log "up: cleaning what a previous run left in $dir"
    teardown || die "up: could not clean a previous run's leftovers (above)"
fi

command -v openssl >/dev/null || die "no openssl on PATH"
command -v curl >/dev/null || die "no curl on PATH"
command -v python3 >/dev/null || die "no python3 on PATH"
command -v ip >/dev/null || die "no ip (iproute2) on PATH"
command -v setsid >/dev/null || die "no setsid on PATH"

bin=$("$repo/scripts/kube/build.sh") || die "scripts/kube/build.sh failed (above)"
for b in etcd kube-apiserver kube-controller-manager kubectl helm; do
    [[ -x $bin/$b ]] || die "no $b in $bin (scripts/kube/build.sh's directory)"
done

if [[ -n ${MOCO_POD_RUNNER:-} ]]; then
    runner=$MOCO_POD_RUNNER
    [[ -x $runner && ! -d $runner ]] || die "MOCO_POD_RUNNER=$runner is not an executable file"
else
    log "building pod-runner (cargo build -p moco-pod-runner --bin pod-runner)"
    runner=$(cd "$repo" && CARGO_INCREMENTAL=0 cargo build -p moco-pod-runner --bin pod-runner \
        --message-format json-render-diagnostics |
        python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "pod-runner":
        print(m["executable"])') || die "building pod-runner failed (cargo's output is above)"
    [[ -x $runner ]] || die "cargo built no pod-runner binary"
fi
runner=$(realpath "$runner")

# A fresh cluster each time: remove what a previous run of this DIR kept (never DIR itself).
# The runner's state may hold bind mounts while Pods run; teardown removed them, and
# --one-file-system refuses to cross one that is left.
if awk -v s="$state" '$5 == s || index($5, s "/") == 1 {found = 1} END {exit !found}' /proc/self/mountinfo; then
    die "up: something is still mounted under $state (see /proc/self/mountinfo); not removing it"
fi
rm -rf --one-file-system "${dir:?}/pki" "$dir/etcd" "$state" "$dir/logs" "${dir:?}/bin" \
    "$dir/kubeconfig" "$dir/runner.kubeconfig" "$dir/env"
mkdir -p "$dir/pki" "$dir/logs" "$dir/bin" "$state"
ln -s "$bin/kubectl" "$dir/bin/kubectl"
ln -s "$bin/helm" "$dir/bin/helm"
ln -s "$runner" "$dir/bin/pod-runner"

# --- the network: choose a free index, let the runner make the bridge and Node addresses ----

# free_index: the first KK in 0..39 whose bridge name, Pod and Service ranges are unused here:
# no link or network namespace named after the bridge, no address or route (any table) meeting
# either range (default routes excepted).
free_index() {
    {
        ip -j link show
        ip -j -4 addr show
        ip -j -4 route show table all
        ip netns list 2>/dev/null | python3 -c 'import json, sys; print(json.dumps([l.split()[0] for l in sys.stdin if l.strip()]))'
    } | python3 -c '
import ipaddress, json, sys
links, addrs, routes, netns = [json.loads(l) for l in sys.stdin if l.strip()]
names = [l["ifname"] for l in links] + netns
nets = []
for a in addrs:
    for i in a.get("addr_info", []):
        nets.append(ipaddress.ip_network("%s/%s" % (i["local"], i["prefixlen"]), strict=False))
for r in routes:
    if r.get("dst", "default") != "default":
        nets.append(ipaddress.ip_network(r["dst"], strict=False))
for k in range(40):
    bridge = "mkube%02d" % k
    pod = ipaddress.ip_network("10.%d.0.0/16" % (200 + k))
    svc = ipaddress.ip_network("10.%d.0.0/16" % (160 + k))
    if any(n.startswith(bridge) for n in names):
        continue
    if any(n.overlaps(pod) or n.overlaps(svc) for n in nets):
        continue
    print(k)
    break
'
}

# The index is taken once the bridge exists: two `up`s choosing at once would collide, so
# the choice and network-up happen under one machine-wide lock.
exec 8>"${TMPDIR:-/tmp}/moco-kube-network.lock"
flock -w 300 8 || die "up: another scripts/kube.sh up holds ${TMPDIR:-/tmp}/moco-kube-network.lock"
k=$(free_index) || die "up: could not read the machine's links and routes (ip -j)"
[[ -n $k ]] || die "up: no free index: mkube00..mkube39, 10.200-239.0.0/16 and 10.160-199.0.0/16 are all in use"
bridge=$(printf 'mkube%02d' "$k")
pod_cidr="10.$((200 + k)).0.0/16"
service_cidr="10.$((160 + k)).0.0/16"
service_ip="10.$((160 + k)).0.1"
log "network: bridge $bridge, Pods $pod_cidr, Services $service_cidr, $nodes Node(s)"
"$runner" network-up --state-dir "$state" --bridge "$bridge" --pod-cidr "$pod_cidr" \
    --service-cidr "$service_cidr" --nodes "$nodes" >"$dir/logs/network-up.log" 2>&1 || {
    tail -n 20 "$dir/logs/network-up.log" >&2
    die "up: pod-runner network-up failed (its output is above)"
}
flock -u 8
exec 8>&-
api_ip=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["nodes"][0]["address"])' "$state/network.json") ||
    die "up: $state/network.json (from network-up) names no Node address"
api="https://$api_ip:$api_port"

# --- certificates -----------------------------------------------------------------------
# One CA for serving and client certificates; ECDSA P-256 keys (quick to make).
pki=$dir/pki
ssl() {
    local out
    out=$(openssl "$@" 2>&1) || die "openssl $1 failed: $out"
}
ssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/ca.key" \
    -out "$pki/ca.crt" -days 365 -subj "/CN=moco-rs test cluster CA"
# cert NAME SUBJECT EXTENSIONS [CA]: signed by DIR/pki/CA.crt (ca by default)
cert() {
    local ca=${4:-ca}
    ssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/$1.key" \
        -out "$pki/$1.csr" -subj "$2"
    printf '%s\n' "$3" >"$pki/$1.ext"
    ssl x509 -req -in "$pki/$1.csr" -CA "$pki/$ca.crt" -CAkey "$pki/$ca.key" -CAcreateserial \
        -days 365 -out "$pki/$1.crt" -extfile "$pki/$1.ext"
}
client="keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
cert apiserver "/CN=kube-apiserver" "subjectAltName=IP:$api_ip,IP:127.0.0.1,IP:$service_ip,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$cluster_domain,DNS:localhost
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth"
cert admin "/O=system:masters/CN=moco-rs-admin" "$client"
# The controller manager's own identity: its bootstrap ClusterRole (RBAC) is what it may do;
# each controller then runs as its own ServiceAccount (--use-service-account-credentials).
cert kube-controller-manager "/CN=system:kube-controller-manager" "$client"
# The runner is test infrastructure standing in for kubelets, a scheduler and a provisioner
# at once, so it is a cluster admin (O=system:masters) rather than system:node:<name> per Node
# (which the Node authorizer and NodeRestriction would confine to its own Node's objects).
cert pod-runner "/O=system:masters/CN=pod-runner" "$client"
# The aggregation layer's client (kube-apiserver to an extension API server); naming its CA
# as the request-header CA also gives kube-controller-manager's delegated authentication
# the front-proxy configuration it looks up at start (else it logs errors over and over).
cert front-proxy-client "/CN=front-proxy-client" "$client"
# For the API server's calls to a kubelet endpoint (logs, exec), should the runner serve one.
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
# etcd has a CA of its own and takes only clients with a certificate of it (client and peer
# URLs): any local user could otherwise write to etcd on loopback, and so run a Pod with a
# hostPath volume as root through the Pod runner. Only kube-apiserver holds a client
# certificate (etcdctl: --cacert, --cert and --key from DIR/pki, readable by root only).
ssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/etcd-ca.key" \
    -out "$pki/etcd-ca.crt" -days 365 -subj "/CN=moco-rs test etcd CA"
cert etcd "/CN=etcd" "subjectAltName=IP:127.0.0.1,DNS:localhost
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth" etcd-ca
cert apiserver-etcd-client "/CN=kube-apiserver-etcd-client" "$client" etcd-ca
ssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/sa.key"
ssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
chmod 600 "$pki"/*.key

# kubeconfig FILE USER
kubeconfig() {
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: moco-test
  cluster:
    server: $api
    certificate-authority: $pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $pki/$2.crt
    client-key: $pki/$2.key
contexts:
- name: moco-test
  context: {cluster: moco-test, user: $2}
current-context: moco-test
EOF
}
kubeconfig "$dir/kubeconfig" admin
kubeconfig "$dir/runner.kubeconfig" pod-runner
kubeconfig "$pki/kube-controller-manager.kubeconfig" kube-controller-manager

# --- start-up helpers --------------------------------------------------------------------
started=() # "NAME PID" of what this up started

# start NAME COMMAND...: run it in its own session (a Ctrl-C at a terminal reaches the
# script, which stops it; it outlives the script otherwise), output to logs/NAME.log, its pid
# recorded at once so that a failure from here on stops it. Fds 8 and 9 (the locks) closed.
start() {
    local name=$1
    shift
    setsid "$@" </dev/null >"$dir/logs/$name.log" 2>&1 8>&- 9>&- &
    local pid=$!
    echo "$name $pid" >>"$pids_file"
    started+=("$name $pid")
}

# check_started: fail naming any started process that exited, with the tail of its log.
check_started() {
    local entry name pid rc
    for entry in "${started[@]}"; do
        read -r name pid <<<"$entry"
        if ! kill -0 "$pid" 2>/dev/null; then
            rc=0
            wait "$pid" 2>/dev/null || rc=$?
            echo "--- the last lines of $dir/logs/$name.log:" >&2
            tail -n 25 "$dir/logs/$name.log" >&2
            die "up: $name exited during start-up (exit $rc)"
        fi
    done
}

# wait_for WHAT COMMAND...: until COMMAND succeeds, at most $step_timeout s.
wait_for() {
    local what=$1 deadline=$((SECONDS + step_timeout))
    shift
    until "$@" >/dev/null 2>&1; do
        check_started
        ((SECONDS < deadline)) || die "up: $what: not so after ${step_timeout} s (logs in $dir/logs)"
        sleep 0.2
    done
}

free_ports() {
    python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])' "$1"
}
read -r etcd_port peer_port kcm_port < <(free_ports 3)

kubectl() { "$bin/kubectl" --kubeconfig "$dir/kubeconfig" --request-timeout 10s "$@"; }

# --- etcd -------------------------------------------------------------------------------
etcd_url="https://127.0.0.1:$etcd_port"
start etcd "$bin/etcd" --name moco-test --data-dir "$dir/etcd" --unsafe-no-fsync \
    --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
    --cert-file "$pki/etcd.crt" --key-file "$pki/etcd.key" \
    --client-cert-auth --trusted-ca-file "$pki/etcd-ca.crt" \
    --listen-peer-urls "https://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls "https://127.0.0.1:$peer_port" \
    --initial-cluster "moco-test=https://127.0.0.1:$peer_port" \
    --peer-cert-file "$pki/etcd.crt" --peer-key-file "$pki/etcd.key" \
    --peer-client-cert-auth --peer-trusted-ca-file "$pki/etcd-ca.crt" \
    --auto-compaction-mode periodic --auto-compaction-retention 5m --log-level warn
etcd_health() {
    curl -fsS --cacert "$pki/etcd-ca.crt" --cert "$pki/apiserver-etcd-client.crt" \
        --key "$pki/apiserver-etcd-client.key" "$etcd_url/health"
}
wait_for "etcd answering on $etcd_url/health" etcd_health

# --- kube-apiserver ---------------------------------------------------------------------
# The default admission plugins (NamespaceLifecycle, ServiceAccount, DefaultStorageClass,
# PersistentVolumeClaimResize, TaintNodesByCondition, ...) plus NodeRestriction, which only
# confines system:node:<name> identities: the runner's is not one. The endpoint reconciler
# stays the default (lease): the advertised address is Node 0's on the bridge, which is not
# loopback (validation refuses that) and is where Pods reach the API server, so the
# `kubernetes` Service's Endpoints and EndpointSlice name a real, reachable address.
start kube-apiserver "$bin/kube-apiserver" --etcd-servers "$etcd_url" \
    --etcd-cafile "$pki/etcd-ca.crt" --etcd-certfile "$pki/apiserver-etcd-client.crt" \
    --etcd-keyfile "$pki/apiserver-etcd-client.key" \
    --bind-address "$api_ip" --advertise-address "$api_ip" --secure-port "$api_port" \
    --cert-dir "$pki/apiserver-generated" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
    --requestheader-client-ca-file "$pki/ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "$pki/front-proxy-client.crt" \
    --proxy-client-key-file "$pki/front-proxy-client.key" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --allow-privileged=true --service-cluster-ip-range "$service_cidr" \
    --service-account-issuer "https://kubernetes.default.svc.$cluster_domain" \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --enable-priority-and-fairness=false --enable-aggregator-routing=true \
    --profiling=false
api_ready() { [[ $(kubectl get --raw /readyz 2>/dev/null) == ok ]]; }
wait_for "kube-apiserver /readyz at $api" api_ready

# --- kube-controller-manager ------------------------------------------------------------
controllers=(
    serviceaccount-controller serviceaccount-token-controller root-ca-certificate-publisher-controller
    namespace-controller garbage-collector-controller clusterrole-aggregation-controller
    statefulset-controller replicaset-controller deployment-controller daemonset-controller
    job-controller cronjob-controller ttl-after-finished-controller disruption-controller
    endpoints-controller endpointslice-controller endpointslice-mirroring-controller
    persistentvolume-binder-controller persistentvolume-expander-controller
    persistentvolumeclaim-protection-controller persistentvolume-protection-controller
    ephemeral-volume-controller resourcequota-controller
    node-lifecycle-controller taint-eviction-controller pod-garbage-collector-controller
)
kcm_kubeconfig=$pki/kube-controller-manager.kubeconfig
# --node-monitor-grace-period 20s: a Node whose Lease (renewed every 10 s) stops is marked
# Unknown within 20 s, so that Node-loss drills are short.
start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$kcm_kubeconfig" \
    --authentication-kubeconfig "$kcm_kubeconfig" --authorization-kubeconfig "$kcm_kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$kcm_port" \
    --cert-dir "$pki/kcm-generated" \
    --authorization-always-allow-paths /healthz,/readyz,/livez,/metrics \
    --controllers "$(
        IFS=,
        echo "${controllers[*]}"
    )" \
    --root-ca-file "$pki/ca.crt" --service-account-private-key-file "$pki/sa.key" \
    --use-service-account-credentials=true --cluster-name moco-test \
    --node-monitor-grace-period 20s --node-monitor-period 2s \
    --kube-api-qps 100 --kube-api-burst 200 --profiling=false
kcm_ready() { [[ $(curl -sk "https://127.0.0.1:$kcm_port/healthz" 2>/dev/null) == ok ]]; }
wait_for "kube-controller-manager /healthz on 127.0.0.1:$kcm_port" kcm_ready

# --- pod-runner -------------------------------------------------------------------------
# --kube-bin: cert-manager's images run DIR/bin/cert-manager-*, which install links.
start pod-runner "$runner" run --state-dir "$state" --kubeconfig "$dir/runner.kubeconfig" \
    --api-server "$api_ip:$api_port" --cluster-domain "$cluster_domain" \
    --storage-class "$storage_class" --kube-bin "$dir/bin"

node_count() { test "$(kubectl get nodes -o name 2>/dev/null | wc -l)" -ge "$nodes"; }
wait_for "$nodes Node(s) registered" node_count
wait_for "every Node Ready" kubectl wait node --all --for=condition=Ready --timeout=1s
# The node lifecycle controller removes the not-ready taint the Node was created with
# (TaintNodesByCondition) once it sees it Ready; Pods are bound only after that.
untainted() { test -z "$(kubectl get nodes -o jsonpath='{.items[*].spec.taints}')"; }
wait_for "every Node untainted" untainted
wait_for "the default ServiceAccount in default" kubectl -n default get serviceaccount default

cat >"$dir/env" <<EOF
# scripts/kube.sh up --dir $dir: \`. $dir/env\` in a shell; KEY=VALUE after \`export \` elsewhere.
export KUBECONFIG=$dir/kubeconfig
export PATH=$dir/bin:\$PATH
export MOCO_KUBE_DIR=$dir
export MOCO_KUBE_API_SERVER=$api
export MOCO_KUBE_API_ADDRESS=$api_ip:$api_port
export MOCO_KUBE_CA=$pki/ca.crt
export MOCO_KUBE_ETCD=$etcd_url
export MOCO_KUBE_BRIDGE=$bridge
export MOCO_KUBE_POD_CIDR=$pod_cidr
export MOCO_KUBE_SERVICE_CIDR=$service_cidr
export MOCO_KUBE_NODES=$nodes
export MOCO_KUBE_STORAGE_CLASS=$storage_class
export MOCO_KUBE_RUNNER_STATE=$state
export MOCO_POD_RUNNER=$dir/bin/pod-runner
EOF

up_done=1
trap - EXIT INT TERM
log "up in $(python3 -c "import time; print(f'{time.time() - $started_at:.1f}')") s: $nodes Node(s) Ready, API server $api; \`. $dir/env\` to use it"
