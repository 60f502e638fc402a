#!/usr/bin/env bash
# Runs rayscale's integration suite on a kind cluster (needs Docker and kind on PATH).
#
#   e2e/kind/run-tests.sh            create the cluster if needed, add fake nodes, run the tests
#   e2e/kind/run-tests.sh --delete   delete the kind cluster afterwards
#   other arguments go to pytest, e.g. -k smoke
#
# The fake CPU/GPU/TPU node pools of hack/localk8s/nodes.yaml are added as kwok nodes next to kind's
# real node. kwok runs out of cluster (the binary built by hack/localk8s/build.sh), so no
# extra image is pulled; it manages only nodes annotated kwok.x-k8s.io/node=fake.
#
# The tests get the cluster from RAYSCALE_TARGET_KUBECONFIG (hack/localk8s/target.py), never from
# $KUBECONFIG: kind writes its kubeconfig to e2e/.kind/kubeconfig only, and every command here names
# that file. The first run claims the new cluster (ConfigMap default/rayscale-test-target).
set -euo pipefail
delete=false
args=()
for a in "$@"; do if [[ "$a" == --delete ]]; then delete=true; else args+=("$a"); fi; done
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
name=rayscale
state="$repo/e2e/.kind"
mkdir -p "$state"
kubeconfig="$state/kubeconfig"
export RAYSCALE_TARGET_KUBECONFIG="$kubeconfig"
unset RAYSCALE_TARGET_CONTEXT  # the file has kind's context only

command -v kind >/dev/null || { echo "kind is not installed (go install sigs.k8s.io/kind@v0.32.0)" >&2; exit 1; }
docker info >/dev/null 2>&1 || { echo "no Docker engine: use the local control plane (make test)" >&2; exit 1; }

if ! kind get clusters | grep -qx "$name"; then
  kind create cluster --config e2e/kind/kind-config.yaml --kubeconfig "$kubeconfig" --wait 120s
fi
bindir="$(hack/localk8s/build.sh)"

"$bindir/kwok" --kubeconfig "$kubeconfig" \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --cidr=10.244.128.0/17 --node-ip=10.240.0.1 --node-lease-duration-seconds=40 \
  --server-address=127.0.0.1:0 $(printf -- '--config=%s ' "$bindir"/stages/*.yaml) \
  >"$state/kwok.log" 2>&1 &
kwok_pid=$!
trap 'kill "$kwok_pid" 2>/dev/null || true' EXIT

make install >/dev/null
.venv/bin/python -m hack.localk8s nodes | "$bindir/kubectl" --kubeconfig "$kubeconfig" apply -f -
"$bindir/kubectl" --kubeconfig "$kubeconfig" wait --for=condition=Ready node -l rayscale.io/node-pool --timeout=120s

status=0
.venv/bin/python -m pytest tests/integration -m integration "${args[@]}" || status=$?
if $delete; then kind delete cluster --name "$name"; fi
exit $status
