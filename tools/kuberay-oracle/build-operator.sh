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

key="$( (cat go.mod go.sum versions.env common.sh ../../hack/gobuild.sh build-operator.sh; go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-12)"
bindir="${cache_root}/kuberay-operator-${KUBERAY_VERSION}-${key}"

complete() { [[ -x "${bindir}/kuberay-operator" && -f "${bindir}/crds/ray.io_rayclusters.yaml" ]]; }
build_begin .kuberay-operator.lock

start=$SECONDS
echo "kuberay-operator: downloading modules (first run only) ..." >&2
go mod download
echo "kuberay-operator: building ${module}@${KUBERAY_VERSION} ..." >&2
"${go_build[@]}" -o "${tmp}/kuberay-operator" "$module"
echo "kuberay-operator: built in $((SECONDS - start))s" >&2
dir="$(module_dir "$module")"
mkdir "${tmp}/crds"
cp "${dir}"/config/crd/bases/*.yaml "${tmp}/crds/"

build_done
