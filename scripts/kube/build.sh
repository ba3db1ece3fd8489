#!/usr/bin/env bash
# Build a Kubernetes control plane for moco-rs's tests from Go modules, once per version:
# kube-apiserver, kube-controller-manager, kubectl (k8s.io/kubernetes), etcd and etcdctl
# (go.etcd.io/etcd), helm (helm.sh/helm/v3); and, as a second target with a cache key of its
# own, cert-manager's controller, cainjector and webhook (github.com/cert-manager/cert-manager)
# with its Helm chart.
#
#   BIN=$(scripts/kube/build.sh)      # progress on stderr, the bin directory on stdout
#   CM=$(scripts/kube/build.sh cert-manager)   # CM/bin/cert-manager-{controller,cainjector,
#                                              # webhook}, CM/charts/cert-manager
#
# Nothing upstream is committed: each program is built in a small wrapper module generated
# under the cache directory, from this directory's main packages (ours) and, for k8s, the
# replace lines k8s-replaces.py reads from the upstream go.mod. `go install pkg@version` cannot
# do it: it refuses modules that carry replace lines, as k8s.io/kubernetes and etcd's do.
# The four wrappers are separate modules, so that etcd's, helm's, kubernetes' and
# cert-manager's shared dependencies (grpc, otel, k8s.io/*) stay at the versions each was
# released with.
#
# cert-manager's commands live in modules the proxy does not serve (cmd/controller's go.mod
# names itself github.com/cert-manager/cert-manager/controller-binary and reaches the root
# module through `replace => ../../`; no version of it is published), so its wrapper holds our
# own main packages (cert-manager/: flags -> cert-manager's configuration -> its controllers,
# injectors and webhook server). They import cert-manager's internal packages, which Go allows
# only below github.com/cert-manager/cert-manager/, so the wrapper is named
# github.com/cert-manager/cert-manager/moco-rs-wrapper, as upstream's own command modules are.
# The proxy refuses github.com/Venafi/vcert/v5 v5.13.x (which cert-manager v1.21's Venafi
# issuer imports), so the wrapper builds a copy of the cert-manager module (extracted from the
# module cache) whose pkg/issuer/venafi/client is our stand-in (cert-manager/_stubs/), and
# points vcert at a module holding only the two error types cert-manager names.
#
# The control plane's binaries go to $MOCO_KUBE_CACHE/<versions>/bin (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/moco-rs/kube); <versions> names every version and the Go
# toolchain, plus a hash of this directory's recipe (the main packages, the generator, the
# flags below), so a changed recipe builds anew. When every binary is there, the script only
# prints the directory: a second run builds nothing. Go's own caches (GOMODCACHE, GOCACHE)
# are wherever the environment puts them.
#
# cert-manager's go to $MOCO_KUBE_CACHE/cert-manager-<version>_<go>_<hash>/bin, its chart
# (the module's deploy/charts/cert-manager, version filled in) to .../charts/cert-manager; the
# hash covers cert-manager-module.py, cert-manager/ and the flags. A separate key, so that
# a change to one recipe rebuilds only its own programs.
#
# Environment: KUBE_VERSION, ETCD_VERSION, HELM_VERSION, CERT_MANAGER_VERSION (the versions
# below by default), MOCO_KUBE_CACHE, KUBE_BUILD_NICE (niceness of the Go commands, 10 by
# default).
set -euo pipefail

target=${1:-kube}
case $target in
kube | cert-manager) ;;
*)
    echo "scripts/kube/build.sh: unknown target $target (kube, the default, or cert-manager)" >&2
    exit 2
    ;;
esac

KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-v1.21.2}
NICE=${KUBE_BUILD_NICE:-10}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
me="scripts/kube/build.sh"

die() { echo "$me: $*" >&2; exit 1; }
log() { echo "$me: $*" >&2; }

command -v go >/dev/null || die "no go command on PATH"
command -v python3 >/dev/null || die "no python3 on PATH (k8s-replaces.py needs it)"

# The machine's Go, never a downloaded toolchain; static binaries; no workspace or vendor
# directory above the wrappers; no inherited flag (-mod=vendor would break the build).
export GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off GOFLAGS=
go_version=$(go env GOVERSION)

kube_minor=${KUBE_VERSION#v1.}
kube_minor=${kube_minor%%.*}
kube_ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    kube_ld+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kube_minor"
    kube_ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
helm_ld="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
helm_ld+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
etcd_ld="-s -w"
cm_ld="-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$CERT_MANAGER_VERSION"
build_flags=(-trimpath -buildvcs=false -mod=readonly)

hash_of() { sha256sum | cut -c1-10; }
root=${MOCO_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/moco-rs/kube}
if [[ $target == kube ]]; then
    recipe=$(
        cd "$here"
        {
            cat k8s-replaces.py k8s/*/main.go etcd/*/main.go
            echo "$kube_ld|$helm_ld|$etcd_ld|${build_flags[*]}"
        } | hash_of
    )
    key="k8s-${KUBE_VERSION}_etcd-${ETCD_VERSION}_helm-${HELM_VERSION}_${go_version}_${recipe}"
    binaries=(kube-apiserver kube-controller-manager kubectl etcd etcdctl helm)
else
    recipe=$(
        cd "$here"
        {
            cat cert-manager-module.py cert-manager/*/*.go
            echo "$cm_ld|${build_flags[*]}"
        } | hash_of
    )
    key="cert-manager-${CERT_MANAGER_VERSION}_${go_version}_${recipe}"
    binaries=(cert-manager-controller cert-manager-cainjector cert-manager-webhook)
fi
dir="$root/$key"
bin="$dir/bin"
cm_chart="$dir/charts/cert-manager"
# What the target prints: the bin directory, or cert-manager's directory (bin/ and charts/).
result=$bin
[[ $target == kube ]] || result=$dir

all_built() {
    local b
    for b in "${binaries[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
    [[ $target == kube || -f "$cm_chart/Chart.yaml" ]]
}

if all_built; then
    echo "$result"
    exit 0
fi

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9 # another build of the same key: wait for it, then use what it built
if all_built; then
    echo "$result"
    exit 0
fi

mkdir -p "$bin" "$dir/src"
log "building into $dir (Go $go_version; niceness $NICE)"

# The Go commands run at a lower priority than the rest of the machine's work.
renice -n "$NICE" -p $$ >/dev/null || log "could not lower the priority (renice); going on"

# step BINARY WHAT COMMAND...: run COMMAND (a function or program) timed: wall, and the user
# and system CPU time of it and its children; on failure name the binary and the step.
step() {
    local binary=$1 what=$2
    shift 2
    log "$binary: $what"
    local rc=0 TIMEFORMAT="$me: $binary: $what: %R s wall, %U s user, %S s sys"
    time "$@" >&2 || rc=$?
    ((rc == 0)) || die "$binary: $what failed (exit $rc); the go command's output is above"
}

# wrapper NAME: a fresh module directory src/NAME holding our main packages from $here/NAME.
wrapper() {
    local src="$dir/src/$1"
    rm -rf "$src"
    mkdir -p "$src"
    if [[ -d "$here/$1" ]]; then cp -R "$here/$1/." "$src/"; fi
    echo "$src"
}

# go_line MODULE@VERSION: the go line of that module's go.mod (a wrapper takes it, so that
# the programs run with the language defaults their own module chose).
go_line() {
    local json
    json=$(go mod download -json "$1") || {
        echo "$json" | python3 -c 'import json, sys; print(json.load(sys.stdin).get("Error", ""))' >&2
        return 1
    }
    go mod edit -json "$(echo "$json" | python3 -c 'import json, sys; print(json.load(sys.stdin)["GoMod"])')" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["Go"])'
}

# new_module SRC MODULE GO_LINE REQUIREMENT...: write SRC/go.mod.
new_module() {
    local src=$1 module=$2 go=$3 r
    shift 3
    printf 'module %s\n\ngo %s\n' "$module" "$go" >"$src/go.mod"
    for r in "$@"; do (cd "$src" && go mod edit -require="$r") || return 1; done
}

k8s_module() {
    local src=$1 replaces staging=v0.${KUBE_VERSION#v1.}
    replaces=$(python3 "$here/k8s-replaces.py" "$KUBE_VERSION") || return 1
    printf 'module moco-rs.local/kube/k8s\n\n%s\n' "$replaces" >"$src/go.mod"
    (cd "$src" && go mod edit -require=k8s.io/kubernetes@"$KUBE_VERSION" \
        -require=k8s.io/kubectl@"$staging" -require=k8s.io/component-base@"$staging")
}

# download SRC PACKAGE...: resolve and download what the packages import (this platform,
# CGO off) and record go.sum; the builds after it change nothing (-mod=readonly).
download() {
    local src=$1
    shift
    (cd "$src" && go list -mod=mod -deps "$@" >/dev/null)
}

go_build() {
    local src=$1
    shift
    (cd "$src" && go build "$@")
}

# build BINARY MODULE_DIR PACKAGE LDFLAGS: build, check it starts, then move it into bin/.
build() {
    local binary=$1 src=$2 pkg=$3 ld=$4
    if [[ -x "$bin/$binary" ]]; then
        log "$binary: already built"
        return
    fi
    step "$binary" "go build $pkg" go_build "$src" "${build_flags[@]}" -ldflags="$ld" -o "$bin/.$binary.new" "$pkg"
    local version_args=(--version) out
    case $binary in
    kubectl) version_args=(version --client) ;;
    etcdctl | helm) version_args=(version) ;;
    esac
    out=$("$bin/.$binary.new" "${version_args[@]}" 2>&1) ||
        die "$binary: built, but \`$binary ${version_args[*]}\` failed: $out"
    log "$binary: $(echo "$out" | head -1) ($(du -h "$bin/.$binary.new" | cut -f1))"
    mv -f "$bin/.$binary.new" "$bin/$binary"
}

# --- kubernetes: kube-apiserver, kube-controller-manager, kubectl
if [[ $target == kube ]] && ! [[ -x "$bin/kube-apiserver" && -x "$bin/kube-controller-manager" && -x "$bin/kubectl" ]]; then
    src=$(wrapper k8s)
    step k8s "go.mod with replaces from k8s.io/kubernetes@$KUBE_VERSION" k8s_module "$src"
    step k8s "download modules" download "$src" ./...
    build kube-apiserver "$src" ./kube-apiserver "$kube_ld"
    build kube-controller-manager "$src" ./kube-controller-manager "$kube_ld"
    build kubectl "$src" ./kubectl "$kube_ld"
fi

# --- etcd, etcdctl: one release of one repository, so one module
if [[ $target == kube ]] && ! [[ -x "$bin/etcd" && -x "$bin/etcdctl" ]]; then
    src=$(wrapper etcd)
    etcd_go=$(go_line go.etcd.io/etcd/server/v3@"$ETCD_VERSION") ||
        die "etcd: go mod download go.etcd.io/etcd/server/v3@$ETCD_VERSION failed"
    step etcd "go.mod" new_module "$src" moco-rs.local/kube/etcd "$etcd_go" \
        go.etcd.io/etcd/server/v3@"$ETCD_VERSION" go.etcd.io/etcd/etcdctl/v3@"$ETCD_VERSION"
    step etcd "download modules" download "$src" ./...
    build etcd "$src" ./etcd "$etcd_ld"
    build etcdctl "$src" ./etcdctl "$etcd_ld"
fi

# --- helm: helm v3's command is a main package with nothing to import, so it is built as is
if [[ $target == kube ]] && ! [[ -x "$bin/helm" ]]; then
    src=$(wrapper helm)
    helm_go=$(go_line helm.sh/helm/v3@"$HELM_VERSION") ||
        die "helm: go mod download helm.sh/helm/v3@$HELM_VERSION failed"
    step helm "go.mod" new_module "$src" moco-rs.local/kube/helm "$helm_go" helm.sh/helm/v3@"$HELM_VERSION"
    step helm "download modules" download "$src" helm.sh/helm/v3/cmd/helm
    build helm "$src" helm.sh/helm/v3/cmd/helm "$helm_ld"
fi

# --- cert-manager: controller, cainjector, webhook (our main packages, its code) and its chart
if [[ $target == cert-manager ]]; then
    src=$(wrapper cert-manager)
    step cert-manager "go.mod, the module copy and the chart from $CERT_MANAGER_VERSION" \
        python3 "$here/cert-manager-module.py" "$CERT_MANAGER_VERSION" "$src" "$cm_chart"
    step cert-manager "download modules" download "$src" ./...
    for c in controller cainjector webhook; do
        build "cert-manager-$c" "$src" "./$c" "$cm_ld"
    done
fi

all_built || die "not every binary is in $bin after the build: ${binaries[*]}"
log "done: $(du -sh "$bin" | cut -f1) in $bin"
echo "$result"
