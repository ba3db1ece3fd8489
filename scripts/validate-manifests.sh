#!/usr/bin/env bash
# Offline checks of every manifest moco-rs ships: the kustomize install (deploy/), the Helm
# chart (charts/moco), the examples (docs/examples) and the Dockerfile. No cluster is needed.
#
# * kubectl kustomize deploy/ must render;
# * the chart must render (helm template, or scripts/manifests/render_chart.py without helm),
#   with default values and with every optional value set; its crds/ must equal deploy/crds/,
#   and it must install the same objects as deploy/ (Helm labels and image aside);
# * every built-in object (the manifests, and what `moco render` makes of each example
#   cluster): kubernetes-validate --strict -k 1.33.0;
# * every MySQLCluster/BackupPolicy: JSON Schema of the generated CRD (strict, nullable-aware);
#   cert-manager objects: scripts/manifests/cert-manager.json;
# * the Dockerfile: multi-stage, distroless/static final stage, non-root user.
# Last line: "manifests: N passed, M failed"; exit status 1 when M > 0.
set -uo pipefail
cd "$(dirname "$0")/.."

K8S_VERSION=1.33.0
KUBECTL=${KUBECTL:-/usr/bin/kubectl}
[ -x "$KUBECTL" ] || KUBECTL=$(command -v kubectl || echo kubectl)

# The validators and the Python the checks run with, in a virtualenv under the cache directory:
# check_docs.py needs jsonschema and PyYAML, which kubernetes-validate brings, and a machine's
# own python3 may have neither (Debian's has not).
venv="${XDG_CACHE_HOME:-$HOME/.cache}/moco-rs/manifest-validators"
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
  echo "installing kubernetes-validate into $venv ..." >&2
  rm -rf "$venv"
  python3 -m venv "$venv" &&
    "$venv/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate >&2 ||
    { echo "validate-manifests: cannot install kubernetes-validate from PyPI" >&2; exit 1; }
fi
export PATH="$venv/bin:$PATH"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }

# 1. kustomize
if "$KUBECTL" kustomize deploy/ >"$work/kustomize.yaml" 2>"$work/kustomize.err"; then
  ok "kubectl kustomize deploy/"
else
  fail "kubectl kustomize deploy/: $(cat "$work/kustomize.err")"
fi

# 2. Helm chart, default values and all optional values set
render_chart() { # OUT [--set k=v ...]
  local out=$1
  shift
  if command -v helm >/dev/null 2>&1; then
    helm template moco charts/moco --namespace moco-system --include-crds "$@" >"$out" 2>"$out.err"
  else
    python3 scripts/manifests/render_chart.py charts/moco --namespace moco-system "$@" >"$out" 2>"$out.err"
  fi
}
renderer=$(command -v helm >/dev/null 2>&1 && echo "helm template" || echo "render_chart.py (helm not installed)")
if render_chart "$work/chart.yaml"; then
  ok "chart renders with default values ($renderer)"
else
  fail "chart renders with default values ($renderer): $(cat "$work/chart.yaml.err")"
fi
if render_chart "$work/chart-values.yaml" --set 'nodeSelector.disktype=ssd' \
  --set 'tolerations[0].key=dedicated' --set 'tolerations[0].operator=Exists' \
  --set 'extraArgs[0]=--check-interval=30s' --set preventDeletePolicy.enabled=false \
  --set image.tag=test --set replicaCount=3; then
  if grep -q 'disktype: ssd' "$work/chart-values.yaml" && grep -q 'check-interval=30s' "$work/chart-values.yaml" &&
    grep -q 'moco:test' "$work/chart-values.yaml" && ! grep -q 'kind: ValidatingAdmissionPolicy$' "$work/chart-values.yaml"; then
    ok "chart renders with optional values set"
  else
    fail "chart with optional values: values not applied"
  fi
else
  fail "chart renders with optional values set: $(cat "$work/chart-values.yaml.err")"
fi
for crd in deploy/crds/*.yaml; do
  if cmp -s "$crd" "charts/moco/crds/$(basename "$crd")"; then
    ok "charts/moco/crds/$(basename "$crd") equals $crd"
  else
    fail "charts/moco/crds/$(basename "$crd") differs from $crd (copy it)"
  fi
done

# 2b. deploy/ and the chart install the same objects
if [ -s "$work/kustomize.yaml" ] && [ -s "$work/chart.yaml" ]; then
  python3 scripts/manifests/compare_renders.py "$work/kustomize.yaml" "$work/chart.yaml" >"$work/compare.out" 2>&1
  while IFS= read -r line; do
    case "$line" in
    "ok   "*) ok "${line#ok   }" ;;
    "FAIL "*) fail "${line#FAIL }" ;;
    *) [ -n "$line" ] && fail "compare_renders.py: $line" ;;
    esac
  done <"$work/compare.out"
fi

# 3. every object
inputs=()
[ -s "$work/kustomize.yaml" ] && inputs+=("kustomize=$work/kustomize.yaml")
[ -s "$work/chart.yaml" ] && inputs+=("chart=$work/chart.yaml")
[ -s "$work/chart-values.yaml" ] && inputs+=("chart(values)=$work/chart-values.yaml")
for f in docs/examples/*.yaml; do inputs+=("$f=$f"); done
# 3a. what the operator creates for each example: `moco render` output
MOCO_BIN=${MOCO_BIN:-target/debug/moco}
if [ ! -x "$MOCO_BIN" ]; then
  cargo build --quiet -p moco-bin >&2 || fail "cargo build -p moco-bin"
fi
for f in docs/examples/*.yaml; do
  grep -q '^kind: MySQLCluster' "$f" || continue
  out="$work/render-$(basename "$f")"
  if "$MOCO_BIN" render "$f" >"$out" 2>"$out.err"; then
    inputs+=("moco render $f=$out")
  else
    fail "moco render $f: $(cat "$out" "$out.err")"
  fi
done
python3 scripts/manifests/check_docs.py --k8s-version "$K8S_VERSION" \
  --crds deploy/crds/moco.cybozu.com_mysqlclusters.yaml \
  --crds deploy/crds/moco.cybozu.com_backuppolicies.yaml \
  --crds deploy/crds/moco-rs.io_mysqlusers.yaml \
  --crds deploy/crds/moco-rs.io_mysqldatabases.yaml \
  "${inputs[@]}" >"$work/docs.out" 2>&1
while IFS= read -r line; do
  case "$line" in
  "ok   "*) ok "${line#ok   }" ;;
  "FAIL "*) fail "${line#FAIL }" ;;
  *) [ -n "$line" ] && fail "check_docs.py: $line" ;;
  esac
done <"$work/docs.out"

# 4. Dockerfile
if [ -f Dockerfile ]; then
  stages=$(grep -ciE '^FROM ' Dockerfile)
  final=$(grep -iE '^FROM ' Dockerfile | tail -1)
  user=$(grep -iE '^USER ' Dockerfile | tail -1 | awk '{print $2}')
  if [ "$stages" -ge 2 ] && echo "$final" | grep -q 'distroless/static' &&
    [ -n "$user" ] && [ "${user%%:*}" != "root" ] && [ "${user%%:*}" != "0" ]; then
    ok "Dockerfile: $stages stages, final '$final', USER $user"
  else
    fail "Dockerfile: needs >= 2 stages, a distroless/static final stage and a non-root USER"
  fi
else
  fail "Dockerfile missing"
fi

echo "manifests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
