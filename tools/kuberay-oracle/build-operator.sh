#!/usr/bin/env bash
# Builds KubeRay's operator (the ray-operator module's main package, unchanged) at the
# version pinned in versions.env, from the same go.mod as the oracle (it is a `tool` of
# that module), into a cache outside the checkout:
#
#   ${RAYSCALE_CACHE:-~/.cache/rayscale}/kuberay-operator-<KubeRay version>-<hash>/
#     kuberay-operator          the binary (flags: --watch-namespace, --metrics-addr,
#                               --health-probe-bind-address, --enable-leader-election, ...;
#                               the kubeconfig from $KUBECONFIG)
#     crds/                     KubeRay's CRDs of that version (RayCluster, RayJob,
#                               RayService, RayCronJob), from the module cache
#
# <hash> covers go.mod, go.sum, versions.env, this script and the Go version. Only the
# migration tests need it (make kuberay-operator; about 2 minutes on 2 cores when the
# module and build caches are cold, seconds after the oracle was built). Prints the
# directory on stdout (progress goes to stderr).
set -euo pipefail
source "$(dirname "$0")/common.sh"

key="$( (cat go.mod go.sum versions.env common.sh build-operator.sh; go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-12)"
bindir="${cache_root}/kuberay-operator-${KUBERAY_VERSION}-${key}"

complete() { [[ -x "${bindir}/kuberay-operator" && -f "${bindir}/crds/ray.io_rayclusters.yaml" ]]; }
if complete; then
  echo "$bindir"
  exit 0
fi

mkdir -p "$cache_root"
# One build at a time per cache root (parallel test sessions, make targets).
exec 9>"${cache_root}/.kuberay-operator.lock"
flock 9
if complete; then echo "$bindir"; exit 0; fi

tmp="${bindir}.tmp.$$"
rm -rf "$tmp"; mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

start=$SECONDS
echo "kuberay-operator: downloading modules (first run only) ..." >&2
go mod download
echo "kuberay-operator: building ${module}@${KUBERAY_VERSION} ..." >&2
go build -trimpath -ldflags "-s -w" -o "${tmp}/kuberay-operator" "$module"
echo "kuberay-operator: built in $((SECONDS - start))s" >&2
module_dir="$(go list -m -json "$module" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
mkdir "${tmp}/crds"
cp "${module_dir}"/config/crd/bases/*.yaml "${tmp}/crds/"

rm -rf "$bindir"
mv "$tmp" "$bindir"
trap - EXIT
echo "$bindir"
